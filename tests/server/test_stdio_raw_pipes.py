"""The stdio seat's raw pipes: stdout read with ``add_reader`` + ``os.read``, stdin written with ``os.write``.

A move goes through no pipe transport and no task: these tests count what the
event loop is asked to do during real moves with a real bot process, so a
change that brings a transport, a task or a timer per move back fails them. The
slow paths are played for real: a bot that reads its stdin late gets every
byte in order (the pipe fills, the rest waits in the seat's backlog and is
written as the bot reads), a bot that closes its stdin is a timeout (not an
exception or a crash of the seat), and a bot that never reads is stopped at the backlog limit. The
same runs on uvloop, whose ``add_reader`` the seat uses too.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from arena_client import MatchInfo, PublicMove, SeatInfo, Termination, TimeControl, Turn, Update
from arena_games import load_game
from arena_server.referee.clock import LoopLag
from arena_server.seats.framing import Framing
from arena_server.seats.process import STDIN_BACKLOG_LIMIT, BotProgram
from arena_server.seats.sandbox import Limits
from arena_server.seats.subprocess_seat import SubprocessSeat
from tests.conftest import counting_loop_work, in_thread
from tests.server._stdio_helpers import PROTO_BOT_PRELUDE, PYTHON, TEST_LIMITS, marker, processes_with

ROOT = Path(__file__).resolve().parents[2]
MOVES = 300
CLOCK = TimeControl(timedelta(seconds=5), timedelta(seconds=20), timedelta(0))

HELLO = 'import json, os, sys, time\nprint(json.dumps({"hello": {"protocolVersion": "arena.v1"}}), flush=True)\n'

PROTO_BOT = (
    PROTO_BOT_PRELUDE
    + """
def send(msg):
    sys.stdout.buffer.write(frame(msg))
    sys.stdout.flush()

send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1")))
for msg in server_messages():
    if msg.WhichOneof("kind") == "turn":
        t = msg.turn
        send(bs.BotMessage(action=bs.Action(match_id=t.match_id, turn_id=t.turn_id, action=t.turn_id % 3)))
"""
)

SLOW_READER = (
    HELLO
    + """
expected = int(sys.argv[1])
time.sleep(float(sys.argv[2]))  # the server writes meanwhile: the pipe fills up
seen = 0
for line in sys.stdin:
    msg = json.loads(line)
    if "update" in msg:
        label = msg["update"]["moves"][0]["label"]
        if label != f"u{seen}-" + "x" * 200:
            print(f"update {seen} arrived as {label[:30]!r}", file=sys.stderr, flush=True)
            seen = -10**9
        seen += 1
    elif "turn" in msg:
        t = msg["turn"]
        print(f"seen {seen} of {expected}", file=sys.stderr, flush=True)
        action = 1 if seen == expected else 2
        print(json.dumps({"action": {"matchId": t["matchId"], "turnId": t["turnId"], "action": action}}), flush=True)
"""
)

CLOSES_STDIN = HELLO + "os.close(0)\ntime.sleep(60)\n"
NEVER_READS = HELLO + "time.sleep(60)\n"


def _info(seat: SubprocessSeat, match_id: str) -> MatchInfo:
    game = load_game("rps", rounds=MOVES)
    return MatchInfo(match_id, "rps", dict(game.params), 0, (seat.info,), CLOCK, "")


def _turn(match_id: str, turn_id: int) -> Turn:
    state = load_game("rps", rounds=MOVES).new_initial_state()
    return Turn(match_id, turn_id, 0, state.observation(0), state.legal_actions(0), CLOCK.per_move, CLOCK.overage)


def _seat(code: str, *args: str, framing: Framing = Framing.JSON) -> SubprocessSeat:
    program = BotProgram([PYTHON, "-c", code, *args], framing, limits=TEST_LIMITS, startup_timeout=30.0)
    return SubprocessSeat(program, SeatInfo(0, "raw-pipes", 1, "subprocess"))


async def test_a_stdio_move_goes_through_no_transport_no_task_and_no_timer() -> None:
    program = BotProgram(
        [sys.executable, "-c", PROTO_BOT],
        Framing.PROTO,
        env={"PYTHONPATH": str(ROOT / "proto")},
        limits=Limits(run_as=None),  # the venv's interpreter is not readable by nobody on every machine
    )
    seat = SubprocessSeat(program, SeatInfo(0, "lean", 1, "subprocess"))
    loop = asyncio.get_running_loop()
    watchers = LoopLag.of(loop).users
    try:
        assert await seat.start(_info(seat, "lean")) is None
        process = seat._process
        assert process.proc is not None
        transport: Any = process.proc._transport  # type: ignore[attr-defined]
        # stdin and stdout are the seat's own descriptors; only stderr has asyncio's pipe transport.
        assert transport.get_pipe_transport(0) is None and transport.get_pipe_transport(1) is None
        assert transport.get_pipe_transport(2) is not None
        answers = [await seat.ask(_turn("lean", n), (), 10.0) for n in range(1, 11)]  # warmed up
        with counting_loop_work(loop) as work:
            for n in range(11, MOVES + 1):
                answers.append(await seat.ask(_turn("lean", n), (), 10.0))
    finally:
        await seat.close()
    assert [a.failure for a in answers] == [None] * MOVES, [a.reason for a in answers if a.failure][:1]
    # The seat held the fair-clock monitor for the match (not per move) and let go of it when closed.
    assert LoopLag.of(loop).users == watchers
    assert [a.action for a in answers] == [n % 3 for n in range(1, MOVES + 1)]
    counted = MOVES - 10
    print(f"\n{counted} stdio moves: {work.tasks} tasks, {work.timers} timers, {work.callbacks} callbacks scheduled")
    assert work.tasks == 0, f"{work.tasks} tasks for {counted} moves"
    # The turn deadline keeps one timer; the fair-clock monitor ticks every 5 ms.
    assert work.timers < counted // 10, f"{work.timers} timers for {counted} moves: something sets a timer per move"
    # One callback per move: the answer's future waking the asking coroutine. A pipe transport's
    # protocol hop, or a write queued for a later iteration, would add another.
    assert work.callbacks <= counted * 1.1, f"{work.callbacks} callbacks for {counted} moves"


async def _slow_reader(updates: int) -> tuple[int, int, str, int | None]:
    seat = _seat(SLOW_READER, str(updates), "0.5")
    try:
        assert await seat.start(_info(seat, "slow")) is None
        pipes = seat._process.pipes
        assert pipes is not None
        for n in range(updates):
            seat.update(Update("slow", (PublicMove(1, 0, f"u{n}-" + "x" * 200),), None))
        waiting = pipes.backlog  # the bot sleeps: the pipe is full, the rest waits in the backlog
        answer = await seat.ask(_turn("slow", 1), (), 30.0)
        left = pipes.backlog
    finally:
        await seat.close()
    return waiting, left, seat.stderr_log(), answer.action


async def test_a_bot_that_reads_late_gets_every_byte_in_order() -> None:
    waiting, left, log, action = await _slow_reader(2000)  # about 560 KB, more than a pipe holds
    assert waiting > 100_000, f"only {waiting} bytes waited: the slow path was not exercised"
    assert action == 1, log  # the bot saw every Update, in order, then the Turn
    assert "seen 2000 of 2000" in log
    assert left == 0


def test_a_bot_that_reads_late_gets_every_byte_in_order_on_uvloop() -> None:
    uvloop = pytest.importorskip("uvloop")
    waiting, _left, log, action = in_thread(uvloop.run, _slow_reader(2000))
    assert waiting > 100_000 and action == 1, log


async def test_a_bot_that_closes_its_stdin_times_out_cleanly() -> None:
    word = marker()
    seat = _seat(CLOSES_STDIN, word)
    try:
        assert await seat.start(_info(seat, "closed")) is None
        pipes = seat._process.pipes
        assert pipes is not None
        await asyncio.sleep(0.3)
        # Where the sandbox's init shares the bot's stdin, the pipe stays open and the Turn waits in it;
        # where the bot held the only read end, the loop has seen it go and nothing more is written.
        assert pipes.stdin_lost != pipes.stdin_open
        answer = await seat.ask(_turn("closed", 1), (), 0.5)
    finally:
        await seat.close()
    assert answer.failure == Termination.TIMEOUT, answer.reason
    assert "sent no Action for turn 1 within 0.5s" in answer.reason
    assert processes_with(word) == []


async def test_a_bot_that_never_reads_is_stopped_at_the_backlog_limit() -> None:
    seat = _seat(NEVER_READS)
    try:
        assert await seat.start(_info(seat, "flood")) is None
        pipes = seat._process.pipes
        assert pipes is not None
        big = (PublicMove(1, 0, "y" * 60_000),)
        sent = 0
        while seat._failure is None and sent < 2 * STDIN_BACKLOG_LIMIT:
            seat.update(Update("flood", big, None))
            sent += 60_000
        backlog = pipes.backlog
        answer = await seat.ask(_turn("flood", 1), (), 5.0)
    finally:
        await seat.close()
    assert STDIN_BACKLOG_LIMIT < backlog < STDIN_BACKLOG_LIMIT + 100_000
    assert answer.failure == Termination.PROTOCOL_ERROR
    assert "does not read its stdin: more than 4 MiB of messages are waiting for it" in answer.reason
