"""``arena bot``: register bot names, add local commands, submit programs, list bots, read failures.

``add`` works on the database file (the server's own machine); ``submit`` talks to a
server; ``register``, ``list`` and ``failures`` do either (``--db`` for the file,
otherwise ``--server``). The database may be open in a running server at the same
time: the command then shares it without running migrations or start-up recovery.
"""

from __future__ import annotations

import argparse
import io
import sqlite3
import sys
import tarfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import aiosqlite
import grpc

from arena.v1 import bots_pb2 as bp
from arena.v1 import bots_pb2_grpc as bp_grpc
from arena_client import Termination
from arena_server.bots.failures import FailureRow, format_failure, list_failures
from arena_server.bots.formats import foreign_formats, get_format, stored_command
from arena_server.bots.registry import BotRegistry, RegistryError, default_data_dir, reserved_names, unreadable_for
from arena_server.bots.uploads import MAX_UPLOAD_BYTES
from arena_server.cli import CliError, run_async
from arena_server.cli.common import (
    add_connect_timeout_argument,
    add_server_argument,
    connect_blocking,
    default_server,
    server_help,
)
from arena_server.seats.framing import Framing
from arena_server.seats.sandbox import Limits
from arena_server.store.database import SCHEMA_VERSION, Store, StoreError

T = TypeVar("T")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "bot",
        help="register, add, submit and inspect bots",
        description="Bots that the server runs (subprocess bots) or that dial it (remote bots) under a protected name.",
    )
    bot_sub = p.add_subparsers(dest="bot_command", metavar="ACTION", parser_class=type(p))

    add = bot_sub.add_parser(
        "add",
        help="register a local command as a subprocess bot; prints its token",
        description="Register a command on this machine as a subprocess bot (version 1). The token printed "
        "lets you connect remotely under the name or submit new versions. Works while the server runs.",
    )
    add.add_argument("name")
    program = add.add_mutually_exclusive_group(required=True)
    program.add_argument("--cmd", help='the command line, e.g. "python3 bot.py" (run with /bin/sh -c)')
    add_format_options(program, "the file")
    add.add_argument("--games", default="", help="comma-separated games, e.g. rps,tic_tac_toe (a format: its own)")
    add.add_argument("--framing", choices=[f.value for f in Framing], default="json", help="stdio framing")
    add.add_argument("--dir", type=Path, default=None, help="working directory (default: the current directory)")
    add.add_argument("--description", default="", help="one line for listings")
    add.add_argument("--db", default="arena.db", help="the server's database file (default arena.db)")
    add.set_defaults(func=run_add)

    reg = bot_sub.add_parser(
        "register",
        help="claim a bot name and print its secret token",
        description="Claim a name for a remote bot (or for submissions later). Only token holders may play "
        "remotely under the name or submit versions of it. The token is printed once.",
    )
    reg.add_argument("name")
    reg.add_argument("--games", default="", help="comma-separated games (default: say so in the Hello)")
    reg.add_argument("--description", default="", help="one line for listings")
    _add_target(reg)
    reg.set_defaults(func=run_register)

    submit = bot_sub.add_parser(
        "submit",
        help="upload a program as a new version of a registered bot",
        description="Upload a file, an archive (.zip, .tar.gz, .tgz, .tar) or a folder (packed here) with its "
        "run command. The server self-checks it against the random bot and prints the verdict; a rejected "
        "version is never scheduled. Exit code 1 when rejected.",
    )
    submit.add_argument("name")
    submit.add_argument("path", type=Path, metavar="FILE_OR_ARCHIVE", nargs="?", default=None)
    run_with = submit.add_mutually_exclusive_group(required=True)
    run_with.add_argument("--cmd", help='run command inside the unpacked folder, e.g. "python3 bot.py"')
    add_format_options(run_with, "the file (alone, or its path inside FILE_OR_ARCHIVE)")
    submit.add_argument("--token", required=True, help="the token printed when the name was registered")
    submit.add_argument("--framing", choices=[f.value for f in Framing], default="json", help="stdio framing")
    submit.add_argument("--games", default="", help="comma-separated games (default: as registered)")
    add_server_argument(submit)
    add_connect_timeout_argument(submit)
    submit.add_argument("--verbose", "-v", action="store_true", help="print the whole self-check report")
    submit.set_defaults(func=run_submit)

    listing = bot_sub.add_parser("list", help="list registered bots", description="List registered bots.")
    _add_target(listing)
    listing.set_defaults(func=run_list)

    failures = bot_sub.add_parser(
        "failures",
        help="a bot's recent timeouts, crashes, illegal actions and protocol errors",
        description="List a bot's recent failures with the match, the turn, the message it had received "
        "and the end of its stderr.",
    )
    failures.add_argument("name")
    failures.add_argument("--token", default="", help="the bot's token (needed with --server)")
    failures.add_argument("--limit", type=int, default=10, help="how many (default 10, at most 100)")
    _add_target(failures)
    failures.set_defaults(func=run_failures)

    def no_action(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(func=no_action)


def add_format_options(group: argparse._MutuallyExclusiveGroup, what: str) -> None:
    """``--kaggle FILE`` and the like: one option per foreign bot format (:mod:`arena_server.bots.formats`)."""
    for fmt in foreign_formats():
        group.add_argument(f"--{fmt.name}", type=Path, default=None, metavar="FILE", help=f"{what} is {fmt.summary}")


def chosen_format(args: argparse.Namespace) -> tuple[str, Path] | None:
    """``(format, file)`` when a ``--FORMAT FILE`` option was given."""
    for fmt in foreign_formats():
        file = getattr(args, fmt.name, None)
        if file is not None:
            return fmt.name, file
    return None


def _add_target(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--server", default=None, metavar="HOST:PORT", help=server_help("a server"))
    target.add_argument("--db", default=None, help="a database file instead of a server")
    add_connect_timeout_argument(parser)


def _games(text: str) -> list[str]:
    return [g.strip() for g in text.split(",") if g.strip()]


# -- local database -----------------------------------------------------------------------------


async def open_store(db: str) -> Store:
    """Open ``db``, sharing it with a running server if there is one."""
    try:
        return await Store.open(db)
    except StoreError as exc:
        if "another Arena server" not in str(exc):
            raise CliError(str(exc)) from None
    # A server holds the file: share it, without migrations or start-up recovery.
    try:
        conn = await aiosqlite.connect(db, isolation_level=None, timeout=10.0)
        await conn.execute("PRAGMA foreign_keys = ON")
        async with conn.execute("PRAGMA user_version") as cur:
            row = await cur.fetchone()
    except sqlite3.Error as exc:
        raise CliError(f"cannot open database {db}: {exc}") from None
    version = int(row[0]) if row else 0
    if version != SCHEMA_VERSION:
        await conn.close()
        raise CliError(f"{db} has schema version {version}, this arena expects {SCHEMA_VERSION}; restart the server")
    return Store(conn, db, None)


def _with_registry(db: str, action: Callable[[BotRegistry], Awaitable[T]]) -> T:
    async def go() -> T:
        store = await open_store(db)
        try:
            from arena_bots import hosted_bots

            hosted = hosted_bots()
            registry = BotRegistry(store, default_data_dir(db), reserved=reserved_names(hosted))
            return await action(registry)
        except RegistryError as exc:
            raise CliError(str(exc)) from None
        finally:
            await store.close()

    return run_async(go())


def _stub(address: str, connect_timeout: float) -> tuple[grpc.Channel, bp_grpc.BotServiceStub]:
    """A connected channel to ``address`` and its bot service (CliError "cannot reach" after the timeout)."""
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 4 << 20)])
    try:
        connect_blocking(channel, address, connect_timeout)
    except CliError:
        channel.close()
        raise
    return channel, bp_grpc.BotServiceStub(channel)


def _rpc_error(exc: grpc.RpcError, address: str) -> CliError:
    code = exc.code()  # type: ignore[attr-defined]
    if code == grpc.StatusCode.UNAVAILABLE:
        return CliError(f"lost the connection to {address} ({exc.details()})")  # type: ignore[attr-defined]
    return CliError(str(exc.details()))  # type: ignore[attr-defined]


def _print_token(name: str, token: str) -> None:
    print(f"registered {name!r}; its secret token (shown once, keep it safe):")
    print(token)


# -- handlers -----------------------------------------------------------------------------------


def run_add(args: argparse.Namespace) -> int:
    chosen = chosen_format(args)
    if chosen is not None:
        return _add_format(args, *chosen)
    folder = (args.dir or Path.cwd()).resolve()
    if not folder.is_dir():
        raise CliError(f"--dir {folder} is not a directory")
    games = _games(args.games)
    if not games:
        raise CliError("--games needs at least one game, e.g. --games rps")

    async def add(registry: BotRegistry) -> str:
        return await registry.add_local(
            args.name, args.cmd, games, Framing(args.framing), str(folder), args.description
        )

    token = _with_registry(args.db, add)
    _print_token(args.name, token)
    problem = unreadable_for(folder, Limits())
    if problem:
        print(f"arena: warning: {problem}", file=sys.stderr)
    return 0


def _add_format(args: argparse.Namespace, format_name: str, file: Path) -> int:
    if args.dir is not None or args.framing != "json":
        raise CliError(f"--{format_name} runs the file where it lies, with JSON lines; leave out --dir and --framing")

    async def add(registry: BotRegistry) -> str:
        return await registry.add_format_file(args.name, format_name, file, _games(args.games), args.description)

    token = _with_registry(args.db, add)
    _print_token(args.name, token)
    problem = unreadable_for(file.resolve().parent, Limits())
    if problem:
        print(f"arena: warning: {problem}", file=sys.stderr)
    return 0


def run_register(args: argparse.Namespace) -> int:
    games = _games(args.games)
    if args.db:

        async def reg(registry: BotRegistry) -> str:
            return await registry.register(args.name, games, args.description)

        token = _with_registry(args.db, reg)
    else:
        address = args.server or default_server()
        channel, stub = _stub(address, args.connect_timeout)
        with channel:
            try:
                response = stub.RegisterBot(
                    bp.RegisterBotRequest(name=args.name, games=games, description=args.description)
                )
            except grpc.RpcError as exc:
                raise _rpc_error(exc, address) from None
        token = response.token
    _print_token(args.name, token)
    return 0


def read_upload(path: Path) -> tuple[str, bytes]:
    """The file name and bytes to upload; a folder is packed as .tar.gz (without links leaving it)."""
    if path.is_dir():
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            for item in sorted(path.rglob("*")):
                if any(part.startswith(".") for part in item.relative_to(path).parts):
                    continue  # .git, .venv and the like
                archive.add(item, arcname=str(item.relative_to(path)), recursive=False)
        data, name = buffer.getvalue(), f"{path.resolve().name or 'bot'}.tar.gz"
    elif path.is_file():
        data, name = path.read_bytes(), path.name
    else:
        raise CliError(f"{path} is not a file or a folder")
    if len(data) > MAX_UPLOAD_BYTES:
        raise CliError(
            f"{path} is {len(data) / (1 << 20):.1f} MiB; uploads are limited to {MAX_UPLOAD_BYTES >> 20} MiB "
            "(leave out build products and data the bot does not need)"
        )
    return name, data


def run_submit(args: argparse.Namespace) -> int:
    chosen = chosen_format(args)
    command = args.cmd
    if chosen is not None:
        format_name, file = chosen
        if args.path is None:  # the file alone
            args.path, file = file, Path(file.name)
        command = stored_command(get_format(format_name), file.as_posix())
    elif args.path is None:
        raise CliError("give the FILE_OR_ARCHIVE to upload with --cmd")
    filename, content = read_upload(args.path)
    request = bp.SubmitBotRequest(
        name=args.name,
        token=args.token,
        filename=filename,
        content=content,
        command=command,
        framing=bp.BOT_FRAMING_PROTO if args.framing == "proto" else bp.BOT_FRAMING_JSON,
        games=_games(args.games),
    )
    print(f"uploading {filename} ({len(content)} bytes); the server self-checks it, which takes a few seconds")
    channel, stub = _stub(args.server, args.connect_timeout)
    with channel:
        try:
            response = stub.SubmitBot(request, timeout=600)
        except grpc.RpcError as exc:
            raise _rpc_error(exc, args.server) from None
    accepted = response.verdict == bp.SUBMISSION_VERDICT_ACCEPTED
    if args.verbose or not accepted:
        print(response.report)
    if accepted:
        print(f"accepted: {response.name} version {response.version} now plays under its name")
        return 0
    print(f"rejected: {response.name} version {response.version}: {response.first_error}")
    return 1


def run_list(args: argparse.Namespace) -> int:
    rows: list[tuple[str, str, str, int, int, str]] = []
    if args.db:

        async def collect(registry: BotRegistry) -> None:
            await registry.refresh()
            for b in await registry.list_bots():
                rows.append((b.name, b.kind, ",".join(b.games), b.accepted_version, b.latest_version, b.description))

        _with_registry(args.db, collect)
    else:
        address = args.server or default_server()
        channel, stub = _stub(address, args.connect_timeout)
        with channel:
            try:
                response = stub.ListBots(bp.ListBotsRequest())
            except grpc.RpcError as exc:
                raise _rpc_error(exc, address) from None
        for s in response.bots:
            rows.append((s.name, s.kind, ",".join(s.games), s.accepted_version, s.latest_version, s.description))
    if not rows:
        print("no registered bots")
        return 0
    print(f"{'name':<24} {'kind':<11} {'version':>7} {'latest':>6}  games")
    for name, kind, games, accepted, latest, description in rows:
        line = f"{name:<24} {kind:<11} {accepted or '-':>7} {latest or '-':>6}  {games or 'any'}"
        print(line + (f"  ({description})" if description else ""))
    return 0


def run_failures(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 100:
        raise CliError(f"--limit {args.limit} is out of range; use 1..100")
    rows: list[FailureRow] = []
    if args.db:

        async def collect(registry: BotRegistry) -> None:
            rows.extend(await list_failures(registry.store.conn, args.name, args.limit))

        _with_registry(args.db, collect)
    else:
        address = args.server or default_server()
        channel, stub = _stub(address, args.connect_timeout)
        with channel:
            try:
                response = stub.GetFailures(bp.GetFailuresRequest(name=args.name, token=args.token, limit=args.limit))
            except grpc.RpcError as exc:
                raise _rpc_error(exc, address) from None
        for f in response.failures:
            rows.append(
                FailureRow(
                    f.match_id,
                    f.game,
                    f.seat,
                    args.name,
                    f.version,
                    "",
                    Termination(f.termination),
                    f.reason,
                    f.turn_id,
                    f.received,
                    f.sent,
                    f.stderr_tail,
                    f.at.ToDatetime(),
                )
            )
    if not rows:
        print(f"no failures recorded for {args.name!r}")
        return 0
    print(f"{len(rows)} most recent failure(s) of {args.name!r}, newest first:")
    for row in rows:
        print(format_failure(row))
    return 0
