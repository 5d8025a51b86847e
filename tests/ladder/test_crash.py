"""SIGKILL the real server in the middle of a busy ladder: every finished match is rated exactly once."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


CRASH_LADDER = (
    "--ladder-game",
    "rps:rounds=300",
    "--ladder-game",
    "rps:signs=5,rounds=200",
    "--ladder-bots",
    "rock,rotate,beat-last,random,markov-1",
    "--ladder-interval",
    "0",
    "--concurrency",
    "4",
    "--per-bot",
    "2",
)
"""The ladder the crash tests run: fast RPS matches, several at once."""


def serve(db: Path, *extra: str) -> subprocess.Popen[str]:
    """Start ``arena serve`` on a free port with ``db`` and ``extra`` options; return once it serves."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "arena_server.cli",
            "serve",
            "--no-http",
            "--host",
            "127.0.0.1",
            "--port",
            str(free_port()),
            "--db",
            str(db),
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines = []
    for _ in range(6):
        lines.append(proc.stdout.readline())
        if "serving on" in lines[-1]:
            return proc
    raise AssertionError(f"server did not start: {lines} {close(proc)}")


def close(proc: subprocess.Popen[str]) -> str:
    """Reap the process and close its pipes; return what it wrote on stderr."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    err = proc.stderr.read() if proc.stderr else ""
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    return err


def query(db: Path, sql: str) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def wait_for(db: Path, sql: str, at_least: int, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if query(db, sql) >= at_least:
                return
        except sqlite3.OperationalError:
            pass  # the schema is not there yet
        time.sleep(0.05)
    raise AssertionError(f"{sql} stayed below {at_least}")


FINISHED_RATED = "SELECT COUNT(*) FROM matches WHERE rated = 1 AND status = 'finished'"
RATED_ROWS = "SELECT COUNT(*) FROM rated_matches"
RUNNING = "SELECT COUNT(*) FROM matches WHERE status = 'running'"


def recompute_clean(db: Path) -> str:
    """``arena ratings recompute --check``: the stored ratings equal a recomputation from the records (its output)."""
    check = subprocess.run(
        [sys.executable, "-m", "arena_server.cli", "ratings", "recompute", "--db", str(db), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "the stored ratings equal the recomputed ones" in check.stdout
    return check.stdout


def check_rated_exactly_once(db: Path) -> int:
    finished = query(db, FINISHED_RATED)
    assert query(db, RATED_ROWS) == finished
    assert query(db, "SELECT COUNT(DISTINCT match_id) FROM rated_matches") == finished
    assert (
        query(
            db,
            "SELECT COUNT(*) FROM rated_matches r JOIN matches m ON m.id = r.match_id "
            "WHERE m.status != 'finished' OR m.rated = 0",
        )
        == 0
    )
    assert query(db, "SELECT SUM(games) FROM ratings") == 2 * finished
    assert query(db, "SELECT SUM(games) FROM rating_pairs") == finished
    return finished


def workers_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (a multi-worker server's workers and its spawn helper)."""
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        children.append(int(entry))
            except OSError:
                continue
    return children


def gone_within(pids: list[int], timeout: float) -> bool:
    """Whether every process of ``pids`` has exited within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(os.path.exists(f"/proc/{pid}") and "Z" not in _state(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"


@pytest.mark.parametrize("workers", [(), ("--workers", "2")], ids=["one-process", "two-workers"])
def test_sigkill_mid_ladder_then_restart(tmp_path: Path, workers: tuple[str, ...]) -> None:
    """With ``--workers 2`` the SIGKILL hits the main process (the store writer and the ladder coordinator):
    the workers stop by themselves, and the restart finds their matches left running."""
    db = tmp_path / "arena.db"
    # The kill must land while a match is in flight. Matches last milliseconds and the ladder
    # sometimes has none running (about 4% of samples), so a kill that found every match already
    # finished proves nothing: start the server again on the same file and kill it again.
    for _attempt in range(5):
        server = serve(db, *CRASH_LADDER, *workers)
        try:
            wait_for(db, FINISHED_RATED, 40)
            wait_for(db, RUNNING, 1)
            children = workers_of(server.pid)
            os.kill(server.pid, signal.SIGKILL)
            server.wait(10)
            assert gone_within(children, 15), "a worker outlived its SIGKILLed main process"
        finally:
            close(server)
        if query(db, RUNNING) >= 1:  # left running by the crash
            break
        check_rated_exactly_once(db)
    else:
        raise AssertionError("five SIGKILLs in a row found no match in flight")
    before = check_rated_exactly_once(db)
    server = serve(db, *CRASH_LADDER, *workers)
    try:
        assert server.stdout is not None
        wait_for(db, FINISHED_RATED, before + 20)
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
    finally:
        err = close(server)
    assert "stopped" in err, err
    left = query(db, RUNNING)
    assert left == 0, f"{left} matches left running after a clean stop; the server said:\n{err}"
    assert (
        query(
            db,
            "SELECT COUNT(*) FROM matches WHERE status = 'aborted' "
            "AND reason = 'the server stopped before the match ended'",
        )
        >= 1
    )
    after = check_rated_exactly_once(db)
    assert after >= before + 20
    assert f"recomputed {after} rated matches in 2 pool(s)" in recompute_clean(db)
