"""Where the SDK runs ``act``: ``threaded=True``, ``False`` and ``"auto"`` (the default), against a real server.

Each bot notes the name of the thread every ``act`` runs on: ``arena-act`` is
the SDK's worker thread, ``MainThread`` the event loop's (the test's loop,
which also runs the server).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import pytest

from arena_client import Bot, Termination, Turn
from arena_client.remote import QUICK_STREAK, SLOW_INLINE_SECONDS, Client
from tests.conftest import LiveServer

WORKER = "arena-act"
LOOP = "MainThread"


class Where(Bot):
    """Plays paper; notes each act's thread; sleeps ``sleep`` seconds in the rounds of ``slow_rounds``."""

    name = "where"
    games = ("rps",)

    def __init__(self, sleep: float = 0.0, slow_rounds: frozenset[int] = frozenset(), always: float = 0.0) -> None:
        self.sleep = sleep
        self.slow_rounds = slow_rounds
        self.always = always
        self.threads: list[str] = []

    def act(self, turn: Turn) -> int:
        self.threads.append(threading.current_thread().name)
        if turn.observation.round in self.slow_rounds:
            time.sleep(self.sleep)
        elif self.always:
            time.sleep(self.always)
        return 1


async def play(live_server: LiveServer, bot: Where, rounds: int, **kwargs: object) -> None:
    client = Client(bot, live_server.address, name=bot.name, **kwargs)  # type: ignore[arg-type]
    results = await client.play(opponent="rock", params={"rounds": rounds})
    assert results[0].termination == Termination.NORMAL, results[0].reason
    assert results[0].returns == (float(rounds), -float(rounds))  # every answer arrived, from either side
    assert len(bot.threads) == rounds


@pytest.fixture
def no_gc_pauses() -> Iterator[None]:
    """No full collection of the test process's heap inside an inline ``act`` (it could pass for a slow act)."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def first_inline(threads: list[str]) -> int:
    assert LOOP in threads, threads
    return threads.index(LOOP)


async def test_auto_moves_a_quick_act_inline_after_a_streak(live_server: LiveServer, no_gc_pauses: None) -> None:
    bot = Where()
    await play(live_server, bot, 100)
    switched = first_inline(bot.threads)
    # In the worker thread until QUICK_STREAK quick answers in a row (more if a hand-off was late),
    # then inline for good.
    assert switched >= QUICK_STREAK, bot.threads
    assert set(bot.threads[:switched]) == {WORKER}
    assert set(bot.threads[switched:]) == {LOOP}, bot.threads


async def test_auto_sends_an_act_that_turns_slow_back_to_the_thread_for_good(
    live_server: LiveServer, no_gc_pauses: None
) -> None:
    bot = Where(sleep=SLOW_INLINE_SECONDS * 2, slow_rounds=frozenset({60}))
    await play(live_server, bot, 100)
    assert first_inline(bot.threads) < 60, bot.threads
    assert bot.threads[60] == LOOP  # it was inline when it turned slow: that one act held the stream
    assert set(bot.threads[61:]) == {WORKER}, bot.threads  # quick again, but never inline again


async def test_auto_keeps_an_act_that_is_never_quick_in_the_thread(live_server: LiveServer) -> None:
    bot = Where(always=0.003)  # longer than the 1 ms spin window every time
    await play(live_server, bot, 20)
    assert set(bot.threads) == {WORKER}, bot.threads


async def test_threaded_true_and_false_never_switch(live_server: LiveServer) -> None:
    threaded = Where()
    await play(live_server, threaded, 40, threaded=True)
    assert set(threaded.threads) == {WORKER}
    inline = Where(sleep=SLOW_INLINE_SECONDS * 2, slow_rounds=frozenset({5}))
    await play(live_server, inline, 40, threaded=False)
    assert set(inline.threads) == {LOOP}  # a slow act does not move it either
