"""The catalogue of bots the server hosts in-process.

Each entry names a bot, the games it plays and a factory taking a seed; the
server builds a fresh instance for every match (so bots keep per-match state on
the instance and many matches run side by side). Modules add their bots with
:func:`hosted`.

A bot that keeps something *between* matches (the Liar's Dice learners' tables,
a strategy loaded once) registers with ``stateful=True`` and gets a
:class:`BotState`: an object owned by whoever hosts the bots (``arena serve``
makes one per data directory), holding the directory its files live in and the
in-memory objects its matches share. :func:`hosted_bots` binds the stateful
factories to the state it is given, or to a fresh default one.

A bot whose first match in a process does one-off work (numba compiling or
loading its kernels, a table read from disk) offers it as ``warm_up()``: a
method taking no argument, safe to call from any thread and cheap once done.
The server calls it on a worker thread before the bot's first match there,
so that work never stalls the event loop (every other match, every remote
bot). Where it would otherwise fall on the clock's first move, the bot's
``on_match_start`` calls it too (the tic-tac-toe and dots-and-boxes bots), for
the hosts that seat bots without the server's hub (``arena.evaluate``).
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from arena_client import Bot

T = TypeVar("T")

DEFAULT_STATE_DIR = Path("arena-data") / "bot-state"
"""The bots' state directory when nothing says otherwise (``$ARENA_BOT_STATE_DIR`` does)."""


class BotState:
    """What hosted bots keep between matches, for one host and one directory.

    Attributes:
        directory: Where the bots persist their files (created by them on first write).
    """

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self._objects: dict[str, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def default(cls) -> BotState:
        """A state in ``$ARENA_BOT_STATE_DIR``, else :data:`DEFAULT_STATE_DIR` under the working directory."""
        env = os.environ.get("ARENA_BOT_STATE_DIR")
        return cls(Path(env) if env else DEFAULT_STATE_DIR)

    def shared(self, key: str, make: Callable[[], T]) -> T:
        """The object stored under ``key``, made by ``make()`` on first use (thread-safe; one per state)."""
        with self._lock:
            if key not in self._objects:
                self._objects[key] = make()
            found: T = self._objects[key]
            return found

    def forget(self, key: str) -> None:
        """Drop the object under ``key`` (the next :meth:`shared` makes a new one)."""
        with self._lock:
            self._objects.pop(key, None)


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
    stateful_factory: Callable[[int, BotState], Bot] | None = None


_HOSTED: dict[str, HostedBot] = {}

BOT_MODULES = (
    "arena_bots.dots_and_boxes.bots",  # dots and boxes: greedy ... solver, mcts
    "arena_bots.liars_dice.bots",  # Liar's Dice: thesis learners, statistician
    "arena_bots.liars_dice.cfr_bot",  # Liar's Dice: CFR
    "arena_bots.rps.mind_reader",  # RPS: Shannon's mind reader
    "arena_bots.rps.sicilian",  # RPS: the ensemble meta bot
    "arena_bots.rps.thesis_agents",  # RPS: the RPSLS thesis agents
    "arena_bots.tic_tac_toe",  # tic-tac-toe: lab, corrected and MCTS bots
    "arena_bots.simple",  # the simple bots
)
"""The modules that register hosted bots, imported by the first :func:`hosted_bots` (they load numba and numpy:
a command that hosts no bot, such as ``arena ladder leaderboard``, never pays for them)."""

_registered = False


def _register_all() -> None:
    global _registered
    if not _registered:
        for module in BOT_MODULES:
            importlib.import_module(module)
        _registered = True


def _unbound(seed: int) -> Bot:
    raise RuntimeError("a stateful hosted bot needs a BotState: get it from hosted_bots()")


def hosted(
    name: str, games: tuple[str, ...], description: str, stateful: bool = False
) -> Callable[[Callable[..., Bot]], Callable[..., Bot]]:
    """Decorator registering a factory ``f(seed) -> Bot`` (``stateful``: ``f(seed, state) -> Bot``) under ``name``."""

    def register(factory: Callable[..., Bot]) -> Callable[..., Bot]:
        if name in _HOSTED:
            raise ValueError(f"hosted bot {name!r} is registered twice")
        if stateful:
            _HOSTED[name] = HostedBot(name, games, _unbound, description, factory)
        else:
            _HOSTED[name] = HostedBot(name, games, factory, description)
        return factory

    return register


def _bind(factory: Callable[[int, BotState], Bot], state: BotState) -> Callable[[int], Bot]:
    def bound(seed: int) -> Bot:
        return factory(seed, state)

    return bound


def hosted_bots(state: BotState | None = None) -> dict[str, HostedBot]:
    """Every hosted bot by name (the first call imports :data:`BOT_MODULES`, which registers them all).

    Stateful bots are bound to ``state``; without one, to a fresh :meth:`BotState.default` shared by the
    returned entries only (call this once per host, not once per match).
    """
    _register_all()
    bound = state if state is not None else BotState.default()
    out: dict[str, HostedBot] = {}
    for name, entry in _HOSTED.items():
        if entry.stateful_factory is not None:
            entry = replace(entry, factory=_bind(entry.stateful_factory, bound))
        out[name] = entry
    return out
