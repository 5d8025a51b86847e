"""A match's start, and its end when no rating or failure hook rides along, are each one transaction
run in one hop to the database thread; a failure inside one rolls all of it back.

A real SQLite file; the records come from real in-process matches.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import arena_bots
from arena_client import SeatInfo, Termination
from arena_games import load_game
from arena_server.referee.loop import play_match
from arena_server.referee.records import MatchRecord
from arena_server.seats.in_process import InProcessSeat
from arena_server.store.database import Store


async def finished_match() -> MatchRecord:
    hosted = arena_bots.hosted_bots()
    seats = [
        InProcessSeat(hosted["rock"].factory(0), SeatInfo(0, "rock", 1, "hosted")),
        InProcessSeat(hosted["random"].factory(1), SeatInfo(1, "random", 1, "hosted")),
    ]
    return await play_match(load_game("rps", rounds=5), seats)


def count_hops(store: Store) -> list[Callable[..., Any]]:
    """Every call to the database thread (aiosqlite's ``_execute``, which its own methods use too)."""
    calls: list[Callable[..., Any]] = []
    conn = store.conn
    real = conn._execute

    async def counted(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        calls.append(fn)
        return await real(fn, *args, **kwargs)

    conn._execute = counted  # type: ignore[method-assign]
    return calls


async def test_a_match_starts_and_finishes_in_one_hop_each(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "arena.db")
    try:
        record = await finished_match()
        hops = count_hops(store)
        match_id = await store.start_match(record)
        assert len(hops) == 1
        await store.finish_match(record)
        assert len(hops) == 2
    finally:
        await store.close()
    with sqlite3.connect(tmp_path / "arena.db") as conn:
        status, moves = conn.execute("SELECT status, move_count FROM matches WHERE id = ?", (match_id,)).fetchone()
        seats = conn.execute("SELECT seat, bot_name FROM match_seats WHERE match_id = ?", (match_id,)).fetchall()
    assert (status, moves) == ("finished", 10)
    assert sorted(seats) == [(0, "rock"), (1, "random")]


async def test_a_failing_start_leaves_nothing_behind_and_the_store_goes_on(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "arena.db")
    try:
        record = await finished_match()
        twice = dataclasses.replace(record, seats=(record.seats[0], record.seats[0]))  # seat 0 twice
        with pytest.raises(sqlite3.IntegrityError):
            await store.start_match(twice)  # the match row went in, then its seats failed
        assert not store.conn.in_transaction
        with sqlite3.connect(tmp_path / "arena.db") as conn:
            assert conn.execute("SELECT COUNT(*) FROM matches").fetchone()[0] == 0
        match_id = await store.start_match(record)
        record.termination = Termination.NORMAL
        await store.finish_match(record)
        stored = await store.get_match(match_id)
        assert stored is not None and stored.termination == Termination.NORMAL
    finally:
        await store.close()
