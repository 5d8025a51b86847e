"""``arena play``: a person plays a hosted bot from the terminal.

The person is just a remote seat: this command is an SDK bot whose ``act``
draws the position and reads a move from the keyboard. Moves use natural
notation (``r``/``rock``, ``b2``, an edge number, ``3x5``, ``liar``); an
illegal or unreadable move is refused with the reason and asked again.
``help`` lists the legal moves, ``resign`` gives up.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import timedelta
from typing import Any, TextIO

from arena_client import Bot, MatchInfo, MatchResult, Resign, TimeControl, Turn, Update
from arena_client.remote import ArenaError, Client
from arena_games import Game, IllegalActionError, load_game
from arena_server.cli import CliError
from arena_server.cli.common import add_connect_timeout_argument, add_server_argument, parse_params
from arena_server.matches.terminal import move_label, render

PROMPT = "your move> "
RETRY_PROMPT = "try again> "


class _TurnView:
    """Just enough of a State for ``Game.string_to_action``: legality is the turn's list."""

    def __init__(self, game: Game, turn: Turn) -> None:
        self.game = game
        self.turn = turn
        self.legal = set(turn.legal_actions)

    def current_player(self) -> int:
        return self.turn.seat

    def is_legal(self, player: int, action: int) -> bool:
        return action in self.legal

    def illegal_reason(self, player: int, action: int) -> str:
        rule = self.game.explain_illegal(self.turn.observation, player, action)
        if rule:
            return f"{rule}; type help to list the legal moves"
        return f"{self.game.action_to_string(player, action)} is not a legal move now; type help to list them"


class HumanBot(Bot):
    """Shows each position on ``out`` and reads moves from ``inp``."""

    def __init__(self, inp: TextIO, out: TextIO) -> None:
        self.inp = inp
        self.out = out
        self.game: Game | None = None
        self.names: tuple[str, ...] = ()
        self.seat = 0

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def on_match_start(self, match: MatchInfo) -> None:
        self.game = load_game(match.game, **match.params)
        self.names = tuple(s.bot_name for s in match.seats)
        self.seat = match.seat
        others = ", ".join(n for i, n in enumerate(self.names) if i != match.seat)
        self.say(f"match {match.match_id}: {self.game!r}")
        self.say(f"you are seat {match.seat} ({self.names[match.seat]}) against {others}")
        self.say(f"dice/seed commitment (sha256): {match.seed_sha256}")
        self.say("type help for the legal moves, resign to give up")

    def on_update(self, update: Update) -> None:
        assert self.game is not None
        for move in update.moves:
            if move.seat != self.seat:
                self.say(f"{self.names[move.seat]} played {move_label(self.game.name, move.action, move.label)}")

    def act(self, turn: Turn) -> int:
        game = self.game
        assert game is not None
        self.say()
        self.say(render(game, turn.observation, self.seat, self.names))
        left = turn.time_budget + turn.overage_left
        self.say(f"clock: {_clock(turn.time_budget)} for this move, {_clock(left)} in all")
        view = _TurnView(game, turn)
        prompt = PROMPT
        while True:
            self.out.write(prompt)
            self.out.flush()
            line = self.inp.readline()
            if not line:
                raise Resign("the player closed the input")
            text = line.strip()
            if not text:
                prompt = RETRY_PROMPT
                continue
            if text.lower() in ("help", "?"):
                labels = ", ".join(
                    move_label(game.name, a, game.action_to_string(self.seat, a)) for a in turn.legal_actions
                )
                self.say(f"legal moves: {labels}")
                continue
            if text.lower() in ("resign", "quit", "exit"):
                raise Resign("the player resigned")
            try:
                action = game.string_to_action(view, text)  # type: ignore[arg-type]
            except IllegalActionError as exc:
                self.say(f"not accepted: {exc}")
                prompt = RETRY_PROMPT
                continue
            if action not in view.legal:
                self.say(f"not accepted: {view.illegal_reason(self.seat, action)}")
                prompt = RETRY_PROMPT
                continue
            return action

    def on_match_end(self, result: MatchResult) -> None:
        game = self.game
        assert game is not None
        self.say()
        if result.observation is not None:
            self.say(render(game, result.observation, self.seat, self.names))
        if game.name == "liars_dice" and result.observation is not None:
            for number, past in enumerate(result.observation.past_rounds, 1):
                hands = "; ".join(
                    f"{self.names[s]}: {' '.join(map(str, h.dice)) or '-'}" for s, h in enumerate(past.hands)
                )
                self.say(f"round {number} dice: {hands}")
        mine = result.returns[self.seat]
        best = max(result.returns)
        verdict = "draw" if all(r == best for r in result.returns) else ("you won" if mine == best else "you lost")
        scores = ", ".join(f"{n} {r + 0.0:g}" for n, r in zip(self.names, result.returns, strict=True))
        self.say(f"game over: {verdict} ({scores}); {result.reason}")
        self.say(f"seed revealed: {result.seed}")


def _clock(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    return f"{seconds // 60}:{seconds % 60:02d}"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "play",
        help="play a hosted bot yourself, in the terminal",
        description="Play any game against a bot hosted by an Arena server. Moves: r/rock (RPS), b2 "
        "(tic-tac-toe), an edge number as printed on the board (dots and boxes; h1,2 / v0,3 are accepted too, "
        "moves are shown as numbers), 3x5 or liar (Liar's Dice); help lists them.",
    )
    p.add_argument("game", help="game name (see `arena games`)")
    p.add_argument("--vs", required=True, metavar="BOT", help="the bot to play, e.g. random")
    add_server_argument(p)
    p.add_argument("--param", "-p", action="append", default=[], metavar="NAME=VALUE", help="game parameter")
    p.add_argument("--seat", type=int, default=None, help="seat to take (default 0: you move first)")
    p.add_argument("--name", default="", help="name to play under (default: a guest name)")
    p.add_argument("--token", default="", help="token of a registered name")
    p.add_argument("--minutes", type=float, default=5.0, help="thinking time per move, in minutes (default 5)")
    add_connect_timeout_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    params: dict[str, Any] = dict(parse_params(args.param))
    try:
        game = load_game(args.game, **params)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    human = HumanBot(sys.stdin, sys.stdout)
    human.games = (game.name,)
    per_move = timedelta(minutes=args.minutes)
    tc = TimeControl(per_move, per_move * 2, timedelta(seconds=1))
    # A person's answer waits on the terminal: always in the worker thread, so Ctrl-C works at the prompt.
    client = Client(human, args.server, name=args.name, token=args.token, threaded=True)
    try:
        asyncio.run(
            client.play(
                opponent=args.vs,
                game=game.name,
                params=dict(game.params),
                seat=0 if args.seat is None else args.seat,
                time_control=tc,
                reconnect=False,  # a new connection would be a new match: stop and say so instead
                give_up_after=args.connect_timeout,
            )
        )
    except ArenaError as exc:  # ServerUnreachable included: "cannot reach HOST:PORT (...)"
        raise CliError(str(exc)) from None
    return 0
