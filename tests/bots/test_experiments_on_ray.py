"""``arena experiment rpsls-thesis | tictactoe-lab | liars-dice-thesis --ray`` on a real local Ray cluster.

Each experiment hands out its seeds in a fixed order before it plays and
puts the results of its independent units back in that order, so a run on
Ray must write the same document as a run in one process (apart from wall
clock figures). One local Ray cluster (this machine's CPUs) serves the whole
module. The ``--ray ADDRESS`` tests start the real CLI against a closed port
and against a socket that listens but is not Ray: both must fail within
seconds with one line that names the address.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from arena_bots.experiments import liars_dice_thesis, rpsls_thesis, tictactoe_lab
from tests.conftest import in_thread
from tests.ladder.test_crash import ROOT
from tests.ray_support import without_ray_address

pytest.importorskip("ray", reason="the ray extra is not installed (make installs it)")

from arena_server.ladder.on_ray import RayPool


@pytest.fixture(scope="module")
def pool() -> Iterator[RayPool]:
    """One local Ray cluster for every test of this module (``local``: also where RAY_ADDRESS is set)."""
    ray_pool = RayPool("local")
    try:
        yield ray_pool
    finally:
        ray_pool.close()


def twice(main: Callable[..., int], argv: list[str], tmp_path: Path, pool: RayPool) -> tuple[str, str]:
    """The document of a run in this process and of a run on ``pool``."""
    alone, on_ray = tmp_path / "alone.md", tmp_path / "ray.md"
    assert in_thread(lambda: main([*argv, "--output", str(alone)])) == 0
    assert in_thread(lambda: main([*argv, "--output", str(on_ray)], pool=pool)) == 0
    return alone.read_text(), on_ray.read_text()


def without(pattern: str, text: str) -> list[str]:
    """The lines of ``text`` with every match of ``pattern`` (wall-clock figures) blanked."""
    return [re.sub(pattern, "T", line) for line in text.splitlines()]


@pytest.mark.slow
def test_rpsls_thesis_on_ray_writes_the_same_tables(tmp_path: Path, pool: RayPool) -> None:
    alone, on_ray = twice(rpsls_thesis.main, ["--quick", "--seed", "7"], tmp_path, pool)
    assert "Table 4.11" in on_ray and "Round robin, 5 signs" in on_ray
    assert without(r"in \d+ s\.", alone) == without(r"in \d+ s\.", on_ray)


@pytest.mark.slow
def test_tictactoe_lab_on_ray_writes_the_same_tables(tmp_path: Path, pool: RayPool) -> None:
    argv = ["--quick", "--seed", "7", "--strength-games", "2", "--move-time", "0.02"]
    alone, on_ray = twice(tictactoe_lab.main, argv, tmp_path, pool)
    # parts 1-3 are seeded; part 4's MCTS has a time budget per move, so only its shape is checked
    cut = "## 4. MCTS"
    clock = r"\d+\.\d+ s|\| \d+ s \||Total run time \d+ s"
    assert without(clock, alone.split(cut)[0]) == without(clock, on_ray.split(cut)[0])
    assert on_ray.split(cut)[1].count("| mcts 0.02 s |") == 4


@pytest.mark.slow
def test_liars_dice_thesis_on_ray_writes_the_same_tables(tmp_path: Path, pool: RayPool) -> None:
    alone, on_ray = twice(liars_dice_thesis.main, ["--quick", "--seed", "7"], tmp_path, pool)
    assert "## Crosstable, 2 players" in on_ray and "## 3 players" in on_ray
    # wall-clock figures: the CFR+ time, the best-response walk's time, the solve-time column, the total
    clock = r"in \d+\.\d s here|took \d+\.\d+ s|^\| (\d+) \| \d+\.\d \||Wall time: \d+ s|!\[\]\([^)]*\)"
    assert without(clock, alone) == without(clock, on_ray)


def cli(*argv: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "arena_server.cli", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=without_ray_address(),  # the messages below are for an ADDRESS given without RAY_ADDRESS
    )
    return done, time.perf_counter() - start


@pytest.mark.parametrize("experiment", ["rpsls-thesis", "tictactoe-lab", "liars-dice-thesis"])
def test_ray_address_with_nothing_listening_fails_at_once(tmp_path: Path, experiment: str) -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done, seconds = cli(
        "experiment", experiment, "--quick", "--output", str(tmp_path / "x.md"), "--ray", f"127.0.0.1:{port}"
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"arena: cannot reach the Ray cluster at 127.0.0.1:{port} (Connection refused); check the address and that "
        "the cluster is running, or leave out ADDRESS for a local cluster"
    ], done.stderr
    assert seconds < 30
    assert not (tmp_path / "x.md").exists()


def test_ray_address_that_is_not_ray_fails_after_the_timeout(tmp_path: Path) -> None:
    with socket.socket() as s:  # accepts TCP connections (the kernel does) but never speaks gRPC
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        address = f"ray://127.0.0.1:{s.getsockname()[1]}"
        done, seconds = cli("experiment", "rpsls-thesis", "--quick", "--ray", address)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        f"arena: cannot reach the Ray cluster at {address} (no gRPC answer within 5 s); check the address and "
        "that the cluster is running, or leave out ADDRESS for a local cluster"
    ], done.stderr
    assert seconds < 60  # ray.init alone would retry for minutes


@pytest.mark.slow
def test_ray_address_of_a_running_cluster_is_joined(tmp_path: Path, pool: RayPool) -> None:
    """The CLI joins this module's cluster by its address (the check lets a real Ray head through)."""
    address = pool.ray.get_runtime_context().gcs_address
    out = tmp_path / "rr.md"
    argv = ["experiment", "rpsls-thesis", "--quick", "--only", "round-robin", "--output", str(out), "--ray", address]
    done, _ = cli(*argv)
    assert done.returncode == 0, done.stderr
    assert "arena: on Ray (" in done.stderr
    alone = tmp_path / "alone.md"
    assert in_thread(lambda: rpsls_thesis.main(["--quick", "--only", "round-robin", "--output", str(alone)])) == 0
    assert without(r"in \d+ s\.", alone.read_text()) == without(r"in \d+ s\.", out.read_text())
