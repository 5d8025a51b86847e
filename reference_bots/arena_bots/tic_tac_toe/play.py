"""A lean two-bot tic-tac-toe game loop: the referee's calls on the real rules engine, minus the clock.

Builds the same :class:`Turn` and :class:`TicTacToeObservation` values the
referee sends, validates every move with :mod:`arena_games.tic_tac_toe`, and
returns the result from seat 0's (the first mover's) point of view, as the lab
does: ``"win"``, ``"loss"`` or ``"draw"``. Used by the experiment, the bench
and the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from arena_client import Bot, MatchInfo, SeatInfo, TimeControl, Turn
from arena_games import load_game
from arena_games.tic_tac_toe import TicTacToeState

_TC = TimeControl()
_BUDGET = timedelta(seconds=1)
_BANK = timedelta(seconds=10)


@dataclass(frozen=True)
class Game:
    """A finished game: seat 0's result and the cells played in order."""

    result: str
    moves: tuple[int, ...]


def play(first: Bot, second: Bot, *, rows: int = 3, cols: int = 3, k: int = 3, match_id: str = "game") -> Game:
    """Play ``first`` (seat 0, moves first) against ``second``; the same bot may take both seats.

    Raises:
        arena_games.IllegalActionError: a bot chose an illegal cell.
    """
    game = load_game("tic_tac_toe", rows=rows, cols=cols, k=k)
    params: dict[str, int | str | bool] = {"rows": rows, "cols": cols, "k": k}
    bots = (first, second)
    seats = (SeatInfo(0, getattr(first, "name", "a")), SeatInfo(1, getattr(second, "name", "b")))
    for seat, bot in enumerate(bots):
        if seat == 1 and second is first:
            break
        bot.on_match_start(MatchInfo(match_id, "tic_tac_toe", dict(params), seat, seats, _TC, ""))
    state = game.new_initial_state()
    assert isinstance(state, TicTacToeState)
    moves: list[int] = []
    turn = 0
    while not state.is_terminal():
        seat = state.current_player()
        legal = tuple(state.legal_actions())
        action = int(bots[seat].act(Turn(match_id, turn, seat, state.observation(seat), legal, _BUDGET, _BANK)))
        state.apply_action(action)
        moves.append(action)
        turn += 1
    ret = state.returns()[0]
    return Game("win" if ret > 0 else ("loss" if ret < 0 else "draw"), tuple(moves))
