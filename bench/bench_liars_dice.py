"""Liar's Dice bot targets: CFR+ speed on the 1-die game, every bot's decision time, the thesis experiment's wall time.

Run with ``.venv/bin/python bench/bench_liars_dice.py`` (about 30 s; ``--experiment`` adds the full
``arena experiment liars-dice-thesis`` run, about a minute, written to a temporary file). Targets
(issue 16): exploitability <= 0.001 on the 1-die game (standard bidding, highest face wild, single
round) in under 20 s; decisions under 1 ms for the learners and under 10 ms for ``cfr``. Set
``ARENA_BOT_STATE_DIR`` to where ``arena train liars-dice-cfr --game thesis`` cached its tables to time
``cfr`` on them in the thesis game.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

import arena_bots  # noqa: F401  (registers the hosted bots)
from arena_bots.liars_dice.play import THESIS_PARAMS, play_game
from arena_bots.liars_dice.small_game import Solver, exploitability, make_game
from arena_bots.registry import hosted_bots
from arena_client import Bot, Turn

LEVELS = (0.01, 0.005, 0.002, 0.001, 0.0005)
SMALL = {"dice": 1, "bidding": "standard", "wild": "highest", "rounds": "single"}


def bench_cfr() -> None:
    game = make_game()
    warm = Solver(game)
    warm.run(1)
    exploitability(game, warm.average())  # compile (cached by numba after the first run ever)
    solver = Solver(game)
    start = time.perf_counter()
    solver.run(200)
    seconds = time.perf_counter() - start
    print(f"CFR+ (alternating, vectorised over dice) 1-die game: {200 / seconds:.0f} iterations/s")
    solver = Solver(game)
    start = time.perf_counter()
    pending = list(LEVELS)
    while pending:
        solver.run(10)
        expl = exploitability(game, solver.average())
        while pending and expl <= pending[0]:
            print(
                f"  exploitability <= {pending[0]:<7}: {solver.iterations:5d} iterations, "
                f"{time.perf_counter() - start:6.2f} s (with a best response every 10 iterations)"
            )
            pending.pop(0)


def bench_decisions(games: int) -> None:
    hosted = hosted_bots()
    rng = np.random.default_rng(1)
    for name in ("sarsa", "sarsa-profiling", "q-learning", "statistician", "cfr", "random"):
        for label, params in (("thesis 2x5", THESIS_PARAMS), ("1-die", SMALL)):
            times: list[float] = []
            for g in range(games):
                bot: Bot = hosted[name].factory(g)
                act = bot.act

                def timed(turn: Turn, act=act, times=times) -> int:  # type: ignore[no-untyped-def]
                    t = time.perf_counter()
                    action = act(turn)
                    times.append(time.perf_counter() - t)
                    return int(action)

                bot.act = timed  # type: ignore[method-assign]
                play_game([bot, hosted["random"].factory(g)], params, rng)
            arr = np.array(times) * 1e3
            print(
                f"{name:16} {label:10} decision median {np.median(arr):7.3f} ms  p99 {np.percentile(arr, 99):7.3f} ms"
                f"  max {arr.max():7.3f} ms  ({len(arr)} decisions)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--games", type=int, default=100, help="games per bot for the decision times")
    parser.add_argument("--experiment", action="store_true", help="also time the full thesis experiment")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state:
        # Learners' tables go to a scratch directory; a trained thesis-game cfr is used when
        # ARENA_BOT_STATE_DIR points at its cache (else cfr plays as the statistician there).
        cached = os.environ.get("ARENA_BOT_STATE_DIR")
        if cached and (Path(cached) / "cfr-thesis.npz").exists():
            shutil.copy(Path(cached) / "cfr-thesis.npz", Path(state) / "cfr-thesis.npz")
        os.environ["ARENA_BOT_STATE_DIR"] = state
        bench_cfr()
        bench_decisions(args.games)
        if args.experiment:
            from arena_bots.experiments import liars_dice_thesis

            start = time.perf_counter()
            liars_dice_thesis.main(["--out", os.path.join(state, "ld.md")])
            print(f"full thesis experiment: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
