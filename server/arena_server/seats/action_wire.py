"""A remote bot's Action read from its bytes, without building protobuf messages (compiled with the move path).

Every remote move brings one ``BotMessage{action: Action{match_id, turn_id,
action}}``. Parsed by protobuf, it costs the parse, a Python object for the
message and one for the Action, and an attribute lookup through protobuf for
each field the server reads (about 5,000 instructions a move in all). The
stream's request deserializer (``api/bot_session._parse``) first tries
:func:`read_action`, which reads exactly that message in the form protobuf
writes it, fields in number order, each at most once, and returns a
:class:`WireAction`, a compiled object whose fields compiled code reads
directly. Anything else (another kind of message, an unknown or repeated
field, fields out of order, a negative or oversized number, a match id that is
not UTF-8, a truncated message) returns None and is parsed by protobuf as
before, so its errors and its meaning are protobuf's.

Where both read a message, they agree: ``tests/server/test_action_wire.py``
checks every Action :func:`read_action` accepts against protobuf's parse, on
random Actions and on random bytes.
"""

from __future__ import annotations

from typing import Any

from arena.v1 import bot_session_pb2 as bs
from arena_client.turn_fields import read_varint as _varint
from arena_client.wire import read_ids


class WireAction:
    """The three fields of an ``arena.v1.Action``: what the server reads of a bot's answer."""

    __slots__ = ("action", "match_id", "turn_id")

    def __init__(self, match_id: str, turn_id: int, action: int) -> None:
        self.match_id = match_id
        self.turn_id = turn_id
        self.action = action

    def __repr__(self) -> str:
        return f"WireAction(match_id={self.match_id!r}, turn_id={self.turn_id!r}, action={self.action!r})"


def bot_message(action: WireAction) -> bs.BotMessage:
    """The protobuf message of ``action`` (for what wants one: the Hello's checks, a conversation's record)."""
    return bs.BotMessage(action=bs.Action(match_id=action.match_id, turn_id=action.turn_id, action=action.action))


def wire_action(action: Any) -> WireAction:
    """A :class:`WireAction` of a parsed ``arena.v1.Action`` (a message :func:`read_action` left to protobuf)."""
    return WireAction(action.match_id, action.turn_id, action.action)


def read_action(raw: bytes) -> WireAction | None:
    """The Action of ``raw``, a serialized ``BotMessage`` holding one; None to leave it to protobuf.

    Accepts the message as protobuf writes it: the ``action`` field (2) alone,
    and in it ``match_id`` (1, UTF-8), ``turn_id`` (2, below 2**32) and
    ``action`` (3, from 0 to 2**31 - 1), each at most once and in that order,
    any of them absent (zero or empty, as protobuf leaves them out).
    """
    match_id, turn_id, i = read_ids(raw, 0x12)  # field 2 (action)
    if i < 0:
        return None
    end = len(raw)
    action = 0
    if i < end and raw[i] == 0x18:  # action (int32: a negative one takes ten bytes, left to protobuf)
        action, i = _varint(raw, i + 1, end)
        if not 0 <= action < 0x80000000:
            return None
    if i != end:
        return None
    return WireAction(match_id, turn_id, action)
