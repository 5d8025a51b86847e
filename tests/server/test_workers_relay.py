"""Remote bots on different workers of ``arena serve --workers 2`` play each other, and a name is the server's.

The kernel hands each connection to one worker. The store writer keeps the one
directory of connected bots, so a name connected to one worker is refused on
every other, the main process's web interface knows who is connected, and a
challenge or a ``CreateMatch`` seats a bot connected to another worker through
that worker's relay (``arena_server.seats.peer``), unless every remote bot of a
``CreateMatch`` is on one worker: the call is then passed on to it. The tests
that need a relay connect the two bots of each match to the two workers' own
ports (:func:`alternating`). Real server processes, real
SDK bots connecting from many addresses (so both workers are reached), real
``CreateMatch`` calls and real HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from arena.v1 import bots_pb2 as bp
from arena.v1 import bots_pb2_grpc as bp_grpc
from arena.v1 import common_pb2 as common
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client import Bot, Turn, Update
from arena_client.remote import ArenaError, Client
from arena_client.types import TimeControl
from arena_games import load_game
from tests.ladder.test_crash import close
from tests.server.test_workers import own_ports
from tests.server.test_workers_watch import serve_with_web

CONNECTED = 'class="tag live">connected'
"""How a bot's page marks a connected bot."""
PEERS = 12
"""Waiting bots, each from its own address: all of them reach the challenger's worker about once in 4,096 runs
(the test then passes without a relay)."""
ROUNDS = 20
LONG = {"rounds": 100_000}
"""A match that is still under way when the test stops the server."""


class Paper(Bot):
    games = ("rps",)

    def __init__(self, name: str, slow_turn: int = 0) -> None:
        self.name = name
        self.slow_turn = slow_turn
        self.turns = 0

    def act(self, turn: Turn) -> int:
        self.turns += 1
        if self.turns == self.slow_turn:
            time.sleep(0.6)  # (past the per-move budget and the bank of the match below)
        return 1


def stop(proc: subprocess.Popen[str]) -> None:
    """Stop the server; it must stop cleanly, with no traceback from a worker or the relay."""
    proc.terminate()
    proc.wait(30)
    err = close(proc)
    assert "arena: stopped" in err and "Traceback" not in err, err


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    """``arena serve --workers 2`` with its web interface: the process, its gRPC and HTTP ports; stopped
    cleanly after."""
    proc, port, http = serve_with_web(tmp_path / "arena.db")
    try:
        yield proc, port, http
    finally:
        stop(proc)


@pytest.fixture
def server(served: tuple[subprocess.Popen[str], int, int]) -> tuple[int, int]:
    """The gRPC and HTTP ports of :func:`served`."""
    return served[1], served[2]


def alternating(proc: subprocess.Popen[str], port: int, n: int) -> list[str]:
    """``n`` addresses, each on the own port of one worker in turn: bots ``2k`` and ``2k + 1`` connected to
    them are on different workers, so a match between them relays a seat (whichever worker it reaches,
    since a ``CreateMatch`` whose bots are all on one worker is passed on to that worker instead)."""
    ports = sorted(own_ports(proc, port).values())
    return [f"127.0.0.1:{ports[i % 2]}" for i in range(n)]


@contextlib.asynccontextmanager
async def waiting(clients: list[Client], timeout: float = 30.0) -> AsyncIterator[list[asyncio.Task[Any]]]:
    """The clients connected (welcomed) and waiting to be seated; their ``play`` tasks. They hang up after."""
    tasks = [asyncio.ensure_future(c.play()) for c in clients]
    try:
        deadline = time.monotonic() + timeout
        while not all(c.session_token for c in clients):
            assert time.monotonic() < deadline, [c.name for c in clients if not c.session_token]
            await asyncio.sleep(0.05)
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def create(
    address: str, bots: list[str], tokens: dict[str, str], game: str = "rps", params: dict[str, int] | None = None
) -> mp.CreateMatchResponse:
    """``CreateMatch(wait)`` from ``address`` with ``tokens`` (RPS of :data:`ROUNDS` rounds unless told)."""
    if params is None:
        params = {"rounds": ROUNDS} if game == "rps" else {}
    async with grpc.aio.insecure_channel(address) as channel:
        stub = mp_grpc.MatchServiceStub(channel)
        request = mp.CreateMatchRequest(game=game, bots=bots, wait=True, bot_tokens=tokens)
        for key, value in params.items():
            request.params[key].CopyFrom(common.ParamValue(int_value=value))
        return await stub.CreateMatch(request, timeout=60)


def test_bots_on_different_workers_play_each_other(server: tuple[int, int]) -> None:
    port, _http = server

    async def scenario() -> None:
        peers = [Client(Paper(f"peer-{i}"), f"127.0.0.{i + 2}:{port}", name=f"peer-{i}") for i in range(PEERS)]
        async with waiting(peers):
            # A challenge from one address to every waiting bot: about half of them sit on the other worker.
            challenger = Client(Paper("challenger"), f"127.0.0.40:{port}", name="challenger", threaded=False)
            for peer in peers:
                results = await challenger.play(opponent=peer.name, params={"rounds": ROUNDS}, reconnect=False)
                assert [r.termination.name for r in results] == ["NORMAL"], (peer.name, results)
                assert results[0].returns == (0.0, 0.0)  # paper against paper, every round

            # CreateMatch from many addresses, pairing the waiting bots two by two, with their session tokens.
            pairs = [(peers[i], peers[i + 1]) for i in range(0, PEERS, 2)]
            tokens = {p.name: p.session_token for p in peers}
            replies = await asyncio.gather(
                *(create(f"127.0.0.{50 + k}:{port}", [a.name, b.name], tokens) for k, (a, b) in enumerate(pairs))
            )
            for reply in replies:
                assert reply.record.termination == common.TERMINATION_NORMAL, reply.record
                assert len(reply.record.moves) == 2 * ROUNDS

            # Each waiting bot heard the end of every match it played: one challenge and one CreateMatch.
            for peer in peers:
                assert [r.termination.name for r in peer.results] == ["NORMAL", "NORMAL"], (peer.name, peer.results)

    asyncio.run(scenario())


def test_a_name_is_taken_on_every_worker_and_the_web_sees_it(server: tuple[int, int]) -> None:
    port, http = server

    async def scenario() -> None:
        async with waiting([Client(Paper("twin"), f"127.0.0.2:{port}", name="twin")]) as holding:
            refusals = []
            for i in range(16):  # the same name, and a look-alike, from addresses that reach both workers
                name = "twin" if i % 2 else "TWIN"
                other = Client(Paper(name), f"127.0.0.{i + 3}:{port}", name=name)
                with pytest.raises(ArenaError) as refused:
                    await other.play(opponent="rock", params={"rounds": 1}, reconnect=False)
                refusals.append(str(refused.value))
            for text in refusals:
                assert "'twin'" in text and "a connected bot" in text, text

            # A stranger cannot seat the connected guest from any worker without its session token.
            for i in range(8):
                with pytest.raises(grpc.aio.AioRpcError) as denied:
                    await create(f"127.0.0.{60 + i}:{port}", ["twin", "rock"], {})
                assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED, denied.value
                assert "token" in (denied.value.details() or "")

            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{http}", timeout=30) as web:
                assert CONNECTED in (await web.get("/bot/twin")).text
                holding[0].cancel()  # the bot hangs up
                for _ in range(100):  # its worker releases the name when the stream ends
                    page = (await web.get("/bot/twin")).text
                    if CONNECTED not in page:
                        break
                    await asyncio.sleep(0.05)
                assert CONNECTED not in page

        # Once released, the name can connect again, through either worker.
        again = Client(Paper("twin"), f"127.0.0.30:{port}", name="twin", threaded=False)
        results = await again.play(opponent="rock", params={"rounds": 2}, reconnect=False)
        assert results[0].termination.name == "NORMAL"

    asyncio.run(scenario())


def test_a_relayed_bot_is_timed_where_it_is_connected(server: tuple[int, int]) -> None:
    """A relayed bot that overruns its budget loses on time, and both bots hear how the match ended."""
    port, _http = server
    tc = TimeControl(per_move=timedelta(milliseconds=200), overage=timedelta(milliseconds=100), grace=timedelta(0))

    async def scenario() -> None:
        slow = [Client(Paper(f"slow-{i}", slow_turn=3), f"127.0.0.{i + 2}:{port}", name=f"slow-{i}") for i in range(6)]
        async with waiting(slow):
            challenger = Client(Paper("quick"), f"127.0.0.40:{port}", name="quick", threaded=False)
            for bot in slow:
                results = await challenger.play(
                    opponent=bot.name, params={"rounds": 10}, time_control=tc, reconnect=False
                )
                assert results[0].termination.name == "TIMEOUT", results
                assert results[0].offender == 1  # the challenged bot's seat
                assert "did not answer turn" in results[0].reason
            for _ in range(100):  # (the last one may still be in its long act when the challenger hears the end)
                if all(bot.results for bot in slow):
                    break
                await asyncio.sleep(0.05)
            for bot in slow:
                assert [r.termination.name for r in bot.results] == ["TIMEOUT"], (bot.name, bot.results)

    asyncio.run(scenario())


class DicePlayer(Bot):
    """Calls "liar" when it may; keeps every observation it is given, by match."""

    games = ("liars_dice",)

    def __init__(self, name: str) -> None:
        self.name = name
        self.seen: dict[str, list[tuple[int, object]]] = {}

    def act(self, turn: Turn) -> int:
        self.seen.setdefault(turn.match_id, []).append((turn.seat, turn.observation))
        legal = list(turn.legal_actions)
        return legal[-1] if len(legal) > 1 else legal[0]


def test_a_relayed_liars_dice_seat_sees_only_its_own_dice(served: tuple[subprocess.Popen[str], int, int]) -> None:
    """Across workers each bot still gets exactly the engine's view for its seat: never the other's dice."""
    proc, port, _http = served
    params = {"dice": 3, "players": 2}

    async def scenario() -> None:
        bots = [DicePlayer(f"dice-{i}") for i in range(8)]
        clients = [Client(b, a, name=b.name) for b, a in zip(bots, alternating(proc, port, 8), strict=True)]
        async with waiting(clients):
            tokens = {c.name: c.session_token for c in clients}
            for k in range(0, len(bots), 2):
                pair = bots[k : k + 2]
                reply = await create(f"127.0.0.40:{port}", [b.name for b in pair], tokens, "liars_dice", params)
                assert reply.record.termination == common.TERMINATION_NORMAL, reply.record
                for seat, bot in enumerate(pair):  # the engine's view for the seat, at each of its turns
                    state = load_game("liars_dice", **params).new_initial_state()
                    expected = []
                    for move in reply.record.moves:
                        if state.current_player() == seat:
                            expected.append((seat, state.observation(seat)))
                        state.apply_action(move.action)
                    assert expected
                    assert bot.seen[reply.match_id] == expected, (bot.name, reply.match_id)

    asyncio.run(scenario())


class Leaver(Paper):
    """Plays paper; on its third turn it signals the test, which then closes its connection."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.third_turn = asyncio.Event()
        self.loop = asyncio.get_running_loop()

    def act(self, turn: Turn) -> int:
        self.turns += 1
        if self.turns == 3:
            self.loop.call_soon_threadsafe(self.third_turn.set)
            time.sleep(0.3)  # (still thinking when its stream is closed)
        return 1


def test_a_relayed_bot_is_queued_and_its_loss_of_connection_ends_the_match(server: tuple[int, int]) -> None:
    """Two challengers at once queue for a bot on another worker; a bot that leaves mid-match loses by disconnect."""
    port, _http = server

    async def scenario() -> None:
        first = Client(Paper("first"), f"127.0.0.40:{port}", name="first", threaded=False)
        second = Client(Paper("second"), f"127.0.0.41:{port}", name="second", threaded=False)
        peers = [Client(Paper(f"busy-{i}"), f"127.0.0.{i + 2}:{port}", name=f"busy-{i}") for i in range(6)]
        async with waiting(peers):
            for peer in peers:  # both at once: one plays, the other waits its turn in the bot's queue
                both = await asyncio.gather(
                    first.play(opponent=peer.name, params={"rounds": ROUNDS}, reconnect=False),
                    second.play(opponent=peer.name, params={"rounds": ROUNDS}, reconnect=False),
                )
                assert [r[0].termination.name for r in both] == ["NORMAL", "NORMAL"], (peer.name, both)

        leavers = [Leaver(f"leaver-{i}") for i in range(6)]
        clients = [Client(b, f"127.0.0.{i + 10}:{port}", name=b.name) for i, b in enumerate(leavers)]
        async with waiting(clients) as playing:
            for bot, task in zip(leavers, playing, strict=True):
                match = asyncio.ensure_future(first.play(opponent=bot.name, params={"rounds": ROUNDS}, reconnect=False))
                await asyncio.wait_for(bot.third_turn.wait(), 30)
                task.cancel()  # the bot's connection closes mid-match
                results = await asyncio.wait_for(match, 30)
                assert results[0].termination.name == "DISCONNECT", results
                assert results[0].offender == 1

    asyncio.run(scenario())


def test_matches_that_want_the_same_two_bots_in_either_order_never_wait_on_each_other(
    served: tuple[subprocess.Popen[str], int, int],
) -> None:
    """Bots are taken in the order of their names: (a, b) and (b, a) asked at once, through both workers,
    all play (taken in seat order, each worker held one bot and waited for the other forever)."""
    proc, port, _http = served

    async def scenario() -> None:
        bots = [Client(Paper(f"order-{i}"), a, name=f"order-{i}") for i, a in enumerate(alternating(proc, port, 2))]
        async with waiting(bots):
            a, b = bots
            tokens = {a.name: a.session_token, b.name: b.session_token}
            calls = [
                create(f"127.0.0.{20 + k}:{port}", [a.name, b.name] if k % 2 else [b.name, a.name], tokens)
                for k in range(8)  # (8: the most matches one caller may have running)
            ]
            replies = await asyncio.wait_for(asyncio.gather(*calls), 60)
            assert all(r.record.termination == common.TERMINATION_NORMAL for r in replies)

    asyncio.run(scenario())


async def register(port: int, names: list[str]) -> dict[str, str]:
    """Register ``names`` (RPS); their tokens. A registered bot that follows redirects (the SDK's default) is
    moved to the worker of its next match when it is idle there; a guest never is."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = bp_grpc.BotServiceStub(channel)
        return {n: (await stub.RegisterBot(bp.RegisterBotRequest(name=n, games=["rps"]))).token for n in names}


def test_registered_bots_wanted_by_matches_on_both_workers_at_once_are_moved_and_play_every_match(
    server: tuple[int, int],
) -> None:
    """The scenarios above with registered bots that follow redirects: a match on one worker moves an idle
    bot there while a match on the other worker is seating it. Two challengers at once against each of
    twelve bots, then eight ``CreateMatch`` calls at once for the same two bots in either order: every
    match is played to its end, and some of the bots were moved."""
    port, _http = server

    async def scenario() -> list[Client]:
        names = [f"mover-{i}" for i in range(PEERS)]
        tokens = await register(port, [*names, "order-a", "order-b"])
        first = Client(Paper("first"), f"127.0.0.40:{port}", name="first", threaded=False)
        second = Client(Paper("second"), f"127.0.0.41:{port}", name="second", threaded=False)
        movers = [Client(Paper(n), f"127.0.0.{i + 2}:{port}", name=n, token=tokens[n]) for i, n in enumerate(names)]
        async with waiting(movers):
            for mover in movers:
                both = await asyncio.gather(
                    first.play(opponent=mover.name, params={"rounds": ROUNDS}, reconnect=False),
                    second.play(opponent=mover.name, params={"rounds": ROUNDS}, reconnect=False),
                )
                assert [r[0].termination.name for r in both] == ["NORMAL", "NORMAL"], (mover.name, both)
        pair = [
            Client(Paper(n), f"127.0.0.{i + 20}:{port}", name=n, token=tokens[n])
            for i, n in enumerate(["order-a", "order-b"])
        ]
        async with waiting(pair):
            calls = [
                create(f"127.0.0.{30 + k}:{port}", ["order-a", "order-b"] if k % 2 else ["order-b", "order-a"], tokens)
                for k in range(8)
            ]
            replies = await asyncio.wait_for(asyncio.gather(*calls), 60)
            assert all(r.record.termination == common.TERMINATION_NORMAL for r in replies)
        return movers + pair

    clients = asyncio.run(scenario())
    assert sum(c.redirects for c in clients) >= 1, [(c.name, c.connections) for c in clients]
    assert all(c.connections == 1 + c.redirects for c in clients), [
        (c.name, c.connections, c.redirects) for c in clients
    ]


class FirstCell(Bot):
    """Tic-tac-toe: the first free cell; keeps every public move it hears of, by match."""

    games = ("tic_tac_toe",)

    def __init__(self, name: str) -> None:
        self.name = name
        self.heard: dict[str, list[int]] = {}

    def act(self, turn: Turn) -> int:
        return int(turn.legal_actions[0])

    def on_update(self, update: Update) -> None:
        self.heard.setdefault(update.match_id, []).extend(m.action for m in update.moves)


def test_a_relayed_seat_hears_the_public_moves(served: tuple[subprocess.Popen[str], int, int]) -> None:
    """Tic-tac-toe between bots on different workers: each hears every move of the match, its own and the
    other's, through the relay as directly (updates between its turns, and at the end)."""
    proc, port, _http = served

    async def scenario() -> None:
        bots = [FirstCell(f"cell-{i}") for i in range(8)]
        clients = [Client(b, a, name=b.name) for b, a in zip(bots, alternating(proc, port, 8), strict=True)]
        async with waiting(clients):
            tokens = {c.name: c.session_token for c in clients}
            for k in range(0, len(bots), 2):
                pair = bots[k : k + 2]
                reply = await create(f"127.0.0.40:{port}", [b.name for b in pair], tokens, "tic_tac_toe")
                assert reply.record.termination == common.TERMINATION_NORMAL, reply.record
                played = [m.action for m in reply.record.moves]
                assert played == [0, 1, 2, 3, 4, 5, 6]  # (the first free cell each turn: X wins with 2, 4 and 6)
                for bot in pair:
                    for _ in range(100):  # (the end reaches the bot just after the reply)
                        if len(bot.heard.get(reply.match_id, [])) >= len(played):
                            break
                        await asyncio.sleep(0.02)
                    assert bot.heard[reply.match_id] == played, (bot.name, bot.heard)

    asyncio.run(scenario())


def test_a_stop_during_relayed_matches_aborts_them_and_tells_every_bot(tmp_path: Path) -> None:
    """SIGTERM while bots on different workers play each other: every match is stored as aborted, every
    bot hears it, each CreateMatch gets the aborted record, and the server stops within seconds."""
    proc, port, _http = serve_with_web(tmp_path / "arena.db")
    try:

        async def scenario() -> tuple[list[mp.CreateMatchResponse], float, list[Client]]:
            bots = [Client(Paper(f"stop-{i}"), a, name=f"stop-{i}") for i, a in enumerate(alternating(proc, port, 8))]
            async with waiting(bots):
                tokens = {c.name: c.session_token for c in bots}
                calls = [
                    asyncio.ensure_future(
                        create(
                            f"127.0.0.{30 + k}:{port}", [bots[2 * k].name, bots[2 * k + 1].name], tokens, params=LONG
                        )
                    )
                    for k in range(4)
                ]
                await asyncio.sleep(1.5)  # (all four under way)
                began = time.monotonic()
                proc.terminate()
                replies = await asyncio.gather(*calls)
                await asyncio.to_thread(proc.wait, 30)
                took = time.monotonic() - began
                for _ in range(50):
                    if all(c.aborted for c in bots):
                        break
                    await asyncio.sleep(0.05)
            return replies, took, bots

        replies, took, bots = asyncio.run(scenario())
    finally:
        stop(proc)
    assert all(r.record.termination == common.TERMINATION_ABORTED for r in replies), replies
    assert took < 8.0, took
    assert all([r.termination.name for r in c.aborted] == ["ABORTED"] and not c.results for c in bots), [
        (c.name, c.results, c.aborted) for c in bots
    ]
    conn = sqlite3.connect(f"file:{tmp_path / 'arena.db'}?mode=ro", uri=True)
    assert conn.execute("SELECT status, COUNT(*) FROM matches GROUP BY status").fetchall() == [("aborted", 4)]
    conn.close()


def test_a_create_match_reaching_another_worker_is_refereed_where_its_remote_bot_is(tmp_path: Path) -> None:
    """``CreateMatch`` for a remote bot and a hosted one, sent to the worker the bot is not connected to: that
    worker passes it on, and the bot's own worker referees the match. No seat is relayed and no bot is moved
    (this one is a guest, which is never moved). GetMatch on the bot's worker shows the live moves, and on
    the other only the stored start; a waited reply, a refusal, and a match of two hosted bots come back as
    they would from the worker itself."""
    proc, port, _http = serve_with_web(tmp_path / "arena.db")
    try:
        near_port, far_port = own_ports(proc, port).values()
        near, far = f"127.0.0.1:{near_port}", f"127.0.0.1:{far_port}"

        async def live_moves(address: str, match_id: str) -> tuple[int, int]:
            async with grpc.aio.insecure_channel(address) as channel:
                record = await mp_grpc.MatchServiceStub(channel).GetMatch(mp.GetMatchRequest(match_id=match_id))
            return record.status, record.move_count

        async def scenario() -> None:
            guest = Client(Paper("visitor"), near, name="visitor")
            async with waiting([guest]):
                tokens = {"visitor": guest.session_token}
                reply = await create(far, ["visitor", "rock"], tokens)  # waited for: the record, as bytes
                assert reply.record.termination == common.TERMINATION_NORMAL, reply.record
                assert len(reply.record.moves) == 2 * ROUNDS
                assert reply.record.returns[0] == ROUNDS  # paper beats rock every round

                async with grpc.aio.insecure_channel(far) as channel:
                    request = mp.CreateMatchRequest(game="rps", bots=["visitor", "rock"], bot_tokens=tokens)
                    request.params["rounds"].CopyFrom(common.ParamValue(int_value=LONG["rounds"]))
                    match_id = (await mp_grpc.MatchServiceStub(channel).CreateMatch(request)).match_id
                for _ in range(200):
                    status, moves = await live_moves(near, match_id)
                    if moves:
                        break
                    await asyncio.sleep(0.02)
                assert status == mp.MATCH_STATUS_RUNNING and moves > 0, (status, moves)
                assert await live_moves(far, match_id) == (mp.MATCH_STATUS_RUNNING, 0)  # (not refereed there)

                # The bot's worker refuses, and the refusal comes back as it gave it.
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await create(far, ["visitor", "visitor"], tokens)
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "cannot take two seats" in (refused.value.details() or ""), refused.value.details()

            hosted = await create(far, ["rock", "rotate"], {})  # no remote bot: the worker reached referees it
            assert hosted.record.termination == common.TERMINATION_NORMAL

            # Stopped during a waited match passed on: the reply is the aborted record, through both workers.
            guest = Client(Paper("visitor-2"), near, name="visitor-2")
            async with waiting([guest]):
                waited = asyncio.ensure_future(
                    create(far, ["visitor-2", "rock"], {"visitor-2": guest.session_token}, params=LONG)
                )
                for _ in range(200):
                    if guest.bot.turns:
                        break
                    await asyncio.sleep(0.02)
                proc.terminate()
                aborted = await waited
                await asyncio.to_thread(proc.wait, 30)  # (stop() below then only reads what it said)
            assert aborted.record.termination == common.TERMINATION_ABORTED, aborted.record
            assert aborted.record.reason == "the server is shutting down", aborted.record.reason

        asyncio.run(scenario())
    finally:
        stop(proc)
