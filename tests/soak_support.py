"""Real processes for restart and soak tests.

:class:`ServerProcess` is ``arena serve`` as a subprocess that can be stopped
(any signal), killed and started again on the same port and database.
:class:`ScriptProcess` runs a Python script (typically an SDK bot written by
:func:`write_sdk_bot`) and collects its output lines as they arrive, so a test
can wait for "connected", "started" or "result" events with a timeout.
:func:`closed_port` gives a port on which nothing listens.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any


def children(pid: int) -> list[int]:
    """The pids of ``pid``'s child processes (a server's workers)."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def closed_port() -> int:
    """A port nothing listens on: bind a socket, note its port, close it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Lines:
    """The lines of a pipe, read by a background thread, with their arrival times."""

    def __init__(self, pipe: IO[str]) -> None:
        self.lines: list[tuple[float, str]] = []
        self._changed = threading.Condition()
        self._eof = False
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: IO[str]) -> None:
        with pipe:
            for line in pipe:
                with self._changed:
                    self.lines.append((time.monotonic(), line.rstrip("\n")))
                    self._changed.notify_all()
        with self._changed:
            self._eof = True
            self._changed.notify_all()

    def wait(self, predicate: Callable[[list[str]], bool], timeout: float) -> bool:
        """Wait until ``predicate(lines so far)`` holds; False on timeout or end of output without it."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                if predicate([text for _, text in self.lines]):
                    return True
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    return False
                self._changed.wait(left)

    def text(self) -> str:
        with self._changed:
            return "\n".join(text for _, text in self.lines)

    def join(self, timeout: float = 5.0) -> None:
        self._thread.join(timeout)


class ServerProcess:
    """``arena serve`` on a fixed port and database, restartable.

    Example::

        with ServerProcess(tmp_path / "arena.db") as server:
            server.start()
            ...  # bots connect to server.address
            server.stop(signal.SIGTERM)  # or server.kill()
            server.start()  # same port, same database

    Attributes:
        starts: How many times the server was started.
        log: Every output line of every run (stdout and stderr), for failure messages.
    """

    def __init__(
        self, db: Path, port: int | None = None, args: Sequence[str] = ("--no-ladder",), host: str = "127.0.0.1"
    ) -> None:
        self.db = db
        self.host = host
        self.port = port if port is not None else closed_port()
        self.args = tuple(args)
        self.proc: subprocess.Popen[str] | None = None
        self.starts = 0
        self.log: list[str] = []
        self._out: _Lines | None = None
        self._err: _Lines | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 30.0) -> float:
        """Start the server and wait until it serves; return how long that took, in seconds."""
        assert not self.running, "the server is already running"
        began = time.monotonic()
        argv = ["serve", "--no-http", "--host", self.host, "--port", str(self.port), "--db", str(self.db), *self.args]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "arena_server.cli", *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._out, self._err = _Lines(self.proc.stdout), _Lines(self.proc.stderr)
        self.starts += 1
        if not self._out.wait(lambda lines: any("serving on" in line for line in lines), timeout):
            self.kill()
            raise AssertionError(f"arena serve did not start on {self.address}:\n" + "\n".join(self.log))
        return time.monotonic() - began

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Send ``sig`` and wait for the server to exit; return its exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)
            raise AssertionError(f"arena serve did not stop within {timeout:g}s of signal {sig}") from None
        self._collect()
        return code

    def kill(self) -> int:
        """SIGKILL: the server gets no chance to clean up (a crash)."""
        return self.stop(signal.SIGKILL)

    def _collect(self) -> None:
        for lines in (self._out, self._err):
            if lines is not None:
                lines.join()
                self.log.extend(text for _, text in lines.lines)
        self._out = self._err = None

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.running:
            self.kill()


class ScriptProcess:
    """A Python script (or ``arena`` command) in its own process; its output lines are collected as they come.

    Args:
        script: The script to run with this interpreter.
        args: Its arguments; with ``script=None``, the arguments of the ``arena`` CLI instead.
        stdin: ``subprocess.DEVNULL`` (default) or ``subprocess.PIPE`` (see :attr:`proc`).
    """

    def __init__(self, script: Path | None, args: Sequence[str] = (), stdin: int | None = subprocess.DEVNULL) -> None:
        program = [str(script)] if script is not None else ["-m", "arena_server.cli"]
        self.proc = subprocess.Popen(
            [sys.executable, "-u", *program, *args],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.out = _Lines(self.proc.stdout)
        self.err = _Lines(self.proc.stderr)

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The JSON event lines printed so far (see :func:`write_sdk_bot`), optionally of one kind."""
        found = []
        for _, text in list(self.out.lines):
            if text.startswith("{"):
                event = json.loads(text)
                if kind is None or event.get("event") == kind:
                    found.append(event)
        return found

    def wait_events(self, kind: str, count: int, timeout: float) -> bool:
        """Wait until at least ``count`` events of ``kind`` were printed."""

        def enough(lines: list[str]) -> bool:
            return sum(1 for line in lines if line.startswith("{") and json.loads(line).get("event") == kind) >= count

        return self.out.wait(enough, timeout)

    def interrupt(self) -> None:
        """Ctrl-C."""
        self.proc.send_signal(signal.SIGINT)

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self.out.join()
        self.err.join()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc.stdin is not None:
            self.proc.stdin.close()

    def __enter__(self) -> ScriptProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def write_sdk_bot(
    path: Path,
    address: str,
    *,
    name: str,
    opponent: str | None = None,
    game: str = "rps",
    params: Mapping[str, Any] | None = None,
    matches: int = 1,
    act_sleep: float = 0.0,
    give_up_after: float | None = 300.0,
    max_backoff: float = 30.0,
    token: str = "",
) -> Path:
    """Write an SDK bot script to ``path`` that prints one JSON line per event.

    Events: ``{"event": "connected", "name": ...}`` each time the server
    welcomes it, ``{"event": "retry", "delay": ..., "attempt": ...}`` before
    each reconnection attempt (the SDK's back-off), ``started``/``ended`` per match (``termination`` by name),
    and at the end ``{"event": "done", "results": [...]}`` (the match ids and
    terminations ``run`` returned) or ``{"event": "error", "message": ...}``
    for an :class:`~arena_client.remote.ArenaError`. It plays a random legal
    action after sleeping ``act_sleep`` seconds. Without ``opponent`` it waits
    to be seated by the server. ``token`` is a registered name's token (registered bots
    play rated ladder matches; guests never do).
    """
    path.write_text(
        textwrap.dedent(f"""
        import json, logging, random, sys, time
        from arena_client import Bot, run
        from arena_client.remote import ArenaError

        def emit(event, **fields):
            print(json.dumps({{"event": event, "t": time.monotonic(), **fields}}), flush=True)

        class Retries(logging.Handler):
            def emit(self, record):
                if hasattr(record, "retry_delay"):
                    emit("retry", delay=record.retry_delay, attempt=record.retry_attempt)

        logging.getLogger("arena_client").addHandler(Retries(logging.INFO))
        logging.getLogger("arena_client").setLevel(logging.INFO)
        logging.getLogger("arena_client").addHandler(logging.StreamHandler())  # the SDK's messages, on stderr

        class SoakBot(Bot):
            name = {name!r}
            games = ({game!r},)

            def on_match_start(self, match):
                emit("started", match_id=match.match_id)

            def act(self, turn):
                time.sleep({act_sleep!r})
                return random.choice(turn.legal_actions)

            def on_match_end(self, result):
                emit("ended", match_id=result.match_id, termination=result.termination.name)

        try:
            results = run(
                SoakBot(),
                {address!r},
                opponent={opponent!r},
                game={game!r},
                params={dict(params or {})!r},
                matches={matches!r},
                give_up_after={give_up_after!r},
                max_backoff={max_backoff!r},
                token={token!r},
                on_connect=lambda assigned: emit("connected", name=assigned),
            )
        except ArenaError as exc:
            emit("error", message=str(exc))
            sys.exit(f"soak-bot: {{exc}}")
        emit("done", results=[[r.match_id, r.termination.name] for r in results])
        """)
    )
    return path
