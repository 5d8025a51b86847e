"""Simple bots every game needs: uniform random, and the classic RPS baselines.

``random`` plays every game; ``rock``, ``rotate`` and ``beat-last`` are the RPS
warm-up opponents the server hosts from the start.
"""

from __future__ import annotations

import random

from arena_bots.registry import hosted
from arena_client import Bot, MatchInfo, Turn, Update

ALL_GAMES = ("rps", "tic_tac_toe", "dots_and_boxes", "liars_dice")


class RandomBot(Bot):
    """Picks a legal action uniformly at random (seeded)."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def act(self, turn: Turn) -> int:
        legal = turn.legal_actions
        return int(legal[self.rng.randrange(len(legal))])


class AlwaysRockBot(Bot):
    """Always throws sign 0 (rock)."""

    name = "rock"
    games = ("rps",)

    def act(self, turn: Turn) -> int:
        return 0


class RotateBot(Bot):
    """Throws 0, 1, 2, ... cycling through the signs."""

    name = "rotate"
    games = ("rps",)

    def on_match_start(self, match: MatchInfo) -> None:
        self.next = 0

    def act(self, turn: Turn) -> int:
        signs: int = turn.observation.signs
        move = self.next % signs
        self.next = move + 1
        return move


class BeatLastBot(Bot):
    """Throws the sign that beats the opponent's previous sign (random first)."""

    name = "beat-last"
    games = ("rps",)

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def on_match_start(self, match: MatchInfo) -> None:
        self.seat = match.seat
        self.opponent_last: int | None = None

    def on_update(self, update: Update) -> None:
        for move in update.moves:
            if move.seat != self.seat:
                self.opponent_last = move.action

    def act(self, turn: Turn) -> int:
        from arena_games.rps import counters

        signs = turn.observation.signs
        if self.opponent_last is None:
            return self.rng.randrange(signs)
        return int(self.rng.choice(counters(signs, self.opponent_last)))


@hosted("random", ALL_GAMES, "uniformly random legal moves")
def _random(seed: int) -> Bot:
    return RandomBot(seed)


@hosted("rock", ("rps",), "always rock")
def _rock(seed: int) -> Bot:
    return AlwaysRockBot()


@hosted("rotate", ("rps",), "rock, paper, scissors, ... in turn")
def _rotate(seed: int) -> Bot:
    return RotateBot()


@hosted("beat-last", ("rps",), "plays what beats the opponent's previous move")
def _beat_last(seed: int) -> Bot:
    return BeatLastBot(seed)
