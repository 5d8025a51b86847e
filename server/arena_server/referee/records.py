"""What a match is made of: the move log, the record, the server's handle on a running match.

(A seat's :class:`~arena_server.referee.answer.Answer` has its own module,
compiled with the move path.) A :class:`MatchRecord` is filled in by the referee as the match runs; the
store writes it, replays read it back. :func:`void_record` turns a finished
record into an abort when the server could not commit it.
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from arena_client.types import (
    SeatInfo,
    Termination,
    TimeControl,
)
from arena_games import Game, State
from arena_server.referee.answer import elapsed_us


class MoveLog:
    """Every decision of a match in compact parallel arrays.

    ``players[i]`` is the seat (or -1 for chance), ``actions[i]`` the action,
    ``elapsed_us[i]`` the seat's thinking time in microseconds and
    ``legal[i]`` 0 for the one illegal action that may end a match.
    """

    __slots__ = ("actions", "elapsed_us", "legal", "players")

    def __init__(self) -> None:
        self.players = array("b")
        self.actions = array("i")
        self.elapsed_us = array("I")
        self.legal = array("B")

    def add(self, player: int, action: int, elapsed: float, legal: bool = True) -> None:
        self.players.append(player)
        self.actions.append(action)
        self.elapsed_us.append(elapsed_us(elapsed))
        self.legal.append(1 if legal else 0)

    def __len__(self) -> int:
        return len(self.actions)

    def __iter__(self) -> Iterator[tuple[int, int, float, bool]]:
        for p, a, e, ok in zip(self.players, self.actions, self.elapsed_us, self.legal, strict=True):
            yield p, a, e / 1e6, bool(ok)

    def history(self) -> list[tuple[int, int]]:
        """The legal ``(player, action)`` pairs, i.e. the game's history."""
        return [(p, a) for p, a, _, ok in self if ok]


@dataclass
class MatchRecord:
    """Everything about one match: who, how, every move, and how it ended."""

    match_id: str
    game: Game
    seats: tuple[SeatInfo, ...]
    time_control: TimeControl
    seed: str
    seed_sha256: str
    started_at: datetime
    ended_at: datetime | None = None
    termination: Termination | None = None
    offender: int | None = None
    reason: str = ""
    returns: tuple[float, ...] = ()
    moves: MoveLog = field(default_factory=MoveLog)
    rated: bool = False
    seed_chosen: bool = False
    """The seed came from the match's creator (unrated matches between its own bots), not the server."""
    seed_sealed: bool = False
    """The seed is reused by a later match (a duplicate set): not revealed at this match's end."""

    @property
    def finished(self) -> bool:
        return self.termination is not None

    def summary(self) -> str:
        """One line: who played, the returns and why it ended."""
        names = " vs ".join(s.bot_name for s in self.seats)
        scores = " : ".join(f"{r + 0.0:g}" for r in self.returns)  # + 0.0 turns -0.0 into 0
        term = self.termination.label if self.termination else "running"
        return f"match {self.match_id} {self.game!r}: {names}  {scores}  ({term}: {self.reason})"


MatchListener = Callable[[str, Any], None]
"""Spectator hook: called with ("moves", (public_moves, state)) and ("ended", record)."""

CommitHook = Callable[[MatchRecord], Awaitable[None]]
"""Called with the finished record before any seat or spectator hears the end (e.g. the store's commit)."""

COMMIT_FAILED = "the server could not record the match"
"""How the reason of a match voided by a failed commit starts."""


def void_record(record: MatchRecord, reason: str) -> None:
    """Turn a finished record into an abort with ``reason``: nobody is blamed and the returns are zero."""
    record.termination = Termination.ABORTED
    record.offender = None
    record.reason = reason
    record.returns = tuple(0.0 for _ in record.seats)
    record.ended_at = record.ended_at or datetime.now(UTC)


class MatchControl:
    """The server's handle on a running match: abort it, watch it.

    ``abort`` sets a flag the referee checks before every decision and, while
    the referee waits for remote answers, cancels that wait. ``listeners`` may
    change while the match runs: the referee builds public moves for them only
    while there is at least one (or a seat needs updates), so an unwatched
    in-process match pays nothing for spectators. ``state`` is the live state
    (read it, never change it), from which a late spectator catches up.
    """

    def __init__(self) -> None:
        self.aborted = False
        self.reason = ""
        self.waiter: asyncio.Task[Any] | None = None
        self.listeners: list[MatchListener] = []
        self.state: State | None = None

    def abort(self, reason: str) -> None:
        self.aborted = True
        self.reason = reason
        if self.waiter is not None and not self.waiter.done():
            self.waiter.cancel()
