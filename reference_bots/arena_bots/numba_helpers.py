"""A tiny per-agent random number generator for numba kernels (xorshift64*).

numba's ``np.random`` keeps one hidden global stream per thread, which would
couple every bot in a process; these helpers keep each agent's state in a
``uint64`` cell of an array the agent owns, so two bots never share a stream
and a seed reproduces a match exactly.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_MULT = np.uint64(2685821657736338717)
_S12 = np.uint64(12)
_S25 = np.uint64(25)
_S27 = np.uint64(27)
_S11 = np.uint64(11)
_S32 = np.uint64(32)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53


def seed_state(seed: int, stream: int = 0) -> np.uint64:
    """A non-zero xorshift state from a seed and a stream number (splitmix64)."""
    x = (seed * 0x9E3779B97F4A7C15 + stream * 0xD1B54A32D192ED03 + 0x632BE59BD9B4E019) & (2**64 - 1)
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    x ^= x >> 31
    return np.uint64(x or 0x2545F4914F6CDD1D)


@njit(cache=True, inline="always")
def next_u64(rng: np.ndarray, i: int) -> np.uint64:  # type: ignore[return]
    x = rng[i]
    x ^= x >> _S12
    x ^= x << _S25
    x ^= x >> _S27
    rng[i] = x
    return x * _MULT  # type: ignore[no-any-return]


@njit(cache=True, inline="always")
def rand_below(rng: np.ndarray, i: int, n: int) -> int:
    """Uniform integer in [0, n) for n < 2**31 (multiply-shift; bias below 2**-31 * n)."""
    return np.int64(((next_u64(rng, i) >> _S32) * np.uint64(n)) >> _S32)  # type: ignore[return-value]


@njit(cache=True, inline="always")
def rand_unit(rng: np.ndarray, i: int) -> float:
    """Uniform float in [0, 1)."""
    return float(next_u64(rng, i) >> _S11) * _INV53


@njit(cache=True)
def argmax_random_tie(values: np.ndarray, off: int, n: int, rng: np.ndarray, i: int) -> int:
    """Index of the largest of values[off:off+n] (any numeric array), ties broken uniformly with stream i."""
    best = values[off]
    pick = 0
    ties = 1
    for k in range(1, n):
        v = values[off + k]
        if v > best:
            best = v
            pick = k
            ties = 1
        elif v == best:
            ties += 1
            if rand_below(rng, i, ties) == 0:
                pick = k
    return pick
