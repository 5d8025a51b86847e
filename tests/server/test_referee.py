"""The referee with in-process seats: fairness, clocks, terminations, seeds."""

from __future__ import annotations

import asyncio
import hashlib
import time
from datetime import timedelta

import pytest

from arena_bots.simple import AlwaysRockBot, RandomBot, RotateBot
from arena_client import Bot, MatchInfo, SeatInfo, Termination, TimeControl, Turn, Update
from arena_games import load_game
from arena_server.referee.loop import MatchControl, play_match, seed_hash
from arena_server.seats.in_process import InProcessSeat
from tests.conftest import in_thread


def seats(*bots: Bot) -> list[InProcessSeat]:
    return [InProcessSeat(b, SeatInfo(i, b.name)) for i, b in enumerate(bots)]


class Recorder(Bot):
    """Remembers everything it is told."""

    name = "recorder"

    def __init__(self, move: int = 0) -> None:
        self.move = move
        self.turns: list[Turn] = []
        self.updates: list[Update] = []
        self.match: MatchInfo | None = None

    def on_match_start(self, match: MatchInfo) -> None:
        self.match = match

    def on_update(self, update: Update) -> None:
        self.updates.append(update)

    def act(self, turn: Turn) -> int:
        self.turns.append(turn)
        return self.move


async def test_normal_match_record() -> None:
    record = await play_match(load_game("rps", rounds=10), seats(AlwaysRockBot(), RotateBot()), seed="s")
    assert record.termination == Termination.NORMAL and record.offender is None
    # rotate plays 0,1,2,0,... against rock: 3 paper wins, 3 scissors losses, 4 draws in 10 rounds
    assert record.returns == (0.0, 0.0)
    assert len(record.moves) == 20
    assert record.moves.history()[:4] == [(0, 0), (1, 0), (0, 0), (1, 1)]


async def test_simultaneous_moves_hidden_until_both_answer() -> None:
    a, b = Recorder(1), Recorder(2)
    await play_match(load_game("rps", rounds=5), seats(a, b))
    for bot in (a, b):
        for index, turn in enumerate(bot.turns):
            # the only moves visible before round i are those of rounds < i
            assert turn.observation.round == index
            assert turn.observation.last_round == (() if index == 0 else (1, 2))
        # every update carries the whole previous round, never part of the current one
        for update in bot.updates:
            assert sorted(m.seat for m in update.moves) == [0, 1]
    assert len(a.updates) == 5  # four before turns 1..4, the last one folded into the match end


async def test_illegal_action_loses_with_reason() -> None:
    record = await play_match(load_game("rps", rounds=10), seats(Recorder(7), RandomBot(1)))
    assert record.termination == Termination.ILLEGAL_ACTION
    assert record.offender == 0
    assert "answered 7, which is not a legal action (legal: 0..2)" in record.reason
    assert record.returns == (-10.0, 10.0)
    assert next(iter(record.moves))[3] is False  # the illegal move is kept, marked illegal


class Crasher(Bot):
    name = "crasher"

    def act(self, turn: Turn) -> int:
        if turn.observation.round == 3:
            raise RuntimeError("boom")
        return 0


async def test_crash_loses() -> None:
    record = await play_match(load_game("rps", rounds=10), seats(RandomBot(1), Crasher()))
    assert record.termination == Termination.CRASH and record.offender == 1
    assert "boom" in record.reason
    assert record.returns == (10.0, -10.0)


class NotAnInt(Bot):
    name = "not-an-int"

    def act(self, turn: Turn) -> int:
        return "rock"  # type: ignore[return-value]


async def test_non_integer_answer_is_protocol_error() -> None:
    record = await play_match(load_game("rps"), seats(NotAnInt(), RandomBot(1)))
    assert record.termination == Termination.PROTOCOL_ERROR and record.offender == 0
    assert "not an integer" in record.reason


class Sleeper(Bot):
    name = "sleeper"

    def __init__(self, seconds: float, from_round: int = 0) -> None:
        self.seconds = seconds
        self.from_round = from_round

    def act(self, turn: Turn) -> int:
        if turn.observation.round >= self.from_round:
            time.sleep(self.seconds)
        return 0


async def test_timeout_after_overage_runs_out() -> None:
    tc = TimeControl(timedelta(milliseconds=20), timedelta(milliseconds=60), timedelta(milliseconds=5))
    record = await play_match(load_game("rps", rounds=50), seats(RandomBot(1), Sleeper(0.045)), tc)
    assert record.termination == Termination.TIMEOUT and record.offender == 1
    # each slow move costs about 20 ms of overage: the bank of 60 ms lasts two or three moves
    assert 4 <= len(record.moves) <= 8
    assert "per move" in record.reason


async def test_grace_is_not_charged() -> None:
    tc = TimeControl(timedelta(milliseconds=10), timedelta(0), timedelta(milliseconds=50))
    record = await play_match(load_game("rps", rounds=5), seats(RandomBot(1), Sleeper(0.02)), tc)
    assert record.termination == Termination.NORMAL


async def test_both_seats_failing_at_once_blames_nobody() -> None:
    record = await play_match(load_game("rps"), seats(Recorder(9), Recorder(9)))
    assert record.termination == Termination.ILLEGAL_ACTION
    assert record.offender is None and record.returns == (0.0, 0.0)
    assert "several seats failed" in record.reason


async def test_seed_commitment_and_reproducibility() -> None:
    game = load_game("rps", rounds=30)
    first = await play_match(game, seats(RandomBot(5), RandomBot(6)), seed="fixed-seed")
    second = await play_match(game, seats(RandomBot(5), RandomBot(6)), seed="fixed-seed")
    assert first.seed_sha256 == hashlib.sha256(b"fixed-seed").hexdigest() == seed_hash(first.seed)
    assert first.moves.history() == second.moves.history()
    fresh = await play_match(game, seats(RandomBot(5), RandomBot(6)))
    assert len(fresh.seed) == 32 and fresh.seed != first.seed


async def test_match_start_announces_hash_not_seed() -> None:
    a = Recorder()
    record = await play_match(load_game("rps", rounds=2), seats(a, RandomBot(1)), seed="secret")
    assert a.match is not None
    assert a.match.seed_sha256 == record.seed_sha256
    assert "secret" not in repr(a.match)


async def test_abort_ends_match_as_aborted() -> None:
    control = MatchControl()

    class AbortsMidway(Bot):
        name = "aborter"

        def act(self, turn: Turn) -> int:
            if turn.observation.round == 5:
                control.abort("server stopping")
            return 0

    record = await play_match(load_game("rps", rounds=100), seats(AbortsMidway(), RandomBot(1)), control=control)
    assert record.termination == Termination.ABORTED and record.offender is None
    assert record.returns == (0.0, 0.0) and record.reason == "server stopping"


async def test_matches_run_side_by_side() -> None:
    game = load_game("rps", rounds=200)
    records = await asyncio.gather(*(play_match(game, seats(RandomBot(i), RotateBot())) for i in range(8)))
    assert all(r.termination == Termination.NORMAL for r in records)
    assert len({r.moves.history()[0] for r in records}) >= 1


def test_wrong_seat_count_is_an_error() -> None:
    with pytest.raises(ValueError, match="needs 2 seats"):
        in_thread(asyncio.run, play_match(load_game("rps"), seats(RandomBot(1))))
