"""Denial of service: hostile peers against a real server (issue 12, "the server stays responsive").

Every test performs the attack for real against a gRPC server on a free port
(or real bot subprocesses) and fails if the attack works: a silent bot, a bot
that stops reading, a spectator that stops reading, GetMatch on a match of a
million rounds, a pong flood, and stdio lines that used to crash the decoder.
A ticker task measures how long the event loop is ever blocked meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from array import array
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import arena_server.api.authority as authority
import arena_server.api.bot_session as bot_session_api
import arena_server.api.matches as matches_api
import arena_server.matches.hub as hub_module
import arena_server.seats.remote as remote
from arena.v1 import bot_session_pb2 as bs
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_bots.simple import RandomBot
from arena_client import SeatInfo, Termination, TimeControl
from arena_client.convert import time_control_to_proto
from arena_client.remote import Client
from arena_games import load_game
from arena_server.bots.conformance import check_bot
from arena_server.referee.loop import play_match
from arena_server.referee.records import MatchRecord, MoveLog
from arena_server.referee.seeds import seed_hash
from arena_server.seats.framing import Framing
from arena_server.seats.in_process import InProcessSeat
from arena_server.seats.process import BotProgram
from arena_server.seats.subprocess_seat import SubprocessSeat
from tests.conftest import LiveServer
from tests.fakes.bots import Paper
from tests.fakes.grpc_bots import RawBot

LONG_CLOCK = TimeControl(timedelta(seconds=30), timedelta(seconds=30), timedelta(seconds=1))
"""A clock under which no turn times out during a test: only the defences can end the match."""


class StallMeter:
    """Measures the longest stretch during which the event loop ran nothing else."""

    def __init__(self, tick: float = 0.005) -> None:
        self.tick = tick
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(self.tick)
            self.worst = max(self.worst, time.perf_counter() - before - self.tick)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[StallMeter]:
        self._task = asyncio.ensure_future(self._run())
        try:
            yield self
        finally:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def serving(live: LiveServer) -> bool:
    """Whether the server still answers its health check."""
    async with live.channel() as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


async def honest_match(live: LiveServer, name: str, rounds: int = 200) -> float:
    """A well-behaved remote bot plays ``rounds`` rounds against hosted rock; returns seconds per round."""
    client = Client(Paper(), live.address, name=name, threaded=False)
    started = time.perf_counter()
    results = await asyncio.wait_for(client.play(opponent="rock", params={"rounds": rounds}), 60)
    assert results[0].termination == Termination.NORMAL and results[0].returns[0] == float(rounds)
    return (time.perf_counter() - started) / rounds


async def stored(live: LiveServer, match_id: str, within: float) -> MatchRecord:
    """The stored record once the match has ended, waiting at most ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        record = await live.store.get_match(match_id, with_moves=False)
        if record is not None and record.termination is not None:
            return record
        await asyncio.sleep(0.05)
    raise AssertionError(f"match {match_id} did not end within {within}s")


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


# -- 1. Hello timeout ---------------------------------------------------------------------------------


async def test_a_bot_that_never_says_hello_is_dropped(live_server: LiveServer) -> None:
    raw = RawBot(live_server.channel())
    started = time.perf_counter()
    msg = await raw.recv(timeout=bot_session_api.HELLO_TIMEOUT + 5)
    elapsed = time.perf_counter() - started
    assert msg.error.code == bs.ERROR_CODE_NO_HELLO and msg.error.fatal
    assert f"sent no Hello within {bot_session_api.HELLO_TIMEOUT:g}s" in msg.error.message
    with pytest.raises((EOFError, grpc.aio.AioRpcError)):
        await raw.recv(timeout=5)  # the stream is closed
    assert bot_session_api.HELLO_TIMEOUT - 0.5 <= elapsed <= bot_session_api.HELLO_TIMEOUT + 3
    assert live_server.hub.sessions == {}
    assert await serving(live_server)


# -- 2. A bot that stops reading --------------------------------------------------------------------


async def start_then_stop_reading(live: LiveServer, name: str) -> tuple[RawBot, bs.Turn]:
    """A bot that challenges hosted random to a long match, answers turn 1, then never reads again."""
    raw = RawBot(live.channel())
    welcome = await raw.hello(name)
    assert welcome.welcome.bot_name == name
    # As long a match as a remote challenge may ask for (the server's cap).
    await raw.challenge("random", rounds=authority.MAX_ROUNDS, time_control=time_control_to_proto(LONG_CLOCK))
    turn = (await raw.recv_kind("turn")).turn
    await raw.answer(turn, 0)
    return raw, turn


async def flood_stale_answers(raw: RawBot, turn: bs.Turn, count: int, session: remote.RemoteSession) -> int:
    """Each stale answer makes the server write an Error to a bot that does not read them; returns how many."""
    stale = bs.BotMessage(action=bs.Action(match_id=turn.match_id, turn_id=turn.turn_id, action=0))
    for sent in range(count):
        if session.closed.is_set():
            return sent  # the server closed the session: the defence worked
        try:
            await raw.send(stale)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            return sent
    return count


async def test_a_bot_that_stops_reading_overflows_its_queue_and_is_disconnected(live_server: LiveServer) -> None:
    raw, turn = await start_then_stop_reading(live_server, "deaf")
    session = live_server.hub.sessions["deaf"]
    honest = asyncio.ensure_future(honest_match(live_server, "honest-1"))
    started = time.perf_counter()
    async with StallMeter().running() as meter:
        # Stops as soon as the session closes; gRPC buffers a few MB of Errors for a bot that does not read
        # before writes block, and the writer keeps up with the flood until then (about 30k messages).
        sent = await flood_stale_answers(raw, turn, 200_000, session)
        assert sent < 200_000, "the session was never closed"
        record = await stored(live_server, turn.match_id, within=15)
        per_round = await honest
    elapsed = time.perf_counter() - started
    assert record.termination == Termination.DISCONNECT and record.offender == 0
    assert "does not read its stream" in record.reason
    assert f"(the limit is {remote.MAX_OUTBOX})" in record.reason
    assert "deaf" not in live_server.hub.sessions
    print(f"\nstopped-reading bot disconnected after {elapsed:.2f}s: {record.reason}")
    print(f"honest match meanwhile: {per_round * 1000:.2f} ms per round; worst loop stall {meter.worst * 1000:.0f} ms")
    assert meter.worst < 0.5
    assert await serving(live_server)
    raw.call.cancel()


@pytest.mark.slow
async def test_a_write_that_never_completes_hits_the_deadline(
    live_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote, "MAX_OUTBOX", 1_000_000)  # only the write deadline can stop it now
    monkeypatch.setattr(remote, "WRITE_TIMEOUT", 1.0)
    raw, turn = await start_then_stop_reading(live_server, "deaf-2")
    session = live_server.hub.sessions["deaf-2"]
    honest = asyncio.ensure_future(honest_match(live_server, "honest-2", rounds=100))
    started = time.perf_counter()
    # gRPC buffers several MB for a client that does not read; then writes block for good.
    sent = await flood_stale_answers(raw, turn, 400_000, session)
    assert sent < 400_000, "the session was never closed"
    record = await stored(live_server, turn.match_id, within=5)  # the match ends as soon as the session closes
    elapsed = time.perf_counter() - started
    print(f"\nwrite deadline: {sent} stale answers sent; disconnected after {elapsed:.2f}s: {record.reason}")
    assert record.termination == Termination.DISCONNECT
    assert "does not read its stream" in record.reason and "could not be written within 1s" in record.reason
    await honest
    assert await serving(live_server)
    raw.call.cancel()


# -- 3. A spectator that stops reading --------------------------------------------------------------


async def long_match_growth(live: LiveServer, stub: mp_grpc.MatchServiceStub, rounds: int) -> tuple[str, float]:
    """Start a fast hosted match of ``rounds`` rounds; its id and the RSS growth (MiB) until it ends."""
    create = mp.CreateMatchRequest(game="rps", bots=["random", "rotate"])
    create.params["rounds"].int_value = rounds
    create.time_control.CopyFrom(time_control_to_proto(LONG_CLOCK))
    before = peak = rss_mib()
    created = await stub.CreateMatch(create)
    started = time.perf_counter()
    while created.match_id in live.hub.running and time.perf_counter() - started < 120:
        peak = max(peak, rss_mib())
        await asyncio.sleep(0.05)
    return created.match_id, peak - before


@pytest.mark.slow
async def test_a_spectator_that_stops_reading_is_dropped_not_buffered(
    live_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(matches_api, "WRITE_TIMEOUT", 2.0)
    monkeypatch.setattr(authority, "MAX_ROUNDS", 1_000_000)  # above the cap for remote requests, to grow RSS
    rounds = 1_000_000
    async with live_server.channel() as channel:
        stub = mp_grpc.MatchServiceStub(channel)
        # The match itself holds its history (about 160 MiB for a million rounds): measure it alone first.
        _, alone = await long_match_growth(live_server, stub, rounds)
        watch = stub.WatchMatch(mp.WatchMatchRequest(game="rps"))  # subscribes, then never reads
        await asyncio.sleep(0.2)
        match_id, watched = await long_match_growth(live_server, stub, rounds)
        events = 0
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            async for _event in watch:  # now read: what was in flight, then the end
                events += 1
        assert failure.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "too slow, dropped" in (failure.value.details() or "")
        record = await live_server.store.get_match(match_id, with_moves=False)
        assert record is not None and record.termination == Termination.NORMAL
        print(
            f"\nnon-reading spectator of a {rounds:,}-round match: RSS growth {watched:.1f} MiB "
            f"(the same match unwatched: {alone:.1f} MiB); it then read {events} events and got: "
            f"{failure.value.details()}"
        )
        assert watched - alone < 50
    assert await serving(live_server)


async def test_a_spectator_too_far_behind_is_dropped_by_the_hub(
    live_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub_module, "MAX_SPECTATOR_BACKLOG", 5_000)
    hub = live_server.hub
    running = await hub.start_match(load_game("rps", rounds=20_000), ["random", "rotate"], LONG_CLOCK)
    events = hub.watch(running.record.match_id)
    kind, _ = await events.__anext__()
    assert kind == "started"
    assert running.task is not None
    await asyncio.wait_for(running.task, 60)  # the spectator takes nothing while the match runs
    kind, reason = await events.__anext__()
    assert kind == "dropped" and "too slow, dropped: this spectator fell 5000 moves behind" in reason
    with pytest.raises(StopAsyncIteration):
        await events.__anext__()
    assert running.control.listeners == []


async def test_a_spectator_that_keeps_up_sees_every_move_of_a_fast_match(live_server: LiveServer) -> None:
    async with live_server.channel() as channel:
        stub = mp_grpc.MatchServiceStub(channel)
        watch = stub.WatchMatch(mp.WatchMatchRequest(game="rps"))
        await asyncio.sleep(0.1)
        create = mp.CreateMatchRequest(game="rps", bots=["random", "rotate"])
        create.params["rounds"].int_value = 20_000
        await stub.CreateMatch(create)
        moves = 0
        ended = None
        async for event in watch:
            if event.HasField("update"):
                moves += len(event.update.moves)
            elif event.HasField("ended"):
                ended = event.ended
        assert ended is not None and ended.move_count == 40_000 and moves == 40_000
        assert (
            len(ended.moves) == matches_api.MAX_MOVES_PER_PAGE
            and ended.next_move_offset == matches_api.MAX_MOVES_PER_PAGE
        )


# -- 4. GetMatch on a match of a million rounds -----------------------------------------------------


async def store_huge_match(live: LiveServer, rounds: int) -> str:
    """A finished rps match of ``rounds`` rounds written straight to the store."""
    game = load_game("rps", rounds=rounds)
    n = 2 * rounds
    log = MoveLog()
    log.players = array("b", [0, 1]) * rounds
    log.actions = array("i", [0, 1, 2, 1, 0, 2]) * (n // 6) + array("i", [0] * (n % 6))
    log.elapsed_us = array("I", [1500]) * n
    log.legal = array("B", [1]) * n
    record = MatchRecord(
        match_id="",
        game=game,
        seats=(SeatInfo(0, "random", 1, "hosted"), SeatInfo(1, "rotate", 1, "hosted")),
        time_control=TimeControl(),
        seed="huge",
        seed_sha256=seed_hash("huge"),
        started_at=datetime.now(UTC),
    )
    match_id = await live.store.start_match(record)
    record.match_id = match_id
    record.moves = log
    record.termination = Termination.NORMAL
    record.returns = (0.0, 0.0)
    record.ended_at = datetime.now(UTC)
    await live.store.finish_match(record)
    return match_id


async def test_get_match_of_a_million_rounds_is_paged_and_does_not_stall_the_loop(live_server: LiveServer) -> None:
    match_id = await store_huge_match(live_server, 1_000_000)
    async with live_server.channel() as channel:
        stub = mp_grpc.MatchServiceStub(channel)
        listed = await stub.ListMatches(mp.ListMatchesRequest(game="rps"))
        assert [m.move_count for m in listed.matches if m.match_id == match_id] == [2_000_000]
        async with StallMeter().running() as quiet:  # what this (shared, loaded) machine gives without GetMatch
            alone = await honest_match(live_server, "honest-0", rounds=300)
        async with StallMeter().running() as meter:
            honest = asyncio.ensure_future(honest_match(live_server, "honest-3", rounds=300))
            started = time.perf_counter()
            first = await stub.GetMatch(mp.GetMatchRequest(match_id=match_id))
            pages = 1
            offset = first.next_move_offset
            last = first
            while offset and pages < 20:
                last = await stub.GetMatch(mp.GetMatchRequest(match_id=match_id, move_offset=offset))
                offset = last.next_move_offset
                pages += 1
            tail = await stub.GetMatch(mp.GetMatchRequest(match_id=match_id, move_offset=1_999_990, move_limit=50))
            paging = time.perf_counter() - started
            per_round = await honest
        assert first.move_count == 2_000_000 and len(first.moves) == matches_api.MAX_MOVES_PER_PAGE
        assert first.next_move_offset == matches_api.MAX_MOVES_PER_PAGE and first.seed == "huge"
        assert [m.ply for m in last.moves[:1]] == [(pages - 1) * matches_api.MAX_MOVES_PER_PAGE]
        assert [m.ply for m in tail.moves] == list(range(1_999_990, 2_000_000)) and tail.next_move_offset == 0
        assert tail.moves[-1].label and tail.moves[-1].elapsed.ToTimedelta() == timedelta(microseconds=1500)
        size = first.ByteSize()
        print(
            f"\nGetMatch on a 1,000,000-round match: {pages + 1} pages in {paging:.2f}s, "
            f"a page is {size / 1e6:.2f} MB; "
            f"worst loop stall {meter.worst * 1000:.0f} ms; honest match meanwhile {per_round * 1000:.2f} ms per round "
            f"(without GetMatch: worst stall {quiet.worst * 1000:.0f} ms, {alone * 1000:.2f} ms per round)"
        )
        assert size < 2_000_000
        # Unpaged, this GetMatch blocked the loop for 11-14 s; allow 200 ms over the machine's own hiccups.
        assert meter.worst < 0.2 + quiet.worst
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await stub.GetMatch(mp.GetMatchRequest(match_id=match_id, move_offset=-1))
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_create_match_with_wait_answers_one_page_of_a_long_match(live_server: LiveServer) -> None:
    # Unpaged, the reply to CreateMatch(wait) carried every move: past about 100,000 moves it was over
    # gRPC's 4 MB message limit, and a match of up to 10 million rounds may be asked for.
    rounds = matches_api.MAX_MOVES_PER_PAGE // 2 + 1_000
    async with live_server.channel() as channel:
        stub = mp_grpc.MatchServiceStub(channel)
        create = mp.CreateMatchRequest(game="rps", bots=["random", "rotate"], wait=True)
        create.params["rounds"].int_value = rounds
        reply = await stub.CreateMatch(create)
        record = reply.record
        assert record.status == mp.MATCH_STATUS_FINISHED and record.move_count == 2 * rounds
        assert len(record.moves) == matches_api.MAX_MOVES_PER_PAGE
        assert record.next_move_offset == matches_api.MAX_MOVES_PER_PAGE
        assert record == await stub.GetMatch(mp.GetMatchRequest(match_id=reply.match_id))  # GetMatch's first page
        rest = await stub.GetMatch(mp.GetMatchRequest(match_id=reply.match_id, move_offset=record.next_move_offset))
        assert [m.ply for m in (*record.moves, *rest.moves)] == list(range(2 * rounds)) and rest.next_move_offset == 0


# -- 5. Pong flood ----------------------------------------------------------------------------------


async def test_a_pong_flood_is_cut_off_and_does_not_delay_other_matches(live_server: LiveServer) -> None:
    baseline = await honest_match(live_server, "honest-4", rounds=200)
    raw = RawBot(live_server.channel())
    await raw.hello("flooder")
    session = live_server.hub.sessions["flooder"]
    honest = asyncio.ensure_future(honest_match(live_server, "honest-5", rounds=200))
    sent = 0
    started = time.perf_counter()
    async with StallMeter().running() as meter:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            while sent < 100_000 and time.perf_counter() - started < 10 and not session.closed.is_set():
                await raw.send(bs.BotMessage(pong=bs.Pong(nonce=sent + 1000)))
                sent += 1
        await asyncio.wait_for(session.closed.wait(), 5)
        cut = time.perf_counter() - started
        per_round = await honest
    assert "sent pongs faster than 1 per second without being pinged" in session.close_reason
    assert "flooder" not in live_server.hub.sessions
    print(
        f"\npong flood: {sent} pongs sent, cut off ({session.close_reason}) after {cut:.2f}s; "
        f"honest match {per_round * 1000:.2f} ms per round "
        f"(alone: {baseline * 1000:.2f} ms); worst loop stall {meter.worst * 1000:.0f} ms"
    )
    assert cut < 5
    assert meter.worst < 0.5
    assert await serving(live_server)


# -- 6. Stdio lines that used to crash the decoder --------------------------------------------------

BAD_LINES = {
    "lone surrogate": (b'{"action":{"turnId":1,"action":"\\ud800"}}', "lone UTF-16 surrogate"),
    "surrogate match id": (b'{"action":{"matchId":"\\udfff","turnId":1,"action":0}}', "lone UTF-16 surrogate"),
    "invalid UTF-8": (b'{"action":{"matchId":"\xff\xfe","turnId":1,"action":0}}', "not UTF-8"),
    "deep nesting": (b"[" * 10_000 + b"]" * 10_000, "nests arrays or objects too deeply"),
}

BAD_BOT = """
import sys
sys.stdout.write('{"hello":{"protocolVersion":"arena.v1","games":["rps"]}}\\n')
sys.stdout.flush()
bad = bytes.fromhex(sys.argv[1])
for line in sys.stdin:
    if '"turn"' in line:
        sys.stdout.buffer.write(bad + b"\\n")
        sys.stdout.flush()
"""


def bad_program(line: bytes) -> BotProgram:
    """A real subprocess bot that says Hello, then answers its first Turn with ``line``."""
    return BotProgram(["python3", "-c", BAD_BOT, line.hex()], Framing.JSON, startup_timeout=20.0)


@pytest.mark.parametrize("case", sorted(BAD_LINES))
async def test_bad_stdio_lines_are_protocol_errors_quoting_the_line(case: str) -> None:
    line, phrase = BAD_LINES[case]
    program = bad_program(line)
    seats = [
        SubprocessSeat(program, SeatInfo(0, "bad", 1, "subprocess")),
        InProcessSeat(RandomBot(1), SeatInfo(1, "r")),
    ]
    try:
        record = await play_match(load_game("rps", rounds=5), seats, LONG_CLOCK, seed="bad-lines")
    finally:
        await seats[0].close()  # type: ignore[attr-defined]
    assert record.termination == Termination.PROTOCOL_ERROR, record.reason
    assert phrase in record.reason and "SystemError" not in record.reason
    quoted = line[:20].decode("utf-8", "backslashreplace")
    assert quoted.replace("\\", "\\\\") in record.reason or quoted in record.reason, record.reason
    assert len(record.reason) < 600
    record.reason.encode("utf-8")  # storable and sendable as is


async def test_check_bot_shows_the_bad_line_not_the_hello() -> None:
    program = bad_program(BAD_LINES["lone surrogate"][0])
    report = await check_bot(program, games=["rps"])
    failure = report.first_error()
    assert failure is not None and "lone UTF-16 surrogate" in failure.detail
    assert failure.received.startswith("an unreadable frame: ")
    assert '"action":"\\\\ud800"' in failure.received and "hello" not in failure.received
