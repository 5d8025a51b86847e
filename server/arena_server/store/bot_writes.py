"""The writes of the bot registry, as functions of a plain ``sqlite3`` connection inside a transaction.

A registration and a submission read inside their write: the look-alike check
must see every name committed before the insert, and a new version's number
and the version quota must see every version. Run as one function inside the
writer's transaction, the read and the write cannot interleave with another
registration, whichever process asked for it. The same functions serve both
writers: the single-process :class:`~arena_server.store.database.Store` (its
database thread) and the store writer of ``arena serve --workers N``
(:class:`~arena_server.store.writer.StoreWriter`, a thread of the main
process), so a worker's registration is checked exactly as a single
process's is.

A refusal is a :class:`BotWriteRefused` raised inside the transaction: the
writer rolls that write back alone (its savepoint, under group commit) and the
caller gets the exception itself, across the process hop too; the registry
turns it into the same ``RegistryError`` code and message.

The arguments are plain values (the rows), so they pickle to the main process.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from arena_server.store.names import name_key


class BotWriteRefused(Exception):
    """A registry write refused inside its transaction; ``code`` is a ``RegistryError`` code (``taken``, ``quota``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class NewBot:
    """The row of a bot to register, and its version 1 when it comes with a program (``arena bot add``)."""

    name: str
    kind: str
    games: tuple[str, ...]
    token_hash: str
    description: str
    created_at: str
    command: str | None = None
    framing: str | None = None
    workdir: str | None = None


@dataclass(frozen=True)
class NewVersion:
    """A submitted program's next version, stored as ``checking`` until its self-check's verdict."""

    bot_id: int
    name: str
    command: str
    framing: str
    games: tuple[str, ...]
    created_at: str
    max_versions: int
    """The quota: versions (accepted or rejected) one bot may have."""


@dataclass(frozen=True)
class Verdict:
    """A self-check's verdict on a version; an accepted one also makes its bot a subprocess bot."""

    bot_id: int
    name: str
    version: int
    status: str
    report: str
    games: tuple[str, ...]
    workdir: str


def insert_bot(db: sqlite3.Connection, bot: NewBot) -> int:
    """Register ``bot`` unless a registered name looks the same; its id.

    Raises:
        BotWriteRefused: ``taken``, naming the registered look-alike.
    """
    key = name_key(bot.name)
    rows = db.execute("SELECT name, name_key FROM bots WHERE name_key = ? OR name_key IS NULL ORDER BY id", (key,))
    for other, other_key in rows.fetchall():
        if (other_key or name_key(other)) == key:
            same = "is" if other == bot.name else f"looks the same as {other!r}, which is"
            raise BotWriteRefused("taken", f"the name {bot.name!r} {same} already registered; pick another name")
    games = json.dumps(list(bot.games))
    cursor = db.execute(
        "INSERT INTO bots (name, kind, games, token_hash, description, created_at, name_key) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (bot.name, bot.kind, games, bot.token_hash, bot.description, bot.created_at, key),
    )
    bot_id = int(cursor.lastrowid or 0)
    if bot.command is not None:
        db.execute(
            "INSERT INTO bot_versions (bot_id, version, command, framing, workdir, created_at, status, games) "
            "VALUES (?, 1, ?, ?, ?, ?, 'accepted', ?)",
            (bot_id, bot.command, bot.framing, bot.workdir, bot.created_at, games),
        )
    return bot_id


def reserve_version(db: sqlite3.Connection, new: NewVersion) -> int:
    """Store the next version of ``new.bot_id`` as ``checking``, within its quota; its number.

    Raises:
        BotWriteRefused: ``quota`` when the bot already has ``new.max_versions`` versions.
    """
    count, last = db.execute(
        "SELECT COUNT(*), COALESCE(MAX(version), 0) FROM bot_versions WHERE bot_id = ?", (new.bot_id,)
    ).fetchone()
    if count >= new.max_versions:
        raise BotWriteRefused(
            "quota",
            f"{new.name!r} already has {count} versions, the limit per bot; "
            "ask the server's operator to remove old versions",
        )
    version = int(last) + 1
    db.execute(
        "INSERT INTO bot_versions (bot_id, version, command, framing, workdir, created_at, status, games) "
        "VALUES (?, ?, ?, ?, NULL, ?, 'checking', ?)",
        (new.bot_id, version, new.command, new.framing, new.created_at, json.dumps(list(new.games))),
    )
    return version


def set_verdict(db: sqlite3.Connection, verdict: Verdict) -> None:
    """Record ``verdict``; an accepted version makes its bot a ``subprocess`` bot, in the same transaction."""
    games = json.dumps(list(verdict.games))
    db.execute(
        "UPDATE bot_versions SET status = ?, check_report = ?, games = ?, workdir = ? WHERE bot_id = ? AND version = ?",
        (verdict.status, verdict.report, games, verdict.workdir, verdict.bot_id, verdict.version),
    )
    if verdict.status == "accepted":
        db.execute("UPDATE bots SET kind = 'subprocess' WHERE id = ?", (verdict.bot_id,))
