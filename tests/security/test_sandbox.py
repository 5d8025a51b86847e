"""Attacks from a real subprocess bot, started the way the server starts a submitted bot.

Each test runs ``tests/fakes/attacker.py`` from its own directory with the default
:class:`~arena_server.seats.sandbox.Limits` (exactly what :meth:`BotRegistry.program_for`
builds) and fails if an attack works. Where it proves something, the same attacker run
outside the sandbox, as the same user, shows that the attack is real.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shlex
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from arena_client import Termination
from arena_server.referee.records import MatchRecord
from arena_server.seats.framing import Framing
from arena_server.seats.process import BotProgram
from arena_server.seats.sandbox import (
    DEFAULT_PATH,
    Isolation,
    Limits,
    bot_environment,
    build_launch,
    landlock_isolation,
    probe_isolation,
    resolve_user,
    switch_user,
)
from arena_server.seats.subprocess_seat import SubprocessSeat
from arena_server.store.database import Store
from tests.conftest import LiveServer, files_named
from tests.server._stdio_helpers import play_against_random, processes_with

FAKES = Path(__file__).resolve().parents[1] / "fakes"
ATTACK_LINE = re.compile(r"^ATTACK (\S+) -> (OK|BLOCKED) ?(.*)$", re.M)


@pytest.fixture(autouse=True)
async def _needs_a_sandbox() -> None:
    isolation = await probe_isolation(Limits())
    if not isolation.filesystem_confined:
        pytest.fail(f"no filesystem sandbox on this machine: {isolation.description}")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every local user may read (the server's data lives in such places)."""
    folder = Path(tempfile.mkdtemp(prefix="arena-security-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def bot_dir(parent: Path, name: str) -> Path:
    """A bot's own directory holding the attacker, laid out like the data directory of submitted bots."""
    folder = parent / "bots" / name / "v1"
    folder.mkdir(parents=True)
    for f in ("attacker.py", "_stdio.py"):
        shutil.copy(FAKES / f, folder / f)
        (folder / f).chmod(0o644)
    for d in (folder, *folder.parents):
        if d == parent:
            break
        d.chmod(0o755)
    return folder


def outcomes(log: str) -> dict[str, tuple[bool, str]]:
    """``{attack: (worked, detail)}`` from the attacker's stderr."""
    return {m[1]: (m[2] == "OK", m[3]) for m in ATTACK_LINE.finditer(log)}


async def sandboxed(workdir: Path, *attacks: str) -> tuple[dict[str, tuple[bool, str]], MatchRecord, SubprocessSeat]:
    """Run the attacks from a bot seated like a submitted one; the seat is closed afterwards."""
    program = BotProgram(f"python3 attacker.py {shlex.join(attacks)}", Framing.JSON, workdir=workdir, limits=Limits())
    record, seat = await play_against_random(program)
    return outcomes(seat.stderr_log()), record, seat


async def unsandboxed(workdir: Path, *attacks: str) -> dict[str, tuple[bool, str]]:
    """The same attacks as the same user (nobody when the tests run as root), with no sandbox."""
    argv, kwargs = switch_user(["python3", "attacker.py", *attacks], resolve_user("auto"))
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=workdir,
        env={"PATH": DEFAULT_PATH},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        **kwargs,  # type: ignore[arg-type]
    )
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    return outcomes(err.decode())


def assert_blocked(results: dict[str, tuple[bool, str]], *attacks: str) -> None:
    for name in attacks:
        assert name in results, f"the attacker did not report {name!r}: {results}"
        worked, detail = results[name]
        assert not worked, f"attack {name!r} worked from inside the sandbox: {detail}"


async def test_bot_cannot_read_the_database_the_data_dir_or_other_bots(shared_dir: Path) -> None:
    db = shared_dir / "arena.db"
    store = await Store.open(db)
    await store.close()
    db.chmod(0o644)
    own = bot_dir(shared_dir, "attacker")
    other = bot_dir(shared_dir, "victim")
    (other / "secret_strategy.py").write_text("SECRET = 42\n")
    (other / "secret_strategy.py").chmod(0o644)
    attacks = (
        f"read:{db}",
        f"read:{other / 'secret_strategy.py'}",
        f"list:{shared_dir}",
        f"list:{shared_dir / 'bots'}",
        f"list:{other}",
        "read:/etc/shadow",
        "list:/root",
    )
    control = await unsandboxed(own, *attacks[:5])
    assert all(control[a][0] for a in attacks[:5]), f"the attacks do not even work without a sandbox: {control}"
    results, record, _ = await sandboxed(own, *attacks, f"read:{own / 'attacker.py'}", "list:.")
    assert record.termination == Termination.NORMAL, record.reason
    assert_blocked(results, *attacks[:2], *attacks[4:])
    # the directories above its own are bare mount points: their real entries stay hidden
    for folder, only in ((shared_dir, "bots"), (shared_dir / "bots", "attacker")):
        listed, names = results[f"list:{folder}"]
        assert not listed or names == only, f"the bot listed {folder}: {names}"
    assert results[f"read:{own / 'attacker.py'}"][0], "the bot must still read its own files"
    assert results["list:."] == (True, "_stdio.py,attacker.py")


async def test_bot_sees_only_its_own_processes() -> None:
    me = os.getpid()
    os.environ["ARENA_SECRET_FOR_SANDBOX_TEST"] = "leak"
    try:
        folder = Path(tempfile.mkdtemp(prefix="arena-security-"))
        folder.chmod(0o755)
        attacks = ("procs:", "read:/proc/1/cmdline", f"read:/proc/{me}/environ", f"read:/proc/{me}/cmdline")
        results, record, _ = await sandboxed(bot_dir(folder, "attacker"), *attacks)
    finally:
        del os.environ["ARENA_SECRET_FOR_SANDBOX_TEST"]
        shutil.rmtree(folder, ignore_errors=True)
    assert record.termination == Termination.NORMAL, record.reason
    seen = results["procs:"][1]
    pids = re.findall(r"(\d+)=", seen)
    assert str(me) not in pids
    for entry in re.findall(r"\d+='([^']*)'", seen):
        assert entry.startswith('/bin/sh -c "$@"') or "attacker.py" in entry, f"a foreign process is visible: {seen}"
    host_init = hashlib.sha256(Path("/proc/1/cmdline").read_bytes()).hexdigest()
    worked, detail = results["read:/proc/1/cmdline"]
    assert not worked or host_init not in detail, "the bot read the host's PID 1 command line"
    assert_blocked(results, f"read:/proc/{me}/environ", f"read:/proc/{me}/cmdline")


async def test_bot_writes_only_its_private_tmp_and_leaves_nothing_behind(shared_dir: Path) -> None:
    own = bot_dir(shared_dir, "attacker")
    open_dir = shared_dir / "world-writable"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    word = f"arena-left-{uuid.uuid4().hex}"
    attacks = (f"write:{open_dir / 'escaped'}", f"write:{own / 'planted.py'}", "write:/etc/planted", "write:/planted")
    control = await unsandboxed(own, attacks[0])
    assert control[attacks[0]][0], control
    (open_dir / "escaped").unlink()
    results, record, seat = await sandboxed(own, *attacks, "write:~/scratch-file", f"leave:{word}", word)
    assert record.termination == Termination.NORMAL, record.reason
    assert_blocked(results, *attacks)
    assert results["write:~/scratch-file"][0], "the bot must be able to write its private scratch directory"
    if (await probe_isolation(Limits())).filesystem == "newroot":
        assert results[f"leave:{word}"][1] == "in /tmp,/dev/shm,/tmp", results[f"leave:{word}"]
    assert not (open_dir / "escaped").exists() and not (own / "planted.py").exists()
    for folder in ("/tmp", "/dev/shm", "/var/tmp", str(shared_dir)):
        assert not files_named(folder, word), f"a file the bot left survived the match in {folder}"
    assert processes_with(word) == []
    assert seat._scratch is None or not Path(seat._scratch).exists()


@pytest.fixture
async def listeners(shared_dir: Path) -> AsyncIterator[dict[str, object]]:
    """A TCP, a UDP, a filesystem Unix and an abstract Unix socket, all listening in this process."""
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    path = shared_dir / "api.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(path))
    path.chmod(0o777)
    unix.listen()
    name = f"arena-test-{uuid.uuid4().hex}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + name)
    abstract.listen()
    try:
        yield {"tcp": tcp.getsockname()[1], "udp": udp, "unix": path, "abstract": name}
    finally:
        for s in (tcp, udp, unix, abstract):
            s.close()


async def test_bot_has_no_network_and_no_unix_sockets(
    live_server: LiveServer, shared_dir: Path, listeners: dict[str, object]
) -> None:
    own = bot_dir(shared_dir, "attacker")
    udp = listeners["udp"]
    assert isinstance(udp, socket.socket)
    attacks = (
        f"tcp:127.0.0.1:{live_server.port}",  # the server's own gRPC API
        f"tcp:127.0.0.1:{listeners['tcp']}",
        f"unix:{listeners['unix']}",
        f"abstract:{listeners['abstract']}",
    )
    control = await unsandboxed(own, *attacks)
    assert all(control[a][0] for a in attacks), f"the attacks do not even work without a sandbox: {control}"
    results, record, _ = await sandboxed(own, *attacks, f"udp:127.0.0.1:{udp.getsockname()[1]}")
    assert record.termination == Termination.NORMAL, record.reason
    assert_blocked(results, *attacks)
    with pytest.raises(BlockingIOError):
        udp.recv(100)


async def test_bots_share_no_kernel_keyring(shared_dir: Path) -> None:
    """Every bot of one user would share its user keyring: a channel between colluding bots."""
    own = bot_dir(shared_dir, "attacker")
    control = await unsandboxed(own, "keyring:")
    assert control["keyring:"][0], control
    results, record, _ = await sandboxed(own, "keyring:")
    assert record.termination == Termination.NORMAL, record.reason
    assert_blocked(results, "keyring:")


MEMORY_ROUTES = ("heap", "shared", "devzero", "devshm", "memfd", "sysv")


@pytest.mark.parametrize("route", MEMORY_ROUTES)
async def test_two_gib_by_any_route_fails_and_nothing_survives(shared_dir: Path, route: str) -> None:
    own = bot_dir(shared_dir, "attacker")
    word = f"arena-mem-{uuid.uuid4().hex}"
    started = time.monotonic()
    results, record, seat = await sandboxed(own, f"mem:{route}", word)
    elapsed = time.monotonic() - started
    outcome = results.get(f"mem:{route}")
    assert outcome is None or not outcome[0], f"2 GiB by {route} worked: {outcome[1]}"
    if outcome is None:  # killed while allocating: the server noticed and ended the match
        assert record.termination == Termination.CRASH, record.reason
    assert elapsed < 30
    assert processes_with(word) == []
    assert not [p for p in Path("/dev/shm").iterdir() if p.name.startswith("arena-hog-")]
    assert not seat.running


async def test_the_shared_mapping_route_beats_rlimit_data_alone(shared_dir: Path) -> None:
    """Why RLIMIT_AS is needed: with only the old 1 GiB RLIMIT_DATA, 2 GiB of shared memory is taken."""
    own = bot_dir(shared_dir, "attacker")
    argv, kwargs = switch_user(["prlimit", f"--data={1 << 30}", "python3", "attacker.py", "mem:shared"], None)
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=own, stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, **kwargs
    )  # type: ignore[arg-type]
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert outcomes(err.decode())["mem:shared"][0], err.decode()


async def test_landlock_alone_still_confines_the_filesystem(shared_dir: Path) -> None:
    """The fallback for kernels without user namespaces: no private root, Landlock rules on host paths."""
    user = resolve_user("auto")
    base = Isolation((), user, False, False, "no namespaces", None if user is None else (user[1], user[2]))
    isolation = await landlock_isolation(base, Limits())
    if isolation is None:
        pytest.skip("this kernel has no Landlock")
    db = shared_dir / "arena.db"
    store = await Store.open(db)
    await store.close()
    db.chmod(0o644)
    own = bot_dir(shared_dir, "attacker")
    other = bot_dir(shared_dir, "victim")
    scratch = Path(tempfile.mkdtemp(prefix="arena-scratch-"))
    if isolation.owner is not None:
        os.chown(scratch, *isolation.owner)
    attacks = (f"read:{db}", f"read:{other / 'attacker.py'}", f"list:{shared_dir}", "list:/proc", "write:/tmp/x")
    try:
        spec = build_launch(
            ["python3", "attacker.py", *attacks, f"write:{scratch / 'ok'}"],
            str(own),
            bot_environment(str(scratch)),
            Limits(),
            isolation,
            workdir=str(own),
            scratch=str(scratch),
        )
        proc = await asyncio.create_subprocess_exec(
            *spec.argv,
            cwd=spec.cwd,
            env=spec.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            **spec.popen_kwargs,  # type: ignore[arg-type]
        )
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    results = outcomes(err.decode())
    assert_blocked(results, *attacks)
    assert results[f"write:{scratch / 'ok'}"][0], err.decode()


@pytest.mark.parametrize(
    "command",
    [
        [
            "node",
            "-e",
            "require('fs').writeFileSync('/tmp/x', 'ok'); console.log(require('fs').readFileSync('/tmp/x', 'utf8'))",
        ],
        ["python3", "-c", "import multiprocessing, sqlite3, ssl; print('ok')"],
    ],
    ids=["node", "python"],
)
async def test_runtimes_start_under_the_default_limits(command: list[str]) -> None:
    """RLIMIT_AS of 1 GiB and the private root still let Node and Python start and use /tmp."""
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} is not installed")
    limits = Limits()
    spec = build_launch(command, None, bot_environment("/tmp"), limits, await probe_isolation(limits))
    proc = await asyncio.create_subprocess_exec(
        *spec.argv,
        cwd=spec.cwd,
        env=spec.env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        **spec.popen_kwargs,  # type: ignore[arg-type]
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert b"ok" in out
