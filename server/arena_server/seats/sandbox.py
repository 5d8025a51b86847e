"""Sandboxing for subprocess bots: resource limits, a scrubbed environment, namespaces.

What can be applied depends on the machine, so it is detected at run time (once per
process and user) and the result is written at the top of every bot's log:

* **Resource limits** (CPU time, memory, processes, file size, open files, no core
  dumps) through util-linux ``prlimit`` wrapped around the bot's command, or, when
  that program is missing, ``setrlimit`` in the child before ``exec``.
* **A user**: when the server runs as root, bots run as ``nobody`` by default; a bot
  never runs with the server's privileges.
* **Namespaces** through util-linux ``unshare``: a network namespace with only a
  downed loopback (no network at all), and a PID namespace so that every process the
  bot starts, even one that calls ``setsid``, dies with it. An unprivileged user
  namespace is tried first (it works without root where the kernel allows it), then,
  as root, plain namespaces followed by ``setpriv`` to drop to the bot user.

Nothing here blocks the event loop: the probe runs through asyncio subprocesses.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import resource
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

EXIT_REPORT = "[arena] the bot was killed by signal"
"""Written to stderr by the PID-namespace init when the bot dies of a signal (see :data:`INIT_SHELL`)."""

INIT_SHELL = (
    f'"$@"; status=$?; if [ "$status" -gt 128 ]; then echo "{EXIT_REPORT} $((status - 128))" >&2; fi; exit "$status"'
)
"""The first process of a bot's PID namespace: runs the bot as its child and reports a fatal signal.

It keeps the bot from being PID 1 (which would ignore SIGXCPU and similar signals) and tells
the server which signal killed the bot (``unshare`` itself cannot pass that on).
"""

RUN_AS_AUTO = "auto"
"""``Limits.run_as`` value: ``nobody`` when the server is root, otherwise the server's own user."""


@dataclass(frozen=True)
class Limits:
    """Resource limits and isolation for one bot process. ``None`` means "no limit".

    Attributes:
        cpu_seconds: CPU time of the bot process (and each of its children) over its
            whole life; the per-move clock is enforced separately by the referee.
        memory_bytes: Data segment size (``RLIMIT_DATA``: heap and private mappings,
            but not reserved address space, so Java, Node and Go runtimes start).
        processes: Processes and threads (``RLIMIT_NPROC``); per bot inside a user
            namespace, otherwise counted over everything its user runs.
        file_size_bytes: Largest file the bot may write.
        open_files: Open file descriptors.
        network: Allow network access (off: an empty network namespace, where available).
        run_as: User name to run as: ``"auto"`` (``nobody`` when the server is root,
            else unchanged), a user name, or None to keep the server's user.
        require_isolation: Refuse to start a bot when the network cannot be cut off.
    """

    cpu_seconds: int | None = 600
    memory_bytes: int | None = 1 << 30
    processes: int | None = 128
    file_size_bytes: int | None = 64 << 20
    open_files: int | None = 256
    network: bool = False
    run_as: str | None = RUN_AS_AUTO
    require_isolation: bool = False

    def describe(self) -> str:
        def size(n: int | None) -> str:
            return "unlimited" if n is None else f"{n / (1 << 20):g} MiB"

        def count(n: int | None) -> str:
            return "unlimited" if n is None else str(n)

        return (
            f"cpu {count(self.cpu_seconds)}s, memory {size(self.memory_bytes)}, "
            f"processes {count(self.processes)}, "
            f"file size {size(self.file_size_bytes)}, open files {count(self.open_files)}, no core dumps"
        )

    def prlimit_args(self) -> list[str]:
        args = ["--core=0"]
        if self.cpu_seconds is not None:
            # soft limit sends SIGXCPU; the hard limit one second later is SIGKILL
            args.append(f"--cpu={self.cpu_seconds}:{self.cpu_seconds + 1}")
        if self.memory_bytes is not None:
            args.append(f"--data={self.memory_bytes}")
        if self.processes is not None:
            args.append(f"--nproc={self.processes}")
        if self.file_size_bytes is not None:
            args.append(f"--fsize={self.file_size_bytes}")
        if self.open_files is not None:
            args.append(f"--nofile={self.open_files}")
        return args

    def setrlimits(self) -> None:
        """Apply the limits to the calling process (used in the child when prlimit is missing)."""
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if self.cpu_seconds is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_seconds, self.cpu_seconds + 1))
        if self.memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_DATA, (self.memory_bytes, self.memory_bytes))
        if self.processes is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (self.processes, self.processes))
        if self.file_size_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.file_size_bytes, self.file_size_bytes))
        if self.open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))


@dataclass(frozen=True)
class Isolation:
    """How bots can be isolated on this machine (the result of :func:`probe_isolation`).

    Attributes:
        prefix: argv placed before the limits and the bot's command.
        user: ``(name, uid, gid)`` the first program is started as, or None.
        network_isolated: Whether the bot has no network.
        pid_namespace: Whether the bot's processes live in their own PID namespace.
        description: One line for the bot's log.
        owner: ``(uid, gid)`` the bot finally runs as, when it differs from the server's
            (its scratch directory is handed over to it).
    """

    prefix: tuple[str, ...]
    user: tuple[str, int, int] | None
    network_isolated: bool
    pid_namespace: bool
    description: str
    owner: tuple[int, int] | None = None


def resolve_user(run_as: str | None) -> tuple[str, int, int] | None:
    """The ``(name, uid, gid)`` to drop to, or None to keep the current user."""
    if run_as is None:
        return None
    if run_as == RUN_AS_AUTO:
        if os.geteuid() != 0:
            return None
        run_as = "nobody"
    entry = pwd.getpwnam(run_as)
    if entry.pw_uid == os.geteuid():
        return None
    return entry.pw_name, entry.pw_uid, entry.pw_gid


_PROBES: dict[tuple[bool, str | None], Isolation] = {}


def switch_user(argv: Sequence[str], user: tuple[str, int, int] | None) -> tuple[list[str], dict[str, object]]:
    """Run ``argv`` as ``user``: through ``setpriv`` where it exists, else with Popen's ``user``/``group``.

    ``setpriv`` keeps the parent's ``fork`` out of it: Popen can then use ``vfork``, which
    runs no ``pthread_atfork`` handlers. That matters in the server, where gRPC's handlers
    restart its threads in a forked child, and the child can crash before it execs.
    """
    if user is None:
        return list(argv), {}
    setpriv = shutil.which("setpriv", path=DEFAULT_PATH)
    if setpriv:
        return [setpriv, f"--reuid={user[1]}", f"--regid={user[2]}", "--clear-groups", "--", *argv], {}
    return list(argv), {"user": user[1], "group": user[2], "extra_groups": []}


async def _works(argv: Sequence[str], user: tuple[str, int, int] | None) -> bool:
    argv, kwargs = switch_user(argv, user)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            cwd="/",
            env={"PATH": DEFAULT_PATH},
            **kwargs,  # type: ignore[arg-type]
        )
    except OSError:
        return False
    try:
        return await asyncio.wait_for(proc.wait(), 10) == 0
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return False


def _init() -> tuple[str, ...]:
    return ("/bin/sh", "-c", INIT_SHELL, "arena-init")


async def probe_isolation(limits: Limits) -> Isolation:
    """Find the strongest isolation that works here for ``limits`` (cached per process)."""
    user = resolve_user(limits.run_as)
    key = (limits.network, None if user is None else user[0])
    cached = _PROBES.get(key)
    if cached is not None:
        return cached
    who = "the server's user" if user is None else f"user {user[0]} (uid {user[1]})"
    unshare = shutil.which("unshare", path=DEFAULT_PATH)
    setpriv = shutil.which("setpriv", path=DEFAULT_PATH)
    net = [] if limits.network else ["--net"]
    net_words = "network allowed" if limits.network else "no network (empty network namespace)"
    found: Isolation | None = None
    if unshare:
        inner_uid, inner_gid = (os.geteuid(), os.getegid()) if user is None else (user[1], user[2])
        inner = [f"--map-user={inner_uid}", f"--map-group={inner_gid}"]
        userns = (unshare, "--user", *inner, *net, "--pid", "--fork", "--kill-child", "--", *_init())
        if await _works([*userns, "true"], user):
            found = Isolation(
                userns,
                user,
                not limits.network,
                True,
                f"{net_words}; own PID namespace; {who} in a user namespace without capabilities",
                None if user is None else (user[1], user[2]),
            )
        elif os.geteuid() == 0:
            rootns: tuple[str, ...] = (unshare, *net, "--pid", "--fork", "--kill-child", "--")
            if user is not None and setpriv:
                rootns += (setpriv, f"--reuid={user[1]}", f"--regid={user[2]}", "--clear-groups", "--")
            rootns += _init()
            if (user is None or setpriv) and await _works([*rootns, "true"], None):
                found = Isolation(
                    rootns,
                    None,
                    not limits.network,
                    True,
                    f"{net_words}; own PID namespace; {who}",
                    None if user is None else (user[1], user[2]),
                )
    if found is None:
        found = Isolation(
            (),
            user,
            False,
            False,
            f"network NOT isolated (no usable unshare here); no PID namespace; {who}",
            None if user is None else (user[1], user[2]),
        )
    _PROBES[key] = found
    return found


@dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to start one sandboxed bot process."""

    argv: tuple[str, ...]
    cwd: str
    env: dict[str, str]
    popen_kwargs: dict[str, object] = field(default_factory=dict)
    preexec: Callable[[], None] | None = None
    notes: tuple[str, ...] = ()


def bot_environment(home: str, extra: Mapping[str, str] = {}) -> dict[str, str]:
    """A scrubbed environment: a fixed PATH, HOME and TMPDIR in the bot's scratch dir, and ``extra``."""
    env = {"PATH": DEFAULT_PATH, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    env.update(extra)
    return env


def build_launch(
    command: Sequence[str], cwd: str, env: dict[str, str], limits: Limits, isolation: Isolation
) -> LaunchSpec:
    """The argv and options that start ``command`` under ``limits`` with ``isolation``."""
    prlimit = shutil.which("prlimit", path=DEFAULT_PATH)
    argv: list[str] = list(isolation.prefix)
    preexec: Callable[[], None] | None = None
    if prlimit:
        argv += [prlimit, *limits.prlimit_args(), "--"]
        how = "prlimit"
    else:
        preexec = limits.setrlimits
        how = "setrlimit"
    argv += list(command)
    argv, kwargs = switch_user(argv, isolation.user)
    kwargs["start_new_session"] = True
    notes = (f"isolation: {isolation.description}", f"limits ({how}): {limits.describe()}")
    return LaunchSpec(tuple(argv), cwd, env, kwargs, preexec, notes)
