"""The SDK reads each Turn's ids and legal actions from its bytes (``arena_client.wire.read_turn``).

Whatever it accepts must read as protobuf reads it: the ids and the legal
actions at once, the observation and the time budgets when the bot reads them.
Anything it does not accept is left to protobuf (the SDK then parses the
message as before), and so is a Turn that carries public moves for a bot that
wants its updates. Checked on hypothesis-chosen Turns, on edited and random
bytes, and on the Turns the server itself writes for every game.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.v1 import bot_session_pb2 as bs
from arena_client import PublicMove, Turn
from arena_client.convert import WireTurn, turn_from_proto
from arena_client.remote import server_message
from arena_client.wire import read_turn, varint
from arena_games import load_game
from arena_server.seats.turn_wire import server_message_turn
from tests.server.test_action_wire import EDITS, edited

UINT32 = st.integers(0, (1 << 32) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)


def now(turn: Turn) -> tuple[object, ...]:
    """What read_turn decodes at once."""
    return turn.match_id, turn.turn_id, turn.seat, tuple(turn.legal_actions)


def later(turn: Turn) -> tuple[object, ...]:
    """What is decoded when the bot reads it."""
    return turn.observation, turn.time_budget, turn.overage_left


def varint_at(raw: bytes, i: int) -> tuple[int, int]:
    """The varint at ``raw[i]`` and the index after it (the bytes are ones read_turn accepted)."""
    value = shift = 0
    while True:
        b = raw[i]
        value |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return value, i
        shift += 7


def without_moves(raw: bytes) -> bytes:
    """A ``ServerMessage{turn}`` that read_turn accepted, without the Turn's public moves (field 7)."""
    _size, i = varint_at(raw, 1)
    start = i
    while i < len(raw) and raw[i] != 0x3A:
        if raw[i] & 7 == 0:
            _value, i = varint_at(raw, i + 1)
        else:
            n, i = varint_at(raw, i + 1)
            i += n
    body = raw[start:i]
    return b"\x1a" + varint(len(body)) + body


def protobuf_turn(raw: bytes, seat: int) -> Turn | None:
    """The Turn protobuf reads from ``raw`` (as the SDK did for every Turn); None if it is not one."""
    try:
        message = bs.ServerMessage.FromString(raw)
    except Exception:
        return None
    return turn_from_proto(message.turn, seat) if message.WhichOneof("kind") == "turn" else None


turns = st.builds(
    lambda match_id, turn_id, legal, rps, budget, overage, moves: bs.ServerMessage(
        turn=bs.Turn(
            match_id=match_id,
            turn_id=turn_id,
            legal_actions=legal,
            observation={"rps": {"signs": 3, "rounds": rps[0], "round": rps[1], "wins": rps[2]}} if rps else None,
            time_budget={"seconds": budget[0], "nanos": budget[1]},
            overage_left={"seconds": overage[0], "nanos": overage[1]},
            moves=[{"seat": s, "action": a, "label": label} for s, a, label in moves],
        )
    ).SerializeToString(),
    st.text(max_size=60),
    UINT32,
    st.lists(INT32, max_size=12),
    st.none() | st.tuples(st.integers(0, 5000), st.integers(0, 5000), st.lists(st.integers(0, 5000), max_size=2)),
    st.tuples(st.integers(0, 100), st.integers(0, 999_999_999)),
    st.tuples(st.integers(0, 100), st.integers(0, 999_999_999)),
    st.lists(st.tuples(st.integers(-1, 3), st.integers(0, 9), st.text(max_size=8)), max_size=3),
)


@settings(max_examples=400, deadline=None)
@given(raw=turns, seat=st.integers(0, 3))
def test_every_turn_protobuf_writes_is_read_the_same_or_left_to_protobuf(raw: bytes, seat: int) -> None:
    expected = protobuf_turn(raw, seat)
    assert expected is not None
    read = read_turn(raw, seat, False)
    if any(a < 0 for a in expected.legal_actions):
        assert read is None  # ten-byte varints: protobuf reads them
        return
    assert isinstance(read, WireTurn)
    assert now(read) == now(expected)
    assert later(read) == later(expected)
    assert read == expected
    has_moves = bool(bs.ServerMessage.FromString(raw).turn.moves)
    assert (read_turn(raw, seat, True) is None) == has_moves  # a bot that wants its updates: protobuf reads them


@settings(max_examples=1500, deadline=None)
@given(
    base=turns,
    edits=EDITS,
    tail=st.binary(max_size=8),
)
def test_edited_bytes_read_by_hand_are_what_protobuf_reads(
    base: bytes, edits: list[tuple[int, int, str]], tail: bytes
) -> None:
    data = edited(base, edits, tail)
    read = read_turn(data, 1, False)
    if read is None:
        return
    expected = protobuf_turn(data, 1)
    if expected is None:
        # The fields read by hand were well formed, but protobuf refuses the message. When what it refuses is
        # in a field the bot reads (a broken observation, say), the bot hears of it when it reads that field,
        # never a value protobuf would not give. The public moves, which a bot that does not want its updates
        # never reads, are not looked at: then the rest reads as protobuf reads the Turn without them.
        stripped = protobuf_turn(without_moves(data), 1)
        if stripped is None:
            with pytest.raises(Exception):  # noqa: B017  (protobuf's DecodeError, or what its parse raises)
                later(read)
        else:
            assert later(read) == later(stripped), data.hex()
        return
    assert now(read) == now(expected), data.hex()
    assert later(read) == later(expected), data.hex()


@given(st.binary(max_size=60))
def test_random_bytes_read_by_hand_are_what_protobuf_reads(data: bytes) -> None:
    read = read_turn(b"\x1a" + data, 0, False)
    if read is not None:
        expected = protobuf_turn(b"\x1a" + data, 0)
        assert expected is not None and now(read) == now(expected), data.hex()


def test_what_protobuf_writes_otherwise_is_left_to_protobuf() -> None:
    turn = bs.Turn(match_id="m", turn_id=5, legal_actions=[0, 1, 2])
    canonical = bs.ServerMessage(turn=turn).SerializeToString()
    assert read_turn(canonical, 0, False) is not None
    body = turn.SerializeToString()
    cases = {
        "another kind": bs.ServerMessage(ping=bs.Ping(nonce=3)).SerializeToString(),
        "an unknown field in the Turn": b"\x1a" + bytes([len(body) + 2]) + body + b"\x40\x01",
        "fields out of order": b"\x1a\x08" + b"\x10\x05" + b"\x0a\x01m" + b"\x22\x01\x00",
        "a field twice": b"\x1a\x06" + b"\x0a\x01m" + b"\x0a\x01n",
        "legal actions not packed": b"\x1a\x05" + b"\x0a\x01m" + b"\x20\x01",
        "two Turns (protobuf merges them)": canonical + canonical,
        "a match id that is not UTF-8": b"\x1a\x04\x0a\x02\xc3\x28",
        "a truncated message": canonical[:-1],
        "an empty message": b"",
    }
    for what, raw in cases.items():
        assert read_turn(raw, 0, False) is None, what


@pytest.mark.parametrize(
    ("game", "params"),
    [("rps", {"rounds": 1000}), ("rps", {"signs": 5}), ("tic_tac_toe", {}), ("dots_and_boxes", {}), ("liars_dice", {})],
)
def test_every_turn_the_server_writes_is_read_by_hand(game: str, params: dict[str, int]) -> None:
    """The server's own Turns (``turn_wire``), a few moves into a match of each game, with and without moves."""
    engine = load_game(game, **params)
    state = engine.new_initial_state()
    seen = 0
    while not state.is_terminal() and seen < 40:
        player = state.current_player()
        if player == -1:  # chance
            state.apply_action(state.chance_outcomes()[0][0])
            continue
        seats = range(engine.num_players) if player == -2 else (player,)
        for seat in seats:
            legal = tuple(state.legal_actions(seat))
            sent = Turn("m-" + game, 300 + seen, seat, state.observation(seat), legal, timedelta(0.5), timedelta(9))
            moves = (PublicMove(seat, legal[0], "x"),) if seen % 2 else ()
            raw = server_message_turn(sent, moves)
            read = read_turn(raw, seat, False)
            assert read is not None and read == sent
            assert (read_turn(raw, seat, True) is None) == bool(moves)
            seen += 1
        if player == -2:
            state.apply_actions([state.legal_actions(s)[-1] for s in seats])
        else:
            state.apply_action(state.legal_actions(player)[-1])
    assert seen >= 5


def test_the_sdk_deserializer_keeps_a_turn_as_its_bytes_and_parses_the_rest() -> None:
    raw = bs.ServerMessage(turn=bs.Turn(match_id="m", turn_id=1, legal_actions=[0])).SerializeToString()
    assert server_message(raw) is raw
    ping = bs.ServerMessage(ping=bs.Ping(nonce=7))
    assert server_message(ping.SerializeToString()) == ping
    assert server_message(b"") == bs.ServerMessage()


def test_a_turn_read_by_hand_keeps_the_message_and_parses_it_once() -> None:
    raw = bs.ServerMessage(
        turn=bs.Turn(match_id="m", turn_id=2, legal_actions=[1, 2], observation={"rps": {"signs": 3, "round": 4}})
    ).SerializeToString()
    read = read_turn(raw, 0, False)
    assert read is not None
    first = read.observation
    assert first.round == 4 and read.observation is first
    assert read.time_budget == timedelta(0)


def rps_turn(**rps: object) -> bytes:
    return bs.ServerMessage(
        turn=bs.Turn(
            match_id="m",
            turn_id=9,
            legal_actions=[0, 1, 2],
            observation={"rps": rps},
            time_budget={"seconds": 2, "nanos": 500_000_000},
            overage_left={"seconds": 30},
        )
    ).SerializeToString()


def test_an_rps_observation_and_the_budgets_are_read_from_the_bytes_without_protobuf(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the SDK reads by hand (``arena_client.turn_fields``) never reaches protobuf's parse."""
    raw = rps_turn(signs=5, rounds=1000, round=517, wins=[170, 160], last_round=[1, 4])
    expected = protobuf_turn(raw, 0)
    parsed: list[bytes] = []
    parse = bs.ServerMessage.FromString
    monkeypatch.setattr(bs.ServerMessage, "FromString", lambda data: parsed.append(data) or parse(data))
    read = read_turn(raw, 0, False)
    assert read is not None and expected is not None
    assert later(read) == later(expected)
    assert read.observation.wins == (170, 160) and read.time_budget == timedelta(seconds=2.5)
    assert parsed == []


@pytest.mark.parametrize(
    "what",
    ["tic-tac-toe's observation", "wins not packed", "a negative round", "an unknown field", "a negative budget"],
)
def test_what_the_hand_reader_does_not_take_is_parsed_by_protobuf(what: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Layouts protobuf reads but the hand reader leaves alone give protobuf's values, through protobuf's parse."""
    observation = bs.Turn(observation={"rps": {"signs": 3, "round": 7}}).observation.SerializeToString()
    budget = b"\x2a\x02\x08\x01"
    if what == "tic-tac-toe's observation":
        board = bs.Turn(observation={"tic_tac_toe": {"rows": 3, "cols": 3, "k": 3}})
        observation = board.observation.SerializeToString()
    elif what == "wins not packed":
        observation = b"\x0a\x06\x08\x03\x20\x01\x20\x02"
    elif what == "a negative round":
        observation = b"\x0a\x0d\x08\x03\x18" + b"\xff" * 9 + b"\x01"
    elif what == "an unknown field":
        observation = b"\x0a\x04\x08\x03\x48\x01"
    else:
        budget = b"\x2a\x0b\x08" + b"\xff" * 9 + b"\x01"
    body = b"\x0a\x01m\x10\x09\x1a" + varint(len(observation)) + observation + b"\x22\x03\x00\x01\x02" + budget
    raw = b"\x1a" + varint(len(body)) + body
    expected = protobuf_turn(raw, 0)
    assert expected is not None
    parsed: list[bytes] = []
    parse = bs.ServerMessage.FromString
    monkeypatch.setattr(bs.ServerMessage, "FromString", lambda data: parsed.append(data) or parse(data))
    read = read_turn(raw, 0, False)
    assert read is not None
    assert later(read) == later(expected)
    assert parsed == [raw]  # (once: the parsed message is kept for the other fields)


def test_a_turn_without_an_observation_reads_none_by_hand() -> None:
    raw = bs.ServerMessage(turn=bs.Turn(match_id="m", turn_id=1, legal_actions=[0])).SerializeToString()
    read = read_turn(raw, 0, False)
    assert read is not None
    assert read.observation is None and read.time_budget == timedelta(0) and read.overage_left == timedelta(0)
    empty_rps = rps_turn()
    read = read_turn(empty_rps, 0, False)
    assert read is not None and read.observation == protobuf_turn(empty_rps, 0).observation  # type: ignore[union-attr]


def test_public_moves_protobuf_would_refuse_do_not_stop_a_bot_that_never_reads_them() -> None:
    """A label that is not UTF-8 in a public move: a bot without updates still reads its observation by hand."""
    message = bs.ServerMessage.FromString(rps_turn(signs=3, round=4, wins=[1, 2]))
    message.turn.moves.add(seat=0, action=1, label="ab")
    raw = bytearray(message.SerializeToString())
    at = raw.index(b"ab")
    raw[at : at + 2] = b"\xc3\x28"
    assert protobuf_turn(bytes(raw), 0) is None
    read = read_turn(bytes(raw), 0, False)
    assert read is not None and read.observation.round == 4 and read.observation.wins == (1, 2)
    assert read_turn(bytes(raw), 0, True) is None  # a bot that wants its updates: protobuf, which refuses
