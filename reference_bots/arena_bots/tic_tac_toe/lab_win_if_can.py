"""The lab's RandomPlayerWinIfCan (Task 1, ``specs/tictactoe-lab.md`` §2.2).

The first winning cell in row-major order if there is one, otherwise a uniformly
random empty cell. It never blocks. Hosted as ``lab-win-if-can``.
"""

from __future__ import annotations

import random

import numpy as np

from arena_bots.registry import hosted
from arena_bots.tic_tac_toe.board import LabBot
from arena_bots.tic_tac_toe.lab_kernels import lab_won
from arena_bots.tic_tac_toe.lab_random import possible_moves
from arena_client import Bot


def first_win(board: np.ndarray, q: int) -> int:
    """The lab's win search: the first empty cell (row-major) where ``q`` would win, or -1."""
    n = board.shape[0]
    for cell in possible_moves(board):
        t = board.copy()
        t[cell // n, cell % n] = q
        if lab_won(t, q):
            return cell
    return -1


class LabWinIfCan(LabBot):
    """RandomPlayerWinIfCan: win now if possible, else random."""

    name = bot_name = "lab-win-if-can"

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.rng = random.Random(seed)

    def lab_move(self, board: np.ndarray, p: int) -> int:
        cell = first_win(board, p)
        return cell if cell >= 0 else self.rng.choice(possible_moves(board))


@hosted("lab-win-if-can", ("tic_tac_toe",), "the tic-tac-toe lab's RandomPlayerWinIfCan: win now, else random")
def _lab_win_if_can(seed: int) -> Bot:
    return LabWinIfCan(seed)
