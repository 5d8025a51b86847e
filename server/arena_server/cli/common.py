"""Argument helpers shared by several subcommands."""

from __future__ import annotations

import argparse
import errno
import gc
import os
import socket
import sys
import tempfile
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc

from arena_client import TimeControl
from arena_client.remote import ServerUnreachable, wait_until_reachable, wait_until_reachable_blocking
from arena_games import Game, GameError, load_game
from arena_server.cli import CliError
from arena_server.store.database import Store, StoreError

DEFAULT_ADDRESS = "localhost:50051"
SERVER_ENV = "ARENA_SERVER"


def default_server() -> str:
    """The server a ``--server`` option means when omitted: ``$ARENA_SERVER``, else localhost:50051."""
    return os.environ.get(SERVER_ENV, "").strip() or DEFAULT_ADDRESS


def server_help(what: str = "the Arena server") -> str:
    """The help text of a ``--server`` option (it names the environment default)."""
    return f"{what} (default: ${SERVER_ENV} if set, else {DEFAULT_ADDRESS})"


def add_server_argument(parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup) -> None:
    """``--server HOST:PORT``, defaulting to ``$ARENA_SERVER`` (read when the parser is built)."""
    parser.add_argument("--server", default=default_server(), metavar="HOST:PORT", help=server_help())


def check_can_listen(host: str, port: int, option: str) -> None:
    """Fail with one line when ``host:port`` cannot be bound (taken, or not this machine's address).

    Run before a server starts, so the user sees this instead of gRPC's own log. Port 0 always works.

    Raises:
        CliError: the port is taken or the address is not local, with what to do.
    """
    if port == 0:
        return
    wildcard = host in ("", "0.0.0.0", "::", "[::]")
    family = socket.AF_INET6 if ":" in host and not wildcard else socket.AF_INET
    try:
        with socket.socket(family) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("0.0.0.0" if wildcard else host.strip("[]"), port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise CliError(
                f"port {port} is already in use on {host} (another `arena serve`?); stop that program or pick "
                f"another {option} (0 picks a free one)"
            ) from None
        raise CliError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); check the address in {option}"
        ) from None


def check_writable(path: str | Path, option: str) -> None:
    """Fail before any work starts when ``path`` could not be written later (missing folder, no permission).

    Raises:
        CliError: the folder does not exist, or a test file cannot be created in it, or ``path`` is read-only.
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise CliError(f"{option} {path}: the folder {folder} does not exist; create it or pick another path")
    if target.is_dir():
        raise CliError(f"{option} {path} is a folder; give a file path")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".arena-write-test-"):
            pass
        if target.exists():
            with target.open("a"):
                pass
    except OSError as exc:
        raise CliError(
            f"{option} {path} cannot be written ({exc.strerror or exc}); pick a path you can write to"
        ) from None


def connect_blocking(channel: grpc.Channel, address: str, timeout: float) -> None:
    """Wait until ``channel`` is connected, or fail with "cannot reach HOST:PORT" after ``timeout`` seconds.

    Raises:
        CliError: no server answered at ``address``.
    """
    try:
        wait_until_reachable_blocking(channel, address, timeout)
    except ServerUnreachable as exc:
        raise CliError(str(exc)) from None


async def connect(channel: grpc.aio.Channel, address: str, timeout: float) -> None:
    """:func:`connect_blocking` for an asyncio channel.

    Raises:
        CliError: no server answered at ``address``.
    """
    try:
        await wait_until_reachable(channel, address, timeout)
    except ServerUnreachable as exc:
        raise CliError(str(exc)) from None


def add_game_arguments(parser: argparse.ArgumentParser, default_game: str | None = "rps") -> None:
    parser.add_argument("--game", "-g", default=default_game, help="game name (see `arena games`)")
    parser.add_argument(
        "--param",
        "-p",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="game parameter, repeatable, e.g. -p signs=5 -p rounds=100",
    )


def add_connect_timeout_argument(parser: argparse.ArgumentParser) -> None:
    """``--connect-timeout``: how long a ``--server`` command waits for the server before "cannot reach"."""
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help='with a server address: give up with "cannot reach HOST:PORT" after this long (default 10)',
    )


def parse_params(items: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CliError(f"game parameter {item!r} must look like NAME=VALUE, e.g. signs=5")
        params[name.strip()] = value.strip()
    return params


def game_from_args(args: argparse.Namespace) -> Game:
    try:
        return load_game(args.game, **parse_params(args.param))
    except GameError as exc:
        raise CliError(str(exc)) from None


def add_time_control_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--per-move", type=float, default=1.0, metavar="SECONDS", help="budget per move (default 1)")
    parser.add_argument("--overage", type=float, default=10.0, metavar="SECONDS", help="overage bank (default 10)")
    parser.add_argument("--grace", type=float, default=0.1, metavar="SECONDS", help="uncharged grace (default 0.1)")


def time_control_from_args(args: argparse.Namespace) -> TimeControl:
    try:
        return TimeControl(
            timedelta(seconds=args.per_move), timedelta(seconds=args.overage), timedelta(seconds=args.grace)
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None


async def open_database(path: str, exclusive: bool = True) -> Store:
    """Open the SQLite store, turning its errors (corrupt, newer schema, in use) into a CLI error."""
    try:
        return await Store.open(path, exclusive=exclusive)
    except StoreError as exc:
        raise CliError(str(exc)) from None


YOUNG_GC_THRESHOLD = 20_000
"""Allocations between two collections of the youngest generation in a serving process (CPython's default: 700)."""


class _OutputThatMayClose:
    """A text stream whose reader may go away: writes after that are dropped instead of raising.

    A server keeps running after whoever started it stopped reading its output
    (a closed terminal, a supervisor's pipe, a test that gave up). Its next line
    would raise ``BrokenPipeError`` wherever it is written: in a signal handler,
    that kept SIGTERM from stopping the server at all.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.closed_by_reader = False

    def write(self, text: str) -> int:
        if not self.closed_by_reader:
            try:
                return int(self._stream.write(text))
            except (BrokenPipeError, ConnectionResetError, ValueError):  # (ValueError: the stream was closed)
                self.closed_by_reader = True
        return len(text)

    def flush(self) -> None:
        if not self.closed_by_reader:
            try:
                self._stream.flush()
            except (BrokenPipeError, ConnectionResetError, ValueError):
                self.closed_by_reader = True

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, buffer...
        return getattr(self._stream, name)


def keep_running_without_readers() -> None:
    """Make this process's stdout and stderr drop what nobody reads any more (see :class:`_OutputThatMayClose`).

    For ``arena serve`` and its worker processes: a server must stop cleanly on
    SIGTERM, and tell its bots, even when its output goes nowhere.
    """
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _OutputThatMayClose):
            setattr(sys, name, _OutputThatMayClose(stream))


def settle_heap() -> None:
    """Tune the garbage collector for a process about to serve matches (``arena serve`` and its workers).

    By the time a server is ready it holds some 90,000 long-lived objects (grpc,
    protobuf, numpy, numba and the hosted bots), and every full collection
    walked them all again: about 50 ms each, a few times a minute under load.
    They are moved to the permanent generation (``gc.freeze``), which no
    collection walks. The youngest generation is collected every
    :data:`YOUNG_GC_THRESHOLD` allocations instead of 700: a match's move log grows by a
    few objects per move, and each collection also walks the young match
    state, so at the default every second or so of play paid several
    milliseconds. Cyclic garbage is still collected, only in larger batches.
    ``bench/bench_remote.py`` (3), pinned, with and without this call: 64.5 against 70.3 us of
    server CPU per remote move (docs/performance.md, fifth pass).
    """
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_GC_THRESHOLD), middle, old)


HELPER_THREADS = ("batch", "normal")
"""Choices of ``--helper-threads``: the scheduling policy of a serving process's threads other than its event loop's."""


def batch_helper_threads() -> str | None:
    """Run every thread of this process except the calling one (the event loop's) under ``SCHED_BATCH`` (Linux).

    gRPC's asyncio integration has helper threads: gRPC core's event-engine
    threads do the network I/O, and a poller thread takes each completed
    read or write from core and wakes the event loop through a socket. Under
    the normal policy each of those wake-ups preempts the event-loop thread
    when they share a core, and switches back: ``bench/bench_remote.py`` (3)
    counted 5.5 context switches and 32 us of kernel time per remote move on
    the pinned server. A ``SCHED_BATCH`` thread does not preempt the running
    thread when it wakes (the scheduler's tick still shares the core fairly),
    so the completions wait until the loop next polls and are handled
    together: 0.8 switches and 17 us per move, and the loop's Python runs
    uninterrupted (docs/performance.md, sixth pass).

    The calling thread keeps the normal policy, so what it starts keeps it
    too: the bots' subprocesses (a child takes the policy of the thread that
    forks it) and the threads it creates later. Threads that gRPC's own
    threads start later inherit ``SCHED_BATCH``. Setting it needs no
    privilege.

    Returns:
        None when done, else why it could not be (not Linux, or the kernel refused): the caller says so
        and serves on, only slower.
    """
    if not sys.platform.startswith("linux") or not hasattr(os, "sched_setscheduler"):
        return f"scheduling policies are Linux only (this is {sys.platform})"
    me = threading.get_native_id()
    try:
        tids = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError as exc:
        return f"cannot list this process's threads: {exc}"
    batch = os.sched_param(0)
    for tid in tids:
        if tid == me:
            continue
        try:
            os.sched_setscheduler(tid, os.SCHED_BATCH, batch)
        except ProcessLookupError:
            continue  # the thread ended meanwhile
        except OSError as exc:
            return f"the kernel refused SCHED_BATCH for thread {tid}: {exc}"
    return None


def add_helper_threads_argument(parser: argparse.ArgumentParser) -> None:
    """``--helper-threads {batch,normal}`` of ``arena serve``."""
    parser.add_argument(
        "--helper-threads",
        choices=HELPER_THREADS,
        default="batch",
        help="scheduling policy of gRPC's helper threads (default batch: their wake-ups do not preempt the "
        "event loop, which saves context switches under load; normal: the kernel's default). Linux only",
    )


SWITCH_INTERVAL = 0.0002
"""``arena serve``'s default ``--switch-interval`` (seconds); Python's own is 0.005. It must stay shorter than an
in-process match's stretches on the loop (``referee.loop.STRETCH``, 0.5 ms), or threads waiting for the GIL
starve (docs/performance.md, twenty-ninth and thirtieth passes)."""


def add_switch_interval_argument(parser: argparse.ArgumentParser) -> None:
    """``--switch-interval SECONDS`` of ``arena serve``."""
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=SWITCH_INTERVAL,
        metavar="SECONDS",
        help=f"how long a thread waits for Python's GIL before the event loop must hand it over (default "
        f"{SWITCH_INTERVAL:g}; Python's own is 0.005, under which the database's and the hosted bots' threads "
        "could wait seconds behind a busy loop). See docs/performance.md",
    )


def check_switch_interval(seconds: float) -> None:
    """A CliError for a ``--switch-interval`` outside 0.0001..0.1 seconds."""
    if not 0.0001 <= seconds <= 0.1:
        raise CliError(
            f"--switch-interval {seconds:g} is out of range; use 0.0001..0.1 seconds "
            f"(default {SWITCH_INTERVAL:g}; Python's own is 0.005)"
        )


def apply_helper_threads(policy: str, who: str = "arena") -> None:
    """Apply ``--helper-threads`` once the server's threads exist; a one-line warning on stderr if it cannot."""
    if policy != "batch":
        return
    why = batch_helper_threads()
    if why is not None:
        print(f"{who}: --helper-threads batch: {why}; serving with the normal policy", file=sys.stderr, flush=True)
