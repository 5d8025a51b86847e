"""A real ``arena serve`` process for tests, and read-only looks into its database while it runs."""

from __future__ import annotations

import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(db: Path, port: int, *extra: str) -> subprocess.Popen[str]:
    """``arena serve --no-http`` on 127.0.0.1:``port`` with ``db``, once it says it serves."""
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "arena_server.cli", "serve", "--no-http"),
            *("--host", "127.0.0.1", "--port", str(port), "--db", str(db)),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    if "serving on" not in line:
        stop_server(server)
        raise AssertionError(f"the server did not start: {line!r}")
    return server


def stop_server(server: subprocess.Popen[str], timeout: float = 30) -> str:
    """SIGINT, wait for the exit (kill after ``timeout``); its stderr."""
    if server.poll() is None:
        server.send_signal(signal.SIGINT)
    try:
        _, err = server.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        server.kill()
        _, err = server.communicate(timeout=30)
    return err


def look(db: Path, sql: str, default: Any) -> Any:
    """``sql``'s rows in the database of a running server, read-only; ``default`` while it has no such table."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.OperationalError:
        return default
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return default
    finally:
        conn.close()


def running_matches(db: Path) -> int:
    """Matches the server has stored as started and not yet ended (0 while the file is not there yet)."""
    return int(look(db, "SELECT COUNT(*) FROM matches WHERE status = 'running'", [(0,)])[0][0])


def wait_for(done: Callable[[], bool], seconds: float = 60) -> bool:
    """Poll ``done`` every 50 ms until it holds or ``seconds`` pass; whether it held."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
