"""Exact best response, exploitability and CFR+ on the 2-player 1-die Liar's Dice games."""

from __future__ import annotations

import time

import numpy as np
import pytest

from arena_bots.liars_dice.cfr_bot import load_policy
from arena_bots.liars_dice.small_game import (
    Solver,
    best_response_values,
    exploitability,
    game_value,
    make_game,
    policy_of,
)

OPENSPIEL_GAME = {"numdice": 1, "players": 2}  # OpenSpiel's liars_dice: standard bidding, highest face wild


def open_then_always_call(mask: int, die: int, legal: np.ndarray) -> np.ndarray:
    """Seat 0 opens 1x1 whatever its die; every later decision calls liar."""
    p = np.zeros(len(legal))
    p[0 if mask == 0 else len(legal) - 1] = 1.0
    return p


def test_exploitability_of_a_known_strategy_by_hand() -> None:
    # No wilds. 1x1 holds with probability 11/36, so seat 0 gets 11/36 - 25/36 = -14/36.
    # Best response as seat 0 (seat 1 always calls): bid 1x(own die), always true: +1.
    # As seat 1 (seat 0 opens 1x1 and then calls): with a 1, no call wins and every raise holds only if seat 0
    # shows the right face (1/6): 1/6 - 5/6; with another face d, raise to 1xd, which holds: +1.
    game = make_game(6, "standard", "none")
    policy = policy_of(game, open_then_always_call)
    assert game_value(game, policy) == pytest.approx(-14 / 36)
    br0, br1 = best_response_values(game, policy)
    assert br0 == pytest.approx(1.0)
    assert br1 == pytest.approx((1 / 6) * (-4 / 6) + (5 / 6) * 1.0)
    assert exploitability(game, policy) == pytest.approx((1.0 + 26 / 36) / 2)


def test_shipped_equilibrium_is_within_its_target() -> None:
    game = make_game(6, "standard", "highest")
    policy = load_policy("standard", "highest")
    assert policy is not None
    assert exploitability(game, policy) <= 0.001
    assert game_value(game, policy) == pytest.approx(-0.0276, abs=0.001)
    for bidding in ("standard", "thesis"):
        for wild in ("none", "ones", "highest"):
            shipped = load_policy(bidding, wild)
            assert shipped is not None and exploitability(make_game(6, bidding, wild), shipped) <= 0.001


@pytest.mark.slow
def test_cfr_solves_the_1_die_game_fast() -> None:
    game = make_game()
    start = time.perf_counter()
    expl = Solver(game).solve(0.001)
    elapsed = time.perf_counter() - start
    assert expl <= 0.001
    assert elapsed < 20.0, f"took {elapsed:.1f} s"


@pytest.mark.slow
def test_exploitability_and_value_against_openspiel() -> None:
    pyspiel = pytest.importorskip("pyspiel")
    from open_spiel.python import policy as osp  # type: ignore[import-untyped]

    game = make_game()
    solver = Solver(game)
    solver.solve(0.001)
    ours = solver.average()
    spiel = pyspiel.load_game("liars_dice", OPENSPIEL_GAME)
    tabular = osp.TabularPolicy(spiel)
    for index, state in enumerate(tabular.states):  # same action numbers; dice are the first two chance actions
        history = state.history()
        mask = 0
        for action in history[2:]:
            mask |= 1 << action
        tabular.action_probability_array[index] = ours[mask, history[state.current_player()]]
    cpp_policy = osp.python_policy_to_pyspiel_policy(tabular)
    theirs = pyspiel.exploitability(spiel, cpp_policy)
    assert theirs == pytest.approx(exploitability(game, ours), abs=1e-9)
    # OpenSpiel's best responses bound the game value: -BR1 <= v <= BR0.
    root = spiel.new_initial_state()
    br = [pyspiel.TabularBestResponse(spiel, seat, cpp_policy).value(root.history_str()) for seat in (0, 1)]
    assert -br[1] <= game_value(game, ours) <= br[0]
    assert -br[1] <= -0.0276 + 5e-5 and br[0] >= -0.0276 - 5e-5
    assert br[0] + br[1] <= 0.002
