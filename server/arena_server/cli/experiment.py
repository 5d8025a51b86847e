"""``arena experiment NAME``: rerun a source document's experiments with the reference bots.

Experiments:
    rpsls-thesis  The RPSLS thesis's tables (Bizjak 2020) side by side with ours,
                  plus a round robin of every hosted RPS bot; see
                  :mod:`arena_bots.experiments.rpsls_thesis`.
    dots-and-boxes-thesis  Ujcic (2023)'s learning curves and parameter study
                  with numbers, the better representation, and every dots and
                  boxes bot against every other on 3x3 and 5x5; see
                  :mod:`arena_bots.experiments.dots_and_boxes_thesis`.
    liars-dice-thesis  The Liar's Dice thesis's three experiments (Lohn 2024) with 95%
                  intervals, crosstables and exploitability; see
                  :mod:`arena_bots.experiments.liars_dice_thesis`.
    tictactoe-lab The tic-tac-toe lab's tournament beside the handout's tables, rerun
                  with corrected players, and MCTS on big boards; see
                  :mod:`arena_bots.experiments.tictactoe_lab`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from arena_bots.experiments import OutputError
from arena_server.cli import CliError
from arena_server.cli.train import ray_pool

QUICK_OUTPUT = "with --quick: a temporary file, never the committed document"


def _given(option: str, path: str | None) -> list[str]:
    return [] if path is None else [option, path]


def _main(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run an experiment's own ``main``, its output-path problems turned into one-line CLI errors."""
    try:
        return main(argv)
    except OutputError as exc:
        raise CliError(str(exc)) from None


def _on_pool(main: Callable[..., int], argv: list[str], address: str | None, unit: str) -> int:
    """Run an experiment's ``main(argv, pool=...)``, on a Ray cluster with ``--ray [ADDRESS]``."""
    pool = ray_pool(address, unit)
    try:
        return _main(lambda a: main(a, pool=pool), argv)
    finally:
        if pool is not None:
            pool.close()


def _add_ray(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help=f"run {what} on a Ray cluster (without ADDRESS: the one in RAY_ADDRESS if set, else a local one); "
        "needs pip install "
        "'arena[ray]'; the same numbers as without it (docs/cluster.md)",
    )


def _run_rpsls_thesis(args: argparse.Namespace) -> int:
    from arena_bots.experiments import rpsls_thesis

    argv = ["--seed", str(args.seed), *_given("--out", args.out)]
    if args.quick:
        argv.append("--quick")
    if args.only:
        argv += ["--only", args.only]
    return _on_pool(rpsls_thesis.main, argv, args.ray, "one group of matches per task")


def _run_dots_and_boxes_thesis(args: argparse.Namespace) -> int:
    from arena_bots.experiments import dots_and_boxes_thesis

    argv = ["--seed", str(args.seed), *_given("--output", args.output)]
    if args.quick:
        argv.append("--quick")
    return _on_pool(dots_and_boxes_thesis.main, argv, args.ray, "one repetition per task")


def _run_liars_dice_thesis(args: argparse.Namespace) -> int:
    from arena_bots.experiments import liars_dice_thesis

    argv = ["--seed", str(args.seed), *_given("--out", args.output)]
    if args.quick:
        argv.append("--quick")
    return _on_pool(liars_dice_thesis.main, argv, args.ray, "one experiment, pair or table per task")


def _run_tictactoe_lab(args: argparse.Namespace) -> int:
    from arena_bots.experiments import tictactoe_lab

    argv = ["--seed", str(args.seed), *_given("--output", args.output)]
    if args.quick:
        argv.append("--quick")
    if args.move_time is not None:
        argv += ["--move-time", str(args.move_time)]
    if args.strength_games is not None:
        argv += ["--strength-games", str(args.strength_games)]
    return _on_pool(tictactoe_lab.main, argv, args.ray, "one tournament, matchup or strength game per task")


def register(subparsers: Any) -> None:
    """Add ``experiment`` and its experiments to the ``arena`` CLI."""
    parser = subparsers.add_parser("experiment", help="rerun a source document's experiments")
    experiments = parser.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)
    thesis = experiments.add_parser(
        "rpsls-thesis",
        help="the RPSLS thesis's tables with ours beside them, and an RPS round robin",
        description="Rerun Bizjak (2020)'s experiments (100,000 rounds vs algorithms, 1,000,000 vs strings), "
        "print each table with the thesis's figure and the difference, and write them as markdown.",
    )
    thesis.add_argument("--quick", action="store_true", help="short matches and few strings (about 10 s)")
    thesis.add_argument(
        "--out",
        "--output",
        dest="out",
        default=None,
        help=f"markdown output path (default docs/experiments/rpsls-thesis.md; {QUICK_OUTPUT})",
    )
    thesis.add_argument("--seed", type=int, default=2020, help="master seed")
    thesis.add_argument("--only", choices=("thesis", "round-robin"), default=None, help="run only one part")
    _add_ray(thesis, "the independent matches")
    thesis.set_defaults(func=_run_rpsls_thesis)
    dab = experiments.add_parser(
        "dots-and-boxes-thesis",
        help="the dots and boxes thesis's learning curves and parameter study, and a bot crosstable",
        description="Rerun Ujcic (2023): learning curves, parameter study, the feature representation, and every "
        "dots and boxes bot against every other (200 games a pair) on 3x3 and 5x5; writes markdown and PNGs.",
    )
    dab.add_argument("--quick", action="store_true", help="tiny runs for the test suite (use with --output)")
    dab.add_argument(
        "--output",
        default=None,
        help="markdown output path, PNGs beside it "
        f"(default docs/experiments/dots-and-boxes-thesis.md; {QUICK_OUTPUT})",
    )
    dab.add_argument("--seed", type=int, default=2023, help="master seed (default 2023)")
    _add_ray(dab, "the training repetitions")
    dab.set_defaults(func=_run_dots_and_boxes_thesis)

    liars = experiments.add_parser(
        "liars-dice-thesis",
        help="the Liar's Dice thesis's experiments with 95%% intervals, crosstables and exploitability",
        description="Rerun Lohn (2024)'s three experiments (SARSA vs Q-learning, modified SARSA vs Q-learning and "
        "vs CFR) beside the thesis's figures, plus crosstables and exact exploitability in the 1-die game.",
    )
    liars.add_argument("--quick", action="store_true", help="few games (about 10 s); use with --output")
    liars.add_argument(
        "--output",
        "--out",
        dest="output",
        default=None,
        help=f"markdown output (default docs/experiments/liars-dice-thesis.md; {QUICK_OUTPUT})",
    )
    liars.add_argument("--seed", type=int, default=2024, help="master seed")
    _add_ray(liars, "the experiments, the crosstable's pairs and the weak-CFR table")
    liars.set_defaults(func=_run_liars_dice_thesis)
    ttt = experiments.add_parser(
        "tictactoe-lab",
        help="the tic-tac-toe lab's tournament beside the handout's, corrected, and MCTS on big boards",
        description="Rerun the lab's 360-game tournament with its players bug for bug, print the win/loss/draw "
        "tables beside the handout's with 95%% intervals, rerun it with corrected minimax and alpha-beta, and "
        "measure MCTS on 7x7 k=4 and 15x15 k=5; write them as markdown.",
    )
    ttt.add_argument("--quick", action="store_true", help="few short strength games (about 30 s; test suite)")
    ttt.add_argument(
        "--output",
        default=None,
        help=f"markdown output path (default docs/experiments/tictactoe-lab.md; {QUICK_OUTPUT})",
    )
    ttt.add_argument("--seed", type=int, default=2024, help="master seed")
    ttt.add_argument("--move-time", type=float, default=None, help="MCTS seconds per move (default 1)")
    ttt.add_argument("--strength-games", type=int, default=None, help="games per strength matchup (default 6)")
    _add_ray(ttt, "the tournaments, matchups and strength games")
    ttt.set_defaults(func=_run_tictactoe_lab)
