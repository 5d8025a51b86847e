"""The ladder coordinator of ``arena serve --workers N`` and the workers' unit sockets, in one process.

The live hub plays the worker: it serves :func:`serve_units` on a real Unix socket and referees the
matches, rated, into the real SQLite file. A second hub (with no matches of its own, as the main process's)
carries the coordinator. ``tests/server/test_workers_ladder.py`` runs the same on a real two-worker server.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

import arena_bots
import arena_server.store.ratings as ls
from arena.v1 import bots_pb2 as bp
from arena.v1 import bots_pb2_grpc as bp_grpc
from arena_bots import HostedBot
from arena_bots.simple import RandomBot
from arena_client import Bot, Termination, Turn
from arena_client.remote import Client
from arena_games import load_game
from arena_server.api.peers import Peers
from arena_server.ladder.coordinator import LadderConfigError, LadderCoordinator, serve_units, units_path
from arena_server.ladder.scheduler import LadderConfig, Outcome
from arena_server.matches.hub import Hub
from arena_server.store.writer import Connected, read_message, send_message
from tests.conftest import LiveServer
from tests.ladder.test_ladder_live import Crasher, add_bot, crasher_matches, extra_bots, scalar
from tests.server._relays import nowhere, silent_relay, until

__all__ = ["extra_bots"]  # (the fixture, used by name)


@pytest.fixture
async def units(live_server: LiveServer, tmp_path: Path) -> AsyncIterator[str]:
    """The live hub serving ladder units as worker 0 does; the socket directory."""
    folder = tmp_path / "sockets"
    folder.mkdir()
    server = await serve_units(live_server.hub, units_path(str(folder), 0))
    try:
        yield str(folder)
    finally:
        server.close()


async def ask(folder: str, *requests: tuple[Any, ...]) -> list[tuple[str, Any, Any]]:
    """Send requests to worker 0's unit socket over one connection; every reply until each unit is over."""
    reader, writer = await asyncio.open_unix_connection(units_path(folder, 0))
    for request in requests:
        await send_message(writer, request)
    replies = []
    over = 0
    while over < len(requests):
        reply = await asyncio.wait_for(read_message(reader), 30)
        replies.append(reply)
        over += reply[0] in ("done", "over", "failed", "redirected")
    writer.close()
    return replies


def outcomes(replies: list[tuple[str, Any, Any]]) -> list[Outcome]:
    """The match outcomes among a worker's replies, in order (``ended``, and the one that goes with ``over``)."""
    return [value if kind == "ended" else value[0] for kind, _unit, value in replies if kind in ("ended", "over")]


def main_hub(live: LiveServer, folder: str, directory: dict[str, Connected] | None = None) -> Hub:
    """A hub like the main process's: the hosted bots, the store, the workers' directory, and no matches."""
    hub = Hub(live.store, arena_bots.hosted_bots())
    hub.peers = Peers(folder, nowhere, directory={} if directory is None else directory)
    return hub


async def test_a_worker_plays_a_unit_and_sends_back_only_its_outcome(live_server: LiveServer, units: str) -> None:
    game = load_game("rps", rounds=20)
    replies = await ask(units, ("play", 7, game, ["rock", "rotate"], None))
    assert [(kind, unit) for kind, unit, _value in replies] == [("over", 7)]  # (one match: one message)
    outcome, busy = replies[0][2]
    assert isinstance(outcome, Outcome)
    assert outcome.termination == Termination.NORMAL
    assert [(s.seat, s.bot_name) for s in outcome.seats] == [(0, "rock"), (1, "rotate")]
    assert busy == []
    assert set(Outcome._fields) == {"match_id", "termination", "offender", "reason", "seats"}  # no seed, no moves
    rated = await scalar(
        live_server.store,
        "SELECT COUNT(*) FROM matches WHERE id = ? AND rated = 1 AND status = 'finished'",
        int(outcome.match_id),
    )
    assert rated == 1  # stored and rated before the coordinator heard of it


async def test_units_sent_together_on_one_connection_play_at_once_and_answer_by_number(units: str) -> None:
    long, short = load_game("rps", rounds=3000), load_game("rps", rounds=3)
    replies = await ask(
        units, ("play", 1, long, ["rock", "rotate"], None), ("play", 2, short, ["beat-last", "random"], None)
    )
    assert [(kind, unit) for kind, unit, _value in replies] == [("over", 2), ("over", 1)]  # (the short one first)
    names = {unit: [s.bot_name for s in value[0].seats] for _kind, unit, value in replies}
    assert names == {1: ["rock", "rotate"], 2: ["beat-last", "random"]}


async def test_a_dice_unit_is_a_duplicate_set_on_one_worker(
    live_server: LiveServer, units: str, extra_bots: dict[str, HostedBot]
) -> None:
    add_bot(live_server, extra_bots, HostedBot("random-b", ("liars_dice",), RandomBot, "second random"))
    replies = await ask(units, ("play", 3, load_game("liars_dice", dice=2), ["random", "random-b"], None))
    assert [kind for kind, _unit, _value in replies] == ["ended", "over"]
    first, second = (tuple(s.bot_name for s in outcome.seats) for outcome in outcomes(replies))
    assert second == first[::-1]
    records = [await live_server.store.get_match(outcome.match_id) for outcome in outcomes(replies)]
    assert records[0] is not None and records[1] is not None and records[0].seed == records[1].seed


@pytest.mark.parametrize(
    ("request_", "unit"),
    [
        (("play", 4, "rps", ["rock", "rotate"], None), 4),
        (("play", 5, load_game("rps"), ["rock", "rotate"]), 5),
        (("stop",), None),
        ("a string", None),
    ],
)
async def test_a_request_that_is_not_a_unit_is_answered_failed_and_the_connection_serves_on(
    units: str, request_: object, unit: object
) -> None:
    replies = await ask(units, request_, ("play", 6, load_game("rps", rounds=3), ["rock", "rotate"], None))  # type: ignore[arg-type]
    assert replies[0][:2] == ("failed", unit) and "not a ladder unit" in replies[0][2], replies
    assert [(kind, u) for kind, u, _value in replies[1:]] == [("over", 6)]


async def test_a_unit_with_a_bot_the_worker_cannot_seat_ends_quietly(units: str) -> None:
    replies = await ask(units, ("play", 8, load_game("rps", rounds=5), ["rock", "nobody"], None))
    assert replies == [("done", 8, [])]


async def test_the_coordinator_places_a_remote_bots_unit_on_its_worker_and_the_rest_on_the_least_loaded(
    live_server: LiveServer, tmp_path: Path
) -> None:
    directory = {
        "far": Connected("far", 2, ("rps",), False, "k"),
        "mover-0": Connected("mover-0", 0, ("rps",), False, "k", True),
        "mover-1": Connected("mover-1", 1, ("rps",), False, "k", True),
        "mover-1b": Connected("mover-1b", 1, ("rps",), False, "k", True),
    }
    hub = main_hub(live_server, str(tmp_path), directory)
    ports = {0: 1000, 1: 1001, 2: 1002}
    coordinator = LadderCoordinator(hub, LadderConfig([load_game("rps")]), str(tmp_path), 3, ports)
    assert coordinator.place(["rock", "far"]) == 2
    assert coordinator.place(["mover-1", "far"]) == 2  # "far" does not follow redirects: it stays, the other moves
    # Two that follow: the worker fewer remote bots are connected to (0: one; 1: two), whichever seat it is.
    assert coordinator.place(["mover-1", "mover-0"]) == 0
    assert coordinator.place(["mover-0", "mover-1"]) == 0
    directory["mover-0b"] = Connected("mover-0b", 0, ("rps",), False, "k", True)
    coordinator.load[:] = [1, 0, 0]
    assert coordinator.place(["mover-0", "mover-1"]) == 1  # (as many on each: the less loaded)
    coordinator.load[:] = [0, 0, 0]
    assert [coordinator.place(["rock", "rotate"]) for _ in range(3)] == [0, 1, 2]  # idle workers in turn
    coordinator.load[:] = [2, 0, 1]
    assert coordinator.place(["rock", "rotate"]) == 1
    without_ports = LadderCoordinator(hub, LadderConfig([load_game("rps")]), str(tmp_path), 3)
    assert without_ports.place(["mover-1", "mover-0"]) == 0  # (nobody can move: still the emptier worker)
    with pytest.raises(LadderConfigError):
        LadderCoordinator(hub, LadderConfig([load_game("rps")]), str(tmp_path), 0)
    with pytest.raises(LadderConfigError):
        LadderCoordinator(Hub(live_server.store, arena_bots.hosted_bots()), LadderConfig([load_game("rps")]), "x", 1)


async def test_the_coordinator_runs_the_ladder_through_a_worker_and_pauses_a_failing_bot(
    live_server: LiveServer, units: str, extra_bots: dict[str, HostedBot]
) -> None:
    add_bot(live_server, extra_bots, HostedBot("crasher", ("rps",), lambda seed: Crasher(), "always crashes"))
    hub = main_hub(live_server, units)
    hub.hosted["crasher"] = live_server.hub.hosted["crasher"]  # (every process hosts the same bots)
    store = live_server.store
    game = load_game("rps", rounds=10)
    config = LadderConfig([game], concurrency=2, pause_after=2, seed=4, bots=("crasher", "rock", "rotate", "beat-last"))
    coordinator = LadderCoordinator(hub, config, units, 1)
    coordinator.start()
    for _ in range(1000):
        if "crasher" in coordinator.paused and coordinator.matches_played >= 12:
            break
        await asyncio.sleep(0.02)
    coordinator.halt()
    await coordinator.stop()
    assert "crasher" in coordinator.paused
    assert await crasher_matches(store) == 2  # (one match at a time per bot: none was in flight)
    assert "paused after 2 failed matches in a row" in (await ls.paused_bots(store.conn))["crasher"][1]
    assert coordinator.placed == [coordinator.placed[0]] and coordinator.placed[0] >= 12
    assert coordinator.load == [0]
    finished = await scalar(store, "SELECT COUNT(*) FROM matches WHERE rated = 1 AND status = 'finished'")
    assert finished == coordinator.matches_played
    pool = coordinator.pools[0]
    assert sum(pool.pair_games.values()) == finished  # the pair counts are of every match it had played
    _snap, diffs = await ls.recompute(store, write=False)
    assert diffs == []


async def test_the_coordinator_goes_on_when_a_worker_is_gone(live_server: LiveServer, tmp_path: Path) -> None:
    """No worker listens: each unit fails with one line, and the coordinator stops cleanly when told."""
    hub = main_hub(live_server, str(tmp_path))
    config = LadderConfig([load_game("rps", rounds=5)], concurrency=1, seed=1, bots=("rock", "rotate"))
    coordinator = LadderCoordinator(hub, config, str(tmp_path), 1)
    coordinator.start()
    for _ in range(200):
        if coordinator.placed[0] >= 1:
            break
        await asyncio.sleep(0.01)
    coordinator.halt()
    await coordinator.stop()
    assert coordinator.placed[0] >= 1 and coordinator.matches_played == 0 and coordinator.load == [0]


async def scripted_worker(folder: str, answer: Any) -> tuple[asyncio.AbstractServer, list[tuple[Any, ...]]]:
    """A stand-in for worker 0's unit socket: records each request and lets ``answer(request, writer)`` reply.

    The coordinator is the thing under test here; the worker's side is scripted to say what a real one
    says only rarely (a remote bot busy in a challenge there, a connection that breaks mid-unit).
    """
    requests: list[tuple[Any, ...]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await read_message(reader)
                requests.append(request)
                await answer(request, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_unix_server(handle, path=units_path(folder, 0)), requests


async def test_a_remote_bot_found_busy_on_its_worker_is_left_alone_a_while(
    live_server: LiveServer, tmp_path: Path
) -> None:
    async def busy(request: tuple[Any, ...], writer: asyncio.StreamWriter) -> None:
        await send_message(writer, ("done", request[1], list(request[3])))

    server, requests = await scripted_worker(str(tmp_path), busy)
    directory = {"far": Connected("far", 0, ("rps",), False, "k")}
    hub = main_hub(live_server, str(tmp_path), directory)
    config = LadderConfig([load_game("rps", rounds=5)], concurrency=1, seed=2, bots=("far", "rock"))
    coordinator = LadderCoordinator(hub, config, str(tmp_path), 1)
    try:
        coordinator.start()
        for _ in range(200):
            if requests:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        assert len(requests) == 1, requests  # "far" rests (PEER_REST, 1 s): no second unit meanwhile
        assert coordinator.eligible(coordinator.pools[0]) == ["rock"]
        assert requests[0][0] == "play" and sorted(requests[0][3]) == ["far", "rock"]
    finally:
        coordinator.halt()
        await coordinator.stop()
        server.close()
    assert coordinator.load == [0] and coordinator.matches_played == 0


async def test_a_connection_that_breaks_mid_unit_ends_the_units_on_it_and_the_next_unit_reconnects(
    live_server: LiveServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def hang_up(request: tuple[Any, ...], writer: asyncio.StreamWriter) -> None:
        writer.close()

    server, requests = await scripted_worker(str(tmp_path), hang_up)
    hub = main_hub(live_server, str(tmp_path))
    config = LadderConfig([load_game("rps", rounds=5)], concurrency=1, seed=3, bots=("rock", "rotate"))
    coordinator = LadderCoordinator(hub, config, str(tmp_path), 1)
    try:
        coordinator.start()
        for _ in range(400):
            if len(requests) >= 2:
                break
            await asyncio.sleep(0.01)
        assert len(requests) >= 2  # (the second on a new connection, after a second's pause)
    finally:
        coordinator.halt()
        await coordinator.stop()
        server.close()
    assert coordinator.load == [0] and coordinator.matches_played == 0
    assert "worker 0 could not play rock, rotate: the worker closed the connection" in capsys.readouterr().err


class Cycle(Bot):
    games = ("rps",)

    def act(self, turn: Turn) -> int:
        return turn.turn_id % 3


async def registered(live: LiveServer, name: str) -> str:
    """Register ``name`` on the live server (a guest is never redirected); its token."""
    async with grpc.aio.insecure_channel(live.address) as channel:
        reply = await bp_grpc.BotServiceStub(channel).RegisterBot(bp.RegisterBotRequest(name=name, games=["rps"]))
    return str(reply.token)


async def connected(live: LiveServer, name: str, follow: bool) -> tuple[Client, asyncio.Task[Any]]:
    """A registered SDK bot connected to the live server (waiting to be seated); its client and its play task."""
    client = Client(Cycle(), live.address, name=name, token=await registered(live, name), follow_redirects=follow)
    task = asyncio.ensure_future(client.play(give_up_after=20))
    for _ in range(500):
        if name in live.hub.sessions and client.connections:
            return client, task
        await asyncio.sleep(0.01)
    raise AssertionError(f"{name} did not connect")


async def test_a_bot_that_follows_redirects_is_moved_and_one_that_does_not_is_left(
    live_server: LiveServer, units: str
) -> None:
    """The worker's side of a redirect on a real session: the SDK bot is told the port, its session here
    ends, and it reconnects there at once (here the same server, so its second welcome is seen); a bot
    whose Hello did not ask, and an unknown name, are refused with nothing busy."""
    follower, playing = await connected(live_server, "mover", follow=True)
    stayer, staying = await connected(live_server, "stayer", follow=False)
    first = live_server.hub.sessions["mover"]
    try:
        assert first.follows_redirects and not live_server.hub.sessions["stayer"].follows_redirects
        replies = await ask(units, ("redirect", 1, "mover", live_server.port, 0))
        assert replies == [("redirected", 1, None)]
        assert first.is_closed and "redirected to port" in first.close_reason
        await until(lambda: follower.connections == 2, "the redirected bot did not reconnect")
        assert follower.redirects == 1 and follower.redirected_to == f"127.0.0.1:{live_server.port}"
        assert live_server.hub.sessions["mover"] is not first
        assert await ask(units, ("redirect", 2, "stayer", live_server.port, 0)) == [("done", 2, [])]
        assert await ask(units, ("redirect", 3, "nobody", live_server.port, 0)) == [("done", 3, [])]
        assert stayer.connections == 1 and stayer.redirects == 0
    finally:
        for task in (playing, staying):
            task.cancel()
        await asyncio.gather(playing, staying, return_exceptions=True)


async def test_a_busy_bot_is_not_redirected_and_one_sent_nowhere_comes_back_to_its_address(
    live_server: LiveServer, units: str
) -> None:
    follower, playing = await connected(live_server, "mover", follow=True)
    try:
        session = live_server.hub.sessions["mover"]
        async with session.busy:  # (as while it plays a match here)
            assert await ask(units, ("redirect", 1, "mover", live_server.port, 0)) == [("done", 1, ["mover"])]
        assert not session.is_closed and follower.redirects == 0
        with socket.socket() as probe:  # a port nothing listens on
            probe.bind(("127.0.0.1", 0))
            nowhere = probe.getsockname()[1]
        assert await ask(units, ("redirect", 2, "mover", nowhere, 0)) == [("redirected", 2, None)]
        await until(lambda: follower.connections == 2, "the bot did not come back to the address it was given")
        assert follower.redirects == 1 and follower.redirected_to is None
        assert "mover" in live_server.hub.sessions
    finally:
        playing.cancel()
        await asyncio.gather(playing, return_exceptions=True)


async def test_a_bot_whose_own_challenge_waits_for_its_opponent_is_not_redirected(
    live_server: LiveServer, units: str
) -> None:
    """A challenge queued for a busy opponent holds none of the challenger's locks (seats are taken in
    name order, ``holder`` first), yet a redirect would end the stream it waits on and lose its place.
    The worker refuses it as busy until the challenge is over; then the bot can be moved again."""
    _holder, holding = await connected(live_server, "holder", follow=False)
    opponent = live_server.hub.sessions["holder"]
    token = await registered(live_server, "mover")
    challenger = Client(Cycle(), live_server.address, name="mover", token=token, follow_redirects=True)
    try:
        async with opponent.busy:  # (as while "holder" plays another match)
            challenging = asyncio.ensure_future(challenger.play(opponent="holder", game="rps", give_up_after=20))
            await until(lambda: opponent.queued == 1, "the challenge did not wait for its opponent")
            session = live_server.hub.sessions["mover"]
            assert not session.busy.locked() and not session.queued and live_server.hub.challenging[session] == 1
            assert await ask(units, ("redirect", 1, "mover", live_server.port, 0)) == [("done", 1, ["mover"])]
            assert not session.is_closed and challenger.redirects == 0
        results = await asyncio.wait_for(challenging, 30)
        assert len(results) == 1 and challenger.connections == 1
        await until(lambda: session not in live_server.hub.challenging, "the challenge was not counted out")
        moved = asyncio.ensure_future(challenger.play(give_up_after=20))  # (idle now, waiting to be seated)
        await until(lambda: challenger.connections == 2 and "mover" in live_server.hub.sessions, "no reconnection")
        assert await ask(units, ("redirect", 2, "mover", live_server.port, 0)) == [("redirected", 2, None)]
        await until(lambda: challenger.redirects == 1, "the idle bot was not moved")
        moved.cancel()
        await asyncio.gather(moved, return_exceptions=True)
    finally:
        holding.cancel()
        await asyncio.gather(holding, return_exceptions=True)


async def test_a_match_for_a_redirected_bot_that_never_arrives_is_refused_after_the_wait(
    live_server: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the worker a bot was sent to, a match that names it waits for its claim; if it never comes, the
    refusal says where it went and to try again (not that no such bot exists). One that arrives is seated."""
    import arena_server.matches.hub as hub_module

    monkeypatch.setattr(hub_module, "ARRIVAL_WAIT", 0.2)
    directory = {"mover": Connected("mover", 1, ("rps",), False, "moving:k", True, True)}
    hub = Hub(live_server.store, arena_bots.hosted_bots())
    hub.peers = Peers(str(tmp_path), nowhere, me=1, directory=directory)
    game = load_game("rps", rounds=3)
    began = asyncio.get_running_loop().time()
    with pytest.raises(hub_module.HubError, match="'mover' was moved to another worker of this server and has not"):
        await hub.start_match(game, ["mover", "rock"])
    assert asyncio.get_running_loop().time() - began >= 0.2

    async def arrive() -> None:
        await asyncio.sleep(0.05)
        directory["mover"] = Connected("mover", 1, ("rps",), False, "k2", True)

    arriving = asyncio.ensure_future(arrive())
    await hub.arrivals(["mover", "rock"])
    assert arriving.done() and not hub.peers.moving("mover")


async def test_a_guest_that_follows_redirects_is_never_moved(live_server: LiveServer, units: str) -> None:
    """Whoever seats a guest proves it with its session's token; a new session would have another one, so a
    guest stays where it connected (its matches with bots on other workers are relayed)."""
    guest = Client(Cycle(), live_server.address, name="wanderer", follow_redirects=True)
    playing = asyncio.ensure_future(guest.play(give_up_after=20))
    try:
        await until(lambda: "wanderer" in live_server.hub.sessions and guest.connections == 1, "no guest")
        session = live_server.hub.sessions["wanderer"]
        assert session.guest and session.follows_redirects
        assert await ask(units, ("redirect", 1, "wanderer", live_server.port, 0)) == [("done", 1, [])]
        assert not session.is_closed and guest.redirects == 0
    finally:
        playing.cancel()
        await asyncio.gather(playing, return_exceptions=True)


def test_a_unit_still_taking_a_seat_when_the_workers_loop_ends_leaves_no_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker whose loop ends while a unit waits for another worker's relay (the bot is connected there)
    ends its unit socket's handler quietly. On Python 3.11, asyncio's unix server logs a cancelled handler
    as an error with a traceback, and the two-worker ladder test, which checks the server's log, failed on
    it in CI. The other worker's relay here accepts the claim and never answers."""
    folder = tmp_path / "sockets"
    folder.mkdir()

    async def main() -> None:
        hub = Hub(None, arena_bots.hosted_bots())
        far = Connected("far", 1, ("rps",), False, "key")
        hub.peers = Peers(str(folder), nowhere, me=0, directory={"far": far})
        relay = await silent_relay(str(folder), 1)
        served = await serve_units(hub, units_path(str(folder), 0))
        _reader, writer = await asyncio.open_unix_connection(units_path(str(folder), 0))
        await send_message(writer, ("play", 1, load_game("rps", rounds=5), ["far", "rock"], None))
        await until(lambda: relay.received, "the unit never claimed the bot on the other worker", timeout=5.0)
        # The loop's end, as asyncio.run does it: every task left (the unit, still waiting for the claim's
        # answer, and the socket's handler) is cancelled and awaited. Then the sockets close.
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        for _ in range(3):
            await asyncio.sleep(0)  # (the tasks' done callbacks, one of which logs, run now)
        writer.close()
        served.close()
        await relay.close()
        await asyncio.sleep(0.05)

    with caplog.at_level("ERROR", logger="asyncio"):
        asyncio.run(main())
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
