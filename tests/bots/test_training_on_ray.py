"""``arena train dots-and-boxes --ray`` on a real local Ray cluster (this machine's CPUs), through the real CLI.

The repetitions of a training run are independent (each has its own random
streams), so each is one Ray task. These tests prove that the numbers do not
depend on where they ran: the CSV (all but the wall-clock column) and the best
genome are the same with and without ``--ray``, also when a ``--ray`` run
resumes a checkpoint that a single-process run left in the middle of a
repetition.
"""

from __future__ import annotations

import csv
import io
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from arena_bots.dots_and_boxes import evolution as ev
from tests.ladder.test_crash import ROOT

pytest.importorskip("ray", reason="the ray extra is not installed (make installs it)")

CFG = ev.TrainConfig(evaluations=80, repetitions=4, test_every=3, test_games=6, seed=5)


def train(cfg: ev.TrainConfig, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(ev.command_line(cfg))[1:]  # drop the leading "arena"
    return subprocess.run(
        [sys.executable, "-m", "arena_server.cli", *argv, "--out", str(out), "--no-plots", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def numbers(out: Path) -> tuple[list[dict[str, str]], object]:
    """The CSV rows without the wall-clock column, and the best genome's weights."""
    with open(out / "generations.csv") as fh:
        rows = [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(fh)]
    return rows, json.loads((out / "best-genome.json").read_text())["weights"]


def test_ray_training_gives_the_same_numbers_as_one_process(tmp_path: Path) -> None:
    alone = train(CFG, tmp_path / "alone")
    assert alone.returncode == 0, alone.stderr
    on_ray = train(CFG, tmp_path / "ray", "--ray")
    assert on_ray.returncode == 0, on_ray.stderr
    assert "arena: on Ray (" in on_ray.stderr
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
    resumed = train(CFG, tmp_path / "resumed", "--ray")
    assert resumed.returncode == 0, resumed.stderr
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
