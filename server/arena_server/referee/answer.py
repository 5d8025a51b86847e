"""A seat's reply to a turn, compiled with the move path (``arena_client._native.MODULES``).

Every move of a match makes one :class:`Answer` per acting seat, and the
referee reads its fields while judging it. Compiled, it is a native class:
compiled code builds it and reads its fields directly, without running
interpreted code (docs/performance.md, twenty-second pass). That is why it has
its own ``__init__`` and is not a dataclass: mypyc keeps the ``__init__`` that
``dataclasses`` generates, which is interpreted (nothing compares answers, so
there is no ``__eq__`` either). Interpreted code (the stdio seat, the tests)
uses it as any other class.
"""

from __future__ import annotations

from arena_client.types import Termination


class Answer:
    """A seat's reply to a turn: an action, or the reason it has none.

    Attributes:
        action: The chosen action, or None on failure.
        elapsed: Seconds from asking to answering.
        failure: Set when the seat failed (timeout, crash, ...).
        reason: Why it failed, in words a bot author can act on.
    """

    __slots__ = ("action", "elapsed", "failure", "reason")

    def __init__(
        self, action: int | None, elapsed: float, failure: Termination | None = None, reason: str = ""
    ) -> None:
        self.action = action
        self.elapsed = elapsed
        self.failure = failure
        self.reason = reason

    def __repr__(self) -> str:
        fields = f"action={self.action!r}, elapsed={self.elapsed!r}, failure={self.failure!r}, reason={self.reason!r}"
        return f"Answer({fields})"


def elapsed_us(seconds: float) -> int:
    """A seat's thinking time as the move log keeps it: whole microseconds, at most 2**32 - 1 (its array's items)."""
    return min(int(seconds * 1e6), 0xFFFFFFFF)
