"""The referee: runs one match between any mix of seats and returns its record.

Per decision the referee builds each acting seat's redacted :class:`Turn`,
asks with a deadline, charges the clock, checks legality, applies the action
and tells the other seats what became public. Its promises:

* Simultaneous moves are all collected before any is revealed.
* A seat only ever receives its own observation (``state.observation(seat)``).
* Answers to expired turns are dropped by the seats, never applied.
* The match seed's SHA-256 is announced at the start and the seed revealed at
  the end; chance outcomes come from an RNG keyed by the seed alone.
* Every ending is a :class:`Termination` value with the offending seat and a
  readable reason; nothing a bot does raises out of :func:`play_match`.
* Commit before notify: the ``on_end`` hook (the server's store) gets the
  finished record before any seat or spectator hears the end; if it fails, the
  match is voided and the seats are told that abort, with the reason.
* A seat is charged only its own time: :class:`LoopLag` tells seats when the
  server's event loop stalled, so a reply that waited for a busy server is
  dated back, and a deadline that fell in a stall lets the reply be read first.
"""

from __future__ import annotations

import abc
import asyncio
import hashlib
import random
import secrets
import time
import weakref
from array import array
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from arena_client.types import (
    MatchInfo,
    MatchResult,
    PublicMove,
    SeatInfo,
    Termination,
    TimeControl,
    Turn,
    Update,
)
from arena_games import CHANCE, SIMULTANEOUS, TERMINAL, Game, State, describe_actions

_ZERO = timedelta(0)


@dataclass(frozen=True, slots=True)
class Answer:
    """A seat's reply to a turn: an action, or the reason it has none.

    Attributes:
        action: The chosen action, or None on failure.
        elapsed: Seconds from asking to answering.
        failure: Set when the seat failed (timeout, crash, ...).
        reason: Why it failed, in words a bot author can act on.
    """

    action: int | None
    elapsed: float
    failure: Termination | None = None
    reason: str = ""


class Seat(abc.ABC):
    """One participant's connection to a match.

    Synchronous seats (in-process bots) implement :meth:`act_now` and set
    ``synchronous = True``; the referee calls them without awaiting.
    Asynchronous seats implement :meth:`ask` with a deadline.
    """

    synchronous: bool = False
    wants_updates: bool = True

    def __init__(self, info: SeatInfo) -> None:
        self.info = info

    @abc.abstractmethod
    async def start(self, match: MatchInfo) -> Answer | None:
        """Tell the seat a match begins. Returns an Answer carrying a failure if it cannot play."""

    async def ask(self, turn: Turn, moves: Sequence[PublicMove], timeout: float) -> Answer:
        """Send ``turn`` (with the public ``moves`` the seat has not seen) and await the answer."""
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


class MoveLog:
    """Every decision of a match in compact parallel arrays.

    ``players[i]`` is the seat (or -1 for chance), ``actions[i]`` the action,
    ``elapsed_us[i]`` the seat's thinking time in microseconds and
    ``legal[i]`` 0 for the one illegal action that may end a match.
    """

    __slots__ = ("actions", "elapsed_us", "legal", "players")

    def __init__(self) -> None:
        self.players = array("b")
        self.actions = array("i")
        self.elapsed_us = array("I")
        self.legal = array("B")

    def add(self, player: int, action: int, elapsed: float, legal: bool = True) -> None:
        self.players.append(player)
        self.actions.append(action)
        self.elapsed_us.append(min(int(elapsed * 1e6), 0xFFFFFFFF))
        self.legal.append(1 if legal else 0)

    def __len__(self) -> int:
        return len(self.actions)

    def __iter__(self) -> Iterator[tuple[int, int, float, bool]]:
        for p, a, e, ok in zip(self.players, self.actions, self.elapsed_us, self.legal, strict=True):
            yield p, a, e / 1e6, bool(ok)

    def history(self) -> list[tuple[int, int]]:
        """The legal ``(player, action)`` pairs, i.e. the game's history."""
        return [(p, a) for p, a, _, ok in self if ok]


@dataclass
class MatchRecord:
    """Everything about one match: who, how, every move, and how it ended."""

    match_id: str
    game: Game
    seats: tuple[SeatInfo, ...]
    time_control: TimeControl
    seed: str
    seed_sha256: str
    started_at: datetime
    ended_at: datetime | None = None
    termination: Termination | None = None
    offender: int | None = None
    reason: str = ""
    returns: tuple[float, ...] = ()
    moves: MoveLog = field(default_factory=MoveLog)
    rated: bool = False
    seed_chosen: bool = False
    """The seed came from the match's creator (unrated matches between its own bots), not the server."""
    seed_sealed: bool = False
    """The seed is reused by a later match (a duplicate set): not revealed at this match's end."""

    @property
    def finished(self) -> bool:
        return self.termination is not None

    def summary(self) -> str:
        """One line: who played, the returns and why it ended."""
        names = " vs ".join(s.bot_name for s in self.seats)
        scores = " : ".join(f"{r + 0.0:g}" for r in self.returns)  # + 0.0 turns -0.0 into 0
        term = self.termination.label if self.termination else "running"
        return f"match {self.match_id} {self.game!r}: {names}  {scores}  ({term}: {self.reason})"


MatchListener = Callable[[str, Any], None]
"""Spectator hook: called with ("moves", (public_moves, state)) and ("ended", record)."""

CommitHook = Callable[[MatchRecord], Awaitable[None]]
"""Called with the finished record before any seat or spectator hears the end (e.g. the store's commit)."""

COMMIT_FAILED = "the server could not record the match"
"""How the reason of a match voided by a failed commit starts."""


def void_record(record: MatchRecord, reason: str) -> None:
    """Turn a finished record into an abort with ``reason``: nobody is blamed and the returns are zero."""
    record.termination = Termination.ABORTED
    record.offender = None
    record.reason = reason
    record.returns = tuple(0.0 for _ in record.seats)
    record.ended_at = record.ended_at or datetime.now(UTC)


class MatchControl:
    """The server's handle on a running match: abort it, watch it.

    ``abort`` sets a flag the referee checks before every decision and, while
    the referee waits for remote answers, cancels that wait. ``listeners`` may
    change while the match runs: the referee builds public moves for them only
    while there is at least one (or a seat needs updates), so an unwatched
    in-process match pays nothing for spectators. ``state`` is the live state
    (read it, never change it), from which a late spectator catches up.
    """

    def __init__(self) -> None:
        self.aborted = False
        self.reason = ""
        self.waiter: asyncio.Task[Any] | None = None
        self.listeners: list[MatchListener] = []
        self.state: State | None = None

    def abort(self, reason: str) -> None:
        self.aborted = True
        self.reason = reason
        if self.waiter is not None and not self.waiter.done():
            self.waiter.cancel()


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


def seed_hash(seed: str) -> str:
    """The commitment announced at the start: hex SHA-256 of the UTF-8 seed."""
    return hashlib.sha256(seed.encode()).hexdigest()


def new_seed() -> str:
    """A fresh 128-bit seed as 32 hex characters."""
    return secrets.token_hex(16)


def chance_rng(seed: str) -> random.Random:
    """The match's chance RNG. Keyed differently from the commitment, so the hash reveals nothing."""
    return random.Random(hashlib.sha256(b"arena-chance:" + seed.encode()).digest())


def bot_seed(seed: str, seat: int) -> int:
    """A deterministic per-seat seed for hosted bots, derived from the match seed."""
    return int.from_bytes(hashlib.sha256(f"arena-bot:{seat}:{seed}".encode()).digest()[:8], "big")


def _sample(outcomes: Sequence[tuple[int, float]], rng: random.Random) -> int:
    x = rng.random()
    acc = 0.0
    for action, prob in outcomes:
        acc += prob
        if x < acc:
            return action
    return outcomes[-1][0]


async def play_match(
    game: Game,
    seats: Sequence[Seat],
    time_control: TimeControl | None = None,
    seed: str | None = None,
    match_id: str = "local",
    control: MatchControl | None = None,
    listeners: Sequence[MatchListener] = (),
    rated: bool = False,
    record: MatchRecord | None = None,
    on_end: CommitHook | None = None,
) -> MatchRecord:
    """Run one match to its end and return the record. Never raises for bot misbehaviour.

    Args:
        game: The game with its parameters.
        seats: One seat per player, by seat index.
        time_control: The clock; a default one when None.
        seed: The match seed (a fresh random one when None).
        match_id: Id sent to the seats and kept in the record.
        control: Lets the caller abort the match.
        listeners: Spectator hooks (public information only until "ended").
        rated: Recorded and announced to the seats.
        record: Fill in this record (its seed, id and clock win over the other
            arguments) instead of creating one; lets a caller see the ending
            before the seats are told.
        on_end: Awaited with the finished record before any seat or listener is
            told the result (the server commits the match here). If it raises,
            the match is voided (:func:`void_record`, reason starting with
            :data:`COMMIT_FAILED`) and that abort is what the seats are told.
    """
    if len(seats) != game.num_players:
        raise ValueError(f"{game.name} needs {game.num_players} seats, got {len(seats)}")
    if record is None:
        seed = new_seed() if seed is None else seed
        record = MatchRecord(
            match_id=match_id,
            game=game,
            seats=tuple(s.info for s in seats),
            time_control=time_control or TimeControl(),
            seed=seed,
            seed_sha256=seed_hash(seed),
            started_at=datetime.now(UTC),
            rated=rated,
        )
    referee = _Referee(game, seats, record.time_control, record, control or MatchControl(), listeners, on_end)
    await referee.run()
    return record


class _Referee:
    """The state of one running match (kept apart so play_match stays readable)."""

    def __init__(
        self,
        game: Game,
        seats: Sequence[Seat],
        tc: TimeControl,
        record: MatchRecord,
        control: MatchControl,
        listeners: Sequence[MatchListener],
        on_end: CommitHook | None = None,
    ) -> None:
        self.game = game
        self.on_end = on_end
        self.seats = list(seats)
        self.tc = tc
        self.record = record
        self.control = control
        control.listeners.extend(listeners)
        self.listeners = control.listeners  # the same list: spectators may join mid-match
        self.state = game.new_initial_state()
        control.state = self.state
        self.rng = chance_rng(record.seed)
        n = game.num_players
        self.overage = [tc.overage.total_seconds()] * n
        self.pending: list[list[PublicMove]] = [[] for _ in range(n)]
        self.track = [s.wants_updates for s in seats]
        self.turn_id = 0
        self.per_move = tc.per_move.total_seconds()
        self.per_move_td = tc.per_move
        self.overage_td = [tc.overage] * n
        self.grace = tc.grace.total_seconds()
        self.all_sync = all(s.synchronous for s in seats)
        self.tracking = any(self.track)
        self.failures: list[tuple[int, Termination, str]] = []

    # -- the loop -------------------------------------------------------------------------------

    async def run(self) -> None:
        record = self.record
        info = tuple(s.info for s in self.seats)
        params = dict(self.game.params)
        for seat_index, seat in enumerate(self.seats):
            match = MatchInfo(
                record.match_id,
                self.game.name,
                params,
                seat_index,
                info,
                self.tc,
                record.seed_sha256,
                record.rated,
            )
            try:
                failure = await seat.start(match)
            except Exception as exc:  # a seat that cannot start loses, whatever went wrong
                failure = Answer(None, 0.0, Termination.CRASH, f"could not start: {exc}")
            if failure is not None and failure.failure is not None:
                await self._finish(failure.failure, seat_index, f"{self._who(seat_index)} {failure.reason}")
                return
        try:
            await self._loop()
        except Exception as exc:  # an engine bug must not leave seats hanging
            await self._finish(Termination.ABORTED, None, f"internal error in the referee: {exc!r}")
            raise

    async def _loop(self) -> None:
        state = self.state
        log = self.record.moves
        game = self.game
        control = self.control
        decisions = 0
        while True:
            decisions += 1
            if decisions & 255 == 0:
                await asyncio.sleep(0)  # in-process matches must not starve the rest of the server
            if control.aborted:
                await self._finish(Termination.ABORTED, None, control.reason or "the match was aborted")
                return
            player = state.current_player()
            if player == TERMINAL:
                await self._finish(Termination.NORMAL, None, "the game ended normally")
                return
            if player == CHANCE:
                action = _sample(state.chance_outcomes(), self.rng)
                state.apply_action(action)
                log.add(CHANCE, action, 0.0)
                if game.chance_is_public:
                    self._publish([PublicMove(CHANCE, action, game.action_to_string(CHANCE, action))])
                continue
            acting = range(game.num_players) if player == SIMULTANEOUS else (player,)
            if self.pending_any:
                self._flush_updates(acting)
            if self.all_sync:
                actions = self._ask_sync(acting)
                if actions is None:
                    await self._finish_failures()
                    return
            else:
                answers = await self._ask(acting)
                if answers is None:
                    return
                actions = [a.action for a in answers]  # type: ignore[misc]
                for seat_index, ans in zip(acting, answers, strict=True):
                    log.add(seat_index, ans.action, ans.elapsed)  # type: ignore[arg-type]
            if player == SIMULTANEOUS:
                state.apply_actions_unchecked(actions)  # legality was checked seat by seat
                if self.tracking or self.listeners:
                    self._publish([PublicMove(s, a, game.action_to_string(s, a)) for s, a in enumerate(actions)])
            else:
                action = actions[0]
                state.apply_action_unchecked(player, action)
                if self.tracking or self.listeners:
                    self._publish([PublicMove(player, action, game.action_to_string(player, action))])

    def _ask_sync(self, acting: Sequence[int] | range) -> list[int] | None:
        """All acting seats are in-process: ask, time and check each one inline (the hot path).

        Returns the actions, or None after recording the failures in ``self.failures``.
        """
        state = self.state
        seats = self.seats
        log = self.record.moves
        match_id = self.record.match_id
        per_move = self.per_move
        grace = self.grace
        is_legal = state.is_legal
        shared_obs = state.observation(None) if self.game.public_observation else None
        actions: list[int] = []
        failures: list[tuple[int, Termination, str]] = []
        for seat_index in acting:
            self.turn_id += 1
            turn = Turn(
                match_id,
                self.turn_id,
                seat_index,
                shared_obs if shared_obs is not None else state.observation(seat_index),
                state.legal_actions(seat_index),
                self.per_move_td,
                self.overage_td[seat_index],
            )
            pending = self.pending[seat_index]
            update = None
            if pending:
                update = Update(match_id, tuple(pending), turn.observation)
                pending.clear()
            ans = seats[seat_index].act_now(turn, (), update)
            action: int = ans.action  # type: ignore[assignment]
            # Fast path inline; anything unusual (failure, overtime, illegal) goes through _check.
            if not (ans.failure is None and ans.elapsed - grace <= per_move and is_legal(seat_index, action)):
                failure = self._check(seat_index, ans, per_move, grace)
                if failure is not None:
                    failures.append(failure)
                    continue
            log.players.append(seat_index)
            log.actions.append(action)
            log.elapsed_us.append(min(int(ans.elapsed * 1e6), 0xFFFFFFFF))
            log.legal.append(1)
            actions.append(action)
        if failures:
            self.failures = failures
            return None
        return actions

    def _check(
        self, seat_index: int, ans: Answer, per_move: float, grace: float
    ) -> tuple[int, Termination, str] | None:
        """Charge the clock and check legality of one answer; a failure tuple if it fails."""
        if ans.failure is not None:
            return seat_index, ans.failure, f"{self._who(seat_index)} {ans.reason}"
        charged = ans.elapsed - grace
        if charged > per_move:
            self.overage[seat_index] -= charged - per_move
            self.overage_td[seat_index] = timedelta(seconds=max(self.overage[seat_index], 0.0))
            if self.overage[seat_index] < 0:
                return (
                    seat_index,
                    Termination.TIMEOUT,
                    f"{self._who(seat_index)} took {ans.elapsed:.3f}s, more than its {per_move:g}s per move "
                    "plus what was left of its overage bank",
                )
        action = ans.action
        assert action is not None
        if not self.state.is_legal(seat_index, action):
            self.record.moves.add(seat_index, action, ans.elapsed, legal=False)
            return (
                seat_index,
                Termination.ILLEGAL_ACTION,
                f"{self._who(seat_index)}: {self._illegal(seat_index, action)}",
            )
        return None

    def _who(self, seat_index: int) -> str:
        return f"seat {seat_index} ({self.seats[seat_index].info.bot_name})"

    @property
    def pending_any(self) -> bool:
        return any(self.pending)

    def _publish(self, moves: list[PublicMove]) -> None:
        for seat_index, tracked in enumerate(self.track):
            if tracked:
                self.pending[seat_index].extend(moves)
        for listener in self.listeners:
            listener("moves", (moves, self.state))

    def _flush_updates(self, acting: Sequence[int] | range) -> None:
        """Send Update to seats with unseen moves that are not about to get a Turn."""
        for seat_index, pending in enumerate(self.pending):
            if pending and seat_index not in acting:
                update = Update(self.record.match_id, tuple(pending), self.state.observation(seat_index))
                pending.clear()
                self.seats[seat_index].update(update)

    async def _ask(self, acting: Sequence[int] | range) -> list[Answer] | None:
        """Collect one legal answer per acting seat, or finish the match and return None."""
        state = self.state
        answers: list[Answer | None] = [None] * len(acting)
        waiting: list[tuple[int, Coroutine[Any, Any, Answer]]] = []
        sync_turns: list[tuple[int, int, Turn]] = []
        per_move_td = self.tc.per_move
        shared_obs = state.observation(None) if self.game.public_observation else None
        for i, seat_index in enumerate(acting):
            seat = self.seats[seat_index]
            self.turn_id += 1
            turn = Turn(
                self.record.match_id,
                self.turn_id,
                seat_index,
                shared_obs if shared_obs is not None else state.observation(seat_index),
                state.legal_actions(seat_index),
                per_move_td,
                self.overage_td[seat_index],
            )
            moves = self.pending[seat_index]
            if seat.synchronous:
                sync_turns.append((i, seat_index, turn))
            else:
                timeout = self.per_move + max(self.overage[seat_index], 0.0) + self.grace
                waiting.append((i, seat.ask(turn, tuple(moves), timeout)))
                moves.clear()
        for i, seat_index, turn in sync_turns:
            moves = self.pending[seat_index]
            update = Update(self.record.match_id, tuple(moves), turn.observation) if moves else None
            answers[i] = self.seats[seat_index].act_now(turn, moves, update)
            moves.clear()
        if waiting:
            control = self.control
            if control.aborted:
                for _, coro in waiting:
                    coro.close()
                await self._abort()
                return None
            control.waiter = asyncio.current_task()
            try:
                if len(waiting) == 1:  # the common case: await it directly, no extra task
                    i, coro = waiting[0]
                    answers[i] = await coro
                else:
                    await self._gather(waiting, answers)
            except asyncio.CancelledError:
                if not control.aborted:
                    raise
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                await self._abort()
                return None
            except Exception as exc:
                i = waiting[0][0]
                answers[i] = Answer(None, 0.0, Termination.CRASH, f"the seat failed: {exc!r}")
            finally:
                control.waiter = None
        return await self._judge(acting, answers)

    async def _gather(
        self, waiting: list[tuple[int, Coroutine[Any, Any, Answer]]], answers: list[Answer | None]
    ) -> None:
        """Await several seats at once; stop waiting as soon as one of them fails."""
        tasks = {asyncio.ensure_future(coro): i for i, coro in waiting}
        pending = set(tasks)
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                failed = False
                for task in done:
                    try:
                        answer = task.result()
                    except Exception as exc:
                        answer = Answer(None, 0.0, Termination.CRASH, f"the seat failed: {exc!r}")
                    answers[tasks[task]] = answer
                    failed = failed or answer.failure is not None
                if failed:
                    break  # the match is over; the others' answers no longer matter
        finally:
            for task in pending:
                task.cancel()

    async def _abort(self) -> None:
        await self._finish(Termination.ABORTED, None, self.control.reason or "the match was aborted")
        return None

    async def _judge(self, acting: Sequence[int] | range, answers: list[Answer | None]) -> list[Answer] | None:
        """Charge clocks and check legality; end the match on the first failure."""
        failures = []
        for seat_index, ans in zip(acting, answers, strict=True):
            if ans is None:
                continue  # not awaited to the end because another seat failed first
            failure = self._check(seat_index, ans, self.per_move, self.grace)
            if failure is not None:
                failures.append(failure)
        if not failures:
            return answers  # type: ignore[return-value]
        self.failures = failures
        await self._finish_failures()
        return None

    async def _finish_failures(self) -> None:
        failures = self.failures
        if len(failures) == 1:
            seat_index, term, reason = failures[0]
            await self._finish(term, seat_index, reason)
        else:
            # Several seats failed in the same simultaneous round: nobody is singled out.
            reason = "; ".join(r for _, _, r in failures)
            await self._finish(failures[0][1], None, f"several seats failed at once: {reason}", forfeit=False)

    def _illegal(self, seat_index: int, action: int) -> str:
        legal = list(self.state.legal_actions(seat_index))
        label = self.game.action_to_string(seat_index, action) if 0 <= action < self.game.num_distinct_actions else ""
        shown = f"{action} ({label})" if label and not label.startswith("invalid") else str(action)
        return f"answered {shown}, which is not a legal action (legal: {describe_actions(legal)})"

    async def _finish(self, termination: Termination, offender: int | None, reason: str, forfeit: bool = True) -> None:
        record = self.record
        game = self.game
        record.termination = termination
        record.offender = offender
        record.reason = reason
        record.ended_at = datetime.now(UTC)
        if termination == Termination.NORMAL:
            record.returns = tuple(self.state.returns())
        elif offender is not None and forfeit:
            record.returns = game.forfeit_returns(offender)
        else:
            record.returns = tuple(0.0 for _ in range(game.num_players))
        if self.on_end is not None:
            # Commit before notify: nobody hears an ending the server has not recorded.
            try:
                await self.on_end(record)
            except Exception as exc:
                void_record(record, f"{COMMIT_FAILED}: {exc}")
        for listener in self.listeners:
            listener("ended", record)
        ends = []
        for seat_index, seat in enumerate(self.seats):
            result = MatchResult(
                record.match_id,
                record.returns,
                record.termination,
                record.reason,
                "" if record.seed_sealed else record.seed,  # a sealed seed is revealed when its set ends
                record.offender,
                self.state.observation(seat_index),
                tuple(self.pending[seat_index]),
            )
            self.pending[seat_index].clear()
            ends.append(seat.end(result))
        await asyncio.gather(*ends, return_exceptions=True)
