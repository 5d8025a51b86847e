"""Argument helpers shared by several subcommands."""

from __future__ import annotations

import argparse
import os
from datetime import timedelta

from arena_client import TimeControl
from arena_games import Game, GameError, load_game
from arena_server.cli import CliError
from arena_server.store.database import Store, StoreError

# The server a ``--server`` command talks to when the flag is omitted: $ARENA_SERVER, else localhost:50051.
DEFAULT_ADDRESS = os.environ.get("ARENA_SERVER") or "localhost:50051"


def add_game_arguments(parser: argparse.ArgumentParser, default_game: str | None = "rps") -> None:
    parser.add_argument("--game", "-g", default=default_game, help="game name (see `arena games`)")
    parser.add_argument(
        "--param",
        "-p",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="game parameter, repeatable, e.g. -p signs=5 -p rounds=100",
    )


def add_connect_timeout_argument(parser: argparse.ArgumentParser) -> None:
    """``--connect-timeout``: how long a ``--server`` command waits for the server before "cannot reach"."""
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help='with a server address: give up with "cannot reach HOST:PORT" after this long (default 10)',
    )


def parse_params(items: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CliError(f"game parameter {item!r} must look like NAME=VALUE, e.g. signs=5")
        params[name.strip()] = value.strip()
    return params


def game_from_args(args: argparse.Namespace) -> Game:
    try:
        return load_game(args.game, **parse_params(args.param))
    except GameError as exc:
        raise CliError(str(exc)) from None


def add_time_control_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--per-move", type=float, default=1.0, metavar="SECONDS", help="budget per move (default 1)")
    parser.add_argument("--overage", type=float, default=10.0, metavar="SECONDS", help="overage bank (default 10)")
    parser.add_argument("--grace", type=float, default=0.1, metavar="SECONDS", help="uncharged grace (default 0.1)")


def time_control_from_args(args: argparse.Namespace) -> TimeControl:
    try:
        return TimeControl(
            timedelta(seconds=args.per_move), timedelta(seconds=args.overage), timedelta(seconds=args.grace)
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None


async def open_database(path: str, exclusive: bool = True) -> Store:
    """Open the SQLite store, turning its errors (corrupt, newer schema, in use) into a CLI error."""
    try:
        return await Store.open(path, exclusive=exclusive)
    except StoreError as exc:
        raise CliError(str(exc)) from None
