"""In-process seats: a :class:`arena_client.Bot` object called directly by the referee.

Used for hosted reference bots and tests. The bot runs synchronously on the
event loop, so an in-process match runs at full speed; its clock is charged
after the fact (a hosted bot cannot be pre-empted, but it still loses on time).

A bot that thinks for a long time on each move (a search with a time budget,
which says so with ``thinks_off_loop = True``) gets a :class:`ThreadedInProcessSeat`
instead: its ``act`` runs on a worker thread, so the event loop (every other
match, every remote bot) goes on meanwhile, and its kernels, which release
the GIL, run beside it on another core.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
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


THINKERS = ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="arena-hosted-bot")
"""The threads hosted bots think on: one per core (more would only share the cores, and a bot's clock is
wall time). A move waiting for a thread is not charged: its time starts when ``act`` does."""


class ThreadedInProcessSeat(InProcessSeat):
    """An in-process bot whose ``act`` runs on a worker thread (:data:`THINKERS`), asked like a remote seat.

    Its other hooks stay on the loop: the referee calls them only between its
    moves, and :meth:`end` first waits for a move still being thought about
    (an aborted match), so the bot is never called from two threads at once.
    As in :class:`InProcessSeat`, the move is charged after the fact.
    """

    synchronous = False

    def __init__(self, bot: Bot, info: SeatInfo | None = None) -> None:
        super().__init__(bot, info)
        self._thinking: asyncio.Future[Answer] | None = None
        self._asked = 0
        """Counts the asks; an answer whose ask was cancelled (a later count) is dropped."""

    def ask_then(
        self, turn: Turn, moves: Sequence[PublicMove], timeout: float, on_answer: Callable[[Answer], None]
    ) -> None:
        if self._failure is not None:
            on_answer(self._failure)
            return
        self._asked += 1
        asked = self._asked
        update = Update(turn.match_id, tuple(moves), turn.observation) if moves else None
        thinking = asyncio.get_running_loop().run_in_executor(THINKERS, self.act_now, turn, moves, update)
        self._thinking = thinking

        def answered(done: asyncio.Future[Answer]) -> None:
            if asked != self._asked or done.cancelled():
                return  # forgotten (cancel_ask): the match went on without it
            exc = done.exception()
            if exc is not None:  # (act_now turns the bot's errors into answers: this is the seat's own)
                on_answer(Answer(None, 0.0, Termination.CRASH, f"could not run act on a thread: {exc!r}"))
            else:
                on_answer(done.result())

        thinking.add_done_callback(answered)

    def cancel_ask(self) -> None:
        self._asked += 1

    async def end(self, result: MatchResult) -> None:
        thinking = self._thinking
        if thinking is not None and not thinking.done():
            await asyncio.wait({thinking})  # the bot's last act finishes before its end hooks run
        await super().end(result)
