"""Fair clocks: the bot is charged only its own time.

:class:`LoopLag` watches the server's event loop while a bot is being waited
on; a reply read right after a stall is dated back to the stall's start, and a
deadline that falls inside a stall waits until the loop is responsive again.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import ClassVar


class LoopLag:
    """How late this event loop has been running, so that a bot is charged its own time only.

    A periodic callback (every :attr:`PERIOD` seconds while anyone
    :meth:`acquire` holds the monitor) notes when the loop last got round to it;
    a gap much longer than the period is a *stall*: the server was busy (or
    the machine loaded) and read nothing. A reply that is read just after a
    stall may have arrived at any moment of it, so :meth:`arrival` dates it
    back to the stall's start (the bot gets the benefit of the doubt); stalls
    while the bot was still thinking are not discounted, so a slow bot stays
    slow. :meth:`deadline` runs a timeout callback only when the loop ran it
    on time, so a deadline that fell inside a stall first lets the reader see
    what arrived meanwhile.
    """

    PERIOD = 0.005
    """Seconds between ticks."""
    SLACK = 0.020
    """Lateness beyond the period that counts as a stall (shorter hiccups are the bot's, within its grace)."""

    _instances: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLag]] = weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.last_tick = time.perf_counter()
        self.stalls: deque[tuple[float, float]] = deque(maxlen=32)
        """Recent stalls as (loop last seen running, loop running again), perf_counter seconds."""
        self.users = 0
        self._handle: asyncio.TimerHandle | None = None

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop | None = None) -> LoopLag:
        """The monitor of ``loop`` (the running loop by default)."""
        loop = loop or asyncio.get_running_loop()
        lag = cls._instances.get(loop)
        if lag is None:
            lag = cls._instances[loop] = cls(loop)
        return lag

    def acquire(self) -> None:
        """Start watching (counted; pair with :meth:`release`)."""
        self.users += 1
        if self._handle is None:
            self.last_tick = time.perf_counter()
            self._handle = self.loop.call_later(self.PERIOD, self._tick)

    def release(self) -> None:
        """Stop watching; the monitor itself stops at its next tick when nobody watches."""
        self.users = max(self.users - 1, 0)

    def _tick(self) -> None:
        now = time.perf_counter()
        if now - self.last_tick > self.PERIOD + self.SLACK:
            self.stalls.append((self.last_tick, now))
        self.last_tick = now
        self._handle = self.loop.call_later(self.PERIOD, self._tick) if self.users else None

    def stalled_since(self, now: float) -> float | None:
        """When the stall that delayed a read at ``now`` began, or None if the read was on time."""
        if now - self.last_tick > self.PERIOD + self.SLACK:
            return self.last_tick  # still inside a stall the monitor has not seen end yet
        for start, end in reversed(self.stalls):
            if end < now - 4 * self.PERIOD - self.SLACK:
                break
            if start < now:
                return start
        return None

    def arrival(self, sent: float, read: float) -> float:
        """When a reply read at ``read`` (for a request written at ``sent``) became readable, at the earliest."""
        start = self.stalled_since(read)
        return read if start is None else max(sent, min(start, read))

    def deadline(self, delay: float, callback: Callable[[], None]) -> Deadline:
        """Call ``callback`` after ``delay`` seconds of a responsive loop (see the class notes)."""
        return Deadline(self, delay, callback)


class Deadline:
    """A timeout that fires only when the event loop ran it on time; cancel with :meth:`cancel`."""

    __slots__ = ("_callback", "_due", "_handle", "_lag")

    def __init__(self, lag: LoopLag, delay: float, callback: Callable[[], None]) -> None:
        self._lag = lag
        self._callback = callback
        self._due = time.perf_counter() + delay
        self._handle: asyncio.TimerHandle | None = lag.loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        now = time.perf_counter()
        if now - self._due > self._lag.SLACK or self._lag.stalled_since(now) is not None:
            # The loop was stalled when the deadline passed: a reply may be waiting to be read.
            self._due = now + 4 * self._lag.PERIOD
            self._handle = self._lag.loop.call_later(4 * self._lag.PERIOD, self._fire)
            return
        self._handle = None
        self._callback()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
