"""Corrected minimax for the m,n,k-game: perfect play on boards small enough to search exhaustively.

What the lab's MinimaxPlayer gets wrong and this one does not
(``specs/tictactoe-lab.md`` §2.5, §3.5): a full board is a terminal draw worth
0 (bug B1), a win is worth ``1 + empty cells`` so quicker wins are preferred
(quirk Q1, Task 4), and values are memoised in a transposition table indexed by
the board, kept for the whole match. Ties still go to the first cell in
row-major order. Hosted as ``minimax``; it refuses boards of more than
:data:`~arena_bots.tic_tac_toe.perfect_kernels.MAX_EXACT_CELLS` cells.
"""

from __future__ import annotations

import numpy as np

import arena_bots.tic_tac_toe.perfect_kernels as P
from arena_bots.registry import hosted
from arena_bots.tic_tac_toe.board import TicTacToeBot, UnsupportedBoard
from arena_client import Bot, MatchInfo


def check_exact(name: str, rows: int, cols: int, k: int) -> None:
    """Refuse boards an exhaustive search cannot finish (more than MAX_EXACT_CELLS cells)."""
    if rows * cols > P.MAX_EXACT_CELLS:
        raise UnsupportedBoard(
            f"{name} searches exhaustively, which stops at {P.MAX_EXACT_CELLS} cells; this board is {rows}x{cols} "
            f"({rows * cols} cells); play alphabeta-d2 (depth-limited) or mcts on it"
        )


class Minimax(TicTacToeBot):
    """Exact minimax with correct draws, depth-aware wins and a transposition table."""

    name = "minimax"

    def __init__(self) -> None:
        super().__init__()
        self.tt = np.zeros(0, dtype=np.int32)
        self.values = np.zeros(0, dtype=np.int64)
        self.nodes = np.zeros(1, dtype=np.int64)

    def on_match_start(self, match: MatchInfo) -> None:
        super().on_match_start(match)
        self.tt = np.zeros(0, dtype=np.int32)

    def check_board(self, rows: int, cols: int, k: int) -> None:
        check_exact(self.name, rows, cols, k)

    def choose(self, board: np.ndarray, seat: int) -> int:
        if self.tt.size != 3**board.size:
            self.tt = np.full(3**board.size, P.UNKNOWN, dtype=np.int32)
            self.values = np.zeros(board.size, dtype=np.int64)
        return int(P.minimax_root(board.copy(), self.rows, self.cols, self.k, seat, self.tt, self.values, self.nodes))


@hosted("minimax", ("tic_tac_toe",), "corrected minimax: perfect play (draws 0, quick wins, table), <= 12 cells")
def _minimax(seed: int) -> Bot:
    return Minimax()
