"""Liar's Dice bot targets: CFR+ speed, the 2-dice best response, every bot's decision time, the experiment's time.

Run with ``.venv/bin/python bench/bench_liars_dice.py`` (about a minute; ``--experiment`` adds the full
``arena experiment liars-dice-thesis`` run, a few minutes, written to a temporary file). Targets
(issue 16): exploitability <= 0.001 on the 1-die game (standard bidding, highest face wild, single
round) in under 20 s; decisions under 1 ms for the learners and under 10 ms for ``cfr`` (which plays
the shipped thesis-game strategy in the 5-dice game and the shipped abstract CFR+ policy with 2 dice).
The 2-dice part times the exact full-game best response (numba, public-tree walk) against a plain
Python recursion over ordered rolls on a game small enough for it (2 dice, 3 faces), in this process.
"""

from __future__ import annotations

import argparse
import os
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
TWO_DICE = {"dice": 2, "bidding": "standard", "wild": "highest", "rounds": "single"}


def bench_two_dice() -> None:
    import sys

    from arena_bots.liars_dice import dice_game
    from arena_bots.liars_dice.cfr_bot import load_dice_policy

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.bots.test_liars_dice_dice_game import brute_force_best_response, random_policy

    small = dice_game.make_dice_game(2, 3, "standard", "highest")
    policy = random_policy(small, 11)
    dice_game.best_response_value(small, policy, 0)  # compile
    start = time.perf_counter()
    for _ in range(20):
        dice_game.best_response_value(small, policy, 0)
    fast = (time.perf_counter() - start) / 20
    start = time.perf_counter()
    brute_force_best_response(small, policy, 0)
    slow = time.perf_counter() - start
    print(
        f"2 dice x 3 faces best response: walk {fast * 1e3:.2f} ms, plain Python recursion {slow * 1e3:.0f} ms "
        f"(x{slow / fast:.0f})"
    )
    game = dice_game.make_dice_game(2, 6, "standard", "highest")
    uniform = dice_game.normalise(game, np.ones(game.policy_shape()))
    shipped = load_dice_policy(2, "standard", "highest")
    assert shipped is not None
    for label, pol in (("uniform (no pruning)", uniform), ("shipped cfr (pruned)", shipped)):
        start = time.perf_counter()
        _, nodes = dice_game._best_response(0, pol, game.child, game.matches, game.quantity, game.prob, game.dice)
        seconds = time.perf_counter() - start
        print(
            f"2 dice x 6 faces best response vs {label}: {nodes} nodes in {seconds:.2f} s "
            f"({nodes / seconds / 1e6:.1f} M nodes/s)"
        )
    cfr = dice_game.AbstractCfr(game)
    cfr.run(10)
    start = time.perf_counter()
    cfr.run(1000)
    print(f"abstract CFR+ 2 dice x 6 faces: {1000 / (time.perf_counter() - start):.0f} iterations/s")


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
        for label, params in (("thesis 2x5", THESIS_PARAMS), ("1-die", SMALL), ("2-dice", TWO_DICE)):
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
        # Learners' tables go to a scratch directory; cfr plays the shipped thesis-game strategy.
        os.environ["ARENA_BOT_STATE_DIR"] = state
        bench_cfr()
        bench_two_dice()
        bench_decisions(args.games)
        if args.experiment:
            from arena_bots.experiments import liars_dice_thesis

            start = time.perf_counter()
            liars_dice_thesis.main(["--out", os.path.join(state, "ld.md")])
            print(f"full thesis experiment: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
