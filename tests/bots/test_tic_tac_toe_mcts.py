"""UCT search for the m,n,k-game: budgets, threat detection, strength on 3x3, every bot on every board."""

from __future__ import annotations

import time

import numpy as np
import pytest

from arena_bots import hosted_bots
from arena_bots.simple import RandomBot
from arena_bots.tic_tac_toe.board import TicTacToeBot, UnsupportedBoard
from arena_bots.tic_tac_toe.lab_random import LabRandom
from arena_bots.tic_tac_toe.lab_uct import LabUCT
from arena_bots.tic_tac_toe.mcts import HOSTED_SECONDS, MCTSBot
from arena_bots.tic_tac_toe.play import play
from arena_client import Bot, MatchInfo, SeatInfo, TimeControl, Turn
from arena_games import load_game


def start(bot: TicTacToeBot, rows: int, cols: int, k: int, seat: int = 0) -> None:
    params: dict[str, int | str | bool] = {"rows": rows, "cols": cols, "k": k}
    bot.on_match_start(
        MatchInfo("m", "tic_tac_toe", params, seat, (SeatInfo(0, "a"), SeatInfo(1, "b")), TimeControl(), "")
    )


def gomoku(own: list[int], other: list[int], seat: int = 0) -> np.ndarray:
    board = np.full(225, -1, dtype=np.int8)
    board[own] = seat
    board[other] = 1 - seat
    return board


@pytest.mark.parametrize("policy", [0, 1])
def test_mcts_takes_a_win_in_one_and_blocks_a_forced_loss_on_15x15(policy: int) -> None:
    bot = MCTSBot(1, simulations=200, policy=policy)
    start(bot, 15, 15, 5)
    # the opponent has four in a row on row 0 (open at cell 4); we have four on row 7 (wins at 104 or 109)
    assert bot.choose(gomoku([105, 106, 107, 108], [0, 1, 2, 3]), 0) in (104, 109)
    assert bot.choose(gomoku([105, 106, 107, 200], [0, 1, 2, 3]), 0) == 4
    # a broken four: X X . X X on a diagonal
    assert bot.choose(gomoku([0, 16, 48, 64], [5, 6, 7]), 0) == 32


def test_mcts_respects_a_simulation_budget_and_a_time_budget() -> None:
    bot = MCTSBot(2, simulations=1234)
    start(bot, 7, 7, 4)
    board = np.full(49, -1, dtype=np.int8)
    board[24] = 1
    bot.choose(board, 0)
    assert bot.last_simulations == 1234
    timed = MCTSBot(3, seconds=0.2)
    start(timed, 15, 15, 5)
    timed.choose(gomoku([112], [113]), 0)  # compile / warm up
    begin = time.perf_counter()
    move = timed.choose(gomoku([112], [113]), 0)
    elapsed = time.perf_counter() - begin
    assert 0.2 <= elapsed < 0.2 + 0.5, elapsed  # a loaded machine may add some, never most of a second
    assert timed.last_simulations > 0 and move not in (112, 113)


def test_hosted_mcts_budget_fits_the_ladder_clock() -> None:
    default_clock = TimeControl().per_move.total_seconds()
    assert default_clock / 3 >= HOSTED_SECONDS


def test_mcts_does_not_lose_on_3x3() -> None:
    for seed in range(4):
        assert play(MCTSBot(seed, simulations=3000), LabRandom(seed)).result != "loss"
        assert play(LabRandom(seed), MCTSBot(seed, simulations=3000)).result != "win"
    assert play(MCTSBot(5, simulations=5000), MCTSBot(6, simulations=5000)).result == "draw"


def test_lab_uct_spends_1000_simulations_per_candidate_and_opens_centre() -> None:
    bot = LabUCT(4)
    start(bot, 3, 3, 3)
    assert bot.choose(np.full(9, -1, dtype=np.int8), 0) == 4
    assert bot.tree is not None and int(bot.tree.visits[0]) == 9000


BOARDS = [(1, 1, 1), (2, 2, 2), (3, 3, 3), (4, 4, 4), (4, 4, 3), (3, 5, 3), (7, 7, 4), (15, 15, 5)]


def tic_tac_toe_bots() -> list[str]:
    return sorted(name for name, h in hosted_bots().items() if "tic_tac_toe" in h.games)


@pytest.mark.parametrize("rows,cols,k", BOARDS)
def test_every_hosted_bot_plays_the_board_or_refuses_it_in_one_line(rows: int, cols: int, k: int) -> None:
    """A few moves of every hosted bot on every board, through the referee's calls and the rules engine."""
    game = load_game("tic_tac_toe", rows=rows, cols=cols, k=k)
    played, refused = [], []
    for name in tic_tac_toe_bots():
        bot: Bot = hosted_bots()[name].factory(7)
        if isinstance(bot, MCTSBot):
            bot.seconds = 0.02
        info = MatchInfo("m", "tic_tac_toe", {"rows": rows, "cols": cols, "k": k}, 0, (), TimeControl(), "")
        try:
            bot.on_match_start(info)
        except UnsupportedBoard as exc:
            msg = str(exc)
            assert f"{rows}x{cols}" in msg and "play " in msg and "\n" not in msg, msg
            refused.append(name)
            continue
        other = RandomBot(1)
        state = game.new_initial_state()
        for turn in range(6):
            if state.is_terminal():
                break
            seat = state.current_player()
            actor = bot if seat == 0 else other
            legal = tuple(state.legal_actions())
            t = Turn("m", turn, seat, state.observation(seat), legal, TimeControl().per_move, TimeControl().overage)
            state.apply_action(actor.act(t))  # raises on an illegal cell
        played.append(name)
    assert {"random", "mcts", "mcts-threats", "alphabeta-d2"} <= set(played)
    if (rows, cols, k) == (3, 3, 3):
        assert not refused
    if (rows, cols, k) == (15, 15, 5):
        assert {"minimax", "alphabeta", "lab-minimax-buggy", "lab-uct", "pure-mc"} <= set(refused)
