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
from typing import ClassVar, Final

perf_counter: Final = time.perf_counter
monotonic: Final = time.monotonic
"""The clocks for the compiled move path (``from arena_server.referee.clock import perf_counter``).

From compiled code ``time.perf_counter()`` looks the function up in the ``time``
module on every call (some 290 instructions); a module-level ``Final`` of a
compiled module is a C static, read directly.
"""


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
    LATE = 0.025
    """A gap between ticks longer than this (``PERIOD + SLACK``) is a stall.

    Written as a number: mypyc compiles this module and takes only literals as class attribute defaults.
    """
    RECENT = 0.040
    """A read this soon after a stall ended (``4 * PERIOD + SLACK``) may have waited for it."""

    _instances: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLag]] = weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.last_tick = perf_counter()
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
            self.last_tick = perf_counter()
            self._handle = self.loop.call_later(self.PERIOD, self._tick)

    def release(self) -> None:
        """Stop watching; the monitor itself stops at its next tick when nobody watches."""
        self.users = max(self.users - 1, 0)

    def _tick(self) -> None:
        now = perf_counter()
        if now - self.last_tick > self.LATE:
            self.stalls.append((self.last_tick, now))
        self.last_tick = now
        self._handle = self.loop.call_later(self.PERIOD, self._tick) if self.users else None

    def stalled_since(self, now: float) -> float | None:
        """When the stall that delayed a read at ``now`` began, or None if the read was on time."""
        if now - self.last_tick > self.LATE:
            return self.last_tick  # still inside a stall the monitor has not seen end yet
        for start, end in reversed(self.stalls):
            if end < now - self.RECENT:
                break
            if start < now:
                return start
        return None

    def arrival(self, sent: float, read: float) -> float:
        """When a reply read at ``read`` (for a request written at ``sent``) became readable, at the earliest.

        Hot callers may skip the call when neither test of :meth:`stalled_since` can hold: the
        monitor ticked within :attr:`LATE` of ``read``, and the last stall ended over :attr:`RECENT` before it.
        """
        start = self.stalled_since(read)
        return read if start is None else max(sent, min(start, read))

    def deadline(self, delay: float, callback: Callable[[], None]) -> Deadline:
        """Call ``callback`` after ``delay`` seconds of a responsive loop (see the class notes)."""
        return Deadline(self, delay, callback)


class Deadline:
    """A timeout that fires only when the event loop ran it on time; cancel with :meth:`cancel`.

    One Deadline can be re-armed with :meth:`restart` move after move, and it
    keeps its event-loop timer across moves: a timer that would fire too late
    is moved earlier, one that fires early (the deadline it was set for was
    cancelled or pushed back) is moved to the current deadline, and one that
    fires with nothing armed goes away. A seat asked every few hundred
    microseconds for seconds-long deadlines thus costs the loop one timer per
    deadline length instead of a timer push and cancel per move (with many
    matches, each push is a walk through a heap of cancelled timers).
    """

    __slots__ = ("_callback", "_due", "_handle", "_lag", "_when")

    def __init__(self, lag: LoopLag, delay: float, callback: Callable[[], None]) -> None:
        self._lag = lag
        self._handle: asyncio.TimerHandle | None = None
        self._when = 0.0
        """When the timer fires, on the ``time.perf_counter`` clock of ``_due`` (the loop's clock is read only
        to set a timer, not every move: an event loop's ``time`` is an interpreted call)."""
        self._callback: Callable[[], None] | None = None
        self._due = 0.0
        self.restart(delay, callback)

    def restart(self, delay: float, callback: Callable[[], None]) -> None:
        """Arm again: call ``callback`` after ``delay`` seconds of a responsive loop (replaces any armed one)."""
        self._callback = callback
        self._due = due = perf_counter() + delay
        if self._handle is not None:
            if self._when <= due:
                return  # the timer fires first and moves itself to the new deadline
            self._handle.cancel()
        self._when = due
        self._handle = self._lag.loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        callback = self._callback
        if callback is None:
            return  # cancelled meanwhile: nothing to do, and no timer until the next restart
        now = perf_counter()
        lag = self._lag
        if now < self._due:  # set for an earlier deadline that was pushed back: wait for this one
            self._schedule(self._due - now)
            return
        if now - self._due > lag.SLACK or lag.stalled_since(now) is not None:
            # The loop was stalled when the deadline passed: a reply may be waiting to be read.
            self._due = now + 4 * lag.PERIOD
            self._schedule(4 * lag.PERIOD)
            return
        self._callback = None
        callback()

    def _schedule(self, delay: float) -> None:
        self._when = perf_counter() + delay
        self._handle = self._lag.loop.call_later(delay, self._fire)

    def cancel(self) -> None:
        """Disarm; the timer itself stays until it fires (cheap) or :meth:`close`."""
        self._callback = None

    def close(self) -> None:
        """Disarm and drop the timer now (when the Deadline will not be restarted)."""
        self._callback = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
