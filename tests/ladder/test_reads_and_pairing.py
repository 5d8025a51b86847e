"""Reads never write; refits happen in the background and at shutdown; matchmaking covers every pair.

Everything runs on a real gRPC server (port 0) with a real SQLite store and
in-process hosted bots.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from pathlib import Path

import numpy as np

import arena_server.store.ratings as ls
from arena.v1 import ladder_pb2 as lp
from arena.v1 import ladder_pb2_grpc as lp_grpc
from arena_games import load_game
from arena_server.ladder.scheduler import PAIR_FLOOR, Ladder, LadderConfig, RatingRefitter, pair_weights
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
