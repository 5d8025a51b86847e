"""Cross-check against OpenSpiel's engines, move for move (skipped when open_spiel is not installed).

Random playouts drive both engines with the same moves; at every step the
player to move, the legal actions and terminal status must agree, and the
returns must agree at the end. Mappings: our tic_tac_toe rows x cols is
OpenSpiel's ``mnk(m=cols, n=rows, k)`` (plain ``tic_tac_toe`` for 3x3);
dots and boxes edges go through :func:`openspiel_edge` (and OpenSpiel's
``utility_margin=true`` returns are our box margins); single-round
``liars_dice`` with wild=highest and standard bidding is OpenSpiel's
``liars_dice`` action for action.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from arena_games import CHANCE, TERMINAL, Game, State, load_game
from arena_games.dots_and_boxes import openspiel_edge

pyspiel = pytest.importorskip(
    "pyspiel", reason="open_spiel is not installed (pip install open_spiel) - OpenSpiel cross-check skipped"
)


def _lockstep(
    ours: Game,
    theirs: Any,
    seeds: range,
    to_ours: Callable[[int], int] = lambda a: a,
    compare_returns: Callable[[tuple[float, ...], list[float]], bool] = lambda a, b: list(a) == list(b),
) -> int:
    """Play random games in both engines at once; return how many moves were compared."""
    compared = 0
    to_theirs = {to_ours(a): a for a in range(theirs.num_distinct_actions())}
    for seed in seeds:
        rng = random.Random(seed)
        state: State = ours.new_initial_state()
        other = theirs.new_initial_state()
        while True:
            player = state.current_player()
            if player == TERMINAL:
                assert other.is_terminal()
                break
            assert not other.is_terminal()
            if player == CHANCE:
                assert other.is_chance_node()
                assert sorted(a for a, _ in state.chance_outcomes()) == sorted(a for a, _ in other.chance_outcomes())
                action = rng.choice([a for a, _ in state.chance_outcomes()])
                state.apply_action(action)
                other.apply_action(action)
                continue
            assert other.current_player() == player, (seed, state.history)
            legal = list(state.legal_actions())
            assert legal == sorted(to_ours(a) for a in other.legal_actions()), (seed, state.history)
            action = rng.choice(legal)
            state.apply_action(action)
            other.apply_action(to_theirs[action])
            compared += 1
        assert compare_returns(state.returns(), other.returns()), (seed, state.returns(), other.returns())
    return compared


def test_tic_tac_toe_3x3() -> None:
    assert _lockstep(load_game("tic_tac_toe"), pyspiel.load_game("tic_tac_toe"), range(300)) > 1000


@pytest.mark.parametrize(("rows", "cols", "k"), [(3, 3, 3), (4, 5, 3), (5, 4, 4), (6, 6, 4), (2, 7, 3), (15, 15, 5)])
def test_mnk(rows: int, cols: int, k: int) -> None:
    theirs = pyspiel.load_game("mnk", {"m": cols, "n": rows, "k": k})
    seeds = range(100) if rows * cols < 100 else range(10)
    assert _lockstep(load_game("tic_tac_toe", rows=rows, cols=cols, k=k), theirs, seeds) > 0


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (2, 2), (3, 3), (2, 4), (4, 3), (5, 5)])
def test_dots_and_boxes(rows: int, cols: int) -> None:
    theirs = pyspiel.load_game("dots_and_boxes", {"num_rows": rows, "num_cols": cols, "utility_margin": True})

    seeds = range(60) if rows * cols < 16 else range(15)
    assert (
        _lockstep(
            load_game("dots_and_boxes", rows=rows, cols=cols),
            theirs,
            seeds,
            lambda a: openspiel_edge(rows, cols, a),
        )
        > 0
    )


@pytest.mark.parametrize(("dice", "faces"), [(1, 6), (2, 6), (1, 4), (3, 3), (5, 6)])
def test_single_round_liars_dice(dice: int, faces: int) -> None:
    ours = load_game(
        "liars_dice", players=2, dice=dice, faces=faces, wild="highest", bidding="standard", rounds="single"
    )
    theirs = pyspiel.load_game("liars_dice", {"numdice": dice, "dice_sides": faces})
    assert ours.num_distinct_actions == theirs.num_distinct_actions()
    assert _lockstep(ours, theirs, range(300)) > 300
