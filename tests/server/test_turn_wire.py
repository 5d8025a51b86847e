"""The remote seat's Turn bytes (:mod:`arena_server.seats.turn_wire`) are exactly protobuf's.

A remote bot's Turns are written as bytes built without a protobuf message.
Any difference from what ``turn_to_proto`` + ``SerializeToString`` produce
would be a protocol change, so these tests compare the two byte for byte: for
states of every game reached by random play, and for hypothesis-chosen RPS
observations, ids, budgets and public moves (including zeros, negative values
and long varints). A live match then checks that a remote bot gets the Turns
the bytes describe.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.v1 import bot_session_pb2 as bs
from arena_client import PublicMove, Turn
from arena_client.convert import turn_to_proto
from arena_client.wire import varint
from arena_games import SIMULTANEOUS, load_game
from arena_games.rps import RpsObservation
from arena_server.seats.turn_wire import server_message_turn

GAMES = [("rps", {}), ("rps", {"signs": 5}), ("tic_tac_toe", {}), ("dots_and_boxes", {}), ("liars_dice", {})]

int32 = st.integers(-(2**31), 2**31 - 1)
moves = st.lists(st.builds(PublicMove, st.integers(-1, 3), int32, st.text(max_size=20)), max_size=6)
budgets = st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=2))


def protobuf_bytes(turn: Turn, public: list[PublicMove]) -> bytes:
    message = bs.ServerMessage()
    turn_to_proto(turn, public, message.turn)
    return message.SerializeToString()


@pytest.mark.parametrize(
    "n",
    [
        *(0, 1, 127, 128, 300, 4095, 4096, 16383, 16384, 2**21 - 1, 2**21, 2**28 - 1, 2**28),
        *(2**31 - 1, 2**32 - 1, 2**63 - 1, -1, -(2**31)),
    ],
)
def test_varint_matches_protobuf(n: int) -> None:
    move = bs.Action(action=n) if -(2**31) <= n < 2**31 else None
    if move is not None:  # int32 field 3: tag 0x18, then the varint
        assert move.SerializeToString() == (b"\x18" + varint(n) if n else b"")
    if 0 <= n < 2**32:  # uint32 field 2 of Action (turn_id): tag 0x10
        assert bs.Action(turn_id=n).SerializeToString() == (b"\x10" + varint(n) if n else b"")


@pytest.mark.parametrize(("game", "params"), GAMES)
def test_every_game_state_on_random_playouts(game: str, params: dict[str, int]) -> None:
    rng = random.Random(f"turn-wire-{game}-{params}")
    loaded = load_game(game, **params)
    checked = 0
    for _ in range(8):
        state = loaded.new_initial_state()
        public: list[PublicMove] = []
        while not state.is_terminal():
            player = state.current_player()
            if state.is_chance_node():
                outcomes = [a for a, _ in state.chance_outcomes()]
                state.apply_action(rng.choice(outcomes))
                continue
            seats = range(loaded.num_players) if player == SIMULTANEOUS else (player,)
            for seat in seats:
                turn = Turn(
                    "m-17",
                    checked + 1,
                    seat,
                    state.observation(seat),
                    state.legal_actions(seat),
                    timedelta(milliseconds=rng.choice([1, 250, 1000])),
                    timedelta(seconds=rng.choice([0, 3, 10])),
                )
                assert server_message_turn(turn, public) == protobuf_bytes(turn, public)
                checked += 1
            if player == SIMULTANEOUS:
                actions = [rng.choice(list(state.legal_actions(s))) for s in seats]
                state.apply_actions(actions)
                public = [PublicMove(s, a, loaded.action_to_string(s, a)) for s, a in zip(seats, actions, strict=True)]
            else:
                action = rng.choice(list(state.legal_actions(player)))
                state.apply_action(action)
                public = [PublicMove(player, action, loaded.action_to_string(player, action))]
    assert checked > 20


VARINT_EDGES = [0, 1, 127, 128, 300, 4095, 4096, 16383, 16384, -1]
"""Where an RPS Turn's varints hand over: one byte to two, the table (``wire.VARINTS``) to ``varint``, two to three."""


@pytest.mark.parametrize("round_", VARINT_EDGES)
@pytest.mark.parametrize("turn_id", [n for n in VARINT_EDGES if n >= 0])
def test_rps_turns_at_the_varint_edges(round_: int, turn_id: int) -> None:
    for a in VARINT_EDGES:
        for b in VARINT_EDGES:
            observation = RpsObservation(3, 20000, round_, (a, b), (2, 0))
            turn = Turn("m-1", turn_id, 1, observation, (0, 1, 2), timedelta(seconds=1), timedelta(0))
            assert server_message_turn(turn, ()) == protobuf_bytes(turn, []), (a, b)


@settings(max_examples=300, deadline=None)
@given(
    match_id=st.text(max_size=30),
    turn_id=st.integers(0, 2**32 - 1),
    signs=int32,
    rounds=int32,
    round_=int32,
    wins=st.lists(int32, max_size=3),
    last=st.lists(int32, max_size=3),
    legal=st.lists(int32, max_size=6),
    budget=budgets,
    overage=budgets,
    public=moves,
    no_observation=st.booleans(),
)
def test_random_rps_turns(
    match_id: str,
    turn_id: int,
    signs: int,
    rounds: int,
    round_: int,
    wins: list[int],
    last: list[int],
    legal: list[int],
    budget: timedelta,
    overage: timedelta,
    public: list[PublicMove],
    no_observation: bool,
) -> None:
    observation = None if no_observation else RpsObservation(signs, rounds, round_, tuple(wins), tuple(last))
    turn = Turn(match_id, turn_id, 0, observation, tuple(legal), budget, overage)
    assert server_message_turn(turn, public) == protobuf_bytes(turn, public)
    # a list of legal actions (not a tuple) gives the same bytes
    assert server_message_turn(Turn(match_id, turn_id, 0, observation, legal, budget, overage), public) == (
        protobuf_bytes(turn, public)
    )


def test_public_moves_bytes_are_found_by_the_move_object_and_the_cache_stays_bounded() -> None:
    from arena_server.seats import turn_wire

    observation = RpsObservation(3, 1000, 5, (1, 2), (0, 1))
    turn = Turn("m-cache", 9, 0, observation, (0, 1, 2), timedelta(seconds=1), timedelta(0))
    # More distinct move objects than the cache holds, each Turn asked twice (a miss, then a hit).
    for i in range(turn_wire._CACHE_LIMIT + 500):
        public = [PublicMove(0, i % 3, "rock"), PublicMove(1, i, f"move {i}")]
        expected = protobuf_bytes(turn, public)
        assert server_message_turn(turn, public) == expected
        assert server_message_turn(turn, public) == expected
        assert len(turn_wire._MOVES) <= turn_wire._CACHE_LIMIT
    # Equal moves in new objects give the same bytes as the objects cached.
    again = [PublicMove(0, 1, "rock"), PublicMove(1, 7, "move 7")]
    assert server_message_turn(turn, again) == protobuf_bytes(turn, again)


@settings(max_examples=300, deadline=None)
@given(
    signs=st.integers(0, 20),
    rounds=st.integers(0, 5000),
    round_=st.integers(0, 5000),
    wins=st.lists(st.integers(0, 5000), min_size=2, max_size=2),
    last=st.lists(st.integers(0, 20), max_size=2),
    public=moves,
)
def test_rps_turns_as_matches_play_them(
    signs: int, rounds: int, round_: int, wins: list[int], last: list[int], public: list[PublicMove]
) -> None:
    """Values as real matches have them, where the encoder takes its tables (a previous round's signs below 16,
    wins and rounds below 4096) and where it leaves them, and the first round's empty ``last_round``."""
    observation = RpsObservation(signs, rounds, round_, tuple(wins), tuple(last))
    turn = Turn("m-1", 7, 1, observation, (0, 1, 2), timedelta(seconds=1), timedelta(seconds=3))
    assert server_message_turn(turn, public) == protobuf_bytes(turn, public)
