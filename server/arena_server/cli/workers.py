"""``arena serve --workers N``: matches sharded over N worker processes, one store writer.

The main process owns the SQLite file (the only writer), runs the rating
refitter and supervises the workers. Each worker process runs its own event
loop, hub, referee and gRPC server on the same port (``SO_REUSEPORT``): the
kernel hands each new connection to one worker, and everything on that
connection (a remote bot's session and the matches it plays, a
``CreateMatch``, a ``WatchMatch`` of a match it runs) stays in that worker.
Writes travel to the main process (:mod:`arena_server.store.writer`) and are
answered once committed, so the seats hear the end of a match only after it
is stored. Reads (``GetMatch``, leaderboards) use each worker's own read-only
connection. ``RegisterBot`` and ``SubmitBot`` work on any worker: their writes
go to the main process too, checked inside its transaction, and the main
process tells every worker of each registration and accepted submission
(:func:`follow_bot_changes`), so a bot registered through one worker logs in
on another and its newest version is seated on all of them. See
docs/cluster.md for the design and its limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from arena_client import TimeControl
from arena_client._native import status as native_status
from arena_server.cli import CliError
from arena_server.cli.common import (
    SWITCH_INTERVAL,
    apply_helper_threads,
    keep_running_without_readers,
    settle_heap,
)
from arena_server.ladder.scheduler import LadderConfig

if TYPE_CHECKING:
    from arena_server.matches.hub import Hub
    from arena_server.store.writer import WorkerStore


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker process needs to serve (pickled to the spawned process)."""

    index: int
    host: str
    port: int
    db: str
    socket_path: str
    time_control: TimeControl
    data_dir: str | None
    grace: float
    helper_threads: str = "batch"
    """``--helper-threads``: the scheduling policy of the worker's gRPC helper threads."""
    switch_interval: float = SWITCH_INTERVAL
    """``--switch-interval``: the GIL's switch interval in the worker (seconds)."""
    uploads_refused: str | None = None
    """Why submissions are refused (the main process found no sandbox and uploads were not allowed), or None."""


def resolve_workers(value: str) -> int:
    """``--workers``: a count, or ``auto`` for one worker per CPU this process may use.

    Raises:
        CliError: not a count from 1 to 256 nor ``auto``.
    """
    if value == "auto":
        return max(1, len(os.sched_getaffinity(0)))
    try:
        count = int(value)
    except ValueError:
        raise CliError(f"--workers {value!r} is not a number; use a count such as 2, or auto") from None
    if not 1 <= count <= 256:
        raise CliError(f"--workers {count} is out of range; use 1..256 or auto")
    return count


WRITER_DIR_PREFIX = "arena-writer-"
"""The temporary directory of a multi-worker server's sockets (the writer's, the workers' and their relays')."""
STALE_AFTER = 60.0
"""Seconds after which a writer directory whose writer does not answer is a killed server's (a younger one may
belong to a server that is still starting)."""


def clear_stale_writer_dirs(base: str | None = None, older_than: float = STALE_AFTER) -> int:
    """Remove the writer directories that servers killed with SIGKILL left behind; how many.

    A stopping server removes its own. A directory is left alone unless it is this user's, older than
    ``older_than`` seconds, and its ``writer.sock`` refuses connections or is missing: a running server's
    writer accepts them.
    """
    base = base or tempfile.gettempdir()
    removed = 0
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(base) as entries:
        for entry in entries:
            if not entry.name.startswith(WRITER_DIR_PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if info.st_uid != os.getuid() or now - info.st_mtime < older_than:
                continue
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                try:
                    probe.connect(os.path.join(entry.path, "writer.sock"))
                    continue  # a running server's
                except (ConnectionRefusedError, FileNotFoundError):
                    pass  # nobody listens: its server is gone
                except OSError:
                    continue
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
    return removed


def _reserve_port(host: str, port: int) -> socket.socket:
    """A bound (not listening) socket holding the port, so every worker binds the same one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if port:
        # SO_REUSEPORT would let this server share the port with another multi-worker server: refuse instead.
        probe_host = "127.0.0.1" if host in ("0.0.0.0", "") else ("::1" if host == "::" else host)
        with contextlib.suppress(OSError), socket.create_connection((probe_host, port), timeout=1.0):
            raise CliError(f"cannot listen on {host}:{port}: another server answers there; pick another --port")
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CliError(
            f"cannot listen on {host}:{port}: {exc}; is another server running? pick another --port"
        ) from None
    return sock


async def serve_workers(
    host: str,
    port: int,
    db: str,
    tc: TimeControl,
    workers: int,
    data_dir: str | None,
    allow_unsandboxed: bool,
    grace: float,
    ladder: LadderConfig | None = None,
    helper_threads: str = "batch",
    switch_interval: float = SWITCH_INTERVAL,
    http_port: int | None = None,
) -> int:
    """Run the main process of a multi-process server until SIGTERM/SIGINT; returns the exit status.

    With ``ladder``, this process runs the one ladder (:class:`~arena_server.ladder.coordinator.LadderCoordinator`):
    it pairs every bot any worker can seat, has a worker play each unit, and refits the ratings.
    With ``http_port``, the main process serves the web interface: from the database, and the live
    matches through the workers that run them (:mod:`arena_server.api.peers`).
    """
    from arena_bots import hosted_bots
    from arena_server.api.peers import Peers
    from arena_server.bots.registry import check_sandbox, prepare_registry
    from arena_server.cli.common import open_database
    from arena_server.ladder.coordinator import LadderCoordinator
    from arena_server.ladder.scheduler import RatingRefitter, ladder_game
    from arena_server.matches.hub import Hub
    from arena_server.store.writer import StoreWriter
    from arena_server.web.server import WebServer

    holder = _reserve_port(host, port)
    try:
        store = await open_database(db)
    except BaseException:
        holder.close()
        raise
    hub = Hub(store, hosted_bots(), tc)
    if hub.registry is not None:
        await prepare_registry(hub.registry, data_dir)
        await check_sandbox(hub.registry, allow_unsandboxed)
    bound = holder.getsockname()[1]
    stale = clear_stale_writer_dirs()
    if stale:
        noun = "directory" if stale == 1 else "directories"
        print(f"arena: removed {stale} socket {noun} left by killed servers", file=sys.stderr, flush=True)
    folder = tempfile.mkdtemp(prefix=WRITER_DIR_PREFIX)
    socket_path = os.path.join(folder, "writer.sock")
    ready: set[int] = set()
    ready_event = asyncio.Event()
    ports: dict[int, int] = {}
    """Each worker's own port (where the ladder redirects a bot that plays its next match there)."""

    def on_ready(index: int, port: int = 0) -> None:
        ready.add(index)
        if port:
            ports[index] = port
        if len(ready) == workers:
            ready_event.set()

    loop = asyncio.get_running_loop()
    try:
        writer = StoreWriter(
            db, socket_path, lambda index, port: loop.call_soon_threadsafe(on_ready, index, port)
        ).start()
    except BaseException:
        holder.close()
        await store.close()
        shutil.rmtree(folder, ignore_errors=True)
        raise
    owners = writer.owners

    async def locate(match_id: str) -> int | None:
        return owners.get(match_id)

    hub.peers = Peers(folder, locate, running=lambda: list(owners), directory=writer.connected)
    web = None
    if http_port is not None:  # the web interface in the main process (the workers run the matches)
        web = WebServer(hub, host, http_port)
        try:
            await web.start()
        except OSError as exc:
            holder.close()
            await asyncio.to_thread(writer.close)
            await store.close()
            shutil.rmtree(folder, ignore_errors=True)
            raise CliError(f"{exc}; pick another --http-port, or --no-http") from None
    context = multiprocessing.get_context("spawn")
    procs = [
        context.Process(
            target=worker_main,
            args=(
                WorkerConfig(
                    i,
                    host,
                    bound,
                    db,
                    socket_path,
                    tc,
                    data_dir,
                    grace,
                    helper_threads,
                    switch_interval,
                    None if hub.registry is None else hub.registry.uploads_refused,
                ),
            ),
            name=f"arena-worker-{i}",
        )
        for i in range(workers)
    ]
    for proc in procs:
        proc.start()
    stop = asyncio.Event()
    status = 0

    def kill_all() -> None:
        for proc in procs:
            if proc.is_alive() and proc.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)

    def on_signal(signame: str) -> None:
        if stop.is_set():
            print(f"arena: {signame} again; exiting at once", file=sys.stderr, flush=True)
            kill_all()
            os._exit(130)
        print(
            f"arena: {signame}: shutting down within {grace:g}s; the {workers} workers abort their matches",
            file=sys.stderr,
            flush=True,
        )
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig.name)

    async def watch_workers() -> str:
        while True:
            for proc in procs:
                if proc.exitcode is not None:
                    return f"worker {procs.index(proc)} exited with status {proc.exitcode}"
            await asyncio.sleep(0.1)

    watcher = asyncio.ensure_future(watch_workers())
    refitter = None
    coordinator: LadderCoordinator | None = None
    try:
        started = asyncio.ensure_future(ready_event.wait())
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({started, watcher, stopped}, timeout=300, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not started.done():
            started.cancel()
            problem = watcher.result() if watcher.done() else "the workers did not start within 300 s"
            if not stop.is_set():
                print(f"arena: {problem}; stopping", file=sys.stderr, flush=True)
                status = 1
        else:
            holder.close()  # the workers hold the port now
            print(
                f"arena: serving on {host}:{bound} (database {db}) with {workers} worker processes; "
                f"hosted bots: {', '.join(sorted(hub.hosted))}",
                flush=True,
            )
            if web is not None:
                print(f"arena: web interface on {web.url}", flush=True)
            print("arena: press Ctrl-C to stop", flush=True)
            if ladder is not None:
                games = ", ".join(repr(ladder_game(g)) for g in ladder.games)
                print(
                    f"arena: ladder running for {games}, paired here and played on the {workers} workers "
                    f"(concurrency {ladder.concurrency}, {ladder.per_bot} per bot, over all of them)",
                    flush=True,
                )
            print(f"arena: move path: {native_status()}", flush=True)
            if ladder is None:
                refitter = RatingRefitter(store, 2.0).start()
            else:  # (the coordinator refits, as a one-process server's ladder does)
                coordinator = LadderCoordinator(hub, ladder, folder, workers, ports)
                coordinator.start()
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait({watcher, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if watcher.done() and not stop.is_set():
                print(f"arena: {watcher.result()}; stopping the others", file=sys.stderr, flush=True)
                status = 1
            stopped.cancel()
    finally:
        watcher.cancel()
        holder.close()
        if coordinator is not None:
            coordinator.halt()  # no new units; those running end with the workers' shutdown
        deadline = time.monotonic() + grace
        for proc in procs:
            if proc.is_alive() and proc.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
        # The workers record their aborted matches through this process: keep serving writes meanwhile.
        while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        kill_all()
        for proc in procs:
            await asyncio.to_thread(proc.join)
        if refitter is not None:
            await refitter.stop()
        if coordinator is not None:
            await coordinator.stop()  # (its units are over with the workers; then the last refit)
        if web is not None:
            await web.stop()
        await asyncio.to_thread(writer.close)
        await store.close()
        shutil.rmtree(folder, ignore_errors=True)
    print("arena: stopped", file=sys.stderr, flush=True)
    return status


def worker_main(config: WorkerConfig) -> None:
    """The entry point of a worker process (spawned)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # until the loop's handlers are in place
    keep_running_without_readers()  # (it stops when told, or when the main process is gone, even unread)
    try:
        asyncio.run(_worker(config))
    except Exception as exc:  # one line for the operator; the main process stops the server
        print(f"arena: worker {config.index} failed: {exc}", file=sys.stderr, flush=True)
        # Exit now: a failure can leave threads that would keep the process alive (the database's
        # connection thread waits for a close that never came; Python waits for it at exit).
        os._exit(1)


def worker_state_dir(shared: Path, index: int) -> Path:
    """Worker ``index``'s own bot-state directory, ``<shared>/worker-<index>``.

    On its first use it starts as a copy of the files directly in ``shared``
    (what a single-process server or training left there), so every worker's
    learners start from the same tables; after that the workers learn apart.
    Each file is copied to a temporary name and renamed, so a half-copied
    table is never read.
    """
    mine = shared / f"worker-{index}"
    if not mine.exists():
        staging = shared / f".worker-{index}.{os.getpid()}"
        staging.mkdir(parents=True, exist_ok=True)
        for file in shared.iterdir():
            if file.is_file() and not file.name.startswith("."):
                shutil.copy2(file, staging / file.name)
        staging.rename(mine)
    return mine


async def follow_bot_changes(store: WorkerStore, hub: Hub, index: int) -> None:
    """Keep a worker's hub up to date with the bots registered and submitted through any worker.

    The store writer tells every worker of each committed registration and accepted submission
    (:data:`~arena_server.store.writer.BotChange`). A registered name evicts the guests connected here
    under it, as the worker that registered it does; a new program reloads the registry's programs
    from the database (one query, after the commit), so the ladder and challenges here seat the
    newest accepted version. Changes that arrive together cost one reload.
    """
    from arena_server.bots.registry import just_registered

    while True:
        changes = [await store.bot_changes.get()]
        while not store.bot_changes.empty():
            changes.append(store.bot_changes.get_nowait())
        for kind, name in changes:
            if kind == "registered":
                hub.evict_guests_named(name, just_registered(name))
        if hub.registry is not None and any(kind == "programs" for kind, _name in changes):
            try:
                await hub.registry.refresh()
            except Exception as exc:  # (the next change, or a name not known yet, reloads again)
                print(f"arena: worker {index}: could not reload the submitted bots: {exc!r}", file=sys.stderr)


async def _worker(config: WorkerConfig) -> None:
    from arena_bots import hosted_bots
    from arena_bots.registry import BotState
    from arena_server.api.peers import Peers, peer_address, serve_relay
    from arena_server.api.server import bind_port, build_server
    from arena_server.ladder.coordinator import serve_units, units_path
    from arena_server.matches.hub import Hub
    from arena_server.seats.peer import relay_path
    from arena_server.store.writer import WorkerStore

    sys.setswitchinterval(config.switch_interval)
    store = await WorkerStore.connect(config.db, config.socket_path)
    hub = Hub(store, hosted_bots(), config.time_control)
    if hub.registry is not None:
        if config.data_dir:
            hub.registry.data_dir = Path(config.data_dir).resolve()
        hub.registry.uploads_refused = config.uploads_refused
        await hub.registry.refresh()
        # Hosted learners (the Liar's Dice tables) keep state between matches. Each worker owns a
        # subdirectory, so two processes never load, update and overwrite the same file.
        shared = Path(os.environ.get("ARENA_BOT_STATE_DIR") or hub.registry.data_dir / "bot-state")
        mine = worker_state_dir(shared, config.index)
        os.environ["ARENA_BOT_STATE_DIR"] = str(mine)
        hub.hosted = hosted_bots(BotState(mine))
    server, _ = await build_server(hub, config.host, config.port, reuse_port=True)
    # This worker's own port, beside the shared one: a bot the ladder redirects here reconnects on it.
    own_port = bind_port(server, config.host, 0)
    # The private socket the other processes follow this worker's matches through (spectators, the web).
    socket_dir = os.path.dirname(config.socket_path)
    if not server.add_insecure_port(peer_address(socket_dir, config.index)):
        raise OSError(f"cannot listen on {peer_address(socket_dir, config.index)}")
    hub.peers = Peers(
        socket_dir,
        store.owner,
        me=config.index,
        next_match=store.next_started,
        directory=store.directory,
        claim=store.claim_name,
        release=store.release_name,
        move=store.move_name,
        port=own_port,
    )
    # The other workers seat the bots connected here through this socket (arena_server.seats.peer).
    relay = await serve_relay(hub, relay_path(socket_dir, config.index))
    # The main process's ladder coordinator has this worker play rated units through this socket.
    units = await serve_units(hub, units_path(socket_dir, config.index))
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    settle_heap()
    apply_helper_threads(config.helper_threads, f"arena: worker {config.index}")
    await store.announce_ready(config.index, own_port)
    following = asyncio.ensure_future(follow_bot_changes(store, hub, config.index))
    lost = asyncio.ensure_future(store.lost.wait())
    await asyncio.wait({lost, asyncio.ensure_future(stop.wait())}, return_when=asyncio.FIRST_COMPLETED)
    following.cancel()
    if store.lost.is_set() and not stop.is_set():
        # The main process died (SIGKILL, crash): nothing can be stored any more, so stop serving; the
        # next start marks the matches left running as aborted.
        print(f"arena: worker {config.index}: the main process is gone; stopping", file=sys.stderr, flush=True)
        await hub.shutdown("the server stopped", grace=1.0)
        units.close()
        await hub.end_streams(timeout=0.5)
        await server.stop(grace=0)
        relay.close()
        await store.close()
        return
    await hub.shutdown("the server is shutting down", grace=max(config.grace - 2.0, 1.0))
    units.close()  # (the units played out with the hub's shutdown, and told the coordinator so)
    await hub.end_streams(timeout=1.0)  # each bot hears that the server is stopping (see cli/serve.py)
    await server.stop(grace=1.0)
    relay.close()
    await store.close()
