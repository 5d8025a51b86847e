"""A long match of hosted bots, hot on the event loop, does not starve the server's threads.

The referee lets the rest of the server run every 256 decisions of an
in-process match: it lets go of the GIL for an instant, about once a
millisecond. Under Python's 5 ms switch interval a thread waiting for the GIL
(the database's, a hosted bot's warm-up) was woken by each of those instants,
lost the race and started its 5 ms wait again: measured here, a ListMatches
call (a read on the database's thread) took 3.2 s at the median and 28.6 s at
worst while the ladder played one ten-million-round match. ``arena serve``
sets a 0.5 ms interval (``--switch-interval``), shorter than those stretches.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc

from arena.v1 import matches_pb2, matches_pb2_grpc
from tests.server.test_shutdown import free_port, running_matches


def test_the_database_answers_while_a_long_hosted_match_runs(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    port = free_port()
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "arena_server.cli", "serve", "--no-http"),
            *("--host", "127.0.0.1", "--port", str(port), "--db", str(db)),
            *("--ladder-game", "rps:rounds=10000000", "--ladder-bots", "rock,rotate", "--concurrency", "1"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    latencies: list[float] = []
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert "serving on" in line, line
        deadline = time.monotonic() + 60
        while running_matches(db) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running_matches(db) == 1, "the ladder did not start its match within a minute"
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = matches_pb2_grpc.MatchServiceStub(channel)
            until = time.monotonic() + 4
            while time.monotonic() < until:
                started = time.perf_counter()
                listed = stub.ListMatches(matches_pb2.ListMatchesRequest(), timeout=60)
                latencies.append(time.perf_counter() - started)
                time.sleep(0.05)
        assert running_matches(db) == 1  # the long match was playing all along
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.communicate(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()
                server.communicate(timeout=30)
    assert len(listed.matches) == 1
    worst = max(latencies)
    print(f"{len(latencies)} ListMatches calls, slowest {worst * 1e3:.0f} ms")
    # Measured: at most 63 ms with the 0.5 ms interval; seconds with Python's 5 ms.
    assert worst < 1.0, f"a database read waited {worst:.2f}s behind the hosted match"
