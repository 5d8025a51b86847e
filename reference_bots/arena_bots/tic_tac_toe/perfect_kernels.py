"""numba kernels of the corrected searchers: exact minimax and alpha-beta with a transposition table,
and depth-limited alpha-beta with a line-counting evaluation for big boards.

Values are from the side to move's point of view (negamax form). A finished
game scores ``+(1 + empty cells)`` for a win, ``-(1 + empty cells)`` for a
loss and 0 for a draw (a full board is a terminal draw): the spec's
``±(10 - depth)`` shifted by a constant, so quick wins and slow losses are
preferred and the value of a position does not depend on where the search
started, which keeps transposition-table entries valid. Children are tried in
row-major order and the root keeps the first best (strict ``>``), as the lab
does.

The table is indexed by the base-3 code of the board (``sum (seat+1) * 3**cell``),
so exact search is for boards of at most :data:`MAX_EXACT_CELLS` cells.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from arena_bots.tic_tac_toe.mnk_kernels import threat_move, wins_through

MAX_EXACT_CELLS = 12
UNKNOWN = -32768
EXACT, LOWER, UPPER = 0, 1, 2
BIG = 1_000_000


@njit(cache=True)
def board_code(board: np.ndarray) -> int:
    """Base-3 code of the board (the table index)."""
    code = 0
    p = 1
    for i in range(board.size):
        code += (board[i] + 1) * p
        p *= 3
    return code


@njit(cache=True)
def _root_setup(board: np.ndarray, cells: int) -> tuple[np.ndarray, int, int]:
    """What both exact searches start from: the powers of 3 per cell, the board's code and its empty cells."""
    pow3 = np.empty(cells, dtype=np.int64)
    p = 1
    for i in range(cells):
        pow3[i] = p
        p *= 3
    empties = 0
    for i in range(cells):
        if board[i] < 0:
            empties += 1
    return pow3, board_code(board), empties


@njit  # not cached: numba's cache of recursive functions crashes on load
def _negamax(
    board: np.ndarray,
    rows: int,
    cols: int,
    k: int,
    seat: int,
    empties: int,
    code: int,
    pow3: np.ndarray,
    tt: np.ndarray,
    nodes: np.ndarray,
) -> int:
    nodes[0] += 1
    if tt[code] != UNKNOWN:
        return int(tt[code])
    if empties == 0:
        return 0
    best = -BIG
    for cell in range(rows * cols):
        if board[cell] >= 0:
            continue
        if wins_through(board, rows, cols, k, cell, seat):
            v = empties  # 1 + (empties - 1) left after this move
        else:
            board[cell] = seat
            v = -_negamax(board, rows, cols, k, 1 - seat, empties - 1, code + (seat + 1) * pow3[cell], pow3, tt, nodes)
            board[cell] = -1
        if v > best:
            best = v
    tt[code] = best
    return best


@njit  # not cached: numba's cache of recursive functions crashes on load
def minimax_root(
    board: np.ndarray,
    rows: int,
    cols: int,
    k: int,
    seat: int,
    tt: np.ndarray,
    values: np.ndarray,
    nodes: np.ndarray,
) -> int:
    """Corrected minimax: the first cell with the best exact value; ``values[cell]`` gets each value."""
    pow3, code, empties = _root_setup(board, rows * cols)
    best = -BIG
    move = -1
    nodes[0] += 1
    for cell in range(rows * cols):
        values[cell] = UNKNOWN
        if board[cell] >= 0:
            continue
        if wins_through(board, rows, cols, k, cell, seat):
            v = empties
        else:
            board[cell] = seat
            v = -_negamax(board, rows, cols, k, 1 - seat, empties - 1, code + (seat + 1) * pow3[cell], pow3, tt, nodes)
            board[cell] = -1
        values[cell] = v
        if v > best:
            best = v
            move = cell
    return move


@njit  # not cached: numba's cache of recursive functions crashes on load
def _alphabeta(
    board: np.ndarray,
    rows: int,
    cols: int,
    k: int,
    seat: int,
    empties: int,
    code: int,
    alpha: int,
    beta: int,
    pow3: np.ndarray,
    tt: np.ndarray,
    flag: np.ndarray,
    nodes: np.ndarray,
) -> int:
    nodes[0] += 1
    if empties == 0:
        return 0
    if tt[code] != UNKNOWN:
        v = int(tt[code])
        f = flag[code]
        if f == EXACT or (f == LOWER and v >= beta) or (f == UPPER and v <= alpha):
            return v
    alpha0 = alpha
    best = -BIG
    for cell in range(rows * cols):
        if board[cell] >= 0:
            continue
        if wins_through(board, rows, cols, k, cell, seat):
            v = empties
        else:
            board[cell] = seat
            v = -_alphabeta(
                board,
                rows,
                cols,
                k,
                1 - seat,
                empties - 1,
                code + (seat + 1) * pow3[cell],
                -beta,
                -alpha,
                pow3,
                tt,
                flag,
                nodes,
            )
            board[cell] = -1
        if v > best:
            best = v
        if best > alpha:
            alpha = best
        if alpha >= beta:
            break
    tt[code] = best
    flag[code] = UPPER if best <= alpha0 else (LOWER if best >= beta else EXACT)
    return best


@njit  # not cached: numba's cache of recursive functions crashes on load
def alphabeta_root(
    board: np.ndarray,
    rows: int,
    cols: int,
    k: int,
    seat: int,
    tt: np.ndarray,
    flag: np.ndarray,
    nodes: np.ndarray,
) -> tuple[int, int]:
    """Corrected fail-soft alpha-beta with a table of bounds: (value, first best cell)."""
    pow3, code, empties = _root_setup(board, rows * cols)
    best = -BIG
    move = -1
    alpha = -BIG
    nodes[0] += 1
    for cell in range(rows * cols):
        if board[cell] >= 0:
            continue
        if wins_through(board, rows, cols, k, cell, seat):
            v = empties
        else:
            board[cell] = seat
            v = -_alphabeta(
                board,
                rows,
                cols,
                k,
                1 - seat,
                empties - 1,
                code + (seat + 1) * pow3[cell],
                -BIG,
                -alpha,
                pow3,
                tt,
                flag,
                nodes,
            )
            board[cell] = -1
        if v > best:
            best = v
            move = cell
        if best > alpha:
            alpha = best
    return best, move


# ---- depth-limited alpha-beta with a heuristic, for boards exact search cannot finish


@njit(cache=True)
def evaluate_lines(board: np.ndarray, rows: int, cols: int, k: int, seat: int) -> int:
    """Line-counting evaluation for ``seat``: every length-k window holding only one side's marks
    scores 4**marks for that side (own windows count positive, the opponent's negative)."""
    score = 0
    for d in range(4):
        dr = 0 if d == 0 else 1
        dc = 1 if d == 0 else (0 if d == 1 else (1 if d == 2 else -1))
        for r in range(rows):
            for c in range(cols):
                er = r + dr * (k - 1)
                ec = c + dc * (k - 1)
                if not (0 <= er < rows and 0 <= ec < cols):
                    continue
                mine = 0
                theirs = 0
                for i in range(k):
                    v = board[(r + dr * i) * cols + c + dc * i]
                    if v == seat:
                        mine += 1
                    elif v >= 0:
                        theirs += 1
                if mine > 0 and theirs == 0:
                    score += 4**mine
                elif theirs > 0 and mine == 0:
                    score -= 4**theirs
    return score


@njit(cache=True)
def candidates(board: np.ndarray, rows: int, cols: int, out: np.ndarray) -> int:
    """Empty cells next to a mark (8-neighbourhood), row-major; the centre on an empty board."""
    m = 0
    any_mark = False
    for cell in range(rows * cols):
        if board[cell] >= 0:
            any_mark = True
            continue
        r = cell // cols
        c = cell % cols
        near = False
        for dr in range(-1, 2):
            for dc in range(-1, 2):
                rr = r + dr
                cc = c + dc
                if 0 <= rr < rows and 0 <= cc < cols and board[rr * cols + cc] >= 0:
                    near = True
        if near:
            out[m] = cell
            m += 1
    if not any_mark:
        out[0] = (rows // 2) * cols + cols // 2
        m = 1
    return m


@njit  # not cached: numba's cache of recursive functions crashes on load
def _limited(
    board: np.ndarray,
    rows: int,
    cols: int,
    k: int,
    seat: int,
    empties: int,
    depth: int,
    alpha: int,
    beta: int,
    nodes: np.ndarray,
) -> int:
    nodes[0] += 1
    if empties == 0:
        return 0
    if depth == 0:
        return evaluate_lines(board, rows, cols, k, seat)
    moves = np.empty(rows * cols, dtype=np.int64)
    m = candidates(board, rows, cols, moves)
    best = -BIG * 10
    for i in range(m):
        cell = moves[i]
        if wins_through(board, rows, cols, k, cell, seat):
            return BIG + empties
        board[cell] = seat
        v = -_limited(board, rows, cols, k, 1 - seat, empties - 1, depth - 1, -beta, -alpha, nodes)
        board[cell] = -1
        if v > best:
            best = v
        if best > alpha:
            alpha = best
        if alpha >= beta:
            break
    return best


@njit  # not cached: numba's cache of recursive functions crashes on load
def limited_root(board: np.ndarray, rows: int, cols: int, k: int, seat: int, depth: int, nodes: np.ndarray) -> int:
    """Depth-limited alpha-beta: a win in one, else a forced block, else the best candidate."""
    cell = threat_move(board, rows, cols, k, seat)
    if cell >= 0:
        return cell
    empties = 0
    for i in range(rows * cols):
        if board[i] < 0:
            empties += 1
    moves = np.empty(rows * cols, dtype=np.int64)
    m = candidates(board, rows, cols, moves)
    best = -BIG * 10
    move = moves[0]
    alpha = -BIG * 10
    for i in range(m):
        cell = moves[i]
        board[cell] = seat
        v = -_limited(board, rows, cols, k, 1 - seat, empties - 1, depth - 1, -BIG * 10, -alpha, nodes)
        board[cell] = -1
        if v > best:
            best = v
            move = cell
        if best > alpha:
            alpha = best
    return int(move)
