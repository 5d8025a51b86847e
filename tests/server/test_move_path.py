"""The per-move paths stay lean (issue 20): no task or timer per move, exact conversions, uvloop serving.

The remote path writes without a task (a write starts in the caller's step) with one write
watchdog per session, and re-arms one turn deadline per seat; these tests count
what the event loop is asked to do during a real match through a real server,
so a change that brings back a task or a timer per move fails them. The
memoised conversions must produce exactly what protobuf's own constructors do.
The stdio seat hands stdout to its parser straight from the read once the
Hello is in; a bot that dribbles its answers byte by byte still plays cleanly.
``arena serve --uvloop`` runs a real server process on uvloop.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.v1 import bot_session_pb2 as bs
from arena_bots.simple import AlwaysRockBot
from arena_client import Bot, MatchInfo, PublicMove, Termination, Turn, Update
from arena_client.convert import turn_from_proto, turn_to_proto
from arena_client.remote import Client
from arena_games import load_game
from arena_server.referee.clock import LoopLag
from arena_server.referee.loop import play_match
from arena_server.seats.framing import Framing
from arena_server.seats.in_process import InProcessSeat
from arena_server.seats.process import BotProgram
from arena_server.seats.sandbox import Limits
from tests.conftest import LiveServer, counting_loop_work
from tests.fakes.bots import Paper
from tests.server._stdio_helpers import PROTO_BOT_PRELUDE, RELAXED, seat_for

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 600


async def test_a_remote_match_costs_no_task_and_no_timer_per_move(live_server: LiveServer) -> None:
    loop = asyncio.get_running_loop()
    client = Client(Paper(), live_server.address, name="lean", threaded=False)
    await client.play(opponent="rock", params={"rounds": 10})  # connections and caches warmed up
    with counting_loop_work(loop) as work:
        results = await client.play(opponent="rock", params={"rounds": ROUNDS})
    tasks, timers = work.tasks, work.timers
    assert results[0].termination == Termination.NORMAL and results[0].returns[0] == float(ROUNDS)
    print(f"\n{ROUNDS} remote moves: {tasks} tasks and {timers} timers created (client and server together)")
    # Per match: the connection, the session's reader and pinger, the match; the fair-clock monitor
    # ticks every 5 ms. Nothing scales with the number of moves.
    assert tasks < ROUNDS // 10, f"{tasks} tasks for {ROUNDS} moves: something creates a task per move"
    assert timers < ROUNDS // 3, f"{timers} timers for {ROUNDS} moves: something sets a timer per move"


durations = st.timedeltas(min_value=timedelta(seconds=-5), max_value=timedelta(days=3))
moves = st.lists(st.builds(PublicMove, st.integers(-1, 7), st.integers(0, 2**31 - 1), st.text(max_size=12)), max_size=5)


@settings(max_examples=200, deadline=None)
@given(budget=durations, overage=durations, public=moves, turn_id=st.integers(1, 2**32 - 1))
def test_turn_conversions_match_protobuf_exactly(
    budget: timedelta, overage: timedelta, public: list[PublicMove], turn_id: int
) -> None:
    game = load_game("rps", rounds=3)
    state = game.new_initial_state()
    turn = Turn("m-1", turn_id, 0, state.observation(0), state.legal_actions(0), budget, overage)
    for _ in range(2):  # the second time from the memoised values
        fast = bs.ServerMessage()
        turn_to_proto(turn, public, fast.turn)
        plain = bs.ServerMessage()
        plain.turn.match_id = turn.match_id
        plain.turn.turn_id = turn.turn_id
        plain.turn.observation.rps.signs = 3
        plain.turn.observation.rps.rounds = 3
        plain.turn.observation.rps.wins.extend([0, 0])
        plain.turn.legal_actions.extend(turn.legal_actions)
        plain.turn.time_budget.FromTimedelta(budget)
        plain.turn.overage_left.FromTimedelta(overage)
        for m in public:
            plain.turn.moves.add(seat=m.seat, action=m.action, label=m.label)
        assert fast == plain
        assert fast.SerializeToString(deterministic=True) == plain.SerializeToString(deterministic=True)
        back = turn_from_proto(fast.turn, 0)
        assert back.time_budget == plain.turn.time_budget.ToTimedelta()
        assert back.overage_left == plain.turn.overage_left.ToTimedelta()
        assert back == turn_from_proto(plain.turn, 0)


DRIBBLING_BOT = (
    PROTO_BOT_PRELUDE
    + """
out = sys.stdout.buffer

def send(msg, dribble):
    data = frame(msg)
    if not dribble:
        out.write(data)
        out.flush()
        return
    for i in range(len(data)):  # one byte per write: the server reads the frame in pieces
        out.write(data[i:i + 1])
        out.flush()

send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", games=["rps"])), False)
turns = 0
for msg in server_messages():
    if msg.WhichOneof("kind") == "turn":
        turns += 1
        t = msg.turn
        send(bs.BotMessage(action=bs.Action(match_id=t.match_id, turn_id=t.turn_id, action=turns % 3)), turns % 2 == 0)
"""
)


async def test_stdio_answers_read_straight_from_the_pipe_keep_their_order(tmp_path: Path) -> None:
    script = tmp_path / "dribbling_bot.py"
    script.write_text(DRIBBLING_BOT)
    program = BotProgram(
        [sys.executable, str(script)],
        Framing.PROTO,
        env={"PYTHONPATH": str(ROOT / "proto")},
        limits=Limits(run_as=None),  # the venv's interpreter lives under /root
        workdir=tmp_path,
    )
    seat = seat_for(program)
    game = load_game("rps", rounds=60)
    info = MatchInfo("d1", "rps", dict(game.params), 0, (seat.info,), RELAXED, "")
    state = game.new_initial_state()
    actions = []
    try:
        assert await seat.start(info) is None
        for turn_id in range(1, 61):
            turn = Turn(
                "d1", turn_id, 0, state.observation(0), state.legal_actions(0), RELAXED.per_move, RELAXED.overage
            )
            answer = await seat.ask(turn, (), 10.0)
            assert answer.failure is None, answer.reason
            actions.append(answer.action)
    finally:
        await seat.close()
    assert actions == [n % 3 for n in range(1, 61)]


async def _serve(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "arena_server.cli",
        "serve",
        "--no-http",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--no-ladder",
        "--db",
        str(tmp_path / "arena.db"),
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )


async def test_serve_with_uvloop_plays_remote_matches(tmp_path: Path) -> None:
    server = await _serve(tmp_path, "--uvloop")
    assert server.stdout is not None
    try:
        first = (await asyncio.wait_for(server.stdout.readline(), 60)).decode()
        assert "serving on 127.0.0.1:" in first, first
        port = int(first.split("serving on 127.0.0.1:")[1].split()[0])
        assert "event loop: uvloop" in (await asyncio.wait_for(server.stdout.readline(), 10)).decode()
        client = Client(Paper(), f"127.0.0.1:{port}", name="on-uvloop", threaded=False)
        results = await asyncio.wait_for(client.play(opponent="rock", params={"rounds": 200}), 60)
        assert results[0].termination == Termination.NORMAL and results[0].returns[0] == 200.0
    finally:
        server.terminate()
        await asyncio.wait_for(server.communicate(), 30)
    assert server.returncode == 0


async def test_serve_uvloop_without_uvloop_says_how_to_install_it(tmp_path: Path) -> None:
    shadow = tmp_path / "no-uvloop" / "uvloop"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('uvloop is not installed here')\n")
    env = dict(os.environ, PYTHONPATH=str(shadow.parent))
    server = await _serve(tmp_path, "--uvloop", env=env)
    out, err = await asyncio.wait_for(server.communicate(), 60)
    lines = err.decode().strip().splitlines()
    assert server.returncode == 2, (out, err)
    assert lines == [
        "arena: --uvloop needs the uvloop package, which is not installed; "
        "install it with pip install 'arena[uvloop]', or leave out --uvloop"
    ]
    assert not (tmp_path / "arena.db").exists()  # refused before anything was opened


async def _until(check: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "the deadline never fired"
        await asyncio.sleep(0.005)


async def test_a_reused_deadline_fires_once_for_its_latest_arming_only() -> None:
    lag = LoopLag.of()
    lag.acquire()
    fired: list[tuple[str, float]] = []
    start = time.perf_counter()

    def note(name: str) -> Callable[[], None]:
        return lambda: fired.append((name, time.perf_counter() - start))

    try:
        deadline = lag.deadline(0.05, note("first"))
        deadline.restart(0.3, note("pushed back"))  # the 0.05 s timer moves itself on when it fires
        await asyncio.sleep(0.15)
        assert fired == []
        await _until(lambda: bool(fired))
        assert [name for name, _ in fired] == ["pushed back"] and fired[0][1] >= 0.3

        start = time.perf_counter()
        deadline.restart(5.0, note("long"))
        deadline.restart(0.05, note("pulled in"))  # shorter than the timer in place: the timer is moved
        await _until(lambda: len(fired) == 2)
        assert fired[1][0] == "pulled in" and 0.05 <= fired[1][1] < 4.0

        deadline.restart(0.05, note("cancelled"))
        deadline.cancel()
        await asyncio.sleep(0.2)
        assert len(fired) == 2  # a cancelled arming never fires, though its timer ran
        deadline.close()
    finally:
        lag.release()


class LooseTypes(Bot):
    """What Python lets a bot return: a numpy integer from act, a list for games, a truthy int for wants_updates."""

    name = "loose"
    games = ["rps"]  # type: ignore[assignment]  # noqa: RUF012  # a list where a tuple is declared

    def __init__(self) -> None:
        self.updates = 0

    def wants_updates(self) -> bool:
        return 1  # type: ignore[return-value]

    def on_update(self, update: Update) -> None:
        self.updates += 1

    def act(self, turn: Turn) -> int:
        return np.int64(1)  # type: ignore[return-value]  # paper, as numpy's argmax would give it


async def test_a_bot_returning_numpy_integers_plays_hosted_and_remote(live_server: LiveServer) -> None:
    """The conversions the move path makes hold compiled (``make native``) as in pure Python (tests/test_native.py)."""
    hosted = LooseTypes()
    record = await play_match(load_game("rps", rounds=20), [InProcessSeat(hosted), InProcessSeat(AlwaysRockBot())])
    assert record.termination == Termination.NORMAL, record.reason
    assert record.returns == (20.0, -20.0) and hosted.updates > 0
    remote = LooseTypes()
    for threaded in (False, True):
        client = Client(remote, live_server.address, name=f"loose-{threaded}", threaded=threaded)
        (result,) = await client.play(opponent="rock", params={"rounds": 20})
        assert result.termination == Termination.NORMAL, result.reason
        assert sorted(result.returns) == [-20.0, 20.0]  # paper every round (rock cannot win one)
