"""Look-alike names are found through the indexed ``bots.name_key`` column, not by reading every bot.

A Hello, a guest's match and a registration each ask whether a name is taken
by a look-alike (``arena_server.store.names.name_key``). They used to read the
whole ``bots`` table and key every row in Python; the key is now stored and
indexed (migration 6), and filled in for databases made before it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from arena_server.bots.registry import BotRegistry, RegistryError
from arena_server.store.database import MIGRATIONS, SCHEMA_VERSION, Store
from arena_server.store.names import name_key

NOW = "2026-11-25T00:00:00+00:00"


def version_5_database(path: Path, names: list[str]) -> None:
    """A database as Arena left it before bots had a stored name key."""
    conn = sqlite3.connect(path)
    for script in MIGRATIONS[:5]:
        conn.executescript(script)
    conn.executemany("INSERT INTO bots (name, kind, created_at) VALUES (?, 'remote', ?)", [(n, NOW) for n in names])
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()


async def test_an_older_database_gets_its_names_keyed_and_look_alikes_still_collide(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    version_5_database(db, ["Alice", "random-walker", "ｂｏｂ"])  # (fullwidth "bob")
    store = await Store.open(db)
    try:
        async with store.conn.execute("PRAGMA user_version") as cur:
            assert (await cur.fetchone()) == (SCHEMA_VERSION,)
        async with store.conn.execute("SELECT name, name_key FROM bots ORDER BY id") as cur:
            assert await cur.fetchall() == [("Alice", "alice"), ("random-walker", "random-walker"), ("ｂｏｂ", "bob")]
        registry = BotRegistry(store, tmp_path / "data")
        with pytest.raises(RegistryError, match="looks the same as 'Alice'"):
            await registry.register("ALICE")
        with pytest.raises(RegistryError, match="looks the same as 'ｂｏｂ'"):
            await registry.register("Bob")
        assert await registry.lookup("АLICE") == ("Alice", None)  # (Cyrillic A: a Hello's name is keyed as is)
        await registry.register("carol")
        async with store.conn.execute("SELECT name_key FROM bots WHERE name = 'carol'") as cur:
            assert (await cur.fetchone()) == ("carol",)  # a registration stores its key
    finally:
        await store.close()


async def test_a_row_inserted_without_a_key_still_counts(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "arena.db")
    try:
        await store.conn.execute("INSERT INTO bots (name, kind, created_at) VALUES ('Dave', 'remote', ?)", (NOW,))
        registry = BotRegistry(store, tmp_path / "data")
        with pytest.raises(RegistryError, match="looks the same as 'Dave'"):
            await registry.register("DAVE")
        assert await registry.lookup("dАve") == ("Dave", None)  # (Cyrillic A)
    finally:
        await store.close()
    store = await Store.open(tmp_path / "arena.db")  # the next open keys it
    try:
        async with store.conn.execute("SELECT name_key FROM bots WHERE name = 'Dave'") as cur:
            assert (await cur.fetchone()) == (name_key("Dave"),)
    finally:
        await store.close()


async def sqlite_steps(store: Store, registry: BotRegistry, name: str) -> int:
    """SQLite virtual-machine steps one ``lookup`` (what a Hello asks) takes."""
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0

    await store.read(lambda db: db.set_progress_handler(tick, 1))
    try:
        await registry.lookup(name)
    finally:
        await store.read(lambda db: db.set_progress_handler(None, 1))
    return steps


async def test_a_hello_reads_the_rows_of_its_name_only(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "arena.db")
    try:
        registry = BotRegistry(store, tmp_path / "data")
        for i in range(20):
            await registry.register(f"bot-{i}")
        few = await sqlite_steps(store, registry, "BOT-7")
        await store.conn.executemany(
            "INSERT INTO bots (name, kind, created_at, name_key) VALUES (?, 'remote', ?, ?)",
            [(f"more-{i}", NOW, f"more-{i}") for i in range(2000)],
        )
        many = await sqlite_steps(store, registry, "BOT-7")
        print(f"\n{few} SQLite steps for a lookup among 20 bots, {many} among 2020")
        assert await registry.lookup("BOT-7") == ("bot-7", None)
        # Reading the whole table took tens of steps per bot; through the index the count stays put.
        assert many < few * 2 + 50, f"{few} steps with 20 bots, {many} with 2020: the lookup reads every bot"
    finally:
        await store.close()
