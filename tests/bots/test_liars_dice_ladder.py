"""The new Liar's Dice bots on the real ladder: ``arena serve`` as a subprocess rates them within seconds."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

BOTS = ("sarsa", "sarsa-profiling", "q-learning", "statistician", "cfr", "random")


@pytest.mark.slow
def test_serve_rates_the_liars_dice_bots(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    state = tmp_path / "bot-state"
    env = {**os.environ, "ARENA_BOT_STATE_DIR": str(state)}
    argv = [
        sys.executable,
        "-m",
        "arena_server.cli",
        "serve",
        "--no-http",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--db",
        str(db),
        "--ladder-game",
        "liars_dice",
        "--ladder-bots",
        ",".join(BOTS),
        "--ladder-interval",
        "0",
        "--concurrency",
        "3",
        "--ladder-seed",
        "1",
    ]
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        rated: dict[str, int] = {}
        while time.monotonic() < deadline and len(rated) < len(BOTS):
            time.sleep(1.0)
            assert proc.poll() is None, log.read_text()
            if db.exists():
                try:
                    with sqlite3.connect(db) as conn:
                        rated = dict(conn.execute("SELECT bot_name, games FROM ratings WHERE games > 0").fetchall())
                except sqlite3.OperationalError:
                    continue
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert set(BOTS) <= set(rated), f"rated so far: {rated}"
    saved = {p.name for p in state.glob("*.json")}
    assert {"sarsa-p2d5f6.json", "sarsa-profiling-p2d5f6.json", "q-learning-p2d5f6.json"} <= saved
