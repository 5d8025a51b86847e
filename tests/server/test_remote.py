"""The real gRPC server on port 0 with a real SQLite file: remote bots, good and bad."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

import arena_bots
from arena.v1 import bot_session_pb2 as bs
from arena.v1 import common_pb2
from arena.v1 import games_pb2 as gp
from arena.v1 import games_pb2_grpc as gp_grpc
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client import Bot, Termination, TimeControl, Turn
from arena_client.convert import time_control_to_proto
from arena_client.remote import ArenaError, Client
from arena_games import load_game
from arena_server.api import bot_session
from arena_server.api.server import running_server
from arena_server.matches.hub import Hub
from arena_server.store.database import Store
from tests.conftest import LiveServer, in_thread
from tests.fakes.bots import Paper
from tests.fakes.grpc_bots import RawBot

REPO = Path(__file__).resolve().parents[2]


async def stored(live: LiveServer, match_id: str) -> object:
    for _ in range(100):
        record = await live.store.get_match(match_id)
        if record is not None and record.termination is not None:
            return record
        await asyncio.sleep(0.05)
    raise AssertionError(f"match {match_id} was not finished in the store")


async def start_raw_match(
    live: LiveServer, rounds: int = 100, name: str = ""
) -> tuple[RawBot, bs.MatchStarted, bs.Turn]:
    raw = RawBot(live.channel())
    welcome = await raw.hello(name)
    assert welcome.WhichOneof("kind") == "welcome"
    await raw.challenge("random", rounds=rounds)
    started = (await raw.recv_kind("match_started")).match_started
    turn = (await raw.recv_kind("turn")).turn
    return raw, started, turn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server_process(port: int, db: Path, *extra: str) -> subprocess.Popen[str]:
    """``arena serve`` as a real process on 127.0.0.1:``port`` (its first stdout line says "serving on")."""
    argv = ["serve", "--no-http", "--port", str(port), "--db", str(db), "--host", "127.0.0.1", *extra]
    return subprocess.Popen(
        [sys.executable, "-m", "arena_server.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_sdk_bot_in_another_process_plays_hosted_bot(tmp_path: Path) -> None:
    """The foundation's promise: a ten-line SDK bot in its own process, a real server, a real database."""
    db = tmp_path / "arena.db"
    port = free_port()
    server = start_server_process(port, db)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert "serving on" in line, line + server.stderr.read() if server.stderr else line
        bot = tmp_path / "bot.py"
        bot.write_text(
            textwrap.dedent(f"""
            from arena_client import Bot, run

            class Paper(Bot):
                name = "paper"
                def act(self, turn):
                    return 1

            [result] = run(Paper(), "127.0.0.1:{port}", opponent="rock", game="rps")
            print(result.match_id, result.returns[0], result.termination.name)
        """)
        )
        out = subprocess.run([sys.executable, str(bot)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        match_id, score, termination = out.stdout.split()
        assert score == "1000.0" and termination == "NORMAL"
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            record = mp_grpc.MatchServiceStub(channel).GetMatch(mp.GetMatchRequest(match_id=match_id))
            assert [s.bot_name for s in record.seats] == ["paper", "rock"]
            assert record.status == mp.MATCH_STATUS_FINISHED and len(record.moves) == 2000
            listed = mp_grpc.MatchServiceStub(channel).ListMatches(mp.ListMatchesRequest(bot="paper"))
            assert [m.match_id for m in listed.matches] == [match_id]
    finally:
        server.terminate()
        server.communicate(timeout=20)
    import sqlite3

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT status, returns, move_count FROM matches WHERE id = ?", (int(match_id),)).fetchall()
    assert rows == [("finished", "[1000.0, -1000.0]", 2000)]


async def test_sdk_client_plays_several_matches_with_alternating_seats(live_server: LiveServer) -> None:
    client = Client(Paper(), live_server.address, name="paper-bot")
    results = await client.play(opponent="rock", params={"rounds": 20}, matches=3)
    assert [r.termination for r in results] == [Termination.NORMAL] * 3
    records = [await live_server.store.get_match(r.match_id) for r in results]
    assert [[s.bot_name for s in rec.seats] for rec in records] == [  # type: ignore[union-attr]
        ["paper-bot", "rock"],
        ["rock", "paper-bot"],
        ["paper-bot", "rock"],
    ]
    # paper beats rock every round, whichever seat it sits in
    assert [r.returns[rec.seats[0].bot_name != "paper-bot"] for r, rec in zip(results, records, strict=True)] == [
        20.0
    ] * 3  # type: ignore[union-attr]


async def test_session_is_scheduled_into_many_matches(live_server: LiveServer) -> None:
    client = Client(Paper(), live_server.address, name="waiting-bot")
    task = asyncio.ensure_future(client.play())  # no opponent: waits to be seated
    for _ in range(100):
        if "waiting-bot" in live_server.hub.sessions and client.session_token:
            break
        await asyncio.sleep(0.02)
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    for _ in range(3):
        tokens = {"waiting-bot": client.session_token}  # issue 12: seating a remote bot needs its token
        request = mp.CreateMatchRequest(game="rps", bots=["waiting-bot", "rotate"], wait=True, bot_tokens=tokens)
        request.params["rounds"].int_value = 30
        response = await stub.CreateMatch(request)
        assert response.record.termination == Termination.NORMAL
    assert len(client.results) == 3
    task.cancel()


async def test_garbage_bytes_end_match_as_protocol_error(live_server: LiveServer) -> None:
    raw, started, _ = await start_raw_match(live_server)
    await raw.send(b"\xff\xff\xff\xff not a protobuf \x00\x01")
    error = await raw.recv_kind("error")
    assert error.error.fatal and "not a valid arena.v1.BotMessage" in error.error.message
    record = await stored(live_server, started.match_id)
    assert record.termination == Termination.PROTOCOL_ERROR and record.offender == started.seat  # type: ignore[attr-defined]


async def test_an_idle_session_is_pinged_and_a_seated_one_is_not(
    live_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bot_session, "PING_INTERVAL", 0.05)
    raw = RawBot(live_server.channel())
    assert (await raw.hello("pinged")).WhichOneof("kind") == "welcome"
    nonces = [(await raw.recv_kind("ping", timeout=5)).ping.nonce for _ in range(3)]
    assert nonces[0] >= 1 and nonces == sorted(set(nonces)), nonces
    await raw.send(bs.BotMessage(pong=bs.Pong(nonce=nonces[-1])))
    # Seated, the bot owes an answer: nothing is written to it, pings included, while it thinks.
    await raw.challenge("random", rounds=3, time_control=time_control_to_proto(TimeControl(timedelta(seconds=5))))
    await raw.recv_kind("match_started")
    turn = (await raw.recv_kind("turn")).turn
    waiting = asyncio.ensure_future(raw.recv())
    await asyncio.sleep(0.4)
    assert not waiting.done(), waiting.result()
    await raw.answer(turn, 0)
    kinds = []
    while "match_ended" not in kinds:
        msg = await (waiting if not kinds else raw.recv())
        kinds.append(msg.WhichOneof("kind"))
        if kinds[-1] == "turn":
            await raw.answer(msg.turn, 0)
    assert "ping" not in kinds, kinds
    # Idle again: the pings resume.
    assert (await raw.recv_kind("ping", timeout=5)).ping.nonce > nonces[-1]
    raw.call.cancel()
    for _ in range(100):  # the stream's end stops the session (and its ping timer)
        if "pinged" not in live_server.hub.sessions:
            break
        await asyncio.sleep(0.05)
    assert "pinged" not in live_server.hub.sessions


async def test_skipping_hello_is_refused(live_server: LiveServer) -> None:
    raw = RawBot(live_server.channel())
    await raw.send(bs.BotMessage(action=bs.Action(match_id="1", turn_id=1, action=0)))
    msg = await raw.recv()
    assert msg.error.code == bs.ERROR_CODE_NO_HELLO and msg.error.fatal
    assert "first message must be hello" in msg.error.message


async def test_answering_a_turn_never_given_is_protocol_error(live_server: LiveServer) -> None:
    raw, started, turn = await start_raw_match(live_server)
    await raw.send(bs.BotMessage(action=bs.Action(match_id=started.match_id, turn_id=turn.turn_id + 50, action=0)))
    ended = (await raw.recv_kind("match_ended")).match_ended
    assert ended.termination == Termination.PROTOCOL_ERROR and ended.offender == started.seat
    assert "never given" in ended.reason
    assert ended.seed and ended.returns[started.seat] == -100.0


async def test_out_of_range_action_is_illegal(live_server: LiveServer) -> None:
    raw, _started, turn = await start_raw_match(live_server)
    await raw.answer(turn, 7)
    ended = (await raw.recv_kind("match_ended")).match_ended
    assert ended.termination == Termination.ILLEGAL_ACTION
    assert "answered 7, which is not a legal action (legal: 0..2)" in ended.reason


async def test_oversized_message_is_refused(live_server: LiveServer) -> None:
    raw, started, _ = await start_raw_match(live_server)
    await raw.send(bs.BotMessage(resign=bs.Resign(match_id="x", reason="y" * 100_000)))
    error = await raw.recv_kind("error")
    assert error.error.code == bs.ERROR_CODE_TOO_LARGE and "limit is 65536 bytes" in error.error.message
    record = await stored(live_server, started.match_id)
    assert record.termination == Termination.PROTOCOL_ERROR  # type: ignore[attr-defined]


async def test_hanging_up_mid_match_is_a_disconnect(live_server: LiveServer) -> None:
    raw, started, turn = await start_raw_match(live_server)
    await raw.answer(turn, 0)
    await raw.recv_kind("turn")
    raw.call.cancel()
    record = await stored(live_server, started.match_id)
    assert record.termination == Termination.DISCONNECT and record.offender == started.seat  # type: ignore[attr-defined]
    assert "disconnected" in record.reason  # type: ignore[attr-defined]


async def test_resign(live_server: LiveServer) -> None:
    raw, started, _ = await start_raw_match(live_server)
    await raw.send(bs.BotMessage(resign=bs.Resign(match_id=started.match_id, reason="lost cause")))
    ended = (await raw.recv_kind("match_ended")).match_ended
    assert ended.termination == Termination.RESIGN and "lost cause" in ended.reason


async def test_late_answer_is_dropped_and_told(live_server: LiveServer) -> None:
    raw = RawBot(live_server.channel())
    await raw.hello()
    tc = TimeControl(timedelta(milliseconds=50), timedelta(0), timedelta(milliseconds=10))
    await raw.challenge("random", rounds=10, time_control=time_control_to_proto(tc))
    turn = (await raw.recv_kind("turn")).turn
    ended = (await raw.recv_kind("match_ended")).match_ended
    assert ended.termination == Termination.TIMEOUT and "did not answer turn" in ended.reason
    await raw.answer(turn, 0)  # too late
    error = await raw.recv_kind("error")
    # Whether it lands just before or after the seat lets go, a late answer is a non-fatal STALE_TURN.
    assert not error.error.fatal and error.error.code == bs.ERROR_CODE_STALE_TURN
    record = await stored(live_server, turn.match_id)
    assert len(record.moves) == 0  # type: ignore[attr-defined]


async def test_misbehaviour_does_not_disturb_other_matches(live_server: LiveServer) -> None:
    client = Client(Paper(), live_server.address, name="good-bot")
    good = asyncio.ensure_future(client.play(opponent="rock", params={"rounds": 300}))
    for _ in range(3):
        raw, _, _ = await start_raw_match(live_server)
        await raw.send(b"\x08\x96\x01garbage")
    results = await good
    assert results[0].termination == Termination.NORMAL and results[0].returns[0] == 300.0


async def test_bad_names_and_versions(live_server: LiveServer) -> None:
    raw = RawBot(live_server.channel())
    msg = await raw.hello("random")
    assert msg.error.code == bs.ERROR_CODE_NAME_TAKEN and "already in use" in msg.error.message
    raw = RawBot(live_server.channel())
    await raw.send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v9")))
    msg = await raw.recv()
    assert msg.error.code == bs.ERROR_CODE_VERSION
    raw = RawBot(live_server.channel())
    welcome = await raw.hello("")
    assert welcome.welcome.guest and welcome.welcome.bot_name.startswith("guest-")


async def test_challenge_refusals(live_server: LiveServer) -> None:
    with pytest.raises(ArenaError, match="no bot named 'nobody'"):
        await Client(Paper(), live_server.address, name="p1").play(opponent="nobody")
    with pytest.raises(ArenaError, match="must be odd"):
        await Client(Paper(), live_server.address, name="p2").play(opponent="rock", params={"signs": 4})
    with pytest.raises(ArenaError, match="unknown game 'chess'"):
        await Client(Paper(), live_server.address, name="p3").play(opponent="rock", game="chess")


async def test_game_service_lists_parameters(live_server: LiveServer) -> None:
    response = await gp_grpc.GameServiceStub(live_server.channel()).ListGames(gp.ListGamesRequest())
    rps = next(g for g in response.games if g.name == "rps")
    signs = next(p for p in rps.params if p.name == "signs")
    assert signs.default.int_value == 3 and signs.min == 3 and "lizard" in rps.rules


async def test_create_match_errors(live_server: LiveServer) -> None:
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.CreateMatch(mp.CreateMatchRequest(game="rps", bots=["random", "ghost"]))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and "ghost" in (err.value.details() or "")
    request = mp.CreateMatchRequest(game="rps", bots=["random", "rock"])
    request.params["signs"].int_value = 2
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.CreateMatch(request)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.GetMatch(mp.GetMatchRequest(match_id="424242"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


class SlowPaper(Bot):
    """Paper after 5 ms: a 50-round match lasts long enough for a watcher to join it mid-way."""

    name = "slow-paper"
    games = ("rps",)

    def act(self, turn: Turn) -> int:
        time.sleep(0.005)
        return 1


async def test_watch_match_streams_public_moves(live_server: LiveServer) -> None:
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    slow = Client(SlowPaper(), live_server.address, name="watched", threaded=True)  # (the loop runs on)
    task = asyncio.ensure_future(slow.play(opponent="rock", params={"rounds": 50}))
    for _ in range(100):
        if live_server.hub.running:
            break
        await asyncio.sleep(0.01)
    [match_id] = list(live_server.hub.running)
    events = [e async for e in stub.WatchMatch(mp.WatchMatchRequest(match_id=match_id))]
    await task
    kinds = [e.WhichOneof("kind") for e in events]
    assert kinds[0] == "started" and kinds[-1] == "ended" and "update" in kinds
    assert not events[0].started.seed  # the seed is secret while the match runs
    assert events[-1].ended.seed and len(events[-1].ended.moves) == 100


async def test_health_and_reflection(live_server: LiveServer) -> None:
    channel = live_server.channel()
    health = await health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service="arena.v1.BotSessionService")
    )
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)

    async def requests():  # type: ignore[no-untyped-def]
        yield reflection_pb2.ServerReflectionRequest(list_services="")

    async for response in stub.ServerReflectionInfo(requests()):
        names = {s.name for s in response.list_services_response.service}
        assert {"arena.v1.BotSessionService", "arena.v1.MatchService", "arena.v1.GameService"} <= names
        break


async def test_sdk_reconnects_when_the_server_comes_back(tmp_path: Path) -> None:
    port = free_port()
    client = Client(Paper(), f"127.0.0.1:{port}", name="patient")
    task = asyncio.ensure_future(client.play(opponent="rock", params={"rounds": 10}, max_backoff=0.5))
    await asyncio.sleep(1.0)  # nobody is listening yet: the client backs off and retries
    assert not task.done()
    store = await Store.open(tmp_path / "a.db")
    hub = Hub(store, arena_bots.hosted_bots())
    try:
        async with running_server(hub, port=port):
            results = await asyncio.wait_for(task, 20)
    finally:
        await store.close()
    assert results[0].termination == Termination.NORMAL


def test_graceful_shutdown_aborts_running_matches(tmp_path: Path) -> None:
    """SIGINT while an SDK bot thinks: the match is recorded aborted, and the server does not sit out its grace.

    The SDK sends the answer that the abort made moot, and challenges again: either tells the server
    that the bot is done with its turn, so the shutdown stops waiting.
    """
    db = tmp_path / "arena.db"
    port = free_port()
    server = start_server_process(port, db, "--shutdown-grace", "30")
    bot = tmp_path / "slow.py"
    bot.write_text(
        textwrap.dedent(f"""
        import time
        from arena_client import Bot, run
        class Slow(Bot):
            def act(self, turn):
                time.sleep(0.5)  # always thinking when the signal comes
                return 0
        try:
            run(Slow(), "127.0.0.1:{port}", opponent="random", reconnect=False, name="slow-bot")
        except Exception as exc:
            print("client:", exc)
    """)
    )
    try:
        assert server.stdout is not None and "serving on" in server.stdout.readline()
        client = subprocess.Popen([sys.executable, str(bot)], stdout=subprocess.PIPE, text=True)
        import sqlite3
        import time

        for _ in range(100):
            with sqlite3.connect(db) as conn:
                if conn.execute(
                    "SELECT COUNT(*) FROM matches m JOIN match_seats s ON s.match_id = m.id "
                    "WHERE m.status = 'running' AND s.bot_name = 'slow-bot'"
                ).fetchone()[0]:
                    break
            time.sleep(0.1)
        time.sleep(0.2)  # the first turn is out
        signalled = time.monotonic()
        server.send_signal(2)  # SIGINT
        assert server.wait(timeout=60) == 0
        stopped_in = time.monotonic() - signalled
        client.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
        server.communicate(timeout=30)
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT m.status, m.termination, m.reason FROM matches m JOIN match_seats s ON s.match_id = m.id "
            "WHERE s.bot_name = 'slow-bot'"
        ).fetchall()
        running = conn.execute("SELECT COUNT(*) FROM matches WHERE status = 'running'").fetchone()[0]
    assert rows == [("aborted", int(Termination.ABORTED), "the server is shutting down")]
    assert running == 0  # every match, ladder ones included, was closed properly
    assert stopped_in < 10.0, f"stopped {stopped_in:.1f} s after SIGINT: it waited out the grace for a moot answer"


def test_crash_recovery_marks_running_matches_aborted(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"

    async def half_written() -> None:
        from datetime import UTC, datetime

        from arena_client import SeatInfo
        from arena_server.referee.records import MatchRecord
        from arena_server.referee.seeds import new_seed, seed_hash

        store = await Store.open(db)
        seed = new_seed()
        record = MatchRecord(
            "",
            load_game("rps"),
            (SeatInfo(0, "a"), SeatInfo(1, "b")),
            TimeControl(),
            seed,
            seed_hash(seed),
            datetime.now(UTC),
        )
        await store.start_match(record)
        await store.conn.close()  # no finish_match: as if the server died

    in_thread(asyncio.run, half_written())
    os.remove(str(db) + ".lock")

    async def reopen() -> tuple[int, object]:
        store = await Store.open(db)
        try:
            return store.recovered_aborted, await store.get_match("1")
        finally:
            await store.close()

    count, record = in_thread(asyncio.run, reopen())
    assert count == 1 and record.termination == Termination.ABORTED  # type: ignore[attr-defined]


async def test_late_answer_for_the_previous_match_is_dropped_not_a_violation(live_server: LiveServer) -> None:
    """An Action that crosses the end of a bot's match must not end its next match (a STALE_TURN, nothing more)."""
    raw = RawBot(live_server.channel())
    await raw.hello()
    await raw.challenge("rock", rounds=1)
    first = (await raw.recv_kind("turn")).turn
    await raw.answer(first, 1)
    assert (await raw.recv_kind("match_ended")).match_ended.termination == common_pb2.TERMINATION_NORMAL
    await raw.challenge("rock", rounds=2)
    turn = (await raw.recv_kind("turn")).turn
    assert turn.match_id != first.match_id
    await raw.answer(first, 2)  # late: for the match that is over
    stale = (await raw.recv_kind("error")).error
    assert stale.code == bs.ERROR_CODE_STALE_TURN and not stale.fatal and first.match_id in stale.message
    await raw.answer(turn, 1)
    await raw.answer((await raw.recv_kind("turn")).turn, 1)
    ended = (await raw.recv_kind("match_ended")).match_ended
    assert ended.termination == common_pb2.TERMINATION_NORMAL, ended.reason
    raw.call.cancel()
