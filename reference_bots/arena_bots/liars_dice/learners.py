"""The Liar's Dice thesis's learners: SARSA, modified SARSA, Q-learning.

Lohn (2024), ``specs/liars-dice-thesis.md`` section 2.

All three are one class, :class:`ThesisLearner`, as in the thesis's C# ``AISARSA``:

* The table holds ``Q(Call, q x f)`` (``Call`` = *make* the bid q x f) and
  ``Q(Liar, q x f)`` (challenge the bid q x f) for q = 1..M, f = 1..F, with
  M = players * dice. Initial values: ``Q(Call, q x .) = 1/(2q)`` and
  ``Q(Liar, q x .) = 1/(2(M-q+1))``. The agent's own dice are never used.
* Roulette selection over the legal raises (ascending action number) then Liar
  (always the last slot, weight 0 at an opening): weights ``|Q|``, r uniform on
  [0, total], the first slot whose running sum is >= r.
* The update of the previous action happens at the agent's next decision:
  ``Q(prev) += alpha * (reward + gamma * target - snapshot(prev))`` with alpha =
  gamma = 0.5, reward 1 if an opponent lost a die since then, 0 if the agent
  lost one, 0.5 if nobody did; the SARSA target is the raw Q of the action just
  chosen, the Q-learning target the largest raw Q over the legal actions. No
  update at the end of a game (the thesis's TD chain is reset per game).
* Modified SARSA (``profiling=True``) adds ``2 * L(bucket) * max(0, max of the
  whole table)`` to the Liar weight only, where L is the opponents' lie rate in
  the bucket of the current bid (the code's quirks: global max, ``ceil``
  thresholds with strict ``>``, counters zeroed after more than 100 rounds while
  the rates are kept).

Choices for what the thesis leaves open (also in docs/bots.md, "Liar's Dice bots"):

1. Spot on is never chosen (the table has no such action); wilds count for the
   lie profile as the game counts them. Faces other than 6: high bucket when
   ``f > F-2``, mid when ``f > F-4`` (the code's 4 and 2 for six faces).
2. With 3+ players every opponent's bids go into one shared profile.
3. The raise order of ``listOfAvailableChoices`` (it only breaks ties at exact
   thresholds) is ascending action number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ALPHA = 0.5
GAMMA = 0.5
REWARD_WIN = 1.0
REWARD_SURVIVE = 0.5
REWARD_LOSE = 0.0
PROFILE_RESET_ROUNDS = 100

LOW, MID, HIGH = 0, 1, 2
BUCKET_NAMES = ("low", "mid", "high")


def bucket(quantity: int, face: int, dice: int, faces: int = 6) -> int:
    """The lie-profile bucket of bid ``quantity x face`` with ``dice`` dice on the table (the code's ``ceil`` rule).

    Args:
        quantity: The bid's quantity.
        face: The bid's face.
        dice: N, the dice on the table (at decision time: the largest quantity among the legal raises).
        faces: Faces per die (the thresholds 4 and 2 of the code are ``faces-2`` and ``faces-4``).

    Returns:
        :data:`LOW`, :data:`MID` or :data:`HIGH`.
    """
    if quantity > math.ceil(2 * dice / 3) or face > faces - 2:
        return HIGH
    if quantity > math.ceil(dice / 3) or face > faces - 4:
        return MID
    return LOW


@dataclass
class LieProfile:
    """The thesis's ``EnemyProfiling``: cumulative counters per bucket, rates kept across the 100-round reset."""

    count: list[int] = field(default_factory=lambda: [0, 0, 0])
    lies: list[int] = field(default_factory=lambda: [0, 0, 0])
    rate: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    rounds: int = 0

    def compute(self, bids: list[tuple[int, int, int]], actual: dict[int, int], faces: int) -> None:
        """Score one finished round.

        Args:
            bids: The opponents' bids of the round as (quantity, face, dice on the table).
            actual: The revealed count per face.
            faces: Faces per die.
        """
        for quantity, face, dice in bids:
            b = bucket(quantity, face, dice, faces)
            self.count[b] += 1
            if actual.get(face, 0) < quantity:
                self.lies[b] += 1
        for b in range(3):
            if self.count[b] != 0:
                self.rate[b] = self.lies[b] / self.count[b]
        self.rounds += 1
        if self.rounds > PROFILE_RESET_ROUNDS:
            self.count = [0, 0, 0]
            self.lies = [0, 0, 0]
            self.rounds = 0


class ThesisLearner:
    """One SARSA / modified-SARSA / Q-learning agent (its table and profile outlive games; its TD chain does not).

    Args:
        max_quantity: M, players * dice at setup.
        faces: Faces per die.
        sarsa: SARSA target (True) or Q-learning target (False).
        profiling: Add the lie-profile bonus to the Liar weight (modified SARSA).
        rng: Random source for the roulette.
    """

    def __init__(self, max_quantity: int, faces: int, sarsa: bool, profiling: bool, rng: np.random.Generator) -> None:
        self.max_quantity = max_quantity
        self.faces = faces
        self.sarsa = sarsa
        self.profiling = profiling
        self.rng = rng
        q = np.arange(1, max_quantity + 1, dtype=np.float64)[:, None]
        ones = np.ones((1, faces))
        self.q_call = (1.0 / (2.0 * q)) * ones
        self.q_liar = (1.0 / (2.0 * (max_quantity - q + 1.0))) * ones
        self.profile = LieProfile()
        self.last: tuple[bool, int, int, float] | None = None  # (is_liar, q, f, snapshot)
        self.reward = REWARD_SURVIVE

    # -- the game-facing interface ------------------------------------------------------------------

    def new_game(self) -> None:
        """Start a game: the TD chain restarts (``lastAction = null``)."""
        self.last = None
        self.reward = REWARD_SURVIVE

    def weights(self, bid: tuple[int, int] | None, raises: list[tuple[int, int]]) -> np.ndarray:
        """Roulette weights: ``|Q(Call, b)|`` for each raise, then the (bonus-included) Liar weight."""
        w = np.empty(len(raises) + 1)
        qc = self.q_call
        for i, (q, f) in enumerate(raises):
            w[i] = abs(qc[q - 1, f - 1])
        if bid is None:
            w[-1] = 0.0
        else:
            liar = self.q_liar[bid[0] - 1, bid[1] - 1]
            if self.profiling:
                dice = max((q for q, _ in raises), default=0)
                top = max(0.0, float(self.q_call.max()), float(self.q_liar.max()))
                liar += 2.0 * self.profile.rate[bucket(bid[0], bid[1], dice, self.faces)] * top
            w[-1] = abs(liar)
        return w

    def probabilities(self, bid: tuple[int, int] | None, raises: list[tuple[int, int]]) -> np.ndarray:
        """The roulette's action probabilities (raises in order, then Liar)."""
        w = self.weights(bid, raises)
        total = w.sum()
        if total <= 0.0:
            return (
                np.full(len(w), 1.0 / len(w))
                if bid is not None
                else np.append(np.full(len(raises), 1.0 / len(raises)), 0.0)
            )
        return np.asarray(w / float(total), dtype=np.float64)

    def decide(self, bid: tuple[int, int] | None, raises: list[tuple[int, int]]) -> int:
        """Choose an action, then update the previous one.

        Returns:
            An index into ``raises``, or ``len(raises)`` for Liar.
        """
        w = self.weights(bid, raises)
        thresholds = np.cumsum(w)
        total = float(thresholds[-1])
        r = float(self.rng.uniform(0.0, total)) if total > 0.0 else 0.0
        index = int(np.searchsorted(thresholds, r, side="left"))
        if total <= 0.0 or index >= len(w):  # all-zero weights: uniform over the legal actions
            index = int(self.rng.integers(len(raises) + (0 if bid is None else 1)))
        is_liar = index == len(raises)
        if is_liar:
            assert bid is not None
            q, f = bid
            snapshot = float(self.q_liar[q - 1, f - 1])
        else:
            q, f = raises[index]
            snapshot = float(self.q_call[q - 1, f - 1])
        if self.sarsa:
            target = snapshot
        else:
            target = max((float(self.q_call[a - 1, b - 1]) for a, b in raises), default=-math.inf)
            if bid is not None:
                target = max(target, float(self.q_liar[bid[0] - 1, bid[1] - 1]))
        self.update(target)
        self.last = (is_liar, q, f, snapshot)
        self.reward = REWARD_SURVIVE
        return index

    def update(self, target: float) -> None:
        """``Q(prev) += alpha * (reward + gamma * target - snapshot(prev))``; nothing on a game's first move."""
        if self.last is None:
            return
        is_liar, q, f, snapshot = self.last
        table = self.q_liar if is_liar else self.q_call
        table[q - 1, f - 1] += ALPHA * (self.reward + GAMMA * target - snapshot)

    def dice_lost(self, me: bool) -> None:
        """A die was lost since the agent's last action: by the agent (reward 0) or by an opponent (reward 1)."""
        if self.last is None:
            return
        if me:
            self.reward = REWARD_LOSE
        elif self.reward != REWARD_LOSE:
            self.reward = REWARD_WIN

    # -- persistence --------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The table and profile as JSON-able parallel arrays (like the thesis's ``AIData``)."""
        p = self.profile
        return {
            "max_quantity": self.max_quantity,
            "faces": self.faces,
            "q_call": self.q_call.tolist(),
            "q_liar": self.q_liar.tolist(),
            "profile": {"count": p.count, "lies": p.lies, "rate": p.rate, "rounds": p.rounds},
        }

    def load_json(self, data: dict[str, Any]) -> None:
        """Replace the table and profile with saved ones (shape-checked)."""
        q_call = np.asarray(data["q_call"], dtype=np.float64)
        q_liar = np.asarray(data["q_liar"], dtype=np.float64)
        if q_call.shape != self.q_call.shape or q_liar.shape != self.q_liar.shape:
            raise ValueError(f"saved table has shape {q_call.shape}, expected {self.q_call.shape}")
        self.q_call, self.q_liar = q_call, q_liar
        p = data["profile"]
        self.profile = LieProfile(list(p["count"]), list(p["lies"]), [float(x) for x in p["rate"]], int(p["rounds"]))
