"""The rated ladder's throughput: ``arena serve --workers 2`` against ``--workers 1``, same run.

Each configuration is a real ``arena serve`` process with a fresh SQLite file and its ladder on
(``--ladder-interval 0``: as fast as the bots allow), over eight hosted RPS bots, 1,000-round matches,
``--concurrency 4 --per-bot 1``. With one worker the ladder runs in the server's one process; with two,
the main process's coordinator pairs and the two workers play (docs/cluster.md). Nothing connects to
the server: the load is the ladder's own.

A run waits for ``WARMUP`` rated matches to be stored (the bots' first matches compile their kernels),
then counts the rated matches stored in the next ``--seconds`` seconds by polling the database. It also
prints the CPU a match took in all of the server's processes (from /proc). The two configurations
alternate ``--repeats`` times; the ratio is the median of the per-repeat ratios, with a distribution-free
interval for that median. The main process's own CPU a match is printed too: with two workers that is the
store writer and the ladder coordinator.

This measures what ``bench_workers.py`` does not: pairing, the unit's trip to a worker and back, the
pause check and the refits, on top of the matches. Run:
``.venv/bin/python bench/bench_ladder_workers.py [--seconds S] [--repeats N]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import statistics
import subprocess
import tempfile
import time

from bench_remote import cpu_seconds
from bench_workers import report, start_server, tree_cpu

from arena_client._native import status as native_status

BOTS = "rotate,beat-last,rock,random,always-loop,supp,markov-1,markov-2"
ROUNDS = 1000
WARMUP = 16
SECONDS = 8.0
REPEATS = 3
FINISHED = "SELECT COUNT(*) FROM matches WHERE rated = 1 AND status = 'finished'"


def rated(db: str) -> int:
    """Rated matches stored so far (0 while the file is not there yet)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    except sqlite3.OperationalError:
        return 0
    try:
        return int(conn.execute(FINISHED).fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def measure(workers: int, folder: str, repeat: int, seconds: float) -> tuple[float, float, float]:
    """(rated matches a second, server CPU seconds a match, the main process's share of it) of one run."""
    db = os.path.join(folder, f"ladder-{workers}-{repeat}.db")
    options = ("--ladder-game", f"rps:rounds={ROUNDS}", "--ladder-bots", BOTS, "--concurrency", "4", "--per-bot", "1")
    proc, _port = start_server(workers, db, options=(*options, "--ladder-interval", "0"))
    try:
        deadline = time.monotonic() + 120
        while rated(db) < WARMUP:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"arena serve --workers {workers} played fewer than {WARMUP} rated matches")
            time.sleep(0.05)
        first, cpu0, main0, t0 = rated(db), tree_cpu(proc.pid), cpu_seconds(proc.pid), time.monotonic()
        time.sleep(seconds)
        last, cpu1, main1, t1 = rated(db), tree_cpu(proc.pid), cpu_seconds(proc.pid), time.monotonic()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    played = max(last - first, 1)
    return played / (t1 - t0), (cpu1 - cpu0) / played, (main1 - main0) / played


def timed_runs(description: str, seconds: float = SECONDS, repeats: int = REPEATS) -> argparse.Namespace:
    """``--seconds`` counted a run and ``--repeats`` runs of each configuration, from the command line, checked."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seconds", type=float, default=seconds, help=f"seconds counted a run (default {seconds:g})")
    parser.add_argument("--repeats", type=int, default=repeats, help=f"runs of each configuration (default {repeats})")
    args = parser.parse_args()
    if args.seconds <= 0 or args.repeats < 1:
        parser.error("--seconds must be positive and --repeats at least 1")
    return args


def main() -> None:
    args = timed_runs(__doc__.splitlines()[0])
    ones, twos = [], []
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(args.repeats):
            ones.append(measure(1, folder, repeat, args.seconds))
            twos.append(measure(2, folder, repeat, args.seconds))
    print(
        f"CPUs available: {len(os.sched_getaffinity(0))}; ladder of 8 hosted RPS bots, {ROUNDS} rounds, "
        f"--concurrency 4 --per-bot 1, {args.seconds:g} s counted after {WARMUP} matches, median of {args.repeats}"
    )
    print(f"move path: {native_status()}")
    report([run[:2] for run in ones], [run[:2] for run in twos], "rated matches/s", "7.1f", ".1f", ".1f", "7.2f")
    for label, runs in (("1", ones), ("2", twos)):
        main = statistics.median(run[2] for run in runs) * 1e3
        role = "the whole server" if label == "1" else "the store writer and the ladder coordinator"
        print(f"  of which the main process, --workers {label}: {main:.2f} ms a match ({role})")


if __name__ == "__main__":
    main()
