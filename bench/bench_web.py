"""Web interface cost: page times on a big database, and what live viewers cost a match.

1. Pages: a database of 1,000 bots and 1,000,000 stored rated RPS matches (written
   with executemany: matches, seats, rating rows, pair totals as the ladder leaves
   them, each bot having met about 40 neighbours in rating). The real server
   (Hub + uvicorn on a port) answers the leaderboard (first page, 100 of 1,000
   rows, interval bars) and a bot's page (history of 500 rated matches,
   head-to-head, recent matches), requested over localhost with httpx; the
   server time is the response's ``Server-Timing`` header (request received to
   response start: every query and the template), median and 95th percentile of 40.
   Baseline, in the same process: an empty match list page from the same server (HTTP, routing, a template).
   Target: each page under 50 ms.
2. Live viewers: a remote SDK bot in its own process plays RPS against the hosted
   ``rock`` bot on the real server; the time between consecutive moves is
   measured by a listener on the match (median over the moves made while the
   viewers are connected). With 100 Server-Sent-Event viewers of that match (in a
   separate process, raw sockets) vs none, alternating runs.
   Target: the viewers add under 10% to the move latency.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

import arena_bots
from arena_server.api.server import running_server
from arena_server.matches.hub import Hub
from arena_server.referee.records import MoveLog
from arena_server.store.database import Store, encode_moves
from arena_server.web.server import WebServer

BOTS = 1000
MATCHES = 1_000_000
NEIGHBOURS = 20
"""Each bot meets the bots up to this many places above and below it (about 40 opponents)."""
REQUESTS = 40
VIEWERS = 100
ROUNDS = 3000
RUNS = 3


def build_database(path: Path) -> None:
    """Fill a fresh Arena database with BOTS bots and MATCHES rated rps matches, quickly (executemany)."""

    async def create() -> None:
        store = await Store.open(path)  # the schema, by the real migrations
        await store.close()

    asyncio.run(create())
    rng = random.Random(1)
    names = [f"bot-{i:04d}" for i in range(BOTS)]
    strength = [rng.gauss(0, 1) for _ in names]
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA synchronous = OFF")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    blob = encode_moves(MoveLog())
    tc = json.dumps({"per_move": 1.0, "overage": 10.0, "grace": 0.1})
    params = json.dumps({"signs": 3, "rounds": 1000, "draw_band": 20})
    totals: dict[str, list[float]] = {n: [0, 0, 0, 0, 0.0, ""] for n in names}
    pairs: dict[tuple[str, str], list[float]] = {}
    chunk = 50_000
    for base in range(0, MATCHES, chunk):
        matches, seats, rated = [], [], []
        for mid in range(base + 1, base + chunk + 1):
            a = rng.randrange(BOTS)
            b = min(max(a + rng.choice([d for d in range(-NEIGHBOURS, NEIGHBOURS + 1) if d]), 0), BOTS - 1)
            if a == b:
                b = a + 1 if a + 1 < BOTS else a - 1
            p = 1 / (1 + 10 ** ((strength[b] - strength[a]) / 2))
            r = rng.random()
            ret = [1.0, -1.0] if r < p * 0.8 else [-1.0, 1.0] if r > 1 - (1 - p) * 0.8 else [0.0, 0.0]
            at = (start + timedelta(seconds=mid * 10)).isoformat()
            matches.append(
                (mid, "rps", params, "ab" * 16, "cd" * 32, tc, "finished", 1, json.dumps(ret), 1, at, at, 1000, blob)
            )
            seats += [(mid, 0, names[a], 1, "hosted"), (mid, 1, names[b], 1, "hosted")]
            rated.append((mid, mid, "rps"))
            sa = 1.0 if ret[0] > 0 else 0.0 if ret[0] < 0 else 0.5
            for n, s in ((names[a], sa), (names[b], 1 - sa)):
                t = totals[n]
                t[0] += 1
                t[1 if s == 1 else 2 if s == 0.5 else 3] += 1
                t[4] += s
                t[5] = at
            x, y, sx = (names[a], names[b], sa) if names[a] < names[b] else (names[b], names[a], 1 - sa)
            pr = pairs.setdefault((x, y), [0, 0.0, 0, 0, 0])
            pr[0] += 1
            pr[1] += sx
            pr[2 if sx == 1 else 3 if sx == 0.5 else 4] += 1
        conn.executemany(
            "INSERT INTO matches (id, game, params, seed, seed_sha256, time_control, status, termination, returns, "
            "rated, started_at, ended_at, move_count, moves) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            matches,
        )
        conn.executemany("INSERT INTO match_seats VALUES (?, ?, ?, ?, ?)", seats)
        conn.executemany("INSERT INTO rated_matches (seq, match_id, pool) VALUES (?, ?, ?)", rated)
    conn.execute(
        "INSERT INTO rating_pools (pool, game, method, matches, dirty, fitted_at) VALUES ('rps', 'rps', "
        "'bradley-terry', ?, 0, ?)",
        (MATCHES, start.isoformat()),
    )
    conn.executemany(
        "INSERT INTO ratings (pool, bot_name, rating, ci, games, wins, draws, losses, score, last_active) "
        "VALUES ('rps', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(n, 1500 + 200 * s, 15.0, *totals[n]) for n, s in zip(names, strength, strict=True)],
    )
    conn.executemany(
        "INSERT INTO rating_pairs (pool, bot_a, bot_b, games, score_a, wins_a, draws, losses_a) "
        "VALUES ('rps', ?, ?, ?, ?, ?, ?, ?)",
        [(a, b, *v) for (a, b), v in pairs.items()],
    )
    conn.commit()
    conn.close()


async def time_requests(url: str, paths: list[str]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {p: [] for p in paths}
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        for path in paths:  # warm: first use of each query, the components cache
            (await client.get(path)).raise_for_status()
        for _ in range(REQUESTS):
            for path in paths:
                response = await client.get(path)
                response.raise_for_status()
                timing = response.headers["server-timing"]  # app;dur=<ms>: request to response start
                out[path].append(float(timing.split("dur=")[1]))
    return out


async def pages(db: Path) -> None:
    store = await Store.open(db)
    hub = Hub(store, {})
    web = WebServer(hub, "127.0.0.1", 0)
    await web.start()
    try:
        bot = "bot-0500"
        paths = ["/matches?before=1", "/leaderboard/rps", f"/bot/{bot}?pool=rps"]
        times = await time_requests(f"http://127.0.0.1:{web.port}", paths)
    finally:
        await web.stop()
        await store.close()
    base = statistics.median(times[paths[0]])
    print(f"pages at {BOTS} bots and {MATCHES:,} matches (server time, {REQUESTS} requests each):")
    for path in paths:
        t = sorted(times[path])
        p95 = t[int(len(t) * 0.95) - 1]
        print(f"  {path:28s} median {statistics.median(t):6.1f} ms  p95 {p95:6.1f} ms  "
              f"({statistics.median(t) / base:5.1f}x an empty page)")  # fmt: skip
    for path in paths[1:]:
        ok = statistics.median(times[path]) < 50
        print(f"  target < 50 ms for {path}: {'met' if ok else 'NOT met'}")


VIEWER_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    host, port, path, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    async def view():
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(f"GET {path} HTTP/1.1\\r\\nHost: {host}\\r\\nAccept: text/event-stream\\r\\n\\r\\n".encode())
        await writer.drain()
        total = 0
        while chunk := await reader.read(65536):
            total += len(chunk)
            if b"event: end" in chunk:
                break
        writer.close()
        return total
    async def main():
        sizes = await asyncio.gather(*(view() for _ in range(count)))
        print(min(sizes), max(sizes), flush=True)
    asyncio.run(main())
    """
)

BOT_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from arena_client import Bot
    from arena_client.remote import Client
    class First(Bot):
        def act(self, turn):
            return turn.legal_actions[0]
    asyncio.run(Client(First(), sys.argv[1], name=sys.argv[2], threaded=False).play(
        opponent="rock", params={"rounds": int(sys.argv[3])}))
    """
)


async def one_run(hub: Hub, web: WebServer, grpc_port: int, viewers: int, run: int) -> float:
    """Median seconds between moves of one match, while ``viewers`` watch it (over the moves they all saw)."""
    name = f"bench-{viewers}-{run}"
    bot = await asyncio.create_subprocess_exec(
        sys.executable, "-c", BOT_SCRIPT, f"127.0.0.1:{grpc_port}", name, str(ROUNDS)
    )
    while not any(s.bot_name == name for r in hub.running.values() for s in r.record.seats):
        await asyncio.sleep(0.001)
    running = next(r for r in hub.running.values() if any(s.bot_name == name for s in r.record.seats))
    assert web.app is not None
    site = web.app.state.site
    stamps: list[tuple[float, int]] = []
    running.control.listeners.append(
        lambda kind, _p: stamps.append((time.perf_counter(), site.live_streams)) if kind == "moves" else None
    )
    watcher = None
    if viewers:
        watcher = await asyncio.create_subprocess_exec(
            sys.executable, "-c", VIEWER_SCRIPT, "127.0.0.1", str(web.port),
            f"/match/{running.record.match_id}/events", str(viewers), stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
    await bot.wait()
    if watcher is not None:
        out, _ = await watcher.communicate()
        assert out.strip(), "the viewers saw nothing"
    full = [t for t, n in stamps if n >= viewers]  # the moves made while every viewer was connected
    gaps = [b - a for a, b in itertools.pairwise(full)]
    assert len(gaps) > ROUNDS // 4, f"only {len(gaps)} moves with all {viewers} viewers connected"
    return statistics.median(gaps)


async def live() -> None:
    hub = Hub(None, arena_bots.hosted_bots())
    web = WebServer(hub, "127.0.0.1", 0)
    await web.start()
    try:
        async with running_server(hub, port=0) as (_server, grpc_port):
            alone, watched = [], []
            for run in range(RUNS):
                alone.append(await one_run(hub, web, grpc_port, 0, run))
                watched.append(await one_run(hub, web, grpc_port, VIEWERS, run))
    finally:
        await web.stop()
    a, w = statistics.median(alone), statistics.median(watched)
    print(f"live match, {ROUNDS} rounds, remote SDK bot vs hosted rock, {RUNS} runs each:")
    for label, runs, value in (("no viewers:      ", alone, a), (f"{VIEWERS} SSE viewers:", watched, w)):
        shown = ", ".join(f"{x * 1e6:.0f}" for x in runs)
        print(f"  move latency with {label} {value * 1e6:7.0f} µs (runs: {shown})")
    print(f"  ratio {w / a:.3f} (target < 1.10: {'met' if w / a < 1.10 else 'NOT met'})")


def main() -> None:
    """``python bench/bench_web.py [DB]``: with DB, the generated database is kept there and reused."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp) / "big.db"
        if not db.exists():
            began = time.perf_counter()
            build_database(db)
            print(f"database: {BOTS} bots, {MATCHES:,} matches in {time.perf_counter() - began:.1f} s "
                  f"({os.path.getsize(db) / 1e6:.0f} MB)")  # fmt: skip
        asyncio.run(pages(db))
    asyncio.run(live())


if __name__ == "__main__":
    main()
