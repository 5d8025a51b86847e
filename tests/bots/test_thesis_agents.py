"""The RPSLS thesis's agents: certain outcomes against the helpers, and the rules that matter."""

from __future__ import annotations

import numpy as np
import pytest

import arena_bots.rps.thesis_agents as T
import arena_bots.rps.thesis_kernels as K
from arena_bots import hosted_bots
from arena_bots.experiments.duel import duel
from arena_games.rps import counters

LEARNERS = [f"markov-{r}" for r in range(1, 7)] + [f"mupn-{r}" for r in range(1, 7)] + ["supp", "mksu", "mkia"]


def hosted(name: str, seed: int):
    return hosted_bots()[name].factory(seed)


def kernel_success(spec: T.AgentSpec, opp: T.AgentSpec, rounds: int, seed: int = 1) -> float:
    a = T.build_agent(spec, 5, seed)
    b = T.build_agent(opp, 5, seed + 1000)
    wins, losses, _ = K.play_agents(*a, *b, rounds)
    return 100.0 * wins / (wins + losses)


@pytest.mark.parametrize("signs", [3, 5])
@pytest.mark.parametrize("r", range(1, 7))
def test_markov_beats_always_rock_every_round_once_learnt(signs: int, r: int) -> None:
    mv = hosted(f"markov-{r}", 3)
    first = duel(mv, hosted("rock", 0), signs=signs, rounds=r + 2)
    rest = duel(mv, hosted("rock", 0), signs=signs, rounds=500)  # same bot, new match: state reset
    assert first.rounds == r + 2
    # after r+1 random rounds (and one recorded transition) every move beats rock
    assert rest.losses + rest.draws <= r + 1
    assert rest.wins >= 500 - (r + 1)


@pytest.mark.parametrize("signs", [3, 5])
@pytest.mark.parametrize("name", [*LEARNERS, "mind-reader-3", "mind-reader-5", "sicilian"])
def test_every_learner_beats_always_loop(signs: int, name: str) -> None:
    res = duel(hosted(name, 5), hosted("always-loop", 6), signs=signs, rounds=3000)
    assert res.success > 75.0, res


def test_markov_order1_matrix_against_always_loop_is_figure_3_1() -> None:
    """Figure 3.1: MV order 1 after 100 games against VO (rows r,p,s,L,S; counts of the next move)."""
    a = T.build_agent(T.mv(1), 5, 11)
    b = T.build_agent(T.vo(), 5, 12)
    K.play_agents(*a, *b, 100)
    H, _, IS, _, _ = a
    off = int(H[0, K.C_IOFF])
    expected = [
        [0, 19, 0, 0, 0],
        [0, 0, 20, 0, 0],
        [0, 0, 0, 20, 0],
        [0, 0, 0, 0, 20],
        [20, 0, 0, 0, 0],
    ]
    assert IS[off : off + 25].reshape(5, 5).tolist() == expected


@pytest.mark.parametrize("signs", [3, 5])
def test_counter_selection_is_a_uniform_choice_among_the_counters(signs: int) -> None:
    """MUPN-1 against always rock predicts rock and plays GetCounterTo(rock): each counter half the time."""
    a = T.build_agent(T.mupn(1), signs, 21)
    moves = K.moves_vs_string(*a, np.zeros(4002, dtype=np.int64))[2:]
    allowed = counters(signs, 0)
    assert set(moves.tolist()) == set(allowed)
    if len(allowed) == 2:
        share = float(np.mean(moves == allowed[0]))
        assert abs(share - 0.5) < 0.03  # 4000 fair coin flips: sd 0.008


def test_mupn_keeps_only_the_most_recent_successor() -> None:
    a = T.build_agent(T.mupn(1), 5, 3)
    H, _, IS, _, _ = a
    # opponent: r, p, r, L, r -> after 'r' came p, then L: the table keeps L
    K.moves_vs_string(*a, np.array([0, 1, 0, 3, 0], dtype=np.int64))
    off = int(H[0, K.C_IOFF])
    assert IS[off + 0] == 3
    assert IS[off + 1] == 0  # after p came r
    # and it now plays a counter of lizard (rock or scissors)
    assert K.agent_propose(*a) in counters(5, 3)


@pytest.mark.parametrize(("epsilon", "expected"), [(0.9, 95.92), (0.95, 98.00), (1.0, 100.0)])
def test_supp_epsilon_is_the_probability_of_exploiting(epsilon: float, expected: float) -> None:
    """With exploration e = 1 - epsilon, success against VK is (1 - 0.6e) / (1 - 0.2e) (spec §7.15).

    A standard epsilon (explore with probability epsilon) would give about 41-44% here.
    """
    got = kernel_success(T.supp(1, epsilon), T.vk(), 100_000)
    assert abs(got - expected) < 0.4


def test_supp_explores_every_round_at_epsilon_zero() -> None:
    got = kernel_success(T.supp(1, 0.0), T.vk(), 50_000)
    assert abs(got - 50.0) < 1.5  # uniformly random against rock: 2 wins, 2 losses of 5


def test_mupn_scores_six_sevenths_against_always_counter_self() -> None:
    """Appendix A: the random counter choice gives 6 wins per 1 loss (85.7%) against VPS."""
    assert abs(kernel_success(T.mupn(2), T.vps(), 100_000) - 600 / 7) < 0.6


def test_markov_scores_about_six_sevenths_against_always_counter_self() -> None:
    """MV locks each key onto one of VPS's two counters (75% or 100% per key), 6/7 on average over keys."""
    runs = [kernel_success(T.mv(3), T.vps(), 50_000, seed) for seed in range(1, 7)]
    assert all(74.0 < v < 100.0 for v in runs)
    assert abs(float(np.mean(runs)) - 600 / 7) < 2.5


def test_meta_classifiers_learn_to_follow_a_winning_sub_agent() -> None:
    assert kernel_success(T.mkia(1, 0.95), T.vk(), 20_000) > 98.0
    assert kernel_success(T.mksu(1, 0.95), T.vo(), 20_000) > 93.0


def test_meta_sub_agents_all_learn_even_when_not_chosen() -> None:
    a = T.build_agent(T.mksu(1, 0.9), 5, 4)
    b = T.build_agent(T.vk(), 5, 5)
    K.play_agents(*a, *b, 500)
    H, _, IS, _, _ = a
    mv_unit = 2  # children: MUPN, MV, SUPP, ...
    assert H[mv_unit, K.C_KIND] == K.KIND_MARKOV
    assert H[mv_unit, K.C_GAMES] == 500
    off = int(H[mv_unit, K.C_IOFF])
    assert IS[off : off + 5].tolist() == [500 - 3, 0, 0, 0, 0]  # key rrr -> r, from the 4th move on


def test_oracle_wins_nearly_always_with_eight_sub_agents() -> None:
    a = T.build_agent(T.oracle(), 5, 9)
    seq = np.random.default_rng(3).integers(0, 5, 20_000)
    wins, losses, _ = K.play_vs_string(*a, seq)
    assert 100.0 * wins / (wins + losses) > 90.0


def test_preprocessing_predicts_scissors_on_a_flat_row_and_rock_against_rock() -> None:
    assert kernel_success(T.mv(1, preprocess=True), T.vk(), 5_000) > 99.5
    # p = 10% rock strings: the boosted scissors prediction makes it play rock or Spock (spec: about 46%)
    seq = np.random.default_rng(5).choice(5, size=200_000, p=[0.1, 0.225, 0.225, 0.225, 0.225])
    a = T.build_agent(T.mv(1, preprocess=True), 5, 6)
    wins, losses, _ = K.play_vs_string(*a, seq)
    assert abs(100.0 * wins / (wins + losses) - 46.3) < 1.5


def test_agents_are_seeded_and_reproducible() -> None:
    def run(seed: int) -> list[int]:
        a = T.build_agent(T.mksu(2, 0.9), 5, seed)
        return K.moves_vs_string(*a, np.arange(300, dtype=np.int64) % 5).tolist()

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_build_agent_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="odd"):
        T.build_agent(T.mv(1), 4, 0)
    with pytest.raises(ValueError, match="leaf"):
        T.build_agent(T.AgentSpec("meta", children=(T.mksu(),)), 5, 0)
    with pytest.raises(ValueError, match="oracle"):
        T.ThesisAgentBot(T.oracle())
