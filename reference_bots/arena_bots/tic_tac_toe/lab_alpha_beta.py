"""The lab's AlphaBetaPlayer (Task 4, ``specs/tictactoe-lab.md`` §2.6), bugs included.

The lab's minimax plus fail-soft alpha-beta with ``alpha >= beta`` cut-offs and
no depth limit. Bug B2: the evaluation is not made depth-aware (the task asked
for it), and B1/B1b are inherited, so it picks the same move as the lab's
minimax in every reachable position, only faster. Hosted as
``lab-alphabeta-buggy`` (n x n, k = n, up to 3x3).
"""

from __future__ import annotations

import numpy as np

from arena_bots.registry import hosted
from arena_bots.tic_tac_toe.lab_kernels import lab_alphabeta_move
from arena_bots.tic_tac_toe.lab_minimax import LabMinimax
from arena_client import Bot


def lab_alphabeta(board: np.ndarray, p: int) -> tuple[float, int, int]:
    """(root value, cell, nodes visited) of the lab's alpha-beta for mark ``p``."""
    nodes = np.zeros(1, dtype=np.int64)
    value, cell = lab_alphabeta_move(board.copy(), p, nodes)
    return float(value), int(cell), int(nodes[0])


class LabAlphaBeta(LabMinimax):
    """AlphaBetaPlayer exactly as the lab coded it (B1, B1b, B2): the lab's minimax with cut-offs."""

    name = bot_name = "lab-alphabeta-buggy"
    label = "lab alpha-beta"
    thinks_off_loop = False  # (its cut-offs keep a move under a millisecond: no thread needed)

    def search(self, board: np.ndarray, p: int) -> tuple[float, int, int]:
        return lab_alphabeta(board, p)


@hosted("lab-alphabeta-buggy", ("tic_tac_toe",), "the tic-tac-toe lab's alpha-beta, bugs B1 and B2 included (3x3)")
def _lab_alphabeta(seed: int) -> Bot:
    return LabAlphaBeta()
