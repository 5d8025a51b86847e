"""Asking the seats: build each acting seat's redacted Turn, wait with a deadline, charge the clock, judge.

The in-process fast path (:meth:`Asking._ask_sync`) asks synchronous seats
inline. Otherwise :meth:`Asking._begin` asks every acting seat, the seats
that answer later first (remote and stdio seats, whose Turns then travel
while an in-process seat of the same simultaneous move thinks): they answer
through a callback (:meth:`Seat.ask_then`) that hands the answer to
:meth:`Asking._answered`, and the last answer of a decision carries the match
on from that callback; the first failure ends the wait. Clocks are charged
here: time beyond the per-move budget comes out of the seat's overage bank,
less the grace that is never charged; an empty bank is a timeout.

An answer's legality is checked against the legal actions its Turn listed
when that list is short (:data:`SHORT_LEGAL`): by the engines' contract
(``tests/games/test_games_conformance.py``) ``is_legal(seat, a)`` is ``a in
legal_actions(seat)``, and a C search of a few items costs less than a call
into the engine's Python. An answer not found there goes through
:meth:`Asking._check`, whose ``is_legal`` decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Final

from arena_client.types import (
    Termination,
    Turn,
    Update,
)
from arena_games import State, describe_actions
from arena_server.referee.answer import Answer, elapsed_us
from arena_server.referee.publishing import Publishing

_TURN: Final = Turn
_UPDATE: Final = Update
"""The Turn and Update classes as C statics when compiled (a module global is a dict lookup on every read)."""

SHORT_LEGAL: Final = 32
"""Longest legal-action list an answer is looked up in rather than asking the engine's ``is_legal``.

From compiled code, a call into the RPS engine's ``is_legal`` costs about 1,700
instructions (``bench/count_remote.py``); looking an int up in a tuple about
25 per item passed. Past some 60 items the call is cheaper: 32 keeps a margin
for engines whose ``is_legal`` is cheaper than RPS's.
"""


class Asking(Publishing):
    """The part of the referee that asks seats for their actions and judges the answers."""

    __slots__ = ()

    def _ask_sync(self, acting: tuple[int, ...]) -> list[int] | None:
        """All acting seats are in-process: ask, time and check each one inline (the hot path).

        Returns the actions, or None after recording the failures in ``self.failures``.
        """
        state = self.state
        seats = self.seats
        match_id = self.record.match_id
        shared_obs = state.observation(None) if self.public_observation else None
        actions: list[int] = []
        failures: list[tuple[int, Termination, str]] = []
        for seat_index in acting:
            self.turn_id += 1
            legal = state.legal_actions(seat_index)
            turn = _TURN(
                match_id,
                self.turn_id,
                seat_index,
                shared_obs if shared_obs is not None else state.observation(seat_index),
                legal,
                self.per_move_td,
                self.overage_td[seat_index],
            )
            pending = self.pending[seat_index]
            update = None
            if pending:
                update = _UPDATE(match_id, tuple(pending), turn.observation)
                pending.clear()
            ans = seats[seat_index].act_now(turn, (), update)
            self.thought += ans.elapsed
            if not self._passes(seat_index, ans, legal):
                failure = self._check(seat_index, ans, self.per_move, self.grace)
                if failure is not None:
                    failures.append(failure)
                    continue
            action = ans.action
            assert action is not None  # (an answer that passes has an action)
            self._log(seat_index, action, ans.elapsed)
            actions.append(action)
        if failures:
            self.failures = failures
            return None
        return actions

    def _passes(self, seat_index: int, ans: Answer, legal: Sequence[int]) -> bool:
        """Whether an answer passes inline: an action, on time, legal (see :data:`SHORT_LEGAL`).

        The usual answer; anything else (a failure, overtime, an illegal or
        unlisted action) goes through :meth:`_check`, which decides.
        """
        action = ans.action
        return (
            action is not None
            and ans.failure is None
            and ans.elapsed - self.grace <= self.per_move
            and (action in legal if len(legal) <= SHORT_LEGAL else self.state.is_legal(seat_index, action))
        )

    def _log(self, seat_index: int, action: int, elapsed: float) -> None:
        """Append a judged, legal action to the match's move log."""
        self.extend_players(self.seat_codes[seat_index])
        self.log_actions(action)
        self.log_elapsed_us(elapsed_us(elapsed))
        self.extend_legal(self.one_legal)

    def _log_joint(self, actions: list[int], answers: list[Answer | None]) -> None:
        """Append a simultaneous decision's judged, legal actions (every seat's, in seat order) to the move log.

        The same entries as a :meth:`_log` a seat, in fewer calls: the seats and the
        legal flags as one copy each, the actions in one ``fromlist``.
        """
        self.extend_players(self.all_seat_codes)
        self.log_actions_from(actions)
        log_elapsed_us = self.log_elapsed_us
        for ans in answers:
            assert ans is not None  # (every seat answered: the decision passed)
            log_elapsed_us(elapsed_us(ans.elapsed))
        self.extend_legal(self.all_legal)

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

    def _begin(self, acting: tuple[int, ...]) -> None:
        """Build each acting seat's redacted Turn and ask it; answers go to ``self.answers``, by position in ``acting``.

        The seats that answer later (remote and stdio seats) are asked first, with
        :meth:`Seat.ask_then`, so their Turns are on their way before an
        in-process seat of the same decision (a simultaneous move) spends its
        time on its own answer, which it gives here; turn ids still follow the
        seats' order. Those seats call :meth:`_answered` when their answer
        comes; a seat that has already failed does so before this returns.
        """
        synchronous = self.synchronous
        shared_obs = self.state.observation(None) if self.public_observation else None
        turn_id = self.turn_id
        self.answers = [None] * len(acting)
        self.acting = acting
        self.outstanding = 0
        self.cut_short = False
        self.starting = True
        in_process = False
        for i, seat_index in enumerate(acting):
            if synchronous[seat_index]:
                in_process = True  # asked below, once the others' Turns are out
            else:
                self._ask(i, seat_index, turn_id + i + 1, shared_obs)
        if in_process:
            for i, seat_index in enumerate(acting):
                if synchronous[seat_index]:
                    self._ask(i, seat_index, turn_id + i + 1, shared_obs)
        self.turn_id = turn_id + len(acting)
        self.starting = False

    def _ask(self, i: int, seat_index: int, turn_id: int, shared_obs: Any) -> None:
        """Ask the seat at position ``i`` of the decision for turn ``turn_id`` (see :meth:`_begin`)."""
        seat = self.seats[seat_index]
        observation = shared_obs if shared_obs is not None else self.state.observation(seat_index)
        legal = self.legal[i] = self.state.legal_actions(seat_index)
        turn = _TURN(
            self.record.match_id,
            turn_id,
            seat_index,
            observation,
            legal,
            self.per_move_td,
            self.overage_td[seat_index],
        )
        moves = self.pending[seat_index]
        if self.synchronous[seat_index]:  # answers at once (an in-process bot)
            self.answers[i] = seat.act_now(
                turn, moves, _UPDATE(self.record.match_id, tuple(moves), observation) if moves else None
            )
        else:
            timeout = self.per_move + max(self.overage[seat_index], 0.0) + self.grace
            self.outstanding += 1
            seat.ask_then(turn, tuple(moves) if moves else (), timeout, self.callbacks[i])
        if moves:
            moves.clear()

    def _answered(self, i: int, ans: Answer) -> None:
        """The answer of the seat at position ``i`` of the decision (called by the seat).

        The last answer of the decision (or the first failure, which ends the wait)
        carries the match on from here, in the seat's own callback: see
        :meth:`_decided`. During :meth:`_begin` it is only recorded.
        """
        self.answers[i] = ans
        self.outstanding -= 1
        if ans.failure is not None:
            self.cut_short = True
        elif self.outstanding:
            return  # another seat of this decision has still to answer
        if not self.starting:
            self._decided()

    def _decided(self) -> None:
        """Carry the match on after a decision's answers; defined by the referee's loop."""
        raise NotImplementedError

    def _cancel_outstanding(self) -> None:
        """Forget the asks of this decision still unanswered (a seat failed, or the match ends)."""
        if self.outstanding:
            answers = self.answers
            seats = self.seats
            for i, seat_index in enumerate(self.acting):
                if answers[i] is None and not self.synchronous[seat_index]:
                    seats[seat_index].cancel_ask()
            self.outstanding = 0

    def _judge(self) -> list[int] | None:
        """The decision's actions, its answers judged and logged; None (``self.failures`` set) if any failed.

        An answer that is on time and legal passes inline; anything else goes
        through :meth:`_check`. A failed decision is void: none of its answers is logged.
        """
        acting = self.acting
        answers = self.answers
        legals = self.legal
        actions: list[int] = []
        failures: list[tuple[int, Termination, str]] | None = None
        for i, ans in enumerate(answers):
            if ans is None:
                continue  # not awaited to the end because another seat failed first
            if self._passes(acting[i], ans, legals[i]):
                actions.append(ans.action)  # type: ignore[arg-type]
                continue
            failure = self._check(acting[i], ans, self.per_move, self.grace)
            if failure is None:
                actions.append(ans.action)  # type: ignore[arg-type]
            else:
                if failures is None:
                    failures = []
                failures.append(failure)
        if failures is not None:
            self.failures = failures
            return None
        if len(actions) > 1:  # a simultaneous decision: every seat acted, in order
            self._log_joint(actions, answers)
        else:
            for i, action in enumerate(actions):
                self._log(acting[i], action, answers[i].elapsed)  # type: ignore[union-attr]
        return actions

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
        text = f"answered {shown}, which is not a legal action (legal: {describe_actions(legal)})"
        if 0 <= action < self.game.num_distinct_actions and type(self.state).illegal_reason is not State.illegal_reason:
            text += f": {self.state.illegal_reason(seat_index, action)}"  # the rule it breaks, in the game's words
        return text
