"""The web pages over HTTP (httpx against the real uvicorn port), after real matches of every game."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

import arena_server.store.ratings as ls
from arena_client import Termination
from tests.web.web_support import WebSite, site

__all__ = ["site"]

GAMES: list[tuple[str, tuple[str, str], dict[str, object]]] = [
    ("rps", ("beat-last", "rotate"), {"rounds": 30}),
    ("rps", ("random", "rock"), {"rounds": 30, "signs": 5}),
    ("tic_tac_toe", ("random", "minimax"), {}),
    ("dots_and_boxes", ("random", "greedy"), {"rows": 2, "cols": 2}),
    ("liars_dice", ("random", "random"), {}),
]


async def get(site: WebSite, path: str, status: int = 200) -> httpx.Response:
    async with httpx.AsyncClient(base_url=site.url, timeout=10) as client:
        response = await client.get(path)
    assert response.status_code == status, (path, response.status_code, response.text[:400])
    return response


async def ladder(site: WebSite) -> None:
    """A small rps pool (default parameters: pool "rps") of deterministic and random bots, refitted."""
    for pair in [("beat-last", "rock"), ("rotate", "beat-last"), ("random", "rock"), ("random", "rotate")] * 2:
        await site.play("rps", *pair)
    await ls.refit_dirty(site.store)


async def pair_total(site: WebSite, me: str, other: str) -> tuple[int, int, int, int]:
    """(games, wins, draws, losses) of ``me`` against ``other`` in pool rps, from the store."""
    for p in await ls.head_to_head(site.store.conn, "rps", me):
        if p.b == other:
            return p.games, p.wins_a, p.draws, p.losses_a
    raise AssertionError(f"{me} never met {other}")


async def test_leaderboard_shows_ratings_with_intervals_sorts_and_marks_paused_bots(site: WebSite) -> None:
    await ladder(site)
    await ls.pause_bot(site.store, "rock", 1, "3 failed ladder matches in a row")
    page = (await get(site, "/leaderboard/rps")).text
    board = await ls.leaderboard(site.store.conn, "rps")
    names = re.findall(r'<tr class="[a-z]*" data-bot="([^"]+)"', page)
    assert names == [r.bot for r in board]  # best rating first, as the store orders them
    assert page.count('<svg class="bar"') == len(board)  # one interval bar per bot
    top = board[0]
    assert f"{top.rating:.0f} ± {top.ci:.0f}" in page
    assert re.search(r'<tr class="paused" data-bot="rock".*?paused</span> <span class="reason">3 failed', page, re.S)
    by_games = (await get(site, "/leaderboard/rps?sort=games&order=asc")).text
    games = [int(g) for g in re.findall(r'data-games="(\d+)"', by_games)]
    assert games == sorted(games) and len(games) == len(board)
    by_name = (await get(site, "/leaderboard/rps?sort=bot&order=desc")).text
    assert re.findall(r'data-bot="([^"]+)"', by_name) == sorted((r.bot for r in board), reverse=True)
    paged = (await get(site, "/leaderboard/rps?per=2&page=2")).text
    assert re.findall(r'data-bot="([^"]+)"', paged) == [r.bot for r in board[2:4]] and "Page 2 of 2" in paged
    rows = (await get(site, "/leaderboard/rps/rows")).text
    assert rows.lstrip().startswith("<tbody") and "<html" not in rows  # the live-update fragment
    bad = (await get(site, "/leaderboard/rps?sort=colour", 400)).text
    assert "sort=&#39;colour&#39; is not a column; use one of rank, bot, rating" in bad
    assert "is out of range; use 1..1000" in (await get(site, "/leaderboard/rps?per=5000", 400)).text
    assert "no rated matches in pool &#39;chess&#39;; pools: rps" in (await get(site, "/leaderboard/chess", 404)).text


async def test_leaderboard_and_bot_pages_need_no_javascript(site: WebSite) -> None:
    await ladder(site)
    for path in ("/", "/leaderboard/rps", "/bot/rotate", "/crosstable/rps", "/matches?bot=rock"):
        page = (await get(site, path)).text
        html_only = re.sub(r"<script.*?</script>", "", page, flags=re.S)
        assert "<table" in html_only  # the content is in the HTML itself, not built by a script
        assert "http://" not in page and "https://" not in page  # nothing from the internet (no CDN)
    sortable = (await get(site, "/leaderboard/rps")).text
    assert 'href="?sort=games&amp;order=desc' in sortable  # sorting is a plain link


async def test_crosstable_cells_open_the_pairs_matches(site: WebSite) -> None:
    await ladder(site)
    page = (await get(site, "/crosstable/rps")).text
    link = re.search(r'href="(/matches\?bot=beat-last&amp;opponent=rock&amp;game=rps)">([0-9.]+)<small>', page)
    assert link is not None
    games, wins, draws, losses = await pair_total(site, "beat-last", "rock")
    assert games == 2 and float(link.group(2)) == round((wins + 0.5 * draws) / games, 2)
    pair = (await get(site, link.group(1).replace("&amp;", "&"))).text
    listed = re.findall(r'<a href="/match/(\d+)">', pair)
    assert len(listed) == games
    for match_id in listed:
        record = await site.store.get_match(match_id, with_moves=False)
        assert record is not None and {s.bot_name for s in record.seats} == {"beat-last", "rock"}
    assert pair.count('class="result win"') == wins and pair.count('class="result loss"') == losses
    assert "opponent= needs bot= too" in (await get(site, "/matches?opponent=rock", 400)).text


async def test_bot_page_shows_facts_versions_failures_history_and_head_to_head(site: WebSite) -> None:
    await ladder(site)
    await site.add_fake("crashy", "exits_at_once")
    crashed = await site.play("rps", "crashy", "rock", rounds=5)
    assert crashed.termination == Termination.CRASH
    page = (await get(site, "/bot/crashy")).text
    assert "<dt>language</dt><dd>Python</dd>" in page and "<dt>kind</dt><dd>subprocess</dd>" in page
    assert '<span class="tag accepted">accepted</span>' in page and "python3 exits_at_once.py" in page
    assert f'<a href="/match/{crashed.match_id}">#{crashed.match_id}</a>' in page
    assert crashed.reason and crashed.reason[:40] in page.replace("&#39;", "'")  # the failure with its reason
    assert "cannot find my model file weights.bin" in page  # its stderr tail

    rotate = (await get(site, "/bot/rotate?pool=rps")).text
    assert "Python (runs inside the server)" in rotate
    points = re.search(r'<svg class="history".*?<polyline points="([0-9., ]+)" class="line"/>', rotate, re.S)
    assert points is not None and len(points.group(1).split()) == 4  # one point per rated match of rotate
    for other in ("beat-last", "random"):
        games, wins, draws, losses = await pair_total(site, "rotate", other)
        row = (
            rf'href="/bot/{other}\?pool=rps">{other}</a></td><td class="num">{games}</td>\s*'
            rf'<td class="num">{wins} / {draws} / {losses}'
        )
        assert re.search(row, rotate), other
    results = re.findall(r'class="result (win|draw|loss)"', rotate)
    assert len(results) == 4
    assert "no bot named &#39;nobody&#39;" in (await get(site, "/bot/nobody", 404)).text
    assert "has no rating in pool" in (await get(site, "/bot/rotate?pool=tic_tac_toe", 404)).text


async def test_every_route_is_read_only(site: WebSite) -> None:
    record = await site.play("rps", "rock", "rotate", rounds=5)
    before = await site.store.count_matches()
    async with httpx.AsyncClient(base_url=site.url, timeout=10) as client:
        for path in ("/", "/leaderboard/rps", "/bot/rock", f"/match/{record.match_id}", "/matches",
                     f"/match/{record.match_id}/frames.json", "/leaderboard/rps/events"):  # fmt: skip
            for method in ("POST", "PUT", "DELETE", "PATCH"):
                response = await client.request(method, path, content=b"name=rock&token=x")
                assert response.status_code == 405, (method, path, response.status_code)
    assert await site.store.count_matches() == before


async def test_replay_frames_of_every_game(site: WebSite) -> None:
    for game, names, params in GAMES:
        record = await site.play(game, *names, **params)
        assert record.termination == Termination.NORMAL, record.reason
        page = (await get(site, f"/match/{record.match_id}")).text
        data = json.loads(
            re.search(r'<script type="application/json" id="match-data">(.*?)</script>', page, re.S).group(1)
        )  # type: ignore[union-attr]
        assert data["header"]["seed"] == record.seed and record.seed in page  # revealed after the end
        assert data["header"]["seed_sha256"] == record.seed_sha256
        body = (await get(site, f"/match/{record.match_id}/frames.json")).json()
        frames: list[dict[str, Any]] = body["frames"]
        assert not body["more"] and frames[0]["ply"] == 1
        obs = frames[-1]["obs"]
        if game == "rps":
            assert len(frames) == params["rounds"] and obs["round"] == params["rounds"]
            assert sum(obs["wins"]) <= params["rounds"] and len(obs["last_round"]) == 2
        elif game == "tic_tac_toe":
            assert sum(1 for c in obs["board"] if c >= 0) == len(frames)
        elif game == "dots_and_boxes":
            assert all(obs["edges"]) and sum(obs["scores"]) == 4 and len(frames) == 12
        else:
            assert obs["to_move"] == -1 and obs["past_rounds"]
        second = (await get(site, f"/match/{record.match_id}/frames.json?offset=1&limit=1")).json()
        assert second["frames"] == frames[1:2] and second["more"] == (len(frames) > 2)


async def test_liars_dice_frames_reveal_dice_only_after_each_round(site: WebSite) -> None:
    record = await site.play("liars_dice", "random", "random")
    frames = (await get(site, f"/match/{record.match_id}/frames.json")).json()["frames"]
    rounds_done = 0
    for frame in frames:
        obs = frame["obs"]
        assert obs["my_dice"] == []  # a spectator never sees a hand during its round
        assert all(seat >= 0 for seat, _label in frame["moves"])  # no dice rolls among the moves
        assert len(obs["past_rounds"]) in (rounds_done, rounds_done + 1)
        if len(obs["past_rounds"]) > rounds_done:  # a round just ended: now (and only now) its dice show
            assert any(hand["dice"] for hand in obs["past_rounds"][-1]["hands"])
            rounds_done += 1
    assert rounds_done >= 5  # elimination: at least one round per die lost


async def test_running_match_keeps_its_seed_secret_and_streams_live_within_a_second(site: WebSite) -> None:
    await site.add_fake("sleepy", "slow", "0.15")
    running = await site.hub.start_match(
        __import__("arena_games").load_game("rps", rounds=12), ["sleepy", "rock"], rated=False
    )
    match_id = running.record.match_id
    seed = running.record.seed
    moved: list[tuple[float, int]] = []  # (when the referee published, public moves so far)

    def listen(kind: str, payload: Any) -> None:
        if kind == "moves":
            moved.append((time.monotonic(), (moved[-1][1] if moved else 0) + len(payload[0])))

    running.control.listeners.append(listen)
    received: list[float] = []
    events: list[tuple[str, Any]] = []
    async with httpx.AsyncClient(base_url=site.url, timeout=30) as client:
        page = (await client.get(f"/match/{match_id}")).text
        assert "secret until the match ends" in page and running.record.seed_sha256 in page and seed not in page
        frames = await client.get(f"/match/{match_id}/frames.json")
        assert frames.status_code == 409 and "still running" in frames.json()["error"] and seed not in frames.text
        async with client.stream("GET", f"/match/{match_id}/events") as stream:
            kind = ""
            async for line in stream.aiter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    events.append((kind, json.loads(line[6:])))
                    received.append(time.monotonic())
                    if kind == "end":
                        break
    kinds = [k for k, _ in events]
    assert kinds[0] == "header" and kinds[-1] == "end" and kinds.count("frame") >= 6
    assert all(seed not in json.dumps(data) for k, data in events if k != "end")
    assert events[-1][1]["seed"] == seed and events[-1][1]["status"] == "finished"
    # Every move reached the HTTP client within a second of the referee publishing it (frames batch moves).
    shown, arrivals = 0, []
    for (k, data), t in zip(events, received, strict=True):
        if k == "frame":
            shown += len(data["moves"])
            arrivals.append((t, shown))
    late = [next(t for t, n in arrivals if n >= count) - at for at, count in moved]
    assert max(late) < 1.0, late
    labels = [label for k, data in events if k == "frame" for _seat, label in data["moves"]]
    assert labels.count("rock") >= 12  # rock played every round; the fake answers with the first sign too
    assert "secret" not in (await get(site, f"/match/{match_id}")).text


async def test_unknown_and_malformed_requests_get_one_line_errors(site: WebSite) -> None:
    assert "no match with id &#39;999&#39;" in (await get(site, "/match/999", 404)).text
    assert "no match with id" in (await get(site, "/match/abc/frames.json", 404)).json()["error"]
    assert "before=&#39;x&#39; is not a whole number" in (await get(site, "/matches?before=x", 400)).text
    events = await get(site, "/match/999/events", 404)
    assert events.text.startswith("no match with id '999'")


def _busy_port() -> tuple[socket.socket, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock, int(sock.getsockname()[1])


def test_serve_refuses_a_busy_or_bad_http_port(tmp_path: Path) -> None:
    sock, port = _busy_port()
    try:
        argv = [sys.executable, "-m", "arena_server.cli", "serve", "--host", "127.0.0.1", "--port", "0",
                "--db", str(tmp_path / "a.db"), "--no-ladder", "--http-port", str(port)]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    finally:
        sock.close()
    assert done.returncode != 0
    assert (
        f"cannot listen for HTTP on 127.0.0.1:{port}" in done.stderr
        and "pick another --http-port, or --no-http" in done.stderr
    )
    bad = subprocess.run([*argv[:-1], "70000"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--http-port 70000 is out of range; use 0..65535" in bad.stderr


async def test_serve_prints_the_web_address_and_serves_it(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "arena_server.cli", "serve", "--host", "127.0.0.1", "--port", "0",
            "--db", str(tmp_path / "a.db"), "--no-ladder", "--http-port", "0"]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        url = ""
        for _ in range(10):
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
            found = re.search(r"web interface on (http://127\.0\.0\.1:\d+/)", line)
            if found:
                url = found.group(1)
                break
        assert url
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.get(url)
        assert response.status_code == 200 and "Rating pools" in response.text
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)
    assert proc.returncode == 0


async def test_leaderboard_stream_says_when_the_pool_changes(site: WebSite) -> None:
    await site.play("rps", "rock", "rotate")
    async with (
        httpx.AsyncClient(base_url=site.url, timeout=10) as client,
        client.stream("GET", "/leaderboard/rps/events") as stream,
    ):
        lines = stream.aiter_lines()
        assert await anext(lines) == "event: hello"
        assert json.loads((await anext(lines))[6:])["matches"] == 1
        began = time.monotonic()
        await site.play("rps", "beat-last", "rock")
        while await anext(lines) != "event: changed":
            pass
        assert json.loads((await anext(lines))[6:])["matches"] == 2
        assert time.monotonic() - began < 2.0


async def test_a_viewer_that_falls_too_far_behind_is_dropped_with_the_reason() -> None:
    from arena_server.web.live import VIEWER_BACKLOG, Viewer, event

    viewer = Viewer()
    for n in range(VIEWER_BACKLOG + 1):  # nobody reads this stream
        viewer.send(event("frame", {"n": n}))
    assert viewer.dropped and viewer.queue.qsize() == 2  # the backlog was freed
    text = viewer.queue.get_nowait()
    assert text is not None and text.startswith("event: dropped") and f"fell {VIEWER_BACKLOG} updates behind" in text
    assert viewer.queue.get_nowait() is None  # then the stream ends


def test_returns_are_written_as_people_write_them() -> None:
    """No "-0" and no trailing ".0" in the returns the pages show (issue 18's rule for every output)."""
    from arena_server.web.app import _returns

    assert _returns([0.0, -0.0]) == "0 : 0"
    assert _returns([20.0, -20.0]) == "20 : -20"
    assert _returns([0.5, -0.5]) == "0.5 : -0.5"
    assert _returns(None) == ""
