"""RPS and RPSLS rules: beats tables, parameters, scoring."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from arena_games import SIMULTANEOUS, TERMINAL, IllegalActionError, ParameterError, load_game
from arena_games.rps import RpsObservation, beats, counters, payoff_table, rps_observation

ROCK, PAPER, SCISSORS, LIZARD, SPOCK = range(5)

# The ten decisive RPSLS pairings, written out from the rules text (winner, loser).
RPSLS_WINS = [
    (SCISSORS, PAPER),
    (PAPER, ROCK),
    (ROCK, LIZARD),
    (LIZARD, SPOCK),
    (SPOCK, SCISSORS),
    (SCISSORS, LIZARD),
    (LIZARD, PAPER),
    (PAPER, SPOCK),
    (SPOCK, ROCK),
    (ROCK, SCISSORS),
]


@pytest.mark.parametrize(("winner", "loser"), RPSLS_WINS)
def test_rpsls_pairings(winner: int, loser: int) -> None:
    assert beats(5, winner, loser)
    assert not beats(5, loser, winner)


def test_rpsls_table_is_exactly_the_ten_pairings() -> None:
    decisive = {(a, b) for a, b in itertools.permutations(range(5), 2) if beats(5, a, b)}
    assert decisive == set(RPSLS_WINS)


def test_rpsls_counters_match_thesis_get_counter_to() -> None:
    assert counters(5, ROCK) == (PAPER, SPOCK)
    assert counters(5, PAPER) == (SCISSORS, LIZARD)
    assert counters(5, SCISSORS) == (ROCK, SPOCK)
    assert counters(5, LIZARD) == (ROCK, SCISSORS)
    assert counters(5, SPOCK) == (PAPER, LIZARD)


def test_classic_rps() -> None:
    assert beats(3, PAPER, ROCK) and beats(3, SCISSORS, PAPER) and beats(3, ROCK, SCISSORS)
    assert not beats(3, ROCK, PAPER)
    assert counters(3, ROCK) == (PAPER,)


@pytest.mark.parametrize("signs", [3, 5, 7, 9, 11])
def test_every_sign_balanced(signs: int) -> None:
    table = payoff_table(signs)
    for a in range(signs):
        assert table[a][a] == 0
        assert sum(1 for b in range(signs) if table[a][b] == 1) == (signs - 1) // 2
        for b in range(signs):
            assert table[a][b] == -table[b][a]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"signs": 4}, "must be odd"),
        ({"signs": 1}, "out of range"),
        ({"rounds": 0}, "out of range"),
        ({"rounds": "many"}, "not an integer"),
        ({"colour": "red"}, "unknown parameter colour"),
        ({"draw_band": -1}, "out of range"),
    ],
)
def test_parameter_validation(params: dict[str, object], message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        load_game("rps", **params)


def test_unknown_game_lists_games() -> None:
    with pytest.raises(ParameterError, match=r"games are: .*rps"):
        load_game("chess")


def test_scoring_is_score_difference() -> None:
    game = load_game("rps", rounds=4)
    state = game.new_initial_state()
    for pair in [(PAPER, ROCK), (ROCK, PAPER), (SCISSORS, PAPER), (ROCK, ROCK)]:
        assert state.current_player() == SIMULTANEOUS
        assert state.returns() == (0.0, 0.0)
        state.apply_actions(pair)
    assert state.current_player() == TERMINAL
    assert state.returns() == (1.0, -1.0)
    obs = state.observation(1)
    assert obs.wins == (2, 1) and obs.last_round == (ROCK, ROCK) and obs.round == 4


def test_draw_band_classifies_small_margins_as_draws() -> None:
    game = load_game("rps", draw_band=20)
    assert game.outcome_scores((20.0, -20.0)) == (0.5, 0.5)
    assert game.outcome_scores((21.0, -21.0)) == (1.0, 0.0)
    assert load_game("rps").outcome_scores((1.0, -1.0)) == (1.0, 0.0)


def test_illegal_action_rejected_with_reason() -> None:
    state = load_game("rps").new_initial_state()
    with pytest.raises(IllegalActionError, match=r"legal: 0\.\.2"):
        state.apply_actions([0, 3])
    assert state.history == []


def test_history_replay_and_clone() -> None:
    game = load_game("rps", signs=5, rounds=3)
    state = game.new_initial_state()
    state.apply_actions([4, 3])
    state.apply_actions([0, 1])
    copy = state.clone()
    assert copy == state and copy is not state
    assert game.state_from_history(state.history) == state
    copy.apply_actions([2, 2])
    assert copy != state


@pytest.mark.parametrize(
    ("text", "action"), [("r", 0), ("Rock", 0), ("paper", 1), ("s", 2), ("lizard", 3), ("spock", 4), ("4", 4)]
)
def test_human_notation_rpsls(text: str, action: int) -> None:
    game = load_game("rps", signs=5)
    assert game.string_to_action(game.new_initial_state(), text) == action


def test_human_notation_rejects_nonsense() -> None:
    game = load_game("rps")
    with pytest.raises(IllegalActionError, match="type one of: rock"):
        game.string_to_action(game.new_initial_state(), "banana")


def test_the_fast_observation_is_the_dataclass_observation() -> None:
    """``rps_observation`` (used on every move) builds exactly what ``RpsObservation(...)`` does, still frozen."""
    for args in ((3, 1000, 0, (0, 0), ()), (5, 20, 7, (3, 2), (4, 1)), (7, 9, 9, (1, 2, 3), (0, 6, 5))):
        fast = rps_observation(*args)
        plain = RpsObservation(*args)
        assert type(fast) is RpsObservation
        assert fast == plain and hash(fast) == hash(plain) and repr(fast) == repr(plain)
        assert dataclasses.astuple(fast) == args
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.round = 0  # type: ignore[misc]
    state = load_game("rps", rounds=3).new_initial_state()
    state.apply_actions([0, 1])
    assert state.observation(0) == RpsObservation(3, 3, 1, (0, 1), (0, 1))
