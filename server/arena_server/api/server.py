"""The gRPC server: BotSessionService, GameService, MatchService, health and reflection.

:func:`build_server` wires a :class:`~arena_server.matches.hub.Hub` to a grpc.aio
server on a port (0 picks a free one, as tests do).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import bot_session_pb2_grpc as bs_grpc
from arena.v1 import bots_pb2_grpc as bp_grpc
from arena.v1 import common_pb2 as common
from arena.v1 import games_pb2 as gp
from arena.v1 import games_pb2_grpc as gp_grpc
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client.convert import (
    duration,
    observation_to_proto,
    param_value,
    params_from_proto,
    params_to_proto,
    seat_to_proto,
    time_control_from_proto,
    time_control_to_proto,
)
from arena_games import CHANCE, registered_games
from arena_server import __version__
from arena_server.api.bots import SERVICE_NAME as BOT_SERVICE_NAME
from arena_server.api.bots import BotServicer
from arena_server.api.ladder import SERVICE_NAME as LADDER_SERVICE_NAME
from arena_server.api.ladder import add_to_server as add_ladder_service
from arena_server.matches.hub import Hub, HubError, RunningMatch
from arena_server.referee.loop import MatchRecord
from arena_server.seats.remote import MAX_MESSAGE_BYTES, RemoteSession
from arena_server.store.database import hash_token

PROTOCOL_VERSION = "arena.v1"
PING_INTERVAL = 20.0
"""Seconds of idleness before the server pings a remote bot."""

_HUB_CODES = {
    "unknown_bot": bs.ERROR_CODE_UNKNOWN_BOT,
    "unsupported_game": bs.ERROR_CODE_UNSUPPORTED_GAME,
    "bad_params": bs.ERROR_CODE_BAD_PARAMS,
}
_GRPC_CODES = {
    "unknown_bot": grpc.StatusCode.NOT_FOUND,
    "unknown_match": grpc.StatusCode.NOT_FOUND,
    "unsupported_game": grpc.StatusCode.INVALID_ARGUMENT,
    "bad_params": grpc.StatusCode.INVALID_ARGUMENT,
    "stopping": grpc.StatusCode.UNAVAILABLE,
    "store": grpc.StatusCode.UNAVAILABLE,
    "busy": grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def record_to_proto(record: MatchRecord, running: bool = False, with_moves: bool = True) -> mp.MatchRecord:
    """A stored or live match as ``arena.v1.MatchRecord``.

    For a running match the seed stays secret and only public moves are listed.
    """
    game = record.game
    msg = mp.MatchRecord(
        match_id=record.match_id,
        game=game.name,
        seats=[seat_to_proto(s) for s in record.seats],
        time_control=time_control_to_proto(record.time_control),
        seed_sha256=record.seed_sha256,
        rated=record.rated,
        returns=list(record.returns),
        reason=record.reason,
        move_count=len(record.moves),
    )
    params_to_proto(game.params, msg.params)
    msg.started_at.FromDatetime(record.started_at)
    if running or record.termination is None:
        msg.status = mp.MATCH_STATUS_RUNNING
    else:
        msg.status = mp.MATCH_STATUS_ABORTED if record.termination.name == "ABORTED" else mp.MATCH_STATUS_FINISHED
        msg.termination = int(record.termination)  # type: ignore[assignment]
        msg.seed = record.seed
        if record.ended_at is not None:
            msg.ended_at.FromDatetime(record.ended_at)
        if record.offender is not None:
            msg.offender = record.offender
    if with_moves:
        reveal = not running and record.termination is not None
        for ply, (player, action, elapsed, legal) in enumerate(record.moves):
            if player == CHANCE and not (reveal or game.chance_is_public):
                continue
            msg.moves.append(
                mp.MoveRecord(
                    ply=ply,
                    seat=player,
                    action=action,
                    label=game.action_to_string(player, action),
                    elapsed=duration(timedelta(seconds=elapsed)),
                    legal=legal,
                )
            )
    return msg


class BotSessionServicer(bs_grpc.BotSessionServiceServicer):
    """``Play``: one remote bot session per stream."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._challenge_ids = itertools.count(1)

    async def Play(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> None:  # type: ignore[override]
        hub = self.hub
        session = RemoteSession(context.write, context.peer())
        try:
            first = await self._read(context, session)
            if first is None:
                return
            if first.WhichOneof("kind") != "hello":
                await session.error(
                    bs.ERROR_CODE_NO_HELLO,
                    f"the first message must be hello, got {first.WhichOneof('kind') or 'an empty message'}; "
                    "send BotMessage{hello: {protocol_version: 'arena.v1', name: ...}} first",
                    fatal=True,
                )
                return
            if not await self._welcome(session, first.hello):
                return
            pinger = asyncio.ensure_future(self._ping(session))
            try:
                await self._read_loop(context, session)
            finally:
                pinger.cancel()
        finally:
            session.mark_closed(session.close_reason or "the stream ended")
            if hub.sessions.get(session.name) is session:
                del hub.sessions[session.name]

    async def _welcome(self, session: RemoteSession, hello: bs.Hello) -> bool:
        hub = self.hub
        if hello.protocol_version and hello.protocol_version != PROTOCOL_VERSION:
            await session.error(
                bs.ERROR_CODE_VERSION,
                f"protocol version {hello.protocol_version!r} is not supported; this server speaks {PROTOCOL_VERSION}",
                fatal=True,
            )
            return False
        unknown = [g for g in hello.games if g not in registered_games()]
        if unknown:
            await session.error(
                bs.ERROR_CODE_UNSUPPORTED_GAME,
                f"unknown game(s) in hello: {', '.join(unknown)}; games are: {', '.join(registered_games())}",
                fatal=True,
            )
            return False
        name = hello.name.strip()
        if not name:
            name = hub.new_guest_name()
            session.guest = True
        else:
            if name in hub.hosted or name in hub.sessions:
                await session.error(
                    bs.ERROR_CODE_NAME_TAKEN,
                    f"the name {name!r} is already in use by a {'hosted' if name in hub.hosted else 'connected'} bot; "
                    "pick another name, or leave it empty to play as a guest",
                    fatal=True,
                )
                return False
            stored = await hub.store.bot_token_hash(name) if hub.store is not None else None
            if stored is not None:
                if not hello.token or hash_token(hello.token) != stored:
                    await session.error(
                        bs.ERROR_CODE_UNAUTHENTICATED,
                        f"{name!r} is a registered bot; send its token in hello.token, or play under another name",
                        fatal=True,
                    )
                    return False
                session.guest = False
            else:
                session.guest = True
        session.name = name
        session.games = tuple(hello.games)
        hub.sessions[name] = session
        await session.send(
            bs.ServerMessage(
                welcome=bs.Welcome(
                    bot_name=name,
                    guest=session.guest,
                    server_version=__version__,
                    protocol_version=PROTOCOL_VERSION,
                    message=f"welcome, {name}; send a challenge to play a hosted bot "
                    f"({', '.join(sorted(hub.hosted))}) or wait to be seated",
                )
            )
        )
        return True

    async def _read(self, context: grpc.aio.ServicerContext, session: RemoteSession) -> bs.BotMessage | None:
        """One message from the bot, or None when the stream ended (the session is then closed)."""
        try:
            msg = await context.read()
        except grpc.aio.AioRpcError as exc:
            session.mark_closed(f"the stream failed: {exc.details()}")
            return None
        except Exception as exc:  # undecodable bytes surface here
            reason = f"sent a message that is not a valid arena.v1.BotMessage ({type(exc).__name__})"
            session.protocol_violation(reason)
            await session.error(bs.ERROR_CODE_BAD_MESSAGE, reason, fatal=True)
            session.mark_closed(reason)
            return None
        if msg is grpc.aio.EOF:
            session.mark_closed("the bot closed the stream")
            return None
        assert isinstance(msg, bs.BotMessage)
        size = msg.ByteSize()
        if size > MAX_MESSAGE_BYTES:
            reason = f"sent a {size}-byte message; the limit is {MAX_MESSAGE_BYTES} bytes"
            session.protocol_violation(reason)
            await session.error(bs.ERROR_CODE_TOO_LARGE, reason, fatal=True)
            session.mark_closed(reason)
            return None
        return msg

    async def _read_loop(self, context: grpc.aio.ServicerContext, session: RemoteSession) -> None:
        while True:
            msg = await self._read(context, session)
            if msg is None:
                return
            kind = msg.WhichOneof("kind")
            if kind == "action":
                session.on_action(msg.action)
            elif kind == "pong":
                pass  # a live bot answered a ping; nothing else to do
            elif kind == "challenge":
                self.hub.spawn(self._challenge(session, msg.challenge))
            elif kind == "resign":
                session.on_resign(msg.resign)
            else:
                reason = (
                    f"sent {kind or 'an empty message'} after hello; only action, resign, pong and challenge are valid"
                )
                session.protocol_violation(reason)
                await session.error(bs.ERROR_CODE_BAD_MESSAGE, reason, fatal=True)
                session.mark_closed(reason)
                return

    async def _ping(self, session: RemoteSession) -> None:
        nonce = 0
        while not session.closed.is_set():
            await asyncio.sleep(PING_INTERVAL)
            if session.seat is None:
                nonce += 1
                await session.send(bs.ServerMessage(ping=bs.Ping(nonce=nonce)))

    async def _challenge(self, session: RemoteSession, ch: bs.Challenge) -> None:
        hub = self.hub
        challenge_id = f"c-{next(self._challenge_ids)}"

        async def status(state: int, **kw: Any) -> None:
            await session.send(
                bs.ServerMessage(
                    challenge_status=bs.ChallengeStatus(challenge_id=challenge_id, state=state, **kw)  # type: ignore[arg-type]
                )
            )

        try:
            game = hub.resolve_game(ch.game, params_from_proto(ch.params))
            if ch.opponent == session.name:
                raise HubError("bad_params", "a bot cannot challenge itself; name another opponent")
            hub.check_bots(
                game, [ch.opponent] * game.num_players if game.num_players > 2 else [ch.opponent, ch.opponent]
            )
            if session.games and game.name not in session.games:
                raise HubError("unsupported_game", f"you said in hello that you play {', '.join(session.games)}")
            tc = time_control_from_proto(ch.time_control) if ch.HasField("time_control") else None
            rated = False
            if ch.rated:
                opponent_guest = ch.opponent in hub.sessions and hub.sessions[ch.opponent].guest
                if session.guest or opponent_guest:
                    raise HubError(
                        "bad_params",
                        "rated games are only for registered bots on both sides; register your bot's name to get "
                        "a token (or challenge without rated to play unrated)",
                    )
                rated = True
        except (HubError, ValueError) as exc:
            code = getattr(exc, "code", "bad_params")
            await status(bs.ChallengeStatus.STATE_REFUSED, reason=str(exc))
            await session.error(_HUB_CODES.get(code, bs.ERROR_CODE_BAD_PARAMS), str(exc))
            return
        count = max(ch.matches, 1)
        for index in range(count):
            if session.closed.is_set() or hub.stopping:
                return
            fixed = ch.HasField("seat") and ch.seat >= 0
            my_seat = ch.seat % game.num_players if fixed else index % game.num_players
            names = [ch.opponent] * game.num_players
            names[my_seat] = session.name

            async def queued(name: str, position: int) -> None:
                await status(
                    bs.ChallengeStatus.STATE_QUEUED,
                    queue_position=position,
                    reason=f"{name} is playing another match; you are number {position} in its queue",
                )

            try:
                running: RunningMatch = await hub.start_match(
                    game, names, tc, ch.seed or None, rated=rated, on_queued=queued
                )
            except HubError as exc:  # includes a database that cannot record the match (code "store")
                await status(bs.ChallengeStatus.STATE_REFUSED, reason=str(exc))
                return
            except Exception as exc:  # never leave the bot waiting for a match that will not come
                reason = f"the server could not start the match: {exc!r}"
                print(f"arena: challenge {challenge_id} from {session.name}: {reason}", file=sys.stderr, flush=True)
                await status(bs.ChallengeStatus.STATE_REFUSED, reason=reason)
                return
            await status(bs.ChallengeStatus.STATE_STARTED, match_id=running.record.match_id)
            if running.task is not None:
                await asyncio.wait([running.task])
        await status(bs.ChallengeStatus.STATE_DONE)


class GameServicer(gp_grpc.GameServiceServicer):
    async def ListGames(self, request: gp.ListGamesRequest, context: Any) -> gp.ListGamesResponse:  # type: ignore[override]
        return list_games_proto()


def list_games_proto() -> gp.ListGamesResponse:
    out = gp.ListGamesResponse()
    for name, cls in registered_games().items():
        info = out.games.add(
            name=name,
            title=cls.title,
            rules=cls.rules,
            min_players=cls.min_players,
            max_players=cls.max_players,
        )
        for spec in cls.param_specs:
            p = info.params.add(name=spec.name, type=spec.type.__name__, description=spec.description)
            p.choices.extend(spec.choices)
            if spec.min is not None:
                p.min = spec.min
            if spec.max is not None:
                p.max = spec.max
            param_value(spec.default, p.default)
    return out


class MatchServicer(mp_grpc.MatchServiceServicer):
    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    async def CreateMatch(
        self, request: mp.CreateMatchRequest, context: grpc.aio.ServicerContext
    ) -> mp.CreateMatchResponse:  # type: ignore[override]
        hub = self.hub
        try:
            game = hub.resolve_game(request.game, params_from_proto(request.params))
            tc = time_control_from_proto(request.time_control) if request.HasField("time_control") else None
            running = await hub.start_match(game, list(request.bots), tc, request.seed or None)
        except HubError as exc:
            await context.abort(_GRPC_CODES.get(exc.code, grpc.StatusCode.INVALID_ARGUMENT), str(exc))
            raise AssertionError("unreachable") from None
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise AssertionError("unreachable") from None
        response = mp.CreateMatchResponse(match_id=running.record.match_id)
        if request.wait and running.task is not None:
            record = await asyncio.shield(running.task)
            response.record.CopyFrom(record_to_proto(record))
        return response

    async def GetMatch(self, request: mp.GetMatchRequest, context: grpc.aio.ServicerContext) -> mp.MatchRecord:  # type: ignore[override]
        running = self.hub.running.get(request.match_id)
        if running is not None:
            return record_to_proto(running.record, running=running.record.termination is None)
        record = await self.hub.store.get_match(request.match_id) if self.hub.store is not None else None
        if record is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no match with id {request.match_id!r}")
            raise AssertionError("unreachable")
        return record_to_proto(record)

    async def ListMatches(
        self, request: mp.ListMatchesRequest, context: grpc.aio.ServicerContext
    ) -> mp.ListMatchesResponse:  # type: ignore[override]
        limit = request.limit or 20
        if not 1 <= limit <= 1000:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"limit={limit} is out of range; use 1..1000")
        out = mp.ListMatchesResponse()
        if self.hub.store is not None:
            for record in await self.hub.store.list_matches(request.game, request.bot, limit):
                out.matches.append(record_to_proto(record, with_moves=False))
        return out

    async def WatchMatch(
        self, request: mp.WatchMatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[mp.MatchEvent]:  # type: ignore[override]
        match_id = request.match_id
        if not match_id:
            if not request.game:
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, "give a match_id, or a game to follow its next match"
                )
            if request.game not in registered_games():
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"unknown game {request.game!r}; games are: {', '.join(registered_games())}",
                )
            match_id = await self.hub.next_match(request.game)
        try:
            async for kind, payload in self.hub.watch(match_id):
                if kind == "started":
                    yield mp.MatchEvent(started=record_to_proto(payload, running=True, with_moves=False))
                elif kind == "moves":
                    moves, seen = payload
                    yield mp.MatchEvent(
                        update=mp.SpectatorUpdate(
                            moves=[common.PublicMove(seat=m.seat, action=m.action, label=m.label) for m in moves],
                            observation=observation_to_proto(seen),
                        )
                    )
                elif kind == "ended":
                    yield mp.MatchEvent(ended=record_to_proto(payload))
        except HubError as exc:
            await context.abort(_GRPC_CODES.get(exc.code, grpc.StatusCode.NOT_FOUND), str(exc))


SERVICE_NAMES = (
    bs.DESCRIPTOR.services_by_name["BotSessionService"].full_name,
    gp.DESCRIPTOR.services_by_name["GameService"].full_name,
    mp.DESCRIPTOR.services_by_name["MatchService"].full_name,
    LADDER_SERVICE_NAME,  # issue 5
    BOT_SERVICE_NAME,  # issue 4
)


async def build_server(hub: Hub, host: str = "127.0.0.1", port: int = 50051) -> tuple[grpc.aio.Server, int]:
    """Create (not start) the gRPC server; returns it and the bound port.

    Raises:
        OSError: the port cannot be bound.
    """
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", 4 * 1024 * 1024),
            ("grpc.so_reuseport", 0),
        ]
    )
    bs_grpc.add_BotSessionServiceServicer_to_server(BotSessionServicer(hub), server)
    gp_grpc.add_GameServiceServicer_to_server(GameServicer(), server)
    mp_grpc.add_MatchServiceServicer_to_server(MatchServicer(hub), server)
    bp_grpc.add_BotServiceServicer_to_server(BotServicer(hub), server)  # issue 4: bot_service.py
    add_ladder_service(hub, server)  # issue 5: leaderboards, crosstables, replays
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection((*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    return server, bind_port(server, host, port)


def bind_port(server: grpc.aio.Server, host: str, port: int) -> int:
    """Listen on ``host:port`` (0 picks a free port) and return the port.

    Raises:
        OSError: the address cannot be bound, with a message saying so.
    """
    address = f"{host}:{port}"
    try:
        bound = int(server.add_insecure_port(address))
    except RuntimeError as exc:
        raise OSError(f"cannot listen on {address}: {exc}") from exc
    if bound == 0:
        raise OSError(f"cannot listen on {address}: the port is in use or not allowed")
    return bound


@contextlib.asynccontextmanager
async def running_server(
    hub: Hub, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[tuple[grpc.aio.Server, int]]:
    """Start a server for the duration of the block (tests, benchmarks); abort matches on exit."""
    server, bound = await build_server(hub, host, port)
    await server.start()
    try:
        yield server, bound
    finally:
        await hub.shutdown()
        await server.stop(grace=1)
