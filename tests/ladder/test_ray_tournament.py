"""``arena tournament --ray``: a real local Ray cluster (this machine's 2 CPUs), the real CLI, the real SQLite file.

The quick test plays a whole tournament on Ray and checks the store against
the schedule; the slow one kills the run (the driver and its Ray processes)
halfway and proves the second run plays only the missing matches.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ladder.test_crash import ROOT

pytest.importorskip("ray", reason="the ray extra is not installed (make installs it)")

BOTS = ["rotate", "beat-last", "rock", "random"]


def tournament(db: Path, out: Path, games: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "arena_server.cli",
            "tournament",
            "--game",
            "rps",
            "--bots",
            *BOTS,
            "--games-per-pair",
            str(games),
            "--db",
            str(db),
            "--output",
            str(out),
            "--ray",
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the driver and the local Ray cluster it starts: one group to kill
    )


def finished(db: Path) -> dict[int, int]:
    """slot -> match id of the finished tournament matches."""
    if not db.exists():
        return {}
    with sqlite3.connect(db) as conn:
        try:
            rows = conn.execute(
                "SELECT t.slot, t.match_id FROM tournament_matches t JOIN matches m ON m.id = t.match_id "
                "WHERE m.status = 'finished'"
            ).fetchall()
        except sqlite3.OperationalError:  # not created yet
            return {}
    return dict(rows)


def test_tournament_on_ray_stores_every_match(tmp_path: Path) -> None:
    db, out = tmp_path / "t.db", tmp_path / "t"
    proc = tournament(db, out, 2)
    stdout, stderr = proc.communicate(timeout=110)
    assert proc.returncode == 0, stderr
    assert f"on Ray ({len(os.sched_getaffinity(0))} CPUs)" in stderr  # a local cluster: the CPUs we may use
    assert "ETA" not in stderr  # the progress bar is drawn on a terminal only (issue 18); stderr is a pipe here
    result = json.loads(out.with_name("t.json").read_text())
    assert result["played"] == result["total"] == 12
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT status, move_count FROM matches").fetchall()
    assert len(rows) == 12 and {r[0] for r in rows} == {"finished"}
    assert sorted(finished(db)) == list(range(12))
    assert "beat-last" in stdout


@pytest.mark.slow
def test_killed_ray_tournament_resumes_without_replaying(tmp_path: Path) -> None:
    db, out = tmp_path / "t.db", tmp_path / "t"
    proc = tournament(db, out, 40, "--concurrency", "1")
    try:
        deadline = time.monotonic() + 100
        while len(finished(db)) < 20 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert proc.poll() is None, "the run ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    before = finished(db)
    assert 20 <= len(before) < 240
    second = tournament(db, out, 40)
    _, stderr = second.communicate(timeout=110)
    assert second.returncode == 0, stderr
    assert f": {len(before)} of 240 matches were played by an earlier run" in stderr
    after = finished(db)
    assert sorted(after) == list(range(240))
    assert all(after[slot] == match for slot, match in before.items())  # nothing stored was replayed
    with sqlite3.connect(db) as conn:
        played = conn.execute("SELECT COUNT(*) FROM matches WHERE status = 'finished'").fetchone()[0]
    assert played == 240
