"""Hidden information stays hidden: the seed of a running match is nowhere a bot or a user can read.

Each test plays a real Liar's Dice match on a live server (hosted ``random`` against a raw
gRPC bot that holds its turn), attacks while it runs, then checks that the seed is revealed
at the end and that the revealed seed really produced the dice.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest

import arena_bots
from arena.v1 import bot_session_pb2 as bs
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client import TimeControl
from arena_client.convert import duration
from arena_games import CHANCE, load_game
from arena_server.ladder.tournament import Tournament
from arena_server.matches.hub import Hub
from arena_server.referee.records import MatchRecord
from arena_server.referee.seeds import chance_rng, seed_hash
from arena_server.store.database import Store
from tests.conftest import LiveServer
from tests.fakes.grpc_bots import RawBot


async def _hold_a_dice_match(live_server: LiveServer) -> tuple[RawBot, bs.MatchStarted, list[bs.ServerMessage]]:
    """A guest challenges hosted ``random`` at Liar's Dice with a slow clock and stops at its first turn."""
    raw = RawBot(live_server.channel())
    seen = [await raw.hello()]
    challenge = bs.Challenge(opponent="random", game="liars_dice", seat=0)
    challenge.params["dice"].int_value = 3
    challenge.time_control.per_move.CopyFrom(duration(timedelta(seconds=60)))
    await raw.send(bs.BotMessage(challenge=challenge))
    while True:
        msg = await raw.recv()
        seen.append(msg)
        if msg.WhichOneof("kind") == "turn":
            break
    started = next(m.match_started for m in seen if m.WhichOneof("kind") == "match_started")
    return raw, started, seen


def _database_bytes(db_path: Path) -> bytes:
    """Everything SQLite keeps for the database: the main file, its WAL and shared-memory index."""
    parts = [db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm"), Path(f"{db_path}-journal")]
    return b"".join(p.read_bytes() for p in parts if p.exists())


def _command_lines() -> list[bytes]:
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                out.append((proc / "cmdline").read_bytes())
            except OSError:
                continue  # gone, or not ours to read
    return out


def _replay_chance(game_name: str, params: dict[str, int], seed: str, moves: Sequence[mp.MoveRecord]) -> int:
    """Re-derive every chance outcome from the seed, as the README tells anyone to; return how many."""
    game = load_game(game_name, **params)
    state = game.new_initial_state()
    rng = chance_rng(seed)
    checked = 0
    for move in moves:
        if move.seat == CHANCE:
            x, acc, expected = rng.random(), 0.0, None
            outcomes = state.chance_outcomes()
            for action, prob in outcomes:
                acc += prob
                if x < acc:
                    expected = action
                    break
            expected = outcomes[-1][0] if expected is None else expected
            assert move.action == expected, f"ply {move.ply}: the seed gives {expected}, the record says {move.action}"
            checked += 1
        state.apply_action(move.action)
    return checked


async def test_seed_is_secret_while_running_and_verifiable_after(live_server: LiveServer) -> None:
    raw, started, seen = await _hold_a_dice_match(live_server)
    match_id = started.match_id
    seed = live_server.hub.running[match_id].record.seed  # the one copy: the referee's memory
    assert seed and started.seed_sha256 == hashlib.sha256(seed.encode()).hexdigest()
    needle = seed.encode()

    # 1. The database file, its WAL and shm, byte for byte, and through a read-only connection.
    assert needle not in _database_bytes(live_server.db_path), "the running match's seed is in the database files"
    ro = sqlite3.connect(f"file:{live_server.db_path}?mode=ro", uri=True)
    try:
        row = ro.execute("SELECT seed, seed_sha256, status FROM matches WHERE id = ?", (int(match_id),)).fetchone()
        dump = "\n".join(ro.iterdump())
    finally:
        ro.close()
    assert row == ("", started.seed_sha256, "running")
    assert seed not in dump

    # 2. Every API a user or a bot can call while the match runs.
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    got = await stub.GetMatch(mp.GetMatchRequest(match_id=match_id))
    assert got.status == mp.MATCH_STATUS_RUNNING and got.seed == "" and got.seed_sha256 == started.seed_sha256
    assert needle not in got.SerializeToString()
    # The dice rolled so far are in the referee's log, and not in the page of moves anyone else gets.
    log = live_server.hub.running[match_id].record.moves
    assert CHANCE in log.players and got.move_count == len(log)
    assert len(got.moves) == sum(1 for p in log.players if p != CHANCE)
    assert all(m.seat != CHANCE for m in got.moves)
    listed = await stub.ListMatches(mp.ListMatchesRequest(game="liars_dice"))
    assert [m.match_id for m in listed.matches] == [match_id] and needle not in listed.SerializeToString()
    watch = stub.WatchMatch(mp.WatchMatchRequest(match_id=match_id))
    first = await asyncio.wait_for(watch.read(), 10)
    assert first.started.seed == "" and needle not in first.SerializeToString()
    watch.cancel()
    assert all(needle not in m.SerializeToString() for m in seen)  # MatchStarted and the Turn: commitment only

    # 3. No process's command line carries it.
    assert not [c for c in _command_lines() if needle in c]

    # The bot resigns; now everything is revealed and checkable.
    await raw.send(bs.BotMessage(resign=bs.Resign(match_id=match_id, reason="test over")))
    ended = (await raw.recv_kind("match_ended")).match_ended
    assert ended.seed == seed and hashlib.sha256(ended.seed.encode()).hexdigest() == started.seed_sha256
    for _ in range(200):
        record = await stub.GetMatch(mp.GetMatchRequest(match_id=match_id))
        if record.status != mp.MATCH_STATUS_RUNNING and match_id not in live_server.hub.running:
            break
        await asyncio.sleep(0.02)
    assert record.seed == seed and not record.seed_chosen
    assert needle in _database_bytes(live_server.db_path)  # written at the end
    params = {k: v.int_value for k, v in record.params.items() if v.WhichOneof("kind") == "int_value"}
    rolls = sum(1 for m in record.moves if m.seat == CHANCE)
    assert rolls > 0 and _replay_chance("liars_dice", params, record.seed, record.moves) == rolls
    with pytest.raises(AssertionError):  # and a wrong seed does not explain those dice
        _replay_chance("liars_dice", params, record.seed + "x", record.moves)


async def test_hosted_bot_randomness_is_not_replayable_by_the_challenger(live_server: LiveServer) -> None:
    """Choosing the seed against a hosted bot would let a challenger replay the bot's own random draws."""
    raw = RawBot(live_server.channel())
    await raw.hello()
    challenge = bs.Challenge(opponent="random", game="rps", seed="known-to-the-attacker")
    challenge.params["rounds"].int_value = 5
    await raw.send(bs.BotMessage(challenge=challenge))
    status = (await raw.recv_kind("challenge_status")).challenge_status
    assert status.state == bs.ChallengeStatus.STATE_REFUSED
    assert "hosted bot 'random'" in status.reason and "leave the seed empty" in status.reason
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    request = mp.CreateMatchRequest(game="rps", bots=["random", "rock"], seed="known", wait=True)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.CreateMatch(request)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "chosen seed is not allowed against the hosted bot" in (refused.value.details() or "")
    assert await live_server.store.count_matches() == 0


def _readme_verifier() -> str:
    """The Python block of docs/fairness.md (once the README's section), which tells anyone how to check a seed."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "fairness.md").read_text()
    section = readme.split("# Fairness: seeds, commitments and who may play rated", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


async def test_readme_verifier_checks_a_real_match(live_server: LiveServer) -> None:
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    request = mp.CreateMatchRequest(game="liars_dice", bots=["random", "random"], wait=True)
    record = (await stub.CreateMatch(request)).record
    assert record.seed and any(m.seat == CHANCE for m in record.moves)
    code = (
        _readme_verifier()
        .replace("localhost:50051", live_server.address)
        .replace('match_id="1"', f"match_id={record.match_id!r}")
    )
    printed: list[str] = []
    namespace = {"print": printed.append}
    await asyncio.to_thread(exec, compile(code, "docs/fairness.md", "exec"), namespace)
    rolls = sum(1 for m in record.moves if m.seat == CHANCE)
    assert printed == [f"match {record.match_id}: {rolls} dice rolled by the committed seed"]
    tampered = mp.MatchRecord()
    tampered.CopyFrom(record)
    tampered.seed = record.seed[:-1] + ("0" if record.seed[-1] != "0" else "1")
    with pytest.raises(AssertionError, match="seed != commitment"):
        namespace["verify"](tampered)  # type: ignore[operator]


async def test_duplicate_set_keeps_its_seed_until_the_last_match(live_server: LiveServer) -> None:
    """The ladder replays a Liar's Dice seed with seats rotated: match 1 must not reveal match 2's dice."""
    hub = live_server.hub
    raw = RawBot(live_server.channel())
    guest = (await raw.hello()).welcome.bot_name
    game = load_game("liars_dice", dice=2)
    seed = "duplicate-set-seed-0123456789abcdef"
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    ids = []
    async with hub.sealed_seed(seed):
        for seating in ([guest, "random"], ["random", guest]):
            running = await hub.start_match(game, seating, seed=seed)
            started = (await raw.recv_kind("match_started")).match_started
            assert started.seed_sha256 == hashlib.sha256(seed.encode()).hexdigest()
            await raw.send(bs.BotMessage(resign=bs.Resign(match_id=started.match_id)))
            ended = (await raw.recv_kind("match_ended")).match_ended
            assert ended.seed == "", "the end of the first match told the bot the next match's dice"
            assert running.task is not None
            await running.task
            ids.append(started.match_id)
            got = await stub.GetMatch(mp.GetMatchRequest(match_id=started.match_id))
            assert got.status != mp.MATCH_STATUS_RUNNING and got.seed == ""
            assert seed.encode() not in _database_bytes(live_server.db_path)
    for match_id in ids:  # the set is over: both reveal it
        got = await stub.GetMatch(mp.GetMatchRequest(match_id=match_id))
        assert got.seed == seed


async def test_upgrade_forgets_the_seed_of_a_match_left_running(tmp_path: Path) -> None:
    """A database from before issue 12 may hold a running match's seed: the migration blanks it."""
    from arena_server.store.database import MIGRATIONS, Store

    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    for script in MIGRATIONS[:3]:
        conn.executescript(script)
    conn.execute(
        "INSERT INTO matches (game, params, seed, seed_sha256, time_control, status, started_at) "
        "VALUES ('liars_dice', '{}', 'old-secret-seed', 'x', ?, 'running', '2026-01-01T00:00:00+00:00')",
        ('{"per_move": 1, "overage": 1, "grace": 0}',),
    )
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    store = await Store.open(db)
    try:
        record = await store.get_match("1")
        assert record is not None and record.seed == "" and not record.seed_chosen
        assert record.termination is not None and record.termination.name == "ABORTED"
    finally:
        await store.close()


async def _run_dice_tournament(db: Path) -> str:
    """A 1-die Liar's Dice tournament (one duplicate pair) on ``db``, run twice; returns its seed."""
    game = load_game("liars_dice", dice=1)
    store = await Store.open(db)
    try:
        hub = Hub(store, arena_bots.hosted_bots())
        revealed_early: list[str] = []

        def watch(kind: str, payload: object) -> None:
            if kind == "ended" and isinstance(payload, MatchRecord) and not payload.seed_sealed:
                revealed_early.append(payload.match_id)

        original = hub.start_match

        async def start_and_watch(*args: Any, **kwargs: Any) -> Any:
            running = await original(*args, **kwargs)
            running.control.listeners.append(watch)
            return running

        hub.start_match = start_and_watch  # type: ignore[method-assign]
        tournament = Tournament(hub, game, ["random", "statistician"], 2, TimeControl())
        await tournament.run()
        first = [slot.seed for slot in tournament.slots()]
        assert len(set(first)) == 1, "the two games of the pair are one duplicate set"
        assert revealed_early == [], "a duplicate match ended with its seed revealed"
        again = Tournament(hub, game, ["statistician", "random"], 2, TimeControl())
        await again.run()  # resumes: nothing left to play, the same salt
        assert [slot.seed for slot in again.slots()] == first
        async with store.conn.execute("SELECT seed, seed_sha256 FROM matches") as cur:
            rows = list(await cur.fetchall())
        assert len(rows) == 2 and all(seed and seed_hash(seed) == sha for seed, sha in rows)
        return first[0]
    finally:
        await store.close()


async def test_tournament_seeds_are_secret_and_duplicates_sealed(tmp_path: Path) -> None:
    """A tournament's spec is public; its dice must not be: seeds carry a salt kept in the database.

    A resumed run reads the same salt (same seeds); a second database gets other seeds; Liar's Dice
    duplicates reveal their seed only once both matches of the set are over.
    """
    seeds = [await _run_dice_tournament(tmp_path / f"{name}.db") for name in ("a", "b")]
    assert seeds[0] != seeds[1], "two tournaments with the same spec must not share their dice"
