"""Multi-process server throughput: ``arena serve --workers 2`` against ``--workers 1``, same run.

Each configuration is a real ``arena serve`` process (with its SQLite file)
started by this script. The load is refereeing: ``CreateMatch`` with
``wait`` between two hosted bots (a 1,000-round RPS match, ``rotate`` vs
``beat-last``), issued over 8 separate gRPC connections (the per-caller cap is 8 running matches) (the kernel spreads
connections over the workers' shared port) from one shared queue of matches,
so a worker that gets fewer connections still gets work. The client side
costs one RPC per match, and every match is stored by the one writer (the
main process) before its reply. Each run also prints the CPU a match took
in all of the server's processes (from /proc) and in this client: on a
machine this small the client and the writer share the workers' cores, so
the server's CPU a match with two workers against one is what splitting the
server costs, apart from the cores the client takes.

The two configurations alternate ``REPEATS`` times so background load hits
both alike; the ratio is the median of the per-repeat ratios, printed with a
distribution-free interval for that median (order statistics) and its
confidence: on a shared VM the per-repeat ratios spread widely, and a change
smaller than the interval is not resolved by one run.

A run is ``MATCHES`` (192) matches: about 2.1 s with one worker and 1.15 s
with two here. Its last ~0.04 s, after the last match has started, is a tail
in which one of two workers may have nothing left to play while the other
finishes its share (one worker never idles: its last matches share its core).
Until the twelfth pass a run was 48 matches (0.54 s and 0.30 s), so that tail
was an eighth of the two workers' window; the ratio read 1.71-1.79x where 192
matches read 1.81-1.89x on the same code, back to back (docs/performance.md,
twelfth pass). ``--matches 48`` gives the old measure; each run prints its
window and its tail.

Target (issue 20): with 2 workers at least 1.7x the single-process figure on
this 2-core machine. Run: ``.venv/bin/python bench/bench_workers.py
[--matches N] [--repeats N]`` (``taskset -c 0,1`` to pin it to two cores).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

import grpc
from bench_remote import cpu_seconds

from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client._native import status as native_status

MATCHES = 192
ROUNDS = 1000
CONNECTIONS = 8
REPEATS = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    workers: int,
    db: str,
    host: str = "127.0.0.1",
    options: Sequence[str] = ("--no-ladder",),
    stderr: int = subprocess.DEVNULL,
) -> tuple[subprocess.Popen[str], int]:
    """``arena serve --workers N --no-http`` and ``options`` (``--no-ladder`` unless others are given) on a free
    port (``host`` 0.0.0.0: every 127.0.0.N), once it serves; the process and its port. ``stderr``:
    ``subprocess.PIPE`` to read what the server says at its end."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "arena_server.cli",
            "serve",
            "--host",
            host,
            "--port",
            str(port),
            "--db",
            db,
            *options,
            "--no-http",
            "--workers",
            str(workers),
        ],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    assert proc.stdout is not None
    for _ in range(10):
        line = proc.stdout.readline()
        if "serving on" in line:
            return proc, port
    proc.kill()
    raise SystemExit(f"arena serve --workers {workers} did not start")


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` and its children (the workers), from /proc."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            if int(entry) == pid or parent == pid:
                total += cpu_seconds(int(entry))
        except OSError:
            continue  # (gone meanwhile)
    return total


def own_cpu() -> float:
    t = os.times()
    return t.user + t.system


async def load(port: int, matches: int, server_pid: int | None = None) -> tuple[float, float, float, float, float]:
    """Moves per second over ``matches`` hosted-vs-hosted matches, the window's seconds and its tail's,
    and the CPU seconds a match of the server (all its processes; 0 without ``server_pid``) and of this client.

    The tail is the time from the last match's start (the queue empty) to the end of the window.
    """
    last_start: list[float] = []
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(matches):
        queue.put_nowait(i)
    request = mp.CreateMatchRequest(game="rps", bots=["rotate", "beat-last"], wait=True)
    request.params["rounds"].int_value = ROUNDS
    moves = 0

    async def connection(i: int) -> None:
        nonlocal moves
        # A distinct channel option keeps gRPC from sharing one connection between the channels.
        async with grpc.aio.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1), ("bench.channel", i)]
        ) as channel:
            stub = mp_grpc.MatchServiceStub(channel)
            while not queue.empty():
                queue.get_nowait()
                if queue.empty():
                    last_start.append(time.perf_counter())
                reply = await stub.CreateMatch(request)
                assert reply.record.status == mp.MATCH_STATUS_FINISHED, reply.record.reason
                moves += reply.record.move_count

    await asyncio.gather(*(connection(i) for i in range(CONNECTIONS)))  # warm-up: numba, connections
    for i in range(matches):
        queue.put_nowait(i)
    moves = 0
    last_start.clear()
    server_before = tree_cpu(server_pid) if server_pid is not None else 0.0
    client_before = own_cpu()
    start = time.perf_counter()
    await asyncio.gather(*(connection(i) for i in range(CONNECTIONS)))
    end = time.perf_counter()
    server = (tree_cpu(server_pid) - server_before) / matches if server_pid is not None else 0.0
    client = (own_cpu() - client_before) / matches
    return moves / (end - start), end - start, end - last_start[0], server, client


def measure(workers: int, folder: str, repeat: int, matches: int) -> tuple[float, float]:
    """One run: moves per second, and the server's CPU seconds per match (all its processes)."""
    proc, port = start_server(workers, os.path.join(folder, f"w{workers}-{repeat}.db"))
    try:
        rate, window, tail, server, client = asyncio.run(load(port, matches, proc.pid))
        after = f"{tail:.3f} s after the last match started"
        cpu = f"CPU a match: server {server * 1e3:.2f} ms, this client {client * 1e3:.2f} ms"
        print(f"  --workers {workers}: {rate:9.0f} moves/s over {window:.2f} s ({after}); {cpu}")
        return rate, server
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def median_interval(values: list[float]) -> tuple[float, float, float]:
    """A distribution-free interval for the median of what ``values`` (sorted) sample, and its confidence.

    The k-th smallest and k-th largest of n values bracket the median with
    confidence 1 - 2 P(Binomial(n, 1/2) < k). The widest k whose confidence is
    at least 95% is taken; with fewer than six values none reaches 95%, and
    the whole range is given with the confidence it has (94% for five).
    """
    n = len(values)
    below = 0.0  # P(Binomial(n, 1/2) < k), for k = 1, 2, ...
    best = (values[0], values[-1], 1 - 2 * 0.5**n)
    for k in range(1, (n + 1) // 2 + 1):
        below += math.comb(n, k - 1) * 0.5**n
        confidence = 1 - 2 * below
        if confidence < 0.95:
            break
        best = (values[k - 1], values[n - k], confidence)
    return best


def report(
    ones: list[tuple[float, float]],
    twos: list[tuple[float, float]],
    unit: str,
    median_format: str,
    run_format: str,
    cpu_format: str,
    ratio_format: str,
    target: str = "",
    note: str = "",
) -> None:
    """Print each configuration's median rate (its runs) and CPU a match, then the ratio 2 / 1 and its interval."""
    for label, runs in (("1", ones), ("2", twos)):
        each = ", ".join(f"{rate:{run_format}}" for rate, _ in runs)
        cpu = statistics.median(server for _, server in runs) * 1e3
        print(
            f"arena serve --workers {label} : {statistics.median(r for r, _ in runs):{median_format}} {unit}  "
            f"(runs: {each}); server CPU {cpu:{cpu_format}} ms a match"
        )
    ratios = sorted(t[0] / o[0] for t, o in zip(twos, ones, strict=True))
    low, high, confidence = median_interval(ratios)
    print(f"ratio 2 workers / 1     : {statistics.median(ratios):{ratio_format}}x{target}")
    print(
        f"  per repeat {', '.join(f'{r:.2f}' for r in ratios)}: the median ratio lies in {low:.2f}-{high:.2f}x "
        f"with {confidence:.0%} confidence{note}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=MATCHES, help=f"matches a run plays (default {MATCHES})")
    parser.add_argument("--repeats", type=int, default=REPEATS, help=f"runs of each configuration (default {REPEATS})")
    args = parser.parse_args()
    if args.matches < CONNECTIONS or args.repeats < 1:
        parser.error(f"--matches must be at least {CONNECTIONS} and --repeats at least 1")
    cpus = len(os.sched_getaffinity(0))
    ones, twos = [], []
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(args.repeats):
            ones.append(measure(1, folder, repeat, args.matches))
            twos.append(measure(2, folder, repeat, args.matches))
    cost = statistics.median(t[1] / o[1] for t, o in zip(twos, ones, strict=True))
    print(
        f"CPUs available: {cpus}; {args.matches} matches of {ROUNDS} rounds, {CONNECTIONS} connections, "
        f"median of {args.repeats}"
    )
    print(f"move path: {native_status()}")
    noise = " (order statistics, no assumption on the host's noise)"
    report(ones, twos, "moves/s", "9.0f", ".0f", ".2f", "9.2f", " (target >= 1.7x)", noise)
    print(f"server CPU a match, 2 / 1: {cost:8.2f}x (what splitting the server costs; the client shares these cores)")


if __name__ == "__main__":
    main()
