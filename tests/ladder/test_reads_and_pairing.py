"""Reads never write; refits happen in the background and at shutdown; matchmaking covers every pair.

Everything runs on a real gRPC server (port 0) with a real SQLite store and
in-process hosted bots.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import math
import sys
import tracemalloc
from pathlib import Path

import numpy as np

import arena_server.store.ratings as ls
from arena.v1 import ladder_pb2 as lp
from arena.v1 import ladder_pb2_grpc as lp_grpc
from arena_bots import HostedBot, hosted_bots
from arena_games import load_game
from arena_server.ladder.scheduler import (
    MAX_CANDIDATES,
    PAIR_FLOOR,
    Ladder,
    LadderConfig,
    PairScratch,
    RatingRefitter,
    _BotInfo,
    _games_upper,
    _Pool,
    pair_weights,
    upper_weights,
)
from arena_server.matches.hub import Hub
from arena_server.ratings.fit import ELO_PER_UNIT, Z95
from arena_server.store.database import Store
from tests.conftest import LiveServer
from tests.ladder.test_ladder_live import run_ladder
from tests.ladder.test_ratings_properties import _store_rated

POOL = ls.pool_key(load_game("rps", rounds=10))


def file_state(db: Path) -> tuple[str, ...]:
    out = []
    for suffix in ("", "-wal"):
        path = Path(str(db) + suffix)
        out.append(hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "-")
    return tuple(out)


async def test_leaderboard_and_crosstable_reads_never_refit_or_write(live_server: LiveServer) -> None:
    store = live_server.store
    for a, b, s in [("rock", "paper", 1.0), ("rock", "paper", 0.5), ("paper", "scissors", 0.0)] * 3:
        await _store_rated(store, a, b, s)
    info = await ls.pool_info(store.conn, POOL)
    assert info is not None and info.dirty and info.fitted_at is None
    changes, files = store.conn.total_changes, file_state(live_server.db_path)
    selector = lp.PoolSelector(pool=POOL)
    async with live_server.channel() as channel:
        stub = lp_grpc.LadderServiceStub(channel)
        for _ in range(20):
            board = await stub.GetLeaderboard(lp.GetLeaderboardRequest(pool=selector))
            table = await stub.GetCrosstable(lp.GetCrosstableRequest(pool=selector))
            assert board.pool.dirty and table.pool.dirty and not board.pool.HasField("fitted_at")
        # Served as stored: no fit has run, so the new bots still have the stored defaults.
        assert {e.rating for e in board.entries} == {1500.0} and {e.ci95 for e in board.entries} == {0.0}
        assert store.conn.total_changes == changes, "a read wrote to the database"
        assert file_state(live_server.db_path) == files
        # The background refitter (what `arena serve --no-ladder` runs) fits it.
        refitter = RatingRefitter(store, interval=0.05).start()
        for _ in range(200):
            info = await ls.pool_info(store.conn, POOL)
            if info is not None and not info.dirty:
                break
            await asyncio.sleep(0.02)
        await refitter.stop()
        board = await stub.GetLeaderboard(lp.GetLeaderboardRequest(pool=selector))
    assert not board.pool.dirty and board.pool.HasField("fitted_at") and refitter.refits >= 1
    ratings = {e.bot_name: e.rating for e in board.entries}
    assert ratings["rock"] > ratings["paper"] and all(e.ci95 > 0 for e in board.entries)
    assert {e.component for e in board.entries} == {0}


async def test_refitter_stop_refits_once_more(live_server: LiveServer) -> None:
    store = live_server.store
    refitter = RatingRefitter(store, interval=3600).start()  # the loop alone would never get there
    await _store_rated(store, "x", "y", 1.0)
    await refitter.stop()
    info = await ls.pool_info(store.conn, POOL)
    assert info is not None and not info.dirty


async def test_ladder_stop_leaves_the_stored_table_current(live_server: LiveServer) -> None:
    config = LadderConfig(
        [load_game("rps", rounds=20)], concurrency=2, seed=4, bots=("rock", "random", "rotate"), refit_interval=3600
    )
    ladder = await run_ladder(live_server.hub, config, 6)  # halts, then Ladder.stop()
    info = await ls.pool_info(live_server.store.conn, ladder.pools[0].key)
    assert info is not None and info.matches >= 6 and not info.dirty and info.fitted_at is not None
    _snap, diffs = await ls.recompute(live_server.store, write=False)
    assert diffs == []


async def test_leaderboard_marks_components_that_never_met(live_server: LiveServer) -> None:
    store = live_server.store
    for a, b in [("a", "b"), ("b", "c"), ("x", "y")] * 2:
        await _store_rated(store, a, b, 1.0)
    await ls.refit_dirty(store)
    rows = {r.bot: r for r in await ls.leaderboard(store.conn, POOL)}
    assert [rows[n].component for n in "abcxy"] == [0, 0, 0, 1, 1]
    for group in ("abc", "xy"):  # each component is centred on 1500 on its own
        assert abs(sum(rows[n].rating for n in group) / len(group) - 1500) < 1e-3
    async with live_server.channel() as channel:
        board = await lp_grpc.LadderServiceStub(channel).GetLeaderboard(
            lp.GetLeaderboardRequest(pool=lp.PoolSelector(pool=POOL))
        )
    assert {e.bot_name: e.component for e in board.entries} == {n: rows[n].component for n in "abcxy"}
    await _store_rated(store, "c", "x", 0.5)  # now they met: one component (the cache sees the new match)
    assert {r.component for r in await ls.leaderboard(store.conn, POOL)} == {0}


def test_pair_weights_favour_uncertain_pairs_and_keep_a_floor() -> None:
    ratings = np.array([1100.0, 1480.0, 1520.0, 1500.0])
    cis = np.array([30.0, 30.0, 30.0, 400.0])
    games = np.zeros((4, 4))
    games[1, 2] = 400.0
    w = pair_weights(ratings, cis, games)
    assert np.all(np.tril(w) == 0)
    upper = w[np.triu_indices(4, 1)]
    assert np.all(upper >= PAIR_FLOOR * upper.max() - 1e-12)
    assert w[2, 3] > w[1, 2]  # wide interval beats a well-known, much-played pair
    assert w[0, 3] > w[0, 2]  # the uncertain bot is the far bot's likeliest opponent


def _weights_by_hand(ratings: np.ndarray, cis: np.ndarray, games: np.ndarray) -> np.ndarray:
    """The weights as :func:`upper_weights`'s docstring gives them, pair by pair in scalar arithmetic."""
    m = len(ratings)
    out = np.zeros((m, m))
    for i in range(m):
        for j in range(i + 1, m):
            va = (max(cis[i], 1e-3) / (Z95 * ELO_PER_UNIT)) ** 2
            vb = (max(cis[j], 1e-3) / (Z95 * ELO_PER_UNIT)) ** 2
            d = (ratings[i] - ratings[j]) / ELO_PER_UNIT
            p = 1.0 / (1.0 + math.exp(-d / math.sqrt(1.0 + math.pi * (va + vb) / 8.0)))
            info = p * (1.0 - p)
            gain = va * va * info / (1.0 + va * info) + vb * vb * info / (1.0 + vb * info)
            out[i, j] = gain / math.sqrt(1.0 + games[i, j])
    top = out.max() if m > 1 else 0.0
    upper = np.triu(np.ones((m, m), dtype=bool), 1)
    out[upper] = np.maximum(out[upper], PAIR_FLOOR * top)
    return out


def test_upper_weights_are_the_formula_and_reusing_their_arrays_keeps_nothing() -> None:
    rng = np.random.default_rng(5)
    for m in (2, 3, 17, 60):
        scratch = PairScratch(m)
        assert [(int(i), int(j)) for i, j in zip(scratch.rows, scratch.cols, strict=True)] == [
            (i, j) for i in range(m) for j in range(i + 1, m)
        ]
        for _ in range(3):  # the same scratch each time: a call must not see the one before
            ratings = rng.normal(1500.0, 300.0, m)
            cis = rng.uniform(0.0, 600.0, m)
            games = np.triu(rng.integers(0, 40, (m, m)).astype(float), 1)
            expected = _weights_by_hand(ratings, cis, games)
            got = upper_weights(ratings, cis, games[scratch.rows, scratch.cols], scratch)
            np.testing.assert_allclose(got, expected[scratch.rows, scratch.cols], rtol=1e-12)
            np.testing.assert_allclose(pair_weights(ratings, cis, games), expected, rtol=1e-12)


def test_games_upper_puts_each_pairs_games_in_its_place() -> None:
    names = sorted(f"bot-{i}" for i in range(7))
    scratch = PairScratch(len(names))
    few = {("bot-1", "bot-4"): 3, ("bot-0", "bot-6"): 9, ("bot-2", "outsider"): 5}
    many = {(a, b): 1 + i for i, (a, b) in enumerate((a, b) for a in names for b in names if a < b)}
    many.update({(f"old-{k}", "outsider"): 2 for k in range(40)})  # more pairs than half the matrix: the other path
    for pairs in (few, many, {}):
        pool = _Pool(load_game("rps"), "rps", pair_games=dict(pairs))
        scratch.games.fill(7.0)  # what a pick before left there
        games = _games_upper(pool, names, scratch.games)
        expected = [pairs.get((names[i], names[j]), 0) for i, j in zip(scratch.rows, scratch.cols, strict=True)]
        assert games.tolist() == expected


async def test_a_pick_among_hundreds_of_bots_makes_no_array_the_size_of_its_pairs(tmp_path: Path) -> None:
    """A pick in a big pool computes in the ladder's kept arrays (each new one of 160 kB faulted its pages in)."""
    store = await Store.open(tmp_path / "big.db")
    rock = hosted_bots()["rock"]
    names = [f"rock-{i:03d}" for i in range(300)]
    hosted = {name: HostedBot(name, rock.games, rock.factory, rock.description) for name in names}
    hub = Hub(store, hosted)
    try:
        ladder = Ladder(hub, LadderConfig([load_game("rps")], seed=3, bots=tuple(hosted)))
        pool = ladder.pools[0]
        rng = np.random.default_rng(3)
        for name in names:
            pool.bots[name] = _BotInfo(float(rng.normal(1500.0, 200.0)), float(rng.uniform(30.0, 300.0)), 10)
        for a, b in itertools.pairwise(names):
            pool.pair_games[(a, b)] = 4
        assert ladder._pick_in(pool) is not None  # the first pick makes the arrays it keeps
        tracemalloc.start()
        try:
            picks = [ladder._pick_in(pool) for _ in range(5)]
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert all(p is not None and len(set(p)) == 2 and set(p) <= set(names) for p in picks)
        pair_array = MAX_CANDIDATES * (MAX_CANDIDATES - 1) // 2 * 8  # bytes of one value a pair
        assert peak < pair_array / 2, f"a pick allocated up to {peak} bytes at once"
    finally:
        await hub.shutdown()
        await store.close()


async def test_four_bots_concurrency_two_play_every_pair(live_server: LiveServer) -> None:
    """Before issue 11 the same two pairs played forever with --concurrency 2 --per-bot 1."""
    names = ("rock", "rotate", "beat-last", "random")
    config = LadderConfig(
        [load_game("rps", rounds=20)], concurrency=2, per_bot=1, seed=1, bots=names, refit_interval=0.2
    )
    ladder = Ladder(live_server.hub, config)
    ladder.start()
    pool = ladder.pools[0]
    busiest = 0
    try:
        for _ in range(3000):
            busiest = max(busiest, len(ladder.units))
            if len(pool.pair_games) == 6 or ladder.matches_played >= 60:
                break
            await asyncio.sleep(0.01)
    finally:
        ladder.halt()
        await ladder.stop()
    assert busiest == 2  # both slots were used
    assert len(pool.pair_games) == 6, (ladder.matches_played, pool.pair_games)
    async with live_server.store.conn.execute(
        "SELECT COUNT(*) FROM rating_pairs WHERE pool = ? AND games > 0", (pool.key,)
    ) as cur:
        row = await cur.fetchone()
    assert row is not None and row[0] == 6


async def test_leaderboard_command_shows_freshness_and_groups(live_server: LiveServer) -> None:
    store = live_server.store
    for a, b in [("a", "b"), ("x", "y")] * 2:
        await _store_rated(store, a, b, 1.0)
    await ls.refit_dirty(store)
    await _store_rated(store, "a", "b", 0.5)  # a newer result: the pool is dirty again
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "arena_server.cli", "ladder", "leaderboard"),
        *("--server", live_server.address, "--pool", POOL),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert "newer results are waiting for the next refit" in text and "fitted" in text
    assert "2 groups of bots that never met" in text and " grp " in text
    rows = {line.split()[1]: line.split() for line in text.splitlines() if line[:3].strip().isdigit()}
    assert rows["a"][4] == rows["b"][4] == "0" and rows["x"][4] == rows["y"][4] == "1"
