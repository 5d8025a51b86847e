"""Remote seat cost: a remote SDK bot's per-move round trip vs a bare grpc.aio ping-pong.

1. Bare: a bidirectional stream whose server echoes every message (a
   serialized Turn-sized payload), client and server in this process on one
   event loop: the floor for one request/response over such a stream.
2. Arena: the real server (Hub + gRPC services, no database) and the SDK
   ``Client`` in this process on one event loop, playing a 1000-round RPS
   match against the hosted ``rock`` bot; per round = one Turn out, one
   Action back, plus refereeing. Measured three ways: ``threaded="auto"``
   (the SDK default: this bot's quick ``act`` starts in the worker thread
   and runs inline after eight moves), always in the worker thread, and
   always inline. This bot never looks at its observation, and the SDK
   decodes a Turn's observation only when ``act`` reads it: one more row
   plays a bot that reads it every move (``ObservingScissors``, default
   mode), as the reference RPS bots do.
3. Throughput: ``arena serve`` in its own process and 64 SDK clients in a
   process of their own (``remote_clients.py``, which imports what a bot
   process imports), 64 concurrent matches, against the bare echo server in
   its own process and 64 concurrent ping-pong streams from a clients
   process alike. Both sides start cold (no warm-up) and every round trip
   timed is counted. CPU time per round trip is printed for the server
   process and for the clients' process: whichever side is at 100% of its
   core sets the rate. Both servers run their helper threads (gRPC's, all
   but the event loop's) under the same scheduling policy: ``arena serve``'s
   default ``--helper-threads batch`` unless ``--helper-threads normal`` is
   given.

Each pair runs ``REPEATS`` times, interleaved, so background load hits both
alike; a ratio is the median of the per-repeat ratios (the baseline measured
next to it). Two figures per round trip: the mean over the whole match
(connection and match start included) and the median of the per-move times
(the bot stamps every ``act``; the bare loop times every ping-pong), which a
machine shared with other work disturbs much less.

4. One remote bot across processes, as Arena is deployed: ``arena serve`` (or
   the bare echo server) in its own process and one client in another
   (``remote_clients.py``), the median round trip over 2000 rounds, the SDK
   bot in the same three modes and the observing one, and a client that
   speaks the protocol by hand (no SDK: what it costs over the bare line is
   the server's share).

Targets: (2) at most 1.3x (1); (4) at most 1.3x its bare line; (3) at least 0.8x the bare round
trips per second.

``--pin CPU`` runs (1) and (2) with this process on that CPU only (gRPC's own
threads included), and in (3) and (4) puts each server process on that CPU
and the clients on another one. This VM otherwise switches between
scheduling modes (where the kernel puts gRPC's poller thread) that change
both round trips by up to 1.6x from one run to the next; pinned, a repeat
differs by a few percent.

Run: ``.venv/bin/python bench/bench_remote.py [--pin CPU]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

import grpc
from remote_clients import ObservingScissors, Scissors, ping_pong

import arena_bots
from arena_client._native import status as native_status
from arena_client.remote import Client, Threaded
from arena_server.api.server import running_server
from arena_server.matches.hub import Hub

CLIENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "remote_clients.py")

ROUNDS = 1000
REPEATS = 5
MATCHES = 64
LOAD_ROUNDS = 300
ACROSS_ROUNDS = 2000

ECHO_SERVER = """
import asyncio, os, sys, threading
import grpc

async def echo(request_iterator, context):
    async for message in request_iterator:
        yield message

async def main():
    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(echo)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("bench.Echo", {"Ping": handler})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    if sys.argv[1] == "batch":  # as arena serve --helper-threads batch: every thread but the loop's
        for tid in os.listdir("/proc/self/task"):
            if int(tid) != threading.get_native_id():
                os.sched_setscheduler(int(tid), os.SCHED_BATCH, os.sched_param(0))
    print(port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes stdin
    await server.stop(0)

asyncio.run(main())
"""


def echo_server() -> grpc.aio.Server:
    async def echo(request_iterator, context):  # type: ignore[no-untyped-def]
        async for message in request_iterator:
            yield message

    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(echo)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("bench.Echo", {"Ping": handler})])
    return server


async def bare_round_trip(n: int) -> tuple[float, float]:
    """Seconds per request/response on an echoing bidi stream: (mean, median)."""
    server = echo_server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    times: list[float] = []
    try:
        await ping_pong(f"127.0.0.1:{port}", n, times)
    finally:
        await server.stop(0)
    return statistics.fmean(times), statistics.median(times)


async def arena_round_trip(threaded: Threaded, bot_class: type[Scissors] = Scissors) -> tuple[float, float]:
    """Seconds per round of a remote SDK bot vs a hosted bot through the real server: (mean, median)."""
    hub = Hub(None, arena_bots.hosted_bots())
    async with running_server(hub, port=0) as (_server, port):
        warm = Client(bot_class(), f"127.0.0.1:{port}", name="warm", threaded=threaded)
        await warm.play(opponent="rock", params={"rounds": 100})
        bot = bot_class()
        client = Client(bot, f"127.0.0.1:{port}", name="bench", threaded=threaded)
        start = time.perf_counter()
        await client.play(opponent="rock", params={"rounds": ROUNDS})
        elapsed = time.perf_counter() - start
    gaps = [b - a for a, b in zip(bot.stamps, bot.stamps[1:], strict=False)]
    return elapsed / ROUNDS, statistics.median(gaps)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_clients(kind: str, port: int, streams: int, rounds: int) -> dict[str, float]:
    """Run ``remote_clients.py`` (``kind`` clients on ``streams`` streams against ``port``); its JSON line."""
    out = subprocess.run(
        [sys.executable, CLIENTS, kind, str(port), str(streams), str(rounds)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result: dict[str, float] = json.loads(out)
    return result


def across(kind: str, server: contextlib.AbstractContextManager[tuple[int, int]]) -> float:
    """(4): the median round trip of one ``kind`` client (remote_clients.py) against a server process."""
    with server as (port, _pid):
        return float(run_clients(kind, port, 1, ACROSS_ROUNDS)["median"])


def loaded(kind: str, server: contextlib.AbstractContextManager[tuple[int, int]]) -> tuple[float, float, float]:
    """Run ``MATCHES`` concurrent ``kind`` (arena or bare) clients against a server process.

    The clients run in a process of their own (``remote_clients.py``, on this process's CPUs).
    Returns (round trips per second, server CPU seconds per round trip, client CPU seconds per round trip).
    """
    with server as (port, pid):
        before = cpu_seconds(pid)
        result = run_clients(kind, port, MATCHES, LOAD_ROUNDS)
        cpu = cpu_seconds(pid) - before
    rate = result["rate"]
    # The server's CPU over the clients' whole run (their start-up included) per round trip played.
    return rate, cpu / (MATCHES * LOAD_ROUNDS), result["cpu_per_round_trip"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def arena_process(extra: list[str], cpu: int | None = None, helper_threads: str = "batch") -> Iterator[tuple[int, int]]:
    """``arena serve`` (no ladder, a scratch database) in its own process; yields its port and pid."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(
            [
                *(sys.executable, "-m", "arena_server.cli", "serve", "--no-http", "--port", str(port)),
                *("--host", "127.0.0.1"),
                *("--no-ladder", "--db", os.path.join(tmp, "bench.db"), "--helper-threads", helper_threads, *extra),
            ],
            preexec_fn=pinned(cpu),  # sets the CPU affinity only
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert server.stdout is not None and "serving on" in server.stdout.readline()
            yield port, server.pid
        finally:
            server.terminate()
            server.communicate(timeout=30)


@contextlib.contextmanager
def echo_process(cpu: int | None = None, helper_threads: str = "batch") -> Iterator[tuple[int, int]]:
    """The bare echo server in its own process, its helper threads as ``arena serve``'s; yields its port and pid."""
    server = subprocess.Popen(
        [sys.executable, "-c", ECHO_SERVER, helper_threads],
        preexec_fn=pinned(cpu),  # sets the CPU affinity only
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        yield int(server.stdout.readline()), server.pid
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)


def pinned(cpu: int | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` keeping a server process on ``cpu`` (None when not pinning)."""
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def ratio(values: list[float], bases: list[float]) -> float:
    return statistics.median(v / b for v, b in zip(values, bases, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--serve-args", default="", help="extra `arena serve` arguments for (3) and (4), e.g. --uvloop")
    parser.add_argument(
        "--helper-threads",
        choices=("batch", "normal"),
        default="batch",
        help="both servers' helper-thread scheduling policy in (3) and (4) (default batch, as arena serve's)",
    )
    parser.add_argument(
        "--pin", type=int, metavar="CPU", help="run on this CPU only (servers of (3) and (4) on it, clients off it)"
    )
    args = parser.parse_args()
    all_cpus = sorted(os.sched_getaffinity(0))
    if args.pin is not None:
        if args.pin not in all_cpus:
            parser.error(f"--pin {args.pin}: this process may run on CPUs {all_cpus} only")
        os.sched_setaffinity(0, {args.pin})
        print(f"== pinned to CPU {args.pin}: (1) and (2) share one core; in (3) and (4) the servers run on it")
    runs: dict[str, list[tuple[float, float]]] = {"bare": [], "auto": [], "thread": [], "inline": [], "observing": []}
    for _ in range(args.repeats):  # interleaved, so background load hits all five alike
        runs["bare"].append(asyncio.run(bare_round_trip(ROUNDS)))
        runs["auto"].append(asyncio.run(arena_round_trip("auto")))
        runs["thread"].append(asyncio.run(arena_round_trip(True)))
        runs["inline"].append(asyncio.run(arena_round_trip(False)))
        runs["observing"].append(asyncio.run(arena_round_trip("auto", ObservingScissors)))
    means = {k: [m for m, _ in v] for k, v in runs.items()}
    medians = {k: [d for _, d in v] for k, v in runs.items()}
    print(f"per-move round trip, {ROUNDS} rounds, {args.repeats} interleaved repeats, Python {sys.version.split()[0]}")
    print(f"move path: {native_status()} (ARENA_PURE_PYTHON=1 for the other)")
    print(f"{'':31}{'mean':>10}{'ratio':>8}{'median':>10}{'ratio':>8}")
    for key, label in (
        ("bare", "bare grpc.aio ping-pong"),
        ("auto", "arena remote SDK bot (auto)"),
        ("thread", "arena remote SDK bot (thread)"),
        ("inline", "arena remote SDK bot (inline)"),
        ("observing", "  auto, reads its observation"),
    ):
        print(
            f"{label:<31}{statistics.median(means[key]) * 1e6:8.1f}us{ratio(means[key], means['bare']):7.2f}x"
            f"{statistics.median(medians[key]) * 1e6:8.1f}us{ratio(medians[key], medians['bare']):7.2f}x"
        )
    print("target: arena <= 1.3x bare")

    arena_rates: list[float] = []
    bare_rates: list[float] = []
    cpu: dict[str, list[float]] = {"bare": [], "arena": [], "bare clients": [], "arena clients": []}
    extra = args.serve_args.split()
    server_cpu = args.pin
    if args.pin is not None:
        others = [c for c in all_cpus if c != args.pin] or [args.pin]
        os.sched_setaffinity(0, set(others))  # the clients of (3), off the servers' CPU
    for _ in range(max(args.repeats // 2, 1)):
        rate, server, clients = loaded("bare", echo_process(server_cpu, args.helper_threads))
        bare_rates.append(rate)
        cpu["bare"].append(server)
        cpu["bare clients"].append(clients)
        rate, server, clients = loaded("arena", arena_process(extra, server_cpu, args.helper_threads))
        arena_rates.append(rate)
        cpu["arena"].append(server)
        cpu["arena clients"].append(clients)
    print(
        f"{MATCHES} concurrent streams, server in its own process{' (' + args.serve_args + ')' if extra else ''}, "
        f"clients in a process of their own, {max(args.repeats // 2, 1)} interleaved repeats; "
        f"both servers' helper threads {args.helper_threads}:"
    )
    print(
        f"  bare  {statistics.median(bare_rates):8.0f} round trips/s   server CPU "
        f"{statistics.median(cpu['bare']) * 1e6:6.1f} us per round trip, clients "
        f"{statistics.median(cpu['bare clients']) * 1e6:6.1f} us"
    )
    print(
        f"  arena {statistics.median(arena_rates):8.0f} remote moves/s   server CPU "
        f"{statistics.median(cpu['arena']) * 1e6:6.1f} us per move, clients "
        f"{statistics.median(cpu['arena clients']) * 1e6:6.1f} us "
        f"({2 * statistics.median(arena_rates):.0f} moves/s counting the hosted seat)"
    )
    print(
        f"  arena/bare: throughput {ratio(arena_rates, bare_rates):.2f}x (target >= 0.8x); "
        f"server CPU per round trip {ratio(cpu['arena'], cpu['bare']):.2f}x"
    )

    across_runs: dict[str, list[float]] = {
        "bare-latency": [],
        "arena-auto": [],
        "arena-thread": [],
        "arena-inline": [],
        "arena-observing": [],
        "arena-protocol": [],
    }
    for _ in range(max(args.repeats // 2, 1)):
        across_runs["bare-latency"].append(across("bare-latency", echo_process(server_cpu, args.helper_threads)))
        for kind in ("arena-auto", "arena-thread", "arena-inline", "arena-observing", "arena-protocol"):
            across_runs[kind].append(across(kind, arena_process(extra, server_cpu, args.helper_threads)))
    print(
        f"one remote bot, server in its own process{' (' + args.serve_args + ')' if extra else ''}, "
        f"the bot in another, {ACROSS_ROUNDS} rounds, {max(args.repeats // 2, 1)} interleaved repeats; "
        f"both servers' helper threads {args.helper_threads}:"
    )
    for key, label in (
        ("bare-latency", "bare grpc.aio ping-pong"),
        ("arena-auto", "arena remote SDK bot (auto)"),
        ("arena-thread", "arena remote SDK bot (thread)"),
        ("arena-inline", "arena remote SDK bot (inline)"),
        ("arena-observing", "  auto, reads its observation"),
        ("arena-protocol", "arena, protocol client, no SDK"),
    ):
        print(
            f"  {label:<31}median {statistics.median(across_runs[key]) * 1e6:6.1f}us"
            f"{ratio(across_runs[key], across_runs['bare-latency']):7.2f}x"
        )
    print("target: arena <= 1.3x bare")


if __name__ == "__main__":
    main()
