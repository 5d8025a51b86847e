"""Registering, submitting and seating bots; tokens; failures an author can act on.

Real server (``live_server``), real SQLite file, real bot subprocesses. Submitted bots
run as ``nobody`` when the tests run as root, so the data directory is put where that
user can read it.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import shutil
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import bots_pb2 as bp
from arena.v1 import bots_pb2_grpc as bp_grpc
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client import Termination
from arena_server.bots.failures import match_log
from arena_server.bots.uploads import MAX_UPLOAD_BYTES, UploadError, unpack_upload
from arena_server.seats.sandbox import Limits
from tests.conftest import LiveServer, files_named
from tests.fakes.grpc_bots import RawBot

ROOT = Path(__file__).resolve().parents[2]
PLAIN_BOT = (ROOT / "clients" / "plain_python" / "bot.py").read_bytes()
CRASH_AT_TURN_3 = b"""
import json, sys
print(json.dumps({"hello": {"protocolVersion": "arena.v1", "games": ["rps"]}}), flush=True)
for line in sys.stdin:
    msg = json.loads(line)
    if "turn" in msg:
        t = msg["turn"]
        if t["turnId"] >= 3:
            print("about to divide by zero at turn", t["turnId"], file=sys.stderr, flush=True)
            1 / 0
        a = {"matchId": t["matchId"], "turnId": t["turnId"], "action": t["legalActions"][0]}
        print(json.dumps({"action": a}), flush=True)
"""


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data directory every user can reach (bots run as nobody when the tests run as root)."""
    folder = Path(tempfile.mkdtemp(prefix="arena-test-data-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
async def bots(live_server: LiveServer, data_dir: Path) -> bp_grpc.BotServiceStub:
    # Async, so the channel is made on the running loop: a sync fixture made gRPC look for the main
    # thread's default loop, which is gone once any test has called asyncio.run() (the order then mattered).
    registry = live_server.hub.registry
    assert registry is not None
    registry.data_dir = data_dir
    registry.limits = Limits(cpu_seconds=60, memory_bytes=256 << 20)
    return bp_grpc.BotServiceStub(live_server.channel())


async def register(stub: bp_grpc.BotServiceStub, name: str, games: tuple[str, ...] = ("rps",)) -> str:
    response = await stub.RegisterBot(bp.RegisterBotRequest(name=name, games=list(games)))
    assert response.name == name and len(response.token) >= 30
    return str(response.token)


async def submit(
    stub: bp_grpc.BotServiceStub, name: str, token: str, content: bytes, filename: str = "bot.py", command: str = ""
) -> bp.SubmitBotResponse:
    request = bp.SubmitBotRequest(
        name=name, token=token, filename=filename, content=content, command=command or "python3 bot.py"
    )
    response: bp.SubmitBotResponse = await stub.SubmitBot(request)
    return response


async def play(
    live_server: LiveServer, *names: str, rounds: int = 5, tokens: dict[str, str] | None = None
) -> mp.MatchRecord:
    """CreateMatch; a registered bot is seated only with its token (issue 12), given in ``tokens``."""
    request = mp.CreateMatchRequest(game="rps", bots=list(names), wait=True, bot_tokens=tokens or {})
    request.params["rounds"].int_value = rounds
    response: mp.CreateMatchResponse = await mp_grpc.MatchServiceStub(live_server.channel()).CreateMatch(request)
    return response.record


async def test_registration_and_tokens(live_server: LiveServer, bots: bp_grpc.BotServiceStub) -> None:
    token = await register(bots, "guarded")
    with pytest.raises(grpc.aio.AioRpcError) as taken:
        await bots.RegisterBot(bp.RegisterBotRequest(name="guarded"))
    assert taken.value.code() == grpc.StatusCode.ALREADY_EXISTS
    with pytest.raises(grpc.aio.AioRpcError) as hosted:
        await bots.RegisterBot(bp.RegisterBotRequest(name="random"))
    assert hosted.value.code() == grpc.StatusCode.ALREADY_EXISTS and "hosted" in (hosted.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as bad_name:
        await bots.RegisterBot(bp.RegisterBotRequest(name="../etc"))
    assert bad_name.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    # The token is stored hashed, never in clear.
    async with live_server.store.conn.execute("SELECT token_hash FROM bots WHERE name = 'guarded'") as cur:
        row = await cur.fetchone()
    assert row is not None and row[0] != token and len(row[0]) == 64

    # Submitting needs the token.
    with pytest.raises(grpc.aio.AioRpcError) as wrong:
        await submit(bots, "guarded", "not-the-token", PLAIN_BOT)
    assert wrong.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await submit(bots, "never-registered", token, PLAIN_BOT)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND

    # Playing remotely under the name needs the token too.
    raw = RawBot(live_server.channel())
    await raw.send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", name="guarded", token="wrong")))
    refused = await raw.recv()
    assert refused.error.code == bs.ERROR_CODE_UNAUTHENTICATED
    raw = RawBot(live_server.channel())
    await raw.send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", name="guarded", token=token)))
    welcome = await raw.recv()
    assert welcome.welcome.bot_name == "guarded" and not welcome.welcome.guest
    raw.call.cancel()


async def test_submitted_bot_is_checked_versioned_and_seated(
    live_server: LiveServer, bots: bp_grpc.BotServiceStub, data_dir: Path
) -> None:
    token = await register(bots, "plain")
    first = await submit(bots, "plain", token, PLAIN_BOT)
    assert first.verdict == bp.SUBMISSION_VERDICT_ACCEPTED, first.report
    assert first.version == 1 and not first.first_error and "PASSED" in first.report
    stored = data_dir / "bots" / "plain" / "v1" / "bot.py"
    assert stored.read_bytes() == PLAIN_BOT and stored.stat().st_mode & 0o004

    record = await play(live_server, "plain", "random", tokens={"plain": token})
    assert record.termination == int(Termination.NORMAL), record.reason
    assert (record.seats[0].bot_name, record.seats[0].bot_version) == ("plain", 1)

    second = await submit(bots, "plain", token, PLAIN_BOT)
    assert second.verdict == bp.SUBMISSION_VERDICT_ACCEPTED and second.version == 2
    record = await play(live_server, "random", "plain", tokens={"plain": token})
    assert (record.seats[1].bot_name, record.seats[1].bot_version) == ("plain", 2)
    log = await match_log(live_server.store.conn, record.match_id, 1)
    assert log is not None and "hello:" in log and "stopped" in log

    listed = await bots.ListBots(bp.ListBotsRequest())
    plain = next(b for b in listed.bots if b.name == "plain")
    assert (plain.kind, plain.accepted_version, plain.latest_version, list(plain.games)) == (
        "subprocess",
        2,
        2,
        ["rps"],
    )


async def test_bad_bot_is_rejected_with_its_first_error(live_server: LiveServer, bots: bp_grpc.BotServiceStub) -> None:
    token = await register(bots, "crashy")
    response = await submit(bots, "crashy", token, CRASH_AT_TURN_3)
    assert response.verdict == bp.SUBMISSION_VERDICT_REJECTED and response.version == 1
    assert "rps as seat 0" in response.first_error and "ZeroDivisionError" in response.first_error
    assert "while answering turn" in response.first_error

    # A rejected version is never seated.
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await play(live_server, "crashy", "random", tokens={"crashy": token})
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND

    # A good version after a rejected one is version 2, and plays.
    fixed = await submit(bots, "crashy", token, PLAIN_BOT)
    assert fixed.verdict == bp.SUBMISSION_VERDICT_ACCEPTED and fixed.version == 2
    record = await play(live_server, "crashy", "random", tokens={"crashy": token})
    assert record.seats[0].bot_version == 2 and record.termination == int(Termination.NORMAL)


async def test_archive_with_path_traversal_is_refused(
    live_server: LiveServer, bots: bp_grpc.BotServiceStub, data_dir: Path
) -> None:
    token = await register(bots, "sneaky")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in (("bot.py", PLAIN_BOT), ("../../escaped.txt", b"owned")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await submit(bots, "sneaky", token, buffer.getvalue(), filename="bot.tar.gz")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "'../../escaped.txt'" in (refused.value.details() or "") and "'..'" in (refused.value.details() or "")
    assert not files_named(data_dir.parent, "escaped.txt")
    assert not (data_dir / "bots" / "sneaky" / "v1").exists()


async def test_archive_bot_with_folders_is_accepted(live_server: LiveServer, bots: bp_grpc.BotServiceStub) -> None:
    token = await register(bots, "zipped")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("src/strategy.py", PLAIN_BOT)
        archive.writestr("run.sh", "#!/bin/sh\nexec python3 src/strategy.py\n")
    response = await submit(bots, "zipped", token, buffer.getvalue(), filename="bot.zip", command="sh run.sh")
    assert response.verdict == bp.SUBMISSION_VERDICT_ACCEPTED, response.report


def test_unpack_refuses_unsafe_uploads(tmp_path: Path) -> None:
    def tar_with(*members: tarfile.TarInfo) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for member in members:
                archive.addfile(member, io.BytesIO(b"x" * member.size) if member.isreg() else None)
        return buffer.getvalue()

    absolute = tarfile.TarInfo("/etc/cron.d/evil")
    absolute.size = 1
    escaping_link = tarfile.TarInfo("data")
    escaping_link.type, escaping_link.linkname = tarfile.SYMTYPE, "../../../root"
    inner_link = tarfile.TarInfo("alias.py")
    inner_link.type, inner_link.linkname = tarfile.SYMTYPE, "bot.py"
    bot = tarfile.TarInfo("bot.py")
    bot.size = 3
    device = tarfile.TarInfo("tty")
    device.type = tarfile.CHRTYPE

    cases = {
        "absolute path": tar_with(absolute),
        "outside the upload": tar_with(bot, escaping_link),
        "device file": tar_with(bot, device),
    }
    for index, (expected, content) in enumerate(cases.items()):
        dest = tmp_path / f"case{index}"
        dest.mkdir()
        with pytest.raises(UploadError, match=expected):
            unpack_upload("bot.tar", content, dest)
    with pytest.raises(UploadError, match="limit is 3 MiB"):
        unpack_upload("bot.py", b"x" * (MAX_UPLOAD_BYTES + 1), tmp_path)
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("../evil.py", "x")
    with pytest.raises(UploadError, match=re.escape("'..'")):
        unpack_upload("bot.zip", zipped.getvalue(), tmp_path)
    with pytest.raises(UploadError, match="not a valid zip"):
        unpack_upload("bot.zip", b"PK not really", tmp_path)

    ok = tmp_path / "ok"
    ok.mkdir()
    assert sorted(unpack_upload("bot.tar", tar_with(bot, inner_link), ok)) == ["alias.py", "bot.py"]
    assert os.readlink(ok / "alias.py") == "bot.py" and (ok / "bot.py").stat().st_mode & 0o777 == 0o644


async def test_failures_of_a_crashing_bot_are_listed(live_server: LiveServer, bots: bp_grpc.BotServiceStub) -> None:
    registry = live_server.hub.registry
    assert registry is not None
    folder = registry.data_dir / "local-crashy"
    folder.mkdir(mode=0o755)
    (folder / "bot.py").write_bytes(CRASH_AT_TURN_3)
    (folder / "bot.py").chmod(0o644)
    token = await registry.add_local("local-crashy", "python3 bot.py", ["rps"], workdir=str(folder))

    record = await play(live_server, "random", "local-crashy", rounds=10, tokens={"local-crashy": token})
    assert record.termination == int(Termination.CRASH) and record.offender == 1

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await bots.GetFailures(bp.GetFailuresRequest(name="local-crashy", token="wrong"))
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    response = await bots.GetFailures(bp.GetFailuresRequest(name="local-crashy", token=token))
    assert len(response.failures) == 1
    failure = response.failures[0]
    assert failure.match_id == record.match_id and failure.seat == 1 and failure.version == 1
    assert failure.termination == int(Termination.CRASH) and "ZeroDivisionError" in failure.reason
    assert failure.turn_id >= 3 and '"turn"' in failure.received and f'"turnId":{failure.turn_id}' in failure.received
    assert '"action"' in failure.sent
    assert f"about to divide by zero at turn {failure.turn_id}" in failure.stderr_tail
    assert "ZeroDivisionError" in failure.stderr_tail

    # The same through the command line.
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "arena_server.cli",
        "bot",
        "failures",
        "local-crashy",
        "--server",
        live_server.address,
        "--token",
        token,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert f"match {record.match_id} (rps), seat 1, version 1" in text and "crash" in text
    assert 'last message it received: {"turn"' in text and "about to divide by zero" in text


def test_tokens_never_read_as_command_line_options() -> None:
    """A token is typed after ``--token``: one starting with ``-`` was taken for an option by argparse."""
    from arena_server.bots.registry import new_token

    tokens = {new_token() for _ in range(3000)}
    assert len(tokens) == 3000
    assert all(len(t) == 32 and t.isalnum() and t.isascii() for t in tokens)
