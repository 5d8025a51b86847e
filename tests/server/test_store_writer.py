"""The one store writer (:mod:`arena_server.store.writer`): a worker's hub writing through the main process.

Real SQLite files, a real Unix socket, real hubs playing real rated matches.
The same matches (same seeds) played by a hub on the writer directly and by a
hub on a :class:`WorkerStore` must leave identical match rows and rating
tables, Plackett-Luce (3 seats, which reads inside the transaction) included;
the worker's own connection cannot write; a gone writer is a clear error.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiosqlite
import pytest

import arena_bots
from arena_games import load_game
from arena_server.matches.hub import Hub
from arena_server.store.bot_writes import BotWriteRefused, NewBot, NewVersion, Verdict
from arena_server.store.database import Store, StoreError, decode_moves
from arena_server.store.writer import Connected, StoreWriter, WorkerStore, moving_key

MATCHES = [
    ("rps", {"rounds": 20}, ["beat-last", "random"], "seed-1"),
    ("rps", {"rounds": 20}, ["random", "rotate"], "seed-2"),
    ("liars_dice", {"players": 3}, ["random", "random-2", "random-3"], "seed-3"),
    ("liars_dice", {"players": 3}, ["random-3", "random", "random-2"], "seed-4"),
]
RATING_TABLES = {
    "ratings": "SELECT pool, bot_name, games, wins, draws, losses, score, mu, sigma FROM ratings ORDER BY 1, 2",
    "rating_pairs": "SELECT * FROM rating_pairs ORDER BY 1, 2, 3",
    "rated_matches": "SELECT * FROM rated_matches ORDER BY 1",
    # Not the moves: they hold timings.
    "matches": "SELECT id, game, status, returns, move_count, seed, rated FROM matches ORDER BY id",
}


def hosted() -> dict[str, arena_bots.HostedBot]:
    bots = arena_bots.hosted_bots()
    return {**bots, "random-2": bots["random"], "random-3": bots["random"]}


async def play_all(hub: Hub) -> None:
    for game, params, bots, seed in MATCHES:
        running = await hub.start_match(load_game(game, **params), bots, seed=seed, rated=True)
        assert running.task is not None
        record = await running.task
        assert record.termination is not None and record.termination.name == "NORMAL", record.reason


def tables(db: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(db) as conn:
        out = {name: conn.execute(sql).fetchall() for name, sql in RATING_TABLES.items()}
        # The moves, decoded, without their timings (a worker encodes them before they cross to the writer).
        logs = [decode_moves(blob) for (blob,) in conn.execute("SELECT moves FROM matches ORDER BY id")]
        out["moves"] = [(log.players, log.actions, log.legal) for log in logs]
        return out


@contextlib.asynccontextmanager
async def through_writer(db: Path, read_bytes: int = 0) -> AsyncIterator[tuple[Store, StoreWriter, WorkerStore]]:
    """As ``arena serve --workers`` sets them up on ``db``: the main process's store, its writer thread and
    one worker's store; closed in the reverse order."""
    main = await Store.open(db)
    writer = StoreWriter(str(db), str(db.parent / "w.sock"))
    writer.read_bytes = read_bytes or writer.read_bytes
    writer.start()
    try:
        worker = await WorkerStore.connect(str(db), writer.socket_path)
        try:
            yield main, writer, worker
        finally:
            await worker.close()
    finally:
        await asyncio.to_thread(writer.close)
        await main.close()


async def _bad_half(conn: aiosqlite.Connection) -> None:
    """A transaction whose second statement a foreign key refuses (the writer's connection enforces them)."""
    await conn.execute("INSERT INTO bot_status VALUES ('half', 1, 'r', 'now')")
    await conn.execute("INSERT INTO match_seats (match_id, seat, bot_name, kind) VALUES (999, 0, 'x', 'hosted')")


async def test_worker_writes_match_the_single_process_store(tmp_path: Path) -> None:
    direct_db, shared_db = tmp_path / "direct.db", tmp_path / "shared.db"
    direct = await Store.open(direct_db)
    try:
        await play_all(Hub(direct, hosted()))
    finally:
        await direct.close()

    async with through_writer(shared_db) as (_main, _writer, worker):
        await play_all(Hub(worker, hosted()))
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            await worker.conn.execute("DELETE FROM matches")  # the worker's own connection cannot write
        assert (await worker.get_match("1")) is not None  # reads go to its own connection

    got, want = tables(shared_db), tables(direct_db)
    assert len(want["rated_matches"]) == 4 and any(row[7] is not None for row in want["ratings"])  # PL ran
    assert all(len(actions) >= 20 for _players, actions, _legal in want["moves"])
    assert got == want


async def test_a_gone_writer_is_a_clear_error(tmp_path: Path) -> None:
    async with through_writer(tmp_path / "a.db") as (_main, writer, worker):
        hub = Hub(worker, hosted())
        running = await hub.start_match(load_game("rps", rounds=5), ["rock", "random"])
        assert running.task is not None
        await running.task
        await asyncio.to_thread(writer.close)
        await asyncio.wait_for(worker.lost.wait(), 10)
        with pytest.raises(StoreError, match=r"the main process .* is gone"):
            await worker.start_match(running.record)


async def test_a_worker_that_closes_its_own_store_says_so_rather_than_blame_the_writer(tmp_path: Path) -> None:
    """A request still waiting when the worker closes its store (a stopping worker), and one made after, fail
    with the worker's own doing: before, both said the main process had closed the connection or was gone."""
    db = tmp_path / "a.db"
    main = await Store.open(db)
    writer = StoreWriter(str(db), str(tmp_path / "w.sock")).start()
    try:
        worker = await WorkerStore.connect(str(db), writer.socket_path)
        waiting = asyncio.ensure_future(worker.next_started("rps", None))  # answered when a match starts: never
        await asyncio.sleep(0.1)
        assert not waiting.done()
        await worker.close()
        with pytest.raises(StoreError, match=r"^this worker closed its connection to the store writer"):
            await asyncio.wait_for(waiting, 10)
        with pytest.raises(StoreError, match=r"^this worker's store is closed \(the worker is stopping\)"):
            await worker.owner("1")
    finally:
        await asyncio.to_thread(writer.close)
        await main.close()


async def test_a_worker_ladder_pauses_a_bot_through_the_writer(tmp_path: Path) -> None:
    """``pause_bot`` (a worker's ladder after repeated failures) is one transaction the writer commits."""
    from arena_server.store import ratings as ls

    db = tmp_path / "shared.db"
    async with through_writer(db) as (_main, _writer, worker):
        await ls.pause_bot(worker, "flaky", 3, "paused after 3 failed matches in a row")
        assert (await ls.paused_bots(worker.conn)) == {"flaky": (3, "paused after 3 failed matches in a row")}
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT bot_name, paused_version FROM bot_status").fetchall() == [("flaky", 3)]


async def test_a_failed_write_is_the_workers_error_and_rolls_back_only_itself(tmp_path: Path) -> None:
    """A statement the database refuses (here a foreign key: the writer's own connection enforces them)
    reaches the worker as a StoreError; the transaction's earlier statement is rolled back, later writes go on."""
    db = tmp_path / "shared.db"
    async with through_writer(db) as (_main, _writer, worker):
        with pytest.raises(StoreError, match="FOREIGN KEY"):
            await worker.run_in_transaction(_bad_half)
        running = await Hub(worker, hosted()).start_match(load_game("rps", rounds=3), ["rock", "random"])
        assert running.task is not None
        assert (await running.task).termination is not None
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM bot_status").fetchone() == (0,)
        assert conn.execute("SELECT status FROM matches").fetchall() == [("finished",)]


async def test_the_writer_waits_for_the_main_connections_transaction_without_blocking_the_loop(
    tmp_path: Path,
) -> None:
    """The main process's own connection (the refitter's) holds a write transaction across awaits on the
    event loop while a worker's match ends: the writer's thread waits for SQLite's lock (it never needs
    the loop), the loop keeps running, and both writes land, the worker's after the other's commit."""
    db = tmp_path / "shared.db"
    loop_ticks = 0
    order: list[str] = []

    async def slow_refit(conn: aiosqlite.Connection) -> None:
        nonlocal loop_ticks
        await conn.execute("INSERT INTO bot_status VALUES ('main', 1, 'r', 'now')")
        ending = asyncio.ensure_future(worker.reveal_seed(record.seed))  # a write from the worker meanwhile
        for _ in range(20):  # 0.4 s holding the write lock, the loop serving other work
            await asyncio.sleep(0.02)
            loop_ticks += 1
        assert not ending.done(), "the worker's write went through while the main connection held the lock"
        order.append("main")
        ending.add_done_callback(lambda _f: order.append("worker"))
        main_ending.append(ending)

    main_ending: list[asyncio.Future[None]] = []
    async with through_writer(db) as (main, _writer, worker):
        record = (await Hub(worker, hosted()).start_match(load_game("rps", rounds=3), ["rock", "random"])).record
        await main.local_transaction(slow_refit)
        await asyncio.wait_for(main_ending[0], 30)
    assert loop_ticks == 20 and order == ["main", "worker"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT bot_name FROM bot_status").fetchall() == [("main",)]


async def test_closing_the_writer_answers_what_was_already_sent(tmp_path: Path) -> None:
    """Requests in the socket when the writer is closed (more than one read takes) are each carried out and
    answered before it stops. The main connection's transaction holds the writer on the first meanwhile."""
    closed: list[asyncio.Future[None]] = []

    async def hold(conn: aiosqlite.Connection) -> None:
        await conn.execute("INSERT INTO bot_status VALUES ('main', 1, 'r', 'now')")
        first = asyncio.ensure_future(worker.reveal_seed("first"))
        await asyncio.sleep(0.2)  # the writer is waiting for SQLite's lock on the first request
        sent.extend(asyncio.ensure_future(worker.reveal_seed(f"seed-{i}")) for i in range(150))
        sent.append(first)
        await asyncio.sleep(0.1)  # every request is written
        for _ in range(500):
            if not worker._writer.transport.get_write_buffer_size():
                break
            await asyncio.sleep(0.01)
        assert not worker._writer.transport.get_write_buffer_size(), "the requests do not fit in the socket"
        await asyncio.sleep(0.1)
        closed.append(asyncio.ensure_future(asyncio.to_thread(writer.close)))
        await asyncio.sleep(0.1)

    sent: list[asyncio.Future[None]] = []
    # A dozen requests a read: the 150 sent take a dozen reads, and fit in the socket.
    async with through_writer(tmp_path / "shared.db", read_bytes=1024) as (main, writer, worker):
        await main.local_transaction(hold)
        await asyncio.wait_for(asyncio.gather(*sent), 60)  # each answered, none lost
        await closed[0]
    assert writer.requests == 151


async def test_a_connection_sending_garbage_is_cut_off_and_a_wrong_request_fails_alone(tmp_path: Path) -> None:
    async with through_writer(tmp_path / "shared.db") as (_main, writer, worker):
        reader, stray = await asyncio.open_unix_connection(writer.socket_path)
        stray.write(struct.pack("!I", 5) + b"\x80junk")
        assert await asyncio.wait_for(reader.read(), 10) == b""  # cut off: the writer closed it, answered nothing
        with pytest.raises(StoreError, match="the store writer failed on 'finish'"):
            await worker._call("finish", "not a row")  # a request of the right shape with wrong arguments fails alone
        with pytest.raises(StoreError, match="unknown store request 'drop'"):
            await worker._call("drop", "matches")
        running = await Hub(worker, hosted()).start_match(load_game("rps", rounds=3), ["rock", "random"])
        assert running.task is not None
        assert (await running.task).termination is not None
        assert not worker.lost.is_set()
        stray.close()


async def _held_then_sent(main: Store, sends: list[Callable[[], Awaitable[None]]]) -> list[BaseException | None]:
    """Send every request while the main connection holds SQLite's write lock (so they reach the writer
    together), then let go; each request's outcome (None: answered ok)."""
    futures: list[asyncio.Future[None]] = []

    async def hold(conn: aiosqlite.Connection) -> None:
        await conn.execute("INSERT INTO bot_status VALUES ('main', 1, 'r', 'now')")
        futures.append(asyncio.ensure_future(sends[0]()))
        await asyncio.sleep(0.2)  # the writer waits for the lock on the first request
        futures.extend(asyncio.ensure_future(send()) for send in sends[1:])
        await asyncio.sleep(0.2)  # the others are in its socket

    await main.local_transaction(hold)
    outcomes = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 30)
    return list(outcomes)


async def test_requests_read_together_commit_together_and_a_refused_one_alone_rolls_back(tmp_path: Path) -> None:
    """Group commit: requests that reach the writer together share one transaction (one savepoint each);
    the refused one is rolled back alone, each of the others is answered after the one commit."""
    from arena_server.store import ratings as ls

    db = tmp_path / "shared.db"
    names = [f"bot-{i}" for i in range(40)]
    async with through_writer(db) as (main, writer, worker):
        sends = [lambda name=name: ls.pause_bot(worker, name, 1, "r") for name in names]
        sends.insert(20, lambda: worker.run_in_transaction(_bad_half))
        outcomes = await _held_then_sent(main, sends)
    assert [type(o).__name__ for o in outcomes].count("NoneType") == 40
    assert isinstance(outcomes[20], StoreError) and "FOREIGN KEY" in str(outcomes[20])
    assert writer.requests == 41 and writer.commits <= 5, writer.commits  # 41 one at a time before
    with sqlite3.connect(db) as conn:
        stored = {name for (name,) in conn.execute("SELECT bot_name FROM bot_status")}
    assert stored == {"main", *names}


async def test_a_request_that_ends_the_shared_transaction_leaves_the_others_to_commit_one_by_one(
    tmp_path: Path,
) -> None:
    """A statement that makes SQLite roll back the whole transaction (a trigger's RAISE(ROLLBACK)) cannot
    be undone alone: the writer carries out the batch again, one transaction per request."""
    from arena_server.store import ratings as ls

    db = tmp_path / "shared.db"
    names = [f"bot-{i}" for i in range(10)]
    async with through_writer(db) as (main, _writer, worker):
        await main.conn.execute(
            "CREATE TRIGGER boom BEFORE INSERT ON bot_status WHEN NEW.bot_name = 'boom' "
            "BEGIN SELECT RAISE(ROLLBACK, 'boom refused'); END"
        )
        sends = [lambda name=name: ls.pause_bot(worker, name, 1, "r") for name in [*names[:5], "boom", *names[5:]]]
        outcomes = await _held_then_sent(main, sends)
    assert isinstance(outcomes[5], StoreError) and "boom refused" in str(outcomes[5])
    assert outcomes[:5] + outcomes[6:] == [None] * 10
    with sqlite3.connect(db) as conn:
        stored = {name for (name,) in conn.execute("SELECT bot_name FROM bot_status")}
    assert stored == {"main", *names}


async def test_registry_writes_from_two_workers_check_inside_the_writers_transaction(tmp_path: Path) -> None:
    """Look-alike names sent together by two workers: one batch, one commit, exactly one name gets in and
    the other worker gets the registry's refusal itself; a version past the quota is refused the same
    way; every worker hears of each committed registration and accepted program."""
    db = tmp_path / "shared.db"
    async with through_writer(db) as (main, writer, one):
        other = await WorkerStore.connect(str(db), writer.socket_path)
        try:

            def bot(name: str) -> NewBot:
                return NewBot(name, "remote", ("rps",), "0" * 64, "", "2026-01-01T00:00:00+00:00")

            sends = [lambda: one.insert_bot(bot("alike")), lambda: other.insert_bot(bot("ALIKE"))]
            sends += [lambda i=i: one.insert_bot(bot(f"b-{i}")) for i in range(6)]
            outcomes = await _held_then_sent(main, sends)
            refused = [o for o in outcomes if isinstance(o, BaseException)]
            assert len(refused) == 1 and isinstance(refused[0], BotWriteRefused), outcomes
            assert (refused[0].code, str(refused[0])) == (
                "taken",
                "the name 'ALIKE' looks the same as 'alike', which is already registered; pick another name",
            )
            assert writer.commits <= 3, writer.commits  # (8 requests; one at a time they were 8)
            alike = outcomes[0]
            assert isinstance(alike, int)

            for version in (1, 2):
                new = NewVersion(alike, "alike", "./bot", "json", ("rps",), "2026-01-01T00:00:00+00:00", 2)
                assert await other.reserve_version(new) == version
            with pytest.raises(BotWriteRefused, match="'alike' already has 2 versions, the limit per bot"):
                await one.reserve_version(new)
            await one.set_verdict(Verdict(alike, "alike", 2, "accepted", "ok", ("rps",), "/bots/alike/v2"))
            await other.set_verdict(Verdict(alike, "alike", 1, "rejected", "no", ("rps",), "/bots/alike/v1"))

            committed = [("registered", "alike"), *(("registered", f"b-{i}") for i in range(6))]
            for store in (one, other):
                heard = [store.bot_changes.get_nowait() for _ in range(store.bot_changes.qsize())]
                assert sorted(heard[:-1]) == sorted(committed) and heard[-1] == ("programs", "alike"), heard
        finally:
            await other.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT kind FROM bots WHERE name = 'alike'").fetchone() == ("subprocess",)
        assert conn.execute("SELECT COUNT(*) FROM bots WHERE name_key = 'alike'").fetchone() == (1,)
        versions = conn.execute("SELECT version, status FROM bot_versions ORDER BY version").fetchall()
    assert versions == [(1, "rejected"), (2, "accepted")]


async def test_the_directory_of_connected_bots_is_one_for_every_worker(tmp_path: Path) -> None:
    """A name (or a look-alike) claimed through one worker is refused to every other session; each
    worker's copy follows the claims and releases; a worker that goes loses its names."""
    db = tmp_path / "shared.db"
    async with through_writer(db) as (_main, writer, one):
        other = await WorkerStore.connect(str(db), writer.socket_path)
        late = None
        try:
            await one.announce_ready(0)
            await other.announce_ready(1)
            assert await one.claim_name(Connected("bot", 0, ("rps",), False, "k1")) is None
            assert await other.claim_name(Connected("BOT", 1, (), True, "k2")) == "bot"
            assert await other.claim_name(Connected("bot", 1, (), True, "k3")) == "bot"
            assert await one.claim_name(Connected("bot", 0, ("rps",), False, "k1")) is None  # (its own claim again)
            assert await other.claim_name(Connected("guest-1", 1, (), True, "k4")) is None
            for store in (one, other):
                # Every worker's notice was sent before the claimer's answer, so a round trip of its own
                # finds each worker's copy up to date.
                assert await store.owner("no-such-match") is None
                assert sorted(store.directory) == ["bot", "guest-1"], store.directory
                assert store.directory["bot"] == Connected("bot", 0, ("rps",), False, "k1")

            await other.release_name("bot", "k3")  # another session's key: nothing happens
            await one.release_name("bot", "k1")
            assert await other.claim_name(Connected("Bot", 1, (), True, "k5")) is None
            late = await WorkerStore.connect(str(db), writer.socket_path)
            await late.announce_ready(2)  # a worker that starts later gets the directory as it stands
            assert sorted(late.directory) == ["Bot", "guest-1"]

            await other.close()  # worker 1 is gone: its bots are gone from every directory
            for _ in range(250):  # (each copy hears of it by a notice of its own)
                if not (writer.connected or one.directory or late.directory):
                    break
                await asyncio.sleep(0.02)
            assert writer.connected == {} and one.directory == {} and late.directory == {}
        finally:
            await other.close()
            if late is not None:
                await late.close()


async def test_a_redirected_bot_stays_in_the_directory_on_its_way_until_it_claims_its_name(tmp_path: Path) -> None:
    """A redirect marks the bot as moving to the worker it was sent to, with a key no session holds: the end
    of the stream it left does not take it out, a look-alike stays refused, and its own claim on any worker
    replaces the entry. The redirecting worker's late release takes out only a bot that never came."""
    db = tmp_path / "shared.db"
    async with through_writer(db) as (_main, writer, one):
        other = await WorkerStore.connect(str(db), writer.socket_path)
        try:
            await one.announce_ready(0)
            await other.announce_ready(1)
            assert await one.claim_name(Connected("mover", 0, ("rps",), False, "k1", True)) is None
            await one.move_name("mover", "k9", 1)  # (another session's key: nothing happens)
            assert await one.owner("sync") is None and not one.directory["mover"].moving
            await one.move_name("mover", "k1", 1)
            on_its_way = Connected("mover", 1, ("rps",), False, moving_key("k1"), True, True)
            for store in (one, other):
                assert await store.owner("sync") is None  # (a round trip: every notice before it has arrived)
                assert store.directory["mover"] == on_its_way, store.directory
            await one.release_name("mover", "k1")  # (the stream it left ends)
            assert await other.claim_name(Connected("MOVER", 1, (), True, "k2")) == "mover"  # (a look-alike)
            assert await other.claim_name(Connected("mover", 1, ("rps",), False, "k3", True)) is None
            await one.release_name("mover", moving_key("k1"))  # (the late release, after it arrived: nothing)
            for store in (one, other):
                assert await store.owner("sync") is None
                assert store.directory["mover"] == Connected("mover", 1, ("rps",), False, "k3", True)

            assert await one.claim_name(Connected("lost", 0, (), False, "k4", True)) is None
            await one.move_name("lost", "k4", 1)
            await one.release_name("lost", moving_key("k4"))  # (it never came)
            for store in (one, other):
                assert await store.owner("sync") is None
                assert "lost" not in store.directory
        finally:
            await other.close()
