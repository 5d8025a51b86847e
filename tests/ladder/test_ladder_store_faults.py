"""The ladder through a store fault: matches voided by a failed commit are never rated, the rest are, once.

A real server and its in-process ladder; the database turns read-only (SQLite's own
``query_only``, which fails every write with SQLITE_READONLY as a read-only file would) for a
while, then writable again.
"""

from __future__ import annotations

import asyncio

import pytest

import arena_server.store.ratings as ls
from arena_games import load_game
from arena_server.ladder.scheduler import Ladder, LadderConfig
from arena_server.referee.loop import COMMIT_FAILED
from tests.conftest import LiveServer


async def scalar(live: LiveServer, sql: str) -> int:
    async with live.store.conn.execute(sql) as cur:
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def test_a_read_only_spell_voids_matches_without_rating_them(
    live_server: LiveServer, capsys: pytest.CaptureFixture[str]
) -> None:
    store = live_server.store
    config = LadderConfig(
        [load_game("rps", rounds=10000)], concurrency=3, per_bot=2, seed=3, bots=("rock", "rotate", "random")
    )
    ladder = Ladder(live_server.hub, config)
    ladder.start()
    try:
        while ladder.matches_played < 3:
            await asyncio.sleep(0.01)
        while not live_server.hub.running:
            await asyncio.sleep(0)
        in_flight = [r.task for r in live_server.hub.running.values() if r.task is not None]
        await store.conn.execute("PRAGMA query_only = ON")
        await asyncio.wait(in_flight)  # these end during the fault: their commits fail
        await asyncio.sleep(0.6)  # and new starts are refused meanwhile
        await store.conn.execute("PRAGMA query_only = OFF")
        played = ladder.matches_played
        while ladder.matches_played < played + 3:  # the ladder carries on once the fault clears
            await asyncio.sleep(0.01)
    finally:
        ladder.halt()
        await ladder.stop()
    # Stored as the abort their bots heard, as soon as the database took writes again.
    voided = await scalar(
        live_server, f"SELECT COUNT(*) FROM matches WHERE status = 'aborted' AND reason LIKE '{COMMIT_FAILED}%'"
    )
    rows = await store.conn.execute_fetchall("SELECT id, status, reason FROM matches")
    assert voided >= 1, rows
    assert await scalar(live_server, "SELECT COUNT(*) FROM matches WHERE status = 'running'") == 0
    finished = await scalar(live_server, "SELECT COUNT(*) FROM matches WHERE rated = 1 AND status = 'finished'")
    assert await scalar(live_server, "SELECT COUNT(*) FROM rated_matches") == finished
    assert (
        await scalar(
            live_server,
            "SELECT COUNT(*) FROM rated_matches r JOIN matches m ON m.id = r.match_id WHERE m.status != 'finished'",
        )
        == 0
    )
    _snap, diffs = await ls.recompute(store, write=False)
    assert diffs == [], (diffs, rows)
    err = capsys.readouterr().err.splitlines()
    assert len([line for line in err if "could not record the end of match" in line]) == voided, err
    assert len([line for line in err if "could not record a new match" in line]) <= 1, err
