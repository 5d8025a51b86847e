"""Remote seat cost: a remote SDK bot's per-move round trip vs a bare grpc.aio ping-pong.

1. Bare: a bidirectional stream whose server echoes every message (a
   serialized Turn-sized payload), client and server in this process on one
   event loop: the floor for one request/response over such a stream.
2. Arena: the real server (Hub + gRPC services, no database) and the SDK
   ``Client`` in this process on one event loop, playing a 1000-round RPS
   match against the hosted ``rock`` bot; per round = one Turn out, one
   Action back, plus refereeing. Measured with ``act`` in a worker thread
   (the SDK default) and inline.
3. Throughput: ``arena serve`` in its own process and 64 SDK clients in this
   one, 64 concurrent matches; moves (actions applied, both seats) per second.

Targets: (2) at most 1.3x (1); (3) at least 5,000 moves/s on 2 cores.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time

import grpc

import arena_bots
from arena.v1 import bot_session_pb2 as bs
from arena_client import Bot, Turn
from arena_client.remote import Client
from arena_server.api.server import running_server
from arena_server.matches.hub import Hub

ROUNDS = 1000
REPEATS = 5


class Scissors(Bot):
    name = "bench-bot"
    games = ("rps",)

    def act(self, turn: Turn) -> int:
        return 2


async def bare_round_trip(n: int) -> float:
    """Seconds per request/response on an echoing bidi stream."""

    async def echo(request_iterator, context):  # type: ignore[no-untyped-def]
        async for message in request_iterator:
            yield message

    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(echo)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("bench.Echo", {"Ping": handler})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    turn = bs.ServerMessage(turn=bs.Turn(match_id="1", turn_id=1, legal_actions=[0, 1, 2]))
    turn.turn.observation.rps.signs = 3
    payload = turn.SerializeToString()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream("/bench.Echo/Ping")()
        for _ in range(50):
            await call.write(payload)
            await call.read()
        start = time.perf_counter()
        for _ in range(n):
            await call.write(payload)
            await call.read()
        elapsed = time.perf_counter() - start
        await call.done_writing()
    await server.stop(0)
    return elapsed / n


async def arena_round_trip(threaded: bool) -> float:
    """Seconds per round of a remote SDK bot vs a hosted bot through the real server."""
    hub = Hub(None, arena_bots.hosted_bots())
    async with running_server(hub, port=0) as (_server, port):
        warm = Client(Scissors(), f"127.0.0.1:{port}", name="warm", threaded=threaded)
        await warm.play(opponent="rock", params={"rounds": 100})
        client = Client(Scissors(), f"127.0.0.1:{port}", name="bench", threaded=threaded)
        start = time.perf_counter()
        await client.play(opponent="rock", params={"rounds": ROUNDS})
        elapsed = time.perf_counter() - start
    return elapsed / ROUNDS


async def throughput(port: int, matches: int, rounds: int) -> float:
    clients = [Client(Scissors(), f"127.0.0.1:{port}", name=f"load-{i}", threaded=False) for i in range(matches)]
    start = time.perf_counter()
    await asyncio.gather(*(c.play(opponent="rock", params={"rounds": rounds}) for c in clients))
    elapsed = time.perf_counter() - start
    assert all(c.results and c.results[0].termination.name == "NORMAL" for c in clients)
    return matches * rounds * 2 / elapsed


def main() -> None:
    import statistics

    bares, threads, inlines = [], [], []
    for _ in range(REPEATS):  # interleaved, so background load hits all three alike
        bares.append(asyncio.run(bare_round_trip(ROUNDS)))
        threads.append(asyncio.run(arena_round_trip(True)))
        inlines.append(asyncio.run(arena_round_trip(False)))
    bare = statistics.median(bares)
    t_ratio = statistics.median(t / b for t, b in zip(threads, bares, strict=True))
    i_ratio = statistics.median(i / b for i, b in zip(inlines, bares, strict=True))
    print(f"bare grpc.aio ping-pong        : {bare * 1e6:8.1f} us/round trip (median of {REPEATS})")
    print(
        f"arena remote SDK bot (thread)  : {statistics.median(threads) * 1e6:8.1f} us/move  "
        f"ratio {t_ratio:5.2f}x (target <= 1.3x)"
    )
    print(f"arena remote SDK bot (inline)  : {statistics.median(inlines) * 1e6:8.1f} us/move  ratio {i_ratio:5.2f}x")

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "arena_server.cli",
                "serve",
                "--no-http",
                "--port",
                str(port),
                "--host",
                "127.0.0.1",
                "--no-ladder",  # measure serving remote bots, not the ladder's own matches
                "--db",
                os.path.join(tmp, "bench.db"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert server.stdout is not None and "serving on" in server.stdout.readline()
            rate = asyncio.run(throughput(port, 64, 300))
        finally:
            server.terminate()
            server.communicate(timeout=30)
    print(f"64 concurrent remote matches   : {rate:8.0f} moves/s (target >= 5000; server and clients share 2 cores)")


if __name__ == "__main__":
    main()
