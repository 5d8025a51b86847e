"""numba kernels for the dots and boxes bots: rules, greedy, networks, chains, retrograde solver, MCTS.

A position is two arrays: ``edges`` (uint8, one flag per edge in the engine's
numbering, 1 = drawn) and ``sides`` (int8, drawn sides per box). The geometry
is ``edge_boxes`` (int64 [E, 2], the one or two boxes of an edge, -1 padded)
and ``box_edges`` (int64 [B, 4]); see :mod:`arena_bots.dots_and_boxes.board`.
Random draws use the per-agent xorshift streams of :mod:`arena_bots.numba_helpers`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from arena_bots.numba_helpers import rand_below, rand_unit

# ---------------------------------------------------------------- rules


@njit(cache=True)
def apply_edge(edges: np.ndarray, sides: np.ndarray, edge_boxes: np.ndarray, e: int) -> int:
    """Draw edge ``e``; returns the number of boxes it closed (0, 1 or 2)."""
    edges[e] = 1
    closed = 0
    for j in range(2):
        b = edge_boxes[e, j]
        if b >= 0:
            sides[b] += 1
            if sides[b] == 4:
                closed += 1
    return closed


@njit(cache=True)
def undo_edge(edges: np.ndarray, sides: np.ndarray, edge_boxes: np.ndarray, e: int) -> None:
    """Undraw edge ``e`` (the inverse of :func:`apply_edge`)."""
    edges[e] = 0
    for j in range(2):
        b = edge_boxes[e, j]
        if b >= 0:
            sides[b] -= 1


@njit(cache=True)
def missing_edge(edges: np.ndarray, box_edges: np.ndarray, b: int) -> int:
    """The first undrawn edge of box ``b`` (-1 if it is complete)."""
    for k in range(4):
        if edges[box_edges[b, k]] == 0:
            return int(box_edges[b, k])
    return -1


@njit(cache=True)
def capture_all(edges: np.ndarray, sides: np.ndarray, edge_boxes: np.ndarray, box_edges: np.ndarray) -> int:
    """Greedily draw the fourth side of three-sided boxes until none is left; returns the boxes taken.

    The set of boxes taken does not depend on the order (a three-sided box stays capturable).
    """
    taken = 0
    found = True
    while found:
        found = False
        for b in range(sides.shape[0]):
            if sides[b] == 3:
                taken += apply_edge(edges, sides, edge_boxes, missing_edge(edges, box_edges, b))
                found = True
    return taken


@njit(cache=True)
def random_free_edge(edges: np.ndarray, rng: np.ndarray, stream: int) -> int:
    """A uniformly random undrawn edge (-1 when none)."""
    n = 0
    for e in range(edges.shape[0]):
        if edges[e] == 0:
            n += 1
    if n == 0:
        return -1
    k = rand_below(rng, stream, n)
    for e in range(edges.shape[0]):
        if edges[e] == 0:
            if k == 0:
                return e
            k -= 1
    return -1


# ---------------------------------------------------------------- greedy (spec 7)


@njit(cache=True)
def greedy_move(edges: np.ndarray, sides: np.ndarray, box_edges: np.ndarray, rng: np.ndarray, stream: int) -> int:
    """The thesis's opponent: the fourth side of the first three-sided box (row-major), else a random edge."""
    for b in range(sides.shape[0]):
        if sides[b] == 3:
            return missing_edge(edges, box_edges, b)
    return random_free_edge(edges, rng, stream)


# ---------------------------------------------------------------- networks (spec 4)

REP_THESIS = 0
REP_FEATURES = 1
SHARED_FEATURES = 5
MOVE_FEATURES = 5


@njit(cache=True)
def _sigmoid(x: float) -> float:
    if x < -40.0:
        return 0.0
    return float(1.0 / (1.0 + np.exp(-x)))


@njit(cache=True)
def given_after(
    edges: np.ndarray,
    sides: np.ndarray,
    edge_boxes: np.ndarray,
    box_edges: np.ndarray,
    e: int,
    scratch_e: np.ndarray,
    scratch_s: np.ndarray,
) -> int:
    """Boxes the opponent can then take in a row if the mover draws ``e`` and it closes nothing."""
    scratch_e[:] = edges
    scratch_s[:] = sides
    apply_edge(scratch_e, scratch_s, edge_boxes, e)
    return capture_all(scratch_e, scratch_s, edge_boxes, box_edges)


@njit(cache=True)
def shared_inputs(rep: int, edges: np.ndarray, sides: np.ndarray, margin: int, out: np.ndarray) -> int:
    """Fill the move-independent inputs; returns their count."""
    E = edges.shape[0]
    B = sides.shape[0]
    if rep == REP_THESIS:
        for e in range(E):
            out[e] = edges[e]
        return int(E)
    drawn = 0
    for e in range(E):
        drawn += edges[e]
    c2 = 0
    c3 = 0
    for b in range(B):
        if sides[b] == 2:
            c2 += 1
        elif sides[b] == 3:
            c3 += 1
    out[0] = margin / B
    out[1] = drawn / E
    out[2] = c2 / B
    out[3] = c3 / B
    out[4] = 1.0
    return SHARED_FEATURES


@njit(cache=True)
def move_inputs(
    rep: int,
    edges: np.ndarray,
    sides: np.ndarray,
    edge_boxes: np.ndarray,
    box_edges: np.ndarray,
    e: int,
    out: np.ndarray,
    scratch_e: np.ndarray,
    scratch_s: np.ndarray,
) -> int:
    """Fill the inputs describing candidate edge ``e``; returns their count."""
    E = edges.shape[0]
    B = sides.shape[0]
    if rep == REP_THESIS:
        for k in range(E):
            out[k] = 0.0
        out[e] = 1.0
        return int(E)
    closes = 0
    thirds = 0
    border = 1.0
    for j in range(2):
        b = edge_boxes[e, j]
        if b >= 0:
            if j == 1:
                border = 0.0
            if sides[b] == 3:
                closes += 1
            elif sides[b] == 2:
                thirds += 1
    given = 0
    if closes == 0 and thirds > 0:
        given = given_after(edges, sides, edge_boxes, box_edges, e, scratch_e, scratch_s)
    out[0] = closes / 2.0
    out[1] = thirds / 2.0
    out[2] = given / B
    out[3] = border
    out[4] = 1.0 if given >= 3 else 0.0
    return MOVE_FEATURES


@njit(cache=True)
def net_move(
    rep: int,
    sizes: np.ndarray,
    weights: np.ndarray,
    edges: np.ndarray,
    sides: np.ndarray,
    edge_boxes: np.ndarray,
    box_edges: np.ndarray,
    margin: int,
    rng: np.ndarray,
    stream: int,
) -> int:
    """The thesis's individual: score every legal edge with the network, play the best (random ties).

    ``sizes`` = [inputs, hidden..., 1]; ``weights`` holds, layer by layer, the
    row-major matrix (out x in) then the biases. The first layer's product with
    the move-independent inputs is computed once per position.
    """
    E = edges.shape[0]
    L = sizes.shape[0] - 1
    width = 0
    for k in range(sizes.shape[0]):
        width = max(width, sizes[k])
    shared = np.empty(sizes[0], np.float64)
    n_shared = shared_inputs(rep, edges, sides, margin, shared)
    h1 = sizes[1]
    n_in = sizes[0]
    base = np.empty(h1, np.float64)
    for i in range(h1):
        acc = weights[h1 * n_in + i]
        for k in range(n_shared):
            if shared[k] != 0.0:
                acc += weights[i * n_in + k] * shared[k]
        base[i] = acc
    move = np.empty(n_in, np.float64)
    scratch_e = np.empty_like(edges)
    scratch_s = np.empty_like(sides)
    a = np.empty(width, np.float64)
    z = np.empty(width, np.float64)
    best = -1.0
    pick = -1
    ties = 0
    for e in range(E):
        if edges[e] != 0:
            continue
        n_move = move_inputs(rep, edges, sides, edge_boxes, box_edges, e, move, scratch_e, scratch_s)
        for i in range(h1):
            acc = base[i]
            for k in range(n_move):
                if move[k] != 0.0:
                    acc += weights[i * n_in + n_shared + k] * move[k]
            a[i] = _sigmoid(acc)
        off = h1 * n_in + h1
        for layer in range(1, L):
            n_i = sizes[layer]
            n_o = sizes[layer + 1]
            for o in range(n_o):
                acc = weights[off + n_o * n_i + o]
                for k in range(n_i):
                    acc += weights[off + o * n_i + k] * a[k]
                z[o] = _sigmoid(acc)
            off += n_o * n_i + n_o
            for o in range(n_o):
                a[o] = z[o]
        v = a[0]
        if v > best:
            best = v
            pick = e
            ties = 1
        elif v == best:
            ties += 1
            if rand_below(rng, stream, ties) == 0:
                pick = e
    return pick


# ---------------------------------------------------------------- chains


@njit(cache=True)
def _is_safe(sides: np.ndarray, edge_boxes: np.ndarray, e: int) -> bool:
    for j in range(2):
        b = edge_boxes[e, j]
        if b >= 0 and sides[b] >= 2:
            return False
    return True


@njit(cache=True)
def _closes(sides: np.ndarray, edge_boxes: np.ndarray, e: int) -> bool:
    for j in range(2):
        b = edge_boxes[e, j]
        if b >= 0 and sides[b] == 3:
            return True
    return False


@njit(cache=True)
def count_safe(edges: np.ndarray, sides: np.ndarray, edge_boxes: np.ndarray) -> int:
    n = 0
    for e in range(edges.shape[0]):
        if edges[e] == 0 and _is_safe(sides, edge_boxes, e):
            n += 1
    return n


@njit(cache=True)
def largest_sacrifice(edges: np.ndarray, sides: np.ndarray, edge_boxes: np.ndarray, box_edges: np.ndarray) -> int:
    """The most boxes any single move would hand over (the largest chain or loop on the board)."""
    se = np.empty_like(edges)
    ss = np.empty_like(sides)
    most = 0
    for e in range(edges.shape[0]):
        if edges[e] == 0:
            g = given_after(edges, sides, edge_boxes, box_edges, e, se, ss)
            if g > most:
                most = g
    return most


@njit(cache=True)
def _other_box(edge_boxes: np.ndarray, e: int, b: int) -> int:
    if edge_boxes[e, 0] == b:
        return int(edge_boxes[e, 1])
    return int(edge_boxes[e, 0])


@njit(cache=True)
def _other_missing(edges: np.ndarray, box_edges: np.ndarray, b: int, e: int) -> int:
    for k in range(4):
        f = box_edges[b, k]
        if f != e and edges[f] == 0:
            return int(f)
    return -1


@njit(cache=True)
def double_deal_edge(edges: np.ndarray, sides: np.ndarray, edge_boxes: np.ndarray, box_edges: np.ndarray) -> int:
    """The move declining the last two boxes of a chain (or four of a loop), or -1 if there is none.

    Chain: a three-sided box b whose missing edge leads to a two-sided box c;
    drawing c's other edge (when it hands over nothing else) leaves b and c for
    the opponent, who must then move again. Loop: two two-sided neighbours x, y
    each also next to a three-sided box; drawing the edge x|y leaves two dominoes.
    """
    for b in range(sides.shape[0]):
        if sides[b] != 3:
            continue
        e = missing_edge(edges, box_edges, b)
        c = _other_box(edge_boxes, e, b)
        if c < 0 or sides[c] != 2:
            continue
        f = _other_missing(edges, box_edges, c, e)
        d = _other_box(edge_boxes, f, c)
        if d < 0 or sides[d] <= 1:
            return f
        if sides[d] == 2:
            # loop: d's other edge must lead to a three-sided box
            g = _other_missing(edges, box_edges, d, f)
            h = _other_box(edge_boxes, g, d)
            if h >= 0 and sides[h] == 3 and h != b:
                return f
    return -1


MEMO_BITS = 15


@njit(cache=True)
def _memo_get(keys: np.ndarray, vals: np.ndarray, key: np.int64) -> int:
    mask = keys.shape[0] - 1
    h = (key * np.int64(0x9E3779B97F4A7C15)) >> np.int64(40)
    for probe in range(32):
        i = (h + probe) & mask
        if keys[i] == key:
            return int(vals[i])
        if keys[i] == -1:
            return -9
    return -9


@njit(cache=True)
def _memo_put(keys: np.ndarray, vals: np.ndarray, key: np.int64, v: int) -> None:
    mask = keys.shape[0] - 1
    h = (key * np.int64(0x9E3779B97F4A7C15)) >> np.int64(40)
    for probe in range(32):
        i = (h + probe) & mask
        if keys[i] == -1 or keys[i] == key:
            keys[i] = key
            vals[i] = v
            return


@njit(cache=True)
def safe_game_value(
    edges: np.ndarray,
    sides: np.ndarray,
    edge_boxes: np.ndarray,
    box_edges: np.ndarray,
    keys: np.ndarray,
    vals: np.ndarray,
) -> int:
    """The game of safe moves, searched to the end (iterative negamax, memo in keys/vals).

    +1 if the player to move can make the opponent the first player without a
    safe move while a chain of 3+ boxes is on the board (the long-chain rule),
    -1 if the opponent can do that to the mover, 0 if no long chain remains.
    The position is restored on return.
    """
    E = edges.shape[0]
    played = np.empty(E + 1, np.int64)
    nxt = np.zeros(E + 1, np.int64)
    best = np.empty(E + 1, np.int64)
    anysafe = np.zeros(E + 1, np.bool_)
    key = np.int64(0)
    for e in range(E):
        if edges[e] != 0:
            key |= np.int64(1) << np.int64(e)
    d = 0
    nxt[0] = 0
    best[0] = -2
    anysafe[0] = False
    while True:
        found = -1
        if best[d] < 1:
            for e in range(nxt[d], E):
                if edges[e] == 0 and _is_safe(sides, edge_boxes, e):
                    found = e
                    break
        if found >= 0:
            nxt[d] = found + 1
            anysafe[d] = True
            child_key = key | (np.int64(1) << np.int64(found))
            hit = _memo_get(keys, vals, child_key)
            if hit != -9:
                if -hit > best[d]:
                    best[d] = -hit
                continue
            apply_edge(edges, sides, edge_boxes, found)
            key = child_key
            d += 1
            played[d] = found
            nxt[d] = 0
            best[d] = -2
            anysafe[d] = False
            continue
        value = best[d]
        if not anysafe[d]:
            value = -1 if largest_sacrifice(edges, sides, edge_boxes, box_edges) >= 3 else 0
        _memo_put(keys, vals, key, value)
        if d == 0:
            return int(value)
        e = played[d]
        undo_edge(edges, sides, edge_boxes, e)
        key &= ~(np.int64(1) << np.int64(e))
        d -= 1
        if -value > best[d]:
            best[d] = -value


@njit(cache=True, nogil=True)  # the server runs it on a thread, beside its event loop
def chains_move(
    edges: np.ndarray,
    sides: np.ndarray,
    edge_boxes: np.ndarray,
    box_edges: np.ndarray,
    rng: np.ndarray,
    stream: int,
    parity_limit: int,
) -> int:
    """The chain-aware heuristic (see :mod:`arena_bots.dots_and_boxes.bots`)."""
    E = edges.shape[0]
    se = np.empty_like(edges)
    ss = np.empty_like(sides)
    n3 = 0
    for b in range(sides.shape[0]):
        if sides[b] == 3:
            n3 += 1
    if n3 > 0:
        se[:] = edges
        ss[:] = sides
        total = capture_all(se, ss, edge_boxes, box_edges)
        endgame = count_safe(se, ss, edge_boxes) == 0 and largest_sacrifice(se, ss, edge_boxes, box_edges) >= 3
        if endgame and (total == 2 or total == 4):
            dd = double_deal_edge(edges, sides, edge_boxes, box_edges)
            if dd >= 0:
                return dd
        if endgame:
            # take independent boxes first so the chain's last two stay together for the double deal
            for b in range(sides.shape[0]):
                if sides[b] == 3:
                    e = missing_edge(edges, box_edges, b)
                    c = _other_box(edge_boxes, e, b)
                    if c < 0 or sides[c] != 2:
                        return e
        for b in range(sides.shape[0]):
            if sides[b] == 3:
                return missing_edge(edges, box_edges, b)
    n_safe = count_safe(edges, sides, edge_boxes)
    if n_safe > 0:
        if n_safe <= parity_limit and E <= 63:
            keys = np.full(1 << MEMO_BITS, -1, np.int64)
            vals = np.zeros(1 << MEMO_BITS, np.int8)
            cand = np.empty(E, np.int64)
            nc = 0
            for e in range(E):
                if edges[e] == 0 and _is_safe(sides, edge_boxes, e):
                    apply_edge(edges, sides, edge_boxes, e)
                    v = -safe_game_value(edges, sides, edge_boxes, box_edges, keys, vals)
                    undo_edge(edges, sides, edge_boxes, e)
                    if v == 1:
                        cand[nc] = e
                        nc += 1
            if nc > 0:
                return int(cand[rand_below(rng, stream, nc)])
        k = rand_below(rng, stream, n_safe)
        for e in range(E):
            if edges[e] == 0 and _is_safe(sides, edge_boxes, e):
                if k == 0:
                    return e
                k -= 1
    # every move hands something over: give the fewest boxes
    best = 1 << 30
    pick = -1
    ties = 0
    for e in range(E):
        if edges[e] == 0:
            g = given_after(edges, sides, edge_boxes, box_edges, e, se, ss)
            if g < best:
                best = g
                pick = e
                ties = 1
            elif g == best:
                ties += 1
                if rand_below(rng, stream, ties) == 0:
                    pick = e
    return pick


# ---------------------------------------------------------------- retrograde solver


@njit(cache=True, nogil=True)
def retrograde(k: int, free: np.ndarray, local_box_masks: np.ndarray, edge_local_boxes: np.ndarray) -> np.ndarray:
    """value[m] for every subset m of the k free edges (bit i = free[i] drawn).

    value[m] is the best future box margin of the player to move (Barker and
    Korf's observation: the score so far never changes the best move, so
    positions are keyed by the drawn edges only). ``local_box_masks[b]`` is the
    bit set of box b's free edges; ``edge_local_boxes[i]`` the boxes of free
    edge i (-1 padded). Filled from the full set downwards.
    """
    full = (np.int64(1) << np.int64(k)) - 1
    value = np.zeros(full + 1, np.int8)
    for m in range(full - 1, -1, -1):
        best = -127
        for i in range(k):
            bit = np.int64(1) << np.int64(i)
            if m & bit:
                continue
            new = m | bit
            closed = 0
            for j in range(2):
                b = edge_local_boxes[i, j]
                if b >= 0 and (new & local_box_masks[b]) == local_box_masks[b]:
                    closed += 1
            v = closed + value[new] if closed else -value[new]
            if v > best:
                best = v
        value[m] = best
    return value


@njit(cache=True, nogil=True)  # the server runs it on a thread, beside its event loop
def table_move(
    value: np.ndarray,
    edges: np.ndarray,
    sides: np.ndarray,
    free: np.ndarray,
    edge_boxes: np.ndarray,
    rng: np.ndarray,
    stream: int,
) -> int:
    """The best edge by a retrograde table over ``free`` (random among equally good edges)."""
    k = free.shape[0]
    m = np.int64(0)
    for i in range(k):
        if edges[free[i]] != 0:
            m |= np.int64(1) << np.int64(i)
    best = -1000
    pick = -1
    ties = 0
    for i in range(k):
        bit = np.int64(1) << np.int64(i)
        if m & bit:
            continue
        e = free[i]
        closed = 0
        for j in range(2):
            b = edge_boxes[e, j]
            if b >= 0 and sides[b] == 3:
                closed += 1
        v = closed + value[m | bit] if closed else -value[m | bit]
        if v > best:
            best = v
            pick = e
            ties = 1
        elif v == best:
            ties += 1
            if rand_below(rng, stream, ties) == 0:
                pick = e
    return pick


# ---------------------------------------------------------------- MCTS


@njit(cache=True)
def rollout_move(
    edges: np.ndarray, sides: np.ndarray, edge_boxes: np.ndarray, box_edges: np.ndarray, rng: np.ndarray, stream: int
) -> int:
    """The MCTS playout policy: take a box if one is open, else a random safe edge, else a random edge."""
    for b in range(sides.shape[0]):
        if sides[b] == 3:
            return missing_edge(edges, box_edges, b)
    n = count_safe(edges, sides, edge_boxes)
    if n == 0:
        return random_free_edge(edges, rng, stream)
    k = rand_below(rng, stream, n)
    for e in range(edges.shape[0]):
        if edges[e] == 0 and _is_safe(sides, edge_boxes, e):
            if k == 0:
                return e
            k -= 1
    return -1


@njit(cache=True)
def _rollout(
    edges: np.ndarray,
    sides: np.ndarray,
    edge_boxes: np.ndarray,
    box_edges: np.ndarray,
    player: int,
    score: np.ndarray,
    rng: np.ndarray,
    stream: int,
) -> None:
    """Finish the game with :func:`rollout_move` for both players."""
    while True:
        e = rollout_move(edges, sides, edge_boxes, box_edges, rng, stream)
        if e < 0:
            return
        c = apply_edge(edges, sides, edge_boxes, e)
        if c:
            score[player] += c
        else:
            player = 1 - player


@njit(cache=True, nogil=True)  # the server runs it on a thread, beside its event loop
def mcts_search(
    edges0: np.ndarray,
    sides0: np.ndarray,
    edge_boxes: np.ndarray,
    box_edges: np.ndarray,
    iterations: int,
    child: np.ndarray,
    visits: np.ndarray,
    wins: np.ndarray,
    mover: np.ndarray,
    n_nodes: int,
    c_uct: float,
    rng: np.ndarray,
    stream: int,
) -> int:
    """Run UCT iterations on the tree in (child, visits, wins, mover); returns the new node count.

    Node 0 is the root (the current position, player 0 = the bot). While a
    safe edge exists the tree only considers safe and box-closing edges (early
    sacrifices are almost never right and the pruning makes the search
    useful at 60 edges); in the endgame every edge is a candidate. ``child[n, e]``
    is the node reached by edge e (-1 unexpanded); ``wins[n]`` counts results
    for ``mover[n]``, the player who drew the edge into n: each playout adds
    0.5 + 0.5 * (its box margin) / boxes, in [0, 1] (the margin, not just the
    result, so a box more or less always shows).
    """
    E = edges0.shape[0]
    max_nodes = child.shape[0]
    edges = np.empty_like(edges0)
    sides = np.empty_like(sides0)
    path = np.empty(E + 1, np.int64)
    score = np.zeros(2, np.int64)
    nb = sides0.shape[0]
    allowed = np.zeros(E, np.bool_)
    for _ in range(iterations):
        edges[:] = edges0
        sides[:] = sides0
        score[0] = 0
        score[1] = 0
        node = 0
        player = 0
        depth = 0
        path[0] = 0
        while True:
            # the node's candidate edges: while a safe edge exists, only safe or box-closing edges
            n_free = 0
            prune = count_safe(edges, sides, edge_boxes) > 0
            for e in range(E):
                allowed[e] = False
                if edges[e] == 0:
                    n_free += 1
                    allowed[e] = not prune or _is_safe(sides, edge_boxes, e) or _closes(sides, edge_boxes, e)
            n_untried = 0
            for e in range(E):
                if allowed[e] and child[node, e] < 0:
                    n_untried += 1
            if n_free == 0:
                break
            if n_untried > 0 and n_nodes < max_nodes:
                k = rand_below(rng, stream, n_untried)
                pick = -1
                for e in range(E):
                    if allowed[e] and child[node, e] < 0:
                        if k == 0:
                            pick = e
                            break
                        k -= 1
                new = n_nodes
                n_nodes += 1
                child[new, :] = -1
                visits[new] = 0
                wins[new] = 0.0
                mover[new] = player
                child[node, pick] = new
                c = apply_edge(edges, sides, edge_boxes, pick)
                if c:
                    score[player] += c
                else:
                    player = 1 - player
                node = new
                depth += 1
                path[depth] = node
                break
            # select by UCB1
            best = -1.0
            pick = -1
            log_n = np.log(visits[node] + 1.0)
            for e in range(E):
                if not allowed[e]:
                    continue
                ch = child[node, e]
                if ch < 0:
                    continue
                v = visits[ch]
                u = wins[ch] / v + c_uct * np.sqrt(log_n / v) + 1e-9 * rand_unit(rng, stream)
                if u > best:
                    best = u
                    pick = e
            if pick < 0:
                break
            c = apply_edge(edges, sides, edge_boxes, pick)
            if c:
                score[player] += c
            else:
                player = 1 - player
            node = child[node, pick]
            depth += 1
            path[depth] = node
        _rollout(edges, sides, edge_boxes, box_edges, player, score, rng, stream)
        for d in range(depth + 1):
            n = path[d]
            visits[n] += 1
            who = mover[n]
            wins[n] += 0.5 + 0.5 * (score[who] - score[1 - who]) / nb
    return n_nodes


# ---------------------------------------------------------------- training games

KIND_RANDOM = 0
KIND_GREEDY = 1
KIND_NET = 2
KIND_CHAINS = 3


@njit(cache=True)
def kernel_move(
    kind: int,
    rep: int,
    sizes: np.ndarray,
    weights: np.ndarray,
    edges: np.ndarray,
    sides: np.ndarray,
    edge_boxes: np.ndarray,
    box_edges: np.ndarray,
    margin: int,
    rng: np.ndarray,
    stream: int,
) -> int:
    if kind == KIND_GREEDY:
        return greedy_move(edges, sides, box_edges, rng, stream)
    if kind == KIND_NET:
        return net_move(rep, sizes, weights, edges, sides, edge_boxes, box_edges, margin, rng, stream)
    if kind == KIND_CHAINS:
        return chains_move(edges, sides, edge_boxes, box_edges, rng, stream, 0)
    return random_free_edge(edges, rng, stream)


@njit(cache=True)
def play_game(
    kinds: np.ndarray,
    reps: np.ndarray,
    sizes: np.ndarray,
    w0: np.ndarray,
    w1: np.ndarray,
    n_edges: int,
    n_boxes: int,
    edge_boxes: np.ndarray,
    box_edges: np.ndarray,
    rng: np.ndarray,
) -> int:
    """Play one game between two kernel players (seat 0 moves first); returns seat 0's box margin."""
    edges = np.zeros(n_edges, np.uint8)
    sides = np.zeros(n_boxes, np.int8)
    score = np.zeros(2, np.int64)
    player = 0
    for _ in range(n_edges):
        w = w0 if player == 0 else w1
        e = kernel_move(
            kinds[player],
            reps[player],
            sizes,
            w,
            edges,
            sides,
            edge_boxes,
            box_edges,
            score[player] - score[1 - player],
            rng,
            0,
        )
        c = apply_edge(edges, sides, edge_boxes, e)
        if c:
            score[player] += c
        else:
            player = 1 - player
    return int(score[0] - score[1])


@njit(cache=True)
def round_robin(
    rep: int,
    sizes: np.ndarray,
    population: np.ndarray,
    n_edges: int,
    n_boxes: int,
    edge_boxes: np.ndarray,
    box_edges: np.ndarray,
    rng: np.ndarray,
) -> np.ndarray:
    """The thesis's fitness (spec 5.2): every pair plays twice, each starting once; 2/1/0 points a game."""
    n = population.shape[0]
    fitness = np.zeros(n, np.int64)
    kinds = np.array([KIND_NET, KIND_NET])
    reps = np.array([rep, rep])
    for i in range(n):
        for j in range(i + 1, n):
            for first in range(2):
                a, b = (i, j) if first == 0 else (j, i)
                m = play_game(
                    kinds, reps, sizes, population[a], population[b], n_edges, n_boxes, edge_boxes, box_edges, rng
                )
                if m > 0:
                    fitness[a] += 2
                elif m < 0:
                    fitness[b] += 2
                else:
                    fitness[a] += 1
                    fitness[b] += 1
    return fitness


@njit(cache=True)
def match_vs(
    rep: int,
    sizes: np.ndarray,
    weights: np.ndarray,
    opp_kind: int,
    games: int,
    n_edges: int,
    n_boxes: int,
    edge_boxes: np.ndarray,
    box_edges: np.ndarray,
    rng: np.ndarray,
) -> np.ndarray:
    """``games`` games of a network against a kernel opponent, alternating the first move; returns W, D, L."""
    out = np.zeros(3, np.int64)
    kinds = np.array([KIND_NET, opp_kind])
    reps = np.array([rep, rep])
    kinds_r = np.array([opp_kind, KIND_NET])
    for g in range(games):
        if g % 2 == 0:
            m = play_game(kinds, reps, sizes, weights, weights, n_edges, n_boxes, edge_boxes, box_edges, rng)
        else:
            m = -play_game(kinds_r, reps, sizes, weights, weights, n_edges, n_boxes, edge_boxes, box_edges, rng)
        if m > 0:
            out[0] += 1
        elif m == 0:
            out[1] += 1
        else:
            out[2] += 1
    return out
