"""``arena check-bot``: run a bot (a command, or a remote bot) through scripted scenarios; say what it did wrong."""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import socket
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from arena_client import TimeControl
from arena_games import registered_games
from arena_server.api.remote_check import check_remote_bot
from arena_server.bots.conformance import Finding, check_bot, format_finding, format_report, format_summary
from arena_server.bots.formats import FormatError, local_program
from arena_server.bots.registry import unreadable_for
from arena_server.cli import CliError, run_async
from arena_server.cli.bot import add_format_options, chosen_format
from arena_server.seats.framing import Framing
from arena_server.seats.process import BotProgram
from arena_server.seats.sandbox import Limits


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "check-bot",
        help="check that a bot (a command, or a remote bot) follows the protocol",
        description=(
            "Start a bot program (--cmd), or wait for a remote bot to connect over gRPC (--listen), read its "
            "Hello, and play short scripted matches of every game it claims, in every seat, against the random "
            "bot. Prints what the bot did wrong (wrong framing, no hello, answering out of turn, illegal action, "
            "too slow, wrong message kind) with the message it got and the one expected. "
            "Exits with 1 when a check fails."
        ),
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--cmd", help='the bot\'s command line, e.g. "python3 bot.py" (run with /bin/sh -c)')
    target.add_argument(
        "--listen",
        metavar="[HOST:]PORT",
        help="serve a temporary Arena gRPC server on HOST:PORT (default host 127.0.0.1) and check the remote "
        "bot that connects to it",
    )
    add_format_options(target, "check")
    p.add_argument("--framing", choices=[f.value for f in Framing], default="json", help="stdio framing (default json)")
    p.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="with --cmd: the bot's working directory, where its files are (default: the current directory; "
        "the bot sees it read-only)",
    )
    p.add_argument(
        "--game",
        "-g",
        action="append",
        default=[],
        help="check only this game (repeatable; default: what it claims)",
    )
    p.add_argument("--games", default="", help="the same as --game, comma-separated (e.g. rps,tic_tac_toe)")
    p.add_argument(
        "--wait",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="with --listen: how long to wait for the bot to connect (default 600)",
    )
    p.add_argument("--per-move", type=float, default=2.0, metavar="SECONDS", help="time per move (default 2)")
    p.add_argument("--startup-timeout", type=float, default=10.0, metavar="SECONDS", help="time to Hello (default 10)")
    p.add_argument("--allow-network", action="store_true", help="do not cut the bot off the network")
    p.add_argument("--quiet", "-q", action="store_true", help="print only the summary")
    p.set_defaults(func=run)


def _listen_address(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        raise CliError(f"--listen {value!r}: expected [HOST:]PORT, e.g. 127.0.0.1:50070 or 50070")
    return host, int(port)


def run(args: argparse.Namespace) -> int:
    args.game = [*args.game, *(g.strip() for g in args.games.split(",") if g.strip())]
    unknown = [g for g in args.game if g not in registered_games()]
    if unknown:
        raise CliError(f"unknown game {unknown[0]!r}; games are: {', '.join(registered_games())}")
    if args.dir is not None and not args.dir.is_dir():
        raise CliError(f"--dir {args.dir} is not a directory")
    if args.per_move <= 0 or args.startup_timeout <= 0:
        raise CliError("--per-move and --startup-timeout must be positive")
    clock = TimeControl(timedelta(seconds=args.per_move), timedelta(0), timedelta(seconds=0.5))

    def progress(finding: Finding) -> None:
        if not args.quiet:
            print(format_finding(finding), flush=True)

    if args.listen is not None:
        return _run_listen(args, clock, progress)
    chosen = chosen_format(args)
    if chosen is not None:
        try:
            program = local_program(chosen[0], chosen[1], Limits(network=args.allow_network), args.startup_timeout)
        except FormatError as exc:
            raise CliError(str(exc)) from None
        return _check(args, program, clock, progress)
    workdir = (args.dir or Path.cwd()).resolve()
    limits = Limits(network=args.allow_network)
    problem = unreadable_for(workdir, limits)
    if problem:
        # Run as root the sandbox drops bots to nobody, who could not even enter a private folder (the bot would
        # die with status 126). Checking your own bot, it runs as you instead; a server would still use nobody.
        limits = dataclasses.replace(limits, run_as=None)
        print(
            f"arena: note: {problem}; check-bot runs it as {getpass.getuser()} instead (a server runs bots as "
            "nobody: keep a bot you `arena bot add` in a folder others can read)",
            file=sys.stderr,
            flush=True,
        )
    program = BotProgram(
        args.cmd,
        Framing(args.framing),
        workdir=workdir,
        limits=limits,
        startup_timeout=args.startup_timeout,
    )
    return _check(args, program, clock, progress)


def _check(
    args: argparse.Namespace, program: BotProgram, clock: TimeControl, progress: Callable[[Finding], None]
) -> int:
    if not args.quiet:
        print(f"checking {program.describe()}", flush=True)
    report = run_async(check_bot(program, args.game, clock, progress=progress))
    print(format_report(report) if args.quiet else "\n".join(format_summary(report)))
    return 0 if report.passed else 1


def _check_can_listen(host: str, port: int) -> None:
    """Fail with one clear line when the address is taken (before gRPC logs its own multi-line complaint)."""
    if port == 0:
        return
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise CliError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); "
            "pick another port for --listen (0 picks a free one)"
        ) from None


def _run_listen(args: argparse.Namespace, clock: TimeControl, progress: Callable[[Finding], None]) -> int:
    host, port = _listen_address(args.listen)
    _check_can_listen(host, port)

    def listening(address: str) -> None:
        print(
            f"point your bot at {address} (waiting up to {args.wait:g}s for it to connect; --wait changes that)",
            flush=True,
        )

    try:
        report = run_async(
            check_remote_bot(
                host,
                port,
                args.game,
                clock,
                wait=args.wait,
                startup_timeout=args.startup_timeout,
                progress=progress,
                on_listening=listening,
            )
        )
    except OSError as exc:  # "cannot listen on HOST:PORT: ..."
        raise CliError(f"{exc}; pick another port for --listen (0 picks a free one)") from None
    print(format_report(report) if args.quiet else "\n".join(format_summary(report)))
    return 0 if report.passed else 1
