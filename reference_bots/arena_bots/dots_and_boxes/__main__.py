"""Play a dots and boxes genome file against a server: ``python -m arena_bots.dots_and_boxes --genome PATH``.

Connects the network as a remote bot (see docs/playing.md, "Play the hosted
bots remotely"), e.g. to challenge ``greedy`` with a genome from
``arena train dots-and-boxes``::

    python -m arena_bots.dots_and_boxes --genome dab-training/best-genome.json --opponent greedy --matches 10
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from arena_bots.dots_and_boxes.bots import NeuroPolicy, PolicyBot
from arena_bots.dots_and_boxes.neuro import GenomeError, load_genome


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arena_bots.dots_and_boxes", description=__doc__.splitlines()[0])
    parser.add_argument("--genome", required=True, help="a genome JSON file (arena train dots-and-boxes)")
    parser.add_argument(
        "--server",
        default=os.environ.get("ARENA_SERVER", "").strip() or "localhost:50051",
        metavar="HOST:PORT",
        help="the Arena server (default: $ARENA_SERVER if set, else localhost:50051)",
    )
    parser.add_argument("--opponent", default=None, help="challenge this bot (default: wait for the ladder)")
    parser.add_argument("--matches", type=int, default=1, help="matches to play (default 1)")
    parser.add_argument("--name", default="neuro-genome", help="the name to play under")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random tie-breaks")
    args = parser.parse_args(argv)
    try:
        genome = load_genome(args.genome)
    except GenomeError as exc:
        print(f"arena_bots.dots_and_boxes: {exc}", file=sys.stderr)
        return 2
    from arena_client.remote import run

    bot = PolicyBot(NeuroPolicy(genome, args.seed), args.name)
    params = {"rows": genome.rows, "cols": genome.cols}
    results = run(bot, args.server, opponent=args.opponent, game="dots_and_boxes", params=params,
                  matches=args.matches, name=args.name)  # fmt: skip
    for r in results:
        print(f"match {r.match_id}: returns {r.returns} ({r.termination.label})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
