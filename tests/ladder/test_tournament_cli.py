"""Tournaments (resumable, with outputs) and the ladder/replay CLI against a real server."""

from __future__ import annotations

import asyncio
import csv
import json
import sys
from pathlib import Path

import arena_server.store.ratings as ls
from arena_bots import hosted_bots
from arena_client import TimeControl
from arena_games import load_game
from arena_server.ladder.scheduler import Ladder, LadderConfig
from arena_server.ladder.tournament import Tournament
from arena_server.matches.hub import Hub
from arena_server.store.database import Store
from tests.conftest import LiveServer

ROOT = Path(__file__).resolve().parents[2]


async def arena(*args: str, cwd: Path | None = None, stdin: bytes = b"") -> tuple[int, str, str]:
    """Run the real CLI in a subprocess without blocking the event loop (the live server runs on it)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "arena_server.cli",
        *args,
        cwd=cwd or ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_tournament_resumes_where_it_stopped(tmp_path: Path) -> None:
    bots = ["rock", "rotate", "beat-last", "random"]
    game = load_game("rps", rounds=300, draw_band=6)
    db = tmp_path / "t.db"
    store = await Store.open(db)
    hub = Hub(store, hosted_bots())
    seen: list[int] = []
    stop_after = 7

    def progress(done: int, total: int, resumed: int, elapsed: float) -> None:
        seen.append(done)

    t = Tournament(hub, game, bots, 4, TimeControl())
    assert len(t.slots()) == 6 * 4
    task = asyncio.ensure_future(t.run(1, progress))
    while not seen or seen[-1] < stop_after:
        await asyncio.sleep(0.001)
    task.cancel()  # an interruption in the middle of a match
    await asyncio.gather(task, return_exceptions=True)
    await hub.shutdown()
    await store.close()
    store = await Store.open(db)
    try:
        hub = Hub(store, hosted_bots())
        again = Tournament(hub, game, list(reversed(bots)), 4, TimeControl())
        assert again.id == t.id  # the same tournament, whatever the order of --bots
        before = await again.done_slots()
        assert stop_after <= len(before) < 24
        calls: list[tuple[int, int]] = []
        result = await again.run(2, lambda d, total, r, e: calls.append((d, r)))
        assert calls[0] == (len(before), len(before)) and calls[-1][0] == 24
        assert result.played == 24 and len(result.match_ids) == 24
        played_now = await store.count_matches()
        assert played_now >= 24  # an interrupted match is replayed, nothing is played twice otherwise
        for slot, match_id in before.items():
            assert (await again.done_slots())[slot] == match_id
        assert [s.games for s in result.standings] == [12, 12, 12, 12]
        # The seeds are secret (salted per tournament), so only what no seed can change is asserted:
        # beat-last answers rock's rock with paper every round, and rotate draws every round with beat-last.
        cells = {(c.bot_a, c.bot_b): c for c in result.crosstable}
        assert cells[("beat-last", "rock")].wins_a == 4
        assert cells[("beat-last", "rotate")].draws == 4
        assert [s.score for s in result.standings] == sorted((s.score for s in result.standings), reverse=True)
        assert all(c.games == 4 for c in result.crosstable)
        # tournament matches are unrated
        assert await ls.list_pools(store.conn) == []
    finally:
        await store.close()


async def test_tournament_cli_outputs_and_bad_input(tmp_path: Path) -> None:
    argv = ["tournament", "--game", "rps", "-p", "rounds=100", "--bots", "rock", "rotate", "random"]
    argv += ["--games-per-pair", "2", "--db", str(tmp_path / "t.db"), "--output", str(tmp_path / "res")]
    code, out, err = await arena(*argv, "--quiet")
    assert code == 0, err
    assert "rating" in out and "W-D-L" in out
    data = json.loads((tmp_path / "res.json").read_text())
    assert data["played"] == data["total"] == 6 and data["params"]["draw_band"] == 2
    rows = list(csv.DictReader((tmp_path / "res-standings.csv").read_text().splitlines()))
    assert {r["bot"] for r in rows} == {"rock", "rotate", "random"}
    cross = list(csv.DictReader((tmp_path / "res-crosstable.csv").read_text().splitlines()))
    assert len(cross) == 3 and all(int(r["games"]) == 2 for r in cross)
    # rerun: nothing left to play
    code, _out, err = await arena(*argv)
    assert code == 0 and "6 of 6 matches were played by an earlier run; playing the other 0" in err
    for bad, message in [
        (["--bots", "rock"], "a tournament needs at least 2 bots"),
        (["--bots", "rock", "nosuch"], "unknown bot 'nosuch'; hosted bots are:"),
        (["--bots", "rock", "rock"], "is listed twice"),
    ]:
        code, out, err = await arena("tournament", "--game", "rps", *bad, "--db", str(tmp_path / "x.db"))
        assert code == 2 and err.startswith("arena: ") and message in err and err.count("\n") == 1, err
        assert "Traceback" not in err


async def test_ladder_and_replay_commands_against_a_live_server(live_server: LiveServer, tmp_path: Path) -> None:
    config = LadderConfig([load_game("tic_tac_toe")], concurrency=1, seed=1, bots=("random",))
    # one hosted bot cannot play itself on the ladder: add a second name for the same bot
    live_server.hub.hosted["random-2"] = hosted_bots()["random"]
    try:
        config.bots = ("random", "random-2")
        ladder = Ladder(live_server.hub, config)
        ladder.start()
        while ladder.matches_played < 4:
            await asyncio.sleep(0.01)
        ladder.halt()
        await ladder.stop()
    finally:
        live_server.hub.hosted.pop("random-2", None)
    server = ["--server", live_server.address]
    code, out, err = await arena("ladder", "leaderboard", "-g", "tic_tac_toe", *server)
    assert code == 0, err
    assert "tic_tac_toe" in out and "random-2" in out and "±95%" in out
    code, out, err = await arena("ladder", "crosstable", "-g", "tic_tac_toe", *server)
    assert code == 0 and "random" in out and "95% interval" in out, err
    code, out, err = await arena("ladder", "matches", "random", *server)
    assert code == 0 and "tic_tac_toe" in out, err
    match_id = out.split()[0]
    code, out, err = await arena("replay", match_id, "--no-step", *server)
    assert code == 0, err
    assert "ply 1" in out and ("X" in out) and "match " + match_id in out
    code, out, err = await arena("replay", match_id, "--step", *server, stdin=b"\n" * 3 + b"q\n")
    assert code == 0 and "ply 4" in out and "ply 5" not in out, err
    export = tmp_path / "seat1.jsonl"
    code, out, err = await arena("replay", match_id, "--seat", "1", "--export", str(export), *server)
    assert code == 0 and "messages" in out, err
    lines = export.read_text().splitlines()
    assert json.loads(lines[0])["matchStarted"]["seat"] == 1 and "matchEnded" in json.loads(lines[-1])
    code, out, err = await arena(
        "replay",
        "--feed",
        str(export),
        "--cmd",
        f"{sys.executable} {ROOT / 'tests/ladder/recording_bot.py'} {tmp_path / 'log.jsonl'} first",
    )
    assert code in (0, 1) and "turns:" in out, err
    for args, message in [
        (["replay", "999999", *server], "no match with id '999999'"),
        (["replay", match_id, "--seat", "5", "--export", str(tmp_path / "x"), *server], "seat 5 does not exist"),
        (["ladder", "leaderboard", "-g", "dots_and_boxes", *server], "no rated matches in pool 'dots_and_boxes'"),
        (["ladder", "leaderboard", "--server", "127.0.0.1:1"], "cannot reach 127.0.0.1:1 (connection"),
        (["replay", "--feed", str(export)], "--feed needs --cmd"),
    ]:
        code, out, err = await arena(*args)
        assert code == 2 and message in err and err.count("\n") == 1, (args, err)


async def test_ratings_unpause_command(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    store = await Store.open(db)
    await ls.pause_bot(store, "sicilian", 1, "paused after 3 failed matches in a row")
    await store.close()
    code, out, err = await arena("ratings", "unpause", "sicilian", "--db", str(db))
    assert code == 0 and "plays on the ladder again" in out, err
    code, out, err = await arena("ratings", "unpause", "sicilian", "--db", str(db))
    assert code == 2 and "'sicilian' is not paused; paused bots: none" in err
    store = await Store.open(db)
    try:
        assert await ls.paused_bots(store.conn) == {}
    finally:
        await store.close()
