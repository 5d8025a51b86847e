"""The stdio codec: ``arena.v1`` session messages over a subprocess bot's stdin and stdout.

Two framings carry exactly the messages of the gRPC stream:

* ``proto``: length-delimited binary protobuf. Every message is preceded by
  its length as a base-128 varint, which is what protobuf's own delimited I/O
  writes (Java ``writeDelimitedTo``, C++ ``SerializeDelimitedToOstream``).
* ``json``: one canonical proto3 JSON object per line (``google.protobuf.json_format``),
  so a bot needs no protobuf library. The server writes every field, defaults
  included, on one line ending in ``\\n``; it accepts either ``lowerCamelCase``
  or the proto field names from the bot.

The server writes :class:`ServerMessage` and reads :class:`BotMessage`; the
reverse direction is here too, for tests, benchmarks and Python bots.
Everything a bot can get wrong is reported as a :class:`FrameError` whose
message says what arrived and what was expected; nothing here allocates more
than the configured maximum message size, whatever the length prefix claims.
"""

from __future__ import annotations

import asyncio
import enum
import json
from typing import TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from arena.v1 import bot_session_pb2 as bs

DEFAULT_MAX_MESSAGE_BYTES = 1 << 16
"""Largest message accepted from a bot (its messages are a few dozen bytes)."""

BOT_MESSAGE_KINDS = tuple(f.name for f in bs.BotMessage.DESCRIPTOR.oneofs_by_name["kind"].fields)
SERVER_MESSAGE_KINDS = tuple(f.name for f in bs.ServerMessage.DESCRIPTOR.oneofs_by_name["kind"].fields)

M = TypeVar("M", bound=Message)


class Framing(enum.StrEnum):
    """How messages are delimited on the pipes."""

    PROTO = "proto"
    JSON = "json"


class FrameError(Exception):
    """The bot's output could not be read as a message.

    Attributes:
        kind: A short machine-readable tag: ``truncated``, ``too_large``,
            ``invalid_json``, ``not_utf8``, ``garbage``, ``wrong_kind``, ``empty``.
        message: What arrived and what was expected, for the bot's author.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _preview(data: bytes, limit: int = 48) -> str:
    """A short, printable rendering of raw bytes for error messages."""
    head = data[:limit]
    try:
        text = head.decode("utf-8")
        if text.isprintable():
            return repr(text) + ("..." if len(data) > limit else "")
    except UnicodeDecodeError:
        pass
    return "0x" + head.hex(" ") + (" ..." if len(data) > limit else "")


def _framing_hint(framing: Framing, first: bytes) -> str:
    """A hint when the bytes look like the other framing."""
    if framing is Framing.PROTO and first[:1] in (b"{", b"[", b'"'):
        return " It looks like JSON: this bot is configured for proto framing; use json framing instead."
    if framing is Framing.JSON and first[:1] and first[0] < 0x20 and first[:1] not in (b"\t", b"\r", b"\n"):
        return " It looks like binary protobuf: this bot is configured for json framing; use proto framing."
    return ""


# -- encoding -------------------------------------------------------------------------------------


def encode_varint(value: int) -> bytes:
    """Base-128 varint, least significant group first (protobuf's wire format)."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode(message: Message, framing: Framing) -> bytes:
    """One framed message, ready to write."""
    if framing is Framing.PROTO:
        payload = message.SerializeToString()
        return encode_varint(len(payload)) + payload
    data = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


# -- decoding -------------------------------------------------------------------------------------


def parse_payload(payload: bytes, framing: Framing, cls: type[M]) -> M:
    """Decode one unframed payload (a protobuf body, or one JSON line without its newline).

    Raises:
        FrameError: the payload is not a valid message of type ``cls`` with one kind set.
    """
    name = cls.DESCRIPTOR.name
    message = cls()
    if framing is Framing.PROTO:
        try:
            message.ParseFromString(payload)
        except DecodeError:
            raise FrameError(
                "garbage",
                f"could not decode a {name} from {len(payload)} bytes {_preview(payload)}; "
                f"expected a serialized "
                f"arena.v1.{name} after a varint length.{_framing_hint(framing, payload)}",
            ) from None
    else:
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            raise FrameError(
                "not_utf8",
                f"a line of {len(payload)} bytes is not UTF-8 text: {_preview(payload)}; "
                f"expected one JSON object "
                f"per line.{_framing_hint(framing, payload)}",
            ) from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FrameError(
                "invalid_json",
                f"invalid JSON ({exc.msg} at column {exc.colno}) in the line {_preview(payload, 80)}; "
                "expected one "
                f'JSON object per line such as {{"action": {{"matchId": "...", "turnId": 1, "action": 0}}}}.'
                f"{_framing_hint(framing, payload)}",
            ) from None
        if not isinstance(data, dict):
            raise FrameError(
                "invalid_json",
                f"the line {_preview(payload, 80)} is JSON but not an object; expected an arena.v1.{name} object.",
            )
        try:
            json_format.ParseDict(data, message)
        except json_format.ParseError as exc:
            raise FrameError(
                "wrong_kind",
                f"the line {_preview(payload, 80)} is not an arena.v1.{name}: {exc}. "
                f"A {name} has exactly one of: {', '.join(_kinds(cls))}.",
            ) from None
    if message.WhichOneof("kind") is None:
        raise FrameError(
            "empty" if not payload.strip() or payload.strip() == b"{}" else "wrong_kind",
            f"received {_preview(payload)}, which decodes to an arena.v1.{name} with no kind set; "
            f"expected exactly one of: {', '.join(_kinds(cls))}.{_framing_hint(framing, payload)}",
        )
    return message


def _kinds(cls: type[Message]) -> tuple[str, ...]:
    return tuple(f.name for f in cls.DESCRIPTOR.oneofs_by_name["kind"].fields)


class FrameReader:
    """Reads framed messages from an :class:`asyncio.StreamReader`.

    The stream's own buffer limit should be at least ``max_bytes`` (asyncio's
    subprocess helpers take it as ``limit=``) so a JSON line is never split.

    Attributes:
        bytes_read: Total bytes consumed, for diagnostics.
    """

    def __init__(
        self, stream: asyncio.StreamReader, framing: Framing, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    ) -> None:
        self.stream = stream
        self.framing = framing
        self.max_bytes = max_bytes
        self.bytes_read = 0

    async def read_payload(self) -> bytes | None:
        """The next raw payload, or None at a clean end of stream (between messages).

        Raises:
            FrameError: a truncated or oversized frame.
        """
        if self.framing is Framing.PROTO:
            return await self._read_delimited()
        return await self._read_line()

    async def read(self, cls: type[M]) -> M | None:
        """The next message of type ``cls``, or None at a clean end of stream."""
        payload = await self.read_payload()
        if payload is None:
            return None
        return parse_payload(payload, self.framing, cls)

    async def _read_delimited(self) -> bytes | None:
        stream = self.stream
        length = 0
        shift = 0
        first = b""
        for index in range(10):
            byte = await stream.read(1)
            if not byte:
                if index == 0:
                    return None
                raise FrameError(
                    "truncated",
                    f"the output ended inside a length prefix (after {index} bytes {_preview(first)}); "
                    "expected a complete varint length followed by that many bytes.",
                )
            first += byte
            self.bytes_read += 1
            length |= (byte[0] & 0x7F) << shift
            shift += 7
            if not byte[0] & 0x80:
                break
        else:
            raise FrameError(
                "garbage",
                f"the bytes {_preview(first)} are not a valid varint length prefix (more than 10 bytes).",
            )
        if length > self.max_bytes:
            raise FrameError(
                "too_large",
                f"a length prefix {_preview(first)} announced a message of {length} bytes, more than the "
                f"{self.max_bytes}-byte limit; a bot message is normally a few dozen bytes."
                f"{_framing_hint(self.framing, first)}",
            )
        if length == 0:
            return b""
        prefix = b""
        if first == b"{":
            # 123 is also the length byte of a JSON object: look at one more byte before waiting for 122.
            prefix = await stream.read(1)
            self.bytes_read += len(prefix)
            if prefix in (b"", b'"', b"}", b" ", b"\n", b"\r", b"\t"):
                raise FrameError(
                    "garbage",
                    f"received {_preview(first + prefix)}, which is not a varint length prefix."
                    f"{_framing_hint(self.framing, first)}",
                )
        try:
            payload = prefix + await stream.readexactly(length - len(prefix))
        except asyncio.IncompleteReadError as exc:
            self.bytes_read += len(exc.partial)
            raise FrameError(
                "truncated",
                f"the output ended after {len(exc.partial)} of the {length} bytes announced by the length "
                f"prefix ({_preview(exc.partial)}); a message must be written completely and flushed.",
            ) from None
        self.bytes_read += length
        return payload

    async def _read_line(self) -> bytes | None:
        stream = self.stream
        while True:
            try:
                line = await stream.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                self.bytes_read += len(exc.partial)
                if not exc.partial.strip(b" \t\r\n"):
                    return None
                raise FrameError(
                    "truncated",
                    f"the output ended in the middle of a line ({_preview(exc.partial, 80)}, no newline); "
                    "end every JSON message with a newline and flush."
                    f"{_framing_hint(self.framing, exc.partial)}",
                ) from None
            except asyncio.LimitOverrunError as exc:
                raise FrameError(
                    "too_large",
                    f"a line longer than the {self.max_bytes}-byte limit arrived "
                    f"(at least {exc.consumed} bytes "
                    "without a newline); expected one short JSON object per line.",
                ) from None
            self.bytes_read += len(line)
            if len(line) > self.max_bytes + 2:
                raise FrameError(
                    "too_large",
                    f"a line of {len(line)} bytes is longer than the {self.max_bytes}-byte limit.",
                )
            body = line.rstrip(b"\r\n")
            if body.strip(b" \t"):
                return body
            # blank lines between messages are tolerated


def message_kind(message: Message) -> str:
    """The name of the oneof field set in a BotMessage or ServerMessage."""
    return message.WhichOneof("kind") or "nothing"
