"""``arena.v1.LadderService``: leaderboards, crosstables, a bot's matches, a seat's messages.

Every RPC here only reads: leaderboards and crosstables are served from the
last stored fit (with the pool's ``dirty`` flag and ``fitted_at`` so a client
can see how fresh it is); refits run in the ladder's background loop.
"""

from __future__ import annotations

from datetime import datetime
from typing import NoReturn, TypeAlias

import grpc

import arena_server.ratings.fit as rt
import arena_server.store.ratings as ls
from arena.v1 import ladder_pb2 as lp
from arena.v1 import ladder_pb2_grpc as lp_grpc
from arena_client import Termination
from arena_client.convert import params_from_proto
from arena_games import GameError, load_game
from arena_server.api.matches import record_to_proto
from arena_server.matches.hub import Hub
from arena_server.matches.replay import seat_messages

Ctx: TypeAlias = grpc.aio.ServicerContext

SERVICE_NAME = lp.DESCRIPTOR.services_by_name["LadderService"].full_name


def _pool_proto(info: ls.PoolInfo) -> lp.Pool:
    msg = lp.Pool(pool=info.pool, game=info.game, method=info.method, matches=info.matches, dirty=info.dirty)
    if info.fitted_at:
        msg.fitted_at.FromDatetime(datetime.fromisoformat(info.fitted_at))
    return msg


class LadderServicer(lp_grpc.LadderServiceServicer):
    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    async def _abort(self, context: Ctx, code: grpc.StatusCode, message: str) -> NoReturn:
        await context.abort(code, message)
        raise AssertionError("unreachable")

    async def _pool(self, selector: lp.PoolSelector, context: Ctx) -> ls.PoolInfo:
        store = self.hub.store
        if store is None:
            await self._abort(context, grpc.StatusCode.FAILED_PRECONDITION, "this server keeps no database")
        if selector.pool:
            key = selector.pool
        else:
            if not selector.game:
                await self._abort(
                    context, grpc.StatusCode.INVALID_ARGUMENT, "name a pool: set game (and params) or pool"
                )
            try:
                key = ls.pool_key(load_game(selector.game, **params_from_proto(selector.params)))
            except GameError as exc:
                await self._abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        info = await ls.pool_info(store.conn, key)
        if info is None:
            known = ", ".join(p.pool for p in await ls.list_pools(store.conn)) or "none yet"
            await self._abort(context, grpc.StatusCode.NOT_FOUND, f"no rated matches in pool {key!r}; pools: {known}")
        return info  # the last stored fit: reading never refits or writes

    async def ListPools(self, request: lp.ListPoolsRequest, context: Ctx) -> lp.ListPoolsResponse:  # type: ignore[override]
        out = lp.ListPoolsResponse()
        if self.hub.store is not None:
            out.pools.extend(_pool_proto(p) for p in await ls.list_pools(self.hub.store.conn))
        return out

    async def GetLeaderboard(self, request: lp.GetLeaderboardRequest, context: Ctx) -> lp.Leaderboard:  # type: ignore[override]
        limit = request.limit or 100
        if not 1 <= limit <= 10_000:
            await self._abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"limit={limit}: use 1..10000")
        info = await self._pool(request.pool, context)
        assert self.hub.store is not None
        out = lp.Leaderboard(pool=_pool_proto(info))
        for row in await ls.leaderboard(self.hub.store.conn, info.pool, limit):
            entry = out.entries.add(
                rank=row.rank,
                bot_name=row.bot,
                rating=row.rating,
                ci95=row.ci,
                games=row.games,
                wins=row.wins,
                draws=row.draws,
                losses=row.losses,
                paused_reason=row.paused_reason,
                component=row.component,
            )
            if row.last_active:
                entry.last_active.FromDatetime(datetime.fromisoformat(row.last_active))
        return out

    async def GetCrosstable(self, request: lp.GetCrosstableRequest, context: Ctx) -> lp.Crosstable:  # type: ignore[override]
        info = await self._pool(request.pool, context)
        assert self.hub.store is not None
        conn = self.hub.store.conn
        rows = await ls.leaderboard(conn, info.pool, 1_000_000)
        rating = {r.bot: r.rating for r in rows}
        out = lp.Crosstable(pool=_pool_proto(info), bots=[r.bot for r in rows])
        for p in await ls.crosstable(conn, info.pool):
            mean, low, high = rt.score_interval(p.games, p.wins_a, p.draws, p.losses_a)
            out.cells.add(
                bot_a=p.a,
                bot_b=p.b,
                games=p.games,
                score_a=p.score_a,
                wins_a=p.wins_a,
                draws=p.draws,
                losses_a=p.losses_a,
                mean=mean,
                ci_low=low,
                ci_high=high,
                expected=rt.expected_score(rating.get(p.a, 1500.0), rating.get(p.b, 1500.0)),
            )
        return out

    async def ListBotMatches(self, request: lp.ListBotMatchesRequest, context: Ctx) -> lp.ListBotMatchesResponse:  # type: ignore[override]
        limit = request.limit or 20
        if not 1 <= limit <= 1000:
            await self._abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"limit={limit}: use 1..1000")
        if not request.bot_name:
            await self._abort(context, grpc.StatusCode.INVALID_ARGUMENT, "bot_name is required")
        out = lp.ListBotMatchesResponse()
        if self.hub.store is None:
            return out
        for record in await self.hub.store.list_matches(request.game, request.bot_name, limit):
            seat = next((s.seat for s in record.seats if s.bot_name == request.bot_name), 0)
            score, result = 0.0, ""
            if record.termination is not None and record.termination != Termination.ABORTED and record.returns:
                fx = ls.match_effects(record.game, tuple(s.bot_name for s in record.seats), tuple(record.returns), "")
                mine = fx.seats[seat]
                score = mine.score
                result = "win" if mine.win else "draw" if mine.draw else "loss"
            out.matches.add(match=record_to_proto(record), seat=seat, score=score, result=result)
        return out

    async def GetSeatMessages(self, request: lp.GetSeatMessagesRequest, context: Ctx) -> lp.GetSeatMessagesResponse:  # type: ignore[override]
        store = self.hub.store
        if request.match_id in self.hub.running:
            await self._abort(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                f"match {request.match_id} is still running; what a seat was sent is secret until it ends",
            )
        record = await store.get_match(request.match_id) if store is not None else None
        if record is None:
            await self._abort(context, grpc.StatusCode.NOT_FOUND, f"no match with id {request.match_id!r}")
        if record.termination is None:
            await self._abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"match {request.match_id} has not ended")
        try:
            messages = seat_messages(record, request.seat)
        except ValueError as exc:
            await self._abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return lp.GetSeatMessagesResponse(messages=messages)


def add_to_server(hub: Hub, server: grpc.aio.Server) -> None:
    lp_grpc.add_LadderServiceServicer_to_server(LadderServicer(hub), server)
