"""A page of moves written as bytes (:mod:`arena_server.api.record_wire`) is exactly what protobuf writes.

GetMatch and CreateMatch(wait) answer with moves merged from bytes built
without protobuf messages. The reference here builds the same page the way
the server did before, one ``MoveRecord`` at a time, and the two must agree
byte for byte: for move logs of every game reached by random play (chance
moves shown and hidden, an illegal last move), for hypothesis-chosen logs
(negative and long values, zero times, plies past the varint edges), and for
pages that span several of :func:`record_page`'s chunks.
"""

from __future__ import annotations

import random
from array import array
from datetime import UTC, datetime

import pytest
from google.protobuf.duration_pb2 import Duration
from hypothesis import given, settings
from hypothesis import strategies as st

import arena_server.api.matches as matches_api
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client import SeatInfo, Termination, TimeControl
from arena_games import CHANCE, SIMULTANEOUS, Game, load_game
from arena_server.api.matches import record_page
from arena_server.api.record_wire import moves_bytes
from arena_server.referee.records import MatchRecord, MoveLog

GAMES = [("rps", {}), ("rps", {"signs": 5}), ("tic_tac_toe", {}), ("dots_and_boxes", {}), ("liars_dice", {})]


def reference(log: MoveLog, first_ply: int, show_chance: bool, game: Game) -> bytes:
    """The page as protobuf writes it: one MoveRecord, and one Duration, per move."""
    msg = mp.MatchRecord()
    for i, (player, action, us, legal) in enumerate(
        zip(log.players, log.actions, log.elapsed_us, log.legal, strict=True)
    ):
        if player == CHANCE and not show_chance:
            continue
        msg.moves.append(
            mp.MoveRecord(
                ply=first_ply + i,
                seat=player,
                action=action,
                label=game.action_to_string(player, action),
                elapsed=Duration(seconds=us // 1_000_000, nanos=us % 1_000_000 * 1000),
                legal=bool(legal),
            )
        )
    return msg.SerializeToString()


def played(game: Game, rng: random.Random) -> MoveLog:
    """A whole match of random legal play, chance included, with random thinking times and an illegal last move."""
    log = MoveLog()
    state = game.new_initial_state()
    while not state.is_terminal():
        if state.is_chance_node():
            action = rng.choice([a for a, _ in state.chance_outcomes()])
            log.add(CHANCE, action, 0.0)
            state.apply_action(action)
            continue
        player = state.current_player()
        seats = range(game.num_players) if player == SIMULTANEOUS else (player,)
        actions = [rng.choice(list(state.legal_actions(seat))) for seat in seats]
        for seat, action in zip(seats, actions, strict=True):
            log.add(seat, action, rng.choice([0.0, 0.000_007, rng.random() * 0.01, rng.random() * 30]))
        if player == SIMULTANEOUS:
            state.apply_actions(actions)
        else:
            state.apply_action(actions[0])
    log.add(0, -3, 0.5, legal=False)  # the illegal answer that ends a match is logged too
    return log


@pytest.mark.parametrize(("name", "params"), GAMES)
@pytest.mark.parametrize("show_chance", [True, False])
def test_every_game_on_random_playouts(name: str, params: dict[str, int], show_chance: bool) -> None:
    rng = random.Random(f"record-wire-{name}-{params}")
    game = load_game(name, **params)
    for first_ply in (0, 1, 4_000, 2**21):
        log = played(game, rng)
        got = moves_bytes(
            log.players, log.actions, log.elapsed_us, log.legal, first_ply, show_chance, game.action_to_string
        )
        assert got == reference(log, first_ply, show_chance, game)


int8 = st.integers(-128, 127)
int32 = st.integers(-(2**31), 2**31 - 1)
uint32 = st.integers(0, 2**32 - 1)


@settings(max_examples=200, deadline=None)
@given(
    moves=st.lists(st.tuples(int8, int32, uint32, st.booleans()), max_size=40),
    first_ply=st.integers(0, 2**31 - 1 - 40),
    show_chance=st.booleans(),
)
def test_random_logs(moves: list[tuple[int, int, int, bool]], first_ply: int, show_chance: bool) -> None:
    game = load_game("rps", signs=5)
    log = MoveLog()
    log.players = array("b", [m[0] for m in moves])
    log.actions = array("i", [m[1] for m in moves])
    log.elapsed_us = array("I", [m[2] for m in moves])
    log.legal = array("B", [int(m[3]) for m in moves])
    got = moves_bytes(
        log.players, log.actions, log.elapsed_us, log.legal, first_ply, show_chance, game.action_to_string
    )
    assert got == reference(log, first_ply, show_chance, game)


@pytest.mark.parametrize(("offset", "limit"), [(0, 0), (0, 1_234), (777, 1_001), (2_990, 50), (3_000, 0)])
async def test_a_page_across_chunks_is_protobufs(offset: int, limit: int) -> None:
    game = load_game("liars_dice")
    rng = random.Random("record-wire-pages")
    log = MoveLog()
    while len(log) < 3_000:
        for entry in played(game, rng):
            log.add(*entry)
    record = MatchRecord(
        "41", game, (SeatInfo(0, "a"), SeatInfo(1, "b")), TimeControl(), "s", "h", datetime.now(UTC), moves=log
    )
    record.termination = Termination.NORMAL
    page = await record_page(record, offset, limit)
    stop = min(len(log), offset + (limit or matches_api.MAX_MOVES_PER_PAGE))
    sliced = MoveLog()
    sliced.players, sliced.actions = log.players[offset:stop], log.actions[offset:stop]
    sliced.elapsed_us, sliced.legal = log.elapsed_us[offset:stop], log.legal[offset:stop]
    expected = mp.MatchRecord.FromString(reference(sliced, offset, True, game))
    assert list(page.moves) == list(expected.moves)
    assert [m.ply for m in page.moves] == list(range(offset, stop))
    assert page.move_count == len(log) and page.next_move_offset == (stop if stop < len(log) else 0)
    # The bytes the RPCs send as they are: the record's fields, then the moves; protobuf reads the whole record.
    whole = matches_api.record_to_proto(record)
    whole.move_count, whole.next_move_offset = page.move_count, page.next_move_offset
    whole.moves.extend(expected.moves)
    assert mp.MatchRecord.FromString(await matches_api.record_page_bytes(record, offset, limit)) == whole


def test_the_bytes_aware_match_service_registers_every_method_of_the_proto() -> None:
    """``add_to_server`` replaces the generated registration: it must cover every rpc of MatchService,
    with the same kind of handler (a method added to the proto and not here fails this)."""
    registered: dict[str, object] = {}

    class Server:
        def add_generic_rpc_handlers(self, handlers: object) -> None:
            pass

        def add_registered_method_handlers(self, name: str, handlers: dict[str, object]) -> None:
            assert name == "arena.v1.MatchService"
            registered.update(handlers)

    matches_api.add_to_server(mp_grpc.MatchServiceServicer(), Server())  # type: ignore[arg-type]
    service = mp.DESCRIPTOR.services_by_name["MatchService"]
    assert set(registered) == {method.name for method in service.methods}
    for method in service.methods:
        handler = registered[method.name]
        assert (handler.request_streaming, handler.response_streaming) == (  # type: ignore[attr-defined]
            method.client_streaming,
            method.server_streaming,
        )
        request = handler.request_deserializer(b"")  # type: ignore[attr-defined]
        assert request.DESCRIPTOR is method.input_type
        assert handler.response_serializer(b"as is") == b"as is"  # type: ignore[attr-defined]
