"""An answer's legality, judged the same whether the referee looks it up in the Turn's legal actions or asks the engine.

The referee looks an answer up in the legal actions its Turn listed when that
list has at most ``SHORT_LEGAL`` items, and asks the engine's ``is_legal``
otherwise (issue 20, twenty-third pass). Both sides of that line are played
here, through both of the referee's ways of asking: inline, when every seat is
in-process (``_ask_sync``), and with a remote bot on a real server, whose
answer and its hosted opponent's are judged after the fact (``_judge``).
A legal answer must pass and an occupied cell must lose, with the engine's
reason, on both sides of the line.
"""

from __future__ import annotations

import pytest

from arena_bots.simple import RandomBot
from arena_client import Bot, SeatInfo, Termination, Turn
from arena_client.remote import Client
from arena_games import load_game
from arena_server.referee.asking import SHORT_LEGAL
from arena_server.referee.loop import play_match
from arena_server.seats.in_process import InProcessSeat
from tests.conftest import LiveServer

BOARDS = {"short": {"rows": 3, "cols": 3, "k": 3}, "long": {"rows": 7, "cols": 7, "k": 4}}
"""Tic-tac-toe boards whose first Turn lists 9 and 49 legal actions: one on each side of ``SHORT_LEGAL``."""


class TakesTheSameCellTwice(Bot):
    """Takes the first free cell, then answers that same cell again (taken by then: illegal)."""

    name = "same-cell"

    def __init__(self) -> None:
        self.cell: int | None = None
        self.legal_counts: list[int] = []

    def act(self, turn: Turn) -> int:
        self.legal_counts.append(len(turn.legal_actions))
        if self.cell is None:
            self.cell = turn.legal_actions[0]
        return self.cell


def _check_sides(size: str, bot: TakesTheSameCellTwice) -> None:
    """The bot's Turns were on the intended side of the line (so both sides stay covered if it moves)."""
    assert bot.legal_counts, "the bot was never asked"
    if size == "short":
        assert max(bot.legal_counts) <= SHORT_LEGAL
    else:
        assert min(bot.legal_counts) > SHORT_LEGAL


@pytest.mark.parametrize("size", BOARDS)
async def test_inline_a_legal_match_plays_out_and_a_taken_cell_loses(size: str) -> None:
    game = load_game("tic_tac_toe", **BOARDS[size])
    players = [RandomBot(1), RandomBot(2)]
    record = await play_match(game, [InProcessSeat(b, SeatInfo(i, b.name)) for i, b in enumerate(players)])
    assert record.termination == Termination.NORMAL, record.reason
    assert all(legal for *_, legal in record.moves)

    bot = TakesTheSameCellTwice()
    seats = [InProcessSeat(bot, SeatInfo(0, bot.name)), InProcessSeat(RandomBot(3), SeatInfo(1, "random"))]
    record = await play_match(game, seats)
    _check_sides(size, bot)
    assert record.termination == Termination.ILLEGAL_ACTION and record.offender == 0
    assert f"answered {bot.cell}" in record.reason and "is already taken by X (seat 0)" in record.reason
    assert [legal for *_, legal in record.moves] == [True, True, False]


@pytest.mark.parametrize("size", BOARDS)
async def test_remote_a_legal_match_plays_out_and_a_taken_cell_loses(live_server: LiveServer, size: str) -> None:
    params = BOARDS[size]
    client = Client(RandomBot(4), live_server.address, name="remote-random", threaded=False)
    (result,) = await client.play(opponent="random", game="tic_tac_toe", params=params, seat=0)
    assert result.termination == Termination.NORMAL, result.reason
    stored = await live_server.store.get_match(result.match_id)
    assert stored is not None and all(stored.moves.legal)

    bot = TakesTheSameCellTwice()
    client = Client(bot, live_server.address, name="same-cell", threaded=False)
    (result,) = await client.play(opponent="random", game="tic_tac_toe", params=params, seat=0)
    _check_sides(size, bot)
    assert result.termination == Termination.ILLEGAL_ACTION and result.offender == 0
    assert f"answered {bot.cell}" in result.reason and "is already taken by X (seat 0)" in result.reason
    stored = await live_server.store.get_match(result.match_id)
    assert stored is not None and list(stored.moves.legal) == [1, 1, 0]
