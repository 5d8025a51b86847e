"""Bad input from subprocess bots: one test per case of the issue.

Each misbehaving bot plays seat 0 against the random bot while a well-behaved
subprocess bot plays another match at the same time. Every case must end its
own match with the right termination and a reason the author can act on, leave
the other match unharmed, and leave no process (or zombie) behind.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from arena_client import Termination, TimeControl
from arena_games import load_game
from arena_server.referee.records import MatchRecord
from arena_server.seats.framing import Framing
from arena_server.seats.process import BotProgram
from arena_server.seats.sandbox import Limits
from tests.server._stdio_helpers import (
    FAST,
    bystander_program,
    fake,
    marker,
    play_against_random,
    processes_with,
    with_marker,
    zombie_children,
)


async def judge(program: BotProgram, termination: Termination, *phrases: str) -> MatchRecord:
    """Play ``program`` next to a bystander match and check the outcome and the cleanup."""
    bad_word, good_word = marker(), marker()
    program = with_marker(program, bad_word)
    (record, seat), (other, _) = await asyncio.gather(
        play_against_random(program, tc=FAST, match_id="bad"),
        play_against_random(with_marker(bystander_program(), good_word), load_game("rps", rounds=30), match_id="ok"),
    )
    assert record.termination == termination, (record.reason, seat.stderr_log())
    assert record.offender == 0
    for phrase in phrases:
        assert phrase in record.reason, record.reason
    if "before sending Hello" not in record.reason:  # the referee names the seat for failures after start-up
        assert record.reason.startswith("seat 0 (under-test) ")
    assert other.termination == Termination.NORMAL, other.reason
    for _ in range(50):  # SIGKILLed processes vanish asynchronously
        if not processes_with(bad_word) and not processes_with(good_word):
            break
        await asyncio.sleep(0.05)
    assert processes_with(bad_word) == [], "a bot process was left running"
    assert processes_with(good_word) == []
    assert zombie_children() == []
    assert "stopped" in seat.stderr_log()
    return record


async def test_truncated_frame() -> None:
    await judge(
        fake("truncated_frame", framing=Framing.PROTO),
        Termination.PROTOCOL_ERROR,
        "wrote something unreadable on stdout while answering turn 1",
        "ended after 5 of the 20 bytes announced",
    )


async def test_length_prefix_announcing_two_gigabytes() -> None:
    await judge(
        fake("huge_length", framing=Framing.PROTO),
        Termination.PROTOCOL_ERROR,
        "announced a message of 2147483648 bytes, more than the 65536-byte limit",
    )


async def test_invalid_json() -> None:
    await judge(
        fake("invalid_json"),
        Termination.PROTOCOL_ERROR,
        "invalid JSON",
        "{action: {turnId: 1, action: 0}}",
        "expected one JSON object per line",
    )


async def test_valid_message_of_the_wrong_kind() -> None:
    await judge(
        fake("wrong_kind"),
        Termination.PROTOCOL_ERROR,
        "is not an arena.v1.BotMessage",
        'no field named "turn"',
        "exactly one of: hello, action, resign, pong, challenge",
    )


async def test_binary_garbage_on_stdout() -> None:
    await judge(
        fake("binary_garbage", framing=Framing.PROTO),
        Termination.PROTOCOL_ERROR,
        "could not decode a BotMessage from 9 bytes 0xff ff",
    )


async def test_bot_that_exits_at_once() -> None:
    await judge(
        fake("exits_at_once"),
        Termination.CRASH,
        "exited with status 3 before sending Hello",
        "its stderr ends with 'cannot find my model file weights.bin'",
    )


async def test_bot_that_never_reads_stdin() -> None:
    await judge(fake("never_reads"), Termination.TIMEOUT, "sent no Action for turn 1 within 0.6s")


async def test_bot_that_forks_a_process_which_outlives_it() -> None:
    word = marker()
    record, _ = await play_against_random(fake("forks_child", word))
    assert record.termination == Termination.NORMAL, record.reason
    assert processes_with(word) == [], "the bot's grandchild outlived the match"
    assert zombie_children() == []


async def test_bot_whose_child_escapes_with_setsid() -> None:
    word = marker()
    record, seat = await play_against_random(fake("forks_child", word, "setsid"))
    assert record.termination == Termination.NORMAL, record.reason
    for _ in range(50):
        if not processes_with(word):
            break
        await asyncio.sleep(0.05)
    if "own PID namespace" not in seat.stderr_log():
        leftovers = processes_with(word)
        for pid in leftovers:
            import os
            import signal

            os.kill(pid, signal.SIGKILL)
        assert leftovers, "expected the escaped child to survive without a PID namespace"
        return
    assert processes_with(word) == [], "a child that called setsid survived the PID namespace"


async def test_bot_that_allocates_memory_without_bound() -> None:
    program = fake("memory_hog", limits=Limits(cpu_seconds=30, memory_bytes=200 << 20))
    record = await judge(program, Termination.CRASH, "while answering turn 1", "MemoryError")
    assert "exited with status 1" in record.reason


async def test_bot_that_prints_its_moves_to_stderr() -> None:
    await judge(
        fake("moves_to_stderr"),
        Termination.TIMEOUT,
        "sent no Action for turn 1 within 0.6s; meanwhile it wrote to stderr:",
        '"action": {"matchId": "bad", "turnId": 1',
        "messages must go to stdout",
    )


async def test_bot_that_burns_cpu_hits_its_cpu_limit() -> None:
    code = "print('{\"hello\": {}}', flush=True)\nwhile True: pass\n"
    program = BotProgram(["python3", "-c", code], limits=Limits(cpu_seconds=1))
    tc = TimeControl(timedelta(seconds=5), timedelta(0), timedelta(0))
    record, _ = await play_against_random(program, tc=tc)
    # The CPU limit counts from the start; the clock would need 5 s.
    assert record.termination == Termination.CRASH, record.reason
    assert "killed by SIG" in record.reason
