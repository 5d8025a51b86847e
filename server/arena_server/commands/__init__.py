"""Subcommands of the ``arena`` CLI, one module each.

Every module listed in :data:`COMMAND_MODULES` exposes
``register(subparsers) -> None``, which adds its subparser(s) and sets
``func=handler`` on them. A handler takes the parsed ``argparse.Namespace`` and
returns an exit code. Raise :class:`arena_server.commands.CliError` for a
one-line error message (no traceback).
"""

from __future__ import annotations


class CliError(Exception):
    """A user error: printed as one line on stderr, exit code 2."""


COMMAND_MODULES: list[str] = [
    "arena_server.commands.serve",
    "arena_server.commands.games",
    "arena_server.commands.match",
    "arena_server.commands.play",
    "arena_server.commands.watch",
    "arena_server.commands.profile",
    "arena_server.commands.experiment",
    "arena_server.commands.check_bot",
    "arena_server.commands.bot",
    "arena_server.commands.tournament",
    "arena_server.commands.ladder",
    "arena_server.commands.replay",
]
