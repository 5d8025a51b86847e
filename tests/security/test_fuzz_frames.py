"""Fuzzing the bot-facing decoders with malformed frames (issue 12, "Proof").

Frames are made from valid messages by deterministic mutations (flipped,
dropped and inserted bytes, truncation, lone surrogates, invalid UTF-8, deep
nesting, wrong types, huge numbers, bad length prefixes) and sent:

* to the stdio frame parser and decoder in-process, both framings;
* through real subprocess seats (a bot that says Hello, then writes one bad frame);
* on the gRPC Play stream: in-process through the real servicer for the bulk,
  and a sample as raw bytes through a real server's port.

Every run asserts 0 crashes (no exception other than the protocol's own
error escapes, the server still answers its health check), 0 stalls (no frame
takes more than a second) and that every frame that is not a valid message is
answered with a protocol error. The quick variant runs in the default suite;
the 100k variant is marked slow. Both print their counts.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import arena_bots
from arena.v1 import bot_session_pb2 as bs
from arena_bots.simple import RandomBot
from arena_client import SeatInfo, Termination, TimeControl
from arena_games import load_game
from arena_server.api.bot_session import BotSessionServicer
from arena_server.matches.hub import Hub
from arena_server.referee.loop import play_match
from arena_server.seats.framing import FrameError, FrameParser, Framing, encode, encode_varint, parse_payload
from arena_server.seats.in_process import InProcessSeat
from arena_server.seats.process import BotProgram
from arena_server.seats.subprocess_seat import SubprocessSeat
from tests.conftest import LiveServer
from tests.fakes.grpc_bots import RawBot

STALL_SECONDS = 1.0
"""A frame whose handling takes longer than this counts as a stall."""

VALID_MESSAGES = [
    bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", name="fuzz", games=["rps", "liars_dice"])),
    bs.BotMessage(action=bs.Action(match_id="12", turn_id=7, action=2)),
    bs.BotMessage(resign=bs.Resign(match_id="12", reason="no hope")),
    bs.BotMessage(pong=bs.Pong(nonce=99)),
    bs.BotMessage(challenge=bs.Challenge(opponent="random", game="rps", matches=2)),
]

# -- frame generation ------------------------------------------------------------------------------


def _json_templates() -> list[str]:
    return [encode(m, Framing.JSON).decode().rstrip("\n") for m in VALID_MESSAGES]


MUST_FAIL = {0, 1, 2, 3, 5, 6, 7, 9, 10, 11, 13}
"""Mutations of a JSON line that can never leave a valid message (the others, such as a flipped
byte inside a string, sometimes do)."""


def bad_json_line(rng: random.Random) -> bytes:
    """One line (no newline) that is not a valid BotMessage, made by one of many mutations."""
    return json_mutation(rng)[1]


def json_mutation(rng: random.Random) -> tuple[int, bytes]:
    """(mutation kind, line without newline); kinds in :data:`MUST_FAIL` are never valid messages."""
    kind = rng.randrange(14)
    line = _mutate_json(rng, kind)
    return kind, line if line.strip() else b"x" + line  # a blank line is not a frame (it is skipped)


def _mutate_json(rng: random.Random, kind: int) -> bytes:
    templates = _json_templates()
    base = rng.choice(templates[:3] if kind in (0, 11) else templates)  # those have "12" or "fuzz" to spoil
    if kind == 0:  # a lone surrogate in some string
        return base.replace('"12"', '"\\ud' + rng.choice("89ab") + '00"', 1).replace('"fuzz"', '"\\udfff"').encode()
    if kind == 1:  # raw invalid UTF-8
        data = bytearray(base.encode())
        data.insert(rng.randrange(1, len(data)), rng.choice([0xFF, 0xFE, 0xC0, 0x80, 0xED]))
        return bytes(data)
    if kind == 2:  # deep nesting, inside or outside a message
        depth = rng.choice([1_000, 5_000, 10_000, 50_000])
        opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
        inner = opener * depth + "1" + closer * depth
        return (rng.choice(["", '{"action":'])).encode() + inner.encode() + (b"}" if rng.random() < 0.5 else b"")
    if kind == 3:  # truncated
        return base.encode()[: rng.randrange(1, len(base))]
    if kind == 4:  # wrong types
        return json.dumps({"action": {"turnId": rng.choice(["x", [], {}, 1.5, -1, True, None]), "action": 0}}).encode()
    if kind == 5:  # numbers out of range or not numbers
        number = rng.choice(["1e400", "NaN", "-Infinity", "99999999999999999999999", "-0.5", "0x10"])
        return f'{{"action":{{"turnId":{number},"action":{number}}}}}'.encode()
    if kind == 6:  # not an object
        return rng.choice([b"[]", b"42", b'"hello"', b"null", b"true", b"[{}]"])
    if kind == 7:  # no kind or two kinds
        return rng.choice([b"{}", b'{"action":{},"pong":{}}', b'{"hello":{},"resign":{}}'])
    if kind == 8:  # unknown keys
        return base.replace("{", '{"x' + str(rng.randrange(100)) + '":1,', 2).encode()
    if kind == 9:  # random printable garbage
        return "".join(rng.choice('{}[]":,0123456789abcdeftrunl\\ ') for _ in range(rng.randrange(1, 80))).encode()
    if kind == 10:  # random bytes (no newline)
        return bytes(rng.choice([b for b in range(256) if b != 10]) for _ in range(rng.randrange(1, 60)))
    if kind == 11:  # control characters inside strings
        return base.replace('"12"', '"1\x002"').replace('"fuzz"', '"\x1b[31m"').encode()
    if kind == 12:  # a byte flipped
        data = bytearray(base.encode())
        i = rng.randrange(len(data))
        data[i] = (data[i] ^ (1 << rng.randrange(7))) or 0x20
        return bytes(data).replace(b"\n", b" ")
    return (base + base[: rng.randrange(1, len(base))]).encode()  # trailing junk


def bad_proto_frame(rng: random.Random, max_bytes: int = 1 << 16) -> bytes:
    """One length-delimited frame (prefix included) that is unlikely to be a valid BotMessage."""
    payload = bytearray(rng.choice(VALID_MESSAGES).SerializeToString())
    kind = rng.randrange(8)
    if kind == 0:  # random bytes
        payload = bytearray(rng.randbytes(rng.randrange(1, 80)))
    elif kind == 1:  # flipped bytes
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(payload))
            payload[i] ^= 1 << rng.randrange(8)
    elif kind == 2:  # truncated payload, honest prefix
        payload = payload[: rng.randrange(0, len(payload))]
    elif kind == 3:  # invalid UTF-8 in a string field (field 1 of hello's name: tag 0x12)
        payload = bytearray(b"\x0a\x05\x12\x03\xff\xfe\xfd")
    elif kind == 4:  # deeply nested groups / sub-messages
        depth = rng.choice([100, 1_000, 5_000])
        payload = bytearray(b"\x0b" * depth + b"\x0c" * depth) if rng.random() < 0.5 else bytearray(b"\x0a\x7f" * depth)
    elif kind == 5:  # a lying length prefix (too large, or longer than what follows)
        claimed = rng.choice([max_bytes + 1, 1 << 31, len(payload) + 5])
        return encode_varint(claimed) + bytes(payload)
    elif kind == 6:  # an invalid varint prefix (11 continuation bytes)
        return b"\xff" * 11 + bytes(payload)
    else:  # JSON sent to a proto seat
        return rng.choice(_json_templates()).encode() + b"\n"
    return encode_varint(len(payload)) + bytes(payload)


# -- in-process stdio ------------------------------------------------------------------------------


@dataclass
class Tally:
    """Counts of one fuzz run."""

    frames: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    valid: int = 0
    crashes: list[str] = field(default_factory=list)
    stalls: int = 0
    slowest: float = 0.0

    def line(self, what: str) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.errors.items()))
        return (
            f"{what}: {self.frames} frames, {sum(self.errors.values())} protocol errors ({kinds}), "
            f"{self.valid} still valid messages, {len(self.crashes)} crashes, {self.stalls} stalls, "
            f"slowest {self.slowest * 1000:.1f} ms"
        )


def decode_frame(framing: Framing, frame: bytes) -> list[bs.BotMessage]:
    """What a subprocess seat does with bytes from a bot: parse frames, decode payloads, then end of stream."""
    parser = FrameParser(framing)
    payloads = parser.feed(frame)
    parser.eof()
    return [parse_payload(p, framing, bs.BotMessage) for p in payloads]


def fuzz_stdio(count: int, seed: int) -> tuple[Tally, Tally]:
    rng = random.Random(seed)
    tallies = []
    for framing in (Framing.JSON, Framing.PROTO):
        tally = Tally()
        for _ in range(count):
            if framing is Framing.JSON:
                kind, line = json_mutation(rng)
                frame, must_fail = line + b"\n", kind in MUST_FAIL
            else:
                frame, must_fail = bad_proto_frame(rng), False
            tally.frames += 1
            started = time.perf_counter()
            try:
                decode_frame(framing, frame)
                tally.valid += 1
                assert not must_fail, f"a bad frame was accepted: {frame[:100]!r}"
            except FrameError as exc:
                tally.errors[exc.kind] += 1
                assert exc.message and len(exc.message) < 1_000, exc.message
                exc.message.encode("utf-8")  # writable anywhere: logs, SQLite, protobuf
                assert "SystemError" not in exc.message
            except Exception as exc:  # a crash: record it, keep going to count them all
                tally.crashes.append(f"{type(exc).__name__}: {exc!r:.200} on {frame[:80]!r}")
            took = time.perf_counter() - started
            tally.slowest = max(tally.slowest, took)
            tally.stalls += took > STALL_SECONDS
        tallies.append(tally)
    return tallies[0], tallies[1]


def check_stdio(count: int) -> None:
    as_json, as_proto = fuzz_stdio(count, seed=count)
    print(f"\n{as_json.line('stdio json, in-process')}\n{as_proto.line('stdio proto, in-process')}")
    for tally in (as_json, as_proto):
        assert tally.crashes == [], tally.crashes[:5]
        assert tally.stalls == 0
    assert sum(as_json.errors.values()) > count * 0.8
    assert sum(as_proto.errors.values()) > count // 2


def test_stdio_fuzz_quick() -> None:
    check_stdio(2_000)


@pytest.mark.slow
def test_stdio_fuzz_100k() -> None:
    check_stdio(100_000)


# -- real subprocess seats -------------------------------------------------------------------------

BOT = """
import os, sys, time, zlib
hello, bad = (zlib.decompress(bytes.fromhex(a)) for a in sys.argv[1:3])
os.write(1, hello)
os.read(0, 65536)  # the Welcome (and maybe more): the bot is seated
time.sleep(0.05)
os.write(1, bad)
while os.read(0, 65536):
    pass
"""


def subprocess_frames(count: int, seed: int) -> list[tuple[Framing, bytes]]:
    """Frames the in-process decoder rejects while the stream is still open, alternating framings.

    (A frame shorter than its length prefix is only an error at the end of the stream: until
    then the bot may still be writing, and the turn's clock decides.)
    """
    rng = random.Random(seed)
    out: list[tuple[Framing, bytes]] = []
    while len(out) < count:
        framing = Framing.JSON if len(out) % 2 == 0 else Framing.PROTO
        frame = bad_json_line(rng) + b"\n" if framing is Framing.JSON else bad_proto_frame(rng)
        try:
            for payload in FrameParser(framing).feed(frame):
                parse_payload(payload, framing, bs.BotMessage)
        except FrameError:
            out.append((framing, frame))
    return out


async def play_bad_bot(framing: Framing, frame: bytes) -> tuple[Termination | None, str]:
    hello = encode(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", games=["rps"])), framing)
    args = [zlib.compress(hello).hex(), zlib.compress(frame).hex()]  # deep nesting compresses to a few bytes
    program = BotProgram(["python3", "-c", BOT, *args], framing, startup_timeout=20.0)
    seat = SubprocessSeat(program, SeatInfo(0, "fuzzed", 1, "subprocess"))
    seats = [seat, InProcessSeat(RandomBot(1), SeatInfo(1, "random"))]
    clock = TimeControl()  # 1 s per move and a 10 s bank: the bad frame, not the clock, ends the match
    try:
        record = await play_match(load_game("rps", rounds=3), seats, clock, seed="fuzz")
    finally:
        await seat.close()
    return record.termination, record.reason


async def check_subprocess(count: int) -> None:
    frames = subprocess_frames(count, seed=count)
    outcomes: Counter[str] = Counter()
    semaphore = asyncio.Semaphore(6)
    started = time.perf_counter()

    async def one(framing: Framing, frame: bytes) -> None:
        async with semaphore:
            termination, reason = await asyncio.wait_for(play_bad_bot(framing, frame), 60)
        reason.encode("utf-8")
        assert termination == Termination.PROTOCOL_ERROR, (termination, reason, frame[:80])
        assert "wrote something unreadable on stdout" in reason and "SystemError" not in reason, reason
        outcomes[str(framing)] += 1

    await asyncio.gather(*(one(f, b) for f, b in frames))
    print(
        f"\nstdio, real subprocess seats: {count} bad frames, {sum(outcomes.values())} protocol errors "
        f"({dict(outcomes)}), 0 crashes, in {time.perf_counter() - started:.1f}s"
    )


async def test_subprocess_fuzz_quick() -> None:
    await check_subprocess(12)


@pytest.mark.slow
async def test_subprocess_fuzz_sample() -> None:
    await check_subprocess(200)


# -- gRPC Play stream ------------------------------------------------------------------------------


def bad_grpc_payload(rng: random.Random) -> bytes:
    """Raw bytes for one gRPC message: mutated or random protobuf."""
    frame = bad_proto_frame(rng)
    _, used = _strip_prefix(frame)
    return frame[used:] if rng.random() < 0.7 else rng.randbytes(rng.randrange(1, 100))


def _strip_prefix(frame: bytes) -> tuple[int, int]:
    value = shift = 0
    for index, byte in enumerate(frame[:10]):
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, index + 1
    return -1, 0


def undecodable(payload: bytes) -> bool:
    try:
        bs.BotMessage.FromString(payload)
    except Exception:
        return True
    return False


class StreamContext:
    """The servicer's view of one Play stream, fed from a list of raw request bytes.

    Decoding uses the deserializer gRPC itself calls for this service, and a
    failure surfaces from ``read`` as it does in grpc.aio.
    """

    def __init__(self, requests: list[bytes]) -> None:
        self.requests = list(requests)
        self.written: list[bs.ServerMessage] = []

    async def read(self) -> Any:
        if not self.requests:
            return grpc.aio.EOF  # the bot half-closes its side after the frame
        return bs.BotMessage.FromString(self.requests.pop(0))

    async def write(self, message: bs.ServerMessage) -> None:
        self.written.append(message)

    def peer(self) -> str:
        return "ipv4:fuzz"


async def fuzz_grpc_in_process(count: int, seed: int) -> Tally:
    rng = random.Random(seed)
    hub = Hub(None, arena_bots.hosted_bots())
    servicer = BotSessionServicer(hub)
    hello = bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1")).SerializeToString()
    tally = Tally()
    for _ in range(count):
        payload = bad_grpc_payload(rng)
        bad = undecodable(payload)
        context = StreamContext([hello, payload])
        tally.frames += 1
        started = time.perf_counter()
        try:
            await asyncio.wait_for(servicer.Play(None, context), 10)  # type: ignore[arg-type]
        except Exception as exc:  # a stall (TimeoutError) counts as a crash too
            tally.crashes.append(f"{type(exc).__name__}: {exc!r:.200} on {payload[:60]!r}")
        took = time.perf_counter() - started
        tally.slowest = max(tally.slowest, took)
        tally.stalls += took > STALL_SECONDS
        if bad:
            fatal = [m.error for m in context.written if m.WhichOneof("kind") == "error" and m.error.fatal]
            assert fatal and "not a valid arena.v1.BotMessage" in fatal[-1].message, (payload[:60], context.written)
            tally.errors[bs.ErrorCode.Name(fatal[-1].code)] += 1
        else:
            tally.valid += 1
    assert hub.sessions == {}  # every session ended with its stream
    await hub.shutdown()
    return tally


async def check_grpc_in_process(count: int) -> None:
    tally = await fuzz_grpc_in_process(count, seed=count)
    print("\n" + tally.line("gRPC Play stream, in-process servicer"))
    assert tally.crashes == [], tally.crashes[:5]
    assert tally.stalls == 0
    assert sum(tally.errors.values()) > 0


async def test_grpc_fuzz_in_process_quick() -> None:
    await check_grpc_in_process(500)


@pytest.mark.slow
async def test_grpc_fuzz_in_process_100k() -> None:
    await check_grpc_in_process(100_000)


async def send_raw_frames(live: LiveServer, count: int, seed: int) -> Tally:
    rng = random.Random(seed)
    tally = Tally()
    semaphore = asyncio.Semaphore(16)
    health = health_pb2_grpc.HealthStub(live.channel())

    async def one(payload: bytes) -> None:
        bad = undecodable(payload)
        async with semaphore:
            raw = RawBot(live.channel())
            started = time.perf_counter()
            try:
                welcome = await raw.hello()
                assert welcome.WhichOneof("kind") == "welcome"
                await raw.send(payload)
                if bad:
                    error = await raw.recv_kind("error", timeout=10)
                    assert error.error.fatal and error.error.code == bs.ERROR_CODE_BAD_MESSAGE, error
                    tally.errors["ERROR_CODE_BAD_MESSAGE"] += 1
                else:
                    tally.valid += 1
            finally:
                raw.call.cancel()
            took = time.perf_counter() - started
            tally.slowest = max(tally.slowest, took)
            tally.stalls += took > 10 * STALL_SECONDS  # a full round trip on a busy machine
            tally.frames += 1

    payloads = [bad_grpc_payload(rng) for _ in range(count)]
    for start in range(0, count, 100):
        await asyncio.gather(*(one(p) for p in payloads[start : start + 100]))
        reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    return tally


async def check_grpc_port(live: LiveServer, count: int) -> None:
    tally = await send_raw_frames(live, count, seed=count)
    print("\n" + tally.line("gRPC Play stream, raw bytes through the real port"))
    assert tally.stalls == 0 and sum(tally.errors.values()) > 0
    assert live.hub.sessions == {}  # every stream ended


async def test_grpc_fuzz_real_port_quick(live_server: LiveServer) -> None:
    await check_grpc_port(live_server, 200)


@pytest.mark.slow
async def test_grpc_fuzz_real_port_sample(live_server: LiveServer) -> None:
    await check_grpc_port(live_server, 2_000)
