"""Hosted bots that think long (``thinks_off_loop = True``) move on a worker thread, beside the event loop.

The tic-tac-toe MCTS bots search 0.25 s a move; on the loop, each move held
every other match and every remote bot for that long. Here a bot that sleeps
in ``act`` (releasing the GIL, as the search kernels do) stands for them.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from arena_bots import HostedBot, hosted_bots
from arena_bots.tic_tac_toe.lab_pure_mc import LabPureMC
from arena_client import Bot, MatchResult, Termination, Turn
from arena_games import load_game
from arena_games.rps import RpsObservation
from arena_server.matches.hub import Hub
from arena_server.referee.loop import STRETCH
from arena_server.seats.in_process import ThreadedInProcessSeat
from tests.server.test_hosted_warm_up import longest_stall

THINK = 0.2


class Thinker(Bot):
    """Plays paper after ``THINK`` seconds of 'search'; notes where and in what order it was called."""

    name = "thinker"
    games = ("rps", "tic_tac_toe")
    thinks_off_loop = True

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.threads: list[int] = []
        self.events: list[str] = []
        self.thinking = threading.Event()

    def act(self, turn: Turn) -> int:
        self.threads.append(threading.get_ident())
        self.events.append("act")
        self.thinking.set()
        time.sleep(THINK)
        if self.fail:
            raise RuntimeError("the search failed, on purpose")
        self.events.append("acted")
        return 1 if isinstance(turn.observation, RpsObservation) else turn.legal_actions[0]  # paper, or a cell

    def on_match_end(self, result: MatchResult) -> None:
        self.events.append("end")


def hub_with(*bots: Thinker) -> tuple[Hub, list[Thinker]]:
    made: list[Thinker] = []
    queue = list(bots)

    def factory(seed: int) -> Bot:
        made.append(queue.pop(0))
        return made[-1]

    hosted = {name: hosted_bots()[name] for name in ("rock", "random")}
    hosted["thinker"] = HostedBot("thinker", Thinker.games, factory, "thinks on a thread")
    return Hub(None, hosted), made


async def test_a_thinking_bot_moves_on_a_thread_and_the_loop_runs_meanwhile() -> None:
    hub, made = hub_with(Thinker())
    running = await hub.start_match(load_game("rps", rounds=4), ["thinker", "rock"])
    assert running.task is not None
    stall = await longest_stall(running.task)
    record = await running.task
    bot = made[0]
    assert record.termination == Termination.NORMAL, record
    assert record.returns == (4.0, -4.0)  # paper beats rock four times: the answers arrived, in order
    assert len(bot.threads) == 4 and threading.get_ident() not in bot.threads
    assert stall < THINK / 2, f"the event loop stalled {stall:.3f}s while a hosted bot thought"
    moves = record.moves
    thought = [moves.elapsed_us[i] for i in range(len(moves)) if moves.players[i] == 0]
    assert all(us >= THINK * 1e6 * 0.9 for us in thought), thought  # its thinking is on its clock
    assert bot.events[-1] == "end"


async def test_both_seats_of_a_simultaneous_move_think_at_once() -> None:
    hub, made = hub_with(Thinker(), Thinker())
    started = time.perf_counter()
    running = await hub.start_match(load_game("rps", rounds=3), ["thinker", "thinker"])
    assert running.task is not None
    record = await running.task
    took = time.perf_counter() - started
    assert record.termination == Termination.NORMAL and record.returns == (0.0, 0.0), record
    assert [len(b.threads) for b in made] == [3, 3]
    # Side by side, three rounds take about 3 * THINK, not 6 * THINK.
    assert took < 5 * THINK, took


async def test_an_abort_while_it_thinks_ends_the_match_and_its_end_waits_for_the_move() -> None:
    hub, made = hub_with(Thinker())
    running = await hub.start_match(load_game("rps", rounds=100), ["thinker", "rock"])
    assert running.task is not None
    await asyncio.wait_for(asyncio.to_thread(lambda: made[0].thinking.wait(10)), 15)
    running.control.abort("stopped by the test")
    record = await running.task
    assert record.termination == Termination.ABORTED and record.reason == "stopped by the test", record
    # Its hooks are never called while its act runs on the other thread.
    assert made[0].events[-3:] == ["act", "acted", "end"], made[0].events


async def test_a_thinking_bot_that_raises_crashes_its_match() -> None:
    hub, _ = hub_with(Thinker(fail=True))
    running = await hub.start_match(load_game("tic_tac_toe"), ["random", "thinker"])
    assert running.task is not None
    record = await running.task
    assert record.termination == Termination.CRASH and record.offender == 1, record
    assert "raised in act" in record.reason and "the search failed" in record.reason


class Ponderer(Bot):
    """Thinks 5 ms a move on the loop's own thread (no ``thinks_off_loop``): a few ms are not worth a thread."""

    name = "ponderer"
    games = ("rps",)

    def act(self, turn: Turn) -> int:
        time.sleep(0.005)
        return 0


async def test_an_in_process_match_of_bots_thinking_milliseconds_lets_the_loop_run_between_moves() -> None:
    """20 decisions of two 5 ms bots: 0.2 s. Fewer than 256 decisions, it was one step of the loop."""
    hosted = {"ponderer": HostedBot("ponderer", ("rps",), lambda seed: Ponderer(), "thinks 5 ms a move")}
    hub = Hub(None, hosted)
    running = await hub.start_match(load_game("rps", rounds=20), ["ponderer", "ponderer"])
    assert running.task is not None
    stall = await longest_stall(running.task)
    record = await running.task
    assert record.termination == Termination.NORMAL and len(record.moves) == 40, record
    # It lets the loop run once its bots have thought 0.5 ms (STRETCH): here after every decision.
    assert stall < 0.06, f"the event loop stalled {stall:.3f}s during a match of bots thinking 5 ms a move"


async def turns_of_the_loop(hub: Hub, seats: list[str], rounds: int) -> list[float]:
    """When the loop turned during an RPS match of ``seats``: a callback that schedules itself again each time
    runs once per turn of the loop."""
    loop = asyncio.get_running_loop()
    turns: list[float] = []
    done = False

    def probe() -> None:
        turns.append(time.perf_counter())
        if not done:
            loop.call_soon(probe)

    running = await hub.start_match(load_game("rps", rounds=rounds), seats)
    assert running.task is not None
    loop.call_soon(probe)
    record = await running.task
    done = True
    assert record.termination == Termination.NORMAL and len(record.moves) == 2 * rounds, record
    return turns


async def test_an_in_process_match_of_quick_bots_lets_the_loop_run_every_half_millisecond() -> None:
    """Its stretches between two turns of the loop last about STRETCH (0.5 ms): not 256 decisions, nor much less.

    ``rock`` against itself thinks next to nothing: the stretches are the referee's own work. 256 decisions
    of it took 0.8-2.6 ms, and a remote bot's move beside such a match waits for about two stretches. Much
    shorter than STRETCH would come near the GIL's switch interval, and the server's threads would starve
    (test_switch_interval.py).
    """
    hub = Hub(None, {"rock": hosted_bots()["rock"]})
    turns = await turns_of_the_loop(hub, ["rock", "rock"], 20_000)
    stretches = sorted(b - a for a, b in itertools.pairwise(turns))
    median = stretches[len(stretches) // 2]
    print(f"{len(turns)} turns of the loop in 20,000 rounds of rock against rock; median stretch {median * 1e3:.2f} ms")
    assert 0.8 * STRETCH < median < 1.5 * STRETCH, median


def test_the_hub_seats_the_searching_bots_on_threads() -> None:
    """The reference bots that search for their whole budget each move say so."""
    seats: dict[str, Any] = {}
    threaded = {
        "mcts": True,
        "mcts-threats": True,
        "lab-minimax-buggy": True,
        "lab-alphabeta-buggy": False,
        "lab-uct": True,
        "lab-pure-mc": True,
        "pure-mc": True,
        "boxes-mcts": True,
        "solver": True,
        "minimax": False,
        "chains": False,
        "greedy": False,
        "rock": False,
    }
    for name in threaded:
        bot = hosted_bots()[name].factory(0)
        seats[name] = getattr(bot, "thinks_off_loop", False)
    assert seats == threaded
    assert ThreadedInProcessSeat(Thinker()).synchronous is False  # asked, not called, by the referee


Search = Callable[[], object]
"""One move's search of a hosted bot, ready to call."""


def _mcts_search() -> Search:
    bot = hosted_bots()["mcts"].factory(0)
    bot.warm_up()  # compiled (or loaded) before the clock below starts
    bot.rows = bot.cols = bot.k = 5  # an open 5x5 board: a search of the whole budget, no forced move
    bot.seconds = 1.0  # (its chunks grow with the budget: up to a quarter of what is left)
    board = np.full(25, -1, dtype=np.int8)
    return lambda: bot.choose(board, 0)


def _pure_mc_search() -> Search:
    bot = hosted_bots()["pure-mc"].factory(0)
    bot.rows, bot.cols, bot.k = 7, 7, 5  # 49 empty cells: about 0.1 s in one call of its kernel
    board = np.full(49, -1, dtype=np.int8)
    return lambda: bot.choose(board, 0)


def _lab_pure_mc_search() -> Search:
    bot = LabPureMC(0, simulations=5000)  # 5,000 playouts a cell on 4x4: about 0.1 s in one call of its kernel
    bot.rows = bot.cols = bot.k = 4
    board = np.full(16, -1, dtype=np.int8)
    return lambda: bot.choose(board, 0)


@pytest.mark.parametrize("make", [_mcts_search, _pure_mc_search, _lab_pure_mc_search], ids=lambda f: f.__name__[1:])
def test_a_threaded_bots_search_lets_other_threads_run_while_it_searches(make: Callable[[], Search]) -> None:
    """Their kernels release the GIL (``nogil``): on a thread, a search does not hold up the loop's thread.

    This thread spins while the search runs on another and notes its longest gap. Holding the GIL,
    each call of a search kernel (about 0.1 s here) would be such a gap; released, the gaps are the
    interpreter's switches between the two threads' Python parts, a few ms.
    """
    search = make()
    search()  # compiled (or loaded) before the clock below starts
    searcher = threading.Thread(target=search)
    worst = 0.0
    # The clock starts before start(), which returns once the new thread runs: a kernel that holds the GIL
    # from its first call to its last keeps this thread inside start() meanwhile.
    started = last = time.perf_counter()
    searcher.start()
    while True:
        alive = searcher.is_alive()
        now = time.perf_counter()
        worst = max(worst, now - last)  # (the last gap too)
        last = now
        if not alive:
            break
    searcher.join()
    took = time.perf_counter() - started
    print(f"longest wait of this thread during a {took * 1e3:.0f} ms search: {worst * 1e3:.1f} ms")
    assert took > 0.06  # a search long enough to tell a held GIL from a released one
    assert worst < 0.03, f"this thread waited {worst * 1e3:.0f} ms while the search held the GIL"


async def test_matches_of_the_searching_bots_on_big_boards_leave_the_loop_running() -> None:
    """``lab-uct``, ``pure-mc`` and ``boxes-mcts`` think 20-150 ms a move on these boards: threads, not the loop.

    Seated on the loop (as they were), three such matches held it for up to 460 ms at a time.
    """
    names = ("lab-uct", "pure-mc", "boxes-mcts", "random")
    hub = Hub(None, {name: hosted_bots()[name] for name in names})
    for name in names[:3]:
        hosted_bots()[name].factory(0).warm_up()  # (compiled or loaded before the matches start)
    games = [
        (load_game("tic_tac_toe", rows=6, cols=6, k=4), ["lab-uct", "random"]),
        (load_game("tic_tac_toe", rows=6, cols=6, k=4), ["random", "pure-mc"]),
        (load_game("dots_and_boxes", rows=6, cols=6), ["boxes-mcts", "random"]),
    ]
    running = [await hub.start_match(game, seats) for game, seats in games]
    tasks = [r.task for r in running if r.task is not None]
    stall = await longest_stall(asyncio.gather(*tasks))
    records = [await task for task in tasks]
    assert [r.termination for r in records] == [Termination.NORMAL] * 3, records
    searcher_seats = [0, 1, 0]  # (the seat of lab-uct, pure-mc and boxes-mcts in their matches)
    slowest = max(
        r.moves.elapsed_us[i]
        for r, seat in zip(records, searcher_seats, strict=True)
        for i in range(len(r.moves))
        if r.moves.players[i] == seat
    )
    print(f"the loop's longest stall: {stall * 1e3:.1f} ms; the slowest move: {slowest / 1e3:.1f} ms")
    assert slowest > 60_000  # moves long enough that one on the loop would show
    assert stall < 0.05, f"the event loop stalled {stall * 1e3:.0f} ms while hosted bots searched"
