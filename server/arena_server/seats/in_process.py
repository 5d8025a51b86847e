"""In-process seats: a :class:`arena_client.Bot` object called directly by the referee.

Used for hosted reference bots and tests. The bot runs synchronously on the
event loop, so an in-process match runs at full speed; its clock is charged
after the fact (a hosted bot cannot be pre-empted, but it still loses on time).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from arena_client import Bot, MatchInfo, MatchResult, PublicMove, Resign, SeatInfo, Termination, Turn, Update
from arena_server.referee.answer import Answer
from arena_server.referee.clock import perf_counter
from arena_server.referee.seat import Seat


class InProcessSeat(Seat):
    """Seats a Bot object. Exceptions from the bot end the match as a crash."""

    synchronous = True

    def __init__(self, bot: Bot, info: SeatInfo | None = None) -> None:
        super().__init__(info or SeatInfo(0, bot.name, 1, "hosted"))
        loose: Any = bot  # (with `self.bot: Any = bot`, mypyc narrows self.bot to Bot below and checks the bool)
        self.bot: Any = loose
        """Held as Any: compiled (mypyc), a typed call would check what the bot returns against its annotations
        (refusing a numpy integer from ``act`` before it is converted)."""
        self.wants_updates = bool(loose.wants_updates())
        self._failure: Answer | None = None

    async def start(self, match: MatchInfo) -> Answer | None:
        try:
            self.bot.on_match_start(match)
        except Exception as exc:
            return Answer(None, 0.0, Termination.CRASH, f"raised in on_match_start: {exc!r}")
        return None

    def act_now(self, turn: Turn, moves: Sequence[PublicMove], update: Update | None) -> Answer:
        if self._failure is not None:
            return self._failure
        bot = self.bot
        start = perf_counter()
        try:
            if update is not None and self.wants_updates:
                bot.on_update(update)
            action = bot.act(turn)
        except Resign as exc:
            return Answer(None, perf_counter() - start, Termination.RESIGN, f"resigned: {exc}")
        except Exception as exc:
            return Answer(None, perf_counter() - start, Termination.CRASH, f"raised in act: {exc!r}")
        elapsed = perf_counter() - start
        if type(action) is not int:
            try:
                action = int(action)  # numpy integers and the like
            except (TypeError, ValueError):
                return Answer(
                    None,
                    elapsed,
                    Termination.PROTOCOL_ERROR,
                    f"returned {action!r} from act, not an integer action",
                )
        return Answer(action, elapsed)

    def update(self, update: Update) -> None:
        if self._failure is not None:
            return
        try:
            self.bot.on_update(update)
        except Exception as exc:
            self._failure = Answer(None, 0.0, Termination.CRASH, f"raised in on_update: {exc!r}")

    async def end(self, result: MatchResult) -> None:
        try:
            if result.moves and self.wants_updates and self._failure is None:
                # Same order as the remote SDK: the last public moves, then the end.
                self.bot.on_update(Update(result.match_id, result.moves, result.observation))
            self.bot.on_match_end(result)
        except Exception:
            pass  # the match is over; a failing hook changes nothing
