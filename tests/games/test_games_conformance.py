"""The conformance suite: every registered game, a spread of parameters, seeded random playouts.

For every state of every playout: legal actions are sorted, unique, in range,
non-empty until the end and agree with ``is_legal``; illegal actions are
refused without changing the state; ``clone()`` is equal and independent;
replaying ``history`` reproduces the state and its observations; every
observation survives the proto round trip; notation round-trips. At the end:
returns sum to zero, lie within the declared bounds, and the game length is
within ``max_game_length``.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any

import pytest

from arena_client.convert import observation_from_proto, observation_to_proto
from arena_games import (
    CHANCE,
    SIMULTANEOUS,
    TERMINAL,
    Game,
    IllegalActionError,
    State,
    registered_games,
)
from tests.games.games_support import GAME_CASES, case_id, load, random_step

SEEDS = range(4)


def test_every_registered_game_is_covered() -> None:
    assert set(registered_games()) == {name for name, _ in GAME_CASES}


def _seats(game: Game) -> list[int | None]:
    return [*range(game.num_players), None]


def _check_legal_actions(state: State, seat: int) -> None:
    game = state.game
    legal = list(state.legal_actions(seat))
    assert legal, f"seat {seat} must have a legal action in a non-terminal state"
    assert legal == sorted(set(legal)), "legal actions must be sorted and unique"
    assert legal[0] >= 0 and legal[-1] < game.num_distinct_actions
    legal_set = set(legal)
    for action in range(-1, game.num_distinct_actions + 1):
        assert state.is_legal(seat, action) == (action in legal_set), (seat, action)
    for other in range(game.num_players):
        if other != seat and state.current_player() != SIMULTANEOUS:
            assert list(state.legal_actions(other)) == []
            assert not any(state.is_legal(other, a) for a in legal)


def _check_illegal_is_refused(state: State, rng: random.Random) -> None:
    player = state.current_player()
    if player < 0:
        return
    game = state.game
    illegal = [a for a in range(game.num_distinct_actions) if not state.is_legal(player, a)]
    for action in [*rng.sample(illegal, min(3, len(illegal))), game.num_distinct_actions, -1]:
        before = state.clone()
        with pytest.raises(IllegalActionError) as info:
            state.apply_action(action)
        assert str(info.value), "an illegal action needs a reason"
        assert state == before and state.observation(player) == before.observation(player)


def _check_notation(state: State) -> None:
    player = state.current_player()
    game = state.game
    if player == SIMULTANEOUS:
        for action in state.legal_actions(0):
            assert game.string_to_action(state, game.action_to_string(0, action)) == action
        return
    if player < 0:
        return
    for action in state.legal_actions():
        label = game.action_to_string(player, action)
        assert label and not label.startswith("invalid")
        assert game.string_to_action(state, label) == action, label
        assert game.string_to_action(state, f"  {label.upper()} ") == action, label
    with pytest.raises(IllegalActionError):
        game.string_to_action(state, "no such move ???")


def _check_observations(state: State) -> None:
    for seat in _seats(state.game):
        obs = state.observation(seat)
        assert dataclasses.is_dataclass(obs)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obs, dataclasses.fields(obs)[0].name, None)
        assert observation_from_proto(observation_to_proto(obs)) == obs


@pytest.mark.parametrize("case", GAME_CASES, ids=case_id)
def test_random_playouts_conform(case: tuple[str, dict[str, Any]]) -> None:
    game = load(case)
    big = game.max_game_length > 200
    for seed in SEEDS if not big else range(2):
        rng = random.Random(seed)
        state = game.new_initial_state()
        steps = 0
        while True:
            player = state.current_player()
            assert player in (CHANCE, SIMULTANEOUS, TERMINAL) or 0 <= player < game.num_players
            if player != TERMINAL:
                assert state.returns() == tuple(0.0 for _ in range(game.num_players))
            _check_observations(state)
            # clone: equal, same observations, independent
            copy = state.clone()
            assert copy == state and copy.history == state.history
            assert all(copy.observation(s) == state.observation(s) for s in _seats(game))
            # replaying the history reproduces the state (every few steps on long games: it is quadratic)
            if not big or steps % 15 == 0 or player == TERMINAL:
                replay = game.state_from_history(state.history)
                assert replay == state and replay.current_player() == player
                assert all(replay.observation(s) == state.observation(s) for s in _seats(game))
                assert list(replay.legal_actions()) == list(state.legal_actions())
            if player == TERMINAL:
                break
            if player == CHANCE:
                outcomes = state.chance_outcomes()
                assert outcomes and math.isclose(sum(p for _, p in outcomes), 1.0)
                assert all(p > 0 for _, p in outcomes)
                assert list(state.legal_actions()) == []
            elif player == SIMULTANEOUS:
                for seat in range(game.num_players):
                    _check_legal_actions(state, seat)
                if steps == 0:
                    _check_notation(state)
            else:
                _check_legal_actions(state, player)
                _check_illegal_is_refused(state, rng)
                if not big or steps % 15 == 0:
                    _check_notation(state)
            legal_before = [list(state.legal_actions(s)) for s in range(game.num_players)]
            random_step(copy, rng)
            if copy.history[: len(state.history)] != state.history:
                raise AssertionError("applying to a clone changed the history prefix")
            assert [list(state.legal_actions(s)) for s in range(game.num_players)] == legal_before
            assert len(copy.history) > len(state.history)
            state = copy
            steps += 1
        returns = state.returns()
        assert len(returns) == game.num_players
        assert math.isclose(sum(returns), 0.0, abs_tol=1e-9)
        assert all(game.min_utility <= r <= game.max_utility for r in returns)
        assert len(state.history) <= game.max_game_length
        assert list(state.legal_actions()) == []
        assert all(list(state.legal_actions(s)) == [] for s in range(game.num_players))
        with pytest.raises(IllegalActionError):
            state.apply_action(0)
        scores = game.outcome_scores(returns)
        assert math.isclose(sum(scores), 1.0) and all(0.0 <= x <= 1.0 for x in scores)


@pytest.mark.parametrize("case", GAME_CASES, ids=case_id)
def test_clone_is_independent(case: tuple[str, dict[str, Any]]) -> None:
    game = load(case)
    rng = random.Random(99)
    state = game.new_initial_state()
    for _ in range(3):
        if state.is_terminal():
            break
        random_step(state, rng)

    def snapshot() -> list[Any]:
        views = [state.observation(s) for s in _seats(game)]
        legal = [list(state.legal_actions(s)) for s in range(game.num_players)]
        return [views, legal, list(state.history), state.current_player(), state.returns()]

    before = snapshot()
    copy = state.clone()
    while not copy.is_terminal():
        random_step(copy, rng)
    assert snapshot() == before
    assert game.state_from_history(state.history).legal_actions() == state.legal_actions()
    assert copy != state


@pytest.mark.parametrize("case", GAME_CASES, ids=case_id)
def test_bad_parameters_name_the_allowed_values(case: tuple[str, dict[str, Any]]) -> None:
    from arena_games import ParameterError, load_game

    name, _ = case
    with pytest.raises(ParameterError, match="parameters are"):
        load_game(name, no_such_parameter=1)
    for spec in registered_games()[name].param_specs:
        if spec.type is int and spec.max is not None:
            with pytest.raises(ParameterError, match=rf"{spec.name}={spec.max + 1} is out of range; choose"):
                load_game(name, **{spec.name: spec.max + 1})
        if spec.choices:
            with pytest.raises(ParameterError, match="is not one of"):
                load_game(name, **{spec.name: "bogus"})
