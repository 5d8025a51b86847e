"""The clients in other languages play real matches (skipped only when a toolchain is missing).

C, shell and plain Python bots run as subprocess seats through ``play_match``;
the JavaScript bot dials a real gRPC server on port 0.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from arena_client import Termination
from arena_games import load_game
from arena_server.seats.framing import Framing
from arena_server.seats.process import BotProgram
from tests.server._stdio_helpers import FAST, TEST_LIMITS, play_against_random

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / "clients"


@pytest.fixture(scope="module")
def c_bot() -> Iterator[Path]:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: the C client cannot be built")
    build = Path(tempfile.mkdtemp(prefix="arena-c-bot-"))
    try:
        os.chmod(build, 0o755)  # the bot may run as an unprivileged user
        binary = build / "arena-c-bot"
        subprocess.run(
            [gcc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(binary), str(CLIENTS / "c" / "bot.c")],
            check=True,
            timeout=120,
        )
        yield binary
    finally:
        shutil.rmtree(build, ignore_errors=True)


async def test_c_bot_plays_rps(c_bot: Path) -> None:
    program = BotProgram([str(c_bot), "5"], Framing.JSON, limits=TEST_LIMITS)
    record, _ = await play_against_random(program, load_game("rps", rounds=100))
    assert record.termination == Termination.NORMAL, record.reason
    assert len(record.moves) == 200


async def test_c_bot_plays_tic_tac_toe_and_never_loses_to_random_when_it_can_win(c_bot: Path) -> None:
    program = BotProgram([str(c_bot)], Framing.JSON, limits=TEST_LIMITS)
    for k in range(3):
        record, _ = await play_against_random(program, load_game("tic_tac_toe"), match_id=f"t{k}")
        assert record.termination == Termination.NORMAL, record.reason
    record, _ = await play_against_random(program, load_game("tic_tac_toe", rows=4, cols=5, k=4))
    assert record.termination == Termination.NORMAL, record.reason


async def test_shell_bot_plays_rps_and_tic_tac_toe() -> None:
    if shutil.which("sh") is None or shutil.which("sed") is None:
        pytest.skip("no POSIX sh and sed here: the shell client cannot run")
    program = BotProgram(["sh", str(CLIENTS / "shell" / "bot.sh")], Framing.JSON, limits=TEST_LIMITS)
    record, _ = await play_against_random(program, load_game("rps", rounds=20))
    assert record.termination == Termination.NORMAL, record.reason
    record, _ = await play_against_random(program, load_game("tic_tac_toe"))
    assert record.termination == Termination.NORMAL, record.reason


@pytest.mark.parametrize("game", ["rps", "tic_tac_toe", "dots_and_boxes", "liars_dice"])
async def test_plain_python_bot_plays(game: str) -> None:
    if shutil.which("python3") is None:
        pytest.skip("no python3 on PATH for the plain Python client")
    program = BotProgram(["python3", str(CLIENTS / "plain_python" / "bot.py"), "2"], Framing.JSON, limits=TEST_LIMITS)
    params = {"rounds": 30} if game == "rps" else {}
    record, _ = await play_against_random(program, load_game(game, **params), FAST)
    assert record.termination == Termination.NORMAL, record.reason


async def javascript_bot(address: str, matches: int) -> asyncio.subprocess.Process:
    """``clients/javascript/bot.js`` challenging the hosted ``random`` to ``matches`` RPS matches."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the JavaScript client cannot run")
    js = CLIENTS / "javascript"
    if not (js / "node_modules" / "@grpc" / "grpc-js").is_dir():
        pytest.skip("run `npm install` in clients/javascript first (needs @grpc/grpc-js and @grpc/proto-loader)")
    return await asyncio.create_subprocess_exec(
        *(node, str(js / "bot.js"), "--address", address, "--opponent", "random", "--game", "rps"),
        *("--matches", str(matches)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finished(proc: asyncio.subprocess.Process) -> str:
    """The program's stderr once it exits (killed after 60 s)."""
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return err.decode()


async def test_javascript_bot_plays_over_grpc(live_server: object) -> None:
    proc = await javascript_bot(live_server.address, 2)  # type: ignore[attr-defined]
    log = await finished(proc)
    assert proc.returncode == 0, log
    assert log.count("ended: TERMINATION_NORMAL") == 2, log


async def test_javascript_bot_challenges_again_after_a_refusal_for_now(live_server: object) -> None:
    """The server cannot record a match for a while (its database is read-only): ``retry_later``."""
    store = live_server.store  # type: ignore[attr-defined]
    await store.conn.execute("PRAGMA query_only = ON")
    proc = await javascript_bot(live_server.address, 1)  # type: ignore[attr-defined]
    assert proc.stderr is not None
    seen = b""
    try:
        while b"challenging again" not in seen:
            line = await asyncio.wait_for(proc.stderr.readline(), 30)
            assert line, seen.decode()
            seen += line
    finally:
        await store.conn.execute("PRAGMA query_only = OFF")
    log = seen.decode() + await finished(proc)
    assert proc.returncode == 0, log
    assert "STATE_REFUSED the server could not record a new match" in log
    assert log.count("ended: TERMINATION_NORMAL") == 1, log
