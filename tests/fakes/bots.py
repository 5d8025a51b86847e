"""In-process SDK bots shared by the tests (as remote bots through ``Client``, or hosted)."""

from __future__ import annotations

from arena_client import Bot, Turn


class Paper(Bot):
    """An honest RPS bot: always paper."""

    name = "paper-bot"
    games = ("rps",)

    def act(self, turn: Turn) -> int:
        return 1
