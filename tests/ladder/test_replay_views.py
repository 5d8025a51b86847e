"""``arena replay``'s text: each seat's view as it saw it, with the shared terminal pictures."""

from __future__ import annotations

from arena_bots.simple import RandomBot
from arena_client import SeatInfo
from arena_games import CHANCE, load_game
from arena_server.matches.replay import describe_step, replay_steps
from arena_server.referee.loop import play_match
from arena_server.seats.in_process import InProcessSeat


async def test_liars_dice_replay_shows_each_seat_only_its_own_dice() -> None:
    game = load_game("liars_dice", dice=2)
    seats = [InProcessSeat(RandomBot(1), SeatInfo(0, "ann")), InProcessSeat(RandomBot(2), SeatInfo(1, "bob"))]
    record = await play_match(game, seats, seed="replay-views")
    steps = list(replay_steps(record))
    first_bid = next(s for s in steps if any(p != CHANCE for p, _, _ in s.actions))
    text = describe_step(record, first_bid)
    state = first_bid.state
    ann, bob = (" ".join(map(str, state.observation(s).my_dice)) for s in (0, 1))
    ann_view, bob_view = text.split("seat 1 (bob) saw:")
    assert ann != bob  # this seed deals different hands, so a swapped view would show
    assert "seat 0 (ann) saw:" in ann_view and "dice left: ann: 2, bob: 2" in ann_view

    def dice_lines(view: str) -> list[str]:
        return [line.strip() for line in view.splitlines() if "your dice:" in line]

    assert dice_lines(ann_view) == [f"your dice: {ann}"]
    assert dice_lines(bob_view) == [f"your dice: {bob}"]


async def test_tic_tac_toe_replay_shows_one_shared_board() -> None:
    game = load_game("tic_tac_toe")
    seats = [InProcessSeat(RandomBot(3), SeatInfo(0, "x")), InProcessSeat(RandomBot(4), SeatInfo(1, "o"))]
    record = await play_match(game, seats, seed="replay-board")
    text = describe_step(record, next(iter(replay_steps(record))))
    assert "saw:" not in text  # no hidden information: one picture for everyone
    assert "a b c" in text and "X = x" in text
