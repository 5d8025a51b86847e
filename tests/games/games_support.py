"""Helpers shared by the game tests: parameter spreads and seeded random playouts."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from arena_games import CHANCE, SIMULTANEOUS, Game, State, load_game

# Every registered game with a spread of parameters. The conformance suite
# fails if a registered game is missing here.
GAME_CASES: list[tuple[str, dict[str, Any]]] = [
    ("rps", {"rounds": 30}),
    ("rps", {"signs": 5, "rounds": 20}),
    ("rps", {"signs": 7, "rounds": 10, "draw_band": 2}),
    ("tic_tac_toe", {}),
    ("tic_tac_toe", {"rows": 4, "cols": 4, "k": 4}),
    ("tic_tac_toe", {"rows": 3, "cols": 5, "k": 3}),
    ("tic_tac_toe", {"rows": 1, "cols": 5, "k": 2}),
    ("tic_tac_toe", {"rows": 7, "cols": 2, "k": 2}),
    ("tic_tac_toe", {"rows": 15, "cols": 15, "k": 5}),
    ("dots_and_boxes", {}),
    ("dots_and_boxes", {"rows": 1, "cols": 1}),
    ("dots_and_boxes", {"rows": 2, "cols": 2}),
    ("dots_and_boxes", {"rows": 2, "cols": 4}),
    ("dots_and_boxes", {"rows": 5, "cols": 5}),
    ("liars_dice", {}),
    ("liars_dice", {"players": 3, "dice": 3, "bidding": "standard"}),
    ("liars_dice", {"players": 6, "dice": 2, "wild": "ones", "spot_on": True}),
    ("liars_dice", {"players": 2, "dice": 1, "wild": "highest", "bidding": "standard", "rounds": "single"}),
    (
        "liars_dice",
        {"players": 4, "dice": 2, "faces": 4, "wild": "highest", "rounds": "single", "spot_on": True},
    ),
]


def case_id(case: tuple[str, dict[str, Any]]) -> str:
    name, params = case
    return name + ("(" + ",".join(f"{k}={v}" for k, v in params.items()) + ")" if params else "")


def sample_chance(state: State, rng: random.Random) -> int:
    """Sample a chance outcome with its probability."""
    x = rng.random()
    acc = 0.0
    outcomes = state.chance_outcomes()
    for action, prob in outcomes:
        acc += prob
        if x < acc:
            return action
    return outcomes[-1][0]


def random_step(state: State, rng: random.Random) -> None:
    """Apply one uniformly random legal move (or a sampled chance outcome, or a joint move)."""
    player = state.current_player()
    if player == CHANCE:
        state.apply_action(sample_chance(state, rng))
    elif player == SIMULTANEOUS:
        n = state.game.num_players
        state.apply_actions([rng.choice(list(state.legal_actions(seat))) for seat in range(n)])
    else:
        state.apply_action(rng.choice(list(state.legal_actions())))


def random_playout(game: Game, seed: int) -> State:
    """Play a whole game with uniformly random moves from ``random.Random(seed)``."""
    rng = random.Random(seed)
    state = game.new_initial_state()
    while not state.is_terminal():
        random_step(state, rng)
    return state


def states_along(game: Game, seed: int) -> Iterator[State]:
    """Every state of one seeded random playout, the initial and terminal ones included (clones)."""
    rng = random.Random(seed)
    state = game.new_initial_state()
    yield state.clone()
    while not state.is_terminal():
        random_step(state, rng)
        yield state.clone()


def load(case: tuple[str, dict[str, Any]]) -> Game:
    name, params = case
    return load_game(name, **params)
