"""Referee overhead: a 1000-round RPS match between two trivial in-process bots.

Prints µs per step (one round = both bots act) through ``play_match``, and the
same match played by a bare loop over the engine (no clocks, no records, no
seats) measured in the same run, with the ratio. Target: at most 10 µs/step.
For scale, the kaggle-environments package is reported to take about 3 ms per
step for the same thing.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from arena_bots.simple import AlwaysRockBot, RotateBot
from arena_client import SeatInfo, Turn
from arena_games import load_game
from arena_server.referee.loop import play_match
from arena_server.seats.in_process import InProcessSeat

ROUNDS = 1000
REPEATS = 30


def bare_match() -> None:
    game = load_game("rps", rounds=ROUNDS)
    state = game.new_initial_state()
    a, b = AlwaysRockBot(), RotateBot()
    b.next = 0
    for _ in range(ROUNDS):
        obs = state.observation(0)
        legal = state.legal_actions(0)
        x = a.act(Turn("m", 0, 0, obs, legal, game_td, game_td))
        y = b.act(Turn("m", 0, 1, obs, legal, game_td, game_td))
        state.apply_actions((x, y))


async def referee_match() -> None:
    game = load_game("rps", rounds=ROUNDS)
    seats = [
        InProcessSeat(AlwaysRockBot(), SeatInfo(0, "rock")),
        InProcessSeat(RotateBot(), SeatInfo(1, "rotate")),
    ]
    await play_match(game, seats, seed="bench")


def timed(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) / ROUNDS * 1e6


game_td = __import__("datetime").timedelta(seconds=1)


def main() -> None:
    loop = asyncio.new_event_loop()
    run_ref = lambda: loop.run_until_complete(referee_match())  # noqa: E731
    timed(bare_match, 3)
    timed(run_ref, 3)  # warm-up
    bare = timed(bare_match, REPEATS)
    ref = timed(run_ref, REPEATS)
    loop.close()
    print(f"bare engine loop : {bare:7.2f} us/step")
    print(f"play_match       : {ref:7.2f} us/step  (target <= 10 us/step: {'met' if ref <= 10 else 'NOT met'})")
    print(f"referee / bare   : {ref / bare:7.2f}x")


if __name__ == "__main__":
    main()
