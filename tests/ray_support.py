"""A real Ray head for the tests that join an existing cluster (``--ray`` with ``RAY_ADDRESS``).

:func:`running_head` starts ``ray start --head --block`` in its own session and
temporary directory, waits until the head takes drivers, and stops it at the
end: SIGTERM to ``ray start``, which shuts down the processes it started; what
is left of that session after the grace period is killed. The head also gets
SIGTERM if the process that started it dies (``PR_SET_PDEATHSIG``), so a killed
test run does not leave a cluster behind.

The head has its own ``--temp-dir``: ``ray start`` records its address there
(``ray_current_cluster``), not in the machine's shared ``/tmp/ray``, where
``ray.init()`` on this machine would otherwise find it. It uses Ray's token
authentication with a token of its own, handed to the processes that join it
in ``RAY_AUTH_TOKEN`` (never written to ``~/.ray``).
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

RAY = Path(sys.executable).parent / "ray"
START_TIMEOUT = 90.0
STOP_GRACE = 40.0  # a head drains for up to 30 s after SIGTERM; an idle one takes a few


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started it exits (Linux)."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass(frozen=True)
class RayHead:
    """A running Ray head: its address (``127.0.0.1:PORT``), its CPUs, its temporary directory and its token.

    ``pid`` is the ``ray start`` process's, also the id of the session that the head's processes run in.
    """

    address: str
    cpus: int
    temp_dir: Path
    token: str
    pid: int

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with ``RAY_ADDRESS`` naming this head, and its token."""
        env = dict(os.environ if base is None else base)
        env.update(RAY_ADDRESS=self.address, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=self.token)
        return env

    def stop_soon(self) -> None:
        """Stop the head now, in a thread of its own that also reaps it; the block of :func:`running_head` waits.

        Reaped at once, ``ray start`` never lingers as a zombie child of the test run (tests that check
        that no bot process was left unreaped, such as ``test_subprocess_bad_input.py``, count those).
        """
        proc = _HEADS.get(self.pid)
        if proc is None or proc.poll() is not None:
            return
        with suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        # A blocking wait reaps it the moment it exits (a wait with a timeout polls, leaving a zombie for
        # up to 50 ms); a timer kills what is left of its session if it has not exited within the grace.
        threading.Thread(target=proc.wait, name="ray-head-reaper", daemon=True).start()
        killer = threading.Timer(STOP_GRACE, _kill_session, args=(proc,))
        killer.daemon = True
        killer.start()

    def drivers(self) -> set[int]:
        """The process ids of the drivers that have joined this head (from the log files Ray keeps per driver)."""
        pids = set()
        for log in self.temp_dir.glob("session_*/logs/python-core-driver-*.log"):
            pid = log.stem.rpartition("_")[2]
            if pid.isdigit():
                pids.add(int(pid))
        return pids


def without_ray_address(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without ``RAY_ADDRESS``: ``--ray`` starts a local cluster."""
    env = dict(os.environ if base is None else base)
    env.pop("RAY_ADDRESS", None)
    return env


_HEADS: dict[int, subprocess.Popen[bytes]] = {}
"""The running heads' ``ray start`` processes, by pid."""


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL to what is left of a head's session, unless ``ray start`` has exited (it stopped what it started)."""
    if proc.returncode is None:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to ``ray start`` (it stops what it started), then SIGKILL to whatever is left of its session."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE)
    with suppress(ProcessLookupError):  # the session's processes are one group, its id the pid of ray start
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextmanager
def running_head(cpus: int = 2) -> Iterator[RayHead]:
    """A Ray head with ``cpus`` CPUs on a free port of this machine, stopped when the block ends.

    Raises:
        AssertionError: the head did not start (the message holds its log).
    """
    temp = Path(tempfile.mkdtemp(prefix="arena-ray-"))
    port = _free_port()
    command = [
        str(RAY),
        "start",
        "--head",
        "--block",
        "--disable-usage-stats",
        "--include-dashboard=false",
        "--no-monitor",  # no autoscaler, and no log monitor (the drivers of the tests take no worker logs)
        "--include-log-monitor=false",
        f"--num-cpus={cpus}",
        f"--port={port}",
        f"--ray-client-server-port={_free_port()}",
        f"--dashboard-agent-listen-port={_free_port()}",
        f"--temp-dir={temp}",
    ]
    token = secrets.token_hex(32)
    env = without_ray_address()
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    log = temp / "head.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not (temp / "ray_current_cluster").exists():  # written once the head takes drivers
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the Ray head did not start: {' '.join(command)}\n{log.read_text()[-3000:]}")
            time.sleep(0.1)
        _HEADS[proc.pid] = proc
        yield RayHead(f"127.0.0.1:{port}", cpus, temp, token, proc.pid)
    finally:
        _stop(proc)
        _HEADS.pop(proc.pid, None)
        shutil.rmtree(temp, ignore_errors=True)
