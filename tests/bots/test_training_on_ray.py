"""``arena train dots-and-boxes --ray`` on a real Ray cluster (this machine's CPUs), through the real CLI.

The repetitions of a training run are independent (each has its own random
streams), so each is one Ray task. These tests prove that the numbers do not
depend on where they ran: the CSV (all but the wall-clock column) and the best
genome are the same with and without ``--ray``, also when a ``--ray`` run
resumes a checkpoint that a single-process run left in the middle of a
repetition. The first runs on the test run's shared Ray head (``RAY_ADDRESS``,
``tests/ray_support.py``); the second gives ``--ray local`` with
``RAY_ADDRESS`` set, and so starts a local cluster of its own.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from arena_bots.dots_and_boxes import evolution as ev
from tests.ladder.test_crash import ROOT, free_port
from tests.ray_support import RayHead, without_ray_address

pytest.importorskip("ray", reason="the ray extra is not installed (make installs it)")

CFG = ev.TrainConfig(evaluations=80, repetitions=4, test_every=3, test_games=6, seed=5)


class Ran(NamedTuple):
    """A finished ``arena train`` process: its exit status, its stderr and its process id."""

    returncode: int
    stderr: str
    pid: int


def train(cfg: ev.TrainConfig, out: Path, *extra: str, env: dict[str, str] | None = None) -> Ran:
    """``arena train dots-and-boxes`` for ``cfg`` into ``out``; ``env`` defaults to this one's without RAY_ADDRESS."""
    argv = shlex.split(ev.command_line(cfg))[1:]  # drop the leading "arena"
    proc = subprocess.Popen(
        [sys.executable, "-m", "arena_server.cli", *argv, "--out", str(out), "--no-plots", *extra],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=without_ray_address() if env is None else env,
    )
    _, stderr = proc.communicate(timeout=300)
    return Ran(proc.returncode, stderr, proc.pid)


def numbers(out: Path) -> tuple[list[dict[str, str]], object]:
    """The CSV rows without the wall-clock column, and the best genome's weights."""
    with open(out / "generations.csv") as fh:
        rows = [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(fh)]
    return rows, json.loads((out / "best-genome.json").read_text())["weights"]


def test_ray_training_gives_the_same_numbers_as_one_process(tmp_path: Path, ray_head: RayHead) -> None:
    alone = train(CFG, tmp_path / "alone")
    assert alone.returncode == 0, alone.stderr
    on_ray = train(CFG, tmp_path / "ray", "--ray", env=ray_head.environment())
    assert on_ray.returncode == 0, on_ray.stderr
    assert f"arena: on Ray ({ray_head.cpus} CPUs, the cluster at {ray_head.address} from RAY_ADDRESS)" in on_ray.stderr
    assert on_ray.pid in ray_head.drivers()
    assert "repetitions" not in on_ray.stderr  # the progress bar is drawn on a terminal only, never into a pipe
    rows, weights = numbers(tmp_path / "ray")
    assert len(rows) == 4 * 8
    assert [int(r["repetition"]) for r in rows] == sorted(int(r["repetition"]) for r in rows)
    assert (rows, weights) == numbers(tmp_path / "alone")


class _Stop(Exception):
    pass


class _StopAfter(ev.Progress):
    def __init__(self, total: int, after: int) -> None:
        super().__init__(total, io.StringIO())
        self.after = after

    def update(self, done: int, note: str = "") -> None:
        if done == self.after:
            raise _Stop


def test_a_ray_run_resumes_a_checkpoint_left_in_the_middle_of_a_repetition(tmp_path: Path) -> None:
    gens = CFG.generations() + 1
    with pytest.raises(_Stop):  # killed in repetition 2, generation 3
        ev.train(CFG, tmp_path / "resumed", progress=_StopAfter(CFG.repetitions * gens, gens + 3))
    # `--ray local`: a local cluster of its own although RAY_ADDRESS names another (where nothing answers)
    env = {**without_ray_address(), "RAY_ADDRESS": f"127.0.0.1:{free_port()}"}
    resumed = train(CFG, tmp_path / "resumed", "--ray", "local", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert f"arena: on Ray ({len(os.sched_getaffinity(0))} CPUs, a local cluster)" in resumed.stderr
    assert "resuming from" in resumed.stderr and "repetition 2, generation 3" in resumed.stderr
    whole = ev.train(CFG, tmp_path / "whole")
    rows, weights = numbers(tmp_path / "resumed")
    assert rows == [{k: str(v) for k, v in row.items() if k != "seconds"} for row in whole.rows]
    assert weights == [round(float(w), 6) for w in whole.best_genome({}).weights]


def _without_timings(text: str) -> list[str]:
    """The experiment's markdown without the lines that report wall clock or throughput."""
    timings = ("games/s", " s (", "Total time")
    return [line for line in text.splitlines() if not any(t in line for t in timings)]


@pytest.mark.slow
def test_the_experiment_on_ray_writes_the_same_tables(tmp_path: Path) -> None:
    """``arena experiment dots-and-boxes-thesis --quick --ray``: every table equals the single-process run's."""
    outs = {}
    for name, extra in (("alone", ()), ("ray", ("--ray",))):
        out = tmp_path / f"{name}.md"
        command = [sys.executable, "-m", "arena_server.cli", "experiment", "dots-and-boxes-thesis", "--quick"]
        done = subprocess.run(
            [*command, "--output", str(out), *extra],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        outs[name] = out.read_text()
    assert "repetitions in parallel on Ray" in outs["ray"]
    assert "## 2. Parameter study" in outs["ray"]
    assert _without_timings(outs["ray"]) == _without_timings(outs["alone"])
