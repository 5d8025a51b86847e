"""Names and authority: nobody squats a name, seats someone else's bot, or asks for unbounded work.

Every attack runs against a live server over real gRPC streams and fails the test if it works.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import bots_pb2 as bp
from arena.v1 import bots_pb2_grpc as bp_grpc
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client.convert import duration
from arena_server.api.authority import MAX_MATCHES_PER_CALLER
from arena_server.api.matches import FORWARDED_FOR
from arena_server.bots.registry import BotRegistry
from arena_server.cli import main
from arena_server.store.names import name_key
from tests.conftest import LiveServer
from tests.fakes.grpc_bots import RawBot

PLAIN_PYTHON = Path(__file__).resolve().parents[2] / "clients" / "plain_python"

TEN_THOUSAND_YEARS = timedelta(days=365 * 10_000)


async def _hello(live_server: LiveServer, name: str, token: str = "") -> bs.ServerMessage:
    raw = RawBot(live_server.channel())
    await raw.send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", name=name, token=token)))
    return await raw.recv()


async def _register(live_server: LiveServer, name: str) -> str:
    stub = bp_grpc.BotServiceStub(live_server.channel())
    response = await stub.RegisterBot(bp.RegisterBotRequest(name=name, games=["rps"]))
    return str(response.token)


async def _refused(call: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    return caught.value


def _one_clear_line(text: str) -> None:
    assert "\n" not in text and "\x1b" not in text and len(text) < 400, text


def test_name_key_folds_case_width_and_look_alikes() -> None:
    assert name_key("Random") == name_key("RANDOM") == name_key("random")
    assert name_key("rаndom") == "random"  # Cyrillic а
    assert name_key("RΑNDOM") == "random"  # Greek Alpha
    assert name_key("ｒａｎｄｏｍ") == "random"  # fullwidth
    assert name_key("rand0m") != "random"  # digits stay digits


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("random", "already in use by a hosted bot"),
        ("Random", "looks the same as 'random'"),
        ("rаndom", "looks the same as 'random'"),  # Cyrillic а
        ("ＲＡＮＤＯＭ", "already in use by a hosted bot"),  # fullwidth: NFKC makes it 'RANDOM', then case
    ],
)
async def test_guest_cannot_squat_a_hosted_name(live_server: LiveServer, name: str, says: str) -> None:
    msg = await _hello(live_server, name)
    assert msg.error.code == bs.ERROR_CODE_NAME_TAKEN and msg.error.fatal
    assert says in msg.error.message or "looks the same" in msg.error.message, msg.error.message
    assert not any(name_key(n) == "random" for n in live_server.hub.sessions)


async def test_guest_cannot_squat_a_registered_name(live_server: LiveServer) -> None:
    token = await _register(live_server, "alice")
    for squat in ("ALICE", "аlice", "Alice"):  # case, Cyrillic а, both
        msg = await _hello(live_server, squat)
        assert msg.error.code == bs.ERROR_CODE_NAME_TAKEN and msg.error.fatal, squat
        assert "registered bot 'alice'" in msg.error.message
    assert (await _hello(live_server, "alice")).error.code == bs.ERROR_CODE_UNAUTHENTICATED
    welcome = (await _hello(live_server, "alice", token)).welcome
    assert welcome.bot_name == "alice" and not welcome.guest
    msg = await _hello(live_server, "Alice")  # while alice is connected too
    assert msg.error.code == bs.ERROR_CODE_NAME_TAKEN


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("\x1b[31mred\x1b[0m", "control character"),
        ("zero\u200bwidth", "format character"),
        ("x" * 50_000, "too long"),
        ("two words", "a space"),
    ],
)
async def test_hostile_names_are_refused_clearly(live_server: LiveServer, name: str, says: str) -> None:
    msg = await _hello(live_server, name)
    assert msg.error.code == bs.ERROR_CODE_NAME_TAKEN and msg.error.fatal
    assert says in msg.error.message and "leave the name empty" in msg.error.message
    _one_clear_line(msg.error.message)
    stub = bp_grpc.BotServiceStub(live_server.channel())
    refused = await _refused(stub.RegisterBot(bp.RegisterBotRequest(name=name)))
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    _one_clear_line(refused.details() or "")
    assert "is not allowed" in (refused.details() or "")
    assert await live_server.hub.registry.registered_like(name[:40]) is None  # type: ignore[union-attr]


async def test_hosted_look_alike_cannot_be_registered(live_server: LiveServer) -> None:
    stub = bp_grpc.BotServiceStub(live_server.channel())
    refused = await _refused(stub.RegisterBot(bp.RegisterBotRequest(name="Random")))
    assert refused.code() == grpc.StatusCode.ALREADY_EXISTS and "hosted reference bot" in (refused.details() or "")
    await _register(live_server, "carol")
    refused = await _refused(stub.RegisterBot(bp.RegisterBotRequest(name="CAROL")))
    assert refused.code() == grpc.StatusCode.ALREADY_EXISTS and "looks the same as 'carol'" in (refused.details() or "")


async def test_guest_is_evicted_when_its_name_is_registered_and_never_seated_as_it(live_server: LiveServer) -> None:
    squatter = RawBot(live_server.channel())
    welcome = (await squatter.hello("dave")).welcome
    assert welcome.guest and "dave" in live_server.hub.sessions
    token = await _register(live_server, "dave")  # the owner registers the name
    error = (await squatter.recv_kind("error")).error
    assert error.fatal and error.code == bs.ERROR_CODE_NAME_TAKEN and "just been registered" in error.message
    assert "dave" not in live_server.hub.sessions
    # Seating "dave" now, even with the owner's token, never reaches the evicted guest.
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    request = mp.CreateMatchRequest(game="rps", bots=["dave", "random"], bot_tokens={"dave": token})
    refused = await _refused(stub.CreateMatch(request))
    assert refused.code() == grpc.StatusCode.NOT_FOUND
    # Its old session token is dead too, and the evicted stream cannot challenge as "dave".
    with contextlib.suppress(asyncio.InvalidStateError):  # the server may have ended the evicted stream already
        await squatter.challenge("random", rounds=3)
    with pytest.raises((EOFError, asyncio.TimeoutError, grpc.aio.AioRpcError, asyncio.InvalidStateError)):
        while True:
            msg = await squatter.recv(timeout=2)
            assert msg.WhichOneof("kind") != "match_started", "the evicted guest was seated"
    assert await live_server.store.count_matches() == 0
    # The owner connects with the token and is seated as dave.
    owner = await _hello(live_server, "dave", token)
    assert owner.welcome.bot_name == "dave" and not owner.welcome.guest


async def test_anonymous_create_match_cannot_lock_a_connected_bot(live_server: LiveServer) -> None:
    victim = RawBot(live_server.channel())
    session_token = (await victim.hello("victim")).welcome.session_token
    assert len(session_token) >= 30
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    attack = mp.CreateMatchRequest(game="rps", bots=["victim", "random"])
    attack.time_control.per_move.CopyFrom(duration(TEN_THOUSAND_YEARS))
    refused = await _refused(stub.CreateMatch(attack))
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT and "over this server's limit" in (
        refused.details() or ""
    )
    attack = mp.CreateMatchRequest(game="rps", bots=["victim", "random"])  # a normal clock, no token
    refused = await _refused(stub.CreateMatch(attack))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "bot_tokens['victim']" in (refused.details() or "")
    attack.bot_tokens["victim"] = "a-guess"
    assert (await _refused(stub.CreateMatch(attack))).code() == grpc.StatusCode.PERMISSION_DENIED
    assert not live_server.hub.sessions["victim"].busy.locked() and await live_server.store.count_matches() == 0
    # Its owner, holding the session token, may seat it; that is the first match the victim hears of.
    allowed = mp.CreateMatchRequest(game="rps", bots=["victim", "random"], bot_tokens={"victim": session_token})
    allowed.params["rounds"].int_value = 1
    created = await stub.CreateMatch(allowed)
    started = (await victim.recv_kind("match_started")).match_started
    assert started.match_id == created.match_id and not started.rated
    victim.hang_up()  # (it holds the match's Turn)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("overage", timedelta(hours=1), "overage of 3600 s"),
        ("grace", timedelta(minutes=1), "grace of 60 s"),
        ("per_move", timedelta(minutes=6), "per-move time of 360 s"),
    ],
)
async def test_clock_limits(live_server: LiveServer, field: str, value: timedelta, says: str) -> None:
    request = mp.CreateMatchRequest(game="rps", bots=["random", "rock"])
    request.time_control.per_move.CopyFrom(duration(timedelta(seconds=1)))
    getattr(request.time_control, field).CopyFrom(duration(value))
    refused = await _refused(mp_grpc.MatchServiceStub(live_server.channel()).CreateMatch(request))
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT and says in (refused.details() or "")


async def test_rounds_limit(live_server: LiveServer) -> None:
    request = mp.CreateMatchRequest(game="rps", bots=["random", "rock"])
    request.params["rounds"].int_value = 10_000_000
    refused = await _refused(mp_grpc.MatchServiceStub(live_server.channel()).CreateMatch(request))
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT and "limit of 100000" in (refused.details() or "")
    raw = RawBot(live_server.channel())
    await raw.hello()
    await raw.challenge("random", rounds=10_000_000)
    status = (await raw.recv_kind("challenge_status")).challenge_status
    assert status.state == bs.ChallengeStatus.STATE_REFUSED and "limit of 100000" in status.reason


async def _guests(live_server: LiveServer, n: int) -> list[tuple[RawBot, str, str]]:
    """``n`` guests connected by hand: each one's raw bot, name and session token."""
    guests = []
    for _ in range(n):
        raw = RawBot(live_server.channel())
        welcome = (await raw.hello()).welcome
        guests.append((raw, welcome.bot_name, welcome.session_token))
    return guests


def _held(name: str, token: str) -> mp.CreateMatchRequest:
    """A one-round match of guest ``name`` against ``random``, in flight while the guest holds its Turn."""
    r = mp.CreateMatchRequest(game="rps", bots=[name, "random"], bot_tokens={name: token})
    r.params["rounds"].int_value = 1
    r.time_control.per_move.CopyFrom(duration(timedelta(seconds=60)))
    return r


async def test_a_network_caller_cannot_pass_for_another_with_the_workers_forwarding_key(
    live_server: LiveServer,
) -> None:
    """The workers pass a ``CreateMatch`` on to each other with its caller's address in metadata
    (``FORWARDED_FOR``), trusted only on their private Unix sockets. A caller on the network that sends the
    key, with a new made-up address on each call, is still one caller: its ninth match is refused."""
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    guests = await _guests(live_server, MAX_MATCHES_PER_CALLER + 1)

    def create(k: int) -> Any:
        _raw, name, token = guests[k]
        return stub.CreateMatch(_held(name, token), metadata=((FORWARDED_FOR, f"ipv4:10.0.0.{k}"),))

    for k in range(MAX_MATCHES_PER_CALLER):
        await create(k)  # each guest holds its turn: the match stays in flight
    refused = await _refused(create(MAX_MATCHES_PER_CALLER))
    assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused
    assert f"{MAX_MATCHES_PER_CALLER} matches running" in (refused.details() or "")
    for raw, _name, _token in guests:
        raw.hang_up()


async def test_matches_in_flight_per_caller(live_server: LiveServer) -> None:
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    guests = await _guests(live_server, MAX_MATCHES_PER_CALLER + 1)
    request = _held

    for _raw, name, token in guests[:MAX_MATCHES_PER_CALLER]:
        await stub.CreateMatch(request(name, token))  # each guest holds its turn: the match stays in flight
    _raw, name, token = guests[-1]
    refused = await _refused(stub.CreateMatch(request(name, token)))
    assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert f"{MAX_MATCHES_PER_CALLER} matches running" in (refused.details() or "")
    first = guests[0][0]
    turn = (await first.recv_kind("turn")).turn
    await first.answer(turn, 0)  # one match ends: room for one more
    await first.recv_kind("match_ended")
    for _ in range(100):
        try:
            await stub.CreateMatch(request(name, token))
            break
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            await asyncio.sleep(0.05)
    else:
        raise AssertionError("a finished match never freed its place")
    for raw, _name, _token in guests:
        raw.hang_up()  # (each holds its match's Turn)


async def test_chosen_seed_only_between_own_bots_and_recorded(
    live_server: LiveServer, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = {name: await _register(live_server, name) for name in ("erin", "frank")}
    erin, frank = RawBot(live_server.channel()), RawBot(live_server.channel())
    for raw, name in ((erin, "erin"), (frank, "frank")):
        await raw.send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", name=name, token=tokens[name])))
        assert (await raw.recv()).welcome.bot_name == name

    def challenge(**kw: object) -> bs.BotMessage:
        ch = bs.Challenge(opponent="frank", game="rps", seat=0, **kw)  # type: ignore[arg-type]
        ch.params["rounds"].int_value = 1
        return bs.BotMessage(challenge=ch)

    await erin.send(challenge(seed="my-seed"))  # frank is not proven to be erin's
    status = (await erin.recv_kind("challenge_status")).challenge_status
    assert status.state == bs.ChallengeStatus.STATE_REFUSED and "opponent_token" in status.reason
    await erin.send(challenge(seed="my-seed", rated=True, opponent_token=tokens["frank"]))
    status = (await erin.recv_kind("challenge_status")).challenge_status
    assert status.state == bs.ChallengeStatus.STATE_REFUSED and "come only from the ladder" in status.reason

    await erin.send(challenge(seed="my-seed", opponent_token=tokens["frank"]))
    status = (await erin.recv_kind("challenge_status")).challenge_status
    assert status.state == bs.ChallengeStatus.STATE_STARTED
    for raw in (erin, frank):
        turn = (await raw.recv_kind("turn")).turn
        await raw.answer(turn, 0)
    ended = (await erin.recv_kind("match_ended")).match_ended
    assert ended.seed == "my-seed"
    await frank.recv_kind("match_ended")
    stub = mp_grpc.MatchServiceStub(live_server.channel())
    for _ in range(100):
        record = await stub.GetMatch(mp.GetMatchRequest(match_id=status.match_id))
        if record.status != mp.MATCH_STATUS_RUNNING:
            break
        await asyncio.sleep(0.02)
    assert record.seed_chosen and record.seed == "my-seed" and not record.rated
    stored = await live_server.store.get_match(status.match_id)
    assert stored is not None and stored.seed_chosen
    code = await asyncio.to_thread(main, ["replay", status.match_id, "--server", live_server.address, "--no-step"])
    out = capsys.readouterr().out
    assert code == 0 and "seed my-seed (chosen by the match's creator)" in out.splitlines()[0]
    # CreateMatch: the same rule, proven with bot_tokens; without them it is refused.
    request = mp.CreateMatchRequest(game="rps", bots=["erin", "frank"], seed="s")
    assert (await _refused(stub.CreateMatch(request))).code() == grpc.StatusCode.PERMISSION_DENIED


async def test_guest_never_plays_rated(live_server: LiveServer) -> None:
    from arena_games import load_game
    from arena_server.matches.hub import HubError

    raw = RawBot(live_server.channel())
    guest = (await raw.hello()).welcome.bot_name
    with pytest.raises(HubError, match="guests never play rated"):
        await live_server.hub.start_match(load_game("rps", rounds=1), [guest, "random"], rated=True)
    with pytest.raises(HubError, match="rated match cannot have a chosen seed"):
        await live_server.hub.start_match(
            load_game("rps", rounds=1), ["rock", "random"], rated=True, seed="s", seed_chosen=True
        )
    assert await live_server.store.count_matches() == 0


async def test_guest_is_not_seated_under_a_name_registered_behind_the_servers_back(live_server: LiveServer) -> None:
    """Registered straight in the database (as `arena bot add --db` does): the hub checks at seating time."""
    squatter = RawBot(live_server.channel())
    session_token = (await squatter.hello("gina")).welcome.session_token
    assert live_server.hub.registry is not None
    await live_server.hub.registry.register("gina", ["rps"])  # no RegisterBot RPC: no eviction yet
    request = mp.CreateMatchRequest(game="rps", bots=["gina", "random"], bot_tokens={"gina": session_token})
    refused = await _refused(mp_grpc.MatchServiceStub(live_server.channel()).CreateMatch(request))
    assert refused.code() == grpc.StatusCode.NOT_FOUND and "now registered" in (refused.details() or "")
    error = (await squatter.recv_kind("error")).error
    assert error.fatal and "now registered" in error.message
    assert "gina" not in live_server.hub.sessions and await live_server.store.count_matches() == 0


async def test_bot_added_behind_the_hubs_back_is_not_seated_without_its_token(live_server: LiveServer) -> None:
    """A program this hub has not loaded yet (another worker's submission a moment ago, `arena bot add`)
    is checked against its token like any registered bot, not waved through as unknown."""
    registry = live_server.hub.registry
    assert registry is not None
    elsewhere = BotRegistry(live_server.store, registry.data_dir)  # another process's view of the same bots
    await elsewhere.add_local("sneaky", f"{sys.executable} bot.py", ["rps"], workdir=str(PLAIN_PYTHON))
    assert "sneaky" not in registry.programs
    request = mp.CreateMatchRequest(game="rps", bots=["sneaky", "random"])
    refused = await _refused(mp_grpc.MatchServiceStub(live_server.channel()).CreateMatch(request))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED, refused
    assert "'sneaky' is a registered bot; seating it needs its token" in (refused.details() or "")
    assert await live_server.store.count_matches() == 0
