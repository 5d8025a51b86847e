"""OpenSpiel bots on Arena: the game mapping agrees with Arena's engines, and pyspiel bots play real matches.

Skipped when open_spiel is not installed (the ``openspiel`` extra; ``make test`` installs it).
"""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from arena_bots import hosted_bots
from arena_client import SeatInfo, Termination, TimeControl
from arena_games import CHANCE, SIMULTANEOUS, TERMINAL, load_game
from arena_server.referee.loop import play_match
from arena_server.seats.in_process import InProcessSeat
from tests.conftest import LiveServer

pyspiel = pytest.importorskip("pyspiel", reason="open_spiel is not installed (pip install 'arena[openspiel]')")
from open_spiel.python.algorithms import mcts  # noqa: E402

from arena_client.openspiel import OpenSpielBot, UnmappedGame, openspiel_game  # noqa: E402

MAPPED = [
    ("tic_tac_toe", {}),
    ("tic_tac_toe", {"rows": 4, "cols": 5, "k": 3}),
    ("dots_and_boxes", {"rows": 2, "cols": 3}),
    ("liars_dice", {"dice": 2, "rounds": "single", "wild": "highest", "bidding": "standard"}),
    ("rps", {"rounds": 20}),
]
CLOCK = TimeControl(timedelta(seconds=2), timedelta(seconds=20), timedelta(seconds=0.2))


def random_bot(game: Any, player: int) -> Any:
    return pyspiel.make_uniform_random_bot(player, 1234 + player)


def mcts_bot(game: Any, player: int) -> Any:
    rng = np.random.RandomState(7 + player)
    return mcts.MCTSBot(game, 2.0, 1000, mcts.RandomRolloutEvaluator(1, rng), random_state=rng, solve=True)


@pytest.mark.parametrize(("game", "params"), MAPPED, ids=[f"{g}-{len(p)}" for g, p in MAPPED])
def test_engines_agree_move_by_move(game: str, params: dict[str, Any]) -> None:
    """Random playouts in both engines at once, through the adapter's own mapping."""
    mapping = openspiel_game(game, params)
    ours = load_game(game, **params)
    compared = 0
    for seed in range(40):
        rng = random.Random(seed)
        state, theirs = ours.new_initial_state(), mapping.game.new_initial_state()
        while state.current_player() != TERMINAL:
            assert not theirs.is_terminal()
            player = state.current_player()
            if player == CHANCE:
                outcome = rng.choice([a for a, _ in state.chance_outcomes()])
                assert theirs.is_chance_node() and outcome in [a for a, _ in theirs.chance_outcomes()]
                state.apply_action(outcome)
                theirs.apply_action(outcome)
            elif player == SIMULTANEOUS:
                assert theirs.is_simultaneous_node()
                joint = []
                for seat in range(2):
                    legal = list(state.legal_actions(seat))
                    assert legal == sorted(mapping.to_arena(a) for a in theirs.legal_actions(seat))
                    joint.append(rng.choice(legal))
                state.apply_actions(joint)
                theirs.apply_actions([mapping.to_openspiel(a) for a in joint])
            else:
                assert theirs.current_player() == player
                legal = list(state.legal_actions())
                assert legal == sorted(mapping.to_arena(a) for a in theirs.legal_actions())
                action = rng.choice(legal)
                state.apply_action(action)
                theirs.apply_action(mapping.to_openspiel(action))
            compared += 1
        assert theirs.is_terminal()
        assert list(state.returns()) == pytest.approx(list(theirs.returns())), (seed, state.returns(), theirs.returns())
    assert compared > 100


@pytest.mark.parametrize(("game", "params"), MAPPED, ids=[f"{g}-{len(p)}" for g, p in MAPPED])
@pytest.mark.parametrize("seat", [0, 1])
async def test_pyspiel_bot_plays_a_hosted_bot(game: str, params: dict[str, Any], seat: int) -> None:
    """A match to its normal end: every rebuilt OpenSpiel state matched Arena's legal actions (else it resigns)."""
    bot = OpenSpielBot(random_bot, seed=seat)
    seats: list[Any] = [None, None]
    seats[seat] = InProcessSeat(bot, SeatInfo(seat, "openspiel-random"))
    seats[1 - seat] = InProcessSeat(hosted_bots()["random"].factory(3), SeatInfo(1 - seat, "random"))
    record = await play_match(load_game(game, **params), seats, CLOCK, seed="os")
    assert record.termination == Termination.NORMAL, record.reason


async def test_unmapped_match_is_resigned_with_the_reason() -> None:
    seats = [
        InProcessSeat(OpenSpielBot(random_bot), SeatInfo(0, "openspiel-random")),
        InProcessSeat(hosted_bots()["random"].factory(3), SeatInfo(1, "random")),
    ]
    record = await play_match(load_game("rps", signs=5, rounds=5), seats, CLOCK, seed="os")
    assert record.termination == Termination.RESIGN and record.offender == 0
    assert "OpenSpiel's matrix_rps has 3 signs; this match has signs=5" in record.reason


def test_unmapped_parameters_are_named() -> None:
    with pytest.raises(UnmappedGame, match="OpenSpiel's matrix_rps has 3 signs; this match has signs=5"):
        openspiel_game("rps", {"signs": 5})
    with pytest.raises(UnmappedGame, match="this match has rounds=elimination"):
        openspiel_game("liars_dice", {"wild": "highest", "bidding": "standard"})


async def test_mcts_plays_tic_tac_toe_over_grpc(live_server: LiveServer) -> None:
    """OpenSpiel's MCTS bot as a remote Arena bot (the SDK over gRPC) against the hosted random bot."""
    from arena_client import run

    seats: list[int] = []

    class Recording(OpenSpielBot):
        def on_match_start(self, match: Any) -> None:
            super().on_match_start(match)
            seats.append(match.seat)

    bot = Recording(mcts_bot, name="openspiel-mcts", games=("tic_tac_toe",))
    results = await asyncio.to_thread(
        run, bot, live_server.address, opponent="random", game="tic_tac_toe", matches=4, name="", reconnect=False
    )
    assert len(results) == 4
    assert all(r.termination == Termination.NORMAL for r in results), [r.reason for r in results]
    assert sorted(seats) == [0, 0, 1, 1]  # it played both X and O
    mine = [r.returns[s] for r, s in zip(results, seats, strict=True)]
    assert min(mine) >= 0, mine  # MCTS with 1000 simulations never loses to random play here


async def test_cfr_policy_plays_liars_dice() -> None:
    """A CFR average policy (OpenSpiel's C++ solver) as a pyspiel policy bot beats the hosted random bot."""
    params = {"dice": 1, "faces": 4, "rounds": "single", "wild": "highest", "bidding": "standard"}
    solver = pyspiel.CFRSolver(openspiel_game("liars_dice", params).game)
    for _ in range(30):
        solver.evaluate_and_update_policy()
    policy = solver.average_policy()
    total = 0.0
    for match in range(40):
        seat = match % 2
        bot = OpenSpielBot(lambda game, player: pyspiel.make_policy_bot(game, player, 11, policy), seed=match)
        seats: list[Any] = [None, None]
        seats[seat] = InProcessSeat(bot, SeatInfo(seat, "openspiel-cfr"))
        seats[1 - seat] = InProcessSeat(hosted_bots()["random"].factory(match), SeatInfo(1 - seat, "random"))
        record = await play_match(load_game("liars_dice", **params), seats, CLOCK, seed=f"cfr-{match}")
        assert record.termination == Termination.NORMAL, record.reason
        total += record.returns[seat]
    assert total >= 10, total  # it wins clearly more than it loses
    print(f"CFR policy vs random, 40 single-round matches: {total:+g}")
