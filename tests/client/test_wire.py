"""The SDK's Action bytes (:func:`arena_client.wire.action_message`) are exactly protobuf's.

A remote bot's answers are written as bytes built without a protobuf message;
any difference from ``SerializeToString`` would be a protocol change. The
bytes are compared for hypothesis-chosen match ids, turn ids and actions
(zeros, negative actions and long varints included), and parsed back.
"""

from __future__ import annotations

import pytest
from google.protobuf.duration_pb2 import Duration
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.v1 import bot_session_pb2 as bs
from arena_client.wire import action_message, serialize, varint


@settings(max_examples=400, deadline=None)
@given(
    match_id=st.text(max_size=40),
    turn_id=st.integers(0, 2**32 - 1),
    action=st.integers(-(2**31), 2**31 - 1),
)
def test_an_action_is_the_bytes_protobuf_writes(match_id: str, turn_id: int, action: int) -> None:
    message = bs.BotMessage(action=bs.Action(match_id=match_id, turn_id=turn_id, action=action))
    raw = action_message(match_id, turn_id, action)
    assert raw == message.SerializeToString()
    assert bs.BotMessage.FromString(raw) == message
    assert serialize(raw) is raw and serialize(message) == raw


@pytest.mark.parametrize(
    "turn_id", [0, 1, 127, 128, 300, 4095, 4096, 16383, 16384, 2**21 - 1, 2**21, 2**28 - 1, 2**28, 2**32 - 1]
)
@pytest.mark.parametrize("action", [0, 1, 2, 127, 128, 16384, -1, 2**31 - 1])
def test_an_action_at_the_varint_edges(turn_id: int, action: int) -> None:
    """Where turn ids hand over: one byte to two, the table (``wire.VARINTS``) to ``varint``, two bytes to three."""
    message = bs.BotMessage(action=bs.Action(match_id="local-17", turn_id=turn_id, action=action))
    assert action_message("local-17", turn_id, action) == message.SerializeToString()


@settings(max_examples=300, deadline=None)
@given(n=st.integers(-(2**63), 2**64 - 1))
def test_varint_is_protobufs(n: int) -> None:
    # int64 field 1 of Duration ("seconds") for the signed range, uint32/uint64-sized values as they come
    if n < 2**63:
        expected = Duration(seconds=n).SerializeToString() if n else b""
        assert (b"\x08" + varint(n) if n else b"") == expected
    else:
        assert len(varint(n)) == 10


def test_an_action_out_of_range_is_refused_as_protobuf_refuses_it() -> None:
    for action, turn_id in ((2**31, 1), (-(2**31) - 1, 1), (0, -1), (0, 2**32)):
        with pytest.raises(ValueError):
            bs.Action(match_id="m", turn_id=turn_id, action=action)
        with pytest.raises(ValueError, match="out of range"):
            action_message("m", turn_id, action)
