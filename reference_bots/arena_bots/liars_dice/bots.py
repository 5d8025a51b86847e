"""The hosted Liar's Dice bots ``sarsa``, ``sarsa-profiling``, ``q-learning`` and ``statistician``.

``cfr`` is in :mod:`arena_bots.liars_dice.cfr_bot`.

The learners (:mod:`arena_bots.liars_dice.learners`) keep learning online and
their tables persist per bot between matches, as the thesis's JSON files did,
in ``<state dir>/<bot>-p<players>d<dice>f<faces>.json``. The tables belong to a
:class:`LearnerTables` held by the host's :class:`~arena_bots.registry.BotState`
(``arena serve``: ``<data dir>/bot-state``, or ``$ARENA_BOT_STATE_DIR``;
elsewhere ``$ARENA_BOT_STATE_DIR`` or ``arena-data/bot-state``): every match of
the same bot and game size under one host shares one table (loaded once, saved
after each match, written atomically). :meth:`LearnerTables.reset` (``arena
train liars-dice-cfr --reset-learners``) deletes the files.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from arena_bots.liars_dice.learners import ThesisLearner
from arena_bots.registry import BotState, hosted
from arena_client import Bot, MatchInfo, MatchResult, Turn

GAMES = ("liars_dice",)
LEARNER_NAMES = ("sarsa", "sarsa-profiling", "q-learning")


class LearnerTables:
    """The learners' tables of one state directory, shared by the matches of one host.

    Args:
        directory: Where ``<bot>-p<players>d<dice>f<faces>.json`` files are read and written.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._tables: dict[Path, ThesisLearner] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, state: BotState) -> LearnerTables:
        """The tables object of a host's state (made on first use)."""
        return state.shared("liars_dice.learner_tables", lambda: cls(state.directory))

    def path(self, name: str, shape: GameShape) -> Path:
        """The file of one bot and game size."""
        return self.directory / f"{name}-p{shape.players}d{shape.dice}f{shape.faces}.json"

    def table(
        self, name: str, shape: GameShape, sarsa: bool, profiling: bool, rng: np.random.Generator
    ) -> ThesisLearner:
        """The shared table of ``name`` for this game size: from memory, else the file, else fresh."""
        path = self.path(name, shape)
        with self._lock:
            shared = self._tables.get(path)
            if shared is None:
                shared = ThesisLearner(shape.total, shape.faces, sarsa, profiling, rng)
                if path.exists():
                    with contextlib.suppress(ValueError, KeyError, TypeError):  # corrupt: start afresh
                        shared.load_json(json.loads(path.read_text()))
                self._tables[path] = shared
            return shared

    def save(self, name: str, shape: GameShape, learner: ThesisLearner) -> None:
        """Write one table atomically."""
        path = self.path(name, shape)
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}-{threading.get_ident()}")
            tmp.write_text(json.dumps(learner.to_json()))
            tmp.replace(path)

    def reset(self, names: tuple[str, ...] = LEARNER_NAMES) -> list[Path]:
        """Forget the tables of ``names`` (files and in-memory copies). Returns the files deleted."""
        removed = []
        with self._lock:
            self._tables.clear()
            for name in names:
                for path in sorted(self.directory.glob(f"{name}-p*.json")):
                    path.unlink()
                    removed.append(path)
        return removed


class GameShape:
    """The parameters of one Liar's Dice match that the bots need."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.players = int(params.get("players", 2))
        self.dice = int(params.get("dice", 5))
        self.faces = int(params.get("faces", 6))
        self.wild = str(params.get("wild", "none"))
        self.spot_on = bool(params.get("spot_on", False))
        self.total = self.players * self.dice
        self.liar = self.total * self.faces
        self.wild_face = {"none": 0, "ones": 1, "highest": self.faces}.get(self.wild, 0)

    def decode(self, action: int) -> tuple[int, int]:
        q, f = divmod(action, self.faces)
        return q + 1, f + 1

    def encode(self, quantity: int, face: int) -> int:
        return (quantity - 1) * self.faces + face - 1

    def matches(self, dice: tuple[int, ...] | list[int], face: int) -> int:
        w = self.wild_face
        if w and face != w:
            return sum(1 for d in dice if d in (face, w))
        return sum(1 for d in dice if d == face)


class LearnerBot(Bot):
    """A thesis learner seated in an Arena match (the table is shared by the bot's matches in this process)."""

    games = GAMES

    def __init__(
        self,
        name: str,
        sarsa: bool,
        profiling: bool,
        seed: int,
        persist: bool = True,
        shared: ThesisLearner | None = None,
        tables: LearnerTables | None = None,
    ) -> None:
        """``persist``: load/save the table in ``tables`` (default: the default state's); ``shared``: use this
        table instead (experiments)."""
        self.shared = shared
        self.tables = tables
        self.name = name
        self.sarsa = sarsa
        self.profiling = profiling
        self.rng = np.random.default_rng(seed)
        self.persist = persist
        self.learner: ThesisLearner | None = None

    def on_match_start(self, match: MatchInfo) -> None:
        shape = GameShape(match.params)
        self.shape = shape
        self.seat = match.seat
        learner = ThesisLearner(shape.total, shape.faces, self.sarsa, self.profiling, self.rng)
        if self.shared is not None:
            learner.q_call, learner.q_liar, learner.profile = (
                self.shared.q_call,
                self.shared.q_liar,
                self.shared.profile,
            )
        elif self.persist:
            if self.tables is None:
                self.tables = LearnerTables.of(BotState.default())
            shared = self.tables.table(self.name, shape, self.sarsa, self.profiling, self.rng)
            learner.q_call, learner.q_liar, learner.profile = shared.q_call, shared.q_liar, shared.profile
        learner.new_game()
        self.learner = learner
        self.rounds_seen = 0
        self.round_bids: list[tuple[int, int, int]] = []  # opponents' bids this round: (q, f, dice on table)
        self.bids_seen = 0

    def _observe(self, obs: Any) -> None:
        learner = self.learner
        assert learner is not None
        shape = self.shape
        past = obs.past_rounds
        while self.rounds_seen < len(past):
            result = past[self.rounds_seen]
            self.rounds_seen += 1
            dice_on_table = sum(len(h.dice) for h in result.hands)
            if self.bids_seen == 0 and result.bid.seat != self.seat:  # the challenged bid was never seen at a turn
                self.round_bids.append((result.bid.quantity, result.bid.face, dice_on_table))
            if self.profiling:
                everything = [d for h in result.hands for d in h.dice]
                actual = {f: shape.matches(everything, f) for f in range(1, shape.faces + 1)}
                learner.profile.compute(self.round_bids, actual, shape.faces)
            self.round_bids = []
            self.bids_seen = 0
            lost = result.dice_lost
            if lost[self.seat]:
                learner.dice_lost(True)
            elif any(lost):
                learner.dice_lost(False)
        bids = obs.bids
        if len(bids) > self.bids_seen:
            dice_on_table = sum(obs.dice_counts)
            for bid in bids[self.bids_seen :]:
                if bid.seat != self.seat:
                    self.round_bids.append((bid.quantity, bid.face, dice_on_table))
            self.bids_seen = len(bids)

    def act(self, turn: Turn) -> int:
        learner = self.learner
        assert learner is not None
        obs = turn.observation
        self._observe(obs)
        shape = self.shape
        raises_actions = [a for a in turn.legal_actions if a < shape.liar]
        raises = [shape.decode(a) for a in raises_actions]
        bid = (obs.bids[-1].quantity, obs.bids[-1].face) if obs.bids else None
        index = learner.decide(bid, raises)
        return shape.liar if index == len(raises) else raises_actions[index]

    def on_match_end(self, result: MatchResult) -> None:
        if self.learner is None:
            return
        if result.observation is not None:
            self._observe(result.observation)
        if self.persist and self.shared is None and self.tables is not None:
            self.tables.save(self.name, self.shape, self.learner)


def binomial_at_least(n: int, p: float, k: int) -> float:
    """P(Binomial(n, p) >= k)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return float(sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1)))


def binomial_exactly(n: int, p: float, k: int) -> float:
    """P(Binomial(n, p) == k)."""
    if not 0 <= k <= n:
        return 0.0
    return float(math.comb(n, k) * p**k * (1 - p) ** (n - k))


class StatisticianBot(Bot):
    """Reasons from its own dice and the binomial law of the others' dice.

    A bid q x f is true with probability P(Binomial(K, p) >= q - mine(f)), where
    K is the number of dice it cannot see and p = 1/F (2/F for a non-wild face
    when a face is wild). It calls liar when the current bid is less likely than
    1/2 (spot on instead when that is enabled and likelier than the bid), else it
    makes the raise most likely to be true, the highest such bid on ties.
    """

    name = "statistician"
    games = GAMES

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def on_match_start(self, match: MatchInfo) -> None:
        self.shape = GameShape(match.params)

    def probability(self, quantity: int, face: int, mine: tuple[int, ...], unseen: int) -> float:
        shape = self.shape
        p = 2.0 / shape.faces if shape.wild_face and face != shape.wild_face else 1.0 / shape.faces
        return binomial_at_least(unseen, p, quantity - shape.matches(mine, face))

    def act(self, turn: Turn) -> int:
        shape = self.shape
        obs = turn.observation
        mine = tuple(obs.my_dice)
        unseen = sum(obs.dice_counts) - len(mine)
        legal = turn.legal_actions
        if obs.bids:
            bid = obs.bids[-1]
            p_true = self.probability(bid.quantity, bid.face, mine, unseen)
            if p_true < 0.5:
                if shape.spot_on and shape.liar + 1 in legal:
                    pw = 2.0 / shape.faces if shape.wild_face and bid.face != shape.wild_face else 1.0 / shape.faces
                    p_exact = binomial_exactly(unseen, pw, bid.quantity - shape.matches(mine, bid.face))
                    if p_exact > p_true and p_exact > 1.0 - p_true - p_exact:
                        return shape.liar + 1
                return shape.liar
        best, best_p = -1, -1.0
        for a in legal:
            if a >= shape.liar:
                continue
            q, f = shape.decode(a)
            p = self.probability(q, f, mine, unseen)
            if p >= best_p - 1e-12:
                best, best_p = a, p
        return best if best >= 0 else shape.liar


@hosted(
    "sarsa", GAMES, "Liar's Dice thesis: plain SARSA, roulette over Q, learns online (table persists)", stateful=True
)
def _sarsa(seed: int, state: BotState) -> Bot:
    return LearnerBot("sarsa", sarsa=True, profiling=False, seed=seed, tables=LearnerTables.of(state))


@hosted(
    "sarsa-profiling",
    GAMES,
    "Liar's Dice thesis: modified SARSA with the opponent lie profile (persists)",
    stateful=True,
)
def _sarsa_profiling(seed: int, state: BotState) -> Bot:
    return LearnerBot("sarsa-profiling", sarsa=True, profiling=True, seed=seed, tables=LearnerTables.of(state))


@hosted(
    "q-learning",
    GAMES,
    "Liar's Dice thesis: Q-learning, roulette over Q, learns online (table persists)",
    stateful=True,
)
def _q_learning(seed: int, state: BotState) -> Bot:
    return LearnerBot("q-learning", sarsa=False, profiling=False, seed=seed, tables=LearnerTables.of(state))


@hosted("statistician", GAMES, "Liar's Dice: calls unlikely bids, else the likeliest raise (binomial odds)")
def _statistician(seed: int) -> Bot:
    return StatisticianBot(seed)
