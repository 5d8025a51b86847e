"""Soak: the ladder keeps every record straight while the server is killed and restarted.

A real ``arena serve`` runs the rated RPS ladder with the hosted bots and two
registered remote SDK bots (separate processes, waiting to be seated). The
server is stopped 20 times, alternately with SIGKILL (a crash) and SIGTERM, and
started again on the same port and database. Afterwards:

* no match is left ``running``, none is lost (every match a bot heard start is
  in the database; every ending a bot heard is the stored one) and none is
  half-written (a finished match has its returns, end time and every move);
* every finished rated match is rated exactly once and nothing else is rated;
* ``arena ratings recompute --check`` (read-only) finds 0 differences;
* each remote bot reconnected after every restart.

``make soak`` runs the full version (marked slow); a two-restart version runs
in the default suite.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from arena_client import Termination
from arena_server.store.database import decode_moves
from tests.soak_support import ScriptProcess, ServerProcess, write_sdk_bot

REMOTE_BOTS = ("soak-remote-a", "soak-remote-b")
LADDER_ARGS = (
    "--ladder-game",
    "rps:rounds=30",
    "--concurrency",
    "3",
    "--ladder-interval",
    "0",
    "--ladder-bots",
    ",".join(("random", "rock", "markov-2", "mupn-2", *REMOTE_BOTS)),
)
RECONNECT_LIMIT = 15.0
"""Seconds each remote bot may take to reconnect after the restarted server serves (its back-off restarts at 0.5 s)."""


def _arena(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "arena_server.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def _register(db: Path, name: str) -> str:
    out = _arena("bot", "register", name, "--games", "rps", "--db", str(db))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def run_soak(tmp_path: Path, restarts: int, play_seconds: float) -> dict[str, Any]:
    db = tmp_path / "arena.db"
    tokens = {name: _register(db, name) for name in REMOTE_BOTS}
    began = time.monotonic()
    with ServerProcess(db, args=LADDER_ARGS) as server:
        server.start()
        bots = [
            ScriptProcess(
                write_sdk_bot(tmp_path / f"{name}.py", server.address, name=name, token=tokens[name], give_up_after=120)
            )
            for name in REMOTE_BOTS
        ]
        reconnects: list[float] = []
        try:
            for bot in bots:
                assert bot.wait_events("connected", 1, 30), bot.err.text()
            for n in range(1, restarts + 1):
                time.sleep(play_seconds)  # let the ladder play
                if n % 2:
                    server.kill()  # a crash: no chance to clean up
                else:
                    assert server.stop(signal.SIGTERM) == 0, "\n".join(server.log[-20:])
                server.start()
                serving = time.monotonic()
                for bot in bots:
                    assert bot.wait_events("connected", n + 1, RECONNECT_LIMIT), (
                        f"restart {n}: a remote bot did not reconnect within {RECONNECT_LIMIT:g}s\n{bot.err.text()}"
                    )
                    reconnects.append(bot.events("connected")[n]["t"] - serving)
            time.sleep(play_seconds)
            assert server.stop(signal.SIGTERM) == 0, "\n".join(server.log[-20:])
            connections = [len(bot.events("connected")) for bot in bots]
            heard_start = {e["match_id"] for bot in bots for e in bot.events("started")}
            heard_end = [(e["match_id"], e["termination"]) for bot in bots for e in bot.events("ended")]
        finally:
            for bot in bots:
                bot.kill()
    figures = check_database(db, heard_start, heard_end)
    check = _arena("ratings", "recompute", "--check", "--db", str(db))
    assert check.returncode == 0, check.stdout + check.stderr
    assert connections == [restarts + 1] * len(REMOTE_BOTS), connections
    figures.update(
        restarts=restarts,
        connections_per_remote_bot=connections,
        reconnect_s_max=round(max(reconnects, default=0.0), 2),
        reconnect_s_mean=round(sum(reconnects) / max(len(reconnects), 1), 2),
        recompute_check=check.stdout.strip().splitlines()[-1] if check.stdout.strip() else "",
        wall_s=round(time.monotonic() - began, 1),
    )
    print(f"\nsoak: {figures}")
    return figures


def check_database(db: Path, heard_start: set[str], heard_end: list[tuple[str, str]]) -> dict[str, Any]:
    """Every invariant of a ladder that was crashed and restarted; returns the counts."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        sql = "SELECT id, status, termination, returns, ended_at, move_count, moves, rated FROM matches"
        rows = {str(r[0]): r[1:] for r in conn.execute(sql)}
        rated_ids = [str(r[0]) for r in conn.execute("SELECT match_id FROM rated_matches")]
    finally:
        conn.close()
    aborted = int(Termination.ABORTED)
    running = [mid for mid, r in rows.items() if r[0] == "running"]
    assert not running, f"matches left running: {running}"
    lost = sorted(heard_start - set(rows))
    assert not lost, f"matches a bot played that the database does not know: {lost}"
    for mid, termination in heard_end:
        status, term = rows[mid][0], Termination(rows[mid][1]).name
        assert term == termination, f"match {mid}: a bot heard {termination}, the database says {term} ({status})"
    finished = {mid: r for mid, r in rows.items() if r[0] == "finished"}
    for mid, (_status, term, returns, ended_at, move_count, moves, _rated) in finished.items():
        assert term != aborted and returns and ended_at, f"match {mid} is half-written: {term, returns, ended_at}"
        assert len(decode_moves(moves)) == move_count > 0, f"match {mid}: {move_count} moves recorded"
    should_be_rated = {mid for mid, r in finished.items() if r[6]}
    assert len(rated_ids) == len(set(rated_ids)), "a match was rated twice"
    assert set(rated_ids) == should_be_rated, (
        f"rated but not finished: {sorted(set(rated_ids) - should_be_rated)}; "
        f"finished but not rated: {sorted(should_be_rated - set(rated_ids))}"
    )
    remote = {mid for mid, _ in heard_end}
    return {
        "matches": len(rows),
        "finished": len(finished),
        "aborted": sum(1 for r in rows.values() if r[0] == "aborted"),
        "rated": len(rated_ids),
        "remote_bot_matches_heard": len(remote),
    }


@pytest.mark.timeout(300)
def test_ladder_survives_restarts_quick(tmp_path: Path) -> None:
    figures = run_soak(tmp_path, restarts=2, play_seconds=1.5)
    assert figures["rated"] > 0


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_ladder_survives_twenty_restarts(tmp_path: Path) -> None:
    figures = run_soak(tmp_path, restarts=20, play_seconds=2.0)
    assert figures["rated"] > 0 and figures["remote_bot_matches_heard"] > 0
