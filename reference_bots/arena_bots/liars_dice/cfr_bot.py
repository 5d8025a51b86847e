"""The hosted ``cfr`` bot: the CFR+ equilibrium of the 2-player, 1-die Liar's Dice games.

For ``players=2 dice=1`` with six faces (any bidding rule and wild rule; with
one die each the first challenge ends the game whatever ``rounds`` says) it
plays the average strategy of :mod:`arena_bots.liars_dice.small_game`'s CFR+,
solved offline to exploitability <= 0.0005 by ``arena train liars-dice-cfr``
and shipped in ``data/`` (float16, renormalised on load). In every other game
(the thesis's 5-dice game included; its dynamic-programming CFR is not built
yet) it plays like :class:`~arena_bots.liars_dice.bots.StatisticianBot`, and
says so in its description.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from arena_bots.liars_dice.bots import GAMES, GameShape, StatisticianBot
from arena_bots.liars_dice.small_game import make_game, normalise
from arena_bots.registry import hosted
from arena_client import Bot, MatchInfo, Turn

DATA_DIR = Path(__file__).resolve().parent / "data"


def policy_path(bidding: str, wild: str, faces: int = 6) -> Path:
    """The shipped policy file of one 1-die game."""
    return DATA_DIR / f"cfr-1die-f{faces}-{bidding}-{wild}.npz"


@functools.lru_cache(maxsize=8)
def load_policy(bidding: str, wild: str, faces: int = 6) -> np.ndarray | None:
    """The equilibrium policy [mask, die, action] of a 1-die game, or None when no file is shipped."""
    path = policy_path(bidding, wild, faces)
    if not path.exists():
        return None
    with np.load(path) as data:
        weights = data["policy"].astype(np.float64)
    return normalise(make_game(faces, bidding, wild), weights)


class CfrBot(Bot):
    """Plays the solved equilibrium where one is shipped, else the statistician's move."""

    name = "cfr"
    games = GAMES

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.fallback = StatisticianBot(seed)

    def on_match_start(self, match: MatchInfo) -> None:
        shape = GameShape(match.params)
        self.shape = shape
        self.policy: np.ndarray | None = None
        if shape.players == 2 and shape.dice == 1 and not shape.spot_on:
            self.policy = load_policy(str(match.params.get("bidding", "thesis")), shape.wild, shape.faces)
        self.fallback.on_match_start(match)

    def act(self, turn: Turn) -> int:
        policy = self.policy
        if policy is None:
            return self.fallback.act(turn)
        obs = turn.observation
        mask = 0
        for bid in obs.bids:
            mask |= 1 << self.shape.encode(bid.quantity, bid.face)
        probs = policy[mask, obs.my_dice[0] - 1]
        nbids = self.shape.liar
        legal = list(turn.legal_actions)
        weights = np.array([probs[nbids if a == nbids else a] for a in legal])
        total = weights.sum()
        if total <= 0.0:
            return int(legal[self.rng.integers(len(legal))])
        return int(legal[int(self.rng.choice(len(legal), p=weights / total))])


@hosted("cfr", GAMES, "Liar's Dice: CFR+ equilibrium (2 players, 1 die); statistician play elsewhere")
def _cfr(seed: int) -> Bot:
    return CfrBot(seed)
