"""No server at the address: the SDK and every ``--server`` command say "cannot reach HOST:PORT" and stop.

Two kinds of dead address, both real sockets: a closed port (bound, noted,
closed: the connection is refused) and a silent one (a listening socket that
never speaks HTTP/2: the connection hangs until a timeout).
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from arena_client.remote import ServerUnreachable, run
from tests.conftest import in_thread
from tests.fakes.bots import Paper
from tests.soak_support import ScriptProcess, closed_port, write_sdk_bot


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield int(s.getsockname()[1])


def test_sdk_gives_up_after_give_up_after_seconds(caplog: pytest.LogCaptureFixture) -> None:
    port = closed_port()
    caplog.set_level(logging.WARNING, logger="arena_client")
    began = time.monotonic()
    with pytest.raises(ServerUnreachable) as raised:
        in_thread(lambda: run(Paper(), f"127.0.0.1:{port}", opponent="rock", give_up_after=1.5, max_backoff=0.3))
    elapsed = time.monotonic() - began
    assert str(raised.value) == f"cannot reach 127.0.0.1:{port} for 1.5 s; giving up (connection refused)"
    assert 1.5 <= elapsed < 4, elapsed
    # One warning when the outage starts (the later attempts are INFO), no traceback anywhere.
    [warning] = [r for r in caplog.records if r.name == "arena_client"]
    assert warning.getMessage().startswith(f"arena_client: cannot reach 127.0.0.1:{port} (connection refused)")
    assert "giving up after 1.5 s" in warning.getMessage()
    assert warning.exc_info is None


def test_sdk_gives_up_on_a_silent_server(silent_port: int) -> None:
    """A server that accepts the connection but never welcomes the bot: bounded by give_up_after too."""
    began = time.monotonic()
    with pytest.raises(ServerUnreachable, match=rf"cannot reach 127.0.0.1:{silent_port} for 2 s; giving up"):
        in_thread(lambda: run(Paper(), f"127.0.0.1:{silent_port}", give_up_after=2))
    assert time.monotonic() - began < 5


def test_sdk_without_reconnect_says_cannot_reach_at_once() -> None:
    port = closed_port()
    began = time.monotonic()
    with pytest.raises(ServerUnreachable, match=rf"^cannot reach 127.0.0.1:{port} \(connection refused\); is an"):
        in_thread(lambda: run(Paper(), f"127.0.0.1:{port}", opponent="rock", reconnect=False))
    assert time.monotonic() - began < 3


def test_sdk_script_gives_up_with_one_clear_message(tmp_path: Path) -> None:
    """A bot script as the README shows it: the outage warning, the give-up line, no traceback, exit 1."""
    port = closed_port()
    script = tmp_path / "mybot.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys
        from arena_client import Bot, run
        from arena_client.remote import ArenaError

        class Rock(Bot):
            def act(self, turn):
                return 0

        try:
            run(Rock(), "127.0.0.1:{port}", opponent="random", give_up_after=1, max_backoff=0.2)
        except ArenaError as exc:
            sys.exit(f"mybot: {{exc}}")
        """)
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert "Traceback" not in out.stderr
    assert len(lines) == 2, out.stderr
    assert lines[0].startswith(f"arena_client: cannot reach 127.0.0.1:{port} (connection refused); retrying in")
    assert lines[1] == f"mybot: cannot reach 127.0.0.1:{port} for 1 s; giving up (connection refused)"


COMMANDS = {
    "play": ["play", "rps", "--vs", "random"],
    "watch": ["watch", "--game", "rps"],
    "match": ["match", "random", "rock"],
}


def arena(*argv: str) -> tuple[subprocess.CompletedProcess[str], float]:
    began = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "arena_server.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    return out, time.monotonic() - began


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_server_commands_on_a_closed_port(command: str) -> None:
    port = closed_port()
    out, _ = arena(*COMMANDS[command], "--server", f"127.0.0.1:{port}", "--connect-timeout", "5")
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.splitlines() == [
        f"arena: cannot reach 127.0.0.1:{port} (connection refused); is an Arena server running there? "
        "Start one with `arena serve`"
    ] or out.stderr.splitlines() == [
        f"arena: cannot reach 127.0.0.1:{port} (connection failed); is an Arena server running there? "
        "Start one with `arena serve`"
    ], out.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_server_commands_on_a_silent_port_stop_after_the_timeout(command: str, silent_port: int) -> None:
    out, elapsed = arena(*COMMANDS[command], "--server", f"127.0.0.1:{silent_port}", "--connect-timeout", "1")
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"arena: cannot reach 127.0.0.1:{silent_port} (no answer within 1 s); is an Arena server running there? "
        "Start one with `arena serve`"
    ], out.stderr
    assert elapsed < 1 + 8  # the timeout plus the interpreter's start-up on a busy machine


def test_check_bot_listen_says_what_to_do_when_no_bot_connects() -> None:
    port = closed_port()
    out, elapsed = arena("check-bot", "--listen", f"127.0.0.1:{port}", "--wait", "1")
    assert out.returncode == 1
    assert (
        f"FAIL start-up: no bot connected to 127.0.0.1:{port} within 1s; start your bot with 127.0.0.1:{port} as "
        f'its server address (SDK: run(bot, "127.0.0.1:{port}")) while check-bot waits, or wait longer with '
        "--wait SECONDS"
    ) in out.stdout, out.stdout
    assert "Traceback" not in out.stderr
    assert elapsed < 1 + 8


def test_check_bot_listen_on_a_busy_port_is_one_line(silent_port: int) -> None:
    out, _ = arena("check-bot", "--listen", f"127.0.0.1:{silent_port}", "--wait", "1")
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"arena: cannot listen on 127.0.0.1:{silent_port} (Address already in use); pick another port for --listen "
        "(0 picks a free one)"
    ]


def test_an_sdk_bot_stops_when_check_bot_is_done(tmp_path: Path) -> None:
    """An SDK bot (default reconnect) checked by check-bot --listen is told the check is over and stops."""
    port = closed_port()
    check = ScriptProcess(None, ["check-bot", "--listen", f"127.0.0.1:{port}", "--game", "rps", "--wait", "30"])
    with check:
        assert check.out.wait(lambda lines: any("point your bot at" in line for line in lines), 30), check.err.text()
        bot = ScriptProcess(write_sdk_bot(tmp_path / "bot.py", f"127.0.0.1:{port}", name="checked"))
        with bot:
            assert check.wait(60) == 0, check.out.text() + check.err.text()
            assert bot.wait(10) == 1, bot.err.text()
    [error] = bot.events("error")
    assert error["message"] == "arena check-bot has finished its check and is stopping; see its report"
    assert "Traceback" not in bot.err.text()
    assert "PASSED" in check.out.text()
