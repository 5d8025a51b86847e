"""The clients of ``bench_remote.py`` (3) and (4), in a process of their own.

Run by ``bench_remote.py`` as ``python bench/remote_clients.py KIND PORT STREAMS ROUNDS``; prints one
JSON line. KIND ``arena`` or ``bare``: ``STREAMS`` concurrent streams (3), the round trips per second
and this process's CPU seconds per round trip. KIND ``arena-auto``, ``arena-inline``, ``arena-thread``,
``arena-observing`` (auto, a bot that reads its observation), ``arena-protocol`` or ``bare-latency``:
one stream (4), the median round trip. KIND ``seat-S-OPPONENT`` (``bench_remote_seats.py``): the SDK bot
(auto) in seat S against the hosted bot OPPONENT, the median round trip. ``arena-protocol`` is no SDK at
all: a client that speaks the protocol by hand (protobuf to read each Turn, the Action written as
bytes), so what it costs over ``bare-latency`` is the server's share of a move.
The process imports what a bot process imports (grpc and the SDK), not the server's packages: the
benchmark process itself carries the server's imports from parts (1) and (2), three times a bot's
objects, which would make every full garbage collection of the clients three times as long.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import grpc

from arena.v1 import bot_session_pb2 as bs
from arena_client import Bot, Turn
from arena_client.remote import PLAY_METHOD, PROTOCOL_VERSION, Client, Threaded
from arena_client.wire import action_message


class Scissors(Bot):
    """Always scissors; notes when each ``act`` is called (one stamp per round)."""

    name = "bench-bot"
    games = ("rps",)

    def __init__(self) -> None:
        self.stamps: list[float] = []

    def act(self, turn: Turn) -> int:
        self.stamps.append(time.perf_counter())
        return 2


class ObservingScissors(Scissors):
    """As :class:`Scissors`, reading its observation every move, as the reference RPS bots do.

    The SDK decodes a Turn's observation when ``act`` first reads it, so this bot pays for the
    decoding that :class:`Scissors`, which never looks, does not.
    """

    name = "bench-observer"

    def __init__(self) -> None:
        super().__init__()
        self.rounds_seen = 0

    def act(self, turn: Turn) -> int:
        self.stamps.append(time.perf_counter())
        self.rounds_seen = turn.observation.round
        return 2


def turn_payload() -> bytes:
    """A serialized Turn-sized message: what the bare echo streams carry."""
    turn = bs.ServerMessage(turn=bs.Turn(match_id="1", turn_id=1, legal_actions=[0, 1, 2]))
    turn.turn.observation.rps.signs = 3
    return turn.SerializeToString()


async def ping_pong(target: str, n: int, times: list[float] | None = None, warmup: int = 50) -> None:
    """``n`` round trips on one echo stream (after ``warmup`` to warm up), each timed into ``times`` if given."""
    payload = turn_payload()
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.stream_stream("/bench.Echo/Ping")()
        for _ in range(warmup):
            await call.write(payload)
            await call.read()
        for _ in range(n):
            start = time.perf_counter()
            await call.write(payload)
            await call.read()
            if times is not None:
                times.append(time.perf_counter() - start)
        await call.done_writing()


async def arena_throughput(port: int, matches: int, rounds: int) -> float:
    """Remote round trips (one Turn out, one Action back) per second over ``matches`` concurrent matches."""
    clients = [Client(Scissors(), f"127.0.0.1:{port}", name=f"load-{i}", threaded=False) for i in range(matches)]
    start = time.perf_counter()
    await asyncio.gather(*(c.play(opponent="rock", params={"rounds": rounds}) for c in clients))
    elapsed = time.perf_counter() - start
    assert all(c.results and c.results[0].termination.name == "NORMAL" for c in clients)
    return matches * rounds / elapsed


async def bare_throughput(port: int, streams: int, rounds: int) -> float:
    """Echo round trips per second over ``streams`` concurrent streams (each on its own channel).

    No warm-up round trips: every round trip timed is counted, and each stream
    starts cold, as each arena client in :func:`arena_throughput` does.
    """
    start = time.perf_counter()
    await asyncio.gather(*(ping_pong(f"127.0.0.1:{port}", rounds, warmup=0) for _ in range(streams)))
    return streams * rounds / (time.perf_counter() - start)


async def arena_latency(
    port: int,
    rounds: int,
    threaded: Threaded,
    bot_class: type[Scissors] = Scissors,
    opponent: str = "rock",
    seat: int | None = None,
) -> float:
    """Median seconds between two ``act`` calls of one remote SDK bot: one round trip (after a warm-up match).

    The bot plays ``opponent`` (a hosted bot), in ``seat`` if given (else seat 0, a challenge's first match).
    """
    warm = Client(bot_class(), f"127.0.0.1:{port}", name="warm", threaded=threaded)
    await warm.play(opponent=opponent, params={"rounds": 100}, seat=seat)
    bot = bot_class()
    await Client(bot, f"127.0.0.1:{port}", name="bench", threaded=threaded).play(
        opponent=opponent, params={"rounds": rounds}, seat=seat
    )
    return statistics.median(b - a for a, b in zip(bot.stamps, bot.stamps[1:], strict=False))


async def answer_turns(call: Any, on_turn: Callable[[], None]) -> None:
    """Answer every Turn on a Play stream of bytes with scissors, by hand (no SDK), until MatchEnded.

    Each Turn is read with protobuf and answered with the Action written as bytes, the write awaited
    as the bare loop awaits its own; ``on_turn`` is called as each Turn is read.
    """
    parse = bs.ServerMessage.FromString
    while True:
        msg = parse(await call.read())
        kind = msg.WhichOneof("kind")
        if kind == "turn":
            on_turn()
            await call.write(action_message(msg.turn.match_id, msg.turn.turn_id, 2))
        elif kind == "match_ended":
            return
        elif kind == "error" or (
            kind == "challenge_status" and msg.challenge_status.state == bs.ChallengeStatus.STATE_REFUSED
        ):
            raise SystemExit(f"the server refused the match: {msg}")


async def protocol_match(call: Any, rounds: int, on_turn: Callable[[], None]) -> None:
    """Play one RPS match against hosted rock on a Play stream of bytes, by hand (no SDK): see :func:`answer_turns`."""
    challenge = bs.Challenge(opponent="rock", game="rps", matches=1)
    challenge.params["rounds"].int_value = rounds
    await call.write(bs.BotMessage(challenge=challenge).SerializeToString())
    await answer_turns(call, on_turn)


async def protocol_latency(port: int, rounds: int) -> float:
    """As :func:`arena_latency`, with a client that speaks the protocol by hand instead of the SDK."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream(PLAY_METHOD)()  # bytes both ways
        hello = bs.Hello(protocol_version=PROTOCOL_VERSION, name="bench-protocol", games=["rps"])
        await call.write(bs.BotMessage(hello=hello).SerializeToString())
        await call.read()
        await protocol_match(call, 100, lambda: None)  # a warm-up match
        stamps: list[float] = []
        await protocol_match(call, rounds, lambda: stamps.append(time.perf_counter()))
        await call.done_writing()
    return statistics.median(b - a for a, b in itertools.pairwise(stamps))


async def bare_latency(port: int, rounds: int) -> float:
    """Median seconds per ping-pong on one echo stream (after 50 to warm up)."""
    times: list[float] = []
    await ping_pong(f"127.0.0.1:{port}", rounds, times)
    return statistics.median(times)


def main() -> None:
    kind, port, streams, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    modes: dict[str, Threaded] = {"arena-auto": "auto", "arena-inline": False, "arena-thread": True}
    if kind.startswith("seat-"):
        _, seat, opponent = kind.split("-", 2)
        print(json.dumps({"median": asyncio.run(arena_latency(port, rounds, "auto", Scissors, opponent, int(seat)))}))
        return
    if kind in modes or kind in ("bare-latency", "arena-protocol", "arena-observing"):
        if kind == "bare-latency":
            median = asyncio.run(bare_latency(port, rounds))
        elif kind == "arena-protocol":
            median = asyncio.run(protocol_latency(port, rounds))
        elif kind == "arena-observing":
            median = asyncio.run(arena_latency(port, rounds, "auto", ObservingScissors))
        else:
            median = asyncio.run(arena_latency(port, rounds, modes[kind]))
        print(json.dumps({"median": median}))
        return
    load = arena_throughput if kind == "arena" else bare_throughput
    cpu = time.process_time()
    rate = asyncio.run(load(port, streams, rounds))
    print(json.dumps({"rate": rate, "cpu_per_round_trip": (time.process_time() - cpu) / (streams * rounds)}))


if __name__ == "__main__":
    main()
