"""The referee: runs one match between any mix of seats and returns its record.

This module is the match loop itself (:func:`play_match`, ``_Referee.start`` and
``play``, and ``_finish``); asking the seats and charging their clocks is in
:mod:`arena_server.referee.asking`, telling seats and spectators what became
public in :mod:`arena_server.referee.publishing`, the fair-clock lag watcher in
:mod:`arena_server.referee.clock`, seeds in :mod:`arena_server.referee.seeds`.

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

import asyncio
import enum
import functools
import random
from array import array
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

from arena_client.types import (
    MatchInfo,
    MatchResult,
    PublicMove,
    Termination,
    TimeControl,
)
from arena_games import CHANCE, SIMULTANEOUS, TERMINAL, Game
from arena_server.referee.answer import Answer
from arena_server.referee.asking import Asking
from arena_server.referee.clock import perf_counter
from arena_server.referee.records import (
    COMMIT_FAILED,
    CommitHook,
    MatchControl,
    MatchListener,
    MatchRecord,
    void_record,
)
from arena_server.referee.seat import Seat
from arena_server.referee.seeds import chance_rng, new_seed, sample_outcome, seed_hash

STRETCH: Final = 0.0005
"""How long (seconds) an in-process match plays before it lets the rest of the server run: its clock is read
every 16 decisions (:data:`IN_PROCESS_YIELD_MASK`), and its bots' own thinking, added up from their answers,
counts at every decision (a few moves of a bot that thinks for milliseconds each would otherwise hold the
event loop for a whole match: a 9-move tic-tac-toe match of the lab's minimax took up to 0.34 s). Bots that
think longer than a millisecond or so a move think on threads instead (``thinks_off_loop``,
:mod:`arena_server.seats.in_process`).

A remote bot's move waits for about two stretches of a long hosted match (its Action's read and its Turn's
write each need a turn of the loop). Every 256 decisions, as before, took the hosted RPS bots 0.8-4.2 ms: a
remote bot's median move beside such a match was 4.2-4.7 ms; with 1 ms stretches 3.4 ms, with these 1.5 ms.
A stretch must outlast the GIL's switch interval (``arena serve --switch-interval``, 0.2 ms): a thread waiting
for the GIL (the database's) waits a whole interval without the loop taking the GIL again, which the loop does
at every turn, so with stretches shorter than that it starved (seconds for a read,
``tests/server/test_switch_interval.py``; docs/performance.md, thirtieth pass)."""

IN_PROCESS_YIELD_MASK: Final = 15
"""An in-process match looks at its clock every 16 decisions (``decisions & mask == 0``)."""

YIELD_MASK: Final = 255
"""A match with a seat that answers through a callback yields every 256 decisions, without a clock. The loop
runs between its moves anyway (each waits for an answer); the yield only wakes its task now and then."""


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
    if await referee.start():
        await referee.play()  # awaited from here: one coroutine frame less to resume every move
    return record


class _Step(enum.Enum):
    """What :meth:`_Referee._advance` stopped at: what the referee's task does next."""

    WAITING = enum.auto()
    """Seats were asked; the match goes on from their callbacks."""
    YIELD = enum.auto()
    """An in-process match has played :data:`STRETCH` (or 256 decisions of a match with a seat answering by
    callback): the task lets the rest of the server run."""
    ENDED = enum.auto()
    FAILED = enum.auto()
    """A seat failed (``failures``)."""
    ABORTED = enum.auto()


_WAITING: Final = _Step.WAITING
"""What a remote match's every move returns and checks, as a C static when compiled (``_Step.WAITING`` is a
lookup of the module's dict and then of the class's)."""


class _Referee(Asking):
    """The state of one running match (kept apart so play_match stays readable).

    Its parts are one chain, ``RefereeState`` (the attributes), ``Publishing``,
    ``Asking``, then this loop, not two mixins side by side: mypyc, which
    compiles the referee (``make native``), takes single inheritance only.
    """

    __slots__ = ("all_sync", "on_end", "rng", "stretch_began")

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
        log = record.moves
        self.extend_players = log.players.extend
        self.log_actions = log.actions.append
        self.log_actions_from = log.actions.fromlist
        self.log_elapsed_us = log.elapsed_us.append
        self.extend_legal = log.legal.extend
        self.control = control
        control.listeners.extend(listeners)
        self.listeners = control.listeners  # the same list: spectators may join mid-match
        self.state = game.new_initial_state()
        control.state = self.state
        self.rng: random.Random | None = None
        """The chance RNG, seeded at the match's first chance node (a game without chance never pays for it)."""
        n = game.num_players
        self.all_seats = tuple(range(n))
        self.seat_codes = tuple(array(log.players.typecode, (i,)) for i in range(n))
        self.all_seat_codes = array(log.players.typecode, range(n))
        self.one_legal = array(log.legal.typecode, (1,))
        self.all_legal = array(log.legal.typecode, (1,) * n)
        self.overage = [tc.overage.total_seconds()] * n
        self.pending: list[list[PublicMove]] = [[] for _ in range(n)]
        self.track = [s.wants_updates for s in seats]
        self.turn_id = 0
        self.task = None
        self.public_moves = {}
        self.joint_moves = {}
        self.per_move = tc.per_move.total_seconds()
        self.per_move_td = tc.per_move
        self.overage_td = [tc.overage] * n
        self.grace = tc.grace.total_seconds()
        self.synchronous = [s.synchronous for s in seats]
        self.all_sync = all(self.synchronous)
        self.stretch_began = 0.0
        """When the task last started playing (``perf_counter``), for :data:`STRETCH`."""
        self.public_observation = game.public_observation
        self.callbacks = [] if self.all_sync else [functools.partial(self._answered, i) for i in range(n)]
        """``on_answer`` for the seat at each position of a decision (see :meth:`Seat.ask_then`); a reference
        cycle through this referee, broken when :meth:`play` returns."""
        self.decisions = 0
        self.thought = 0.0
        self.player = TERMINAL
        self.acting = ()
        self.answers = []
        self.legal = [()] * n
        self.outstanding = 0
        self.cut_short = False
        self.starting = False
        self.wake = None
        self.tracking = any(self.track)
        self.failures: list[tuple[int, Termination, str]] = []

    # -- the loop -------------------------------------------------------------------------------

    async def start(self) -> bool:
        """Tell every seat the match begins; False if one cannot play (the match is then over)."""
        self.task = asyncio.current_task()
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
                return False
        return True

    async def play(self) -> None:
        """Play the match to its end (after :meth:`start`).

        The decisions themselves run in :meth:`_advance`, synchronously. Once a
        seat that is not in-process is asked (:meth:`Seat.ask_then`), this task
        waits while the match goes on in the seats' callbacks, move after move,
        and wakes only for what needs it: the end of the match, a failure, an
        abort, a yield to the rest of the server.

        An engine bug ends the match as aborted and is then raised again. The
        match is ended after the ``except`` block, not inside it: compiled with
        mypyc, a bare ``raise`` after an ``await`` in an ``except`` block re-raised
        a freed exception (a segfault) when the exception came from an awaited
        future, as an engine bug in a seat's callback does through
        :meth:`_wait_inline` (see ``tests/test_native.py``).
        """
        failure: Exception | None = None
        try:
            self.stretch_began = perf_counter()
            step = self._advance()
            while True:
                if step is _WAITING:
                    step = await self._wait_inline()
                elif step is _Step.YIELD:
                    await asyncio.sleep(0)  # in-process matches must not starve the rest of the server
                    self.stretch_began = perf_counter()
                    step = self._advance()
                elif step is _Step.ENDED:
                    await self._finish(Termination.NORMAL, None, "the game ended normally")
                    return
                elif step is _Step.FAILED:
                    await self._finish_failures()
                    return
                else:
                    await self._finish(Termination.ABORTED, None, self.control.reason or "the match was aborted")
                    return
        except Exception as exc:  # an engine bug must not leave seats hanging
            failure = exc
        finally:
            self.callbacks = []  # (the referee is then freed as soon as the match is, without the cycle collector)
        assert failure is not None  # (every other way out of the loop returns)
        self._cancel_outstanding()
        await self._finish(Termination.ABORTED, None, f"internal error in the referee: {failure!r}")
        raise failure

    def _advance(self, actions: list[int] | None = None) -> _Step:
        """Apply ``actions`` (the judged answers of the decision asked), then play on.

        Decisions are played until one must be waited for or the task must act
        (end, failure, abort, yield). Chance moves and in-process seats are
        played here; a decision with another seat is asked (:meth:`_begin`) and,
        unless every answer is already in, this returns ``WAITING``: the seats
        carry on through :meth:`_decided`.
        """
        state = self.state
        game = self.game
        control = self.control
        player = self.player
        decisions = self.decisions
        yield_mask = IN_PROCESS_YIELD_MASK if self.all_sync else YIELD_MASK
        try:
            while True:
                if actions is not None:
                    if player == SIMULTANEOUS:
                        state.apply_actions_unchecked(actions)  # legality was checked seat by seat
                        if self.tracking or self.listeners:
                            key = tuple(actions)
                            moves = self.joint_moves.get(key)
                            if moves is None:
                                moves = tuple([self._public_move(s, a) for s, a in enumerate(actions)])
                                self.joint_moves[key] = moves
                            self._publish(moves)
                    else:
                        action = actions[0]
                        state.apply_action_unchecked(player, action)
                        if self.tracking or self.listeners:
                            self._publish((self._public_move(player, action),))
                    actions = None
                    decisions += 1
                    if (decisions & yield_mask == 0 and self._stretch_over()) or self.thought > STRETCH:
                        self.thought = 0.0
                        return _Step.YIELD  # (in-process matches must not starve the rest of the server)
                if control.aborted:
                    return _Step.ABORTED
                player = state.current_player()
                if player == TERMINAL:
                    return _Step.ENDED
                if player == CHANCE:
                    rng = self.rng
                    if rng is None:
                        rng = self.rng = chance_rng(self.record.seed)
                    action = sample_outcome(state.chance_outcomes(), rng)
                    state.apply_action(action)
                    self.record.moves.add(CHANCE, action, 0.0)
                    if game.chance_is_public:
                        self._publish([PublicMove(CHANCE, action, game.action_to_string(CHANCE, action))])
                    decisions += 1
                    if decisions & yield_mask == 0 and self._stretch_over():
                        return _Step.YIELD
                    continue
                acting = self.all_seats if player == SIMULTANEOUS else (player,)
                if player != SIMULTANEOUS and self.pending_any:  # (in a simultaneous move every seat gets a Turn)
                    self._flush_updates(acting)
                if self.all_sync:
                    actions = self._ask_sync(acting)
                else:
                    self._begin(acting)
                    if self.outstanding:
                        if not self.cut_short:
                            return _WAITING
                        self._cancel_outstanding()
                    actions = self._judge()
                if actions is None:
                    return _Step.FAILED
        finally:
            self.player = player
            self.decisions = decisions

    def _stretch_over(self) -> bool:
        """Whether to yield at a multiple of the yield mask: in-process after :data:`STRETCH`, otherwise always."""
        return not self.all_sync or perf_counter() - self.stretch_began > STRETCH

    def _decided(self) -> None:
        """A decision's answers are in (called from the last seat's callback): go on from here.

        The next Turn is written before this returns. What needs the task (the
        end, a failure, an abort, a yield) wakes it; so does an exception, which
        never reaches the seat that called.
        """
        wake = self.wake
        if wake is None or wake.done():
            return  # the task is already on its way to end the match: this answer no longer counts
        try:
            if self.outstanding:  # (a seat failed first: the others' asks are forgotten)
                self._cancel_outstanding()
            actions = self._judge()
            step = _Step.FAILED if actions is None else self._advance(actions)
        except Exception as exc:
            wake.set_exception(exc)
            return
        if step is not _WAITING:
            wake.set_result(step)

    async def _wait_inline(self) -> _Step:
        """Wait while the match goes on in the seats' callbacks; what :meth:`_decided` hands back.

        An abort cancels this wait: the asks still out are forgotten and the match ends as aborted.
        """
        wake: asyncio.Future[_Step] = asyncio.get_running_loop().create_future()
        self.wake = wake
        control = self.control
        control.waiter = self.task
        try:
            return await wake
        except asyncio.CancelledError:
            self._cancel_outstanding()
            if not control.aborted:
                raise
            task = self.task
            if task is not None:
                task.uncancel()
            return _Step.ABORTED
        finally:
            control.waiter = None
            self.wake = None

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
