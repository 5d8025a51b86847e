"""numba kernel of the ``sicilian`` ensemble bot (see :mod:`arena_bots.rps.sicilian`).

One call of :func:`step` records the previous round (if any), scores every
expert on it, and returns the next move. All state is in the arrays of
:class:`arena_bots.rps.sicilian.SicilianState`; ``IV`` holds the scalars (``I_*`` slots).
"""

from __future__ import annotations

import numpy as np
from numba import njit

import arena_bots.rps.mind_reader_kernels as MR
from arena_bots.numba_helpers import argmax_random_tie, rand_below

# IV[...] scalar slots
I_SIGNS = 0
I_T = 1  # rounds recorded
I_MAXLEN = 2  # longest history match tried
I_ORDERS = 3  # Markov / successor orders used (1..I_ORDERS)
I_HBITS = 4  # hash table size is 2**I_HBITS per sequence
I_NPRED = 5
I_LAST = 6  # move played last round
I_CHOSEN = 7  # layer followed last round

# predictor slots
P_LAST_OPP = 0
P_LAST_SELF = 1
P_FREQ_OPP = 2
P_FREQ_SELF = 3
P_DFREQ_OPP = 4
P_DFREQ_SELF = 5
P_MR_OPP = 6
P_MR_SELF = 7
P_MATCH = 8  # 3 sequences x (opp, self) = 6 slots
P_ORDERED = 14  # per order k: Markov opp, Markov self, successor opp, successor self
MAX_ORDERS = 3
N_PRED = P_ORDERED + 4 * MAX_ORDERS

FREQ_DECAY = 0.8
TOP_DECAY = 0.9


@njit(cache=True)
def _argmax_f(v: np.ndarray, R: np.ndarray) -> int:
    return argmax_random_tie(v, 0, v.shape[0], R, 0)


@njit(cache=True)
def _argmax_i(table: np.ndarray, off: int, n: int, R: np.ndarray) -> int:
    """The most frequent sign in table[off:off+n] (ties at random), or -1 when the row is empty."""
    pick = argmax_random_tie(table, off, n, R, 0)
    return pick if table[off + pick] > 0 else -1


@njit(cache=True)
def _sym(hs: np.ndarray, ho: np.ndarray, which: int, i: int, s: int) -> int:
    if which == 0:
        return int(ho[i])
    if which == 1:
        return int(hs[i])
    return int(hs[i]) * s + int(ho[i])


@njit(cache=True)
def _match(IV: np.ndarray, hs: np.ndarray, ho: np.ndarray, which: int, table: np.ndarray, hashes: np.ndarray) -> int:
    """Most recent earlier position following the longest suffix match of one sequence (-1 if none).

    Also stores the current position under every suffix length (for later rounds).
    """
    s = IV[I_SIGNS]
    t = IV[I_T]
    maxlen = min(IV[I_MAXLEN], t)
    mask = (1 << IV[I_HBITS]) - 1
    h = 0
    for k in range(1, maxlen + 1):
        h = (h * 1000003 + _sym(hs, ho, which, t - k, s) + 1) & ((1 << 40) - 1)
        hashes[k] = (h ^ (k * 2654435761)) & mask
    found = -1
    for k in range(maxlen, 0, -1):
        j = table[hashes[k]]
        if j >= k and j < t:
            ok = True
            for i in range(1, k + 1):
                if _sym(hs, ho, which, j - i, s) != _sym(hs, ho, which, t - i, s):
                    ok = False
                    break
            if ok:
                found = j
                break
    for k in range(1, maxlen + 1):
        table[hashes[k]] = t
    return found


@njit(cache=True)
def _key(seq: np.ndarray, t: int, k: int, s: int) -> int:
    key = 0
    for i in range(t - k, t):
        key = key * s + int(seq[i])
    return key


@njit(cache=True)
def _record(
    IV: np.ndarray,
    hs: np.ndarray,
    ho: np.ndarray,
    counts: np.ndarray,
    succ: np.ndarray,
    offs: np.ndarray,
    freq: np.ndarray,
    dfreq: np.ndarray,
) -> None:
    """Learn the round at index t-1 (hs/ho already hold it)."""
    s = IV[I_SIGNS]
    t = IV[I_T]  # rounds including the new one
    o = int(ho[t - 1])
    m = int(hs[t - 1])
    freq[0, o] += 1.0
    freq[1, m] += 1.0
    for x in range(s):
        dfreq[0, x] *= FREQ_DECAY
        dfreq[1, x] *= FREQ_DECAY
    dfreq[0, o] += 1.0
    dfreq[1, m] += 1.0
    for k in range(1, IV[I_ORDERS] + 1):
        if t - 1 >= k:
            ko = _key(ho, t - 1, k, s)
            ks = _key(hs, t - 1, k, s)
            counts[offs[k, 0] + ko * s + o] += 1
            counts[offs[k, 1] + ks * s + m] += 1
            succ[offs[k, 2] + ko] = o
            succ[offs[k, 3] + ks] = m


@njit(cache=True)
def step(
    IV: np.ndarray,
    hs: np.ndarray,
    ho: np.ndarray,
    counts: np.ndarray,
    succ: np.ndarray,
    offs: np.ndarray,
    freq: np.ndarray,
    dfreq: np.ndarray,
    mtab: np.ndarray,
    hashes: np.ndarray,
    mr_a: np.ndarray,
    mr_w: np.ndarray,
    mr_m: np.ndarray,
    mr_base: np.ndarray,
    ms_a: np.ndarray,
    ms_w: np.ndarray,
    ms_m: np.ndarray,
    ms_base: np.ndarray,
    rot: np.ndarray,
    pay: np.ndarray,
    preds: np.ndarray,
    emove: np.ndarray,
    escore: np.ndarray,
    decays: np.ndarray,
    lmove: np.ndarray,
    lscore: np.ndarray,
    R: np.ndarray,
    opp: int,
) -> int:
    """Record last round's opponent move ``opp`` (-1 at the start) and return the next move."""
    s = IV[I_SIGNS]
    npred = IV[I_NPRED]
    ne = npred * s
    nd = decays.shape[0]
    if opp >= 0:
        t = IV[I_T]
        mine = IV[I_LAST]
        hs[t] = mine
        ho[t] = opp
        # score every expert and every layer on the finished round
        for e in range(ne):
            v = 0.0
            if emove[e] >= 0:
                v = float(pay[emove[e] * s + opp])
            for d in range(nd):
                escore[d, e] = escore[d, e] * decays[d] + v
        for d in range(nd):
            lscore[d] = lscore[d] * TOP_DECAY + float(pay[lmove[d] * s + opp])
        IV[I_T] = t + 1
        _record(IV, hs, ho, counts, succ, offs, freq, dfreq)
        MR.observe(mr_a, mr_w, mr_m, mr_base, mine, opp)
        MR.observe(ms_a, ms_w, ms_m, ms_base, opp, mine)
    t = IV[I_T]
    for p in range(npred):
        preds[p] = -1
    if t > 0:
        preds[P_LAST_OPP] = ho[t - 1]
        preds[P_LAST_SELF] = hs[t - 1]
        preds[P_FREQ_OPP] = _argmax_f(freq[0], R)
        preds[P_FREQ_SELF] = _argmax_f(freq[1], R)
        preds[P_DFREQ_OPP] = _argmax_f(dfreq[0], R)
        preds[P_DFREQ_SELF] = _argmax_f(dfreq[1], R)
        preds[P_MR_OPP] = MR.predict(mr_a, mr_w, mr_m, mr_base, R)
        preds[P_MR_SELF] = MR.predict(ms_a, ms_w, ms_m, ms_base, R)
        for which in range(3):
            j = _match(IV, hs, ho, which, mtab[which], hashes)
            if j >= 0:
                preds[P_MATCH + 2 * which] = ho[j]
                preds[P_MATCH + 2 * which + 1] = hs[j]
        for k in range(1, IV[I_ORDERS] + 1):
            if t >= k:
                ko = _key(ho, t, k, s)
                ks = _key(hs, t, k, s)
                base = P_ORDERED + 4 * (k - 1)
                preds[base] = _argmax_i(counts, offs[k, 0] + ko * s, s, R)
                preds[base + 1] = _argmax_i(counts, offs[k, 1] + ks * s, s, R)
                if succ[offs[k, 2] + ko] >= 0:
                    preds[base + 2] = succ[offs[k, 2] + ko]
                if succ[offs[k, 3] + ks] >= 0:
                    preds[base + 3] = succ[offs[k, 3] + ks]
    # experts: every rotation of every prediction along the beat cycle
    for p in range(npred):
        for k in range(s):
            emove[p * s + k] = -1 if preds[p] < 0 else rot[k, preds[p]]
    # each layer follows its best expert (only experts with a move count)
    for d in range(nd):
        best = -1e300
        pick = -1
        ties = 0
        for e in range(ne):
            if emove[e] < 0:
                continue
            v = escore[d, e]
            if v > best:
                best = v
                pick = e
                ties = 1
            elif v == best:
                ties += 1
                if rand_below(R, 0, ties) == 0:
                    pick = e
        lmove[d] = rand_below(R, 0, s) if pick < 0 else emove[pick]
    chosen = _argmax_f(lscore, R)
    move = int(lmove[chosen])
    IV[I_CHOSEN] = chosen
    IV[I_LAST] = move
    return move
