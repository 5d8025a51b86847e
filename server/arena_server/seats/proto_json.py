"""Proto3 JSON for the stdio codec's hot path: the same objects as ``json_format``, several times faster.

``json_format.MessageToDict`` walks every message through generic Python code
(about 40 us for a rock-paper-scissors Turn), which dominated the JSON-lines
seat's per-move cost. :func:`to_json_dict` compiles, once per message type, a
plan (each field's JSON name and value converter, and the defaults a message
without them still prints) and then only loops over ``ListFields``. Its output
equals ``MessageToDict(message, always_print_fields_with_no_presence=True)``
(tested on every message kind of every game), except that map entries come
sorted by key so the bytes do not depend on protobuf's hash order. Well-known
types keep their own forms: Duration and Timestamp through their
``ToJsonString`` (what ``json_format`` calls), the rest through ``json_format``.

:func:`parse_action` is the matching shortcut for reading: the one message a
bot sends every move, in its plain form, becomes a ``BotMessage`` without
``json_format.ParseDict``; anything else returns None and takes the full
(validating) path.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.internal import type_checkers
from google.protobuf.message import Message

from arena.v1 import bot_session_pb2 as bs

Converter = Callable[[Any], Any]
Plan = Callable[[Message], Any]

_PLANS: dict[str, Plan] = {}


def to_json_dict(message: Message) -> dict[str, Any]:
    """``message`` as its canonical proto3 JSON object, every field without presence included."""
    descriptor: Descriptor = message.DESCRIPTOR  # type: ignore[assignment]
    result: dict[str, Any] = _plan(descriptor)(message)
    return result


def _plan(descriptor: Descriptor) -> Plan:
    plan = _PLANS.get(descriptor.full_name)
    if plan is None:
        plan = _PLANS[descriptor.full_name] = _compile(descriptor)
    return plan


def _compile(descriptor: Descriptor) -> Plan:
    if descriptor.full_name in ("google.protobuf.Duration", "google.protobuf.Timestamp"):
        return _to_json_string  # "1.500s", "2026-11-22T10:00:00Z"
    if descriptor.file.name.startswith("google/protobuf/"):  # the other well-known types have their own forms

        def well_known(message: Message) -> Any:
            return json_format.MessageToDict(message, always_print_fields_with_no_presence=True)

        return well_known
    by_number: dict[int, tuple[str, Converter]] = {}
    defaults: list[tuple[str, Callable[[], Any]]] = []
    for field in descriptor.fields:
        by_number[field.number] = (field.json_name, _field_converter(field))
        if not field.has_presence:
            defaults.append((field.json_name, _default(field)))

    def encode(message: Message) -> dict[str, Any]:
        js = {}
        for field, value in message.ListFields():
            name, convert = by_number[field.number]
            js[name] = convert(value)
        for name, default in defaults:
            if name not in js:
                js[name] = default()
        return js

    return encode


def _to_json_string(message: Any) -> str:
    return str(message.ToJsonString())


def _field_converter(field: FieldDescriptor) -> Converter:
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        key: Converter = _bool_key if entry.fields_by_name["key"].cpp_type == FieldDescriptor.CPPTYPE_BOOL else str
        value = _value_converter(entry.fields_by_name["value"])
        return lambda entries: {key(k): value(entries[k]) for k in sorted(entries)}
    convert = _value_converter(field)
    if field.is_repeated:
        return lambda values: [convert(v) for v in values]
    return convert


def _value_converter(field: FieldDescriptor) -> Converter:
    cpp = field.cpp_type
    if cpp == FieldDescriptor.CPPTYPE_MESSAGE:
        sub = field.message_type
        assert sub is not None
        return lambda message: _plan(sub)(message)
    if cpp == FieldDescriptor.CPPTYPE_ENUM:
        assert field.enum_type is not None
        names = {v.number: v.name for v in field.enum_type.values}
        return lambda number: names.get(number, number)
    if cpp == FieldDescriptor.CPPTYPE_STRING:
        if field.type == FieldDescriptor.TYPE_BYTES:
            return lambda data: base64.b64encode(data).decode("ascii")
        return _same
    if cpp in (FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64):
        return str
    if cpp == FieldDescriptor.CPPTYPE_DOUBLE:
        return _double
    if cpp == FieldDescriptor.CPPTYPE_FLOAT:
        return _float
    return _same  # bool and 32-bit integers


def _bool_key(key: bool) -> str:
    return "true" if key else "false"


def _same(value: Any) -> Any:
    return value


def _double(value: float) -> float | str:
    if math.isinf(value):
        return "-Infinity" if value < 0 else "Infinity"
    if math.isnan(value):
        return "NaN"
    return value


def _float(value: float) -> float | str:
    special = _double(value)
    return special if isinstance(special, str) else type_checkers.ToShortestFloat(value)


def _default(field: FieldDescriptor) -> Callable[[], Any]:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        return dict
    if field.is_repeated:
        return list
    value = _value_converter(field)(field.default_value)
    return lambda: value


# -- reading -------------------------------------------------------------------------------------

_ACTION_KEYS = {"matchId": "match_id", "match_id": "match_id", "turnId": "turn_id", "turn_id": "turn_id"}
_UINT32 = 1 << 32
_INT32 = 1 << 31


def parse_action(data: dict[str, Any]) -> bs.BotMessage | None:
    """A plain ``{"action": {...}}`` object as a BotMessage, or None to take the general path.

    Only the common form is taken here: known keys (camelCase or proto names, not
    both), a string match id, and JSON integers in range. Everything else (ids
    as strings, unknown keys, other kinds, errors) is left to ``json_format``,
    which accepts or rejects it with its own message.
    """
    if len(data) != 1:
        return None
    body = data.get("action")
    if type(body) is not dict:
        return None
    match_id = ""
    turn_id = action = 0
    seen: set[str] = set()
    for key, value in body.items():
        if key == "action":
            if type(value) is not int or not -_INT32 <= value < _INT32:
                return None
            action = value
            continue
        field = _ACTION_KEYS.get(key)
        if field is None or field in seen:
            return None
        seen.add(field)
        if field == "match_id":
            if type(value) is not str:
                return None
            match_id = value
        else:
            if type(value) is not int or not 0 <= value < _UINT32:
                return None
            turn_id = value
    try:
        return bs.BotMessage(action=bs.Action(match_id=match_id, turn_id=turn_id, action=action))
    except ValueError:  # e.g. a match id with a lone surrogate: json_format gives the precise error
        return None
