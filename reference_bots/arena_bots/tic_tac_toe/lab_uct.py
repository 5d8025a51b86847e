"""The lab's extra task: full MCTS with UCT (``specs/tictactoe-lab.md`` §2.8), as the spec's pseudocode.

The handout gives no code, so this follows the spec's pseudocode with the
choices it leaves open made the lab's way: ``1000 x candidate moves``
iterations (the Pure MC budget), ``c = sqrt(2)``, every child expanded and the
unvisited ones visited first in row-major order, uniformly random playouts, a
win worth 1 and a draw 0 (as in the lab's Pure MC), the most visited root move,
no tree reuse and no threat detection. Hosted as ``lab-uct``; it plays boards
of at most 36 cells (its budget grows with the board; use ``mcts`` beyond).
"""

from __future__ import annotations

import numpy as np

from arena_bots.numba_helpers import seed_state
from arena_bots.registry import hosted
from arena_bots.tic_tac_toe.board import TicTacToeBot, UnsupportedBoard
from arena_bots.tic_tac_toe.mcts import Tree, mcts_move
from arena_client import Bot

PER_CANDIDATE = 1000
MAX_CELLS = 36


class LabUCT(TicTacToeBot):
    """UCT with the lab's budget and conventions."""

    name = "lab-uct"
    thinks_off_loop = True
    """1000 simulations per empty cell take 4-13 ms a move on 3x3 and up to 80 ms on 5x5: the server runs it on
    a thread (its search kernel releases the GIL)."""

    def __init__(self, seed: int = 0, per_candidate: int = PER_CANDIDATE) -> None:
        super().__init__()
        self.per_candidate = per_candidate
        self.rng = np.array([seed_state(seed, 13)], dtype=np.uint64)
        self.tree: Tree | None = None

    def check_board(self, rows: int, cols: int, k: int) -> None:
        if rows * cols > MAX_CELLS:
            raise UnsupportedBoard(
                f"lab-uct runs 1000 simulations per empty cell, too slow beyond {MAX_CELLS} cells; this board is "
                f"{rows}x{cols}; play mcts (a time budget) on it"
            )

    def choose(self, board: np.ndarray, seat: int) -> int:
        sims = self.per_candidate * int(np.count_nonzero(board < 0))
        if self.tree is None:
            self.tree = Tree(max_nodes=sims + 2, max_edges=(sims + 2) * MAX_CELLS)
        move, _ = mcts_move(
            board, self.rows, self.cols, self.k, seat, self.tree, self.rng,
            simulations=sims, draw_reward=0.0, ordered=True,
        )  # fmt: skip
        return move


@hosted("lab-uct", ("tic_tac_toe",), "the tic-tac-toe lab's extra task: UCT, 1000 simulations per candidate")
def _lab_uct(seed: int) -> Bot:
    return LabUCT(seed)
