"""``arena tournament``: a resumable round robin between hosted bots, with standings and a crosstable."""

from __future__ import annotations

import argparse
import asyncio
import sys

from arena_bots import hosted_bots
from arena_bots.progress import ProgressBar
from arena_games import Game, load_game
from arena_server.cli import CliError, Interrupted, run_async
from arena_server.cli.common import (
    add_game_arguments,
    add_time_control_arguments,
    check_writable,
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
    p.add_argument("--quiet", action="store_true", help="no progress bar (there is none when stderr is not a terminal)")
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="play the matches on a Ray cluster (without ADDRESS: the one in RAY_ADDRESS if set, else a local one); "
        "needs pip install 'arena[ray]'; "
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
    if args.output is not None:  # checked now, not after an hour of matches
        check_writable(f"{args.output}.json", "--output")
    state = _State()
    try:
        return run_async(_run(args, game, tc, state))
    except KeyboardInterrupt:
        if state.total:
            raise Interrupted(
                f"interrupted; {state.done} of {state.total} matches are saved in {args.db}; run the same "
                "command again to resume"
            ) from None
        raise


class _State:
    """How far the tournament got (for the Ctrl-C message)."""

    done = 0
    total = 0


class _Progress:
    """The tournament's progress bar (on a terminal only): matches done, rate, ETA."""

    def __init__(self, state: _State, bar: ProgressBar | None) -> None:
        self.state = state
        self.bar = bar

    def __call__(self, done: int, total: int, resumed: int, elapsed: float) -> None:
        self.state.done, self.state.total = done, total
        if self.bar is not None:
            new = done - resumed
            rate = f"{new / elapsed:.1f} matches/s" if elapsed > 0 and new else ""
            self.bar.update(done, rate, total=total)


async def _run(args: argparse.Namespace, game: Game, tc: object, state: _State) -> int:
    store = await open_database(args.db)
    try:
        hub = Hub(store, hosted_bots())
        try:
            tournament = Tournament(hub, game, args.bots, args.games_per_pair, tc)  # type: ignore[arg-type]
        except TournamentError as exc:
            raise CliError(str(exc)) from None
        total = len(tournament.slots())
        print(
            f"arena: tournament {tournament.id}: {game!r}, {len(tournament.bots)} bots, "
            f"{total} matches (database {args.db})",
            file=sys.stderr,
        )
        done = len(await tournament.done_slots())
        state.done, state.total = done, total
        if done:
            print(
                f"arena: resuming tournament {tournament.id}: {done} of {total} matches were played by an "
                f"earlier run; playing the other {total - done}",
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
            print(
                f"arena: on Ray ({remote.slots_at_once} CPUs, {remote.where}), {concurrency} matches at once",
                file=sys.stderr,
            )
        bar = None if args.quiet else ProgressBar(total, "matches")
        try:
            result = await tournament.run(concurrency, _Progress(state, bar), remote)
        except TournamentError as exc:
            raise CliError(str(exc)) from None
        finally:
            if bar is not None:
                bar.close()
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
