"""A Turn's wire bytes written straight from the referee's :class:`Turn`, without a protobuf message.

Every move of every match sends one Turn, and filling an ``arena.v1.Turn``
message field by field costs more than the rest of a remote seat's share of
the move. :func:`server_message_turn` writes the bytes of
``ServerMessage{turn: ...}`` directly: the parts that repeat move after move
(the match id, the legal actions, the time budgets, the public moves) come
from small caches, and only the turn id and the observation are encoded
afresh. The RPS observation, the one game played hundreds of rounds per
match, is encoded by hand; every other observation goes through protobuf.

The bytes are exactly what ``turn_to_proto`` and ``SerializeToString`` give
(fields in field-number order, packed repeated scalars, zero scalars left
out, the time budgets always present): ``tests/server/test_turn_wire.py``
checks it for every game, and for random Turns with hypothesis.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Final

from google.protobuf.duration_pb2 import Duration

from arena_client import PublicMove, Turn
from arena_client.convert import observation_to_proto, set_duration, turn_moves_bytes
from arena_client.wire import SMALL, VARINTS, VARINTS_BELOW, varint
from arena_games.rps import RpsObservation

_RPS_OBSERVATION: Final = RpsObservation
"""(A C static when compiled: a module global is a dict lookup on every read.)"""

_CACHE_LIMIT: Final = 4096
"""Most entries each cache below keeps (a match has a handful of distinct values)."""

_MATCH_IDS: Final[dict[str, bytes]] = {}
_RPS_HEADS: Final[dict[int, bytes]] = {}
"""An RPS observation's signs and rounds fields, by ``rounds << 16 | signs`` (an int key: a tuple's hash and
lookup cost some 400 instructions)."""
_LAST_ROUNDS: Final[dict[tuple[int, ...], bytes]] = {}
_CONSTANT: Final[dict[tuple[tuple[int, ...], timedelta, timedelta], bytes]] = {}
_MOVES: Final[dict[int, tuple[PublicMove, bytes]]] = {}
"""Each public move's bytes by the move object's ``id``, the object kept beside them (so the id is not reused).

A match's referee makes one :class:`PublicMove` object per distinct move and hands
the same object to every Turn that shows it (``_Referee.joint_moves``), so the
bytes are found without reading the move's fields or hashing them."""
_WINS_HEADS: Final = [b"", b"", b"\x22\x02", b"\x22\x03", b"\x22\x04"]
"""Two seats' wins (tag 4, packed): the tag and length, by the length of the two varints (two to four bytes)."""
_PACKED_LENGTHS: Final = [bytes((0x1A, n + 2, 0x0A, n)) for n in range(0x7E)]
"""An observation field's two one-byte length headers (``Observation{rps: body}``, tag 3), by the body's length."""
_LAST_BELOW: Final = 16
_LAST_PAIRS: Final = [bytes((0x2A, 2, a, b)) for a in range(_LAST_BELOW) for b in range(_LAST_BELOW)]
"""Two seats' previous signs (``last_round``, tag 5, packed), by ``a * 16 + b`` (RPS has 3 to 15 signs): a list
index instead of a lookup by the tuple."""


def _field(tag: int, body: bytes) -> bytes:
    """A length-delimited field: its one-byte tag, the length, the body."""
    return SMALL[tag] + varint(len(body)) + body


def _packed(tag: int, values: Sequence[int]) -> bytes:
    """A packed repeated int32 field (nothing for no values, as protobuf leaves it out)."""
    if not values:
        return b""
    if len(values) < 0x80 and max(values) < 0x80 and min(values) >= 0:  # one byte per value
        return bytes((tag, len(values), *values))
    return _field(tag, b"".join([varint(v) for v in values]))


def _match_id(match_id: str) -> bytes:
    part = _MATCH_IDS.get(match_id)
    if part is None:
        part = _field(0x0A, match_id.encode()) if match_id else b""
        if len(_MATCH_IDS) < _CACHE_LIMIT:
            _MATCH_IDS[match_id] = part
    return part


def _budget(tag: int, value: timedelta) -> bytes:
    """A Duration field, always present (``turn_to_proto`` always sets both budgets)."""
    d = Duration()
    set_duration(d, value)
    return _field(tag, d.SerializeToString())


def _rps(o: RpsObservation) -> bytes:
    """``Observation{rps: ...}``, the field of a Turn (tag 3).

    Past round 127 of a match the round, and soon a seat's wins, take two-byte
    varints: those come from ``wire.VARINTS`` (with a ``varint`` call per value
    this took 1.1 us at round 516 of a 1000-round match; 0.66 us with the bytes
    built inline; the table saves building them).
    """
    signs = o.signs
    rounds = o.rounds
    key = rounds << 16 | signs if 0 <= signs < 0x10000 and rounds >= 0 else -1
    head = _RPS_HEADS.get(key) if key >= 0 else None
    if head is None:
        head = (b"\x08" + varint(signs) if signs else b"") + (b"\x10" + varint(rounds) if rounds else b"")
        if key >= 0 and len(_RPS_HEADS) < _CACHE_LIMIT:
            _RPS_HEADS[key] = head
    last_round = o.last_round
    last: bytes | None = None
    if len(last_round) == 2:
        a, b = last_round
        if 0 <= a < _LAST_BELOW and 0 <= b < _LAST_BELOW:
            last = _LAST_PAIRS[a * _LAST_BELOW + b]
    if last is None:
        last = _LAST_ROUNDS.get(last_round)
        if last is None:
            last = _packed(0x2A, last_round)
            if len(_LAST_ROUNDS) < _CACHE_LIMIT:
                _LAST_ROUNDS[last_round] = last
    wins = o.wins
    if len(wins) == 2:  # two players
        a, b = wins
        if 0 <= a < VARINTS_BELOW and 0 <= b < VARINTS_BELOW:  # one or two bytes each, from the table
            va = VARINTS[a]
            vb = VARINTS[b]
            packed = _WINS_HEADS[len(va) + len(vb)] + va + vb
        else:
            packed = _packed(0x22, wins)
    else:
        packed = _packed(0x22, wins)
    r = o.round
    if 0 <= r < VARINTS_BELOW:
        body = head + b"\x18" + VARINTS[r] + packed + last if r else head + packed + last
    else:
        body = head + b"\x18" + varint(r) + packed + last
    n = len(body)
    if n < 0x7E:  # both lengths fit in one byte
        return _PACKED_LENGTHS[n] + body
    return _field(0x1A, _field(0x0A, body))


def _observation(value: object) -> bytes:
    """Any other game's observation field (tag 3), serialized by protobuf; nothing for none."""
    if value is None:
        return b""
    return _field(0x1A, observation_to_proto(value).SerializeToString())


def _constant(legal: tuple[int, ...], time_budget: timedelta, overage_left: timedelta) -> bytes:
    """The legal actions and both time budgets: the part of a Turn that rarely changes from move to move."""
    return _packed(0x22, legal) + _budget(0x2A, time_budget) + _budget(0x32, overage_left)


def _moves(moves: Sequence[PublicMove]) -> bytes:
    """``turn_moves_bytes(moves)``, each move's bytes found by the move object's identity (see :data:`_MOVES`).

    The cache is emptied when full: a long-running server makes new move objects for every match.
    """
    if len(moves) == 2:  # (a two-seat simultaneous round, every RPS move: one concatenation, no loop)
        first = _MOVES.get(id(moves[0]))
        second = _MOVES.get(id(moves[1]))
        if first is not None and second is not None:
            return first[1] + second[1]
    out = b""
    for move in moves:
        entry = _MOVES.get(id(move))
        if entry is not None:  # (its object is the entry's own: alive, so no other object has its id)
            out += entry[1]
            continue
        part = turn_moves_bytes((move,))
        if len(_MOVES) >= _CACHE_LIMIT:
            _MOVES.clear()
        _MOVES[id(move)] = (move, part)
        out += part
    return out


def server_message_turn(turn: Turn, moves: Sequence[PublicMove]) -> bytes:
    """The serialized ``ServerMessage`` carrying ``turn`` and the public ``moves`` the seat has not seen."""
    turn_id = turn.turn_id
    legal = turn.legal_actions
    key = (legal if type(legal) is tuple else tuple(legal), turn.time_budget, turn.overage_left)
    constant = _CONSTANT.get(key)
    if constant is None:
        constant = _constant(*key)
        if len(_CONSTANT) < _CACHE_LIMIT:
            _CONSTANT[key] = constant
    if 0 <= turn_id < VARINTS_BELOW:  # (a match's turn ids pass 127 early: two bytes, from the table)
        tid = b"\x10" + VARINTS[turn_id] if turn_id else b""
    else:
        tid = b"\x10" + varint(turn_id)
    observation = turn.observation
    body = b"".join(
        (
            _MATCH_IDS.get(turn.match_id) or _match_id(turn.match_id),
            tid,
            _rps(observation) if type(observation) is _RPS_OBSERVATION else _observation(observation),
            constant,
            _moves(moves) if moves else b"",
        )
    )
    n = len(body)
    return b"\x1a" + (SMALL[n] if n < 0x80 else varint(n)) + body
