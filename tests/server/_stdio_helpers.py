"""Helpers for tests that run real bot subprocesses: commands, leftovers, a bystander match."""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from arena_bots.simple import RandomBot
from arena_client import SeatInfo, TimeControl
from arena_games import Game, load_game
from arena_server.referee.loop import play_match
from arena_server.referee.records import MatchRecord
from arena_server.seats.framing import Framing
from arena_server.seats.in_process import InProcessSeat
from arena_server.seats.process import BotProgram
from arena_server.seats.sandbox import Limits
from arena_server.seats.subprocess_seat import SubprocessSeat

ROOT = Path(__file__).resolve().parents[2]
FAKES = ROOT / "tests" / "fakes"
PLAIN_PYTHON_BOT = ROOT / "clients" / "plain_python" / "bot.py"
PYTHON = "python3"  # the system interpreter: bots may run as an unprivileged user
FAST = TimeControl(timedelta(seconds=0.5), timedelta(0), timedelta(seconds=0.1))
"""A tight clock, for tests whose bot is expected to run out of time."""
RELAXED = TimeControl(timedelta(seconds=0.5), timedelta(seconds=20), timedelta(seconds=0.1))
"""The default: an overage bank so that a loaded machine never fails a well-behaved bot."""
TEST_LIMITS = Limits(cpu_seconds=60, memory_bytes=256 << 20)

PROTO_BOT_PRELUDE = """
import sys
from arena.v1 import bot_session_pb2 as bs
from google.protobuf.internal.decoder import _DecodeVarint32
from google.protobuf.internal.encoder import _VarintBytes


def frame(msg):
    body = msg.SerializeToString()
    return _VarintBytes(len(body)) + body


def server_messages():
    \"\"\"Every length-delimited ServerMessage on stdin, until it ends.\"\"\"
    stdin = sys.stdin.buffer
    while True:
        head = b""
        while not head or head[-1] & 0x80:
            byte = stdin.read(1)
            if not byte:
                return
            head += byte
        size, _ = _DecodeVarint32(head, 0)
        yield bs.ServerMessage.FromString(stdin.read(size))
"""
"""The start of a bot script in the proto framing that uses the protobuf library (run it with ``sys.executable``)."""


def marker() -> str:
    """A unique word to put in a bot's argv, so its processes can be found in /proc."""
    return f"arena-test-{uuid.uuid4().hex}"


def fake(name: str, *args: str, framing: Framing = Framing.JSON, **kwargs: object) -> BotProgram:
    """A program running ``tests/fakes/<name>.py`` with ``args``."""
    options: dict[str, object] = {"limits": TEST_LIMITS, "startup_timeout": 10.0}
    options.update(kwargs)
    return BotProgram([PYTHON, str(FAKES / f"{name}.py"), *args], framing, **options)  # type: ignore[arg-type]


def processes_with(word: str) -> list[int]:
    """Pids of live (non-zombie) processes whose command line contains ``word``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if word.encode() in cmdline:
            found.append(int(entry))
    return found


def zombie_children() -> list[int]:
    """Pids of zombie processes whose parent is this test process."""
    me = os.getpid()
    zombies = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z" and int(fields[1]) == me:
            zombies.append(int(entry))
    return zombies


def seat_for(program: BotProgram, seat: int = 0, name: str = "under-test") -> SubprocessSeat:
    return SubprocessSeat(program, SeatInfo(seat, name, 1, "subprocess"))


def random_seat(seat: int = 1) -> InProcessSeat:
    return InProcessSeat(RandomBot(seat), SeatInfo(seat, "random"))


async def play_against_random(
    program: BotProgram, game: Game | None = None, tc: TimeControl = RELAXED, match_id: str = "m1"
) -> tuple[MatchRecord, SubprocessSeat]:
    """One match of ``program`` (seat 0) against the random bot; the seat is closed afterwards."""
    seat = seat_for(program)
    try:
        record = await play_match(game or load_game("rps", rounds=5), [seat, random_seat()], tc, match_id=match_id)
    finally:
        await seat.close()
    return record, seat


def bystander_program() -> BotProgram:
    return BotProgram([PYTHON, str(PLAIN_PYTHON_BOT), "7"], Framing.JSON, limits=TEST_LIMITS)


def with_marker(program: BotProgram, word: str) -> BotProgram:
    assert not isinstance(program.command, str)
    return replace(program, command=[*program.command, word])
