"""numba kernels for the m,n,k-game on Arena's flat board, shared by the corrected searchers and MCTS.

The board is a flat int8 array of ``rows * cols`` cells, row-major, -1 empty,
otherwise the seat (0 moves first). A win is ``k`` in an unbroken row, column
or diagonal, tested through the last move in O(k) (the rules engine's test),
so these kernels are right on every board the game accepts.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def wins_through(board: np.ndarray, rows: int, cols: int, k: int, cell: int, seat: int) -> bool:
    """Whether ``seat`` has ``k`` in a row through ``cell`` (``board[cell]`` need not be set yet)."""
    r0 = cell // cols
    c0 = cell % cols
    for d in range(4):
        dr = 0 if d == 0 else 1
        dc = 1 if d == 0 else (0 if d == 1 else (1 if d == 2 else -1))
        run = 1
        r = r0 + dr
        c = c0 + dc
        while 0 <= r < rows and 0 <= c < cols and board[r * cols + c] == seat:
            run += 1
            r += dr
            c += dc
        r = r0 - dr
        c = c0 - dc
        while 0 <= r < rows and 0 <= c < cols and board[r * cols + c] == seat:
            run += 1
            r -= dr
            c -= dc
        if run >= k:
            return True
    return False


@njit(cache=True)
def winning_cell(board: np.ndarray, rows: int, cols: int, k: int, seat: int) -> int:
    """The first empty cell (row-major) where ``seat`` would complete ``k`` in a row, or -1."""
    for cell in range(rows * cols):
        if board[cell] < 0 and wins_through(board, rows, cols, k, cell, seat):
            return cell
    return -1


@njit(cache=True)
def threat_move(board: np.ndarray, rows: int, cols: int, k: int, seat: int) -> int:
    """A win in one for ``seat`` if it has one, else the block of the opponent's win in one, else -1."""
    cell = winning_cell(board, rows, cols, k, seat)
    if cell >= 0:
        return cell
    return winning_cell(board, rows, cols, k, 1 - seat)
