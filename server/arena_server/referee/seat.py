"""The seat interface: how the referee talks to one participant, whatever its transport."""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable, Sequence

from arena_client.types import (
    MatchInfo,
    MatchResult,
    PublicMove,
    SeatInfo,
    Turn,
    Update,
)
from arena_server.referee.answer import Answer


class Seat(abc.ABC):
    """One participant's connection to a match.

    Synchronous seats (in-process bots) implement :meth:`act_now` and set
    ``synchronous = True``; the referee calls them without awaiting.
    Asynchronous seats implement :meth:`ask_then` and :meth:`cancel_ask`: the
    answer, or the failure (a missed deadline, a lost connection), is handed to
    a callback from whatever produced it, and the referee goes on from there.
    """

    synchronous: bool = False
    wants_updates: bool = True

    def __init__(self, info: SeatInfo) -> None:
        self.info = info

    @abc.abstractmethod
    async def start(self, match: MatchInfo) -> Answer | None:
        """Tell the seat a match begins. Returns an Answer carrying a failure if it cannot play."""

    async def ask(self, turn: Turn, moves: Sequence[PublicMove], timeout: float) -> Answer:
        """Send ``turn`` (with the public ``moves`` the seat has not seen) and await the answer.

        Built on :meth:`ask_then` (the referee's own way of asking); cancelling the
        wait forgets the ask (:meth:`cancel_ask`).
        """
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()

        def on_answer(answer: Answer) -> None:
            if not future.done():  # (cancelled with the waiting task, which has not yet run its finally below)
                future.set_result(answer)

        try:
            self.ask_then(turn, moves, timeout, on_answer)
            return await future
        except BaseException:  # (cancelled: the ask is forgotten; once answered there is nothing to forget)
            self.cancel_ask()
            raise

    def ask_then(
        self, turn: Turn, moves: Sequence[PublicMove], timeout: float, on_answer: Callable[[Answer], None]
    ) -> None:
        """Send ``turn`` and return at once; ``on_answer`` is called once, with the answer or the failure.

        It is called from whatever produces the answer (the seat's reader, its
        deadline, its session closing), and before this returns if the seat has
        already failed; never after :meth:`cancel_ask`.
        """
        raise NotImplementedError

    def cancel_ask(self) -> None:
        """Forget the turn asked by :meth:`ask_then` (its answer, if it comes, is dropped as stale)."""
        raise NotImplementedError

    def act_now(self, turn: Turn, moves: Sequence[PublicMove], update: Update | None) -> Answer:
        """Synchronous seats: decide at once."""
        raise NotImplementedError

    @abc.abstractmethod
    def update(self, update: Update) -> None:
        """Deliver public moves to a seat that is not about to act (must not block)."""

    @abc.abstractmethod
    async def end(self, result: MatchResult) -> None:
        """Tell the seat the match is over (must not raise)."""
