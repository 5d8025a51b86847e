"""Ladder throughput, rating refit time and leaderboard query time.

1. Ladder matches per second: the real scheduler, hub and SQLite store (a temp
   file) with in-process reference bots (rock, rotate, beat-last, random,
   registered under many names), 100-round RPS. Concurrency 1, 2 and 4 with
   10 bots, then 10, 100 and 1,000 bots at concurrency 2. Baseline in the same
   run: the same matches through ``play_match`` alone (no scheduler, no store).
   Each line also gives the process's CPU a match (every thread: the loop,
   SQLite's, the refits), which moves less than the rate on a host whose
   speed wanders.
2. Refit time of one Bradley-Terry pool (read pair totals, fit, write
   ratings), cold (from 1500) and warm (from the stored fit): 100 bots with
   100,000 stored rated matches (target under 50 ms), and 1,000 bots with
   1,000,000 games given as 20,000 sparse pair totals (target under 1 s).
   Baseline in the same run: the fit as it was before issue 11 (undamped
   dense Newton). Plus a full rebuild from the 100,000 match rows.
3. Leaderboard read time (the SQL query and the ``LadderService.GetLeaderboard``
   RPC; target under 20 ms) at both sizes.

Run: ``.venv/bin/python bench/bench_ladder.py`` (about two minutes). ``--refit``
runs parts 2 and 3 only.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import numpy as np

import arena_server.ratings.fit as rt
import arena_server.store.ratings as ls
from arena.v1 import ladder_pb2 as lp
from arena.v1 import ladder_pb2_grpc as lp_grpc
from arena_bots import HostedBot, hosted_bots
from arena_client import SeatInfo
from arena_games import load_game
from arena_server.api.server import running_server
from arena_server.ladder.scheduler import Ladder, LadderConfig
from arena_server.matches.hub import Hub
from arena_server.referee.loop import play_match
from arena_server.seats.in_process import InProcessSeat
from arena_server.store.database import Store

ROUNDS = 100
SECONDS = 4.0
BASE = ("rock", "rotate", "beat-last", "random")


def bot_pool(count: int) -> dict[str, HostedBot]:
    base = hosted_bots()
    out = dict(base)
    for i in range(count):
        original = base[BASE[i % len(BASE)]]
        name = f"{original.name}-{i}"
        out[name] = HostedBot(name, original.games, original.factory, original.description)
    return out


async def baseline_rate(seconds: float) -> tuple[float, float]:
    """Matches a second, and CPU ms a match (this process, every thread)."""
    game = load_game("rps", rounds=ROUNDS, draw_band=2)
    hosted = hosted_bots()
    rng = random.Random(1)
    count = 0
    start = time.perf_counter()
    cpu = time.process_time()
    while time.perf_counter() - start < seconds:
        a, b = rng.sample(BASE, 2)
        seats = [
            InProcessSeat(hosted[a].factory(1), SeatInfo(0, a)),
            InProcessSeat(hosted[b].factory(2), SeatInfo(1, b)),
        ]
        await play_match(game, seats)
        count += 1
    return count / (time.perf_counter() - start), (time.process_time() - cpu) * 1e3 / count


async def ladder_rate(bots: int, concurrency: int, seconds: float) -> tuple[float, float]:
    """Matches a second, and CPU ms a match (this process, every thread: the loop, SQLite's, the refits)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = await Store.open(Path(tmp) / "bench.db")
        try:
            hosted = bot_pool(bots)
            names = tuple(n for n in hosted if n.rsplit("-", 1)[-1].isdigit() and n not in hosted_bots())
            hub = Hub(store, hosted)
            config = LadderConfig(
                [load_game("rps", rounds=ROUNDS)], concurrency=concurrency, per_bot=2, seed=1, bots=names
            )
            ladder = Ladder(hub, config)
            ladder.start()
            await asyncio.sleep(0.5)  # warm-up
            first = ladder.matches_played
            start = time.perf_counter()
            cpu = time.process_time()
            await asyncio.sleep(seconds)
            played = ladder.matches_played - first
            elapsed = time.perf_counter() - start
            cpu_ms = (time.process_time() - cpu) * 1e3 / max(played, 1)
            ladder.halt()
            await hub.shutdown()
            await ladder.stop()
            return played / elapsed, cpu_ms
        finally:
            await store.close()


async def fill(store: Store, matches: int, bots: int, seed: int = 1) -> str:
    """Insert ``matches`` finished rated RPS matches (rows, seats, rating effects) the way the hub writes them."""
    rng = random.Random(seed)
    names = [f"bot-{i:04d}" for i in range(bots)]
    strength = {n: rng.gauss(0, 1) for n in names}
    game = load_game("rps", rounds=1000, draw_band=20)
    params = json.dumps(dict(game.params))
    tc = json.dumps({"per_move": 1.0, "overage": 10.0, "grace": 0.1})
    conn = store.conn
    batch = 5000
    done = 0
    while done < matches:
        n = min(batch, matches - done)
        await conn.execute("BEGIN IMMEDIATE")
        async with conn.execute("SELECT COALESCE(MAX(id), 0) FROM matches") as cur:
            row = await cur.fetchone()
        next_id = int(row[0]) + 1 if row else 1
        rows, seats, effects = [], [], []
        for k in range(n):
            mid = next_id + k
            a, b = rng.sample(names, 2)
            p = 1 / (1 + pow(10, (strength[b] - strength[a]) * 0.5))
            x = rng.random()
            diff = 0.0 if abs(x - p) < 0.05 else (50.0 if x < p else -50.0)
            ended = f"2026-01-01T00:00:{k % 60:02d}+00:00"
            rows.append((mid, "rps", params, "s", "h", tc, "finished", 1, json.dumps([diff, -diff]), 1, ended, ended))
            seats.append((mid, 0, a, 1, "hosted"))
            seats.append((mid, 1, b, 1, "hosted"))
            effects.append((mid, ls.match_effects(game, (a, b), (diff, -diff), ended)))
        await conn.executemany(
            "INSERT INTO matches (id, game, params, seed, seed_sha256, time_control, status, termination, returns, "
            "rated, started_at, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        await conn.executemany("INSERT INTO match_seats VALUES (?, ?, ?, ?, ?)", seats)
        for mid, fx in effects:
            await ls.apply_effects(conn, mid, fx)
        await conn.execute("COMMIT")
        done += n
    return ls.pool_key(game)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def dense_newton_baseline(pairs: list[rt.PairTotal]) -> float:
    """The fit as it was before issue 11 (cold start, undamped Newton, dense solve and inverse); seconds."""
    start = time.perf_counter()
    names = sorted({p.a for p in pairs} | {p.b for p in pairs})
    k = len(names)
    index = {n: i for i, n in enumerate(names)}
    ia = np.array([index[p.a] for p in pairs])
    ib = np.array([index[p.b] for p in pairs])
    n = np.array([p.games for p in pairs], dtype=float)
    s = np.array([p.score_a for p in pairs])
    r = np.zeros(k)
    for _ in range(100):
        prob = 1 / (1 + np.exp(-(r[ia] - r[ib])))
        w = n * prob * (1 - prob)
        info: np.ndarray[Any, Any] = -(np.bincount(ia * k + ib, w, k * k) + np.bincount(ib * k + ia, w, k * k))
        info[np.arange(k) * (k + 1)] += np.bincount(ia, w, k) + np.bincount(ib, w, k) + rt.PRIOR_PRECISION
        resid = s - n * prob
        grad = np.bincount(ia, resid, k) - np.bincount(ib, resid, k) - rt.PRIOR_PRECISION * r
        step = np.linalg.solve(info.reshape(k, k), grad)
        r += step
        if np.max(np.abs(step)) < 1e-10:
            break
    np.linalg.inv(info.reshape(k, k))
    return time.perf_counter() - start


async def synthetic_pool(store: Store, bots: int, games: int, pairs: int, seed: int = 2) -> str:
    """A pool given directly as pair totals: ``pairs`` sparse pairs (a ring plus random ones) summing to ``games``."""
    rng = np.random.default_rng(seed)
    strength = rng.normal(0, 1, bots)
    chosen = {(i, (i + 1) % bots) for i in range(bots)}
    while len(chosen) < pairs:
        a, b = (int(x) for x in rng.integers(0, bots, 2))
        if a != b:
            chosen.add((a, b))
    ordered = sorted({(min(a, b), max(a, b)) for a, b in chosen})
    counts = rng.multinomial(games, np.full(len(ordered), 1 / len(ordered)))
    pool = "rps(bench-synthetic)"
    rows, per_bot = [], np.zeros(bots, dtype=np.int64)
    for (a, b), g in zip(ordered, counts, strict=True):
        wins = int(rng.binomial(int(g), 1 / (1 + np.exp(-(strength[a] - strength[b])))))
        rows.append((pool, f"bot-{a:04d}", f"bot-{b:04d}", int(g), float(wins), wins, 0, int(g) - wins))
        per_bot[a] += g
        per_bot[b] += g
    conn = store.conn
    await conn.execute("BEGIN IMMEDIATE")
    await conn.execute(
        "INSERT INTO rating_pools (pool, game, method, matches, dirty) VALUES (?, 'rps', ?, ?, 1)", (pool, ls.BT, games)
    )
    await conn.executemany("INSERT INTO rating_pairs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    await conn.executemany(
        "INSERT INTO ratings (pool, bot_name, games) VALUES (?, ?, ?)",
        [(pool, f"bot-{i:04d}", int(per_bot[i])) for i in range(bots)],
    )
    await conn.execute("COMMIT")
    return pool


async def time_refit(store: Store, pool: str, cold: bool) -> tuple[float, rt.Fit]:
    """Median of 3 ``refit_pool`` calls (read totals, fit, write ratings), from 1500 (cold) or the stored fit."""
    samples, fit = [], None
    for _ in range(3):
        if cold:
            await store.conn.execute("UPDATE ratings SET rating = 1500, ci = 0 WHERE pool = ?", (pool,))
        await store.conn.execute("UPDATE rating_pools SET dirty = 1 WHERE pool = ?", (pool,))
        start = time.perf_counter()
        fit = await ls.refit_pool(store, pool)
        samples.append(time.perf_counter() - start)
    assert fit is not None
    return statistics.median(samples), fit


async def refit_and_query() -> None:
    print("\n-- rating refit (one pool: read pair totals, Bradley-Terry fit, write ratings; median of 3) --")
    print("baseline in the same run: the pre-issue-11 fit (undamped dense Newton from zero, dense inverse)")
    with tempfile.TemporaryDirectory() as tmp:
        store = await Store.open(Path(tmp) / "bench.db")
        try:
            t0 = time.perf_counter()
            pool = await fill(store, 100_000, 100)
            fill_s = time.perf_counter() - t0
            pairs = await ls.load_pairs(store.conn, pool)
            for cold in (True, False):
                seconds, fit = await time_refit(store, pool, cold)
                base = dense_newton_baseline(pairs)
                print(
                    f"100 bots, 100,000 matches ({len(pairs)} pairs), {'cold' if cold else 'warm'}: "
                    f"refit {seconds * 1000:7.1f} ms ({fit.iterations} Newton steps; target < 50 ms; "
                    f"baseline fit alone {base * 1000:.1f} ms, ratio {seconds / base:.2f}) "
                    f"[{'PASS' if seconds < 0.05 else 'FAIL'}]"
                )
            print(f"        (writing the 100,000 match rows took {fill_s:.1f} s)")
            start = time.perf_counter()
            _snap, diffs = await ls.recompute(store, write=False)
            print(
                f"        full rebuild from the 100,000 match rows: {time.perf_counter() - start:.2f} s, "
                f"{len(diffs)} differences from the incrementally stored ratings"
            )
            await leaderboard_timing(store, pool, "100,000 matches, 100 bots")
            big = await synthetic_pool(store, 1_000, 1_000_000, 20_000)
            big_pairs = await ls.load_pairs(store.conn, big)
            for cold in (True, False):
                seconds, fit = await time_refit(store, big, cold)
                base = dense_newton_baseline(big_pairs)
                print(
                    f"1,000 bots, 1,000,000 games as {len(big_pairs)} pair totals, {'cold' if cold else 'warm'}: "
                    f"refit {seconds * 1000:7.1f} ms ({fit.iterations} Newton steps; target < 1000 ms; "
                    f"baseline fit alone {base * 1000:.1f} ms, ratio {seconds / base:.2f}) "
                    f"[{'PASS' if seconds < 1.0 else 'FAIL'}]"
                )
            await leaderboard_timing(store, big, "1,000,000 games, 1,000 bots (first 100 rows)")
        finally:
            await store.close()


async def leaderboard_timing(store: Store, pool: str, label: str) -> None:
    print(f"\n-- leaderboard read at {label}; target < 20 ms --")
    samples = []
    for _ in range(50):
        start = time.perf_counter()
        rows = await ls.leaderboard(store.conn, pool, 100)
        samples.append(time.perf_counter() - start)
    assert len(rows) == 100
    verdict = "PASS" if statistics.median(samples) < 0.02 else "FAIL"
    print(
        f"SQL query (ls.leaderboard):         median {median_ms(samples):6.2f} ms, "
        f"max {max(samples) * 1000:6.2f} ms [{verdict}]"
    )
    hub = Hub(store, {})
    async with running_server(hub, port=0) as (_server, port):  # noqa: SIM117 - the port comes from the first
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = lp_grpc.LadderServiceStub(channel)
            request = lp.GetLeaderboardRequest(pool=lp.PoolSelector(pool=pool), limit=100)
            await stub.GetLeaderboard(request)
            samples = []
            for _ in range(50):
                start = time.perf_counter()
                board = await stub.GetLeaderboard(request)
                samples.append(time.perf_counter() - start)
    assert len(board.entries) == 100
    verdict = "PASS" if statistics.median(samples) < 0.02 else "FAIL"
    print(
        f"gRPC LadderService.GetLeaderboard:  median {median_ms(samples):6.2f} ms, "
        f"max {max(samples) * 1000:6.2f} ms [{verdict}] (never refits: reads serve the stored fit)"
    )


async def main() -> None:
    if "--refit" in sys.argv:
        await refit_and_query()
        return
    print(f"-- ladder throughput: RPS {ROUNDS} rounds, in-process reference bots, {SECONDS:g} s per run --")
    base, base_cpu = await baseline_rate(SECONDS)
    print(f"baseline: play_match alone (no scheduler, no store): {base:7.1f} matches/s, {base_cpu:5.2f} ms CPU a match")
    for bots, concurrency in ((10, 1), (10, 2), (10, 4), (100, 2), (1_000, 2)):
        rate, cpu = await ladder_rate(bots, concurrency, SECONDS)
        print(
            f"ladder: {bots:>5} bots, concurrency {concurrency}: {rate:7.1f} matches/s ({rate / base:.2f} x baseline),"
            f" {cpu:5.2f} ms CPU a match"
        )
    await refit_and_query()


if __name__ == "__main__":
    asyncio.run(main())
