"""A server whose output nobody reads any more still stops when told, and its workers when it dies.

Whoever started ``arena serve`` may stop reading its output (a closed terminal,
a supervisor's pipe, a test that gave up). Before, the first line written after
that raised ``BrokenPipeError``: in the SIGTERM handler it kept the server
running, and in a worker that had lost its main process it left the worker
hanging on its database thread forever.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ladder.test_crash import ROOT, free_port
from tests.soak_support import alive, children


def start(db: Path, *extra: str) -> subprocess.Popen[str]:
    """``arena serve`` with piped output, read until it serves; then nobody reads its pipes any more."""
    options = ["--no-ladder", "--no-http", "--port", str(free_port()), "--db", str(db), *extra]
    proc = subprocess.Popen(
        [sys.executable, "-m", "arena_server.cli", "serve", *options],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    for _ in range(12):
        if "press Ctrl-C" in proc.stdout.readline():
            break
    else:
        proc.kill()
        raise AssertionError(f"server did not start: {proc.communicate()}")
    proc.stdout.close()
    proc.stderr.close()
    return proc


def gone_within(pids: list[int], seconds: float) -> list[int]:
    """The pids still running after ``seconds`` (each killed then, so a failed test leaves nothing behind)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    left = [p for p in pids if alive(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


@pytest.mark.parametrize("extra", [(), ("--workers", "2")], ids=["one-process", "two-workers"])
def test_sigterm_stops_a_server_whose_output_is_unread(tmp_path: Path, extra: tuple[str, ...]) -> None:
    proc = start(tmp_path / "arena.db", *extra)
    workers = children(proc.pid)
    proc.terminate()
    try:
        status = proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        gone_within(workers, 0)
        raise AssertionError("SIGTERM did not stop a server whose output nobody reads") from None
    assert status == 0
    assert gone_within(workers, 10) == []


def test_workers_stop_when_their_unread_main_process_is_killed(tmp_path: Path) -> None:
    proc = start(tmp_path / "arena.db", "--workers", "2")
    workers = [p for p in children(proc.pid) if "spawn_main" in Path(f"/proc/{p}/cmdline").read_text()]
    assert len(workers) == 2, workers
    proc.kill()
    proc.wait()
    assert gone_within(workers, 15) == [], "a worker kept running after its main process was killed"
