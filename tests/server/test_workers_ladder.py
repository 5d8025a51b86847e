"""The rated ladder on ``arena serve --workers 2``: a real server, the real SQLite file, real signals.

Each worker runs a ladder over the bots it can reach (every hosted bot, and the
remote bots connected to it) with its share of ``--concurrency``; the worker's
rated results go through the one store writer, which computes their rating
effects inside the transaction, and the main process refits. The test lets
both workers play rated matches, stops the server, and checks that every
finished match is rated exactly once and that ``arena ratings recompute
--check`` finds the stored ratings equal to a recomputation from the records.
"""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path

from tests.ladder.test_crash import (
    FINISHED_RATED,
    RUNNING,
    check_rated_exactly_once,
    close,
    query,
    recompute_clean,
    serve,
    wait_for,
)
from tests.server.test_workers import child_cpu

LADDER = (
    "--workers",
    "2",
    "--ladder-game",
    "rps:rounds=200",
    "--ladder-bots",
    "rotate,beat-last,rock,paper,markov-1",
    "--concurrency",
    "4",
    "--per-bot",
    "2",
    "--ladder-interval",
    "0",
)


def test_both_workers_play_rated_matches_and_the_ratings_recompute_clean(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    proc = serve(db, *LADDER)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]
        assert any("ladder running for" in line and "in every worker" in line for line in lines), lines
        before = child_cpu(proc)
        wait_for(db, FINISHED_RATED, 30, timeout=60)
        time.sleep(1.0)
        after = child_cpu(proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        err = close(proc)
    assert "stopped" in err and "failed" not in err, err
    worked = sorted(after[pid] - before.get(pid, 0.0) for pid in after)  # the workers (and the spawn helper)
    assert worked[-2] > 0.2, worked  # both workers refereed (not one doing it all)
    assert query(db, RUNNING) == 0
    finished = check_rated_exactly_once(db)
    assert finished >= 30
    recompute_clean(db)


REMOTE = 12
"""Registered remote bots, each connecting from its own address: all on one worker about once in 2,048 runs."""


def test_the_ladder_pairs_remote_bots_connected_to_different_workers(tmp_path: Path) -> None:
    """Each worker's ladder also seats the remote bots connected to the other worker (through its relay):
    rated matches between bots on different workers are played, rated once, and recompute clean."""
    import asyncio

    import grpc

    from arena.v1 import bots_pb2 as bp
    from arena.v1 import bots_pb2_grpc as bp_grpc
    from arena_client import Bot, Turn
    from arena_client.remote import Client
    from tests.server.test_workers import port_of, worker_holding

    names = [f"r-{i}" for i in range(REMOTE)]
    db = tmp_path / "arena.db"
    options = ("--workers", "2", "--host", "0.0.0.0", "--ladder-game", "rps:rounds=20", "--concurrency", "4")
    proc = serve(db, *options, "--ladder-bots", ",".join(names), "--ladder-interval", "0")

    class Cycle(Bot):
        games = ("rps",)

        def act(self, turn: Turn) -> int:
            return turn.turn_id % 3

    try:
        port = port_of(proc)

        async def scenario() -> dict[str, int]:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = bp_grpc.BotServiceStub(channel)
                tokens = {
                    n: (await stub.RegisterBot(bp.RegisterBotRequest(name=n, games=["rps"]))).token for n in names
                }
            clients = [Client(Cycle(), f"127.0.0.{i + 2}:{port}", name=n, token=tokens[n]) for i, n in enumerate(names)]
            playing = [asyncio.ensure_future(c.play()) for c in clients]
            try:
                while not all(c.session_token for c in clients):
                    await asyncio.sleep(0.05)
                where = {n: worker_holding(proc, f"127.0.0.{i + 2}", port) for i, n in enumerate(names)}
                await asyncio.to_thread(wait_for, db, FINISHED_RATED, 40, 90)
                return where
            finally:
                for task in playing:
                    task.cancel()
                await asyncio.gather(*playing, return_exceptions=True)

        where = asyncio.run(scenario())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        err = close(proc)
    assert "stopped" in err and "Traceback" not in err, err
    assert len(set(where.values())) == 2, where  # (both workers hold some of the bots)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    pairs = conn.execute(
        "SELECT a.bot_name, b.bot_name FROM matches m JOIN match_seats a ON a.match_id = m.id AND a.seat = 0 "
        "JOIN match_seats b ON b.match_id = m.id AND b.seat = 1 WHERE m.rated = 1 AND m.status = 'finished'"
    ).fetchall()
    conn.close()
    across = [pair for pair in pairs if where[pair[0]] != where[pair[1]]]
    assert len(across) >= 5, (len(pairs), where)  # (about half of the pairs are across workers)
    check_rated_exactly_once(db)
    recompute_clean(db)
