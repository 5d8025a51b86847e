"""The turn ids a seat was given (or answered) in one match, in memory that does not grow with the match.

A seat keeps them to tell a late answer (to a turn it was given, which has
ended) from an action for a turn it never had. Turn ids increase, and a
seat's ids nearly always step evenly: every second id in a two-seat game
that alternates or moves at once. So they are kept as arithmetic runs
(first id, step, length). A 10-million-round RPS match is one run per seat,
where a ``set`` of its 5 million ids took 294 MB; a game whose turns come
unevenly (dots and boxes: a box earns another move) takes one run per change
of step, three 8-byte numbers each.

Adding an id is a few integer operations (it happens on every move); asking
whether an id is in the set is a binary search over the runs (it happens
only when a bot answers late).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right


class TurnIds:
    """An increasing sequence of positive turn ids, kept as arithmetic runs.

    ``add`` takes ids in increasing order (the order a match issues them) and
    ``in`` asks whether an id was added.
    """

    __slots__ = ("_count", "_counts", "_start", "_starts", "_step", "_steps", "last")

    def __init__(self) -> None:
        self._starts = array("q")
        """The finished runs' first ids (increasing), steps and lengths."""
        self._steps = array("q")
        self._counts = array("q")
        self._start = 0
        """The run being extended: its first id, its step (0 while it has one id) and its length."""
        self._step = 0
        self._count = 0
        self.last = 0
        """The latest id added (0: none)."""

    def add(self, turn_id: int) -> None:
        """Record ``turn_id`` (the latest id again is a no-op).

        Raises:
            ValueError: ``turn_id`` is below the latest id added.
        """
        if turn_id <= self.last:
            if turn_id == self.last:
                return
            raise ValueError(f"turn ids must increase: {turn_id} after {self.last}")
        self.last = turn_id
        count = self._count
        if count > 1:
            if turn_id == self._start + self._step * count:
                self._count = count + 1
                return
            self._starts.append(self._start)
            self._steps.append(self._step)
            self._counts.append(count)
            self._start = turn_id
            self._step = 0
            self._count = 1
        elif count == 1:
            self._step = turn_id - self._start
            self._count = 2
        else:
            self._start = turn_id
            self._count = 1

    def __contains__(self, turn_id: object) -> bool:
        if type(turn_id) is not int or not 0 < turn_id <= self.last:
            return False
        if turn_id >= self._start:
            return _in_run(turn_id, self._start, self._step, self._count)
        i = bisect_right(self._starts, turn_id) - 1
        return i >= 0 and _in_run(turn_id, self._starts[i], self._steps[i], self._counts[i])

    def __len__(self) -> int:
        return sum(self._counts) + self._count

    def runs(self) -> int:
        """How many runs hold the ids (the memory they take is three numbers a run)."""
        return len(self._starts) + (1 if self._count else 0)


def _in_run(turn_id: int, start: int, step: int, count: int) -> bool:
    offset = turn_id - start
    if offset == 0:
        return count > 0
    return step > 0 and offset % step == 0 and offset // step < count
