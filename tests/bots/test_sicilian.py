"""The sicilian ensemble beats every other hosted RPS bot over 1000-round matches."""

from __future__ import annotations

import pytest

from arena_bots import hosted_bots
from arena_bots.experiments.duel import duel
from arena_bots.rps.sicilian import SicilianBot, beat_cycle
from arena_games.rps import beats

# Bots that play (almost) uniformly at random for a whole 1000-round match cannot be beaten:
# random itself, and with 5 signs MV of order 5 and 6 (3125 / 15625 keys, nearly all rows still empty).
UNBEATABLE = {3: {"random"}, 5: {"random", "markov-5", "markov-6"}}


def opponents() -> list[str]:
    return sorted(n for n, hb in hosted_bots().items() if "rps" in hb.games and n != "sicilian")


@pytest.mark.parametrize("signs", [3, 5])
def test_sicilian_beats_every_other_hosted_rps_bot(signs: int) -> None:
    losses = []
    for i, name in enumerate(opponents()):
        if name in UNBEATABLE[signs]:
            continue
        res = duel(SicilianBot(seed=10 + i), hosted_bots()[name].factory(500 + i), signs=signs, rounds=1000)
        # a 1000-round RPS(LS) score has a standard deviation of about 26-28 under random play
        if res.score < 60:
            losses.append((name, res))
    assert not losses, losses


@pytest.mark.parametrize("signs", [3, 5])
def test_sicilian_is_not_exploited_by_random_players(signs: int) -> None:
    total = 0
    for name in sorted(UNBEATABLE[signs]):
        for seed in range(3):
            total += duel(SicilianBot(seed=seed), hosted_bots()[name].factory(900 + seed), signs=signs).score
    matches = 3 * len(UNBEATABLE[signs])
    assert total > -3 * 28 * matches**0.5  # within three standard deviations of even


@pytest.mark.parametrize("signs", [3, 5, 7, 9])
def test_beat_cycle_visits_every_sign_and_each_step_beats_the_last(signs: int) -> None:
    nxt = beat_cycle(signs)
    assert sorted(nxt) == list(range(signs))
    x, seen = 0, set()
    for _ in range(signs):
        assert beats(signs, nxt[x], x)
        seen.add(x)
        x = nxt[x]
    assert x == 0 and len(seen) == signs


def test_sicilian_is_reproducible_and_resets_between_matches() -> None:
    bot = SicilianBot(seed=4)
    a = duel(bot, hosted_bots()["mupn-2"].factory(1), signs=5, rounds=300)
    b = duel(SicilianBot(seed=4), hosted_bots()["mupn-2"].factory(1), signs=5, rounds=300)
    assert a == b
    again = duel(bot, hosted_bots()["rock"].factory(0), signs=5, rounds=300)
    assert again.wins > 280
