"""Tic-tac-toe bots: MCTS simulations per second (3x3, 7x7 k=4, 15x15 k=5) and the lab tournament's wall time.

Targets (issue 14): at least 275,000 MCTS simulations a second on 3x3 from the
empty board on one core (OpenSpiel's C++ MCTS on this machine; the ratio to it
is printed), and the lab's whole 360-game tournament (5 min 9 s in the
handout) in under 10 s. The numba kernels are compiled or loaded first and not
timed. The machine may be shared: the load average is printed with the figures.

    .venv/bin/python bench/bench_tic_tac_toe.py
    .venv/bin/python bench/bench_tic_tac_toe.py --seconds 5
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from arena_bots.experiments.tictactoe_lab import GAMES, lab_players, tournament
from arena_bots.numba_helpers import seed_state
from arena_bots.tic_tac_toe.mcts import Tree, mcts_move

OPENSPIEL_SIMS_PER_S = 275_000
HANDOUT_TOURNAMENT_S = 5 * 60 + 9


def sims_per_second(rows: int, cols: int, k: int, seconds: float, **options: int | bool) -> tuple[float, float]:
    """Simulations a second of one search from the empty board: per wall second and per CPU second."""
    board = np.full(rows * cols, -1, dtype=np.int8)
    tree = Tree()
    rng = np.array([seed_state(1)], dtype=np.uint64)
    mcts_move(board, rows, cols, k, 0, tree, rng, simulations=200, **options)  # type: ignore[arg-type]  # warm up
    start, cpu = time.perf_counter(), time.process_time()
    _, sims = mcts_move(board, rows, cols, k, 0, tree, rng, seconds=seconds, **options)  # type: ignore[arg-type]
    return sims / (time.perf_counter() - start), sims / max(time.process_time() - cpu, 1e-9)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="search time per measurement (default 2)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (shared machine: figures vary)")
    print("MCTS simulations per second from the empty board, one thread (per wall second, per CPU second):")
    configs = [
        ("plain UCT, random playouts", {"threats": False, "near": 0, "policy": 0}),
        ("hosted mcts (threat nodes in the tree)", {"threats": True, "near": 0, "policy": 0}),
    ]
    for rows, k in ((3, 3), (7, 4), (15, 5)):
        for label, options in configs:
            opts: dict[str, int | bool] = dict(options)
            if rows * rows > 25 and label.startswith("hosted"):
                opts["near"] = 1
            wall, cpu = sims_per_second(rows, rows, k, args.seconds, **opts)
            line = f"  {rows}x{rows} k={k:<2d} {label:40s} {wall:10,.0f} /wall s {cpu:10,.0f} /CPU s"
            if rows == 3:
                line += f"   x{wall / OPENSPIEL_SIMS_PER_S:.2f} / x{cpu / OPENSPIEL_SIMS_PER_S:.2f} OpenSpiel C++"
            print(line, flush=True)
    tournament(lab_players(1), 1)  # compile / load the kernels
    start = time.perf_counter()
    tournament(lab_players(2), GAMES)
    elapsed = time.perf_counter() - start
    print(
        f"lab tournament, 360 games: {elapsed:.2f} s (handout {HANDOUT_TOURNAMENT_S} s, "
        f"x{HANDOUT_TOURNAMENT_S / elapsed:.0f} faster; target < 10 s)"
    )
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
