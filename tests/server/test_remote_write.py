"""A remote Turn write starts in the referee's own step but belongs to the session (issue 20, third pass).

When a remote bot's stream is idle, :meth:`RemoteSession.send_nowait` starts
the write right away instead of waking a writer task. Aborting the match
cancels the referee's task; these tests abort a match, through a real server
and a real stream, while its Turn write is still in flight, and check that the
write is neither cut nor duplicated: the bot reads that Turn, then its
MatchEnded, the same session plays on, and a match next to it is undisturbed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import replace
from datetime import timedelta
from typing import Any

from arena.v1 import bot_session_pb2 as bs
from arena_client import SeatInfo, Termination, Turn
from arena_client.remote import Client
from arena_server.seats.action_wire import wire_action
from arena_server.seats.remote import Outgoing, RemoteSeat, RemoteSession, as_message
from tests.conftest import LiveServer
from tests.fakes.bots import Paper
from tests.fakes.grpc_bots import RawBot

ABORTED_AT = 3
"""The bot's Turn (counted from 1) whose write is in flight when the match is aborted."""
HELD = 0.3
"""Seconds that write stays in flight (its real gRPC write starts after this)."""


async def play_out(raw: RawBot) -> tuple[list[int], bs.MatchEnded]:
    """Answer every Turn of the bot's current match; the turn ids seen and how it ended."""
    seen: list[int] = []
    while True:
        msg = await raw.recv()
        kind = msg.WhichOneof("kind")
        if kind == "turn":
            seen.append(msg.turn.turn_id)
            await raw.answer(msg.turn, 0)
        elif kind == "match_ended":
            return seen, msg.match_ended


async def test_aborting_a_match_while_its_turn_write_is_in_flight(live_server: LiveServer) -> None:
    hub = live_server.hub
    neighbour = Client(Paper(), live_server.address, name="neighbour", threaded=False)
    other = asyncio.ensure_future(neighbour.play(opponent="rock", params={"rounds": 400}))
    raw = RawBot(live_server.channel())
    assert (await raw.hello("held-writer")).WhichOneof("kind") == "welcome"
    session = hub.sessions["held-writer"]
    real_write = session._write
    caught: list[str] = []
    turns: list[int] = []

    async def held_write(out: Outgoing) -> Any:
        msg = as_message(out)
        if msg.WhichOneof("kind") == "turn":
            turns.append(msg.turn.turn_id)
        if msg.WhichOneof("kind") == "turn" and len(turns) == ABORTED_AT and not caught:
            # The referee is running this very step (it started the write: in its task for the first Turn,
            # in the reader's step, inline, after that); aborting the match cancels its task while the
            # write is in flight, and the write then goes on for real.
            running = hub.running[msg.turn.match_id]
            caught.append(msg.turn.match_id)
            running.control.abort("aborted by the test while a Turn write was in flight")
            await asyncio.sleep(HELD)
            assert session._in_flight is not None and session.backlog >= 1
        return await real_write(out)

    def write(out: Outgoing) -> Coroutine[Any, Any, Any]:
        return held_write(out)

    session._write = write
    await raw.challenge("random", rounds=50)
    seen, ended = await play_out(raw)
    assert caught, "the hook never saw the Turn it was to hold"
    # The Turn being written when the match was aborted reached the bot whole, once, before MatchEnded.
    assert len(seen) == ABORTED_AT and seen == turns, (seen, turns)
    assert Termination(ended.termination) == Termination.ABORTED, ended
    assert "while a Turn write was in flight" in ended.reason
    record = await live_server.store.get_match(caught[0])
    assert record is not None and record.termination == Termination.ABORTED

    # The session carries on: its next match is played to the end on the same stream.
    await raw.challenge("random", rounds=20)
    seen, ended = await play_out(raw)
    assert len(seen) == 20 and Termination(ended.termination) == Termination.NORMAL, (seen, ended)
    done = (await raw.recv_kind("challenge_status")).challenge_status  # the challenge's last message
    assert done.state == bs.ChallengeStatus.STATE_DONE, done
    await asyncio.wait_for(session.drained(), 5)
    # Nothing of the matches is left to write. (A Ping, sent every PING_INTERVAL to an idle session, may be:
    # a slow run passes the interval.)
    left = [as_message(m).WhichOneof("kind") for m, _ in session._outbox]
    assert not session.closed.is_set() and set(left) <= {"ping"}, left
    assert session._in_flight is None or left

    # The match next to it was not disturbed.
    results = await other
    assert results[0].termination == Termination.NORMAL and results[0].returns[0] == 400.0
    await raw.call.done_writing()


async def test_a_write_that_fails_mid_flight_closes_only_its_session(live_server: LiveServer) -> None:
    hub = live_server.hub
    neighbour = Client(Paper(), live_server.address, name="neighbour2", threaded=False)
    other = asyncio.ensure_future(neighbour.play(opponent="rock", params={"rounds": 300}))
    raw = RawBot(live_server.channel())
    await raw.hello("failing-writer")
    session = hub.sessions["failing-writer"]
    real_write = session._write

    async def failing_write(out: Outgoing) -> Any:
        if as_message(out).WhichOneof("kind") == "turn":
            await asyncio.sleep(0.05)
            raise RuntimeError("the transport broke")
        return await real_write(out)

    def write(out: Outgoing) -> Coroutine[Any, Any, Any]:
        return failing_write(out)

    session._write = write
    await raw.challenge("random", rounds=50)
    await asyncio.wait_for(session.closed.wait(), 10)
    assert "writing to the stream failed" in session.close_reason and "the transport broke" in session.close_reason
    record = None
    for _ in range(100):
        if session.past_matches:
            record = await live_server.store.get_match(session.past_matches[-1])
            if record is not None and record.termination is not None:
                break
        await asyncio.sleep(0.05)
    assert record is not None
    assert record.termination == Termination.DISCONNECT and "the transport broke" in (record.reason or "")
    # Closed from the writing side, the session stops reading too: its handler ends and the server forgets it,
    # while the bot still has its stream open.
    for _ in range(100):
        if "failing-writer" not in hub.sessions:
            break
        await asyncio.sleep(0.05)
    assert "failing-writer" not in hub.sessions
    results = await other
    assert results[0].termination == Termination.NORMAL and results[0].returns[0] == 300.0


async def test_a_turns_clock_starts_at_its_own_write_not_an_earlier_ones() -> None:
    """A bot may answer a Turn before the server hears that the Turn's write completed (common on one core).

    The next Turn then waits behind that write. When the earlier write completes, it must not start the
    next Turn's clock (nor arm its deadline): that clock starts when the next Turn itself is on the stream.
    """
    loop = asyncio.get_running_loop()
    completions: list[asyncio.Future[None]] = []

    async def write(out: Outgoing) -> None:  # a stream whose writes complete when the test says so
        done = loop.create_future()
        completions.append(done)
        await done

    session = RemoteSession(write)
    seat = RemoteSeat(session, SeatInfo(0, "early-bird", 1, "remote"))
    turn = Turn("m1", 1, 0, None, (0, 1, 2), timedelta(seconds=1), timedelta(0))
    asked = asyncio.ensure_future(seat.ask(turn, (), 5.0))
    await asyncio.sleep(0)
    assert len(completions) == 1  # Turn 1 is being written
    seat.match_id = "m1"
    seat.on_action(wire_action(bs.Action(match_id="m1", turn_id=1, action=2)))  # answered before its write completed
    assert (await asyncio.wait_for(asked, 5)).action == 2
    asked = asyncio.ensure_future(seat.ask(replace(turn, turn_id=2), (), 5.0))
    await asyncio.sleep(0)
    assert session.backlog == 2 and len(completions) == 1  # Turn 2 waits behind Turn 1's write

    completions[0].set_result(None)  # Turn 1's write completes now
    for _ in range(3):
        await asyncio.sleep(0)
    assert len(completions) == 2  # Turn 2 is being written...
    assert session.owed_turn == 0, "Turn 1's write completion started Turn 2's clock"

    completions[1].set_result(None)  # ...and is on the stream: its clock starts
    for _ in range(3):
        await asyncio.sleep(0)
    assert session.owed_turn == 2
    seat.on_action(wire_action(bs.Action(match_id="m1", turn_id=2, action=0)))
    assert (await asyncio.wait_for(asked, 5)).action == 0


async def test_shutdown_waits_for_a_bot_that_owes_an_answer_then_goes_on_when_it_answers(
    live_server: LiveServer,
) -> None:
    """The bot is thinking when the server stops: its stream stays open until its (late) answer arrives."""
    hub = live_server.hub
    loop = asyncio.get_running_loop()
    raw = RawBot(live_server.channel())
    assert (await raw.hello("thinker")).WhichOneof("kind") == "welcome"
    await raw.challenge("rock", rounds=50)
    turn = (await raw.recv_kind("turn")).turn
    session = hub.sessions["thinker"]
    stopping = asyncio.ensure_future(hub.shutdown("the test stops the server", grace=5.0))
    ended = (await raw.recv_kind("match_ended")).match_ended
    assert ended.termination == Termination.ABORTED
    await asyncio.sleep(1.0)  # past the 0.5 s linger: only the owed answer holds the shutdown now
    assert not session.is_settled
    assert not stopping.done()
    answered = loop.time()
    await raw.answer(turn, 0)
    await asyncio.wait_for(stopping, 4.0)
    assert session.is_settled
    assert loop.time() - answered < 2.0  # the answer let it go on (the grace would have taken 4 s more)


async def test_shutdown_goes_on_when_a_bot_that_owed_an_answer_challenges_again(
    live_server: LiveServer,
) -> None:
    """A bot that drops the answer its match's end made moot and challenges again owes nothing.

    A Challenge sent while the bot is still seated says nothing of the turn it is thinking about: the
    shutdown keeps waiting for that answer.
    """
    hub = live_server.hub
    loop = asyncio.get_running_loop()
    raw = RawBot(live_server.channel())
    assert (await raw.hello("mover")).WhichOneof("kind") == "welcome"
    await raw.challenge("rock", rounds=50)
    await raw.recv_kind("turn")
    session = hub.sessions["mover"]
    await raw.challenge("rock", rounds=50)  # while seated and owing: queued behind the match, settles nothing
    for _ in range(100):
        if session.queued:
            break
        await asyncio.sleep(0.01)
    assert session.queued and not session.is_settled
    stopping = asyncio.ensure_future(hub.shutdown("the test stops the server", grace=5.0))
    ended = (await raw.recv_kind("match_ended")).match_ended
    assert ended.termination == Termination.ABORTED
    await asyncio.sleep(1.0)  # past the 0.5 s linger: only the owed answer holds the shutdown now
    assert not session.is_settled and not stopping.done()
    challenged = loop.time()
    await raw.challenge("rock", rounds=50)  # unseated now: it has read the end and moved on
    await asyncio.wait_for(stopping, 4.0)
    assert session.is_settled
    assert loop.time() - challenged < 2.0  # the grace would have taken 3 s more


async def test_a_challenge_while_the_server_stops_is_refused_for_now(live_server: LiveServer) -> None:
    """A Challenge that reaches a stopping server hears why and that it may come again, instead of nothing."""
    raw = RawBot(live_server.channel())
    assert (await raw.hello("latecomer")).WhichOneof("kind") == "welcome"
    await live_server.hub.shutdown("the test stops the server", grace=2.0)
    await raw.challenge("rock", rounds=5)
    status = (await raw.recv_kind("challenge_status")).challenge_status
    assert status.state == bs.ChallengeStatus.STATE_REFUSED
    assert status.retry_later
    assert "shutting down" in status.reason
