"""The referee's shared state: the attributes its parts (asking, publishing, the loop) work on."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from arena_client.types import (
    PublicMove,
    Termination,
    TimeControl,
)
from arena_games import Game, State
from arena_server.referee.records import (
    MatchControl,
    MatchListener,
    MatchRecord,
)
from arena_server.referee.seat import Seat


class RefereeState:
    """What every part of the referee reads and writes (attributes set by ``_Referee.__init__``)."""

    game: Game
    seats: list[Seat]
    tc: TimeControl
    record: MatchRecord
    control: MatchControl
    listeners: list[MatchListener]
    state: State
    overage: list[float]
    overage_td: list[timedelta]
    per_move: float
    per_move_td: timedelta
    grace: float
    pending: list[list[PublicMove]]
    track: list[bool]
    tracking: bool
    turn_id: int
    task: asyncio.Task[None] | None
    """The task running the match (an abort cancels its wait for a remote answer)."""
    public_moves: dict[tuple[int, int], PublicMove]
    """The match's :class:`PublicMove` objects by (seat, action), labelled once."""
    failures: list[tuple[int, Termination, str]]

    def _who(self, seat_index: int) -> str:
        return f"seat {seat_index} ({self.seats[seat_index].info.bot_name})"

    async def _finish(self, termination: Termination, offender: int | None, reason: str, forfeit: bool = True) -> None:
        raise NotImplementedError
