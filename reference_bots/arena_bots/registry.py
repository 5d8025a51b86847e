"""The catalogue of bots the server hosts in-process.

Each entry names a bot, the games it plays and a factory taking a seed; the
server builds a fresh instance for every match (so bots keep per-match state on
the instance and many matches run side by side). Modules add their bots with
:func:`hosted`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from arena_client import Bot


@dataclass(frozen=True)
class HostedBot:
    """A bot the server can seat in any number of matches at once.

    Attributes:
        name: Stable public name, e.g. ``"markov-3"``.
        games: Games it plays, by registry name.
        factory: ``factory(seed)`` returns a fresh, seeded bot for one match.
        description: One line for listings.
    """

    name: str
    games: tuple[str, ...]
    factory: Callable[[int], Bot]
    description: str


_HOSTED: dict[str, HostedBot] = {}


def hosted(
    name: str, games: tuple[str, ...], description: str
) -> Callable[[Callable[[int], Bot]], Callable[[int], Bot]]:
    """Decorator registering a factory ``f(seed) -> Bot`` under ``name``."""

    def register(factory: Callable[[int], Bot]) -> Callable[[int], Bot]:
        if name in _HOSTED:
            raise ValueError(f"hosted bot {name!r} is registered twice")
        _HOSTED[name] = HostedBot(name, games, factory, description)
        return factory

    return register


def hosted_bots() -> dict[str, HostedBot]:
    """Every hosted bot by name (importing :mod:`arena_bots` registers them all)."""
    return dict(_HOSTED)
