"""The SDK's stream writer: sends are never awaited, yet written whole, once and in order.

An SDK session does not wait for the writes it hands to its writer (pongs,
resignations, an Action queued behind another write: ``arena_client.remote._Writer``
starts a write at once and finishes it from gRPC's completion callback), so
these tests check on a real grpc.aio stream, with a real echo server on port
0, what awaiting would guarantee: many sends in a row (most of them queued
behind a write in flight) arrive in order and complete before ``drain``
returns, bytes and messages mix, and a stream that is gone makes ``drain``
raise rather than losing the sends silently.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from arena.v1 import bot_session_pb2 as bs
from arena_client.remote import _Writer
from arena_client.wire import action_message, serialize


async def _echo(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
    async for raw in requests:
        yield raw


@pytest.fixture
async def echo_target() -> AsyncIterator[str]:
    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(_echo)  # raw bytes both ways
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Echo", {"Ping": handler})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


async def test_sends_arrive_whole_and_in_order(echo_target: str) -> None:
    async with grpc.aio.insecure_channel(echo_target) as channel:
        call = channel.stream_stream("/test.Echo/Ping", request_serializer=serialize)()
        writer = _Writer(call)
        sent: list[bytes] = []
        for i in range(300):  # back to back: all but the first wait behind a write in flight
            if i % 3 == 0:
                pong = bs.BotMessage(pong=bs.Pong(nonce=i))
                sent.append(pong.SerializeToString())
                writer.send(pong)
            else:
                action = action_message(f"m{i % 7}", i, i % 5)
                sent.append(action)
                writer.send(action)
        await asyncio.wait_for(writer.drain(), 10)
        assert writer.error is None
        received = [await asyncio.wait_for(call.read(), 10) for _ in sent]
        assert received == sent
        await call.done_writing()


async def test_a_stream_that_is_gone_makes_drain_raise(echo_target: str) -> None:
    async with grpc.aio.insecure_channel(echo_target) as channel:
        call = channel.stream_stream("/test.Echo/Ping", request_serializer=serialize)()
        writer = _Writer(call)
        writer.send(action_message("m", 1, 2))
        await asyncio.wait_for(writer.drain(), 10)
        assert await asyncio.wait_for(call.read(), 10) == action_message("m", 1, 2)
        call.cancel()
        for turn in range(5):
            writer.send(action_message("m", turn + 2, 0))
        # What awaiting call.write would have raised: the RPC is over (a timeout would mean a hang).
        with pytest.raises(asyncio.InvalidStateError, match="RPC"):
            await asyncio.wait_for(writer.drain(), 10)
        writer.send(action_message("m", 99, 1))  # after a failure: dropped, and still no hang
        with pytest.raises(asyncio.InvalidStateError):
            await asyncio.wait_for(writer.drain(), 1)


async def test_the_writer_is_idle_only_with_nothing_in_flight_queued_or_failed(echo_target: str) -> None:
    """The session awaits an Action's write itself only while the writer is idle (so writes never overlap)."""
    async with grpc.aio.insecure_channel(echo_target) as channel:
        call = channel.stream_stream("/test.Echo/Ping", request_serializer=serialize)()
        writer = _Writer(call)
        assert writer.idle
        writer.send(action_message("m", 1, 2))
        writer.send(action_message("m", 2, 2))
        assert not writer.idle  # one in flight, one queued
        await asyncio.wait_for(writer.drain(), 10)
        assert writer.idle
        await call.write(action_message("m", 3, 2))  # what the session then does
        assert [await asyncio.wait_for(call.read(), 10) for _ in range(3)] == [
            action_message("m", t, 2) for t in (1, 2, 3)
        ]
        call.cancel()
        writer.send(action_message("m", 4, 0))
        with pytest.raises(asyncio.InvalidStateError):
            await asyncio.wait_for(writer.drain(), 10)
        assert not writer.idle  # a failed stream: the session reads next, and the read ends the session
