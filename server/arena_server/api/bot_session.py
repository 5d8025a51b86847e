"""``arena.v1.BotSessionService.Play``: one remote bot session per bidirectional stream.

Reads the bot's messages (Hello first, within :data:`HELLO_TIMEOUT`), hands
actions to its :class:`~arena_server.seats.remote.RemoteSession`, answers
challenges by starting matches through the hub, and pings idle bots.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import sys
import time
from typing import Any, Final

import grpc

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import bot_session_pb2_grpc as bs_grpc
from arena_client.convert import (
    params_from_proto,
    time_control_from_proto,
)
from arena_client.remote import SERVER_STOPPING
from arena_client.wire import serialize
from arena_games import registered_games
from arena_server import __version__
from arena_server.api.authority import (
    MAX_CHALLENGE_MATCHES,
    RATED_REFUSAL,
    check_chosen_seed,
    check_request_limits,
    owns_bot,
)
from arena_server.bots.registry import RegistryError, check_player_name
from arena_server.matches.hub import Hub, HubError, RunningMatch
from arena_server.seats.action_wire import WireAction, bot_message, read_action, wire_action
from arena_server.seats.remote import MAX_MESSAGE_BYTES, RemoteSession
from arena_server.store.database import StoreError, hash_token

PROTOCOL_VERSION = "arena.v1"
PING_INTERVAL = 20.0
"""Seconds of idleness before the server pings a remote bot."""
HELLO_TIMEOUT = 5.0
"""Seconds a remote bot has, from opening its stream, to send its Hello."""
PONG_BURST = 20
"""Pongs a bot may send that answer no Ping (keep-alives) before :data:`PONG_RATE` applies."""
PONG_RATE = 1.0
"""Unsolicited pongs per second a bot may send in the long run; a faster bot is disconnected."""
GUEST_NAME_DRAWS = 8
"""Guest names a worker draws before it gives up, when other workers' guests hold the ones it drew."""


RETRY_LATER = frozenset({"stopping", "store"})
"""Hub refusals that are temporary: the server is stopping, or its database cannot record a match now
(``ChallengeStatus.retry_later``; the SDK challenges again after a pause)."""

_HUB_CODES = {
    "unknown_bot": bs.ERROR_CODE_UNKNOWN_BOT,
    "unsupported_game": bs.ERROR_CODE_UNSUPPORTED_GAME,
    "bad_params": bs.ERROR_CODE_BAD_PARAMS,
    "forbidden": bs.ERROR_CODE_UNAUTHENTICATED,
}


SERVICE = "arena.v1.BotSessionService"


class _TooLarge:
    """Stands for a bot message over :data:`MAX_MESSAGE_BYTES`, which is not parsed at all."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size


def _parse(raw: bytes) -> bs.BotMessage | WireAction | _TooLarge:
    """The stream's request deserializer: a BotMessage, unless it is too large to be worth parsing.

    An Action as protobuf writes it (every move's message) is read by hand into a
    :class:`WireAction` instead (see :mod:`arena_server.seats.action_wire`).
    """
    if len(raw) > MAX_MESSAGE_BYTES:
        return _TooLarge(len(raw))
    action = read_action(raw)
    if action is not None:
        return action
    return bs.BotMessage.FromString(raw)


def add_to_server(servicer: BotSessionServicer, server: grpc.aio.Server) -> None:
    """Serve ``arena.v1.BotSessionService`` with ``servicer`` (the generated registration, bytes-aware).

    The same handler as ``add_BotSessionServiceServicer_to_server``, except that
    a message already serialized (the Turns, see :mod:`arena_server.seats.turn_wire`)
    is written as it is.
    """
    handlers = {
        "Play": grpc.stream_stream_rpc_method_handler(
            servicer.Play,
            request_deserializer=_parse,
            response_serializer=serialize,  # a Turn is written as its bytes (seats.turn_wire)
        )
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_registered_method_handlers(SERVICE, handlers)  # type: ignore[attr-defined]


class BotSessionServicer(bs_grpc.BotSessionServiceServicer):
    """``Play``: one remote bot session per stream."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._challenge_ids = itertools.count(1)
        self._claims: dict[RemoteSession, tuple[str, str]] = {}
        """Each welcomed session's name and key in the directory of a multi-worker server (released at its end)."""

    async def Play(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> None:  # type: ignore[override]
        """One bot's stream: :meth:`_serve` it, then close the session, however it ended.

        A stopping server ends the stream itself (:meth:`Hub.end_streams`): once what was queued for the
        bot is written, the stream ends with :data:`STOPPING_STATUS` and :data:`SERVER_STOPPING`.

        The clean-up awaits after the ``try`` rather than in a ``finally``: compiled
        with mypyc, an ``await`` that suspends in a ``finally`` block dropped the
        exception in flight when it came from an awaited future (see
        ``tests/test_native.py``).
        """
        hub = self.hub
        if hub.streams_ended:  # the server is stopping and has ended every other stream: this one ends now
            _end_as_shutdown(context)
            return
        session = RemoteSession(context.write, context.peer())
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        hub.streams[session] = ended
        failure: BaseException | None = None
        try:
            await self._serve(context, session)
        except BaseException as exc:  # (raised again below, once the session is closed)
            failure = exc
        session.mark_closed(session.close_reason or "the stream ended")
        hub.drop_session(session)
        claim = self._claims.pop(session, None)
        if claim is not None:  # (the other workers stop offering this bot)
            hub.spawn(hub.peers.release(*claim))
        try:
            await session.flush()  # a last fatal Error, or what a stopping server had queued, within a deadline
            await session.stop_writing()
        finally:  # (nothing awaited here)
            del hub.streams[session]
            ended.set_result(None)
        if failure is not None:
            raise failure
        if session.stopped_by_server:
            _end_as_shutdown(context)

    async def _serve(self, context: grpc.aio.ServicerContext, session: RemoteSession) -> None:
        """The Hello, then the session's messages until the stream ends (the session is closed by :meth:`Play`)."""
        loop = asyncio.get_running_loop()
        # Read in a task of its own, so that a session closed meanwhile (the server stopping) stops waiting.
        hello = loop.create_task(self._read(context, session))
        session.on_close = hello.cancel
        try:
            async with asyncio.timeout(HELLO_TIMEOUT):
                first = await hello
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # the stream itself is cancelled
            return  # the session was closed before its Hello
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
        finally:
            session.on_close = None
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
        if not await self._welcome(session, first.hello) or session.is_closed:
            return  # refused, or closed while its name was being checked (the server stopping)
        reader = loop.create_task(self._read_loop(context, session))
        # The session can also be closed from the writing side (a bot that stops reading): reading stops then.
        session.on_close = reader.cancel
        pinger = _Pinger(session, loop)
        failure: BaseException | None = None
        try:
            await reader
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                failure = exc  # the stream itself is cancelled (the bot hung up, the server stops)
            # (otherwise the reader was stopped because the session closed)
        except BaseException as exc:  # (raised again below, once the reader has stopped)
            failure = exc
        session.on_close = None
        pinger.stop()
        if not reader.done():
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        if failure is not None:
            raise failure

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
            registered, stored = await self._lookup(name)
            if registered is not None and registered != name:
                await session.error(
                    bs.ERROR_CODE_NAME_TAKEN,
                    f"the name {name!r} looks the same as the registered bot {registered!r}; connect as "
                    f"{registered!r} with its token, or pick another name",
                    fatal=True,
                )
                return False
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
        session_token = secrets.token_urlsafe(24)
        key = hash_token(session_token)
        session.follows_redirects = hello.follows_redirects
        if hub.peers is not None:  # several workers: the name must be free on all of them (the writer decides)
            claimed = await self._claim(session, name, tuple(hello.games), key, drawn=not hello.name.strip())
            if claimed is None:
                return False
            name = claimed
        session.name = name
        session.games = tuple(hello.games)
        hub.sessions[name] = session
        hub.session_keys[name] = key
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

    async def _claim(
        self, session: RemoteSession, name: str, games: tuple[str, ...], key: str, drawn: bool
    ) -> str | None:
        """Claim ``name`` in the server's directory of connected bots (a multi-worker server); the name, or None.

        A guest whose ``drawn`` name (it sent none) another worker's guest holds draws again. A bot that
        chose its name is refused when that name, or a look-alike, is connected to another worker, as it
        is when it is connected here.
        """
        hub = self.hub
        for _attempt in range(GUEST_NAME_DRAWS):
            try:
                taken = await hub.peers.claim(name, games, session.guest, key, session.follows_redirects)
            except StoreError as exc:
                await session.error(
                    bs.ERROR_CODE_UNSPECIFIED,
                    f"the server could not note the connection ({exc}); try again in a moment",
                    fatal=True,
                )
                return None
            if taken is None:
                self._claims[session] = (name, key)
                return name
            if not drawn:
                same = "is already in use by" if taken == name else f"looks the same as {taken!r}, the name of"
                await session.error(
                    bs.ERROR_CODE_NAME_TAKEN,
                    f"the name {name!r} {same} a connected bot; pick another name, or leave it empty to play as a "
                    "guest",
                    fatal=True,
                )
                return None
            name = hub.new_guest_name()
        await session.error(bs.ERROR_CODE_UNSPECIFIED, "could not draw a free guest name; connect again", fatal=True)
        return None

    async def _lookup(self, name: str) -> tuple[str | None, str | None]:
        """The registered bot name ``name`` normalises to (or None), and the token hash of ``name`` (or None)."""
        hub = self.hub
        if hub.registry is not None:
            return await hub.registry.lookup(name)
        stored = await hub.store.bot_token_hash(name) if hub.store is not None else None
        return (None if stored is None else name), stored

    async def _read(self, context: grpc.aio.ServicerContext, session: RemoteSession) -> bs.BotMessage | None:
        """One message from the bot, or None when the stream ended (the session is then closed)."""
        try:
            msg = await context.read()
        except Exception as exc:
            await self._read_failed(session, exc)
            return None
        return await self._checked(session, msg)

    async def _read_failed(self, session: RemoteSession, exc: Exception) -> None:
        """A read raised: the stream broke, or the bot sent bytes that do not decode. Closes the session."""
        if isinstance(exc, grpc.aio.AioRpcError):
            session.mark_closed(f"the stream failed: {exc.details()}")
            return
        reason = f"sent a message that is not a valid arena.v1.BotMessage ({type(exc).__name__})"
        session.protocol_violation(reason)
        await session.error(bs.ERROR_CODE_BAD_MESSAGE, reason, fatal=True)
        session.mark_closed(reason)

    async def _checked(self, session: RemoteSession, msg: object) -> bs.BotMessage | None:
        """``msg`` as a BotMessage if it is a message within the size limit; else None, with the session closed."""
        if msg is grpc.aio.EOF:
            session.mark_closed("the bot closed the stream")
            return None
        if isinstance(msg, _TooLarge):
            reason = f"sent a {msg.size}-byte message; the limit is {MAX_MESSAGE_BYTES} bytes"
            session.protocol_violation(reason)
            await session.error(bs.ERROR_CODE_TOO_LARGE, reason, fatal=True)
            session.mark_closed(reason)
            return None
        if type(msg) is WireAction:  # (an Action before the Hello: the Hello's checks want the message)
            return bot_message(msg)
        assert isinstance(msg, bs.BotMessage)
        return msg

    async def _read_loop(self, context: grpc.aio.ServicerContext, session: RemoteSession) -> None:
        pongs = _PongBudget(session)
        read = context.read
        while True:
            try:
                msg = await read()
            except Exception as exc:
                await self._read_failed(session, exc)
                return
            if type(msg) is WireAction:  # (every move's message, read by _parse without protobuf)
                if session.is_closed:
                    return  # an evicted session reads nothing more
                session.on_action(msg)
                continue
            if type(msg) is not bs.BotMessage:  # the end of the stream, or too large (see _parse)
                checked = await self._checked(session, msg)
                if checked is None:
                    return
                msg = checked
            if session.is_closed:
                return  # an evicted session reads nothing more
            kind = msg.WhichOneof("kind")
            if kind == "action":
                session.on_action(wire_action(msg.action))
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
                session.moved_on()
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

    async def _challenge(self, session: RemoteSession, ch: bs.Challenge) -> None:
        challenging = self.hub.challenging  # (a redirect would drop it: the bot is not moved meanwhile)
        challenging[session] += 1
        try:
            await self._challenge_matches(session, ch)
        finally:
            challenging[session] -= 1
            if not challenging[session]:
                del challenging[session]

    async def _challenge_matches(self, session: RemoteSession, ch: bs.Challenge) -> None:
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
            await hub.arrivals([ch.opponent])  # (an opponent on its way to another worker is waited for)
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
                if not await owns_bot(hub, ch.opponent, ch.opponent_token):
                    raise HubError(
                        "forbidden",
                        f"a chosen seed is only for matches between your own bots; send {ch.opponent!r}'s token in "
                        "opponent_token, or leave the seed empty",
                    )
        except (HubError, ValueError) as exc:
            code = getattr(exc, "code", "bad_params")
            await status(bs.ChallengeStatus.STATE_REFUSED, reason=str(exc), retry_later=code in RETRY_LATER)
            await session.error(_HUB_CODES.get(code, bs.ERROR_CODE_BAD_PARAMS), str(exc))
            return
        count = max(ch.matches, 1)
        for index in range(count):
            if session.closed.is_set():
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
                await status(bs.ChallengeStatus.STATE_REFUSED, reason=str(exc), retry_later=exc.code in RETRY_LATER)
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


STOPPING_STATUS: Final = grpc.StatusCode.UNAVAILABLE
"""The status with which a stopping server ends each bot's stream (details: :data:`SERVER_STOPPING`).

UNAVAILABLE is gRPC's code for a service that is down for now and worth retrying, so a client in any
language that reconnects on UNAVAILABLE keeps doing so; the details tell it (and the people reading its
log) that the end was deliberate. It arrives after every message the server wrote to the stream.
"""


def _end_as_shutdown(context: grpc.aio.ServicerContext) -> None:
    """End the stream, when the handler returns, with the stopping server's status and details."""
    context.set_code(STOPPING_STATUS)
    context.set_details(SERVER_STOPPING)


class _Pinger:
    """Pings a session's bot every :data:`PING_INTERVAL` seconds while it is not seated in a match.

    One event-loop timer per session, re-armed at each ping, rather than a task
    per session; :meth:`stop` (the session's end) cancels it.
    """

    __slots__ = ("handle", "loop", "session")

    def __init__(self, session: RemoteSession, loop: asyncio.AbstractEventLoop) -> None:
        self.session = session
        self.loop = loop
        self.handle = loop.call_later(PING_INTERVAL, self._ping)

    def _ping(self) -> None:
        session = self.session
        if session.is_closed:
            return
        if session.seat is None:
            session.ping_nonce += 1
            session.send_nowait(bs.ServerMessage(ping=bs.Ping(nonce=session.ping_nonce)))
        self.handle = self.loop.call_later(PING_INTERVAL, self._ping)

    def stop(self) -> None:
        self.handle.cancel()


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
