"""What one remote move asks of the Python interpreter and the event loop (cProfile counts).

Plays the same 1000-round match as ``bench_remote.py`` (remote SDK bot, inline
``act``, against hosted rock; server and client in this process) under
cProfile, and prints per move: Python function calls, event-loop iterations,
callbacks run, tasks created and timers set, then the functions with the most
own time. Counts do not depend on how busy the machine is, so they compare
two versions of the code better than timings on a shared machine do.

Run: ``.venv/bin/python bench/profile_moves.py [--top 25]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_remote

MOVES = bench_remote.ROUNDS + 100  # the measured match and its 100-round warm-up match
CALLBACK = "<method 'run' of '_contextvars.Context' objects>"
"""How cProfile names the call that runs one event-loop callback."""


def count(stats: pstats.Stats, name: str) -> int:
    """Calls of every function called ``name`` (all modules)."""
    table: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = stats.stats  # type: ignore[attr-defined]
    return sum(row[1] for key, row in table.items() if key[2] == name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=25, help="functions to list by own time")
    args = parser.parse_args()
    asyncio.run(bench_remote.arena_round_trip(False))  # imports and caches warmed up
    profile = cProfile.Profile()
    profile.enable()
    asyncio.run(bench_remote.arena_round_trip(False))
    profile.disable()
    stats = pstats.Stats(profile)
    total_calls: int = stats.total_calls  # type: ignore[attr-defined]
    print(f"per remote move ({MOVES} moves, Python {sys.version.split()[0]}):")
    print(f"  Python function calls  {total_calls / MOVES:7.1f}")
    print(f"  event-loop iterations  {count(stats, '_run_once') / MOVES:7.2f}")
    print(f"  callbacks run          {count(stats, CALLBACK) / MOVES:7.2f}")
    print(f"  tasks created          {count(stats, 'create_task') / MOVES:7.2f}")
    print(f"  timers set             {count(stats, 'call_at') / MOVES:7.2f}")
    print(f"  futures created        {count(stats, 'create_future') / MOVES:7.2f}")
    stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
