"""The Liar's Dice thesis learners against hand-computed values from the spec's tables (sections 2.1 and 2.3)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from arena_bots.liars_dice.learners import HIGH, LOW, MID, LieProfile, ThesisLearner, bucket


class FixedDraw:
    """A random source whose roulette draw is a fixed fraction of the total (0 = first slot, 1 = last)."""

    def __init__(self, fraction: float) -> None:
        self.fraction = fraction

    def uniform(self, low: float, high: float) -> float:
        return low + (high - low) * self.fraction

    def integers(self, n: int) -> int:
        return 0


def thesis_raises(bid: tuple[int, int] | None, dice: int = 10) -> list[tuple[int, int]]:
    """Legal raises under thesis bidding, ascending action number (as the engine lists them)."""
    out = [(q, f) for q in range(1, dice + 1) for f in range(1, 7)]
    if bid is None:
        return out
    return [(q, f) for q, f in out if q >= bid[0] and f >= bid[1] and (q, f) != bid]


def learner(sarsa: bool = True, profiling: bool = False, fraction: float = 0.0) -> ThesisLearner:
    return ThesisLearner(10, 6, sarsa, profiling, FixedDraw(fraction))  # type: ignore[arg-type]


def test_initial_q_values() -> None:
    agent = learner()
    assert agent.q_call[0, 0] == 0.5 and agent.q_call[9, 5] == 0.05
    assert agent.q_liar[9, 0] == 0.5 and agent.q_liar[0, 3] == 0.05


def test_opening_probabilities_match_spec_table() -> None:
    p = learner().probabilities(None, thesis_raises(None))
    assert p[-1] == 0.0  # no Liar at an opening
    by_quantity = p[:-1].reshape(10, 6).sum(axis=1)
    for q, expected in ((1, 0.3414), (2, 0.1707), (3, 0.1138), (10, 0.0341)):
        assert by_quantity[q - 1] == pytest.approx(expected, abs=1e-4)
    h10 = sum(1 / q for q in range(1, 11))
    assert by_quantity[0] == pytest.approx(3 / (3 * h10))


@pytest.mark.parametrize(
    ("bid", "raises", "p_liar"),
    [
        ((1, 1), 59, 0.0060),
        ((3, 2), 39, 0.018),
        ((5, 3), 23, 0.0498),
        ((7, 4), 11, 0.162),
        ((8, 6), 2, 0.612),
        ((9, 6), 1, 0.833),
        ((10, 5), 1, 0.909),
    ],
)
def test_liar_probability_matches_spec_table(bid: tuple[int, int], raises: int, p_liar: float) -> None:
    legal = thesis_raises(bid)
    assert len(legal) == raises
    p = learner().probabilities(bid, legal)
    assert p[-1] == pytest.approx(p_liar, abs=0.0006)


def test_roulette_picks_first_slot_at_zero_and_liar_at_total() -> None:
    legal = thesis_raises((9, 1))
    assert learner(fraction=0.0).decide((9, 1), legal) == 0
    assert learner(fraction=1.0).decide((9, 1), legal) == len(legal)


def test_sarsa_and_q_learning_updates_by_hand() -> None:
    # Both open 1x1 (Q 0.5), the opponent raises to 9x1, both then pick the first raise 9x2 (Q 1/18).
    sarsa, qlearn = learner(sarsa=True), learner(sarsa=False)
    for agent in (sarsa, qlearn):
        assert agent.decide(None, thesis_raises(None)) == 0
        agent.decide((9, 1), thesis_raises((9, 1)))
    # SARSA: 0.5 + 0.5 * (0.5 + 0.5 * 1/18 - 0.5); Q-learning bootstraps from max(Q) = Q(Liar, 9x1) = 1/4.
    assert sarsa.q_call[0, 0] == pytest.approx(0.5 + 0.5 * (0.5 * (1 / 18)))
    assert qlearn.q_call[0, 0] == pytest.approx(0.5 + 0.5 * (0.5 * 0.25))
    assert sarsa.q_call[0, 0] == pytest.approx(0.513889, abs=1e-6) and qlearn.q_call[0, 0] == 0.5625


def test_reward_one_after_opponent_loses_a_die_and_zero_after_own_loss() -> None:
    agent = learner(fraction=1.0)
    agent.decide(None, thesis_raises(None))  # fraction 1 at an opening: the last raise, 10x6
    agent.decide((9, 1), thesis_raises((9, 1)))  # calls liar on 9x1 (Q 1/4)
    agent.dice_lost(me=False)
    agent.rng = FixedDraw(0.0)  # type: ignore[assignment]
    agent.decide(None, thesis_raises(None, dice=9))  # opens 1x1 (Q 0.5) in the next round
    assert agent.q_liar[8, 0] == pytest.approx(0.25 + 0.5 * (1.0 + 0.5 * 0.5 - 0.25))
    agent.dice_lost(me=True)
    agent.decide(None, thesis_raises(None, dice=8))
    assert agent.q_call[0, 0] == pytest.approx(0.5 + 0.5 * (0.0 + 0.5 * 0.5 - 0.5))


def test_no_update_on_the_first_move_of_a_game() -> None:
    agent = learner()
    agent.decide(None, thesis_raises(None))
    agent.new_game()
    before = agent.q_call.copy()
    agent.decide(None, thesis_raises(None))
    assert np.array_equal(before, agent.q_call)


@pytest.mark.parametrize(
    ("dice", "high_above", "mid_above"),
    [(2, 2, 1), (3, 2, 1), (4, 3, 2), (5, 4, 2), (6, 4, 2), (7, 5, 3), (8, 6, 3), (9, 6, 3), (10, 7, 4)],
)
def test_bucket_thresholds_match_spec_table(dice: int, high_above: int, mid_above: int) -> None:
    assert bucket(high_above + 1, 1, dice) == HIGH and bucket(high_above, 1, dice) != HIGH
    assert bucket(mid_above + 1, 1, dice) == MID and bucket(mid_above, 1, dice) == LOW
    assert bucket(1, 5, dice) == HIGH and bucket(1, 3, dice) == MID and bucket(1, 2, dice) == LOW
    assert high_above == math.ceil(2 * dice / 3)


def test_profile_rates_survive_the_101_round_reset() -> None:
    profile = LieProfile()
    for _ in range(100):
        profile.compute([(8, 1, 10)], {1: 3}, 6)  # a high bid that was false
    assert profile.rate[HIGH] == 1.0 and profile.count[HIGH] == 100
    profile.compute([(1, 1, 10)], {1: 3}, 6)  # round 101: a true low bid, then the counters reset
    assert profile.count == [0, 0, 0] and profile.rounds == 0
    assert profile.rate == [0.0, 0.0, 1.0]  # rates kept
    profile.compute([(9, 6, 10)], {6: 9}, 6)  # a true high bid: the rate is recomputed from this round only
    assert profile.rate[HIGH] == 0.0


def test_profiling_bonus_uses_global_max() -> None:
    agent = learner(profiling=True)
    agent.profile.rate[HIGH] = 0.5
    p = agent.probabilities((8, 6), thesis_raises((8, 6)))
    liar = 1 / 6 + 2 * 0.5 * 0.5  # Q(Liar, 8x6) + 2 * L(high) * max of the whole table (0.5)
    assert p[-1] == pytest.approx(liar / (liar + 1 / 18 + 1 / 20))
    assert learner(profiling=False).probabilities((8, 6), thesis_raises((8, 6)))[-1] == pytest.approx(0.612, abs=6e-4)


def test_table_round_trips_through_json() -> None:
    agent = learner()
    agent.q_call[2, 3] = 0.123
    agent.profile.rate[MID] = 0.25
    other = learner()
    other.load_json(json.loads(json.dumps(agent.to_json())))
    assert other.q_call[2, 3] == 0.123 and other.profile.rate[MID] == 0.25
    with pytest.raises(ValueError, match="shape"):
        ThesisLearner(15, 6, True, False, FixedDraw(0)).load_json(agent.to_json())  # type: ignore[arg-type]
