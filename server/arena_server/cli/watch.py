"""``arena watch``: follow a match move by move as a spectator.

While the match runs only public information is shown (no dice); at the end
the full record arrives, hidden information included.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TextIO

import grpc

from arena.v1 import common_pb2 as common
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client.convert import observation_from_proto, params_from_proto
from arena_client.remote import ServerUnreachable, wait_until_reachable
from arena_games import CHANCE, Game, load_game, registered_games
from arena_server.cli import CliError, run_async
from arena_server.cli.common import add_connect_timeout_argument, add_server_argument
from arena_server.matches.terminal import RepeatedLines, move_label, render

COLLAPSE_BY_MOVES = frozenset({"rps"})
"""Games whose updates are collapsed when the same moves repeat (``… ×12``), whatever the picture's counters say."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "watch",
        help="follow a live match as a spectator",
        description="Follow a match move by move: public information while it runs, everything at the end. "
        "Dots and boxes moves are shown as the edge numbers printed on the board (what `arena play` takes); "
        "a run of identical RPS rounds is shown once with its count (… ×12).",
    )
    p.add_argument("match_id", nargs="?", default="", help="the match to follow")
    p.add_argument("--game", default="", help="instead of a match id: follow the next match of this game")
    add_server_argument(p)
    add_connect_timeout_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.match_id and not args.game:
        raise CliError("give a MATCH_ID, or --game GAME to follow the next match of that game")
    return run_async(watch(args.server, args.match_id, args.game, sys.stdout, args.connect_timeout))


async def watch(server: str, match_id: str, game_name: str, out: TextIO, connect_timeout: float = 10.0) -> int:
    """Print the match's events to ``out`` until it ends.

    Raises:
        CliError: no server answers at ``server`` within ``connect_timeout`` seconds, or it refused.
    """

    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    async with grpc.aio.insecure_channel(server) as channel:
        try:
            await wait_until_reachable(channel, server, connect_timeout)
        except ServerUnreachable as exc:
            raise CliError(str(exc)) from None
        stub = mp_grpc.MatchServiceStub(channel)
        if game_name and not match_id:
            say(await _running_text(stub, server, game_name))
        names: tuple[str, ...] = ()
        repeats = RepeatedLines(say)
        game: Game | None = None
        try:
            async for event in stub.WatchMatch(mp.WatchMatchRequest(match_id=match_id, game=game_name)):
                kind = event.WhichOneof("kind")
                if kind == "started":
                    header = event.started
                    game = load_game(header.game, **params_from_proto(header.params))
                    names = tuple(s.bot_name for s in header.seats)
                    say(f"match {header.match_id}: {game!r}: {' vs '.join(names)}")
                    say(f"seed commitment (sha256): {header.seed_sha256}")
                elif kind == "update" and game is not None:
                    moves = ", ".join(
                        f"{names[m.seat]} {move_label(game.name, m.action, m.label)}" for m in event.update.moves
                    )
                    line = f"-- {moves}"
                    picture = render(game, observation_from_proto(event.update.observation), None, names)
                    # RPS's picture differs only by its counters: the same moves again are counted, not reprinted.
                    repeats.emit(f"{line}\n{picture}", key=line if game.name in COLLAPSE_BY_MOVES else None)
                elif kind == "ended" and game is not None:
                    repeats.flush()
                    _ended(event.ended, game, names, say)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNAVAILABLE:
                raise CliError(f"lost the connection to {server} ({exc.details()})") from None
            raise CliError(exc.details() or exc.code().name) from None
    return 0


async def _running_text(stub: mp_grpc.MatchServiceStub, server: str, game_name: str) -> str:
    """What ``--game`` will wait for: says when no match of the game is running now (and how to start one).

    Raises:
        CliError: the game is unknown.
    """
    if game_name not in registered_games():
        raise CliError(f"unknown game {game_name!r}; games are: {', '.join(registered_games())}")
    try:
        listed = await stub.ListMatches(mp.ListMatchesRequest(game=game_name, limit=100), timeout=30)
    except grpc.aio.AioRpcError:
        return f"waiting for the next {game_name} match to start on {server} (Ctrl-C stops) ..."
    running = [m.match_id for m in listed.matches if m.status == mp.MATCH_STATUS_RUNNING]
    if not running:
        return (
            f"no {game_name} match is running on {server}; waiting for the next one to start (Ctrl-C stops; "
            f"start one with `arena match random random --game {game_name} --server {server}`) ..."
        )
    ids = ", ".join(running[:5]) + (", ..." if len(running) > 5 else "")
    return (
        f"{len(running)} {game_name} match(es) running on {server} ({ids}; `arena watch MATCH_ID` follows one); "
        "waiting for the next one to start (Ctrl-C stops) ..."
    )


def _ended(record: mp.MatchRecord, game: Game, names: tuple[str, ...], say: Callable[..., None]) -> None:
    history = [(m.seat, m.action) for m in record.moves if m.legal]
    state = game.state_from_history(history)
    say()
    say(render(game, state.observation(None), None, names))
    dealt = [m for m in record.moves if m.seat == CHANCE]
    if dealt:
        say(f"chance outcomes, now revealed: {' '.join(m.label for m in dealt)}")
    scores = ", ".join(f"{n} {r + 0.0:g}" for n, r in zip(names, record.returns, strict=True))
    term = common.Termination.Name(record.termination).removeprefix("TERMINATION_").lower().replace("_", " ")
    say(f"result: {scores} ({term}: {record.reason})")
    say(f"seed revealed: {record.seed}")
