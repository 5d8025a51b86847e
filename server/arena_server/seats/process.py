"""Process control for subprocess bots: start a bot program sandboxed, wire its pipes, stop and reap it.

:class:`BotProgram` says how to run a bot (command, framing, working directory,
limits). :class:`BotProcess` is one run of it: started through the sandbox
(:mod:`arena_server.seats.sandbox`) in its own process group, its stdout and
stderr handed to callbacks as they arrive (:class:`BotPipes`, which also notes
when each stdout chunk was read from the pipe, so a bot is never charged for
the server's own queueing), stopped by closing stdin, a short grace, then
SIGKILL to the whole group and a reap, so no zombie is left. stderr goes into
a :class:`CappedLog`. The protocol spoken over the pipes is the seat's
business (:mod:`arena_server.seats.subprocess_seat`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import tempfile
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arena_server.seats.framing import DEFAULT_MAX_MESSAGE_BYTES, Framing
from arena_server.seats.sandbox import (
    EXIT_REPORT,
    LaunchSpec,
    Limits,
    bot_environment,
    build_launch,
    probe_isolation,
)

STDIN_BACKLOG_LIMIT = 4 << 20
"""Bytes the server may have queued for a bot's stdin before deciding the bot does not read it."""


@dataclass(frozen=True)
class BotProgram:
    """How to run a subprocess bot: everything a registered bot needs to become a seat.

    Attributes:
        command: A shell command line (run with ``/bin/sh -c``) or an argv list (run directly).
        framing: ``json`` (JSON lines) or ``proto`` (length-delimited protobuf).
        workdir: The bot's working directory (its files); a fresh empty one when None.
            It must be readable by the bot's user (``nobody`` when the server is root).
        limits: Resource limits and isolation.
        env: Extra environment variables; the server's own environment is never passed on.
        startup_timeout: Seconds from starting the process to its Hello.
        exit_grace: Seconds a bot may take to exit by itself after MatchEnded.
        max_message_bytes: Largest message accepted from the bot.
        log_bytes: Size of the stderr log kept per process (head and tail are kept).
        label: What logs and reports call the program instead of its command line (a bot in a
            foreign format runs a long runner command; its label names the format and the file).
    """

    command: str | Sequence[str]
    framing: Framing = Framing.JSON
    workdir: str | Path | None = None
    limits: Limits = field(default_factory=Limits)
    env: Mapping[str, str] = field(default_factory=dict)
    startup_timeout: float = 10.0
    exit_grace: float = 0.5
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    log_bytes: int = 64 << 10
    label: str | None = None

    def argv(self) -> list[str]:
        if isinstance(self.command, str):
            return ["/bin/sh", "-c", self.command]
        return list(self.command)

    def describe(self) -> str:
        cmd = self.command if isinstance(self.command, str) else shlex.join(self.command)
        if self.label is not None:
            cmd = self.label
        return f"{cmd!r} ({self.framing} framing)"


class CappedLog:
    """A bounded text log: keeps the first and the last bytes, counts what was dropped."""

    def __init__(self, capacity: int) -> None:
        self.head_cap = capacity // 4
        self.tail_cap = capacity - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.total = 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data
        excess = len(self.tail) - self.tail_cap
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def note(self, text: str) -> None:
        """A line from the server itself, marked ``[arena]``."""
        self.write(f"[arena] {text}\n".encode())

    def text(self) -> str:
        middle = f"\n[arena] ... {self.dropped} bytes of stderr dropped ...\n".encode() if self.dropped else b""
        return (bytes(self.head) + middle + bytes(self.tail)).decode("utf-8", "replace")

    def last_line(self, skip_notes: bool = True, limit: int = 200) -> str:
        """The last non-empty line the bot wrote (server notes skipped)."""
        for line in reversed(self.text().splitlines()):
            line = line.strip()
            if line and not (skip_notes and line.startswith("[arena]")):
                return line if len(line) <= limit else line[: limit - 3] + "..."
        return ""


def describe_exit(returncode: int | None, limits: Limits, log: str = "") -> str:
    """Words for how a process ended (``log``: its stderr log, where the namespace init reports signals)."""
    if returncode is None:
        return "closed its stdout"
    number = -returncode
    if returncode > 128 and EXIT_REPORT in log:
        reported = log.rsplit(EXIT_REPORT, 1)[1].split(maxsplit=1)[0]
        if reported.isdigit():
            number = int(reported)
    if number <= 0:
        return f"exited with status {returncode}"
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    hint = ""
    if name == "SIGKILL":
        hint = (
            f" (a resource limit: CPU time {limits.cpu_seconds}s or memory, or killed from outside)"
            if limits.cpu_seconds
            else ""
        )
    elif name == "SIGXCPU":
        hint = f" (it used up its CPU time limit of {limits.cpu_seconds}s)"
    elif name == "SIGXFSZ":
        hint = " (it wrote a file larger than its file size limit)"
    elif name == "SIGSEGV":
        hint = " (a segmentation fault)"
    return f"was killed by {name}{hint}"


class BotPipes(asyncio.subprocess.SubprocessStreamProtocol):
    """The process's pipes: stdout and stderr go straight to callbacks as they arrive.

    stdin keeps asyncio's StreamWriter. Reading stdout here, in the event loop's
    own callback, saves a reader task, a StreamReader buffer and an await per
    message on every move.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_stdout: Callable[[bytes, float | None], None],
        on_stdout_eof: Callable[[], None],
        on_stderr: Callable[[bytes], None],
    ) -> None:
        super().__init__(limit=1 << 16, loop=loop)
        self.output_closed = asyncio.Event()
        """Set when both stdout and stderr have reached their end (everything the bot wrote was seen)."""
        self._open_outputs = 2
        self._on_stdout = on_stdout
        self._on_stdout_eof = on_stdout_eof
        self._on_stderr = on_stderr
        self._read_at: deque[float] = deque()

    def stamp_reads(self, transport: asyncio.SubprocessTransport) -> None:
        """Note the moment each stdout chunk is read from the pipe.

        asyncio hands pipe data to :meth:`pipe_data_received` one loop
        iteration after reading it; under load that iteration can come much
        later, and the bot must not be charged for it.
        """
        pipe = transport.get_pipe_transport(1)
        proto: Any = pipe.get_protocol() if pipe is not None else None
        if proto is None:
            return
        forward = proto.data_received
        stamps = self._read_at

        def data_received(data: bytes) -> None:
            stamps.append(time.perf_counter())
            forward(data)

        proto.data_received = data_received

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        assert isinstance(data, bytes)
        if fd == 1:
            self._on_stdout(data, self._read_at.popleft() if self._read_at else None)
        elif fd == 2:
            self._on_stderr(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self._on_stdout_eof()
        if fd in (1, 2):
            self._open_outputs -= 1
            if not self._open_outputs:
                self.output_closed.set()
        super().pipe_connection_lost(fd, exc)


class BotProcess:
    """One run of a :class:`BotProgram` at a time (a seat starts a new run after a crash or a match).

    Attributes:
        log: Where the server's notes and the bot's stderr go (the seat gives a fresh one per run).
        proc: The running process, or None.
        pipes: Its stdout/stderr protocol, or None once stopped.
        returncode: How the last run ended (None while running or when killed before it was seen).
        stopping: True from the moment :meth:`stop` begins (output after that is not the bot's fault).
        scratch: A private temporary directory reused by every run of this seat, removed by
            :meth:`remove_scratch` (None where the sandbox gives the bot a tmpfs of its own).
    """

    def __init__(self, program: BotProgram, log: CappedLog) -> None:
        self.program = program
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None
        self.pipes: BotPipes | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.returncode: int | None = None
        self.exited = asyncio.Event()
        self.stopping = False
        self.scratch: str | None = None

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and not self.stopping

    async def launch_spec(self) -> LaunchSpec:
        """The sandboxed argv, working directory and environment of the next run."""
        program = self.program
        limits = program.limits
        isolation = await probe_isolation(limits)
        if limits.require_isolation and not isolation.network_isolated and not limits.network:
            raise RuntimeError(f"network isolation is required but not available here ({isolation.description})")
        workdir = str(program.workdir) if program.workdir is not None else None
        scratch = None
        if isolation.filesystem != "newroot":  # otherwise the bot's /tmp is a tmpfs that dies with it
            if self.scratch is None:
                self.scratch = tempfile.mkdtemp(prefix="arena-bot-")
            scratch = self.scratch
            if isolation.owner is not None:
                os.chown(scratch, *isolation.owner)
        env = bot_environment(scratch or "/tmp", program.env)
        return build_launch(program.argv(), workdir, env, limits, isolation, workdir=workdir, scratch=scratch)

    async def start(
        self,
        on_stdout: Callable[[bytes, float | None], None],
        on_stdout_eof: Callable[[], None],
        on_stderr: Callable[[bytes], None],
    ) -> str | None:
        """Start a run with its output wired to the callbacks; the reason it could not start, or None."""
        self.returncode = None
        self.exited = asyncio.Event()
        self.stopping = False
        try:
            spec = await self.launch_spec()
        except (OSError, RuntimeError, KeyError) as exc:
            return f"could not be started: {exc}"
        for note in spec.notes:
            self.log.note(note)
        self.log.note(f"command: {self.program.describe()} in {spec.cwd}")
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: BotPipes(loop, on_stdout, on_stdout_eof, on_stderr),
                *spec.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=spec.cwd,
                env=spec.env,
                preexec_fn=spec.preexec,
                **spec.popen_kwargs,  # type: ignore[arg-type]
            )
        except OSError as exc:
            return f"could not be started: {exc}"
        self.proc = proc = asyncio.subprocess.Process(transport, protocol, loop)
        protocol.stamp_reads(transport)
        self.pipes = protocol
        self.tasks = [asyncio.ensure_future(self._watch_exit(proc))]
        return None

    @property
    def writable(self) -> bool:
        """Whether the bot's stdin is open."""
        proc = self.proc
        return proc is not None and proc.stdin is not None and not proc.stdin.is_closing()

    def write(self, data: bytes) -> bool:
        """Write to the bot's stdin; False when more than :data:`STDIN_BACKLOG_LIMIT` bytes wait for it."""
        proc = self.proc
        if proc is None or proc.stdin is None or proc.stdin.is_closing():
            return True
        try:
            proc.stdin.write(data)
        except (BrokenPipeError, ConnectionResetError):
            return True
        return proc.stdin.transport.get_write_buffer_size() <= STDIN_BACKLOG_LIMIT

    def spawn_task(self, coro: Any) -> None:
        """Run ``coro`` for this run; :meth:`stop` waits for it (briefly) and cancels it."""
        self.tasks.append(asyncio.ensure_future(coro))

    async def _watch_exit(self, proc: asyncio.subprocess.Process) -> None:
        self.returncode = await proc.wait()
        self.exited.set()

    async def stop(self, graceful: bool = False) -> str | None:
        """End the run: optionally let it exit by itself, then kill its group and reap it.

        Returns how it ended, in words (None when nothing was running).
        """
        proc = self.proc
        if proc is None:
            return None
        self.stopping = True
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        if graceful and proc.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.exited.wait(), self.program.exit_grace)
        still_running = self.returncode is None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.exited.wait(), 5.0)
        # The pipes normally end at once; a descendant that escaped the group could hold them open.
        if self.pipes is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.pipes.output_closed.wait(), 1.0)
        _done, pending = await asyncio.wait(self.tasks, timeout=1.0) if self.tasks else (set(), set())
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
        transport: Any = getattr(proc, "_transport", None)
        if transport is not None:
            transport.close()
        if still_running:
            how = "killed by the server (SIGKILL to its process group)"
        else:
            how = describe_exit(self.returncode, self.program.limits, self.log.text())
        self.log.note(f"process {proc.pid} stopped: {how}")
        self.proc = None
        self.pipes = None
        self.tasks = []
        return how

    def remove_scratch(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
