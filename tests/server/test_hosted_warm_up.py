"""A hosted bot's one-off first-match work (``warm_up()``) runs off the event loop, once.

numba compiles the tic-tac-toe searches the first time they run, which took up
to two seconds in the bot's ``on_match_start``, on the server's event loop:
every other match and every remote bot waited that long. The hub now runs
``warm_up()`` on a worker thread before seating the bot, and the loop goes on.
The first tests use a bot whose warm-up sleeps; the last starts a real ``arena
serve`` whose ladder plays the lab's minimax and alpha-beta bots (real numba
compilation in a fresh process) and MCTS (0.25 s of search a move, on a
thread) while a client keeps calling the server.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import ClassVar

import grpc

from arena.v1 import games_pb2, games_pb2_grpc
from arena_bots import HostedBot, hosted_bots
from arena_client import Bot, MatchInfo, Termination, Turn
from arena_games import load_game
from arena_server.matches.hub import Hub
from tests.server._serving import free_port, look, start_server, stop_server, wait_for

WARM_SECONDS = 0.6


class Warming(Bot):
    """A bot whose first match in a process needs ``WARM_SECONDS`` of work, like a numba compilation."""

    name = "warming"
    games = ("rps",)
    calls: ClassVar[list[int]] = []  # the thread of every warm-up that did the work
    done = threading.Event()
    lock = threading.Lock()
    fail = False

    def warm_up(self) -> None:
        with Warming.lock:
            if Warming.done.is_set():
                return
            Warming.calls.append(threading.get_ident())
            time.sleep(WARM_SECONDS)  # holds the thread, as a compilation holds its thread
            if Warming.fail:
                raise RuntimeError("the kernels failed to compile, on purpose")
            Warming.done.set()

    def on_match_start(self, match: MatchInfo) -> None:
        self.warm_up()  # what the reference bots do: a no-op once warm

    def act(self, turn: Turn) -> int:
        return 0


def fresh_warming(fail: bool = False) -> None:
    Warming.calls = []
    Warming.done = threading.Event()
    Warming.fail = fail


async def longest_stall(until: asyncio.Future[object]) -> float:
    """The longest gap between two 5 ms ticks of the loop while ``until`` runs."""
    worst = 0.0
    last = time.perf_counter()
    while not until.done():
        await asyncio.sleep(0.005)
        now = time.perf_counter()
        worst = max(worst, now - last)
        last = now
    return worst


def hub_with_warming() -> Hub:
    return Hub(
        None,
        {
            "warming": HostedBot("warming", ("rps",), lambda seed: Warming(), "warms up slowly"),
            "random": hosted_bots()["random"],
        },
    )


async def play_two(hub: Hub) -> list[object]:
    """Start two matches of the warming bot at once and wait for both records."""
    game = load_game("rps", rounds=5)
    starts = asyncio.gather(*(hub.start_match(game, ["warming", "warming"]) for _ in range(2)))
    running = await starts
    return list(await asyncio.gather(*(r.task for r in running if r.task is not None)))


async def test_the_warm_up_runs_once_on_a_worker_thread_and_the_loop_keeps_running() -> None:
    fresh_warming()
    hub = hub_with_warming()
    matches = asyncio.ensure_future(play_two(hub))
    stall = await longest_stall(matches)
    records = matches.result()
    assert [r.termination for r in records] == [Termination.NORMAL] * 2  # type: ignore[attr-defined]
    assert len(Warming.calls) == 1, Warming.calls  # four seats, one warm-up
    assert Warming.calls[0] != threading.get_ident()  # not on the loop's thread
    # On the loop it would have stalled it WARM_SECONDS; off it, the ticks go on.
    assert stall < WARM_SECONDS / 2, f"the event loop stalled {stall:.3f}s while a hosted bot warmed up"
    again = asyncio.ensure_future(play_two(hub))
    assert await longest_stall(again) < WARM_SECONDS / 2
    assert len(Warming.calls) == 1  # warm for good in this process


async def test_a_failing_warm_up_is_left_to_the_match() -> None:
    """The warm-up's error is not the hub's: the match runs, and meets it (here: the bot warms in its own start)."""
    fresh_warming(fail=True)
    hub = hub_with_warming()
    game = load_game("rps", rounds=3)
    running = await hub.start_match(game, ["warming", "random"])
    assert running.task is not None
    record = await running.task
    assert len(Warming.calls) == 2  # the hub's attempt, then the bot's own on_match_start
    assert record.termination == Termination.CRASH, record
    assert "the kernels failed to compile" in record.reason


def list_games_latency(address: str, stop: threading.Event, worst: list[float]) -> None:
    """Call ListGames every 20 ms until ``stop``; keep the slowest answer."""
    with grpc.insecure_channel(address) as channel:
        stub = games_pb2_grpc.GameServiceStub(channel)
        stub.ListGames(games_pb2.ListGamesRequest(), timeout=30)  # connected before the clock starts
        while not stop.is_set():
            started = time.perf_counter()
            stub.ListGames(games_pb2.ListGamesRequest(), timeout=30)
            worst[0] = max(worst[0], time.perf_counter() - started)
            time.sleep(0.02)


def finished_by_bot(db: Path) -> dict[str, int]:
    """How many finished matches each bot has played so far."""
    rows = look(
        db,
        "SELECT s.bot_name, COUNT(*) FROM matches m JOIN match_seats s ON s.match_id = m.id "
        "WHERE m.status = 'finished' GROUP BY s.bot_name",
        [],
    )
    return {str(name): int(count) for name, count in rows}


LADDER = ("lab-minimax-buggy", "lab-alphabeta-buggy", "mcts")


def test_a_real_server_answers_while_its_ladder_compiles_and_runs_the_tic_tac_toe_searches(tmp_path: Path) -> None:
    """The lab's minimax and alpha-beta are recursive numba functions, compiled afresh in every process; MCTS
    searches 0.25 s a move (on a thread: ``tests/server/test_threaded_hosted_seat.py``)."""
    db = tmp_path / "arena.db"
    port = free_port()
    server = start_server(db, port, "--ladder-game", "tic_tac_toe", "--ladder-bots", ",".join(LADDER))
    stop = threading.Event()
    worst = [0.0]
    try:
        pinger = threading.Thread(target=list_games_latency, args=(f"127.0.0.1:{port}", stop, worst))
        pinger.start()
        everyone_played = wait_for(lambda: all(finished_by_bot(db).get(name, 0) >= 1 for name in LADDER))
        stop.set()
        pinger.join(30)
    finally:
        stop.set()
        stop_server(server)
    print(f"slowest ListGames while the ladder's first matches compiled and searched: {worst[0] * 1e3:.0f} ms")
    assert everyone_played, f"within a minute the ladder played only {finished_by_bot(db)}"
    # On the event loop, each compilation held every call for 0.9-1.7 s on this machine, and each MCTS
    # move for 0.25 s.
    assert worst[0] < 0.15, f"the server did not answer for {worst[0]:.3f}s while its hosted bots worked"
