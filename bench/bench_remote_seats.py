"""A remote bot's move in either seat of a simultaneous game against a hosted bot.

``arena serve`` in its own process and one SDK bot (``threaded="auto"``, the
bench bot of ``bench_remote.py``) in another, as in that benchmark's part
(4): the median round trip over ``ROUNDS`` rounds of RPS, the bot in seat 0
and in seat 1, against hosted bots whose ``act`` costs from nothing
(``rock``) to about ten microseconds (``sicilian``, an ensemble). In a simultaneous move
both seats are asked together. Since issue 20's twelfth pass the referee asks
the remote seat first, whatever its number, so its Turn travels while the
hosted bot computes; before, a remote bot in seat 1 waited for seat 0's
hosted bot on every move. The ratio seat 1 / seat 0 shows whether it still
does (1.00: no).

Seats and opponents alternate ``REPEATS`` times; a ratio is the median of the
per-repeat ratios. ``--pin CPU`` puts the server on that CPU and the client
on another, as ``bench_remote.py --pin`` does in (4).

Run: ``.venv/bin/python bench/bench_remote_seats.py [--pin CPU] [--opponents rock,sicilian]``.
"""

from __future__ import annotations

import argparse
import os
import statistics

from bench_remote import arena_process, ratio, run_clients

from arena_client._native import status as native_status

ROUNDS = 2000
REPEATS = 2
OPPONENTS = ("rock", "markov-6", "sicilian")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=REPEATS, help=f"runs of each pair (default {REPEATS})")
    parser.add_argument("--pin", type=int, metavar="CPU", help="the server on this CPU, the client on the others")
    parser.add_argument(
        "--opponents", default=",".join(OPPONENTS), help=f"hosted RPS bots, comma-separated (default {OPPONENTS})"
    )
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    opponents = [name for name in args.opponents.split(",") if name]
    all_cpus = sorted(os.sched_getaffinity(0))
    if args.pin is not None:
        if args.pin not in all_cpus:
            parser.error(f"--pin {args.pin}: this process may run on CPUs {all_cpus} only")
        os.sched_setaffinity(0, {c for c in all_cpus if c != args.pin} or {args.pin})  # the client inherits it
    runs: dict[tuple[str, int], list[float]] = {(name, seat): [] for name in opponents for seat in (0, 1)}
    for _ in range(args.repeats):
        for name in opponents:
            for seat in (0, 1):
                with arena_process([], args.pin) as (port, _pid):
                    runs[name, seat].append(run_clients(f"seat-{seat}-{name}", port, 1, ROUNDS)["median"])
    print(f"one remote SDK bot against a hosted bot, {ROUNDS} rounds of rps, {args.repeats} interleaved repeats")
    print(f"move path: {native_status()}")
    print(f"{'opponent':<12}{'seat 0':>10}{'seat 1':>10}{'seat 1 / seat 0':>18}")
    for name in opponents:
        zero, one = runs[name, 0], runs[name, 1]
        print(
            f"{name:<12}{statistics.median(zero) * 1e6:8.1f}us{statistics.median(one) * 1e6:8.1f}us"
            f"{ratio(one, zero):17.2f}x"
        )


if __name__ == "__main__":
    main()
