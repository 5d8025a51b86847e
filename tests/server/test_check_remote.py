"""``arena check-bot --listen``: a real temporary server on port 0 and real remote bots dialing it."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import grpc

from arena.v1 import bot_session_pb2 as bs
from arena_bots.simple import RandomBot
from arena_client import TimeControl
from arena_client.remote import ArenaError, Client
from arena_client.remote import run as run_remote
from arena_server.api.remote_check import check_remote_bot
from arena_server.bots.conformance import CheckReport, format_report
from tests.fakes.grpc_bots import RawBot

CLOCK = TimeControl(timedelta(seconds=2), timedelta(0), timedelta(seconds=0.5))


async def check_with(
    bot: Callable[[str], Awaitable[None]], games: tuple[str, ...] = ("rps",), **kwargs: object
) -> tuple[CheckReport, str]:
    """Run the checker on port 0 and let ``bot(address)`` connect to it; return the report and its text."""
    loop = asyncio.get_running_loop()
    listening: asyncio.Future[str] = loop.create_future()
    check = asyncio.ensure_future(
        check_remote_bot(
            "127.0.0.1",
            0,
            games,
            CLOCK,
            wait=20,
            on_listening=listening.set_result,
            **kwargs,  # type: ignore[arg-type]
        )
    )
    address = await asyncio.wait_for(listening, 10)
    player = asyncio.ensure_future(bot(address))
    try:
        report = await asyncio.wait_for(check, 60)
    finally:
        player.cancel()
        with contextlib.suppress(asyncio.CancelledError, ArenaError, grpc.aio.AioRpcError, EOFError):
            await player
    return report, format_report(report)


async def test_a_good_remote_bot_passes() -> None:
    async def sdk_bot(address: str) -> None:
        await Client(RandomBot(3), address, "good-bot", threaded=False).play(reconnect=False)

    report, text = await check_with(sdk_bot, ("rps", "tic_tac_toe"))
    assert report.passed, text
    assert "remote bot 'good-bot' from" in text
    for line in ("ok   start-up: Hello received: name='good-bot'", "ok   rps as seat 1", "ok   tic_tac_toe as seat 1"):
        assert line in text
    assert "PASSED" in text


async def raw_bot(address: str, on_turn: Callable[[RawBot, bs.Turn], Awaitable[None]]) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        bot = RawBot(channel)
        await bot.hello("raw-bot", ("rps", "tic_tac_toe"))
        while True:
            msg = await bot.recv(30)
            if msg.WhichOneof("kind") == "turn":
                await on_turn(bot, msg.turn)


async def test_an_illegal_action_fails_with_the_turn_and_the_answer() -> None:
    async def illegal(bot: RawBot, turn: bs.Turn) -> None:
        await bot.answer(turn, 99)

    report, text = await check_with(lambda a: raw_bot(a, illegal), ("tic_tac_toe",))
    assert not report.passed
    assert (
        "FAIL tic_tac_toe as seat 0: illegal action: seat 0 (raw-bot): answered 99, "
        "which is not a legal action (legal: 0..8)" in text
    ), text
    assert 'last message it got: {"turn":{"matchId":"check-tic_tac_toe-0","turnId":1' in text
    assert 'last message it sent: {"action":{"matchId":"check-tic_tac_toe-0","turnId":1,"action":99}}' in text
    assert 'expected: {"action":{"matchId":"check-tic_tac_toe-0","turnId":1,"action":A}} with A one of 0..8' in text
    assert "FAILED" in text


async def test_answering_out_of_turn_fails_with_the_turn_it_was_given() -> None:
    async def out_of_turn(bot: RawBot, turn: bs.Turn) -> None:
        await bot.send(bs.BotMessage(action=bs.Action(match_id=turn.match_id, turn_id=turn.turn_id + 5, action=0)))

    report, text = await check_with(lambda a: raw_bot(a, out_of_turn))
    assert not report.passed
    assert (
        "FAIL rps as seat 0: protocol error: seat 0 (raw-bot) sent an action for match 'check-rps-0' turn 6, " in text
    )
    assert "a turn it was never given (expected turn 1 of match 'check-rps-0')" in text
    assert 'last message it got: {"turn":{"matchId":"check-rps-0","turnId":1' in text
    assert 'last message it sent: {"action":{"matchId":"check-rps-0","turnId":6,"action":0}}' in text
    assert 'expected: {"action":{"matchId":"check-rps-0","turnId":1,"action":A}} with A one of 0..2' in text


async def test_a_wrong_message_kind_fails() -> None:
    async def second_hello(bot: RawBot, turn: bs.Turn) -> None:
        await bot.send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1")))

    report, text = await check_with(lambda a: raw_bot(a, second_hello))
    assert not report.passed
    assert "FAIL rps as seat 0: protocol error: seat 0 (raw-bot) sent hello after hello" in text, text
    assert 'last message it sent: {"hello":' in text


async def test_too_slow() -> None:
    async def slow(bot: RawBot, turn: bs.Turn) -> None:
        await asyncio.sleep(5)

    report, text = await check_with(lambda a: raw_bot(a, slow))
    assert not report.passed
    assert "FAIL rps as seat 0: timeout: seat 0 (raw-bot) did not answer turn 1 within" in text, text
    assert "within the time budget" in text


async def test_no_hello() -> None:
    async def no_hello(address: str) -> None:
        async with grpc.aio.insecure_channel(address) as channel:
            bot = RawBot(channel)
            await bot.send(bs.BotMessage(action=bs.Action(match_id="x", turn_id=1, action=0)))
            await bot.recv(10)
            await asyncio.sleep(30)

    report, text = await check_with(no_hello)
    assert not report.passed
    assert "FAIL start-up: the first message must be hello, got action" in text, text
    assert 'last message it sent: {"action":{"matchId":"x","turnId":1,"action":0}}' in text
    assert "expected: a Hello first" in text


async def test_silence_after_connecting_times_out() -> None:
    async def silent(address: str) -> None:
        async with grpc.aio.insecure_channel(address) as channel:
            RawBot(channel)  # opens the stream and says nothing
            await asyncio.sleep(30)

    report, text = await check_with(silent, startup_timeout=1.0)
    assert not report.passed
    assert "FAIL start-up: sent no Hello within 1s of connecting; the first message must be a Hello" in text, text


def test_the_cli_prints_where_to_connect_and_passes_a_good_bot() -> None:
    root = Path(__file__).resolve().parents[2]
    cli = subprocess.Popen(
        [sys.executable, "-m", "arena_server.cli", "check-bot", "--listen", "127.0.0.1:0", "--games", "rps"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=root,
    )
    try:
        assert cli.stdout is not None
        first = cli.stdout.readline()
        assert first.startswith("point your bot at 127.0.0.1:"), first + (cli.stderr.read() if cli.stderr else "")
        address = first.split()[4]
        errors: list[BaseException] = []

        def play() -> None:
            try:
                run_remote(RandomBot(1), address, name="cli-bot", reconnect=False, threaded=False)
            except ArenaError:
                pass  # the checker closes the server when it is done
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        thread = threading.Thread(target=play, daemon=True)
        thread.start()
        out, err = cli.communicate(timeout=60)
        thread.join(10)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == 0, first + out + err
    assert "ok   rps as seat 0" in out and "ok   rps as seat 1" in out
    assert "PASSED" in out
    assert not errors
