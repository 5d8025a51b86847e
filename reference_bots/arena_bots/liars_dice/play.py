"""A lean Liar's Dice match loop over the real engine: the same Bot calls as the referee, minus the clock.

Experiments and tests play thousands of games; this loop builds the
:class:`Turn` values the referee sends (the engine's observation for the
acting seat and its legal actions), rolls the dice with a seeded numpy
generator, and calls ``on_match_start``, ``act`` and ``on_match_end`` (with
the final observation) in the referee's order. ``on_update`` is not called
(no Liar's Dice bot here needs it).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy as np

from arena_client import Bot, MatchInfo, MatchResult, SeatInfo, Termination, TimeControl, Turn
from arena_games.liars_dice import LiarsDiceGame

_TC = TimeControl()
_BUDGET = timedelta(seconds=1)
_BANK = timedelta(seconds=10)

THESIS_PARAMS: dict[str, Any] = {"players": 2, "dice": 5, "bidding": "thesis", "wild": "none", "rounds": "elimination"}


def play_game(
    bots: Sequence[Bot], params: dict[str, Any], rng: np.random.Generator, match_id: str = "ld"
) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Play one game; returns (returns by seat, dice left by seat)."""
    full = dict(params)
    full["players"] = len(bots)
    game = LiarsDiceGame(**full)
    state = game.new_initial_state()
    seats = tuple(SeatInfo(i, getattr(b, "name", f"bot{i}")) for i, b in enumerate(bots))
    for i, bot in enumerate(bots):
        bot.on_match_start(MatchInfo(match_id, "liars_dice", dict(game.params), i, seats, _TC, ""))
    faces = game.faces
    turn_id = 0
    while not state.is_terminal():
        if state.is_chance_node():
            state.apply_action(int(rng.integers(faces)))
            continue
        seat = state.current_player()
        legal = tuple(state.legal_actions())
        action = int(bots[seat].act(Turn(match_id, turn_id, seat, state.observation(seat), legal, _BUDGET, _BANK)))
        turn_id += 1
        if action not in legal:
            raise ValueError(f"{seats[seat].bot_name} played illegal action {action}")
        state.apply_action(action)
    returns = tuple(state.returns())
    for i, bot in enumerate(bots):
        bot.on_match_end(MatchResult(match_id, returns, Termination.NORMAL, "", "", observation=state.observation(i)))
    return returns, tuple(state.dice_counts)
