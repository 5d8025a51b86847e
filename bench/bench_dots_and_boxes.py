"""Dots and boxes targets (issue 15): training throughput, solver times, 5x5 strength, move times.

    .venv/bin/python bench/bench_dots_and_boxes.py          # about a minute
    .venv/bin/python bench/bench_dots_and_boxes.py --full   # also the whole thesis-length training run

Prints:

* training throughput on 3x3 (games per second of the numba round robin,
  after compilation) and the time of the thesis-length run (10 repetitions x
  100 round robins x 90 games) estimated from it, or measured with ``--full``;
* ``solver`` on 3x3: the table build time, the first move with the table on
  disk but not in memory ("cold"), and with it in memory ("cached");
* ``chains`` and ``solver`` against ``greedy`` on 5x5 (200 games, alternating
  first move), target at least 95% wins;
* mean and slowest move time of every hosted dots and boxes bot over a few
  games on 3x3 and 5x5 against ``greedy`` (the ladder allows 1 s a move).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import replace

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also run the whole thesis-length training")
    parser.add_argument("--games", type=int, default=200, help="games per 5x5 strength match (default 200)")
    args = parser.parse_args()
    os.environ["ARENA_CACHE_DIR"] = tempfile.mkdtemp(prefix="arena-dab-bench-")

    from arena_bots.dots_and_boxes import evolution as ev
    from arena_bots.dots_and_boxes import kernels as K
    from arena_bots.dots_and_boxes import solver as S
    from arena_bots.dots_and_boxes.board import Position, geometry
    from arena_bots.dots_and_boxes.bots import GreedyPolicy, make_policy, warm_up
    from arena_bots.dots_and_boxes.neuro import layer_sizes, num_weights
    from arena_bots.experiments.dots_and_boxes_thesis import duel, wilson
    from arena_bots.numba_helpers import seed_state

    t = time.perf_counter()
    warm_up()
    print(f"kernels loaded (numba cache) in {time.perf_counter() - t:.1f} s")

    # training throughput
    geo = geometry(3, 3)
    sizes = layer_sizes("thesis", 3, 3, (10,))
    pop = np.random.default_rng(0).normal(size=(10, num_weights(sizes)))
    rng = np.array([seed_state(1)], dtype=np.uint64)
    K.round_robin(0, sizes, pop, geo.num_edges, geo.num_boxes, geo.edge_boxes, geo.box_edges, rng)
    rounds = 40
    t = time.perf_counter()
    for _ in range(rounds):
        K.round_robin(0, sizes, pop, geo.num_edges, geo.num_boxes, geo.edge_boxes, geo.box_edges, rng)
    dt = time.perf_counter() - t
    rate = rounds * 90 / dt
    print(
        f"training throughput 3x3 (thesis network 48-10-1): {rate:,.0f} games/s; "
        f"thesis-length run (90,000 games + tests) estimated {90_000 / rate:.0f} s"
    )
    if args.full:
        t = time.perf_counter()
        res = ev.train(replace(ev.TrainConfig(), seed=2023))
        print(f"thesis-length run measured: {res.games} games in {time.perf_counter() - t:.1f} s")

    # solver on 3x3
    S.forget_tables()
    t = time.perf_counter()
    S.exact_table(geo)
    print(f"solver 3x3 table build (2^24 positions, written to disk): {time.perf_counter() - t:.2f} s")
    solver = make_policy("solver", 1)
    S.forget_tables()
    t = time.perf_counter()
    solver.choose(Position(geo))
    print(f"solver 3x3 first move, table on disk (cold): {1000 * (time.perf_counter() - t):.1f} ms")
    t = time.perf_counter()
    solver.choose(Position(geo))
    print(f"solver 3x3 first move, table in memory (cached): {1000 * (time.perf_counter() - t):.3f} ms")

    # 5x5 strength
    for name in ("chains", "solver"):
        t = time.perf_counter()
        w, d, lo = duel(lambda s, n=name: make_policy(n, s), GreedyPolicy, args.games, 5, 5, 77)
        a, b = wilson(w, args.games)
        print(
            f"{name} vs greedy 5x5: {w}-{d}-{lo} = {100 * w / args.games:.1f}% wins "
            f"[95% {100 * a:.1f}-{100 * b:.1f}] ({time.perf_counter() - t:.0f} s)"
        )

    # move times
    for rows, cols in ((3, 3), (5, 5)):
        for name in ("greedy", "neuro", "neuro-features", "chains", "solver", "boxes-mcts"):
            if name == "neuro" and (rows, cols) != (3, 3):
                continue
            times: list[float] = []
            for g in range(4):
                policies = (make_policy(name, g), GreedyPolicy(g + 100))
                pos = Position(geometry(rows, cols))
                me = g % 2
                while not pos.over:
                    if pos.to_move == me:
                        t = time.perf_counter()
                        edge = policies[0].choose(pos)
                        times.append(time.perf_counter() - t)
                    else:
                        edge = policies[1].choose(pos)
                    pos.play(edge)
            print(
                f"move time {rows}x{cols} {name:<15} mean {1000 * np.mean(times):7.2f} ms  "
                f"max {1000 * max(times):7.1f} ms  ({len(times)} moves)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
