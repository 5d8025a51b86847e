"""The rated ladder on ``arena serve --workers 2``: a real server, the real SQLite file, real signals.

The main process runs the one ladder (the coordinator) and the workers play its
units; the workers' rated results go through the one store writer, which
computes their rating effects inside the transaction, and the main process
refits. The tests let both workers play rated matches, stop the server, and
check that every finished match is rated exactly once and that ``arena ratings
recompute --check`` finds the stored ratings equal to a recomputation from the
records; and what the one ladder promises over both workers (per-bot limits,
concurrency, pauses, redirects).
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import sqlite3
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import grpc

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import bot_session_pb2_grpc as bs_grpc
from arena.v1 import bots_pb2 as bp
from arena.v1 import bots_pb2_grpc as bp_grpc
from arena.v1 import common_pb2 as common
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client import Bot, Termination, Turn
from arena_client.convert import params_to_proto
from arena_client.remote import Client
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
from tests.server.test_workers import child_cpu, own_ports, port_of, worker_holding

T = TypeVar("T")

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


class Cycle(Bot):
    games = ("rps",)

    def act(self, turn: Turn) -> int:
        return turn.turn_id % 3


class Liar(Bot):
    games = ("rps",)

    def act(self, turn: Turn) -> int:
        return 7  # (RPS has actions 0-2)


def address(i: int, port: int) -> str:
    """The ``i``-th bot's own address: the kernel spreads the connections of many addresses over the workers."""
    return f"127.0.0.{i + 2}:{port}"


async def registered_clients(
    port: int,
    names: list[str],
    bot: Callable[[str], Bot] = lambda _name: Cycle(),
    follow: bool = True,
    first: int = 0,
) -> list[Client]:
    """Register ``names`` for RPS and make each an SDK client from :func:`address` ``first + i`` (not connected)."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = bp_grpc.BotServiceStub(channel)
        tokens = {n: (await stub.RegisterBot(bp.RegisterBotRequest(name=n, games=["rps"]))).token for n in names}
    return [
        Client(bot(n), address(i, port), name=n, token=tokens[n], follow_redirects=follow) for i, n in enumerate(names)
    ]


class Playing:
    """``async with Playing(clients)``: every client plays (waits to be seated) until the block ends."""

    def __init__(self, clients: list[Client]) -> None:
        self.clients = clients
        self.tasks: list[asyncio.Task[object]] = []

    async def __aenter__(self) -> Playing:
        self.tasks = [asyncio.ensure_future(c.play()) for c in self.clients]
        while not all(c.session_token for c in self.clients):
            await asyncio.sleep(0.05)
        return self

    async def __aexit__(self, *_exc: object) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def ladder_of_remote_bots(
    db: Path,
    names: list[str],
    rounds: int,
    concurrency: int,
    scenario: Callable[[subprocess.Popen[str], int], Awaitable[T]],
    *extra: str,
) -> tuple[T, str]:
    """``arena serve --workers 2`` on every address, its ladder over the remote bots ``names`` (RPS); run
    ``scenario(server, port)``, then stop the server with SIGTERM. The scenario's result and what the server
    wrote on stderr, checked: it stopped, with no traceback."""
    options = ("--workers", "2", "--host", "0.0.0.0", "--ladder-game", f"rps:rounds={rounds}")
    proc = serve(db, *options, "--concurrency", str(concurrency), "--ladder-bots", ",".join(names), *extra)
    try:
        result = asyncio.run(scenario(proc, port_of(proc)))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        err = close(proc)
    assert "stopped" in err and "Traceback" not in err, err
    return result, err


def test_both_workers_play_rated_matches_and_the_ratings_recompute_clean(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    proc = serve(db, *LADDER)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]
        assert any("ladder running for" in line and "played on the 2 workers" in line for line in lines), lines
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
    """The ladder also pairs remote bots connected to different workers; one that does not follow redirects
    plays through its worker's relay: rated matches between bots on different workers are played, rated
    once, and recompute clean."""
    names = [f"r-{i}" for i in range(REMOTE)]
    db = tmp_path / "arena.db"

    async def scenario(proc: subprocess.Popen[str], port: int) -> dict[str, int]:
        # (not following redirects: these bots stay where they connected, and matches across workers are relayed)
        async with Playing(await registered_clients(port, names, follow=False)):
            where = {n: worker_holding(proc, address(i, port).split(":")[0], port) for i, n in enumerate(names)}
            await asyncio.to_thread(wait_for, db, FINISHED_RATED, 40, 90)
            return where

    where, _err = ladder_of_remote_bots(db, names, 20, 4, scenario, "--ladder-interval", "0")
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


def overlaps(db: Path) -> tuple[list[tuple[str, int, int]], int]:
    """The rated matches one bot played at the same time as another of its own, and the most matches at once.

    From the stored start and end of every finished rated match (both workers' clocks are this machine's).
    """
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute(
            "SELECT m.id, m.started_at, m.ended_at, s.bot_name FROM matches m JOIN match_seats s ON s.match_id = m.id "
            "WHERE m.rated = 1 AND m.status = 'finished' ORDER BY m.started_at"
        ).fetchall()
    finally:
        conn.close()
    by_bot: dict[str, list[tuple[str, str, int]]] = {}
    spans: dict[int, tuple[str, str]] = {}
    for match_id, started, ended, bot in rows:
        by_bot.setdefault(bot, []).append((started, ended, match_id))
        spans[match_id] = (started, ended)
    clashes = []
    for bot, matches in by_bot.items():
        for (_s1, end1, first), (start2, _e2, second) in itertools.pairwise(matches):
            if start2 < end1:
                clashes.append((bot, first, second))
    events = sorted([(s, 1) for s, _e in spans.values()] + [(e, -1) for _s, e in spans.values()])
    running = most = 0
    for _at, step in events:  # (an end and a start at the same instant: the end first, -1 < 1)
        running += step
        most = max(most, running)
    return clashes, most


def test_one_ladder_pairs_for_both_workers_so_per_bot_and_concurrency_hold_over_the_server(tmp_path: Path) -> None:
    """The main process's coordinator pairs for every worker: with ``--per-bot 1`` a bot never plays two rated
    matches at once, whichever workers run them, and no more than ``--concurrency`` matches run together.

    With a ladder in each worker (before), each worker seated every hosted bot once and ran its own share
    of the concurrency, rounded up: the same bot played on both workers within seconds, and four matches
    ran at once for a ``--concurrency`` of 3.
    """
    db = tmp_path / "arena.db"
    proc = serve(
        db,
        "--workers",
        "2",
        "--ladder-game",
        "rps:rounds=1000",
        "--ladder-bots",
        "rotate,beat-last,rock,random,markov-1,markov-2,always-loop,supp",
        "--concurrency",
        "3",
        "--per-bot",
        "1",
        "--ladder-interval",
        "0",
    )
    try:
        before = child_cpu(proc)
        wait_for(db, FINISHED_RATED, 40, timeout=90)
        after = child_cpu(proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        err = close(proc)
    assert "stopped" in err and "failed" not in err and "lost worker" not in err, err
    worked = sorted(after[pid] - before.get(pid, 0.0) for pid in after)
    assert worked[-2] > 0.2, worked  # both workers refereed units of hosted bots
    clashes, most = overlaps(db)
    assert clashes == [], clashes
    assert most <= 3, most  # (eight bots could play four matches at once)
    check_rated_exactly_once(db)
    recompute_clean(db)


def test_a_remote_bot_failing_on_a_two_worker_server_is_paused_after_exactly_pause_after_matches(
    tmp_path: Path,
) -> None:
    """``--pause-after 2`` on ``--workers 2``: a registered remote bot that answers every turn with an illegal
    action plays exactly two rated matches, both lost for its illegal action, and is paused with that reason;
    the ladder goes on with the others. Its bots connect from several addresses, so they sit on both workers."""
    names = ["liar", "r-0", "r-1", "r-2", "r-3"]
    db = tmp_path / "arena.db"
    liar_matches = (
        "SELECT COUNT(*) FROM matches m JOIN match_seats s ON s.match_id = m.id "
        "WHERE s.bot_name = 'liar' AND m.rated = 1 AND m.status = 'finished'"
    )

    async def scenario(_proc: subprocess.Popen[str], port: int) -> None:
        clients = await registered_clients(port, names, lambda n: Liar() if n == "liar" else Cycle())
        async with Playing(clients):
            await asyncio.to_thread(wait_for, db, "SELECT COUNT(*) FROM bot_status WHERE bot_name = 'liar'", 1, 60)
            paused_at = query(db, FINISHED_RATED)
            await asyncio.to_thread(wait_for, db, FINISHED_RATED, paused_at + 15, 60)  # the others play on

    ladder_of_remote_bots(db, names, 30, 2, scenario, "--ladder-interval", "0", "--pause-after", "2")
    assert query(db, liar_matches) == 2
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    endings = conn.execute(
        "SELECT m.termination, m.offender = s.seat FROM matches m JOIN match_seats s ON s.match_id = m.id "
        "WHERE s.bot_name = 'liar' AND m.rated = 1"
    ).fetchall()
    version, reason = conn.execute(
        "SELECT paused_version, paused_reason FROM bot_status WHERE bot_name = 'liar'"
    ).fetchone()
    conn.close()
    assert endings == [(int(Termination.ILLEGAL_ACTION), 1)] * 2, endings
    assert version == 1 and reason.startswith("paused after 2 failed matches in a row (last: illegal action"), reason
    check_rated_exactly_once(db)


def test_the_ladder_moves_a_remote_bot_that_follows_redirects_to_the_worker_of_its_match(tmp_path: Path) -> None:
    """Remote bots on different workers: one that follows redirects (the SDK's default) is told to reconnect
    on the port of the worker that referees its next match, and does, so the match is not relayed; one whose
    Hello did not ask is never redirected (it is relayed, as before). Every match is rated once."""
    import re

    followers = [f"f-{i}" for i in range(8)]
    others = [f"n-{i}" for i in range(4)]
    db = tmp_path / "arena.db"

    async def scenario(_proc: subprocess.Popen[str], port: int) -> list[Client]:
        clients = await registered_clients(port, followers, follow=True)
        clients += await registered_clients(port, others, follow=False, first=len(followers))
        async with Playing(clients):
            await asyncio.to_thread(wait_for, db, FINISHED_RATED, 60, 90)
        return clients

    clients, err = ladder_of_remote_bots(db, followers + others, 30, 4, scenario, "--ladder-interval", "0")
    moved = re.search(r"(\d+) remote bots moved to the worker of their match", err)
    assert moved is not None, err
    by_name = {c.name: c for c in clients}
    followed = sum(by_name[n].redirects for n in followers)
    assert followed >= 1 and int(moved.group(1)) >= followed, (followed, err)
    for n in followers:  # each redirect was one more welcome, on the worker's own port (the last may have been
        # cut short by the end of the test, when the clients stop)
        client = by_name[n]
        assert client.redirects <= client.connections <= 1 + client.redirects, (n, client.connections, client.redirects)
    for n in others:
        assert by_name[n].redirects == 0 and by_name[n].connections == 1, n
    assert query(db, FINISHED_RATED) >= 60
    check_rated_exactly_once(db)
    recompute_clean(db)


class SlowMover:
    """A bot at the protocol level (no SDK) that follows a Redirect only after ``delay`` seconds.

    It plays the first legal action. :attr:`redirected` is set when a Redirect arrives, and
    :attr:`where` holds the address of each stream that welcomed it.
    """

    def __init__(self, name: str, token: str, host: str, port: int, delay: float) -> None:
        self.hello = bs.Hello(
            protocol_version="arena.v1", name=name, token=token, games=["rps"], follows_redirects=True
        )
        self.host, self.port, self.delay = host, port, delay
        self.redirected = asyncio.Event()
        self.welcomed = asyncio.Event()
        self.where: list[str] = []

    async def run(self) -> None:
        port = self.port
        while True:
            port = await self._stream(port)
            self.redirected.set()
            await asyncio.sleep(self.delay)

    async def _stream(self, port: int) -> int:
        """One stream, until the server redirects it; the port it names."""
        async with grpc.aio.insecure_channel(f"{self.host}:{port}") as channel:
            call = bs_grpc.BotSessionServiceStub(channel).Play()
            await call.write(bs.BotMessage(hello=self.hello))
            async for message in call:
                kind = message.WhichOneof("kind")
                if kind == "welcome":
                    self.where.append(f"{self.host}:{port}")
                    self.welcomed.set()
                elif kind == "turn":
                    turn = message.turn
                    action = bs.Action(match_id=turn.match_id, turn_id=turn.turn_id, action=turn.legal_actions[0])
                    await call.write(bs.BotMessage(action=action))
                elif kind == "ping":
                    await call.write(bs.BotMessage(pong=bs.Pong(nonce=message.ping.nonce)))
                elif kind == "redirect":
                    return message.redirect.port
        raise AssertionError(f"the stream to {self.host}:{port} ended without a Redirect")


def test_a_match_asked_for_while_a_redirected_bot_reconnects_waits_for_it(tmp_path: Path) -> None:
    """Between a Redirect and the bot's claim on its new worker the bot is on its way, not gone: a
    ``CreateMatch`` naming it in that time (here a whole second: the bot takes its time) waits for it and
    plays, instead of answering that no such bot is connected."""
    partners = [f"p-{i}" for i in range(4)]
    db = tmp_path / "arena.db"

    async def scenario(proc: subprocess.Popen[str], port: int) -> tuple[mp.CreateMatchResponse, SlowMover]:
        clients = await registered_clients(port, partners, follow=False)  # (they stay where they connect)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            token = (await bp_grpc.BotServiceStub(channel).RegisterBot(bp.RegisterBotRequest(name="slow"))).token
        async with Playing(clients):
            workers = {worker_holding(proc, address(i, port).split(":")[0], port) for i in range(len(partners))}
            mover = None
            for host in (f"127.0.1.{i}" for i in range(2, 40)):  # (a source address the kernel gives a worker
                # that not every partner is on: the ladder then pairs it across workers)
                mover = SlowMover("slow", token, host, port, delay=1.0)
                running = asyncio.ensure_future(mover.run())
                await asyncio.wait_for(mover.welcomed.wait(), 20)
                if len(workers) == 2 or worker_holding(proc, host, port) not in workers:
                    break
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
            assert mover is not None
            try:
                await asyncio.wait_for(mover.redirected.wait(), 60)
                tokens = {"slow": token}
                request = mp.CreateMatchRequest(game="rps", bots=["slow", "rock"], bot_tokens=tokens, wait=True)
                params_to_proto({"rounds": 5}, request.params)
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                    reply = await mp_grpc.MatchServiceStub(channel).CreateMatch(request, timeout=60)
            finally:
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
        return reply, mover

    (reply, mover), _err = ladder_of_remote_bots(db, ["slow", *partners], 20, 2, scenario, "--ladder-interval", "0")
    assert [seat.bot_name for seat in reply.record.seats] == ["slow", "rock"]
    assert reply.record.termination == common.TERMINATION_NORMAL, reply.record
    assert len(mover.where) >= 2 and mover.where[-1] != mover.where[0], mover.where  # (it was on its way)


def test_a_challenge_between_bots_on_different_workers_moves_the_opponent_to_the_challengers_worker(
    tmp_path: Path,
) -> None:
    """Not only the ladder: any match that seats a bot connected to another worker offers that worker this
    one's own port. An idle opponent that follows redirects is moved here and plays with no relay; one that
    does not follow is relayed, as before. Both challenges are played to their end."""
    db = tmp_path / "arena.db"
    proc = serve(db, "--workers", "2", "--host", "0.0.0.0", "--no-ladder")

    async def scenario(port: int) -> tuple[list[Client], list[int]]:
        challenger, follower, stayer = await registered_clients(port, ["x", "y", "z"])
        stayer.follow_redirects = False
        clients = [challenger, follower, stayer]
        async with Playing([follower, stayer]):
            where = [worker_holding(proc, address(i, port).split(":")[0], port) for i in (1, 2)]
            # (the challenger connects to the other worker's own port than "y"'s: the kernel's choice for the
            # shared port changes from one connection to the next)
            ours, own = next((pid, own) for pid, own in own_ports(proc, port).items() if pid != where[0])
            challenger.target = f"127.0.0.1:{own}"
            for opponent in ("y", "z"):
                results = await challenger.play(opponent=opponent, game="rps", params={"rounds": 30}, give_up_after=20)
                assert len(results) == 1 and results[0].termination == Termination.NORMAL, results
        return clients, [ours, *where]

    try:
        (clients, workers) = asyncio.run(scenario(port_of(proc)))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        err = close(proc)
    assert "Traceback" not in err, err
    challenger, follower, stayer = clients
    assert workers[0] != workers[1], workers
    assert follower.redirects == 1 and follower.redirected_to is not None, (follower.redirects, err)
    assert stayer.redirects == 0 and stayer.connections == 1
    assert challenger.redirects == 0
