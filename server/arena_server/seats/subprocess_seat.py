"""Subprocess seats: a bot program that plays over its stdin and stdout.

:class:`~arena_server.seats.process.BotProgram` says how to run a bot (command,
framing, working directory, limits) and :class:`~arena_server.seats.process.BotProcess`
starts and stops it; :class:`SubprocessSeat` speaks the protocol with it for the referee. The process is started
when a match starts and must send a Hello within the start-up timeout; it is
stopped when the match ends, unless its Hello asked for ``keep_alive``, in which
case it plays the seat's next match too and is stopped by :meth:`SubprocessSeat.close`.

Stopping means: MatchEnded is sent, stdin is closed, the bot gets a short grace
to exit by itself, then its whole process group (and PID namespace, where the
machine allows one) is killed with SIGKILL and reaped. On a timeout or a crash
this happens at once. stderr is drained all the time into a capped log that is
kept with the match (:meth:`SubprocessSeat.stderr_log`), so a bot flooding
stderr never blocks.

Nothing a bot does raises: every failure is an :class:`Answer` whose reason says
what arrived and what was expected.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

from arena.v1 import bot_session_pb2 as bs
from arena_client import MatchInfo, MatchResult, PublicMove, SeatInfo, Termination, Turn, Update
from arena_client.convert import match_info_to_proto, result_to_proto, turn_to_proto, update_to_proto
from arena_server.referee.answer import Answer
from arena_server.referee.clock import Deadline, LoopLag
from arena_server.referee.seat import Seat
from arena_server.seats.framing import (
    FrameError,
    FrameParser,
    Framing,
    delimited,
    encode,
    encode_turn,
    parse_payload,
)
from arena_server.seats.process import (
    STDIN_BACKLOG_LIMIT,
    BotProcess,
    BotProgram,
    CappedLog,
    describe_exit,
)
from arena_server.seats.turn_ids import TurnIds
from arena_server.seats.turn_wire import server_message_turn

PROTOCOL_VERSION = "arena.v1"
SERVER_VERSION = "arena/0.1"


class SubprocessSeat(Seat):
    """Seats a bot program that speaks ``arena.v1`` over stdin/stdout.

    One seat object may play several matches in a row; with ``keep_alive`` in its
    Hello the same process plays them all. Call :meth:`close` when done (it is safe
    to call it any number of times; the seat also stops its process after every
    match that does not keep it alive).
    """

    def __init__(self, program: BotProgram, info: SeatInfo | None = None) -> None:
        super().__init__(info or SeatInfo(0, "subprocess-bot", 1, "subprocess"))
        self.program = program
        self.log = CappedLog(program.log_bytes)
        self.hello: bs.Hello | None = None
        self.messages_received = 0
        self._last_sent: bs.ServerMessage | None = None
        """The last message written to the bot, or None (also when it was the last Turn: see :attr:`last_sent`)."""
        self.last_received: bs.BotMessage | None = None
        """The last message read from the bot."""
        self.unreadable = ""
        """The start of the frame or line the bot wrote that could not be read (quoted), if any."""
        self._last_turn: bs.ServerMessage | None = None
        self._last_turn_args: tuple[Turn, Sequence[PublicMove]] | None = None
        """The last Turn given to the bot when its message was not built (written from wire fragments)."""
        self._turn_sent_last = False
        self._process = BotProcess(program, self.log)
        self._parser: FrameParser | None = None
        """The stdout codec of the running process; None once its output is no longer read."""
        self._hello_future: asyncio.Future[bs.Hello | Answer] | None = None
        self._pending: tuple[int, Callable[[Answer], None], float, int] | None = None
        """The turn being asked: its id, who waits for its answer (see :meth:`ask_then`), its timeout and
        the stderr log's size when it was asked."""
        self._deferred: list[tuple[int, float] | Answer | None] | None = None
        """While :meth:`_on_stdout` dispatches several messages of one read: the pending turn's outcome,
        if it came (see :meth:`_resolve`)."""
        self._sent = 0.0
        self._killing: asyncio.Future[str | None] | None = None
        """The stop started by a missed deadline, until someone waits for it."""
        self._failure: Answer | None = None
        self._match_id: str | None = None
        self._past_matches: set[str] = set()
        self._latest_turn = 0
        self._answered = TurnIds()
        self._last_received: str | int = "nothing"
        """What the bot sent last, for reports: a description, or the turn id of its last Action
        (formatted only when a report needs it, not on every move)."""
        self._lag: LoopLag | None = None
        self._watching = False
        """Whether this seat holds the loop-lag monitor (from its first turn in a match to the match's end)."""
        self._deadline: Deadline | None = None
        """The turn deadline, re-armed turn after turn (one event-loop timer per deadline length, not per turn)."""
        self._expire_turn = self._expire_pending
        """The deadline's callback, made once (not a closure per move)."""
        self._turn_frames = program.framing is Framing.PROTO
        """Whether Turns are written as bytes (:func:`server_message_turn`) rather than from a message."""

    @property
    def last_sent(self) -> bs.ServerMessage | None:
        """The last message written to the bot (for failure reports such as ``arena check-bot``)."""
        return self.last_turn if self._turn_sent_last else self._last_sent

    @property
    def last_turn(self) -> bs.ServerMessage | None:
        """The last Turn the bot was given (built when asked for: the seat writes Turn frames directly)."""
        if self._last_turn is None and self._last_turn_args is not None:
            turn, moves = self._last_turn_args
            message = bs.ServerMessage()
            turn_to_proto(turn, moves, message.turn)
            self._last_turn = message
        return self._last_turn

    # -- public helpers ---------------------------------------------------------------------------

    def stderr_log(self) -> str:
        """The capped stderr log of the current (or last) process, with the server's notes."""
        return self.log.text()

    def stderr_tail(self, max_bytes: int = 2000) -> str:
        """The end of the stderr log, for failure reports."""
        text = self.log.text()
        return text[-max_bytes:]

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process.running

    @property
    def returncode(self) -> int | None:
        """How the bot's last process ended (None while it runs, or when it was killed before it ended)."""
        return self._process.returncode

    @property
    def _scratch(self) -> str | None:
        return self._process.scratch

    # -- Seat -------------------------------------------------------------------------------------

    async def start(self, match: MatchInfo) -> Answer | None:
        if self._failure is not None or not self.running:
            await self._stop()
            failure = await self._spawn()
            if failure is not None:
                await self._stop()
                return failure
        assert self.hello is not None
        games = list(self.hello.games)
        if games and match.game not in games:
            reason = (
                f"cannot play {match.game}: its Hello lists only {', '.join(games)} "
                f"(add {match.game!r} to Hello.games, or leave the list empty to play every game)"
            )
            self._send(bs.ServerMessage(error=bs.Error(code=bs.ERROR_CODE_UNSUPPORTED_GAME, message=reason)))
            return Answer(None, 0.0, Termination.PROTOCOL_ERROR, reason)
        self._match_id = match.match_id
        self._latest_turn = 0
        self._answered = TurnIds()
        self.log.note(f"match {match.match_id} ({match.game}) starts, seat {match.seat}")
        self._send(bs.ServerMessage(match_started=match_info_to_proto(match)))
        return None

    def ask_then(
        self, turn: Turn, moves: Sequence[PublicMove], timeout: float, on_answer: Callable[[Answer], None]
    ) -> None:
        if self._failure is not None:
            on_answer(self._failure)
            return
        loop = asyncio.get_running_loop()
        turn_id = turn.turn_id
        self._pending = (turn_id, on_answer, timeout, self.log.total)
        self._latest_turn = turn_id
        if self._turn_frames:
            self._last_turn = None
            self._last_turn_args = (turn, moves)
            pipes = self._process.pipes
            if pipes is not None and pipes.stdin_open:
                self._turn_sent_last = True
                if not pipes.write(delimited(server_message_turn(turn, moves))):
                    self._not_reading()
        else:
            self._last_turn_args = None
            self._last_turn = message = bs.ServerMessage()
            turn_to_proto(turn, moves, message.turn)
            self._send(message, encode_turn(message, self.program.framing))
        # The bot's clock starts once the Turn is in the pipe (the write returned) ...
        self._sent = time.perf_counter()
        if self._pending is None:
            return  # the write failed the seat (its answer is given)
        # ... and the deadline only counts while the loop is responsive (no task per turn: a timer handle).
        lag = self._lag
        if lag is None or lag.loop is not loop:
            self._unwatch()
            self._lag = lag = LoopLag.of(loop)
        if not self._watching:  # watched from the first turn to the end of the match (see end), not per move
            lag.acquire()
            self._watching = True
        timer = self._deadline
        if timer is None:
            self._deadline = lag.deadline(timeout, self._expire_turn)
        else:
            timer.restart(timeout, self._expire_turn)

    def cancel_ask(self) -> None:
        if self._pending is not None:
            self._pending = None
            if self._deferred:
                self._deferred.clear()
            if self._deadline is not None:
                self._deadline.cancel()

    def _resolve(self, result: tuple[int, float] | Answer | None) -> None:
        """The pending turn's outcome: an (action, read at) pair, a failure, or :data:`_EXPIRED`; the first counts.

        Within one read of several messages it is kept until they are all dispatched
        (see :meth:`_on_stdout`): the referee asks the next turn only after that, as it
        would have, so an Action in the same read for a turn not yet given stays one.
        """
        pending = self._pending
        if pending is None:
            return
        deferred = self._deferred
        if deferred is not None:
            if not deferred:
                deferred.append(result)
            return
        self._pending = None
        if self._deadline is not None:
            self._deadline.cancel()
        turn_id, on_answer, timeout, stderr_before = pending
        if result is _EXPIRED:
            elapsed = time.perf_counter() - self._sent
            reason = f"sent no Action for turn {turn_id} within {timeout:.3g}s"
            if self.log.total > stderr_before:
                reason += (
                    f"; meanwhile it wrote to stderr: {self.log.last_line()!r} "
                    "(messages must go to stdout; stderr is only a log)"
                )
            elif self.messages_received == 0:
                reason += "; it has written nothing on stdout"
            failure = Answer(None, elapsed, Termination.TIMEOUT, reason)
            self._failure = failure
            self._kill_soon()
            on_answer(failure)
        elif isinstance(result, Answer):
            on_answer(result)
        else:
            action, received = result
            sent = self._sent
            lag = self._lag
            # ``received`` is when the pipe was read; a stall of the server's loop before that is not the bot's.
            elapsed = (received if lag is None else lag.arrival(sent, received)) - sent
            on_answer(Answer(action, elapsed if elapsed > 0.0 else 0.0))  # (read before the Turn went out: none)

    def _kill_soon(self) -> None:
        """Stop the process now, from a callback (its deadline passed): what it writes is no longer read.

        Whoever stops the seat next (:meth:`end`, :meth:`close`, the next :meth:`start`) waits for it.
        """
        self._parser = None
        if self._killing is None:
            killing = self._killing = asyncio.ensure_future(self._process.stop())
            killing.add_done_callback(self._killed)

    def _killed(self, task: asyncio.Future[str | None]) -> None:
        """The background stop ended: an error is noted in the bot's log (and never goes unseen)."""
        if not task.cancelled() and task.exception() is not None:
            self.log.note(f"stopping the process after its missed deadline failed: {task.exception()!r}")

    def update(self, update: Update) -> None:
        if self._failure is None:
            self._send(bs.ServerMessage(update=update_to_proto(update)))

    async def end(self, result: MatchResult) -> None:
        if self._deadline is not None:
            self._deadline.close()
        self._unwatch()
        try:
            if self._match_id is not None:
                self._past_matches.add(self._match_id)
            self._match_id = None
            if self.running and self._failure is None:
                self._send(bs.ServerMessage(match_ended=result_to_proto(result)))
            self.log.note(f"match {result.match_id} ended: {result.termination.label}; {result.reason}")
            keep = self.hello is not None and self.hello.keep_alive and self._failure is None and self.running
            if not keep:
                await self._stop(graceful=True)
        except Exception as exc:  # end must not raise
            self.log.note(f"error while ending the match: {exc!r}")

    async def close(self) -> None:
        """Stop the process (if any) and remove the scratch directory."""
        if self._deadline is not None:
            self._deadline.close()
        self._unwatch()
        await self._stop()
        self._process.remove_scratch()

    async def __aenter__(self) -> SubprocessSeat:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the process ------------------------------------------------------------------------------

    async def _spawn(self) -> Answer | None:
        program = self.program
        self.log = CappedLog(program.log_bytes)
        self.hello = None
        self._process.log = self.log
        self._failure = None
        self.messages_received = 0
        self._last_sent = None
        self.last_received = None
        self._last_turn = None
        self._last_turn_args = None
        self._turn_sent_last = False
        self._last_received = "nothing"
        self._past_matches = set()
        loop = asyncio.get_running_loop()
        self._hello_future = loop.create_future()
        self._parser = FrameParser(program.framing, program.max_message_bytes)
        problem = await self._process.start(self._on_stdout, self._on_stdout_eof, self._on_stderr)
        if problem is not None:
            return Answer(None, 0.0, Termination.CRASH, problem)
        started = time.perf_counter()
        try:
            hello = await asyncio.wait_for(asyncio.shield(self._hello_future), program.startup_timeout)
        except TimeoutError:
            reason = (
                f"sent no Hello within {program.startup_timeout:g}s of starting; "
                "the first message must be a Hello, "
                f"e.g. {_HELLO_EXAMPLE[program.framing]}"
            )
            if self.messages_received == 0 and self.log.last_line():
                reason += f"; its stderr ends with {self.log.last_line()!r}"
            self._failure = Answer(None, time.perf_counter() - started, Termination.TIMEOUT, reason)
            return self._failure
        if isinstance(hello, Answer):
            return hello
        version = hello.protocol_version
        if version and version != PROTOCOL_VERSION:
            reason = f"speaks protocol {version!r}; this server speaks {PROTOCOL_VERSION!r}"
            self._send(bs.ServerMessage(error=bs.Error(code=bs.ERROR_CODE_VERSION, message=reason, fatal=True)))
            self._failure = Answer(None, 0.0, Termination.PROTOCOL_ERROR, reason)
            return self._failure
        self.log.note(
            f"hello: name={hello.name!r} games={list(hello.games) or 'all'} keep_alive={hello.keep_alive} "
            f"client={hello.client!r} after {time.perf_counter() - started:.3f}s"
        )
        self._send(
            bs.ServerMessage(
                welcome=bs.Welcome(
                    bot_name=self.info.bot_name,
                    guest=False,
                    server_version=SERVER_VERSION,
                    protocol_version=PROTOCOL_VERSION,
                    message="seated as a subprocess bot; a MatchStarted follows",
                )
            )
        )
        return None

    def _send(self, message: bs.ServerMessage, data: bytes | None = None) -> None:
        """Write ``message`` to the bot (``data``: its frame, when the caller has encoded it already)."""
        if not self._process.writable:
            return
        self._last_sent = message
        self._turn_sent_last = False
        if not self._process.write(encode(message, self.program.framing) if data is None else data):
            self._not_reading()

    def _not_reading(self) -> None:
        self._fail(
            Termination.PROTOCOL_ERROR,
            f"does not read its stdin: more than {STDIN_BACKLOG_LIMIT >> 20} MiB of messages are waiting for it",
        )

    def _fail(self, termination: Termination, reason: str, error: bs.Error | None = None) -> None:
        """Record the first failure and wake whoever waits for the bot."""
        if self._failure is not None or self._process.stopping:
            return
        failure = Answer(None, 0.0, termination, reason)
        self._failure = failure
        self.log.note(f"failure: {termination.label}: {reason}")
        if error is not None:
            self._send(bs.ServerMessage(error=error))
        if self._hello_future is not None and not self._hello_future.done():
            self._hello_future.set_result(failure)
        self._resolve(failure)

    def _on_stdout(self, data: bytes, read_at: float | None = None) -> None:
        """Bytes from the bot's stdout (read from the pipe at ``read_at``): parse and dispatch every message."""
        parser = self._parser
        if parser is None:
            return
        try:
            try:
                payload = parser.whole(data)
                if payload is not None:  # the common case of a move: one whole frame, most likely an Action
                    try:
                        message = bs.BotMessage.FromString(payload)
                    except Exception:  # parse_payload below says what is wrong with it
                        message = bs.BotMessage()
                    hello = self._hello_future
                    if message.WhichOneof("kind") == "action" and hello is not None and hello.done():
                        self.messages_received += 1
                        self.last_received = message
                        self._on_action(message.action, time.perf_counter() if read_at is None else read_at)
                        return
                    payloads = [payload]
                else:
                    payloads = parser.feed(data)
                received = time.perf_counter() if read_at is None else read_at
                deferred: list[tuple[int, float] | Answer | None] = []
                self._deferred = deferred
                try:
                    for payload in payloads:
                        message = parse_payload(payload, self.program.framing, bs.BotMessage)
                        self.messages_received += 1
                        self._dispatch(message, received)
                finally:
                    self._deferred = None
                    if deferred:
                        self._resolve(deferred[0])
            except FrameError as exc:
                self._parser = None  # nothing after garbage is read
                self.unreadable = exc.quoted
                code = bs.ERROR_CODE_TOO_LARGE if exc.kind == "too_large" else bs.ERROR_CODE_BAD_MESSAGE
                self._fail(
                    Termination.PROTOCOL_ERROR,
                    f"wrote something unreadable on stdout {self._where()}: {exc.message}",
                    bs.Error(code=code, message=exc.message, fatal=True),
                )
        except Exception as exc:  # a bug here must still end the match cleanly
            self._parser = None
            self._fail(Termination.CRASH, f"could not be read: {exc!r}")

    def _on_stdout_eof(self) -> None:
        parser = self._parser
        if parser is None:
            return
        self._parser = None
        if self._process.stopping:
            return
        try:
            parser.eof()
        except FrameError as exc:
            self.unreadable = exc.quoted
            self._fail(
                Termination.PROTOCOL_ERROR,
                f"wrote something unreadable on stdout {self._where()}: {exc.message}",
                bs.Error(code=bs.ERROR_CODE_BAD_MESSAGE, message=exc.message, fatal=True),
            )
            return
        self._process.spawn_task(self._on_eof())

    def _on_stderr(self, data: bytes) -> None:
        self.log.write(data)

    def _where(self) -> str:
        if self.hello is None and self._hello_future is not None and not self._hello_future.done():
            return "before its Hello"
        if self._pending is not None:
            return f"while answering turn {self._pending[0]}"
        last = self._last_received
        return f"after {last}" if isinstance(last, str) else f"after its Action for turn {last}"

    def _dispatch(self, message: bs.BotMessage, received: float) -> None:
        self.last_received = message
        kind = message.WhichOneof("kind")
        hello_future = self._hello_future
        if hello_future is not None and not hello_future.done():
            if kind != "hello":
                reason = (
                    f"sent {kind} as its first message; the first message must be a Hello, e.g. "
                    f"{_HELLO_EXAMPLE[self.program.framing]}"
                )
                self._fail(
                    Termination.PROTOCOL_ERROR,
                    reason,
                    bs.Error(code=bs.ERROR_CODE_NO_HELLO, message=reason, fatal=True),
                )
                return
            self.hello = message.hello
            hello_future.set_result(message.hello)
            self._last_received = "its Hello"
            return
        if kind == "action":
            self._on_action(message.action, received)
        elif kind == "resign":
            pending = self._pending
            reason = f"resigned{': ' + message.resign.reason if message.resign.reason else ''}"
            if self._match_id is None:
                return
            failure = Answer(None, 0.0, Termination.RESIGN, reason)
            self._failure = failure
            if pending is not None:
                self._resolve(failure)
        elif kind == "pong":
            pass
        elif kind == "hello":
            reason = "sent a second Hello; Hello is only the first message of a session"
            self._fail(
                Termination.PROTOCOL_ERROR,
                reason,
                bs.Error(code=bs.ERROR_CODE_BAD_MESSAGE, message=reason, fatal=True),
            )
        elif kind == "challenge":
            self._send(
                bs.ServerMessage(
                    error=bs.Error(
                        code=bs.ERROR_CODE_BAD_MESSAGE,
                        message="subprocess bots are seated by the server; Challenge is only for remote bots (ignored)",
                    )
                )
            )

    def _on_action(self, action: bs.Action, received: float) -> None:
        pending = self._pending
        if pending is not None and not self._deferred:  # the awaited answer (the only place it is taken)
            match_id = self._match_id
            if match_id is not None and action.turn_id == pending[0] and action.match_id == match_id:
                self._answered.add(pending[0])
                self._last_received = pending[0]
                self._resolve((action.action, received))
                return
        if self._match_id is None or action.match_id != self._match_id:
            if action.match_id in self._past_matches:
                self._stale(action, "that match is over")
                return
            current = f"the current match is {self._match_id!r}" if self._match_id else "no match is running"
            reason = f"sent an Action for match {action.match_id!r}, but {current}"
            self._fail(
                Termination.PROTOCOL_ERROR,
                reason,
                bs.Error(code=bs.ERROR_CODE_UNKNOWN_TURN, message=reason, fatal=True),
            )
            return
        if 0 < action.turn_id <= self._latest_turn:
            why = "it was already answered" if action.turn_id in self._answered else "it has expired"
            self._stale(action, why)
            return
        if pending is not None:
            expected = f"the turn it must answer is {pending[0]}"
        elif self._latest_turn:
            expected = f"the latest turn it was given is {self._latest_turn} and no Turn is waiting for an answer"
        else:
            expected = "it has not been given any Turn yet in this match"
        reason = f"answered turn {action.turn_id}, which it was never given ({expected}); answer only after a Turn"
        self._fail(
            Termination.PROTOCOL_ERROR,
            reason,
            bs.Error(
                code=bs.ERROR_CODE_UNKNOWN_TURN,
                message=reason,
                match_id=action.match_id,
                turn_id=action.turn_id,
                fatal=True,
            ),
        )

    def _stale(self, action: bs.Action, why: str) -> None:
        message = f"your Action for turn {action.turn_id} was dropped: {why}"
        self.log.note(message)
        self._send(
            bs.ServerMessage(
                error=bs.Error(
                    code=bs.ERROR_CODE_STALE_TURN,
                    message=message,
                    match_id=action.match_id,
                    turn_id=action.turn_id,
                    fatal=False,
                )
            )
        )

    async def _on_eof(self) -> None:
        process = self._process
        if process.stopping:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.exited.wait(), 2.0)
        how = describe_exit(process.returncode, self.program.limits, self.log.text())
        if process.returncode is None:
            how = "closed its stdout"
        where = "before sending Hello" if self.hello is None else self._where()
        reason = f"{how} {where}"
        last = self.log.last_line()
        if last:
            reason += f"; its stderr ends with {last!r}"
        self._fail(Termination.CRASH, reason)

    def _unwatch(self) -> None:
        """Let go of the loop-lag monitor (it stops ticking when no seat holds it)."""
        if self._watching and self._lag is not None:
            self._lag.release()
        self._watching = False

    def _expire_pending(self) -> None:
        """The turn deadline passed (armed only while a turn is pending)."""
        self._resolve(_EXPIRED)

    async def _stop(self, graceful: bool = False) -> None:
        """End the bot's process (see :meth:`BotProcess.stop`); its output is no longer read."""
        killing = self._killing
        if killing is not None:  # a missed deadline is stopping it already
            self._killing = None
            with contextlib.suppress(Exception):  # (noted in the bot's log by _killed)
                await killing
        await self._process.stop(graceful)
        self._parser = None


_EXPIRED = None
"""The outcome of a turn whose deadline passed (see :meth:`SubprocessSeat._resolve`)."""


_HELLO_EXAMPLE = {
    Framing.JSON: '{"hello": {"protocolVersion": "arena.v1", "name": "my-bot", "games": ["rps"]}} on one line',
    Framing.PROTO: "a varint length followed by a serialized arena.v1.BotMessage{hello: {...}}",
}
