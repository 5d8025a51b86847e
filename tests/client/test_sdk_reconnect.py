"""The SDK survives server restarts: real ``arena serve`` processes stopped, killed and restarted.

Waiting bots reconnect after every restart (the back-off starts again after a
successful connection), a challenger does not count aborted matches, and one
``Client`` can play several challenges in a row.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from arena_client import MatchInfo, Termination, Turn
from arena_client.remote import FIRST_BACKOFF, ArenaError, Client
from tests.conftest import LiveServer
from tests.fakes.bots import Paper
from tests.soak_support import ScriptProcess, ServerProcess, write_sdk_bot

RECONNECT_LIMIT = 10.0
"""Seconds a waiting bot may take to reconnect once the restarted server serves.

A SIGTERM outage lasts about 3 s (the server's 2 s grace, then its start-up),
so with the back-off reset the bot needs up to 4 attempts (0.5+1+2+4 s at
most); without the reset the waits keep doubling from one restart to the next
up to 30 s. The exact check is on the retries: every outage starts again at
attempt 1 with a wait of at most FIRST_BACKOFF.
"""


def restart_waiting_bots(tmp_path: Path, restarts: int) -> dict[str, object]:
    """Two SDK bots wait to be seated while the server is stopped/killed and restarted ``restarts`` times."""
    with ServerProcess(tmp_path / "arena.db") as server:
        server.start()
        bots = [
            ScriptProcess(write_sdk_bot(tmp_path / f"bot{i}.py", server.address, name=f"waiter-{i}", give_up_after=60))
            for i in range(2)
        ]
        try:
            for bot in bots:
                assert bot.wait_events("connected", 1, 30), bot.err.text()
            delays: list[float] = []
            startups: list[float] = []
            for n in range(1, restarts + 1):
                if n % 2:
                    server.stop(signal.SIGTERM)  # graceful: matches aborted, streams closed
                else:
                    server.kill()  # a crash: streams cut
                startups.append(server.start())
                serving = time.monotonic()
                for bot in bots:
                    assert bot.wait_events("connected", n + 1, RECONNECT_LIMIT), (
                        f"restart {n}: {bot.events('connected')[-1]['name']} did not reconnect within "
                        f"{RECONNECT_LIMIT:g}s of the server serving again\n{bot.err.text()}"
                    )
                    delays.append(bot.events("connected")[n]["t"] - serving)
            connects = [len(bot.events("connected")) for bot in bots]
            outages = [outage_retries(bot) for bot in bots]
        finally:
            for bot in bots:
                bot.interrupt()
            codes = [bot.wait(10) for bot in bots]
    for bot, code in zip(bots, codes, strict=True):
        assert code == 130 and "Traceback" not in bot.err.text(), bot.err.text()
    for retries in (r for bot_outages in outages for r in bot_outages):
        # The back-off starts afresh after every successful connection: attempt 1, at most FIRST_BACKOFF.
        assert retries and retries[0]["attempt"] == 1 and retries[0]["delay"] <= FIRST_BACKOFF, retries
    figures: dict[str, object] = {
        "restarts": restarts,
        "connections per bot": connects,
        "attempts per outage: max": max(len(r) for bot_outages in outages for r in bot_outages),
        "first retry delay (s): max": round(max(r[0]["delay"] for o in outages for r in o), 2),
        "reconnect after serving (s): max": round(max(delays), 2),
        "mean": round(statistics.mean(delays), 2),
        "server start-up (s): mean": round(statistics.mean(startups), 2),
    }
    print(f"\nSDK restart soak: {figures}")
    assert connects == [restarts + 1, restarts + 1]
    return figures


def outage_retries(bot: ScriptProcess) -> list[list[dict[str, Any]]]:
    """The bot's retry events between one welcome and the next, per outage."""
    outages: list[list[dict[str, Any]]] = []
    for event in bot.events():
        if event["event"] == "connected":
            outages.append([])
        elif event["event"] == "retry" and outages:
            outages[-1].append(event)
    return outages[:-1]  # the last connection has not been lost


def test_waiting_bots_reconnect_after_every_restart_quick(tmp_path: Path) -> None:
    """Three restarts (SIGTERM, SIGKILL, SIGTERM): both waiting bots are welcomed again every time."""
    restart_waiting_bots(tmp_path, 3)


@pytest.mark.slow
def test_waiting_bots_reconnect_after_twenty_restarts(tmp_path: Path) -> None:
    """The soak: twenty restarts, every one of them seen by both bots (the old back-off missed 11-12 of 20)."""
    restart_waiting_bots(tmp_path, 20)


def test_challenger_does_not_count_a_match_aborted_by_a_restart(tmp_path: Path) -> None:
    """The server is stopped (SIGTERM) mid-match and restarted on the same port and database."""
    db = tmp_path / "arena.db"
    with ServerProcess(db, args=("--no-ladder", "--shutdown-grace", "30")) as server:
        server.start()
        script = write_sdk_bot(
            tmp_path / "challenger.py",
            server.address,
            name="challenger",
            opponent="random",
            params={"rounds": 60},
            matches=2,
            act_sleep=0.02,
            give_up_after=60,
            max_backoff=1.0,
        )
        with ScriptProcess(script) as bot:
            assert bot.wait_events("started", 1, 30), bot.err.text()
            time.sleep(0.2)  # a few rounds in (a match lasts at least 60 x 0.02 s)
            signalled = time.monotonic()
            assert server.stop(signal.SIGTERM) == 0
            # The bot was thinking: its answer, moot after the abort, still comes and lets the server go.
            assert time.monotonic() - signalled < 10.0, "the server waited out its 30 s grace for the bot"
            server.start()
            assert bot.wait_events("done", 1, 60), bot.out.text() + bot.err.text()
            assert bot.wait(10) == 0
    [done] = bot.events("done")
    ended = {e["match_id"]: e["termination"] for e in bot.events("ended")}
    assert "ABORTED" in ended.values()  # the bot heard the abort ...
    assert len(done["results"]) == 2  # ... and still got two real results
    assert all(termination == "NORMAL" for _, termination in done["results"])
    with sqlite3.connect(db) as conn:
        stored = dict(
            conn.execute(
                "SELECT m.id, m.status FROM matches m JOIN match_seats s ON s.match_id = m.id "
                "WHERE s.bot_name = 'challenger'"
            ).fetchall()
        )
    assert sorted(stored.values()) == ["aborted", "finished", "finished"]
    finished = {str(match_id) for match_id, status in stored.items() if status == "finished"}
    assert {match_id for match_id, _ in done["results"]} == finished


class SlowPaper(Paper):
    """Paper that calls back when a match starts (to abort it from the test) and thinks a little."""

    def __init__(self) -> None:
        self.started: asyncio.Queue[str] = asyncio.Queue()
        self.loop = asyncio.get_running_loop()

    def on_match_start(self, match: MatchInfo) -> None:
        self.loop.call_soon_threadsafe(self.started.put_nowait, match.match_id)

    def act(self, turn: Turn) -> int:
        time.sleep(0.005)
        return 1


async def test_challenger_challenges_again_when_the_server_aborts_a_match(live_server: LiveServer) -> None:
    """A match aborted on a server that stays up (an admin abort, a referee failure): asked for again."""
    bot = SlowPaper()
    client = Client(bot, live_server.address, name="again")
    task = asyncio.ensure_future(client.play(opponent="rock", params={"rounds": 30}, matches=2))
    first = await asyncio.wait_for(bot.started.get(), 20)
    live_server.hub.running[first].control.abort("aborted by the test")
    results = await asyncio.wait_for(task, 30)
    assert [r.termination for r in results] == [Termination.NORMAL, Termination.NORMAL]
    assert [r.match_id for r in client.aborted] == [first]
    assert first not in {r.match_id for r in results}


class Thinker(SlowPaper):
    """SlowPaper that thinks for half a second, on the SDK's worker thread (the stream is read meanwhile)."""

    def act(self, turn: Turn) -> int:
        time.sleep(0.5)
        return 1


async def test_an_answer_made_moot_by_an_abort_still_goes_out_and_its_dropped_reply_is_not_shown(
    live_server: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The match ends while act thinks: the SDK hears it, and when act returns it still sends the answer.

    That answer is the bot's word that it owes the server nothing (a stopping server waits for it); the
    server drops it with a "stale turn" error, which the SDK expects and keeps out of the warnings.
    """
    caplog.set_level(logging.DEBUG, logger="arena_client")
    bot = Thinker()
    client = Client(bot, live_server.address, name="thinker", threaded=True)
    task = asyncio.ensure_future(client.play(opponent="rock", params={"rounds": 3}, matches=2))
    first = await asyncio.wait_for(bot.started.get(), 20)
    session = live_server.hub.sessions["thinker"]
    deadline = time.monotonic() + 10
    while not session.owed_turn:  # its first Turn is on the stream: act is thinking
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    live_server.hub.running[first].control.abort("aborted by the test")
    results = await asyncio.wait_for(task, 30)
    assert [r.termination for r in results] == [Termination.NORMAL, Termination.NORMAL]
    assert [r.match_id for r in client.aborted] == [first]
    dropped = [r for r in caplog.records if "server says" in r.getMessage()]
    assert dropped, "the SDK never sent the answer the abort made moot"
    assert [(r.levelno, f"match {first!r} is over" in r.getMessage()) for r in dropped] == [(logging.DEBUG, True)]


async def test_one_client_plays_two_challenges_in_a_row(live_server: LiveServer) -> None:
    """The second play() on the same Client is not resigned (it used to find the act worker shut down)."""
    client = Client(Paper(), live_server.address, name="twice")
    first = await client.play(opponent="rock", params={"rounds": 10})
    second = await client.play(opponent="rock", params={"rounds": 10})
    assert len(first) == 1 and len(second) == 1
    assert first[0].match_id != second[0].match_id
    for result in (*first, *second):
        assert result.termination == Termination.NORMAL, result.reason
        assert result.returns == (10.0, -10.0)
    assert client.connections == 2


async def test_a_challenge_refused_for_now_is_sent_again_until_it_is_played(
    live_server: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The server cannot record a match for a while (its database is read-only): it refuses the challenge
    with ``retry_later``, and the SDK challenges again after a back-off, on the same connection, instead
    of stopping with 'challenge refused'. A killed worker of ``arena serve --workers`` refuses the same way
    (its store writer is gone) until it stops."""
    caplog.set_level(logging.INFO, logger="arena_client")
    store = live_server.store
    await store.conn.execute("PRAGMA query_only = ON")  # every write fails: a match cannot even start
    client = Client(Paper(), live_server.address, name="patient")
    task = asyncio.ensure_future(client.play(opponent="rock", params={"rounds": 5}, matches=2))
    deadline = time.monotonic() + 20
    while "cannot start the match for now" not in caplog.text:
        assert not task.done(), task.exception()
        assert time.monotonic() < deadline, caplog.text
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.5)  # refused again meanwhile (the store refuses after its 0.5 s pause)
    assert not task.done()
    await store.conn.execute("PRAGMA query_only = OFF")  # the fault clears
    results = await asyncio.wait_for(task, 30)
    assert [r.termination for r in results] == [Termination.NORMAL, Termination.NORMAL]
    assert client.connections == 1  # challenged again on the same stream
    assert caplog.text.count("cannot start the match for now") >= 2
    assert "attempt to write a readonly database" in caplog.text


async def test_refusals_for_now_end_in_an_error_after_give_up_after_and_a_wrong_challenge_at_once(
    live_server: LiveServer,
) -> None:
    store = live_server.store
    client = Client(Paper(), live_server.address, name="refused")
    began = time.monotonic()
    with pytest.raises(ArenaError, match="challenge refused: no bot named 'nobody'"):  # not for now: at once
        await asyncio.wait_for(client.play(opponent="nobody", params={"rounds": 5}), 20)
    assert time.monotonic() - began < 5
    await store.conn.execute("PRAGMA query_only = ON")
    try:
        with pytest.raises(ArenaError, match=r"refused the challenge for \d+ s, each time for now; giving up"):
            await asyncio.wait_for(client.play(opponent="rock", params={"rounds": 5}, give_up_after=2.0), 30)
        with pytest.raises(ArenaError, match="challenge refused: the server could not record a new match"):
            await asyncio.wait_for(client.play(opponent="rock", params={"rounds": 5}, reconnect=False), 20)
    finally:
        await store.conn.execute("PRAGMA query_only = OFF")
