"""A Turn's observation and time budgets read from its bytes, when the bot first reads them.

The SDK keeps each Turn as the bytes of its ``ServerMessage`` and reads the ids
and the legal actions at once (:func:`arena_client.wire.read_turn`); the rest
is decoded the first time the bot looks at it
(:class:`arena_client.convert.WireTurn`). Decoding that rest with protobuf
meant parsing the whole message and converting the observation: for a bot that
reads its observation every move, as the reference RPS bots do, that was some
5.7 us a move (issue 20's thirty-sixth pass), about as much as the rest of the
SDK's move.

This module reads the RPS observation (the one game played hundreds of rounds
a match) and the two durations from the bytes instead. It accepts them only in
the layout protobuf writes (fields in field-number order and each at most
once, repeated fields packed, zero scalars usually left out, int32 values from
0 to 2**31 - 1 in at most five bytes); for anything else, including every
other game's observation, it returns :data:`NOT_READ` and the caller parses
the message with protobuf, as before. ``tests/client/test_read_turn.py``
compares every value read here with protobuf's, on hypothesis-chosen Turns and
on edited bytes.

The public moves (field 7) are not looked at: a bot that wants them gets the
message parsed by protobuf, and one that does not never reads them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from arena_games.rps import rps_observation

NOT_READ: Final[Any] = object()
"""What a reader returns for bytes it leaves to protobuf."""

_INT32_END: Final = 0x80000000
_CACHE_LIMIT: Final = 4096
_DURATIONS: Final[dict[int, timedelta]] = {}
"""Durations by ``seconds << 30 | nanos`` (a match sends the same budgets move after move)."""


def read_varint(raw: bytes, i: int, end: int) -> tuple[int, int]:
    """The varint at ``raw[i]`` of at most five bytes, and the index after it; (-1, i) if there is none."""
    value = 0
    shift = 0
    while i < end and shift < 35:
        b = raw[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7
    return -1, i


def field_span(raw: bytes, tag: int) -> tuple[int, int]:
    """Where the body of the Turn's length-delimited field ``tag`` is in ``raw``, a ``ServerMessage{turn}``.

    ``raw`` is a Turn that :func:`arena_client.wire.read_turn` accepted: its
    fields come in order, each at most once (but the public moves), so the
    walk stops at the first field past ``tag``.

    ``tag`` is the field's first byte (``0x1A`` the observation, ``0x2A`` the
    time budget, ``0x32`` the overage left). Returns ``(start, end)``; an
    empty span ``(i, i)`` when the field is absent, which protobuf reads as
    the empty message; ``(-1, -1)`` when the bytes are not one Turn with its
    fields in order up to that one.
    """
    end = len(raw)
    if end < 2 or raw[0] != 0x1A:
        return -1, -1
    size, i = read_varint(raw, 1, end)
    if size < 0 or i + size != end:
        return -1, -1
    while i < end:
        t = raw[i]
        if t == tag:
            n, j = read_varint(raw, i + 1, end)
            if n < 0 or j + n > end:
                return -1, -1
            return j, j + n
        if t > tag:
            return i, i  # (the fields come in order: this one is absent)
        wire_type = t & 7
        if wire_type == 0:
            _value, i = read_varint(raw, i + 1, end)
            if _value < 0:
                return -1, -1
        elif wire_type == 2:
            i = skip_field(raw, i + 1, end)
            if i < 0:
                return -1, -1
        else:
            return -1, -1
    return i, i


def skip_field(raw: bytes, i: int, end: int) -> int:
    """The index after the length-delimited field whose length starts at ``raw[i]``; -1 if it overruns."""
    n, i = read_varint(raw, i, end)
    if n < 0 or i + n > end:
        return -1
    return i + n


def packed_int32s(raw: bytes, i: int, end: int) -> tuple[int, ...] | None:
    """The packed int32s of ``raw[i:end]``, each from 0 to 2**31 - 1; None if they are not."""
    if end - i == 2 and raw[i] < 0x80 and raw[i + 1] < 0x80:  # two one-byte values: two seats' signs or wins
        return (raw[i], raw[i + 1])
    out: list[int] = []
    while i < end:
        value, i = read_varint(raw, i, end)
        if not 0 <= value < _INT32_END:
            return None
        out.append(value)
    return tuple(out)


def _int32_field(raw: bytes, i: int, end: int, tag: int) -> tuple[int, int]:
    """The int32 field ``tag`` at ``raw[i]`` (0 when the next field is another) and the index after it.

    The value is -1 when it is not from 0 to 2**31 - 1 in at most five bytes.
    """
    if i < end and raw[i] == tag:
        value, i = read_varint(raw, i + 1, end)
        return (value if value < _INT32_END else -1), i
    return 0, i


def _packed_field(raw: bytes, i: int, end: int, tag: int) -> tuple[tuple[int, ...] | None, int]:
    """The packed repeated int32 field ``tag`` at ``raw[i]`` (empty when the next field is another) and the
    index after it; None for a length past ``end`` or a value :func:`packed_int32s` does not take."""
    if i < end and raw[i] == tag:
        n, i = read_varint(raw, i + 1, end)
        if n < 0 or i + n > end:
            return None, i
        return packed_int32s(raw, i, i + n), i + n
    return (), i


def read_observation(raw: bytes) -> Any:
    """The observation of the Turn in ``raw`` when it is an RPS one (or none); :data:`NOT_READ` otherwise."""
    start, end = field_span(raw, 0x1A)
    if start < 0:
        return NOT_READ
    if start == end:
        return None  # Observation{}: no game's observation
    if raw[start] != 0x0A:  # (another game's, which protobuf reads)
        return NOT_READ
    n, i = read_varint(raw, start + 1, end)
    if n < 0 or i + n != end:
        return NOT_READ
    signs, i = _int32_field(raw, i, end, 0x08)
    rounds, i = _int32_field(raw, i, end, 0x10)
    round_, i = _int32_field(raw, i, end, 0x18)
    wins, i = _packed_field(raw, i, end, 0x22)
    last, i = _packed_field(raw, i, end, 0x2A)
    if i != end or signs < 0 or rounds < 0 or round_ < 0 or wins is None or last is None:
        return NOT_READ
    return rps_observation(signs, rounds, round_, wins, last)


def read_duration(raw: bytes, tag: int) -> Any:
    """The duration field ``tag`` (``0x2A`` or ``0x32``) of the Turn in ``raw``, as protobuf's ``ToTimedelta``.

    :data:`NOT_READ` for a layout protobuf reads but this does not: a negative
    duration, nanoseconds past 999,999,999, a field twice or out of order.
    """
    start, end = field_span(raw, tag)
    if start < 0:
        return NOT_READ
    i = start
    seconds = 0
    nanos = 0
    if i < end and raw[i] == 0x08:
        seconds, i = read_varint(raw, i + 1, end)
        if seconds < 0:
            return NOT_READ
    if i < end and raw[i] == 0x10:
        nanos, i = read_varint(raw, i + 1, end)
        if not 0 <= nanos < 1_000_000_000:
            return NOT_READ
    if i != end:
        return NOT_READ
    if seconds >= 1 << 32:
        return timedelta(seconds=seconds, microseconds=nanos // 1000)
    key = seconds << 30 | nanos
    value = _DURATIONS.get(key)
    if value is None:
        value = timedelta(seconds=seconds, microseconds=nanos // 1000)
        if len(_DURATIONS) < _CACHE_LIMIT:
            _DURATIONS[key] = value
    return value
