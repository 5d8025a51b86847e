"""Process control for subprocess bots: start a bot program sandboxed, wire its pipes, stop and reap it.

:class:`BotProgram` says how to run a bot (command, framing, working directory,
limits). :class:`BotProcess` is one run of it: started through the sandbox
(:mod:`arena_server.seats.sandbox`) in its own process group, its stdout and
stderr handed to callbacks as they arrive (:class:`BotPipes`, which reads
stdout and writes stdin on the raw descriptors and notes when each stdout
chunk was read from the pipe, so a bot is never charged for the server's own
queueing), stopped by closing stdin, a short grace, then SIGKILL to the whole
group and a reap, so no zombie is left. stderr goes into a :class:`CappedLog`.
The protocol spoken over the pipes is the seat's
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
    """The process's pipes: stdout and stdin on raw non-blocking descriptors, stderr on asyncio's pipe.

    A move's bytes take the shortest path the event loop offers. stdout is
    read with ``os.read`` in a ``loop.add_reader`` callback, which hands each
    chunk to ``on_stdout`` with the moment it was read (no pipe transport, no
    protocol hop, no reader task). stdin is written with ``os.write`` straight
    from the caller while nothing is queued; what the pipe does not take at once
    waits in a backlog that a ``loop.add_writer`` callback drains, in order.
    stderr is not on the move path and keeps asyncio's pipe transport, which
    also watches the process's exit.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        stdin_fd: int,
        stdout_fd: int,
        on_stdout: Callable[[bytes, float | None], None],
        on_stdout_eof: Callable[[], None],
        on_stderr: Callable[[bytes], None],
    ) -> None:
        super().__init__(limit=1 << 16, loop=loop)
        self.output_closed = asyncio.Event()
        """Set when both stdout and stderr have reached their end (everything the bot wrote was seen)."""
        self._open_outputs = 2
        self._event_loop = loop
        self._stdin = stdin_fd
        """The write end of the bot's stdin (non-blocking), or -1 once closed."""
        self._stdout = stdout_fd
        """The read end of the bot's stdout (non-blocking), or -1 once closed."""
        self._on_stdout = on_stdout
        self._on_stdout_eof = on_stdout_eof
        self._on_stderr = on_stderr
        self._backlog = bytearray()
        """Bytes written to stdin that the pipe has not taken yet."""
        self._stdin_closing = False
        """stdin was closed by the server: the backlog is still written, then the descriptor is closed."""
        self.stdin_lost = False
        """The bot's side of stdin went away (it closed it or exited), seen by a failed write or the loop."""

    def attach(self) -> None:
        """Start reading stdout and watching stdin (once the process runs)."""
        loop = self._event_loop
        os.set_blocking(self._stdin, False)
        os.set_blocking(self._stdout, False)
        loop.add_reader(self._stdout, self._read_stdout)
        # A pipe's write end turns readable (an error) when its read end is closed: the bot dropped its stdin.
        loop.add_reader(self._stdin, self._stdin_gone)

    # -- stdin ------------------------------------------------------------------------------------

    @property
    def stdin_open(self) -> bool:
        """Whether the server may still write to the bot's stdin."""
        return self._stdin >= 0 and not self._stdin_closing

    @property
    def backlog(self) -> int:
        """Bytes written to stdin that wait for the bot to read them."""
        return len(self._backlog)

    def write(self, data: bytes) -> bool:
        """Write ``data`` to stdin; False when more than :data:`STDIN_BACKLOG_LIMIT` bytes wait for the bot."""
        fd = self._stdin
        if fd < 0 or self._stdin_closing:
            return True
        backlog = self._backlog
        if backlog:
            backlog += data
            return len(backlog) <= STDIN_BACKLOG_LIMIT
        try:
            written = os.write(fd, data)
        except (BlockingIOError, InterruptedError):
            written = 0
        except OSError:  # EPIPE and the like: the bot is gone; its exit is reported by the stdout side
            self._stdin_gone()
            return True
        if written == len(data):
            return True
        backlog += memoryview(data)[written:]
        self._event_loop.add_writer(fd, self._flush_stdin)
        return len(backlog) <= STDIN_BACKLOG_LIMIT

    def _flush_stdin(self) -> None:
        fd = self._stdin
        backlog = self._backlog
        try:
            written = os.write(fd, backlog)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._stdin_gone()
            return
        del backlog[:written]
        if not backlog:
            self._event_loop.remove_writer(fd)
            if self._stdin_closing:
                self._close_stdin()

    def _stdin_gone(self) -> None:
        """The bot's end of stdin went away (a failed write, or the loop saw it): stop writing to it."""
        self.stdin_lost = True
        self._close_stdin()

    def close_stdin(self) -> None:
        """Close stdin once the backlog is written (at once when nothing waits)."""
        if self._stdin < 0:
            return
        self._stdin_closing = True
        if not self._backlog:
            self._close_stdin()

    def _close_stdin(self) -> None:
        fd = self._stdin
        if fd < 0:
            return
        self._stdin = -1
        self._stdin_closing = True
        self._backlog.clear()
        loop = self._event_loop
        if not loop.is_closed():
            loop.remove_writer(fd)
            loop.remove_reader(fd)
        os.close(fd)

    # -- stdout -----------------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        try:
            data = os.read(self._stdout, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self._on_stdout(data, time.perf_counter())
            return
        self._close_stdout()
        self._on_stdout_eof()
        self._output_ended()

    def _close_stdout(self) -> bool:
        fd = self._stdout
        if fd < 0:
            return False
        self._stdout = -1
        if not self._event_loop.is_closed():
            self._event_loop.remove_reader(fd)
        os.close(fd)
        return True

    def _output_ended(self) -> None:
        self._open_outputs -= 1
        if not self._open_outputs:
            self.output_closed.set()

    def close(self) -> None:
        """Drop both descriptors at once (the process is gone or being killed; unsent bytes are dropped)."""
        self._close_stdin()
        if self._close_stdout():
            self._output_ended()

    # -- stderr (asyncio's pipe transport) ------------------------------------------------------

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        assert isinstance(data, bytes)
        if fd == 2:
            self._on_stderr(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 2:
            self._output_ended()
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
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: BotPipes(loop, stdin_write, stdout_read, on_stdout, on_stdout_eof, on_stderr),
                *spec.argv,
                stdin=stdin_read,
                stdout=stdout_write,
                stderr=asyncio.subprocess.PIPE,
                cwd=spec.cwd,
                env=spec.env,
                preexec_fn=spec.preexec,
                **spec.popen_kwargs,  # type: ignore[arg-type]
            )
        except BaseException as exc:
            for fd in (stdin_write, stdout_read):
                os.close(fd)
            if isinstance(exc, OSError):
                return f"could not be started: {exc}"
            raise
        finally:
            for fd in (stdin_read, stdout_write):  # the bot's ends: only the bot holds them now
                os.close(fd)
        self.proc = proc = asyncio.subprocess.Process(transport, protocol, loop)
        protocol.attach()
        self.pipes = protocol
        self.tasks = [asyncio.ensure_future(self._watch_exit(proc))]
        return None

    @property
    def writable(self) -> bool:
        """Whether the bot's stdin is open."""
        pipes = self.pipes
        return pipes is not None and pipes.stdin_open

    def write(self, data: bytes) -> bool:
        """Write to the bot's stdin; False when more than :data:`STDIN_BACKLOG_LIMIT` bytes wait for it."""
        pipes = self.pipes
        return True if pipes is None else pipes.write(data)

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
        pipes = self.pipes
        if pipes is not None:
            pipes.close_stdin()
        if graceful and proc.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.exited.wait(), self.program.exit_grace)
        still_running = self.returncode is None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.returncode is None:
            # os.kill, not proc.kill: Popen.kill first polls, which reaps a child that has just died, and
            # asyncio's child watcher then logs "Unknown child process pid" and reports exit status 255.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.exited.wait(), 5.0)
        # The pipes normally end at once; a descendant that escaped the group could hold them open.
        if pipes is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(pipes.output_closed.wait(), 1.0)
        _done, pending = await asyncio.wait(self.tasks, timeout=1.0) if self.tasks else (set(), set())
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
        transport: Any = getattr(proc, "_transport", None)
        if transport is not None:
            transport.close()
        if pipes is not None:
            pipes.close()
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
