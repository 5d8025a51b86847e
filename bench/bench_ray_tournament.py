"""``arena tournament --ray`` (a local Ray cluster) against the single-process run, same machine, same run.

The workload: a round robin of five RPS bots (10,000 rounds a match, 8 games a
pair: 80 matches), each run a fresh ``arena tournament`` process with a fresh
database. Two figures per run: the wall clock of the whole command (Ray's
start-up included) and the match rate from the first match's start to the
last match's end, start-ups excluded, read from the run's database (the
matches' ``started_at`` and ``ended_at``; the progress bar, which this
script read until the twentieth pass, is drawn on a terminal only). The two
modes alternate ``REPEATS`` times; ratios are medians of the per-repeat ratios.

Run: ``.venv/bin/python bench/bench_ray_tournament.py``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime

BOTS = ["mind-reader-5", "markov-3", "beat-last", "rotate", "sicilian"]
GAMES_PER_PAIR = 8
REPEATS = 2


def run(folder: str, name: str, ray: bool) -> tuple[float, float]:
    """(wall seconds, matches/s from the first match's start to the last one's end)."""
    command = [
        sys.executable,
        "-m",
        "arena_server.cli",
        "tournament",
        "--game",
        "rps",
        "-p",
        "rounds=10000",
        "--bots",
        *BOTS,
        "--games-per-pair",
        str(GAMES_PER_PAIR),
        "--db",
        os.path.join(folder, f"{name}.db"),
        "--output",
        os.path.join(folder, name),
        *(["--ray"] if ray else []),
    ]
    start = time.perf_counter()
    subprocess.run(command, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    return wall, match_rate(os.path.join(folder, f"{name}.db"))


def match_rate(db: str) -> float:
    """Finished matches per second in ``db``, from the first one's start to the last one's end."""
    with contextlib.closing(sqlite3.connect(db)) as connection:
        count, first, last = connection.execute(
            "SELECT count(*), min(started_at), max(ended_at) FROM matches WHERE status = 'finished'"
        ).fetchone()
    if not count:
        raise SystemExit(f"{db}: the tournament finished no match")
    span = (datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds()
    return float(count) / span


def main() -> None:
    singles, rays = [], []
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(REPEATS):
            singles.append(run(folder, f"single-{repeat}", ray=False))
            rays.append(run(folder, f"ray-{repeat}", ray=True))
    wall = statistics.median(s[0] / r[0] for s, r in zip(singles, rays, strict=True))
    rate = statistics.median(r[1] / s[1] for s, r in zip(singles, rays, strict=True))
    matches = GAMES_PER_PAIR * len(BOTS) * (len(BOTS) - 1) // 2
    cpus = len(os.sched_getaffinity(0))
    print(f"{matches} RPS matches of 10000 rounds, {len(BOTS)} bots; CPUs available: {cpus}; median of {REPEATS}")
    print(
        f"single process : {statistics.median(s[0] for s in singles):6.1f} s wall, "
        f"{statistics.median(s[1] for s in singles):6.1f} matches/s"
    )
    print(
        f"--ray (local)  : {statistics.median(r[0] for r in rays):6.1f} s wall, "
        f"{statistics.median(r[1] for r in rays):6.1f} matches/s"
    )
    print(f"speed-up       : {wall:6.2f}x wall clock (Ray start-up included), {rate:6.2f}x match rate")


if __name__ == "__main__":
    main()
