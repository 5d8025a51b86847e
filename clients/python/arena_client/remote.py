"""Play a :class:`~arena_client.Bot` against an Arena server over gRPC.

:func:`run` is all most bots need::

    run(MyBot(), "localhost:50051", opponent="random", game="rps")

It opens a ``BotSessionService.Play`` stream, says hello, optionally
challenges a hosted bot, and answers turns until the requested matches are
played (or forever, when waiting to be seated by the server). ``act`` runs
in a worker thread, so a slow, CPU-heavy bot never stalls the stream: pings
are still answered and the end of a match is still heard.

If the server goes away the client reconnects with exponential back-off; the
back-off starts again from its shortest wait once the server has welcomed the
bot again. A server that stops on purpose ends the stream itself, after the
last messages it had for the bot, with the status ``UNAVAILABLE`` and the
details :data:`SERVER_STOPPING`: the client logs one warning saying so ("the
server at HOST:PORT is shutting down; reconnecting in 0.4 s") and reconnects
the same way. After ``give_up_after`` seconds without a successful connection it
stops with one :class:`ServerUnreachable` message ("cannot reach HOST:PORT
...") instead of retrying forever. A match the server aborted (it shut down,
or could not finish the match) does not count as played: a challenger
challenges again until it has the requested number of real results. Ctrl-C
ends :func:`run` quietly at any moment.

The module also has the reachability checks the ``--server`` commands of the
``arena`` CLI use (:func:`wait_until_reachable`, :func:`wait_until_reachable_blocking`).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import queue
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

import grpc

from arena.v1 import bot_session_pb2 as bs
from arena_client.bot import Bot, Resign
from arena_client.convert import (
    match_info_from_proto,
    moves_from_proto,
    params_to_proto,
    result_from_proto,
    time_control_to_proto,
    turn_from_proto,
    update_from_proto,
)
from arena_client.types import MatchResult, Termination, TimeControl, Turn, Update
from arena_client.wire import action_message, read_turn, serialize
from arena_games import ParamValue

log = logging.getLogger("arena_client")

_EOF: Final = grpc.aio.EOF
"""The end of a stream, as a C static: from compiled code ``grpc.aio.EOF`` is two attribute lookups a read."""
_PARSE: Final = bs.ServerMessage.FromString


def server_message(raw: bytes) -> bytes | bs.ServerMessage:
    """The stream's response deserializer: a Turn's bytes as they are (:func:`read_turn` reads them in
    ``Client._answer``, which knows the bot's seat), any other message parsed by protobuf."""
    if raw and raw[0] == 0x1A:  # ServerMessage field 3 (turn)
        return raw
    return _PARSE(raw)  # type: ignore[no-any-return]


Threaded = bool | Literal["auto"]
"""Where ``act`` runs: ``True`` its worker thread, ``False`` inline on the event loop, ``"auto"`` (the default)
the thread until it has been quick :data:`QUICK_STREAK` times in a row, then inline."""

PROTOCOL_VERSION = "arena.v1"
PLAY_METHOD = "/arena.v1.BotSessionService/Play"
CLIENT = "arena_client/0.1"
QUICK_ACT_SECONDS = 0.001
"""How long the client waits synchronously for ``act`` in the worker thread before yielding to the event loop."""
QUICK_STREAK = 8
"""``threaded="auto"``: this many ``act`` calls in a row back within :data:`QUICK_ACT_SECONDS` move ``act`` inline."""
SLOW_INLINE_SECONDS = 0.05
"""``threaded="auto"``: an inline ``act`` longer than this moves ``act`` back to the worker thread for good."""
GIVE_UP_AFTER = 300.0
"""Default of ``give_up_after``: seconds without a successful connection before the client stops."""
CONNECT_TIMEOUT = 20.0
"""Longest wait for one connection attempt, from dialling to the server's Welcome."""
REDIRECT_CONNECT_TIMEOUT = 3.0
"""Longest wait for the connection a Redirect asks for; past it the client goes back to its own address at once."""
CLOSE_TIMEOUT = 2.0
"""How long a finished session waits for the server to close the stream before cutting it."""
FIRST_BACKOFF = 0.5
"""The first wait before reconnecting (doubled per failed attempt, with jitter, up to ``max_backoff``)."""
MAX_ABORTED_IN_A_ROW = 10
"""A challenger stops (ArenaError) when this many matches in a row end aborted on a server that stays up."""
SERVER_STOPPING: Final = "the server is shutting down; reconnect when it is back"
"""The details of the status (``UNAVAILABLE``) with which a stopping server ends each bot's stream, after every
message it had for the bot (the MatchEnded of a match it aborted). The client recognises it by its first words,
:data:`STOPPING_PREFIX`, and says so instead of reporting a broken connection."""
STOPPING_PREFIX: Final = "the server is shutting down"


class ArenaError(Exception):
    """The server refused something, or cannot be reached; the message says what and what to do."""


class ServerUnreachable(ArenaError):
    """No Arena server answered at the address (within the time allowed)."""


class _Retry(Exception):
    """The connection dropped (or never came up); reconnect and carry on."""


class _ServerStopping(_Retry):
    """The server ended the stream because it is stopping (on purpose); reconnect once it is back."""


class _Redirected(Exception):
    """The server asked this bot to reconnect on another port of the same host (a Redirect): at once."""

    def __init__(self, port: int, reason: str) -> None:
        super().__init__(reason)
        self.port = port
        self.reason = reason


def server_is_stopping(exc: grpc.aio.AioRpcError) -> bool:
    """Whether ``exc`` is how a stopping Arena server ends a bot's stream (:data:`SERVER_STOPPING`)."""
    return exc.code() == grpc.StatusCode.UNAVAILABLE and (exc.details() or "").startswith(STOPPING_PREFIX)


def backoff(attempt: int, max_backoff: float) -> float:
    """Seconds to wait before retry number ``attempt`` (1 for the first): :data:`FIRST_BACKOFF` doubled per
    retry, at most ``max_backoff``, with jitter (between half and all of it) so that many bots do not retry
    in step. Reconnections and challenges refused for now wait alike."""
    return min(max_backoff, FIRST_BACKOFF * 2.0 ** min(attempt - 1, 10)) * (0.5 + random.random() / 2)


def cannot_reach(target: str, detail: str) -> str:
    """The one-line "cannot reach" message used by the SDK and the CLI."""
    return f"cannot reach {target} ({detail}); is an Arena server running there? Start one with `arena serve`"


def _describe(exc: grpc.aio.AioRpcError) -> str:
    details = exc.details() or ""
    if exc.code() == grpc.StatusCode.UNAVAILABLE and "Connection refused" in details:
        return "connection refused"
    return f"{exc.code().name}: {details}"


def run(
    bot: Bot,
    target: str = "localhost:50051",
    *,
    opponent: str | None = None,
    game: str | None = None,
    params: Mapping[str, ParamValue] | None = None,
    matches: int = 1,
    name: str | None = None,
    token: str = "",
    seat: int | None = None,
    time_control: TimeControl | None = None,
    reconnect: bool = True,
    max_backoff: float = 30.0,
    give_up_after: float | None = GIVE_UP_AFTER,
    threaded: Threaded = "auto",
    on_connect: Callable[[str], None] | None = None,
) -> list[MatchResult]:
    """Connect ``bot`` to the server at ``target`` and play.

    Ctrl-C (SIGINT) ends the program quietly at any moment (while connected,
    while waiting to reconnect, inside ``act``): ``run`` prints
    ``arena_client: interrupted`` and raises ``SystemExit(130)``. Use
    :meth:`Client.play` to handle interruption yourself. (An ``act`` running
    inline holds the event loop: the first Ctrl-C takes effect when it
    returns, a second one at once. With ``threaded="auto"`` that can only be
    an ``act`` that was quick eight times in a row and then was not.)

    Args:
        bot: The bot.
        target: ``host:port`` of the Arena server.
        opponent: Challenge this bot (e.g. ``"random"``). Without it, the
            session waits to be seated by the server (ladder, CreateMatch)
            and runs until interrupted.
        game: The game to challenge in (default: the bot's first game, or rps).
        params: Game parameters, e.g. ``{"signs": 5}``.
        matches: How many matches to play against ``opponent``. Aborted
            matches (server shutdown, a match the server could not finish)
            do not count: the client challenges again until it has this many.
        name: Name to play under (default ``bot.name``; "" for a guest name).
        token: Secret token of a registered bot name.
        seat: Seat to take in challenge matches (default: alternate).
        time_control: Ask for this clock in challenge matches (default: the server's).
        reconnect: Reconnect with exponential back-off when the server goes away,
            and challenge again, with the same back-off, when the server
            refuses the challenge for now (``ChallengeStatus.retry_later``: it
            is shutting down, or its database cannot record a match right now).
            A challenge refused for what it is (an unknown opponent, bad
            parameters) raises :class:`ArenaError` at once.
        max_backoff: Longest wait between reconnection attempts (and between
            challenges refused for now), in seconds.
        give_up_after: Stop with :class:`ServerUnreachable` after this many
            seconds without a successful connection, and with
            :class:`ArenaError` after this many seconds of challenges refused
            for now (None: never give up).
        threaded: Where ``act`` runs. ``True``: in a worker thread, so the
            stream stays responsive however long it thinks (pings answered, the
            end of a match heard), at the price of two thread hand-offs per
            move. ``False``: inline, on the event loop (the fastest; the
            stream waits while ``act`` thinks). ``"auto"`` (the default): in
            the worker thread until ``act`` has answered within
            :data:`QUICK_ACT_SECONDS` :data:`QUICK_STREAK` times in a row, then
            inline; an inline ``act`` that takes longer than
            :data:`SLOW_INLINE_SECONDS` sends it back to the thread for the
            rest of the call. A quick bot pays no hand-off, and a slow one
            blocks the stream at most once.
        on_connect: Called with the bot's name each time the server welcomes it.

    Returns:
        The ``matches`` results that were not aborted, in the order played
        (the bot's ``on_match_end`` hears aborted ones too). Without an
        opponent, ``run`` only returns when the server refuses the bot.

    Raises:
        ArenaError: the server refused the bot or the challenge.
        ServerUnreachable: no server answered for ``give_up_after`` seconds
            (or at once with ``reconnect=False``).
    """
    client = Client(
        bot, target, name=bot.name if name is None else name, token=token, threaded=threaded, on_connect=on_connect
    )
    try:
        return asyncio.run(
            client.play(
                opponent=opponent,
                game=game,
                params=params or {},
                matches=matches,
                seat=seat,
                time_control=time_control,
                reconnect=reconnect,
                max_backoff=max_backoff,
                give_up_after=give_up_after,
            )
        )
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("arena_client: interrupted", file=sys.stderr, flush=True)
        raise SystemExit(130) from None


class _ActWorker:
    """One daemon thread that runs ``act`` calls one after another.

    Unlike a ``ThreadPoolExecutor`` worker, a daemon thread does not hold the
    process at exit, so Ctrl-C during a long ``act`` ends the program at once.
    """

    def __init__(self) -> None:
        # Any, not int: what act returns is converted by the session (a numpy integer is fine), not checked here.
        self._jobs: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[[Turn], Any], Turn] | None] = (
            queue.SimpleQueue()
        )
        self._runner = threading.Thread(target=self._work, name="arena-act", daemon=True)
        self._runner.start()

    def submit(self, fn: Callable[[Turn], Any], turn: Turn) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._jobs.put((future, fn, turn))
        return future

    def close(self) -> None:
        """Let the thread end once the call in progress (if any) returns."""
        self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, turn = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(turn))
            except BaseException as exc:  # handed to the session, which resigns or re-raises
                future.set_exception(exc)


class Client:
    """One bot's connection to a server (reusable across reconnects and across :meth:`play` calls).

    Attributes:
        results: The non-aborted results of the current (or last) :meth:`play` call.
        aborted: The aborted results of that call (not counted as played).
        assigned_name: The name the server welcomed the bot under.
        connections: How many times a server has welcomed this client.

    With ``follow_redirects`` (the default) the Hello says that the client follows a Redirect: a
    multi-worker server may then tell it, between matches, to reconnect on the port of the worker process
    that will referee its next match, and it does so at once, on the same host. A connection there that
    fails sends it back to ``target``.
    """

    def __init__(
        self,
        bot: Bot,
        target: str,
        name: str,
        token: str = "",
        threaded: Threaded = "auto",
        on_connect: Callable[[str], None] | None = None,
        follow_redirects: bool = True,
    ) -> None:
        self.bot = bot
        self.target = target
        self.follow_redirects = follow_redirects
        """Say in the Hello that this client reconnects where a Redirect says (a multi-worker server then
        moves it to the process of its next match instead of relaying every move between two processes)."""
        self.redirected_to: str | None = None
        """``host:port`` a Redirect sent this client to (None: :attr:`target`); a failure there goes back."""
        self.redirects = 0
        """Redirects followed so far."""
        self.name = name
        self.token = token
        self.threaded = threaded
        self.on_connect = on_connect
        self.results: list[MatchResult] = []
        self.aborted: list[MatchResult] = []
        self.assigned_name = ""
        self.connections = 0
        self._worker: _ActWorker | None = None
        self._auto = False
        """``threaded="auto"`` and not yet sent back to the thread for good: ``act`` may still change sides."""
        self._welcomed = False
        self._aborted_in_a_row = 0
        self.session_token = ""
        """This session's Welcome.session_token: put it in CreateMatchRequest.bot_tokens to seat this bot."""
        self._reconnect = True
        self._max_backoff = 30.0
        self._give_up_after: float | None = GIVE_UP_AFTER
        self._refused_since: float | None = None
        """When the current run of temporary refusals (``ChallengeStatus.retry_later``) began, or None."""
        self._refusals = 0
        self._challenge_again: asyncio.TimerHandle | None = None
        """The challenge sent again after a temporary refusal, while it waits (cancelled with the session)."""

    async def play(
        self,
        opponent: str | None = None,
        game: str | None = None,
        params: Mapping[str, ParamValue] | None = None,
        matches: int = 1,
        seat: int | None = None,
        time_control: TimeControl | None = None,
        reconnect: bool = True,
        max_backoff: float = 30.0,
        give_up_after: float | None = GIVE_UP_AFTER,
    ) -> list[MatchResult]:
        """Play until ``matches`` non-aborted challenge matches are done (forever without an opponent).

        Each call starts afresh (its own results, its own act worker), so one
        client can play several challenges in a row. See :func:`run` for the
        arguments.

        Returns:
            The non-aborted results of this call, in order (also in :attr:`results`).

        Raises:
            ArenaError: the server refused the bot or the challenge, or kept aborting its matches.
            ServerUnreachable: no successful connection for ``give_up_after`` seconds.
        """
        self.results = []
        self.aborted = []
        self._aborted_in_a_row = 0
        self._reconnect, self._max_backoff, self._give_up_after = reconnect, max_backoff, give_up_after
        self._refused_since = None
        self._refusals = 0
        self._worker = _ActWorker() if self.threaded else None
        self._auto = self.threaded == "auto"
        attempt = 0
        outage_since = time.monotonic()  # since when there has been no welcomed connection
        try:
            while True:
                self._welcomed = False
                timeout = CONNECT_TIMEOUT if self.redirected_to is None else REDIRECT_CONNECT_TIMEOUT
                if give_up_after is not None:
                    timeout = max(0.1, min(timeout, give_up_after - (time.monotonic() - outage_since)))
                try:
                    await self._session(opponent, game, params or {}, matches, seat, time_control, timeout)
                    return self.results
                except _Redirected as moved:  # (its own name: compiled, one name holds one type)
                    host = self.target.rpartition(":")[0] or self.target
                    self.redirected_to = f"{host}:{moved.port}"
                    self.redirects += 1
                    attempt = 0
                    outage_since = time.monotonic()
                    log.info("arena_client: the server moves us to %s (%s)", self.redirected_to, moved.reason)
                    continue  # at once: the server is waiting for us there
                except _Retry as exc:
                    if self.redirected_to is not None:  # (lost where a Redirect sent us: back to the address given)
                        log.info("arena_client: leaving %s for %s (%s)", self.redirected_to, self.target, exc)
                        self.redirected_to = None
                        if not self._welcomed:
                            continue  # (never got there: the address given is the one that worked, at once)
                    stopping = isinstance(exc, _ServerStopping)
                    if self._welcomed:  # a successful connection: the back-off and the clock start again
                        attempt = 0
                        outage_since = time.monotonic()
                        what = f"lost the connection to {self.target} ({exc})"
                    else:
                        what = f"cannot reach {self.target} ({exc})"
                    if stopping:  # not a broken connection: the server said it stops on purpose
                        what = f"the server at {self.target} is shutting down"
                    if not reconnect:
                        if self._welcomed:
                            raise ArenaError(what) from None
                        raise ServerUnreachable(what if stopping else cannot_reach(self.target, str(exc))) from None
                    attempt += 1
                    delay = backoff(attempt, max_backoff)
                    down = time.monotonic() - outage_since
                    if give_up_after is not None:
                        if down >= give_up_after:
                            raise ServerUnreachable(
                                f"cannot reach {self.target} for {give_up_after:g} s; giving up ({exc})"
                            ) from None
                        delay = min(delay, give_up_after - down)
                    # One warning per outage; the attempts after it are logged at INFO level.
                    level = logging.WARNING if attempt == 1 else logging.INFO
                    limit = "" if give_up_after is None else f" (giving up after {give_up_after:g} s)"
                    log.log(
                        level,
                        "arena_client: %s; %s in %.1f s%s",
                        what,
                        "reconnecting" if stopping else "retrying",
                        delay,
                        limit,
                        extra={"retry_delay": delay, "retry_attempt": attempt},
                    )
                    await asyncio.sleep(delay)
        finally:
            if self._worker is not None:
                self._worker.close()
                self._worker = None

    def _challenge_message(
        self,
        opponent: str,
        game: str | None,
        params: Mapping[str, ParamValue],
        count: int,
        seat: int | None,
        time_control: TimeControl | None,
    ) -> bs.BotMessage:
        games = self._games()
        challenge = bs.Challenge(
            opponent=opponent,
            game=game or (games[0] if games else "rps"),
            matches=count,
        )
        params_to_proto(params, challenge.params)
        if seat is not None:
            challenge.seat = seat
        if time_control is not None:
            challenge.time_control.CopyFrom(time_control_to_proto(time_control))
        return bs.BotMessage(challenge=challenge)

    def _games(self) -> Any:
        """The bot's ``games`` as it set them (a tuple, or a list; Any: see _answer)."""
        bot: Any = self.bot
        return bot.games

    async def _handshake(self, call: Any) -> Any:
        await call.write(
            bs.BotMessage(
                hello=bs.Hello(
                    protocol_version=PROTOCOL_VERSION,
                    name=self.name,
                    token=self.token,
                    games=list(self._games()),
                    client=CLIENT,
                    follows_redirects=self.follow_redirects,
                )
            )
        )
        return await call.read()

    async def _session(
        self,
        opponent: str | None,
        game: str | None,
        params: Mapping[str, ParamValue],
        matches: int,
        seat: int | None,
        time_control: TimeControl | None,
        connect_timeout: float,
    ) -> None:
        target = self.redirected_to or self.target
        async with grpc.aio.insecure_channel(target) as channel:
            # The generated stub's Play, except that an Action may be sent as its bytes (wire.action_message)
            # and a Turn is received as its bytes (server_message).
            call = channel.stream_stream(
                PLAY_METHOD, request_serializer=serialize, response_deserializer=server_message
            )()
            try:
                try:
                    welcome = await asyncio.wait_for(self._handshake(call), connect_timeout)
                except TimeoutError:
                    raise _Retry(f"no answer within {connect_timeout:.3g} s") from None
                if welcome is _EOF:
                    raise _Retry("the server closed the stream before welcoming us")
                if welcome.WhichOneof("kind") == "error":
                    if welcome.error.code == bs.ERROR_CODE_NAME_TAKEN and self.connections:
                        # Our own previous session under this name may not be closed on the server yet.
                        raise _Retry(f"the server still holds our previous session: {welcome.error.message}")
                    raise ArenaError(welcome.error.message)
                self._welcomed = True
                self.connections += 1
                self.assigned_name = welcome.welcome.bot_name
                self.session_token = welcome.welcome.session_token
                log.info("arena_client: connected to %s as %s", target, self.assigned_name)
                if self.on_connect is not None:
                    self.on_connect(self.assigned_name)
                again: Callable[[], bs.BotMessage] | None = None
                if opponent:
                    count = matches - len(self.results)
                    await call.write(self._challenge_message(opponent, game, params, count, seat, time_control))

                    def again() -> bs.BotMessage:
                        count = matches - len(self.results)
                        return self._challenge_message(opponent, game, params, count, seat, time_control)

                # Answer the server until ``matches`` results are in (``again`` set: challenging) or forever.
                writer = _Writer(call)
                inbox = _Inbox(call, writer)
                try:
                    await self._answer(call, inbox, writer, matches, again)
                    await writer.drain()  # everything written before the session says goodbye
                finally:
                    inbox.close()
                await self._close(call)
            except grpc.aio.AioRpcError as exc:
                if server_is_stopping(exc):
                    raise _ServerStopping(exc.details()) from None
                if exc.code() in (
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.StatusCode.CANCELLED,
                    grpc.StatusCode.INTERNAL,
                    grpc.StatusCode.UNKNOWN,
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                ):
                    raise _Retry(_describe(exc)) from None
                raise ArenaError(_describe(exc)) from None
            finally:
                if self._challenge_again is not None:
                    self._challenge_again.cancel()  # (the next session challenges afresh)
                    self._challenge_again = None
                call.cancel()

    async def _close(self, call: Any) -> None:
        """End the session politely: the server forgets it (and its name) before the stream ends."""
        try:
            await call.done_writing()
            async with asyncio.timeout(CLOSE_TIMEOUT):
                while await call.read() is not _EOF:
                    pass
        except (TimeoutError, grpc.aio.AioRpcError, grpc.aio.UsageError):
            pass

    async def _act(self, worker: _ActWorker, turn: Turn, inbox: _Inbox) -> tuple[Any, bool]:
        """``act`` in the worker thread: its answer (anything ``int`` takes), and whether it came in the spin window."""
        bot: Any = self.bot  # (see _answer)
        pending = worker.submit(bot.act, turn)
        try:
            # A quick bot answers within the spin window: no event-loop round trip.
            return pending.result(timeout=QUICK_ACT_SECONDS), True
        except concurrent.futures.TimeoutError:
            # A slow bot: the stream is still read (pings answered, the match's end heard) until act returns.
            return await inbox.during(asyncio.wrap_future(pending)), False

    async def _answer(
        self, call: Any, inbox: _Inbox, writer: _Writer, matches: int, again: Callable[[], bs.BotMessage] | None
    ) -> None:
        # The bot is held as Any: compiled (mypyc), what its methods return would be checked against their
        # annotations, and a numpy integer from act (converted below) or a truthy non-bool would be refused.
        bot: Any = self.bot
        seat = 0
        wants_updates = bot.wants_updates()
        with_moves = bool(wants_updates)  # (a bot may answer with any truthy value)
        worker = self._worker
        quick = 0  # threaded="auto": act calls in a row that came back within the spin window
        auto = self._auto  # (kept in step with self._auto, which outlives this session)
        slow_inline = SLOW_INLINE_SECONDS
        perf_counter = time.perf_counter
        backlog = inbox.backlog
        read = call.read
        moot: set[tuple[str, int]] = set()  # answers sent for a match that had ended (the server drops them)
        while True:
            msg = await read() if worker is None else await inbox.next()  # (inline, nothing is read during act)
            if msg is _EOF:
                raise _Retry("the server closed the stream")
            if writer.error is not None:
                raise writer.error  # a write failed: the stream is broken (handled as a failed read would be)
            turn: Turn | None = None
            kind = "turn"
            if type(msg) is bytes:  # a Turn (see server_message)
                turn = read_turn(msg, seat, with_moves)
                if turn is None:  # not laid out as Arena writes it, or moves for a bot that wants them
                    msg = _PARSE(msg)
            if turn is None:
                kind = msg.WhichOneof("kind")
            if kind == "turn":
                if turn is None:
                    proto_turn = msg.turn
                    turn = turn_from_proto(proto_turn, seat)
                    if wants_updates and proto_turn.moves:
                        bot.on_update(Update(turn.match_id, moves_from_proto(proto_turn.moves), turn.observation))
                try:
                    if worker is None:
                        if auto:
                            began = perf_counter()
                            action = bot.act(turn)
                            if perf_counter() - began > slow_inline:
                                # Slow after all: the worker thread from now on, so the stream stays read.
                                worker = self._worker = _ActWorker()
                                auto = self._auto = False
                        else:
                            action = bot.act(turn)
                    else:
                        action, in_time = await self._act(worker, turn, inbox)
                        if auto:
                            quick = quick + 1 if in_time else 0
                            if quick >= QUICK_STREAK and inbox.idle:
                                # Quick every time: inline from now on, without the two thread hand-offs.
                                worker.close()
                                worker = self._worker = None
                except Resign as exc:
                    writer.send(bs.BotMessage(resign=bs.Resign(match_id=turn.match_id, reason=str(exc))))
                    continue
                except Exception as exc:
                    log.error("arena_client: act raised:\n%s", traceback.format_exc())
                    writer.send(bs.BotMessage(resign=bs.Resign(match_id=turn.match_id, reason=f"act raised {exc!r}")))
                    continue
                answer = action_message(turn.match_id, turn.turn_id, int(action))
                if backlog and inbox.ended(turn.match_id):
                    # The match ended (aborted, timed out) while act was thinking: the answer is moot, but it
                    # still goes out, as the bot's word that it is done with the turn (a stopping server waits
                    # for it). The server drops it and says so; that reply is expected, and not shown.
                    moot.add((turn.match_id, turn.turn_id))
                    writer.send(answer)
                    continue
                if writer.idle:
                    # Awaited, then the next read: with the server in another process (as deployed) a round
                    # trip is 4-7 us shorter than with the read started while the write is in flight; in one
                    # process it is longer (docs/performance.md, sixteenth pass).
                    try:
                        await call.write(answer)
                    except Exception as exc:  # the stream broke: kept, as a failed write of the writer's is
                        writer.error = exc  # (the next read ends the session, with the stream's own reason)
                else:
                    writer.send(answer)  # after what is still being written
            elif kind == "update":
                bot.on_update(update_from_proto(msg.update))
            elif kind == "match_started":
                info = match_info_from_proto(msg.match_started)
                seat = info.seat
                bot.on_match_start(info)
            elif kind == "match_ended":
                result = result_from_proto(msg.match_ended)
                if result.moves and bot.wants_updates():
                    bot.on_update(Update(result.match_id, result.moves, result.observation))
                bot.on_match_end(result)
                self._record(result)
                if again is not None and len(self.results) >= matches:
                    return
            elif kind == "ping":
                writer.send(bs.BotMessage(pong=bs.Pong(nonce=msg.ping.nonce)))
            elif kind == "redirect":
                raise _Redirected(msg.redirect.port, msg.redirect.reason)
            elif kind == "error":
                if msg.error.fatal:
                    raise ArenaError(msg.error.message)
                if msg.error.code == bs.ERROR_CODE_STALE_TURN and (msg.error.match_id, msg.error.turn_id) in moot:
                    moot.discard((msg.error.match_id, msg.error.turn_id))
                    log.debug("arena_client: server says: %s (a moot answer)", msg.error.message)
                    continue
                log.warning("arena_client: server says: %s", msg.error.message)
            elif kind == "challenge_status":
                status = msg.challenge_status
                if status.state == bs.ChallengeStatus.STATE_REFUSED:
                    if status.retry_later and again is not None and self._reconnect:
                        self._challenge_later(writer, again, status.reason)
                        continue
                    raise ArenaError(f"challenge refused: {status.reason}")
                if status.state == bs.ChallengeStatus.STATE_STARTED:
                    self._refused_since = None  # (a run of temporary refusals is over)
                if status.state == bs.ChallengeStatus.STATE_DONE and again is not None:
                    if len(self.results) >= matches:
                        return
                    # Some matches were aborted: they do not count, so ask for the rest.
                    log.warning(
                        "arena_client: %d of the matches were aborted; challenging again for the %d missing",
                        len(self.aborted),
                        matches - len(self.results),
                    )
                    writer.send(again())

    def _challenge_later(self, writer: _Writer, again: Callable[[], bs.BotMessage], reason: str) -> None:
        """A temporary refusal (the server stopping, its database busy): challenge again after a back-off.

        The stream stays open and read meanwhile. Raises ArenaError once the
        refusals have lasted ``give_up_after`` seconds.
        """
        now = time.monotonic()
        if self._refused_since is None:
            self._refused_since = now
            self._refusals = 0
        self._refusals += 1
        refused_for = now - self._refused_since
        if self._give_up_after is not None and refused_for >= self._give_up_after:
            raise ArenaError(
                f"the server has refused the challenge for {refused_for:.0f} s, each time for now; giving up "
                f"(last: {reason})"
            )
        delay = backoff(self._refusals, self._max_backoff)
        log.log(
            logging.WARNING if self._refusals == 1 else logging.INFO,
            "arena_client: the server cannot start the match for now (%s); challenging again in %.1f s",
            reason,
            delay,
        )
        self._challenge_again = asyncio.get_running_loop().call_later(delay, lambda: writer.send(again()))

    def _record(self, result: MatchResult) -> None:
        if result.termination == Termination.ABORTED:
            self.aborted.append(result)
            self._aborted_in_a_row += 1
            log.warning("arena_client: match %s was aborted (%s); it does not count", result.match_id, result.reason)
            if self._aborted_in_a_row >= MAX_ABORTED_IN_A_ROW:
                raise ArenaError(
                    f"the server aborted {self._aborted_in_a_row} matches in a row (last: {result.reason}); giving up"
                )
            return
        self._aborted_in_a_row = 0
        self.results.append(result)
        log.info("arena_client: match %s ended: %s (%s)", result.match_id, result.returns, result.reason)


_FINISHED = object()


class _Writer:
    """The writes of one Play stream that the session does not await, in order.

    Pongs, resignations and a challenge's repeat go through it, and so does an
    Action when something is still being written (otherwise the session awaits
    the Action's write itself, see :meth:`Client._answer`). A write starts at
    once when the stream is idle (its first step hands the message to gRPC
    core) and is finished from the completion callback of the future it
    yields. Messages sent while a write is in flight wait their turn. A failed
    write is kept in :attr:`error` (raised by :meth:`drain` and noticed by the
    session after its next read); the stream is broken then, and the read says
    so as well.
    """

    def __init__(self, call: Any) -> None:
        self._call = call
        self._queue: collections.deque[bs.BotMessage | bytes] = collections.deque()
        self._in_flight: Any = None
        """The write coroutine in progress (stepped by hand), or None."""
        self._waiters: list[asyncio.Future[None]] = []
        self.error: BaseException | None = None

    @property
    def idle(self) -> bool:
        """Nothing is being written or waits to be: the session may write to the stream itself."""
        return self._in_flight is None and not self._queue and self.error is None

    def send(self, msg: bs.BotMessage | bytes) -> None:
        """Write ``msg`` after everything sent before it; never waits."""
        if self.error is not None:
            return  # the stream is broken; the session hears it from its next read or drain
        if self.idle:
            self._step(self._call.write(msg).__await__())
        else:
            self._queue.append(msg)

    async def drain(self) -> None:
        """Wait until every message sent so far is written; raise the error of a failed write."""
        while self._in_flight is not None:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter
        if self.error is not None:
            raise self.error

    def _step(self, coro: Any) -> None:
        """Step the write ``coro`` (a write's ``__await__()``) until it waits; then the next queued one.

        ``next(coro, _FINISHED)``: a write that completes ends without a StopIteration to raise and catch.
        """
        while True:
            try:
                waiter: Any = next(coro, _FINISHED)
            except BaseException as exc:  # kept for the session, which raises it
                self.error = exc
                self._done()
                return
            if waiter is _FINISHED:
                if not self._queue or self.error is not None:
                    self._done()
                    return
                coro = self._call.write(self._queue.popleft()).__await__()
                continue
            self._in_flight = coro
            if waiter is None:  # a bare yield: step again on the next loop iteration
                asyncio.get_running_loop().call_soon(self._resume, None)
            else:
                waiter._asyncio_future_blocking = False
                waiter.add_done_callback(self._resume)
            return

    def _resume(self, _done: object) -> None:
        coro = self._in_flight
        if coro is not None:
            self._step(coro)

    def _done(self) -> None:
        self._in_flight = None
        if self.error is not None:
            self._queue.clear()
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)


class _Inbox:
    """The messages of a Play stream, read on while ``act`` runs in the worker thread.

    While a slow ``act`` thinks, pings are answered at once and every other
    message is kept, in order, for afterwards; a MatchEnded among them tells
    the session not to send the now pointless answer (which the server could
    otherwise take for an answer in the bot's next match).
    """

    def __init__(self, call: Any, writer: _Writer) -> None:
        self._call = call
        self._writer = writer
        self.backlog: collections.deque[Any] = collections.deque()
        """Messages read while ``act`` was thinking, oldest first."""
        self._reading: asyncio.Future[Any] | None = None

    async def next(self) -> Any:
        """The next message (grpc.aio.EOF at the end of the stream)."""
        if self.backlog:
            return self.backlog.popleft()
        if self._reading is None:
            return await self._call.read()
        reading, self._reading = self._reading, None
        return await reading

    async def during(self, thinking: asyncio.Future[Any]) -> Any:
        """Keep reading until ``thinking`` is done; return its result (or raise its exception)."""
        try:
            while not thinking.done():
                if self._reading is None:
                    self._reading = asyncio.ensure_future(self._call.read())
                await asyncio.wait((thinking, self._reading), return_when=asyncio.FIRST_COMPLETED)
                if not self._reading.done():
                    continue
                reading, self._reading = self._reading, None
                msg = reading.result()
                if msg is _EOF:
                    raise _Retry("the server closed the stream")
                if type(msg) is not bytes and msg.WhichOneof("kind") == "ping":  # (bytes: a Turn)
                    self._writer.send(bs.BotMessage(pong=bs.Pong(nonce=msg.ping.nonce)))
                else:
                    self.backlog.append(msg)
            return thinking.result()
        finally:
            thinking.cancel()  # no-op when done; on an error or Ctrl-C the session stops waiting for act

    @property
    def idle(self) -> bool:
        """Nothing kept and no read in progress: the session may read the stream directly."""
        return not self.backlog and self._reading is None

    def ended(self, match_id: str) -> bool:
        """Whether a MatchEnded for ``match_id`` is among the kept messages."""
        return any(
            type(m) is not bytes and m.WhichOneof("kind") == "match_ended" and m.match_ended.match_id == match_id
            for m in self.backlog
        )

    def close(self) -> None:
        if self._reading is not None:
            self._reading.cancel()
            self._reading = None


async def wait_until_reachable(channel: grpc.aio.Channel, target: str, timeout: float) -> None:
    """Return once ``channel`` is connected; raise :class:`ServerUnreachable` if it fails or takes ``timeout`` s.

    A refused connection fails at once; an address that does not answer
    (no route, filtered) fails after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    state = channel.get_state(try_to_connect=True)
    while state != grpc.ChannelConnectivity.READY:
        if state in (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN):
            raise ServerUnreachable(cannot_reach(target, "connection failed"))
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ServerUnreachable(cannot_reach(target, f"no answer within {timeout:g} s"))
        try:
            await asyncio.wait_for(channel.wait_for_state_change(state), remaining)
        except TimeoutError:
            raise ServerUnreachable(cannot_reach(target, f"no answer within {timeout:g} s")) from None
        state = channel.get_state(try_to_connect=True)


def wait_until_reachable_blocking(channel: grpc.Channel, target: str, timeout: float) -> None:
    """:func:`wait_until_reachable` for a synchronous ``grpc.Channel``."""
    seen: queue.SimpleQueue[grpc.ChannelConnectivity] = queue.SimpleQueue()
    channel.subscribe(seen.put, try_to_connect=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                state = seen.get(timeout=max(remaining, 0.0))
            except queue.Empty:
                raise ServerUnreachable(cannot_reach(target, f"no answer within {timeout:g} s")) from None
            if state == grpc.ChannelConnectivity.READY:
                return
            if state in (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN):
                raise ServerUnreachable(cannot_reach(target, "connection failed"))
    finally:
        channel.unsubscribe(seen.put)
