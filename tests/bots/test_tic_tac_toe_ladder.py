"""The tic-tac-toe bots on the ladder: a real ``arena serve`` with the tic-tac-toe ladder rates them."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ladder.test_crash import close, free_port

ROOT = Path(__file__).resolve().parents[2]
QUICK_BOTS = ("lab-random", "lab-blocking", "lab-minimax-buggy", "alphabeta", "mcts")
ALL_BOTS = (
    "lab-random", "lab-win-if-can", "lab-blocking", "lab-minimax-buggy", "lab-alphabeta-buggy", "lab-pure-mc",
    "lab-uct", "minimax", "alphabeta", "alphabeta-d2", "pure-mc", "mcts", "mcts-threats",
)  # fmt: skip


def serve(db: Path, bots: tuple[str, ...], game: str) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "arena_server.cli",
        "serve",
        "--no-http",
        "--host",
        "127.0.0.1",
        "--port",
        str(free_port()),
    ]
    argv += ["--db", str(db), "--ladder-game", game, "--ladder-bots", ",".join(bots), "--ladder-interval", "0"]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for _ in range(3):
        if "serving on" in proc.stdout.readline():
            return proc
    raise AssertionError(f"server did not start: {close(proc)}")


def rated(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return dict(conn.execute("SELECT bot_name, SUM(games) FROM ratings GROUP BY bot_name").fetchall())
    except sqlite3.OperationalError:
        return {}  # the schema is not there yet
    finally:
        conn.close()


def failures(db: Path) -> list[tuple[str, str]]:
    """(bot, reason) of every finished match that did not end normally (termination 1)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute(
            "SELECT s.bot_name, m.reason FROM matches m JOIN match_seats s ON s.match_id = m.id "
            "WHERE m.status = 'finished' AND m.termination != 1 AND s.seat = m.offender"
        ).fetchall()
        return [(str(a), str(b)) for a, b in rows]
    finally:
        conn.close()


def run_ladder(tmp_path: Path, bots: tuple[str, ...], game: str, timeout: float) -> dict[str, int]:
    db = tmp_path / "arena.db"
    proc = serve(db, bots, game)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            games = rated(db)
            if all(games.get(b, 0) > 0 for b in bots):
                break
            assert proc.poll() is None, close(proc)
            time.sleep(0.2)
    finally:
        close(proc)
    assert failures(db) == []  # nobody timed out, crashed or played an illegal move
    return rated(db)


@pytest.mark.slow  # about 25 s: server start, numba compiles, every bot waiting for a match
@pytest.mark.timeout(600)
def test_tic_tac_toe_ladder_rates_the_new_bots(tmp_path: Path) -> None:
    games = run_ladder(tmp_path, QUICK_BOTS, "tic_tac_toe", 60)
    assert {b for b in QUICK_BOTS if games.get(b, 0) > 0} == set(QUICK_BOTS), games


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_tic_tac_toe_ladder_rates_every_tic_tac_toe_bot(tmp_path: Path) -> None:
    games = run_ladder(tmp_path, ALL_BOTS, "tic_tac_toe", 180)
    assert {b for b in ALL_BOTS if games.get(b, 0) > 0} == set(ALL_BOTS), games
