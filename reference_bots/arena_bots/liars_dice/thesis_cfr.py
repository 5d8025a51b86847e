"""CFR for the thesis's game by dynamic programming over dice counts (2 players, thesis bidding, no wilds).

The game is a chain of rounds. A round with the opener holding ``a`` dice and
the responder ``b`` ends with one of them losing a die, and the loser opens
the next round, so with V(a, b) the opener's expected return (V(0, b) = -1,
V(a, 0) = +1 by symmetry of the definition), a round's terminal payoffs are
V(a-1, b) when the opener loses and -V(b-1, a) when the responder does.
Solving the rounds in increasing a + b makes every payoff known in advance.

Each round is solved with chance-sampled fixed-strategy-iteration CFR (Neller
and Hnath's FSICFR for Dudo) over an imperfect-recall abstraction: a seat
remembers only its own roll (as a multiset), its role and the current bid, so
the abstract round is a DAG of 2 * 6N + 1 nodes (the bid and who is to move)
topologically ordered by the bid's action number. Strategies are regret
matching (CFR+ clipping) with linearly weighted averages; V(a, b) is then
computed exactly for the average strategies over every pair of rolls.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from pathlib import Path

import numba as nb
import numpy as np

FACES = 6
MAX_DICE = 5


def rolls(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Multisets of ``k`` dice: (face counts [R, 6], probabilities [R], ordered-code -> multiset index [6**k])."""
    multisets = list(itertools.combinations_with_replacement(range(FACES), k))
    index = {m: n for n, m in enumerate(multisets)}
    counts = np.zeros((len(multisets), FACES), dtype=np.int64)
    prob = np.zeros(len(multisets))
    for n, m in enumerate(multisets):
        for f in m:
            counts[n, f] += 1
        ways = math.factorial(k)
        for c in counts[n]:
            ways //= math.factorial(int(c))
        prob[n] = ways / FACES**k
    code = np.zeros(FACES**k, dtype=np.int64)
    for ordered in itertools.product(range(FACES), repeat=k):
        c = 0
        for f in ordered:
            c = c * FACES + f
        code[c] = index[tuple(sorted(ordered))]
    return counts, prob, code


def roll_index(dice: tuple[int, ...] | list[int]) -> int:
    """The multiset index of a roll given as faces 1..6 (any order)."""
    k = len(dice)
    multisets = list(itertools.combinations_with_replacement(range(FACES), k))
    return multisets.index(tuple(sorted(d - 1 for d in dice)))


@nb.njit(cache=True)
def _legal(last: int, a: int, faces: int) -> bool:
    if last < 0:
        return True
    return a != last and a // faces >= last // faces and a % faces >= last % faces


@nb.njit(cache=True)
def _strategy(regrets: np.ndarray, roll: int, node: int, nbids: int, out: np.ndarray) -> None:
    last = node - 1
    total = 0.0
    count = 0
    for a in range(nbids + 1):
        ok = _legal(last, a, FACES) if a < nbids else last >= 0
        out[a] = 0.0
        if ok:
            count += 1
            if regrets[roll, node, a] > 0.0:
                total += regrets[roll, node, a]
    for a in range(nbids + 1):
        ok = _legal(last, a, FACES) if a < nbids else last >= 0
        if ok:
            out[a] = regrets[roll, node, a] / total if total > 0.0 and regrets[roll, node, a] > 0.0 else 0.0
            if total <= 0.0:
                out[a] = 1.0 / count


@nb.njit(cache=True)
def _payoff_opener(caller_is_opener: bool, true_bid: bool, lose_opener: float, lose_responder: float) -> float:
    caller_loses = true_bid
    opener_loses = caller_loses == caller_is_opener
    return lose_opener if opener_loses else lose_responder


@nb.njit(cache=True)
def _fsicfr(
    iterations: int,
    start: int,
    a: int,
    b: int,
    counts_a: np.ndarray,
    code_a: np.ndarray,
    counts_b: np.ndarray,
    code_b: np.ndarray,
    lose_opener: float,
    lose_responder: float,
    regrets_o: np.ndarray,
    regrets_r: np.ndarray,
    sums_o: np.ndarray,
    sums_r: np.ndarray,
    seed: int,
) -> None:
    np.random.seed(seed)
    nbids = (a + b) * FACES
    nodes = nbids + 1  # node 0: the opening; node 1 + bid: that bid is current
    # p_mover / p_other reach sums per (node, mover role); role 0 = opener to move.
    p_mover = np.zeros((nodes, 2))
    p_other = np.zeros((nodes, 2))
    util = np.zeros((nodes, 2))
    sig = np.zeros((nodes, 2, nbids + 1))
    for t in range(start + 1, start + iterations + 1):
        c = 0
        for _ in range(a):
            c = c * FACES + np.random.randint(FACES)
        ri = code_a[c]
        c = 0
        for _ in range(b):
            c = c * FACES + np.random.randint(FACES)
        rj = code_b[c]
        p_mover[:] = 0.0
        p_other[:] = 0.0
        p_mover[0, 0] = 1.0
        p_other[0, 0] = 1.0
        for node in range(nodes):
            for role in range(2):
                if node == 0 and role == 1:
                    continue
                if p_mover[node, role] == 0.0 and p_other[node, role] == 0.0:
                    continue
                if role == 0:
                    _strategy(regrets_o, ri, node, nbids, sig[node, role])
                else:
                    _strategy(regrets_r, rj, node, nbids, sig[node, role])
                for act in range(nbids):
                    s = sig[node, role, act]
                    if node - 1 >= 0 and not _legal(node - 1, act, FACES):
                        continue
                    child = act + 1
                    p_mover[child, 1 - role] += p_other[node, role]
                    p_other[child, 1 - role] += p_mover[node, role] * s
        for node in range(nodes - 1, -1, -1):
            for role in range(2):
                if node == 0 and role == 1:
                    continue
                if p_mover[node, role] == 0.0 and p_other[node, role] == 0.0:
                    continue
                last = node - 1
                av = np.zeros(nbids + 1)
                if last >= 0:
                    q = last // FACES + 1
                    f = last % FACES
                    true_bid = counts_a[ri, f] + counts_b[rj, f] >= q
                    v = _payoff_opener(role == 0, true_bid, lose_opener, lose_responder)
                    av[nbids] = v if role == 0 else -v
                for act in range(nbids):
                    if _legal(last, act, FACES):
                        av[act] = -util[act + 1, 1 - role]
                u = 0.0
                for act in range(nbids + 1):
                    u += sig[node, role, act] * av[act]
                util[node, role] = u
                regrets = regrets_o if role == 0 else regrets_r
                sums = sums_o if role == 0 else sums_r
                roll = ri if role == 0 else rj
                po = p_other[node, role]
                pm = p_mover[node, role]
                for act in range(nbids + 1):
                    ok = _legal(last, act, FACES) if act < nbids else last >= 0
                    if ok:
                        r = regrets[roll, node, act] + po * (av[act] - u)
                        regrets[roll, node, act] = r if r > 0.0 else 0.0
                        sums[roll, node, act] += t * pm * sig[node, role, act]


@nb.njit(cache=True)
def _value(
    a: int,
    b: int,
    counts_a: np.ndarray,
    prob_a: np.ndarray,
    counts_b: np.ndarray,
    prob_b: np.ndarray,
    pol_o: np.ndarray,
    pol_r: np.ndarray,
    lose_opener: float,
    lose_responder: float,
) -> float:
    """The opener's exact expected return when both play the (abstract, Markov) policies."""
    nbids = (a + b) * FACES
    nodes = nbids + 1
    total = 0.0
    util = np.zeros((nodes, 2))
    for ri in range(counts_a.shape[0]):
        for rj in range(counts_b.shape[0]):
            for node in range(nodes - 1, -1, -1):
                for role in range(2):
                    if node == 0 and role == 1:
                        continue
                    last = node - 1
                    pol = pol_o[ri, node] if role == 0 else pol_r[rj, node]
                    u = 0.0
                    if last >= 0:
                        q = last // FACES + 1
                        f = last % FACES
                        true_bid = counts_a[ri, f] + counts_b[rj, f] >= q
                        v = _payoff_opener(role == 0, true_bid, lose_opener, lose_responder)
                        u += pol[nbids] * (v if role == 0 else -v)
                    for act in range(nbids):
                        if pol[act] > 0.0:
                            u -= pol[act] * util[act + 1, 1 - role]
                    util[node, role] = u
            total += prob_a[ri] * prob_b[rj] * util[0, 0]
    return total


def normalise(sums: np.ndarray, nbids: int) -> np.ndarray:
    """Average strategy from strategy sums (uniform over the legal actions where never reached), float32."""
    _, nodes, actions = sums.shape
    legal = np.zeros((nodes, actions), dtype=bool)
    legal[0, :nbids] = True
    for node in range(1, nodes):
        last = node - 1
        q, f = divmod(last, FACES)
        for act in range(nbids):
            legal[node, act] = act != last and act // FACES >= q and act % FACES >= f
        legal[node, nbids] = True
    w = sums * legal[None]
    total = w.sum(axis=2, keepdims=True)
    uniform = legal / legal.sum(axis=1, keepdims=True)
    return np.where(total > 0, w / np.where(total > 0, total, 1.0), uniform[None]).astype(np.float32)


def solve(
    max_dice: int = MAX_DICE,
    iterations: Callable[[int, int], int] = lambda a, b: 20_000 * (a + b),
    progress: Callable[[str], None] = print,
    checkpoint: Path | None = None,
    seed: int = 1,
) -> tuple[np.ndarray, dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]]:
    """Solve every round (a, b), a, b <= ``max_dice``, in increasing a + b.

    Returns:
        V [max_dice+1, max_dice+1] (the opener's value) and the policies per (a, b): (opener's, responder's),
        each [rolls, 1 + 6(a+b), 6(a+b) + 1].
    """
    value = np.zeros((max_dice + 1, max_dice + 1))
    value[0, 1:] = -1.0
    value[1:, 0] = 1.0
    policies: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    tables = {k: rolls(k) for k in range(1, max_dice + 1)}
    start = time.perf_counter()
    for total in range(2, 2 * max_dice + 1):
        for a in range(1, max_dice + 1):
            b = total - a
            if not 1 <= b <= max_dice:
                continue
            nbids = total * FACES
            ca, pa, code_a = tables[a]
            cb, pb, code_b = tables[b]
            lose_o, lose_r = value[a - 1, b], -value[b - 1, a]
            shape_o, shape_r = (len(pa), nbids + 1, nbids + 1), (len(pb), nbids + 1, nbids + 1)
            reg_o, reg_r = np.zeros(shape_o), np.zeros(shape_r)
            sum_o, sum_r = np.zeros(shape_o), np.zeros(shape_r)
            n = iterations(a, b)
            _fsicfr(n, 0, a, b, ca, code_a, cb, code_b, lose_o, lose_r, reg_o, reg_r, sum_o, sum_r, seed + 100 * a + b)
            pol_o, pol_r = normalise(sum_o, nbids), normalise(sum_r, nbids)
            value[a, b] = _value(
                a, b, ca, pa, cb, pb, pol_o.astype(np.float64), pol_r.astype(np.float64), lose_o, lose_r
            )
            policies[a, b] = (pol_o, pol_r)
            progress(
                f"round {a} vs {b} dice: {n} iterations, opener's value {value[a, b]:+.4f}, "
                f"{time.perf_counter() - start:.0f} s"
            )
            if checkpoint is not None:
                save(checkpoint, value, policies)
    return value, policies


LEVELS = 255
"""Probabilities are stored as multiples of 1/LEVELS in uint8 (about 0.9 MB for 5 dice, so it ships)."""


def save(path: Path, value: np.ndarray, policies: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]) -> None:
    """Write V and the policies, quantised to uint8 (1/255 steps, compressed), atomically."""
    arrays: dict[str, np.ndarray] = {"value": value, "levels": np.array(LEVELS)}
    for (a, b), (po, pr) in policies.items():
        arrays[f"o{a}{b}"] = np.round(po * LEVELS).astype(np.uint8)
        arrays[f"r{a}{b}"] = np.round(pr * LEVELS).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, **arrays)  # type: ignore[arg-type]
    tmp.replace(path)


def load(path: Path) -> tuple[np.ndarray, dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]]:
    """Read what :func:`save` wrote (quantised, renormalised over the legal actions; float16 files too)."""
    policies: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    with np.load(path) as data:
        value = data["value"]
        for key in data.files:
            if key.startswith("o"):
                a, b = int(key[1]), int(key[2])
                po, pr = data[key].astype(np.float64), data[f"r{a}{b}"].astype(np.float64)
                policies[a, b] = (normalise(po, (a + b) * FACES), normalise(pr, (a + b) * FACES))
    return value, policies


def round_exploitability(
    value: np.ndarray, policies: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]], dice: int
) -> float:
    """Exact exploitability of the round (dice, dice) in the full round game, the later rounds' values fixed.

    In a round where both hold ``dice`` dice, losing is worth V(dice - 1, dice) to either side (the loser opens
    the next round), winning minus that, so the round is the single-round game of
    :mod:`arena_bots.liars_dice.dice_game` scaled by -V(dice - 1, dice); its best responder has perfect recall.
    Only dice <= 2 (at most 24 bids) is walkable.
    """
    from arena_bots.liars_dice import dice_game

    game = dice_game.make_dice_game(dice, FACES, "thesis", "none")
    po, pr = policies[dice, dice]
    policy = np.stack([po, pr]).astype(np.float64)
    return float(-value[dice - 1, dice] * dice_game.exploitability(game, policy))
