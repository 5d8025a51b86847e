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
public updates, the match's start and end, and back the :class:`Answer`. The
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
import contextlib
import os
import pickle
import struct
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from arena_client.types import MatchInfo, MatchResult, PublicMove, SeatInfo, Termination, Turn, Update
from arena_server.referee.answer import Answer
from arena_server.referee.seat import Seat

RELAY_SOCKET = "relay-{index}.sock"
"""The socket on which worker ``index`` relays its connected bots' seats, in the store writer's directory."""
RELAY_GRACE = 2.0
"""Seconds past a turn's deadline after which a relayed turn with no answer counts as a disconnect
(the relaying worker enforces the deadline itself; this only catches that worker being stuck or gone)."""
END_WAIT = 7.0
"""Seconds :meth:`PeerSeat.end` waits for the relaying worker to have told the bot the end."""
_HEADER = struct.Struct("!I")


def relay_path(socket_dir: str, index: int) -> str:
    """The relay socket of worker ``index``."""
    return os.path.join(socket_dir, RELAY_SOCKET.format(index=index))


def frame(message: object) -> bytes:
    """One length-prefixed pickled message (only this server's processes can reach a relay socket)."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """Read one :func:`frame` (raises ``IncompleteReadError`` at the end of the stream)."""
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return pickle.loads(await reader.readexactly(size))


def pack_answer(answer: Answer | None) -> tuple[Any, ...] | None:
    """An :class:`Answer` as plain values (it is a compiled class)."""
    return None if answer is None else (answer.action, answer.elapsed, answer.failure, answer.reason)


def unpack_answer(values: tuple[Any, ...] | None) -> Answer | None:
    return None if values is None else Answer(*values)


class RelayRefused(Exception):
    """The bot's worker could not seat it (gone, or that worker cannot be reached); the message says why."""


class RelayBusy(RelayRefused):
    """The bot plays another match, and the claim was not to wait (:meth:`PeerSeat.claim` with ``wait=False``)."""


class PeerSeat(Seat):
    """A seat played by a remote bot connected to another worker, through that worker's relay.

    Args:
        socket_dir: The directory of the workers' relay sockets.
        bot: The bot as the directory holds it (``arena_server.store.writer.Connected``: its worker's index).
        info: The seat.
    """

    def __init__(self, socket_dir: str, bot: Any, info: SeatInfo) -> None:
        super().__init__(info)
        self.path = relay_path(socket_dir, bot.worker)
        self.worker = int(bot.worker)
        self.last_turn_args: tuple[Turn, Sequence[PublicMove]] | None = None
        """The last Turn asked and its moves (a failure report shows the Turn the bot got)."""
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pump: asyncio.Task[None] | None = None
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
        """
        name = self.info.bot_name
        try:
            self._reader, self._writer = await asyncio.open_unix_connection(self.path)
            self._writer.write(frame(("claim", name, wait)))
            while True:
                reply = await read_frame(self._reader)
                if reply[0] == "queued":
                    if on_queued is not None:
                        await on_queued(name, int(reply[1]))
                elif reply[0] == "claimed":
                    break
                elif reply[0] == "busy":
                    raise RelayBusy(str(reply[1]))
                else:
                    raise RelayRefused(str(reply[1]))
        except (OSError, asyncio.IncompleteReadError) as exc:
            await self.close()
            raise RelayRefused(
                f"{name!r} is connected to worker {self.worker}, which could not be reached ({exc!r}); try again"
            ) from None
        except BaseException:
            await self.close()
            raise
        self._pump = asyncio.ensure_future(self._receive())

    async def _receive(self) -> None:
        reason = f"worker {self.worker}, which holds its connection, stopped relaying its seat"
        assert self._reader is not None
        try:
            while True:
                message = await read_frame(self._reader)
                kind = message[0]
                if kind == "answer":
                    if self._on_answer is not None and message[1] == self._turn_id:
                        self._answer(unpack_answer(message[2]))  # type: ignore[arg-type]
                elif kind == "started":
                    if self._started is not None and not self._started.done():
                        self._started.set_result(unpack_answer(message[1]))
                elif kind == "ended":
                    if self._ended is not None and not self._ended.done():
                        self._ended.set_result(None)
                    return
        except (OSError, asyncio.IncompleteReadError, pickle.UnpicklingError):
            pass
        self._lost(reason)

    def _lost(self, reason: str) -> None:
        failure = Answer(None, 0.0, Termination.DISCONNECT, f"disconnected ({reason})")
        if self._failure is None:
            self._failure = failure
        for waiter in (self._started, self._ended):
            if waiter is not None and not waiter.done():
                waiter.set_result(failure if waiter is self._started else None)  # type: ignore[arg-type]
        if self._on_answer is not None:
            self._answer(failure)

    def _send(self, message: object) -> bool:
        writer = self._writer
        if writer is None or writer.is_closing():
            return False
        writer.write(frame(message))
        return True

    # -- the seat interface -----------------------------------------------------------------------

    async def start(self, match: MatchInfo) -> Answer | None:
        self._started = asyncio.get_running_loop().create_future()
        if self._failure is not None:
            return self._failure
        if not self._send(("start", match, self.info)):
            return Answer(None, 0.0, Termination.DISCONNECT, f"disconnected (worker {self.worker} is gone)")
        return await self._started

    def ask_then(
        self, turn: Turn, moves: Sequence[PublicMove], timeout: float, on_answer: Callable[[Answer], None]
    ) -> None:
        if self._failure is not None:
            on_answer(self._failure)
            return
        self._on_answer = on_answer
        self._turn_id = turn.turn_id
        self._timeout = timeout
        self.last_turn_args = (turn, moves)
        self._send(("ask", turn, tuple(moves), timeout))
        self._guard = asyncio.get_running_loop().call_later(timeout + RELAY_GRACE, self._stuck)

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
        if self._guard is not None:
            self._guard.cancel()
            self._guard = None
        if on_answer is not None:
            on_answer(answer)

    def cancel_ask(self) -> None:
        if self._on_answer is not None:
            self._on_answer = None
            if self._guard is not None:
                self._guard.cancel()
                self._guard = None
            self._send(("cancel",))

    def update(self, update: Update) -> None:
        if self._failure is None:
            self._send(("update", update))

    async def end(self, result: MatchResult) -> None:
        """Have the bot's worker tell it the end (waits at most :data:`END_WAIT`), then let the bot go."""
        self._ended = asyncio.get_running_loop().create_future()
        try:
            if self._send(("end", result)):
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(END_WAIT):
                        await self._ended
        finally:
            await self.close()

    async def close(self) -> None:
        """Close the relay (the bot's worker lets the bot go); safe to call more than once."""
        if self._guard is not None:
            self._guard.cancel()
            self._guard = None
        pump, self._pump = self._pump, None
        if pump is not None and not pump.done():
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError, ConnectionError):
                await writer.wait_closed()
