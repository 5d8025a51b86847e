"""The SDK's Turn read from the wire (``arena_client.convert.WireTurn``): a Turn whose observation and
time budgets are decoded when the bot first reads them."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from datetime import timedelta

import pytest

from arena.v1 import bot_session_pb2 as bs
from arena_client import Turn
from arena_client.convert import WireTurn, turn_from_proto, turn_to_proto
from arena_games import load_game
from arena_games.rps import RpsObservation


def wire_turn(game: str = "rps", **params: int) -> tuple[Turn, WireTurn]:
    """A server-side Turn two moves into a match, and the SDK's Turn parsed from its wire bytes."""
    state = load_game(game, **params).new_initial_state()
    for _ in range(2):
        if state.current_player() < 0:  # simultaneous (rps): both seats at once
            state.apply_actions([state.legal_actions(0)[0], state.legal_actions(1)[-1]])
        else:
            state.apply_action(state.legal_actions()[0])
    seat = max(state.current_player(), 0)
    sent = Turn(
        "m-7",
        3,
        seat,
        state.observation(seat),
        tuple(state.legal_actions(seat)),
        timedelta(seconds=1.5),
        timedelta(seconds=9, microseconds=250),
    )
    wire = bs.ServerMessage.FromString(bs.ServerMessage(turn=turn_to_proto(sent, ())).SerializeToString())
    received = turn_from_proto(wire.turn, seat)
    assert isinstance(received, WireTurn)
    return sent, received


@pytest.mark.parametrize(("game", "params"), [("rps", {"rounds": 5}), ("tic_tac_toe", {}), ("dots_and_boxes", {})])
def test_a_wire_turn_reads_as_the_turn_that_was_sent(game: str, params: dict[str, int]) -> None:
    sent, received = wire_turn(game, **params)
    assert received.observation == sent.observation
    assert received.time_budget == sent.time_budget
    assert received.overage_left == sent.overage_left
    assert (received.match_id, received.turn_id, received.seat, received.legal_actions) == (
        sent.match_id,
        sent.turn_id,
        sent.seat,
        sent.legal_actions,
    )
    assert received == sent and sent == received  # equal to a plain Turn, both ways round
    assert repr(received) == repr(sent)
    assert dataclasses.asdict(received) == dataclasses.asdict(sent)


def test_a_field_is_decoded_once_and_then_kept() -> None:
    _, received = wire_turn(rounds=5)
    first = received.observation
    assert isinstance(first, RpsObservation)
    assert received.observation is first
    assert received.time_budget is received.time_budget


def test_a_wire_turn_differs_from_a_turn_that_differs() -> None:
    sent, received = wire_turn(rounds=5)
    assert received != dataclasses.replace(sent, turn_id=4)
    assert received != dataclasses.replace(sent, time_budget=timedelta(seconds=2))
    assert received != dataclasses.replace(sent, observation=dataclasses.replace(sent.observation, round=0))
    assert received != "not a turn"


def test_a_bot_may_set_and_copy_a_wire_turns_fields() -> None:
    sent, received = wire_turn(rounds=5)
    changed = dataclasses.replace(received, turn_id=99)
    assert changed.turn_id == 99 and changed.observation == sent.observation
    assert received.turn_id == 3  # (replace makes a new turn)
    for clone in (copy.copy(received), copy.deepcopy(received), pickle.loads(pickle.dumps(received))):
        assert clone == sent
    received.observation = None  # e.g. a bot that trims what it keeps
    received.overage_left = timedelta(0)
    assert received.observation is None and received.overage_left == timedelta(0)
    with pytest.raises(TypeError):
        hash(received)  # (unhashable, as a Turn is)
