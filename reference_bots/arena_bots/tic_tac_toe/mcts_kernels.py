"""numba kernels of Monte Carlo tree search with UCT for the m,n,k-game.

The tree lives in preallocated arrays (:class:`Tree` in :mod:`arena_bots.tic_tac_toe.mcts`
owns them) so that Python can run the search in chunks and stop on a clock.
Node ``i`` records the seat that moved into it, its visits and the reward that
seat collected (1 a win, ``draw_reward`` a draw, 0 a loss); its children are a
block of edges, one per empty cell, created lazily: an untried edge is taken
before any UCT choice (the spec's "expand every child, visit unvisited ones
first"), the first untried one in row-major order or a random one. Selection
maximises ``w/n + c * sqrt(ln N / n)``. When the arrays are full the search
stops growing the tree and keeps playing out from the leaves.

Playouts are uniformly random, or with ``policy = 1`` take a win in one, else
block the opponent's win in one, else random.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from arena_bots.numba_helpers import rand_below
from arena_bots.tic_tac_toe.mnk_kernels import wins_through

# meta: [nodes used, edges used, rows, cols, k, policy, first_untried(0/1), root seat, near, threats(0/1)]
NEXT_NODE, NEXT_EDGE, ROWS, COLS, K, POLICY, ORDERED, ROOT_SEAT, NEAR, THREATS = range(10)
NOT_TERMINAL = -1
DRAW = 2


@njit(cache=True)
def _near_mark(state: np.ndarray, rows: int, cols: int, cell: int, d: int) -> bool:
    r0 = cell // cols
    c0 = cell % cols
    for r in range(max(0, r0 - d), min(rows, r0 + d + 1)):
        for c in range(max(0, c0 - d), min(cols, c0 + d + 1)):
            if state[r * cols + c] >= 0:
                return True
    return False


@njit(cache=True)
def _forced(state: np.ndarray, rows: int, cols: int, k: int, empties: np.ndarray, n_empty: int, seat: int) -> int:
    """``seat``'s win in one, else its block of the opponent's win in one, else -1."""
    block = -1
    for i in range(n_empty):
        cell = empties[i]
        if wins_through(state, rows, cols, k, cell, seat):
            return int(cell)
        if block < 0 and wins_through(state, rows, cols, k, cell, 1 - seat):
            block = cell
    return block


@njit(cache=True)
def _open_node(
    state: np.ndarray,
    node: int,
    mover: int,
    terminal: int,
    empties: np.ndarray,
    n_empty: int,
    meta: np.ndarray,
    visits: np.ndarray,
    wins: np.ndarray,
    edge_start: np.ndarray,
    n_edges: np.ndarray,
    n_tried: np.ndarray,
    term: np.ndarray,
    movers: np.ndarray,
    edge_move: np.ndarray,
    edge_child: np.ndarray,
) -> bool:
    """Initialise ``node``; False if its edge block does not fit (then it is not created).

    Its edges are the empty cells, or with ``meta[NEAR] = d > 0`` only those within d cells of a
    mark (the centre on an empty board). With ``meta[THREATS] = 1`` a node whose player to move can
    win in one, or must block the opponent's win in one, gets that single edge.
    """
    e0 = meta[NEXT_EDGE]
    forced = -1
    if terminal == NOT_TERMINAL and meta[THREATS] == 1:
        forced = _forced(state, meta[ROWS], meta[COLS], meta[K], empties, n_empty, 1 - mover)
    if terminal != NOT_TERMINAL:
        order = empties[:0]
    elif forced >= 0:
        order = np.full(1, forced, dtype=np.int64)
    elif meta[NEAR] > 0:
        rows = meta[ROWS]
        cols = meta[COLS]
        keep = np.empty(n_empty, dtype=np.int64)
        m = 0
        for i in range(n_empty):
            if _near_mark(state, rows, cols, empties[i], meta[NEAR]):
                keep[m] = empties[i]
                m += 1
        if m == 0:
            keep[0] = (rows // 2) * cols + cols // 2
            if state[keep[0]] >= 0:
                keep[0] = empties[0]
            m = 1
        order = np.sort(keep[:m]) if meta[ORDERED] == 1 else keep[:m]
    else:
        order = np.sort(empties[:n_empty]) if meta[ORDERED] == 1 else empties[:n_empty]
    count = order.size
    if e0 + count > edge_move.size:
        return False
    for i in range(count):
        edge_move[e0 + i] = order[i]
        edge_child[e0 + i] = -1
    meta[NEXT_EDGE] = e0 + count
    visits[node] = 0
    wins[node] = 0.0
    edge_start[node] = e0
    n_edges[node] = count
    n_tried[node] = 0
    term[node] = terminal
    movers[node] = mover
    return True


@njit(cache=True)
def reset_tree(
    board: np.ndarray,
    seat: int,
    meta: np.ndarray,
    visits: np.ndarray,
    wins: np.ndarray,
    edge_start: np.ndarray,
    n_edges: np.ndarray,
    n_tried: np.ndarray,
    term: np.ndarray,
    movers: np.ndarray,
    edge_move: np.ndarray,
    edge_child: np.ndarray,
) -> None:
    """Make a one-node tree for ``seat`` to move on ``board``."""
    empties = np.flatnonzero(board < 0).astype(np.int64)
    meta[NEXT_NODE] = 1
    meta[NEXT_EDGE] = 0
    meta[ROOT_SEAT] = seat
    _open_node(
        board,
        0,
        1 - seat,
        NOT_TERMINAL,
        empties,
        empties.size,
        meta,
        visits,
        wins,
        edge_start,
        n_edges,
        n_tried,
        term,
        movers,
        edge_move,
        edge_child,
    )


@njit(cache=True)
def _remove(empties: np.ndarray, n_empty: int, cell: int) -> int:
    for i in range(n_empty):
        if empties[i] == cell:
            empties[i] = empties[n_empty - 1]
            empties[n_empty - 1] = cell
            return n_empty - 1
    return n_empty


@njit(cache=True)
def _local_win(state: np.ndarray, rows: int, cols: int, k: int, through: int, seat: int) -> int:
    """An empty cell within k-1 of ``through`` on one of its four lines where ``seat`` would win, or -1."""
    r0 = through // cols
    c0 = through % cols
    for d in range(4):
        dr = 0 if d == 0 else 1
        dc = 1 if d == 0 else (0 if d == 1 else (1 if d == 2 else -1))
        for s in range(-(k - 1), k):
            r = r0 + dr * s
            c = c0 + dc * s
            if 0 <= r < rows and 0 <= c < cols:
                cell = r * cols + c
                if state[cell] < 0 and wins_through(state, rows, cols, k, cell, seat):
                    return cell
    return -1


@njit(cache=True)
def _playout(
    state: np.ndarray,
    empties: np.ndarray,
    n_empty: int,
    seat: int,
    rows: int,
    cols: int,
    k: int,
    policy: int,
    rng: np.ndarray,
) -> int:
    """Play to the end from ``state`` with ``seat`` to move: the winning seat, or DRAW.

    With ``policy = 1`` a side wins in one if it can through its own previous move, else blocks a win
    in one through the opponent's previous move (a local check, O(k**2) a step), else plays randomly.
    """
    last_own = -1
    last_opp = -1
    while n_empty > 0:
        cell = -1
        if policy == 1 and last_own >= 0:
            cell = _local_win(state, rows, cols, k, last_own, seat)
            if cell < 0 and last_opp >= 0:
                cell = _local_win(state, rows, cols, k, last_opp, 1 - seat)
        if cell >= 0:
            n_empty = _remove(empties, n_empty, cell)
        else:
            i = rand_below(rng, 0, n_empty)
            cell = empties[i]
            empties[i] = empties[n_empty - 1]
            empties[n_empty - 1] = cell
            n_empty -= 1
        if wins_through(state, rows, cols, k, cell, seat):
            return seat
        state[cell] = seat
        seat = 1 - seat
        last_own, last_opp = last_opp, cell
    return DRAW


@njit(cache=True, nogil=True)  # the server runs the search on a thread, beside its event loop
def search(
    board: np.ndarray,
    iterations: int,
    c: float,
    draw_reward: float,
    rng: np.ndarray,
    meta: np.ndarray,
    visits: np.ndarray,
    wins: np.ndarray,
    edge_start: np.ndarray,
    n_edges: np.ndarray,
    n_tried: np.ndarray,
    term: np.ndarray,
    movers: np.ndarray,
    edge_move: np.ndarray,
    edge_child: np.ndarray,
) -> None:
    """Run ``iterations`` more select-expand-playout-backpropagate rounds on the tree in the arrays."""
    rows = meta[ROWS]
    cols = meta[COLS]
    k = meta[K]
    policy = meta[POLICY]
    ordered = meta[ORDERED] == 1
    root_empties = np.flatnonzero(board < 0).astype(np.int64)
    empties = np.empty(board.size, dtype=np.int64)
    path = np.empty(board.size + 2, dtype=np.int64)
    state = np.empty_like(board)
    for _ in range(iterations):
        state[:] = board
        n_empty = root_empties.size
        empties[:n_empty] = root_empties
        node = 0
        depth = 0
        path[depth] = 0
        depth += 1
        result = NOT_TERMINAL
        while True:
            if term[node] != NOT_TERMINAL:
                result = term[node]
                break
            seat = 1 - movers[node]
            e0 = edge_start[node]
            if n_tried[node] < n_edges[node]:
                j = e0 + n_tried[node]
                if not ordered:
                    j += rand_below(rng, 0, n_edges[node] - n_tried[node])
                cell = edge_move[j]
                win = wins_through(state, rows, cols, k, cell, seat)
                state[cell] = seat
                n_empty = _remove(empties, n_empty, cell)
                terminal = seat if win else (DRAW if n_empty == 0 else NOT_TERMINAL)
                child = meta[NEXT_NODE]
                if child < visits.size and _open_node(
                    state,
                    child,
                    seat,
                    terminal,
                    empties,
                    n_empty,
                    meta,
                    visits,
                    wins,
                    edge_start,
                    n_edges,
                    n_tried,
                    term,
                    movers,
                    edge_move,
                    edge_child,
                ):
                    meta[NEXT_NODE] = child + 1
                    t = e0 + n_tried[node]
                    edge_move[j] = edge_move[t]
                    edge_move[t] = cell
                    edge_child[t] = child
                    n_tried[node] += 1
                    path[depth] = child
                    depth += 1
                    result = (
                        terminal
                        if terminal != NOT_TERMINAL
                        else _playout(state, empties, n_empty, 1 - seat, rows, cols, k, policy, rng)
                    )
                else:  # the arrays are full: play out without growing the tree
                    result = (
                        terminal
                        if terminal != NOT_TERMINAL
                        else _playout(state, empties, n_empty, 1 - seat, rows, cols, k, policy, rng)
                    )
                break
            # every child tried: UCT
            log_n = math.log(max(visits[node], 1))
            best = -1.0
            pick = e0
            for e in range(e0, e0 + n_edges[node]):
                ch = edge_child[e]
                n = visits[ch]
                u = wins[ch] / n + c * math.sqrt(log_n / n)
                if u > best:
                    best = u
                    pick = e
            cell = edge_move[pick]
            state[cell] = seat
            n_empty = _remove(empties, n_empty, cell)
            node = edge_child[pick]
            path[depth] = node
            depth += 1
        for i in range(depth):
            nd = path[i]
            visits[nd] += 1
            if result == movers[nd]:
                wins[nd] += 1.0
            elif result == DRAW:
                wins[nd] += draw_reward


@njit(cache=True)
def best_root_move(
    visits: np.ndarray,
    edge_start: np.ndarray,
    n_edges: np.ndarray,
    n_tried: np.ndarray,
    edge_move: np.ndarray,
    edge_child: np.ndarray,
) -> int:
    """The root child with the most visits (the first such in edge order), or -1 if none was tried."""
    best = -1
    move = -1
    for e in range(edge_start[0], edge_start[0] + n_tried[0]):
        n = visits[edge_child[e]]
        if n > best:
            best = n
            move = edge_move[e]
    return move


@njit(cache=True, nogil=True)  # the server runs it on a thread, beside its event loop
def flat_mc_move(
    board: np.ndarray,
    rows: int,
    cols: int,
    k: int,
    seat: int,
    per_candidate: int,
    rng: np.ndarray,
    scores: np.ndarray,
) -> int:
    """Flat Monte Carlo (the lab's Pure MC on the m,n,k win test): ``per_candidate`` random playouts
    per empty cell, score = playouts ``seat`` wins, the first best cell in row-major order."""
    best = -1
    move = -1
    empties = np.empty(board.size, dtype=np.int64)
    for cell in range(board.size):
        scores[cell] = -1
        if board[cell] >= 0:
            continue
        if wins_through(board, rows, cols, k, cell, seat):
            w = per_candidate
        else:
            w = 0
            for _ in range(per_candidate):
                state = board.copy()
                state[cell] = seat
                n_empty = 0
                for i in range(board.size):
                    if state[i] < 0:
                        empties[n_empty] = i
                        n_empty += 1
                if _playout(state, empties, n_empty, 1 - seat, rows, cols, k, 0, rng) == seat:
                    w += 1
        scores[cell] = w
        if w > best:
            best = w
            move = cell
    return move
