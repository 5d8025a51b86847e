"""``arena ratings recompute --check`` is read-only and finds 0 differences after any run of the server.

Real ``arena serve`` subprocesses on a real SQLite file: a ladder run ended by
SIGKILL (a -wal file and an unfitted pool are left behind), then an idle
``--no-ladder`` server holding the file (its background refitter brings the
ratings up to date), then a clean SIGTERM. After each, ``--check`` runs as a
subprocess and the database file and its -wal must be byte-for-byte, size and
mtime unchanged.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ladder.test_crash import ROOT, close, query, serve

FINISHED_RATED = "SELECT COUNT(*) FROM matches WHERE status = 'finished' AND rated = 1"


def fingerprint(db: Path) -> dict[str, tuple[int, int, str] | None]:
    out: dict[str, tuple[int, int, str] | None] = {}
    for suffix in ("", "-wal"):
        path = Path(str(db) + suffix)
        if path.exists():
            st = path.stat()
            out[suffix] = (st.st_mtime_ns, st.st_size, hashlib.sha256(path.read_bytes()).hexdigest())
        else:
            out[suffix] = None
    return out


def check(db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "arena_server.cli", "ratings", "recompute", "--db", str(db), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def wait_until(predicate: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def dirty(db: Path) -> int:
    return query(db, "SELECT COUNT(*) FROM rating_pools WHERE dirty = 1")


@pytest.mark.timeout(180)
def test_check_writes_nothing_and_agrees_after_kill_idle_server_and_clean_stop(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    ladder = ("--ladder-game", "rps:rounds=50", "--ladder-bots", "rock,rotate,beat-last,random")
    server = serve(db, *ladder, "--ladder-interval", "0", "--concurrency", "2")
    try:
        wait_until(lambda: query(db, FINISHED_RATED) >= 30, 60)
        os.kill(server.pid, signal.SIGKILL)  # results stored since the last refit stay unfitted
        server.wait(10)
    finally:
        close(server)
    assert Path(str(db) + "-wal").exists()

    # 1. After a SIGKILL, no server: the WAL is read but neither it nor the file changes.
    before = fingerprint(db)
    result = check(db)
    assert fingerprint(db) == before
    assert result.returncode == 0, result.stderr
    assert "the stored ratings equal the recomputed ones (within 0.01 Elo; counts exact)" in result.stdout

    # 2. An idle server holds the file; its background refitter fits the pool within a few seconds.
    server = serve(db, "--no-ladder")
    try:
        wait_until(lambda: dirty(db) == 0, 30)
        time.sleep(0.5)
        before = fingerprint(db)
        result = check(db)
        assert fingerprint(db) == before, "recompute --check wrote to the database of a running server"
        assert result.returncode == 0, result.stderr
        assert "has results newer than its last fit" not in result.stdout
        assert "the stored ratings equal the recomputed ones" in result.stdout
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
    finally:
        close(server)

    # 3. After a clean stop: no -wal exists, and --check must not even create one.
    assert not Path(str(db) + "-wal").exists()
    before = fingerprint(db)
    result = check(db)
    assert fingerprint(db) == before and not Path(str(db) + "-wal").exists()
    assert result.returncode == 0, result.stderr
    assert f"recomputed {query(db, FINISHED_RATED)} rated matches" in result.stdout


def test_check_reports_a_tampered_rating_and_a_missing_file(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    server = serve(db, "--ladder-game", "rps:rounds=30", "--ladder-bots", "rock,random", "--ladder-interval", "0")
    try:
        wait_until(lambda: query(db, FINISHED_RATED) >= 5, 60)
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
    finally:
        close(server)
    assert dirty(db) == 0  # Ladder.stop refitted before the server exited
    assert check(db).returncode == 0
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE ratings SET rating = rating + 0.02 WHERE bot_name = 'rock'")
    conn.close()
    result = check(db)
    assert result.returncode == 1
    assert "1 difference(s)" in result.stderr and "'rock'" in result.stderr
    missing = check(tmp_path / "nope.db")
    assert missing.returncode != 0 and "no database file" in missing.stderr
    assert "Traceback" not in missing.stderr
