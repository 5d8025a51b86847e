"""Shannon's mind reader: counters after a scripted game, the vote identity, the profile distance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from arena_bots import hosted_bots
from arena_bots.experiments.duel import duel
from arena_bots.rps.mind_reader import (
    MindReader,
    MindReaderProfile,
    chi2_cdf,
    player_profile,
    profile_distance,
    profile_distance_from_moves,
)

E = None  # the empty element


def test_counters_after_a_scripted_game_match_hand_computed_values() -> None:
    reader = MindReader(n=2, signs=3, seed=1)
    for own, opp in [(0, 1), (2, 1), (1, 0)]:
        reader.observe(own, opp)
    # round 1 had no full window; round 2 had window (0, 1) -> 1; round 3 had (2, 1) -> 0
    expected = {
        ((0, 1), 1): 1, ((0, E), 1): 1, ((E, 1), 1): 1, ((E, E), 1): 1,
        ((2, 1), 0): 1, ((2, E), 0): 1, ((E, 1), 0): 1, ((E, E), 0): 1,
    }  # fmt: skip
    for x1 in (0, 1, 2, E):
        for x2 in (0, 1, 2, E):
            for move in (0, 1, 2):
                assert reader.counter((x1, x2), move) == expected.get(((x1, x2), move), 0), (x1, x2, move)
    assert reader.rounds_recorded == 2
    # window is now (1, 0): only the all-empty record matches -> 1, 1, 0
    assert reader.scores() == [1, 1, 0]
    reader.observe(0, 2)  # window (1, 0) -> 2
    assert reader.counter((1, 0), 2) == 1 and reader.counter((E, E), 2) == 1
    # window (0, 2): (0, E) -> 1 once; (E, E) -> 0, 1, 2 once each
    assert reader.scores() == [1, 2, 1]
    assert reader.predict() == 1
    assert reader.choose() == 2  # scissors beats the predicted paper


def test_window_alternates_and_ends_with_the_opponents_previous_move() -> None:
    reader = MindReader(n=3, signs=3, seed=1)
    reader.observe(0, 1)
    reader.observe(2, 0)  # window for the next record: (h1, b2, h2) = (1, 2, 0)
    reader.observe(1, 2)
    assert reader.counter((1, 2, 0), 2) == 1
    assert reader.counter((E, E, 0), 2) == 1
    assert reader.counter((1, E, E), 2) == 1


@pytest.mark.parametrize(("n", "signs"), [(3, 3), (4, 5), (5, 3)])
def test_scores_equal_the_similarity_weighted_vote(n: int, signs: int) -> None:
    """score[x] = sum over recorded rounds with move x of 2 ** (window positions equal to now)."""
    rng = np.random.default_rng(n * 10 + signs)
    reader = MindReader(n=n, signs=signs, seed=2)
    flat: list[int] = []
    records: list[tuple[tuple[int, ...], int]] = []
    for _ in range(120):
        own, opp = int(rng.integers(signs)), int(rng.integers(signs // 2 + 1))  # a biased opponent
        if len(flat) >= n:
            records.append((tuple(flat[-n:]), opp))
        reader.observe(own, opp)
        flat += [own, opp]
        if len(flat) < n:
            assert reader.scores() == []
            continue
        window = tuple(flat[-n:])
        vote = [0] * signs
        for w, h in records:
            vote[h] += 2 ** sum(a == b for a, b in zip(w, window, strict=True))
        assert reader.scores() == vote


def test_mind_reader_crushes_a_periodic_opponent_and_plays_any_signs() -> None:
    res = duel(
        hosted_bots()["mind-reader-5"].factory(1),
        hosted_bots()["always-loop"].factory(2),
        signs=7,
        rounds=600,
    )
    assert res.success > 90.0


def test_chi2_cdf_matches_closed_forms() -> None:
    for x in (0.1, 1.0, 3.0, 10.0, 40.0):
        assert chi2_cdf(x, 2) == pytest.approx(1 - math.exp(-x / 2), abs=1e-12)
        assert chi2_cdf(x, 1) == pytest.approx(math.erf(math.sqrt(x / 2)), abs=1e-12)
        assert chi2_cdf(x, 4) == pytest.approx(1 - math.exp(-x / 2) * (1 + x / 2), abs=1e-12)
    assert chi2_cdf(0.0, 3) == 0.0


def _moves(kind: str, seed: int, rounds: int = 3000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    other = rng.integers(0, 3, rounds)
    if kind == "random":
        player = rng.integers(0, 3, rounds)
    else:  # "repeat": copies the opponent's previous move most of the time
        player = np.where(rng.random(rounds) < 0.8, np.roll(other, 1), rng.integers(0, 3, rounds))
    return player, other


def test_profile_distance_is_zero_for_itself_and_symmetric() -> None:
    a = player_profile(*_moves("random", 1), n=3)
    b = player_profile(*_moves("repeat", 2), n=3)
    assert profile_distance(a, a) == 0.0
    assert profile_distance(a, b) == pytest.approx(profile_distance(b, a))
    assert 0.0 <= profile_distance(a, b) <= 4.0


def test_profile_distance_with_cell_dof_separates_different_players() -> None:
    rand1 = player_profile(*_moves("random", 1), n=3)
    rand2 = player_profile(*_moves("random", 3), n=3)
    rep = player_profile(*_moves("repeat", 4), n=3)
    same = profile_distance(rand1, rand2, dof="cells")
    different = profile_distance(rand1, rep, dof="cells")
    assert different > same + 1.0
    # the post's literal j degrees of freedom saturate (spec §5.4): both near n + 1
    assert profile_distance(rand1, rand2) > 3.0


def test_profiles_accumulate_matches_and_check_shapes() -> None:
    p = MindReaderProfile(n=2, signs=3)
    p.add_match([0, 1, 2], [1, 1, 1])
    p.add_match([0, 1, 2], [1, 1, 1])
    assert p.rounds == 4  # 2 recorded rounds per 3-round match (the first has no window)
    assert profile_distance_from_moves([0, 1, 2, 0], [1, 1, 1, 1], [0, 1, 2, 0], [1, 1, 1, 1], n=2) == 0.0
    with pytest.raises(ValueError, match="shape"):
        profile_distance(p, MindReaderProfile(n=3, signs=3))
