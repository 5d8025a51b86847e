"""``arena check-bot`` against a good bot and against one fake per kind of mistake."""

from __future__ import annotations

import argparse

import pytest

from arena_server.cli import check_bot
from tests.conftest import in_thread
from tests.server._stdio_helpers import FAKES, PLAIN_PYTHON_BOT, PYTHON


def run_check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="arena")
    check_bot.register(parser.add_subparsers())
    args = parser.parse_args(["check-bot", *argv])
    code = in_thread(args.func, args)
    return code, capsys.readouterr().out


def test_a_good_bot_passes_every_game_in_every_seat(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_check(capsys, "--cmd", f"{PYTHON} {PLAIN_PYTHON_BOT}", "-g", "rps", "-g", "tic_tac_toe")
    assert code == 0, out
    for line in (
        "ok   start-up: Hello received",
        "ok   rps as seat 0",
        "ok   rps as seat 1",
        "ok   tic_tac_toe as seat 1",
    ):
        assert line in out
    assert "PASSED" in out


def test_wrong_framing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_check(capsys, "--cmd", f"{PYTHON} {PLAIN_PYTHON_BOT}", "--framing", "proto", "-g", "rps")
    assert code == 1
    assert "FAIL start-up" in out
    assert "It looks like JSON" in out
    assert "this bot speaks json framing (use --framing json)" in out


def test_no_hello(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_check(capsys, "--cmd", f"{PYTHON} {FAKES / 'no_hello.py'}", "-g", "rps")
    assert code == 1
    assert "sent action as its first message; the first message must be a Hello" in out
    assert 'last message it sent: {"action":{"matchId":"x","turnId":1,"action":0}}' in out
    assert "expected: a Hello first" in out


def test_answering_out_of_turn(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_check(capsys, "--cmd", f"{PYTHON} {FAKES / 'out_of_turn.py'}", "-g", "rps")
    assert code == 1
    assert "FAIL rps as seat 0: protocol error: seat 0 (bot-under-check) answered turn 6" in out
    assert 'last message it got: {"turn":{"matchId":"check-rps-0","turnId":1' in out
    assert '"turnId":6' in out
    assert 'expected: {"action":{"matchId":"check-rps-0","turnId":1,"action":A}} with A one of 0..2' in out


def test_illegal_action(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_check(capsys, "--cmd", f"{PYTHON} {FAKES / 'illegal.py'}", "-g", "tic_tac_toe")
    assert code == 1
    assert "illegal action: seat 0 (bot-under-check): answered 99, which is not a legal action (legal: 0..8)" in out
    assert '"action":99' in out


def test_too_slow(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_check(capsys, "--cmd", f"{PYTHON} {FAKES / 'slow.py'} 3", "-g", "rps", "--per-move", "0.2")
    assert code == 1
    assert "timeout: seat 0 (bot-under-check) sent no Action for turn 1 within 0.7s" in out
    assert "with A one of 0..2, within the time budget" in out
