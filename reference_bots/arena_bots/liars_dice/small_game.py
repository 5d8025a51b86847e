"""Exact CFR+ and best response for the 2-player, 1-die-each, single-round Liar's Dice games (numba).

A history of such a game is the set of bids made so far (bids only go up), so
a public node is a bitmask ``m`` over the B = 2F bids: the mover is
``popcount(m) % 2`` (seat 0 opens), the current bid is the highest set bit,
and the information set of a seat is (its die, m). Every array is indexed
``[mask, die, action]`` with action 0..B-1 a bid (the engine's action number)
and B "liar". CFR+ runs vectorised over both dice with alternating updates and
linear averaging; :func:`exploitability` computes exact best responses (the
mean of the two best-response gains, OpenSpiel's convention) and
:func:`game_value` the first bidder's expected return.

Bidding ``standard`` (any higher action number) or ``thesis`` (neither
quantity nor face may go down) and wild ``none``/``ones``/``highest`` are
supported; the game is ``players=2 dice=1 rounds=single``. With ``standard``
bidding and the highest face wild this is the small Liar's Dice of the
literature (game value about -0.0276 for the first bidder).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numba as nb
import numpy as np


@dataclass(frozen=True)
class SmallGame:
    """The tables of one 1-die game: legality and bid truth."""

    faces: int
    bidding: str
    wild: str
    legal: np.ndarray  # [last+1, a] bool: may bid a after bid `last` (row 0: the opening)
    truth: np.ndarray  # [bid, d0, d1] bool: the bid holds with these dice

    @property
    def bids(self) -> int:
        return 2 * self.faces


def make_game(faces: int = 6, bidding: str = "standard", wild: str = "highest") -> SmallGame:
    """Build the tables of the 2-player, 1-die, single-round game."""
    if bidding not in ("standard", "thesis") or wild not in ("none", "ones", "highest"):
        raise ValueError(f"bidding={bidding!r} wild={wild!r}: expected standard|thesis and none|ones|highest")
    b = 2 * faces
    wild_face = {"none": 0, "ones": 1, "highest": faces}[wild]
    legal = np.zeros((b + 1, b), dtype=np.bool_)
    legal[0, :] = True
    for last in range(b):
        for a in range(b):
            if bidding == "standard":
                legal[last + 1, a] = a > last
            else:
                legal[last + 1, a] = a != last and a // faces >= last // faces and a % faces >= last % faces
    truth = np.zeros((b, faces, faces), dtype=np.bool_)
    for a in range(b):
        q, f = a // faces + 1, a % faces + 1
        for d0 in range(1, faces + 1):
            for d1 in range(1, faces + 1):
                count = 0
                for d in (d0, d1):
                    if d == f or (wild_face and f != wild_face and d == wild_face):
                        count += 1
                truth[a, d0 - 1, d1 - 1] = count >= q
    return SmallGame(faces, bidding, wild, legal, truth)


@nb.njit(cache=True)
def _last_bid(m: int) -> int:
    last = -1
    while m:
        m >>= 1
        last += 1
    return last


@nb.njit(cache=True)
def _popcount(m: int) -> int:
    c = 0
    while m:
        m &= m - 1
        c += 1
    return c


@nb.njit(cache=True)
def _reachable(legal: np.ndarray, nbids: int) -> np.ndarray:
    size = 1 << nbids
    reach = np.zeros(size, dtype=np.bool_)
    reach[0] = True
    for m in range(size):
        if not reach[m]:
            continue
        last = _last_bid(m)
        for a in range(nbids):
            if legal[last + 1, a]:
                reach[m | (1 << a)] = True
    return reach


@nb.njit(cache=True)
def _strategy(regrets: np.ndarray, legal: np.ndarray, reachable: np.ndarray, sigma: np.ndarray) -> None:
    size, faces, actions = regrets.shape
    nbids = actions - 1
    for m in range(size):
        if not reachable[m]:
            continue
        last = _last_bid(m)
        for d in range(faces):
            total = 0.0
            count = 0
            for a in range(actions):
                ok = legal[last + 1, a] if a < nbids else m != 0
                if ok:
                    count += 1
                    if regrets[m, d, a] > 0.0:
                        total += regrets[m, d, a]
            for a in range(actions):
                ok = legal[last + 1, a] if a < nbids else m != 0
                if not ok:
                    sigma[m, d, a] = 0.0
                elif total > 0.0:
                    sigma[m, d, a] = regrets[m, d, a] / total if regrets[m, d, a] > 0.0 else 0.0
                else:
                    sigma[m, d, a] = 1.0 / count


@nb.njit(cache=True)
def _forward(sigma: np.ndarray, legal: np.ndarray, reachable: np.ndarray, reach: np.ndarray) -> None:
    size, faces, actions = sigma.shape
    nbids = actions - 1
    reach[0, :, :] = 1.0
    for m in range(size):
        if not reachable[m]:
            continue
        mover = _popcount(m) & 1
        last = _last_bid(m)
        for a in range(nbids):
            if legal[last + 1, a]:
                child = m | (1 << a)
                for d in range(faces):
                    reach[child, mover, d] = reach[m, mover, d] * sigma[m, d, a]
                    reach[child, 1 - mover, d] = reach[m, 1 - mover, d]


@nb.njit(cache=True)
def _terminal(m: int, i: int, truth: np.ndarray, opp: np.ndarray, faces: int, out: np.ndarray) -> None:
    """Counterfactual value for seat i of "liar" at m, weighted by the opponent's reach vector ``opp``."""
    caller = _popcount(m) & 1
    last = _last_bid(m)
    norm = 1.0 / (faces * faces)
    for di in range(faces):
        v = 0.0
        for do in range(faces):
            t = truth[last, di, do] if i == 0 else truth[last, do, di]
            loser = caller if t else 1 - caller
            v += opp[do] * (-1.0 if loser == i else 1.0)
        out[di] = v * norm


@nb.njit(cache=True)
def _backward(
    i: int,
    sigma: np.ndarray,
    legal: np.ndarray,
    truth: np.ndarray,
    reachable: np.ndarray,
    reach: np.ndarray,
    values: np.ndarray,
    regrets: np.ndarray,
    ssum: np.ndarray,
    weight: float,
    best_response: bool,
) -> None:
    """Values for seat i bottom-up; updates i's regrets (CFR+) and strategy sums unless ``best_response``."""
    size, faces, actions = sigma.shape
    nbids = actions - 1
    av = np.zeros((faces, actions))
    tv = np.zeros(faces)
    opp = np.zeros(faces)
    for m in range(size - 1, -1, -1):
        if not reachable[m]:
            continue
        mover = _popcount(m) & 1
        last = _last_bid(m)
        o = 1 - i
        if m != 0:
            for d in range(faces):
                opp[d] = reach[m, o, d] if mover == i else reach[m, o, d] * sigma[m, d, nbids]
            _terminal(m, i, truth, opp, faces, tv)
        if mover == i:
            for d in range(faces):
                for a in range(actions):
                    av[d, a] = 0.0
                if m != 0:
                    av[d, nbids] = tv[d]
            for a in range(nbids):
                if legal[last + 1, a]:
                    child = m | (1 << a)
                    for d in range(faces):
                        av[d, a] = values[child, d]
            for d in range(faces):
                if best_response:
                    best = -1e300
                    for a in range(actions):
                        ok = legal[last + 1, a] if a < nbids else m != 0
                        if ok and av[d, a] > best:
                            best = av[d, a]
                    values[m, d] = best
                else:
                    v = 0.0
                    for a in range(actions):
                        v += sigma[m, d, a] * av[d, a]
                    values[m, d] = v
                    for a in range(actions):
                        ok = legal[last + 1, a] if a < nbids else m != 0
                        if ok:
                            r = regrets[m, d, a] + av[d, a] - v
                            regrets[m, d, a] = r if r > 0.0 else 0.0
                            ssum[m, d, a] += weight * reach[m, i, d] * sigma[m, d, a]
        else:
            for d in range(faces):
                values[m, d] = tv[d] if m != 0 else 0.0
            for a in range(nbids):
                if legal[last + 1, a]:
                    child = m | (1 << a)
                    for d in range(faces):
                        values[m, d] += values[child, d]


@nb.njit(cache=True)
def _cfr_plus(
    iterations: int,
    start: int,
    legal: np.ndarray,
    truth: np.ndarray,
    reachable: np.ndarray,
    regrets: np.ndarray,
    ssum: np.ndarray,
) -> None:
    size, faces, actions = regrets.shape
    sigma = np.zeros((size, faces, actions))
    reach = np.zeros((size, 2, faces))
    values = np.zeros((size, faces))
    for t in range(start + 1, start + iterations + 1):
        for i in range(2):
            _strategy(regrets, legal, reachable, sigma)
            _forward(sigma, legal, reachable, reach)
            _backward(i, sigma, legal, truth, reachable, reach, values, regrets, ssum, float(t), False)


@nb.njit(cache=True)
def _br_values(policy: np.ndarray, legal: np.ndarray, truth: np.ndarray, reachable: np.ndarray) -> np.ndarray:
    size, faces, _ = policy.shape
    reach = np.zeros((size, 2, faces))
    values = np.zeros((size, faces))
    dummy = np.zeros((1, 1, 1))
    _forward(policy, legal, reachable, reach)
    out = np.zeros(2)
    for i in range(2):
        _backward(i, policy, legal, truth, reachable, reach, values, dummy, dummy, 0.0, True)
        out[i] = values[0].sum()
    return out


@nb.njit(cache=True)
def _value(policy: np.ndarray, legal: np.ndarray, truth: np.ndarray, reachable: np.ndarray) -> float:
    size, faces, _ = policy.shape
    reach = np.zeros((size, 2, faces))
    values = np.zeros((size, faces))
    _forward(policy, legal, reachable, reach)
    # Seat 0's values under the policy itself: run the regret pass on a scratch copy.
    scratch = np.zeros(policy.shape)
    sums = np.zeros(policy.shape)
    _backward(0, policy, legal, truth, reachable, reach, values, scratch, sums, 0.0, False)
    return float(values[0].sum())


class Solver:
    """CFR+ on one small game; :meth:`average` is the equilibrium estimate."""

    def __init__(self, game: SmallGame) -> None:
        self.game = game
        size = 1 << game.bids
        self.reachable = _reachable(game.legal, game.bids)
        self.regrets = np.zeros((size, game.faces, game.bids + 1))
        self.ssum = np.zeros_like(self.regrets)
        self.iterations = 0

    def run(self, iterations: int) -> None:
        """Run ``iterations`` more CFR+ iterations."""
        g = self.game
        _cfr_plus(iterations, self.iterations, g.legal, g.truth, self.reachable, self.regrets, self.ssum)
        self.iterations += iterations

    def average(self) -> np.ndarray:
        """The normalised average strategy, uniform over the legal actions where never reached."""
        return normalise(self.game, self.ssum, self.reachable)

    def solve(
        self,
        target: float,
        max_iterations: int = 100_000,
        check_every: int = 25,
        progress: Callable[[int, float, float], None] | None = None,
    ) -> float:
        """Iterate until the average strategy's exploitability is <= ``target``; returns the final exploitability."""
        start = time.perf_counter()
        while True:
            self.run(check_every)
            expl = exploitability(self.game, self.average(), self.reachable)
            if progress is not None:
                progress(self.iterations, expl, time.perf_counter() - start)
            if expl <= target or self.iterations >= max_iterations:
                return expl


def legal_mask(game: SmallGame, m: int) -> np.ndarray:
    """The legal actions (bids then liar) at public node ``m``."""
    last = _last_bid(m)
    ok = np.zeros(game.bids + 1, dtype=np.bool_)
    ok[: game.bids] = game.legal[last + 1]
    ok[game.bids] = m != 0
    return ok


def normalise(game: SmallGame, weights: np.ndarray, reachable: np.ndarray | None = None) -> np.ndarray:
    """Turn nonnegative weights [mask, die, action] into a policy (uniform over the legal actions where all zero)."""
    if reachable is None:
        reachable = _reachable(game.legal, game.bids)
    policy = np.zeros_like(weights)
    for m in np.flatnonzero(reachable):
        ok = legal_mask(game, int(m))
        w = weights[m] * ok
        total = w.sum(axis=1, keepdims=True)
        uniform = ok / ok.sum()
        policy[m] = np.where(total > 0, w / np.where(total > 0, total, 1.0), uniform)
    return policy


def exploitability(game: SmallGame, policy: np.ndarray, reachable: np.ndarray | None = None) -> float:
    """Exact exploitability (mean best-response gain of the two seats) of a policy [mask, die, action]."""
    if reachable is None:
        reachable = _reachable(game.legal, game.bids)
    br = _br_values(policy, game.legal, game.truth, reachable)
    return float(br.sum() / 2.0)


def best_response_values(game: SmallGame, policy: np.ndarray) -> tuple[float, float]:
    """What a best response gets against ``policy`` as seat 0 and as seat 1."""
    br = _br_values(policy, game.legal, game.truth, _reachable(game.legal, game.bids))
    return float(br[0]), float(br[1])


def game_value(game: SmallGame, policy: np.ndarray) -> float:
    """Seat 0's (the first bidder's) expected return when both seats play ``policy``."""
    return _value(policy, game.legal, game.truth, _reachable(game.legal, game.bids))


def policy_of(game: SmallGame, probabilities: Callable[[int, int, np.ndarray], np.ndarray]) -> np.ndarray:
    """Tabulate any bot: ``probabilities(mask, die, legal) -> probs`` over bids and liar (die 1-based)."""
    reachable = _reachable(game.legal, game.bids)
    policy = np.zeros((1 << game.bids, game.faces, game.bids + 1))
    for m in np.flatnonzero(reachable):
        ok = legal_mask(game, int(m))
        for d in range(game.faces):
            p = probabilities(int(m), d + 1, ok)
            policy[m, d] = np.where(ok, p, 0.0)
    return policy
