"""The :class:`Bot` base class: implement ``act`` and you have an Arena bot.

The same class plays in-process on the server (reference bots), as a
subprocess over stdio, and remotely over gRPC (:func:`arena_client.run`).
"""

from __future__ import annotations

from arena_client.types import MatchInfo, MatchResult, Turn, Update


class Resign(Exception):
    """Raise from :meth:`Bot.act` to resign the match; the message is recorded as the reason."""


class Bot:
    """Subclass and implement :meth:`act`; the hooks are optional.

    A bot object may play several matches one after another: reset any
    per-match state in :meth:`on_match_start`. Keep state on the instance,
    never in module globals, so that many matches can run side by side.

    Attributes:
        name: The name to play under (remote bots; guests get a generated one).
        games: The games this bot plays, e.g. ``("rps",)``; empty means any.
    """

    name: str = "python-bot"
    games: tuple[str, ...] = ()

    def on_match_start(self, match: MatchInfo) -> None:
        """Called once per match before the first turn."""

    def act(self, turn: Turn) -> int:
        """Return one of ``turn.legal_actions``. May be slow; it never blocks the stream."""
        raise NotImplementedError(f"{type(self).__name__} must implement act(turn)")

    def on_update(self, update: Update) -> None:
        """Called with public moves (e.g. the opponent's last move) before the next turn."""

    def on_match_end(self, result: MatchResult) -> None:
        """Called once per match with the returns and how it ended."""

    def wants_updates(self) -> bool:
        """Whether :meth:`on_update` is overridden (lets the server skip building updates)."""
        return type(self).on_update is not Bot.on_update
