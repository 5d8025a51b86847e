"""The SQLite store: every match with its full move list, and the bots.

One long-lived aiosqlite connection in WAL mode with foreign keys on. The
schema is versioned (``PRAGMA user_version``) and upgraded by forward
migrations at start-up; a database from a newer Arena is refused rather than
touched. Matches are written when they start (status running) and completed
in one transaction when they end (with their rating change and failure
report, run on the database thread), so after a crash the running ones are
marked aborted at the next start and nothing is half-written. The starts and
ends asked for together go to the database thread in one hop and commit
together (:func:`group_commit`). A running
match's row holds only the seed's commitment (``seed_sha256``); the seed
itself is written when the match ends, so no reader of the file can predict
a live match's dice (a match cut off by a crash never reveals its seed). A
write that fails (disk full, read-only file, locked database) raises
``sqlite3.Error`` after its transaction was rolled back; the connection stays
usable.

Move lists are stored compactly: one zlib-compressed blob per match holding
parallel little-endian arrays (seat int8, action int32, elapsed µs uint32,
legal uint8), readable back into a replay with :func:`decode_moves`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import hashlib
import json
import os
import sqlite3
import struct
import sys
import zlib
from array import array
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from arena_client import SeatInfo, Termination, TimeControl
from arena_games import load_game
from arena_server.referee.records import MatchRecord, MoveLog
from arena_server.store import bot_writes
from arena_server.store.bot_writes import NewBot, NewVersion, Verdict
from arena_server.store.names import name_key

_T = TypeVar("_T")


class StoreError(Exception):
    """The database cannot be used; the message says why and what to do."""


MIGRATIONS: list[str] = [
    # 1: bots, matches, seats.
    """
    CREATE TABLE bots (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,             -- hosted | remote | subprocess
        games TEXT NOT NULL DEFAULT '[]',
        token_hash TEXT,                -- sha256 hex of the secret token; NULL for hosted bots
        description TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
    );
    CREATE TABLE bot_versions (
        id INTEGER PRIMARY KEY,
        bot_id INTEGER NOT NULL REFERENCES bots(id) ON DELETE CASCADE,
        version INTEGER NOT NULL,
        command TEXT,
        framing TEXT,
        workdir TEXT,
        created_at TEXT NOT NULL,
        UNIQUE (bot_id, version)
    );
    CREATE TABLE matches (
        id INTEGER PRIMARY KEY,
        game TEXT NOT NULL,
        params TEXT NOT NULL,
        seed TEXT NOT NULL,
        seed_sha256 TEXT NOT NULL,
        time_control TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'aborted')),
        termination INTEGER,
        offender INTEGER,
        reason TEXT NOT NULL DEFAULT '',
        returns TEXT,
        rated INTEGER NOT NULL DEFAULT 0,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        move_count INTEGER NOT NULL DEFAULT 0,
        moves BLOB
    );
    CREATE INDEX matches_by_game ON matches (game, id);
    CREATE INDEX matches_by_status ON matches (status);
    CREATE TABLE match_seats (
        match_id INTEGER NOT NULL REFERENCES matches(id) ON DELETE CASCADE,
        seat INTEGER NOT NULL,
        bot_name TEXT NOT NULL,
        bot_version INTEGER NOT NULL DEFAULT 1,
        kind TEXT NOT NULL,
        PRIMARY KEY (match_id, seat)
    );
    CREATE INDEX seats_by_bot ON match_seats (bot_name, match_id);
    """,
    # 2: ratings and the ladder (issue 5; see arena_server/store/ratings.py). Everything here is
    # derived from matches and rebuilt by `arena ratings recompute`, except bot_status and tournaments.
    """
    CREATE TABLE rated_matches (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- the order rating changes were applied in
        match_id INTEGER NOT NULL UNIQUE REFERENCES matches(id) ON DELETE CASCADE,
        pool TEXT NOT NULL
    );
    CREATE TABLE rating_pools (
        pool TEXT PRIMARY KEY,          -- game name plus its rating-relevant parameters
        game TEXT NOT NULL,
        method TEXT NOT NULL,           -- bradley-terry | plackett-luce
        matches INTEGER NOT NULL DEFAULT 0,
        dirty INTEGER NOT NULL DEFAULT 0,
        fitted_at TEXT
    );
    CREATE TABLE ratings (
        pool TEXT NOT NULL,
        bot_name TEXT NOT NULL,
        rating REAL NOT NULL DEFAULT 1500,
        ci REAL NOT NULL DEFAULT 0,     -- half-width of the 95% interval, Elo points
        mu REAL,                        -- Plackett-Luce pools only
        sigma REAL,
        games INTEGER NOT NULL DEFAULT 0,
        wins INTEGER NOT NULL DEFAULT 0,
        draws INTEGER NOT NULL DEFAULT 0,
        losses INTEGER NOT NULL DEFAULT 0,
        score REAL NOT NULL DEFAULT 0,
        last_active TEXT,
        PRIMARY KEY (pool, bot_name)
    );
    CREATE INDEX ratings_by_rating ON ratings (pool, rating DESC);
    CREATE TABLE rating_pairs (
        pool TEXT NOT NULL,
        bot_a TEXT NOT NULL,            -- bot_a < bot_b
        bot_b TEXT NOT NULL,
        games INTEGER NOT NULL DEFAULT 0,
        score_a REAL NOT NULL DEFAULT 0,
        wins_a INTEGER NOT NULL DEFAULT 0,
        draws INTEGER NOT NULL DEFAULT 0,
        losses_a INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (pool, bot_a, bot_b)
    );
    CREATE TABLE bot_status (
        bot_name TEXT PRIMARY KEY,
        paused_version INTEGER NOT NULL,
        paused_reason TEXT NOT NULL,
        paused_at TEXT NOT NULL
    );
    CREATE TABLE tournaments (
        id TEXT PRIMARY KEY,
        spec TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE TABLE tournament_matches (
        tournament_id TEXT NOT NULL REFERENCES tournaments(id) ON DELETE CASCADE,
        slot INTEGER NOT NULL,
        match_id INTEGER NOT NULL REFERENCES matches(id),
        PRIMARY KEY (tournament_id, slot)
    );
    """,
    # 3: submitted bots (issue 4; see arena_server/bots/registry.py): a verdict per version, the capped
    # stderr log of every subprocess seat, and what an author needs to fix a failure.
    """
    ALTER TABLE bot_versions ADD COLUMN status TEXT NOT NULL DEFAULT 'accepted';  -- accepted | rejected
    ALTER TABLE bot_versions ADD COLUMN check_report TEXT NOT NULL DEFAULT '';   -- the self-check, as text
    ALTER TABLE bot_versions ADD COLUMN games TEXT NOT NULL DEFAULT '[]';
    CREATE TABLE match_logs (
        match_id INTEGER NOT NULL REFERENCES matches(id) ON DELETE CASCADE,
        seat INTEGER NOT NULL,
        bot_name TEXT NOT NULL,
        bot_version INTEGER NOT NULL,
        log TEXT NOT NULL,              -- the seat's capped stderr log with the server's [arena] notes
        PRIMARY KEY (match_id, seat)
    );
    CREATE TABLE bot_failures (
        id INTEGER PRIMARY KEY,
        match_id INTEGER NOT NULL REFERENCES matches(id) ON DELETE CASCADE,
        seat INTEGER NOT NULL,
        bot_name TEXT NOT NULL,
        bot_version INTEGER NOT NULL,
        kind TEXT NOT NULL,             -- subprocess | remote
        termination INTEGER NOT NULL,
        reason TEXT NOT NULL,
        turn_id INTEGER NOT NULL DEFAULT 0,
        received TEXT NOT NULL DEFAULT '',  -- the last message the bot had been sent (proto3 JSON)
        sent TEXT NOT NULL DEFAULT '',      -- the last message the bot wrote (proto3 JSON)
        stderr_tail TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
    );
    CREATE INDEX failures_by_bot ON bot_failures (bot_name, id);
    """,
    # 4: the seed stays secret until the end (issue 12). A running match stores only its commitment
    # (seed = ''); the seed is written when the match ends. seed_chosen marks seeds a creator chose.
    """
    ALTER TABLE matches ADD COLUMN seed_chosen INTEGER NOT NULL DEFAULT 0;
    UPDATE matches SET seed = '' WHERE status = 'running';
    """,
    # 5: a secret salt per tournament (issue 12): its match seeds are derived from the salt and the
    # tournament's spec, so knowing the spec no longer predicts the dice. Tournaments made before
    # keep an empty salt, so a resumed one replays the same seeds.
    """
    ALTER TABLE tournaments ADD COLUMN salt TEXT NOT NULL DEFAULT '';
    """,
    # 6: a bot's name key (store/names.py) kept and indexed, so that a Hello, a guest's match and a
    # registration find a look-alike name without reading every bot. Store.open fills the keys of
    # the rows that have none (every row, the first time).
    """
    ALTER TABLE bots ADD COLUMN name_key TEXT;
    CREATE INDEX bots_by_name_key ON bots (name_key);
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)

_MOVES_MAGIC = b"AM1"


_MOVES_LEVEL = 1
"""zlib's level for a move list: the fastest. Measured on a 1500-round RPS log (21 kB of arrays): level 1
takes 0.10 us a round and gives 5.1 kB, the default level 6 took 0.48 us a round for 4.8 kB."""

_THREAD_MOVES = 32_768
"""Move lists longer than this are compressed in a worker thread (two million moves take about 0.16 s)."""


def encode_moves(log: MoveLog) -> bytes:
    """Pack a move log into the compact blob format."""
    parts = [log.players, log.actions, log.elapsed_us, log.legal]
    if sys.byteorder != "little":
        parts = [array(p.typecode, p) for p in parts]
        for p in parts:
            p.byteswap()
    body = struct.pack("<I", len(log)) + b"".join(p.tobytes() for p in parts)
    return _MOVES_MAGIC + zlib.compress(body, _MOVES_LEVEL)


async def _encode_off_loop(log: MoveLog) -> bytes:
    """:func:`encode_moves`, in a worker thread for a long match (the event loop keeps serving the others)."""
    if len(log) > _THREAD_MOVES:
        return await asyncio.to_thread(encode_moves, log)
    return encode_moves(log)


StartRows = tuple[tuple[Any, ...], list[tuple[int, str, int, str]]]
"""A match's start as the store writes it: the ``matches`` row's values and one ``match_seats`` row per seat."""

EndRow = tuple[Any, ...]
"""A match's end as the store writes it: the values of the ``UPDATE matches`` (the move list encoded)."""


def start_rows(record: MatchRecord) -> StartRows:
    """What :meth:`Store.start_match` inserts for ``record``: plain values, cheap to send to the store writer."""
    params = (
        record.game.name,
        json.dumps(dict(record.game.params)),
        record.seed_sha256,
        int(record.seed_chosen),
        _tc_json(record.time_control),
        int(record.rated),
        record.started_at.isoformat(),
    )
    return params, [(s.seat, s.bot_name, s.bot_version, s.kind) for s in record.seats]


async def end_row(record: MatchRecord) -> EndRow:
    """What :meth:`Store.finish_match` writes for ``record`` (its moves encoded, off the loop when many)."""
    assert record.termination is not None, "finish_match needs a finished record"
    return (
        "aborted" if record.termination == Termination.ABORTED else "finished",
        int(record.termination or Termination.ABORTED),
        record.offender,
        record.reason,
        json.dumps(list(record.returns)),
        (record.ended_at or datetime.now(UTC)).isoformat(),
        len(record.moves),
        await _encode_off_loop(record.moves),
        "" if record.seed_sealed else record.seed,  # revealed now that the match is over
        int(record.match_id),
    )


def insert_start(db: sqlite3.Connection, rows: StartRows) -> int:
    """Insert a match's :func:`start_rows` on a plain connection (inside the caller's transaction); its id."""
    params, seats = rows
    cur = db.execute(
        "INSERT INTO matches (game, params, seed, seed_sha256, seed_chosen, time_control, status, rated, "
        "started_at) VALUES (?, ?, '', ?, ?, ?, 'running', ?, ?)",  # the seed itself: only at the end
        params,
    )
    match_id = cur.lastrowid
    assert match_id is not None
    db.executemany(
        "INSERT INTO match_seats (match_id, seat, bot_name, bot_version, kind) VALUES (?, ?, ?, ?, ?)",
        [(match_id, *seat) for seat in seats],
    )
    return match_id


END_SQL = (
    "UPDATE matches SET status = ?, termination = ?, offender = ?, reason = ?, returns = ?, "
    "ended_at = ?, move_count = ?, moves = ?, seed = ? WHERE id = ?"
)
"""The statement that writes a match's :func:`end_row`."""

REVEAL_SQL = "UPDATE matches SET seed = ? WHERE seed_sha256 = ? AND status != 'running'"
"""The statement that writes a sealed seed into the ended matches that played it (:func:`reveal_row`)."""


def reveal_row(seed: str) -> tuple[str, str]:
    """:data:`REVEAL_SQL`'s values for ``seed``."""
    return seed, hashlib.sha256(seed.encode()).hexdigest()


def decode_moves(blob: bytes | None) -> MoveLog:
    """Unpack :func:`encode_moves` output."""
    log = MoveLog()
    if not blob:
        return log
    if blob[:3] != _MOVES_MAGIC:
        raise StoreError("a stored move list has an unknown format; the database may be corrupt")
    body = zlib.decompress(blob[3:])
    (n,) = struct.unpack_from("<I", body)
    offset = 4
    for arr in (log.players, log.actions, log.elapsed_us, log.legal):
        size = n * arr.itemsize
        arr.frombytes(body[offset : offset + size])
        if sys.byteorder != "little":
            arr.byteswap()
        offset += size
    return log


_THREAD_BLOB_BYTES = 16 << 10
"""Stored move lists larger than this (compressed) are decoded in a worker thread."""


async def _decode_off_loop(blob: bytes | None) -> MoveLog:
    """:func:`decode_moves`, in a worker thread for a large blob (a million rounds take 50-200 ms)."""
    if blob is not None and len(blob) > _THREAD_BLOB_BYTES:
        return await asyncio.to_thread(decode_moves, blob)
    return decode_moves(blob)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


@functools.lru_cache(maxsize=256)
def _tc_json(tc: TimeControl) -> str:
    """A time control as stored (memoised: nearly every match uses one of a few)."""
    return json.dumps(
        {
            "per_move": tc.per_move.total_seconds(),
            "overage": tc.overage.total_seconds(),
            "grace": tc.grace.total_seconds(),
        }
    )


def _tc_from_json(text: str) -> TimeControl:
    d = json.loads(text)
    return TimeControl(timedelta(seconds=d["per_move"]), timedelta(seconds=d["overage"]), timedelta(seconds=d["grace"]))


class Store:
    """The Arena database. Create with :meth:`open`; close with :meth:`close`."""

    def __init__(self, conn: aiosqlite.Connection, path: str, lock_fd: int | None) -> None:
        self.conn = conn
        self.path = path
        self._lock_fd = lock_fd
        self.write_lock = asyncio.Lock()
        """Serialises transactions on the one shared connection."""
        self._writes = _WriteQueue(self)
        """One-transaction writes (a match's start, most ends), several to a hop under load."""
        self.recovered_aborted = 0
        """How many matches were found running at start-up and marked aborted."""

    @classmethod
    async def open(cls, path: str | os.PathLike[str], exclusive: bool = True) -> Store:
        """Open (creating if needed) and migrate the database at ``path``.

        Args:
            path: The SQLite file, or ``":memory:"``.
            exclusive: Take a lock file so that a second server on the same
                file is refused with a clear error.

        Raises:
            StoreError: the file is not a database, is read-only, is locked by
                another server, or comes from a newer Arena.
        """
        path = str(path)
        lock_fd = None
        if path != ":memory:":
            parent = Path(path).resolve().parent
            if not parent.is_dir():
                raise StoreError(f"cannot open database {path}: the folder {parent} does not exist")
            if exclusive:
                lock_fd = _lock(path)
        try:
            conn = await aiosqlite.connect(path, isolation_level=None)
        except sqlite3.Error as exc:
            _unlock(lock_fd)
            raise StoreError(f"cannot open database {path}: {exc}") from exc
        store = cls(conn, path, lock_fd)
        try:
            await store._prepare()
        except BaseException:
            await conn.close()
            _unlock(lock_fd)
            raise
        return store

    async def _prepare(self) -> None:
        conn = self.conn
        try:
            await conn.execute("PRAGMA foreign_keys = ON")
            async with conn.execute("PRAGMA user_version") as cur:
                row = await cur.fetchone()
            version = int(row[0]) if row else 0
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{self.path} is not a usable Arena database ({exc}); move it aside or pass --db to use another file"
            ) from exc
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}, newer than this Arena understands ({SCHEMA_VERSION}); "
                "upgrade Arena or use another --db file"
            )
        try:
            if self.path != ":memory:":
                await conn.execute("PRAGMA journal_mode = WAL")
            await conn.execute("PRAGMA synchronous = NORMAL")
            for index in range(version, SCHEMA_VERSION):
                # One script per migration, atomic: the schema and its version move together.
                await conn.executescript(
                    f"BEGIN IMMEDIATE;\n{MIGRATIONS[index]}\nPRAGMA user_version = {index + 1};\nCOMMIT;"
                )
            cur = await conn.execute(
                "UPDATE matches SET status = 'aborted', termination = ?, ended_at = ?, "
                "reason = 'the server stopped before the match ended' WHERE status = 'running'",
                (int(Termination.ABORTED), _now()),
            )
            self.recovered_aborted = cur.rowcount
            await cur.close()
            await self._key_names()
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc) or "read-only" in str(exc):
                raise StoreError(
                    f"{self.path} is read-only; Arena needs to write to it (check the file's permissions)"
                ) from exc
            raise StoreError(f"cannot prepare database {self.path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{self.path} is not a usable Arena database ({exc}); move it aside or pass --db to use another file"
            ) from exc

    async def _key_names(self) -> None:
        """Fill ``bots.name_key`` where it is empty: after migration 6, or after a change to :func:`name_key`."""

        async with self.conn.execute("SELECT id, name FROM bots WHERE name_key IS NULL") as cur:
            keys = [(name_key(name), bot_id) for bot_id, name in await cur.fetchall()]
        if not keys:
            return  # (nothing to key: no write, so a database already keyed is left untouched)

        async def key(conn: aiosqlite.Connection) -> None:  # (a row keyed meanwhile gets the same key again)
            await conn.executemany("UPDATE bots SET name_key = ? WHERE id = ?", keys)

        await self.local_transaction(key)

    async def close(self) -> None:
        """Write what is still queued (a match's start or end), then close the connection."""
        await self._writes.drained()
        await self.conn.close()
        _unlock(self._lock_fd)
        self._lock_fd = None

    # -- matches ------------------------------------------------------------------------------------

    async def start_match(self, record: MatchRecord) -> str:
        """Insert a running match and return its id (also set on ``record``).

        One transaction, in a hop to the database thread shared with the other
        matches starting or ending meanwhile (see :class:`_WriteQueue`).
        """
        rows = start_rows(record)
        record.match_id = str(await self._writes.run(lambda db: insert_start(db, rows)))
        return record.match_id

    async def read(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run the read-only ``work`` on the connection's own thread: one hop to it and back.

        ``async with conn.execute(...)`` and a fetch are three hops (execute,
        fetch, close); a bot's Hello made six queries of them. ``work`` gets
        the plain ``sqlite3`` connection.
        """
        return await self._on_thread(work)

    async def _on_thread(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """``work(sqlite3 connection)`` on the thread that owns the connection, in one hop.

        The one place that uses aiosqlite's ``_execute`` (the entry point its own
        methods go through) and its ``_conn``; ``tests/server/test_store_transactions.py``
        counts the hops, and fails if they go away.
        """
        conn = self.conn
        return await conn._execute(lambda: work(conn._conn))  # type: ignore[no-any-return,no-untyped-call]

    async def finish_match(
        self,
        record: MatchRecord,
        extra: Callable[[aiosqlite.Connection], Awaitable[None]] | None = None,
    ) -> None:
        """Write the end of a match; ``extra`` runs in the same transaction (e.g. rating updates).

        One transaction in a hop shared with the other matches starting or
        ending meanwhile (see :class:`_WriteQueue`), ``extra`` included: it runs
        on the database thread through :func:`run_now`, so it may await only
        the connection it is given (its statements and their cursors), as the
        hub's rating change and failure report do. One that awaits anything
        else fails with a :class:`StoreError` and nothing of the end is written.
        """
        row = await end_row(record)

        def end(db: sqlite3.Connection) -> None:
            db.execute(END_SQL, row)
            if extra is not None:
                run_now(extra, db)

        await self._writes.run(end)

    async def reveal_seed(self, seed: str) -> None:
        """Write a sealed seed into the ended matches that played it (the end of a duplicate set)."""
        async with self.write_lock:
            await self.conn.execute(REVEAL_SQL, reveal_row(seed))

    async def run_in_transaction(self, work: Callable[[aiosqlite.Connection], Awaitable[None]]) -> None:
        """Run ``work`` in one write transaction (all of it or nothing).

        ``work`` may await only the connection it is given (its statements and
        their cursors): it runs on the database thread through :func:`run_now`,
        in a hop shared with the matches starting and ending meanwhile (see
        :class:`_WriteQueue`). A worker's store
        (:class:`arena_server.store.writer.WorkerStore`) sends what ``work``
        writes to the main process instead; ``work`` must then only write. For
        work that awaits anything else, use :meth:`local_transaction`.
        """
        await self._writes.run(lambda db: run_now(work, db))

    async def local_transaction(self, work: Callable[[aiosqlite.Connection], Awaitable[_T]]) -> _T:
        """Run ``work`` in one write transaction on this process's own connection; what it returns.

        For work that reads inside its transaction (a check before an insert),
        which only the process holding the database for writing can do. A
        failure rolls everything back and is raised as it was (a COMMIT that
        SQLite already rolled back is not masked by the ROLLBACK after it).
        """
        async with self.write_lock:
            conn = self.conn
            await conn.execute("BEGIN IMMEDIATE")
            try:
                result = await work(conn)
                await conn.execute("COMMIT")
            except BaseException:
                await self._rollback()
                raise
        return result

    async def _rollback(self) -> None:
        """Undo the open transaction, if SQLite has not already (a failed BEGIN or COMMIT may leave none)."""
        if self.conn.in_transaction:
            # If SQLite rolled back by itself meanwhile, the original error is the one that matters.
            with contextlib.suppress(sqlite3.Error):
                await self.conn.execute("ROLLBACK")

    async def get_match(self, match_id: str, with_moves: bool = True) -> MatchRecord | None:
        """The stored match, or None when there is no such id."""
        try:
            mid = int(match_id)
        except ValueError:
            return None
        rows = await self._select_matches("WHERE m.id = ?", (mid,), with_moves, 1)
        return rows[0] if rows else None

    async def list_matches(
        self,
        game: str = "",
        bot: str = "",
        limit: int = 20,
        opponent: str = "",
        before: int = 0,
        ids: Sequence[str] | None = None,
    ) -> list[MatchRecord]:
        """Most recent first, without move lists.

        Args:
            game: Only matches of this game.
            bot: Only matches this bot played.
            limit: At most this many.
            opponent: With ``bot``: only the matches it played against this bot.
            before: Only matches with a smaller id (the next page after the last id shown).
            ids: Only these matches (ids that are not numbers match none).
        """
        clauses: list[str] = []
        args: list[Any] = []
        if ids is not None:
            numbers = [int(i) for i in ids if i.isdigit()]
            clauses.append(f"m.id IN ({', '.join('?' * len(numbers))})" if numbers else "0")
            args.extend(numbers)
        if game:
            clauses.append("m.game = ?")
            args.append(game)
        if bot:
            clauses.append("m.id IN (SELECT match_id FROM match_seats WHERE bot_name = ?)")
            args.append(bot)
        if bot and opponent:
            clauses.append("m.id IN (SELECT match_id FROM match_seats WHERE bot_name = ?)")
            args.append(opponent)
        if before > 0:
            clauses.append("m.id < ?")
            args.append(before)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        return await self._select_matches(where, tuple(args), False, limit)

    async def move_counts(self, match_ids: Sequence[str]) -> dict[str, int]:
        """The number of moves of each stored match (from the ``move_count`` column, no move list read).

        :meth:`list_matches` returns records without their moves; this gives their real lengths.
        """
        ids = [int(m) for m in match_ids if m.isdigit()]
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        async with self.conn.execute(f"SELECT id, move_count FROM matches WHERE id IN ({marks})", ids) as cur:
            return {str(mid): int(count) for mid, count in await cur.fetchall()}

    async def _select_matches(self, where: str, args: Sequence[Any], with_moves: bool, limit: int) -> list[MatchRecord]:
        moves_col = "m.moves" if with_moves else "NULL"
        sql = (
            "SELECT m.id, m.game, m.params, m.seed, m.seed_sha256, m.time_control, m.status, m.termination, "
            f"m.offender, m.reason, m.returns, m.rated, m.started_at, m.ended_at, m.seed_chosen, {moves_col} "
            f"FROM matches m {where} ORDER BY m.id DESC LIMIT ?"
        )
        async with self.conn.execute(sql, (*args, limit)) as cur:
            rows = list(await cur.fetchall())
        if not rows:
            return []
        ids = [r[0] for r in rows]
        seats: dict[int, list[SeatInfo]] = {i: [] for i in ids}
        marks = ",".join("?" * len(ids))
        async with self.conn.execute(
            f"SELECT match_id, seat, bot_name, bot_version, kind FROM match_seats WHERE match_id IN ({marks}) "
            "ORDER BY match_id, seat",
            ids,
        ) as cur:
            for mid, seat, name, version, kind in await cur.fetchall():
                seats[mid].append(SeatInfo(seat, name, version, kind))
        out = []
        for r in rows:
            (
                mid,
                game,
                params,
                seed,
                sha,
                tc,
                _status,
                term,
                offender,
                reason,
                returns,
                rated,
                started,
                ended,
                seed_chosen,
                moves,
            ) = r
            record = MatchRecord(
                match_id=str(mid),
                game=load_game(game, **json.loads(params)),
                seats=tuple(seats[mid]),
                time_control=_tc_from_json(tc),
                seed=seed,
                seed_sha256=sha,
                started_at=_time(started) or datetime.now(UTC),
                ended_at=_time(ended),
                termination=Termination(term) if term else None,
                offender=offender,
                reason=reason,
                returns=tuple(json.loads(returns)) if returns else (),
                moves=await _decode_off_loop(moves) if with_moves else MoveLog(),
                rated=bool(rated),
                seed_chosen=bool(seed_chosen),
            )
            out.append(record)
        return out

    async def count_matches(self) -> int:
        async with self.conn.execute("SELECT COUNT(*) FROM matches") as cur:
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    # -- bots ---------------------------------------------------------------------------------------

    async def bot_token_hash(self, name: str) -> str | None:
        """The stored token hash of a registered bot name, or None if it is not registered."""

        def find(db: sqlite3.Connection) -> str | None:
            row = db.execute("SELECT token_hash FROM bots WHERE name = ?", (name,)).fetchone()
            return row[0] if row else None

        return await self.read(find)

    async def insert_bot(self, bot: NewBot) -> int:
        """Register ``bot`` (the look-alike check and the insert in one transaction); its id.

        Raises:
            BotWriteRefused: ``taken``: a registered name looks the same.
        """
        return await self._writes.run(lambda db: bot_writes.insert_bot(db, bot))

    async def reserve_version(self, new: NewVersion) -> int:
        """Store a submission's next version as ``checking`` (number and quota read in the same transaction).

        Raises:
            BotWriteRefused: ``quota``: the bot has all the versions it may have.
        """
        return await self._writes.run(lambda db: bot_writes.reserve_version(db, new))

    async def set_verdict(self, verdict: Verdict) -> None:
        """Record a self-check's verdict on a version (an accepted one makes its bot a subprocess bot)."""
        await self._writes.run(lambda db: bot_writes.set_verdict(db, verdict))


class _WriteQueue:
    """One-transaction writes asked for while a hop is under way, taken together in the next hop.

    Each hop to aiosqlite's thread costs the event loop a queue put, a thread
    wake-up and a wake-up of its own: more than the SQL of a match's start or
    end. Writes asked for while a hop is under way go together in the next
    one, in the order they were asked for, and commit together
    (:func:`group_commit`: one transaction, a savepoint each, so a failure
    rolls back that write alone and leaves the others to commit). A quiet
    server makes one hop and one commit per write, as before; under load one
    hop and one commit carry many. Each hop holds the store's
    :attr:`Store.write_lock`, as any other write does. A write whose caller
    was cancelled before its hop began is not made; once its hop began it
    commits, as it would have alone.

    (Reads are not queued so: measured, they seldom overlap, and the queue's
    task cost more than the hops it saved.)
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self.writes = 0
        """Writes made so far (each caller's one transaction)."""
        self.commits = 0
        """Transactions committed for them: fewer than ``writes`` when writes were taken together."""
        self._queued: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] = []
        self._taker: asyncio.Task[None] | None = None
        """The task taking the queued writes to the database thread, while there are any."""

    async def run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """``work(sqlite3 connection)`` as one transaction on the database thread; its result, or its error."""
        waiter: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
        self._queued.append((work, waiter))
        if self._taker is None:
            self._taker = asyncio.ensure_future(self._take())
        return await waiter

    async def drained(self) -> None:
        """Wait until every write asked for so far has been made."""
        while self._taker is not None:
            await asyncio.wait([self._taker])

    async def _take(self) -> None:
        batch: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] = []
        try:
            while self._queued:
                async with self._store.write_lock:
                    batch, self._queued = [(w, f) for w, f in self._queued if not f.done()], []
                    outcomes = await self._hop([work for work, _waiter in batch]) if batch else []
                for (_work, waiter), (ok, value) in zip(batch, outcomes, strict=True):
                    if not waiter.done():
                        if ok:
                            waiter.set_result(value)
                        else:
                            waiter.set_exception(value)
                batch = []
        except BaseException:  # cancelled (the loop is closing): nobody may wait forever
            for _work, waiter in (*batch, *self._queued):
                waiter.cancel()
            self._queued = []
            raise
        finally:
            self._taker = None

    async def _hop(self, works: list[Callable[[sqlite3.Connection], Any]]) -> list[tuple[bool, Any]]:
        """``works`` in one hop, committed together: (True, its result) or (False, its error) for each."""
        try:
            outcomes, commits = await self._store._on_thread(lambda db: group_commit(db, works))
        except Exception as exc:  # the hop itself failed (e.g. the connection is closed)
            return [(False, exc)] * len(works)
        self.writes += len(works)
        self.commits += commits
        return outcomes


def group_commit(
    db: sqlite3.Connection, works: Sequence[Callable[[sqlite3.Connection], Any]]
) -> tuple[list[tuple[bool, Any]], int]:
    """Each of ``works`` as if in its own transaction, committed together; each outcome, and the commits made.

    Group commit, run on the thread that owns ``db``: the works share one
    transaction, each inside its own savepoint, so a failing one is rolled
    back alone and the others commit together, once. An outcome is (True,
    what the work returned) or (False, its error), as :func:`one_transaction`
    gives. If the shared transaction itself fails (SQLite rolled it back, as a
    trigger's ``RAISE(ROLLBACK)`` makes it, or the commit failed), every work
    is carried out again on its own, in its own transaction. A single work is
    :func:`one_transaction`.

    Both writers use it: the single-process store's hops (:class:`_WriteQueue`)
    and the store writer's requests (:class:`arena_server.store.writer.StoreWriter`).
    """
    if len(works) <= 1:
        outcomes = [one_transaction(db, work) for work in works]
        return outcomes, sum(ok for ok, _value in outcomes)
    outcomes = []
    try:
        db.execute("BEGIN IMMEDIATE")
        for work in works:
            db.execute("SAVEPOINT work")
            try:
                outcomes.append((True, work(db)))
            except Exception as exc:
                db.execute("ROLLBACK TO work")  # (fails if SQLite ended the transaction: all again, below)
                outcomes.append((False, exc))
            db.execute("RELEASE work")
        db.execute("COMMIT")
        return outcomes, 1
    except BaseException as exc:
        if db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
        if not isinstance(exc, sqlite3.Error):
            raise
    outcomes = [one_transaction(db, work) for work in works]
    return outcomes, sum(ok for ok, _value in outcomes)


def one_transaction(db: sqlite3.Connection, work: Callable[[sqlite3.Connection], _T]) -> tuple[bool, Any]:
    """``work`` between BEGIN IMMEDIATE and COMMIT on ``db``: (True, its result) or (False, its error).

    Run on the thread that owns ``db``: the store's database thread, or the
    store writer's (:class:`arena_server.store.writer.StoreWriter`). A failure
    rolls back what ``work`` did (and is returned, not raised, so the
    transactions that share its hop or its batch go on).
    """
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            result = work(db)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                # If SQLite rolled back by itself meanwhile, the original error is the one that matters.
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            raise
    except Exception as exc:
        return False, exc
    return True, result


class DoneCursor:
    """What :class:`_Now`'s ``execute`` gives: the statement's own cursor behind aiosqlite's cursor methods.

    Without a cursor (a journal of statements, :mod:`arena_server.store.writer`) it has no rows.
    """

    def __init__(self, cursor: sqlite3.Cursor | None = None) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return 0 if self._cursor is None else self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return None if self._cursor is None else self._cursor.lastrowid

    async def fetchone(self) -> Any:
        return None if self._cursor is None else self._cursor.fetchone()

    async def fetchall(self) -> list[Any]:
        return [] if self._cursor is None else self._cursor.fetchall()

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> DoneCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class DoneExecution:
    """Awaitable and async context manager, like aiosqlite's ``execute`` result (already done)."""

    def __init__(self, cursor: DoneCursor | None = None) -> None:
        self.cursor = cursor or DoneCursor()

    def __await__(self):  # type: ignore[no-untyped-def]
        return self._get().__await__()

    async def _get(self) -> DoneCursor:
        return self.cursor

    async def __aenter__(self) -> DoneCursor:
        return self.cursor

    async def __aexit__(self, *exc: object) -> None:
        return None


class _Now:
    """An aiosqlite-shaped connection over a plain one, whose every await is already done.

    A store hook written for aiosqlite (a match's rating change, its failure
    report) then runs to its end in one step of its coroutine, on the thread
    that owns the plain connection.
    """

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, parameters: Iterable[Any] = ()) -> DoneExecution:
        return DoneExecution(DoneCursor(self._db.execute(sql, tuple(parameters))))

    def executemany(self, sql: str, parameters: Iterable[Iterable[Any]]) -> DoneExecution:
        return DoneExecution(DoneCursor(self._db.executemany(sql, [tuple(p) for p in parameters])))


def run_now(hook: Callable[[aiosqlite.Connection], Awaitable[Any]], db: sqlite3.Connection) -> None:
    """Run ``hook`` (written for an aiosqlite connection) on the plain ``db``, here and now, through :class:`_Now`.

    Raises:
        StoreError: the hook awaited something other than the database; what it wrote stays in the
            caller's transaction, which the caller rolls back.
    """
    step = hook(_Now(db))  # type: ignore[arg-type]
    try:
        step.send(None)  # type: ignore[attr-defined]
    except StopIteration:
        return
    step.close()  # type: ignore[attr-defined]
    raise StoreError(
        "a store hook awaited something other than the database, so it cannot run inside a shared write; "
        "await only the connection it is given, or use Store.local_transaction"
    )


def _lock(path: str) -> int:
    lock_path = path + ".lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreError(f"cannot create the lock file {lock_path}: {exc.strerror}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StoreError(
            f"another Arena server (pid {holder}) is using {path}; stop it, or pass --db to use another file"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def _unlock(fd: int | None) -> None:
    if fd is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def hash_token(token: str) -> str:
    """How bot tokens are stored: hex SHA-256 (tokens are random, so no salt is needed)."""
    import hashlib

    return hashlib.sha256(token.encode()).hexdigest()
