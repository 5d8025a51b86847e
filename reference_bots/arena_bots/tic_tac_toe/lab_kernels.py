"""numba kernels of the lab's tic-tac-toe code, bug for bug (``specs/tictactoe-lab.md`` §1-2).

The board is the lab's: an ``n`` x ``n`` int64 array, 0 empty, -1 the first
mover ("O"), +1 the second ("X"); a move is ``(row, col)`` and every loop runs
over the cells in row-major order, so every tie-break is the lab's (first best
wins). The win test is the lab's whole-line sum (a full row, column or either
main diagonal summing to ``n * player``), which is only a k-in-a-row test when
k == n; the bots that use these kernels refuse other boards.

The lab jitted only the board helpers and left the search in Python; here the
search is jitted too, with the same move order, comparisons and values, so the
moves are the lab's (the tests check the spec's node counts and sequences).
Moves are returned as a cell index ``row * n + col``; -1 means the lab code
would have crashed (bug B1b: ``row, col = None``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from arena_bots.numba_helpers import rand_below


@njit(cache=True)
def lab_won(board: np.ndarray, player: int) -> bool:
    """The lab's ``check_for_end``: a full row, column or main/anti diagonal of ``player``."""
    n = board.shape[0]
    d1 = 0
    d2 = 0
    for i in range(n):
        rs = 0
        cs = 0
        for j in range(n):
            rs += board[i, j]
            cs += board[j, i]
        if rs * player >= n or cs * player >= n:
            return True
        d1 += board[i, i]
        d2 += board[i, n - 1 - i]
    return bool(d1 * player >= n or d2 * player >= n)


@njit(cache=True)
def lab_evaluate(board: np.ndarray, player: int) -> float:
    """+1 if ``player`` has won, -1 if the opponent has, else 0 (the lab's ``evaluate``)."""
    if lab_won(board, player):
        return 1.0
    if lab_won(board, -player):
        return -1.0
    return 0.0


@njit  # not cached: numba's cache of recursive functions crashes on load
def _minimax(board: np.ndarray, maximizing: bool, p: int, nodes: np.ndarray) -> float:
    nodes[0] += 1
    if lab_won(board, 1) or lab_won(board, -1):
        return lab_evaluate(board, p)
    n = board.shape[0]
    if maximizing:
        best = -np.inf
        for r in range(n):
            for c in range(n):
                if board[r, c] == 0:
                    board[r, c] = p
                    e = _minimax(board, False, p, nodes)
                    board[r, c] = 0
                    if e > best:
                        best = e
        return best  # -inf when the board is full: bug B1 (a draw below a loss)
    best = np.inf
    for r in range(n):
        for c in range(n):
            if board[r, c] == 0:
                board[r, c] = -p
                e = _minimax(board, True, p, nodes)
                board[r, c] = 0
                if e < best:
                    best = e
    return best  # +inf when the board is full: bug B1 (a draw above a win)


@njit(nogil=True)  # not cached (numba's cache of recursive functions crashes on load); run on a thread
def lab_minimax_move(board: np.ndarray, p: int, nodes: np.ndarray) -> tuple[float, int]:
    """The lab MinimaxPlayer's root: (value, cell), cell -1 when the lab code would crash (B1b).

    ``nodes[0]`` is increased by the nodes visited, the root included.
    """
    nodes[0] += 1
    if lab_won(board, 1) or lab_won(board, -1):
        return lab_evaluate(board, p), -1
    n = board.shape[0]
    best = -np.inf
    move = -1
    for r in range(n):
        for c in range(n):
            if board[r, c] == 0:
                board[r, c] = p
                e = _minimax(board, False, p, nodes)
                board[r, c] = 0
                if e > best:
                    best = e
                    move = r * n + c
    return best, move


@njit  # not cached: numba's cache of recursive functions crashes on load
def _alphabeta(board: np.ndarray, alpha: float, beta: float, maximizing: bool, p: int, nodes: np.ndarray) -> float:
    nodes[0] += 1
    if lab_won(board, 1) or lab_won(board, -1):
        return lab_evaluate(board, p)
    n = board.shape[0]
    if maximizing:
        best = -np.inf
        for r in range(n):
            for c in range(n):
                if board[r, c] == 0:
                    board[r, c] = p
                    e = _alphabeta(board, alpha, beta, False, p, nodes)
                    board[r, c] = 0
                    if e > best:
                        best = e
                    alpha = max(alpha, best)
                    if alpha >= beta:
                        return best
        return best
    best = np.inf
    for r in range(n):
        for c in range(n):
            if board[r, c] == 0:
                board[r, c] = -p
                e = _alphabeta(board, alpha, beta, True, p, nodes)
                board[r, c] = 0
                if e < best:
                    best = e
                beta = min(beta, best)
                if alpha >= beta:
                    return best
    return best


@njit  # not cached: numba's cache of recursive functions crashes on load
def lab_alphabeta_move(board: np.ndarray, p: int, nodes: np.ndarray) -> tuple[float, int]:
    """The lab AlphaBetaPlayer's root (fail-soft, ``alpha >= beta`` cut-offs, evaluation unchanged: B2)."""
    nodes[0] += 1
    if lab_won(board, 1) or lab_won(board, -1):
        return lab_evaluate(board, p), -1
    n = board.shape[0]
    best = -np.inf
    move = -1
    alpha = -np.inf
    beta = np.inf
    for r in range(n):
        for c in range(n):
            if board[r, c] == 0:
                board[r, c] = p
                e = _alphabeta(board, alpha, beta, False, p, nodes)
                board[r, c] = 0
                if e > best:
                    best = e
                    move = r * n + c
                alpha = max(alpha, best)
                if alpha >= beta:
                    return best, move
    return best, move


@njit(cache=True)
def lab_simulate(sim: np.ndarray, to_move: int, root_p: int, rng: np.ndarray) -> float:
    """The lab's uniformly random playout; the result from ``root_p``'s view (+1, -1, 0)."""
    n = sim.shape[0]
    cells = np.empty(n * n, dtype=np.int64)
    while True:
        if lab_won(sim, to_move) or lab_won(sim, -to_move):
            return lab_evaluate(sim, root_p)
        m = 0
        for r in range(n):
            for c in range(n):
                if sim[r, c] == 0:
                    cells[m] = r * n + c
                    m += 1
        if m == 0:
            return lab_evaluate(sim, root_p)
        pick = cells[rand_below(rng, 0, m)]
        sim[pick // n, pick % n] = to_move
        to_move = -to_move


@njit(cache=True, nogil=True)  # the server runs it on a thread, beside its event loop
def lab_pure_mc_move(board: np.ndarray, p: int, simulations: int, rng: np.ndarray, wins: np.ndarray) -> int:
    """The lab MonteCarloPlayer: ``simulations`` playouts per candidate, score = wins only (Q2).

    ``wins`` (length n*n) receives each cell's win count (-1 for occupied cells).
    Ties go to the first candidate in row-major order (Python's ``max(dict)``).
    """
    n = board.shape[0]
    best = -1
    move = -1
    for r in range(n):
        for c in range(n):
            wins[r * n + c] = -1
            if board[r, c] != 0:
                continue
            w = 0
            for _ in range(simulations):
                sim = board.copy()
                sim[r, c] = p
                if lab_simulate(sim, -p, p, rng) == 1.0:
                    w += 1
            wins[r * n + c] = w
            if w > best:
                best = w
                move = r * n + c
    return move
