"""A lean two-bot RPS loop: the same Bot objects and calls as the referee, minus the clock.

The referee (``arena_server.referee.loop.play_match``) costs about 15 µs a round for
its fairness machinery; tests and the round robin only need the bots' own
behaviour, so this loop builds the same :class:`Turn` and
:class:`RpsObservation` values the referee sends and calls ``on_match_start``,
``act``, ``on_update`` and ``on_match_end`` in the same order. It never shows a
bot the current round's other move.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from arena_client import (
    Bot,
    MatchInfo,
    MatchResult,
    PublicMove,
    SeatInfo,
    Termination,
    TimeControl,
    Turn,
    Update,
)
from arena_games.rps import RpsObservation, payoff_table

_TC = TimeControl()
_BUDGET = timedelta(seconds=1)
_BANK = timedelta(seconds=10)


@dataclass(frozen=True)
class DuelResult:
    """Seat 0's view of a match."""

    wins: int
    losses: int
    draws: int

    @property
    def rounds(self) -> int:
        return self.wins + self.losses + self.draws

    @property
    def success(self) -> float:
        """The thesis's metric: wins / decisive rounds, in percent (50 when none)."""
        decisive = self.wins + self.losses
        return 100.0 * self.wins / decisive if decisive else 50.0

    @property
    def score(self) -> int:
        """Rounds won minus rounds lost (the match's return for seat 0)."""
        return self.wins - self.losses


def duel(bot_a: Bot, bot_b: Bot, *, signs: int = 3, rounds: int = 1000, match_id: str = "duel") -> DuelResult:
    """Play ``bot_a`` (seat 0) against ``bot_b`` (seat 1) and return seat 0's tally."""
    table = payoff_table(signs)
    bots = (bot_a, bot_b)
    params: dict[str, int | str | bool] = {"signs": signs, "rounds": rounds, "draw_band": 0}
    seats = (SeatInfo(0, getattr(bot_a, "name", "a")), SeatInfo(1, getattr(bot_b, "name", "b")))
    for seat, bot in enumerate(bots):
        bot.on_match_start(MatchInfo(match_id, "rps", dict(params), seat, seats, _TC, ""))
    wants = [bot.wants_updates() for bot in bots]
    actions = tuple(range(signs))
    wins = [0, 0]
    last: tuple[int, ...] = ()
    draws = 0
    for r in range(rounds):
        obs = RpsObservation(signs, rounds, r, (wins[0], wins[1]), last)
        a = int(bot_a.act(Turn(match_id, 2 * r, 0, obs, actions, _BUDGET, _BANK)))
        b = int(bot_b.act(Turn(match_id, 2 * r + 1, 1, obs, actions, _BUDGET, _BANK)))
        if not (0 <= a < signs and 0 <= b < signs):
            raise ValueError(f"illegal action in round {r}: {a}, {b}")
        v = table[a][b]
        if v > 0:
            wins[0] += 1
        elif v < 0:
            wins[1] += 1
        else:
            draws += 1
        last = (a, b)
        if wants[0] or wants[1]:
            after = RpsObservation(signs, rounds, r + 1, (wins[0], wins[1]), last)
            moves = (PublicMove(0, a), PublicMove(1, b))
            for seat, bot in enumerate(bots):
                if wants[seat]:
                    bot.on_update(Update(match_id, moves, after))
    diff = float(wins[0] - wins[1])
    for bot, ret in ((bot_a, diff), (bot_b, -diff)):
        bot.on_match_end(MatchResult(match_id, (ret, -ret), Termination.NORMAL, "all rounds played", ""))
    return DuelResult(wins[0], wins[1], draws)
