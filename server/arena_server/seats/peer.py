"""A seat whose bot is connected to another worker process (``arena serve --workers N``).

The kernel hands each connection to one worker, so the two bots of a challenge
or of a ``CreateMatch`` can sit on different workers. The worker that starts
the match referees it; for a bot connected elsewhere it seats a
:class:`PeerSeat`, which asks the bot's own worker to carry each call of the
seat interface to a real :class:`~arena_server.seats.remote.RemoteSeat` there
(:func:`arena_server.api.peers.serve_relay`), over that worker's private Unix
socket (:func:`relay_path`, in the store writer's directory, which only this
server's processes can open).

What crosses the socket is what the seat interface carries: the bot's own
Turn (already redacted for its seat by the referee, as for any seat), the
public updates, the match's start and end, and back the :class:`Answer`. A
Turn crosses as the very ``ServerMessage`` bytes the bot will read
(``server_message_turn``, written once, here), which the relaying worker's
seat writes to the bot's stream as they are (``RemoteSeat.ask_wire``); the
rest is pickled. Both ends read the socket in an :class:`asyncio.Protocol`
(:class:`Frames`) and handle each message in the read's own callback, with no
task woken for it. The
bot's clock runs where its stream is: the relaying worker's ``RemoteSeat``
starts it when the Turn is on the bot's stream and stops it when the Action is
read, so the hop between the workers is never the bot's time. This side only
guards against a relaying worker that vanishes: a turn not answered
:data:`RELAY_GRACE` seconds after its deadline, or a socket that closes, is a
disconnect.

Before the match is recorded, :meth:`PeerSeat.claim` takes the bot's
one-match-at-a-time lock on its worker (queueing behind its running match, as
a local bot would), and the relay lets it go when the socket closes, however
the match ended.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import struct
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from arena_client.types import MatchInfo, MatchResult, PublicMove, SeatInfo, Termination, Turn, Update
from arena_server.referee.answer import Answer
from arena_server.referee.seat import Seat
from arena_server.seats.turn_wire import server_message_turn

RELAY_SOCKET = "relay-{index}.sock"
"""The socket on which worker ``index`` relays its connected bots' seats, in the store writer's directory."""
RELAY_GRACE = 2.0
"""Seconds past a turn's deadline after which a relayed turn with no answer counts as a disconnect
(the relaying worker enforces the deadline itself; this only catches that worker being stuck or gone)."""
END_WAIT = 7.0
"""Seconds :meth:`PeerSeat.end` waits for the relaying worker to have told the bot the end."""
_HEADER = struct.Struct("!I")
ASK = struct.Struct("!Id")
"""A relayed Turn's head, after its kind byte ``T``: the turn id and the seconds the bot has for it."""
TURN = b"T"
"""A Turn to relay: :data:`ASK`, then the ``ServerMessage`` bytes the bot gets."""
ANSWER = b"A"
"""A relayed answer: the pickled ``(turn_id, pack_answer(answer))``."""
OTHER = b"P"
"""Anything else (claims, the start and end, updates, cancels and their replies): a pickled tuple."""


def relay_path(socket_dir: str, index: int) -> str:
    """The relay socket of worker ``index``."""
    return os.path.join(socket_dir, RELAY_SOCKET.format(index=index))


def pickled(message: tuple[Any, ...]) -> bytes:
    """An :data:`OTHER` message (only this server's processes can reach a relay socket)."""
    return OTHER + pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def answer_message(turn_id: int, answer: Answer) -> bytes:
    """An :data:`ANSWER` message: the relaying worker's answer to turn ``turn_id``."""
    return ANSWER + pickle.dumps((turn_id, pack_answer(answer)), protocol=pickle.HIGHEST_PROTOCOL)


def pack_answer(answer: Answer | None) -> tuple[Any, ...] | None:
    """An :class:`Answer` as plain values (it is a compiled class)."""
    return None if answer is None else (answer.action, answer.elapsed, answer.failure, answer.reason)


def unpack_answer(values: tuple[Any, ...] | None) -> Answer | None:
    return None if values is None else Answer(*values)


class Frames(asyncio.Protocol):
    """Length-prefixed messages on a relay socket, each handed to ``on_message`` in the read's callback.

    Args:
        on_message: Called with each whole message's bytes, in order.
        on_lost: Called once, with a reason, when the connection is gone.
    """

    def __init__(self, on_message: Callable[[bytes], None], on_lost: Callable[[str], None]) -> None:
        self.on_message = on_message
        self.on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        while len(buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(buffer)
            end = _HEADER.size + size
            if len(buffer) < end:
                return
            message = bytes(buffer[_HEADER.size : end])
            del buffer[:end]
            self.on_message(message)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.on_lost("the connection closed" if exc is None else repr(exc))

    def send(self, message: bytes) -> bool:
        """Write one message; False when the connection is gone."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return False
        transport.write(_HEADER.pack(len(message)) + message)
        return True

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class RelayRefused(Exception):
    """The bot's worker could not seat it (gone, or that worker cannot be reached); the message says why."""


class RelayBusy(RelayRefused):
    """The bot plays another match, and the claim was not to wait (:meth:`PeerSeat.claim` with ``wait=False``)."""


class RelayMoved(Exception):
    """The bot left its worker: redirected here (the claim offered this worker's port), or by another match."""


class PeerSeat(Seat):
    """A seat played by a remote bot connected to another worker, through that worker's relay.

    Args:
        socket_dir: The directory of the workers' relay sockets.
        bot: The bot as the directory holds it (``arena_server.store.writer.Connected``: its worker's index).
        info: The seat.
        here: ``(port, index)`` of this worker, to offer a bot that follows redirects: if it is idle, its
            worker moves it here instead of relaying it, and :meth:`claim` raises :class:`RelayMoved`.
    """

    def __init__(self, socket_dir: str, bot: Any, info: SeatInfo, here: tuple[int, int] | None = None) -> None:
        super().__init__(info)
        self.here = here
        self.path = relay_path(socket_dir, bot.worker)
        self.worker = int(bot.worker)
        self.last_turn_args: tuple[Turn, Sequence[PublicMove]] | None = None
        """The last Turn asked and its moves (a failure report shows the Turn the bot got)."""
        self._frames: Frames | None = None
        self._claim_replies: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self._started: asyncio.Future[Answer | None] | None = None
        self._ended: asyncio.Future[None] | None = None
        self._on_answer: Callable[[Answer], None] | None = None
        self._turn_id = 0
        self._timeout = 0.0
        self._guard: asyncio.TimerHandle | None = None
        self._failure: Answer | None = None

    # -- before the match -------------------------------------------------------------------------

    async def claim(self, on_queued: Callable[[str, int], Awaitable[None]] | None = None, wait: bool = True) -> None:
        """Take the bot for this match on its worker, waiting while it plays another (unless not ``wait``).

        Raises:
            RelayBusy: the bot plays another match and ``wait`` is False.
            RelayRefused: the bot left, or its worker cannot be reached.
            RelayMoved: the bot left that worker: sent to ``here``, or elsewhere by another match.
        """
        name = self.info.bot_name
        loop = asyncio.get_running_loop()
        try:
            _transport, self._frames = await loop.create_unix_connection(
                lambda: Frames(self._received, self._lost), self.path
            )
        except OSError as exc:
            raise RelayRefused(
                f"{name!r} is connected to worker {self.worker}, which could not be reached ({exc}); try again"
            ) from None
        try:
            self._frames.send(pickled(("claim", name, wait, *(self.here or ()))))
            while True:
                reply = await self._claim_replies.get()
                if reply[0] == "queued":
                    if on_queued is not None:
                        await on_queued(name, int(reply[1]))
                elif reply[0] == "claimed":
                    return
                elif reply[0] == "busy":
                    raise RelayBusy(str(reply[1]))
                elif reply[0] == "moved":
                    raise RelayMoved(f"{name!r} left worker {self.worker} for another")
                else:
                    raise RelayRefused(str(reply[1]))
        except BaseException:
            await self.close()
            raise

    def _received(self, message: bytes) -> None:
        kind = message[:1]
        if kind == ANSWER:
            turn_id, values = pickle.loads(message[1:])
            if self._on_answer is not None and turn_id == self._turn_id:
                self._answer(unpack_answer(values))  # type: ignore[arg-type]
            return
        reply = pickle.loads(message[1:])
        if reply[0] == "started":
            if self._started is not None and not self._started.done():
                self._started.set_result(unpack_answer(reply[1]))
        elif reply[0] == "ended":
            if self._ended is not None and not self._ended.done():
                self._ended.set_result(None)
        else:  # (the claim's replies)
            self._claim_replies.put_nowait(reply)

    def _lost(self, reason: str) -> None:
        why = f"worker {self.worker}, which holds its connection, stopped relaying its seat ({reason})"
        failure = Answer(None, 0.0, Termination.DISCONNECT, f"disconnected ({why})")
        if self._failure is None:
            self._failure = failure
        self._claim_replies.put_nowait(("refused", f"{self.info.bot_name!r} could not be seated: {why}"))
        if self._started is not None and not self._started.done():
            self._started.set_result(failure)
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(None)
        if self._on_answer is not None:
            self._answer(failure)

    def _send(self, message: bytes) -> bool:
        return self._frames is not None and self._frames.send(message)

    # -- the seat interface -----------------------------------------------------------------------

    async def start(self, match: MatchInfo) -> Answer | None:
        self._started = asyncio.get_running_loop().create_future()
        if self._failure is not None:
            return self._failure
        if not self._send(pickled(("start", match, self.info))):
            return Answer(None, 0.0, Termination.DISCONNECT, f"disconnected (worker {self.worker} is gone)")
        return await self._started

    def ask_then(
        self, turn: Turn, moves: Sequence[PublicMove], timeout: float, on_answer: Callable[[Answer], None]
    ) -> None:
        if self._failure is not None:
            on_answer(self._failure)
            return
        self._on_answer = on_answer
        self._turn_id = turn_id = turn.turn_id
        self._timeout = timeout
        self.last_turn_args = (turn, moves)
        self._send(TURN + ASK.pack(turn_id, timeout) + server_message_turn(turn, moves))
        self._guard = asyncio.get_running_loop().call_later(timeout + RELAY_GRACE, self._stuck)

    def _unguard(self) -> None:
        """Forget the outstanding turn's guard timer (:meth:`_stuck`), if any."""
        if self._guard is not None:
            self._guard.cancel()
            self._guard = None

    def _stuck(self) -> None:
        self._guard = None
        if self._on_answer is not None:
            self._answer(
                Answer(
                    None,
                    self._timeout + RELAY_GRACE,
                    Termination.DISCONNECT,
                    f"disconnected (worker {self.worker}, which holds its connection, did not relay its answer to "
                    f"turn {self._turn_id})",
                )
            )

    def _answer(self, answer: Answer) -> None:
        on_answer = self._on_answer
        self._on_answer = None
        self._unguard()
        if on_answer is not None:
            on_answer(answer)

    def cancel_ask(self) -> None:
        if self._on_answer is not None:
            self._on_answer = None
            self._unguard()
            self._send(pickled(("cancel",)))

    def update(self, update: Update) -> None:
        if self._failure is None:
            self._send(pickled(("update", update)))

    async def end(self, result: MatchResult) -> None:
        """Have the bot's worker tell it the end (waits at most :data:`END_WAIT`), then let the bot go."""
        self._ended = asyncio.get_running_loop().create_future()
        try:
            if self._send(pickled(("end", result))):
                try:
                    async with asyncio.timeout(END_WAIT):
                        await self._ended
                except TimeoutError:
                    pass
        finally:
            await self.close()

    async def close(self) -> None:
        """Close the relay (the bot's worker lets the bot go); safe to call more than once."""
        self._unguard()
        frames, self._frames = self._frames, None
        if frames is not None:
            frames.close()
