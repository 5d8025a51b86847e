"""Bad databases: corrupt, read-only, newer schema, two servers on one file, an old schema to migrate."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from arena_server.store.database import MIGRATIONS, SCHEMA_VERSION, Store, StoreError

ROOT = Path(__file__).resolve().parents[2]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def cli(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "arena_server.cli",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


def assert_one_line(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert err.startswith("arena: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


async def make_db(path: Path) -> None:
    store = await Store.open(path)
    try:
        await store.conn.execute(
            "INSERT INTO bots (name, kind, created_at) VALUES ('keep-me', 'subprocess', '2026-01-01')"
        )
    finally:
        await store.close()


async def test_corrupt_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    db.write_bytes(b"this is not a database, but somebody's notes\n" * 100)
    before = digest(db)
    with pytest.raises(StoreError, match="is not a usable Arena database"):
        await Store.open(db)
    code, err = await cli("ratings", "recompute", "--db", str(db))
    assert_one_line(code, err, "is not a usable Arena database", "--db")
    code, err = await cli("serve", "--no-http", "--port", "0", "--db", str(db))
    assert_one_line(code, err, "is not a usable Arena database")
    assert digest(db) == before


@pytest.fixture
def immutable(tmp_path: Path) -> Iterator[list[Path]]:
    """Files made immutable with chattr +i (read-only even for root); cleared afterwards."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not available")
    paths: list[Path] = []
    yield paths
    for p in paths:
        subprocess.run(["chattr", "-i", str(p)], check=False)


async def test_read_only_file_is_refused_with_nothing_lost(tmp_path: Path, immutable: list[Path]) -> None:
    db = tmp_path / "arena.db"
    await make_db(db)
    # an old schema, so opening it would have to write (migrate)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    before = digest(db)
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem does not support chattr +i")
    immutable.append(db)
    with pytest.raises(StoreError, match="is read-only; Arena needs to write to it"):
        await Store.open(db, exclusive=False)
    code, err = await cli("ratings", "recompute", "--db", str(db))
    assert_one_line(code, err, "is read-only")
    assert digest(db) == before


async def test_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    await make_db(db)
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    before = digest(db)
    with pytest.raises(StoreError, match="newer than this Arena understands"):
        await Store.open(db)
    code, err = await cli("serve", "--no-http", "--port", "0", "--db", str(db))
    assert_one_line(code, err, f"schema version {SCHEMA_VERSION + 5}", "upgrade Arena")
    assert digest(db) == before


async def test_two_servers_on_one_file(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    first = await Store.open(db)
    try:
        with pytest.raises(StoreError, match="another Arena server"):
            await Store.open(db)
        code, err = await cli("serve", "--no-http", "--port", "0", "--db", str(db))
        assert_one_line(code, err, "another Arena server", "--db")
        code, err = await cli("ratings", "recompute", "--db", str(db))
        assert_one_line(code, err, "another Arena server")
        async with first.conn.execute("SELECT COUNT(*) FROM bots") as cur:
            assert (await cur.fetchone()) == (0,)  # the first one still works
    finally:
        await first.close()
    second = await Store.open(db)  # free again once the first has closed
    await second.close()


async def test_version_1_database_is_migrated_keeping_its_matches(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    conn = sqlite3.connect(db)
    conn.executescript(MIGRATIONS[0])
    conn.execute(
        "INSERT INTO matches (game, params, seed, seed_sha256, time_control, status, started_at, returns, "
        "termination, rated) VALUES ('rps', '{}', 's', 'h', "
        "'{\"per_move\": 1, \"overage\": 1, \"grace\": 0.1}', 'finished', '2026-01-01T00:00:00+00:00', "
        "'[1, -1]', 1, 0)"
    )
    conn.execute("INSERT INTO match_seats VALUES (1, 0, 'a', 1, 'hosted'), (1, 1, 'b', 1, 'hosted')")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    store = await Store.open(db)
    try:
        async with store.conn.execute("PRAGMA user_version") as cur:
            assert (await cur.fetchone()) == (SCHEMA_VERSION,)
        record = await store.get_match("1")
        assert record is not None and [s.bot_name for s in record.seats] == ["a", "b"]
        async with store.conn.execute("SELECT COUNT(*) FROM ratings") as cur:
            assert (await cur.fetchone()) == (0,)
    finally:
        await store.close()
