"""Exact best response and abstract CFR for the 2-player, single-round Liar's Dice games with k dice each.

With two dice each (24 bids) the public tree has 2**24 bid histories, too many
to tabulate a full-recall policy over, but not too many to walk. So policies
here are *Markov*: the information set of a seat is (its seat, its roll as a
multiset, the current bid), an array ``[seat, roll, node, action]`` with node
``last + 1`` (0: the opening) and action ``B`` (the number of bids) "liar";
with ``memory=2`` the node also remembers the bid before the current one.
Every hosted bot is of the first kind in these games: the learners' roulette
depends on the current bid only, the statistician on its dice and the current
bid, random on the legal actions, which depend on the current bid.

:func:`best_response_value` is exact *in the full game*: the best responder
has perfect recall. It walks the whole public tree depth first once per seat
(numba, an explicit stack), carrying the opponent's reach over its rolls
(times their chance probabilities) and returning the responder's value vector
over its own rolls, taking the maximum at its own nodes. Subtrees the policy
never enters are skipped. The terminal value of "liar" on bid q x f costs
O(rolls x k) instead of O(rolls**2): the opponent's reach is first summed by
how many of its dice match f.

:class:`AbstractCfr` runs CFR+ (regret matching+, alternating updates, linear
averaging) on the same abstraction. Because both seats' strategies depend on
(node, mover) only, the expected payoff from an abstract node given both
rolls does not depend on the path, so the public tree folds into a DAG of
2 x N nodes (N = B + 1, or (B + 1)**2 remembering two bids): reaches are
summed over paths in a forward pass, and the payoff matrices
``[roll0, roll1]`` are computed bottom up. The abstraction has
imperfect recall, so CFR carries no equilibrium guarantee there; what the
strategy is worth is measured exactly with :func:`exploitability`.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numba as nb
import numpy as np


@dataclass(frozen=True)
class DiceGame:
    """The tables of one 2-player single-round game: rolls, legality, bid matches."""

    dice: int
    faces: int
    bidding: str
    wild: str
    rolls: tuple[tuple[int, ...], ...]  # multisets of faces 1..F, sorted
    prob: np.ndarray  # [R] chance probability of each multiset
    legal: np.ndarray  # [B + 1, B] bool: may bid a after bid `last` (row 0: the opening)
    matches: np.ndarray  # [B, R] int64: dice of roll r that count for bid b (wilds included)
    quantity: np.ndarray  # [B] int64
    memory: int  # bids an information set remembers: 1 (the current bid) or 2 (and the one before)
    node_last: np.ndarray  # [N] int64: the current bid at abstract node n (-1: nothing bid yet)
    child: np.ndarray  # [N, B] int64: the node after bid a at node n, -1 where a is illegal
    order: np.ndarray  # [N] int64: the nodes in an order where every child comes after its parent

    @property
    def bids(self) -> int:
        """The number of bids B (liar is action B)."""
        return 2 * self.dice * self.faces

    def roll_index(self, dice: tuple[int, ...] | list[int]) -> int:
        """The multiset index of a roll given as faces 1..F in any order."""
        return self.rolls.index(tuple(sorted(dice)))

    @property
    def nodes(self) -> int:
        """The number N of abstract nodes."""
        return int(self.node_last.shape[0])

    def node(self, prev: int, last: int) -> int:
        """The abstract node of a history whose last two bids are ``prev``, ``last`` (-1: none)."""
        return node_index(self.bids, self.memory, prev, last)

    def policy_shape(self) -> tuple[int, int, int, int]:
        """``[seat, roll, node, action]``."""
        return 2, len(self.rolls), self.nodes, self.bids + 1


def node_index(nbids: int, memory: int, prev: int, last: int) -> int:
    """Node ``last + 1`` (memory 1) or ``(prev + 1) * (B + 1) + last + 1`` (memory 2)."""
    return last + 1 if memory == 1 else (prev + 1) * (nbids + 1) + last + 1


def make_dice_game(
    dice: int = 2, faces: int = 6, bidding: str = "standard", wild: str = "highest", memory: int = 1
) -> DiceGame:
    """Build the tables of the 2-player, ``dice``-each, single-round game (information sets: ``memory`` bids)."""
    if bidding not in ("standard", "thesis") or wild not in ("none", "ones", "highest"):
        raise ValueError(f"bidding={bidding!r} wild={wild!r}: expected standard|thesis and none|ones|highest")
    if not 1 <= dice <= 3 or not 2 <= faces <= 6:
        raise ValueError(f"dice={dice} faces={faces}: expected 1..3 dice each and 2..6 faces")
    if memory not in (1, 2):
        raise ValueError(f"memory={memory}: expected 1 (the current bid) or 2 (the last two bids)")
    nbids = 2 * dice * faces
    wild_face = {"none": 0, "ones": 1, "highest": faces}[wild]
    rolls = tuple(itertools.combinations_with_replacement(range(1, faces + 1), dice))
    prob = np.zeros(len(rolls))
    for r, roll in enumerate(rolls):
        ways = math.factorial(dice)
        for f in set(roll):
            ways //= math.factorial(roll.count(f))
        prob[r] = ways / faces**dice
    legal = np.zeros((nbids + 1, nbids), dtype=np.bool_)
    legal[0, :] = True
    for last in range(nbids):
        for a in range(nbids):
            if bidding == "standard":
                legal[last + 1, a] = a > last
            else:
                legal[last + 1, a] = a != last and a // faces >= last // faces and a % faces >= last % faces
    matches = np.zeros((nbids, len(rolls)), dtype=np.int64)
    quantity = np.zeros(nbids, dtype=np.int64)
    for b in range(nbids):
        quantity[b] = b // faces + 1
        f = b % faces + 1
        for r, roll in enumerate(rolls):
            matches[b, r] = sum(1 for d in roll if d == f or (wild_face and f != wild_face and d == wild_face))
    if memory == 1:
        pairs = [(-1, last) for last in range(-1, nbids)]
    else:
        pairs = [(prev, last) for prev in range(-1, nbids) for last in range(-1, nbids)]
    n_nodes = len(pairs)
    node_last = np.array([last for _, last in pairs], dtype=np.int64)
    child = np.full((n_nodes, nbids), -1, dtype=np.int64)
    for n, (_, last) in enumerate(pairs):
        for a in range(nbids):
            if legal[last + 1, a]:
                child[n, a] = node_index(nbids, memory, last, a)
    order = np.argsort(node_last, kind="stable").astype(np.int64)  # every bid raises the action number
    return DiceGame(dice, faces, bidding, wild, rolls, prob, legal, matches, quantity, memory, node_last, child, order)


@nb.njit(cache=True)
def _liar_value(
    caller_is_me: bool, last: int, w: np.ndarray, matches: np.ndarray, quantity: np.ndarray, k: int, out: np.ndarray
) -> None:
    """Value of "liar" on bid ``last`` for each of my rolls, against opponent weights ``w`` over its rolls."""
    sums = np.zeros(k + 1)
    total = 0.0
    for r in range(w.shape[0]):
        sums[matches[last, r]] += w[r]
        total += w[r]
    q = quantity[last]
    for r in range(out.shape[0]):
        need = q - matches[last, r]
        true_mass = 0.0
        for c in range(k + 1):
            if c >= need:
                true_mass += sums[c]
        # A true bid makes the caller lose.
        out[r] = total - 2.0 * true_mass if caller_is_me else 2.0 * true_mass - total


@nb.njit(cache=True)
def _best_response(
    i: int,
    policy: np.ndarray,
    child: np.ndarray,
    matches: np.ndarray,
    quantity: np.ndarray,
    prob: np.ndarray,
    k: int,
) -> tuple[float, int]:
    """Seat i's best-response value against seat 1 - i's part of ``policy``; also the number of nodes visited."""
    nbids = child.shape[1]
    nrolls = prob.shape[0]
    o = 1 - i
    depth_max = nbids + 2
    reach = np.zeros((depth_max, nrolls))
    val = np.zeros((depth_max, nrolls))
    node = np.zeros(depth_max, dtype=np.int64)
    nxt = np.zeros(depth_max, dtype=np.int64)
    w = np.zeros(nrolls)
    tv = np.zeros(nrolls)
    for r in range(nrolls):
        reach[0, r] = prob[r]
    visited = 1
    # Initialise the root (seat 0 to move, nothing bid).
    for r in range(nrolls):
        val[0, r] = -1e300 if i == 0 else 0.0
    d = 0
    while True:
        mover = d & 1
        nd = node[d]
        a = nxt[d]
        while a < nbids and child[nd, a] < 0:
            a += 1
        if a >= nbids:
            if d == 0:
                break
            # Node d is finished: fold its value into the parent.
            if (d - 1) & 1 == i:
                for r in range(nrolls):
                    if val[d, r] > val[d - 1, r]:
                        val[d - 1, r] = val[d, r]
            else:
                for r in range(nrolls):
                    val[d - 1, r] += val[d, r]
            d -= 1
            continue
        nxt[d] = a + 1
        c = d + 1
        if mover == o:
            alive = False
            for r in range(nrolls):
                x = reach[d, r] * policy[o, r, nd, a]
                reach[c, r] = x
                if x > 0.0:
                    alive = True
            if not alive:
                continue
        else:
            for r in range(nrolls):
                reach[c, r] = reach[d, r]
        visited += 1
        node[c] = child[nd, a]
        nxt[c] = 0
        # The child's own "liar" option (its mover calls the bid a).
        if c & 1 == i:
            _liar_value(True, a, reach[c], matches, quantity, k, tv)
            for r in range(nrolls):
                val[c, r] = tv[r]
        else:
            for r in range(nrolls):
                w[r] = reach[c, r] * policy[o, r, node[c], nbids]
            _liar_value(False, a, w, matches, quantity, k, tv)
            for r in range(nrolls):
                val[c, r] = tv[r]
        d = c
    total = 0.0
    for r in range(nrolls):
        total += prob[r] * val[0, r]
    return total, visited


def best_response_value(game: DiceGame, policy: np.ndarray, seat: int) -> float:
    """What a perfect-recall best response playing ``seat`` gets against the other seat's part of ``policy``."""
    pol = np.ascontiguousarray(policy, dtype=np.float64)
    value, _ = _best_response(seat, pol, game.child, game.matches, game.quantity, game.prob, game.dice)
    return float(value)


def exploitability(game: DiceGame, policy: np.ndarray) -> float:
    """Exact exploitability in the full game: the mean of the two seats' best-response values (0 at equilibrium)."""
    return (best_response_value(game, policy, 0) + best_response_value(game, policy, 1)) / 2.0


@nb.njit(cache=True)
def _payoffs(
    policy: np.ndarray,
    node_last: np.ndarray,
    child: np.ndarray,
    order: np.ndarray,
    matches: np.ndarray,
    quantity: np.ndarray,
    u: np.ndarray,
) -> None:
    """Seat 0's expected payoff u[node, mover, roll0, roll1] from every abstract node under ``policy``."""
    nbids = child.shape[1]
    nrolls = u.shape[2]
    for k in range(order.shape[0] - 1, -1, -1):
        n = order[k]
        lb = node_last[n]
        for mover in range(2):
            if n == 0 and mover == 1:
                continue
            for r0 in range(nrolls):
                for r1 in range(nrolls):
                    rm = r0 if mover == 0 else r1
                    v = 0.0
                    if lb >= 0:
                        true_bid = matches[lb, r0] + matches[lb, r1] >= quantity[lb]
                        caller_loses = true_bid
                        seat0_loses = caller_loses == (mover == 0)
                        v += policy[mover, rm, n, nbids] * (-1.0 if seat0_loses else 1.0)
                    for a in range(nbids):
                        c = child[n, a]
                        if c >= 0:
                            p = policy[mover, rm, n, a]
                            if p > 0.0:
                                v += p * u[c, 1 - mover, r0, r1]
                    u[n, mover, r0, r1] = v


def game_value(game: DiceGame, policy: np.ndarray) -> float:
    """Seat 0's (the first bidder's) expected return when both seats play ``policy``."""
    n = len(game.rolls)
    u = np.zeros((game.nodes, 2, n, n))
    pol = np.ascontiguousarray(policy, dtype=np.float64)
    _payoffs(pol, game.node_last, game.child, game.order, game.matches, game.quantity, u)
    return float(game.prob @ u[0, 0] @ game.prob)


@nb.njit(cache=True)
def _strategy(regrets: np.ndarray, node_last: np.ndarray, child: np.ndarray, sigma: np.ndarray) -> None:
    _, nrolls, nodes, actions = regrets.shape
    nbids = actions - 1
    for s in range(2):
        for node in range(nodes):
            for r in range(nrolls):
                total = 0.0
                count = 0
                for a in range(actions):
                    ok = child[node, a] >= 0 if a < nbids else node_last[node] >= 0
                    if ok:
                        count += 1
                        if regrets[s, r, node, a] > 0.0:
                            total += regrets[s, r, node, a]
                for a in range(actions):
                    ok = child[node, a] >= 0 if a < nbids else node_last[node] >= 0
                    if not ok:
                        sigma[s, r, node, a] = 0.0
                    elif total > 0.0:
                        x = regrets[s, r, node, a]
                        sigma[s, r, node, a] = x / total if x > 0.0 else 0.0
                    else:
                        sigma[s, r, node, a] = 1.0 / count


@nb.njit(cache=True)
def _cfr_pass(
    i: int,
    weight: float,
    sigma: np.ndarray,
    node_last: np.ndarray,
    child: np.ndarray,
    order: np.ndarray,
    matches: np.ndarray,
    quantity: np.ndarray,
    prob: np.ndarray,
    regrets: np.ndarray,
    sums: np.ndarray,
    reach: np.ndarray,
    u: np.ndarray,
) -> None:
    """One CFR+ update of seat i: forward reaches over the DAG, payoffs bottom up, regrets and averages."""
    nbids = child.shape[1]
    nrolls = prob.shape[0]
    reach[:] = 0.0
    for r in range(nrolls):
        reach[0, 0, 0, r] = 1.0
        reach[0, 0, 1, r] = 1.0
    for k in range(order.shape[0]):
        n = order[k]
        for mover in range(2):
            alive = False
            for r in range(nrolls):
                if reach[n, mover, 0, r] > 0.0 or reach[n, mover, 1, r] > 0.0:
                    alive = True
                    break
            if not alive:
                continue
            for a in range(nbids):
                c = child[n, a]
                if c < 0:
                    continue
                for r in range(nrolls):
                    reach[c, 1 - mover, mover, r] += reach[n, mover, mover, r] * sigma[mover, r, n, a]
                    reach[c, 1 - mover, 1 - mover, r] += reach[n, mover, 1 - mover, r]
    _payoffs(sigma, node_last, child, order, matches, quantity, u)
    o = 1 - i
    sign = 1.0 if i == 0 else -1.0
    w = np.zeros(nrolls)
    cfv = np.zeros((nbids + 1, nrolls))
    for n in range(order.shape[0]):
        lb = node_last[n]
        mover = i
        if n == 0 and mover == 1:
            continue
        alive = False
        for r in range(nrolls):
            w[r] = reach[n, mover, o, r] * prob[r]
            if w[r] > 0.0:
                alive = True
        if not alive:
            continue
        for a in range(nbids + 1):
            ok = child[n, a] >= 0 if a < nbids else lb >= 0
            if not ok:
                continue
            for ri in range(nrolls):
                v = 0.0
                for ro in range(nrolls):
                    r0 = ri if i == 0 else ro
                    r1 = ro if i == 0 else ri
                    if a < nbids:
                        x = sign * u[child[n, a], o, r0, r1]
                    else:
                        true_bid = matches[lb, r0] + matches[lb, r1] >= quantity[lb]
                        x = -1.0 if true_bid else 1.0  # i calls: a true bid loses
                    v += w[ro] * x
                cfv[a, ri] = v
        for ri in range(nrolls):
            base = 0.0
            for a in range(nbids + 1):
                ok = child[n, a] >= 0 if a < nbids else lb >= 0
                if ok:
                    base += sigma[i, ri, n, a] * cfv[a, ri]
            own = reach[n, mover, i, ri]
            for a in range(nbids + 1):
                ok = child[n, a] >= 0 if a < nbids else lb >= 0
                if ok:
                    x = regrets[i, ri, n, a] + cfv[a, ri] - base
                    regrets[i, ri, n, a] = x if x > 0.0 else 0.0
                    sums[i, ri, n, a] += weight * own * sigma[i, ri, n, a]


def legal_table(game: DiceGame) -> np.ndarray:
    """``[node, action]``: the legal actions (bids, then liar) at every abstract node."""
    ok = np.zeros((game.nodes, game.bids + 1), dtype=bool)
    ok[:, : game.bids] = game.child >= 0
    ok[:, game.bids] = game.node_last >= 0
    return ok


def normalise(game: DiceGame, weights: np.ndarray) -> np.ndarray:
    """Turn nonnegative weights ``[seat, roll, node, action]`` into a policy (uniform where all zero)."""
    ok = legal_table(game)
    w = np.where(ok[None, None], weights, 0.0)
    total = w.sum(axis=3, keepdims=True)
    uniform = ok / ok.sum(axis=1, keepdims=True)
    return np.where(total > 0, w / np.where(total > 0, total, 1.0), uniform[None, None])


def legal_actions(game: DiceGame, node: int) -> np.ndarray:
    """The legal actions (bids, then liar) at abstract node ``node``."""
    ok = np.zeros(game.bids + 1, dtype=bool)
    ok[: game.bids] = game.child[node] >= 0
    ok[game.bids] = game.node_last[node] >= 0
    return ok


MarkovBot = Callable[[int, tuple[int, ...], int, np.ndarray], np.ndarray]
"""``probabilities(seat, roll, last bid or -1, legal mask) -> probabilities over bids and liar``."""


def policy_of(game: DiceGame, probabilities: MarkovBot) -> np.ndarray:
    """Tabulate a Markov bot: ``probabilities(seat, roll, last, legal) -> probs`` (last = -1 at the opening)."""
    policy = np.zeros(game.policy_shape())
    last_nodes: dict[int, int] = {}
    for node in range(game.nodes):
        last_nodes.setdefault(int(game.node_last[node]), node)
    for seat in range(2):
        for r, roll in enumerate(game.rolls):
            for last, first in last_nodes.items():
                ok = legal_actions(game, first)
                row = np.where(ok, probabilities(seat, roll, last, ok), 0.0)
                policy[seat, r, game.node_last == last] = row
    return policy


class AbstractCfr:
    """CFR+ over the (seat, roll, current bid) abstraction; :meth:`average` is the strategy to measure."""

    def __init__(self, game: DiceGame) -> None:
        self.game = game
        shape = game.policy_shape()
        n = len(game.rolls)
        self.regrets = np.zeros(shape)
        self.sums = np.zeros(shape)
        self._sigma = np.zeros(shape)
        self._reach = np.zeros((game.nodes, 2, 2, n))
        self._u = np.zeros((game.nodes, 2, n, n))
        self.iterations = 0

    def run(self, iterations: int) -> None:
        """Run ``iterations`` more CFR+ iterations (alternating updates, linear averaging)."""
        g = self.game
        for _ in range(iterations):
            self.iterations += 1
            for i in range(2):
                _strategy(self.regrets, g.node_last, g.child, self._sigma)
                _cfr_pass(
                    i,
                    float(self.iterations),
                    self._sigma,
                    g.node_last,
                    g.child,
                    g.order,
                    g.matches,
                    g.quantity,
                    g.prob,
                    self.regrets,
                    self.sums,
                    self._reach,
                    self._u,
                )

    def average(self) -> np.ndarray:
        """The normalised average strategy."""
        return normalise(self.game, self.sums)


def solve(
    game: DiceGame, iterations: int, check_every: int = 0, progress: Callable[[int, float, float], None] | None = None
) -> AbstractCfr:
    """Run abstract CFR+ for ``iterations``; every ``check_every`` report the exact exploitability to ``progress``."""
    cfr = AbstractCfr(game)
    start = time.perf_counter()
    step = check_every if check_every > 0 else iterations
    while cfr.iterations < iterations:
        cfr.run(min(step, iterations - cfr.iterations))
        if progress is not None and check_every > 0:
            progress(cfr.iterations, exploitability(game, cfr.average()), time.perf_counter() - start)
    return cfr
