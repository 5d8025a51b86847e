"""One store writer for many processes: worker processes send their writes to the process that owns the file.

With ``arena serve --workers N`` every worker process runs its own event loop,
hub and referee, and the main process is the only one that writes the SQLite
file. A worker's hub gets a :class:`WorkerStore`: it reads through its own
read-only connection to the same file (WAL lets readers run beside the
writer), and every write (a match starting, a match ending with its rating
change and failure report, a sealed seed revealed, a match's logs) travels to
the main process over a Unix socket as a pickled request, which
:func:`serve_writes` carries out on the real :class:`Store` and answers once
committed. A match's start and end travel as the rows the store writes
(:func:`~arena_server.store.database.start_rows`,
:func:`~arena_server.store.database.end_row`): plain values, the move list
already encoded by the worker, so the one writer neither unpickles records nor
compresses their moves. ``finish_match`` returns only after that answer, so the hub tells
the seats the end only after it is in the database: commit-before-notify holds
across the hop.

The ``extra`` hooks a hub passes are closures and cannot cross a process
boundary. The worker runs them against a :class:`_Journal`, a stand-in
connection that records the statements; the writer replays them in the same
transaction. Rating effects are the exception: they read the current ratings
inside the transaction (the Plackett-Luce update), so the journal drops them
and the writer derives them again from the record with
:func:`~arena_server.store.ratings.rating_change`, as a single-process hub
would.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import re
import sqlite3
import struct
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any

import aiosqlite

from arena_server.referee.records import MatchRecord, MoveLog
from arena_server.store.database import Store, StoreError, end_row, start_rows
from arena_server.store.ratings import is_ratable, rating_change

Hook = Callable[[aiosqlite.Connection], Awaitable[None]]

_HEADER = struct.Struct("!I")
_RATING_TABLES = frozenset({"rated_matches", "rating_pools", "ratings", "rating_pairs"})
"""Tables only a match's rating change writes; the writer derives those statements itself."""
_TARGET = re.compile(r"\s*(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|UPDATE|DELETE\s+FROM|REPLACE\s+INTO)\s+(\w+)", re.IGNORECASE)
"""The table a writing statement changes (reads do not match: the journal keeps only writes)."""


async def send_message(writer: asyncio.StreamWriter, message: object) -> None:
    """Write one length-prefixed pickled message."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    writer.write(_HEADER.pack(len(data)) + data)
    await writer.drain()


async def read_message(reader: asyncio.StreamReader) -> Any:
    """Read one length-prefixed pickled message (raises ``IncompleteReadError`` at the end of the stream)."""
    header = await reader.readexactly(_HEADER.size)
    (size,) = _HEADER.unpack(header)
    return pickle.loads(await reader.readexactly(size))  # only our own processes reach the private socket


class _Cursor:
    """What a journalled ``execute`` returns: no rows (hooks that only write never look)."""

    rowcount = 0
    lastrowid = None

    async def fetchone(self) -> None:
        return None

    async def fetchall(self) -> list[Any]:
        return []

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> _Cursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class _Execution:
    """Awaitable and async context manager, like aiosqlite's ``execute`` result."""

    def __init__(self) -> None:
        self.cursor = _Cursor()

    def __await__(self):  # type: ignore[no-untyped-def]
        return self._get().__await__()

    async def _get(self) -> _Cursor:
        return self.cursor

    async def __aenter__(self) -> _Cursor:
        return self.cursor

    async def __aexit__(self, *exc: object) -> None:
        return None


class _Journal:
    """A stand-in connection recording the statements a hook writes (rating statements left out)."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, bool, Any]] = []

    def _keep(self, sql: str) -> bool:
        target = _TARGET.match(sql)
        return target is not None and target.group(1).lower() not in _RATING_TABLES

    def execute(self, sql: str, parameters: Iterable[Any] = ()) -> _Execution:
        if self._keep(sql):
            self.statements.append((sql, False, tuple(parameters)))
        return _Execution()

    def executemany(self, sql: str, parameters: Iterable[Iterable[Any]]) -> _Execution:
        if self._keep(sql):
            self.statements.append((sql, True, [tuple(p) for p in parameters]))
        return _Execution()


async def _journal(hook: Hook | None) -> list[tuple[str, bool, Any]]:
    if hook is None:
        return []
    journal = _Journal()
    await hook(journal)  # type: ignore[arg-type]
    return journal.statements


def _replay(statements: list[tuple[str, bool, Any]]) -> Hook | None:
    if not statements:
        return None

    async def run(conn: aiosqlite.Connection) -> None:
        for sql, many, parameters in statements:
            if many:
                await conn.executemany(sql, parameters)
            else:
                await conn.execute(sql, parameters)

    return run


class WorkerStore(Store):
    """A worker's store: reads on its own read-only connection, writes through the main process.

    Use :meth:`connect`; ``close`` ends both connections.
    """

    bot_writes_refused = (
        "this server runs several worker processes (arena serve --workers), which register and submit "
        "no bots; register or submit on a server started with --workers 1 on the same database"
    )

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
        self._pump = asyncio.ensure_future(self._receive())

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
        problem = "the main process (the store writer) closed the connection"
        try:
            while True:
                request_id, ok, value = await read_message(self._reader)
                waiter = self._waiting.pop(request_id, None)
                if waiter is not None and not waiter.done():
                    if ok:
                        waiter.set_result(value)
                    else:
                        waiter.set_exception(StoreError(value))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            self.lost.set()
            for waiter in self._waiting.values():
                if not waiter.done():
                    waiter.set_exception(StoreError(problem))
            self._waiting.clear()

    async def _call(self, op: str, *args: Any) -> Any:
        if self._pump.done():
            raise StoreError("the main process (the store writer) is gone; the match cannot be recorded")
        self._next += 1
        request_id = self._next
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiter
        await send_message(self._writer, (request_id, op, args))
        return await waiter

    async def start_match(self, record: MatchRecord) -> str:
        match_id = str(await self._call("start", start_rows(record)))
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

    async def announce_ready(self, index: int) -> None:
        """Tell the main process that worker ``index`` serves (it prints the address once all do)."""
        await self._call("ready", index)

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self._writer.wait_closed()
        self._pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._pump
        await self.conn.close()


async def serve_writes(
    store: Store,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    on_ready: Callable[[int], None] | None = None,
) -> None:
    """Carry out one worker's writes on ``store`` until it disconnects; each answered once committed.

    ``on_ready(index)`` is called when the worker announces it serves.
    """
    tasks: set[asyncio.Task[None]] = set()

    async def handle(request_id: int, op: str, args: tuple[Any, ...]) -> None:
        try:
            value: Any = None
            if op == "start":
                value = await store.insert_start(args[0])
            elif op == "finish":
                row, rated, statements = args
                rating = rating_change(rated) if rated is not None else None
                hooks = [h for h in (rating, _replay(statements)) if h is not None]

                async def extra(conn: aiosqlite.Connection) -> None:
                    for hook in hooks:
                        await hook(conn)

                await store.write_end(row, extra if hooks else None)
            elif op == "reveal":
                await store.reveal_seed(args[0])
            elif op == "ready":
                if on_ready is not None:
                    on_ready(args[0])
            elif op == "transaction":
                work = _replay(args[0])
                if work is not None:
                    await store.run_in_transaction(work)
            else:
                raise StoreError(f"unknown store request {op!r}")
            reply: tuple[int, bool, Any] = (request_id, True, value)
        except (sqlite3.Error, StoreError, OSError) as exc:
            reply = (request_id, False, str(exc))
        except Exception as exc:  # never leave a worker waiting: it gets the failure as a store error
            reply = (request_id, False, f"the store writer failed on {op!r}: {exc!r}")
        with contextlib.suppress(ConnectionError, OSError):
            await send_message(writer, reply)

    try:
        while True:
            request_id, op, args = await read_message(reader)
            task = asyncio.ensure_future(handle(request_id, op, args))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        pass
    finally:
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        writer.close()
