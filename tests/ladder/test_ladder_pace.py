"""The ladder's pace: ``min_interval`` spaces out match starts (``arena serve`` defaults to 0.5 s)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import arena_bots
from arena_games import load_game
from arena_server.ladder.scheduler import Ladder, LadderConfig
from arena_server.matches.hub import Hub
from arena_server.store.database import Store


async def _matches_started(tmp_path: Path, name: str, interval: float, seconds: float) -> int:
    store = await Store.open(tmp_path / name)
    hub = Hub(store, arena_bots.hosted_bots())
    config = LadderConfig(
        games=[load_game("rps", rounds=20)],
        bots=("rock", "rotate", "beat-last", "random"),
        concurrency=2,
        per_bot=2,
        min_interval=interval,
    )
    ladder = Ladder(hub, config)
    try:
        ladder.start()
        await asyncio.sleep(seconds)
    finally:
        await ladder.stop()
        await hub.shutdown()
        count = await store.count_matches()
        await store.close()
    return count


async def test_paced_ladder_starts_about_one_match_per_interval(tmp_path: Path) -> None:
    started = time.monotonic()
    paced = await _matches_started(tmp_path, "paced.db", 0.25, 1.5)
    elapsed = time.monotonic() - started
    # one unit per 0.25 s (a unit is one match for RPS), plus the first one at once
    assert paced <= elapsed / 0.25 + 2
    assert paced >= 3
    unpaced = await _matches_started(tmp_path, "fast.db", 0.0, 1.5)
    assert unpaced > 3 * paced
