"""``arena serve``: run the gRPC server with hosted bots and the SQLite store.

Shutdown (SIGTERM or SIGINT/Ctrl-C): stop taking matches, abort every running
match (each remote bot gets MatchEnded ``aborted`` with the reason, and each
match is stored as aborted), stop the ladder, end every bot's stream with the
status ``UNAVAILABLE`` "the server is shutting down; reconnect when it is back"
(after what was queued for it), close the database, exit 0; all within
``--shutdown-grace`` seconds. A second signal exits at
once (status 130); the unfinished matches are then marked aborted at the next
start.

``--uvloop`` runs the server on uvloop (the optional extra ``arena[uvloop]``)
instead of the standard asyncio loop; docs/performance.md gives what it buys.
``--helper-threads`` sets the scheduling policy of gRPC's helper threads
(default ``batch``; see :func:`arena_server.cli.common.batch_helper_threads`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

from arena_bots import hosted_bots
from arena_bots.registry import BotState
from arena_client._native import status as native_status
from arena_server.api.server import build_server
from arena_server.bots.registry import check_sandbox, prepare_registry
from arena_server.cli import CliError
from arena_server.cli.common import (
    add_helper_threads_argument,
    add_switch_interval_argument,
    add_time_control_arguments,
    apply_helper_threads,
    check_can_listen,
    check_switch_interval,
    keep_running_without_readers,
    open_database,
    settle_heap,
    time_control_from_args,
)
from arena_server.cli.ladder import add_serve_arguments as add_ladder_arguments
from arena_server.cli.ladder import ladder_config, start_ladder
from arena_server.cli.workers import resolve_workers, serve_workers
from arena_server.ladder.scheduler import LadderConfig, RatingRefitter
from arena_server.matches.hub import Hub, flush_log
from arena_server.web.server import WebServer

STOP_GRACE = 0.1
"""Seconds the gRPC server's own stop waits, at least, for the streams that :meth:`Hub.end_streams` ended
(their last status on its way); it cancels what is still open after that."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "serve",
        help="run the server",
        description="Run the Arena gRPC server: hosted reference bots, remote bots, every match stored in SQLite.",
    )
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0: every interface)")
    p.add_argument("--port", type=int, default=50051, help="port to listen on (default 50051; 0 picks a free one)")
    p.add_argument("--db", default="arena.db", help="SQLite database file (default arena.db)")
    p.add_argument(
        "--data-dir",
        default=None,
        help="where submitted bots are stored (default: arena-data/ next to the database)",
    )  # issue 4
    p.add_argument(
        "--allow-unsandboxed-uploads",
        action="store_true",
        help="accept submitted bots even where this kernel cannot confine their filesystem (see README)",
    )  # issue 12
    p.add_argument(
        "--shutdown-grace",
        type=float,
        default=10.0,
        help="seconds a shutdown (SIGTERM, Ctrl-C) may take to tell every bot and record every match (default 10)",
    )
    web = p.add_argument_group("web interface (issue 19; see docs/web.md)")
    web.add_argument(
        "--http-port",
        type=int,
        default=8080,
        help="port of the read-only web interface: leaderboards, bots, replays, live matches "
        "(default 8080; 0 picks a free one)",
    )
    web.add_argument("--no-http", action="store_true", help="do not serve the web interface")
    p.add_argument(
        "--workers",
        default="1",
        metavar="N",
        help="worker processes running matches (default 1; auto: one per CPU); the main process "
        "stays the only database writer and runs the one ladder, whose matches the workers play (docs/cluster.md)",
    )
    p.add_argument(
        "--uvloop",
        action="store_true",
        help="run on uvloop instead of the standard asyncio event loop (needs pip install 'arena[uvloop]')",
    )  # issue 20
    add_helper_threads_argument(p)  # issue 20
    add_switch_interval_argument(p)
    add_time_control_arguments(p)
    add_ladder_arguments(p)  # issue 5
    p.set_defaults(func=run)


def loop_runner(use_uvloop: bool) -> Callable[[Coroutine[Any, Any, int]], int]:
    """``asyncio.run``, or ``uvloop.run`` for ``--uvloop`` (a CliError saying how to install it if missing)."""
    if not use_uvloop:
        return asyncio.run
    try:
        import uvloop
    except ImportError:
        raise CliError(
            "--uvloop needs the uvloop package, which is not installed; "
            "install it with pip install 'arena[uvloop]', or leave out --uvloop"
        ) from None
    return uvloop.run


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise CliError(f"--port {args.port} is out of range; use 0..65535")
    if not 0 <= args.http_port <= 65535:
        raise CliError(f"--http-port {args.http_port} is out of range; use 0..65535 (or --no-http)")
    if not 1 <= args.shutdown_grace <= 600:
        raise CliError(f"--shutdown-grace {args.shutdown_grace:g} is out of range; use 1..600 seconds")
    check_switch_interval(args.switch_interval)
    tc = time_control_from_args(args)
    # Threads (the database's, hosted bots' warm-ups and searches) get the GIL within this of asking, even
    # while the event loop runs hot: with Python's 5 ms, a loop that lets go of the GIL more often than
    # that but only for an instant kept them waiting for seconds (docs/performance.md).
    sys.setswitchinterval(args.switch_interval)
    keep_running_without_readers()  # (a SIGTERM must stop the server even when its output goes nowhere)
    check_can_listen(args.host, args.port, "--port")  # one line now, not gRPC's log after the database opened
    workers = resolve_workers(str(args.workers))
    if workers > 1:
        return asyncio.run(
            serve_workers(
                args.host,
                args.port,
                args.db,
                tc,
                workers,
                args.data_dir,
                args.allow_unsandboxed_uploads,
                args.shutdown_grace,
                ladder_config(args),
                helper_threads=args.helper_threads,
                switch_interval=args.switch_interval,
                http_port=None if args.no_http else args.http_port,
            )
        )
    return loop_runner(args.uvloop)(
        _serve(
            args.host,
            args.port,
            args.db,
            tc,
            ladder_config(args),
            data_dir=args.data_dir,
            allow_unsandboxed=args.allow_unsandboxed_uploads,
            grace=args.shutdown_grace,
            http_port=None if args.no_http else args.http_port,
            helper_threads=args.helper_threads,
        )
    )


async def _serve(
    host: str,
    port: int,
    db: str,
    tc: object,
    ladder_cfg: LadderConfig | None = None,
    data_dir: str | None = None,
    allow_unsandboxed: bool = False,
    grace: float = 10.0,
    http_port: int | None = 8080,
    helper_threads: str = "batch",
) -> int:
    store = await open_database(db)
    hub = Hub(store, hosted_bots(), tc)  # type: ignore[arg-type]
    # The signal handlers come first: a Ctrl-C at any moment after "serving on" is a clean shutdown.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signame: str) -> None:
        if stop.is_set():  # a second signal: leave now; the next start marks unfinished matches aborted
            print(f"arena: {signame} again; exiting at once", file=sys.stderr, flush=True)
            os._exit(130)
        # (A match whose end is being recorded is still in hub.running, but it is not aborted: not counted.)
        playing = sum(1 for running in hub.running.values() if running.record.termination is None)
        print(
            f"arena: {signame}: shutting down within {grace:g}s; aborting {playing} running match(es)",
            file=sys.stderr,
            flush=True,
        )
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig.name)
    if hub.registry is not None:  # issue 4: registered subprocess bots and submissions
        await prepare_registry(hub.registry, data_dir)
        await check_sandbox(hub.registry, allow_unsandboxed)  # issue 12
        # Hosted bots that keep state between matches and restarts (the Liar's Dice learners' tables) own one
        # BotState per server: $ARENA_BOT_STATE_DIR when set, else the data directory's bot-state/.
        state_dir = os.environ.get("ARENA_BOT_STATE_DIR") or str(hub.registry.data_dir / "bot-state")
        hub.hosted = hosted_bots(BotState(state_dir))
    try:
        server, bound = await build_server(hub, host, port)
    except OSError:
        await store.close()
        raise CliError(
            f"cannot listen on {host}:{port}: the port is taken or the address is not this machine's; "
            "stop the other server or pick another --port (0 picks a free one)"
        ) from None
    web = None
    if http_port is not None:  # issue 19: the web interface, same process, same store and hub
        web = WebServer(hub, host, http_port)
        try:
            await web.start()
        except OSError as exc:
            await server.stop(grace=None)
            await store.close()
            raise CliError(f"{exc}; pick another --http-port, or --no-http") from None
    await server.start()
    if store.recovered_aborted:
        print(
            f"arena: marked {store.recovered_aborted} unfinished match(es) from the last run as aborted",
            flush=True,
        )
    settle_heap()  # everything long-lived exists now
    apply_helper_threads(helper_threads)  # gRPC's threads exist now
    bots = ", ".join(sorted(hub.hosted))
    print(f"arena: serving on {host}:{bound} (database {db}); hosted bots: {bots}", flush=True)
    if web is not None:
        print(f"arena: web interface on {web.url}", flush=True)
    if type(asyncio.get_running_loop()).__module__.startswith("uvloop"):
        print("arena: event loop: uvloop", flush=True)
    print(f"arena: move path: {native_status()}", flush=True)
    print("arena: press Ctrl-C to stop", flush=True)
    ladder = start_ladder(hub, ladder_cfg)  # issue 5: the rated ladder runs inside the server
    refitter = RatingRefitter(store).start() if ladder is None else None  # --no-ladder still refits
    await stop.wait()
    deadline = time.monotonic() + grace
    if ladder is not None:
        ladder.halt()
    # Most of the grace goes to the matches: every bot is told, every match recorded as aborted.
    await hub.shutdown("the server is shutting down", grace=max(grace - 2.0, 1.0))
    if ladder is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ladder.stop(), max(deadline - time.monotonic() - 1.0, 0.1))
    if refitter is not None:
        await refitter.stop()  # the stored ratings are current when the server stops
    if web is not None:
        await web.stop()
    # Every bot's stream ends now, as a shutdown: what was queued for it is written first, then the status says
    # the server is stopping (Hub.end_streams). The transport's own stop then cancels only what is stuck.
    closing = min(1.0, max(deadline - time.monotonic() - 0.5, 0.0))
    closed_by = time.monotonic() + closing
    await hub.end_streams(timeout=closing)
    await server.stop(grace=max(closed_by - time.monotonic(), STOP_GRACE))
    await store.close()
    flush_log()
    print("arena: stopped", file=sys.stderr, flush=True)
    return 0
