"""Run any OpenSpiel ``pyspiel.Bot`` as an Arena bot (optional extra: ``pip install arena[openspiel]``).

:class:`OpenSpielBot` is an ordinary :class:`arena_client.Bot`: it plays in-process,
as a subprocess or remotely (:func:`arena_client.run`). At every turn it rebuilds the
OpenSpiel state of the match from what the seat knows, asks the wrapped bot's
``step(state)`` for an action, and maps it back. Which Arena games and parameters map
(:func:`openspiel_game`; docs/formats/openspiel.md):

========================================  ==============================================
Arena                                     OpenSpiel
========================================  ==============================================
``tic_tac_toe`` 3x3, k=3                  ``tic_tac_toe`` (cells row*3+col, identical)
``tic_tac_toe`` rows, cols, k             ``mnk(m=cols, n=rows, k=k)`` (cells identical)
``dots_and_boxes`` rows, cols             ``dots_and_boxes(num_rows, num_cols, utility_margin=true)``,
                                          edges renumbered (:func:`arena_games.dots_and_boxes.openspiel_edge`)
``liars_dice`` players=2, rounds=single,  ``liars_dice(numdice=dice, dice_sides=faces)`` (actions identical)
wild=highest, bidding=standard, no spot_on
``rps`` signs=3, rounds                   ``repeated_game(stage_game=matrix_rps(), num_repetitions=rounds)``
========================================  ==============================================

Perfect-information games are replayed from the public moves the seat has seen (its
own included), in order. In Liar's Dice the opponent's dice are hidden from the seat:
the state is built with the seat's own dice and dice drawn at random for the opponent,
then the round's bids, so a bot that reads only its own information state (CFR
policies, information-set search) plays exactly as in OpenSpiel; a bot that peeks at
the opponent's dice in the state sees invented ones. Every rebuilt state is checked:
its legal actions must be the turn's, or the bot resigns saying so.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from arena_client.bot import Bot, Resign
from arena_client.types import MatchInfo, Turn, Update
from arena_games import load_game
from arena_games.dots_and_boxes import openspiel_edge

try:
    import pyspiel  # type: ignore[import-not-found]
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "arena_client.openspiel needs OpenSpiel: pip install 'arena[openspiel]' (or pip install open_spiel)"
    ) from exc

BotFactory = Callable[[Any, int], Any]
"""``factory(pyspiel_game, player) -> pyspiel.Bot``: makes the wrapped bot for one match."""


class UnmappedGame(ValueError):
    """An Arena game or parameter set with no OpenSpiel counterpart; the message says which values map."""


class GameMap:
    """An Arena game and its OpenSpiel counterpart, with the action numbering between them."""

    def __init__(self, arena_name: str, game: Any, to_arena: Callable[[int], int] | None = None) -> None:
        self.arena_name = arena_name
        self.game = game
        n = game.num_distinct_actions()
        forward = [to_arena(a) if to_arena else a for a in range(n)]
        self.to_arena_actions = forward
        self.to_openspiel_actions = {ours: theirs for theirs, ours in enumerate(forward)}

    def to_arena(self, action: int) -> int:
        return self.to_arena_actions[action]

    def to_openspiel(self, action: int) -> int:
        return self.to_openspiel_actions[action]


def openspiel_game(game: str, params: dict[str, Any]) -> GameMap:
    """The OpenSpiel game for Arena game ``game`` with all its ``params`` (defaults included).

    Raises:
        UnmappedGame: a game or parameter value OpenSpiel has no counterpart for.
    """
    p = dict(load_game(game, **params).params)
    if game == "tic_tac_toe":
        rows, cols, k = int(p["rows"]), int(p["cols"]), int(p["k"])
        if (rows, cols, k) == (3, 3, 3):
            return GameMap(game, pyspiel.load_game("tic_tac_toe"))
        return GameMap(game, pyspiel.load_game("mnk", {"m": cols, "n": rows, "k": k}))
    if game == "dots_and_boxes":
        rows, cols = int(p["rows"]), int(p["cols"])
        theirs = pyspiel.load_game("dots_and_boxes", {"num_rows": rows, "num_cols": cols, "utility_margin": True})
        return GameMap(game, theirs, lambda a: openspiel_edge(rows, cols, a))
    if game == "liars_dice":
        wanted = {"players": 2, "rounds": "single", "wild": "highest", "bidding": "standard", "spot_on": False}
        differing = [f"{name}={p[name]}" for name, value in wanted.items() if p[name] != value]
        if differing:
            raise UnmappedGame(
                f"OpenSpiel's liars_dice is {', '.join(f'{n}={v}' for n, v in wanted.items())}; "
                f"this match has {', '.join(differing)}"
            )
        return GameMap(
            game, pyspiel.load_game("liars_dice", {"numdice": int(p["dice"]), "dice_sides": int(p["faces"])})
        )
    if game == "rps":
        if int(p["signs"]) != 3:
            raise UnmappedGame(f"OpenSpiel's matrix_rps has 3 signs; this match has signs={p['signs']}")
        theirs = pyspiel.load_game(f"repeated_game(stage_game=matrix_rps(),num_repetitions={int(p['rounds'])})")
        return GameMap(game, theirs)
    raise UnmappedGame(f"no OpenSpiel counterpart for {game}; mapped: tic_tac_toe, dots_and_boxes, liars_dice, rps")


class OpenSpielBot(Bot):
    """An Arena bot that asks a ``pyspiel.Bot`` for every move.

    Args:
        factory: ``factory(pyspiel_game, player)`` makes the wrapped bot, once per match
            (e.g. ``lambda g, p: mcts.MCTSBot(g, 2, 200, mcts.RandomRolloutEvaluator(1))``).
        name: The name to play under.
        games: The Arena games offered in the Hello (default: every mapped game).
        seed: Seeds the dice invented for hidden opponents (Liar's Dice).
    """

    def __init__(
        self,
        factory: BotFactory,
        name: str = "openspiel-bot",
        games: tuple[str, ...] = ("tic_tac_toe", "dots_and_boxes", "liars_dice", "rps"),
        seed: int | None = None,
    ) -> None:
        self.factory = factory
        self.name = name
        self.games = games
        self.rng = random.Random(seed)
        self.mapping: GameMap | None = None
        self.bot: Any = None
        self.seat = 0
        self.history: list[tuple[int, int]] = []
        """Public moves seen this match, in order: ``(seat, Arena action)``."""
        self.unmapped = ""
        """Why the current match has no OpenSpiel counterpart (the bot resigns with it), if it has none."""

    def on_match_start(self, match: MatchInfo) -> None:
        self.unmapped = ""
        try:
            self.mapping = openspiel_game(match.game, dict(match.params))
        except UnmappedGame as exc:
            self.mapping = None
            self.unmapped = str(exc)
            return
        self.seat = match.seat
        self.history = []
        self.bot = self.factory(self.mapping.game, match.seat)

    def on_update(self, update: Update) -> None:
        self.history.extend((m.seat, m.action) for m in update.moves)

    def state(self, turn: Turn) -> Any:
        """The OpenSpiel state of the match at ``turn``, as this seat may know it."""
        assert self.mapping is not None
        m = self.mapping
        state = m.game.new_initial_state()
        if m.arena_name == "liars_dice":
            obs = turn.observation
            for player in range(2):
                dice = (
                    list(obs.my_dice) if player == self.seat else [self.rng.randint(1, obs.faces) for _ in obs.my_dice]
                )
                for face in dice:
                    state.apply_action(face - 1)  # chance outcome index = face - 1
            for bid in obs.bids:
                state.apply_action(self._bid_action(obs, bid))
            return state
        if m.arena_name == "rps":
            moves = [a for _, a in self.history]
            for i in range(0, len(moves) - 1, 2):
                ordered = sorted(self.history[i : i + 2])
                state.apply_actions([ordered[0][1], ordered[1][1]])
            return state
        for _, action in self.history:
            state.apply_action(m.to_openspiel(action))
        return state

    @staticmethod
    def _bid_action(obs: Any, bid: Any) -> int:
        return int((bid.quantity - 1) * obs.faces + (bid.face - 1))

    def act(self, turn: Turn) -> int:
        if self.mapping is None:
            raise Resign(self.unmapped or "act was called before the match started")
        state = self.state(turn)
        legal = state.legal_actions(self.seat) if state.is_simultaneous_node() else state.legal_actions()
        mapped = sorted(self.mapping.to_arena(a) for a in legal)
        if mapped != sorted(turn.legal_actions):
            raise Resign(
                f"the OpenSpiel state rebuilt for turn {turn.turn_id} disagrees with Arena's "
                f"(legal actions {mapped[:8]} vs {sorted(turn.legal_actions)[:8]})"
            )
        action = self.bot.step(state)
        if isinstance(action, tuple | list):  # some bots return (policy, action)
            action = action[-1]
        return self.mapping.to_arena(int(action))
