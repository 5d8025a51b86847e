"""What a relayed seat costs: remote bots on different workers of ``arena serve --workers 2``.

A match between two remote bots on different workers is refereed by the
worker that got the ``CreateMatch``; the bot connected to the other worker
plays through that worker's relay (``arena_server.seats.peer``), one more
Unix-socket hop each way per move. (A ``CreateMatch`` whose bots are both on
the other worker goes there.) This script starts a real ``arena serve --workers 2``, connects
``BOTS`` SDK bots (answering at once, inline) from as many addresses, finds
which worker holds each connection (``/proc/net/tcp``), and times
``CreateMatch(wait)`` of ``ROUNDS``-round RPS matches in three placements,
interleaved ``REPEATS`` times:

- ``direct``: both bots and the ``CreateMatch`` on one worker (no relay);
- ``one relayed``: the bots on different workers, the match refereed by one of them;
- ``passed on``: both bots on one worker and the ``CreateMatch`` sent to the other, which passes it on
  to theirs (``arena_server.api.matches``): refereed there, as ``direct``. Until the thirty-ninth pass
  of issue 20 the worker the call reached refereed it, with both seats relayed (``both relayed``).

It prints the median time a round (both bots' moves) over the repeats, and each
placement against ``direct``; then the CPU time each worker process spent a
round (every thread, from ``/proc/PID/task/*/schedstat``), which the host's
noise moves less than the wall-clock time. The bots share this one process (and the two
cores with the server), so a round's time includes their SDK work; the bot's
own clock never includes the relay (its worker times it).

Run: ``.venv/bin/python bench/bench_relay.py [--rounds N] [--repeats N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # (the tests' helper that finds a worker)

from bench_workers import start_server

from arena.v1 import bots_pb2 as bp
from arena.v1 import bots_pb2_grpc as bp_grpc
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client import Bot, Turn
from arena_client.remote import Client
from tests.server.test_workers import worker_holding

BOTS = 8
ROUNDS = 2000
REPEATS = 5


class Quick(Bot):
    games = ("rps",)

    def act(self, turn: Turn) -> int:
        return 2


async def channels_by_worker(proc: object, port: int) -> dict[int, grpc.aio.Channel]:
    """A channel on each worker (its pid -> the channel), from as many addresses as it takes."""
    found: dict[int, grpc.aio.Channel] = {}
    for n in range(40, 80):
        address = f"127.0.0.{n}"
        channel = grpc.aio.insecure_channel(f"{address}:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
        await bp_grpc.BotServiceStub(channel).ListBots(bp.ListBotsRequest(), timeout=30)
        pid = worker_holding(proc, address, port)  # type: ignore[arg-type]
        if pid in found:
            await channel.close()
        else:
            found[pid] = channel
        if len(found) == 2:
            return found
    raise SystemExit("every connection landed on one worker")


def cpu_seconds(pid: int) -> float:
    """The CPU time of process ``pid`` so far, every thread (nanosecond counts, from ``schedstat``)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # (a thread that ended meanwhile)
    return total / 1e9


async def timed(channel: grpc.aio.Channel, a: Client, b: Client, rounds: int) -> float:
    """Seconds a round of a ``rounds``-round match between ``a`` and ``b``, created over ``channel``."""
    request = mp.CreateMatchRequest(
        game="rps", bots=[a.name, b.name], wait=True, bot_tokens={a.name: a.session_token, b.name: b.session_token}
    )
    request.params["rounds"].int_value = rounds
    began = time.perf_counter()
    reply = await mp_grpc.MatchServiceStub(channel).CreateMatch(request, timeout=600)
    took = time.perf_counter() - began
    if reply.record.reason != "the game ended normally":
        raise SystemExit(f"match {reply.match_id} ended: {reply.record.reason}")
    return took / rounds


async def main(rounds: int, repeats: int) -> None:
    folder = tempfile.mkdtemp(prefix="arena-bench-relay-")
    proc, port = start_server(2, os.path.join(folder, "arena.db"), host="0.0.0.0")
    try:
        clients = [  # (guests, and not following redirects: never moved, so the matches across workers relay)
            Client(Quick(), f"127.0.0.{i + 2}:{port}", name=f"q-{i}", threaded=False, follow_redirects=False)
            for i in range(BOTS)
        ]
        playing = [asyncio.ensure_future(c.play()) for c in clients]
        while not all(c.session_token for c in clients):
            await asyncio.sleep(0.05)
        where: dict[int, list[Client]] = {}
        for i, client in enumerate(clients):
            where.setdefault(worker_holding(proc, f"127.0.0.{i + 2}", port), []).append(client)  # type: ignore[arg-type]
        channels = await channels_by_worker(proc, port)
        pids = sorted(channels)
        crowded = max(where, key=lambda pid: len(where[pid]))
        other = next(pid for pid in pids if pid != crowded)
        if len(where.get(other, [])) == 0:
            raise SystemExit("every bot landed on one worker; run again")
        same = where[crowded][:2]
        across = (where[crowded][2] if len(where[crowded]) > 2 else where[crowded][0], where[other][0])
        placements = {  # the channel the CreateMatch goes on, the two bots
            "direct": (channels[crowded], same),
            "one relayed": (channels[crowded], list(across)),
            "passed on": (channels[other], same),
        }
        for channel, (a, b) in placements.values():  # warm up each placement's paths
            await timed(channel, a, b, 200)
        times: dict[str, list[float]] = {name: [] for name in placements}
        cpu: dict[str, list[tuple[float, float]]] = {name: [] for name in placements}
        workers = (crowded, other)  # the refereeing worker first (the bots' worker referees every placement)
        for _ in range(repeats):
            for name, (channel, (a, b)) in placements.items():
                before = [cpu_seconds(pid) for pid in workers]
                times[name].append(await timed(channel, a, b, rounds))
                after = [cpu_seconds(pid) for pid in workers]
                cpu[name].append(((after[0] - before[0]) / rounds, (after[1] - before[1]) / rounds))
        print(f"RPS, {rounds} rounds a match, two remote SDK bots (inline) here, {repeats} interleaved repeats")
        base = statistics.median(times["direct"])
        for name, values in times.items():
            median = statistics.median(values)
            per = ", ".join(f"{v * 1e6:.0f}" for v in values)
            print(f"  {name:<13} {median * 1e6:7.1f} us a round  {median / base:5.2f}x   (runs: {per})")
        print("CPU a round, median over the repeats: the refereeing worker, the other worker")
        for name, values in cpu.items():
            mine = statistics.median(v[0] for v in values) * 1e6
            theirs = statistics.median(v[1] for v in values) * 1e6
            print(f"  {name:<13} {mine:7.1f} us  {theirs:7.1f} us")
        for task in playing:
            task.cancel()
        await asyncio.gather(*playing, return_exceptions=True)
        for channel in channels.values():
            await channel.close()
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.repeats))
