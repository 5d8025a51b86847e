"""Time is the bot's: a busy server never makes a bot lose on time, and a slow bot still does.

A background task stalls this very event loop with ``time.sleep(0.3)`` again and again
(leaving it 20 ms between stalls) while a real subprocess bot plays with a 0.2 s per-move
budget, no overage and no grace.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from arena_client import Termination, TimeControl
from arena_games import load_game
from arena_server.referee.loop import play_match
from tests.conftest import LiveServer
from tests.server._stdio_helpers import fake, random_seat, seat_for

TIGHT = TimeControl(timedelta(seconds=0.2), timedelta(0), timedelta(0))


@asynccontextmanager
async def lagged_loop(stall: float = 0.3, gap: float = 0.02) -> AsyncIterator[list[int]]:
    """Stall the running loop for ``stall`` s every ``gap`` s while the block runs; yields the stall count."""
    stalls = [0]
    stop = asyncio.Event()

    async def hog() -> None:
        while not stop.is_set():
            await asyncio.sleep(gap)
            time.sleep(stall)  # the whole server is stuck: no reads, no timers
            stalls[0] += 1

    task = asyncio.ensure_future(hog())
    try:
        yield stalls
    finally:
        stop.set()
        await task


async def test_a_bot_inside_its_budget_never_loses_on_time_while_the_server_stalls() -> None:
    seat = seat_for(fake("slow", "0.05"))  # answers every Turn after 50 ms
    try:
        async with lagged_loop() as stalls:
            record = await play_match(load_game("rps", rounds=12), [seat, random_seat()], TIGHT, match_id="lag")
    finally:
        await seat.close()
    assert record.termination == Termination.NORMAL, record.reason
    charged = [e for p, _, e, _ in record.moves if p == 0]
    assert stalls[0] >= 5, stalls  # the server really was stalled through the match
    assert len(charged) == 12 and max(charged) < 0.2, charged
    print(f"12 turns, {stalls[0]} stalls of 0.3 s; charged per turn: max {max(charged):.3f}s")


async def test_a_bot_that_takes_half_a_second_still_times_out_while_the_server_stalls() -> None:
    seat = seat_for(fake("slow", "0.5"))
    try:
        async with lagged_loop():
            record = await play_match(load_game("rps", rounds=3), [seat, random_seat()], TIGHT, match_id="lag")
    finally:
        await seat.close()
    assert record.termination == Termination.TIMEOUT and record.offender == 0, record.reason


REMOTE_BOT = """
import sys, time
from datetime import timedelta
from arena_client import Bot, TimeControl, run

class Quick(Bot):
    games = ("rps",)
    def act(self, turn):
        time.sleep(float(sys.argv[2]))
        return turn.legal_actions[0]

tc = TimeControl(timedelta(seconds=0.2), timedelta(0), timedelta(0))
[result] = run(Quick(), sys.argv[1], opponent="rock", game="rps", params={"rounds": int(sys.argv[3])},
               name="quick", reconnect=False, time_control=tc)
print(result.match_id, result.termination.name, result.reason)
"""


async def remote_match_under_lag(live_server: LiveServer, think: float, rounds: int) -> tuple[str, list[float]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        REMOTE_BOT,
        live_server.address,
        str(think),
        str(rounds),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with lagged_loop() as stalls:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    match_id, termination, _ = out.decode().split(" ", 2)
    record = await live_server.store.get_match(match_id)
    assert record is not None and stalls[0] >= 3
    return termination, [e for p, _, e, _ in record.moves if p == 0]


async def test_a_remote_bot_inside_its_budget_never_loses_on_time_while_the_server_stalls(
    live_server: LiveServer,
) -> None:
    termination, charged = await remote_match_under_lag(live_server, 0.05, 8)
    assert termination == "NORMAL" and len(charged) == 8 and max(charged) < 0.2, charged


async def test_a_remote_bot_that_takes_half_a_second_still_times_out_while_the_server_stalls(
    live_server: LiveServer,
) -> None:
    termination, _ = await remote_match_under_lag(live_server, 0.5, 3)
    assert termination == "TIMEOUT"
