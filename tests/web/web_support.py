"""A real server for the web tests: SQLite file, hub with hosted and subprocess bots, uvicorn on port 0."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

import arena_bots
from arena_client import TimeControl
from arena_games import load_game
from arena_server.matches.hub import Hub
from arena_server.referee.records import MatchRecord
from arena_server.store.database import Store
from arena_server.web.server import WebServer

ROOT = Path(__file__).resolve().parents[2]
FAKES = ROOT / "tests" / "fakes"
RELAXED = TimeControl(timedelta(seconds=2), timedelta(seconds=20), timedelta(seconds=0.5))


@dataclass
class WebSite:
    hub: Hub
    store: Store
    web: WebServer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.web.port}"

    async def play(self, game: str, *names: str, rated: bool = True, **params: object) -> MatchRecord:
        """Play one real match to its end (through the hub, like the ladder) and return its record."""
        running = await self.hub.start_match(load_game(game, **params), names, RELAXED, rated=rated)
        assert running.task is not None
        return await running.task

    async def add_fake(self, name: str, fake: str, *args: str, games: tuple[str, ...] = ("rps",)) -> None:
        """Register ``tests/fakes/<fake>.py`` as a subprocess bot (copied into the data dir, as a submission is)."""
        registry = self.hub.registry
        assert registry is not None
        folder = registry.data_dir / name
        folder.mkdir(mode=0o755, parents=True)
        for source in (FAKES / f"{fake}.py", FAKES / "_stdio.py"):
            shutil.copy(source, folder / source.name)
            (folder / source.name).chmod(0o644)
        command = " ".join(["python3", f"{fake}.py", *args])
        await registry.add_local(name, command, games, workdir=str(folder), description=f"the {fake} fake")
        await registry.refresh()


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[WebSite]:
    store = await Store.open(tmp_path / "arena.db")
    hub = Hub(store, arena_bots.hosted_bots())
    web = WebServer(hub, "127.0.0.1", 0)
    await web.start()
    try:
        yield WebSite(hub, store, web)
    finally:
        await hub.shutdown(grace=5)
        await web.stop()
        await store.close()
