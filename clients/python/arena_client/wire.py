"""Protobuf wire bytes for the two messages of every move, written without building a message.

A remote move is one Turn out and one Action back. Building and serializing
a protobuf message field by field costs more than the rest of a move's work
on either side, so the server writes each Turn (``arena_server.seats.turn_wire``)
and the SDK writes each Action (:func:`action_message`) as bytes directly.
The bytes are exactly protobuf's (fields in field-number order, zero
scalars left out); ``tests/client/test_wire.py`` and
``tests/server/test_turn_wire.py`` compare them with ``SerializeToString``.
"""

from __future__ import annotations

from typing import Any

SMALL = [bytes((n,)) for n in range(0x80)]
"""The one-byte varints, by value."""

VARINTS_BELOW = 0x1000
VARINTS = SMALL + [bytes(((n & 0x7F) | 0x80, n >> 7)) for n in range(0x80, VARINTS_BELOW)]
"""Every varint below :data:`VARINTS_BELOW`, by value (about 200 KB).

A match's turn ids and an RPS match's round and wins pass 127 early; from
compiled code, indexing this list costs some 20 instructions where building
the two bytes (``bytes((lo, hi))``) costs some 650.
"""

_CACHE_LIMIT = 4096
_ACTION_PREFIX: dict[str, bytes] = {}


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
