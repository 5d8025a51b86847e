"""``arena profile A B``: how alike two RPS players are, by Shannon's mind-reader profile.

Each bot's profile is built from every stored rps match it played (its moves
against its opponents' moves), then the two profiles are compared with the
mind-reader post's distance p = sum_j F_j(d_j) over levels j = 1..n+1 (see
``arena_bots.rps.mind_reader``): p lies in [0, n+1], 0 for identical profiles,
larger for more different play. The post's own degrees of freedom saturate
quickly on long matches, so the "cells" variant is printed beside it.
"""

from __future__ import annotations

import argparse

from arena_bots.rps.mind_reader import MindReaderProfile, level_statistics, profile_distance
from arena_server.cli import CliError, run_async
from arena_server.cli.common import open_database
from arena_server.store.database import Store


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "profile",
        help="compare two RPS bots by their mind-reader profiles over stored matches",
        description="Compare two RPS bots' play (Shannon's mind-reader profile distance) over their stored matches.",
    )
    p.add_argument("bot_a")
    p.add_argument("bot_b")
    p.add_argument("--db", default="arena.db", help="the server's SQLite database (default arena.db)")
    p.add_argument("--n", type=int, default=5, help="profile depth: last n alternating moves (default 5)")
    p.add_argument("--signs", type=int, default=3, help="only matches with this many signs (default 3)")
    p.add_argument("--limit", type=int, default=200, help="use at most this many recent matches per bot")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.n <= 12:
        raise CliError(f"--n {args.n} is out of range; use 1..12")
    return run_async(_profile(args))


async def build_profile(store: Store, bot: str, n: int, signs: int, limit: int) -> tuple[MindReaderProfile, int]:
    """The profile of ``bot`` over its stored rps matches with ``signs`` signs; also the match count."""
    profile = MindReaderProfile(n=n, signs=signs)
    used = 0
    for header in await store.list_matches(game="rps", bot=bot, limit=limit):
        if header.game.params.get("signs") != signs or header.termination is None:
            continue
        record = await store.get_match(header.match_id)
        assert record is not None
        seat = next(s.seat for s in record.seats if s.bot_name == bot)
        moves: tuple[list[int], list[int]] = ([], [])
        for player, action, _elapsed, legal in record.moves:
            if legal and player in (0, 1):
                moves[player].append(action)
        rounds = min(len(moves[0]), len(moves[1]))
        if rounds:
            profile.add_match(moves[seat][:rounds], moves[1 - seat][:rounds])
            used += 1
    return profile, used


async def _profile(args: argparse.Namespace) -> int:
    store = await open_database(args.db, exclusive=False)
    try:
        profiles = []
        for bot in (args.bot_a, args.bot_b):
            profile, used = await build_profile(store, bot, args.n, args.signs, args.limit)
            if not used:
                raise CliError(
                    f"{bot!r} has no stored rps matches with signs={args.signs} in {args.db}; "
                    "play some first (e.g. `arena match ... --db`)"
                )
            print(f"{bot}: {used} match(es)")
            profiles.append(profile)
    finally:
        await store.close()
    for level, value in sorted(level_statistics(profiles[0], profiles[1]).items()):
        print(f"  level {level}: d = {value:.4f}")
    a, b = profiles
    top = args.n + 1
    print(f"profile distance {args.bot_a} ~ {args.bot_b}: {profile_distance(a, b):.4f} of {top} (the post's measure)")
    print(f"                 cells variant: {profile_distance(a, b, dof='cells'):.4f} of {top}")
    return 0
