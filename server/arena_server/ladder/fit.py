"""Rating mathematics: Bradley-Terry with confidence intervals, Plackett-Luce, crosstable cells.

Nothing here touches the database; :mod:`arena_server.store.ratings` feeds it
aggregated counts and stores what comes out.

Two-player pools use a Bradley-Terry model fitted on the pairwise totals
(games and score per pair, a draw counting half a win; RPS's draw band
already turned near-even matches into draws). The model is
``P(i beats j) = 1 / (1 + exp(-(r_i - r_j)))`` with a weak Gaussian prior
``r ~ N(0, PRIOR_SD^2)`` (1000 Elo) on every rating, which keeps the fit
finite for unbeaten and winless bots. The fit maximises the log posterior,
which is strictly concave, by Newton's method with a backtracking (Armijo)
line search: globally convergent, so a warm start (the stored ratings) and a
cold one reach the same optimum. Convergence is tested on the gradient; a
safety cap on the steps raises :class:`FitError` instead of storing a wrong
number.

Bots that never met, directly or through others, are in different connected
components of the "played" graph. Each component is fitted on its own and
centred on 1500; ratings of different components are not comparable, and
every bot's component number is reported with its rating. The 95% interval
is ``±1.96`` standard deviations of ``r_i - mean(r)`` over the component,
from the inverse of the negative Hessian of the log posterior at the optimum
(the Fisher information plus the prior), in Elo points (``400 / ln 10`` per
unit). A bot without games keeps the prior: 1500 ± 1960.

Pools of more than two seats (Liar's Dice with 3..6 players) use openskill's
Plackett-Luce model over the finishing order, updated match by match in the
order the matches were rated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

ELO_PER_UNIT = 400.0 / math.log(10.0)
"""Elo points per natural-log odds unit."""
BASE_RATING = 1500.0
PRIOR_SD_ELO = 1000.0
"""Standard deviation of the weak prior on every rating, in Elo points."""
PRIOR_PRECISION = (ELO_PER_UNIT / PRIOR_SD_ELO) ** 2
"""The prior's precision in log-odds units (about 0.0302)."""
GRAD_TOL = 1e-9
"""Converged when no bot's gradient component of the log posterior exceeds this times (1 + its games)."""
NEWTON_DECREMENT_TOL = 1e-18
"""Or when the squared Newton decrement is below this (the optimum is within ~1e-8 log-odds)."""
MAX_NEWTON_STEPS = 10_000
"""A safety cap only: a damped Newton fit of a concave function needs tens of steps; hitting it raises."""
Z95 = 1.959963984540054
PL_ELO_PER_MU = ELO_PER_UNIT / (math.sqrt(2.0) * 25.0 / 6.0)
"""Plackett-Luce mu to Elo-like points: two players with equal sigma-free beta=25/6
differ by one logistic unit per sqrt(2)*beta of mu."""


class FitError(RuntimeError):
    """The fit did not converge (never expected; reported rather than storing a wrong rating)."""


@dataclass(frozen=True)
class PairTotal:
    """Everything two bots did against each other in one pool (``a`` < ``b``)."""

    a: str
    b: str
    games: int
    score_a: float
    wins_a: int
    draws: int
    losses_a: int


@dataclass(frozen=True)
class Fit:
    """A Bradley-Terry fit: ``ratings[i]`` ± ``ci[i]`` (Elo) for ``names[i]``."""

    names: tuple[str, ...]
    ratings: tuple[float, ...]
    ci: tuple[float, ...]
    iterations: int
    component: tuple[int, ...] = ()
    """Connected component of the "played" graph per bot; ratings compare only within one."""

    def as_dict(self) -> dict[str, tuple[float, float]]:
        return {n: (r, c) for n, r, c in zip(self.names, self.ratings, self.ci, strict=True)}


def fit_bradley_terry(
    names: Sequence[str], pairs: Sequence[PairTotal], tol: float = GRAD_TOL, start: Mapping[str, float] | None = None
) -> Fit:
    """Fit ratings for ``names`` from pairwise totals.

    Args:
        names: Every bot of the pool (a bot without games gets the prior: 1500 ± 1960).
        pairs: Aggregated results; bots missing from ``names`` are added.
        tol: Converged when every bot's gradient component of the log posterior is below
            ``tol * (1 + its games)``.
        start: Ratings (Elo) to start from, e.g. the previous fit. The optimum does not depend
            on it (the log posterior is strictly concave and every step is line-searched).
    """
    return fit_rows(names, [(p.a, p.b, p.games, p.score_a) for p in pairs], tol, start)


def fit_rows(
    names: Sequence[str],
    rows: Sequence[tuple[str, str, int, float]],
    tol: float = GRAD_TOL,
    start: Mapping[str, float] | None = None,
) -> Fit:
    """:func:`fit_bradley_terry` on ``(a, b, games, score_a)`` rows, as read from the database."""
    all_names = sorted(set(names) | {r[0] for r in rows} | {r[1] for r in rows})
    k = len(all_names)
    if k == 0:
        return Fit((), (), (), 0, ())
    index = {n: i for i, n in enumerate(all_names)}
    live = [r for r in rows if r[2] > 0 and r[0] != r[1]]
    ia = np.fromiter((index[r[0]] for r in live), dtype=np.intp, count=len(live))
    ib = np.fromiter((index[r[1]] for r in live), dtype=np.intp, count=len(live))
    n = np.fromiter((r[2] for r in live), dtype=np.float64, count=len(live))
    s = np.fromiter((r[3] for r in live), dtype=np.float64, count=len(live))
    r0 = np.zeros(k)
    if start:
        r0 = np.array([(start.get(name, BASE_RATING) - BASE_RATING) / ELO_PER_UNIT for name in all_names])
        r0 = np.where(np.isfinite(r0), r0, 0.0)
    component = components(k, ia, ib)
    ratings = np.full(k, BASE_RATING)
    ci = np.full(k, Z95 * PRIOR_SD_ELO)
    iterations = 0
    for c in range(int(component.max()) + 1 if k else 0):
        members = np.flatnonzero(component == c)
        if len(members) == 1:
            continue  # no games: the prior alone, 1500 ± 1.96 prior SDs
        local = np.full(k, -1, dtype=np.intp)
        local[members] = np.arange(len(members))
        mask = component[ia] == c
        r, sd, steps = _fit_component(local[ia[mask]], local[ib[mask]], n[mask], s[mask], r0[members], tol)
        iterations = max(iterations, steps)
        ratings[members] = BASE_RATING + ELO_PER_UNIT * r
        ci[members] = Z95 * ELO_PER_UNIT * sd
    # Rounded to a millionth of an Elo point, far below the 0.01 Elo the fit is checked to.
    return Fit(
        tuple(all_names),
        tuple(round(float(x), 6) for x in ratings),
        tuple(round(float(x), 6) for x in ci),
        iterations,
        tuple(int(x) for x in component),
    )


def components(k: int, ia: np.ndarray[Any, Any], ib: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Connected components of the "played" graph on ``k`` bots, numbered 0, 1, ... in order of their first bot."""
    label = np.arange(k, dtype=np.intp)
    while True:  # min-label propagation with pointer jumping: a few passes for any real pool
        low = np.minimum(label[ia], label[ib])
        nxt = label.copy()
        np.minimum.at(nxt, ia, low)
        np.minimum.at(nxt, ib, low)
        nxt = nxt[nxt]
        if np.array_equal(nxt, label):
            break
        label = nxt
    _, first = np.unique(label, return_inverse=True)
    return first.astype(np.intp)  # type: ignore[no-any-return]


def _fit_component(
    ia: np.ndarray[Any, Any],
    ib: np.ndarray[Any, Any],
    n: np.ndarray[Any, Any],
    s: np.ndarray[Any, Any],
    r0: np.ndarray[Any, Any],
    tol: float,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], int]:
    """MAP ratings (log-odds units, mean 0), their standard deviations and the Newton steps taken.

    Damped Newton on the strictly concave log posterior: every step is the full
    Newton direction shortened by backtracking until the Armijo condition holds,
    which converges to the unique optimum from any start.
    """
    k = len(r0)
    prec = PRIOR_PRECISION
    games = np.bincount(ia, n, k) + np.bincount(ib, n, k)

    def value(r: np.ndarray[Any, Any]) -> float:
        d = r[ia] - r[ib]
        # log p = -log(1 + e^-d), log(1 - p) = -log(1 + e^d)
        return float(-(s @ np.logaddexp(0.0, -d)) - ((n - s) @ np.logaddexp(0.0, d)) - 0.5 * prec * (r @ r))

    def gradient(r: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        p = _sigmoid(r[ia] - r[ib])
        resid = s - n * p
        return np.bincount(ia, resid, k) - np.bincount(ib, resid, k) - prec * r, n * p * (1.0 - p)

    scale = tol * (1.0 + games)  # gradient tolerance per bot
    r = r0 - r0.mean()  # the optimum has mean 0 (the prior is the only force on the common shift)
    f = value(r)
    for step in range(1, MAX_NEWTON_STEPS + 1):  # noqa: B007 - the count is reported
        g, w = gradient(r)
        direction = _newton_direction(k, ia, ib, w, g)
        slope = float(g @ direction)  # > 0: the negative Hessian is positive definite
        if bool(np.all(np.abs(g) < scale)) or slope < NEWTON_DECREMENT_TOL:
            # Converged; one last full Newton step (quadratic convergence) removes what is left.
            r = r + direction
            break
        t = 1.0
        while True:
            candidate = r + t * direction
            fc = value(candidate)
            if fc >= f + 1e-4 * t * slope or t < 1e-12:
                break
            t *= 0.5
        if fc <= f:  # no ascent possible in floating point: we are at the optimum's noise floor
            break
        r, f = candidate, fc
    else:
        raise FitError(
            f"Bradley-Terry fit did not converge in {MAX_NEWTON_STEPS} Newton steps "
            f"(gradient {float(np.max(np.abs(gradient(r)[0]))):.3g}); please report this"
        )
    cov_diag = np.diag(np.linalg.inv(_information(k, ia, ib, gradient(r)[1])))
    # Ratings are relative: their uncertainty is that of r_i - mean(r) over the component. The
    # information is prec * I plus a graph Laplacian, so information @ 1 = prec * 1 and every row of
    # the covariance sums to 1 / prec: var(r_i - mean r) = cov_ii - 1 / (prec * k).
    var = np.maximum(cov_diag - 1.0 / (prec * k), 0.0)
    return r - r.mean(), np.sqrt(var), step


def _information(
    k: int, ia: np.ndarray[Any, Any], ib: np.ndarray[Any, Any], w: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    """The negative Hessian of the log posterior (dense): the prior plus the ``w``-weighted Laplacian."""
    flat: np.ndarray[Any, Any] = -(np.bincount(ia * k + ib, w, k * k) + np.bincount(ib * k + ia, w, k * k))
    flat[np.arange(k) * (k + 1)] += np.bincount(ia, w, k) + np.bincount(ib, w, k) + PRIOR_PRECISION
    return flat.reshape(k, k)


def _newton_direction(
    k: int, ia: np.ndarray[Any, Any], ib: np.ndarray[Any, Any], w: np.ndarray[Any, Any], g: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    """Solve ``information @ x = g`` by conjugate gradients on the sparse pairs.

    No dense factorisation per step: it is O(pairs) per iteration, and it keeps
    multi-threaded BLAS (which stalls badly on a loaded two-core machine) out of
    the loop; only the final covariance uses a dense inverse.
    """
    diag = np.bincount(ia, w, k) + np.bincount(ib, w, k) + PRIOR_PRECISION

    def apply(v: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return diag * v - np.bincount(ia, w * v[ib], k) - np.bincount(ib, w * v[ia], k)  # type: ignore[no-any-return]

    # Jacobi-preconditioned conjugate gradients, to a relative residual of 1e-12.
    x: np.ndarray[Any, Any] = g / diag
    res = g - apply(x)
    z = res / diag
    d = z.copy()
    rz = float(res @ z)
    goal = 1e-24 * float(g @ g)
    for _ in range(10 * k):
        if float(res @ res) <= goal:
            break
        hd = apply(d)
        alpha = rz / float(d @ hd)
        x += alpha * d
        res -= alpha * hd
        z = res / diag
        rz_next = float(res @ z)
        d = z + (rz_next / rz) * d
        rz = rz_next
    return x


def _sigmoid(d: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.exp(-np.logaddexp(0.0, -d))  # type: ignore[no-any-return]


def expected_score(rating_a: float, rating_b: float) -> float:
    """The model's expected score of ``a`` against ``b``."""
    return float(1.0 / (1.0 + 10.0 ** ((rating_b - rating_a) / 400.0)))


def score_interval(games: int, wins: int, draws: int, losses: int) -> tuple[float, float, float]:
    """Mean score per game and its 95% interval (normal approximation, clipped to [0, 1]).

    The variance is the observed per-game variance of the 1 / 0.5 / 0 scores,
    with a floor of one imagined draw's worth so 10-0 does not claim certainty.
    """
    if games <= 0:
        return 0.5, 0.0, 1.0
    mean = (wins + 0.5 * draws) / games
    var = (wins * (1 - mean) ** 2 + draws * (0.5 - mean) ** 2 + losses * mean**2) / games
    var = max(var, 0.25 / (games + 1))
    half = Z95 * math.sqrt(var / games)
    return mean, max(0.0, mean - half), min(1.0, mean + half)


def ranks_from_returns(returns: Sequence[float]) -> list[int]:
    """Finishing places from returns: 1 for the best; seats with equal returns share a place."""
    return [1 + sum(1 for other in returns if other > r) for r in returns]


def pair_score(rank_a: int, rank_b: int) -> float:
    """``a``'s score against ``b`` from their places: 1, 0.5 or 0."""
    return 1.0 if rank_a < rank_b else 0.5 if rank_a == rank_b else 0.0


# -- Plackett-Luce (openskill) ------------------------------------------------------------------------

_MODEL: Any = None


def _pl_model() -> Any:
    global _MODEL
    if _MODEL is None:
        from openskill.models import PlackettLuce

        _MODEL = PlackettLuce()
    return _MODEL


def pl_default() -> tuple[float, float]:
    """openskill's starting (mu, sigma)."""
    model = _pl_model()
    return float(model.mu), float(model.sigma)


def pl_update(current: Sequence[tuple[float, float]], ranks: Sequence[int]) -> list[tuple[float, float]]:
    """One Plackett-Luce update: (mu, sigma) per seat after a match with these places."""
    model = _pl_model()
    teams = [[model.rating(mu=mu, sigma=sigma)] for mu, sigma in current]
    rated = model.rate(teams, ranks=list(ranks))
    return [(float(t[0].mu), float(t[0].sigma)) for t in rated]


def pl_display(mu: float, sigma: float) -> tuple[float, float]:
    """A Plackett-Luce (mu, sigma) as an Elo-like rating ± 95% half-width."""
    mu0, _ = pl_default()
    return BASE_RATING + PL_ELO_PER_MU * (mu - mu0), Z95 * PL_ELO_PER_MU * sigma
