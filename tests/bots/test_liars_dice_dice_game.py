"""Exact full-game best response and abstract CFR+ for the 2-player single-round games with 1 or 2 dice each."""

from __future__ import annotations

import itertools
from datetime import timedelta

import numpy as np
import pytest

from arena_bots.liars_dice import dice_game, small_game
from arena_bots.liars_dice.cfr_bot import CfrBot, load_dice_policy
from arena_client import MatchInfo, SeatInfo, TimeControl, Turn
from arena_games.liars_dice import LiarsDiceBid, LiarsDiceObservation


def random_policy(game: dice_game.DiceGame, seed: int) -> np.ndarray:
    """A skewed random Markov policy (many near-zero probabilities, so pruning gets exercised)."""
    return dice_game.normalise(game, np.random.default_rng(seed).random(game.policy_shape()) ** 6)


@pytest.mark.parametrize(("bidding", "wild"), [("standard", "highest"), ("standard", "none"), ("thesis", "ones")])
def test_one_die_agrees_with_the_independent_bitmask_computation(bidding: str, wild: str) -> None:
    # small_game tabulates a full-recall policy over every bid history (and is itself checked against OpenSpiel);
    # here the same Markov policy, expanded to every history, must give the same best responses and value.
    game = dice_game.make_dice_game(1, 6, bidding, wild)
    full_game = small_game.make_game(6, bidding, wild)
    policy = random_policy(game, 5)

    def expand(mask: int, die: int, legal: np.ndarray) -> np.ndarray:
        seat = bin(mask).count("1") % 2
        return np.asarray(policy[seat, game.roll_index((die,)), mask.bit_length()])

    full = small_game.policy_of(full_game, expand)
    theirs = small_game.best_response_values(full_game, full)
    ours = (dice_game.best_response_value(game, policy, 0), dice_game.best_response_value(game, policy, 1))
    assert ours == pytest.approx(theirs, abs=1e-12)
    assert dice_game.game_value(game, policy) == pytest.approx(small_game.game_value(full_game, full), abs=1e-12)


def brute_force_best_response(game: dice_game.DiceGame, policy: np.ndarray, i: int) -> float:
    """Seat i's best response by plain recursion over ordered rolls and bid histories (slow, independent)."""
    faces, k = game.faces, game.dice
    wild_face = {"none": 0, "ones": 1, "highest": faces}[game.wild]
    ordered = list(itertools.product(range(1, faces + 1), repeat=k))
    index = {roll: game.roll_index(roll) for roll in ordered}
    nbids = game.bids

    def holds(bid: int, mine: tuple[int, ...], theirs: tuple[int, ...]) -> bool:
        q, f = bid // faces + 1, bid % faces + 1
        count = sum(1 for d in mine + theirs if d == f or (wild_face and f != wild_face and d == wild_face))
        return count >= q

    def value(history: tuple[int, ...], mine: tuple[int, ...], reach: dict[tuple[int, ...], float]) -> float:
        """Seat i's counterfactual value at ``history`` with roll ``mine``: sum over the other's rolls."""
        mover = len(history) % 2
        last = history[-1] if history else -1
        options = []
        if history:  # the mover may call
            call = 0.0
            for theirs, w in reach.items():
                p = w if mover == i else w * policy[1 - i, index[theirs], last + 1, nbids]
                loser = mover if holds(last, mine, theirs) else 1 - mover
                call += p * (1.0 if loser != i else -1.0)
            options.append(call)
        raises = [a for a in range(nbids) if game.legal[last + 1, a]]
        if mover == i:
            return max(options + [value((*history, a), mine, reach) for a in raises])
        total = sum(options)
        for a in raises:
            child = {t: w * policy[1 - i, index[t], last + 1, a] for t, w in reach.items()}
            if any(child.values()):
                total += value((*history, a), mine, child)
        return total

    start = {t: 1.0 / len(ordered) for t in ordered}
    return sum(value((), mine, start) for mine in ordered) / len(ordered)


def test_two_dice_agrees_with_brute_force_recursion() -> None:
    # Two dice each, three faces (12 bids, 4096 histories), so plain Python can walk it with ordered rolls.
    game = dice_game.make_dice_game(2, 3, "standard", "highest")
    policy = random_policy(game, 11)
    for seat in (0, 1):
        assert dice_game.best_response_value(game, policy, seat) == pytest.approx(
            brute_force_best_response(game, policy, seat), abs=1e-12
        )


def test_known_two_dice_strategy_by_hand() -> None:
    # Seat 0 opens 1x1 whatever it holds; every later decision calls liar. With sixes wild, 1x1 fails only when
    # none of the four dice is a 1 or a 6: (4/6)**4 = 16/81, so seat 0 gets 1 - 2 * 16/81 = 49/81.
    # A best response wins every game from either seat: as seat 0 bid 1 x (a face it holds), which the caller
    # loses; as seat 1 raise to 1 x (a face >= 2 it holds), or 2x1 on a pair of ones, which holds and is called.
    game = dice_game.make_dice_game(2, 6, "standard", "highest")
    policy = np.zeros(game.policy_shape())
    policy[:, :, 0, 0] = 1.0
    policy[:, :, 1:, game.bids] = 1.0
    assert dice_game.game_value(game, policy) == pytest.approx(49 / 81)
    assert dice_game.best_response_value(game, policy, 0) == pytest.approx(1.0)
    assert dice_game.best_response_value(game, policy, 1) == pytest.approx(1.0)


def test_abstract_cfr_lowers_exploitability_on_a_small_two_dice_game() -> None:
    game = dice_game.make_dice_game(2, 3, "thesis", "ones")
    uniform = dice_game.normalise(game, np.ones(game.policy_shape()))
    cfr = dice_game.AbstractCfr(game)
    cfr.run(50)
    early = dice_game.exploitability(game, cfr.average())
    cfr.run(1950)
    late = dice_game.exploitability(game, cfr.average())
    assert late < early < dice_game.exploitability(game, uniform)
    assert late < 0.005  # deterministic: 0.027 after 50 iterations, 0.00067 after 2000


@pytest.mark.slow
def test_shipped_two_dice_policy_beats_every_other_bot_in_exploitability() -> None:
    from arena_bots.experiments.liars_dice_thesis import markov_policies

    game = dice_game.make_dice_game(2, 6, "standard", "highest")
    figures = {name: dice_game.exploitability(game, policy) for name, policy in markov_policies(game).items()}
    assert figures["cfr"] < 0.30  # 0.2929 when shipped (5000 iterations)
    assert figures["cfr"] < min(v for name, v in figures.items() if name != "cfr")


def test_cfr_bot_plays_the_shipped_two_dice_policy() -> None:
    params: dict[str, int | str | bool] = {
        "players": 2,
        "dice": 2,
        "faces": 6,
        "bidding": "standard",
        "wild": "highest",
        "rounds": "single",
    }
    bot = CfrBot(3)
    seats = (SeatInfo(0, "a"), SeatInfo(1, "b"))
    bot.on_match_start(MatchInfo("m", "liars_dice", params, 0, seats, TimeControl(), ""))
    shipped = load_dice_policy(2, "standard", "highest")
    assert shipped is not None and bot.markov is not None and np.array_equal(bot.markov, shipped)
    # As the responder (seat 1) holding 6-6 after seat 0 opened 2x3: every choice is in the policy's support.
    game = dice_game.make_dice_game(2, 6, "standard", "highest")
    opened = 1 * 6 + 2  # 2x3
    obs = LiarsDiceObservation(2, 6, (2, 2), (6, 6), (LiarsDiceBid(0, 2, 3),), (), 1, 0)
    legal = tuple(int(a) for a in np.flatnonzero(dice_game.legal_actions(game, opened + 1)))
    row = shipped[1, game.roll_index((6, 6)), opened + 1]
    chosen = {bot.act(Turn("m", 0, 1, obs, legal, timedelta(1), timedelta(1))) for _ in range(300)}
    assert all(row[a] > 0 for a in chosen) and len(chosen) >= 2


@pytest.mark.parametrize(("dice", "faces", "bidding", "memory"), [(1, 4, "thesis", 2), (2, 2, "standard", 1)])
def test_abstract_regrets_equal_the_sum_over_every_history(dice: int, faces: int, bidding: str, memory: int) -> None:
    # The DAG pass sums reaches over the paths into a node; by linearity that must equal summing each history's
    # counterfactual regret into its information set. Checked by enumerating every history in plain Python.
    game = dice_game.make_dice_game(dice, faces, bidding, "none", memory)
    nbids, nrolls = game.bids, len(game.rolls)
    sigma = dice_game.normalise(game, np.random.default_rng(3).random(game.policy_shape()) + 0.05)

    def node(h: tuple[int, ...]) -> int:
        return game.node(h[-2] if len(h) > 1 else -1, h[-1] if h else -1)

    def holds(bid: int, r0: int, r1: int) -> bool:
        return bool(game.matches[bid, r0] + game.matches[bid, r1] >= game.quantity[bid])

    memo: dict[tuple[int, ...], np.ndarray] = {}

    def payoff(h: tuple[int, ...]) -> np.ndarray:
        """Seat 0's expected payoff [roll0, roll1] from history h."""
        if h in memo:
            return memo[h]
        n, mover, last = node(h), len(h) % 2, h[-1] if h else -1
        out = np.zeros((nrolls, nrolls))
        for r0, r1 in itertools.product(range(nrolls), repeat=2):
            own = r0 if mover == 0 else r1
            if last >= 0:
                seat0_loses = holds(last, r0, r1) == (mover == 0)
                out[r0, r1] += sigma[mover, own, n, nbids] * (-1.0 if seat0_loses else 1.0)
            for a in range(nbids):
                if game.legal[last + 1, a]:
                    out[r0, r1] += sigma[mover, own, n, a] * payoff((*h, a))[r0, r1]
        memo[h] = out
        return out

    cfv = np.zeros((nrolls, game.nodes, nbids + 1))

    def walk(h: tuple[int, ...], opp: np.ndarray) -> None:
        n, last = node(h), h[-1] if h else -1
        raises = [a for a in range(nbids) if game.legal[last + 1, a]]
        if len(h) % 2 == 0:  # seat 0 decides
            for a in [*raises, nbids] if last >= 0 else raises:
                after = payoff((*h, a)) if a < nbids else None
                for ri, ro in itertools.product(range(nrolls), repeat=2):
                    x = after[ri, ro] if after is not None else (-1.0 if holds(last, ri, ro) else 1.0)
                    cfv[ri, n, a] += opp[ro] * game.prob[ro] * x
            for a in raises:
                walk((*h, a), opp)
        else:
            for a in raises:
                walk((*h, a), opp * sigma[1, :, n, a])

    walk((), np.ones(nrolls))
    expected = np.maximum(cfv - (sigma[0] * cfv).sum(axis=2, keepdims=True), 0.0) * dice_game.legal_table(game)
    cfr = dice_game.AbstractCfr(game)
    dice_game._cfr_pass(
        0, 1.0, sigma, game.node_last, game.child, game.order, game.matches, game.quantity, game.prob,
        cfr.regrets, cfr.sums, cfr._reach, cfr._u,
    )  # fmt: skip
    assert np.abs(cfr.regrets[0] - expected).max() < 1e-12
    assert np.abs(expected).max() > 0.1
