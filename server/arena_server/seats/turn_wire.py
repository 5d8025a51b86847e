"""Turn frames for stdio bots, put together from wire fragments instead of a protobuf message per move.

A subprocess seat sends one ``ServerMessage{turn}`` every move, in the
length-delimited protobuf framing. :func:`turn_frame` writes the same bytes as
``encode_turn`` of the message ``turn_to_proto`` builds, without building it:

* a Turn's fields are written in field-number order, and every field that
  stays the same move after move (the match id, the legal actions, the two
  time budgets) is a fragment serialised once by protobuf itself and then
  reused from a small cache;
* the turn id is one varint;
* an RPS observation (one message per round of the most played game) is
  encoded by hand; every other game's observation field is serialised by
  protobuf, through ``observation_to_proto`` as before;
* public moves are the memoised per-move fragments that ``turn_to_proto``
  merges too (repeated fields concatenate on the wire).

``tests/server/test_stdio_turn_frame.py`` checks with hypothesis that the
bytes equal protobuf's for every game's observations, turn ids, budgets,
legal actions and moves, so a bot cannot tell which encoder wrote a frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from arena.v1 import bot_session_pb2 as bs
from arena_client import PublicMove, Turn
from arena_client.convert import observation_to_proto, set_duration, turn_moves_bytes
from arena_games.rps import RpsObservation

_CACHE_LIMIT = 4096
"""Most entries each fragment cache keeps (a match has a handful of distinct values)."""

_ONE_BYTE = tuple(bytes((n,)) for n in range(0x80))
"""The varint of every value below 128, ready made."""


def varint(value: int) -> bytes:
    """Protobuf's base-128 varint of ``value``; a negative int32 is sign-extended to 64 bits (ten bytes)."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if value < 0:
        value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_MATCH_IDS: dict[str, bytes] = {}
_LEGAL: dict[tuple[int, ...], bytes] = {}
_BUDGETS: dict[timedelta, bytes] = {}
_OVERAGES: dict[timedelta, bytes] = {}
_TAILS: dict[tuple[tuple[int, ...], timedelta, timedelta], bytes] = {}
"""Fields 4 to 6 (legal actions, time budget, overage left) in one piece: they change seldom in a match."""


def _match_id(match_id: str) -> bytes:
    fragment = _MATCH_IDS.get(match_id)
    if fragment is None:
        fragment = bs.Turn(match_id=match_id).SerializeToString()
        if len(_MATCH_IDS) < _CACHE_LIMIT:
            _MATCH_IDS[match_id] = fragment
    return fragment


def _legal(actions: Sequence[int]) -> bytes:
    key = actions if isinstance(actions, tuple) else tuple(actions)
    fragment = _LEGAL.get(key)
    if fragment is None:
        fragment = bs.Turn(legal_actions=key).SerializeToString()
        if len(_LEGAL) < _CACHE_LIMIT:
            _LEGAL[key] = fragment
    return fragment


def _budget(value: timedelta) -> bytes:
    fragment = _BUDGETS.get(value)
    if fragment is None:
        msg = bs.Turn()
        set_duration(msg.time_budget, value)
        fragment = msg.SerializeToString()
        if len(_BUDGETS) < _CACHE_LIMIT:
            _BUDGETS[value] = fragment
    return fragment


def _overage(value: timedelta) -> bytes:
    fragment = _OVERAGES.get(value)
    if fragment is None:
        msg = bs.Turn()
        set_duration(msg.overage_left, value)
        fragment = msg.SerializeToString()
        if len(_OVERAGES) < _CACHE_LIMIT:
            _OVERAGES[value] = fragment
    return fragment


_SMALL = tuple(bytes((n,)) if n < 0x80 else bytes(((n & 0x7F) | 0x80, n >> 7)) for n in range(1 << 14))
"""The varint of every value below 16384 (one or two bytes), ready made."""

_PACKED: dict[tuple[bytes, tuple[int, ...]], bytes] = {}
_RPS_HEADS: dict[tuple[int, int], bytes] = {}


def _packed(tag: bytes, values: Sequence[int]) -> bytes:
    """A packed repeated int32 field (nothing when empty, as protobuf writes it), memoised by value."""
    if not values:
        return b""
    key = (tag, values if isinstance(values, tuple) else tuple(values))
    fragment = _PACKED.get(key)
    if fragment is None:
        body = b"".join([varint(v) for v in values])
        fragment = tag + varint(len(body)) + body
        if len(_PACKED) < _CACHE_LIMIT:
            _PACKED[key] = fragment
    return fragment


def _rps(value: RpsObservation) -> bytes:
    """Turn field 3 (``observation``) holding ``Observation.rps``, as ``observation_to_proto`` fills it."""
    signs, rounds, done = value.signs, value.rounds, value.round
    head = _RPS_HEADS.get((signs, rounds))
    if head is None:
        head = (b"\x08" + varint(signs) if signs else b"") + (b"\x10" + varint(rounds) if rounds else b"")
        if len(_RPS_HEADS) < _CACHE_LIMIT:
            _RPS_HEADS[signs, rounds] = head
    body = b"".join(
        (
            head,
            (b"\x18" + (_SMALL[done] if 0 < done < 0x4000 else varint(done))) if done else b"",
            _packed(b"\x22", value.wins) if value.wins else b"",
            _packed(b"\x2a", value.last_round) if value.last_round else b"",
        )
    )
    size = len(body)
    if size < 0x7E:  # the rps message and the observation around it each take a one-byte length
        return b"\x1a" + _SMALL[size + 2] + b"\x0a" + _SMALL[size] + body
    rps = b"\x0a" + varint(size) + body
    return b"\x1a" + varint(len(rps)) + rps


def _observation(value: Any) -> bytes:
    """Turn field 3 for any observation (protobuf's own bytes; by hand for RPS)."""
    if value is None:
        return b""
    if type(value) is RpsObservation:
        return _rps(value)
    msg = bs.Turn()
    observation_to_proto(value, msg.observation)
    return msg.SerializeToString()


def turn_frame(turn: Turn, moves: Sequence[PublicMove]) -> bytes:
    """The length-delimited frame of ``ServerMessage{turn: turn_to_proto(turn, moves)}``, byte for byte.

    Args:
        turn: The Turn to send.
        moves: Public moves since the seat's last message (merged into the Turn).

    Returns:
        The varint length prefix and the serialised ServerMessage, ready to write to a bot's stdin.
    """
    turn_id = turn.turn_id
    observation = turn.observation
    legal = turn.legal_actions
    budgets = (legal if type(legal) is tuple else tuple(legal), turn.time_budget, turn.overage_left)
    tail = _TAILS.get(budgets)
    if tail is None:
        tail = _legal(budgets[0]) + _budget(budgets[1]) + _overage(budgets[2])
        if len(_TAILS) < _CACHE_LIMIT:
            _TAILS[budgets] = tail
    body = b"".join(
        (
            _match_id(turn.match_id),
            (b"\x10" + (_SMALL[turn_id] if turn_id < 0x4000 else varint(turn_id))) if turn_id else b"",
            _rps(observation) if type(observation) is RpsObservation else _observation(observation),
            tail,
            turn_moves_bytes(moves) if moves else b"",
        )
    )
    size = len(body)
    if size < 0x7E:  # the ServerMessage and its Turn each take a one-byte length
        return _SMALL[size + 2] + b"\x1a" + _SMALL[size] + body
    message = b"\x1a" + varint(size) + body
    return varint(len(message)) + message
