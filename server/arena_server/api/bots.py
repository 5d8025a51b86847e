"""``arena.v1.BotService``: register bot names, submit programs, list bots, read failures.

A thin gRPC layer over :class:`arena_server.bots.registry.BotRegistry` (the hub's registry);
every refusal becomes a gRPC status whose details say what to do.
"""

from __future__ import annotations

from typing import Any, NoReturn

import grpc

from arena.v1 import bots_pb2 as bp
from arena.v1 import bots_pb2_grpc as bp_grpc
from arena_server.bots.failures import list_failures
from arena_server.bots.registry import BotRegistry, RegistryError, just_registered
from arena_server.matches.hub import Hub
from arena_server.seats.framing import Framing

_CODES = {
    "bad_name": grpc.StatusCode.INVALID_ARGUMENT,
    "taken": grpc.StatusCode.ALREADY_EXISTS,
    "unknown_bot": grpc.StatusCode.NOT_FOUND,
    "unauthenticated": grpc.StatusCode.UNAUTHENTICATED,
    "bad_upload": grpc.StatusCode.INVALID_ARGUMENT,
    "bad_params": grpc.StatusCode.INVALID_ARGUMENT,
    "quota": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "unsandboxed": grpc.StatusCode.FAILED_PRECONDITION,
}

_FRAMINGS = {
    bp.BOT_FRAMING_UNSPECIFIED: Framing.JSON,
    bp.BOT_FRAMING_JSON: Framing.JSON,
    bp.BOT_FRAMING_PROTO: Framing.PROTO,
}


def framing_to_proto(framing: Framing) -> bp.BotFraming.ValueType:
    return bp.BOT_FRAMING_PROTO if framing is Framing.PROTO else bp.BOT_FRAMING_JSON


async def _abort(context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    await context.abort(code, message)
    raise AssertionError("unreachable")


class BotServicer(bp_grpc.BotServiceServicer):
    """Serves the hub's bot registry."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    async def _registry(self, context: Any) -> BotRegistry:
        if self.hub.registry is None:
            await _abort(context, grpc.StatusCode.FAILED_PRECONDITION, "this server has no database for bots")
        return self.hub.registry

    async def RegisterBot(  # type: ignore[override]
        self, request: bp.RegisterBotRequest, context: grpc.aio.ServicerContext
    ) -> bp.RegisterBotResponse:
        registry = await self._registry(context)
        name = request.name.strip()
        if name in self.hub.hosted:
            await _abort(context, grpc.StatusCode.ALREADY_EXISTS, f"{name!r} is a hosted reference bot's name")
        try:
            token = await registry.register(name, list(request.games), request.description)
        except RegistryError as exc:
            await _abort(context, _CODES[exc.code], str(exc))
        # A guest squatting the name (or a look-alike) leaves now and is never seated as this bot.
        self.hub.evict_guests_named(name, just_registered(name))
        return bp.RegisterBotResponse(name=name, token=token)

    async def SubmitBot(  # type: ignore[override]
        self, request: bp.SubmitBotRequest, context: grpc.aio.ServicerContext
    ) -> bp.SubmitBotResponse:
        registry = await self._registry(context)
        framing = _FRAMINGS.get(request.framing)
        if framing is None:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"unknown framing {request.framing}")
        try:
            result = await registry.submit(
                request.name,
                request.token,
                request.filename,
                request.content,
                request.command,
                framing,
                list(request.games),
            )
        except RegistryError as exc:
            await _abort(context, _CODES[exc.code], str(exc))
        return bp.SubmitBotResponse(
            name=result.name,
            version=result.version,
            verdict=bp.SUBMISSION_VERDICT_ACCEPTED if result.accepted else bp.SUBMISSION_VERDICT_REJECTED,
            first_error=result.first_error,
            report=result.report,
        )

    async def ListBots(  # type: ignore[override]
        self, request: bp.ListBotsRequest, context: grpc.aio.ServicerContext
    ) -> bp.ListBotsResponse:
        registry = await self._registry(context)
        out = bp.ListBotsResponse()
        for bot in await registry.list_bots():
            summary = out.bots.add(
                name=bot.name,
                kind=bot.kind,
                games=list(bot.games),
                accepted_version=bot.accepted_version,
                latest_version=bot.latest_version,
                description=bot.description,
            )
            summary.created_at.FromDatetime(bot.created_at)
        return out

    async def GetFailures(  # type: ignore[override]
        self, request: bp.GetFailuresRequest, context: grpc.aio.ServicerContext
    ) -> bp.GetFailuresResponse:
        registry = await self._registry(context)
        limit = request.limit or 10
        if not 1 <= limit <= 100:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"limit={limit} is out of range; use 1..100")
        if await registry.is_registered(request.name):
            try:
                await registry.check_token(request.name, request.token)
            except RegistryError as exc:
                await _abort(context, _CODES[exc.code], str(exc))
        out = bp.GetFailuresResponse()
        for row in await list_failures(registry.store.conn, request.name, limit):
            failure = out.failures.add(
                match_id=row.match_id,
                game=row.game,
                seat=row.seat,
                version=row.version,
                termination=int(row.termination),  # type: ignore[arg-type]
                reason=row.reason,
                turn_id=row.turn_id,
                received=row.received,
                sent=row.sent,
                stderr_tail=row.stderr_tail,
            )
            failure.at.FromDatetime(row.at)
        return out


SERVICE_NAME = bp.DESCRIPTOR.services_by_name["BotService"].full_name
