"""The gRPC server: BotSessionService, GameService, MatchService, health and reflection.

:func:`build_server` wires a :class:`~arena_server.matches.hub.Hub` to a grpc.aio
server on a port (0 picks a free one, as tests do).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration
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
from arena_client import TimeControl
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
from arena_games import CHANCE, Game, registered_games
from arena_server import __version__
from arena_server.api.bots import SERVICE_NAME as BOT_SERVICE_NAME
from arena_server.api.bots import BotServicer
from arena_server.api.ladder import SERVICE_NAME as LADDER_SERVICE_NAME
from arena_server.api.ladder import add_to_server as add_ladder_service
from arena_server.bots.registry import RegistryError, check_player_name
from arena_server.matches.hub import Hub, HubError, RunningMatch
from arena_server.referee.loop import MatchRecord
from arena_server.seats.remote import MAX_MESSAGE_BYTES, WRITE_TIMEOUT, RemoteSession
from arena_server.store.database import hash_token

PROTOCOL_VERSION = "arena.v1"
PING_INTERVAL = 20.0
"""Seconds of idleness before the server pings a remote bot."""
HELLO_TIMEOUT = 5.0
"""Seconds a remote bot has, from opening its stream, to send its Hello."""
PONG_BURST = 20
"""Pongs a bot may send that answer no Ping (keep-alives) before :data:`PONG_RATE` applies."""
PONG_RATE = 1.0
"""Unsolicited pongs per second a bot may send in the long run; a faster bot is disconnected."""
MAX_MOVES_PER_PAGE = 10_000
"""Most moves one GetMatch reply (or a WatchMatch end event) carries; ask for the rest by move_offset."""

MAX_PER_MOVE = timedelta(seconds=300)
MAX_OVERAGE = timedelta(seconds=600)
MAX_GRACE = timedelta(seconds=5)
MAX_ROUNDS = 100_000
"""Server caps on what a remote request (Challenge, CreateMatch) may ask for; the ladder, tournaments
and the CLI are configured by the operator and not capped."""
MAX_CHALLENGE_MATCHES = 1000
MAX_MATCHES_PER_CALLER = 8
"""CreateMatch matches in flight per caller address."""
RATED_REFUSAL = (
    "challenges are always unrated: rated matches come only from the ladder's own pairings "
    "(register your bot and keep it connected, or submit it, to be paired); send the challenge without rated"
)

_HUB_CODES = {
    "unknown_bot": bs.ERROR_CODE_UNKNOWN_BOT,
    "unsupported_game": bs.ERROR_CODE_UNSUPPORTED_GAME,
    "bad_params": bs.ERROR_CODE_BAD_PARAMS,
    "forbidden": bs.ERROR_CODE_UNAUTHENTICATED,
}
_GRPC_CODES = {
    "unknown_bot": grpc.StatusCode.NOT_FOUND,
    "unknown_match": grpc.StatusCode.NOT_FOUND,
    "unsupported_game": grpc.StatusCode.INVALID_ARGUMENT,
    "bad_params": grpc.StatusCode.INVALID_ARGUMENT,
    "stopping": grpc.StatusCode.UNAVAILABLE,
    "store": grpc.StatusCode.UNAVAILABLE,
    "busy": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "forbidden": grpc.StatusCode.PERMISSION_DENIED,
}


def check_request_limits(game: Game, tc: TimeControl | None) -> None:
    """Refuse clocks and sizes beyond the server's caps for remote requests.

    Raises:
        HubError: ``bad_params``, saying which limit and what to use.
    """
    if tc is not None:
        for what, value, cap in (
            ("per-move time", tc.per_move, MAX_PER_MOVE),
            ("overage", tc.overage, MAX_OVERAGE),
            ("grace", tc.grace, MAX_GRACE),
        ):
            if value > cap:
                raise HubError(
                    "bad_params",
                    f"a {what} of {value.total_seconds():g} s is over this server's limit of "
                    f"{cap.total_seconds():g} s; ask for at most that",
                )
    rounds = game.params.get("rounds")
    if isinstance(rounds, int) and not isinstance(rounds, bool) and rounds > MAX_ROUNDS:
        raise HubError(
            "bad_params", f"rounds={rounds} is over this server's limit of {MAX_ROUNDS}; ask for at most that"
        )


def check_chosen_seed(hub: Hub, bot_names: Sequence[str]) -> None:
    """Refuse a caller-chosen seed for a match with a hosted bot (it could replay the bot's randomness).

    Raises:
        HubError: ``bad_params``, naming the hosted bot.
    """
    hosted = [n for n in bot_names if n in hub.hosted]
    if hosted:
        raise HubError(
            "bad_params",
            f"a chosen seed is not allowed against the hosted bot {hosted[0]!r}: its randomness derives from the "
            "seed; leave the seed empty (chosen seeds are only for matches between your own bots)",
        )


def _peer_host(peer: str) -> str:
    """The caller's address without its port ("ipv4:127.0.0.1:5123" -> "ipv4:127.0.0.1")."""
    head, sep, tail = peer.rpartition(":")
    return head if sep and tail.isdigit() and head.count(":") >= 1 else peer


def record_to_proto(record: MatchRecord, running: bool = False, with_moves: bool = True) -> mp.MatchRecord:
    """A stored or live match as ``arena.v1.MatchRecord``.

    For a running match the seed stays secret (only its commitment
    ``seed_sha256`` is shown) and only public moves are listed; the seed is
    revealed once the match has ended, finished or aborted.
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
        seed_chosen=record.seed_chosen,
    )
    params_to_proto(game.params, msg.params)
    msg.started_at.FromDatetime(record.started_at)
    if running or record.termination is None:
        msg.status = mp.MATCH_STATUS_RUNNING
    else:
        msg.status = mp.MATCH_STATUS_ABORTED if record.termination.name == "ABORTED" else mp.MATCH_STATUS_FINISHED
        msg.termination = int(record.termination)  # type: ignore[assignment]
        if not record.seed_sealed:  # a duplicate set's seed waits for the set's last match
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
            try:
                first = await asyncio.wait_for(self._read(context, session), HELLO_TIMEOUT)
            except TimeoutError:
                reason = f"sent no Hello within {HELLO_TIMEOUT:g}s of opening the stream"
                await session.error(
                    bs.ERROR_CODE_NO_HELLO,
                    f"{reason}; send BotMessage{{hello: {{protocol_version: 'arena.v1', name: ...}}}} "
                    "as soon as the stream is open",
                    fatal=True,
                )
                session.mark_closed(reason)
                return
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
            reader = asyncio.ensure_future(self._read_loop(context, session))
            closed = asyncio.ensure_future(session.closed.wait())
            try:
                # The session can also be closed from the writing side (a bot that stops reading).
                await asyncio.wait([reader, closed], return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (pinger, reader, closed):
                    task.cancel()
                await asyncio.gather(pinger, reader, closed, return_exceptions=True)
        finally:
            session.mark_closed(session.close_reason or "the stream ended")
            if hub.sessions.get(session.name) is session:
                del hub.sessions[session.name]
                hub.session_keys.pop(session.name, None)
            await session.flush()  # a last fatal Error, if any, within a short deadline
            await session.stop_writing()

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
            try:
                name = check_player_name(name)
            except RegistryError as exc:
                await session.error(bs.ERROR_CODE_NAME_TAKEN, str(exc), fatal=True)
                return False
            in_use = hub.name_in_use(name)
            if in_use is not None:
                kind, other = in_use
                same = "is already in use by" if other == name else f"looks the same as {other!r}, the name of"
                await session.error(
                    bs.ERROR_CODE_NAME_TAKEN,
                    f"the name {name!r} {same} a {kind} bot; pick another name, or leave it empty to play as a guest",
                    fatal=True,
                )
                return False
            registered = await self._registered_like(name)
            if registered is not None and registered != name:
                await session.error(
                    bs.ERROR_CODE_NAME_TAKEN,
                    f"the name {name!r} looks the same as the registered bot {registered!r}; connect as "
                    f"{registered!r} with its token, or pick another name",
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
        session_token = secrets.token_urlsafe(24)
        hub.session_keys[name] = hash_token(session_token)
        await session.send(
            bs.ServerMessage(
                welcome=bs.Welcome(
                    bot_name=name,
                    guest=session.guest,
                    server_version=__version__,
                    protocol_version=PROTOCOL_VERSION,
                    message=f"welcome, {name}; send a challenge to play a hosted bot "
                    f"({', '.join(sorted(hub.hosted))}) or wait to be seated",
                    session_token=session_token,
                )
            )
        )
        return True

    async def _registered_like(self, name: str) -> str | None:
        """The registered bot name ``name`` normalises to, or None."""
        hub = self.hub
        if hub.registry is not None:
            return await hub.registry.registered_like(name)
        if hub.store is not None and await hub.store.bot_token_hash(name) is not None:
            return name
        return None

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
        pongs = _PongBudget(session)
        while True:
            msg = await self._read(context, session)
            if msg is None or session.closed.is_set():
                return  # an evicted session reads nothing more
            kind = msg.WhichOneof("kind")
            if kind == "action":
                session.on_action(msg.action)
            elif kind == "pong":
                if not pongs.allow(msg.pong.nonce):
                    reason = (
                        f"sent pongs faster than {PONG_RATE:g} per second without being pinged; "
                        "send a Pong only to answer a Ping"
                    )
                    session.protocol_violation(reason)
                    await session.error(bs.ERROR_CODE_BAD_MESSAGE, reason, fatal=True)
                    session.mark_closed(reason)
                    return
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
        while not session.closed.is_set():
            await asyncio.sleep(PING_INTERVAL)
            if session.seat is None:
                session.ping_nonce += 1
                await session.send(bs.ServerMessage(ping=bs.Ping(nonce=session.ping_nonce)))

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
            if hub.sessions.get(session.name) is not session:
                raise HubError("forbidden", f"this session no longer holds the name {session.name!r}; reconnect")
            if ch.rated:
                raise HubError("bad_params", RATED_REFUSAL)
            game = hub.resolve_game(ch.game, params_from_proto(ch.params))
            if ch.opponent == session.name:
                raise HubError("bad_params", "a bot cannot challenge itself; name another opponent")
            hub.check_bots(
                game, [ch.opponent] * game.num_players if game.num_players > 2 else [ch.opponent, ch.opponent]
            )
            if session.games and game.name not in session.games:
                raise HubError("unsupported_game", f"you said in hello that you play {', '.join(session.games)}")
            tc = time_control_from_proto(ch.time_control) if ch.HasField("time_control") else None
            check_request_limits(game, tc)
            if ch.matches > MAX_CHALLENGE_MATCHES:
                raise HubError(
                    "bad_params", f"matches={ch.matches} is over the limit of {MAX_CHALLENGE_MATCHES} per challenge"
                )
            if ch.seed:
                check_chosen_seed(hub, [ch.opponent])
                if not await self._owns(ch.opponent, ch.opponent_token):
                    raise HubError(
                        "forbidden",
                        f"a chosen seed is only for matches between your own bots; send {ch.opponent!r}'s token in "
                        "opponent_token, or leave the seed empty",
                    )
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
                    game, names, tc, ch.seed or None, on_queued=queued, seed_chosen=bool(ch.seed)
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

    async def _owns(self, name: str, token: str) -> bool:
        return await owns_bot(self.hub, name, token)


async def owns_bot(hub: Hub, name: str, token: str) -> bool:
    """Whether ``token`` proves the right to seat bot ``name``.

    Accepted: the registered bot's token, or the ``Welcome.session_token`` of
    the session connected under ``name`` (the only proof a guest has). Hosted
    bots belong to nobody, so no token proves them.
    """
    if not token or name in hub.hosted:
        return False
    offered = hash_token(token)
    if hub.session_keys.get(name) == offered and name in hub.sessions:
        return True
    stored = await hub.store.bot_token_hash(name) if hub.store is not None else None
    return stored is not None and secrets.compare_digest(stored, offered)


async def authorize_bots(hub: Hub, names: Sequence[str], tokens: Mapping[str, str]) -> None:
    """Refuse to seat a bot that is not hosted unless its token is presented.

    Raises:
        HubError: ``forbidden``, naming the bot and the token to send.
    """
    for name in dict.fromkeys(names):
        if name in hub.hosted:
            continue
        connected = name in hub.sessions
        submitted = hub.registry is not None and name in hub.registry.programs
        if not (connected or submitted):
            continue  # unknown: start_match says so
        if not await owns_bot(hub, name, tokens.get(name, "")):
            what = "a connected remote bot" if connected else "a registered bot"
            raise HubError(
                "forbidden",
                f"{name!r} is {what}; seating it needs its token in bot_tokens[{name!r}] (its registered token, "
                "or a guest's Welcome.session_token); without tokens only hosted bots can be matched",
            )


class _PongBudget:
    """Pongs answering the server's last Ping are free; others (keep-alives) come from a token bucket.

    A bot flooding pongs would cost the event loop a read per pong, at the
    expense of every other match; past the bucket it is disconnected.
    """

    def __init__(self, session: RemoteSession) -> None:
        self.session = session
        self.tokens = float(PONG_BURST)
        self.last = time.monotonic()
        self.answered = 0

    def allow(self, nonce: int) -> bool:
        """Count one pong; False once the bot sends them faster than the budget."""
        if nonce and nonce == self.session.ping_nonce and nonce != self.answered:
            self.answered = nonce
            return True
        now = time.monotonic()
        self.tokens = min(float(PONG_BURST), self.tokens + (now - self.last) * PONG_RATE)
        self.last = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


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
        self._recent: dict[str, MatchRecord] = {}
        self.in_flight: dict[str, int] = {}
        """Matches created and not yet ended, per caller address."""

    async def CreateMatch(
        self, request: mp.CreateMatchRequest, context: grpc.aio.ServicerContext
    ) -> mp.CreateMatchResponse:  # type: ignore[override]
        hub = self.hub
        caller = _peer_host(context.peer())
        try:
            game = hub.resolve_game(request.game, params_from_proto(request.params))
            tc = time_control_from_proto(request.time_control) if request.HasField("time_control") else None
            check_request_limits(game, tc)
            if request.seed:
                check_chosen_seed(hub, list(request.bots))
            await authorize_bots(hub, list(request.bots), request.bot_tokens)
            if self.in_flight.get(caller, 0) >= MAX_MATCHES_PER_CALLER:
                raise HubError(
                    "busy",
                    f"you already have {MAX_MATCHES_PER_CALLER} matches running (the limit per caller); "
                    "wait for one to end",
                )
            self.in_flight[caller] = self.in_flight.get(caller, 0) + 1
            try:
                running = await hub.start_match(
                    game, list(request.bots), tc, request.seed or None, seed_chosen=bool(request.seed)
                )
            except BaseException:
                self._done(caller)
                raise
        except HubError as exc:
            await context.abort(_GRPC_CODES.get(exc.code, grpc.StatusCode.INVALID_ARGUMENT), str(exc))
            raise AssertionError("unreachable") from None
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise AssertionError("unreachable") from None
        if running.task is None:
            self._done(caller)
        else:
            running.task.add_done_callback(lambda _task: self._done(caller))
        response = mp.CreateMatchResponse(match_id=running.record.match_id)
        if request.wait and running.task is not None:
            record = await asyncio.shield(running.task)
            response.record.CopyFrom(record_to_proto(record))
        return response

    def _done(self, caller: str) -> None:
        left = self.in_flight.get(caller, 0) - 1
        if left > 0:
            self.in_flight[caller] = left
        else:
            self.in_flight.pop(caller, None)

    async def GetMatch(self, request: mp.GetMatchRequest, context: grpc.aio.ServicerContext) -> mp.MatchRecord:  # type: ignore[override]
        if request.move_offset < 0 or request.move_limit < 0:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"move_offset={request.move_offset} and move_limit={request.move_limit} must not be negative; "
                "start at move_offset=0 and follow next_move_offset",
            )
        running = self.hub.running.get(request.match_id)
        if running is not None:
            live = running.record.termination is None
            return await record_page(running.record, request.move_offset, request.move_limit, running=live)
        record = await self._stored(request.match_id)
        if record is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no match with id {request.match_id!r}")
            raise AssertionError("unreachable")
        return await record_page(record, request.move_offset, request.move_limit)

    async def _stored(self, match_id: str) -> MatchRecord | None:
        """A finished match from the store, remembered for the next page.

        Only records whose seed is out are remembered: a duplicate set's match is
        stored with its seed sealed and changes once when the set ends.
        """
        cached = self._recent.get(match_id)
        if cached is not None:
            return cached
        record = await self.hub.store.get_match(match_id) if self.hub.store is not None else None
        if record is not None and record.termination is not None and record.seed:
            self._recent[match_id] = record
            while len(self._recent) > _RECENT_RECORDS:
                del self._recent[next(iter(self._recent))]
        return record

    async def ListMatches(
        self, request: mp.ListMatchesRequest, context: grpc.aio.ServicerContext
    ) -> mp.ListMatchesResponse:  # type: ignore[override]
        limit = request.limit or 20
        if not 1 <= limit <= 1000:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"limit={limit} is out of range; use 1..1000")
        out = mp.ListMatchesResponse()
        if self.hub.store is not None:
            records = await self.hub.store.list_matches(request.game, request.bot, limit)
            counts = await self.hub.store.move_counts([r.match_id for r in records])
            for record in records:
                msg = record_to_proto(record, with_moves=False)
                live = self.hub.running.get(record.match_id)
                msg.move_count = len(live.record.moves) if live is not None else counts.get(record.match_id, 0)
                out.matches.append(msg)
        return out

    async def WatchMatch(self, request: mp.WatchMatchRequest, context: grpc.aio.ServicerContext) -> None:  # type: ignore[override]
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

        async def send(event: mp.MatchEvent) -> None:
            # Every write has a deadline: a spectator that stops reading cannot hold the server's memory.
            try:
                await asyncio.wait_for(context.write(event), WRITE_TIMEOUT)
            except TimeoutError:
                raise _SlowSpectator(
                    f"too slow, dropped: an event could not be written to this spectator within {WRITE_TIMEOUT:g}s; "
                    "read the stream as fast as it comes, or get the record with GetMatch once the match is over"
                ) from None

        try:
            async for kind, payload in self.hub.watch(match_id):
                if kind == "started":
                    await send(mp.MatchEvent(started=record_to_proto(payload, running=True, with_moves=False)))
                elif kind == "moves":
                    moves, seen = payload
                    await send(
                        mp.MatchEvent(
                            update=mp.SpectatorUpdate(
                                moves=[common.PublicMove(seat=m.seat, action=m.action, label=m.label) for m in moves],
                                observation=observation_to_proto(seen),
                            )
                        )
                    )
                elif kind == "ended":
                    await send(mp.MatchEvent(ended=await record_page(payload, 0, 0)))
                elif kind == "dropped":
                    raise _SlowSpectator(payload)
        except HubError as exc:
            await context.abort(_GRPC_CODES.get(exc.code, grpc.StatusCode.NOT_FOUND), str(exc))
        except _SlowSpectator as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))


class _SlowSpectator(Exception):
    """A spectator that does not keep up; the message is its final status."""


_RECENT_RECORDS = 4
"""Finished records GetMatch keeps decoded, so paging through a huge match decodes it once."""


_CHUNK_MOVES = 500
"""Moves converted between two yields to the event loop (a few milliseconds of work)."""


async def record_page(record: MatchRecord, offset: int, limit: int, running: bool = False) -> mp.MatchRecord:
    """``record`` as ``arena.v1.MatchRecord`` with the moves ``[offset, offset + limit)`` only.

    ``limit`` 0 or above :data:`MAX_MOVES_PER_PAGE` means that maximum. The page
    is copied at once (the referee may be appending to a live match's log) and
    converted in chunks of :data:`_CHUNK_MOVES`, yielding to the event loop
    between them, so a huge match never stalls the other matches. (A worker
    thread would hold the GIL against the loop: measured, it slowed a
    concurrent match tenfold.)
    """
    limit = MAX_MOVES_PER_PAGE if limit <= 0 else min(limit, MAX_MOVES_PER_PAGE)
    log = record.moves
    total = len(log)
    start = min(offset, total)
    stop = min(total, start + limit)
    players, actions = log.players[start:stop], log.actions[start:stop]
    elapsed, legal = log.elapsed_us[start:stop], log.legal[start:stop]
    msg = record_to_proto(record, running=running, with_moves=False)
    msg.move_count = total
    msg.next_move_offset = stop if stop < total else 0
    reveal = not running and record.termination is not None
    show_chance = reveal or record.game.chance_is_public
    labels: dict[tuple[int, int], str] = {}
    label = record.game.action_to_string
    out = msg.moves
    for chunk in range(0, stop - start, _CHUNK_MOVES):
        if chunk:
            await asyncio.sleep(0)
        for i in range(chunk, min(chunk + _CHUNK_MOVES, stop - start)):
            player = players[i]
            if player == CHANCE and not show_chance:
                continue
            action = actions[i]
            key = (player, action)
            text = labels.get(key)
            if text is None:
                text = labels[key] = label(player, action)
            us = elapsed[i]
            out.add(
                ply=start + i,
                seat=player,
                action=action,
                label=text,
                elapsed=Duration(seconds=us // 1_000_000, nanos=us % 1_000_000 * 1000),
                legal=bool(legal[i]),
            )
    return msg


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
