"""Fake remote bots that speak raw bytes on the Play stream, to misbehave on purpose."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from arena.v1 import bot_session_pb2 as bs

PLAY = "/arena.v1.BotSessionService/Play"


class RawBot:
    """A Play stream whose requests are raw bytes (so it can send garbage)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        method = channel.stream_stream(
            PLAY, request_serializer=lambda b: b, response_deserializer=bs.ServerMessage.FromString
        )
        self.call: Any = method()

    async def send(self, msg: bs.BotMessage | bytes) -> None:
        await self.call.write(msg if isinstance(msg, bytes) else msg.SerializeToString())

    async def hello(self, name: str = "", games: tuple[str, ...] = ()) -> bs.ServerMessage:
        await self.send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", name=name, games=list(games))))
        return await self.recv()

    async def challenge(self, opponent: str = "random", rounds: int = 100, **kw: Any) -> None:
        ch = bs.Challenge(opponent=opponent, game="rps", **kw)
        ch.params["rounds"].int_value = rounds
        await self.send(bs.BotMessage(challenge=ch))

    async def recv(self, timeout: float = 10) -> bs.ServerMessage:
        msg = await asyncio.wait_for(self.call.read(), timeout)
        if msg is grpc.aio.EOF:
            raise EOFError("stream closed")
        assert isinstance(msg, bs.ServerMessage)
        return msg

    async def recv_kind(self, kind: str, timeout: float = 10) -> bs.ServerMessage:
        """Read until a message of ``kind`` arrives; other kinds are skipped."""
        while True:
            msg = await self.recv(timeout)
            if msg.WhichOneof("kind") == kind:
                return msg

    def hang_up(self) -> None:
        """End the stream from the bot's side, as a bot process that exits does.

        A test that leaves a bot holding an unanswered Turn makes the server's
        shutdown wait (up to its 10 s grace) for that bot's late answer.
        """
        self.call.cancel()

    async def answer(self, turn: bs.Turn, action: int) -> None:
        await self.send(bs.BotMessage(action=bs.Action(match_id=turn.match_id, turn_id=turn.turn_id, action=action)))
