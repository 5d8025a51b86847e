"""RPSContest programs through the whole server: ``arena bot add/submit --rpscontest``, then server-run matches.

A real gRPC server on port 0 with a real SQLite file; the programs run in the real
sandboxed subprocess seat against hosted bots. The CLI runs in a worker thread
(``asyncio.to_thread``) so the server keeps serving on the test's event loop.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_server.cli import main
from tests.conftest import LiveServer, in_thread

PROGRAMS = Path(__file__).parent / "rpscontest_programs"


async def server_match(
    live_server: LiveServer, bots: list[str], token: str, rounds: int, signs: int = 3
) -> mp.MatchRecord:
    request = mp.CreateMatchRequest(game="rps", bots=bots, wait=True, bot_tokens={bots[0]: token})
    request.params["rounds"].int_value = rounds
    request.params["signs"].int_value = signs
    response: mp.CreateMatchResponse = await mp_grpc.MatchServiceStub(live_server.channel()).CreateMatch(request)
    return response.record


def token_from(output: str) -> str:
    return output.strip().splitlines()[-1]


async def test_added_program_plays_server_matches(live_server: LiveServer, capsys: pytest.CaptureFixture[str]) -> None:
    code = await asyncio.to_thread(
        main,
        [
            "bot",
            "add",
            "py2-freq",
            "--rpscontest",
            str(PROGRAMS / "freq_counter.py2"),
            "--db",
            str(live_server.db_path),
        ],
    )
    assert code == 0
    token = token_from(capsys.readouterr().out)
    record = await server_match(live_server, ["py2-freq", "rock"], token, rounds=50)
    assert record.status == mp.MATCH_STATUS_FINISHED, record.reason
    assert record.termination == 1 and record.returns[0] >= 45, (record.reason, list(record.returns))

    refused = await server_match(live_server, ["py2-freq", "random"], token, rounds=5, signs=5)
    assert "RPSContest programs play 3 signs only; this match has signs=5" in refused.reason


async def test_submitted_program_is_checked_and_plays(
    live_server: LiveServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert await asyncio.to_thread(main, ["bot", "register", "py2-markov", "--server", live_server.address]) == 0
    token = token_from(capsys.readouterr().out)
    args = ["bot", "submit", "py2-markov", "--rpscontest", str(PROGRAMS / "markov.py2"), "--token", token]
    assert await asyncio.to_thread(main, [*args, "--server", live_server.address]) == 0
    assert "accepted: py2-markov version 1" in capsys.readouterr().out
    record = await server_match(live_server, ["py2-markov", "rotate"], token, rounds=100)
    assert record.status == mp.MATCH_STATUS_FINISHED and record.termination == 1, record.reason
    assert record.returns[0] >= 60, list(record.returns)

    broken = tmp_path / "broken.py"
    broken.write_text("if input == '':\n    n = 0\nprint n +\n")
    args = ["bot", "submit", "py2-markov", "--rpscontest", str(broken), "--token", token]
    assert await asyncio.to_thread(main, [*args, "--server", live_server.address]) != 0
    captured = capsys.readouterr()
    assert "broken.py line 3: invalid syntax" in captured.out + captured.err


def test_local_match_and_check_bot_take_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    """``arena match rpscontest:FILE`` and ``arena check-bot --rpscontest FILE``, as a user types them."""
    program = f"rpscontest:{PROGRAMS / 'beat_last.py2'}"
    assert in_thread(main, ["match", program, "rock", "-p", "rounds=30"]) == 0
    assert "29 : -29  (normal" in capsys.readouterr().out
    assert in_thread(main, ["match", program, "rock", "-p", "rounds=30", "-p", "signs=5"]) == 0
    assert "resigned: RPSContest programs play 3 signs only; this match has signs=5" in capsys.readouterr().out
    assert in_thread(main, ["check-bot", "--rpscontest", str(PROGRAMS / "markov.py2")]) == 0
    assert "PASSED" in capsys.readouterr().out
