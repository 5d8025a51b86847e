"""A remote seat's answer carries the match on in the reader's own step (issue 20, ninth pass).

Every seat of these matches is a remote bot on a real gRPC stream or a hosted
bot, so the referee runs them inline: the Action read from the stream is
judged, applied and followed by the next Turn from the seat's callback, and the
referee's task sleeps until the match needs it. These tests check that it does
sleep, and that everything that used to wake it still ends the match as before:
an abort, a seat failing while another seat's turn is out, and a bug in the
engine, which must end the match as aborted without harming the bot's session.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import common_pb2
from arena_bots import HostedBot
from arena_bots.simple import RotateBot
from arena_client import Bot, SeatInfo, Termination, Turn
from arena_client.remote import Client
from arena_games import load_game
from arena_games.rps import RpsState
from arena_server.referee import loop
from arena_server.referee.records import MatchControl
from arena_server.seats.action_wire import wire_action
from arena_server.seats.remote import Outgoing, RemoteSeat, RemoteSession
from tests.conftest import LiveServer
from tests.fakes.bots import Paper
from tests.fakes.grpc_bots import RawBot
from tests.server._stdio_helpers import fake, play_against_random

ROUNDS = 600


async def test_the_referees_task_sleeps_while_a_remote_match_runs(
    live_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each wait of the referee's task hands the task to its MatchControl (so that an abort can cancel it):
    # count those hand-offs (the referee itself may be compiled, see docs/development.md, and not patchable).
    waits: list[Any] = []

    def hand_off(control: MatchControl, task: Any) -> None:
        if task is not None:
            waits.append(task)
        control.__dict__["_counted_waiter"] = task

    waiter = property(lambda control: control.__dict__.get("_counted_waiter"), hand_off)
    monkeypatch.setattr(MatchControl, "waiter", waiter, raising=False)
    client = Client(Paper(), live_server.address, name="paper", threaded=False)
    await client.play(opponent="rock", params={"rounds": ROUNDS})
    (result,) = client.results
    assert result.termination == Termination.NORMAL and result.returns == (ROUNDS, -ROUNDS)
    stored = await live_server.store.get_match(result.match_id)
    assert stored is not None and len(stored.moves.actions) == 2 * ROUNDS
    # One wait from the first move, then one per 256 decisions (the yield to the rest of the server),
    # where a task that woke for every answer would wait 600 times.
    assert 1 <= len(waits) <= ROUNDS // 256 + 1, waits


async def play_turns(raw: RawBot, action: int, until: int | None = None) -> tuple[bs.Turn | None, bs.MatchEnded]:
    """Answer Turns with ``action``; stop at (and return unanswered) turn ``until``, or at the match's end."""
    while True:
        msg = await raw.recv()
        kind = msg.WhichOneof("kind")
        if kind == "turn":
            if until is not None and msg.turn.turn_id >= until:
                return msg.turn, bs.MatchEnded()
            await raw.answer(msg.turn, action)
        elif kind == "match_ended":
            return None, msg.match_ended


async def test_an_abort_while_the_remote_bot_thinks_ends_the_match_and_its_late_answer_is_stale(
    live_server: LiveServer,
) -> None:
    raw = RawBot(live_server.channel())
    assert (await raw.hello("thinker")).WhichOneof("kind") == "welcome"
    await raw.challenge("rock", rounds=100)
    held, _ = await play_turns(raw, 1, until=21)
    assert held is not None
    (running,) = live_server.hub.running.values()
    running.control.abort("aborted by the test while the bot was thinking")
    ended = (await raw.recv_kind("match_ended")).match_ended
    assert ended.termination == common_pb2.TERMINATION_ABORTED and "aborted by the test" in ended.reason
    await raw.answer(held, 1)  # the late answer: dropped as stale, not a protocol violation
    error = (await raw.recv_kind("error")).error
    assert error.code == bs.ERROR_CODE_STALE_TURN and not error.fatal
    stored = await live_server.store.get_match(held.match_id)
    assert stored is not None and stored.termination == Termination.ABORTED
    assert len(stored.moves.actions) == 2 * 10  # the ten rounds played; the eleventh was never answered
    # The same session plays on.
    await raw.challenge("rock", rounds=5)
    _, again = await play_turns(raw, 1)
    assert again.termination == common_pb2.TERMINATION_NORMAL


async def test_a_seat_that_hangs_up_while_the_other_seats_turn_is_out_ends_the_match_for_it(
    live_server: LiveServer,
) -> None:
    waiting = RawBot(live_server.channel())
    assert (await waiting.hello("waiting")).WhichOneof("kind") == "welcome"
    leaving_channel = live_server.channel()
    leaving = RawBot(leaving_channel)
    assert (await leaving.hello("leaving")).WhichOneof("kind") == "welcome"
    await leaving.challenge("waiting", rounds=50)
    # Both play five rounds, then both get turn 11/12; only `leaving` hangs up, `waiting` holds its answer.
    for _ in range(5):
        for raw in (waiting, leaving):
            turn = (await raw.recv_kind("turn")).turn
            await raw.answer(turn, 0)
    held = (await waiting.recv_kind("turn")).turn
    await leaving.recv_kind("turn")
    await leaving_channel.close()
    ended = (await waiting.recv_kind("match_ended")).match_ended
    assert ended.termination == common_pb2.TERMINATION_DISCONNECT, ended
    await waiting.answer(held, 0)  # its turn was cancelled with the match: stale
    error = (await waiting.recv_kind("error")).error
    assert error.code == bs.ERROR_CODE_STALE_TURN, error
    stored = await live_server.store.get_match(held.match_id)
    assert stored is not None and stored.termination == Termination.DISCONNECT
    assert stored.seats[stored.offender].bot_name == "leaving"  # type: ignore[index]


async def test_a_remote_seats_turn_is_out_before_a_hosted_seat_of_the_same_move_thinks(
    live_server: LiveServer,
) -> None:
    """In a simultaneous move the remote seat is asked first, whatever its seat number.

    Its Turn then travels while the hosted bot computes its own answer, instead of waiting for it: a
    remote bot in seat 1 against a hosted bot in seat 0 would otherwise wait for the hosted bot's
    ``act`` on every move. Turn ids still follow the seats' order.
    """
    hub = live_server.hub
    seen: list[tuple[int, int | None]] = []

    class Peeker(Bot):
        """Notes, as it acts, which Turn the remote seat was last asked."""

        name = "peeker"
        games = ("rps",)

        def act(self, turn: Turn) -> int:
            session = hub.sessions.get("second")
            asked = session.seat.last_turn_args if session is not None and session.seat is not None else None
            seen.append((turn.turn_id, asked[0].turn_id if asked is not None else None))
            return 0

    hub.hosted["peeker"] = HostedBot("peeker", ("rps",), lambda seed: Peeker(), "notes what the remote seat was asked")
    raw = RawBot(live_server.channel())
    assert (await raw.hello("second")).WhichOneof("kind") == "welcome"
    await raw.challenge("peeker", rounds=5, seat=1)
    remote_turns: list[int] = []
    while True:
        msg = await raw.recv()
        if msg.WhichOneof("kind") == "turn":
            remote_turns.append(msg.turn.turn_id)
            await raw.answer(msg.turn, 1)
        elif msg.WhichOneof("kind") == "match_ended":
            break
    assert msg.match_ended.termination == common_pb2.TERMINATION_NORMAL, msg.match_ended
    assert list(msg.match_ended.returns) == [-5.0, 5.0]  # paper (seat 1) beats rock every round
    assert remote_turns == [2, 4, 6, 8, 10]  # seat 1's turn ids, as before: seat 0 gets 1, 3, 5, ...
    assert seen == [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10)]  # each move's remote Turn was asked first


async def test_an_engine_error_in_an_inline_move_aborts_the_match_and_spares_the_session(
    live_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_apply = RpsState.apply_actions_unchecked

    def broken(self: RpsState, actions: Any) -> None:
        if self._round == 7:
            raise RuntimeError("a bug in the engine, on purpose")
        real_apply(self, actions)

    monkeypatch.setattr(RpsState, "apply_actions_unchecked", broken)
    raw = RawBot(live_server.channel())
    assert (await raw.hello("victim")).WhichOneof("kind") == "welcome"
    await raw.challenge("rock", rounds=20)
    _, ended = await play_turns(raw, 1)
    assert ended.termination == common_pb2.TERMINATION_ABORTED
    assert "internal error in the referee" in ended.reason and "a bug in the engine" in ended.reason
    monkeypatch.setattr(RpsState, "apply_actions_unchecked", real_apply)
    await raw.challenge("rock", rounds=5)
    _, again = await play_turns(raw, 1)
    assert again.termination == common_pb2.TERMINATION_NORMAL and list(again.returns) == [5.0, -5.0]


async def test_an_answer_that_arrives_as_an_awaited_ask_is_cancelled_is_dropped_quietly() -> None:
    """``RemoteSeat.ask`` (a match with a stdio seat awaits the remote one in the referee's task) cancelled.

    Between the cancellation and the task running its clean-up, the bot's Action may be read: the seat
    must drop it, not fail the reader by resolving a cancelled future.
    """

    async def write(out: Outgoing) -> None:  # a stream whose writes complete at once
        return None

    session = RemoteSession(write)
    seat = RemoteSeat(session, SeatInfo(0, "just-in-time", 1, "remote"))
    seat.match_id = "m1"
    turn = Turn("m1", 1, 0, None, (0, 1, 2), timedelta(seconds=1), timedelta(0))
    asked = asyncio.ensure_future(seat.ask(turn, (), 5.0))
    await asyncio.sleep(0)
    asked.cancel()  # the referee's task is cancelled (an abort) ...
    seat.on_action(
        wire_action(bs.Action(match_id="m1", turn_id=1, action=2))
    )  # ... and the answer is read before it runs
    with pytest.raises(asyncio.CancelledError):
        await asked
    # The next ask is answered normally.
    asked = asyncio.ensure_future(seat.ask(replace(turn, turn_id=2), (), 5.0))
    await asyncio.sleep(0)
    seat.on_action(wire_action(bs.Action(match_id="m1", turn_id=2, action=1)))
    assert (await asyncio.wait_for(asked, 5)).action == 1


async def test_the_move_paths_objects_keep_fast_attributes(live_server: LiveServer) -> None:
    """Past 30 attributes CPython stops sharing an instance dict's keys between instances.

    Every attribute read of such an object gets slower: this pass measured it on the referee (about
    80 ns a step of an in-process match) and on the stdio seat (about 1 µs of CPU a move). The referee
    keeps its state in slots; the seats and the session stay within 30 attributes, counted after a match.
    """
    assert loop._Referee.__dictoffset__ == 0  # slots only
    stdio_record, stdio_seat = await play_against_random(fake("answers_twice"), load_game("rps", rounds=3))
    assert stdio_record.termination == Termination.NORMAL, stdio_record.reason
    seated: list[Any] = []
    real_start = RemoteSeat.start

    async def start(self: RemoteSeat, match: Any) -> Any:
        seated.append(self)
        return await real_start(self, match)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RemoteSeat, "start", start)
        client = Client(Paper(), live_server.address, name="paper", threaded=False)
        await client.play(opponent="rock", params={"rounds": 3})
    (remote_seat,) = seated
    for thing in (stdio_seat, remote_seat, remote_seat.session):
        if hasattr(thing, "__dict__"):  # compiled (make native), a class keeps its attributes in fixed fields
            assert len(vars(thing)) <= 30, (type(thing).__name__, sorted(vars(thing)))


class _FirstLegal(Bot):
    """Any game: the lowest legal action."""

    name = "first-legal-bot"

    def act(self, turn: Turn) -> int:
        return min(turn.legal_actions)


async def test_the_move_log_has_every_seats_move_in_order_on_the_remote_path(live_server: LiveServer) -> None:
    # A simultaneous decision with a remote seat is logged in one go (_log_joint), a sequential one a seat at a
    # time (_log): the stored arrays must read as one entry per seat per decision, seats in order, all legal.
    rounds = 40
    for seat in (0, 1):
        client = Client(RotateBot(), live_server.address, name=f"rotate-{seat}", threaded=False)  # 0, 1, 2, 0, ...
        (result,) = await client.play(opponent="rock", params={"rounds": rounds}, seat=seat)
        stored = await live_server.store.get_match(result.match_id)
        assert stored is not None and stored.termination == Termination.NORMAL
        log = stored.moves
        mine = [i % 3 for i in range(rounds)]
        expected = [mine[r] if s == seat else 0 for r in range(rounds) for s in (0, 1)]
        assert list(log.players) == [0, 1] * rounds
        assert list(log.actions) == expected
        assert list(log.legal) == [1] * (2 * rounds)
        assert len(log.elapsed_us) == 2 * rounds
        assert (log.players.typecode, log.actions.typecode, log.legal.typecode) == ("b", "i", "B")
    client = Client(_FirstLegal(), live_server.address, name="first-legal", threaded=False)
    (result,) = await client.play(opponent="random", game="tic_tac_toe", seat=0)
    stored = await live_server.store.get_match(result.match_id)
    assert stored is not None and stored.termination == Termination.NORMAL
    log = stored.moves
    replay = load_game("tic_tac_toe").new_initial_state()
    for player, action, _elapsed, legal in log:
        assert legal and player == replay.current_player()
        replay.apply_action(action)
    assert replay.is_terminal() and len(log.legal) == len(log.players) == len(log.elapsed_us)
