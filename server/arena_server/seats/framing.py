"""The stdio codec: ``arena.v1`` session messages over a subprocess bot's stdin and stdout.

Two framings carry exactly the messages of the gRPC stream:

* ``proto``: length-delimited binary protobuf. Every message is preceded by
  its length as a base-128 varint, which is what protobuf's own delimited I/O
  writes (Java ``writeDelimitedTo``, C++ ``SerializeDelimitedToOstream``).
* ``json``: one canonical proto3 JSON object per line (the mapping of
  ``google.protobuf.json_format``, written by :mod:`arena_server.seats.proto_json`),
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
import collections
import enum
import json
from typing import TypeVar, cast

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from arena.v1 import bot_session_pb2 as bs
from arena_client.wire import SMALL, varint
from arena_server.seats.proto_json import parse_action, to_json_dict

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
        data: The start of the offending frame or line, when known (empty otherwise).
    """

    def __init__(self, kind: str, message: str, data: bytes = b"") -> None:
        message = _clean(message)
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.data = data[:_QUOTE_BYTES]

    @property
    def quoted(self) -> str:
        """The offending bytes, quoted and escaped (text) or in hex (binary), truncated."""
        return _preview(self.data, _QUOTE_BYTES) if self.data else ""


_QUOTE_BYTES = 200
"""Bytes of an offending frame kept for reports."""


def _clean(text: str) -> str:
    """``text`` with lone surrogates escaped, so it can be written as UTF-8 anywhere (logs, SQLite, protobuf)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _preview(data: bytes, limit: int = 48) -> str:
    """A short, printable rendering of raw bytes for error messages.

    Text (even with a few invalid UTF-8 bytes, shown as ``\\xff``) is quoted
    and escaped; binary data is shown in hex.
    """
    head = data[:limit]
    text = head.decode("utf-8", "backslashreplace")
    printable = sum(1 for b in head if 0x20 <= b < 0x7F or b >= 0x80 or b == 0x09)
    if text.isprintable() and printable == len(head) and (head.isascii() or _mostly_utf8(head)):
        return repr(text) + ("..." if len(data) > limit else "")
    return "0x" + head.hex(" ") + (" ..." if len(data) > limit else "")


def _mostly_utf8(head: bytes) -> bool:
    """Whether all but a few bytes of ``head`` are valid UTF-8 (text with a stray byte, not binary)."""
    bad = len(head.decode("utf-8", "ignore").encode("utf-8"))
    return len(head) - bad <= max(2, len(head) // 8)


def _framing_hint(framing: Framing, first: bytes) -> str:
    """A hint when the bytes look like the other framing."""
    if framing is Framing.PROTO and first[:1] in (b"{", b"[", b'"'):
        return " It looks like JSON: this bot is configured for proto framing; use json framing instead."
    if framing is Framing.JSON and first[:1] and first[0] < 0x20 and first[:1] not in (b"\t", b"\r", b"\n"):
        return " It looks like binary protobuf: this bot is configured for json framing; use proto framing."
    return ""


# -- encoding -------------------------------------------------------------------------------------


encode_varint = varint
"""Base-128 varint, least significant group first (protobuf's wire format): the SDK's own."""


def encode_turn(message: bs.ServerMessage, framing: Framing) -> bytes:
    """:func:`encode` for a ServerMessage that carries a Turn, the one message sent every move.

    A Turn has no map field (``tests/server/test_stdio_turn_frame.py`` checks the descriptors), so
    protobuf's plain serialisation is already deterministic and the sorting pass of
    ``deterministic=True`` (about half of the encoding time) is skipped; the bytes are the
    same as :func:`encode`'s.
    """
    if framing is Framing.PROTO:
        return delimited(message.SerializeToString())
    return encode(message, framing)


def delimited(payload: bytes) -> bytes:
    """A serialized message as one length-delimited frame (its varint length, then the bytes)."""
    size = len(payload)
    return (SMALL[size] if size < 0x80 else varint(size)) + payload


def encode(message: Message, framing: Framing) -> bytes:
    """One framed message, ready to write.

    The bytes depend only on the message: map entries (game parameters) are
    written sorted by key in both framings, so a transcript or an exported
    replay is the same on every run (protobuf's own map order follows a hash).
    """
    if framing is Framing.PROTO:
        return delimited(message.SerializeToString(deterministic=True))
    return json_text(message).encode() + b"\n"


def json_text(message: Message) -> str:
    """``message`` as one compact proto3 JSON object: the JSON framing's line, without its newline."""
    return _JSON.encode(to_json_dict(message))


_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
"""Compact, UTF-8 as is; made once (``json.dumps`` with options builds an encoder per call)."""


# -- decoding -------------------------------------------------------------------------------------


def parse_payload(payload: bytes, framing: Framing, cls: type[M]) -> M:
    """Decode one unframed payload (a protobuf body, or one JSON line without its newline).

    Raises:
        FrameError: the payload is not a valid message of type ``cls`` with one kind set.
            Nothing else escapes, whatever the bytes.
    """
    try:
        return _parse_payload(payload, framing, cls)
    except FrameError as exc:
        if not exc.data:
            exc.data = payload[:_QUOTE_BYTES]
        raise
    except Exception as exc:  # a decoder's internal failure must not end the server's side of the match
        raise FrameError(
            "garbage",
            f"could not decode {_preview(payload, 80)} as an arena.v1.{cls.DESCRIPTOR.name} "
            f"({type(exc).__name__} in the decoder); send only the messages of the arena.v1 protocol.",
            payload,
        ) from None


def _parse_payload(payload: bytes, framing: Framing, cls: type[M]) -> M:
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
        except RecursionError:
            raise FrameError(
                "invalid_json",
                f"the line {_preview(payload, 80)} nests arrays or objects too deeply to be read; "
                "an arena.v1 message nests at most a few levels.",
            ) from None
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
        if "\\u" in text:
            surrogate = _lone_surrogate(data)
            if surrogate:
                raise FrameError(
                    "invalid_json",
                    f"the line {_preview(payload, 80)} has a lone UTF-16 surrogate ({surrogate}), "
                    "which is not a character; strings must be valid Unicode.",
                )
        fast = parse_action(data) if cls is bs.BotMessage else None
        if fast is not None:
            return cast(M, fast)
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


def _lone_surrogate(data: object) -> str:
    """The first lone surrogate in a decoded JSON value's keys and strings, escaped (empty: none).

    Iterative, so a deeply nested value cannot exhaust the stack.
    """
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                return item[exc.start : exc.end].encode("utf-8", "backslashreplace").decode("ascii")
    return ""


def _kinds(cls: type[Message]) -> tuple[str, ...]:
    return tuple(f.name for f in cls.DESCRIPTOR.oneofs_by_name["kind"].fields)


_NOT_A_JSON_LENGTH = (b'"', b"}", b" ", b"\n", b"\r", b"\t")
"""Bytes that, after a 0x7B (``{``) length prefix, show the frame is really a JSON object."""


class FrameParser:
    """A push parser: feed it whatever bytes arrive, get back the complete payloads.

    This is the codec the subprocess seat runs right in its pipe protocol (no
    reader task, no per-byte awaits). :class:`FrameReader` wraps it for
    ``asyncio.StreamReader`` users. Errors are raised as soon as the bytes
    show them (a 2 GB length prefix fails before any payload arrives); after
    an error the parser must not be fed again.

    Attributes:
        bytes_read: Total bytes consumed by complete frames, for diagnostics.
    """

    __slots__ = ("_buffer", "_proto", "bytes_read", "framing", "line_limit", "max_bytes")

    def __init__(self, framing: Framing, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.framing = framing
        self.max_bytes = max_bytes
        self.line_limit = max(max_bytes + 2, 1 << 16)
        """Bytes of a JSON line buffered before giving up on finding its newline."""
        self.bytes_read = 0
        self._buffer = b""
        self._proto = framing is Framing.PROTO

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return the payloads now complete (possibly none).

        Raises:
            FrameError: an oversized frame, an invalid length prefix, an overlong line.
        """
        buffer = self._buffer + data if self._buffer else data
        if self._proto:
            payloads, used = self._delimited(buffer)
        else:
            payloads, used = self._lines(buffer)
        self._buffer = buffer[used:] if used < len(buffer) else b""
        return payloads

    def whole(self, data: bytes) -> bytes | None:
        """The payload when ``data`` is exactly one short length-delimited frame and nothing is buffered.

        The common case of a move (one Action, written in one go, read in one go),
        answered without a list or a buffer; None for anything else (call
        :meth:`feed` then), including every frame :meth:`feed` would look at closer.
        """
        if self._buffer or not self._proto:
            return None
        size = len(data) - 1
        if 0 < size < 0x7B and data[0] == size:  # 0x7B may be a JSON object's brace: feed() checks it
            self.bytes_read += size + 1
            return data[1:]
        return None

    def eof(self) -> None:
        """The stream ended: fine between messages, an error inside one.

        Raises:
            FrameError: the output ended inside a frame.
        """
        try:
            self._eof()
        except FrameError as exc:
            exc.data = exc.data or self._buffer[:_QUOTE_BYTES]
            raise

    def _eof(self) -> None:
        rest = self._buffer
        if self._proto:
            if not rest:
                return
            length, index = _varint(rest, 0)
            first = rest[:index]
            if length < 0:
                raise FrameError(
                    "truncated",
                    f"the output ended inside a length prefix (after {len(rest)} bytes {_preview(rest)}); "
                    "expected a complete varint length followed by that many bytes.",
                )
            partial = rest[index:]
            if first == b"{":
                if not partial:
                    raise FrameError(
                        "garbage",
                        f"received {_preview(first)}, which is not a varint length prefix."
                        f"{_framing_hint(self.framing, first)}",
                    )
                partial = partial[1:]
            raise FrameError(
                "truncated",
                f"the output ended after {len(partial)} of the {length} bytes announced by the length "
                f"prefix ({_preview(partial)}); a message must be written completely and flushed.",
            )
        if rest.strip(b" \t\r\n"):
            raise FrameError(
                "truncated",
                f"the output ended in the middle of a line ({_preview(rest, 80)}, no newline); "
                "end every JSON message with a newline and flush."
                f"{_framing_hint(self.framing, rest)}",
            )

    def _delimited(self, buffer: bytes) -> tuple[list[bytes], int]:
        payloads: list[bytes] = []
        pos = 0
        size = len(buffer)
        while pos < size:
            head = buffer[pos]
            if head < 0x80 and head != 0x7B and pos + 1 + head <= size:
                # The common case: a one-byte length and the whole message already here.
                payloads.append(buffer[pos + 1 : pos + 1 + head])
                pos += 1 + head
                continue
            length, index = _varint(buffer, pos)
            if length == -2:
                raise FrameError(
                    "garbage",
                    f"the bytes {_preview(buffer[pos : pos + 10])} are not a valid varint length prefix "
                    "(more than 10 bytes).",
                    buffer[pos : pos + _QUOTE_BYTES],
                )
            if length < 0:
                break  # the prefix is incomplete
            first = buffer[pos:index]
            if length > self.max_bytes:
                raise FrameError(
                    "too_large",
                    f"a length prefix {_preview(first)} announced a message of {length} bytes, more than the "
                    f"{self.max_bytes}-byte limit; a bot message is normally a few dozen bytes."
                    f"{_framing_hint(self.framing, first)}",
                    buffer[pos : pos + _QUOTE_BYTES],
                )
            if first == b"{":
                # 123 is also the length byte of a JSON object: look at one more byte before waiting for 122.
                if index >= size:
                    break
                follow = buffer[index : index + 1]
                if follow in _NOT_A_JSON_LENGTH:
                    raise FrameError(
                        "garbage",
                        f"received {_preview(first + follow)}, which is not a varint length prefix."
                        f"{_framing_hint(self.framing, first)}",
                        buffer[pos : pos + _QUOTE_BYTES],
                    )
            if index + length > size:
                break
            payloads.append(buffer[index : index + length])
            pos = index + length
        self.bytes_read += pos
        return payloads, pos

    def _lines(self, buffer: bytes) -> tuple[list[bytes], int]:
        payloads: list[bytes] = []
        pos = 0
        limit = self.line_limit
        while True:
            newline = buffer.find(b"\n", pos)
            if newline < 0 or newline - pos > limit:
                waiting = (len(buffer) if newline < 0 else newline) - pos
                if waiting > limit:
                    raise FrameError(
                        "too_large",
                        f"a line longer than the {self.max_bytes}-byte limit arrived "
                        f"(at least {waiting} bytes "
                        "without a newline); expected one short JSON object per line.",
                        buffer[pos : pos + _QUOTE_BYTES],
                    )
                break
            line = buffer[pos : newline + 1]
            pos = newline + 1
            if len(line) > self.max_bytes + 2:
                raise FrameError(
                    "too_large",
                    f"a line of {len(line)} bytes is longer than the {self.max_bytes}-byte limit.",
                    line[:_QUOTE_BYTES],
                )
            body = line.rstrip(b"\r\n")
            if body.strip(b" \t"):
                payloads.append(body)
            # blank lines between messages are tolerated
        self.bytes_read += pos
        return payloads, pos


def _varint(buffer: bytes, pos: int) -> tuple[int, int]:
    """(value, index after it) of the varint at ``pos``; value -1 when incomplete, -2 when over 10 bytes."""
    length = 0
    shift = 0
    index = pos
    end = len(buffer)
    while True:
        if index - pos >= 10:
            return -2, index
        if index >= end:
            return -1, index
        byte = buffer[index]
        index += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return length, index


class FrameReader:
    """Reads framed messages from an :class:`asyncio.StreamReader` (a pull wrapper of :class:`FrameParser`)."""

    def __init__(
        self, stream: asyncio.StreamReader, framing: Framing, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    ) -> None:
        self.stream = stream
        self.framing = framing
        self.parser = FrameParser(framing, max_bytes)
        self._ready: collections.deque[bytes] = collections.deque()
        self._ended = False

    @property
    def bytes_read(self) -> int:
        return self.parser.bytes_read

    async def read_payload(self) -> bytes | None:
        """The next raw payload, or None at a clean end of stream (between messages).

        Raises:
            FrameError: a truncated or oversized frame.
        """
        while not self._ready:
            if self._ended:
                return None
            data = await self.stream.read(1 << 16)
            if not data:
                self._ended = True
                self.parser.eof()
                return None
            self._ready.extend(self.parser.feed(data))
        return self._ready.popleft()

    async def read(self, cls: type[M]) -> M | None:
        """The next message of type ``cls``, or None at a clean end of stream."""
        payload = await self.read_payload()
        if payload is None:
            return None
        return parse_payload(payload, self.framing, cls)


def message_kind(message: Message) -> str:
    """The name of the oneof field set in a BotMessage or ServerMessage."""
    return message.WhichOneof("kind") or "nothing"
