"""The one store writer's CPU per match, against the same matches stored by an in-process store, same run.

With ``arena serve --workers N`` every match's start and end travel from the
worker that plays it to the main process, the only one that writes the
SQLite file (``arena_server.store.writer``). However many cores the workers
have, that one process must keep up: its CPU per match is the ceiling of the
whole server (matches per second at one full core).

Three measurements, interleaved ``--repeats`` times, each over ``--matches``
finished 1,000-round RPS matches (real move logs: random moves and thinking
times) written 8 at a time:

* **writer**: a real writer process (a ``StoreWriter`` beside a real ``Store``,
  its own SQLite file) and, in this process, two ``WorkerStore`` connections
  playing the workers' part over the real Unix socket. The writer's CPU comes
  from ``/proc``;
* **workers' side**: this process's CPU for the same run (building the rows,
  encoding the moves, the socket);
* **in-process**: the same matches written by a ``Store`` in this process, as
  ``arena serve --workers 1`` writes them (its database thread included).

It prints each per match, the ratio of the writer's and workers' sum to the
in-process store (what crossing to the writer adds), and the writer's ceiling.
Last, the writer's own SQL a match when requests reach it one at a time or
several together (``StoreWriter.carry_out``: group commit, one transaction
for the requests read together), which is what a saturated writer sees.
Run: ``.venv/bin/python bench/bench_writer.py [--matches 1000] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from multiprocessing.synchronize import Event
from typing import Any

from bench_remote import cpu_seconds
from bench_workers import own_cpu

from arena_client import SeatInfo, Termination, TimeControl
from arena_games import load_game
from arena_server.referee.records import MatchRecord, MoveLog
from arena_server.store.database import Store

MATCHES = 1000
REPEATS = 3
ROUNDS = 1000
CONCURRENT = 8
WORKERS = 2
DISTINCT = 32
"""Distinct move logs, reused round robin (building 1,000 of them would take longer than storing them)."""


def records() -> list[MatchRecord]:
    game = load_game("rps", rounds=ROUNDS)
    out = []
    for i in range(DISTINCT):
        rng = random.Random(f"bench-writer-{i}")
        log = MoveLog()
        for ply in range(2 * ROUNDS):
            log.add(ply % 2, rng.randrange(3), rng.uniform(5e-6, 5e-4))
        seats = (SeatInfo(0, "rotate"), SeatInfo(1, "beat-last"))
        out.append(MatchRecord("", game, seats, TimeControl(), f"seed-{i}", "ab" * 32, datetime.now(UTC), moves=log))
    return out


async def write(stores: list[Store], recs: list[MatchRecord], matches: int) -> None:
    """``matches`` matches started and finished, ``CONCURRENT`` at a time, spread over ``stores``."""
    left = list(range(matches))

    async def one_at_a_time(k: int) -> None:
        store = stores[k % len(stores)]
        while left:
            record = recs[left.pop() % len(recs)]
            record.termination = record.ended_at = None
            await store.start_match(record)
            record.termination, record.returns, record.ended_at = Termination.NORMAL, (1.0, -1.0), datetime.now(UTC)
            await store.finish_match(record)

    await asyncio.gather(*(one_at_a_time(k) for k in range(CONCURRENT)))


def writer_process(db: str, socket_path: str, ready: Event) -> None:
    from arena_server.store.writer import StoreWriter

    async def serve() -> None:
        await Store.open(db)  # as arena serve: the main store owns the file (its lock, its migrations)
        StoreWriter(db, socket_path).start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(serve())


async def through_writer(db: str, socket_path: str, recs: list[MatchRecord], matches: int) -> None:
    from arena_server.store.writer import WorkerStore

    stores: list[Store] = [await WorkerStore.connect(db, socket_path) for _ in range(WORKERS)]
    try:
        await write(stores, recs, matches)
    finally:
        for store in stores:
            await store.close()


async def in_process(db: str, recs: list[MatchRecord], matches: int) -> None:
    store = await Store.open(db)
    try:
        await write([store], recs, matches)
    finally:
        await store.close()


BATCHES = (1, 2, 4, 8, 16)


def group_commit(recs: list[MatchRecord], folder: str, matches: int) -> dict[int, float]:
    """The writer's own work a match (its SQL, no socket) when requests reach it ``k`` together, for each of
    :data:`BATCHES`: ms of CPU. ``StoreWriter.carry_out`` commits requests read together as one transaction."""
    import sqlite3

    from arena_server.store.database import end_row, start_rows
    from arena_server.store.writer import StoreWriter

    async def prepare() -> list[tuple[Any, Any]]:
        await (await Store.open(db)).close()  # created and migrated, as arena serve leaves it
        out = []
        for record in recs:
            record.termination, record.returns, record.ended_at = Termination.NORMAL, (1.0, -1.0), datetime.now(UTC)
            record.match_id = "0"
            out.append((start_rows(record), await end_row(record)))
        return out

    db = os.path.join(folder, "group.db")
    rows = asyncio.run(prepare())
    writer = StoreWriter(db, os.path.join(folder, "unused.sock"))
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA synchronous = NORMAL")
    out = {}
    try:
        for k in BATCHES:
            start = time.thread_time()
            for first in range(0, matches - matches % k, k):
                starts = [(j, "start", (rows[j % len(rows)][0],)) for j in range(first, first + k)]
                ids = [value for _id, _ok, value in writer.carry_out(conn, starts)]
                ends = [(j, "finish", ((*rows[j % len(rows)][1][:-1], j), None, [])) for j in ids]
                writer.carry_out(conn, ends)
            out[k] = 1e3 * (time.thread_time() - start) / (matches - matches % k)
    finally:
        conn.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=MATCHES)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    args = parser.parse_args()
    if args.matches < 1 or args.repeats < 1:
        parser.error("--matches and --repeats must be at least 1")
    recs = records()
    writer_ms, workers_ms, local_ms = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        db, socket_path = os.path.join(folder, "writer.db"), os.path.join(folder, "writer.sock")
        context = multiprocessing.get_context("spawn")
        ready = context.Event()
        writer = context.Process(target=writer_process, args=(db, socket_path, ready), daemon=True)
        writer.start()
        if not ready.wait(60):
            raise SystemExit("the writer process did not start")
        assert writer.pid is not None
        try:
            asyncio.run(through_writer(db, socket_path, recs, 50))  # warm-up
            asyncio.run(in_process(os.path.join(folder, "local.db"), recs, 50))
            for _ in range(args.repeats):
                before, mine, start = cpu_seconds(writer.pid), own_cpu(), time.perf_counter()
                asyncio.run(through_writer(db, socket_path, recs, args.matches))
                wall = time.perf_counter() - start
                writer_ms.append(1e3 * (cpu_seconds(writer.pid) - before) / args.matches)
                workers_ms.append(1e3 * (own_cpu() - mine) / args.matches)
                mine = own_cpu()
                asyncio.run(in_process(os.path.join(folder, "local.db"), recs, args.matches))
                local_ms.append(1e3 * (own_cpu() - mine) / args.matches)
                print(
                    f"  {args.matches} matches: writer {writer_ms[-1]:.3f} ms, workers' side {workers_ms[-1]:.3f} ms, "
                    f"in-process {local_ms[-1]:.3f} ms CPU a match ({args.matches / wall:.0f} matches/s via the writer)"
                )
        finally:
            writer.kill()
    w, k, local = (statistics.median(x) for x in (writer_ms, workers_ms, local_ms))
    print(
        f"{args.matches} finished {ROUNDS}-round RPS matches, {CONCURRENT} at a time, median of {args.repeats}; "
        f"Python {sys.version.split()[0]}"
    )
    print(f"store writer (main process)     : {w:6.3f} ms CPU a match")
    print(f"workers' side of the same writes: {k:6.3f} ms CPU a match")
    print(f"in-process store (--workers 1)  : {local:6.3f} ms CPU a match")
    print(f"through the writer / in-process : {(w + k) / local:6.2f}x")
    print(f"the writer's ceiling            : {1e3 / w:6.0f} matches/s at one full core")
    with tempfile.TemporaryDirectory() as folder:
        batches = group_commit(recs, folder, args.matches)
    each = ", ".join(f"{k} together {ms:.3f}" for k, ms in batches.items())
    print(f"the writer's SQL a match        : {each} ms (group commit)")


if __name__ == "__main__":
    main()
