"""Translation between ``arena.v1`` protobuf messages and the plain types.

This is the one place where protobuf meets the SDK's dataclasses; the server's
gRPC services and stdio codec use it too, so both ends agree by construction.

Observations: each game's observation dataclass (in ``arena_games``) mirrors
its proto message field by field, with the same names. Nested messages are
listed in :data:`NESTED` so the generic converter knows which dataclass to
build; games register themselves in :data:`OBSERVATIONS`.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import common_pb2 as common
from arena.v1 import observations_pb2 as obs
from arena_client.turn_fields import NOT_READ, read_duration, read_observation
from arena_client.types import (
    MatchInfo,
    MatchResult,
    PublicMove,
    SeatInfo,
    Termination,
    TimeControl,
    Turn,
    Update,
)
from arena_games import ParamValue
from arena_games.rps import RpsObservation, rps_observation

OBSERVATIONS: dict[str, tuple[type[Any], str]] = {"rps": (RpsObservation, "rps")}
"""game name -> (observation dataclass, field name in ``arena.v1.Observation``)."""

_BY_CLASS: dict[type[Any], str] = {cls: fieldname for cls, fieldname in OBSERVATIONS.values()}

NESTED: dict[str, type[Any]] = {}
"""proto message full name -> dataclass, for messages nested inside observations."""


def register_observation(game: str, cls: type[Any], oneof_field: str, nested: Mapping[str, type[Any]] = {}) -> None:
    """Declare a game's observation dataclass and the ``Observation`` oneof field it maps to."""
    OBSERVATIONS[game] = (cls, oneof_field)
    _BY_CLASS[cls] = oneof_field
    NESTED.update(nested)


# -- small values ---------------------------------------------------------------------------------


def duration(value: timedelta) -> Duration:
    d = Duration()
    d.FromTimedelta(value)
    return d


_CACHE_LIMIT = 4096
"""Most entries each per-message cache below keeps (a match has a handful of distinct values)."""
_DURATION_PARTS: dict[timedelta, tuple[int, int]] = {}
_TIMEDELTAS: dict[tuple[int, int], timedelta] = {}
_MOVE_BYTES: dict[tuple[int, int, str], bytes] = {}


def set_duration(out: Duration, value: timedelta) -> None:
    """``out.FromTimedelta(value)``, memoised: a Turn carries the same budgets move after move."""
    parts = _DURATION_PARTS.get(value)
    if parts is None:
        d = Duration()
        d.FromTimedelta(value)
        parts = (d.seconds, d.nanos)
        if len(_DURATION_PARTS) < _CACHE_LIMIT:
            _DURATION_PARTS[value] = parts
    out.seconds, out.nanos = parts


def to_timedelta(d: Duration) -> timedelta:
    """``d.ToTimedelta()``, memoised (see :func:`set_duration`)."""
    key = (d.seconds, d.nanos)
    value = _TIMEDELTAS.get(key)
    if value is None:
        value = d.ToTimedelta()
        if len(_TIMEDELTAS) < _CACHE_LIMIT:
            _TIMEDELTAS[key] = value
    return value


def turn_moves_bytes(moves: typing.Iterable[PublicMove]) -> bytes:
    """The Turn wire bytes of ``moves`` (field ``moves`` only), from memoised per-move fragments.

    Repeated fields concatenate on the wire, so merging these bytes into a Turn
    appends the moves: one parse instead of a message construction per move.
    """
    parts = []
    for m in moves:
        key = (m.seat, m.action, m.label)
        fragment = _MOVE_BYTES.get(key)
        if fragment is None:
            move = common.PublicMove(seat=m.seat, action=m.action, label=m.label)
            fragment = bs.Turn(moves=[move]).SerializeToString()
            if len(_MOVE_BYTES) < _CACHE_LIMIT:
                _MOVE_BYTES[key] = fragment
        parts.append(fragment)
    return b"".join(parts)


def param_value(value: ParamValue, out: common.ParamValue | None = None) -> common.ParamValue:
    """One parameter value as ``arena.v1.ParamValue`` (filling ``out`` if given)."""
    pv = common.ParamValue() if out is None else out
    if isinstance(value, bool):
        pv.bool_value = value
    elif isinstance(value, int):
        pv.int_value = value
    else:
        pv.string_value = str(value)
    return pv


def params_to_proto(params: Mapping[str, ParamValue], target: Any) -> None:
    """Fill a ``map<string, ParamValue>`` field from a dict."""
    for key, value in params.items():
        param_value(value, target[key])


def params_from_proto(pmap: Mapping[str, common.ParamValue]) -> dict[str, ParamValue]:
    out: dict[str, ParamValue] = {}
    for key, pv in pmap.items():
        kind = pv.WhichOneof("kind")
        if kind == "int_value":
            out[key] = pv.int_value
        elif kind == "bool_value":
            out[key] = pv.bool_value
        elif kind == "string_value":
            out[key] = pv.string_value
    return out


def time_control_to_proto(tc: TimeControl) -> common.TimeControl:
    return common.TimeControl(per_move=duration(tc.per_move), overage=duration(tc.overage), grace=duration(tc.grace))


def time_control_from_proto(tc: common.TimeControl) -> TimeControl:
    return TimeControl(tc.per_move.ToTimedelta(), tc.overage.ToTimedelta(), tc.grace.ToTimedelta())


def seat_to_proto(s: SeatInfo) -> common.SeatInfo:
    return common.SeatInfo(seat=s.seat, bot_name=s.bot_name, bot_version=s.bot_version, kind=s.kind)


def seat_from_proto(s: common.SeatInfo) -> SeatInfo:
    return SeatInfo(s.seat, s.bot_name, s.bot_version, s.kind)


def moves_to_proto(moves: typing.Iterable[PublicMove]) -> list[common.PublicMove]:
    return [common.PublicMove(seat=m.seat, action=m.action, label=m.label) for m in moves]


def moves_from_proto(moves: typing.Iterable[common.PublicMove]) -> tuple[PublicMove, ...]:
    return tuple(PublicMove(m.seat, m.action, m.label) for m in moves)


# -- observations ---------------------------------------------------------------------------------


def _fill(msg: Message, value: Any) -> None:
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        if isinstance(item, tuple):
            if item and dataclasses.is_dataclass(item[0]):
                container = getattr(msg, f.name)
                for sub in item:
                    _fill(container.add(), sub)
            else:
                getattr(msg, f.name).extend(item)
        elif dataclasses.is_dataclass(item):
            _fill(getattr(msg, f.name), item)
        elif item is not None:
            setattr(msg, f.name, item)


def _build(msg: Message) -> Any:
    cls = NESTED.get(msg.DESCRIPTOR.full_name) or _OBS_CLASS_BY_PROTO.get(msg.DESCRIPTOR.full_name)
    if cls is None:
        raise ValueError(f"no dataclass registered for {msg.DESCRIPTOR.full_name}")
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        fd = msg.DESCRIPTOR.fields_by_name[f.name]
        value = getattr(msg, f.name)
        if fd.is_repeated:
            if fd.message_type is not None:
                kwargs[f.name] = tuple(_build(v) for v in value)
            else:
                kwargs[f.name] = tuple(value)
        elif fd.message_type is not None:
            kwargs[f.name] = _build(value) if msg.HasField(f.name) else None
        else:
            kwargs[f.name] = value
    return cls(**kwargs)


_OBS_CLASS_BY_PROTO: dict[str, type[Any]] = {}


def observation_to_proto(value: Any, out: obs.Observation | None = None) -> obs.Observation:
    """Wrap an engine observation dataclass in ``arena.v1.Observation`` (filling ``out`` if given)."""
    if out is None:
        out = obs.Observation()
    if value is None:
        return out
    if type(value) is RpsObservation:  # the hot path: one message per RPS round
        r = out.rps
        r.signs = value.signs
        r.rounds = value.rounds
        r.round = value.round
        r.wins.extend(value.wins)
        r.last_round.extend(value.last_round)
        return out
    fieldname = _BY_CLASS.get(type(value))
    if fieldname is None:
        raise ValueError(f"no proto mapping for observation type {type(value).__name__}")
    _fill(getattr(out, fieldname), value)
    return out


def observation_from_proto(msg: obs.Observation) -> Any:
    """The engine dataclass inside an ``arena.v1.Observation`` (None when empty)."""
    if msg.HasField("rps"):  # the hot path (slicing a repeated field first makes the tuple twice as fast)
        inner = msg.rps
        return rps_observation(inner.signs, inner.rounds, inner.round, tuple(inner.wins[:]), tuple(inner.last_round[:]))
    which = msg.WhichOneof("game")
    if which is None:
        return None
    inner = getattr(msg, which)
    if not _OBS_CLASS_BY_PROTO:
        _index_observations()
    if inner.DESCRIPTOR.full_name not in _OBS_CLASS_BY_PROTO:
        _index_observations()
    return _build(inner)


def _index_observations() -> None:
    for cls, fieldname in OBSERVATIONS.values():
        desc = obs.Observation.DESCRIPTOR.fields_by_name[fieldname].message_type
        assert desc is not None
        _OBS_CLASS_BY_PROTO[desc.full_name] = cls


# -- session messages -----------------------------------------------------------------------------


def match_info_from_proto(m: bs.MatchStarted) -> MatchInfo:
    return MatchInfo(
        match_id=m.match_id,
        game=m.game,
        params=params_from_proto(m.params),
        seat=m.seat,
        seats=tuple(seat_from_proto(s) for s in m.seats),
        time_control=time_control_from_proto(m.time_control),
        seed_sha256=m.seed_sha256,
        rated=m.rated,
    )


def match_info_to_proto(info: MatchInfo) -> bs.MatchStarted:
    msg = bs.MatchStarted(
        match_id=info.match_id,
        game=info.game,
        seat=info.seat,
        seats=[seat_to_proto(s) for s in info.seats],
        time_control=time_control_to_proto(info.time_control),
        seed_sha256=info.seed_sha256,
        rated=info.rated,
    )
    params_to_proto(info.params, msg.params)
    return msg


def turn_to_proto(turn: Turn, moves: typing.Iterable[PublicMove], out: bs.Turn | None = None) -> bs.Turn:
    """Fill ``out`` (e.g. ``server_message.turn``, avoiding a copy) or a new Turn message."""
    msg = bs.Turn() if out is None else out
    msg.match_id = turn.match_id
    msg.turn_id = turn.turn_id
    if turn.observation is not None:
        observation_to_proto(turn.observation, msg.observation)
    msg.legal_actions.extend(turn.legal_actions)
    set_duration(msg.time_budget, turn.time_budget)
    set_duration(msg.overage_left, turn.overage_left)
    if moves:
        msg.MergeFromString(turn_moves_bytes(moves))
    return msg


def turn_from_proto(msg: bs.Turn, seat: int) -> Turn:
    """The :class:`Turn` in ``msg``: a :class:`WireTurn` (observation and time budgets decoded when first read)."""
    turn = _new_wire_turn(WireTurn)
    turn.match_id = msg.match_id
    turn.turn_id = msg.turn_id
    turn.seat = seat
    turn.legal_actions = tuple(msg.legal_actions[:])
    turn._observation = UNREAD
    turn._time_budget = UNREAD
    turn._overage_left = UNREAD
    turn._msg = msg
    return turn


UNREAD: Any = object()
"""Stands in a :class:`WireTurn`'s slot for a field not decoded yet."""
_TURN_FIELDS = tuple(f.name for f in dataclasses.fields(Turn))


_DURATION_TAGS = {"time_budget": 0x2A, "overage_left": 0x32}
"""The first byte of each duration field of a Turn (fields 5 and 6, length-delimited)."""


def _decoded_duration(slot: str, field: str) -> property:
    """A :class:`WireTurn` property: the duration ``field`` of its message, decoded on first read into ``slot``."""

    tag = _DURATION_TAGS[field]

    def read(turn: WireTurn) -> timedelta:
        value = getattr(turn, slot)
        if value is UNREAD:
            msg = turn._msg
            value = read_duration(msg, tag) if type(msg) is bytes else NOT_READ
            if value is NOT_READ:
                value = to_timedelta(getattr(_message(turn), field))
            setattr(turn, slot, value)
        return value  # type: ignore[no-any-return]

    def put(turn: WireTurn, value: timedelta) -> None:
        setattr(turn, slot, value)

    return property(read, put)


class WireTurn(Turn):
    """A :class:`Turn` read from an ``arena.v1.Turn``, whose observation and time budgets are decoded on first read.

    The match and turn ids, the seat and the legal actions are decoded at
    once (by the SDK from the Turn's bytes, :func:`arena_client.wire.read_turn`).
    The observation (a game's dataclass) and the two durations are decoded the
    first time the bot reads them, and kept: a bot that plays from its updates,
    or never looks at the clock, does not pay for them on every move. From a
    Turn's bytes, an RPS observation and the durations are read by hand
    (:mod:`arena_client.turn_fields`); anything else is parsed by protobuf. In every other
    way it is a Turn: it compares equal to a Turn with the same fields, its
    repr reads ``Turn(...)``, and ``dataclasses.replace`` and ``copy`` work.

    The three lazy fields live in slots of their own (``_observation``...), which
    start as :data:`UNREAD`; Turn's own slots of those names stay empty, behind
    the properties. So a new WireTurn is filled by plain attribute writes (from
    compiled code, about 200 instructions each; a slot descriptor's ``__set__``
    called as a function costs some 470).
    """

    __slots__ = ("_msg", "_observation", "_overage_left", "_time_budget")
    _msg: bs.Turn | bytes
    """The message the fields not read yet are decoded from (:func:`turn_from_proto`), or the bytes of the
    ServerMessage holding it (:func:`arena_client.wire.read_turn`), parsed when a field is first read."""
    _observation: Any
    _time_budget: Any
    _overage_left: Any

    @property  # type: ignore[override]
    def observation(self) -> Any:
        value = self._observation
        if value is UNREAD:
            msg = self._msg
            value = read_observation(msg) if type(msg) is bytes else NOT_READ  # (an RPS one, from its bytes)
            if value is NOT_READ:
                value = observation_from_proto(_message(self).observation)
            self._observation = value
        return value

    @observation.setter
    def observation(self, value: Any) -> None:
        self._observation = value

    time_budget = _decoded_duration("_time_budget", "time_budget")  # type: ignore[assignment]
    overage_left = _decoded_duration("_overage_left", "overage_left")  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Turn):
            return NotImplemented
        return [getattr(self, n) for n in _TURN_FIELDS] == [getattr(other, n) for n in _TURN_FIELDS]

    __hash__ = None  # type: ignore[assignment]  # (as Turn's: a mutable dataclass)

    def __repr__(self) -> str:
        return "Turn(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in _TURN_FIELDS) + ")"


_new_wire_turn = object.__new__


def _message(turn: WireTurn) -> bs.Turn:
    """The Turn message ``turn``'s fields not read yet come from (parsed now, and kept, if it was bytes)."""
    msg = turn._msg
    if type(msg) is bytes:
        msg = turn._msg = bs.ServerMessage.FromString(msg).turn
    return msg  # type: ignore[return-value]


def update_to_proto(update: Update) -> bs.Update:
    return bs.Update(
        match_id=update.match_id,
        moves=moves_to_proto(update.moves),
        observation=observation_to_proto(update.observation),
    )


def update_from_proto(msg: bs.Update) -> Update:
    return Update(msg.match_id, moves_from_proto(msg.moves), observation_from_proto(msg.observation))


def result_to_proto(result: MatchResult) -> bs.MatchEnded:
    msg = bs.MatchEnded(
        match_id=result.match_id,
        returns=list(result.returns),
        termination=int(result.termination),  # type: ignore[arg-type]
        reason=result.reason,
        seed=result.seed,
        moves=moves_to_proto(result.moves),
        observation=observation_to_proto(result.observation),
    )
    if result.offender is not None:
        msg.offender = result.offender
    return msg


def result_from_proto(msg: bs.MatchEnded) -> MatchResult:
    return MatchResult(
        match_id=msg.match_id,
        returns=tuple(msg.returns),
        termination=Termination(msg.termination) if msg.termination else Termination.ABORTED,
        reason=msg.reason,
        seed=msg.seed,
        offender=msg.offender if msg.HasField("offender") else None,
        observation=observation_from_proto(msg.observation),
        moves=moves_from_proto(msg.moves),
    )


# -- game registrations (one line per game beyond RPS) ----------------------------------------------

from arena_games.dots_and_boxes import DotsAndBoxesObservation  # noqa: E402
from arena_games.liars_dice import (  # noqa: E402
    LiarsDiceBid,
    LiarsDiceHand,
    LiarsDiceObservation,
    LiarsDiceRoundResult,
)
from arena_games.tic_tac_toe import TicTacToeObservation  # noqa: E402

register_observation("tic_tac_toe", TicTacToeObservation, "tic_tac_toe")
register_observation("dots_and_boxes", DotsAndBoxesObservation, "dots_and_boxes")
register_observation(
    "liars_dice",
    LiarsDiceObservation,
    "liars_dice",
    nested={
        "arena.v1.LiarsDiceBid": LiarsDiceBid,
        "arena.v1.LiarsDiceHand": LiarsDiceHand,
        "arena.v1.LiarsDiceRoundResult": LiarsDiceRoundResult,
    },
)
