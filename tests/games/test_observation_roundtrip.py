"""Every game's observation survives dataclass -> proto -> dataclass, in binary and in proto3 JSON."""

from __future__ import annotations

import random
from typing import Any

import pytest
from google.protobuf import json_format

from arena.v1 import observations_pb2
from arena_client.convert import OBSERVATIONS, observation_from_proto, observation_to_proto
from arena_games import registered_games
from arena_games.liars_dice import LiarsDiceBid, LiarsDiceHand, LiarsDiceObservation, LiarsDiceRoundResult
from tests.games.games_support import GAME_CASES, case_id, load, states_along


def _round_trips(obs: Any) -> None:
    msg = observation_to_proto(obs)
    assert msg.WhichOneof("game") is not None
    assert observation_from_proto(msg) == obs
    wire = observations_pb2.Observation.FromString(msg.SerializeToString())
    assert observation_from_proto(wire) == obs
    text = json_format.MessageToJson(msg)
    assert observation_from_proto(json_format.Parse(text, observations_pb2.Observation())) == obs


def test_every_game_registers_its_observation() -> None:
    assert set(OBSERVATIONS) == set(registered_games())


@pytest.mark.parametrize("case", GAME_CASES, ids=case_id)
def test_observations_along_a_game_round_trip(case: tuple[str, dict[str, Any]]) -> None:
    game = load(case)
    seen = 0
    for state in states_along(game, seed=random.Random(case_id(case)).randrange(1000)):
        for seat in [*range(game.num_players), None]:
            obs = state.observation(seat)
            assert type(obs) is OBSERVATIONS[case[0]][0]
            _round_trips(obs)
            seen += 1
    assert seen > game.num_players


def test_nested_liars_dice_fields_round_trip() -> None:
    obs = LiarsDiceObservation(
        players=3,
        faces=6,
        dice_counts=(2, 0, 1),
        my_dice=(1, 6),
        bids=(LiarsDiceBid(0, 2, 3), LiarsDiceBid(2, 3, 3)),
        past_rounds=(
            LiarsDiceRoundResult(
                hands=(LiarsDiceHand((2, 2)), LiarsDiceHand((5,)), LiarsDiceHand(())),
                bid=LiarsDiceBid(1, 4, 6),
                challenger=0,
                spot_on=True,
                actual=0,
                dice_lost=(0, 1, 0),
            ),
        ),
        to_move=-1,
        round=1,
    )
    _round_trips(obs)
    msg = observation_to_proto(obs).liars_dice
    assert msg.past_rounds[0].hands[2].dice == [] and msg.past_rounds[0].bid.quantity == 4
