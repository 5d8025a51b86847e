"""The hosted ``cfr`` bot: the CFR+ equilibrium of the 2-player, 1-die Liar's Dice games.

For ``players=2 dice=1`` with six faces (any bidding rule and wild rule; with
one die each the first challenge ends the game whatever ``rounds`` says) it
plays the average strategy of :mod:`arena_bots.liars_dice.small_game`'s CFR+,
solved offline to exploitability <= 0.0005 by ``arena train liars-dice-cfr``
and shipped in ``data/`` (float16, renormalised on load). For ``players=2 dice=2
rounds=single`` it plays the abstract CFR+ policy of
:mod:`arena_bots.liars_dice.dice_game` (information set: seat, roll, current
bid), shipped as ``data/cfr-2dice-*.npz``. In the thesis's game (2 players, up
to 5 dice each, thesis bidding, no wilds, elimination) it plays the
dynamic-programming CFR of :mod:`arena_bots.liars_dice.thesis_cfr`: the host's
own ``arena train liars-dice-cfr --game thesis`` result in the bot-state
directory when there is one, else the shipped ``data/cfr-thesis.npz``
(probabilities quantised to 1/255, 0.9 MB); loaded once per host with a log
line. In every other game it plays like
:class:`~arena_bots.liars_dice.bots.StatisticianBot`.
"""

from __future__ import annotations

import functools
import logging
import threading
from pathlib import Path

import numpy as np

from arena_bots.liars_dice.bots import GAMES, GameShape, StatisticianBot
from arena_bots.liars_dice.dice_game import node_index
from arena_bots.liars_dice.small_game import make_game, normalise
from arena_bots.registry import BotState, hosted
from arena_client import Bot, MatchInfo, Turn

DATA_DIR = Path(__file__).resolve().parent / "data"
LOG = logging.getLogger(__name__)


SHIPPED_THESIS = DATA_DIR / "cfr-thesis.npz"
"""The thesis-game solution shipped in the package (``arena train liars-dice-cfr --game thesis``, quantised)."""

ThesisSolution = tuple[np.ndarray, dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]]


def thesis_path(directory: Path | None = None) -> Path:
    """Where ``arena train liars-dice-cfr --game thesis`` writes its solution: the bots' state directory."""
    return (directory if directory is not None else BotState.default().directory) / "cfr-thesis.npz"


class ThesisStrategy:
    """The thesis-game solution one host plays: its own training if there is one, else the shipped file.

    Loaded on first use with one log line saying which file; reloaded when that file changes (a training run
    finishing while the server runs). If neither file exists it says so once, and ``cfr`` plays the
    statistician's move in that game.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._key: tuple[Path, float] | None = None
        self._solution: ThesisSolution | None = None
        self._warned = False
        self._lock = threading.Lock()

    @classmethod
    def of(cls, state: BotState) -> ThesisStrategy:
        """The strategy object of a host's state (made on first use)."""
        return state.shared("liars_dice.cfr_thesis", lambda: cls(state.directory))

    def source(self) -> Path | None:
        """The file to play from: the state directory's training, else the shipped one, else None."""
        for path in (thesis_path(self.directory), SHIPPED_THESIS):
            if path.exists():
                return path
        return None

    def get(self) -> ThesisSolution | None:
        """V and the per-round policies, or None (logged once) when no solution exists."""
        from arena_bots.liars_dice import thesis_cfr

        with self._lock:
            path = self.source()
            if path is None:
                if not self._warned:
                    LOG.warning(
                        "cfr: no thesis-game strategy (%s or %s); it plays as the statistician there until "
                        "`arena train liars-dice-cfr --game thesis` writes one",
                        thesis_path(self.directory),
                        SHIPPED_THESIS,
                    )
                    self._warned = True
                return None
            key = (path, path.stat().st_mtime)
            if key != self._key:
                self._solution = thesis_cfr.load(path)
                self._key = key
                LOG.info("cfr: thesis-game strategy loaded from %s", path)
            return self._solution


def load_thesis(state: BotState | None = None) -> ThesisSolution | None:
    """The thesis-game solution a host with ``state`` (default: the default state) plays, or None."""
    return ThesisStrategy.of(state if state is not None else BotState.default()).get()


@functools.lru_cache(maxsize=8)
def _multisets(k: int) -> dict[tuple[int, ...], int]:
    return _multisets_f(6, k)


@functools.lru_cache(maxsize=16)
def _multisets_f(faces: int, k: int) -> dict[tuple[int, ...], int]:
    import itertools

    return {m: n for n, m in enumerate(itertools.combinations_with_replacement(range(1, faces + 1), k))}


def policy_path(bidding: str, wild: str, faces: int = 6) -> Path:
    """The shipped policy file of one 1-die game."""
    return DATA_DIR / f"cfr-1die-f{faces}-{bidding}-{wild}.npz"


def dice_policy_path(dice: int, bidding: str, wild: str, faces: int = 6) -> Path:
    """The shipped abstract-CFR policy file of one 2-player single-round game with ``dice`` each."""
    return DATA_DIR / f"cfr-{dice}dice-f{faces}-{bidding}-{wild}.npz"


@functools.lru_cache(maxsize=8)
def load_dice_policy(dice: int, bidding: str, wild: str, faces: int = 6) -> np.ndarray | None:
    """The abstract CFR+ policy [seat, roll, node, action] of a single-round game, or None when not shipped."""
    from arena_bots.liars_dice import dice_game

    path = dice_policy_path(dice, bidding, wild, faces)
    if not path.exists():
        return None
    with np.load(path) as data:
        weights = data["policy"].astype(np.float64)
        memory = int(data["memory"]) if "memory" in data.files else 1
    return dice_game.normalise(dice_game.make_dice_game(dice, faces, bidding, wild, memory), weights)


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

    def __init__(self, seed: int = 0, state: BotState | None = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.fallback = StatisticianBot(seed)
        self.state = state if state is not None else BotState.default()

    def warm_up(self) -> None:
        """Load the ladder's (default) game's strategy (once; any thread): the server calls it off its event loop."""
        ThesisStrategy.of(self.state).get()

    def on_match_start(self, match: MatchInfo) -> None:
        shape = GameShape(match.params)
        self.shape = shape
        self.policy: np.ndarray | None = None
        self.thesis: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] | None = None
        self.markov: np.ndarray | None = None
        bidding = str(match.params.get("bidding", "thesis"))
        rounds = str(match.params.get("rounds", "elimination"))
        if shape.players == 2 and shape.dice == 1 and not shape.spot_on:
            self.policy = load_policy(bidding, shape.wild, shape.faces)
        elif shape.players == 2 and shape.dice == 2 and not shape.spot_on and rounds == "single":
            self.markov = load_dice_policy(2, bidding, shape.wild, shape.faces)
        elif (
            shape.players == 2
            and shape.dice <= 5
            and shape.faces == 6
            and bidding == "thesis"
            and shape.wild == "none"
            and not shape.spot_on
            and str(match.params.get("rounds", "elimination")) == "elimination"
        ):
            solved = ThesisStrategy.of(self.state).get()
            if solved is not None:
                self.thesis = solved[1]
        self.fallback.on_match_start(match)

    def _thesis_probs(self, turn: Turn) -> np.ndarray | None:
        assert self.thesis is not None
        obs = turn.observation
        me = turn.seat
        opener = obs.bids[0].seat if obs.bids else me
        mine, theirs = obs.dice_counts[me], obs.dice_counts[1 - me]
        key = (mine, theirs) if opener == me else (theirs, mine)
        if key not in self.thesis:
            return None
        pol = self.thesis[key][0 if opener == me else 1]
        roll = _multisets(len(obs.my_dice))[tuple(sorted(obs.my_dice))]
        node = 0 if not obs.bids else 1 + self.shape.encode(obs.bids[-1].quantity, obs.bids[-1].face)
        row = pol[roll, node].astype(np.float64)
        nbids = (mine + theirs) * 6
        probs = np.zeros(self.shape.liar + 1)
        probs[:nbids] = row[:nbids]
        probs[self.shape.liar] = row[nbids]
        return probs

    def act(self, turn: Turn) -> int:
        obs = turn.observation
        nbids = self.shape.liar
        if self.policy is not None:
            mask = 0
            for bid in obs.bids:
                mask |= 1 << self.shape.encode(bid.quantity, bid.face)
            probs = self.policy[mask, obs.my_dice[0] - 1]
        elif self.markov is not None:
            roll = _multisets_f(self.shape.faces, len(obs.my_dice))[tuple(sorted(obs.my_dice))]
            bids = [self.shape.encode(b.quantity, b.face) for b in obs.bids[-2:]]
            last = bids[-1] if bids else -1
            prev = bids[-2] if len(bids) == 2 else -1
            memory = 1 if self.markov.shape[2] == nbids + 1 else 2
            node = node_index(nbids, memory, prev, last)
            role = 0 if not obs.bids or obs.bids[0].seat == turn.seat else 1  # 0: the first bidder
            probs = self.markov[role, roll, node]
        elif self.thesis is not None:
            found = self._thesis_probs(turn)
            if found is None:
                return self.fallback.act(turn)
            probs = found
        else:
            return self.fallback.act(turn)
        legal = list(turn.legal_actions)
        weights = np.array([probs[nbids if a == nbids else a] for a in legal])
        total = weights.sum()
        if total <= 0.0:
            return int(legal[self.rng.integers(len(legal))])
        return int(legal[int(self.rng.choice(len(legal), p=weights / total))])


@hosted(
    "cfr",
    GAMES,
    "Liar's Dice: CFR+ equilibrium (1 die), abstract CFR+ (2 dice), DP-CFR in the thesis game; else statistician",
    stateful=True,
)
def _cfr(seed: int, state: BotState) -> Bot:
    return CfrBot(seed, state)
