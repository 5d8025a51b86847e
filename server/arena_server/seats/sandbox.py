"""Sandboxing for subprocess bots: a private filesystem view, no network, resource limits.

What can be applied depends on the machine, so it is detected at run time (once per
process and user, :func:`probe_isolation`) and the result is written at the top of every
bot's log. From strongest to weakest:

* ``newroot``: util-linux ``unshare`` makes user, mount, PID, IPC and network namespaces
  (no root needed), and :mod:`arena_server.seats.sandbox_launcher` builds a private root holding
  only the system directories and the bot's own files (read-only) and a size-limited
  ``/tmp``, then drops to ``nobody`` in a nested user namespace and applies Landlock, a
  seccomp filter and the limits (``setrlimit``) before it execs the bot.
* ``landlock``: without user namespaces, the launcher applies the same Landlock rules to
  the host's paths (with a scratch directory removed after the match); namespaces that
  still work (as root: plain ones and ``setpriv``) are kept.
* ``none``: limits through ``prlimit``, namespaces where possible, and a log line saying
  that the filesystem is not confined (``arena serve`` then refuses uploads by default).

When the server runs as root, bots run as ``nobody`` by default; a bot never runs with
the server's privileges. Every process a bot starts lives in its PID namespace and dies
with it. Nothing here blocks the event loop: the probe runs through asyncio subprocesses.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import glob
import os
import pwd
import resource
import shlex
import shutil
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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

LAUNCHER_SOURCE = (Path(__file__).parent / "sandbox_launcher.py").read_text()
"""The launcher, passed to ``python3 -I -S -c`` so that the bot's user need not read any server file."""

RUN_AS_AUTO = "auto"
"""``Limits.run_as`` value: ``nobody`` when the server is root, otherwise the server's own user."""


@dataclass(frozen=True)
class Limits:
    """Resource limits and isolation for one bot process. ``None`` means "no limit".

    Attributes:
        cpu_seconds: CPU time of the bot process (and each of its children) over its
            whole life; the per-move clock is enforced separately by the referee.
        memory_bytes: Memory of each bot process, applied both as ``RLIMIT_DATA`` (heap,
            private mappings) and ``RLIMIT_AS`` (every mapping, so shared anonymous
            mappings, ``/dev/zero`` and SysV segments count too). Node needs at least
            768 MiB of address space to start; a Java bot needs ``-Xmx`` and
            ``-XX:CompressedClassSpaceSize`` small enough to fit.
        processes: Processes and threads (``RLIMIT_NPROC``); per bot inside a user
            namespace, otherwise counted over everything its user runs.
        file_size_bytes: Largest file the bot may write.
        open_files: Open file descriptors.
        scratch_bytes: Size of the bot's private ``/tmp`` (also its ``/dev/shm`` and
            ``HOME``), a tmpfs that dies with the bot's namespaces.
        network: Allow network access (off: an empty network namespace, where available).
        run_as: User name to run as: ``"auto"`` (``nobody`` when the server is root,
            else unchanged), a user name, or None to keep the server's user.
        require_isolation: Refuse to start a bot when the network cannot be cut off.
        writable: Extra host directories the bot may write (for trusted local bots and
            tests; never set for submitted bots).
        readable: Extra host directories every bot may read, such as a toolchain under
            ``/opt`` (never put the database or the data directory here).
    """

    cpu_seconds: int | None = 600
    memory_bytes: int | None = 1 << 30
    processes: int | None = 128
    file_size_bytes: int | None = 64 << 20
    open_files: int | None = 256
    scratch_bytes: int = 64 << 20
    network: bool = False
    run_as: str | None = RUN_AS_AUTO
    require_isolation: bool = False
    writable: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()

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

    def rlimits(self) -> dict[str, tuple[int, int]]:
        """The limits as ``{RLIMIT_NAME: (soft, hard)}``."""
        out = {"RLIMIT_CORE": (0, 0)}
        if self.cpu_seconds is not None:
            # soft limit sends SIGXCPU; the hard limit one second later is SIGKILL
            out["RLIMIT_CPU"] = (self.cpu_seconds, self.cpu_seconds + 1)
        if self.memory_bytes is not None:
            out["RLIMIT_DATA"] = (self.memory_bytes, self.memory_bytes)
            out["RLIMIT_AS"] = (self.memory_bytes, self.memory_bytes)
        if self.processes is not None:
            out["RLIMIT_NPROC"] = (self.processes, self.processes)
        if self.file_size_bytes is not None:
            out["RLIMIT_FSIZE"] = (self.file_size_bytes, self.file_size_bytes)
        if self.open_files is not None:
            out["RLIMIT_NOFILE"] = (self.open_files, self.open_files)
        return out

    def prlimit_args(self) -> list[str]:
        names = {"RLIMIT_CORE": "core", "RLIMIT_CPU": "cpu", "RLIMIT_DATA": "data", "RLIMIT_AS": "as"}
        names |= {"RLIMIT_NPROC": "nproc", "RLIMIT_FSIZE": "fsize", "RLIMIT_NOFILE": "nofile"}
        return [f"--{names[k]}={soft}:{hard}" for k, (soft, hard) in self.rlimits().items()]

    def setrlimits(self) -> None:
        """Apply the limits to the calling process (used in the child when prlimit is missing)."""
        for name, value in self.rlimits().items():
            resource.setrlimit(getattr(resource, name), value)


@dataclass(frozen=True)
class Isolation:
    """How bots can be isolated on this machine (the result of :func:`probe_isolation`).

    Attributes:
        prefix: argv placed before the launcher (or the init shell) and the bot's command.
        user: ``(name, uid, gid)`` the first program is started as, or None.
        network_isolated: Whether the bot has no network.
        pid_namespace: Whether the bot's processes live in their own PID namespace.
        description: One line for the bot's log.
        owner: ``(uid, gid)`` the bot finally runs as, when it differs from the server's
            (its scratch directory is handed over to it).
        filesystem: ``newroot`` (a private root with only the allowed paths, plus Landlock
            where the kernel has it), ``landlock`` (Landlock rules on the host's paths
            only) or ``none`` (the bot sees what its user may read).
        launcher: The interpreter that runs :mod:`arena_server.seats.sandbox_launcher`, or None.
        known_notes: What the launcher reported at the probe (not repeated in every log).
    """

    prefix: tuple[str, ...]
    user: tuple[str, int, int] | None
    network_isolated: bool
    pid_namespace: bool
    description: str
    owner: tuple[int, int] | None = None
    filesystem: str = "none"
    launcher: str | None = None
    known_notes: tuple[str, ...] = ()

    @property
    def filesystem_confined(self) -> bool:
        """Whether the bot is kept away from the database, the data directory and other bots."""
        return self.filesystem != "none"


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


async def _run(argv: Sequence[str], user: tuple[str, int, int] | None) -> tuple[bool, bytes]:
    argv, kwargs = switch_user(argv, user)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            cwd="/",
            env={"PATH": DEFAULT_PATH},
            **kwargs,  # type: ignore[arg-type]
        )
    except OSError:
        return False, b""
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 10)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)  # not proc.kill, which may reap the child behind asyncio's back
        await proc.wait()
        return False, b""
    return proc.returncode == 0, out


async def _works(argv: Sequence[str], user: tuple[str, int, int] | None) -> bool:
    return (await _run(argv, user))[0]


def _init() -> tuple[str, ...]:
    return ("/bin/sh", "-c", INIT_SHELL, "arena-init")


SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Host directories every bot may read (and execute from): the system's programs and libraries.

``/opt`` is left out (servers keep their own data there too); add a toolchain installed
there with ``Limits(readable=("/opt/toolchain",))``.
"""

ETC_PATHS = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "localtime",
    "timezone",
    "os-release",
    "mime.types",
    "ssl",
    "ca-certificates",
    "java-*",
    "python3*",
)
"""The parts of ``/etc`` a bot may read: what the dynamic loader and the usual runtimes need."""

_NEWROOT_PARENTS = ("/mnt", "/media", "/srv", "/home", "/var", "/opt", "/tmp")


def system_paths() -> list[str]:
    """The host paths every bot may read: system directories, a minimal /etc, this Python's prefixes."""
    paths = [p for p in SYSTEM_PATHS if os.path.lexists(p)]
    for pattern in ETC_PATHS:
        paths += sorted(glob.glob(os.path.join("/etc", pattern)))
    for prefix in {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}:
        real = os.path.realpath(prefix)
        if real != "/" and not any(real == p or real.startswith(p + "/") for p in paths):
            paths.append(real)
    return paths


def bot_paths(command: Sequence[str], workdir: str | None, env: Mapping[str, str] = {}) -> list[str]:
    """The bot's own files, readable by it: its working directory.

    Without a working directory (a local command such as ``python3 /path/bot.py``), the
    directories of the absolute paths named in the command (also inside a shell command
    line such as ``sh -c "python3 /path/bot.py"``). A submitted bot always has
    its own working directory, so an uploader cannot name other paths this way. The
    directories in ``PYTHONPATH`` and ``NODE_PATH`` of the environment the operator gave
    (never set for submitted bots) are added too.
    """
    out: list[str] = []
    for var in ("PYTHONPATH", "NODE_PATH"):
        for entry in env.get(var, "").split(os.pathsep):
            if entry.startswith("/") and os.path.isdir(entry):
                out.append(os.path.realpath(entry))
    if workdir is not None:
        return [os.path.realpath(workdir), *out]
    words: list[str] = []
    for arg in command:
        try:
            words += shlex.split(arg) if " " in arg else [arg]
        except ValueError:
            words.append(arg)
    for arg in words:
        if not arg.startswith("/") or not os.path.exists(arg):
            continue
        folder = arg if os.path.isdir(arg) else os.path.dirname(arg)
        real = os.path.realpath(folder)
        if real != "/" and real not in out:
            out.append(real)
    return out


def _newroot_parent(paths: Sequence[str]) -> str:
    for parent in _NEWROOT_PARENTS:
        if os.path.isdir(parent) and not any(p == parent or p.startswith(parent + "/") for p in paths):
            return parent
    return "/tmp"


def launcher_config(
    mode: str,
    read: Sequence[str],
    write: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
    limits: Limits,
    known: Sequence[str] = (),
    probe: bool = False,
    here: str | None = None,
) -> str:
    """The configuration :mod:`arena_server.seats.sandbox_launcher` reads from its first argument (a Python literal)."""
    return repr(
        {
            "mode": mode,
            "root": _newroot_parent([*read, *write, *([here] if here else [])]),
            "read": list(read),
            "write": list(write),
            "tmp_bytes": limits.scratch_bytes,
            "cwd": cwd,
            "env": dict(env),
            "rlimits": limits.rlimits(),
            "known": list(known),
            "probe": probe,
            "here": here,
            "network": limits.network,
        }
    )


def _launcher_argv(python: str, config: str) -> list[str]:
    return [python, "-I", "-S", "-c", LAUNCHER_SOURCE, config]


def _python_candidates() -> list[str]:
    out = []
    for path in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        if path and os.path.exists(path) and path not in out:
            out.append(path)
    return out


async def _probe_launcher(
    prefix: Sequence[str], mode: str, limits: Limits, user: tuple[str, int, int] | None
) -> tuple[str, list[str], list[str]] | None:
    """Run the launcher in probe mode behind ``prefix``: ``(python, pieces that worked, notes)`` or None."""
    config = launcher_config(mode, system_paths(), [], "/", {"PATH": DEFAULT_PATH}, limits, probe=True)
    for python in _python_candidates():
        ok, out = await _run([*prefix, *_launcher_argv(python, config)], user)
        if not ok:
            continue
        try:
            report = ast.literal_eval(out.decode().strip().splitlines()[-1])
        except (ValueError, SyntaxError, IndexError):
            continue
        return python, list(report["done"]), list(report["notes"])
    return None


async def landlock_isolation(base: Isolation, limits: Limits) -> Isolation | None:
    """``base`` plus Landlock on the host's paths (no mount namespace), or None where Landlock fails.

    The fallback where user namespaces are refused: the launcher runs behind ``base.prefix``
    and confines the bot to the same read-only paths and its scratch directory.
    """
    probed = await _probe_launcher(base.prefix, "landlock", limits, base.user)
    if probed is None or not any(p.startswith("landlock") for p in probed[1]):
        return None
    python, done, notes = probed
    degraded = f"; degraded: {'; '.join(notes)}" if notes else ""
    return Isolation(
        base.prefix,
        base.user,
        base.network_isolated,
        base.pid_namespace,
        f"{base.description}; no mount namespace: Landlock alone confines the filesystem ({', '.join(done)}){degraded}",
        base.owner,
        "landlock",
        python,
        tuple(notes),
    )


async def probe_isolation(limits: Limits) -> Isolation:
    """Find the strongest isolation that works here for ``limits`` (cached per process)."""
    user = resolve_user(limits.run_as)
    key = (limits.network, None if user is None else user[0])
    cached = _PROBES.get(key)
    if cached is not None:
        return cached
    who = "the server's user" if user is None else f"user {user[0]} (uid {user[1]})"
    owner = None if user is None else (user[1], user[2])
    unshare = shutil.which("unshare", path=DEFAULT_PATH)
    setpriv = shutil.which("setpriv", path=DEFAULT_PATH)
    net = [] if limits.network else ["--net"]
    net_words = "network allowed" if limits.network else "no network (empty network namespace)"
    found: Isolation | None = None
    if unshare:
        full = (unshare, "--user", "--map-root-user", "--mount", "--ipc", *net, "--pid", "--fork", "--kill-child", "--")
        probed = await _probe_launcher(full, "newroot", limits, user)
        if probed is not None and "newroot" in probed[1]:
            python, done, notes = probed
            pieces = ", ".join(done)
            extra = f"; degraded: {'; '.join(notes)}" if notes else ""
            found = Isolation(
                full,
                user,
                not limits.network,
                True,
                f"{net_words}; own PID namespace; own mount and IPC namespaces; private root with read-only "
                f"system and bot files, {limits.scratch_bytes >> 20} MiB /tmp; {who} outside, nobody inside "
                f"({pieces}){extra}",
                owner,
                "newroot",
                python,
                tuple(notes),
            )
    if found is None and unshare:
        inner_uid, inner_gid = (os.geteuid(), os.getegid()) if user is None else (user[1], user[2])
        inner = [f"--map-user={inner_uid}", f"--map-group={inner_gid}"]
        userns = (unshare, "--user", *inner, *net, "--pid", "--fork", "--kill-child", "--")
        if await _works([*userns, *_init(), "true"], user):
            found = Isolation(userns, user, not limits.network, True, f"{net_words}; own PID namespace; {who}", owner)
        elif os.geteuid() == 0:
            rootns: tuple[str, ...] = (unshare, *net, "--pid", "--fork", "--kill-child", "--")
            if user is not None and setpriv:
                rootns += (setpriv, f"--reuid={user[1]}", f"--regid={user[2]}", "--clear-groups", "--")
            if (user is None or setpriv) and await _works([*rootns, *_init(), "true"], None):
                found = Isolation(
                    rootns, None, not limits.network, True, f"{net_words}; own PID namespace; {who}", owner
                )
    if found is None:
        found = Isolation(
            (), user, False, False, f"network NOT isolated (no usable unshare here); no PID namespace; {who}", owner
        )
    if found.filesystem == "none":
        found = await landlock_isolation(found, limits) or Isolation(
            found.prefix,
            found.user,
            found.network_isolated,
            found.pid_namespace,
            f"{found.description}; filesystem NOT confined (neither mount namespaces nor Landlock work here)",
            owner,
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
    command: Sequence[str],
    cwd: str | None,
    env: dict[str, str],
    limits: Limits,
    isolation: Isolation,
    workdir: str | None = None,
    scratch: str | None = None,
) -> LaunchSpec:
    """The argv and options that start ``command`` under ``limits`` with ``isolation``.

    Args:
        command: The bot's argv.
        cwd: Its working directory, or None for its scratch directory.
        env: Its environment (``HOME`` and ``TMPDIR`` are set to the scratch directory).
        limits: Resource limits.
        isolation: What :func:`probe_isolation` found.
        workdir: The bot's own files (read-only to it), if any.
        scratch: A host directory to write in; needed unless ``isolation.filesystem`` is
            ``newroot``, where the bot writes in a private ``/tmp`` that dies with it.
    """
    notes = [f"isolation: {isolation.description}"]
    argv: list[str] = list(isolation.prefix)
    preexec: Callable[[], None] | None = None
    if isolation.launcher is not None:
        read = [*system_paths(), *limits.readable, *bot_paths(command, workdir, env)]
        if isolation.filesystem == "newroot":
            home = "/tmp"
            write = list(limits.writable)
        else:
            assert scratch is not None
            home = scratch
            write = [scratch, *limits.writable]
        env = {**env, "HOME": home, "TMPDIR": home}
        mode = isolation.filesystem
        here = os.path.realpath(workdir) if workdir is not None else None
        if here is not None and here in read:
            read.remove(here)  # bound from the launcher's working directory, reachable even when its parents are not
        config = launcher_config(mode, read, write, cwd or home, env, limits, isolation.known_notes, here=here)
        argv += [*_launcher_argv(isolation.launcher, config), *_init(), *command]
        notes.append(f"limits (setrlimit): {limits.describe()}")
        cwd = here or "/"
    else:
        prlimit = shutil.which("prlimit", path=DEFAULT_PATH)
        if isolation.pid_namespace:
            argv += _init()
        if prlimit:
            argv += [prlimit, *limits.prlimit_args(), "--"]
            how = "prlimit"
        else:
            preexec = limits.setrlimits
            how = "setrlimit"
        argv += list(command)
        assert scratch is not None
        cwd = cwd or scratch
        env = {**env, "HOME": scratch, "TMPDIR": scratch}
        notes.append(f"limits ({how}): {limits.describe()}")
    argv, kwargs = switch_user(argv, isolation.user)
    kwargs["start_new_session"] = True
    return LaunchSpec(tuple(argv), cwd, env, kwargs, preexec, tuple(notes))
