"""``arena ladder ...`` and ``arena ratings ...``: read the ladder of a running server, rebuild ratings.

Also the ``arena serve`` options that configure the ladder (:func:`add_serve_arguments`,
:func:`start_ladder`).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from datetime import UTC, datetime

import grpc

import arena_server.store.ratings as ls
from arena.v1 import ladder_pb2 as lp
from arena.v1 import ladder_pb2_grpc as lp_grpc
from arena_client.convert import params_to_proto
from arena_games import GameError, load_game
from arena_server.cli import CliError, run_async
from arena_server.cli.common import (
    add_connect_timeout_argument,
    add_server_argument,
    connect,
    open_database,
    parse_params,
)
from arena_server.ladder.scheduler import Ladder, LadderConfig, parse_game_spec
from arena_server.matches.hub import Hub

DEFAULT_LADDER_GAMES = ("rps", "tic_tac_toe", "dots_and_boxes", "liars_dice")

# -- arena serve options ----------------------------------------------------------------------------


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("ladder")
    g.add_argument("--no-ladder", action="store_true", help="do not run the rated ladder")
    g.add_argument(
        "--ladder-game",
        action="append",
        default=[],
        metavar="GAME[:NAME=VALUE,...]",
        help="a game to run a ladder for, repeatable, e.g. rps:signs=5 (default: "
        + ", ".join(DEFAULT_LADDER_GAMES)
        + ")",
    )
    g.add_argument(
        "--ladder-bots", default="", metavar="A,B,...", help="only these bots play on the ladder (default: every bot)"
    )
    g.add_argument("--concurrency", type=int, default=2, metavar="N", help="ladder matches at once (default 2)")
    g.add_argument("--per-bot", type=int, default=1, metavar="N", help="ladder matches per bot at once (default 1)")
    g.add_argument(
        "--pause-after",
        type=int,
        default=3,
        metavar="N",
        help="pause a bot after N failed ladder matches in a row (default 3)",
    )
    g.add_argument("--ladder-seed", type=int, default=None, help="seed the pairing (default: random)")
    g.add_argument(
        "--ladder-interval",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="pause between the starts of two ladder matches (default 0.5; 0 = as fast as possible)",
    )


def ladder_config(args: argparse.Namespace) -> LadderConfig | None:
    """The ladder configuration from ``arena serve`` options (None with --no-ladder).

    Raises:
        CliError: a bad game spec or limit.
    """
    if getattr(args, "no_ladder", True):
        return None
    games = []
    for spec in args.ladder_game or DEFAULT_LADDER_GAMES:
        try:
            name, params = parse_game_spec(spec)
            games.append(load_game(name, **params))
        except (GameError, ValueError) as exc:
            raise CliError(f"--ladder-game {spec}: {exc}") from None
    if args.concurrency < 1 or args.per_bot < 1 or args.pause_after < 1:
        raise CliError("--concurrency, --per-bot and --pause-after must be at least 1")
    if args.ladder_interval < 0:
        raise CliError(f"--ladder-interval {args.ladder_interval:g} must be 0 or more seconds")
    return LadderConfig(
        games=games,
        concurrency=args.concurrency,
        per_bot=args.per_bot,
        pause_after=args.pause_after,
        seed=args.ladder_seed,
        min_interval=args.ladder_interval,
        bots=tuple(b.strip() for b in args.ladder_bots.split(",") if b.strip()),
    )


def start_ladder(hub: Hub, config: LadderConfig | None) -> Ladder | None:
    """Start the ladder in the background (None when there is no configuration)."""
    if config is None:
        return None
    ladder = Ladder(hub, config)
    ladder.start()
    games = ", ".join(repr(p.game) for p in ladder.pools)
    print(f"arena: ladder running for {games} (concurrency {config.concurrency}, {config.per_bot} per bot)", flush=True)
    return ladder


# -- reading commands ---------------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "ladder",
        help="leaderboards, crosstables and a bot's matches from a server",
        description="Read the rated ladder of a running server.",
    )
    lsub = p.add_subparsers(dest="ladder_command", metavar="WHAT", required=True)

    def common(q: argparse.ArgumentParser, pool: bool = True) -> None:
        add_server_argument(q)
        add_connect_timeout_argument(q)
        if pool:
            q.add_argument("--game", "-g", default="rps", help="game (default rps)")
            q.add_argument("--param", "-p", action="append", default=[], metavar="NAME=VALUE", help="game parameter")
            q.add_argument("--pool", default="", help="a pool name from `arena ladder pools` (overrides --game)")

    q = lsub.add_parser("leaderboard", help="ratings of one game, best first")
    common(q)
    q.add_argument("--limit", type=int, default=100)
    q.set_defaults(func=_leaderboard)
    q = lsub.add_parser("crosstable", help="every pair's games and score with its 95%% interval")
    common(q)
    q.set_defaults(func=_crosstable)
    q = lsub.add_parser("matches", help="a bot's recent matches")
    common(q, pool=False)
    q.add_argument("bot", help="bot name")
    q.add_argument("--game", "-g", default="", help="only this game")
    q.add_argument("--limit", type=int, default=20)
    q.set_defaults(func=_matches)
    q = lsub.add_parser("pools", help="the rating pools with results")
    common(q, pool=False)
    q.set_defaults(func=_pools)

    r = sub.add_parser(
        "ratings", help="rebuild ratings from the stored matches", description="Maintain the stored ratings."
    )
    rsub = r.add_subparsers(dest="ratings_command", metavar="WHAT", required=True)
    q = rsub.add_parser(
        "recompute",
        help="rebuild every rating from the matches and report differences",
        description="Rebuild the rating tables from the matches alone (the server must be stopped), "
        "print any difference from what was stored, and store the rebuilt ratings. With --check, "
        "only compare: the database is opened read-only (nothing is written, not even its WAL), "
        "so it also works while a server is running.",
    )
    q.add_argument("--db", default="arena.db", help="SQLite database file (default arena.db)")
    q.add_argument(
        "--check",
        action="store_true",
        help=f"only compare, read-only; exit 1 when they differ by more than {ls.RATING_TOLERANCE} Elo "
        "(counts must be equal)",
    )
    q.set_defaults(func=_recompute)
    q = rsub.add_parser(
        "unpause",
        help="let a paused bot play on the ladder again (the server must be stopped)",
        description="Clear a ladder pause by hand, e.g. for a hosted bot whose code was fixed "
        "(hosted bots have no versions to bump).",
    )
    q.add_argument("bot", help="bot name")
    q.add_argument("--db", default="arena.db", help="SQLite database file (default arena.db)")
    q.set_defaults(func=_unpause)


def _selector(args: argparse.Namespace) -> lp.PoolSelector:
    sel = lp.PoolSelector(pool=args.pool)
    if not args.pool:
        sel.game = args.game
        try:
            params = parse_params(args.param)
            load_game(args.game, **params)
        except GameError as exc:
            raise CliError(str(exc)) from None
        params_to_proto(load_game(args.game, **params).params, sel.params)
    return sel


def _call(args: argparse.Namespace, method: str, request: object) -> object:
    async def go() -> object:
        async with grpc.aio.insecure_channel(args.server) as channel:
            await connect(channel, args.server, args.connect_timeout)
            stub = lp_grpc.LadderServiceStub(channel)
            return await getattr(stub, method)(request, timeout=30)

    try:
        return run_async(go())
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.UNAVAILABLE:
            raise CliError(f"lost the connection to {args.server} ({exc.details()})") from None
        raise CliError(exc.details() or str(exc.code())) from None


def _ago(ts: object) -> str:
    if not getattr(ts, "seconds", 0):
        return "-"
    delta = datetime.now(UTC) - ts.ToDatetime(tzinfo=UTC)  # type: ignore[attr-defined]
    s = int(delta.total_seconds())
    return f"{s}s ago" if s < 120 else f"{s // 60}m ago" if s < 7200 else f"{s // 3600}h ago"


def _leaderboard(args: argparse.Namespace) -> int:
    board = _call(args, "GetLeaderboard", lp.GetLeaderboardRequest(pool=_selector(args), limit=args.limit))
    assert isinstance(board, lp.Leaderboard)
    fitted = f"fitted {_ago(board.pool.fitted_at)}" if board.pool.fitted_at.seconds else "not fitted yet"
    stale = "; newer results are waiting for the next refit" if board.pool.dirty else ""
    print(f"{board.pool.pool}: {board.pool.matches} rated matches ({board.pool.method}, {fitted}{stale})")
    groups = {e.component for e in board.entries}
    if len(groups) > 1:
        print(
            f"note: {len(groups)} groups of bots that never met (column 'grp'); "
            "ratings are comparable only within a group"
        )
    print(
        f"{'#':>3}  {'bot':<24} {'rating':>7} {'±95%':>6} {'grp':>3} {'games':>6}  {'W-D-L':<16} "
        f"{'last active':<11} paused"
    )
    for e in board.entries:
        wdl = f"{e.wins}-{e.draws}-{e.losses}"
        print(
            f"{e.rank:>3}  {e.bot_name:<24} {round(e.rating):>7d} {round(e.ci95):>6d} {e.component:>3} "
            f"{e.games:>6}  {wdl:<16} "
            f"{_ago(e.last_active):<11} {e.paused_reason}"
        )
    return 0


def _crosstable(args: argparse.Namespace) -> int:
    table = _call(args, "GetCrosstable", lp.GetCrosstableRequest(pool=_selector(args)))
    assert isinstance(table, lp.Crosstable)
    stale = " (expected scores from a fit that newer results will update)" if table.pool.dirty else ""
    print(f"{table.pool.pool}: {len(table.cells)} pairs{stale}")
    print(f"{'bot A':<22} {'bot B':<22} {'games':>6} {'A score':>8} {'95% interval':>15} {'expected':>9}")
    for c in table.cells:
        print(
            f"{c.bot_a:<22} {c.bot_b:<22} {c.games:>6} {c.mean:>8.1%} "
            f"{f'{c.ci_low:.0%}..{c.ci_high:.0%}':>15} {c.expected:>9.1%}"
        )
    return 0


def _matches(args: argparse.Namespace) -> int:
    resp = _call(args, "ListBotMatches", lp.ListBotMatchesRequest(bot_name=args.bot, game=args.game, limit=args.limit))
    assert isinstance(resp, lp.ListBotMatchesResponse)
    if not resp.matches:
        print(f"no matches of {args.bot!r}")
    for m in resp.matches:
        rec = m.match
        names = " vs ".join(s.bot_name for s in rec.seats)
        rated = "rated" if rec.rated else "unrated"
        print(f"{rec.match_id:>8}  {rec.game:<15} {names:<40} seat {m.seat}  {m.result or 'aborted':<5} {rated}")
    return 0


def _pools(args: argparse.Namespace) -> int:
    resp = _call(args, "ListPools", lp.ListPoolsRequest())
    assert isinstance(resp, lp.ListPoolsResponse)
    for p in resp.pools:
        print(f"{p.pool:<40} {p.matches:>8} matches  {p.method}")
    return 0


def _check(args: argparse.Namespace) -> int:
    """``recompute --check``: read-only, works while a server uses the file."""
    try:
        result = run_async(ls.check_database(args.db))
    except FileNotFoundError:
        raise CliError(f"no database file {args.db}; pass --db with the file `arena serve` uses") from None
    except sqlite3.Error as exc:
        raise CliError(f"cannot read {args.db} as an Arena database ({exc}); check the --db path") from None
    snap, diffs = result.snapshot, result.differences
    print(f"arena: recomputed {len(snap.order)} rated matches in {len(snap.pools)} pool(s) from {args.db} (read-only)")
    for pool in result.unfitted:
        print(
            f"arena: pool {pool.pool} has results newer than its last fit (the server refits it in the "
            "background and when it stops); its ratings were not compared, its counts were"
        )
    if diffs:
        print(
            f"arena: {len(diffs)} difference(s) from the stored ratings "
            f"(tolerance {ls.RATING_TOLERANCE} Elo for ratings and intervals, counts exact):",
            file=sys.stderr,
        )
        for line in diffs[:50]:
            print(f"  {line}", file=sys.stderr)
        return 1
    print(f"arena: the stored ratings equal the recomputed ones (within {ls.RATING_TOLERANCE} Elo; counts exact)")
    return 0


def _recompute(args: argparse.Namespace) -> int:
    if args.check:
        return _check(args)

    async def go() -> int:
        store = await open_database(args.db)
        try:
            snap, diffs = await ls.recompute(store, write=True)
        finally:
            await store.close()
        print(f"arena: recomputed {len(snap.order)} rated matches in {len(snap.pools)} pool(s) from {args.db}")
        if diffs:
            print(f"arena: {len(diffs)} difference(s) from the stored ratings:", file=sys.stderr)
            for line in diffs[:50]:
                print(f"  {line}", file=sys.stderr)
            print("arena: stored the recomputed ratings", file=sys.stderr)
            return 0
        print("arena: the stored ratings equal the recomputed ones")
        return 0

    return run_async(go())


def _unpause(args: argparse.Namespace) -> int:
    async def go() -> int:
        store = await open_database(args.db)
        try:
            paused = await ls.paused_bots(store.conn)
            if args.bot not in paused:
                raise CliError(f"{args.bot!r} is not paused; paused bots: {', '.join(sorted(paused)) or 'none'}")
            await ls.unpause_bot(store, args.bot)
        finally:
            await store.close()
        print(f"arena: {args.bot} plays on the ladder again")
        return 0

    return run_async(go())
