"""The rated ladder on ``arena serve --workers 2``: a real server, the real SQLite file, real signals.

Each worker runs a ladder over the bots it can reach (every hosted bot, and the
remote bots connected to it) with its share of ``--concurrency``; the worker's
rated results go through the one store writer, which computes their rating
effects inside the transaction, and the main process refits. The test lets
both workers play rated matches, stops the server, and checks that every
finished match is rated exactly once and that ``arena ratings recompute
--check`` finds the stored ratings equal to a recomputation from the records.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.ladder.test_crash import (
    FINISHED_RATED,
    ROOT,
    RUNNING,
    check_rated_exactly_once,
    close,
    query,
    serve,
    wait_for,
)
from tests.server.test_workers import child_cpu

LADDER = (
    "--workers",
    "2",
    "--ladder-game",
    "rps:rounds=200",
    "--ladder-bots",
    "rotate,beat-last,rock,paper,markov-1",
    "--concurrency",
    "4",
    "--per-bot",
    "2",
    "--ladder-interval",
    "0",
)


def test_both_workers_play_rated_matches_and_the_ratings_recompute_clean(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    proc = serve(db, *LADDER)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]
        assert any("ladder running for" in line and "in every worker" in line for line in lines), lines
        before = child_cpu(proc)
        wait_for(db, FINISHED_RATED, 30, timeout=60)
        time.sleep(1.0)
        after = child_cpu(proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        err = close(proc)
    assert "stopped" in err and "failed" not in err, err
    worked = sorted(after[pid] - before.get(pid, 0.0) for pid in after)  # the workers (and the spawn helper)
    assert worked[-2] > 0.2, worked  # both workers refereed (not one doing it all)
    assert query(db, RUNNING) == 0
    finished = check_rated_exactly_once(db)
    assert finished >= 30
    check = subprocess.run(
        [sys.executable, "-m", "arena_server.cli", "ratings", "recompute", "--db", str(db), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "the stored ratings equal the recomputed ones" in check.stdout
