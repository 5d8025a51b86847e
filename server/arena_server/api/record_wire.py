"""A page of a match's moves written straight as ``MatchRecord.moves`` wire bytes, without protobuf messages.

GetMatch and CreateMatch(wait) answer with up to ``MAX_MOVES_PER_PAGE``
moves. Adding them to the reply one ``MoveRecord`` (and one ``Duration``) at a
time cost about 2.3 us a move: a 1,000-round RPS match's reply took longer to
build than the match took to play. :func:`moves_bytes` writes the same fields
from the move log's arrays; :func:`arena_server.api.matches.record_page`
merges them into the reply with one ``MergeFromString``.

The bytes are what protobuf writes for the same messages (fields in number
order, zero scalars and empty labels left out, a negative seat as a ten-byte
varint, ``elapsed`` always present): ``tests/server/test_record_wire.py``
compares them with protobuf's, for every game and for random logs.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

from arena_client.wire import VARINTS, VARINTS_BELOW, varint
from arena_games import CHANCE

_LEGAL = b"\x30\x01"
"""``legal: true`` (field 6); false is left out."""
_NO_ELAPSED = b"\x2a\x00"
"""``elapsed`` (field 5) of zero: present, empty."""
_NANOS_HEADS = [b"\x2a" + bytes((n + 1,)) + b"\x10" for n in range(11)]
"""``elapsed`` of nanoseconds only: its tag, its length and the nanoseconds' tag, by their varint's length."""
_MOVE_TAG = b"\x82\x01"
"""``MatchRecord.moves`` (field 16, length-delimited)."""


def _field_int(tag: bytes, value: int) -> bytes:
    """A varint field, or nothing for zero (as protobuf leaves it out)."""
    return tag + varint(value) if value else b""


def _seat_action_label(player: int, action: int, label: str) -> bytes:
    """The fields 2 to 4 of a move (seat, action, label): the part that repeats across a match."""
    text = label.encode()
    return (
        _field_int(b"\x10", player)
        + _field_int(b"\x18", action)
        + (b"\x22" + varint(len(text)) + text if text else b"")
    )


def _elapsed(us: int) -> bytes:
    """``elapsed`` (field 5), a Duration of ``us`` microseconds."""
    if not us:
        return _NO_ELAPSED
    if us < 1_000_000:  # nanoseconds only (field 2 of the Duration)
        nanos = varint(us * 1000)
        return _NANOS_HEADS[len(nanos)] + nanos
    seconds, rest = divmod(us, 1_000_000)
    body = (b"\x08" + varint(seconds) if seconds else b"") + (b"\x10" + varint(rest * 1000) if rest else b"")
    return b"\x2a" + VARINTS[len(body)] + body


def moves_bytes(
    players: array[int],
    actions: array[int],
    elapsed_us: array[int],
    legal: array[int],
    first_ply: int,
    show_chance: bool,
    label: Callable[[int, int], str],
) -> bytes:
    """The moves of the parallel arrays as repeated ``MatchRecord.moves`` (field 16), plies from ``first_ply``.

    A chance move (seat ``CHANCE``) is left out unless ``show_chance``; ``label(seat,
    action)`` names an action, and is asked once per distinct pair.
    """
    middles: dict[int, bytes] = {}
    elapsed: dict[int, bytes] = {}  # (a bot's thinking times repeat: hosted bots' especially)
    parts: list[bytes] = []
    seats: list[int] = players.tolist()  # (lists: compiled code indexes them without a call)
    acts: list[int] = actions.tolist()
    times: list[int] = elapsed_us.tolist()
    flags: list[int] = legal.tolist()
    for i in range(len(acts)):
        player = seats[i]
        if player == CHANCE and not show_chance:
            continue
        action = acts[i]
        key = (action << 8) | (player & 0xFF)  # (players are int8 in the log)
        middle = middles.get(key)
        if middle is None:
            middle = middles[key] = _seat_action_label(player, action, label(player, action))
        us = times[i]
        duration = elapsed.get(us)
        if duration is None:
            duration = elapsed[us] = _elapsed(us)
        ply = first_ply + i
        head = b"\x08" + (VARINTS[ply] if ply < VARINTS_BELOW else varint(ply)) if ply else b""
        flag = _LEGAL if flags[i] else b""
        n = len(head) + len(middle) + len(duration) + len(flag)
        parts.append(_MOVE_TAG)
        parts.append(VARINTS[n] if n < VARINTS_BELOW else varint(n))
        parts.append(head)
        parts.append(middle)
        parts.append(duration)
        parts.append(flag)
    return b"".join(parts)
