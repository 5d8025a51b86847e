"""The ladder rates the dots and boxes bots after a few seconds of a real ``arena serve``."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena_client import Termination

DAB_BOTS = ("greedy", "neuro", "neuro-features", "chains", "solver", "boxes-mcts")


@pytest.mark.slow
def test_arena_serve_ladder_rates_every_dots_and_boxes_bot(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    env = dict(os.environ, ARENA_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "arena_server.cli", "serve", "--no-http", "--host", "127.0.0.1", "--port", "0",
            "--db", str(db), "--ladder-game", "dots_and_boxes", "--ladder-bots", ",".join(DAB_BOTS),
            "--ladder-interval", "0", "--concurrency", "2", "--ladder-seed", "1",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert re.search(r"serving on 127\.0\.0\.1:\d+", banner), banner
        rated: dict[str, int] = {}
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            time.sleep(2)
            with sqlite3.connect(db) as conn:
                rows = conn.execute(
                    "SELECT bot_name, games FROM ratings WHERE pool LIKE 'dots_and_boxes%' AND games > 0"
                ).fetchall()
            rated = {name: games for name, games in rows}
            if all(rated.get(bot, 0) >= 2 for bot in DAB_BOTS):
                break
        assert all(rated.get(bot, 0) >= 2 for bot in DAB_BOTS), rated
        with sqlite3.connect(db) as conn:
            failed = conn.execute(
                "SELECT COUNT(*) FROM matches WHERE game = 'dots_and_boxes' AND status = 'finished' "
                "AND termination != ?",
                (int(Termination.NORMAL),),
            ).fetchone()
        assert failed == (0,), "a dots and boxes ladder match ended abnormally (timeout or crash)"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
