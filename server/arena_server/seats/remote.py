"""Remote bots: one :class:`RemoteSession` per ``BotSessionService.Play`` stream.

The session owns the stream. It reads every message the bot sends in one
reader task and hands actions to the match the bot is seated in; it writes
in order through a single flusher. A :class:`RemoteSeat` is the session's
seat in one match; the session plays its matches one after another.

Message handling rules (the bot is told each time with an ``Error``):

* anything before ``Hello`` ends the session (``NO_HELLO``);
* an undecodable or oversized message ends the session, and the running
  match ends with ``PROTOCOL_ERROR``;
* an ``Action`` for a turn that already expired is dropped (``STALE_TURN``);
* an ``Action`` for a turn the seat was never given ends the match with
  ``PROTOCOL_ERROR``.

No caller awaits a write: messages go through a bounded queue
(:data:`MAX_OUTBOX`) written in order, one at a time. When nothing is queued or
in flight, the write starts in the caller's own step (the referee's, for a
Turn), so a move wakes no writer task; the session, not the caller, owns the
write from then on and finishes it from gRPC's completion callback. Every write
has a deadline (:data:`WRITE_TIMEOUT`), kept by one watchdog timer per session
rather than a timer (or a task) per write, so a move costs no more than the write itself.
A bot that stops reading its stream overflows one or the other; its session is
closed and the match it is in ends with ``DISCONNECT`` and that reason.

A Turn write is never cut in half by an abort (a match aborted or the server
shutting down cancels the referee, which does not own the write), and
MatchEnded is written before the seat lets go (bounded by
:data:`END_NOTICE_TIMEOUT`), so every bot hears how its match ended. A bot's
clock runs from the completed Turn write (its completion starts it, so the
referee waits on one future per move) to the moment its Action was read,
minus a stall of the server's loop just before that read (:class:`LoopLag`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from typing import Any, Final

from arena.v1 import bot_session_pb2 as bs
from arena_client import MatchInfo, MatchResult, PublicMove, SeatInfo, Termination, Turn, Update
from arena_client.convert import match_info_to_proto, result_to_proto, update_to_proto
from arena_server.referee.answer import Answer
from arena_server.referee.clock import Deadline, LoopLag, monotonic, perf_counter
from arena_server.referee.seat import Seat
from arena_server.seats.action_wire import WireAction
from arena_server.seats.turn_ids import TurnIds
from arena_server.seats.turn_wire import server_message_turn

_Future: Final = asyncio.Future
"""asyncio's Future class as a C static (as the clocks of :mod:`arena_server.referee.clock`)."""

MAX_MESSAGE_BYTES: Final = 64 * 1024
"""Largest bot message the server accepts (a bot never needs more than a few bytes)."""

MAX_OUTBOX = 1024
"""Messages that may wait to be written to one bot; a bot with more waiting does not read its stream."""

WRITE_TIMEOUT = 10.0
"""Seconds one message may take to be written (gRPC flow control waits for the bot to read)."""

_FINISHED: Final = object()
"""What ``next(write, _FINISHED)`` gives for a write that has completed (see ``RemoteSession._in_flight``)."""

FLUSH_TIMEOUT = 2.0
"""Seconds a closing session waits for its last messages (a fatal Error) to be written."""

END_NOTICE_TIMEOUT = 5.0
"""Seconds the referee waits for a MatchEnded (e.g. the shutdown notice) to be written to the stream."""


Outgoing = bs.ServerMessage | bytes
"""What a session writes: a ServerMessage, or a serialized one (every Turn, from :mod:`.turn_wire`)."""


def as_message(out: Outgoing) -> bs.ServerMessage:
    """What a session writes, as a message (a Turn written as bytes is parsed back)."""
    return bs.ServerMessage.FromString(out) if type(out) is bytes else out  # type: ignore[return-value]


def _wake(waiters: list[asyncio.Future[None]]) -> None:
    """Let every waiter go on (one cancelled meanwhile is skipped)."""
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)


class SessionClosed(Exception):
    """The session's stream is gone."""


class RemoteSession:
    """A connected bot: its identity, its stream and the match it is in.

    Messages are written in order, one at a time, so no caller ever waits
    for the bot to read: :meth:`send` queues, or starts the write when the
    stream is idle, and returns. The queue holds at most
    ``max_outbox`` messages and each write must finish within
    ``write_timeout`` seconds; a bot that stops reading breaks one of the two
    and its session is closed (its seat fails with ``DISCONNECT``).

    Args:
        write: Coroutine writing one ServerMessage (or its bytes, see :data:`Outgoing`) to the stream.
        peer: Description of the remote end, for logs.
        max_outbox: Messages that may wait to be written (default :data:`MAX_OUTBOX`).
        write_timeout: Seconds one write may take (default :data:`WRITE_TIMEOUT`).
    """

    def __init__(
        self,
        write: Callable[[Outgoing], Coroutine[Any, Any, Any]],
        peer: str = "",
        max_outbox: int | None = None,
        write_timeout: float | None = None,
    ) -> None:
        self._write = write
        self.peer = peer
        self.name = ""
        self.guest = True
        self.games: tuple[str, ...] = ()
        self.closed = asyncio.Event()
        self.close_reason = ""
        self.busy = asyncio.Lock()
        """Held while the session is seated in a match (one match at a time)."""
        self.queued = 0
        """Matches waiting for this session to be free."""
        self.seat: RemoteSeat | None = None
        self.ping_nonce = 0
        """Nonce of the last Ping sent (a Pong echoing it answers it)."""
        self.max_outbox = MAX_OUTBOX if max_outbox is None else max_outbox
        self.write_timeout = WRITE_TIMEOUT if write_timeout is None else write_timeout
        self._outbox: collections.deque[tuple[Outgoing, Callable[[Outgoing], None] | None]] = collections.deque()
        self._idle_waiters: list[asyncio.Future[None]] = []
        """Waiting in :meth:`drained` for the queue to empty."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self.is_closed = False
        """``closed.is_set()``, as a plain attribute for the per-message checks."""
        self._in_flight: Iterator[Any] | None = None
        """The stream write in progress, its ``__await__()`` (stepped by :meth:`_pump` and :meth:`_resume`), or None.

        It is stepped with ``next(write, _FINISHED)``: a write that completes then ends without a
        StopIteration to raise and catch (compiled, the catch added a traceback: about 0.3 us a move)."""
        self._waiter: asyncio.Future[Any] | None = None
        """The future the write in progress waits on (gRPC core's completion); the watchdog cancels it."""
        self._in_flight_msg: Outgoing = b""
        """The message the write in progress writes (meaningful while ``_in_flight`` is set)."""
        self._pumping = False
        """True while :meth:`_pump` runs: a message queued meanwhile (by an ``on_written``) waits for its loop."""
        self._writing_since: float | None = None
        """``time.monotonic()`` when the write in progress began (None: no write in progress), for the watchdog
        (not the loop's ``time()``: an interpreted call on every write)."""
        self._watchdog: asyncio.TimerHandle | None = None
        self._write_timed_out = False
        self.owed_turn = 0
        """The turn the bot is thinking about (0: none); cleared by its Action for it, even a late one."""
        self.past_matches: collections.deque[str] = collections.deque(maxlen=64)
        """Matches this session played to the end: a late Action for one of them is dropped, not a violation."""
        self._settle_waiters: list[asyncio.Future[None]] = []
        """Waiting in :meth:`wait_settled` (a shutdown); nothing is kept per move when nobody waits."""
        self.on_close: Callable[[], object] | None = None
        """Called when the session closes (the stream's handler stops reading then)."""
        self.stopped_by_server = False
        """True when a stopping server closed the session (:meth:`server_stopping`): its stream then ends with
        the shutdown's status instead of OK (``arena_server.api.bot_session``)."""
        self.follows_redirects = False
        """The bot's Hello set ``follows_redirects``: it reconnects where a :meth:`redirect` says."""

    @property
    def is_settled(self) -> bool:
        """True while the bot owes no answer (or the session is closed)."""
        return not self.owed_turn or self.is_closed

    async def wait_settled(self) -> None:
        """Wait until the bot owes no answer: a shutdown waits for it, so the bot is reading when the stream ends."""
        while not self.is_settled:
            waiter = asyncio.get_running_loop().create_future()
            self._settle_waiters.append(waiter)
            await waiter

    def moved_on(self) -> None:
        """The bot asked for a new match while seated in none: it has read how its last match ended.

        An answer it still owed for that match's turn may never come (a client may drop an answer that
        the match's end made moot; the Python SDK sends it), so a shutdown stops waiting for it.
        """
        if self.owed_turn and self.seat is None:
            self.owed_turn = 0
            if self._settle_waiters:
                self._settle()

    def _settle(self) -> None:
        waiters, self._settle_waiters = self._settle_waiters, []
        _wake(waiters)

    async def take(self, on_queued: Callable[[int], Awaitable[None]] | None = None) -> None:
        """Hold the session for one match (:attr:`busy`), waiting behind the match it plays.

        When it has to wait, ``on_queued(position)`` is awaited first, with its place in the queue
        (:attr:`queued`). Whoever takes it releases :attr:`busy` when the match is over.
        """
        if self.busy.locked():
            self.queued += 1
            try:
                if on_queued is not None:
                    await on_queued(self.queued)
                await self.busy.acquire()
            finally:
                self.queued -= 1
        else:
            await self.busy.acquire()

    # -- writing ------------------------------------------------------------------------------------

    async def send(self, msg: bs.ServerMessage) -> None:
        """Queue ``msg`` for writing, in order, and return at once. Never raises for a dead stream."""
        self.send_nowait(msg)

    async def drained(self) -> None:
        """Wait until everything queued so far has been written (or dropped because the stream is gone).

        Bounded: a message the bot does not read within ``write_timeout`` closes the session.
        """
        while self._outbox:
            waiter = asyncio.get_running_loop().create_future()
            self._idle_waiters.append(waiter)
            await waiter

    def send_nowait(self, msg: Outgoing, on_written: Callable[[Outgoing], None] | None = None) -> None:
        """Queue ``msg`` for writing (the same as :meth:`send`, for code that cannot await).

        When nothing is queued or being written, the write starts here, in the
        caller's own step: the message is handed to gRPC before this returns,
        with no task to wake. Otherwise it waits its turn behind the write in
        flight. A closed session drops the message. A full queue means the bot
        stopped reading: the session is closed and its seat fails with
        ``DISCONNECT``.

        Args:
            msg: The message.
            on_written: Called with ``msg`` as soon as it is on the stream, or when it
                is dropped (the session closed): whoever waits for the write
                goes on either way, as with :meth:`drained`.
        """
        if self.is_closed:
            if on_written is not None:
                on_written(msg)
            return
        if len(self._outbox) >= self.max_outbox:
            self._abandon(
                f"does not read its stream: {len(self._outbox)} messages were waiting to be written to it "
                f"(the limit is {self.max_outbox})"
            )
            if on_written is not None:
                on_written(msg)
            return
        self._outbox.append((msg, on_written))
        if self._in_flight is None and not self._pumping:
            self._pump()

    @property
    def backlog(self) -> int:
        """Messages queued and not yet written."""
        return len(self._outbox)

    def _pump(self) -> None:
        """Start writing the first queued message (no write is in flight).

        The stream's write coroutine is stepped by hand rather than run as a
        task: its first step hands the message to gRPC core and yields core's
        completion future, and :meth:`_resume` finishes it when that future is
        done. The write belongs to the session, not to whoever queued the
        message, so cancelling the caller (a match being aborted) can never
        cancel a write half-way and leave gRPC with an operation still pending
        that the next write would collide with.
        """
        if self._pumping or self._in_flight is not None:
            return  # the loop below, or the write in flight when it completes, takes the next message
        self._pumping = True
        try:
            outbox = self._outbox
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            while outbox:
                msg, _on_written = outbox[0]
                if self._watchdog is None:
                    self._watchdog = loop.call_later(self.write_timeout, self._watch)
                self._writing_since = monotonic()
                coro = self._write(msg).__await__()
                self._in_flight = coro
                self._in_flight_msg = msg
                try:
                    waiter = next(coro, _FINISHED)
                except (Exception, asyncio.CancelledError) as exc:
                    self._write_failed(msg, exc)
                    return
                if waiter is _FINISHED:
                    self._written(msg)  # written at once (nothing to wait for)
                    continue
                if type(waiter) is _Future:  # core's completion future (the usual case, inline)
                    waiter._asyncio_future_blocking = False
                    self._waiter = waiter
                    waiter.add_done_callback(self._resume)
                else:
                    self._wait_on(msg, waiter)
                return
            self._idle()
        finally:
            self._pumping = False

    def _idle(self) -> None:
        """Nothing is queued or in flight: waiters in :meth:`drained` go on; a closed session drops its watchdog."""
        if self._idle_waiters:
            self._set_idle()
        if self.is_closed and self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    def _wait_on(self, msg: Outgoing, waiter: Any) -> None:
        """Resume the write in flight when what it yielded (a future, or None for a bare yield) is done."""
        if waiter is None:
            asyncio.get_running_loop().call_soon(self._resume, None)
            return
        if type(waiter) is not _Future and not asyncio.isfuture(waiter):
            self._write_failed(msg, TypeError(f"the stream's write yielded {waiter!r}, not a future"))
            return
        waiter._asyncio_future_blocking = False
        self._waiter = waiter
        waiter.add_done_callback(self._resume)

    def _resume(self, _done: object) -> None:
        """One more step of the write in flight (its future is done, or it was cancelled by the watchdog)."""
        coro = self._in_flight
        self._waiter = None
        if coro is None:
            return
        msg = self._in_flight_msg
        try:
            waiter = next(coro, _FINISHED)
        except (Exception, asyncio.CancelledError) as exc:
            self._write_failed(msg, exc)
            return
        if waiter is _FINISHED:
            self._written(msg)
            if self._outbox:
                self._pump()
            elif not self._pumping:  # (when _pump is running, it finishes the idle tail itself)
                self._idle()
            return
        self._wait_on(msg, waiter)

    def _written(self, msg: Outgoing) -> None:
        """The write in flight completed: drop it from the queue and tell whoever waits for it."""
        self._in_flight = None
        self._writing_since = None
        outbox = self._outbox
        if outbox and outbox[0][0] is msg:
            _msg, on_written = outbox.popleft()
            if on_written is not None:
                on_written(msg)

    def _write_failed(self, msg: Outgoing, exc: BaseException) -> None:
        """The write in flight failed or was cancelled: the bot will not read the rest; close the session."""
        self._in_flight = None
        self._writing_since = None
        kind = "turn" if type(msg) is bytes else msg.WhichOneof("kind")  # type: ignore[union-attr]
        if isinstance(exc, asyncio.CancelledError):
            if self._write_timed_out:
                reason = (
                    f"does not read its stream: a message ({kind}) could not be written within {self.write_timeout:g}s"
                )
            else:
                reason = "the stream is ending"
        else:
            reason = f"writing to the stream failed: {exc!r}"
        self._abandon(reason)

    def _watch(self) -> None:
        """The write deadline: one timer per session, re-armed for the write in progress (if any)."""
        loop = asyncio.get_running_loop()
        since = self._writing_since
        now = monotonic()
        if since is not None and now - since >= self.write_timeout:
            self._watchdog = None
            self._write_timed_out = True
            waiter = self._waiter
            if waiter is not None:
                waiter.cancel()
            return
        if since is None and self.closed.is_set():
            self._watchdog = None
            return
        due = (since if since is not None else now) + self.write_timeout
        self._watchdog = loop.call_later(due - now, self._watch)

    def _abandon(self, reason: str) -> None:
        """Close the session and drop what is still queued (the bot will not read it).

        Closed first, so that nothing a dropped message's ``on_written`` sends is written.
        """
        self.mark_closed(reason)
        self._drop_outbox()

    def _set_idle(self) -> None:
        """Nothing is queued: whoever waits in :meth:`drained` goes on."""
        if self._idle_waiters:
            waiters, self._idle_waiters = self._idle_waiters, []
            _wake(waiters)

    def _drop_outbox(self) -> None:
        """Drop every queued message; their ``on_written`` callbacks run (see :meth:`send_nowait`)."""
        dropped = list(self._outbox)
        self._outbox.clear()
        self._set_idle()
        for msg, on_written in dropped:
            if on_written is not None:
                on_written(msg)

    async def flush(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        """:meth:`drained`, for at most ``timeout`` seconds; True if everything was written."""
        if not self._outbox:
            return True  # (the usual case at a session's end: no task, no timer)
        try:
            await asyncio.wait_for(self.drained(), timeout)
        except TimeoutError:
            return False
        return True

    async def stop_writing(self) -> None:
        """Stop writing (the stream is ending): anything still queued is dropped, a write in flight cancelled."""
        self._drop_outbox()
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        waiter = self._waiter
        if waiter is not None and waiter.cancel():
            await asyncio.sleep(0)  # let the cancelled write finish (see _resume)

    async def error(self, code: int, message: str, match_id: str = "", turn_id: int = 0, fatal: bool = False) -> None:
        await self.send(
            bs.ServerMessage(
                error=bs.Error(code=code, message=message, match_id=match_id, turn_id=turn_id, fatal=fatal)  # type: ignore[arg-type]
            )
        )

    async def evict(self, reason: str) -> None:
        """Tell the bot its name was taken from it (fatal ``NAME_TAKEN``) and close the session.

        Its current match, if any, ends as a disconnect.
        """
        await self.error(bs.ERROR_CODE_NAME_TAKEN, reason, fatal=True)
        self.mark_closed(reason)

    async def redirect(self, port: int, reason: str) -> None:
        """Tell the bot to reconnect on ``port`` of the same host (it asked to follow redirects); close the session.

        The Redirect is queued like any message and written before the stream ends.
        """
        await self.send(bs.ServerMessage(redirect=bs.Redirect(port=port, reason=reason)))
        self.mark_closed(f"redirected to port {port}: {reason}")

    def server_stopping(self, reason: str) -> None:
        """The server is stopping: close the session, and have its stream end as a shutdown.

        Messages already queued (a MatchEnded, a Ping) are still written before the stream ends. A session
        already closed for another reason ends as it would have.
        """
        if not self.is_closed:
            self.stopped_by_server = True
            self.mark_closed(reason)

    def mark_closed(self, reason: str) -> None:
        """Close the session (messages already queued are still written); the seated match hears of it."""
        if not self.is_closed:
            self.close_reason = reason
            self.is_closed = True
            self.closed.set()
            if self.on_close is not None:
                self.on_close()
            if self._settle_waiters:
                self._settle()
            if self.seat is not None:
                self.seat.session_lost(reason)

    # -- reading ------------------------------------------------------------------------------------

    def on_action(self, action: WireAction) -> None:
        """Route an Action to the seated match (or complain)."""
        if self.owed_turn and action.turn_id == self.owed_turn:
            self.owed_turn = 0
            if self._settle_waiters:
                self._settle()
        seat = self.seat
        if seat is None:
            late = action.match_id in self.past_matches
            self.send_nowait(
                bs.ServerMessage(
                    error=bs.Error(
                        code=bs.ERROR_CODE_STALE_TURN if late else bs.ERROR_CODE_UNKNOWN_TURN,
                        message=f"match {action.match_id!r} is over; your action for its turn {action.turn_id} "
                        "was dropped"
                        if late
                        else f"action for match {action.match_id!r} turn {action.turn_id}, "
                        "but you are not seated in any match; answer only Turn messages",
                        match_id=action.match_id,
                        turn_id=action.turn_id,
                    )
                )
            )
            return
        seat.on_action(action)

    def on_resign(self, resign: bs.Resign) -> None:
        if self.seat is not None and self.seat.match_id == resign.match_id:
            self.seat.on_resign(resign.reason)

    def protocol_violation(self, reason: str) -> None:
        """A fatal protocol error: the running match ends with PROTOCOL_ERROR."""
        if self.seat is not None:
            self.seat.fail(Termination.PROTOCOL_ERROR, reason)


class RemoteSeat(Seat):
    """A remote session's seat in one match.

    It answers inline (:meth:`ask_then`): the Action read from the stream is
    handed to the referee in the reader's own step, which writes the next Turn
    before the reader arms its next read.
    """

    def __init__(self, session: RemoteSession, info: SeatInfo) -> None:
        super().__init__(info)
        self.session = session
        self.match_id = ""
        self.last_turn_args: tuple[Turn, Sequence[PublicMove]] | None = None
        """The last Turn asked and its moves (a failure report shows the Turn the bot got)."""
        self._turn_id = 0
        self._issued = TurnIds()
        """The turn ids this seat was given in the match (an answer to one of them that is not awaited is late)."""
        self._expected = 0
        self._on_answer: Callable[[Answer], None] | None = None
        """Whoever waits for the outstanding turn's answer (None: no turn is outstanding)."""
        self._timeout = 0.0
        self._started = 0.0
        self._failure: Answer | None = None
        self._deadline: Deadline | None = None
        """The turn deadline, re-armed turn after turn (one event-loop timer per deadline length, not per turn)."""
        self._lag: LoopLag | None = None
        self._turn_msg: Outgoing = b""
        """The bytes of the Turn being asked: only its own write completion starts its clock."""

    async def start(self, match: MatchInfo) -> Answer | None:
        self.match_id = match.match_id
        self.session.seat = self
        if self.session.closed.is_set():
            return Answer(
                None,
                0.0,
                Termination.DISCONNECT,
                f"was disconnected before the match: {self.session.close_reason}",
            )
        self.session.send_nowait(bs.ServerMessage(match_started=match_info_to_proto(match)))
        return None

    def ask_then(
        self, turn: Turn, moves: Sequence[PublicMove], timeout: float, on_answer: Callable[[Answer], None]
    ) -> None:
        if self._failure is not None:
            on_answer(self._failure)
            return
        self.last_turn_args = (turn, moves)
        self.ask_wire(turn.turn_id, server_message_turn(turn, moves), timeout, on_answer)

    def ask_wire(self, turn_id: int, msg: bytes, timeout: float, on_answer: Callable[[Answer], None]) -> None:
        """:meth:`ask_then` for a Turn already written as its ``ServerMessage`` bytes (``server_message_turn``).

        A worker relaying the seat of a match another worker referees gets the Turn as those bytes
        (:mod:`arena_server.seats.peer`); it never builds the Turn object, and keeps no
        ``last_turn_args`` (the refereeing worker reports failures).
        """
        if self._failure is not None:
            on_answer(self._failure)
            return
        lag = self._lag
        if lag is None:  # watched from the first turn to the end of the match (see end)
            lag = self._lag = LoopLag.of(asyncio.get_running_loop())
            lag.acquire()
        self._on_answer = on_answer
        self._timeout = timeout
        self._expected = turn_id
        self._issued.add(turn_id)
        self._turn_msg = msg
        self._started = perf_counter()
        # Started here when the stream is idle, but owned by the session: an abort never cuts it in half;
        # a bot that does not read is disconnected by the write deadline.
        self.session.send_nowait(msg, self._written)

    def cancel_ask(self) -> None:
        if self._on_answer is not None:
            self._on_answer = None
            self._end_turn()

    def _answer(self, answer: Answer) -> None:
        """The outstanding turn's answer (or failure): the turn ends, and whoever asked hears it."""
        on_answer = self._on_answer
        if on_answer is not None:
            self._on_answer = None
            self._end_turn()
            on_answer(answer)

    def _end_turn(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._expected = 0

    def _written(self, msg: Outgoing) -> None:
        """A Turn is on the stream: the bot's clock starts, and counts only while the loop is responsive."""
        if msg is not self._turn_msg or self._on_answer is None:
            return  # an earlier turn's write (the bot answered it first), or the turn already ended
        session = self.session
        session.owed_turn = self._expected
        self._started = perf_counter()
        deadline = self._deadline
        if deadline is None:
            self._deadline = self._lag.deadline(self._timeout, self._expire)  # type: ignore[union-attr]
        else:
            deadline.restart(self._timeout, self._expire)

    def _expire(self) -> None:
        if self._on_answer is not None:
            self._answer(
                Answer(
                    None,
                    perf_counter() - self._started,
                    Termination.TIMEOUT,
                    f"did not answer turn {self._expected} within {self._timeout:.3f}s",
                )
            )

    def on_action(self, action: WireAction) -> None:
        match_id = action.match_id
        if match_id != self.match_id and match_id in self.session.past_matches:
            # An answer that crossed the end of the bot's previous match: late, not a violation.
            self.session.send_nowait(
                bs.ServerMessage(
                    error=bs.Error(
                        code=bs.ERROR_CODE_STALE_TURN,
                        message=f"match {action.match_id!r} is over; your action for its turn {action.turn_id} "
                        "was dropped",
                        match_id=action.match_id,
                        turn_id=action.turn_id,
                    )
                )
            )
            return
        if self._on_answer is not None and action.turn_id == self._expected and match_id == self.match_id:
            # A stall of the server's loop just before this read is not the bot's time.
            started = self._started
            read = perf_counter()
            lag: LoopLag = self._lag  # type: ignore[assignment]
            stalls = lag.stalls
            if read - lag.last_tick > lag.LATE or (stalls and stalls[-1][1] >= read - lag.RECENT):
                read = lag.arrival(started, read)  # (otherwise no stall can have delayed this read)
            self._answer(Answer(action.action, read - started))
            return
        if action.match_id == self.match_id and action.turn_id in self._issued:
            self.session.send_nowait(
                bs.ServerMessage(
                    error=bs.Error(
                        code=bs.ERROR_CODE_STALE_TURN,
                        message=f"turn {action.turn_id} already ended; your action {action.action} was dropped",
                        match_id=action.match_id,
                        turn_id=action.turn_id,
                    )
                )
            )
            return
        expected = f"turn {self._expected}" if self._expected else "no action (it is not your turn)"
        self.fail(
            Termination.PROTOCOL_ERROR,
            f"sent an action for match {action.match_id!r} turn {action.turn_id}, a turn it was never given "
            f"(expected {expected} of match {self.match_id!r})",
        )

    def on_resign(self, reason: str) -> None:
        self.fail(Termination.RESIGN, "resigned" + (f": {reason}" if reason else ""))

    def session_lost(self, reason: str) -> None:
        self.fail(Termination.DISCONNECT, f"disconnected ({reason})")

    def fail(self, termination: Termination, reason: str) -> None:
        """End this seat's participation; the referee sees it at the current or next turn."""
        if self._failure is None:
            self._failure = Answer(None, 0.0, termination, reason)
        if self._on_answer is not None:
            self._answer(Answer(None, perf_counter() - self._started, termination, reason))

    def update(self, update: Update) -> None:
        if self._failure is None:
            self.session.send_nowait(bs.ServerMessage(update=update_to_proto(update)))

    async def end(self, result: MatchResult) -> None:
        """Write MatchEnded and wait (at most END_NOTICE_TIMEOUT) until it is on the stream; never cut short."""
        try:
            # Queued at once; the session owns the write, so cancelling this wait never cuts it short.
            self.session.send_nowait(bs.ServerMessage(match_ended=result_to_proto(result)))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(END_NOTICE_TIMEOUT):
                    await self.session.drained()
        finally:
            if self._deadline is not None:
                self._deadline.close()
            if self._lag is not None:
                self._lag.release()
            self.session.past_matches.append(self.match_id)
            if self.session.seat is self:
                self.session.seat = None
