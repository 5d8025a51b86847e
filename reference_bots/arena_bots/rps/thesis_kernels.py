"""numba kernels for the RPSLS thesis's agents (Bizjak 2020), on flat arrays.

An *agent* is five arrays ``(H, FP, IS, FS, R)`` built by
:func:`arena_bots.rps.thesis_agents.build_agent`:

* ``H[u, :]`` int64 header of unit ``u`` (kind, signs, order, offsets, the
  last proposal, rounds seen, current key, ...), see the ``C_*`` columns;
* ``FP[u, :]`` float parameters (alpha, gamma, epsilon);
* ``IS`` int64 state: the payoff table and the counter table at offset 0
  (shared by all units), then each unit's counts or successor table;
* ``FS`` float64 state: the Q tables;
* ``R`` uint64, one random stream per unit.

Unit 0 is the agent; a meta-classifier's sub-agents are the units after it
(leaves only, so no kernel recurses). The hosted bots call
:func:`agent_propose` / :func:`agent_observe` once per round, and the
experiment loops below call exactly the same functions, so what the
experiments measure is what the server hosts.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from arena_bots.numba_helpers import argmax_random_tie, rand_below, rand_unit

KIND_RANDOM = 0
KIND_CONST = 1
KIND_LOOP = 2
KIND_COUNTER = 3
KIND_COUNTER_SELF = 4
KIND_MARKOV = 5
KIND_MUPN = 6
KIND_SUPP = 7
KIND_META = 8
KIND_ORACLE = 9

C_KIND = 0
C_SIGNS = 1
C_ORDER = 2
C_IOFF = 3
C_FOFF = 4
C_CHILD0 = 5
C_NCHILD = 6
C_PROP = 7
C_GAMES = 8
C_KEY = 9
C_NKEYS = 10
C_CHOSEN = 11
C_FLAG = 12
C_LAST = 13
H_COLS = 14

F_ALPHA = 0
F_GAMMA = 1
F_EPS = 2
FP_COLS = 3

SCISSORS = 2


@njit(cache=True)
def payoff(H: np.ndarray, IS: np.ndarray, a: int, b: int) -> int:
    """+1 if sign a beats sign b, -1 if it loses, 0 on a draw."""
    return int(IS[a * H[0, C_SIGNS] + b])


@njit(cache=True)
def counter_to(H: np.ndarray, IS: np.ndarray, R: np.ndarray, u: int, move: int) -> int:
    """The thesis's GetCounterTo: one of the signs that beat ``move``, uniformly."""
    s = H[0, C_SIGNS]
    h = (s - 1) // 2
    return int(IS[s * s + move * h + rand_below(R, u, h)])


@njit(cache=True)
def _preprocessed_prediction(H: np.ndarray, IS: np.ndarray, R: np.ndarray, u: int, off: int) -> int:
    """MV with preprocessing: p' = 0.9 * counts / sum + 0.1 * onehot(scissors), argmax."""
    s = H[0, C_SIGNS]
    total = 0
    for i in range(s):
        total += IS[off + i]
    best = -1.0
    pick = 0
    ties = 0
    for i in range(s):
        p = IS[off + i] / total if total > 0 else 1.0 / s
        p = 0.9 * p + (0.1 if i == SCISSORS else 0.0)
        if p > best + 1e-12:
            best = p
            pick = i
            ties = 1
        elif abs(p - best) <= 1e-12:
            ties += 1
            if rand_below(R, u, ties) == 0:
                pick = i
    return pick


@njit(cache=True)
def leaf_propose(H: np.ndarray, FP: np.ndarray, IS: np.ndarray, FS: np.ndarray, R: np.ndarray, u: int) -> int:
    """Choose unit ``u``'s move for the coming round and remember it in C_PROP."""
    kind = H[u, C_KIND]
    s = H[u, C_SIGNS]
    g = H[u, C_GAMES]
    r = H[u, C_ORDER]
    m = 0
    if kind == KIND_RANDOM:
        m = rand_below(R, u, s)
    elif kind == KIND_CONST:
        m = H[u, C_FLAG]
    elif kind == KIND_LOOP:
        m = H[u, C_LAST]
    elif kind == KIND_COUNTER:
        last = H[u, C_LAST]
        m = rand_below(R, u, s) if last < 0 else counter_to(H, IS, R, u, last)
    elif kind == KIND_COUNTER_SELF:
        m = rand_below(R, u, s) if g == 0 else counter_to(H, IS, R, u, H[u, C_PROP])
    elif kind == KIND_MARKOV:
        if g < r + 1:
            m = rand_below(R, u, s)
        else:
            off = H[u, C_IOFF] + H[u, C_KEY] * s
            if H[u, C_FLAG] != 0:
                pred = _preprocessed_prediction(H, IS, R, u, off)
            else:
                pred = argmax_random_tie(IS, off, s, R, u)
            m = counter_to(H, IS, R, u, pred)
    elif kind == KIND_MUPN:
        seen = IS[H[u, C_IOFF] + H[u, C_KEY]]
        m = rand_below(R, u, s) if g < r + 1 else counter_to(H, IS, R, u, seen)
    elif kind == KIND_SUPP:
        # The thesis's reversed epsilon: explore when u > epsilon.
        if g < r or rand_unit(R, u) > FP[u, F_EPS]:
            m = rand_below(R, u, s)
        else:
            m = argmax_random_tie(FS, H[u, C_FOFF] + H[u, C_KEY] * s, s, R, u)
    H[u, C_PROP] = m
    return m


@njit(cache=True)
def _q_update(
    H: np.ndarray, FP: np.ndarray, FS: np.ndarray, u: int, width: int, action: int, reward: int, opp: int
) -> None:
    """Q[old][a] += alpha * (reward + gamma * max Q[new] - Q[old][a]) (no clipping)."""
    s = H[u, C_SIGNS]
    old = H[u, C_KEY]
    new = (old * s + opp) % H[u, C_NKEYS]
    base = H[u, C_FOFF]
    best = FS[base + new * width]
    for i in range(1, width):
        v = FS[base + new * width + i]
        if v > best:
            best = v
    cell = base + old * width + action
    FS[cell] += FP[u, F_ALPHA] * (reward + FP[u, F_GAMMA] * best - FS[cell])


@njit(cache=True)
def leaf_observe(
    H: np.ndarray, FP: np.ndarray, IS: np.ndarray, FS: np.ndarray, R: np.ndarray, u: int, opp: int
) -> None:
    """Learn from the opponent's move of the round just played."""
    kind = H[u, C_KIND]
    s = H[u, C_SIGNS]
    g = H[u, C_GAMES]
    r = H[u, C_ORDER]
    if kind == KIND_LOOP:
        H[u, C_LAST] = (H[u, C_LAST] + 1) % s
    elif kind == KIND_COUNTER:
        H[u, C_LAST] = opp
    elif kind == KIND_MARKOV:
        if g >= r:
            IS[H[u, C_IOFF] + H[u, C_KEY] * s + opp] += 1
    elif kind == KIND_MUPN:
        if g >= r:
            IS[H[u, C_IOFF] + H[u, C_KEY]] = opp
    elif kind == KIND_SUPP and g >= r:
        own = H[u, C_PROP]
        _q_update(H, FP, FS, u, s, own, payoff(H, IS, own, opp), opp)
    if r > 0:
        H[u, C_KEY] = (H[u, C_KEY] * s + opp) % H[u, C_NKEYS]
    H[u, C_GAMES] = g + 1


@njit(cache=True)
def agent_propose(H: np.ndarray, FP: np.ndarray, IS: np.ndarray, FS: np.ndarray, R: np.ndarray) -> int:
    """The agent's move for the coming round (every sub-agent proposes too)."""
    kind = H[0, C_KIND]
    if kind != KIND_META and kind != KIND_ORACLE:
        return leaf_propose(H, FP, IS, FS, R, 0)
    c0 = H[0, C_CHILD0]
    nc = H[0, C_NCHILD]
    for c in range(c0, c0 + nc):
        leaf_propose(H, FP, IS, FS, R, c)
    if kind == KIND_ORACLE:
        return -1  # decided by oracle_pick once the opponent's move is known
    g = H[0, C_GAMES]
    r = H[0, C_ORDER]
    # Random play (first r rounds) and exploration (u > epsilon) both pick a random sub-agent.
    if g < r or rand_unit(R, 0) > FP[0, F_EPS]:
        ch = rand_below(R, 0, nc)
    else:
        ch = argmax_random_tie(FS, H[0, C_FOFF] + H[0, C_KEY] * nc, nc, R, 0)
    H[0, C_CHOSEN] = ch
    m = H[c0 + ch, C_PROP]
    H[0, C_PROP] = m
    return int(m)


@njit(cache=True)
def oracle_pick(H: np.ndarray, IS: np.ndarray, R: np.ndarray, opp: int) -> int:
    """The optimal meta-classifier: the best sub-agent proposal against the known move."""
    c0 = H[0, C_CHILD0]
    nc = H[0, C_NCHILD]
    best = -2
    pick = H[c0, C_PROP]
    ties = 0
    for c in range(c0, c0 + nc):
        m = H[c, C_PROP]
        v = payoff(H, IS, m, opp)
        if v > best:
            best = v
            pick = m
            ties = 1
        elif v == best:
            ties += 1
            if rand_below(R, 0, ties) == 0:
                pick = m
    H[0, C_PROP] = pick
    return int(pick)


@njit(cache=True)
def agent_observe(H: np.ndarray, FP: np.ndarray, IS: np.ndarray, FS: np.ndarray, R: np.ndarray, opp: int) -> None:
    """Learn from the round just played (every sub-agent learns, from its own proposal)."""
    kind = H[0, C_KIND]
    if kind != KIND_META and kind != KIND_ORACLE:
        leaf_observe(H, FP, IS, FS, R, 0, opp)
        return
    c0 = H[0, C_CHILD0]
    nc = H[0, C_NCHILD]
    for c in range(c0, c0 + nc):
        leaf_observe(H, FP, IS, FS, R, c, opp)
    g = H[0, C_GAMES]
    if kind == KIND_META:
        r = H[0, C_ORDER]
        if g >= r:
            _q_update(H, FP, FS, 0, nc, H[0, C_CHOSEN], payoff(H, IS, H[0, C_PROP], opp), opp)
        if r > 0:
            H[0, C_KEY] = (H[0, C_KEY] * H[0, C_SIGNS] + opp) % H[0, C_NKEYS]
    H[0, C_GAMES] = g + 1


@njit(cache=True)
def play_vs_string(
    H: np.ndarray, FP: np.ndarray, IS: np.ndarray, FS: np.ndarray, R: np.ndarray, seq: np.ndarray
) -> np.ndarray:
    """Play the agent against a fixed move sequence; returns [wins, losses, draws]."""
    out = np.zeros(3, dtype=np.int64)
    oracle = H[0, C_KIND] == KIND_ORACLE
    for t in range(seq.shape[0]):
        opp = int(seq[t])
        m = agent_propose(H, FP, IS, FS, R)
        if oracle:
            m = oracle_pick(H, IS, R, opp)
        v = payoff(H, IS, m, opp)
        if v > 0:
            out[0] += 1
        elif v < 0:
            out[1] += 1
        else:
            out[2] += 1
        agent_observe(H, FP, IS, FS, R, opp)
    return out


@njit(cache=True)
def play_agents(
    HA: np.ndarray,
    FPA: np.ndarray,
    ISA: np.ndarray,
    FSA: np.ndarray,
    RA: np.ndarray,
    HB: np.ndarray,
    FPB: np.ndarray,
    ISB: np.ndarray,
    FSB: np.ndarray,
    RB: np.ndarray,
    rounds: int,
) -> np.ndarray:
    """Agent A against agent B for ``rounds`` rounds; returns A's [wins, losses, draws].

    B must be a fair agent; A may be the oracle, which is shown B's move first.
    """
    out = np.zeros(3, dtype=np.int64)
    oracle = HA[0, C_KIND] == KIND_ORACLE
    for _ in range(rounds):
        b = agent_propose(HB, FPB, ISB, FSB, RB)
        a = agent_propose(HA, FPA, ISA, FSA, RA)
        if oracle:
            a = oracle_pick(HA, ISA, RA, b)
        v = payoff(HA, ISA, a, b)
        if v > 0:
            out[0] += 1
        elif v < 0:
            out[1] += 1
        else:
            out[2] += 1
        agent_observe(HA, FPA, ISA, FSA, RA, b)
        agent_observe(HB, FPB, ISB, FSB, RB, a)
    return out


@njit(cache=True)
def moves_vs_string(
    H: np.ndarray, FP: np.ndarray, IS: np.ndarray, FS: np.ndarray, R: np.ndarray, seq: np.ndarray
) -> np.ndarray:
    """The agent's moves against a fixed sequence (for tests and profiles)."""
    out = np.zeros(seq.shape[0], dtype=np.int64)
    for t in range(seq.shape[0]):
        out[t] = agent_propose(H, FP, IS, FS, R)
        agent_observe(H, FP, IS, FS, R, int(seq[t]))
    return out
