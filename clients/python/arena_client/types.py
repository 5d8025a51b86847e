"""Plain typed values a bot receives: match info, turns, updates, results.

These are what :class:`arena_client.Bot` methods get, whether the bot plays
in-process on the server, as a subprocess, or remotely over gRPC. Protobuf
messages never reach bot code; :mod:`arena_client.convert` translates at the
edge.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from arena_games import ParamValue


class Termination(enum.IntEnum):
    """How a match ended (values equal ``arena.v1.Termination``)."""

    NORMAL = 1
    TIMEOUT = 2
    ILLEGAL_ACTION = 3
    CRASH = 4
    DISCONNECT = 5
    PROTOCOL_ERROR = 6
    RESIGN = 7
    ABORTED = 8

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", " ")


@dataclass(frozen=True, slots=True)
class TimeControl:
    """A per-move budget, an overage bank and an uncharged grace.

    For every decision a seat may use ``per_move`` plus what is left of its
    bank; time beyond ``per_move`` is taken from the bank; the first ``grace``
    of every answer is never charged.
    """

    per_move: timedelta = timedelta(seconds=1)
    overage: timedelta = timedelta(seconds=10)
    grace: timedelta = timedelta(milliseconds=100)

    def __post_init__(self) -> None:
        for name in ("per_move", "overage", "grace"):
            value = getattr(self, name)
            if not isinstance(value, timedelta) or value < timedelta(0):
                raise ValueError(f"time control {name}={value!r} must be a non-negative duration")
        if self.per_move <= timedelta(0):
            raise ValueError("time control per_move must be positive")


@dataclass(frozen=True, slots=True)
class SeatInfo:
    """A participant of a match."""

    seat: int
    bot_name: str
    bot_version: int = 1
    kind: str = "hosted"


@dataclass(frozen=True, slots=True)
class PublicMove:
    """An action that every seat may now see."""

    seat: int
    action: int
    label: str = ""


@dataclass(frozen=True, slots=True)
class MatchInfo:
    """Sent once when a bot is seated in a match."""

    match_id: str
    game: str
    params: dict[str, ParamValue]
    seat: int
    seats: tuple[SeatInfo, ...]
    time_control: TimeControl
    seed_sha256: str
    rated: bool = False


@dataclass(slots=True)
class Turn:
    """The seat must act: return one of ``legal_actions`` from ``Bot.act``.

    Attributes:
        match_id: The match.
        turn_id: Increasing within the match.
        seat: The acting seat.
        observation: The game's observation dataclass for this seat, e.g.
            :class:`arena_games.rps.RpsObservation`.
        legal_actions: Sorted, never empty.
        time_budget: Time for this move before the overage bank is used.
        overage_left: What is left in the bank.
    """

    match_id: str
    turn_id: int
    seat: int
    observation: Any
    legal_actions: tuple[int, ...] | Any
    time_budget: timedelta
    overage_left: timedelta


@dataclass(slots=True)
class Update:
    """Public moves the bot has not seen yet, and its observation after them."""

    match_id: str
    moves: tuple[PublicMove, ...]
    observation: Any


@dataclass(frozen=True, slots=True)
class MatchResult:
    """The end of a match."""

    match_id: str
    returns: tuple[float, ...]
    termination: Termination
    reason: str
    seed: str
    offender: int | None = None
    observation: Any = None
    moves: tuple[PublicMove, ...] = field(default=())
