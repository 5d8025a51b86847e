"""Referee overhead: a 1000-round RPS match between two trivial in-process bots.

Prints µs per step (one round = both bots act) through ``play_match``, and the
same match played by a bare loop over the engine (no clocks, no records, no
seats) measured in the same run, with the ratio. Target: at most 10 µs/step.
For scale, the kaggle-environments package is reported to take about 3 ms per
step for the same thing.

A third row (issue 20's twentieth pass) puts a remote seat in seat 0 with its
stream in memory: a real ``RemoteSession`` and ``RemoteSeat`` whose write
completes on the event loop's next pass (as gRPC's write completes through a
future), each Turn answered from this process by parsing its bytes and handing
the session an Action, as the server's reader does. It is the server's own
Python for a remote move (the Turn's bytes, the session's write, the clocks,
the answer's checks) without gRPC, the kernel or another process in it; the
answering (protobuf parse of the Turn and an Action built) is in it too, about
1.5-3 µs on the twentieth pass's host.

A fourth row plays that match with the caches cold: between two moves it
reads an 8 MB array (:data:`SWEEP`), as gRPC's C core, the kernel's network
stack and the other threads come between two moves of a real server. The
sweeps are not timed. The row shows what the same code costs when it runs
cold; the difference with the third row grows with the data and code a move
touches, which compiling does not shrink.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import numpy as np

from arena.v1 import bot_session_pb2 as bs
from arena_bots.simple import AlwaysRockBot, RotateBot
from arena_client import SeatInfo, Termination, Turn
from arena_games import load_game
from arena_server.referee.loop import play_match
from arena_server.seats.in_process import InProcessSeat
from arena_server.seats.remote import RemoteSeat, RemoteSession

ROUNDS = 1000
REPEATS = 30
SWEEP = np.zeros(8 * 1024 * 1024 // 8)
"""8 MB, read between two moves by the cold row: eight times a core's L2 and a quarter of the L3 this VM reports."""


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


async def remote_seat_match(cold: bool = False) -> float:
    """As :func:`referee_match`, seat 0 a remote seat whose stream is in memory (see the module's notes).

    Returns the seconds the match's moves took, less the sweeps of :data:`SWEEP` when ``cold``.
    """
    loop = asyncio.get_running_loop()
    turns: list[bytes] = []

    async def write(msg: object) -> None:
        done = loop.create_future()
        loop.call_soon(done.set_result, None)  # completes on the loop's next pass, as gRPC's write does
        await done
        if type(msg) is bytes:  # (every Turn is written as its bytes; the other messages are not answered)
            turns.append(msg)

    session = RemoteSession(write, "bench")
    seats = [
        RemoteSeat(session, SeatInfo(0, "remote", 1, "remote")),
        InProcessSeat(RotateBot(), SeatInfo(1, "rotate")),
    ]
    match = asyncio.ensure_future(play_match(load_game("rps", rounds=ROUNDS), seats, seed="bench", match_id="1"))
    parse = bs.ServerMessage.FromString
    swept = 0.0
    start = time.perf_counter()
    while not match.done():
        if not turns:
            await asyncio.sleep(0)
            continue
        turn = parse(turns.pop()).turn
        if cold:
            began = time.perf_counter()
            SWEEP.sum()
            swept += time.perf_counter() - began
        session.on_action(bs.Action(match_id=turn.match_id, turn_id=turn.turn_id, action=0))
    elapsed = time.perf_counter() - start - swept
    record = await match
    assert record.termination is Termination.NORMAL, record.reason
    return elapsed


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

    def remote_seat(repeats: int) -> tuple[float, float]:
        """The remote seat's µs per step with caches warm and cold, the two interleaved."""
        warm: list[float] = []
        cold: list[float] = []
        for _ in range(repeats):
            warm.append(loop.run_until_complete(remote_seat_match(False)))
            cold.append(loop.run_until_complete(remote_seat_match(True)))
        return statistics.median(warm) / ROUNDS * 1e6, statistics.median(cold) / ROUNDS * 1e6

    timed(bare_match, 3)
    timed(run_ref, 3)  # warm-up
    remote_seat(3)
    bare = timed(bare_match, REPEATS)
    ref = timed(run_ref, REPEATS)
    remote, cold = remote_seat(REPEATS)
    loop.close()
    print(f"bare engine loop : {bare:7.2f} us/step")
    print(f"play_match       : {ref:7.2f} us/step  (target <= 10 us/step: {'met' if ref <= 10 else 'NOT met'})")
    print(f"referee / bare   : {ref / bare:7.2f}x")
    print(
        f"remote seat      : {remote:7.2f} us/step  (stream in memory; {remote / bare:.2f}x bare, "
        f"{remote / ref:.2f}x play_match)"
    )
    print(f"  caches cold    : {cold:7.2f} us/step  ({cold / remote:.2f}x the remote seat warm; the sweeps not timed)")


if __name__ == "__main__":
    main()
