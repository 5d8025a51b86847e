"""The stdio seat's per-move Turn frame, and the C bench bot that bench/bench_stdio.py measures.

The seat encodes the Turn of every move with :func:`encode_turn`, which skips
protobuf's deterministic (map-sorting) pass; that is only sound while no message
inside a Turn has a map field, and the frames must be byte for byte the ones
:func:`encode` writes. The C bench bot (bench/stdio_c/proto_bot.c) is built with
gcc and plays a real match through the referee, so the benchmark's like-for-like
row measures a bot that really speaks the protocol.

In the proto framing the seat does not build the message at all: it writes
``delimited(server_message_turn(...))``, the Turn's bytes from wire fragments
with a length prefix. The hypothesis tests below check that those frames are
protobuf's for every game, turn id, budget, legal action list and list of
public moves, and for any RPS observation at all.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from google.protobuf.descriptor import Descriptor
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.v1 import bot_session_pb2 as bs
from arena_client import PublicMove, Termination, Turn
from arena_client.convert import turn_to_proto
from arena_games import load_game
from arena_games.rps import RpsObservation
from arena_server.seats.framing import FrameParser, Framing, delimited, encode, encode_turn, parse_payload
from arena_server.seats.process import BotProgram
from arena_server.seats.turn_wire import server_message_turn
from tests.server._stdio_helpers import TEST_LIMITS, play_against_random

ROOT = Path(__file__).resolve().parents[2]
GAMES = ("rps", "tic_tac_toe", "dots_and_boxes", "liars_dice")


def _maps_inside(descriptor: Descriptor, seen: set[str]) -> list[str]:
    if descriptor.full_name in seen:
        return []
    seen.add(descriptor.full_name)
    found = []
    for field in descriptor.fields:
        message = field.message_type
        if message is None:
            continue
        if message.GetOptions().map_entry:
            found.append(f"{descriptor.full_name}.{field.name}")
        else:
            found.extend(_maps_inside(message, seen))
    return found


def test_no_message_inside_a_turn_has_a_map_field() -> None:
    assert _maps_inside(bs.Turn.DESCRIPTOR, set()) == [], "encode_turn must go back to deterministic serialisation"
    # The check does find maps where there are some (MatchStarted.params).
    assert _maps_inside(bs.MatchStarted.DESCRIPTOR, set()) == ["arena.v1.MatchStarted.params"]


@settings(max_examples=150, deadline=None)
@given(
    game=st.sampled_from(GAMES),
    steps=st.integers(0, 6),
    turn_id=st.integers(0, 2**32 - 1),
    budget=st.timedeltas(min_value=timedelta(0), max_value=timedelta(hours=1)),
    public=st.lists(
        st.builds(PublicMove, st.integers(-1, 3), st.integers(0, 2**31 - 1), st.text(max_size=40)), max_size=12
    ),
    framing=st.sampled_from(list(Framing)),
)
def test_a_turn_frame_is_the_bytes_encode_writes(
    game: str, steps: int, turn_id: int, budget: timedelta, public: list[PublicMove], framing: Framing
) -> None:
    state = load_game(game).new_initial_state()
    for _ in range(steps):  # a few moves in, so that observations carry some history
        if state.is_terminal():
            break
        if state.is_chance_node():
            state.apply_action(state.chance_outcomes()[0][0])
        elif state.current_player() >= 0:
            state.apply_action(state.legal_actions(state.current_player())[0])
        else:
            break  # simultaneous moves (rps): the initial observation will do
    seat = 0
    turn = Turn("m-frame", turn_id, seat, state.observation(seat), state.legal_actions(0) or (0,), budget, budget)
    message = bs.ServerMessage()
    turn_to_proto(turn, public, message.turn)
    frame = encode_turn(message, framing)
    assert frame == encode(message, framing)
    # and it reads back as the same message (lengths of 128 bytes and more take a longer varint prefix)
    parser = FrameParser(framing, max_bytes=1 << 20)
    (payload,) = parser.feed(frame)
    assert parse_payload(payload, framing, bs.ServerMessage) == message


INT32 = st.integers(-(2**31), 2**31 - 1)
MOVES = st.lists(st.builds(PublicMove, st.integers(-1, 3), INT32, st.text(max_size=40)), max_size=12)
BUDGETS = st.timedeltas(min_value=timedelta(seconds=-5), max_value=timedelta(days=3))


def turn_frame(turn: Turn, moves: list[PublicMove]) -> bytes:
    """The frame the seat writes for a Turn in the proto framing."""
    return delimited(server_message_turn(turn, moves))


def _protobuf_frame(turn: Turn, moves: list[PublicMove]) -> bytes:
    message = bs.ServerMessage()
    turn_to_proto(turn, moves, message.turn)
    return encode(message, Framing.PROTO)


@settings(max_examples=300, deadline=None)
@given(
    game=st.sampled_from(GAMES),
    plays=st.lists(st.integers(0, 1000), max_size=40),
    seat=st.integers(0, 1),
    match_id=st.text(max_size=300),
    turn_id=st.integers(0, 2**32 - 1),
    budget=BUDGETS,
    overage=BUDGETS,
    public=MOVES,
)
def test_turn_frame_writes_protobufs_bytes_for_every_game(
    game: str,
    plays: list[int],
    seat: int,
    match_id: str,
    turn_id: int,
    budget: timedelta,
    overage: timedelta,
    public: list[PublicMove],
) -> None:
    state = load_game(game).new_initial_state()
    for pick in plays:  # anywhere in a game, so that observations carry history
        if state.is_terminal():
            break
        if state.is_chance_node():
            outcomes = state.chance_outcomes()
            state.apply_action(outcomes[pick % len(outcomes)][0])
        elif state.current_player() >= 0:
            legal = state.legal_actions(state.current_player())
            state.apply_action(legal[pick % len(legal)])
        else:  # simultaneous moves (rps): every seat picks
            state.apply_actions([state.legal_actions(p)[pick % len(state.legal_actions(p))] for p in (0, 1)])
    legal = tuple(state.legal_actions(seat)) or (0,)
    turn = Turn(match_id, turn_id, seat, state.observation(seat), legal, budget, overage)
    assert turn_frame(turn, public) == _protobuf_frame(turn, public)


@settings(max_examples=300, deadline=None)
@given(
    observation=st.one_of(
        st.none(),
        st.builds(
            RpsObservation,
            INT32,
            INT32,
            INT32,
            st.lists(INT32, max_size=4).map(tuple),
            st.lists(INT32, max_size=4).map(tuple),
        ),
    ),
    legal=st.lists(INT32, max_size=6).map(tuple),
    turn_id=st.integers(0, 2**32 - 1),
    budget=BUDGETS,
    public=MOVES,
)
def test_turn_frame_writes_protobufs_bytes_for_any_rps_observation(
    observation: RpsObservation | None,
    legal: tuple[int, ...],
    turn_id: int,
    budget: timedelta,
    public: list[PublicMove],
) -> None:
    # Zeros, negatives (ten-byte varints), values around 127/128 and 16383/16384, empty lists, no observation.
    turn = Turn("m", turn_id, 0, observation, list(legal) if turn_id % 2 else legal, budget, budget)
    assert turn_frame(turn, public) == _protobuf_frame(turn, public)


@pytest.fixture(scope="module")
def c_bench_bot() -> Iterator[Path]:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: the C bench bot cannot be built")
    build = Path(tempfile.mkdtemp(prefix="arena-c-bench-bot-"))  # not under pytest's 0700 tmp: the bot
    try:  # may run as an unprivileged user
        build.chmod(0o755)
        binary = build / "proto_bot"
        source = ROOT / "bench" / "stdio_c" / "proto_bot.c"
        command = [gcc, "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(binary), str(source)]
        subprocess.run(command, check=True, timeout=120)
        yield binary
    finally:
        shutil.rmtree(build, ignore_errors=True)


async def test_the_c_bench_bot_plays_a_real_match_over_length_delimited_protobuf(c_bench_bot: Path) -> None:
    program = BotProgram([str(c_bench_bot)], Framing.PROTO, limits=TEST_LIMITS)
    record, seat = await play_against_random(program, load_game("rps", rounds=250))
    assert record.termination == Termination.NORMAL, record.reason
    mine = [action for player, action, _, legal in record.moves if player == 0 and legal]
    assert mine == [0] * 250  # always its first legal action, rock
    # It times its own work and says so on stderr, which the benchmark reads.
    assert "work_us " in seat.stderr_log()
