"""Pure Monte Carlo on any m,n,k board: the lab's MonteCarloPlayer with a correct k-in-a-row test.

1000 uniformly random playouts per empty cell by default, scored by wins only
and ties to the first cell in row-major order, exactly as the lab's player
(``specs/tictactoe-lab.md`` §2.7), but on the rules engine's win test, so it is
right on every board. The experiment uses it as the Pure MC opponent on 7x7
and 15x15. Hosted as ``pure-mc`` for boards of at most 49 cells (a move costs
``1000 x empty cells`` playouts; beyond that it would not fit the ladder's clock).
"""

from __future__ import annotations

import numpy as np

from arena_bots.numba_helpers import seed_state
from arena_bots.registry import hosted
from arena_bots.tic_tac_toe.board import TicTacToeBot, UnsupportedBoard
from arena_bots.tic_tac_toe.mcts_kernels import flat_mc_move
from arena_client import Bot

HOSTED_MAX_CELLS = 49


class PureMC(TicTacToeBot):
    """Flat Monte Carlo: the most playout wins among the candidates."""

    name = "pure-mc"
    thinks_off_loop = True
    """1000 playouts per empty cell take 3-6 ms a move on 3x3 and over 100 ms on 7x7: the server runs it on a
    thread (its kernel releases the GIL)."""

    def __init__(self, seed: int = 0, per_candidate: int = 1000, max_cells: int | None = HOSTED_MAX_CELLS) -> None:
        super().__init__()
        self.per_candidate = per_candidate
        self.max_cells = max_cells
        self.rng = np.array([seed_state(seed, 17)], dtype=np.uint64)
        self.scores = np.zeros(0, dtype=np.int64)

    def check_board(self, rows: int, cols: int, k: int) -> None:
        if self.max_cells is not None and rows * cols > self.max_cells:
            raise UnsupportedBoard(
                f"pure-mc runs {self.per_candidate} playouts per empty cell, too slow for the ladder's clock beyond "
                f"{self.max_cells} cells; this board is {rows}x{cols}; play mcts on it"
            )

    def choose(self, board: np.ndarray, seat: int) -> int:
        if self.scores.size != board.size:
            self.scores = np.zeros(board.size, dtype=np.int64)
        return int(flat_mc_move(board, self.rows, self.cols, self.k, seat, self.per_candidate, self.rng, self.scores))


@hosted("pure-mc", ("tic_tac_toe",), "pure Monte Carlo, 1000 playouts per candidate, wins only, <= 49 cells")
def _pure_mc(seed: int) -> Bot:
    return PureMC(seed)
