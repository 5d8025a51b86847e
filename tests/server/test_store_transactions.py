"""A match's start, and its end with its rating change and failure report, are each one transaction
run in one hop to the database thread; a failure inside one rolls all of it back. Starts and ends
asked for while a hop is under way share the next hop and commit together (a savepoint each, so a
failing one rolls back alone). A bot's Hello looks its name up in one hop.

A real SQLite file; the records come from real in-process matches.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

import arena_bots
from arena.v1 import bot_session_pb2 as bs
from arena_client import SeatInfo, Termination
from arena_games import load_game
from arena_server.referee.loop import play_match
from arena_server.referee.records import MatchRecord
from arena_server.seats.in_process import InProcessSeat
from arena_server.store import database
from arena_server.store.database import Store, StoreError, run_now
from arena_server.store.ratings import rating_change
from tests.conftest import LiveServer
from tests.fakes.grpc_bots import RawBot


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


def status_of(path: Path) -> dict[int, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT id, status FROM matches"))


def rated_ids(path: Path) -> list[int]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT match_id FROM rated_matches ORDER BY 1")]


async def test_a_rated_match_ends_in_one_hop_with_its_rating_change(tmp_path: Path) -> None:
    """The hub's end of a rated match (its rating change, which reads the ratings inside the transaction
    for Plackett-Luce) is one queued write, run on the database thread: one hop, not one per statement."""
    store = await Store.open(tmp_path / "arena.db")
    try:
        record = dataclasses.replace(await finished_match(), rated=True)
        match_id = await store.start_match(record)
        hops = count_hops(store)
        await store.finish_match(record, rating_change(record))
        assert len(hops) == 1, hops
    finally:
        await store.close()
    assert status_of(tmp_path / "arena.db") == {int(match_id): "finished"}
    assert rated_ids(tmp_path / "arena.db") == [int(match_id)]
    with sqlite3.connect(tmp_path / "arena.db") as conn:
        games = dict(conn.execute("SELECT bot_name, games FROM ratings"))
    assert games == {"rock": 1, "random": 1}


async def test_ends_asked_for_together_commit_once_and_a_failing_hook_rolls_back_only_its_own_end(
    tmp_path: Path,
) -> None:
    store = await Store.open(tmp_path / "arena.db")
    try:
        template = dataclasses.replace(await finished_match(), rated=True)
        records = [dataclasses.replace(template, match_id="") for _ in range(8)]
        for record in records:
            await store.start_match(record)

        async def refused(conn: aiosqlite.Connection) -> None:
            await conn.execute("INSERT INTO bot_status VALUES ('half-written', 1, 'r', 'now')")
            raise ValueError("this end's report is refused")

        hooks: list[Any] = [rating_change(r) for r in records]
        hooks[3] = refused
        writes, commits = store._writes.writes, store._writes.commits
        async with store.write_lock:  # another transaction is open: the eight ends queue for one hop
            ends = [asyncio.ensure_future(store.finish_match(r, h)) for r, h in zip(records, hooks, strict=True)]
            await asyncio.sleep(0.05)
        outcomes = await asyncio.gather(*ends, return_exceptions=True)
        assert isinstance(outcomes[3], ValueError) and "refused" in str(outcomes[3])
        assert outcomes[:3] + outcomes[4:] == [None] * 7
        assert store._writes.writes - writes == 8
        assert store._writes.commits - commits == 1  # one transaction for the eight (eight before)
        assert not store.conn.in_transaction
    finally:
        await store.close()
    ids = [int(r.match_id) for r in records]
    want = {i: ("running" if i == ids[3] else "finished") for i in ids}  # the refused end left nothing behind
    assert status_of(tmp_path / "arena.db") == want
    assert rated_ids(tmp_path / "arena.db") == ids[:3] + ids[4:]
    with sqlite3.connect(tmp_path / "arena.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM bot_status").fetchone()[0] == 0


async def test_a_hook_that_awaits_anything_but_the_database_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    async def strays(conn: aiosqlite.Connection) -> None:
        await conn.execute("INSERT INTO bot_status VALUES ('stray', 1, 'r', 'now')")
        await asyncio.sleep(0)

    async def reads(conn: aiosqlite.Connection) -> None:
        async with conn.execute("SELECT 41 + 1") as cur:
            assert await cur.fetchone() == (42,)

    with sqlite3.connect(tmp_path / "x.db") as db:
        run_now(reads, db)
    store = await Store.open(tmp_path / "arena.db")
    try:
        record = await finished_match()
        match_id = await store.start_match(record)
        with pytest.raises(StoreError, match="awaited something other than the database"):
            await store.finish_match(record, strays)
        with pytest.raises(StoreError, match=r"use Store\.local_transaction"):
            await store.run_in_transaction(strays)
        await store.finish_match(record)  # the store goes on
    finally:
        await store.close()
    assert status_of(tmp_path / "arena.db") == {int(match_id): "finished"}
    with sqlite3.connect(tmp_path / "arena.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM bot_status").fetchone()[0] == 0


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


async def test_a_hello_asks_the_database_once_and_a_guests_match_three_times(live_server: LiveServer) -> None:
    registry = live_server.hub.registry
    assert registry is not None
    token = await registry.register("Hop-Counter")
    hops = count_hops(live_server.store)
    async with live_server.channel() as channel:
        bot = RawBot(channel)
        welcome = await bot.hello("hop-guest", ("rps",))
        assert welcome.WhichOneof("kind") == "welcome" and welcome.welcome.guest
        assert len(hops) == 1  # the name's registered look-alike and its token hash, together
        await bot.challenge("rock", rounds=1)
        turn = (await bot.recv_kind("turn")).turn
        await bot.send(bs.BotMessage(action=bs.Action(match_id=turn.match_id, turn_id=turn.turn_id, action=1)))
        ended = await bot.recv_kind("match_ended")
        assert ended.match_ended.termination == Termination.NORMAL
        await bot.recv_kind("challenge_status")
    # The guest check before seating it (the name may have been registered since), the start, the end.
    assert len(hops) == 4, hops
    hops.clear()
    async with live_server.channel() as channel:  # a look-alike of a registered name is refused, from one hop
        refused = await RawBot(channel).hello("hop-counter", ("rps",))
    assert refused.error.code == bs.ERROR_CODE_NAME_TAKEN and "'Hop-Counter'" in refused.error.message
    assert len(hops) == 1
    hops.clear()
    async with live_server.channel() as channel:  # the registered name itself needs its token
        raw = RawBot(channel)
        await raw.send(
            bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", name="Hop-Counter", token=token, games=["rps"]))
        )
        owner = await raw.recv()
    assert owner.WhichOneof("kind") == "welcome" and not owner.welcome.guest
    assert len(hops) == 1


def stored_ids(path: Path) -> list[int]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM matches ORDER BY id")]


async def test_writes_asked_for_during_a_hop_share_the_next_one_each_its_own_transaction(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "arena.db")
    try:
        template = await finished_match()
        records = [dataclasses.replace(template, match_id="") for _ in range(6)]
        broken = dataclasses.replace(template, match_id="", seats=(template.seats[0], template.seats[0]))
        hops = count_hops(store)
        first = asyncio.ensure_future(store.start_match(records[0]))
        await asyncio.sleep(0)  # its hop is under way: the next ones queue behind it
        outcomes = await asyncio.gather(
            *(store.start_match(r) for r in records[1:3]),
            store.start_match(broken),  # fails inside its hop; the others in the same hop still commit
            *(store.start_match(r) for r in records[3:]),
            return_exceptions=True,
        )
        await first
        assert len(hops) == 2  # one for the first start, one for the five asked for meanwhile
        assert isinstance(outcomes[2], sqlite3.IntegrityError)  # rolled back alone: the other four committed
        started = [r.match_id for r in records]
        assert sorted(int(i) for i in started) == stored_ids(tmp_path / "arena.db")
        assert not store.conn.in_transaction
        for record in records:
            record.termination = Termination.NORMAL
        hops.clear()
        await asyncio.gather(*(store.finish_match(r) for r in records))
        assert len(hops) == 1
        for match_id in started:
            stored = await store.get_match(match_id)
            assert stored is not None and stored.termination == Termination.NORMAL and len(stored.moves) == 10
    finally:
        await store.close()


async def test_a_write_cancelled_before_its_hop_is_not_made_and_close_writes_what_is_queued(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "arena.db")
    record = await finished_match()
    kept = dataclasses.replace(record, match_id="")
    async with store.write_lock:  # another transaction is open: the starts wait for the lock
        dropped = asyncio.ensure_future(store.start_match(record))
        queued = asyncio.ensure_future(store.start_match(kept))
        await asyncio.sleep(0)
        dropped.cancel()
    await store.close()  # before anyone awaited the queued start: it is written first
    assert queued.done() and dropped.cancelled()
    assert stored_ids(tmp_path / "arena.db") == [int(kept.match_id)]


async def test_a_local_transaction_returns_what_its_work_returns_and_rolls_back_all_of_a_failure(
    tmp_path: Path,
) -> None:
    """The registry's and the ratings' read-then-write transactions (one ``Store.local_transaction`` each)."""
    store = await Store.open(tmp_path / "arena.db")
    try:

        async def add(name: str, fail: bool) -> Callable[[Any], Any]:
            async def work(conn: Any) -> int:
                async with conn.execute("SELECT COUNT(*) FROM bots") as cur:
                    row = await cur.fetchone()
                await conn.execute(
                    "INSERT INTO bots (name, kind, created_at) VALUES (?, 'remote', '2026-11-24T00:00:00+00:00')",
                    (name,),
                )
                if fail:
                    raise ValueError(f"refused {name}")
                return int(row[0])

            return work

        before = await store.local_transaction(await add("first", False))
        assert await store.local_transaction(await add("second", False)) == before + 1
        with pytest.raises(ValueError, match="refused third"):  # the error as raised, not a ROLLBACK's
            await store.local_transaction(await add("third", True))
        async with store.conn.execute("SELECT name FROM bots WHERE name IN ('first', 'second', 'third')") as cur:
            names = sorted(r[0] for r in await cur.fetchall())
        assert names == ["first", "second"]
        assert not store.conn.in_transaction
        # A COMMIT that fails (here: a deferred foreign key the work broke) is raised as itself, and nothing stays.
        await store.conn.execute("PRAGMA foreign_keys = ON")

        async def orphan(conn: Any) -> None:
            await conn.execute("PRAGMA defer_foreign_keys = ON")
            await conn.execute(
                "INSERT INTO bot_versions (bot_id, version, created_at) VALUES (999999, 1, '2026-11-24T00:00:00+00:00')"
            )

        with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
            await store.local_transaction(orphan)
        assert not store.conn.in_transaction
        async with store.conn.execute("SELECT COUNT(*) FROM bot_versions WHERE bot_id = 999999") as cur:
            assert (await cur.fetchone())[0] == 0
    finally:
        await store.close()


async def test_a_long_matchs_move_list_is_compressed_off_the_event_loop_and_reads_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long match's moves are compressed in a worker thread: the loop keeps serving the other matches meanwhile."""
    record = await finished_match()
    for i in range(40_000):
        record.moves.add(i % 2, i % 3, 0.000_123)
    threads: list[int] = []
    real = database.zlib.compress

    def compress(data: bytes, level: int) -> bytes:
        threads.append(threading.get_ident())
        return real(data, level)

    monkeypatch.setattr(database.zlib, "compress", compress)
    store = await Store.open(tmp_path / "arena.db")
    try:
        match_id = await store.start_match(record)
        await store.finish_match(record)
        short = await finished_match()
        await store.start_match(short)
        await store.finish_match(short)
        back = await store.get_match(match_id)
    finally:
        await store.close()
    loop_thread = threading.get_ident()
    assert len(threads) == 2
    assert threads[0] != loop_thread, "the long match's moves were compressed on the event loop"
    assert threads[1] == loop_thread  # a short one is not worth a thread hop
    assert back is not None
    assert list(back.moves) == list(record.moves)
    assert len(back.moves) == 40_010
