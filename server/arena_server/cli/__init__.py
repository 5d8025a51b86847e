"""The ``arena`` command line: one entry point, one module per subcommand.

Errors a user can fix are printed as one line (``arena: ...``) with exit code
2; tracebacks are for bugs only.
"""

from __future__ import annotations

import os

# Rating fits are small; multi-threaded BLAS only fights the server for 2 cores (set before numpy loads).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# gRPC's C core logs its own multi-line errors (a port already in use, a refused connection) before the
# CLI can say the same in one line; quiet unless the user asks (GRPC_VERBOSITY=error or debug). Read
# once, when grpc is first imported, so it is set before any command module loads.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

import argparse
import asyncio
import importlib
import signal
import sys
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from arena_server import __version__


class CliError(Exception):
    """A user error: printed as one line on stderr, exit code 2."""


class Interrupted(Exception):
    """Ctrl-C with something to say (e.g. how to resume): printed as one line on stderr, exit code 130."""


T = TypeVar("T")


def run_async(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, where Ctrl-C always ends in :class:`KeyboardInterrupt` (exit 130, one line).

    The first SIGINT cancels ``main`` so that its ``finally`` blocks run (matches aborted, SQLite closed);
    even when something inside swallows the cancellation and ``main`` returns, the command still ends as
    interrupted instead of printing a half-finished result. A second SIGINT exits at once.

    Raises:
        KeyboardInterrupt: Ctrl-C was pressed.
    """
    interrupted = False

    async def guarded() -> T:
        nonlocal interrupted
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def on_sigint() -> None:
            nonlocal interrupted
            if interrupted:
                print("arena: interrupted again; exiting at once", file=sys.stderr, flush=True)
                os._exit(130)
            interrupted = True
            assert task is not None
            task.cancel()

        installed = threading.current_thread() is threading.main_thread()
        if installed:
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        try:
            result = await main
            if interrupted:
                raise asyncio.CancelledError
            return result
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)

    try:
        return asyncio.run(guarded())
    except asyncio.CancelledError:
        if interrupted:
            raise KeyboardInterrupt from None
        raise


COMMANDS: dict[str, str] = {
    "serve": "arena_server.cli.serve",
    "games": "arena_server.cli.games",
    "match": "arena_server.cli.match",
    "play": "arena_server.cli.play",
    "watch": "arena_server.cli.watch",
    "profile": "arena_server.cli.profile",
    "experiment": "arena_server.cli.experiment",
    "train": "arena_server.cli.train",
    "check-bot": "arena_server.cli.check_bot",
    "bot": "arena_server.cli.bot",
    "tournament": "arena_server.cli.tournament",
    "ladder": "arena_server.cli.ladder",
    "ratings": "arena_server.cli.ladder",
    "replay": "arena_server.cli.replay",
    "export": "arena_server.cli.export",
}
"""Each subcommand and the module that registers it (``tests/server/test_cli.py`` checks the two agree)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line, with the command's usage, instead of argparse's two-line default.
        self.exit(2, f"arena: {message} (see `{self.prog} --help`)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or only of ``command`` (and what its module registers with it).

    ``main`` builds the one it is asked for: a command's module is imported only when it runs, so a
    light command (``arena games``, ``arena play``) does not pay for the server's and the bots' imports.
    """
    parser = _Parser(prog="arena", description="Arena: a fair referee for bot matches.")
    parser.add_argument("--version", action="version", version=f"arena {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    modules = [COMMANDS[command]] if command in COMMANDS else dict.fromkeys(COMMANDS.values())
    for module_name in modules:
        importlib.import_module(module_name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(words[0] if words else None)
    args = parser.parse_args(words)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, where a reader that went away is handled, not at the interpreter's exit
        return code
    except CliError as exc:
        print(f"arena: {exc}", file=sys.stderr)
        return 2
    except Interrupted as exc:
        print(f"arena: {exc}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("arena: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_went_away()


def _reader_went_away() -> int:
    """The reader of stdout left (``arena games | head -1``): stop quietly, as a program killed by SIGPIPE would.

    stdout is pointed at /dev/null so that the interpreter's final flush does not fail a second time.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return 128 + signal.SIGPIPE
