"""Replays: the messages a seat received, rebuilt from the store, equal what a real subprocess bot read."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import ladder_pb2 as lp
from arena.v1 import ladder_pb2_grpc as lp_grpc
from arena_bots.simple import RandomBot
from arena_client import SeatInfo, TimeControl
from arena_games import load_game
from arena_server.matches.replay import feed, read_messages, replay_steps, seat_messages, write_messages
from arena_server.referee.loop import play_match
from arena_server.seats.framing import Framing, parse_payload
from arena_server.seats.in_process import InProcessSeat
from arena_server.seats.process import BotProgram
from arena_server.seats.sandbox import Limits
from arena_server.seats.subprocess_seat import SubprocessSeat
from arena_server.store.database import Store
from tests.conftest import LiveServer

HERE = Path(__file__).resolve().parent
BOT = HERE / "recording_bot.py"
TC = TimeControl(timedelta(seconds=2), timedelta(seconds=5), timedelta(seconds=0.1))

GAMES = [
    ("rps", {"rounds": 15}),
    ("tic_tac_toe", {}),
    ("dots_and_boxes", {"rows": 2, "cols": 2}),
    ("liars_dice", {"dice": 2}),
    ("liars_dice", {"players": 3, "dice": 1}),
]


def program(log: Path, mode: str = "mix") -> BotProgram:
    # the bot writes its log outside its private /tmp: a trusted local bot names that directory
    limits = Limits(run_as=None, writable=(str(log.parent),))
    return BotProgram([sys.executable, str(BOT), str(log), mode], Framing.JSON, limits=limits)


async def play_stored(store: Store, game_name: str, params: dict[str, int], log: Path, seat: int) -> str:
    """A match with the recording bot at ``seat`` and random bots elsewhere, stored like the hub does."""
    game = load_game(game_name, **params)
    seats: list[object] = []
    sub = SubprocessSeat(program(log), SeatInfo(seat, "recorder", 1, "subprocess"))
    for s in range(game.num_players):
        seats.append(sub if s == seat else InProcessSeat(RandomBot(100 + s), SeatInfo(s, f"random{s}", 1, "hosted")))
    try:
        record = await play_match(game, seats, TC, seed="fixed-seed-" + game_name)  # type: ignore[arg-type]
    finally:
        await sub.close()
    await store.start_match(record)
    await store.finish_match(record)
    return record.match_id


@pytest.mark.parametrize(("game_name", "params"), GAMES)
async def test_rebuilt_messages_equal_what_the_subprocess_bot_received(
    tmp_path: Path, game_name: str, params: dict[str, int]
) -> None:
    store = await Store.open(tmp_path / "arena.db")
    try:
        seat = 1
        log = tmp_path / "received.jsonl"
        match_id = await play_stored(store, game_name, params, log, seat)
        record = await store.get_match(match_id)
        assert record is not None and record.termination is not None
        received = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        assert received[0].get("welcome") is not None
        # the bot saw the referee's match id; the store assigned its own afterwards
        rebuilt = seat_messages(record, seat)
        expected = []
        for m in received[1:]:
            msg = parse_payload(json.dumps(m).encode(), Framing.JSON, bs.ServerMessage)
            expected.append(msg)
        for msg in rebuilt:
            kind = msg.WhichOneof("kind")
            assert kind is not None
            getattr(msg, kind).match_id = expected[0].match_started.match_id
        assert [m.WhichOneof("kind") for m in rebuilt] == [m.WhichOneof("kind") for m in expected]
        for got, want in zip(rebuilt, expected, strict=True):
            if want.WhichOneof("kind") == "turn":
                # clock fields are rebuilt from microsecond-rounded times
                for field in ("overage_left",):
                    diff = abs(getattr(got.turn, field).ToTimedelta() - getattr(want.turn, field).ToTimedelta())
                    assert diff <= timedelta(microseconds=5)
                    getattr(got.turn, field).CopyFrom(getattr(want.turn, field))
            assert got == want, (got, want)
    finally:
        await store.close()


async def test_export_over_grpc_and_feed_into_a_local_bot(live_server: LiveServer, tmp_path: Path) -> None:
    match_id = await play_stored(live_server.store, "liars_dice", {"dice": 3}, tmp_path / "first.jsonl", 0)
    async with live_server.channel() as channel:
        stub = lp_grpc.LadderServiceStub(channel)
        resp = await stub.GetSeatMessages(lp.GetSeatMessagesRequest(match_id=match_id, seat=0))
    exported = tmp_path / "seat0.jsonl"
    write_messages(list(resp.messages), exported)
    assert read_messages(exported) == list(resp.messages)
    proto_file = tmp_path / "seat0.bin"
    write_messages(list(resp.messages), proto_file, Framing.PROTO)
    assert read_messages(proto_file) == list(resp.messages)
    # the same deterministic bot answers exactly as it did on the server
    same = await feed(read_messages(exported), f"{sys.executable} {BOT} {tmp_path / 'again.jsonl'} mix")
    assert same.turns > 0 and same.same == same.turns and same.different == []
    # what it received the second time is what was exported (after the welcome); map fields may come in
    # another order in JSON, so compare the messages
    again = [
        parse_payload(line.encode(), Framing.JSON, bs.ServerMessage)
        for line in (tmp_path / "again.jsonl").read_text().splitlines()[1:]
    ]
    assert again == list(resp.messages)
    # a different bot is caught
    other = await feed(read_messages(exported), f"{sys.executable} {BOT} {tmp_path / 'other.jsonl'} first")
    assert other.turns == same.turns and other.different


async def test_replay_steps_walk_to_the_final_position() -> None:
    game = load_game("tic_tac_toe")
    seats = [InProcessSeat(RandomBot(1), SeatInfo(0, "a")), InProcessSeat(RandomBot(2), SeatInfo(1, "b"))]
    record = await play_match(game, seats, TC, seed="s")
    steps = list(replay_steps(record))
    assert len(steps) == len(record.moves)
    assert steps[-1].state.is_terminal() and tuple(steps[-1].state.returns()) == record.returns
