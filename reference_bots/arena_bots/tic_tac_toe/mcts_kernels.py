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
from arena_bots.tic_tac_toe.mnk_kernels import winning_cell, wins_through

# meta: [nodes used, edges used, rows, cols, k, policy, first_untried(0/1), root seat to move]
NEXT_NODE, NEXT_EDGE, ROWS, COLS, K, POLICY, ORDERED, ROOT_SEAT = range(8)
NOT_TERMINAL = -1
DRAW = 2


@njit(cache=True)
def _open_node(
    node: int, mover: int, terminal: int, empties: np.ndarray, n_empty: int, meta: np.ndarray,
    visits: np.ndarray, wins: np.ndarray, edge_start: np.ndarray, n_edges: np.ndarray, n_tried: np.ndarray,
    term: np.ndarray, movers: np.ndarray, edge_move: np.ndarray, edge_child: np.ndarray,
) -> bool:
    """Initialise ``node``; False if its edge block does not fit (then it is not created)."""
    e0 = meta[NEXT_EDGE]
    count = n_empty if terminal == NOT_TERMINAL else 0
    if e0 + count > edge_move.size:
        return False
    # edges in row-major order
    order = np.sort(empties[:n_empty]) if meta[ORDERED] == 1 else empties[:n_empty]
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
    board: np.ndarray, seat: int, meta: np.ndarray, visits: np.ndarray, wins: np.ndarray, edge_start: np.ndarray,
    n_edges: np.ndarray, n_tried: np.ndarray, term: np.ndarray, movers: np.ndarray, edge_move: np.ndarray,
    edge_child: np.ndarray,
) -> None:
    """Make a one-node tree for ``seat`` to move on ``board``."""
    empties = np.flatnonzero(board < 0).astype(np.int64)
    meta[NEXT_NODE] = 1
    meta[NEXT_EDGE] = 0
    meta[ROOT_SEAT] = seat
    _open_node(
        0, 1 - seat, NOT_TERMINAL, empties, empties.size, meta, visits, wins, edge_start, n_edges, n_tried, term,
        movers, edge_move, edge_child,
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
def _playout(
    state: np.ndarray, empties: np.ndarray, n_empty: int, seat: int, rows: int, cols: int, k: int, policy: int,
    rng: np.ndarray,
) -> int:
    """Play to the end from ``state`` with ``seat`` to move: the winning seat, or DRAW."""
    while n_empty > 0:
        cell = -1
        if policy == 1:
            cell = winning_cell(state, rows, cols, k, seat)
            if cell < 0:
                cell = winning_cell(state, rows, cols, k, 1 - seat)
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
    return DRAW


@njit(cache=True)
def search(
    board: np.ndarray, iterations: int, c: float, draw_reward: float, rng: np.ndarray, meta: np.ndarray,
    visits: np.ndarray, wins: np.ndarray, edge_start: np.ndarray, n_edges: np.ndarray, n_tried: np.ndarray,
    term: np.ndarray, movers: np.ndarray, edge_move: np.ndarray, edge_child: np.ndarray,
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
    for _ in range(iterations):
        state = board.copy()
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
                    child, seat, terminal, empties, n_empty, meta, visits, wins, edge_start, n_edges, n_tried,
                    term, movers, edge_move, edge_child,
                ):
                    meta[NEXT_NODE] = child + 1
                    t = e0 + n_tried[node]
                    edge_move[j] = edge_move[t]
                    edge_move[t] = cell
                    edge_child[t] = child
                    n_tried[node] += 1
                    path[depth] = child
                    depth += 1
                    result = terminal if terminal != NOT_TERMINAL else _playout(
                        state, empties, n_empty, 1 - seat, rows, cols, k, policy, rng
                    )
                else:  # the arrays are full: play out without growing the tree
                    result = terminal if terminal != NOT_TERMINAL else _playout(
                        state, empties, n_empty, 1 - seat, rows, cols, k, policy, rng
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
def best_root_move(visits: np.ndarray, edge_start: np.ndarray, n_edges: np.ndarray, n_tried: np.ndarray,
                   edge_move: np.ndarray, edge_child: np.ndarray) -> int:
    """The root child with the most visits (the first such in edge order), or -1 if none was tried."""
    best = -1
    move = -1
    for e in range(edge_start[0], edge_start[0] + n_tried[0]):
        n = visits[edge_child[e]]
        if n > best:
            best = n
            move = edge_move[e]
    return move
