"""Ctrl-C for real: SIGINT to an SDK bot process (or ``arena play``) ends it at once and quietly.

Each case starts a real process against a real ``arena serve`` (or a closed
port), waits until it is in the state under test, sends SIGINT, and asserts
the exit within a few seconds with status 130 and no traceback on stderr.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.soak_support import ScriptProcess, ServerProcess, closed_port, write_sdk_bot

EXIT_WITHIN = 5.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("interrupt") / "arena.db") as server:
        server.start()
        yield server
        server.stop()


def interrupt_quietly(process: ScriptProcess, interrupted: str = "arena_client: interrupted") -> float:
    """SIGINT; assert a quiet exit with status 130; return how long the exit took."""
    began = time.monotonic()
    process.interrupt()
    code = process.wait(EXIT_WITHIN + 5)
    took = time.monotonic() - began
    stderr = process.err.text()
    assert code == 130, (code, stderr)
    assert took < EXIT_WITHIN, took
    assert "Traceback" not in stderr, stderr
    assert "CancelledError" not in stderr and "AioRpcError" not in stderr, stderr
    assert stderr.splitlines()[-1] == interrupted, stderr
    return took


def test_ctrl_c_while_connected_and_waiting_to_be_seated(server: ServerProcess, tmp_path: Path) -> None:
    with ScriptProcess(write_sdk_bot(tmp_path / "bot.py", server.address, name="waiting")) as bot:
        assert bot.wait_events("connected", 1, 30), bot.err.text()
        interrupt_quietly(bot)


def test_ctrl_c_while_waiting_to_reconnect(tmp_path: Path) -> None:
    address = f"127.0.0.1:{closed_port()}"
    with ScriptProcess(write_sdk_bot(tmp_path / "bot.py", address, name="patient", give_up_after=None)) as bot:
        assert bot.wait_events("retry", 2, 30), bot.err.text()
        interrupt_quietly(bot)


def test_ctrl_c_inside_a_long_act(server: ServerProcess, tmp_path: Path) -> None:
    """act sleeps for a minute in its worker thread: the program still ends at once."""
    script = write_sdk_bot(tmp_path / "bot.py", server.address, name="thinker", opponent="random", act_sleep=60)
    with ScriptProcess(script) as bot:
        assert bot.wait_events("started", 1, 30), bot.err.text()
        time.sleep(0.3)  # inside act now
        interrupt_quietly(bot)


def test_ctrl_c_at_the_arena_play_prompt(server: ServerProcess) -> None:
    """A person at ``arena play`` presses Ctrl-C while the prompt waits for a move."""
    args = ["play", "rps", "--vs", "random", "--server", server.address]
    with ScriptProcess(None, args, stdin=subprocess.PIPE) as play:
        assert play.out.wait(lambda lines: any("type help for the legal moves" in line for line in lines), 30), (
            play.err.text()
        )
        time.sleep(0.3)  # reading the keyboard now
        interrupt_quietly(play, "arena: interrupted")
