"""``arena serve --workers 2``: real server processes, real SDK bots, the real SQLite file.

Proves that matches spread over both worker processes, that the main process
stores every one (rating effects included) before the bot hears the end
(commit-before-notify across the process hop), that a shutdown aborts and
records running matches, that bad ``--workers`` values get one clear line, and
that bots register, log in, submit and are seated through any worker (look-alike
names racing through two workers: exactly one gets in).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import pytest

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import bots_pb2 as bp
from arena.v1 import bots_pb2_grpc as bp_grpc
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client import Bot, MatchResult, Termination, Turn
from arena_client.remote import Client
from tests.fakes.grpc_bots import RawBot
from tests.ladder.test_crash import ROOT, close, serve

PLAIN_BOT = (ROOT / "clients" / "plain_python" / "bot.py").read_bytes()


class Scissors(Bot):
    """Plays scissors; records what the database said at the moment it heard the end."""

    name = "workers-bot"
    games = ("rps",)

    def __init__(self, db: Path, delay: float = 0.0) -> None:
        self.db = db
        self.delay = delay
        self.seen_at_end: list[tuple[str, str]] = []

    def act(self, turn: Turn) -> int:
        if self.delay:
            import time

            time.sleep(self.delay)
        return 2

    def on_match_end(self, result: MatchResult) -> None:
        with sqlite3.connect(self.db) as conn:
            row = conn.execute("SELECT status FROM matches WHERE id = ?", (int(result.match_id),)).fetchone()
        self.seen_at_end.append((result.match_id, row[0] if row else "missing"))


def port_of(proc: subprocess.Popen[str]) -> int:
    return int(proc.args[proc.args.index("--port") + 1])  # type: ignore[union-attr]


def child_cpu(proc: subprocess.Popen[str]) -> dict[int, float]:
    """CPU seconds (user + system) of each child process of the server."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(proc.pid)], capture_output=True, text=True).stdout
    cpu = {}
    for pid in map(int, out.split()):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return cpu


def test_two_workers_share_matches_and_commit_before_notify(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    proc = serve(db, "--workers", "2", "--no-ladder", "--no-http", "--host", "0.0.0.0")
    try:
        port = port_of(proc)
        start = child_cpu(proc)

        async def play(batch: int) -> list[Client]:
            # gRPC shares one connection among the channels of a process to one address, and a
            # connection stays with one worker: one address per bot, as bots on separate hosts would be.
            clients = [
                Client(Scissors(db), f"127.0.0.{12 * batch + i + 1}:{port}", name=f"w-{i}", threaded=False)
                for i in range(12)
            ]
            await asyncio.gather(*(c.play(opponent="rock", params={"rounds": 300}) for c in clients))
            return clients

        # The kernel picks the worker for each connection by a hash of its addresses and ports: 12
        # connections all land on one worker about once in 2,048 runs (CI saw it once). Another batch
        # from 12 new addresses is another draw; four batches all on one worker is about 2^-44.
        clients: list[Client] = []
        busy: list[int] = []
        for batch in range(4):
            clients += asyncio.run(play(batch))
            after = child_cpu(proc)
            # An idle worker uses no measurable CPU (0.00 s over seconds, in 10 ms ticks); one match costs
            # a worker about 30 ms, so 20 ms means it refereed at least one.
            busy = [pid for pid in after if after[pid] - start.get(pid, 0.0) >= 0.02]
            if len(busy) == 2:
                break
        assert len(busy) == 2, (start, after)  # both workers refereed matches
        for client in clients:
            assert client.results[0].termination.name == "NORMAL"
            bot = client.bot
            assert isinstance(bot, Scissors)
            # The bot heard the end only once the main process had committed it.
            assert bot.seen_at_end == [(client.results[0].match_id, "finished")]
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT status, move_count FROM matches").fetchall()
            rated = conn.execute("SELECT COUNT(*) FROM matches WHERE rated = 1").fetchone()[0]
            effects = conn.execute("SELECT COUNT(*) FROM rated_matches").fetchone()[0]
        assert rows == [("finished", 600)] * len(clients)
        assert effects == rated  # every rated match's rating change went in with it
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        err = close(proc)
    assert "arena: stopped" in err, err


def test_shutdown_with_workers_aborts_and_records(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    proc = serve(db, "--workers", "2", "--no-ladder", "--no-http", "--shutdown-grace", "5")
    try:
        port = port_of(proc)

        async def play_until_stopped() -> list[Client]:
            clients = [
                Client(Scissors(db, delay=0.01), f"127.0.0.1:{port}", name=f"s-{i}", threaded=True) for i in range(4)
            ]
            tasks = [
                asyncio.ensure_future(c.play(opponent="rock", params={"rounds": 100000}, reconnect=False))
                for c in clients
            ]
            for _ in range(200):  # until every match is running
                await asyncio.sleep(0.05)
                with sqlite3.connect(db) as conn:
                    if conn.execute("SELECT COUNT(*) FROM matches WHERE status = 'running'").fetchone()[0] == 4:
                        break
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait(tasks, timeout=20)
            return clients

        clients = asyncio.run(play_until_stopped())
        assert proc.wait(30) == 0
        for client in clients:
            bot = client.bot
            assert isinstance(bot, Scissors)
            assert [status for _, status in bot.seen_at_end] == ["aborted"]
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT status, reason FROM matches").fetchall()
        assert len(rows) == 4
        assert all(status == "aborted" and "shutting down" in reason for status, reason in rows), rows
    finally:
        close(proc)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--workers", "0", "--no-ladder", "--no-http"], "--workers 0 is out of range; use 1..256 or auto"),
        (["--workers", "two"], "--workers 'two' is not a number"),
    ],
)
def test_bad_workers_values(tmp_path: Path, extra: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "arena_server.cli", "serve", "--port", "0", "--db", str(tmp_path / "a.db"), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_second_server_on_the_same_port_is_refused(tmp_path: Path) -> None:
    first = serve(tmp_path / "a.db", "--workers", "2", "--no-ladder", "--no-http")
    try:
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "arena_server.cli",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port_of(first)),
                "--db",
                str(tmp_path / "b.db"),
                "--workers",
                "2",
                "--no-ladder",
                "--no-http",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode != 0
        # the port is probed before anything starts (issue 18: one message for every `arena serve`)
        assert f"port {port_of(first)} is already in use on 127.0.0.1" in second.stderr
        assert second.stderr.strip().endswith("pick another --port (0 picks a free one)")
        assert len(second.stderr.strip().splitlines()) == 1, second.stderr
        assert not (tmp_path / "b.db").exists()  # refused before it touched anything
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(30)
        close(first)


def worker_holding(proc: subprocess.Popen[str], address: str, port: int) -> int:
    """The pid of the worker process that serves the one open connection to ``address:port``.

    The server's end of that connection is the socket in ``/proc/net/tcp`` (or ``tcp6``, as an
    IPv4-mapped address: gRPC listens on both) whose local address is ``address:port``; its owner is
    the worker with that socket's inode among its file descriptors.
    """
    ipv4 = "".join(f"{int(part):02X}" for part in reversed(address.split(".")))
    locals_ = {f"{ipv4}:{port:04X}", f"0000000000000000FFFF0000{ipv4}:{port:04X}"}
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[1] in locals_ and fields[3] == "01":  # ESTABLISHED
                inodes.add(f"socket:[{fields[9]}]")
    assert len(inodes) == 1, (address, inodes)
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(proc.pid)], capture_output=True, text=True).stdout
    for pid in map(int, children.split()):
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return pid
    raise AssertionError(f"no worker of {proc.pid} holds the connection to {address}:{port}")


def own_ports(proc: subprocess.Popen[str], port: int) -> dict[int, int]:
    """Each worker's own port (where a Redirect sends bots), by the worker's pid: the port other than the
    shared ``port`` that the worker listens on, from ``/proc/net/tcp``/``tcp6`` and the worker's descriptors.

    A connection to the shared port reaches a worker the kernel picks by a hash that includes the source
    port, so a test that needs a given worker connects to that worker's own port instead.
    """
    listening: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                listening[f"socket:[{fields[9]}]"] = int(fields[1].rsplit(":", 1)[1], 16)
    ports = {}
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(proc.pid)], capture_output=True, text=True).stdout
    for pid in map(int, children.split()):
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    found = listening.get(os.readlink(fd))
                    if found is not None and found != port:
                        ports[pid] = found
    return ports


async def on_two_workers(proc: subprocess.Popen[str]) -> list[tuple[grpc.aio.Channel, int]]:
    """Two channels whose connections landed on different workers, with those workers' pids.

    Each channel has its own address (127.0.0.N) and subchannel pool, so it has its own connection;
    the kernel picks a worker for each, so a few addresses reach both (all 40 on one: 2^-39).
    """
    port = port_of(proc)
    found: dict[int, grpc.aio.Channel] = {}
    for n in range(2, 42):
        address = f"127.0.0.{n}"
        channel = grpc.aio.insecure_channel(f"{address}:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
        await bp_grpc.BotServiceStub(channel).ListBots(bp.ListBotsRequest(), timeout=30)  # (connects)
        pid = worker_holding(proc, address, port)
        if pid in found:
            await channel.close()
        else:
            found[pid] = channel
        if len(found) == 2:
            return [(channel, pid) for pid, channel in found.items()]
    raise AssertionError(f"every connection landed on worker {list(found)}")


def data_dir() -> Path:
    """A data directory every user can reach (submitted bots run as nobody when the tests run as root)."""
    folder = Path(tempfile.mkdtemp(prefix="arena-test-data-"))
    folder.chmod(0o755)
    return folder


async def seated_version(channel: grpc.aio.Channel, name: str, token: str) -> int:
    """Play ``name`` against ``rock`` over ``channel`` (CreateMatch, its token) and return the version seated."""
    request = mp.CreateMatchRequest(game="rps", bots=[name, "rock"], wait=True, bot_tokens={name: token})
    request.params["rounds"].int_value = 3
    response = await mp_grpc.MatchServiceStub(channel).CreateMatch(request, timeout=60)
    assert response.record.termination == int(Termination.NORMAL), response.record.reason
    assert response.record.seats[0].bot_name == name
    return int(response.record.seats[0].bot_version)


def test_bots_register_and_submit_through_any_worker(tmp_path: Path) -> None:
    """RegisterBot and SubmitBot on a two-worker server: each worker's write is seen by the other at once.

    A name registered through one worker is taken (look-alikes too) and logs in on the other; a guest
    squatting it on the other is evicted; versions number on across workers; a new version is the one
    both workers seat; the errors are a single-process server's.
    """
    folder = data_dir()
    db = tmp_path / "arena.db"
    # (--allow-unsandboxed-uploads: on a kernel without a sandbox the uploads would be refused, by every
    # worker as by the main process; this test is about the registry, not the sandbox.)
    proc = serve(
        db, "--workers", "2", "--no-ladder", "--host", "0.0.0.0", "--data-dir", str(folder),
        "--allow-unsandboxed-uploads",
    )  # fmt: skip

    async def scenario() -> None:
        (one, pid_one), (other, pid_other) = await on_two_workers(proc)
        assert pid_one != pid_other
        bots_one, bots_other = bp_grpc.BotServiceStub(one), bp_grpc.BotServiceStub(other)

        # A guest on the other worker holds the name until it is registered through this one.
        squatter = RawBot(other)
        joined = (await squatter.hello("crosser", ("rps",))).welcome
        assert (joined.bot_name, joined.guest) == ("crosser", True)
        token = (await bots_one.RegisterBot(bp.RegisterBotRequest(name="crosser", games=["rps"]))).token
        evicted = await squatter.recv_kind("error")
        assert evicted.error.code == bs.ERROR_CODE_NAME_TAKEN, evicted
        assert "'crosser' has just been registered by its owner" in evicted.error.message

        for name, same in (("crosser", "is"), ("CROSSER", "looks the same as 'crosser', which is")):
            with pytest.raises(grpc.aio.AioRpcError) as taken:
                await bots_other.RegisterBot(bp.RegisterBotRequest(name=name))
            assert taken.value.code() == grpc.StatusCode.ALREADY_EXISTS
            assert taken.value.details() == f"the name {name!r} {same} already registered; pick another name"

        # Its token logs in on the other worker; a wrong one is refused there as anywhere.
        wrong = RawBot(other)
        await wrong.send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", name="crosser", token="nope")))
        assert (await wrong.recv()).error.code == bs.ERROR_CODE_UNAUTHENTICATED
        owner = RawBot(other)
        await owner.send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", name="crosser", token=token)))
        welcome = (await owner.recv()).welcome
        assert welcome.bot_name == "crosser" and not welcome.guest
        owner.hang_up()

        # Versions number on whichever worker takes the submission.
        submission = bp.SubmitBotRequest(
            name="crosser", token=token, filename="bot.py", content=PLAIN_BOT, command="python3 bot.py"
        )
        first = await bots_other.SubmitBot(submission, timeout=120)
        assert (first.verdict, first.version) == (bp.SUBMISSION_VERDICT_ACCEPTED, 1), first.report
        assert await seated_version(other, "crosser", token) == 1
        second = await bots_one.SubmitBot(submission, timeout=120)
        assert (second.verdict, second.version) == (bp.SUBMISSION_VERDICT_ACCEPTED, 2), second.report
        with pytest.raises(grpc.aio.AioRpcError) as unauthenticated:
            await bots_other.SubmitBot(bp.SubmitBotRequest(name="crosser", token="nope", content=PLAIN_BOT))
        assert unauthenticated.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "wrong token for 'crosser'" in str(unauthenticated.value.details())

        # Both workers seat version 2: the other one, which had version 1, was told of it.
        assert await seated_version(one, "crosser", token) == 2
        deadline = time.monotonic() + 10
        while (seated := await seated_version(other, "crosser", token)) != 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert seated == 2
        for stub in (bots_one, bots_other):
            listed = next(b for b in (await stub.ListBots(bp.ListBotsRequest())).bots if b.name == "crosser")
            assert (listed.kind, listed.accepted_version, listed.latest_version) == ("subprocess", 2, 2)
        for channel in (one, other):
            await channel.close()

    try:
        asyncio.run(scenario())
        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT v.version, v.status FROM bot_versions v JOIN bots b ON b.id = v.bot_id WHERE b.name = ?",
                ("crosser",),
            ).fetchall()
        assert sorted(rows) == [(1, "accepted"), (2, "accepted")]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        close(proc)
        shutil.rmtree(folder, ignore_errors=True)


def test_look_alike_names_racing_on_two_workers(tmp_path: Path) -> None:
    """Look-alike names registered at the same moment through two workers: exactly one of each pair wins.

    The look-alike check and the insert are one transaction of the main process's writer, so the
    loser gets the single-process refusal, not a second row.
    """
    db = tmp_path / "arena.db"
    proc = serve(db, "--workers", "2", "--no-ladder", "--host", "0.0.0.0")

    async def race() -> None:
        (one, _), (other, _) = await on_two_workers(proc)
        stubs = (bp_grpc.BotServiceStub(one), bp_grpc.BotServiceStub(other))
        for i in range(20):
            names = (f"racer-{i}", f"RACER-{i}") if i % 2 else (f"RACER-{i}", f"racer-{i}")
            outcomes = await asyncio.gather(
                *(stub.RegisterBot(bp.RegisterBotRequest(name=n)) for stub, n in zip(stubs, names, strict=True)),
                return_exceptions=True,
            )
            won = [o.name for o in outcomes if isinstance(o, bp.RegisterBotResponse)]
            lost = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
            assert len(won) == 1 and len(lost) == 1, outcomes
            assert lost[0].code() == grpc.StatusCode.ALREADY_EXISTS
            loser = next(n for n in names if n != won[0])
            assert lost[0].details() == (
                f"the name {loser!r} looks the same as {won[0]!r}, which is already registered; pick another name"
            )
        for channel in (one, other):
            await channel.close()

    try:
        asyncio.run(race())
        with sqlite3.connect(db) as conn:
            keys = conn.execute("SELECT name_key, COUNT(*) FROM bots GROUP BY name_key").fetchall()
        assert sorted(keys) == sorted((f"racer-{i}", 1) for i in range(20))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        close(proc)


def test_a_killed_servers_socket_directory_is_removed_by_the_next_start() -> None:
    """``arena serve --workers`` removes the writer directories that SIGKILLed servers left (old, nobody
    listening), and keeps a running server's and a directory too young to judge."""
    from arena_server.cli.workers import clear_stale_writer_dirs

    tmp_path = Path(tempfile.mkdtemp(prefix="aw-"))  # (short: a Unix socket's path has at most 107 bytes)

    def made(name: str, listening: bool, age: float) -> tuple[Path, socket.socket | None]:
        folder = tmp_path / f"arena-writer-{name}"
        folder.mkdir()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(folder / "writer.sock"))
        if listening:
            sock.listen(1)
        else:
            sock.close()  # (the socket file stays: a connection to it is refused)
            sock = None
        past = time.time() - age
        os.utime(folder, (past, past))
        return folder, sock

    killed, _ = made("killed", listening=False, age=600)
    running, listener = made("running", listening=True, age=600)
    starting, _ = made("starting", listening=False, age=1)
    empty = tmp_path / "arena-writer-empty"
    empty.mkdir()
    os.utime(empty, (time.time() - 600, time.time() - 600))
    other = tmp_path / "not-arena"
    other.mkdir()
    try:
        assert clear_stale_writer_dirs(str(tmp_path)) == 2
    finally:
        assert listener is not None
        listener.close()
    assert not killed.exists() and not empty.exists()
    assert running.exists() and starting.exists() and other.exists()
    shutil.rmtree(tmp_path)
