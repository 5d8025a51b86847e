"""The web interface in a real browser (Playwright driving Debian's Chromium) against a real ``arena serve``.

The server is a subprocess with its ladder running (so the leaderboard has real
rated matches and keeps changing); each game's match is created over gRPC, and
a live match is a remote SDK bot, in its own process, that thinks for a moment
before every move. Skipped, with a message saying how to get a browser, where
``/usr/bin/chromium`` or the ``playwright`` package is missing: ``make
test-browser`` installs Chromium and runs these tests. With ``ARENA_SCREENSHOTS=DIR``
the tests also save a PNG of each page there (how docs/web/ was made).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc

CHROMIUM = "/usr/bin/chromium"
LAUNCH_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = os.environ.get("ARENA_SCREENSHOTS", "")

try:
    from playwright.async_api import Browser, Page, async_playwright
except ImportError:  # pragma: no cover - depends on the environment
    async_playwright = None  # type: ignore[assignment]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        async_playwright is None or not os.path.exists(CHROMIUM),
        reason=f"no browser: needs the playwright package (pip install -e '.[browser]') and {CHROMIUM} "
        "(apt-get install -y chromium); `make test-browser` installs both and runs these tests",
    ),
]

SLOW_BOT = textwrap.dedent(
    """
    import asyncio, sys, time
    from arena_client import Bot
    from arena_client.remote import Client

    class Thinker(Bot):
        def act(self, turn):
            time.sleep(0.25)
            return turn.legal_actions[0]

    asyncio.run(Client(Thinker(), sys.argv[1], name="thinker").play(opponent="rock", params={"rounds": 30}))
    """
)


@dataclass
class Served:
    grpc_address: str
    url: str
    proc: subprocess.Popen[str]


@pytest.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    folder = tmp_path_factory.mktemp("browser")
    argv = [sys.executable, "-m", "arena_server.cli", "serve", "--host", "127.0.0.1", "--port", "0",
            "--http-port", "0", "--db", str(folder / "arena.db"), "--ladder-game", "rps",
            "--ladder-bots", "random,rock,rotate,beat-last", "--ladder-interval", "0.2"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    grpc_address = url = ""
    assert proc.stdout is not None
    while not url:
        line = await asyncio.to_thread(proc.stdout.readline)
        if not line:
            raise AssertionError(f"arena serve stopped: {proc.stderr.read() if proc.stderr else ''}")
        if m := re.search(r"serving on (127\.0\.0\.1:\d+)", line):
            grpc_address = m.group(1)
        if m := re.search(r"web interface on (http://127\.0\.0\.1:\d+)/", line):
            url = m.group(1)
    try:
        yield Served(grpc_address, url, proc)
    finally:
        proc.terminate()
        await asyncio.to_thread(proc.communicate, None, 30)  # reads and closes the pipes


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    assert async_playwright is not None
    async with async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_FLAGS)
        try:
            yield launched
        finally:
            await launched.close()


async def new_page(browser: Browser) -> Page:
    page = await browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors  # type: ignore[attr-defined]
    return page


async def shot(page: Page, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"), full_page=True)


async def create_match(served: Served, game: str, bots: list[str], **params: Any) -> str:
    async with grpc.aio.insecure_channel(served.grpc_address) as channel:
        request = mp.CreateMatchRequest(game=game, bots=bots, wait=True)
        for key, value in params.items():
            request.params[key].int_value = value
        response = await mp_grpc.MatchServiceStub(channel).CreateMatch(request)
    return str(response.record.match_id)


async def rows_of(page: Page) -> list[str]:
    return list(await page.locator("#leader-rows tr").evaluate_all("rows => rows.map(r => r.dataset.bot)"))


async def test_leaderboard_sorts_updates_live_and_opens_a_bot_page(served: Served, browser: Browser) -> None:
    page = await new_page(browser)
    for _ in range(60):  # the ladder's first rated matches and fit
        await page.goto(served.url + "/leaderboard/rps")
        if await page.locator("#leader-rows tr").count() >= 4:
            break
        await asyncio.sleep(0.5)
    assert set(await rows_of(page)) == {"random", "rock", "rotate", "beat-last"}
    assert await page.locator("#leader-rows svg.bar").count() == 4
    rows = page.locator("#leader-rows tr")
    ratings = [float(r) for r in await rows.evaluate_all("rs => rs.map(r => r.dataset.rating)")]
    assert ratings == sorted(ratings, reverse=True)
    # Live: the ladder keeps playing; the rows are fetched again without a reload.
    updated = "document.getElementById('live-status').textContent.startsWith('live: updated')"
    await page.wait_for_function(updated, timeout=20_000)
    await shot(page, "leaderboard")
    await page.click("th[data-key=games] a")
    await page.wait_for_url(re.compile(r"sort=games"))
    games = [int(g) for g in await page.locator("#leader-rows tr").evaluate_all("rs => rs.map(r => r.dataset.games)")]
    assert games == sorted(games, reverse=True)
    await page.click("#leader-rows a[href^='/bot/rotate']")
    await page.wait_for_url(re.compile(r"/bot/rotate"))
    assert await page.locator("svg.history polyline").count() == 1
    for _ in range(40):  # rotate meets its three opponents as the ladder goes on
        if await page.locator("table.h2h tbody tr").count() == 3:
            break
        await asyncio.sleep(0.5)
        await page.reload()
    assert await page.locator("table.h2h tbody tr").count() == 3
    assert "Python (runs inside the server)" in await page.locator("dl.facts").inner_text()
    await shot(page, "bot")
    await page.goto(served.url + "/crosstable/rps")
    await page.click("table.heatmap td a >> nth=0")
    await page.wait_for_url(re.compile(r"/matches\?bot=.*&opponent="))
    assert await page.locator("table.matches tbody tr").count() >= 1
    await page.goto(served.url + "/crosstable/rps")
    await shot(page, "crosstable")
    assert page.errors == []  # type: ignore[attr-defined]


async def step_to(page: Page, index: int) -> None:
    await page.locator("#step").evaluate(
        "(el, i) => { el.value = String(i); el.dispatchEvent(new Event('input')); }", index
    )


async def test_replays_of_every_game_step_through(served: Served, browser: Browser) -> None:
    page = await new_page(browser)

    # Rock-paper-scissors: timeline, running score, distributions.
    match_id = await create_match(served, "rps", ["beat-last", "rock"], rounds=25)
    await page.goto(f"{served.url}/match/{match_id}")
    await page.wait_for_function("document.getElementById('position').textContent === '0 / 25'")
    await page.click("[data-step=next]")
    assert await page.locator("#position").inner_text() == "1 / 25"
    assert await page.locator("#round").inner_text() == "1"
    await page.click("[data-step=last]")
    assert await page.locator("#round").inner_text() == "25"
    wins = [int(w) for w in (await page.locator("#score").inner_text()).split(" : ")]
    assert wins[0] >= 24 and wins[0] + wins[1] <= 25  # beat-last wins every round after its first (a guess)
    assert await page.locator("table.timeline td.sign").count() == 50
    assert await page.locator("#seed").inner_text() != ""
    await shot(page, "replay-rps")

    # Tic-tac-toe: the board fills one mark per step.
    match_id = await create_match(served, "tic_tac_toe", ["random", "random"])
    await page.goto(f"{served.url}/match/{match_id}")
    await page.wait_for_function("!document.getElementById('position').textContent.startsWith('0 / 0')")
    last = int((await page.locator("#position").inner_text()).split(" / ")[1])
    for step in range(last + 1):
        await step_to(page, step)
        marks = await page.locator("table.ttt td.seat0, table.ttt td.seat1").count()
        assert marks == step
    await shot(page, "replay-tic-tac-toe")

    # Dots and boxes: one more edge per step, boxes claimed by the end.
    match_id = await create_match(served, "dots_and_boxes", ["random", "random"], rows=2, cols=2)
    await page.goto(f"{served.url}/match/{match_id}")
    await page.wait_for_function("document.getElementById('position').textContent === '0 / 12'")
    for step in range(13):
        await step_to(page, step)
        assert await page.locator("svg.dots line.drawn").count() == step
    assert await page.locator("svg.dots rect.box").count() == 4
    await shot(page, "replay-dots-and-boxes")

    # Liar's Dice: bids per round; the dice only in finished rounds.
    match_id = await create_match(served, "liars_dice", ["random", "random"])
    await page.goto(f"{served.url}/match/{match_id}")
    await page.wait_for_function("!document.getElementById('position').textContent.startsWith('0 / 0')")
    await page.click("[data-step=next]")
    assert await page.locator("ol.bids li").count() == 1
    assert await page.locator(".die").count() == 0  # the first round is not over: no dice shown
    await page.click("[data-step=last]")
    assert await page.locator("tr.round").count() >= 5 and await page.locator(".die").count() > 0
    await shot(page, "replay-liars-dice")
    assert page.errors == []  # type: ignore[attr-defined]


async def test_a_live_match_updates_within_a_second(served: Served, browser: Browser, tmp_path: Path) -> None:
    script = tmp_path / "thinker.py"
    script.write_text(SLOW_BOT)
    bot = subprocess.Popen([sys.executable, str(script), served.grpc_address], stderr=subprocess.DEVNULL)
    page = await new_page(browser)
    try:
        href = ""
        for _ in range(100):
            await page.goto(served.url + "/")
            link = page.locator("ul.live a", has_text="#")
            for i in range(await link.count()):
                item = await page.locator("ul.live li").nth(i).inner_text()
                if "thinker" in item:
                    href = str(await link.nth(i).get_attribute("href"))
            if href:
                break
            await asyncio.sleep(0.2)
        assert href, "the thinker's match never showed among the live matches"
        await page.goto(served.url + href)
        assert await page.locator("#live").is_visible()
        assert "secret until the match ends" in await page.locator("#seed").inner_text()
        await page.wait_for_function("Number(document.getElementById('round')?.textContent) >= 2", timeout=5000)
        seen: list[int] = []
        for _ in range(4):  # a move every ~0.25 s: the viewer must show each new round within a second
            now = int(await page.locator("#round").inner_text())
            await page.wait_for_function(f"Number(document.getElementById('round').textContent) > {now}", timeout=1000)
            seen.append(now)
        await shot(page, "live")
        finished = "document.getElementById('status').textContent.startsWith('finished')"
        await page.wait_for_function(finished, timeout=30_000)
        assert await page.locator("#round").inner_text() == "30"
        assert re.fullmatch(r"[0-9a-f]{16,}", await page.locator("#seed").inner_text())
        assert page.errors == []  # type: ignore[attr-defined]
    finally:
        bot.terminate()
        await asyncio.to_thread(bot.wait, 30)
