"""What a match's start and end cost the server: many short matches from remote SDK bots.

``arena serve`` (no ladder, a scratch SQLite file) in its own process; a client
process runs ``--sessions`` SDK bots at once, each playing ``--matches``
matches of ``--rounds``-round RPS against the hosted ``rock`` bot, on one
connection each (``--connect-each`` opens a connection per match instead).
Every match is stored, its start and its end, as on any server. Printed: the
server's CPU per match (``/proc``, all its threads) and matches per second.

Short matches are where the start and end weigh: a 1-round match is almost
nothing else, a tic-tac-toe match is at most nine moves. There is no bare
baseline to hold this against (a bare stream stores nothing); the figure is
for before/after comparisons on one machine (docs/performance.md, fifteenth
pass).

Run: ``.venv/bin/python bench/bench_match_overhead.py [--rounds N] [--connect-each] [--pin CPU]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

from bench_remote import arena_process, cpu_seconds
from remote_clients import Scissors

from arena_client.remote import Client


async def play(port: int, sessions: int, matches: int, rounds: int, connect_each: bool) -> None:
    """``sessions`` bots at once, each ``matches`` matches (one connection each, or one per match)."""

    async def one(index: int) -> None:
        target = f"127.0.0.1:{port}"
        if connect_each:
            for _ in range(matches):
                client = Client(Scissors(), target, name=f"short-{index}", threaded=False)
                await client.play(opponent="rock", params={"rounds": rounds})
        else:
            client = Client(Scissors(), target, name=f"short-{index}", threaded=False)
            results = await client.play(opponent="rock", params={"rounds": rounds}, matches=matches)
            assert len(results) == matches

    await asyncio.gather(*(one(i) for i in range(sessions)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--matches", type=int, default=100, help="matches per session")
    parser.add_argument("--connect-each", action="store_true", help="a new connection for every match")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pin", type=int, metavar="CPU", help="the server on this CPU, the clients off it")
    parser.add_argument("--client", type=int, help=argparse.SUPPRESS)  # the clients' process: the server's port
    args = parser.parse_args()
    if args.client is not None:
        asyncio.run(play(args.client, args.sessions, args.matches, args.rounds, args.connect_each))
        return
    if args.pin is not None:
        others = sorted(os.sched_getaffinity(0) - {args.pin}) or [args.pin]
        os.sched_setaffinity(0, set(others))
    client_args = [
        *("--rounds", str(args.rounds), "--sessions", str(args.sessions), "--matches", str(args.matches)),
        *(["--connect-each"] if args.connect_each else []),
    ]
    count = args.sessions * args.matches
    cpu: list[float] = []
    rates: list[float] = []
    for _ in range(args.repeats):
        with arena_process([], args.pin) as (port, pid):
            warm = [sys.executable, __file__, "--client", str(port), "--sessions", "4", "--matches", "3"]
            subprocess.run(warm, check=True)
            before, start = cpu_seconds(pid), time.perf_counter()
            subprocess.run([sys.executable, __file__, "--client", str(port), *client_args], check=True)
            elapsed = time.perf_counter() - start
            cpu.append((cpu_seconds(pid) - before) / count)
            rates.append(count / elapsed)
    how = "a connection per match" if args.connect_each else "one connection per session"
    print(f"{args.sessions} sessions x {args.matches} matches of {args.rounds} round(s), {how}, {args.repeats} repeats")
    each = " ".join(f"{c * 1e3:.3f}" for c in cpu)
    print(f"  server CPU per match  {each} ms (median {statistics.median(cpu) * 1e3:.3f})")
    print(f"  matches per second    {' '.join(f'{r:.0f}' for r in rates)} (median {statistics.median(rates):.0f})")


if __name__ == "__main__":
    main()
