"""The lab's Blocking player (Task 2, ``specs/tictactoe-lab.md`` §2.3).

Its own first win (row-major); else the first cell where the opponent would
win (only that one, even against two threats); else a uniformly random cell.
No fork logic. Hosted as ``lab-blocking``.
"""

from __future__ import annotations

import random

import numpy as np

from arena_bots.registry import hosted
from arena_bots.tic_tac_toe.board import LabBot
from arena_bots.tic_tac_toe.lab_random import possible_moves
from arena_bots.tic_tac_toe.lab_win_if_can import first_win
from arena_client import Bot


class LabBlocking(LabBot):
    """Blocking: win, else block the first threat, else random."""

    name = bot_name = "lab-blocking"

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.rng = random.Random(seed)

    def lab_move(self, board: np.ndarray, p: int) -> int:
        cell = first_win(board, p)
        if cell < 0:
            cell = first_win(board, -p)
        return cell if cell >= 0 else self.rng.choice(possible_moves(board))


@hosted("lab-blocking", ("tic_tac_toe",), "the tic-tac-toe lab's Blocking: win, else block, else random")
def _lab_blocking(seed: int) -> Bot:
    return LabBlocking(seed)
