"""The fast proto3 JSON writer and Action reader agree with ``json_format`` on every message of every game."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from datetime import timedelta

import pytest
from google.protobuf import json_format
from google.protobuf.message import Message

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import common_pb2 as common
from arena_client import MatchInfo, MatchResult, PublicMove, SeatInfo, Termination, TimeControl, Turn, Update
from arena_client.convert import match_info_to_proto, result_to_proto, turn_to_proto, update_to_proto
from arena_games import CHANCE, SIMULTANEOUS, TERMINAL, load_game
from arena_server.seats.framing import Framing, encode, parse_payload
from arena_server.seats.proto_json import parse_action, to_json_dict

GAMES = [
    ("rps", {"rounds": 4}),
    ("rps", {"signs": 5, "rounds": 3}),
    ("tic_tac_toe", {"rows": 4, "cols": 5, "k": 3}),
    ("dots_and_boxes", {"rows": 2, "cols": 3}),
    ("liars_dice", {"players": 3, "dice": 2}),
    ("liars_dice", {"players": 2, "dice": 1, "wild": "highest", "bidding": "standard", "rounds": "single"}),
]


def messages_of_a_game(name: str, params: dict[str, object], seed: int) -> Iterator[bs.ServerMessage]:
    """Every kind of ServerMessage a seat receives in one random playout of the game."""
    rng = random.Random(seed)
    game = load_game(name, **params)
    seats = tuple(SeatInfo(i, f"bot-{i}", i + 1, "subprocess") for i in range(game.num_players))
    info = MatchInfo("m-1", name, dict(game.params), 0, seats, TimeControl(), "ab" * 32, rated=True)
    yield bs.ServerMessage(match_started=match_info_to_proto(info))
    state = game.new_initial_state()
    turn_id = 0
    while (player := state.current_player()) != TERMINAL:
        if player == CHANCE:
            outcomes = state.chance_outcomes()
            state.apply_action(rng.choice(outcomes)[0])
            continue
        acting = range(game.num_players) if player == SIMULTANEOUS else [player]
        for seat in acting:
            turn_id += 1
            turn = Turn(
                "m-1",
                turn_id,
                seat,
                state.observation(seat),
                state.legal_actions(seat),
                timedelta(milliseconds=1500),
                timedelta(seconds=9, microseconds=250),
            )
            moves = [PublicMove(0, 1, "label"), PublicMove(1, 0, "")] if turn_id % 2 else []
            yield bs.ServerMessage(turn=turn_to_proto(turn, moves))
            yield bs.ServerMessage(update=update_to_proto(Update("m-1", tuple(moves), state.observation(seat))))
        actions = [rng.choice(list(state.legal_actions(s))) for s in acting]
        if player == SIMULTANEOUS:
            state.apply_actions(actions)
        else:
            state.apply_action(actions[0])
    result = MatchResult(
        "m-1",
        tuple(state.returns()),
        Termination.NORMAL,
        "the game ended normally",
        "seed",
        None,
        state.observation(0),
        (PublicMove(0, 2, "x"),),
    )
    yield bs.ServerMessage(match_ended=result_to_proto(result))


def odd_messages() -> Iterator[Message]:
    """Values with special JSON forms: 64-bit ints, non-finite doubles, enums, empty and absent fields."""
    yield bs.ServerMessage(ping=bs.Ping(nonce=2**63 + 5))
    yield bs.ServerMessage(ping=bs.Ping())
    yield bs.ServerMessage(error=bs.Error(code=bs.ERROR_CODE_STALE_TURN, message='é \u2603 "quoted"', fatal=True))
    yield bs.ServerMessage(welcome=bs.Welcome(bot_name="x", guest=True))
    ended = bs.MatchEnded(match_id="m", returns=[math.inf, -math.inf, -0.0, 1e-300], termination=3)
    yield bs.ServerMessage(match_ended=ended)
    yield bs.ServerMessage()
    yield common.ParamValue(string_value="")
    yield common.ParamValue(bool_value=False)
    yield common.TimeControl()


def all_messages() -> Iterator[Message]:
    for seed, (name, params) in enumerate(GAMES):
        yield from messages_of_a_game(name, params, seed)
    yield from odd_messages()


def test_equals_json_format_on_every_message_of_every_game() -> None:
    count = 0
    kinds = set()
    for message in all_messages():
        expected = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
        ours = to_json_dict(message)
        assert ours == expected, message
        if "params" not in json.dumps(expected):  # without maps, even the key order is json_format's
            assert json.dumps(ours) == json.dumps(expected)
        count += 1
        if isinstance(message, bs.ServerMessage):
            kinds.add(message.WhichOneof("kind"))
    assert kinds >= {"match_started", "turn", "update", "match_ended", "ping", "error", "welcome"}
    assert count > 100


def test_not_a_number_is_written_as_json_format_writes_it() -> None:
    message = bs.MatchEnded(returns=[math.nan])
    assert to_json_dict(message)["returns"] == ["NaN"]
    assert json_format.MessageToDict(message)["returns"] == ["NaN"]


def test_encoded_lines_read_back_as_the_same_message() -> None:
    for message in all_messages():
        if isinstance(message, bs.ServerMessage) and message.WhichOneof("kind"):
            line = encode(message, Framing.JSON)
            assert line.endswith(b"\n") and line.count(b"\n") == 1
            assert parse_payload(line[:-1], Framing.JSON, bs.ServerMessage) == message


@pytest.mark.parametrize(
    "line",
    [
        '{"action":{"matchId":"m-1","turnId":7,"action":2}}',
        '{"action":{"match_id":"m-1","turn_id":4294967295,"action":-2147483648}}',
        '{"action":{"action":2147483647}}',
        '{"action":{}}',
    ],
)
def test_the_action_shortcut_reads_what_json_format_reads(line: str) -> None:
    data = json.loads(line)
    fast = parse_action(data)
    assert fast is not None
    assert fast == json_format.ParseDict(data, bs.BotMessage())


@pytest.mark.parametrize(
    "line",
    [
        '{"action":{"matchId":"m","turnId":"7","action":2}}',  # valid, but left to json_format
        '{"action":{"matchId":"m","turnId":7,"action":2.0}}',
        '{"action":{"matchId":"m","turnId":-1,"action":2}}',
        '{"action":{"matchId":"m","turnId":4294967296,"action":2}}',
        '{"action":{"matchId":"m","turnId":7,"action":2147483648}}',
        '{"action":{"matchId":"m","match_id":"m","action":1}}',
        '{"action":{"matchId":"m","turnId":true,"action":1}}',
        '{"action":{"matchId":5,"turnId":7,"action":1}}',
        '{"action":{"matchId":"m","turnId":7,"action":1,"extra":1}}',
        '{"action":{"matchId":"m","turnId":7,"action":null}}',
        '{"action":[1]}',
        '{"action":{"turnId":7},"pong":{}}',
        '{"pong":{"nonce":"1"}}',
    ],
)
def test_anything_unusual_takes_the_full_path(line: str) -> None:
    data = json.loads(line)
    assert parse_action(data) is None
    # and the codec still gives json_format's verdict: the same message, or a FrameError
    try:
        expected: bs.BotMessage | None = json_format.ParseDict(data, bs.BotMessage())
    except json_format.ParseError:
        expected = None
    try:
        got: bs.BotMessage | None = parse_payload(line.encode(), Framing.JSON, bs.BotMessage)
    except Exception:
        got = None
    assert got == expected
