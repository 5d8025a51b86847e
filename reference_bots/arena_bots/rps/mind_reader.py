"""Shannon's mind reader for rock-paper-scissors, with wildcard window elements.

After ``specs/shannon-mind-reader.md`` (a 2012 Habr post). The reader keeps
counters ``A[x_1..x_n][x_0]`` over the last n elements of the alternating
history (its own move, the opponent's move, ...; the window ends with the
opponent's previous move), where any window element may be the wildcard
"empty". After every round it increments the 2**n counters that match the
window with the opponent's actual move; to move it sums, for each possible
opponent move, the 2**n matching counters, predicts the largest and plays what
beats it. Hosted as ``mind-reader-N`` for N in :data:`HOSTED_WINDOWS`.

Generalised to any odd number of signs s: ``s * (s + 1) ** n`` counters, the
empty element is value s. Encoding is Arena's (0 rock, 1 paper, 2 scissors),
not the post's (0 rock, 1 scissors, 2 paper); it is a relabelling.

Choices where the post is silent (spec §7):

1. Start: until n elements of history exist the reader plays uniformly at
   random and records nothing (no padding).
2. Counters are incremented by 1; no decay.
3. "No data" (all sums 0, only before the first recorded round) gives a
   uniformly random move; ties between equal non-zero sums are broken
   uniformly at random.
4. The reply to a predicted move is the sign that beats it; with more than
   3 signs (two or more counters) one of them uniformly at random, as the
   RPSLS thesis's GetCounterTo does.

Profile distance (spec §5), :func:`profile_distance`:

* j counts x_0 as a non-empty value, so a record with k non-empty window
  elements is at level j = k + 1 (levels 1..n+1) and its random-play
  expectation is S / s**j: that makes the post's S / 3**j exact and avoids a
  chi-square with 0 degrees of freedom.
* d_j = sum over the level's counters of (A1 - A2)**2 / (S / s**j), computed
  on rates when the two profiles have different S: with r = A / S,
  d_j = S_eff * sum (r1 - r2)**2 * s**j and S_eff = 2 S1 S2 / (S1 + S2)
  (the harmonic mean), which is exactly the post's formula when S1 = S2 and is
  symmetric.
* p = sum_j F_j(d_j), F_j the chi-square CDF with j degrees of freedom
  (``dof="levels"``, the post's literal rule, which saturates near n + 1 for
  any two real profiles, as the spec's §5.4 shows). ``dof="cells"`` is our
  documented alternative: F with as many degrees of freedom as the level has
  counters, and d_j halved (the two-sample variance doubles the expectation),
  which keeps p informative.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

import arena_bots.rps.mind_reader_kernels as K
from arena_bots.numba_helpers import seed_state
from arena_bots.registry import hosted
from arena_client import Bot, MatchInfo, Turn
from arena_games.rps import counters

HOSTED_WINDOWS = (2, 3, 4, 5, 6, 8)
MAX_WINDOW = 12


class MindReader:
    """The reader's state for one match: counters, window and random stream."""

    def __init__(self, n: int = 5, signs: int = 3, seed: int = 0) -> None:
        if not 1 <= n <= MAX_WINDOW:
            raise ValueError(f"mind reader window n={n} must be in 1..{MAX_WINDOW}")
        if signs < 3 or signs % 2 == 0:
            raise ValueError(f"signs={signs} must be odd and at least 3")
        self.n = n
        self.signs = signs
        self.A = np.zeros(signs * (signs + 1) ** n, dtype=np.int64)
        self.W = np.zeros(n, dtype=np.int64)
        self.M = np.array([n, signs, 0, 0], dtype=np.int64)
        self.BASE = np.zeros(1 << n, dtype=np.int64)
        self.R = np.array([seed_state(seed, 1)], dtype=np.uint64)
        self._rng = np.random.default_rng([seed, 0x5A])
        self._counters = [counters(signs, m) for m in range(signs)]

    @property
    def rounds_recorded(self) -> int:
        """S: rounds whose opponent move was recorded."""
        return int(self.M[K.M_ROUNDS])

    def observe(self, own: int, opp: int) -> None:
        """Record a finished round (the reader's move, the opponent's move)."""
        K.observe(self.A, self.W, self.M, self.BASE, own, opp)

    def predict(self) -> int:
        """The predicted opponent move, or -1 without data."""
        return int(K.predict(self.A, self.W, self.M, self.BASE, self.R))

    def scores(self) -> list[int]:
        """The sums of the matching counters per opponent move (empty before a full window)."""
        if self.M[K.M_SEEN] < self.n:
            return []
        K.window_bases(self.W, self.M, self.BASE)
        out = np.zeros(self.signs, dtype=np.int64)
        K.scores(self.A, self.M, self.BASE, out)
        return [int(v) for v in out]

    def counter(self, record: Sequence[int | None], move: int) -> int:
        """The counter ``A[x_1..x_n][x_0=move]``; None in ``record`` is the empty element."""
        if len(record) != self.n:
            raise ValueError(f"a record has {self.n} window elements, got {len(record)}")
        idx = 0
        p = 1
        for x in record:
            idx += (self.signs if x is None else x) * p
            p *= self.signs + 1
        return int(self.A[move + self.signs * idx])

    def choose(self) -> int:
        """The reader's move: beat the prediction (random without data)."""
        pred = self.predict()
        if pred < 0:
            return int(self._rng.integers(self.signs))
        options = self._counters[pred]
        return options[0] if len(options) == 1 else options[int(self._rng.integers(len(options)))]


class MindReaderBot(Bot):
    """Shannon's mind reader as an Arena bot (window of n alternating moves)."""

    games = ("rps",)

    def __init__(self, n: int = 5, seed: int = 0) -> None:
        self.n = n
        self.seed = seed
        self.name = f"mind-reader-{n}"
        self.matches = 0
        self.reader: MindReader | None = None

    def on_match_start(self, match: MatchInfo) -> None:
        self.reader = None

    def warm_up(self) -> None:
        """Load the kernels on a scratch reader (numba's cache: some 0.4 s the first time in a process)."""
        reader = MindReader(self.n, 3, 0)
        for own, opp in ((0, 1), (1, 2), (2, 0)):
            reader.observe(own, opp)
            reader.choose()

    def act(self, turn: Turn) -> int:
        obs = turn.observation
        if self.reader is None or obs.round == 0:
            self.matches += 1
            self.reader = MindReader(self.n, int(obs.signs), self.seed * 1_000_003 + self.matches)
        if obs.last_round:
            self.reader.observe(int(obs.last_round[turn.seat]), int(obs.last_round[1 - turn.seat]))
        return self.reader.choose()


for _n in HOSTED_WINDOWS:

    def _factory(seed: int, n: int = _n) -> Bot:
        return MindReaderBot(n, seed)

    hosted(f"mind-reader-{_n}", ("rps",), f"Shannon's mind reader over the last {_n} alternating moves")(_factory)


# --------------------------------------------------------------------------- profiles


@dataclass
class MindReaderProfile:
    """A player's counter table: what a mind reader facing them would have learnt.

    Attributes:
        n: Window length (elements of the alternating history).
        signs: Number of signs.
        counts: The counters ``A`` (``signs * (signs + 1) ** n``).
        rounds: S, the number of recorded rounds.
    """

    n: int = 5
    signs: int = 3
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rounds: int = 0

    def __post_init__(self) -> None:
        size = self.signs * (self.signs + 1) ** self.n
        if self.counts.size == 0:
            self.counts = np.zeros(size, dtype=np.int64)
        elif self.counts.size != size:
            raise ValueError(f"a profile with n={self.n}, signs={self.signs} has {size} counters")

    def add_match(self, player_moves: Sequence[int], other_moves: Sequence[int]) -> None:
        """Add one match: the profiled player's moves and their opponent's, round by round."""
        if len(player_moves) != len(other_moves):
            raise ValueError("both move sequences must have one move per round")
        M = np.array([self.n, self.signs, 0, self.rounds], dtype=np.int64)
        K.build_profile(
            self.counts,
            np.zeros(self.n, dtype=np.int64),
            M,
            np.zeros(1 << self.n, dtype=np.int64),
            np.asarray(player_moves, dtype=np.int64),
            np.asarray(other_moves, dtype=np.int64),
        )
        self.rounds = int(M[K.M_ROUNDS])

    def levels(self) -> np.ndarray:
        """For every counter, its level j = 1 + the number of non-empty window elements."""
        idx = np.arange(self.counts.size) // self.signs
        level = np.ones(self.counts.size, dtype=np.int64)
        for _ in range(self.n):
            level += (idx % (self.signs + 1)) != self.signs
            idx //= self.signs + 1
        return level


def player_profile(
    player_moves: Sequence[int], other_moves: Sequence[int], *, n: int = 5, signs: int = 3
) -> MindReaderProfile:
    """The profile of the player who played ``player_moves`` against ``other_moves`` (one match)."""
    profile = MindReaderProfile(n, signs)
    profile.add_match(player_moves, other_moves)
    return profile


def chi2_cdf(x: float, dof: float) -> float:
    """The chi-square CDF, P(dof/2, x/2) (regularised lower incomplete gamma)."""
    if x <= 0.0:
        return 0.0
    a = dof / 2.0
    z = x / 2.0
    log_front = a * math.log(z) - z - math.lgamma(a)
    if z < a + 1.0:
        term = 1.0 / a
        total = term
        k = a
        for _ in range(10_000):
            k += 1.0
            term *= z / k
            total += term
            if term < total * 1e-15:
                break
        return min(1.0, total * math.exp(log_front))
    # continued fraction for Q (modified Lentz)
    tiny = 1e-300
    b = z + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return max(0.0, 1.0 - math.exp(log_front) * h)


def level_statistics(a: MindReaderProfile, b: MindReaderProfile) -> dict[int, float]:
    """d_j per level j (1..n+1) between two profiles, with the symmetric denominator."""
    if (a.n, a.signs) != (b.n, b.signs):
        raise ValueError(f"profiles differ in shape: n={a.n}/{b.n}, signs={a.signs}/{b.signs}")
    if a.rounds == 0 or b.rounds == 0:
        raise ValueError("a profile with no recorded rounds has no distance")
    s_eff = 2.0 * a.rounds * b.rounds / (a.rounds + b.rounds)
    diff2 = (a.counts / a.rounds - b.counts / b.rounds) ** 2
    level = a.levels()
    out: dict[int, float] = {}
    for j in range(1, a.n + 2):
        out[j] = float(s_eff * diff2[level == j].sum() * float(a.signs) ** j)
    return out


def profile_distance(a: MindReaderProfile, b: MindReaderProfile, *, dof: str = "levels") -> float:
    """The post's distance p = sum_j F_j(d_j) between two players' profiles.

    Args:
        a: One player's profile.
        b: The other's (same n and signs).
        dof: ``"levels"`` (the post: j degrees of freedom at level j) or
            ``"cells"`` (ours: the level's number of counters, with d_j / 2).

    Returns:
        p in [0, n + 1]; larger means more different.
    """
    stats = level_statistics(a, b)
    if dof == "levels":
        return sum(chi2_cdf(d, j) for j, d in stats.items())
    if dof == "cells":
        level = a.levels()
        return sum(chi2_cdf(d / 2.0, float((level == j).sum())) for j, d in stats.items())
    raise ValueError(f"dof must be 'levels' or 'cells', not {dof!r}")


def profile_distance_from_moves(
    a_moves: Sequence[int],
    a_opponent_moves: Sequence[int],
    b_moves: Sequence[int],
    b_opponent_moves: Sequence[int],
    *,
    n: int = 5,
    signs: int = 3,
    dof: str = "levels",
) -> float:
    """Distance between player A (``a_moves`` against ``a_opponent_moves``) and player B."""
    return profile_distance(
        player_profile(a_moves, a_opponent_moves, n=n, signs=signs),
        player_profile(b_moves, b_opponent_moves, n=n, signs=signs),
        dof=dof,
    )
