"""Corrected alpha-beta for the m,n,k-game: perfect on small boards, depth-limited on big ones.

``alphabeta`` is the lab's AlphaBetaPlayer with its bugs fixed (the spec's
``FixedAlphaBeta``, ``specs/tictactoe-lab.md`` §3.5): a full board is a terminal
draw worth 0, a win is worth ``1 + empty cells`` (quick wins first, slow losses
last), fail-soft with ``alpha >= beta`` cut-offs, row-major order and strict
``>`` at the root, plus a transposition table of bounds kept for the match. It
refuses boards of more than 12 cells.

``alphabeta-d2`` searches 2 plies on any board: candidate moves are the empty
cells next to a mark, leaves are scored by counting the length-k windows each
side still owns, and a win in one or a forced block is played without search.
"""

from __future__ import annotations

import numpy as np

import arena_bots.tic_tac_toe.perfect_kernels as P
from arena_bots.registry import hosted
from arena_bots.tic_tac_toe.board import TicTacToeBot
from arena_bots.tic_tac_toe.minimax import check_exact
from arena_client import Bot, MatchInfo


class AlphaBeta(TicTacToeBot):
    """Exact alpha-beta with correct draws, depth-aware wins and a transposition table."""

    name = "alphabeta"

    def __init__(self) -> None:
        super().__init__()
        self.tt = np.zeros(0, dtype=np.int32)
        self.flag = np.zeros(0, dtype=np.int8)
        self.nodes = np.zeros(1, dtype=np.int64)
        self.last_value = 0

    def on_match_start(self, match: MatchInfo) -> None:
        super().on_match_start(match)
        self.tt = np.zeros(0, dtype=np.int32)

    def check_board(self, rows: int, cols: int, k: int) -> None:
        check_exact(self.name, rows, cols, k)

    def choose(self, board: np.ndarray, seat: int) -> int:
        if self.tt.size != 3**board.size:
            self.tt = np.full(3**board.size, P.UNKNOWN, dtype=np.int32)
            self.flag = np.zeros(3**board.size, dtype=np.int8)
        value, move = P.alphabeta_root(board.copy(), self.rows, self.cols, self.k, seat, self.tt, self.flag, self.nodes)
        self.last_value = int(value)
        return int(move)


class DepthLimitedAlphaBeta(TicTacToeBot):
    """Alpha-beta to a fixed depth with a line-counting evaluation; any board."""

    def __init__(self, depth: int = 2) -> None:
        super().__init__()
        if depth < 1:
            raise ValueError(f"alpha-beta depth {depth} must be at least 1")
        self.depth = depth
        self.name = f"alphabeta-d{depth}"
        self.nodes = np.zeros(1, dtype=np.int64)

    def choose(self, board: np.ndarray, seat: int) -> int:
        return int(P.limited_root(board.copy(), self.rows, self.cols, self.k, seat, self.depth, self.nodes))


@hosted("alphabeta", ("tic_tac_toe",), "corrected alpha-beta: perfect play (draws 0, quick wins, table), <= 12 cells")
def _alphabeta(seed: int) -> Bot:
    return AlphaBeta()


@hosted("alphabeta-d2", ("tic_tac_toe",), "alpha-beta to 2 plies with a line-count evaluation, any board")
def _alphabeta_d2(seed: int) -> Bot:
    return DepthLimitedAlphaBeta(2)
