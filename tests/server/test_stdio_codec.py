"""The stdio codec: both framings round-trip, and every malformed input is a clear FrameError."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest

from arena.v1 import bot_session_pb2 as bs
from arena_client import PublicMove, Turn
from arena_client.convert import turn_to_proto
from arena_games import load_game
from arena_server.seats.framing import FrameError, FrameReader, Framing, encode, encode_varint, parse_payload


def stream_of(data: bytes, limit: int = 1 << 16) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=limit)
    reader.feed_data(data)
    reader.feed_eof()
    return reader


def a_turn() -> bs.ServerMessage:
    state = load_game("rps", rounds=3).new_initial_state()
    state.apply_actions([0, 2])
    turn = Turn("m1", 3, 0, state.observation(0), state.legal_actions(0), timedelta(seconds=1), timedelta(seconds=9))
    return bs.ServerMessage(turn=turn_to_proto(turn, [PublicMove(0, 0, "rock"), PublicMove(1, 2, "scissors")]))


@pytest.mark.parametrize("framing", list(Framing))
async def test_round_trip_of_server_and_bot_messages(framing: Framing) -> None:
    server = [
        a_turn(),
        bs.ServerMessage(ping=bs.Ping(nonce=2**63)),
        bs.ServerMessage(error=bs.Error(fatal=True)),
    ]
    bot = [
        bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", games=["rps"], keep_alive=True)),
        bs.BotMessage(action=bs.Action(match_id="m1", turn_id=3, action=2)),
    ]
    reader = FrameReader(stream_of(b"".join(encode(m, framing) for m in server)), framing)
    assert [await reader.read(bs.ServerMessage) for _ in server] == server
    assert await reader.read(bs.ServerMessage) is None
    reader = FrameReader(stream_of(b"".join(encode(m, framing) for m in bot)), framing)
    assert [await reader.read(bs.BotMessage) for _ in bot] == bot


def test_proto_framing_is_protobuf_delimited_format() -> None:
    msg = bs.BotMessage(action=bs.Action(match_id="m", turn_id=300, action=1))
    body = msg.SerializeToString()
    assert encode(msg, Framing.PROTO) == bytes([len(body)]) + body
    assert encode_varint(300) == b"\xac\x02"
    assert encode_varint(2**31) == b"\x80\x80\x80\x80\x08"


def test_json_framing_is_one_canonical_object_per_line_with_defaults() -> None:
    line = encode(a_turn(), Framing.JSON)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    data = json.loads(line)
    assert data["turn"]["turnId"] == 3 and data["turn"]["legalActions"] == [0, 1, 2]
    assert data["turn"]["timeBudget"] == "1s"
    assert data["turn"]["observation"]["rps"]["round"] == 1
    assert data["turn"]["observation"]["rps"]["wins"] == [1, 0]


ENCODE_PARAMS = """
import sys
from arena.v1 import bot_session_pb2 as bs
from arena_server.seats.framing import Framing, encode
message = bs.ServerMessage()
for key in ("rows", "cols", "k", "dice", "faces", "bidding", "wild", "rounds"):
    message.match_started.params[key].int_value = len(key)
print(encode(message, Framing.PROTO).hex())
print(encode(message, Framing.JSON).decode().strip())
"""


def test_maps_are_written_in_key_order_whatever_the_process() -> None:
    """Protobuf iterates maps in hash order; the codec must not, or transcripts differ run to run."""
    outputs = {
        subprocess.run(
            [sys.executable, "-c", ENCODE_PARAMS],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(4)
    }
    assert len(outputs) == 1, outputs
    _proto_hex, json_line = outputs.pop().splitlines()
    keys = list(json.loads(json_line)["matchStarted"]["params"])
    assert keys == sorted(keys) and len(keys) == 8


def test_json_accepts_proto_field_names_and_blank_lines() -> None:
    msg = parse_payload(b'{"action": {"match_id": "m", "turn_id": 2, "action": 1}}', Framing.JSON, bs.BotMessage)
    assert msg.action.turn_id == 2


async def expect_error(data: bytes, framing: Framing, kind: str, *words: str, limit: int = 1 << 16) -> str:
    reader = FrameReader(stream_of(data, limit), framing, max_bytes=limit)
    with pytest.raises(FrameError) as info:
        await reader.read(bs.BotMessage)
    assert info.value.kind == kind, info.value.message
    for word in words:
        assert word in info.value.message
    return info.value.message


async def test_truncated_proto_frame() -> None:
    await expect_error(bytes([20]) + b"\x12\x05abc", Framing.PROTO, "truncated", "after 5 of the 20 bytes")


async def test_truncated_length_prefix() -> None:
    await expect_error(b"\x80\x80", Framing.PROTO, "truncated", "inside a length prefix")


async def test_truncated_json_line() -> None:
    await expect_error(b'{"action": {"turnId": 1', Framing.JSON, "truncated", "no newline")


async def test_two_gigabyte_length_prefix_is_rejected_without_reading() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(encode_varint(2**31))  # no payload and no EOF: reading it would hang
    frames = FrameReader(reader, Framing.PROTO, max_bytes=1 << 16)
    with pytest.raises(FrameError) as info:
        await asyncio.wait_for(frames.read(bs.BotMessage), 5)
    assert info.value.kind == "too_large"
    assert "2147483648 bytes" in info.value.message and "65536-byte limit" in info.value.message


async def test_overlong_json_line() -> None:
    await expect_error(b"x" * 5000 + b"\n", Framing.JSON, "too_large", "1024-byte limit", limit=1024)


async def test_invalid_json() -> None:
    await expect_error(b"{action: 1}\n", Framing.JSON, "invalid_json", "invalid JSON", "{action: 1}")


async def test_json_that_is_not_an_object() -> None:
    await expect_error(b"[1, 2]\n", Framing.JSON, "invalid_json", "not an object")


async def test_valid_message_of_the_wrong_kind() -> None:
    line = encode(a_turn(), Framing.JSON)
    message = await expect_error(line, Framing.JSON, "wrong_kind", "not an arena.v1.BotMessage", "hello, action")
    assert "turn" in message


async def test_empty_json_object() -> None:
    await expect_error(b"{}\n", Framing.JSON, "empty", "no kind set")


async def test_binary_garbage_in_proto_framing() -> None:
    await expect_error(bytes([9]) + b"\xff\xff" + bytes(range(7)), Framing.PROTO, "garbage", "could not decode")


async def test_binary_garbage_in_json_framing() -> None:
    await expect_error(b"\xff\xfe\x00\x01\n", Framing.JSON, "not_utf8", "not UTF-8")


async def test_json_sent_to_a_proto_framed_reader_says_so() -> None:
    line = b'{"hello": {"protocolVersion": "arena.v1"}}\n'
    await expect_error(line, Framing.PROTO, "garbage", "looks like JSON", "use json framing")


async def test_protobuf_sent_to_a_json_framed_reader_says_so() -> None:
    data = encode(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1")), Framing.PROTO)
    await expect_error(data, Framing.JSON, "invalid_json", "looks like binary protobuf")
