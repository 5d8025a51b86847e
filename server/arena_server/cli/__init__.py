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
import importlib
import sys
from collections.abc import Sequence

from arena_server import __version__


class CliError(Exception):
    """A user error: printed as one line on stderr, exit code 2."""


COMMAND_MODULES: list[str] = [
    "arena_server.cli.serve",
    "arena_server.cli.games",
    "arena_server.cli.match",
    "arena_server.cli.play",
    "arena_server.cli.watch",
    "arena_server.cli.profile",
    "arena_server.cli.experiment",
    "arena_server.cli.train",
    "arena_server.cli.check_bot",
    "arena_server.cli.bot",
    "arena_server.cli.tournament",
    "arena_server.cli.ladder",
    "arena_server.cli.replay",
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line, with the command's usage, instead of argparse's two-line default.
        self.exit(2, f"arena: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="arena", description="Arena: a fair referee for bot matches.")
    parser.add_argument("--version", action="version", version=f"arena {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"arena: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("arena: interrupted", file=sys.stderr)
        return 130
