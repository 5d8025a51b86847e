"""``arena train liars-dice-cfr``: solve the 1-die Liar's Dice games offline with CFR+ (progress and checkpoints).

Hook under ``arena train`` with ``add_arguments(parser)`` and
``parser.set_defaults(func=train_liars_dice_cfr)``; also runs as
``python -m arena_bots.liars_dice.train``. Each game's policy is written to
``--out`` (default: the package's ``data/``, where the ``cfr`` bot loads it)
after every ``--check-every`` iterations, so an interrupted run keeps its last
checkpoint; ``--reset-learners`` instead deletes the learners' saved tables.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from arena_bots.liars_dice.cfr_bot import DATA_DIR
from arena_bots.liars_dice.small_game import Solver, make_game
from arena_bots.progress import ProgressBar


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the training options to ``parser``."""
    parser.add_argument("--bidding", choices=("standard", "thesis", "all"), default="all", help="bidding rule(s)")
    parser.add_argument("--wild", choices=("none", "ones", "highest", "all"), default="all", help="wild rule(s)")
    parser.add_argument("--target", type=float, default=0.0005, help="stop at this exploitability (default 0.0005)")
    parser.add_argument("--max-iterations", type=int, default=20000, help="give up after this many iterations")
    parser.add_argument("--check-every", type=int, default=50, help="iterations between checks and checkpoints")
    parser.add_argument("--out", default=str(DATA_DIR), help="directory for the policy files")
    parser.add_argument(
        "--game",
        choices=("small", "two-dice", "thesis"),
        default="small",
        help="small: the 1-die games (shipped); two-dice: the 2-dice single-round games by abstract CFR+ "
        "(shipped); thesis: the 2-player thesis-bidding game by DP over dice counts",
    )
    parser.add_argument("--iterations", type=int, default=5000, help="two-dice games: CFR+ iterations")
    parser.add_argument("--dice", type=int, default=5, help="thesis game: dice per player (1-5, default 5)")
    parser.add_argument("--scale", type=int, default=20000, help="thesis game: iterations per die in a round")
    parser.add_argument("--reset-learners", action="store_true", help="delete the learners' saved tables and exit")


def train_liars_dice_cfr(args: argparse.Namespace) -> int:
    """Solve each selected game and write ``cfr-1die-f6-<bidding>-<wild>.npz``; returns the exit code."""
    if args.reset_learners:
        from arena_bots.liars_dice.bots import LearnerTables
        from arena_bots.registry import BotState

        tables = LearnerTables(BotState.default().directory)
        removed = tables.reset()
        print(f"deleted {len(removed)} learner table(s) from {tables.directory}")
        return 0
    if args.game == "thesis":
        return _train_thesis(args)
    if args.game == "two-dice":
        return _train_two_dice(args)
    if args.target <= 0 or args.check_every < 1:
        print("error: --target must be > 0 and --check-every >= 1", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for bidding, wild in _variants(args):
        _solve_one(bidding, wild, out, args)
    return 0


def _variants(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The (bidding, wild) games ``--bidding`` and ``--wild`` select (``all`` is every value)."""
    biddings = ("standard", "thesis") if args.bidding == "all" else (args.bidding,)
    wilds = ("none", "ones", "highest") if args.wild == "all" else (args.wild,)
    return [(bidding, wild) for bidding in biddings for wild in wilds]


def _train_thesis(args: argparse.Namespace) -> int:
    """Solve the thesis game round by round (a checkpoint after every round) into the bot-state directory."""
    from arena_bots.liars_dice import thesis_cfr
    from arena_bots.liars_dice.cfr_bot import thesis_path

    if not 1 <= args.dice <= thesis_cfr.MAX_DICE or args.scale < 1:
        print(f"error: --dice must be 1..{thesis_cfr.MAX_DICE} and --scale >= 1", file=sys.stderr)
        return 2
    path = thesis_path()
    scale = args.scale
    thesis_cfr.solve(args.dice, lambda a, b: scale * (a + b), checkpoint=path)
    print(f"wrote {path}")
    return 0


def _train_two_dice(args: argparse.Namespace) -> int:
    """Abstract CFR+ on each selected 2-dice single-round game; prints the exact exploitability at each check."""
    from arena_bots.liars_dice import dice_game

    if args.iterations < 1 or args.check_every < 1:
        print("error: --iterations and --check-every must be >= 1", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for bidding, wild in _variants(args):
        game = dice_game.make_dice_game(2, 6, bidding, wild)
        cfr = dice_game.AbstractCfr(game)
        path = out / f"cfr-2dice-f6-{bidding}-{wild}.npz"
        start = time.perf_counter()
        step = max(args.check_every, args.iterations // 5)
        while cfr.iterations < args.iterations:
            cfr.run(min(step, args.iterations - cfr.iterations))
            tmp = path.with_suffix(".tmp.npz")
            np.savez_compressed(tmp, policy=cfr.average().astype(np.float16))
            tmp.replace(path)
            print(f"\r{bidding:8} {wild:7} iter {cfr.iterations:6d}  {time.perf_counter() - start:6.1f} s", end="")
        expl = dice_game.exploitability(game, cfr.average())
        value = dice_game.game_value(game, cfr.average())
        print(
            f"\r{bidding:8} {wild:7} {cfr.iterations} iterations, exploitability {expl:.4f} (full game), "
            f"first bidder's value {value:+.4f}, {time.perf_counter() - start:.1f} s -> {path}"
        )
    return 0


def _solve_one(bidding: str, wild: str, out: Path, args: argparse.Namespace) -> None:
    """Solve one game, writing its policy at every check (the checkpoint)."""
    game = make_game(6, bidding, wild)
    solver = Solver(game)
    path = out / f"cfr-1die-f6-{bidding}-{wild}.npz"
    start = time.perf_counter()
    # The bar (a terminal only) counts towards --max-iterations, an upper bound: it stops at --target.
    bar = ProgressBar(args.max_iterations, f"{bidding} {wild}")

    def checkpoint(iterations: int, expl: float, seconds: float) -> None:
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, policy=solver.average().astype(np.float16))
        tmp.replace(path)
        bar.update(iterations, f"exploitability {expl:.6f} (target {args.target:g})")

    try:
        expl = solver.solve(args.target, args.max_iterations, args.check_every, checkpoint)
    finally:
        bar.close()
    print(
        f"{bidding:8} {wild:7} {solver.iterations} iterations, exploitability {expl:.6f}, "
        f"{time.perf_counter() - start:.1f} s -> {path}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arena_bots.liars_dice.train", description=__doc__)
    add_arguments(parser)
    return train_liars_dice_cfr(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
