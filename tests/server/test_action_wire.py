"""The Action read by hand (``seats/action_wire.py``) is protobuf's Action, and anything else is left to protobuf."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import common_pb2 as common
from arena_client.wire import action_message
from arena_server.api.bot_session import _parse
from arena_server.seats.action_wire import WireAction, read_action
from tests.conftest import LiveServer
from tests.fakes.grpc_bots import RawBot
from tests.server.test_remote import start_raw_match

UINT32 = st.integers(0, (1 << 32) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)


EDITS = st.lists(st.tuples(st.integers(0, 100), st.integers(0, 255), st.sampled_from(["set", "insert", "cut"])))
"""Edits of a message's bytes: (where, byte, set it there / insert it there / cut the byte there)."""


def edited(base: bytes, edits: list[tuple[int, int, str]], tail: bytes) -> bytes:
    """``base`` with ``edits`` made in order, then ``tail`` appended."""
    raw = bytearray(base)
    for at, byte, how in edits:
        at = min(at, len(raw))
        if how == "set" and at < len(raw):
            raw[at] = byte
        elif how == "insert":
            raw.insert(at, byte)
        elif at < len(raw):
            del raw[at]
    return bytes(raw + tail)


def fields(action: WireAction | bs.Action) -> tuple[str, int, int]:
    return action.match_id, action.turn_id, action.action


def protobuf_reading(raw: bytes) -> tuple[str, int, int] | None:
    """The Action protobuf reads from ``raw``; None if it is not a BotMessage holding one."""
    try:
        message = bs.BotMessage.FromString(raw)
    except Exception:
        return None
    return fields(message.action) if message.WhichOneof("kind") == "action" else None


@settings(max_examples=400, deadline=None)
@given(match_id=st.text(max_size=300), turn_id=UINT32, action=INT32)
def test_every_action_protobuf_writes_is_read_the_same_or_left_to_protobuf(
    match_id: str, turn_id: int, action: int
) -> None:
    message = bs.BotMessage(action=bs.Action(match_id=match_id, turn_id=turn_id, action=action))
    raw = message.SerializeToString()
    assert action_message(match_id, turn_id, action) == raw  # (the SDK's bytes are protobuf's)
    read = read_action(raw)
    if action < 0:
        assert read is None  # ten bytes: protobuf reads it
    else:
        assert read is not None and fields(read) == (match_id, turn_id, action)
    parsed = _parse(raw)  # the server's deserializer: a WireAction, or protobuf's message
    assert fields(parsed if type(parsed) is WireAction else parsed.action) == (match_id, turn_id, action)  # type: ignore[union-attr]


@settings(max_examples=2000, deadline=None)
@given(
    base=st.builds(
        lambda m, t, a: bs.BotMessage(action=bs.Action(match_id=m, turn_id=t, action=a)).SerializeToString(),
        st.text(max_size=20),
        UINT32,
        st.integers(0, (1 << 31) - 1),
    ),
    edits=EDITS,
    tail=st.binary(max_size=8),
)
def test_bytes_read_by_hand_are_always_what_protobuf_reads(
    base: bytes, edits: list[tuple[int, int, str]], tail: bytes
) -> None:
    data = edited(base, edits, tail)
    read = read_action(data)
    if read is not None:
        assert fields(read) == protobuf_reading(data), data.hex()


@given(st.binary(max_size=40))
def test_random_bytes_read_by_hand_are_what_protobuf_reads(data: bytes) -> None:
    read = read_action(data)
    if read is not None:
        assert fields(read) == protobuf_reading(data), data.hex()


TO_PROTOBUF = {
    "an unknown field in the Action",
    "fields out of order",
    "a field twice",
    "two Actions (protobuf merges them)",
    "a negative action",
    "a turn id past 32 bits",
}
"""The cases protobuf reads as an Action (the rest it refuses, or reads as another kind)."""


def test_what_protobuf_writes_otherwise_is_left_to_protobuf() -> None:
    canonical = action_message("m", 5, 2)
    assert read_action(canonical) is not None
    action = bs.Action(match_id="m", turn_id=5, action=2)
    unknown = bs.Action(match_id="m", turn_id=5, action=2).SerializeToString() + b"\x20\x01"  # field 4
    cases = {
        "another kind": bs.BotMessage(pong=bs.Pong(nonce=3)).SerializeToString(),
        "an unknown field in the Action": b"\x12" + bytes([len(unknown)]) + unknown,
        "fields out of order": b"\x12\x07" + b"\x10\x05" + b"\x0a\x01m" + b"\x18\x02",
        "a field twice": b"\x12\x08" + b"\x0a\x01m" + b"\x0a\x01n" + b"\x10\x05",
        "two Actions (protobuf merges them)": canonical + canonical,
        "a negative action": bs.BotMessage(action=bs.Action(action=-1)).SerializeToString(),
        "a turn id past 32 bits": b"\x12\x06\x10\x80\x80\x80\x80\x10",
        "a match id that is not UTF-8": b"\x12\x04\x0a\x02\xc3\x28",
        "a truncated message": canonical[:-1],
        "an empty message": b"",
    }
    for what, raw in cases.items():
        assert read_action(raw) is None, what
        assert protobuf_reading(raw) is None or what in TO_PROTOBUF, what
    assert fields(bs.BotMessage.FromString(cases["fields out of order"]).action) == fields(action)


async def test_an_action_protobuf_must_read_still_plays(live_server: LiveServer) -> None:
    """Turn ids before match ids: a valid Action the server leaves to protobuf, answered on the real stream."""
    raw, _started, turn = await start_raw_match(live_server, rounds=3)
    answered = 0
    while True:
        match_id = turn.match_id.encode()
        body = b"\x10" + bytes([turn.turn_id]) + b"\x0a" + bytes([len(match_id)]) + match_id + b"\x18\x01"
        message = b"\x12" + bytes([len(body)]) + body
        assert read_action(message) is None and protobuf_reading(message) == (turn.match_id, turn.turn_id, 1)
        await raw.send(message)
        answered += 1
        reply = await next_of(raw, ("turn", "match_ended"))
        if reply.WhichOneof("kind") == "match_ended":
            break
        turn = reply.turn
    assert answered == 3
    assert reply.match_ended.termination == common.TERMINATION_NORMAL, reply.match_ended.reason


async def next_of(raw: RawBot, kinds: tuple[str, ...]) -> bs.ServerMessage:
    """The next message of one of ``kinds`` (others are skipped)."""
    while True:
        msg = await raw.recv()
        if msg.WhichOneof("kind") in kinds:
            return msg
