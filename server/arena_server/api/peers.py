"""Following a match that another worker process runs (``arena serve --workers N``).

The kernel hands each connection to one worker, so a spectator's ``WatchMatch``
(and, in the main process, the web interface's live view) often reaches a
process that does not run the match. Each worker therefore also serves its
gRPC services on a private Unix socket (:func:`peer_address`, in the store
writer's directory), and the store writer notes which worker started each
match until it ends (``StoreWriter.owners``). A process asked for a match it
does not run looks the owner up and relays that worker's own ``WatchMatch``:
the public moves and the spectator observation as they happen. The header and
the final record come from the database, where the match's start is written
before it plays and its end is committed before anyone hears of it.

:class:`Peers` gives the hub what it needs for that
(``Hub.watch`` asks :meth:`Peers.owner` and follows :meth:`Peers.watch`), so the
hub itself stays free of gRPC.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import pickle
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from typing import Any

import grpc

from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client.convert import moves_from_proto, observation_from_proto
from arena_client.types import MatchInfo, MatchResult, SeatInfo
from arena_server.matches.hub import STOPPING, Hub, HubError
from arena_server.referee.answer import Answer
from arena_server.seats.peer import ASK, TURN, Frames, answer_message, pack_answer, pickled
from arena_server.seats.remote import RemoteSeat, RemoteSession
from arena_server.store.database import Store, StoreError
from arena_server.store.writer import Connected

PEER_SOCKET = "worker-{index}.sock"
"""The private socket of worker ``index``, in the directory of the store writer's socket."""


def peer_address(socket_dir: str, index: int) -> str:
    """The gRPC address of worker ``index``'s private socket (``unix:...``)."""
    return "unix:" + os.path.join(socket_dir, PEER_SOCKET.format(index=index))


class Peers:
    """The workers of this server, as a process that may be asked about their matches sees them.

    Args:
        socket_dir: The directory of the workers' private sockets.
        locate: The index of the worker running a match, or None (a stored or unknown match).
        me: This process's own worker index (None in the main process, which runs no match).
        running: The ids of the matches the workers run now, when this process can know them
            (the main process, which holds the writer), for the web interface's list.
        next_match: Wait for the next match of a game that a worker other than the one given starts
            (the store writer hears of every start); its id.
        directory: The remote bots connected to every worker, by name (the writer's directory, or a
            worker's copy of it kept by the writer's notices).
        claim: Add a bot to the directory (a worker, before it welcomes the bot); None, or the name it
            collides with.
        release: Take a session's name out of the directory (a worker, when the bot's stream ends).
        move: Mark a session's name as on its way to another worker (a worker, when it redirects the bot).
        port: This worker's own port, offered to the bots of other workers that follow redirects.
    """

    def __init__(
        self,
        socket_dir: str,
        locate: Callable[[str], Awaitable[int | None]],
        me: int | None = None,
        running: Callable[[], list[str]] | None = None,
        next_match: Callable[[str, int | None], Awaitable[str]] | None = None,
        directory: Mapping[str, Connected] | None = None,
        claim: Callable[[Connected], Awaitable[str | None]] | None = None,
        release: Callable[[str, str], Awaitable[None]] | None = None,
        move: Callable[[str, str, int], Awaitable[None]] | None = None,
        port: int = 0,
    ) -> None:
        self.socket_dir = socket_dir
        self._locate = locate
        self.me = me
        self._running = running
        self._next = next_match
        self.directory: Mapping[str, Connected] = {} if directory is None else directory
        self._claim = claim
        self._release = release
        self._move = move
        self.port = port
        """This worker's own port (0: none), where a bot that follows redirects is moved to play a match here."""

    def elsewhere(self, name: str) -> Connected | None:
        """The remote bot connected under ``name`` to another worker than this one (None: none is)."""
        bot = self.directory.get(name)
        return None if bot is None or bot.worker == self.me else bot

    def connected(self, name: str) -> bool:
        """Whether a remote bot is connected under ``name`` to any worker (or on its way to one)."""
        return name in self.directory

    def moving(self, name: str) -> bool:
        """Whether the remote bot ``name`` was redirected and has not reconnected yet (``Connected.moving``)."""
        bot = self.directory.get(name)
        return bot is not None and bot.moving

    async def claim(
        self, name: str, games: tuple[str, ...], guest: bool, key: str, redirects: bool = False
    ) -> str | None:
        """Claim ``name`` for a session of this worker; None, or the connected bot's name it collides with."""
        if self._claim is None or self.me is None:
            return None
        return await self._claim(Connected(name, self.me, games, guest, key, redirects))

    async def release(self, name: str, key: str) -> None:
        """Give up session ``key``'s claim on ``name`` (its stream ended); quietly when the writer is gone."""
        if self._release is None:
            return
        with contextlib.suppress(StoreError):  # (the server is stopping: the directory goes with the writer)
            await self._release(name, key)

    async def move(self, name: str, key: str, worker: int) -> bool:
        """Mark session ``key``'s ``name`` as on its way to ``worker``; False when there is no directory to tell
        (a one-process server, or the writer is gone: the server is stopping)."""
        if self._move is None:
            return False
        try:
            await self._move(name, key, worker)
        except StoreError:
            return False
        return True

    def running_ids(self) -> list[str]:
        """The matches the workers run now (in no order); empty where this process cannot know."""
        return [] if self._running is None else self._running()

    async def owner(self, match_id: str) -> int | None:
        """The index of the worker that runs ``match_id`` (this one's own included); None when none does."""
        try:
            return await self._locate(match_id)
        except Exception:  # (the writer is gone: the server is stopping; the match is followed from the store)
            return None

    async def next_match(self, game: str) -> str:
        """The id of the next match of ``game`` that another worker starts (this one's own are the hub's)."""
        if self._next is None:
            raise HubError("unknown_match", "this process cannot hear of the other workers' matches")
        try:
            return await self._next(game, self.me)
        except StoreError as exc:
            raise HubError("stopping", f"the server is shutting down ({exc}); try again when it is back") from None

    async def watch(self, index: int, match_id: str, store: Store | None) -> AsyncIterator[tuple[str, Any]]:
        """``Hub.watch``'s events for ``match_id``, which worker ``index`` runs: its own feed, relayed.

        The header and the end come from ``store`` (the end is committed before the worker sends it);
        a relay that breaks ends with ``("dropped", reason)``.
        """
        started = False
        try:
            async with grpc.aio.insecure_channel(peer_address(self.socket_dir, index)) as channel:
                stub = mp_grpc.MatchServiceStub(channel)
                async for event in stub.WatchMatch(mp.WatchMatchRequest(match_id=match_id)):
                    kind = event.WhichOneof("kind")
                    if kind == "started":
                        record = await store.get_match(match_id, with_moves=False) if store is not None else None
                        if record is None:
                            yield "dropped", f"match {match_id} is running on worker {index} but is not in the database"
                            return
                        started = True
                        yield "started", record
                    elif kind == "update":
                        update = event.update
                        yield "moves", (moves_from_proto(update.moves), observation_from_proto(update.observation))
                    elif kind == "ended":
                        record = await store.get_match(match_id) if store is not None else None
                        if record is not None and record.termination is not None:
                            yield "ended", record
                        return
        except grpc.aio.AioRpcError as exc:
            where = f"worker {index}, which runs match {match_id}"
            if not started and exc.code() == grpc.StatusCode.NOT_FOUND:
                return  # it ended meanwhile: Hub.watch falls back on the store
            yield "dropped", f"lost the feed from {where}: {exc.details() or exc.code().name}; reload to follow it"


async def serve_relay(hub: Hub, path: str) -> asyncio.AbstractServer:
    """Relay the seats of the bots connected here that other workers' matches seat (:class:`PeerSeat`).

    One connection per relayed seat: the other worker claims the bot, then forwards the seat interface's
    calls, which a real :class:`RemoteSeat` on the bot's session carries out here (:class:`_Relay`).
    """
    loop = asyncio.get_running_loop()
    return await loop.create_unix_server(lambda: _Relay(hub).frames, path=path)


class _Relay:
    """One relayed seat, on the worker its bot is connected to.

    Each message is handled in the socket's read callback (a Turn goes to the bot's stream in that
    same step). The few steps that await (the claim, which may queue behind the bot's running match;
    the start; the end) run as a task, and messages that arrive meanwhile wait for it, in order.
    """

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.frames = Frames(self._received, self._lost)
        self.session: RemoteSession | None = None
        self.seat: RemoteSeat | None = None
        self.locked = False
        self.ended = False
        self.gone = False
        self._step: asyncio.Task[None] | None = None
        self._waiting: collections.deque[bytes] = collections.deque()

    def _received(self, message: bytes) -> None:
        if self._step is not None:
            self._waiting.append(message)
        else:
            self._handle(message)

    def _handle(self, message: bytes) -> None:
        seat = self.seat
        if message[:1] == TURN:
            if seat is not None:
                turn_id, timeout = ASK.unpack_from(message, 1)
                seat.ask_wire(turn_id, message[1 + ASK.size :], timeout, self._answering(turn_id))
            return
        request = pickle.loads(message[1:])
        op = request[0]
        if op == "update" and seat is not None:
            seat.update(request[1])
        elif op == "cancel" and seat is not None:
            seat.cancel_ask()
        elif op == "claim":
            self._run(self._claim(*request[1:]))
        elif op == "start":
            self._run(self._start(request[1], request[2]))
        elif op == "end" and seat is not None:
            self._run(self._end(seat, request[1]))

    def _answering(self, turn_id: int) -> Callable[[Answer], None]:
        """The seat's ``on_answer`` for turn ``turn_id``: the answer goes back to the refereeing worker."""
        frames = self.frames

        def answered(answer: Answer) -> None:
            frames.send(answer_message(turn_id, answer))

        return answered

    def _run(self, step: Coroutine[Any, Any, None]) -> None:
        self._step = task = asyncio.ensure_future(step)
        task.add_done_callback(self._stepped)

    def _stepped(self, task: asyncio.Task[None]) -> None:
        self._step = None
        if not task.cancelled() and task.exception() is not None:
            print(f"arena: a relayed seat failed: {task.exception()!r}", file=sys.stderr, flush=True)
            self.frames.close()
            return
        while self._waiting and self._step is None:
            self._handle(self._waiting.popleft())

    async def _claim(self, name: str, wait: bool, port: int = 0, worker: int = -1) -> None:
        """Take the bot for the other worker's match; with its ``port``, move the bot there if it can be."""
        if self.hub.stopping:  # (that worker's match would be aborted at once: it stops too)
            return self._last("refused", STOPPING)
        if name not in self.hub.sessions:
            await self.hub.arrivals([name])  # (on its way here: another match moved it a moment ago)
        session = self.hub.sessions.get(name)
        peers = self.hub.peers
        if (session is None or session.is_closed) and peers is not None and peers.elsewhere(name) is not None:
            return self._last("moved")  # (another match moved it to another worker: ask there)
        if session is None or session.is_closed:
            return self._last("refused", f"{name!r} is no longer connected; it must connect again to be seated")
        if port and await self.hub.redirect_bot(name, port, worker, "its next match is refereed there") == "moved":
            return self._last("moved")
        if session.busy.locked() and not wait:
            return self._last("busy", f"{name!r} is playing another match")
        await session.take(self._queued)
        self.session = session
        self.locked = True
        if self.gone:  # (the refereeing worker gave up while this waited)
            self._release()
            return
        self.frames.send(pickled(("claimed",)))

    def _last(self, *reply: Any) -> None:
        """Send a claim's final ``reply`` (a refusal, or ``moved``) and close the relay: no seat is taken."""
        self.frames.send(pickled(reply))
        self.frames.close()

    async def _queued(self, position: int) -> None:
        """The bot plays another match: the refereeing worker hears its place in the bot's queue."""
        self.frames.send(pickled(("queued", position)))

    async def _start(self, match: MatchInfo, info: SeatInfo) -> None:
        if self.session is None:
            return
        self.seat = seat = RemoteSeat(self.session, info)
        self.frames.send(pickled(("started", pack_answer(await seat.start(match)))))

    async def _end(self, seat: RemoteSeat, result: MatchResult) -> None:
        self.ended = True
        await seat.end(result)  # (the bot is told the end, within END_NOTICE_TIMEOUT)
        self.frames.send(pickled(("ended",)))
        self._release()

    def _lost(self, _reason: str) -> None:
        """The refereeing worker closed the relay (the match is over there, or that worker is gone)."""
        self.gone = True
        seat = self.seat
        if seat is not None and not self.ended:  # (no end came: the bot's next match starts afresh)
            seat.cancel_ask()
            if self.session is not None and self.session.seat is seat:
                self.session.seat = None
        if self._step is not None and not self.locked:
            self._step.cancel()  # (a claim still waiting for the bot)
        if not self.ended:
            self._release()

    def _release(self) -> None:
        if self.locked and self.session is not None:
            self.locked = False
            self.session.busy.release()
