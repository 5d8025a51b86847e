"""The lab's RandomPlayer (``specs/tictactoe-lab.md`` §2.1): a uniform choice among the empty cells.

Hosted as ``lab-random``. The lab draws with ``random.choice`` over the empty
cells in row-major order; here the stream is a seeded :class:`random.Random`.
"""

from __future__ import annotations

import random

import numpy as np

from arena_bots.registry import hosted
from arena_bots.tic_tac_toe.board import LabBot
from arena_client import Bot


def possible_moves(board: np.ndarray) -> list[int]:
    """The lab's ``get_possible_moves``: empty cells in row-major order, as cell indices."""
    return [int(i) for i in np.flatnonzero(board.reshape(-1) == 0)]


class LabRandom(LabBot):
    """RandomPlayer: uniformly random among the empty cells."""

    name = bot_name = "lab-random"

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.rng = random.Random(seed)

    def lab_move(self, board: np.ndarray, p: int) -> int:
        return self.rng.choice(possible_moves(board))


@hosted("lab-random", ("tic_tac_toe",), "the tic-tac-toe lab's RandomPlayer (n x n, k = n)")
def _lab_random(seed: int) -> Bot:
    return LabRandom(seed)
