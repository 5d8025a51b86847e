"""Every game plays through the real referee with in-process seats (random vs random, many seeds)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from arena_bots.simple import RandomBot
from arena_client import SeatInfo, Termination
from arena_games import load_game
from arena_server.referee.loop import play_match
from arena_server.seats.in_process import InProcessSeat
from tests.games.games_support import GAME_CASES, case_id

MATCHES = 12


@pytest.mark.parametrize("case", GAME_CASES, ids=case_id)
async def test_random_matches_end_normally(case: tuple[str, dict[str, Any]]) -> None:
    name, params = case
    game = load_game(name, **params)
    matches = MATCHES if game.max_game_length <= 400 else 3
    outcomes = set()
    for match in range(matches):
        seats = [
            InProcessSeat(RandomBot(1000 * match + seat), SeatInfo(seat, f"random{seat}"))
            for seat in range(game.num_players)
        ]
        record = await play_match(game, seats, seed=f"{name}-{match}", match_id=f"m{match}")
        assert record.termination == Termination.NORMAL, record.reason
        assert record.offender is None
        assert math.isclose(sum(record.returns), 0.0, abs_tol=1e-9)
        assert len(record.moves) <= game.max_game_length
        # The record is a complete replay: the history reaches the same end.
        final = game.state_from_history(record.moves.history())
        assert final.is_terminal() and final.returns() == record.returns
        outcomes.add(record.returns)
    if matches >= 10 and game.max_game_length > 4:
        assert len(outcomes) > 1, "random play should not always end the same way"
