"""Whose time is a remote move: the server's or the SDK's, and which layer of the server's? (``bench_remote.py`` (2)).

Loops on one event loop in this process, pinned to one CPU, each a long
stream of round trips of which only a steady-state window is timed (the
first rounds, with the connection, the Hello and the match's start, are left
out). From the bare stream to the whole server, each row adds one layer to
the row above it:

* ``bare``: the grpc.aio echo stream of ``bench_remote.py`` (1).
* ``codec``: a gRPC handler that reads each Action through the server's
  request deserializer and answers with a Turn of fixed bytes (the write
  awaited), against a client that speaks the protocol by hand, with no SDK:
  it reads each Turn with protobuf and answers with an Action written as
  bytes (``arena_client.wire.action_message``), awaiting the write as the
  bare loop does. What it costs over ``bare`` is the protobuf at both ends.
* ``session``: the same, each Turn written through a real ``RemoteSession``
  (its outbox, the write stepped by hand, the watchdog).
* ``referee``: a real match on that stream: a ``RemoteSeat`` on the session
  against the hosted rock bot (``InProcessSeat``) through ``play_match``,
  each Action handed to the session as the server's reader hands it. What
  it costs over ``session`` is the referee, both seats, the clocks and the
  Turn's bytes.
* ``protocol``: the real server (Hub and gRPC services, Hello, challenge)
  against the same hand-written client. What it costs over ``bare`` is the
  server's share of a move.
* ``sdk``: the same server against the SDK ``Client`` with ``act`` inline, as
  in ``bench_remote.py`` (2). What it costs over ``protocol`` is the SDK's.
* ``observing``: as ``sdk``, with a bot that reads its observation every
  move, as the reference RPS bots do. What it costs over ``sdk`` is the
  SDK's decoding of the observation.

For each it prints the mean round trip over the window and, for the event
loop's thread, the CPU time (user and kernel, from ``/proc``), what that CPU
time adds to the row above, and the context switches (voluntary: it waited;
involuntary: another thread took the core) per round trip. Repeats are
interleaved, and the per-repeat figures are printed as they are, so the
spread shows.

Run: ``.venv/bin/python bench/split_remote.py [--cpu 1] [--repeats 3] [--kinds bare,referee,...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass

import grpc
from bench_remote import echo_server
from remote_clients import Scissors, answer_turns, protocol_match, turn_payload

import arena_bots
from arena.v1 import bot_session_pb2 as bs
from arena_bots.simple import AlwaysRockBot
from arena_client import SeatInfo
from arena_client.remote import PLAY_METHOD, PROTOCOL_VERSION, Client
from arena_client.wire import serialize
from arena_games import load_game
from arena_server.api.bot_session import _parse as parse_bot_message
from arena_server.api.server import running_server
from arena_server.matches.hub import Hub
from arena_server.referee.loop import play_match
from arena_server.seats.action_wire import WireAction
from arena_server.seats.in_process import InProcessSeat
from arena_server.seats.remote import RemoteSeat, RemoteSession

ROUNDS = 12_000
WINDOW = (2_000, 11_000)
"""The round trips timed: from the first to the second (the match is under way and not ending)."""
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Sample:
    """The event loop's thread at one instant."""

    at: float
    user: int
    system: int
    voluntary: int
    involuntary: int

    @classmethod
    def now(cls) -> Sample:
        task = f"/proc/self/task/{threading.get_native_id()}"
        with open(f"{task}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        switches = {}
        with open(f"{task}/status") as f:
            for line in f:
                if "ctxt_switches" in line:
                    key, value = line.split(":")
                    switches[key.strip()] = int(value)
        return cls(
            time.perf_counter(),
            int(fields[11]),
            int(fields[12]),
            switches["voluntary_ctxt_switches"],
            switches["nonvoluntary_ctxt_switches"],
        )


class Window:
    """Samples the loop's thread at the first and the last round trip of :data:`WINDOW`."""

    def __init__(self) -> None:
        self.start: Sample | None = None
        self.end: Sample | None = None
        self.turns = 0

    def turn(self) -> None:
        """One more round trip (a Turn read): the window is sampled at its first and its last."""
        self.at(self.turns)
        self.turns += 1

    def at(self, i: int) -> None:
        if i == WINDOW[0]:
            self.start = Sample.now()
        elif i == WINDOW[1]:
            self.end = Sample.now()

    def per_round_trip(self) -> dict[str, float]:
        a, b = self.start, self.end
        assert a is not None and b is not None, "the window was not reached"
        n = WINDOW[1] - WINDOW[0]
        return {
            "us": (b.at - a.at) / n * 1e6,
            "user": (b.user - a.user) / TICKS / n * 1e6,
            "kernel": (b.system - a.system) / TICKS / n * 1e6,
            "vol": (b.voluntary - a.voluntary) / n,
            "invol": (b.involuntary - a.involuntary) / n,
        }


async def bare() -> dict[str, float]:
    server = echo_server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    window = Window()
    payload = turn_payload()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.stream_stream("/bench.Echo/Ping")()
            for i in range(ROUNDS):
                window.at(i)
                await call.write(payload)
                await call.read()
            await call.done_writing()
    finally:
        await server.stop(0)
    return window.per_round_trip()


LAYER_METHOD = "/bench.Split/Play"
ENDED = bs.ServerMessage(match_ended=bs.MatchEnded(match_id="1")).SerializeToString()


async def _codec_handler(_requests: object, context: grpc.aio.ServicerContext) -> None:
    """``codec``: every Action read through the server's deserializer is answered by the same Turn's bytes."""
    turn = turn_payload()
    await context.write(turn)
    for _ in range(ROUNDS - 1):
        if type(await context.read()) is not WireAction:  # (the Actions, read by _parse as the server reads them)
            return
        await context.write(turn)
    await context.read()
    await context.write(ENDED)


async def _session_handler(_requests: object, context: grpc.aio.ServicerContext) -> None:
    """``session``: as ``codec``, each Turn written through a real :class:`RemoteSession`."""
    session = RemoteSession(context.write, "split")
    turn = turn_payload()
    session.send_nowait(turn)
    for _ in range(ROUNDS - 1):
        if type(await context.read()) is not WireAction:  # (the Actions, read by _parse as the server reads them)
            return
        session.send_nowait(turn)
    await context.read()
    session.send_nowait(ENDED)
    await session.drained()


async def _referee_handler(_requests: object, context: grpc.aio.ServicerContext) -> None:
    """``referee``: a real match, a remote seat on this stream's session against hosted rock."""
    session = RemoteSession(context.write, "split")
    session.name = "split-referee"
    seats = [
        RemoteSeat(session, SeatInfo(0, session.name, 1, "remote")),
        InProcessSeat(AlwaysRockBot(), SeatInfo(1, "rock", 1, "hosted")),
    ]
    match = asyncio.ensure_future(play_match(load_game("rps", rounds=ROUNDS), seats, match_id="1"))
    while not match.done():
        msg = await context.read()
        if type(msg) is not WireAction:
            break  # the client read MatchEnded and closed its side
        session.on_action(msg)
    record = await match
    assert record.termination.name == "NORMAL", record.reason


async def _layer(handler: object) -> dict[str, float]:
    """:data:`ROUNDS` Turns from ``handler`` (a gRPC handler with the server's codec), each answered by hand."""
    server = grpc.aio.server()
    method = grpc.stream_stream_rpc_method_handler(
        handler, request_deserializer=parse_bot_message, response_serializer=serialize
    )
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("bench.Split", {"Play": method})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    window = Window()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.stream_stream(LAYER_METHOD)()
            await answer_turns(call, window.turn)
            await call.done_writing()
    finally:
        await server.stop(0)
    return window.per_round_trip()


async def codec() -> dict[str, float]:
    return await _layer(_codec_handler)


async def session() -> dict[str, float]:
    return await _layer(_session_handler)


async def referee() -> dict[str, float]:
    return await _layer(_referee_handler)


async def protocol() -> dict[str, float]:
    window = Window()
    hub = Hub(None, arena_bots.hosted_bots())
    async with (
        running_server(hub, port=0) as (_server, port),
        grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
    ):
        call = channel.stream_stream(PLAY_METHOD)()  # bytes both ways
        hello = bs.Hello(protocol_version=PROTOCOL_VERSION, name="split-protocol", games=["rps"])
        await call.write(bs.BotMessage(hello=hello).SerializeToString())
        await call.read()
        await protocol_match(call, ROUNDS, window.turn)
        await call.done_writing()
    return window.per_round_trip()


class _WindowBot(Scissors):
    def __init__(self, window: Window) -> None:
        super().__init__()
        self.window = window

    def act(self, turn):  # type: ignore[no-untyped-def]
        self.window.at(len(self.stamps))
        return super().act(turn)


class _ObservingWindowBot(_WindowBot):
    def act(self, turn):  # type: ignore[no-untyped-def]
        self.rounds_seen = turn.observation.round
        return super().act(turn)


async def _sdk_row(bot_class: type[_WindowBot], name: str) -> dict[str, float]:
    window = Window()
    hub = Hub(None, arena_bots.hosted_bots())
    async with running_server(hub, port=0) as (_server, port):
        client = Client(bot_class(window), f"127.0.0.1:{port}", name=name, threaded=False)
        await client.play(opponent="rock", params={"rounds": ROUNDS})
    return window.per_round_trip()


async def sdk() -> dict[str, float]:
    return await _sdk_row(_WindowBot, "split-sdk")


async def observing() -> dict[str, float]:
    """As ``sdk``, with a bot that reads its observation every move (as the reference RPS bots do)."""
    return await _sdk_row(_ObservingWindowBot, "split-observing")


KINDS = {
    "bare": bare,
    "codec": codec,
    "session": session,
    "referee": referee,
    "protocol": protocol,
    "sdk": sdk,
    "observing": observing,
}
"""The rows, in their order (each adds one layer to the one above, but ``observing``, which is ``sdk`` with a
bot that reads its observation; ``count_remote.py`` counts the same)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", type=int, default=1, help="the CPU to run on (default 1; -1: do not pin)")
    parser.add_argument("--repeats", type=int, default=3)
    kinds = KINDS
    parser.add_argument(
        "--kinds",
        default=",".join(kinds),
        help=f"the rows to run, in this order, the first being the ratios' base (default {','.join(kinds)})",
    )
    args = parser.parse_args()
    chosen = args.kinds.split(",")
    unknown = [k for k in chosen if k not in kinds]
    if unknown:
        parser.error(f"--kinds: unknown {', '.join(unknown)}; choose from {', '.join(kinds)}")
    if args.cpu >= 0:
        if args.cpu not in os.sched_getaffinity(0):
            parser.error(f"--cpu {args.cpu}: this process may run on CPUs {sorted(os.sched_getaffinity(0))} only")
        os.sched_setaffinity(0, {args.cpu})
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in chosen}
    for _ in range(args.repeats):  # interleaved, so background load hits every row alike
        for name in chosen:
            runs[name].append(asyncio.run(kinds[name]()))
    where = f"pinned to CPU {args.cpu}" if args.cpu >= 0 else "not pinned"
    print(
        f"round trips {WINDOW[0]}..{WINDOW[1]} of {ROUNDS}, {where}, {args.repeats} interleaved repeats, "
        f"Python {sys.version.split()[0]}; the event loop's thread per round trip:"
    )
    print(f"{'':10}{'mean per repeat (us)':>26}{'ratio':>8}{'user':>8}{'kernel':>8}{'+cpu':>8}{'vol':>6}{'invol':>7}")
    base = [r["us"] for r in runs[chosen[0]]]
    above: float | None = None
    for name, rows in runs.items():
        each = " ".join(f"{r['us']:6.1f}" for r in rows)
        ratio = statistics.median(r["us"] / b for r, b in zip(rows, base, strict=True))

        def med(key: str, rows: list[dict[str, float]] = rows) -> float:
            return statistics.median(r[key] for r in rows)

        cpu = statistics.median(r["user"] + r["kernel"] for r in rows)
        added = "" if above is None else f"{cpu - above:+.1f}"
        above = cpu
        print(
            f"{name:<10}{each:>26}{ratio:7.2f}x{med('user'):7.1f}{med('kernel'):8.1f}{added:>8}"
            f"{med('vol'):6.2f}{med('invol'):7.2f}"
        )
    print(
        "+cpu: the loop thread's CPU a round trip over the row above; protocol/bare: the server's share, "
        "sdk/protocol: the SDK's (docs/performance.md, seventh and twentieth passes)"
    )


if __name__ == "__main__":
    main()
