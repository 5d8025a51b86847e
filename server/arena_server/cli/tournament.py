"""``arena tournament``: a resumable round robin between hosted bots, with standings and a crosstable."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import TextIO

from arena_bots import hosted_bots
from arena_games import Game, load_game
from arena_server.cli import CliError
from arena_server.cli.common import (
    add_game_arguments,
    add_time_control_arguments,
    game_from_args,
    open_database,
    time_control_from_args,
)
from arena_server.ladder.scheduler import ladder_game
from arena_server.ladder.tournament import (
    Tournament,
    TournamentError,
    crosstable_text,
    standings_table,
    write_outputs,
)
from arena_server.matches.hub import Hub


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "tournament",
        help="run a round robin between bots",
        description="Play every pair of bots (both seat orders) in this process and print the standings "
        "and the crosstable. Interrupted? Run the same command again: it continues where it stopped.",
    )
    add_game_arguments(p, default_game=None)
    p.add_argument("--bots", nargs="+", required=True, metavar="BOT", help="hosted bot names")
    p.add_argument("--games-per-pair", type=int, default=10, metavar="N", help="games per pair (default 10)")
    p.add_argument("--concurrency", type=int, default=1, metavar="C", help="matches at once (default 1)")
    p.add_argument("--db", default="tournament.db", help="SQLite file keeping the matches (default tournament.db)")
    p.add_argument(
        "--output",
        default=None,
        metavar="PREFIX",
        help="write PREFIX.json, PREFIX-standings.csv, PREFIX-crosstable.csv (default tournament-<id>)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="play the matches on a Ray cluster (a local one without ADDRESS); needs pip install 'arena[ray]'; "
        "this process stays the only database writer (docs/cluster.md)",
    )
    add_time_control_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.game:
        raise CliError("--game is required, e.g. --game rps (see `arena games`)")
    game = ladder_game(game_from_args(args))
    tc = time_control_from_args(args)
    hosted = hosted_bots()
    unknown = [b for b in args.bots if b not in hosted]
    if unknown:
        raise CliError(
            f"unknown bot {', '.join(repr(b) for b in unknown)}; hosted bots are: {', '.join(sorted(hosted))}"
        )
    for name in args.bots:
        games = hosted[name].games
        if games and game.name not in games:
            raise CliError(f"bot {name!r} does not play {game.name}; it plays {', '.join(games)}")
    return asyncio.run(_run(args, game, tc))


class ProgressBar:
    """``[#####-----] 12/40 30% 4.1 matches/s ETA 0:07`` on stderr, redrawn in place on a terminal."""

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream: TextIO = stream or sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.last = 0.0

    def __call__(self, done: int, total: int, resumed: int, elapsed: float) -> None:
        now = time.monotonic()
        if self.tty or done in (total, resumed) or now - self.last >= 2.0:
            self.last = now
            fraction = done / total if total else 1.0
            filled = int(self.width * fraction)
            new = done - resumed
            rate = new / elapsed if elapsed > 0 and new else 0.0
            eta = (total - done) / rate if rate else 0.0
            eta_text = f"ETA {int(eta // 60)}:{int(eta % 60):02d}" if rate and done < total else ""
            extra = f" ({resumed} from an earlier run)" if resumed else ""
            line = (
                f"[{'#' * filled}{'-' * (self.width - filled)}] {done}/{total} {fraction:.0%} "
                f"{rate:.1f} matches/s {eta_text}{extra}"
            )
            end = "\r" if self.tty and done < total else "\n"
            print(line.ljust(100) if self.tty else line, end=end, file=self.stream, flush=True)


async def _run(args: argparse.Namespace, game: Game, tc: object) -> int:
    store = await open_database(args.db)
    try:
        hub = Hub(store, hosted_bots())
        try:
            tournament = Tournament(hub, game, args.bots, args.games_per_pair, tc)  # type: ignore[arg-type]
        except TournamentError as exc:
            raise CliError(str(exc)) from None
        print(
            f"arena: tournament {tournament.id}: {game!r}, {len(tournament.bots)} bots, "
            f"{len(tournament.slots())} matches (database {args.db})",
            file=sys.stderr,
        )
        remote = None
        concurrency = args.concurrency
        if args.ray is not None:
            from arena_server.ladder.on_ray import RayMatches, RayUnavailable

            try:
                remote = RayMatches(args.ray or None)  # in the main thread: Ray installs its signal handlers
            except RayUnavailable as exc:
                await hub.shutdown()
                raise CliError(str(exc)) from None
            short = load_game(game.name, **{**game.params, "rounds": 3}) if "rounds" in game.params else game
            await asyncio.to_thread(remote.warm_up, short, tuple(tournament.bots))
            concurrency = max(concurrency, 2 * remote.slots_at_once)  # the round trip to the driver overlaps play
            print(f"arena: on Ray ({remote.slots_at_once} CPUs), {concurrency} matches at once", file=sys.stderr)
        try:
            result = await tournament.run(concurrency, None if args.quiet else ProgressBar(), remote)
        except TournamentError as exc:
            raise CliError(str(exc)) from None
        finally:
            await hub.shutdown()
            if remote is not None:
                remote.close()
        print(standings_table(result))
        print()
        print(crosstable_text(result.bots, result.crosstable))
        paths = write_outputs(result, args.output or f"tournament-{result.tournament_id}")
        print(f"\narena: wrote {', '.join(str(p) for p in paths)}", file=sys.stderr)
        return 0
    finally:
        await store.close()
