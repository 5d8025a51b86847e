"""Spectators on ``arena serve --workers 2``: whichever process a connection reaches, it follows the match.

The kernel hands each connection to one worker, so most spectators of a match
reach a process that does not run it. Real server processes, a real SDK bot,
real ``WatchMatch`` streams from many addresses (so both workers are reached),
and the web interface, which the main process serves.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import grpc
import httpx

from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client import Bot, Turn
from arena_client.remote import Client
from tests.ladder.test_crash import ROOT, close, free_port, query

ROUNDS = 150
WATCHERS = 16
"""Spectators, each from its own address: all 16 reach the worker that runs the match about once in 32,768 runs."""


class SlowScissors(Bot):
    name = "watched-bot"
    games = ("rps",)

    def act(self, turn: Turn) -> int:
        import time

        time.sleep(0.02)  # (a match of a few seconds, long enough to be followed live)
        return 2


def serve_with_web(db: Path) -> tuple[subprocess.Popen[str], int, int]:
    """``arena serve --workers 2`` with the web interface; the process, its gRPC port and its HTTP port."""
    port = free_port()
    options = ["--workers", "2", "--no-ladder", "--host", "0.0.0.0", "--port", str(port), "--http-port", "0"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "arena_server.cli", "serve", *options, "--db", str(db)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    http = 0
    while len(lines) < 12:
        lines.append(proc.stdout.readline())
        if "web interface on http://" in lines[-1]:
            http = int(lines[-1].rsplit(":", 1)[1].strip().rstrip("/"))
        if "press Ctrl-C" in lines[-1] and http:
            return proc, port, http
        if "press Ctrl-C" in lines[-1] or not lines[-1]:
            break
    proc.terminate()  # (the main process stops its workers)
    proc.wait(30)
    raise AssertionError(f"server did not start with its web interface: {lines} {close(proc)}")


async def watch(address: str, match_id: str = "", game: str = "") -> list[str]:
    """The kinds of the events one spectator receives (an update counted by its moves)."""
    kinds: list[str] = []
    async with grpc.aio.insecure_channel(address) as channel:
        stub = mp_grpc.MatchServiceStub(channel)
        async for event in stub.WatchMatch(mp.WatchMatchRequest(match_id=match_id, game=game), timeout=60):
            kind = event.WhichOneof("kind")
            kinds.extend(["move"] * len(event.update.moves) if kind == "update" else [kind])
    return kinds


async def web_feed(http: int, match_id: str) -> tuple[str, list[str]]:
    """The home page while the match runs, and the kinds of its live page's Server-Sent Events."""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{http}", timeout=60) as web:
        home = (await web.get("/")).text
        kinds = []
        async with web.stream("GET", f"/match/{match_id}/events") as stream:
            async for line in stream.aiter_lines():
                if line.startswith("event: "):
                    kinds.append(line.removeprefix("event: "))
    return home, kinds


def test_spectators_follow_a_match_from_either_worker_and_the_web(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    proc, port, http = serve_with_web(db)
    try:

        async def scenario() -> tuple[Client, list[list[str]], str, str, list[str]]:
            client = Client(SlowScissors(), f"127.0.0.1:{port}", name="watched", threaded=False)
            playing = asyncio.ensure_future(client.play(opponent="rock", params={"rounds": ROUNDS}))
            for _ in range(400):
                await asyncio.sleep(0.05)
                if query(db, "SELECT COUNT(*) FROM matches WHERE status = 'running'") == 1:
                    break
            match_id = str(query(db, "SELECT MAX(id) FROM matches"))
            watchers = [watch(f"127.0.0.{i + 2}:{port}", match_id) for i in range(WATCHERS)]
            feeds = await asyncio.gather(*watchers, web_feed(http, match_id))
            await playing
            home, web_kinds = feeds[-1]  # type: ignore[misc]
            return client, feeds[:-1], match_id, home, web_kinds  # type: ignore[return-value]

        client, feeds, match_id, home, web_kinds = asyncio.run(scenario())  # type: ignore[misc]
        assert client.results[0].termination.name == "NORMAL"
        for kinds in feeds:
            # Every spectator, on either worker: the header, the moves as they were played, and the end.
            assert kinds[0] == "started" and kinds[-1] == "ended", kinds[:3] + kinds[-3:]
            assert 0 < kinds.count("move") <= 2 * ROUNDS
        assert f"/match/{match_id}" in home  # the main process lists the match a worker runs
        assert web_kinds[0] == "header" and web_kinds[-1] == "end", web_kinds
        assert "frame" in web_kinds
    finally:
        proc.terminate()
        proc.wait(30)
        err = close(proc)
    assert "arena: stopped" in err, err


def test_spectators_of_the_next_match_hear_of_it_whichever_worker_starts_it(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    proc, port, _http = serve_with_web(db)
    try:

        async def scenario() -> tuple[Client, list[list[str]]]:
            watchers = [asyncio.ensure_future(watch(f"127.0.0.{i + 2}:{port}", game="rps")) for i in range(WATCHERS)]
            await asyncio.sleep(1.0)  # (every spectator is waiting before the match starts)
            client = Client(SlowScissors(), f"127.0.0.1:{port}", name="next-one", threaded=False)
            await client.play(opponent="rock", params={"rounds": 40})
            return client, list(await asyncio.gather(*watchers))

        client, feeds = asyncio.run(scenario())
        assert client.results[0].termination.name == "NORMAL"
        for kinds in feeds:  # the match started on one worker; the spectators wait on both
            assert kinds[0] == "started" and kinds[-1] == "ended", kinds[:3] + kinds[-3:]
    finally:
        proc.terminate()
        proc.wait(30)
        err = close(proc)
    assert "arena: stopped" in err, err
