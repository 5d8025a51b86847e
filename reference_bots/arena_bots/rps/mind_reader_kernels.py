"""numba kernels for Shannon's mind reader with wildcard window elements.

State of one reader (see :mod:`arena_bots.rps.mind_reader`):

* ``A`` int64 counters, ``signs * (signs + 1) ** n``; cell
  ``x0 + signs * sum(x_i * (signs + 1) ** (i - 1))`` where ``x_i = signs``
  means "empty";
* ``W`` int64, the last n elements of the alternating history (oldest first;
  ``W[n-1]`` is the opponent's previous move);
* ``M`` int64 ``[n, signs, elements seen, rounds counted S]``;
* ``BASE`` int64 scratch of ``2 ** n`` cell bases for the current window.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from arena_bots.numba_helpers import rand_below

M_N = 0
M_SIGNS = 1
M_SEEN = 2
M_ROUNDS = 3


@njit(cache=True)
def window_bases(W: np.ndarray, M: np.ndarray, BASE: np.ndarray) -> None:
    """BASE[mask] = signs * sum over positions of (kept value or empty) * (signs+1)**i."""
    n = M[M_N]
    s = M[M_SIGNS]
    for mask in range(1 << n):
        acc = 0
        p = 1
        for i in range(n):
            v = W[i] if (mask >> i) & 1 else s
            acc += v * p
            p *= s + 1
        BASE[mask] = acc * s


@njit(cache=True)
def scores(A: np.ndarray, M: np.ndarray, BASE: np.ndarray, out: np.ndarray) -> None:
    """out[x] = sum of the 2**n counters matching the current window, for each move x."""
    n = M[M_N]
    s = M[M_SIGNS]
    for x in range(s):
        out[x] = 0
    for mask in range(1 << n):
        b = BASE[mask]
        for x in range(s):
            out[x] += A[b + x]


@njit(cache=True)
def observe(A: np.ndarray, W: np.ndarray, M: np.ndarray, BASE: np.ndarray, own: int, opp: int) -> None:
    """Record the opponent's move ``opp`` (if a full window preceded it), then shift in (own, opp)."""
    n = M[M_N]
    if M[M_SEEN] >= n:
        window_bases(W, M, BASE)
        for mask in range(1 << n):
            A[BASE[mask] + opp] += 1
        M[M_ROUNDS] += 1
    for i in range(n - 2):
        W[i] = W[i + 2]
    if n >= 2:
        W[n - 2] = own
    W[n - 1] = opp
    M[M_SEEN] += 2


@njit(cache=True)
def predict(A: np.ndarray, W: np.ndarray, M: np.ndarray, BASE: np.ndarray, R: np.ndarray) -> int:
    """The predicted opponent move, or -1 when there is no window or no data yet."""
    n = M[M_N]
    s = M[M_SIGNS]
    if M[M_SEEN] < n:
        return -1
    window_bases(W, M, BASE)
    sc = np.empty(s, dtype=np.int64)
    scores(A, M, BASE, sc)
    best = sc[0]
    pick = 0
    ties = 1
    for x in range(1, s):
        if sc[x] > best:
            best = sc[x]
            pick = x
            ties = 1
        elif sc[x] == best:
            ties += 1
            if rand_below(R, 0, ties) == 0:
                pick = x
    if best == 0:
        return -1
    return pick


@njit(cache=True)
def build_profile(
    A: np.ndarray, W: np.ndarray, M: np.ndarray, BASE: np.ndarray, player: np.ndarray, other: np.ndarray
) -> None:
    """Feed one match into a profile: ``player`` is the modelled side, ``other`` its opponent."""
    for t in range(player.shape[0]):
        observe(A, W, M, BASE, int(other[t]), int(player[t]))
