"""Soak with ``arena serve --workers 2``: the records stay straight while the server is crashed and restarted.

Four registered SDK bots (separate processes, so separate connections spread
over both workers) challenge hosted bots back to back. The server is stopped
six times, alternately with SIGKILL of the main process (a crash: its workers
must notice that the store writer is gone and exit) and SIGTERM. At the end
every invariant of the single-process soak holds (nothing left running, every
match a bot heard is stored as it heard it, finished matches whole, each rated
match rated once) and ``arena ratings recompute --check`` agrees.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.ladder.test_soak import RECONNECT_LIMIT, _arena, _register, check_database
from tests.soak_support import ScriptProcess, ServerProcess, alive, children, write_sdk_bot

BOTS = ("wsoak-a", "wsoak-b", "wsoak-c", "wsoak-d")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_workers_survive_crashes_and_restarts(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    tokens = {name: _register(db, name) for name in BOTS}
    restarts = 6
    with ServerProcess(db, args=("--no-ladder", "--workers", "2")) as server:
        server.start()
        bots = [
            ScriptProcess(
                write_sdk_bot(
                    tmp_path / f"{name}.py",
                    server.address,
                    name=name,
                    opponent="random",
                    params={"rounds": 30},
                    matches=1000,
                    act_sleep=0.002,
                    token=tokens[name],
                    give_up_after=120,
                )
            )
            for name in BOTS
        ]
        try:
            for bot in bots:
                assert bot.wait_events("connected", 1, 30), bot.err.text()
            for n in range(1, restarts + 1):
                time.sleep(2.0)
                assert server.proc is not None
                workers = children(server.proc.pid)
                if n % 2:
                    server.kill()  # the main process crashes: the workers must follow
                    deadline = time.monotonic() + 15
                    while any(alive(p) for p in workers) and time.monotonic() < deadline:
                        time.sleep(0.1)
                    assert not any(alive(p) for p in workers), "a worker outlived its main process"
                else:
                    assert server.stop(signal.SIGTERM) == 0, "\n".join(server.log[-20:])
                server.start()
                for bot in bots:
                    assert bot.wait_events("connected", n + 1, RECONNECT_LIMIT), bot.err.text()
            time.sleep(2.0)
            assert server.stop(signal.SIGTERM) == 0, "\n".join(server.log[-20:])
            heard_start = {e["match_id"] for bot in bots for e in bot.events("started")}
            heard_end = [(e["match_id"], e["termination"]) for bot in bots for e in bot.events("ended")]
        finally:
            for bot in bots:
                bot.kill()
    figures = check_database(db, heard_start, heard_end)
    assert figures["finished"] >= 20, figures
    check = _arena("ratings", "recompute", "--check", "--db", str(db))
    assert check.returncode == 0, check.stdout + check.stderr
    print(f"\nworkers soak: {figures}")
