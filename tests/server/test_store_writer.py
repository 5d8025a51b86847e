"""The one store writer (:mod:`arena_server.store.writer`): a worker's hub writing through the main process.

Real SQLite files, a real Unix socket, real hubs playing real rated matches.
The same matches (same seeds) played by a hub on the writer directly and by a
hub on a :class:`WorkerStore` must leave identical match rows and rating
tables, Plackett-Luce (3 seats, which reads inside the transaction) included;
the worker's own connection cannot write; a gone writer is a clear error.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

import arena_bots
from arena_games import load_game
from arena_server.matches.hub import Hub
from arena_server.store.database import Store, StoreError, decode_moves
from arena_server.store.writer import WorkerStore, serve_writes

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


async def test_worker_writes_match_the_single_process_store(tmp_path: Path) -> None:
    direct_db, shared_db = tmp_path / "direct.db", tmp_path / "shared.db"
    direct = await Store.open(direct_db)
    try:
        await play_all(Hub(direct, hosted()))
    finally:
        await direct.close()

    writer = await Store.open(shared_db)
    socket_path = str(tmp_path / "w.sock")
    unix = await asyncio.start_unix_server(lambda r, w: serve_writes(writer, r, w), socket_path)
    worker = await WorkerStore.connect(str(shared_db), socket_path)
    try:
        await play_all(Hub(worker, hosted()))
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            await worker.conn.execute("DELETE FROM matches")  # the worker's own connection cannot write
        assert (await worker.get_match("1")) is not None  # reads go to its own connection
    finally:
        await worker.close()
        unix.close()
        await unix.wait_closed()
        await writer.close()

    got, want = tables(shared_db), tables(direct_db)
    assert len(want["rated_matches"]) == 4 and any(row[7] is not None for row in want["ratings"])  # PL ran
    assert all(len(actions) >= 20 for _players, actions, _legal in want["moves"])
    assert got == want


async def test_a_gone_writer_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    writer = await Store.open(db)
    socket_path = str(tmp_path / "w.sock")
    connections: list[asyncio.StreamWriter] = []

    async def accept(reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        connections.append(w)
        await serve_writes(writer, reader, w)

    unix = await asyncio.start_unix_server(accept, socket_path)
    worker = await WorkerStore.connect(str(db), socket_path)
    try:
        hub = Hub(worker, hosted())
        running = await hub.start_match(load_game("rps", rounds=5), ["rock", "random"])
        assert running.task is not None
        await running.task
        unix.close()
        for connection in connections:
            connection.close()
        await asyncio.wait_for(worker.lost.wait(), 10)
        with pytest.raises(StoreError, match=r"the main process .* is gone"):
            await worker.start_match(running.record)
    finally:
        await worker.close()
        await writer.close()


async def test_a_worker_ladder_pauses_a_bot_through_the_writer(tmp_path: Path) -> None:
    """``pause_bot`` (a worker's ladder after repeated failures) is one transaction the writer commits."""
    from arena_server.store import ratings as ls

    db = tmp_path / "shared.db"
    writer = await Store.open(db)
    socket_path = str(tmp_path / "w.sock")
    unix = await asyncio.start_unix_server(lambda r, w: serve_writes(writer, r, w), socket_path)
    worker = await WorkerStore.connect(str(db), socket_path)
    try:
        await ls.pause_bot(worker, "flaky", 3, "paused after 3 failed matches in a row")
        assert (await ls.paused_bots(worker.conn)) == {"flaky": (3, "paused after 3 failed matches in a row")}
    finally:
        await worker.close()
        unix.close()
        await unix.wait_closed()
        await writer.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT bot_name, paused_version FROM bot_status").fetchall() == [("flaky", 3)]
