"""Rating mathematics: Bradley-Terry with confidence intervals, Plackett-Luce, crosstable cells.

Nothing here touches the database; :mod:`arena_server.store.ratings` feeds it
aggregated counts and stores what comes out.

Two-player pools use a Bradley-Terry model fitted by Newton's method on the
pairwise totals (games and score per pair, a draw counting half a win). The
model is ``P(i beats j) = 1 / (1 + exp(-(r_i - r_j)))`` with a weak Gaussian
prior ``r ~ N(0, PRIOR_SD^2)`` on every rating, which keeps the fit finite for
unbeaten bots and for pools split into parts that never met. Ratings are
reported relative to the pool's average, which is 1500. The 95% interval is
``±1.96`` standard deviations of ``r_i - mean(r)`` from the inverse of the
negative Hessian of the log posterior (the Fisher information plus the
prior), in Elo points (``400 / ln 10`` per unit).

Newton's method runs to full convergence (from the previous ratings when the
ladder refits, from zero when recomputing), so the same totals give the same
ratings up to floating-point noise; stored values are rounded to 1e-6 Elo,
far above that noise, which is what lets ``arena ratings recompute`` compare
exactly.

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
Z95 = 1.959963984540054
PL_ELO_PER_MU = ELO_PER_UNIT / (math.sqrt(2.0) * 25.0 / 6.0)
"""Plackett-Luce mu to Elo-like points: two players with equal sigma-free beta=25/6
differ by one logistic unit per sqrt(2)*beta of mu."""


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

    def as_dict(self) -> dict[str, tuple[float, float]]:
        return {n: (r, c) for n, r, c in zip(self.names, self.ratings, self.ci, strict=True)}


def fit_bradley_terry(
    names: Sequence[str], pairs: Sequence[PairTotal], tol: float = 1e-10, start: Mapping[str, float] | None = None
) -> Fit:
    """Fit ratings for ``names`` from pairwise totals.

    Args:
        names: Every bot of the pool (a bot without games gets the prior: 1500 ± 1960).
        pairs: Aggregated results; bots missing from ``names`` are added.
        tol: Stop when no rating moves by more than this many logistic units.
        start: Ratings (Elo) to start Newton's method from, e.g. the previous fit; it
            converges to the same optimum in fewer steps.
    """
    return fit_rows(names, [(p.a, p.b, p.games, p.score_a) for p in pairs], tol, start)


def fit_rows(
    names: Sequence[str],
    rows: Sequence[tuple[str, str, int, float]],
    tol: float = 1e-10,
    start: Mapping[str, float] | None = None,
) -> Fit:
    """:func:`fit_bradley_terry` on ``(a, b, games, score_a)`` rows, as read from the database."""
    all_names = sorted(set(names) | {r[0] for r in rows} | {r[1] for r in rows})
    k = len(all_names)
    if k == 0:
        return Fit((), (), (), 0)
    index = {n: i for i, n in enumerate(all_names)}
    live = [r for r in rows if r[2] > 0]
    ia = np.fromiter((index[r[0]] for r in live), dtype=np.intp, count=len(live))
    ib = np.fromiter((index[r[1]] for r in live), dtype=np.intp, count=len(live))
    n = np.fromiter((r[2] for r in live), dtype=np.float64, count=len(live))
    s = np.fromiter((r[3] for r in live), dtype=np.float64, count=len(live))
    r0 = None
    if start:
        r0 = np.array([(start.get(name, BASE_RATING) - BASE_RATING) / ELO_PER_UNIT for name in all_names])
    return _newton(tuple(all_names), ia, ib, n, s, tol, r0)


def _newton(
    names: tuple[str, ...],
    ia: np.ndarray[Any, Any],
    ib: np.ndarray[Any, Any],
    n: np.ndarray[Any, Any],
    s: np.ndarray[Any, Any],
    tol: float,
    r0: np.ndarray[Any, Any] | None = None,
) -> Fit:
    k = len(names)
    prior_precision = (ELO_PER_UNIT / PRIOR_SD_ELO) ** 2
    r = np.zeros(k) if r0 is None else r0.astype(np.float64)
    iterations = 0
    flat_ab = ia * k + ib
    flat_ba = ib * k + ia
    diag_flat = np.arange(k) * (k + 1)

    def information(r: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """The negative Hessian of the log posterior at ``r``, and the model's win chances."""
        p = 1.0 / (1.0 + np.exp(-(r[ia] - r[ib])))
        w = n * p * (1.0 - p)
        flat = np.bincount(flat_ab, w, k * k) + np.bincount(flat_ba, w, k * k)
        flat = -flat
        flat[diag_flat] = flat[diag_flat] + np.bincount(ia, w, k) + np.bincount(ib, w, k) + prior_precision
        return flat.reshape(k, k), p

    for iterations in range(1, 101):  # noqa: B007 - the count is reported
        info, p = information(r)
        resid = s - n * p
        grad = np.bincount(ia, resid, k) - np.bincount(ib, resid, k) - prior_precision * r
        step = np.linalg.solve(info, grad)
        r = r + step
        if float(np.max(np.abs(step))) < tol:
            break
    # Covariance at the optimum: the inverse of the (prior + Fisher) information.
    cov = np.linalg.inv(information(r)[0])
    # Ratings are relative: report them, and their uncertainty, against the pool's average
    # (the variance of r_i - mean(r)); the common shift is known only through the prior.
    row_mean = cov.mean(axis=1)
    var = np.maximum(np.diag(cov) - 2.0 * row_mean + row_mean.mean(), 0.0)
    r = r - r.mean()
    # Rounded to a millionth of an Elo point: multi-threaded BLAS may change the last bits of a
    # solve from one process to the next, and stored ratings must compare equal to recomputed ones.
    ratings = tuple(round(float(x), 6) for x in BASE_RATING + ELO_PER_UNIT * r)
    ci = tuple(round(float(x), 6) for x in Z95 * ELO_PER_UNIT * np.sqrt(var))
    return Fit(names, ratings, ci, iterations)


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
