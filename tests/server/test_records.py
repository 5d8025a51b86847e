"""Records match what bots were told: commit before notify, and store faults void the match cleanly.

A real gRPC server on port 0 with a real SQLite file; the bots are raw gRPC streams. Every
MatchEnded a bot receives is compared with the row the server stored, including when the
database refuses the commit (read-only, locked) and the match is voided.
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client import Termination
from arena_server.store.database import Store
from tests.conftest import LiveServer
from tests.fakes.grpc_bots import RawBot


async def play_out(raw: RawBot, action: int = 0, after_start: object = None) -> tuple[bs.MatchStarted, bs.MatchEnded]:
    """Play one match already challenged for: answer every Turn with ``action`` until MatchEnded."""
    started = (await raw.recv_kind("match_started")).match_started
    if callable(after_start):
        await after_start()
    while True:
        msg = await raw.recv(timeout=30)
        kind = msg.WhichOneof("kind")
        if kind == "turn":
            await raw.answer(msg.turn, action)
        elif kind == "match_ended":
            return started, msg.match_ended
        elif kind == "challenge_status" and msg.challenge_status.state == bs.ChallengeStatus.STATE_REFUSED:
            raise AssertionError(msg.challenge_status.reason)


def row(db: object, match_id: str) -> tuple[str, int, str, str, int]:
    """(status, termination, reason, returns, rated rows) read by a separate connection, as a user would."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        status, term, reason, returns = conn.execute(
            "SELECT status, termination, reason, returns FROM matches WHERE id = ?", (int(match_id),)
        ).fetchone()
        rated = conn.execute("SELECT COUNT(*) FROM rated_matches WHERE match_id = ?", (int(match_id),)).fetchone()[0]
    finally:
        conn.close()
    return status, term, reason, returns, rated


def assert_agrees(ended: bs.MatchEnded, stored: mp.MatchRecord) -> None:
    assert int(ended.termination) == int(stored.termination)
    assert ended.reason == stored.reason
    assert list(ended.returns) == list(stored.returns)


async def stored_record(live: LiveServer, match_id: str) -> mp.MatchRecord:
    async with live.channel() as channel:
        return await mp_grpc.MatchServiceStub(channel).GetMatch(mp.GetMatchRequest(match_id=match_id))


async def test_the_row_is_committed_before_the_bot_hears_the_end(live_server: LiveServer) -> None:
    """Normal end, illegal action and resignation: at MatchEnded the row is already final and says the same."""
    raw = RawBot(live_server.channel())
    assert (await raw.hello("committer")).WhichOneof("kind") == "welcome"
    for action, term in ((1, Termination.NORMAL), (7, Termination.ILLEGAL_ACTION)):
        await raw.challenge("rock", rounds=3)
        started, ended = await play_out(raw, action)
        # Read at once, from another connection: no waiting, the commit came first.
        status, termination, reason, _returns, _ = row(live_server.db_path, started.match_id)
        assert (status, termination, reason) == ("finished", int(term), ended.reason)
        assert int(ended.termination) == int(term)
        assert_agrees(ended, await stored_record(live_server, started.match_id))
    await raw.challenge("rock", rounds=3)
    started = (await raw.recv_kind("match_started")).match_started
    await raw.send(bs.BotMessage(resign=bs.Resign(match_id=started.match_id, reason="enough")))
    ended = (await raw.recv_kind("match_ended")).match_ended
    assert row(live_server.db_path, started.match_id)[:3] == ("finished", int(Termination.RESIGN), ended.reason)
    assert_agrees(ended, await stored_record(live_server, started.match_id))
    await raw.call.done_writing()


async def test_read_only_database_voids_the_match_and_the_bot_is_told(
    live_server: LiveServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The database turns read-only mid-match: the bot hears 'aborted' with the reason; nothing is half-written."""
    store = live_server.store
    raw = RawBot(live_server.channel())
    await raw.hello("ro-victim")
    await raw.challenge("rock", rounds=5)

    async def turn_read_only() -> None:
        await store.conn.execute("PRAGMA query_only = ON")  # every write now fails with SQLITE_READONLY

    started, ended = await play_out(raw, 1, turn_read_only)
    assert int(ended.termination) == int(Termination.ABORTED)
    assert ended.reason == "the server could not record the match: attempt to write a readonly database"
    assert list(ended.returns) == [0.0, 0.0] and not ended.HasField("offender")
    # Still read-only: a new challenge is refused with a clear reason instead of dying silently.
    await raw.challenge("rock", rounds=5)
    refused = (await raw.recv_kind("challenge_status")).challenge_status
    while refused.state != bs.ChallengeStatus.STATE_REFUSED:
        refused = (await raw.recv_kind("challenge_status")).challenge_status
    assert refused.reason.startswith("the server could not record a new match: attempt to write a readonly database")
    assert refused.retry_later  # for now: the same challenge may be played once the fault clears

    await store.conn.execute("PRAGMA query_only = OFF")  # the fault clears: the server serves on
    await raw.challenge("rock", rounds=5)
    after, normal = await play_out(raw, 1)
    assert int(normal.termination) == int(Termination.NORMAL)
    assert row(live_server.db_path, after.match_id)[:3] == ("finished", int(Termination.NORMAL), normal.reason)
    await raw.call.done_writing()

    # The voided match: 'running' until the next start (its abort could not be written either), never finished.
    status, _term, _reason, _returns, rated = row(live_server.db_path, started.match_id)
    assert status in ("running", "aborted") and rated == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if f"match {started.match_id} " in line]
    assert len(lines) == 1, lines
    assert "attempt to write a readonly database" in lines[0] and "told it was aborted" in lines[0]


async def test_failed_commit_is_stored_as_the_abort_the_bot_heard(tmp_path: object) -> None:
    """After a restart nothing is 'running' and the voided match is aborted; rated rows only for finished ones."""
    from pathlib import Path

    import arena_bots
    from arena_server.api.server import running_server
    from arena_server.matches.hub import Hub

    db = Path(str(tmp_path)) / "arena.db"
    store = await Store.open(db)
    try:
        hub = Hub(store, arena_bots.hosted_bots())
        async with running_server(hub, port=0) as (_server, port):
            live = LiveServer(hub, store, port, db)
            raw = RawBot(live.channel())
            await raw.hello("victim")
            await raw.challenge("rock", rounds=5)

            async def turn_read_only() -> None:
                await store.conn.execute("PRAGMA query_only = ON")

            started, ended = await play_out(raw, 1, turn_read_only)
            assert int(ended.termination) == int(Termination.ABORTED)
            await raw.call.done_writing()
    finally:
        await store.close()
    store = await Store.open(db)
    try:
        assert store.recovered_aborted == 1
    finally:
        await store.close()
    status, termination, _reason, _returns, rated = row(db, started.match_id)
    assert (status, termination, rated) == ("aborted", int(Termination.ABORTED), 0)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT COUNT(*) FROM matches WHERE status = 'running'").fetchone()[0] == 0
    finally:
        conn.close()


@pytest.mark.slow
async def test_locked_database_voids_the_match_and_the_server_keeps_serving(
    live_server: LiveServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another connection holds BEGIN EXCLUSIVE while a match ends (and while one should start)."""
    raw = RawBot(live_server.channel())
    await raw.hello("lock-victim")
    await raw.challenge("rock", rounds=5)
    locker = sqlite3.connect(live_server.db_path, isolation_level=None, check_same_thread=False)

    async def lock() -> None:
        locker.execute("BEGIN EXCLUSIVE")

    try:
        started, ended = await play_out(raw, 1, lock)
        assert int(ended.termination) == int(Termination.ABORTED)
        assert ended.reason == "the server could not record the match: database is locked"
        assert list(ended.returns) == [0.0, 0.0]
        await raw.challenge("rock", rounds=5)  # cannot even start while the lock is held
        status = (await raw.recv_kind("challenge_status", timeout=30)).challenge_status
        while status.state != bs.ChallengeStatus.STATE_REFUSED:
            status = (await raw.recv_kind("challenge_status", timeout=30)).challenge_status
        assert "the server could not record a new match: database is locked" in status.reason
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    await raw.challenge("rock", rounds=5)
    after, normal = await play_out(raw, 1)
    assert int(normal.termination) == int(Termination.NORMAL)
    await raw.call.done_writing()
    for _ in range(100):  # the voided match is marked aborted once the lock is gone
        if row(live_server.db_path, started.match_id)[0] == "aborted":
            break
        await asyncio.sleep(0.1)
    assert_agrees(ended, await stored_record(live_server, started.match_id))
    assert row(live_server.db_path, started.match_id)[4] == 0
    assert_agrees(normal, await stored_record(live_server, after.match_id))
    lines = [line for line in capsys.readouterr().err.splitlines() if f"match {started.match_id} " in line]
    # One line either way: the abort is stored at once if the lock is gone by then, else at the next write
    # that succeeds (the loop above waited for that).
    settled = ("stored as aborted", "it stays 'running' until the database accepts writes again")
    assert len(lines) == 1 and "database is locked" in lines[0] and any(s in lines[0] for s in settled), lines


async def test_spectators_see_the_committed_ending_too(live_server: LiveServer) -> None:
    """A spectator's "ended" event comes after the commit, and says what the bot heard (also when voided)."""
    store = live_server.store
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    raw = RawBot(live_server.channel())
    await raw.hello("watched")
    for fault in (False, True):
        await raw.challenge("rock", rounds=3)
        started = (await raw.recv_kind("match_started")).match_started
        events = stub.WatchMatch(mp.WatchMatchRequest(match_id=started.match_id))
        first = await events.read()
        assert first.WhichOneof("kind") == "started"
        if fault:
            await store.conn.execute("PRAGMA query_only = ON")
        while True:
            msg = await raw.recv()
            if msg.WhichOneof("kind") == "turn":
                await raw.answer(msg.turn, 1)
            elif msg.WhichOneof("kind") == "match_ended":
                break
        ended = msg.match_ended
        event = await events.read()
        while event.WhichOneof("kind") != "ended":
            event = await events.read()
        if not fault:
            assert row(live_server.db_path, started.match_id)[0] == "finished"
        else:
            await store.conn.execute("PRAGMA query_only = OFF")
        assert int(event.ended.termination) == int(ended.termination)
        assert event.ended.reason == ended.reason and list(event.ended.returns) == list(ended.returns)
        assert (int(ended.termination) == int(Termination.ABORTED)) == fault, ended.reason
    await raw.call.done_writing()
