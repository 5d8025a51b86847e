"""Playing hosted bots remotely: humans in a terminal, guests and names, queues, spectators."""

from __future__ import annotations

import asyncio
import os
import pty
import select
import subprocess
import sys
import time

import grpc
import pytest

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client import Termination
from arena_client.convert import observation_from_proto
from arena_server.store.database import hash_token
from tests.conftest import LiveServer
from tests.fakes.grpc_bots import RawBot

BIDS = [f"{q}x{f}" for q in range(1, 5) for f in range(1, 7)]


def drive_human(
    args: list[str], candidates: list[str], first: str | None = None, timeout: float = 90
) -> tuple[int, str]:
    """Run ``arena ARGS`` on a pseudo-terminal; answer each prompt with the next candidate.

    On ``your move>`` the first candidate is typed; on ``try again>`` the next
    one. ``first``, if given, is typed once at the very first prompt (to check
    that nonsense is refused).
    """
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "arena_server.cli", *args], stdin=slave, stdout=slave, stderr=slave, close_fds=True
    )
    os.close(slave)
    out = ""
    index = 0
    pending_first = first
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536).decode(errors="replace")
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            out += data
            if out.endswith("your move> "):
                index = 0
                line = pending_first if pending_first is not None else candidates[0]
                if pending_first is not None:
                    index = -1
                    pending_first = None
                os.write(master, (line + "\n").encode())
            elif out.endswith("try again> "):
                index += 1
                os.write(master, (candidates[index % len(candidates)] + "\n").encode())
        else:
            proc.kill()
            raise AssertionError("the human session did not finish in time:\n" + out[-3000:])
        return proc.wait(timeout=10), out.replace("\r\n", "\n")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(
    ("game", "params", "candidates", "expect"),
    [
        ("rps", ["-p", "rounds=5"], ["r"], "rounds won:"),
        ("rps", ["-p", "signs=5", "-p", "rounds=5"], ["spock"], "spock"),
        ("tic_tac_toe", [], [f"{c}{r}" for r in (1, 2, 3) for c in "abc"], "a b c"),
        ("dots_and_boxes", ["-p", "rows=2", "-p", "cols=2"], [str(e) for e in range(12)], "boxes:"),
        ("liars_dice", ["-p", "dice=2"], ["liar", *BIDS], "round 1 dice:"),
    ],
)
async def test_scripted_human_plays_a_whole_game(
    live_server: LiveServer, game: str, params: list[str], candidates: list[str], expect: str
) -> None:
    args = ["play", game, "--vs", "random", "--server", live_server.address, *params]
    code, out = await asyncio.to_thread(drive_human, args, candidates, "banana")
    assert code == 0, out[-2000:]
    assert "not accepted:" in out  # the nonsense first line was refused with a reason
    assert "game over:" in out and "seed revealed:" in out
    assert expect in out
    records = await live_server.store.list_matches(game=game)
    assert records and records[0].termination == Termination.NORMAL
    assert records[0].seats[0].bot_name.startswith("guest-")


async def test_human_sees_clock_and_help(live_server: LiveServer) -> None:
    args = ["play", "tic_tac_toe", "--vs", "random", "--server", live_server.address]
    code, out = await asyncio.to_thread(
        drive_human, args, ["a1", "b1", "c1", "a2", "b2", "c2", "a3", "b3", "c3"], "help"
    )
    assert code == 0
    assert "legal moves: a1, b1, c1, a2, b2, c2, a3, b3, c3" in out
    assert "clock: 5:00 for this move" in out


def test_play_without_server_is_one_clear_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "arena_server.cli", "play", "rps", "--vs", "random", "--server", "127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "arena: cannot reach 127.0.0.1:9 (connection refused); is an Arena server running there? "
        "Start one with `arena serve`"
    )


async def test_play_unknown_bot_and_bad_params(live_server: LiveServer) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "arena_server.cli", "play", *args, "--server", live_server.address],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    out = await asyncio.to_thread(run, "rps", "--vs", "nobody")
    assert out.returncode == 2 and "no bot named 'nobody'" in out.stderr
    out = await asyncio.to_thread(run, "tic_tac_toe", "--vs", "rock")
    assert out.returncode == 2 and "does not play tic_tac_toe" in out.stderr
    out = await asyncio.to_thread(run, "liars_dice", "--vs", "random", "-p", "players=9")
    assert out.returncode == 2 and "players=9 is out of range" in out.stderr


async def test_registered_name_needs_its_token(live_server: LiveServer) -> None:
    await live_server.store.conn.execute(
        "INSERT INTO bots (name, kind, token_hash, created_at) VALUES ('alice', 'remote', ?, 'now')",
        (hash_token("s3cret"),),
    )
    raw = RawBot(live_server.channel())
    await raw.send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", name="alice", token="guess")))
    msg = await raw.recv()
    assert msg.error.code == bs.ERROR_CODE_UNAUTHENTICATED and msg.error.fatal
    raw = RawBot(live_server.channel())
    await raw.send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", name="alice")))
    assert (await raw.recv()).error.code == bs.ERROR_CODE_UNAUTHENTICATED
    raw = RawBot(live_server.channel())
    await raw.send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", name="alice", token="s3cret")))
    welcome = (await raw.recv()).welcome
    assert welcome.bot_name == "alice" and not welcome.guest


async def test_cannot_act_for_another_seat(live_server: LiveServer) -> None:
    one, two = RawBot(live_server.channel()), RawBot(live_server.channel())
    tokens = {
        "one": (await one.hello("one")).welcome.session_token,
        "two": (await two.hello("two")).welcome.session_token,
    }
    request = mp.CreateMatchRequest(game="rps", bots=["one", "two"], bot_tokens=tokens)  # issue 12: tokens needed
    request.params["rounds"].int_value = 10
    created = await mp_grpc.MatchServiceStub(live_server.channel()).CreateMatch(request)
    turn_one = (await one.recv_kind("turn")).turn
    turn_two = (await two.recv_kind("turn")).turn
    assert turn_one.turn_id != turn_two.turn_id
    await two.answer(turn_one, 0)  # seat 1 tries to answer seat 0's turn
    ended = (await one.recv_kind("match_ended")).match_ended
    assert ended.match_id == created.match_id
    assert ended.termination == Termination.PROTOCOL_ERROR and ended.offender == 1
    assert "never given" in ended.reason
    one.hang_up()
    two.hang_up()  # (its own Turn is still unanswered)


async def test_busy_remote_opponent_queues_the_challenge(live_server: LiveServer) -> None:
    host, other, challenger = (
        RawBot(live_server.channel()),
        RawBot(live_server.channel()),
        RawBot(live_server.channel()),
    )
    await host.hello("host")
    await other.hello()
    await challenger.hello()
    await other.challenge("host", rounds=3)  # host is now busy with `other`
    await host.recv_kind("match_started")
    await challenger.challenge("host", rounds=3)
    status = (await challenger.recv_kind("challenge_status")).challenge_status
    assert status.state == bs.ChallengeStatus.STATE_QUEUED and status.queue_position == 1
    assert "number 1 in its queue" in status.reason
    for _ in range(3):  # host and other finish their match
        turn = (await host.recv_kind("turn")).turn
        await host.answer(turn, 0)
        turn = (await other.recv_kind("turn")).turn
        await other.answer(turn, 1)
    started = (await challenger.recv_kind("challenge_status")).challenge_status
    assert started.state == bs.ChallengeStatus.STATE_STARTED
    for bot in (host, other, challenger):
        bot.hang_up()  # (host and challenger are in a match)


async def test_rated_challenge_is_refused(live_server: LiveServer) -> None:
    # Issue 12: rated matches come only from the ladder's pairings; every challenge is unrated.
    raw = RawBot(live_server.channel())
    await raw.hello()
    await raw.challenge("random", rated=True)
    status = (await raw.recv_kind("challenge_status")).challenge_status
    assert status.state == bs.ChallengeStatus.STATE_REFUSED and "come only from the ladder" in status.reason


async def test_spectator_sees_no_hidden_dice_before_the_reveal(live_server: LiveServer) -> None:
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    watch = stub.WatchMatch(mp.WatchMatchRequest(game="liars_dice"))
    events_task = asyncio.ensure_future(_collect(watch))
    await asyncio.sleep(0.2)  # the watcher is waiting for the next liars_dice match
    request = mp.CreateMatchRequest(game="liars_dice", bots=["random", "random"], wait=True)
    request.params["dice"].int_value = 3
    response = await stub.CreateMatch(request)
    events = await asyncio.wait_for(events_task, 30)
    kinds = [e.WhichOneof("kind") for e in events]
    assert kinds[0] == "started" and kinds[-1] == "ended" and kinds.count("update") > 3
    assert events[0].started.match_id == response.match_id
    challenges = 0
    for event in events[1:-1]:
        assert all(m.seat >= 0 for m in event.update.moves)  # no dice rolls while running
        obs = observation_from_proto(event.update.observation)
        assert obs.my_dice == ()  # a spectator has no dice of its own
        challenges += sum(m.label == "liar" for m in event.update.moves)
        # dice are public only in finished rounds, each revealed by a challenge already seen
        assert len(obs.past_rounds) == challenges
    ended = events[-1].ended
    assert any(m.seat == -1 for m in ended.moves) and ended.seed  # everything revealed at the end


async def _collect(call: grpc.aio.UnaryStreamCall) -> list[mp.MatchEvent]:  # type: ignore[type-arg]
    return [event async for event in call]


async def test_watch_cli_follows_a_match(live_server: LiveServer) -> None:
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    request = mp.CreateMatchRequest(game="tic_tac_toe", bots=["random", "random"], wait=True)
    response = await stub.CreateMatch(request)

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "arena_server.cli", "watch", response.match_id, "--server", live_server.address],
            capture_output=True,
            text=True,
            timeout=60,
        )

    out = await asyncio.to_thread(run)
    assert out.returncode == 0, out.stderr
    assert f"match {response.match_id}:" in out.stdout and "random vs random" in out.stdout
    assert "result: random" in out.stdout and "seed revealed:" in out.stdout and "a b c" in out.stdout


async def test_late_spectator_gets_every_public_move_exactly_once(live_server: LiveServer) -> None:
    raw = RawBot(live_server.channel())
    await raw.hello()
    await raw.challenge("rotate", rounds=6)
    for _ in range(2):  # two rounds before anyone watches
        turn = (await raw.recv_kind("turn")).turn
        await raw.answer(turn, 1)
    turn = (await raw.recv_kind("turn")).turn  # round 3 is being asked: the match is mid-way
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    watch = stub.WatchMatch(mp.WatchMatchRequest(match_id=turn.match_id))
    first = await watch.read()
    assert first.WhichOneof("kind") == "started"
    catch_up = await watch.read()
    assert [(m.seat, m.label) for m in catch_up.update.moves] == [(0, "paper"), (1, "rock"), (0, "paper"), (1, "paper")]
    await raw.answer(turn, 1)
    for _ in range(3):
        turn = (await raw.recv_kind("turn")).turn
        await raw.answer(turn, 1)
    events = [catch_up]
    while (event := await watch.read()) is not grpc.aio.EOF:
        events.append(event)
    seen = [(m.seat, m.action) for e in events if e.WhichOneof("kind") == "update" for m in e.update.moves]
    ended = events[-1].ended
    assert seen == [(m.seat, m.action) for m in ended.moves]  # each move once, in order
    assert len(seen) == 12
