"""``arena match``: play one match between named bots and print the result."""

from __future__ import annotations

import argparse
import asyncio
import os

import grpc

from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_bots import hosted_bots
from arena_client import TimeControl
from arena_client.convert import params_to_proto, time_control_to_proto
from arena_client.remote import ServerUnreachable, wait_until_reachable_blocking
from arena_games import Game
from arena_server.bots.formats import foreign_formats
from arena_server.cli import CliError, Interrupted, run_async
from arena_server.cli.common import (
    SERVER_ENV,
    add_connect_timeout_argument,
    add_game_arguments,
    add_time_control_arguments,
    game_from_args,
    open_database,
    time_control_from_args,
)
from arena_server.matches.evaluate import EvaluateError, evaluate
from arena_server.matches.hub import Hub, HubError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "match",
        help="play one match between named bots",
        description="Play one match. Without --server the hosted bots play here, in this process; "
        "with --server the server runs it (so connected remote bots can play) and stores it.",
    )
    p.add_argument(
        "bots",
        nargs="+",
        metavar="BOT",
        help="bot names by seat, e.g. random rock; a file in a bot format plays as FORMAT:FILE, e.g. kaggle:agent.py",
    )
    add_game_arguments(p)
    add_time_control_arguments(p)
    p.add_argument("--seed", default=None, help="match seed (default: random)")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--server",
        default=None,
        metavar="HOST:PORT",
        help=f"ask this server to run the match (default: ${SERVER_ENV} if set, unless --db or a FORMAT:FILE bot "
        "says the match is local; else play here)",
    )
    where.add_argument("--local", action="store_true", help=f"play here even when ${SERVER_ENV} is set")
    p.add_argument(
        "--token",
        action="append",
        default=[],
        metavar="NAME=TOKEN",
        help="with --server: seat a connected remote bot of yours (its token from `arena bot register`); repeatable",
    )
    p.add_argument("--db", default=None, help="(local matches) also store the match in this SQLite file")
    add_connect_timeout_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    game = game_from_args(args)
    tc = time_control_from_args(args)
    files = [b for b in args.bots if _format_spec(b)]
    if args.server is None and not (args.local or args.db or files):
        # $ARENA_SERVER stands in for --server only where nothing on the line says "here":
        # a local database (--db) or a bot file on this machine keeps the match local.
        args.server = os.environ.get(SERVER_ENV, "").strip() or None
    if args.token and (args.local or not args.server):
        raise CliError("--token seats remote bots on a server; give --server HOST:PORT (or set $ARENA_SERVER)")
    if files:
        return _with_files(args, game, tc, files)
    if args.server and not args.local:
        return _remote(args, game, tc)
    return run_async(_local(args, game, tc))


def _format_spec(bot: str) -> bool:
    prefix, sep, _ = bot.partition(":")
    return bool(sep) and prefix in {f.name for f in foreign_formats()}


def _with_files(args: argparse.Namespace, game: Game, tc: TimeControl, files: list[str]) -> int:
    """A local match with bots given as FORMAT:FILE, run through :func:`~arena_server.matches.evaluate.evaluate`."""
    if (args.server and not args.local) or args.db:
        raise CliError(
            f"{files[0]} is a file on this machine: it plays local matches only (--local, without --db); "
            "to play it on a server, register it with `arena bot add NAME --FORMAT FILE` or `arena bot submit`"
        )
    try:
        result = evaluate(game, args.bots, episodes=1, time_control=tc, seed=args.seed)
    except EvaluateError as exc:
        raise CliError(str(exc)) from None
    record = result.records[0]
    print(record.summary())
    print(f"seed {record.seed} (sha256 {record.seed_sha256})")
    return 0


async def _local(args: argparse.Namespace, game: object, tc: object) -> int:
    store = None
    if args.db:
        store = await open_database(args.db)
    try:
        hub = Hub(store, hosted_bots())
        try:
            running = await hub.start_match(game, args.bots, tc, args.seed, seed_chosen=bool(args.seed))  # type: ignore[arg-type]
        except HubError as exc:
            raise CliError(str(exc)) from None
        assert running.task is not None
        try:
            # Shielded: Ctrl-C aborts the match through the hub (recorded as aborted, seats told) instead of
            # cancelling the referee in the middle of a move.
            record = await asyncio.shield(running.task)
        except asyncio.CancelledError:
            await hub.shutdown("interrupted (Ctrl-C)", grace=3.0)
            raise
    finally:
        if store is not None:
            await store.close()
    print(record.summary())
    print(f"seed {record.seed} (sha256 {record.seed_sha256})")
    return 0


def _tokens(items: list[str]) -> dict[str, str]:
    tokens: dict[str, str] = {}
    for item in items:
        name, sep, token = item.partition("=")
        if not sep or not name.strip() or not token.strip():
            raise CliError(f"--token {item!r} must look like NAME=TOKEN (the token `arena bot register NAME` printed)")
        tokens[name.strip()] = token.strip()
    return tokens


def _remote(args: argparse.Namespace, game: object, tc: object) -> int:
    """Ask the server to run the match, follow it to its end and print the result.

    The match is created without waiting (so its id is known at once) and followed with WatchMatch. Ctrl-C
    ends this command only: the API has no way to stop a match, so the one line says that it goes on at the
    server under its id and how to follow it.

    Raises:
        CliError: the server cannot be reached, it refused the match, or the stream broke off.
        Interrupted: Ctrl-C while the match runs.
    """
    request = mp.CreateMatchRequest(
        game=args.game,
        bots=args.bots,
        seed=args.seed or "",
        wait=False,
        time_control=time_control_to_proto(tc),  # type: ignore[arg-type]
        bot_tokens=_tokens(args.token),
    )
    params_to_proto(game.params, request.params)  # type: ignore[attr-defined]
    with grpc.insecure_channel(args.server) as channel:
        try:
            wait_until_reachable_blocking(channel, args.server, args.connect_timeout)
        except ServerUnreachable as exc:
            raise CliError(str(exc)) from None
        stub = mp_grpc.MatchServiceStub(channel)
        try:
            match_id = stub.CreateMatch(request).match_id
        except grpc.RpcError as exc:
            raise _rpc_error(exc, args.server) from None
        try:
            r = _until_ended(stub, match_id, args.server)
        except KeyboardInterrupt:
            raise Interrupted(
                f"interrupted; the match goes on at {args.server} as {match_id} (a match cannot be stopped from "
                f"here): `arena watch {match_id} --server {args.server}` follows it to its result"
            ) from None
        except grpc.RpcError as exc:
            raise _rpc_error(exc, args.server) from None
    names = " vs ".join(s.bot_name for s in r.seats)
    scores = " : ".join(f"{x + 0.0:g}" for x in r.returns)  # + 0.0 turns -0.0 into 0
    status = mp.MatchStatus.Name(r.status).removeprefix("MATCH_STATUS_").lower()
    print(f"match {r.match_id} {r.game}: {names}  {scores}  ({status}: {r.reason})")
    print(f"seed {r.seed} (sha256 {r.seed_sha256})")
    return 0


def _rpc_error(exc: grpc.RpcError, server: str) -> CliError:
    """The one-line error for a failed call to ``server``."""
    if exc.code() == grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
        return CliError(f"lost the connection to {server} ({exc.details()})")  # type: ignore[attr-defined]
    return CliError(exc.details())  # type: ignore[attr-defined]


def _until_ended(stub: mp_grpc.MatchServiceStub, match_id: str, server: str) -> mp.MatchRecord:
    """The record of ``match_id`` from its watch stream, once it has ended.

    Raises:
        CliError: the stream closed before the end (the match itself goes on at the server).
    """
    for event in stub.WatchMatch(mp.WatchMatchRequest(match_id=match_id)):
        if event.WhichOneof("kind") == "ended":
            ended: mp.MatchRecord = event.ended
            return ended
    raise CliError(
        f"the server closed match {match_id}'s stream before its end; "
        f"`arena watch {match_id} --server {server}` follows it to its result"
    )
