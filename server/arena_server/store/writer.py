"""One store writer for many processes: worker processes send their writes to the process that owns the file.

With ``arena serve --workers N`` every worker process runs its own event loop,
hub and referee, and the main process is the only one that writes the SQLite
file. A worker's hub gets a :class:`WorkerStore`: it reads through its own
read-only connection to the same file (WAL lets readers run beside the
writer), and every write (a match starting, a match ending with its rating
change and failure report, a sealed seed revealed, a match's logs) travels to
the main process over a Unix socket as a pickled request. There
:class:`StoreWriter` carries it out and answers once committed: a thread of
the main process with its own connection to the file, which never goes
through the event loop (a request costs the main process one wake-up of that
thread and its SQL). A match's start and end travel as the rows the store
writes (:func:`~arena_server.store.database.start_rows`,
:func:`~arena_server.store.database.end_row`): plain values, the move list
already encoded by the worker, so the one writer neither unpickles records nor
compresses their moves. ``finish_match`` returns only after that answer, so
the hub tells the seats the end only after it is in the database:
commit-before-notify holds across the hop.

The ``extra`` hooks a hub passes are closures and cannot cross a process
boundary. The worker runs them against a :class:`_Journal`, a stand-in
connection that records the statements; the writer replays them in the same
transaction. Rating effects are the exception: they read the current ratings
inside the transaction (the Plackett-Luce update), so the journal drops them
and the writer derives them again from the record with
:func:`~arena_server.store.ratings.rating_change`, as a single-process hub
would.

The bot registry's writes (``RegisterBot``, ``SubmitBot``) read inside their
transaction: the look-alike check before the insert, the version quota and
the next version number. They are ops of their own (``insert_bot``,
``reserve_version``, ``verdict``) that run the functions of
:mod:`arena_server.store.bot_writes` inside the writer's transaction, so two
workers cannot both pass a check; a refusal comes back as the
:class:`~arena_server.store.bot_writes.BotWriteRefused` it was. Once such a
write is committed, the writer tells every worker (:data:`BotChange`, request
id :data:`NOTICE`), before it answers the one that asked: the workers then
evict guests under a newly registered name and reload the registry's
programs (:func:`arena_server.cli.workers.follow_bot_changes`).

The writer also keeps the server's one directory of connected remote bots
(:attr:`StoreWriter.connected`). A worker claims a bot's name before it
welcomes the bot (``claim``, refused when the name or a look-alike is
connected to any worker) and releases it when the stream ends (``release``,
and every name of a worker whose connection drops). Each change is sent to
every worker as a notice (:data:`Presence`), so a worker knows, without
asking, which bots the others have: names stay unique across the whole server,
a ``CreateMatch`` or a challenge can seat a bot connected to another worker
(:mod:`arena_server.seats.peer`), and the main process's web interface can say
whether a bot is connected.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import re
import selectors
import socket
import sqlite3
import struct
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any, NamedTuple

import aiosqlite

from arena_server.referee.records import MatchRecord, MoveLog
from arena_server.store import bot_writes
from arena_server.store.bot_writes import BotWriteRefused, NewBot, NewVersion, Verdict
from arena_server.store.database import (
    END_SQL,
    REVEAL_SQL,
    DoneExecution,
    Store,
    StoreError,
    end_row,
    group_commit,
    insert_start,
    reveal_row,
    run_now,
    start_rows,
)
from arena_server.store.names import name_key
from arena_server.store.ratings import is_ratable, rating_change

Hook = Callable[[aiosqlite.Connection], Awaitable[None]]

_HEADER = struct.Struct("!I")
NOTICE = 0
"""The request id of a message the writer sends unasked (a :data:`BotChange`); requests count from 1."""

BotChange = tuple[str, str]
"""What the writer tells every worker once a registry write is committed: ``("registered", name)`` (a
name was claimed: guests under it must go) or ``("programs", name)`` (``name`` has a new accepted
program: reload the registry's programs)."""


class Connected(NamedTuple):
    """A remote bot connected to one of the workers, as the writer's directory holds it."""

    name: str
    worker: int
    """The index of the worker its stream reached (its matches are refereed there or relayed to it)."""
    games: tuple[str, ...]
    """The games its Hello named (empty: any)."""
    guest: bool
    key: str
    """SHA-256 of its session's ``Welcome.session_token``: names this session (a release of an older session
    under the same name is ignored) and proves a ``CreateMatch`` that seats it (a guest's only proof)."""
    redirects: bool = False
    """Its Hello set ``follows_redirects``: the ladder may move it to the worker of its next match."""
    moving: bool = False
    """A Redirect sent it to ``worker`` and it has not reconnected there yet (``key`` is then
    :func:`moving_key` of its last session's). Whoever names it meanwhile waits for it
    (``Hub.arrivals``); a look-alike name stays taken."""


def moving_key(key: str) -> str:
    """The directory key of a bot on its way to another worker, from the key of the session it left."""
    return "moving:" + key


Presence = tuple[str, Any]
"""What the writer tells every worker when the directory changes: ``("online", Connected)`` or
``("offline", (name, key))``."""

_RATING_TABLES = frozenset({"rated_matches", "rating_pools", "ratings", "rating_pairs"})
"""Tables only a match's rating change writes; the writer derives those statements itself."""
_TARGET = re.compile(r"\s*(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|UPDATE|DELETE\s+FROM|REPLACE\s+INTO)\s+(\w+)", re.IGNORECASE)
"""The table a writing statement changes (reads do not match: the journal keeps only writes)."""


def framed(message: object) -> bytes:
    """One length-prefixed pickled message, as :func:`read_message` reads it."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


async def send_message(writer: asyncio.StreamWriter, message: object) -> None:
    """Write one length-prefixed pickled message."""
    writer.write(framed(message))
    await writer.drain()


async def read_message(reader: asyncio.StreamReader) -> Any:
    """Read one length-prefixed pickled message (raises ``IncompleteReadError`` at the end of the stream)."""
    header = await reader.readexactly(_HEADER.size)
    (size,) = _HEADER.unpack(header)
    return pickle.loads(await reader.readexactly(size))  # only our own processes reach the private socket


class _Journal:
    """A stand-in connection recording the statements a hook writes (rating statements left out)."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, bool, Any]] = []

    def _keep(self, sql: str) -> bool:
        target = _TARGET.match(sql)
        return target is not None and target.group(1).lower() not in _RATING_TABLES

    def execute(self, sql: str, parameters: Iterable[Any] = ()) -> DoneExecution:
        if self._keep(sql):
            self.statements.append((sql, False, tuple(parameters)))
        return DoneExecution()

    def executemany(self, sql: str, parameters: Iterable[Iterable[Any]]) -> DoneExecution:
        if self._keep(sql):
            self.statements.append((sql, True, [tuple(p) for p in parameters]))
        return DoneExecution()


async def _journal(hook: Hook | None) -> list[tuple[str, bool, Any]]:
    if hook is None:
        return []
    journal = _Journal()
    await hook(journal)  # type: ignore[arg-type]
    return journal.statements


class WorkerStore(Store):
    """A worker's store: reads on its own read-only connection, writes through the main process.

    Use :meth:`connect`; ``close`` ends both connections.
    """

    def __init__(
        self, conn: aiosqlite.Connection, path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        super().__init__(conn, path, None)
        self._reader = reader
        self._writer = writer
        self._next = 0
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self.lost = asyncio.Event()
        """Set when the main process (the writer) is gone: the worker must stop, nothing can be stored."""
        self.bot_changes: asyncio.Queue[BotChange] = asyncio.Queue()
        """What the writer committed to the bot registry, for every worker (this one's own writes included)."""
        self._closing = False
        """True once :meth:`close` began: a lost connection is then this worker's doing, not the writer's."""
        self._pump = asyncio.ensure_future(self._receive())
        self.index: int | None = None
        """This worker's index, once it announced it serves (the writer notes which worker runs each match)."""
        self.directory: dict[str, Connected] = {}
        """The remote bots connected to every worker (this one's included), kept by the writer's notices."""

    @classmethod
    async def connect(cls, path: str, socket_path: str) -> WorkerStore:  # type: ignore[override]
        """Open ``path`` read-only and connect to the writer listening on ``socket_path``.

        Raises:
            StoreError: the database or the writer cannot be reached.
        """
        try:
            conn = await aiosqlite.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {path} for reading: {exc}") from exc
        try:
            reader, writer = await asyncio.open_unix_connection(socket_path)
        except OSError as exc:
            await conn.close()
            raise StoreError(f"cannot reach the store writer at {socket_path}: {exc}") from exc
        return cls(conn, path, reader, writer)

    async def _receive(self) -> None:
        try:
            while True:
                request_id, ok, value = await read_message(self._reader)
                if request_id == NOTICE:
                    if value[0] == "online":
                        self.directory[value[1].name] = value[1]
                    elif value[0] == "offline":
                        name, key = value[1]
                        if name in self.directory and self.directory[name].key == key:
                            del self.directory[name]
                    else:
                        self.bot_changes.put_nowait(value)
                    continue
                waiter = self._waiting.pop(request_id, None)
                if waiter is not None and not waiter.done():
                    if ok:
                        waiter.set_result(value)
                    else:
                        waiter.set_exception(value if isinstance(value, BotWriteRefused) else StoreError(value))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            self.lost.set()
            problem = (
                "this worker closed its connection to the store writer (it is stopping)"
                if self._closing
                else "the main process (the store writer) closed the connection"
            )
            for waiter in self._waiting.values():
                if not waiter.done():
                    waiter.set_exception(StoreError(problem))
            self._waiting.clear()

    async def _call(self, op: str, *args: Any) -> Any:
        if self._pump.done():
            if self._closing:
                raise StoreError("this worker's store is closed (the worker is stopping); nothing more is recorded")
            raise StoreError("the main process (the store writer) is gone; the match cannot be recorded")
        self._next += 1
        request_id = self._next
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiter
        try:
            await send_message(self._writer, (request_id, op, args))
            return await waiter
        finally:
            self._waiting.pop(request_id, None)  # (answered, or no longer awaited: a late answer is dropped)

    async def start_match(self, record: MatchRecord) -> str:
        match_id = str(await self._call("start", start_rows(record), self.index))
        record.match_id = match_id
        return match_id

    async def finish_match(self, record: MatchRecord, extra: Hook | None = None) -> None:
        # The row is built here (the move list encoded by this worker); the record itself travels only
        # when the writer needs it for a rating change, and then without its moves.
        row = await end_row(record)
        rated = replace(record, moves=MoveLog()) if is_ratable(record) else None
        await self._call("finish", row, rated, await _journal(extra))

    async def reveal_seed(self, seed: str) -> None:
        await self._call("reveal", seed)

    async def run_in_transaction(self, work: Hook) -> None:
        await self._call("transaction", await _journal(work))

    async def insert_bot(self, bot: NewBot) -> int:
        return int(await self._call("insert_bot", bot))

    async def reserve_version(self, new: NewVersion) -> int:
        return int(await self._call("reserve_version", new))

    async def set_verdict(self, verdict: Verdict) -> None:
        await self._call("verdict", verdict)

    async def announce_ready(self, index: int, port: int = 0) -> None:
        """Tell the main process that worker ``index`` serves (it prints the address once all do).

        ``port`` is the worker's own port, where a redirected bot reconnects (0: none).
        """
        self.index = index
        connected: list[Connected] = await self._call("ready", index, port)
        # The directory as it stood when the writer read this; the notices after it come in order.
        self.directory.clear()
        self.directory.update((c.name, c) for c in connected)

    async def claim_name(self, bot: Connected) -> str | None:
        """Add ``bot`` to the server's directory; None, or the name of the connected bot it collides with.

        A name is taken when it, or a look-alike (:func:`~arena_server.store.names.name_key`), is connected
        to any worker under another session.
        """
        return await self._call("claim", bot)  # type: ignore[no-any-return]

    async def release_name(self, name: str, key: str) -> None:
        """Take session ``key``'s ``name`` out of the directory (nothing if another session holds it now)."""
        await self._call("release", name, key)

    async def move_name(self, name: str, key: str, worker: int) -> None:
        """Mark session ``key``'s ``name`` as on its way to ``worker`` (a Redirect): ``Connected.moving``.

        Its next claim (there, or anywhere it comes back to) replaces the entry; a release with
        :func:`moving_key` of ``key`` takes it out if it never comes. Nothing if another session holds the name.
        """
        await self._call("move", name, key, worker)

    async def next_started(self, game: str, worker: int | None) -> str:
        """The id of the next match of ``game`` that a worker other than ``worker`` starts (waits for it)."""
        return str(await self._call("next", game, worker))

    async def owner(self, match_id: str) -> int | None:
        """The index of the worker running ``match_id``; None when no worker runs it (stored, or unknown)."""
        return await self._call("owner", match_id)  # type: ignore[no-any-return]

    async def close(self) -> None:
        self._closing = True
        self._writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self._writer.wait_closed()
        self._pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._pump
        await self.conn.close()


class StoreWriter:
    """The one store writer: a thread of the main process, with its own connection to the file.

    It listens on a Unix socket, and carries out each worker's requests in the
    order they arrive, answering once committed; the requests it reads together
    commit as one transaction (:meth:`carry_out`).
    It touches no event loop: a request costs the main process one wake-up of
    this thread (and the SQL), not the several steps of a task, a hop to
    aiosqlite's thread and back, and a reply scheduled on the loop.

    Its connection is not the main :class:`Store`'s, so the two never share a
    transaction: SQLite's own lock orders their writes, and this thread waits
    (up to :attr:`busy_timeout` seconds) while the main process's connection
    holds a write transaction, as the refitter's. It never waits on the event
    loop, so a transaction of the loop that awaits the loop cannot deadlock
    with it.

    ``on_ready(index, port)`` is called **on this thread** when worker ``index``
    announces it serves, with its own port (use ``loop.call_soon_threadsafe`` in it).
    """

    busy_timeout = 60.0
    """Seconds a write waits for the main process's connection to end its transaction before it fails."""

    read_bytes = 1 << 16
    """The most one read takes from a worker's socket (the requests in it are carried out together)."""

    def __init__(self, path: str, socket_path: str, on_ready: Callable[[int, int], object] | None = None) -> None:
        self.path = path
        self.socket_path = socket_path
        self._on_ready = on_ready
        self._listener: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread: threading.Thread | None = None
        self.requests = 0
        """Requests carried out so far (for tests and benchmarks)."""
        self.commits = 0
        """Transactions committed so far: fewer than the requests that write when group commit took several."""
        self._next: dict[str, list[tuple[socket.socket, int, int | None]]] = {}
        """Game -> the workers' requests waiting for its next match that another worker starts
        (connection, request id, the asking worker's index): answered when one starts."""
        self.owners: dict[str, int] = {}
        """Match id -> the index of the worker that runs it, from its start to its end (spectators are sent there).

        Written by this thread only; the main process's event loop reads it (a dict read is atomic)."""
        self.notices: list[BotChange] = []
        """Registry changes committed and not yet sent to the workers (:meth:`carry_out` adds, the thread sends)."""
        self.connected: dict[str, Connected] = {}
        """Name -> the remote bot connected under it, on whichever worker (``claim`` and ``release``).

        Written by this thread only; the main process's event loop reads it (the web's "connected")."""
        self._claimed_on: dict[str, socket.socket] = {}
        """Name -> the connection of the worker that claimed it (its names go when that connection does)."""

    def start(self) -> StoreWriter:
        """Open the connection, listen on :attr:`socket_path` and start the thread.

        Raises:
            StoreError: the database cannot be opened for writing or the socket cannot be bound.
        """
        try:
            db = sqlite3.connect(self.path, isolation_level=None, timeout=self.busy_timeout, check_same_thread=False)
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            raise StoreError(f"the store writer cannot open {self.path}: {exc}") from exc
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.socket_path)
            listener.listen(64)
        except OSError as exc:
            listener.close()
            db.close()
            raise StoreError(f"the store writer cannot listen on {self.socket_path}: {exc}") from exc
        self._listener = listener
        self._thread = threading.Thread(target=self._serve, args=(db,), name="arena-store-writer", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Carry out what the workers have already sent, then close every connection and the file (blocking)."""
        if self._thread is None:
            return
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join()
        self._thread = None
        self._wake_r.close()
        self._wake_w.close()

    def _serve(self, db: sqlite3.Connection) -> None:
        listener = self._listener
        assert listener is not None
        selector = selectors.DefaultSelector()
        selector.register(listener, selectors.EVENT_READ)
        selector.register(self._wake_r, selectors.EVENT_READ)
        pending: dict[socket.socket, bytearray] = {}
        stopping = False
        try:
            while True:
                events = selector.select(0 if stopping else None)
                if stopping and not events:
                    return  # everything sent before close() has been read and answered
                batch: list[tuple[socket.socket, tuple[Any, ...]]] = []
                for key, _mask in events:
                    if key.fileobj is self._wake_r:
                        self._wake_r.recv(64)
                        stopping = True
                        selector.unregister(listener)
                        listener.close()
                    elif key.fileobj is listener:
                        conn, _ = listener.accept()
                        pending[conn] = bytearray()
                        selector.register(conn, selectors.EVENT_READ)
                    else:
                        conn = key.fileobj  # type: ignore[assignment]
                        try:
                            alive = self._read(conn, pending[conn], batch)
                        except Exception as exc:  # (a request that is not one): that worker is cut off, not the rest
                            print(f"arena: the store writer dropped a worker: {exc!r}", file=sys.stderr, flush=True)
                            alive = False
                        if not alive:
                            selector.unregister(conn)
                            del pending[conn]
                            self._forget(conn, list(pending))
                            conn.close()
                batch = self._directory(self._waiting_for_next(batch), list(pending))
                if batch:
                    replies = self.carry_out(db, [request for _conn, request in batch])
                    # Every worker hears of a committed registry change before the one that asked gets its
                    # answer: a client told "registered" can turn to another worker, which already has it queued.
                    self._tell_all(list(pending))
                    self._answer(batch, replies)
                    self._started(batch, replies)
        except Exception as exc:  # never silently: the workers see their connection close, and stop
            print(f"arena: the store writer failed: {exc!r}", file=sys.stderr, flush=True)
        finally:
            for conn in pending:
                conn.close()
            with contextlib.suppress(OSError):
                listener.close()
            selector.close()
            db.close()
            with contextlib.suppress(OSError):
                os.unlink(self.socket_path)

    def _read(self, conn: socket.socket, buffer: bytearray, batch: list[tuple[socket.socket, tuple[Any, ...]]]) -> bool:
        """Read what ``conn`` sent and add each whole request in it to ``batch``; False when the worker is gone."""
        try:
            chunk = conn.recv(self.read_bytes)
        except OSError:
            return False
        if not chunk:
            return False
        buffer += chunk
        while len(buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(buffer)
            end = _HEADER.size + size
            if len(buffer) < end:
                break
            request = pickle.loads(buffer[_HEADER.size : end])  # only our own processes reach the private socket
            del buffer[:end]
            if not (isinstance(request, tuple) and len(request) == 3):
                raise StoreError(f"not a store request: {type(request).__name__}")
            batch.append((conn, request))
        return True

    def _tell_all(self, conns: list[socket.socket]) -> None:
        """Send :attr:`notices` to every worker connected (a connection gone meanwhile is skipped)."""
        if self.notices:
            notices, self.notices = self.notices, []
            _send_all(conns, notices)

    def _waiting_for_next(
        self, batch: list[tuple[socket.socket, tuple[Any, ...]]]
    ) -> list[tuple[socket.socket, tuple[Any, ...]]]:
        """Set the batch's "next" requests aside (answered when a match of their game starts); the rest."""
        rest = []
        for conn, request in batch:
            request_id, op, args = request
            if op == "next":
                game, worker = args
                self._next.setdefault(str(game), []).append((conn, request_id, worker))
            else:
                rest.append((conn, request))
        return rest

    def _started(
        self, batch: list[tuple[socket.socket, tuple[Any, ...]]], replies: list[tuple[int, bool, Any]]
    ) -> None:
        """Answer the "next" requests of the games whose matches this batch started (in other workers than theirs)."""
        if not self._next:
            return
        for (_conn, (_request_id, op, args)), (_id, ok, match_id) in zip(batch, replies, strict=True):
            if op != "start" or not ok:
                continue
            game = args[0][0][0]  # (the start rows: the match's values, the game's name first)
            owner = args[1] if len(args) > 1 else None
            waiting = self._next.get(game)
            if not waiting:
                continue
            left: list[tuple[socket.socket, int, int | None]] = []
            for conn, request_id, worker in waiting:
                if worker is not None and worker == owner:
                    left.append((conn, request_id, worker))  # (its own hub hears of its own matches)
                    continue
                _send_all([conn], [(request_id, True, str(match_id))], notice=False)
            if left:
                self._next[game] = left
            else:
                del self._next[game]

    def _forget(self, conn: socket.socket, others: list[socket.socket]) -> None:
        """Drop what a worker that is gone was waiting for, and the names of the bots connected to it."""
        for game in list(self._next):
            left = [w for w in self._next[game] if w[0] is not conn]
            if left:
                self._next[game] = left
            else:
                del self._next[game]
        gone = [name for name, claimer in self._claimed_on.items() if claimer is conn]
        for name in gone:
            del self._claimed_on[name]
            bot = self.connected.pop(name)
            _send_all(others, [("offline", (name, bot.key))])

    def _directory(
        self, batch: list[tuple[socket.socket, tuple[Any, ...]]], conns: list[socket.socket]
    ) -> list[tuple[socket.socket, tuple[Any, ...]]]:
        """Carry out the batch's ``claim`` and ``release`` requests (no database write); the rest.

        Every worker hears of a change before the one that asked is answered, so a bot welcomed by one
        worker is already on its way to the others' directories when it can first be named.
        """
        rest = []
        for conn, request in batch:
            request_id, op, args = request
            if op == "claim":
                bot: Connected = args[0]
                key = name_key(bot.name)
                taken = next(
                    (
                        c.name
                        for c in self.connected.values()
                        if name_key(c.name) == key and c.key != bot.key and not (c.moving and c.name == bot.name)
                    ),
                    None,
                )
                if taken is None:
                    self.connected[bot.name] = bot
                    self._claimed_on[bot.name] = conn
                    _send_all(conns, [("online", bot)])
                _send_all([conn], [(request_id, True, taken)], notice=False)
            elif op == "release":
                name, session_key = args
                held = self.connected.get(name)
                if held is not None and held.key == session_key:
                    del self.connected[name]
                    self._claimed_on.pop(name, None)
                    _send_all(conns, [("offline", (name, session_key))])
                _send_all([conn], [(request_id, True, None)], notice=False)
            elif op == "move":
                name, session_key, worker = args
                held = self.connected.get(name)
                if held is not None and held.key == session_key:
                    moved = held._replace(worker=worker, key=moving_key(session_key), moving=True)
                    self.connected[name] = moved  # (still claimed on the worker it leaves: gone with it)
                    _send_all(conns, [("online", moved)])
                _send_all([conn], [(request_id, True, None)], notice=False)
            else:
                rest.append((conn, request))
        return rest

    def _answer(self, batch: list[tuple[socket.socket, tuple[Any, ...]]], replies: list[tuple[int, bool, Any]]) -> None:
        """Send each connection its replies, in the order it asked (a connection gone meanwhile is skipped)."""
        out: dict[socket.socket, list[bytes]] = {}
        for (conn, _request), reply in zip(batch, replies, strict=True):
            body = _reply_bytes(reply)
            out.setdefault(conn, []).append(_HEADER.pack(len(body)) + body)
        for conn, parts in out.items():
            with contextlib.suppress(OSError):  # (its worker is gone; its next read finds the end)
                conn.sendall(b"".join(parts))

    def carry_out(self, db: sqlite3.Connection, requests: list[tuple[Any, ...]]) -> list[tuple[int, bool, Any]]:
        """Carry out ``requests`` (in order); their replies ``(request_id, ok, value or error text)``.

        Group commit: the writes of requests read together share one
        transaction, each inside its own savepoint, so a refused one is rolled
        back alone and the others commit together, once. Every reply is sent
        after that commit. If the transaction itself fails (SQLite rolled it
        back, the commit failed), each request is carried out again on its
        own, in its own transaction, as a single request always is.
        """
        self.requests += len(requests)
        steps = [self._prepared(request) for request in requests]
        works = [(i, step) for i, step in enumerate(steps) if callable(step)]
        outcomes: list[tuple[bool, Any]] = [step if not callable(step) else (False, None) for step in steps]
        done, commits = group_commit(db, [work for _i, work in works])
        for (i, _work), outcome in zip(works, done, strict=True):
            outcomes[i] = outcome
        self.commits += commits
        for request, (ok, _value) in zip(requests, outcomes, strict=True):
            if ok:
                self.notices.extend(_bot_changes(request))
        return [_reply(request, outcome) for request, outcome in zip(requests, outcomes, strict=True)]

    def _prepared(self, request: tuple[Any, ...]) -> Callable[[sqlite3.Connection], Any] | tuple[bool, Any]:
        """:meth:`_step` for ``request``; a request it cannot make sense of fails alone."""
        try:
            return self._step(*request)
        except Exception as exc:
            return False, exc

    def _step(
        self, request_id: int, op: str, args: tuple[Any, ...]
    ) -> Callable[[sqlite3.Connection], Any] | tuple[bool, Any]:
        """What request ``op`` writes, as a function of the connection; or its outcome when it writes nothing."""
        if op == "start":
            rows = args[0]
            worker = args[1] if len(args) > 1 else None
            owners = self.owners

            def start(db: sqlite3.Connection) -> int:
                match_id = insert_start(db, rows)
                if worker is not None:
                    # (noted before the commit: an id whose insert is rolled back is never handed out, and
                    # a lookup of it finds no such match in that worker, as for any stored match)
                    owners[str(match_id)] = worker
                return match_id

            return start
        if op == "finish":
            row, rated, statements = args
            rating = rating_change(rated) if rated is not None else None
            owners = self.owners

            def finish(db: sqlite3.Connection) -> None:
                db.execute(END_SQL, row)
                if rating is not None:
                    run_now(rating, db)
                _run_statements(db, statements)
                owners.pop(str(row[-1]), None)  # (the row ends with the match's id)

            return finish
        if op == "owner":
            return True, self.owners.get(str(args[0]))
        if op == "reveal":
            seed = args[0]

            def reveal(db: sqlite3.Connection) -> None:
                db.execute(REVEAL_SQL, reveal_row(seed))

            return reveal
        if op == "transaction":
            statements = args[0]
            return lambda db: _run_statements(db, statements)
        if op == "insert_bot":
            bot: NewBot = args[0]
            return lambda db: bot_writes.insert_bot(db, bot)
        if op == "reserve_version":
            new: NewVersion = args[0]
            return lambda db: bot_writes.reserve_version(db, new)
        if op == "verdict":
            verdict: Verdict = args[0]
            return lambda db: bot_writes.set_verdict(db, verdict)
        if op == "ready":
            try:
                if self._on_ready is not None:
                    self._on_ready(*args)
            except Exception as exc:  # (the main loop is closing)
                return False, f"the main process could not take the worker's readiness: {exc!r}"
            return True, list(self.connected.values())  # (the directory so far; notices follow in order)
        return False, f"unknown store request {op!r}"


def _send_all(conns: list[socket.socket], messages: list[Any], notice: bool = True) -> None:
    """Send ``messages`` to each of ``conns`` (as notices, or as replies); a connection gone is skipped."""
    bodies = (
        pickle.dumps((NOTICE, True, m), protocol=pickle.HIGHEST_PROTOCOL) if notice else _reply_bytes(m)
        for m in messages
    )
    data = b"".join(_HEADER.pack(len(body)) + body for body in bodies)
    for conn in conns:
        with contextlib.suppress(OSError):
            conn.sendall(data)


def _bot_changes(request: tuple[Any, ...]) -> list[BotChange]:
    """What the workers must hear of ``request`` once it is committed (nothing, unless it changed the registry)."""
    _request_id, op, args = request
    if op == "insert_bot":
        bot: NewBot = args[0]
        return [("registered", bot.name), *([("programs", bot.name)] if bot.command is not None else [])]
    if op == "verdict" and args[0].status == "accepted":
        return [("programs", args[0].name)]
    return []


def _reply(request: tuple[Any, ...], outcome: tuple[bool, Any]) -> tuple[int, bool, Any]:
    """A request's reply: ``(request_id, True, value)``, or ``(request_id, False, what went wrong)``.

    A registry write's refusal (:class:`BotWriteRefused`) travels as itself, so the worker raises the
    same code and message a single-process server would.
    """
    request_id, op, _args = request
    ok, value = outcome
    if ok:
        return request_id, True, value
    if isinstance(value, BotWriteRefused):
        return request_id, False, value
    if isinstance(value, str):
        return request_id, False, value
    if isinstance(value, (sqlite3.Error, StoreError, OSError)):
        return request_id, False, str(value)
    return request_id, False, f"the store writer failed on {op!r}: {value!r}"


def _reply_bytes(reply: tuple[int, bool, Any]) -> bytes:
    """A reply pickled; a value that cannot be pickled is answered as the writer's failure, not raised."""
    try:
        return pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        failure = (reply[0], False, f"the store writer could not send its answer: {exc!r}")
        return pickle.dumps(failure, protocol=pickle.HIGHEST_PROTOCOL)


def _run_statements(db: sqlite3.Connection, statements: list[tuple[str, bool, Any]]) -> None:
    """Replay a journal's statements on a plain connection (inside the caller's transaction)."""
    for sql, many, parameters in statements:
        if many:
            db.executemany(sql, parameters)
        else:
            db.execute(sql, parameters)
