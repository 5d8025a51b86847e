"""Liar's Dice hides every seat's dice from the others until a challenge reveals them.

The proof is counterfactual: take any position, re-roll the dice of the other
seats in the current (unrevealed) round, replay the same moves, and the seat's
observation must not change. Checked over many seeded games, as a hypothesis
property, and on everything the referee hands to in-process seats.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.v1 import bot_session_pb2 as bs
from arena_bots.simple import RandomBot
from arena_client import Bot, MatchInfo, MatchResult, SeatInfo, Termination, TimeControl, Turn, Update
from arena_client.convert import (
    match_info_from_proto,
    result_from_proto,
    turn_from_proto,
    turn_to_proto,
    update_from_proto,
)
from arena_games import CHANCE, load_game
from arena_games.liars_dice import LiarsDiceGame, LiarsDiceState
from arena_server.referee.loop import play_match
from arena_server.seats.framing import Framing
from arena_server.seats.in_process import InProcessSeat
from arena_server.seats.process import BotProgram
from arena_server.seats.sandbox import Limits
from arena_server.seats.subprocess_seat import SubprocessSeat
from tests.games.games_support import random_step


def _die_owners(game: LiarsDiceGame, history: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """For every chance entry of ``history``: (round, seat that rolled it)."""
    state = game.new_initial_state()
    owners = []
    index_in_round = 0
    current_round = 0
    for player, action in history:
        if player == CHANCE:
            view = state.observation(None)
            if view.round != current_round:
                current_round, index_in_round = view.round, 0
            remaining = index_in_round
            for seat, count in enumerate(view.dice_counts):
                if remaining < count:
                    owners.append((view.round, seat))
                    break
                remaining -= count
            index_in_round += 1
        state.apply_action(action)
    return owners


def counterfactual(state: LiarsDiceState, seat: int, rng: random.Random) -> LiarsDiceState:
    """The same moves, with every other seat's dice of the current unrevealed round re-rolled."""
    game = state.game
    history = list(state.history)
    owners = iter(_die_owners(game, history))
    current_round = state.observation(None).round
    changed = []
    for player, action in history:
        if player != CHANCE:
            changed.append((player, action))
            continue
        rnd, owner = next(owners)
        hidden = rnd == current_round and owner != seat and not state.is_terminal()
        changed.append((player, rng.randrange(game.faces) if hidden else action))
    replay = game.state_from_history(changed)
    assert isinstance(replay, LiarsDiceState)
    return replay


def _check_position(state: LiarsDiceState, rng: random.Random) -> int:
    """Assert every seat's (and the spectator's) view ignores the hidden dice; return how many differed."""
    differed = 0
    for seat in [*range(state.game.players), None]:
        for _ in range(2):
            other = counterfactual(state, -1 if seat is None else seat, rng)
            assert other.observation(seat) == state.observation(seat), (seat, state.history)
            assert other.legal_actions() == state.legal_actions()
            if any(other.hand(s) != state.hand(s) for s in range(state.game.players)):
                differed += 1
    return differed


PARAM_SPREAD: list[dict[str, Any]] = [
    {},
    {"players": 3, "dice": 2, "spot_on": True, "wild": "ones"},
    {"players": 4, "dice": 1, "faces": 4, "bidding": "standard"},
    {"players": 2, "dice": 1, "wild": "highest", "bidding": "standard", "rounds": "single"},
]


def test_observations_ignore_other_seats_dice_over_many_games() -> None:
    differed = 0
    for params in PARAM_SPREAD:
        game = load_game("liars_dice", **params)
        for seed in range(8):
            rng = random.Random(seed)
            state = game.new_initial_state()
            assert isinstance(state, LiarsDiceState)
            step = 0
            while not state.is_terminal():
                random_step(state, rng)
                step += 1
                if step % 3 == 0 or state.is_terminal():
                    differed += _check_position(state, rng)
    # The test must be able to fail: the counterfactuals really did change hidden dice.
    assert differed > 100


def test_own_dice_are_visible() -> None:
    """The converse, so the counterfactual check is not vacuous: a seat does see its own dice."""
    game = load_game("liars_dice", dice=3)
    state = game.new_initial_state()
    for face in [1, 2, 3, 4, 5, 6]:
        state.apply_action(face - 1)
    assert state.observation(0).my_dice == (1, 2, 3)
    assert state.observation(1).my_dice == (4, 5, 6)
    assert state.observation(None).my_dice == ()


@settings(max_examples=60, deadline=None)
@given(
    players=st.integers(2, 4),
    dice=st.integers(1, 3),
    faces=st.integers(2, 6),
    bidding=st.sampled_from(["thesis", "standard"]),
    wild=st.sampled_from(["none", "ones", "highest"]),
    rounds=st.sampled_from(["elimination", "single"]),
    spot_on=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    cut=st.floats(0.0, 1.0),
)
def test_hidden_information_property(
    players: int,
    dice: int,
    faces: int,
    bidding: str,
    wild: str,
    rounds: str,
    spot_on: bool,
    seed: int,
    cut: float,
) -> None:
    game = load_game(
        "liars_dice",
        players=players,
        dice=dice,
        faces=faces,
        bidding=bidding,
        wild=wild,
        rounds=rounds,
        spot_on=spot_on,
    )
    rng = random.Random(seed)
    states = []
    state = game.new_initial_state()
    while not state.is_terminal():
        random_step(state, rng)
        states.append(state.clone())
    position = states[min(int(cut * len(states)), len(states) - 1)]
    assert isinstance(position, LiarsDiceState)
    _check_position(position, rng)


class SpyBot(Bot):
    """Plays randomly and keeps everything the referee sends it."""

    def __init__(self, seed: int) -> None:
        self.inner = RandomBot(seed)
        self.received: list[Any] = []

    def on_match_start(self, match: MatchInfo) -> None:
        self.received.append(match)

    def act(self, turn: Turn) -> int:
        self.received.append(turn)
        return self.inner.act(turn)

    def on_update(self, update: Update) -> None:
        self.received.append(update)

    def on_match_end(self, result: MatchResult) -> None:
        self.received.append(result)


def _positions(game: LiarsDiceGame, history: list[tuple[int, int]]) -> list[LiarsDiceState]:
    """Every position of a match, in order."""
    state = game.new_initial_state()
    positions = [state.clone()]
    for _, action in history:
        state.apply_action(action)
        positions.append(state.clone())
    return positions


def _check_messages(positions: list[LiarsDiceState], seat: int, received: list[Any], rng: random.Random) -> int:
    """Check everything one seat received against the engine; return how many observations were checked."""
    turn_positions = iter(p for p in positions if p.current_player() == seat)
    views: dict[Any, int] = {}
    for i, p in enumerate(positions):
        views.setdefault(p.observation(seat), i)
    checked = 0
    for message in received:
        if isinstance(message, MatchInfo):
            assert message.seat == seat and len(message.seed_sha256) == 64
            continue
        if isinstance(message, Turn):
            position = next(turn_positions)
            assert message.observation == position.observation(seat)
            assert tuple(message.legal_actions) == tuple(position.legal_actions())
        else:
            assert isinstance(message, Update | MatchResult)
            # Public moves never include dice rolls.
            assert all(move.seat != CHANCE and not move.label.startswith("roll") for move in message.moves)
            if isinstance(message, MatchResult):
                position = positions[-1]
                assert message.observation == position.observation(seat)
            else:
                assert message.observation in views, "an update must be an engine observation"
                position = positions[views[message.observation]]
        _check_position(position, rng)
        checked += 1
    assert next(turn_positions, None) is None, "every turn of the seat was received"
    return checked


async def test_nothing_the_referee_sends_in_process_reveals_other_seats_dice() -> None:
    game = load_game("liars_dice", players=3, dice=2, spot_on=True, wild="ones")
    assert isinstance(game, LiarsDiceGame)
    rng = random.Random(0)
    for match in range(6):
        bots = [SpyBot(match * 10 + seat) for seat in range(3)]
        seats = [InProcessSeat(bot, SeatInfo(seat, f"spy{seat}")) for seat, bot in enumerate(bots)]
        record = await play_match(game, seats, seed=f"leak-{match}")
        assert record.termination == Termination.NORMAL, record.reason
        positions = _positions(game, record.moves.history())
        for seat, bot in enumerate(bots):
            assert _check_messages(positions, seat, bot.received, rng) > 5
            for message in bot.received:
                if isinstance(message, Turn):
                    wire = turn_from_proto(turn_to_proto(message, ()), seat)
                    assert wire.observation == message.observation


async def test_nothing_sent_over_stdio_reveals_other_seats_dice() -> None:
    """A real subprocess bot echoes every JSON line it gets; they are checked like the in-process ones."""
    game = load_game("liars_dice", players=3, dice=2, bidding="standard")
    assert isinstance(game, LiarsDiceGame)
    rng = random.Random(1)
    spy = Path(__file__).resolve().parent / "bots" / "stdio_spy.py"
    program = BotProgram(
        ["python3", str(spy), "7"],  # the system interpreter: bots may run as an unprivileged user
        Framing.JSON,
        limits=Limits(cpu_seconds=60, memory_bytes=256 << 20),
        log_bytes=8 << 20,
    )
    subprocess_seat = SubprocessSeat(program, SeatInfo(1, "stdio-spy", 1, "subprocess"))
    seats = [
        InProcessSeat(RandomBot(1), SeatInfo(0, "random0")),
        subprocess_seat,
        InProcessSeat(RandomBot(2), SeatInfo(2, "random2")),
    ]
    tc = TimeControl(timedelta(seconds=5), timedelta(seconds=5), timedelta(seconds=1))
    try:
        record = await play_match(game, seats, tc, seed="stdio-leak")
    finally:
        await subprocess_seat.close()
    assert record.termination == Termination.NORMAL, record.reason
    received: list[Any] = []
    for line in subprocess_seat.stderr_log().splitlines():
        if not line.startswith("RECEIVED "):
            continue
        message = json_format.Parse(line.removeprefix("RECEIVED "), bs.ServerMessage(), ignore_unknown_fields=True)
        kind = message.WhichOneof("kind")
        if kind == "match_started":
            received.append(match_info_from_proto(message.match_started))
        elif kind == "turn":
            received.append(turn_from_proto(message.turn, 1))
        elif kind == "update":
            received.append(update_from_proto(message.update))
        elif kind == "match_ended":
            received.append(result_from_proto(message.match_ended))
    assert isinstance(received[0], MatchInfo) and isinstance(received[-1], MatchResult)
    turns = sum(1 for message in received if isinstance(message, Turn))
    assert turns == sum(1 for player, _ in record.moves.history() if player == 1)
    assert _check_messages(_positions(game, record.moves.history()), 1, received, rng) > turns
