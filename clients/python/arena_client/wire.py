"""Protobuf wire bytes for the two messages of every move, written and read without building a message.

A remote move is one Turn out and one Action back. Building and serializing
a protobuf message field by field costs more than the rest of a move's work
on either side, so the server writes each Turn (``arena_server.seats.turn_wire``)
and the SDK writes each Action (:func:`action_message`) as bytes directly.
The bytes are exactly protobuf's (fields in field-number order, zero
scalars left out); ``tests/client/test_wire.py`` and
``tests/server/test_turn_wire.py`` compare them with ``SerializeToString``.

The SDK reads each Turn's ids and legal actions from its bytes too
(:func:`read_turn`); the rest of the Turn is parsed by protobuf only when the
bot reads it (:class:`arena_client.convert.WireTurn`).
"""

from __future__ import annotations

from typing import Any, Final

from arena_client.convert import UNREAD, WireTurn
from arena_client.turn_fields import packed_int32s, read_varint, skip_field
from arena_client.types import Turn

SMALL: Final = [bytes((n,)) for n in range(0x80)]
"""The one-byte varints, by value."""

VARINTS_BELOW: Final = 0x1000
VARINTS: Final = SMALL + [bytes(((n & 0x7F) | 0x80, n >> 7)) for n in range(0x80, VARINTS_BELOW)]
"""Every varint below :data:`VARINTS_BELOW`, by value (about 200 KB).

A match's turn ids and an RPS match's round and wins pass 127 early; from
compiled code, indexing this list costs some 20 instructions where building
the two bytes (``bytes((lo, hi))``) costs some 650.
"""

_CACHE_LIMIT: Final = 4096
_ACTION_PREFIX: Final[dict[str, bytes]] = {}


def varint(n: int) -> bytes:
    """``n`` as a protobuf varint (a negative int32/int64 takes ten bytes, as protobuf writes it)."""
    if 0 <= n < VARINTS_BELOW:
        return VARINTS[n]
    if 0 < n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    if 0 < n < 0x200000:  # (three and four bytes written out: a Duration's nanoseconds, a long match's plies)
        return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, n >> 14))
    if 0 < n < 0x10000000:
        return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, ((n >> 14) & 0x7F) | 0x80, n >> 21))
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def action_message(match_id: str, turn_id: int, action: int) -> bytes:
    """The serialized ``BotMessage{action: {match_id, turn_id, action}}``.

    Raises:
        ValueError: ``action`` is not an int32 or ``turn_id`` not a uint32 (as protobuf would).
    """
    if not (-(1 << 31) <= action < 1 << 31 and 0 <= turn_id < 1 << 32):
        raise ValueError(f"action {action} or turn id {turn_id} is out of range for arena.v1.Action")
    prefix = _ACTION_PREFIX.get(match_id)
    if prefix is None:
        raw = match_id.encode()
        prefix = b"\x0a" + varint(len(raw)) + raw if raw else b""
        if len(_ACTION_PREFIX) < _CACHE_LIMIT:
            _ACTION_PREFIX[match_id] = prefix
    tid = (b"\x10" + VARINTS[turn_id] if turn_id < VARINTS_BELOW else b"\x10" + varint(turn_id)) if turn_id else b""
    body = prefix + tid + ((b"\x18" + (SMALL[action] if 0 < action < 0x80 else varint(action))) if action else b"")
    n = len(body)
    return b"\x12" + (SMALL[n] if n < 0x80 else varint(n)) + body


def serialize(message: Any) -> bytes:
    """A message's bytes; bytes (from :func:`action_message`) as they are. The stream's request serializer."""
    return message if type(message) is bytes else message.SerializeToString()


def read_ids(raw: bytes, tag: int) -> tuple[str, int, int]:
    """The ids opening a Turn or an Action that ``raw`` holds: (match id, turn id, the index after them).

    ``raw`` must be one length-delimited field (``tag``: a ServerMessage's ``turn``, a BotMessage's
    ``action``) that makes up the whole message. Both messages start with ``match_id`` (1, UTF-8) and
    ``turn_id`` (2, a uint32), each absent when empty or zero. The index is -1 where protobuf would not
    have written the bytes so (another field, a length past the end or short of it, a match id that is
    not UTF-8, a turn id past 32 bits).
    """
    end = len(raw)
    if end < 2 or raw[0] != tag:
        return "", 0, -1
    size, i = read_varint(raw, 1, end)
    if size < 0 or i + size != end:  # one field, the whole message
        return "", 0, -1
    match_id = ""
    turn_id = 0
    if i < end and raw[i] == 0x0A:  # match_id
        n, i = read_varint(raw, i + 1, end)
        if n < 0 or i + n > end:
            return "", 0, -1
        try:
            match_id = raw[i : i + n].decode("utf-8")
        except UnicodeDecodeError:
            return "", 0, -1
        i += n
    if i < end and raw[i] == 0x10:  # turn_id (uint32)
        turn_id, i = read_varint(raw, i + 1, end)
        if not 0 <= turn_id < 0x100000000:
            return "", 0, -1
    return match_id, turn_id, i


_WIRE_TURN: Final = WireTurn
_NEW: Final = object.__new__
_UNREAD: Final = UNREAD

_LEGAL: Final[dict[bytes, tuple[int, ...]]] = {}
"""Legal-action tuples by their packed bytes (a game has few distinct lists; RPS one)."""


def read_turn(raw: bytes, seat: int, with_moves: bool) -> Turn | None:
    """The Turn of ``raw``, a serialized ``ServerMessage`` holding one, as a :class:`WireTurn`; None for protobuf.

    Reads the match and turn ids and the legal actions; the observation and
    the time budgets are parsed from the Turn's bytes when the bot first
    reads them. Accepts the message as protobuf writes it (fields in number
    order, each at most once but the public moves, zero fields left out). Any
    other layout, a negative or oversized number, a match id that is not
    UTF-8 or a truncated field returns None, and the caller parses ``raw``
    with protobuf, as it does when the Turn carries public moves and
    ``with_moves`` (a bot that wants its updates: protobuf reads them).
    """
    match_id, turn_id, i = read_ids(raw, 0x1A)  # field 3 (turn)
    if i < 0:
        return None
    end = len(raw)
    legal: tuple[int, ...] | None = ()
    if i < end and raw[i] == 0x1A:  # observation: parsed when read
        i = skip_field(raw, i + 1, end)
        if i < 0:
            return None
    if i < end and raw[i] == 0x22:  # legal actions, packed
        n, i = read_varint(raw, i + 1, end)
        if n < 0 or i + n > end:
            return None
        key = raw[i : i + n]
        legal = _LEGAL.get(key)
        if legal is None:
            legal = packed_int32s(raw, i, i + n)
            if legal is None:
                return None
            if len(_LEGAL) < _CACHE_LIMIT:
                _LEGAL[key] = legal
        i += n
    if i < end and raw[i] == 0x2A:  # time budget: parsed when read
        i = skip_field(raw, i + 1, end)
        if i < 0:
            return None
    if i < end and raw[i] == 0x32:  # overage left: parsed when read
        i = skip_field(raw, i + 1, end)
        if i < 0:
            return None
    if i < end and with_moves:
        return None
    while i < end and raw[i] == 0x3A:  # public moves, for a bot that does not want them
        i = skip_field(raw, i + 1, end)
        if i < 0:
            return None
    if i != end:
        return None
    turn: WireTurn = _NEW(_WIRE_TURN)
    turn.match_id = match_id
    turn.turn_id = turn_id
    turn.seat = seat
    turn.legal_actions = legal
    turn._observation = _UNREAD
    turn._time_budget = _UNREAD
    turn._overage_left = _UNREAD
    turn._msg = raw  # (the whole ServerMessage: no copy of the Turn a move)
    return turn
