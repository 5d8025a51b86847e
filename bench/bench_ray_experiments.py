"""``arena experiment rpsls-thesis | tictactoe-lab | liars-dice-thesis --ray`` against the single-process run.

Each experiment runs as a fresh ``arena experiment ... --quick`` process
(the full runs take from minutes to hours), once in one process and once with
``--ray`` (a local Ray cluster with one worker per usable CPU), alternating
``REPEATS`` times. The figure is the wall clock of the whole command, Ray's
start-up included; the ratio is the median of the per-repeat ratios. Every Ray
run's document is compared with the single-process one's, wall-clock figures
blanked (tictactoe-lab: parts 1-3, as part 4's MCTS has a time budget per
move).

Run: ``.venv/bin/python bench/bench_ray_experiments.py [REPEATS]`` (default 1).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPEATS = 1
EXPERIMENTS = {
    "rpsls-thesis": (r"in \d+ s\.", None),
    "tictactoe-lab": (r"\d+\.\d+ s|\| \d+ s \||Total run time \d+ s", "## 4. MCTS"),
    "liars-dice-thesis": (
        r"in \d+\.\d s here|took \d+\.\d+ s|^\| (\d+) \| \d+\.\d \||Wall time: \d+ s|!\[\]\([^)]*\)",
        None,
    ),
}


def run(experiment: str, out: str, ray: bool) -> tuple[float, list[str]]:
    """(wall seconds, the document's lines with the wall-clock figures blanked)."""
    command = [sys.executable, "-m", "arena_server.cli", "experiment", experiment, "--quick", "--seed", "7"]
    command += ["--output", out, *(["--ray"] if ray else [])]
    start = time.perf_counter()
    subprocess.run(command, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    clock, cut = EXPERIMENTS[experiment]
    with open(out) as fh:
        text = fh.read()
    if cut:
        text = text.split(cut)[0]
    return wall, [re.sub(clock, "T", line) for line in text.splitlines()]


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else REPEATS
    print(f"arena experiment NAME --quick; CPUs available: {len(os.sched_getaffinity(0))}; median of {repeats}")
    with tempfile.TemporaryDirectory() as folder:
        for experiment in EXPERIMENTS:
            walls: dict[bool, list[float]] = {False: [], True: []}
            same = True
            for r in range(repeats):
                alone, doc = run(experiment, os.path.join(folder, f"{experiment}-{r}-alone.md"), False)
                on_ray, ray_doc = run(experiment, os.path.join(folder, f"{experiment}-{r}-ray.md"), True)
                walls[False].append(alone)
                walls[True].append(on_ray)
                same = same and doc == ray_doc
            ratio = statistics.median(a / b for a, b in zip(walls[False], walls[True], strict=True))
            print(
                f"{experiment:18s}: single process {statistics.median(walls[False]):6.1f} s, "
                f"--ray (local) {statistics.median(walls[True]):6.1f} s, speed-up {ratio:.2f}x, "
                f"same numbers: {'yes' if same else 'NO'}"
            )


if __name__ == "__main__":
    main()
