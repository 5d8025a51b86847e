"""The referee's shared state: the attributes its parts (asking, publishing, the loop) work on."""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from arena_client.types import (
    PublicMove,
    Termination,
    TimeControl,
)
from arena_games import Game, State
from arena_server.referee.answer import Answer
from arena_server.referee.records import (
    MatchControl,
    MatchListener,
    MatchRecord,
)
from arena_server.referee.seat import Seat


class RefereeState:
    """What every part of the referee reads and writes (attributes set by ``_Referee.__init__``).

    Slots, not an instance dict: past 30 attributes CPython stops sharing an
    instance dict's keys between instances, and every attribute read of the
    move loop would get slower (about 80 ns a step of an in-process match).
    """

    __slots__ = (
        "acting",
        "all_legal",
        "all_seat_codes",
        "all_seats",
        "answers",
        "callbacks",
        "control",
        "cut_short",
        "decisions",
        "extend_legal",
        "extend_players",
        "failures",
        "game",
        "grace",
        "joint_moves",
        "legal",
        "listeners",
        "log_actions",
        "log_actions_from",
        "log_elapsed_us",
        "one_legal",
        "outstanding",
        "overage",
        "overage_td",
        "pending",
        "per_move",
        "per_move_td",
        "player",
        "public_moves",
        "public_observation",
        "record",
        "seat_codes",
        "seats",
        "starting",
        "state",
        "synchronous",
        "task",
        "tc",
        "thought",
        "track",
        "tracking",
        "turn_id",
        "wake",
    )

    game: Game
    seats: list[Seat]
    tc: TimeControl
    synchronous: list[bool]
    """Each seat's ``synchronous`` (read once: a seat's kind does not change during a match)."""
    public_observation: bool
    """The game's ``public_observation``: one observation for every seat, built once a decision."""
    record: MatchRecord
    extend_players: Callable[[array[int]], None]
    log_actions: Callable[[int], None]
    log_actions_from: Callable[[list[int]], None]
    log_elapsed_us: Callable[[int], None]
    extend_legal: Callable[[array[int]], None]
    """Methods of ``record.moves``' arrays, bound once a match (a call, not a lookup, a move).

    The seats and the legal flags go in as copies from the arrays below (``extend`` by an
    array of its own type copies it), not as ints: an ``append`` to an array of signed or
    8-bit items converts its int through ``PyArg_Parse``, some 400 instructions. The
    elapsed times' array (``"I"``) converts cheaply and takes ``append``.
    """
    seat_codes: tuple[array[int], ...]
    """Each seat as a one-item array of the players log's type."""
    all_seat_codes: array[int]
    """Every seat, in order (a simultaneous decision's players)."""
    one_legal: array[int]
    all_legal: array[int]
    """One and ``num_players`` legal flags (1), of the legal log's type."""
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
    joint_moves: dict[tuple[int, ...], tuple[PublicMove, ...]]
    """A simultaneous decision's public moves by its actions (seat by seat), built once."""
    failures: list[tuple[int, Termination, str]]
    callbacks: list[Callable[[Answer], None]]
    decisions: int
    thought: float
    """Seconds the in-process bots have thought since the match last let the rest of the server run."""
    all_seats: tuple[int, ...]
    """Every seat's index: who acts in a simultaneous move (a tuple: indexing a range makes a new int each time)."""
    # The decision being asked:
    player: int
    acting: tuple[int, ...]
    answers: list[Answer | None]
    """By position in ``acting``; None until that seat answers."""
    legal: list[Sequence[int]]
    """By position in ``acting``: the legal actions its Turn listed (see :meth:`Asking._passes`)."""
    outstanding: int
    """Asks not yet answered."""
    cut_short: bool
    """A seat failed: the decision's other answers are not waited for."""
    starting: bool
    """:meth:`Asking._begin` is asking the seats (an answer that comes at once is only recorded)."""
    wake: asyncio.Future[Any] | None
    """What the task awaits while the match runs in the seats' callbacks."""

    def _who(self, seat_index: int) -> str:
        return f"seat {seat_index} ({self.seats[seat_index].info.bot_name})"

    async def _finish(self, termination: Termination, offender: int | None, reason: str, forfeit: bool = True) -> None:
        raise NotImplementedError
