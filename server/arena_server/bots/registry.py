"""Registered bots: names with secret tokens, local commands, submitted programs and their versions.

A bot name is claimed once (:meth:`BotRegistry.register`) and answered with a secret
token that is stored only as its SHA-256. The token holder may submit programs
(:meth:`BotRegistry.submit`): each submission becomes the next version of the bot,
unpacked under ``<data dir>/bots/<name>/v<version>/``, and is self-checked against the
random bot (:func:`arena_server.bots.conformance.check_bot`) before it is accepted. A
rejected version is kept with its report and never seated. A local command
(:meth:`BotRegistry.add_local`, ``arena bot add``) is registered as version 1 without
a self-check: whoever runs the server vouches for it.

The registry keeps, in memory, the newest accepted version of every subprocess bot so
that the hub can answer "which games does this bot play" without a query, and turns a
name into a :class:`~arena_server.seats.subprocess_seat.SubprocessSeat` (:meth:`BotRegistry.seat`).

Every write goes through the store (:meth:`Store.insert_bot <arena_server.store.database.Store.insert_bot>`,
``reserve_version``, ``set_verdict``), whose one writer runs the checks that read (a look-alike
name, the version quota and number) inside the write's transaction: the database thread of a
single-process server, the main process's writer with ``arena serve --workers N``. With several
workers the in-memory programs of each worker's registry follow the others' submissions through
the writer's notices (:func:`arena_server.cli.workers.follow_bot_changes` calls :meth:`BotRegistry.refresh`),
and a name not known yet reloads them too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import sqlite3
import string
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from arena_client import SeatInfo, TimeControl
from arena_games import registered_games
from arena_server.bots.conformance import check_bot, format_report
from arena_server.bots.formats import (
    BotFormat,
    FormatError,
    bot_program,
    check_file,
    get_format,
    parse_command,
    prepare_local,
)
from arena_server.bots.uploads import UploadError, unpack_upload
from arena_server.seats.framing import Framing
from arena_server.seats.process import BotProgram
from arena_server.seats.sandbox import Limits
from arena_server.seats.subprocess_seat import SubprocessSeat
from arena_server.store.bot_writes import BotWriteRefused, NewBot, NewVersion, Verdict
from arena_server.store.database import Store, hash_token
from arena_server.store.names import name_key

MAX_VERSIONS_PER_BOT = 50
"""Versions (accepted or rejected) one bot may have: one token holder's quota of submissions."""
MAX_BYTES_PER_BOT = 200 << 20
"""Disk space the unpacked versions of one bot may take together."""
MAX_DATA_DIR_BYTES = 10 << 30
"""Disk space all submitted bots may take together (bot names are free to register)."""

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")
SELF_CHECK_CLOCK = TimeControl(timedelta(seconds=2), timedelta(seconds=2), timedelta(seconds=0.5))


class RegistryError(Exception):
    """A refused request; ``code`` is one of ``bad_name``, ``taken``, ``unknown_bot``,
    ``unauthenticated``, ``bad_upload``, ``bad_params``, ``quota``, ``unsandboxed``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class RegisteredProgram:
    """The newest accepted version of a subprocess bot."""

    name: str
    version: int
    command: str
    framing: Framing
    workdir: str | None
    games: tuple[str, ...]


@dataclass(frozen=True)
class BotListing:
    """One registered bot, for listings."""

    name: str
    kind: str
    games: tuple[str, ...]
    accepted_version: int
    latest_version: int
    description: str
    created_at: datetime


@dataclass
class SubmissionResult:
    """What a submission came to."""

    name: str
    version: int
    accepted: bool
    first_error: str = ""
    report: str = ""
    files: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class VersionListing:
    """One version of a registered bot and the verdict of its self-check."""

    version: int
    status: str
    """``accepted``, ``rejected`` or ``checking``."""
    command: str
    games: tuple[str, ...]
    check_report: str
    created_at: datetime


@dataclass(frozen=True)
class BotDetails:
    """A registered bot's public facts (never its token) and its versions, newest first."""

    name: str
    kind: str
    description: str
    created_at: datetime
    versions: tuple[VersionListing, ...]


async def bot_details(store: Store, name: str, limit: int = MAX_VERSIONS_PER_BOT) -> BotDetails | None:
    """The registered bot ``name`` with its newest ``limit`` versions, or None if no such name is registered."""
    async with store.conn.execute(
        "SELECT id, name, kind, description, created_at FROM bots WHERE name = ?", (name,)
    ) as cur:
        row = await cur.fetchone()
    if row is None:
        return None
    async with store.conn.execute(
        "SELECT version, status, COALESCE(command, ''), games, check_report, created_at FROM bot_versions "
        "WHERE bot_id = ? ORDER BY version DESC LIMIT ?",
        (row[0], limit),
    ) as cur:
        versions = tuple(
            VersionListing(int(v), st, cmd, tuple(json.loads(g or "[]")), rep, datetime.fromisoformat(at))
            for v, st, cmd, g, rep, at in await cur.fetchall()
        )
    return BotDetails(row[1], row[2], row[3], datetime.fromisoformat(row[4]), versions)


TOKEN_ALPHABET = string.ascii_letters + string.digits


def new_token() -> str:
    """A bot's secret token: 32 letters and digits (190 bits).

    Never ``-`` or ``_`` (``token_urlsafe`` could start a token with ``-``, which a command
    line then read as an option: ``arena bot failures NAME --token -x...`` failed).
    """
    return "".join(secrets.choice(TOKEN_ALPHABET) for _ in range(32))


def default_data_dir(db_path: str) -> Path:
    """Where submitted bots live by default: ``arena-data/`` next to the database file."""
    return Path(db_path).resolve().parent / "arena-data"


MAX_NAME_CHARS = 40
"""The longest bot name, in characters (registered and connecting names alike)."""

_NAME_PUNCTUATION = frozenset("-_.")


def reserved_names(names: Iterable[str]) -> Callable[[str], bool]:
    """A test for names that normalise to one of ``names`` (the hosted bots), for :class:`BotRegistry`."""
    keys = frozenset(name_key(n) for n in names)
    return lambda name: name_key(name) in keys


def shown_name(name: str) -> str:
    """A name as an error message may quote it: escaped, and cut short when long."""
    if len(name) <= MAX_NAME_CHARS:
        return repr(name)
    return f"{name[:MAX_NAME_CHARS]!r}... ({len(name)} characters)"


def just_registered(name: str) -> str:
    """What a guest connected under ``name`` (or a look-alike) is told when the name is registered."""
    return f"the name {name!r} has just been registered by its owner; reconnect under another name"


def check_name(name: str) -> str:
    """Check a name to register: ASCII letters, digits, '-', '_', '.', at most 40 characters.

    Raises:
        RegistryError: ``bad_name``, with a message saying what is allowed.
    """
    if not NAME_PATTERN.match(name):
        raise RegistryError(
            "bad_name",
            f"the bot name {shown_name(name)} is not allowed; use 1 to {MAX_NAME_CHARS} letters, digits, "
            "'-', '_' or '.', starting with a letter or digit",
        )
    return name


def check_player_name(name: str) -> str:
    """Check the name a connecting bot asks for in its Hello (any script, no controls).

    Letters and digits of any script, '-', '_' and '.', starting with a letter
    or digit, 1 to 40 characters after NFKC. Control and format characters
    (ANSI escapes, zero-width and bidirectional marks), spaces and combining
    marks are refused.

    Returns:
        The name in NFKC form.

    Raises:
        RegistryError: ``bad_name``, with a message saying what was wrong.
    """
    allowed = (
        f"use 1 to {MAX_NAME_CHARS} letters, digits, '-', '_' or '.', starting with a letter or digit, "
        "or leave the name empty to play as a guest"
    )
    if len(name) > MAX_NAME_CHARS * 4:  # far too long: do not even normalise it
        raise RegistryError("bad_name", f"the bot name {shown_name(name)} is too long; {allowed}")
    nfkc = unicodedata.normalize("NFKC", name)
    for char in nfkc:
        category = unicodedata.category(char)
        if category[0] in "LN" or char in _NAME_PUNCTUATION:
            continue
        what = "a control character" if category == "Cc" else "a format character" if category == "Cf" else ""
        what = what or ("a space" if category[0] == "Z" else f"the character {char!r}")
        raise RegistryError(
            "bad_name", f"the bot name {shown_name(name)} contains {what} (U+{ord(char):04X}); {allowed}"
        )
    if not 1 <= len(nfkc) <= MAX_NAME_CHARS:
        raise RegistryError("bad_name", f"the bot name {shown_name(name)} has {len(nfkc)} characters; {allowed}")
    if nfkc[0] in _NAME_PUNCTUATION:
        raise RegistryError("bad_name", f"the bot name {shown_name(name)} starts with {nfkc[0]!r}; {allowed}")
    return nfkc


def check_games(games: Iterable[str]) -> tuple[str, ...]:
    out = tuple(dict.fromkeys(g.strip() for g in games if g.strip()))
    unknown = [g for g in out if g not in registered_games()]
    if unknown:
        raise RegistryError("bad_params", f"unknown game {unknown[0]!r}; games are: {', '.join(registered_games())}")
    return out


class BotRegistry:
    """Registered bots over the store, plus the data directory of submitted programs.

    Set :attr:`uploads_refused` to a reason to refuse every submission (``arena serve`` does
    when this machine cannot confine a bot's filesystem and the operator did not allow it).

    Args:
        store: The open store.
        data_dir: Where submitted programs are unpacked (created on first use).
        limits: Limits of every subprocess bot the registry seats, self-checks included.
        reserved: Names that cannot be registered (the hosted reference bots).
    """

    def __init__(
        self,
        store: Store,
        data_dir: Path | str,
        limits: Limits | None = None,
        reserved: Callable[[str], bool] | None = None,
    ) -> None:
        self.store = store
        self.data_dir = Path(data_dir)
        self.limits = limits or Limits()
        self.reserved = reserved or (lambda name: False)
        self.programs: dict[str, RegisteredProgram] = {}
        """Newest accepted version of every subprocess bot, by name."""
        self.startup_timeout = 10.0
        self.uploads_refused: str | None = None

    # -- reading ------------------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Reload the accepted programs from the store (another process may have added bots)."""
        sql = (
            "SELECT b.name, v.version, v.command, v.framing, v.workdir, v.games, b.games FROM bots b "
            "JOIN bot_versions v ON v.bot_id = b.id WHERE v.status = 'accepted' AND v.command IS NOT NULL "
            "AND v.version = (SELECT MAX(w.version) FROM bot_versions w WHERE w.bot_id = b.id "
            "AND w.status = 'accepted' AND w.command IS NOT NULL)"
        )
        async with self.store.conn.execute(sql) as cur:
            rows = await cur.fetchall()
        self.programs = {
            r[0]: RegisteredProgram(
                r[0], int(r[1]), r[2], Framing(r[3] or "json"), r[4], tuple(json.loads(r[5]) or json.loads(r[6]))
            )
            for r in rows
        }

    async def list_bots(self) -> list[BotListing]:
        sql = (
            "SELECT b.name, b.kind, b.games, b.description, b.created_at, "
            "COALESCE((SELECT MAX(version) FROM bot_versions v WHERE v.bot_id = b.id AND v.status = 'accepted'), 0), "
            "COALESCE((SELECT MAX(version) FROM bot_versions v WHERE v.bot_id = b.id), 0) "
            "FROM bots b WHERE b.kind != 'hosted' ORDER BY b.name"
        )
        async with self.store.conn.execute(sql) as cur:
            rows = await cur.fetchall()
        out = []
        for name, kind, games, description, created, accepted, latest in rows:
            program = self.programs.get(name)
            shown = program.games if program is not None and program.version == accepted else tuple(json.loads(games))
            out.append(
                BotListing(name, kind, shown, int(accepted), int(latest), description, datetime.fromisoformat(created))
            )
        return out

    async def is_registered(self, name: str) -> bool:
        return await self.store.bot_token_hash(name) is not None

    async def registered_like(self, name: str) -> str | None:
        """The registered name that ``name`` normalises to (itself included), or None."""
        return (await self.lookup(name))[0]

    async def lookup(self, name: str) -> tuple[str | None, str | None]:
        """What a Hello needs to know of ``name``, in one hop to the database thread.

        Returns:
            The registered name ``name`` normalises to (itself included) or None, and the token hash
            registered under ``name`` itself or None.
        """
        key = name_key(name)

        def find(db: sqlite3.Connection) -> tuple[str | None, str | None]:
            like: str | None = None
            token: str | None = None
            # Indexed (bots.name, bots.name_key): no read of the whole table per Hello. A row without a
            # key (inserted by hand since the database was opened) is keyed here.
            rows = db.execute(
                "SELECT name, token_hash, name_key FROM bots WHERE name = ? OR name_key = ? OR name_key IS NULL "
                "ORDER BY id",
                (name, key),
            )
            for other, token_hash, other_key in rows:
                if other == name:
                    token = token_hash
                if like is None and (other_key or name_key(other)) == key:
                    like = str(other)
            return like, token

        return await self.store.read(find)

    async def check_token(self, name: str, token: str) -> None:
        """Raise RegistryError unless ``token`` is the token of the registered bot ``name``."""
        stored = await self.store.bot_token_hash(name)
        if stored is None:
            async with self.store.conn.execute("SELECT 1 FROM bots WHERE name = ?", (name,)) as cur:
                exists = await cur.fetchone() is not None
            if not exists:
                raise RegistryError("unknown_bot", f"no bot named {name!r} is registered; register it first")
            raise RegistryError("unauthenticated", f"{name!r} has no token and cannot be changed remotely")
        if not token or not secrets.compare_digest(hash_token(token), stored):
            raise RegistryError(
                "unauthenticated", f"wrong token for {name!r}; use the token printed when the name was registered"
            )

    # -- writing ------------------------------------------------------------------------------------

    async def register(self, name: str, games: Sequence[str] = (), description: str = "") -> str:
        """Claim ``name`` for a bot without a program (remote, or submitted later); return its token."""
        return await self._insert_bot(name, "remote", check_games(games), description, None)

    async def add_local(
        self,
        name: str,
        command: str,
        games: Sequence[str],
        framing: Framing = Framing.JSON,
        workdir: str | None = None,
        description: str = "",
    ) -> str:
        """Register a local command as a subprocess bot (version 1, accepted); return its token."""
        if not command.strip():
            raise RegistryError("bad_params", "the command is empty; give the command line that starts the bot")
        return await self._insert_bot(name, "subprocess", check_games(games), description, (command, framing, workdir))

    async def _insert_bot(
        self,
        name: str,
        kind: str,
        games: tuple[str, ...],
        description: str,
        program: tuple[str, Framing, str | None] | None,
    ) -> str:
        check_name(name)
        if self.reserved(name):
            raise RegistryError(
                "taken", f"{name!r} is (or looks like) the name of a hosted reference bot; pick another name"
            )
        token = new_token()
        now = datetime.now(UTC).isoformat()
        row = NewBot(name, kind, games, hash_token(token), description, now)
        if program is not None:
            row = replace(row, command=program[0], framing=str(program[1]), workdir=program[2])
        try:
            # The look-alike check and the insert run in one transaction of the store's one writer (the main
            # process's, with --workers), so two look-alike names registered at once cannot both get in.
            await self.store.insert_bot(row)
        except BotWriteRefused as exc:
            raise RegistryError(exc.code, exc.message) from None
        if program is not None:
            command, framing, workdir = program
            self.programs[name] = RegisteredProgram(name, 1, command, framing, workdir, games)
        return token

    async def submit(
        self,
        name: str,
        token: str,
        filename: str,
        content: bytes,
        command: str,
        framing: Framing = Framing.JSON,
        games: Sequence[str] = (),
    ) -> SubmissionResult:
        """Store an uploaded program as the next version of ``name`` and self-check it.

        Raises:
            RegistryError: unknown name, wrong token, bad arguments, an unsafe upload.
        """
        await self.check_token(name, token)
        if self.uploads_refused is not None:
            raise RegistryError("unsandboxed", self.uploads_refused)
        if not command.strip():
            raise RegistryError("bad_params", 'the command is empty; give the command that runs the bot, e.g. "./bot"')
        wanted = check_games(games)
        fmt = _format_of(command)
        if fmt is not None:
            framing = Framing.JSON  # the runner speaks JSON lines
            try:
                wanted = fmt.check_games(wanted)
            except FormatError as exc:
                raise RegistryError("bad_params", str(exc)) from None
        conn = self.store.conn
        async with conn.execute("SELECT id, games FROM bots WHERE name = ?", (name,)) as cur:
            row = await cur.fetchone()
        assert row is not None
        bot_id, registered = int(row[0]), tuple(json.loads(row[1]))
        wanted = wanted or registered
        new = NewVersion(
            bot_id, name, command, str(framing), wanted, datetime.now(UTC).isoformat(), MAX_VERSIONS_PER_BOT
        )
        try:
            version = await self.store.reserve_version(new)  # (the quota and the number read in its transaction)
        except BotWriteRefused as exc:
            raise RegistryError(exc.code, exc.message) from None
        folder = self.data_dir / "bots" / name / f"v{version}"
        try:
            if folder.exists():  # left over from a crash while checking: start clean
                shutil.rmtree(folder)
            folder.mkdir(parents=True, mode=0o755)
            for parent in (self.data_dir, self.data_dir / "bots", self.data_dir / "bots" / name):
                parent.chmod(0o755)
            files = await asyncio.to_thread(unpack_upload, filename, content, folder)
            await asyncio.to_thread(self._check_bytes_quota, name)
            if fmt is not None:
                await asyncio.to_thread(_check_format_file, command, folder, self.limits)
        except RegistryError as exc:
            await self._set_verdict(bot_id, name, version, "rejected", f"upload refused: {exc}", wanted, str(folder))
            shutil.rmtree(folder, ignore_errors=True)
            raise
        except (UploadError, OSError) as exc:
            await self._set_verdict(bot_id, name, version, "rejected", f"upload refused: {exc}", wanted, str(folder))
            shutil.rmtree(folder, ignore_errors=True)
            if isinstance(exc, UploadError):
                raise RegistryError("bad_upload", str(exc)) from None
            raise RegistryError("bad_upload", f"could not store the upload: {exc}") from None
        program = self.program_for(RegisteredProgram(name, version, command, framing, str(folder), wanted))
        report = await check_bot(program, list(wanted), SELF_CHECK_CLOCK, seed=f"self-check:{name}:{version}")
        text = format_report(report)
        first = report.first_error()
        accepted = report.passed
        if not accepted and first is None:
            first_error = "the self-check played no scenario"
        else:
            first_error = "" if first is None else f"{first.scenario}: {first.detail}"
        if report.hello is not None and not wanted:
            wanted = tuple(g for g in report.hello.games if g in registered_games())
        status = "accepted" if accepted else "rejected"
        await self._set_verdict(bot_id, name, version, status, text, wanted, str(folder))
        if accepted:
            self.programs[name] = RegisteredProgram(name, version, command, framing, str(folder), wanted)
        return SubmissionResult(name, version, accepted, first_error, text, files)

    async def add_format_file(
        self, name: str, format_name: str, file: Path, games: Sequence[str] = (), description: str = ""
    ) -> str:
        """Register ``file``, a bot in a foreign format (``kaggle``, ...), as a subprocess bot run where it lies."""
        try:
            fmt = get_format(format_name)
            wanted = fmt.check_games(check_games(games))
            command, workdir = await asyncio.to_thread(prepare_local, format_name, file, self.limits)
        except FormatError as exc:
            raise RegistryError("bad_params", str(exc)) from None
        return await self._insert_bot(name, "subprocess", wanted, description, (command, Framing.JSON, workdir))

    def _check_bytes_quota(self, name: str) -> None:
        """Raise RegistryError when ``name``'s stored versions, or all bots together, exceed their quota."""
        used = _disk_usage(self.data_dir / "bots" / name)
        if used > MAX_BYTES_PER_BOT:
            raise RegistryError(
                "quota",
                f"{name!r} would take {used / (1 << 20):.1f} MiB with this version; the limit per bot is "
                f"{MAX_BYTES_PER_BOT >> 20} MiB over all its versions: upload less or ask the operator to "
                "remove old versions",
            )
        total = _disk_usage(self.data_dir / "bots")
        if total > MAX_DATA_DIR_BYTES:
            raise RegistryError(
                "quota",
                f"submitted bots would take {total / (1 << 20):.1f} MiB on this server with this version, over its "
                f"limit of {MAX_DATA_DIR_BYTES >> 20} MiB for all bots; ask the operator to make room",
            )

    async def _set_verdict(
        self, bot_id: int, name: str, version: int, status: str, report: str, games: tuple[str, ...], workdir: str
    ) -> None:
        await self.store.set_verdict(Verdict(bot_id, name, version, status, report, games, workdir))

    # -- seats --------------------------------------------------------------------------------------

    def program_for(self, registered: RegisteredProgram) -> BotProgram:
        """How to run ``registered``: its command line, or its file through its format's runner."""
        return bot_program(
            registered.command, registered.framing, registered.workdir, self.limits, self.startup_timeout
        )

    def seat(self, name: str, index: int) -> SubprocessSeat:
        """A fresh seat running the newest accepted version of ``name`` (close it after the match)."""
        registered = self.programs[name]
        return SubprocessSeat(self.program_for(registered), SeatInfo(index, name, registered.version, "subprocess"))


def _format_of(command: str) -> BotFormat | None:
    """The format a submitted command names (None for a command line); RegistryError for a bad one."""
    try:
        parsed = parse_command(command)
    except FormatError as exc:
        raise RegistryError("bad_params", str(exc)) from None
    if parsed is None:
        return None
    file_name = parsed[1]
    if file_name.startswith("/") or ".." in Path(file_name).parts:
        raise RegistryError("bad_params", f"{file_name!r}: name the bot's file by its path inside the upload")
    return parsed[0]


def _check_format_file(command: str, folder: Path, limits: Limits) -> None:
    """Raise RegistryError unless the file a format command names is in ``folder`` and can start here."""
    parsed = parse_command(command)
    assert parsed is not None
    fmt, file_name = parsed
    path = folder / file_name
    if not path.is_file():
        inside = ", ".join(sorted(p.name for p in folder.iterdir())[:10]) or "nothing"
        raise RegistryError(
            "bad_upload", f"the upload has no file {file_name!r} for the {fmt.name} runner; it holds {inside}"
        )
    try:
        check_file(fmt, path, limits)
    except FormatError as exc:
        raise RegistryError("bad_upload", str(exc)) from None


def _disk_usage(folder: Path) -> int:
    """Bytes of the regular files under ``folder`` (links are not followed)."""
    total = 0
    for path, _dirs, files in os.walk(folder):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(path, f)).st_size
    return total


def unreadable_for(path: Path, limits: Limits) -> str | None:
    """Why bots (running as ``nobody`` when the server is root) could not reach ``path``, or None."""
    from arena_server.seats.sandbox import RUN_AS_AUTO

    if os.geteuid() != 0 or limits.run_as is None or (limits.run_as != RUN_AS_AUTO and limits.run_as == "root"):
        return None
    current = path.resolve()
    for folder in (current, *current.parents):
        if folder.exists() and not folder.stat().st_mode & 0o001:
            return f"{folder} is not searchable by other users, so bots running as nobody cannot reach {path}"
    return None


async def prepare_registry(registry: BotRegistry, data_dir: str | None) -> None:
    """Set the data directory (``arena serve --data-dir``), load the registered bots, warn about permissions."""
    import sys

    if data_dir:
        registry.data_dir = Path(data_dir).resolve()
    problem = unreadable_for(registry.data_dir.parent, registry.limits)
    if problem:
        print(f"arena: warning: {problem}; submitted bots will fail their self-check (use --data-dir)", file=sys.stderr)
    await registry.refresh()
    if registry.programs:
        print(f"arena: subprocess bots: {', '.join(sorted(registry.programs))}", flush=True)


async def check_sandbox(registry: BotRegistry, allow_unsandboxed: bool) -> None:
    """At start-up: say how bots are isolated; without a filesystem sandbox, refuse uploads unless allowed."""
    import sys

    from arena_server.seats.sandbox import probe_isolation, system_paths

    isolation = await probe_isolation(registry.limits)
    if isolation.filesystem_confined:
        print(f"arena: bot sandbox: {isolation.filesystem} ({isolation.description})", file=sys.stderr, flush=True)
        readable = [*system_paths(), *registry.limits.readable]
        for what, path in (("database", str(registry.store.path)), ("data directory", str(registry.data_dir))):
            real = os.path.realpath(path)
            inside = [p for p in readable if real == os.path.realpath(p) or real.startswith(os.path.realpath(p) + "/")]
            if inside:
                print(
                    f"arena: warning: the {what} {real} is under {inside[0]}, which every bot may read; move it",
                    file=sys.stderr,
                    flush=True,
                )
        return
    print(
        "arena: warning: this kernel offers neither Landlock nor user+mount namespaces: subprocess bots can read "
        f"every file their user can, the database included ({isolation.description})",
        file=sys.stderr,
        flush=True,
    )
    if allow_unsandboxed:
        print("arena: warning: accepting uploaded bots anyway (--allow-unsandboxed-uploads)", file=sys.stderr)
        return
    registry.uploads_refused = (
        "this server cannot sandbox uploaded bots on its kernel (no Landlock, no user+mount namespaces), so it "
        "refuses uploads; its operator can allow them with arena serve --allow-unsandboxed-uploads"
    )
    print("arena: uploads refused; pass --allow-unsandboxed-uploads to accept them anyway", file=sys.stderr)
