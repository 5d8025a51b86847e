"""``arena train dots-and-boxes``: the dots and boxes thesis's neuroevolution, resumable, with a CSV and plots.

The algorithm lives in :mod:`arena_bots.dots_and_boxes.evolution`; this
module only parses options, shows progress and writes the outputs into
``--out``: ``generations.csv`` (every generation of every repetition),
``checkpoint.npz`` (rerunning the same command resumes), ``best-genome.json``
(the best final individual against ``greedy``, with the command and seed that
made it) and ``learning-curves.png`` (with the optional ``plots`` extra).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arena_server.cli import CliError

if TYPE_CHECKING:
    from arena_server.ladder.on_ray import RayPool

RAY_HELP = (
    "run the independent repetitions on a Ray cluster (without ADDRESS: the one in RAY_ADDRESS if set, else a "
    "local one); needs pip install "
    "'arena[ray]'; same numbers as without it; this process keeps the files and the checkpoint (docs/cluster.md)"
)


def _hidden(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give hidden layer sizes like 10 or 16,8") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give one or more positive layer sizes like 10 or 16,8")
    return sizes


def ray_pool(address: str | None, unit: str = "one repetition per task") -> RayPool | None:
    """The Ray cluster for ``--ray [ADDRESS]`` (None without ``--ray``); says so (and what a task is) on stderr."""
    if address is None:
        return None
    from arena_server.ladder.on_ray import RayPool, RayUnavailable

    try:
        pool = RayPool(address or None)
    except RayUnavailable as exc:
        raise CliError(str(exc)) from None
    print(f"arena: on Ray ({pool.cpus} CPUs, {pool.where}), {unit}", file=sys.stderr)
    return pool


def _run_dots_and_boxes(args: argparse.Namespace) -> int:
    from arena_bots.dots_and_boxes import evolution as ev
    from arena_bots.dots_and_boxes.neuro import save_genome

    cfg = ev.TrainConfig(
        rows=args.rows,
        cols=args.cols,
        representation=args.representation,
        hidden=args.hidden,
        population=args.population,
        elitism=args.elitism,
        mutation=args.mutation,
        sigma=args.sigma,
        init_std=args.init_std,
        evaluations=args.evaluations,
        unit=args.unit,
        repetitions=args.repetitions,
        test_every=args.test_every,
        test_games=args.test_games,
        seed=args.seed,
    )
    out = Path(args.out)
    try:
        cfg.check()
    except ev.TrainError as exc:
        raise CliError(str(exc)) from None
    pool = ray_pool(args.ray)
    try:
        steps = cfg.repetitions * (cfg.generations() + 1)
        progress = None if args.quiet else ev.Progress(steps, sys.stderr, "train ")
        result = ev.train(
            cfg, out, progress=progress, fresh=args.fresh, log=lambda m: print(m, file=sys.stderr), pool=pool
        )
    except ev.TrainError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot write to {out}: {exc}") from None
    finally:
        if pool is not None:
            pool.close()
    command = f"{ev.command_line(cfg)} --out {shlex.quote(str(out))}"
    genome = result.best_genome({"command": command, "seed": cfg.seed})
    save_genome(genome, out / "best-genome.json")
    c = ev.curves(result)
    finals = [rate for _, rate in result.finals]
    rate = result.games / max(result.seconds, 1e-9)
    print(
        f"{result.games} games in {result.seconds:.1f} s ({rate:,.0f} games/s); "
        f"{cfg.repetitions} repetitions x {cfg.generations() + 1} round robins"
    )
    print(f"mean normalised fitness: min {c['mean_min']:.4f} max {c['mean_max']:.4f} (0.5 by construction)")
    print(
        f"final best individual vs greedy: mean win rate {sum(finals) / len(finals):.2f} "
        f"(per repetition: {', '.join(f'{x:.2f}' for x in finals)})"
    )
    if args.no_plots:
        pass
    elif ev.plot_learning({cfg.representation: result}, out / "learning-curves.png", "dots and boxes training"):
        print(f"plot: {out / 'learning-curves.png'}")
    else:
        print("plots skipped: matplotlib is not installed (pip install -e '.[plots]')")
    print(f"wrote {out / 'generations.csv'} and {out / 'best-genome.json'}")
    return 0


def register(subparsers: Any) -> None:
    """Add ``train`` and its games to the ``arena`` CLI."""
    parser = subparsers.add_parser("train", help="train a reference bot (neuroevolution, CFR)")
    games = parser.add_subparsers(dest="train_game", metavar="GAME", required=True)
    p = games.add_parser(
        "dots-and-boxes",
        help="evolve dots and boxes networks as in Ujcic (2023)",
        description="The thesis's evolutionary algorithm: round-robin fitness, elitism, roulette-wheel selection, "
        "uniform crossover, Gaussian mutation; the best individual is tested against greedy as it goes. "
        "Rerunning the same command resumes from the checkpoint in --out.",
    )
    p.add_argument("--rows", type=int, default=3, help="rows of boxes (default 3)")
    p.add_argument("--cols", type=int, default=3, help="columns of boxes (default 3)")
    p.add_argument(
        "--representation",
        choices=("thesis", "features"),
        default="thesis",
        help="network input: thesis = board + one-hot move; features = score and chain features (default thesis)",
    )
    p.add_argument("--hidden", type=_hidden, default=(10,), help="hidden layer sizes, e.g. 10 or 16,8 (default 10)")
    p.add_argument("--population", type=int, default=10, help="population size N (default 10)")
    p.add_argument("--elitism", type=float, default=0.1, help="share copied unchanged (default 0.1)")
    p.add_argument("--mutation", type=float, default=0.1, help="per-weight mutation probability (default 0.1)")
    p.add_argument("--sigma", type=float, default=0.3, help="standard deviation of the Gaussian mutation (0.3)")
    p.add_argument("--init-std", type=float, default=1.0, help="standard deviation of the initial weights (1.0)")
    p.add_argument("--evaluations", type=int, default=1000, help="stopping criterion (default 1000)")
    p.add_argument(
        "--unit",
        choices=("individual", "round-robin", "game"),
        default="individual",
        help="what one evaluation counts (default individual: 1000 = 100 round robins with N=10)",
    )
    p.add_argument("--repetitions", type=int, default=10, help="independent runs (default 10)")
    p.add_argument("--test-every", type=int, default=5, help="test the best against greedy every N generations (5)")
    p.add_argument("--test-games", type=int, default=20, help="games per test, alternating first move (20)")
    p.add_argument("--seed", type=int, default=2023, help="master seed (default 2023)")
    p.add_argument("--out", default="dab-training", help="output and checkpoint directory (default dab-training)")
    p.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint and start over")
    p.add_argument("--no-plots", action="store_true", help="do not draw the PNG")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS", help=RAY_HELP)
    p.set_defaults(func=_run_dots_and_boxes)
    from arena_bots.liars_dice.train import add_arguments, train_liars_dice_cfr

    cfr = games.add_parser(
        "liars-dice-cfr",
        help="solve Liar's Dice with CFR (the 1-die games, or the thesis game by dynamic programming)",
        description="CFR+ for the 2-player 1-die games to a target exploitability, or (--game thesis) the thesis's "
        "5-dice game round by round over dice counts; progress on stderr, a checkpoint after every step.",
    )
    add_arguments(cfr)
    cfr.set_defaults(func=train_liars_dice_cfr)
