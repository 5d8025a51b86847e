"""Plain SVG drawn on the server: rating interval bars, the rating history line, heatmap colours.

No chart library and nothing fetched from the internet: each function returns
markup (escaped where it holds text) that the templates insert as it is, so the
charts show without JavaScript.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from arena_server.ratings.fit import expected_score


def interval_bar(rating: float, ci: float, low: float, high: float, width: int = 160) -> Markup:
    """The rating as a dot on its 95% interval, on a scale from ``low`` to ``high`` shared by the whole table."""
    span = max(high - low, 1.0)

    def x(value: float) -> float:
        return round(4 + (width - 8) * (min(max(value, low), high) - low) / span, 1)

    title = html.escape(f"{rating:.0f} ± {ci:.0f} (95% interval {rating - ci:.0f} to {rating + ci:.0f})")
    return Markup(
        f'<svg class="bar" width="{width}" height="14" viewBox="0 0 {width} 14" role="img" aria-label="{title}">'
        f"<title>{title}</title>"
        f'<line x1="4" y1="7" x2="{width - 4}" y2="7" class="axis"/>'
        f'<rect x="{x(rating - ci)}" y="3" width="{max(x(rating + ci) - x(rating - ci), 1)}" height="8" rx="2" '
        f'class="ci"/><circle cx="{x(rating)}" cy="7" r="3.5" class="mid"/></svg>'
    )


def heat_colour(score: float) -> str:
    """A cell colour for a mean score in [0, 1]: red (loses) through white (even) to green (wins)."""
    s = min(max(score, 0.0), 1.0)
    if s >= 0.5:
        t = (s - 0.5) * 2
        r, g, b = 255 - int(150 * t), 255 - int(60 * t), 255 - int(150 * t)
    else:
        t = (0.5 - s) * 2
        r, g, b = 255 - int(40 * t), 255 - int(160 * t), 255 - int(160 * t)
    return f"#{r:02x}{g:02x}{b:02x}"


@dataclass(frozen=True)
class HistoryPoint:
    """One point of a rating history: after match ``match_id``, the running rating."""

    match_id: int
    at: str
    rating: float


ELO_K = 24.0
"""Step size of the running rating drawn on a bot page (an Elo update per opponent met)."""


def running_ratings(
    results: Sequence[tuple[int, str, Sequence[tuple[str, float]]]], opponents: dict[str, float], start: float
) -> list[HistoryPoint]:
    """A rating history from a bot's rated results in order: an Elo update after every match.

    The ladder stores only the current fit (Bradley-Terry from the pair totals),
    not its past values; this replays the bot's results against each
    opponent's current rating, starting from ``start``, so the line shows how
    its form moved. It is a picture of the trend, not the fitted rating.
    """
    rating = start
    out = []
    for match_id, at, scores in results:
        for opponent, score in scores:
            rating += ELO_K * (score - expected_score(rating, opponents.get(opponent, 1500.0)))
        out.append(HistoryPoint(match_id, at, rating))
    return out


def history_chart(points: Sequence[HistoryPoint], current: float, width: int = 640, height: int = 200) -> Markup:
    """A line chart of a rating history with its range on the left and the current fit as a dashed line."""
    if not points:
        return Markup('<p class="muted">No rated matches yet.</p>')
    values = [p.rating for p in points] + [current]
    low, high = min(values), max(values)
    pad = max((high - low) * 0.1, 10.0)
    low, high = low - pad, high + pad
    left, right, top, bottom = 48, 8, 8, 20
    inner_w, inner_h = width - left - right, height - top - bottom

    def y(v: float) -> float:
        return round(top + inner_h * (high - v) / (high - low), 1)

    n = len(points)

    def x(i: int) -> float:
        return round(left + (inner_w * i / (n - 1) if n > 1 else inner_w / 2), 1)

    path = " ".join(f"{x(i)},{y(p.rating)}" for i, p in enumerate(points))
    ticks = []
    step = _nice_step((high - low) / 4)
    v = math.ceil(low / step) * step
    while v <= high:
        ticks.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(v)}" y2="{y(v)}" class="grid"/>'
            f'<text x="{left - 4}" y="{y(v) + 4}" text-anchor="end">{v:.0f}</text>'
        )
        v += step
    last = points[-1]
    label = html.escape(f"{n} rated matches; running rating {last.rating:.0f}, fitted rating {current:.0f}")
    return Markup(
        f'<svg class="history" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{label}"><title>{label}</title>{"".join(ticks)}'
        f'<line x1="{left}" x2="{width - right}" y1="{y(current)}" y2="{y(current)}" class="fit"/>'
        f'<polyline points="{path}" class="line"/>'
        f'<text x="{left}" y="{height - 4}">match {points[0].match_id}</text>'
        f'<text x="{width - right}" y="{height - 4}" text-anchor="end">match {last.match_id}</text></svg>'
    )


def _nice_step(raw: float) -> float:
    if raw <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * magnitude:
            return float(m * magnitude)
    return float(10 * magnitude)
