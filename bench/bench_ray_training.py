"""``arena train dots-and-boxes --ray`` (a local Ray cluster) against the single-process run, same machine, same run.

The workload: the thesis's training settings (population 10, 1000 evaluations
= 100 round robins, test every 5 generations) with ``REPETITIONS``
independent repetitions, each run a fresh ``arena train`` process with a fresh
output folder. Two figures per run: the wall clock of the whole command (Ray's
start-up included) and the games/s the command prints at the end (training
only, start-ups excluded). The two modes alternate ``REPEATS`` times; ratios
are medians of the per-repeat ratios. Every Ray run's CSV is checked against
the single-process one (all columns but the wall clock).

Run: ``.venv/bin/python bench/bench_ray_training.py [REPETITIONS [REPEATS]]`` (default 10 and 2).
"""

from __future__ import annotations

import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPETITIONS = 10
REPEATS = 2


def run(folder: str, name: str, ray: bool) -> tuple[float, float, list[dict[str, str]]]:
    """(wall seconds, games/s as printed, the CSV rows without the seconds column)."""
    out = os.path.join(folder, name)
    command = [sys.executable, "-m", "arena_server.cli", "train", "dots-and-boxes", "--repetitions", str(REPETITIONS)]
    command += ["--out", out, "--no-plots", "--quiet", *(["--ray"] if ray else [])]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    rate = re.findall(r"\(([0-9,]+) games/s\)", done.stdout)
    with open(os.path.join(out, "generations.csv")) as fh:
        rows = [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(fh)]
    return wall, float(rate[-1].replace(",", "")), rows


def main() -> None:
    global REPETITIONS, REPEATS
    if len(sys.argv) > 1:
        REPETITIONS = int(sys.argv[1])
    if len(sys.argv) > 2:
        REPEATS = int(sys.argv[2])
    singles, rays = [], []
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(REPEATS):
            singles.append(run(folder, f"single-{repeat}", ray=False))
            rays.append(run(folder, f"ray-{repeat}", ray=True))
    same = all(r[2] == singles[0][2] for r in singles + rays)
    wall = statistics.median(s[0] / r[0] for s, r in zip(singles, rays, strict=True))
    rate = statistics.median(r[1] / s[1] for s, r in zip(singles, rays, strict=True))
    cpus = len(os.sched_getaffinity(0))
    games = REPETITIONS * 100 * 90
    print(f"train dots-and-boxes: {REPETITIONS} repetitions, {games} games; CPUs: {cpus}; median of {REPEATS}")
    print(
        f"single process : {statistics.median(s[0] for s in singles):6.1f} s wall, "
        f"{statistics.median(s[1] for s in singles):8,.0f} games/s"
    )
    print(
        f"--ray (local)  : {statistics.median(r[0] for r in rays):6.1f} s wall, "
        f"{statistics.median(r[1] for r in rays):8,.0f} games/s"
    )
    print(f"speed-up       : {wall:6.2f}x wall clock (Ray start-up included), {rate:6.2f}x games/s")
    print(f"same numbers   : {'yes' if same else 'NO'} (every run's CSV but the seconds column)")


if __name__ == "__main__":
    main()
