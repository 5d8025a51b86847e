"""A server that stops on purpose ends every bot's stream itself, and says so.

After the hub has aborted every match (each bot reads its MatchEnded first), the
server ends each open BotSession stream with the status ``UNAVAILABLE`` and the
details "the server is shutting down; reconnect when it is back", instead of
leaving the streams to gRPC's own stop, which cancelled them with "Cancelling
all calls" after waiting out its grace. Checked as a client in another language
sees it (raw gRPC streams: the status code and details), and as the Python SDK
reports it (one line saying the server is shutting down, then its usual
reconnection), with real ``arena serve`` processes stopped by real signals.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from pathlib import Path

import grpc
import pytest

import arena_bots
from arena_client import Termination
from arena_client.remote import SERVER_STOPPING, ArenaError, Client
from arena_server.api.authority import MAX_ROUNDS
from arena_server.api.server import running_server
from arena_server.matches.hub import Hub
from arena_server.store.database import Store
from tests.conftest import LiveServer
from tests.fakes.bots import Paper
from tests.fakes.grpc_bots import RawBot
from tests.soak_support import ScriptProcess, ServerProcess, write_sdk_bot

CANCELLED_BY_GRPC = "Cancelling all calls"
"""What gRPC's own stop says to a stream it cancels: a bot must no longer see it when the server stops."""

STOP_LIMIT = 0.9
"""Seconds ``arena serve`` may take to stop with an idle bot connected (it took 1.07 s when it waited out
the 1 s grace of gRPC's stop on the open stream; about 0.07 s once it ends the stream itself)."""


async def read_to_the_end(raw: RawBot) -> tuple[list[str], grpc.StatusCode | None, str]:
    """Read (answering every Turn) until the stream ends: the kinds read, the status code and its details."""
    kinds: list[str] = []
    while True:
        try:
            msg = await asyncio.wait_for(raw.call.read(), 30)
        except grpc.aio.AioRpcError as exc:
            return kinds, exc.code(), exc.details() or ""
        if msg is grpc.aio.EOF:
            return kinds, grpc.StatusCode.OK, ""
        kind = msg.WhichOneof("kind")
        kinds.append(kind if kind != "match_ended" else f"match_ended {Termination(msg.match_ended.termination).name}")
        if kind == "turn":
            await raw.answer(msg.turn, 0)


async def test_every_bot_stream_ends_with_the_shutdown_status_after_its_last_message(tmp_path: Path) -> None:
    """An idle bot, a bot mid-match and a stream still without its Hello: each sees UNAVAILABLE and why.

    The bot that was playing reads its MatchEnded (aborted) before the end of its stream; none of them sees
    gRPC's "Cancelling all calls", and the stop does not wait out gRPC's grace on their streams.
    """
    store = await Store.open(tmp_path / "arena.db")
    hub = Hub(store, arena_bots.hosted_bots())
    try:
        async with running_server(hub, port=0, grace=5.0) as (_server, port):
            channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
            idle, playing, silent = RawBot(channel), RawBot(channel), RawBot(channel)
            assert (await idle.hello("idle")).WhichOneof("kind") == "welcome"
            assert (await playing.hello("playing")).WhichOneof("kind") == "welcome"
            await playing.challenge("rock", rounds=MAX_ROUNDS)
            await playing.recv_kind("match_started")  # (its Turns are answered by read_to_the_end)
            deadline = time.monotonic() + 10
            while len(hub.streams) < 3:  # the silent stream is open on the server, waiting for its Hello
                assert time.monotonic() < deadline, len(hub.streams)
                await asyncio.sleep(0.01)
            readers = [asyncio.ensure_future(read_to_the_end(raw)) for raw in (idle, playing)]
            began = time.monotonic()
        stopped_in = time.monotonic() - began
        outcomes = await asyncio.gather(*readers)
        try:
            silent_end = await asyncio.wait_for(silent.call.read(), 10)
        except grpc.aio.AioRpcError as exc:
            silent_end = (exc.code(), exc.details())
        await channel.close()
    finally:
        await store.close()
    stopping = (grpc.StatusCode.UNAVAILABLE, SERVER_STOPPING)
    idle_kinds, *idle_end = outcomes[0]
    playing_kinds, *playing_end = outcomes[1]
    assert tuple(idle_end) == stopping, idle_end
    assert tuple(playing_end) == stopping, playing_end
    # Its last messages: the aborted match's end, then the challenge's final status (DONE), and the "dropped"
    # reply to its answer if it owed one when the match was aborted (the shutdown waited for that answer).
    assert "match_ended ABORTED" in playing_kinds, playing_kinds
    after = playing_kinds[playing_kinds.index("match_ended ABORTED") + 1 :]
    assert sorted(after) in (["challenge_status"], ["challenge_status", "error"]), playing_kinds
    assert "match_ended ABORTED" not in idle_kinds
    assert silent_end == stopping
    assert stopped_in < 5.0, f"the stop took {stopped_in:.2f} s: it waited out the grace on the streams"


async def test_the_sdk_says_the_server_is_shutting_down_and_stops_without_reconnect(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With ``reconnect=False`` the SDK stops with an ArenaError saying the server is shutting down;
    with reconnection, it logs that once (a warning) and goes on trying."""
    caplog.set_level(logging.INFO, logger="arena_client")
    store = await Store.open(tmp_path / "arena.db")
    hub = Hub(store, arena_bots.hosted_bots())
    try:
        async with running_server(hub, port=0) as (_server, port):
            address = f"127.0.0.1:{port}"
            once = Client(Paper(), address, name="once")
            stays = Client(Paper(), address, name="stays")
            once_task = asyncio.ensure_future(once.play(reconnect=False))
            stays_task = asyncio.ensure_future(stays.play(give_up_after=30))
            deadline = time.monotonic() + 20
            while once.connections < 1 or stays.connections < 1:
                assert time.monotonic() < deadline, caplog.text
                await asyncio.sleep(0.02)
        with pytest.raises(ArenaError) as raised:
            await asyncio.wait_for(once_task, 10)
        deadline = time.monotonic() + 10
        while "reconnecting in" not in caplog.text:
            assert time.monotonic() < deadline, caplog.text
            await asyncio.sleep(0.02)
        stays_task.cancel()
        await asyncio.gather(stays_task, return_exceptions=True)
    finally:
        await store.close()
    assert str(raised.value) == f"the server at {address} is shutting down"
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if "shutting down" in r.getMessage()]
    assert [level for level, _ in lines] == [logging.WARNING], lines
    assert lines[0][1].startswith(f"arena_client: the server at {address} is shutting down; reconnecting in ")
    assert CANCELLED_BY_GRPC not in caplog.text
    assert "lost the connection" not in caplog.text


async def test_a_stream_opened_after_the_streams_were_ended_ends_at_once_the_same_way(live_server: LiveServer) -> None:
    """Between the end of the bots' streams and the end of gRPC's stop, a bot that reconnects is not welcomed
    by a server that is going away: its stream ends at once with the shutdown's status."""
    hub = live_server.hub
    await hub.shutdown("the test stops the server", grace=2.0)
    await hub.end_streams()
    async with live_server.channel() as channel:
        late = RawBot(channel)
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await late.hello("late")
    assert (ended.value.code(), ended.value.details()) == (grpc.StatusCode.UNAVAILABLE, SERVER_STOPPING)
    assert not hub.streams and "late" not in hub.sessions


def sdk_log(bot: ScriptProcess) -> list[str]:
    """The SDK's own log lines (its messages on stderr)."""
    return [line for line in bot.err.text().splitlines() if line.startswith("arena_client:")]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_idle_sdk_bot_hears_that_arena_serve_stops_and_is_back_after_the_restart(tmp_path: Path, sig: int) -> None:
    """`arena serve` stops with a waiting SDK bot connected: the bot logs that the server is shutting down
    (not a broken connection), the stop does not wait out any grace, and the bot reconnects after the restart."""
    with ServerProcess(tmp_path / "arena.db") as server:
        server.start()
        with ScriptProcess(write_sdk_bot(tmp_path / "bot.py", server.address, name="waiter", give_up_after=60)) as bot:
            assert bot.wait_events("connected", 1, 30), bot.err.text()
            time.sleep(0.2)
            signalled = time.monotonic()
            assert server.stop(sig) == 0, "\n".join(server.log)
            stopped_in = time.monotonic() - signalled
            said = bot.err.wait(lambda lines: any("reconnecting in" in line for line in lines), 10)
            server.start()
            back = bot.wait_events("connected", 2, 30)
            bot.interrupt()
            code = bot.wait(10)
            log = sdk_log(bot)
    print(f"\n{signal.Signals(sig).name}: arena serve stopped {stopped_in:.3f} s after the signal; the bot logged:")
    print("\n".join(log))
    assert said, log
    assert back, log
    assert code == 130, bot.err.text()
    stop_lines = [line for line in log if "shutting down" in line]
    assert len(stop_lines) == 1, log
    assert stop_lines[0].startswith(f"arena_client: the server at {server.address} is shutting down; reconnecting in ")
    assert not any(CANCELLED_BY_GRPC in line or "lost the connection" in line for line in log), log
    assert stopped_in < STOP_LIMIT, f"arena serve took {stopped_in:.2f} s to stop: it waited on the bot's stream"


def test_a_playing_sdk_bot_reads_its_aborted_match_before_it_hears_that_the_server_stops(tmp_path: Path) -> None:
    """SIGTERM while an SDK challenger thinks: it hears its match was aborted, and only then that the server
    is shutting down; never a broken connection."""
    with ServerProcess(tmp_path / "arena.db") as server:
        server.start()
        script = write_sdk_bot(
            tmp_path / "bot.py",
            server.address,
            name="thinker",
            opponent="random",
            params={"rounds": MAX_ROUNDS},
            act_sleep=0.2,
            give_up_after=60,
        )
        with ScriptProcess(script) as bot:
            assert bot.wait_events("started", 1, 30), bot.err.text()
            time.sleep(0.5)  # a few turns in: act is thinking (0.2 s a turn) when the signal comes
            assert server.stop(signal.SIGTERM) == 0, "\n".join(server.log)
            said = bot.err.wait(lambda lines: any("reconnecting in" in line for line in lines), 15)
            bot.interrupt()
            bot.wait(10)
            log = sdk_log(bot)
            events = [json.loads(line) for line in bot.out.text().splitlines() if line.startswith("{")]
    assert said, log
    assert [e["termination"] for e in events if e["event"] == "ended"] == [Termination.ABORTED.name], events
    aborted = next(i for i, line in enumerate(log) if "was aborted (the server is shutting down)" in line)
    stopping = next(i for i, line in enumerate(log) if "is shutting down; reconnecting in" in line)
    assert aborted < stopping, log
    assert not any(CANCELLED_BY_GRPC in line or "lost the connection" in line for line in log), log


def test_stopping_status_is_what_the_protocol_promises() -> None:
    """The details the SDK looks for are the server's own words, and the proto says what a bot sees."""
    from arena_server.api.bot_session import STOPPING_STATUS

    proto = (Path(__file__).parents[2] / "proto" / "arena" / "v1" / "bot_session.proto").read_text()
    assert STOPPING_STATUS == grpc.StatusCode.UNAVAILABLE
    assert SERVER_STOPPING in " ".join(proto.replace("//", " ").split())
