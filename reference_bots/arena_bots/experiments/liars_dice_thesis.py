"""``arena experiment liars-dice-thesis``: the Liar's Dice thesis's three experiments, a crosstable and exploitability.

Reruns Lohn (2024)'s experiments (``specs/liars-dice-thesis.md`` section 3)
under its rules (2 players, 5 dice each, thesis bidding, no wilds, the loser
opens; both sides learning online from fresh tables, which carry over between
a run's games and iterations): plain SARSA vs Q-learning (95 games in two
iterations, 11 + 84), modified SARSA vs Q-learning (5516 games in three
iterations, 2310 + 2198 + 1008) and modified SARSA vs our ``cfr`` (1000 games;
the thesis gives no count). Seats alternate between games so neither side
always opens the first round. Each win rate gets a 95% normal interval and
the thesis's figure beside it; the running win rate per 10 games is drawn as
an SVG (the thesis's figure 5.1). Then: crosstables of every hosted Liar's
Dice bot in the thesis game with 2 and 3 players, and the exact
exploitability of every bot in the 1-die game (standard bidding, highest
face wild, single round).
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from arena_bots.experiments import RunMany, Units, output_path
from arena_bots.liars_dice import dice_game, thesis_cfr
from arena_bots.liars_dice.bots import LearnerBot, StatisticianBot
from arena_bots.liars_dice.cfr_bot import load_dice_policy, load_policy, load_thesis
from arena_bots.liars_dice.learners import ThesisLearner
from arena_bots.liars_dice.play import THESIS_PARAMS, play_game
from arena_bots.liars_dice.small_game import Solver, exploitability, game_value, make_game, policy_of
from arena_bots.registry import BotState, HostedBot, hosted_bots
from arena_client import Bot, MatchInfo, SeatInfo, TimeControl, Turn
from arena_games.liars_dice import LiarsDiceBid, LiarsDiceGame, LiarsDiceObservation

DOCUMENT = "docs/experiments/liars-dice-thesis.md"
"""The committed document a full run writes (a --quick run never does)."""

LEARNERS = {"sarsa": (True, False), "sarsa-profiling": (True, True), "q-learning": (False, False)}
SMALL = {"dice": 1, "bidding": "standard", "wild": "highest", "rounds": "single"}


def interval(wins: int, games: int) -> tuple[float, float]:
    """Win rate in percent and the half-width of its 95% normal interval."""
    if games == 0:
        return 0.0, 0.0
    p = wins / games
    return 100.0 * p, 196.0 * math.sqrt(p * (1.0 - p) / games)


class Pair:
    """Two learners (or a learner and another bot) whose tables carry over between games."""

    def __init__(self, a: str, b: str, seed: int, hosted: dict[str, HostedBot] | None = None) -> None:
        self.names = (a, b)
        self.hosted = hosted if hosted is not None else hosted_bots()
        self.rng = np.random.default_rng(seed)
        self.tables: dict[str, ThesisLearner] = {}
        for name in (a, b):
            if name in LEARNERS:
                sarsa, profiling = LEARNERS[name]
                self.tables[name] = ThesisLearner(10, 6, sarsa, profiling, self.rng)
        self.seed = seed

    def bot(self, name: str, k: int) -> Bot:
        if name in self.tables:
            sarsa, profiling = LEARNERS[name]
            return LearnerBot(
                name, sarsa, profiling, self.seed * 1_000_003 + k, persist=False, shared=self.tables[name]
            )
        return self.hosted[name].factory(self.seed * 1_000_003 + k)

    def play(self, games: int, start: int = 0) -> list[int]:
        """Play ``games`` games; 1 where the first-named bot won. Seats alternate."""
        out = []
        for k in range(start, start + games):
            a, b = self.bot(self.names[0], 2 * k), self.bot(self.names[1], 2 * k + 1)
            first = k % 2 == 0
            returns, _ = play_game([a, b] if first else [b, a], THESIS_PARAMS, self.rng, f"g{k}")
            out.append(int((returns[0] > 0) == first))
        return out


def svg_running(series: dict[str, list[int]], refs: dict[str, float], path: Path) -> None:
    """Running win rate per 10 games as a small standalone SVG (no plotting library needed)."""
    width, height, pad = 640, 320, 40
    longest = max(len(v) for v in series.values())
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]

    def xy(i: int, pct: float) -> tuple[float, float]:
        return pad + (width - 2 * pad) * i / max(longest, 1), height - pad - (height - 2 * pad) * pct / 100.0

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        'font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    for pct in (0, 25, 50, 75, 100):
        x0, y = xy(0, pct)
        parts.append(f'<line x1="{x0}" y1="{y}" x2="{width - pad}" y2="{y}" stroke="#ddd"/>')
        parts.append(f'<text x="4" y="{y + 4}">{pct}%</text>')
    parts.append(f'<text x="{width / 2 - 30}" y="{height - 8}">games ({longest})</text>')
    for n, (label, wins) in enumerate(series.items()):
        colour = colours[n % len(colours)]
        points = []
        total = 0
        for i, w in enumerate(wins, 1):
            total += w
            if i % 10 == 0 or i == len(wins):
                x, y = xy(i, 100.0 * total / i)
                points.append(f"{x:.1f},{y:.1f}")
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{" ".join(points)}"/>')
        parts.append(f'<text x="{pad + 8}" y="{pad + 14 * n}" fill="{colour}">{label}</text>')
        if label in refs:
            x0, y = xy(0, refs[label])
            parts.append(
                f'<line x1="{x0}" y1="{y}" x2="{width - pad}" y2="{y}" stroke="{colour}" stroke-dasharray="4 3"/>'
            )
    parts.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts) + "\n")


def small_game_policies() -> dict[str, np.ndarray]:
    """Every hosted bot's policy in the 1-die game (learners by their initial roulette weights)."""
    game = make_game()
    ld = LiarsDiceGame(players=2, **SMALL)
    policies: dict[str, np.ndarray] = {}
    uniform = policy_of(game, lambda m, d, ok: ok / ok.sum())
    policies["random"] = uniform
    for name, (sarsa, profiling) in LEARNERS.items():
        learner = ThesisLearner(2, 6, sarsa, profiling, np.random.default_rng(0))

        def probs(mask: int, die: int, ok: np.ndarray, learner: ThesisLearner = learner) -> np.ndarray:
            bids = [a for a in range(game.bids) if ok[a]]
            last = mask.bit_length() - 1
            bid = None if mask == 0 else (last // 6 + 1, last % 6 + 1)
            p = learner.probabilities(bid, [(a // 6 + 1, a % 6 + 1) for a in bids])
            out = np.zeros(len(ok))
            out[bids] = p[:-1]
            out[-1] = p[-1]
            return out

        policies[name] = policy_of(game, probs)
    stat = StatisticianBot(0)
    seats = (SeatInfo(0, "a"), SeatInfo(1, "b"))
    stat.on_match_start(MatchInfo("x", "liars_dice", dict(ld.params), 0, seats, TimeControl(), ""))

    def stat_probs(mask: int, die: int, ok: np.ndarray) -> np.ndarray:
        bids_made = [a for a in range(game.bids) if mask >> a & 1]
        mover = len(bids_made) % 2
        bids = tuple(
            LiarsDiceBid((mover + len(bids_made) - i) % 2, a // 6 + 1, a % 6 + 1) for i, a in enumerate(bids_made)
        )
        obs = LiarsDiceObservation(2, 6, (1, 1), (die,), bids, (), mover, 0)
        legal = tuple(int(a) for a in np.flatnonzero(ok))
        action = stat.act(Turn("x", 0, mover, obs, legal, timedelta(1), timedelta(1)))
        out = np.zeros(len(ok))
        out[action] = 1.0
        return out

    policies["statistician"] = policy_of(game, stat_probs)
    cfr = load_policy("standard", "highest")
    assert cfr is not None
    policies["cfr"] = cfr
    return policies


def markov_policies(game: dice_game.DiceGame) -> dict[str, np.ndarray]:
    """Every hosted bot's policy [seat, roll, current bid, action] in a 2-player single-round ``game``.

    These bots are Markov in that sense: the learners' roulette (initial weights) sees the current bid only,
    the statistician its dice and the current bid, random the legal actions. ``cfr`` is the shipped abstract
    CFR+ policy where one exists for ``game``.
    """
    nbids = game.bids
    faces = game.faces
    params = {"dice": game.dice, "faces": faces, "bidding": game.bidding, "wild": game.wild, "rounds": "single"}
    policies = {"random": dice_game.policy_of(game, lambda seat, roll, last, ok: ok / ok.sum())}
    for name, (sarsa, profiling) in LEARNERS.items():
        learner = ThesisLearner(2 * game.dice, faces, sarsa, profiling, np.random.default_rng(0))

        def probs(
            seat: int, roll: tuple[int, ...], last: int, ok: np.ndarray, learner: ThesisLearner = learner
        ) -> np.ndarray:
            bids = [a for a in range(nbids) if ok[a]]
            bid = None if last < 0 else (last // faces + 1, last % faces + 1)
            p = learner.probabilities(bid, [(a // faces + 1, a % faces + 1) for a in bids])
            out = np.zeros(len(ok))
            out[bids] = p[:-1]
            out[-1] = p[-1] if last >= 0 else 0.0
            return out

        policies[name] = dice_game.policy_of(game, probs)
    stat = StatisticianBot(0)
    ld = LiarsDiceGame(players=2, **params)
    seats = (SeatInfo(0, "a"), SeatInfo(1, "b"))
    stat.on_match_start(MatchInfo("x", "liars_dice", dict(ld.params), 0, seats, TimeControl(), ""))

    def stat_probs(seat: int, roll: tuple[int, ...], last: int, ok: np.ndarray) -> np.ndarray:
        bids = () if last < 0 else (LiarsDiceBid(1 - seat, last // faces + 1, last % faces + 1),)
        obs = LiarsDiceObservation(2, faces, (game.dice, game.dice), roll, bids, (), seat, 0)
        legal = tuple(int(a) for a in np.flatnonzero(ok))
        action = stat.act(Turn("x", 0, seat, obs, legal, timedelta(1), timedelta(1)))
        out = np.zeros(len(ok))
        out[action] = 1.0
        return out

    policies["statistician"] = dice_game.policy_of(game, stat_probs)
    cfr = load_dice_policy(game.dice, game.bidding, game.wild, faces)
    if cfr is not None:
        policies["cfr"] = cfr
    return policies


def dice_game_section(rep: Report, quick: bool) -> None:
    """Exploitability of every bot in the 2-dice game, and abstract CFR+'s convergence there."""
    faces = 3 if quick else 6
    game = dice_game.make_dice_game(2, faces, "standard", "highest")
    rep.add(f"## Exploitability in the 2-dice game ({faces} faces, standard bidding, highest face wild, single round)")
    rep.add()
    rep.add(
        f"Exact best responses in the full game ({1 << game.bids} bid histories, walked depth first once per seat "
        "with the opponent's reach over its rolls; the best responder has perfect recall) against each bot's "
        "policy, which depends on its seat, its roll and the current bid. The learners are measured by their "
        "initial roulette weights (M = 4)."
    )
    rep.add()
    rep.add("| Bot | Exploitability | First bidder's value in self-play |")
    rep.add("|---|---|---|")
    t0 = time.perf_counter()
    policies = markov_policies(game)
    walks = 0
    for name, policy in policies.items():
        expl, value = dice_game.exploitability(game, policy), dice_game.game_value(game, policy)
        rep.add(f"| {name} | {expl:.4f} | {value:+.4f} |")
        walks += 2
    walk = (time.perf_counter() - t0) / walks
    rep.add()
    rep.add(
        f"One best-response walk took {walk:.2f} s on average here (tabulating the bots included). `cfr` is the "
        "shipped policy (`arena train liars-dice-cfr --game two-dice`, 5000 iterations of the abstract CFR+ "
        "below). The learners' exploitability is that of their *initial* roulette: they learn online, so a "
        "learned table would be a different (still Markov, still dice-blind) policy."
    )
    rep.add()
    levels = (100, 500) if quick else (500, 2000, 5000, 10000)
    cfr = dice_game.AbstractCfr(game)
    rep.add(
        "Abstract CFR+ (information set = seat, roll, current bid; the public tree folds into a DAG of "
        f"{2 * (game.bids + 1)} nodes, vectorised over both rolls, numba), from scratch here:"
    )
    rep.add()
    rep.add("| Iterations | Seconds | Exploitability (full game) | First bidder's value |")
    rep.add("|---|---|---|---|")
    spent = 0.0
    for n in levels:
        t0 = time.perf_counter()
        cfr.run(n - cfr.iterations)
        spent += time.perf_counter() - t0
        avg = cfr.average()
        expl, value = dice_game.exploitability(game, avg), dice_game.game_value(game, avg)
        rep.add(f"| {n} | {spent:.1f} | {expl:.4f} | {value:+.4f} |")
    rep.add()
    rep.add(
        "What is exact and what is not: the best responses and the values are exact in the full game (no "
        "sampling, no abstraction on the responder's side). The abstraction forgets every bid but the current "
        "one (imperfect recall), so CFR+ on it has no convergence guarantee and levels off at the exploitability "
        "shown instead of going to 0. The regrets it accumulates are the exact sums over every history in each "
        "information set (a test enumerates the histories), so the plateau is the abstraction's, not a bug. "
        "Remembering one more bid does not reliably help, as the 1-die games, whose full-recall equilibria are "
        "known, show (abstract CFR+ from scratch, exact full-game exploitability): it helps with standard "
        "bidding and sixes wild and is far worse elsewhere."
    )
    rep.add()
    iterations = 100 if quick else 3000
    rep.add(f"| 1-die game ({iterations} iterations) | Remembers the current bid | Remembers the last two bids |")
    rep.add("|---|---|---|")
    for bidding, wild in (("standard", "highest"), ("standard", "none"), ("thesis", "highest"), ("thesis", "none")):
        cells = []
        for memory in (1, 2):
            small = dice_game.make_dice_game(1, 6, bidding, wild, memory)
            run = dice_game.AbstractCfr(small)
            run.run(iterations)
            cells.append(f"{dice_game.exploitability(small, run.average()):.4f}")
        rep.add(f"| {bidding}, {wild} wild | {cells[0]} | {cells[1]} |")
    rep.add()
    rep.add(
        "So `cfr` ships the one-bid abstraction in the 2-dice games and the full-recall equilibrium in the 1-die "
        "games. In the 2-dice game with standard bidding and the highest face wild, the two-bid abstraction "
        "(1250 nodes, about 80 ms an iteration) was at 0.40 after 1000 iterations when tried, against 0.29 for "
        "the one-bid abstraction."
    )
    rep.add()


def weak_cfr_rows(quick: bool, seed: int) -> list[tuple[int, float, int]]:
    """Per scale: the (2, 2) round's exploitability and modified SARSA's wins (one unit of work: one shared rng)."""
    import tempfile

    from arena_bots.liars_dice.cfr_bot import CfrBot

    scales = (1, 100) if quick else (1, 3, 10, 30, 100, 1000)
    games = 20 if quick else 400
    rows = []
    rng = np.random.default_rng(seed + 500)
    with tempfile.TemporaryDirectory() as tmp:
        for n, scale in enumerate(scales):

            def per_round(a: int, b: int, scale: int = scale) -> int:
                return scale * (a + b)

            value, policies = thesis_cfr.solve(thesis_cfr.MAX_DICE, per_round, progress=lambda _: None, seed=seed + n)
            state = BotState(Path(tmp) / f"s{scale}")
            thesis_cfr.save(state.directory / "cfr-thesis.npz", value, policies)
            table = ThesisLearner(10, 6, True, True, rng)
            wins = 0
            for k in range(games):
                sarsa = LearnerBot("sarsa-profiling", True, True, k, persist=False, shared=table)
                cfr = CfrBot(k, state)
                first = k % 2 == 0
                returns, _ = play_game([sarsa, cfr] if first else [cfr, sarsa], THESIS_PARAMS, rng, f"w{k}")
                wins += int((returns[0] > 0) == first)
            rows.append((scale, thesis_cfr.round_exploitability(value, policies, 2), wins))
    return rows


def weak_cfr_section(
    rep: Report, quick: bool, seed: int, log: Callable[[str], None], rows: list[tuple[int, float, int]] | None = None
) -> None:
    """Modified SARSA (fresh, learning online) against DP-CFR solved with fewer and fewer iterations."""
    games = 20 if quick else 400
    rep.add("## Why 0.2% and not 25%: modified SARSA against weaker CFR solutions")
    rep.add()
    rep.add(
        f"The thesis's game again; `cfr` plays the DP-CFR solved with only `scale x (a + b)` sampled iterations per "
        f"round (the shipped one used 20000 x (a + b)); a fresh modified SARSA learns online over {games} games "
        "per row, seats alternating. The exact exploitability of the (2, 2) round (perfect-recall best response, "
        "later rounds' values fixed) says how far each solution is from an equilibrium."
    )
    rep.add()
    rep.add("| Iterations per die per round | (2, 2) round exploitability | Modified SARSA's win % (95% CI) |")
    rep.add("|---|---|---|")
    for scale, expl, wins in rows if rows is not None else weak_cfr_rows(quick, seed):
        pct, half = interval(wins, games)
        rep.add(f"| {scale} | {expl:.4f} | {pct:.1f}% ± {half:.1f} |")
        log(f"weak cfr scale {scale}: sarsa-profiling {pct:.1f}% ± {half:.1f}")
    rep.add()


class Report:
    """Collects markdown and echoes progress."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.lines: list[str] = []
        self.log = log

    def add(self, text: str = "") -> None:
        self.lines.append(text)


NAMES = ("random", "statistician", "cfr", "sarsa", "sarsa-profiling", "q-learning")
"""The crosstables' bots."""


def experiment_units(a: str, b: str, seed: int, iterations: tuple[int, ...]) -> list[list[int]]:
    """One of the three experiments (one unit of work): each iteration's wins of ``a``, the tables carried over."""
    pair = Pair(a, b, seed)
    results: list[list[int]] = []
    done = 0
    for games in iterations:
        results.append(pair.play(games, start=done))
        done += games
    return results


def pair_wins(a: str, b: str, seed: int, games: int) -> list[int]:
    """One pair of the 2-player crosstable (one unit of work), learners fresh."""
    return Pair(a, b, seed).play(games)


def three_player_table(seed: int, games_3p: int) -> tuple[dict[str, int], dict[str, int], dict[str, float]]:
    """Every trio of :data:`NAMES`, ``games_3p`` games each (one unit of work: the trios share one rng).

    Returns:
        Wins, games played and total return per bot.
    """
    names = list(NAMES)
    rng = np.random.default_rng(seed + 300)
    wins3 = dict.fromkeys(names, 0)
    played = dict.fromkeys(names, 0)
    score = dict.fromkeys(names, 0.0)
    hosted = hosted_bots()
    for trio in itertools.combinations(names, 3):
        tables = {bot_name: ThesisLearner(15, 6, *LEARNERS[bot_name], rng) for bot_name in trio if bot_name in LEARNERS}
        for k in range(games_3p):
            order = [trio[(k + i) % 3] for i in range(3)]
            bots: list[Bot] = [
                LearnerBot(bot_name, *LEARNERS[bot_name], k, persist=False, shared=tables[bot_name])
                if bot_name in tables
                else hosted[bot_name].factory(k)
                for bot_name in order
            ]
            returns, _ = play_game(bots, {**THESIS_PARAMS, "players": 3}, rng)
            for bot_name, ret in zip(order, returns, strict=True):
                played[bot_name] += 1
                score[bot_name] += ret
                wins3[bot_name] += int(ret == max(returns))
    return wins3, played, score


def _apply(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """``fn(*args)``: lets one batch of units mix different kinds of work."""
    return fn(*args)


def run(quick: bool, seed: int, out: Path, log: Callable[[str], None], pool: RunMany | None = None) -> str:
    """Run everything (the independent units on ``pool`` when given, ``--ray``); returns the markdown document."""
    started = time.perf_counter()
    rep = Report(log)
    rep.add("# Liar's Dice thesis experiments (Lohn 2024), rerun")
    rep.add()
    rep.add(
        f"Generated by `arena experiment liars-dice-thesis{' --quick' if quick else ''}` (seed {seed}). Rules: "
        "2 players, 5 dice each, thesis bidding, no wilds, loser opens, elimination. Both sides learn online "
        "from fresh tables that carry over between the games and iterations of an experiment; seats alternate."
    )
    rep.add()
    scale = 10 if quick else 1
    exp1 = (11, 84)
    exp2 = (2310, 2198, 1008)
    exp3 = (1000,)
    if quick:
        exp1, exp2, exp3 = (11, 20), (60, 40, 30), (50,)
    rep.add("## The three experiments")
    rep.add()
    rep.add("| Experiment | Iteration | Games | Our win % (95% CI) | Thesis |")
    rep.add("|---|---|---|---|---|")
    series: dict[str, list[int]] = {}
    thesis: dict[str, tuple[tuple[int | None, int | None], ...]] = {
        "plain SARSA vs Q-learning": ((4, 11), (46, 84)),
        "modified SARSA vs Q-learning": ((1610, 2310), (1447, 2198), (697, 1008)),
        "modified SARSA vs cfr": ((None, None),),
    }
    plans = [
        ("plain SARSA vs Q-learning", "sarsa", "q-learning", exp1),
        ("modified SARSA vs Q-learning", "sarsa-profiling", "q-learning", exp2),
        ("modified SARSA vs cfr", "sarsa-profiling", "cfr", exp3),
    ]
    names = list(NAMES)
    games_2p = 200 // scale
    games_3p = 60 // scale
    pairs = list(itertools.combinations(names, 2))
    calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] = [
        *[(experiment_units, (a, b, seed + n, iterations)) for n, (_, a, b, iterations) in enumerate(plans)],
        *[(pair_wins, (a, b, seed + 100 + names.index(a) * 10 + names.index(b), games_2p)) for a, b in pairs],
        (three_player_table, (seed, games_3p)),
        (weak_cfr_rows, (quick, seed)),
    ]
    units = Units(pool, len(calls), "liars-dice-thesis")
    try:
        done = units.run(_apply, calls)
    finally:
        units.close()
    for n, (label, _, _, iterations) in enumerate(plans):
        results: list[int] = []
        for it, (games, wins) in enumerate(zip(iterations, done[n], strict=True)):
            results += wins
            pct, half = interval(sum(wins), games)
            won, of = thesis[label][it]
            theirs = "≈ 25% (read off a graph, no game count)"
            if won is not None and of is not None:
                theirs = f"{100 * won / of:.2f}% ({won}/{of}, ±{interval(won, of)[1]:.1f})"
            rep.add(f"| {label} | {it + 1} | {games} | {pct:.2f}% ± {half:.2f} | {theirs} |")
            log(f"{label} iteration {it + 1}: {pct:.2f}% ± {half:.2f} over {games} games")
        if len(iterations) > 1:
            pct, half = interval(sum(results), len(results))
            total = [sum(x or 0 for x in column) for column in zip(*thesis[label], strict=True)]
            rep.add(
                f"| {label} | all | {len(results)} | {pct:.2f}% ± {half:.2f} | "
                f"{100 * total[0] / total[1]:.2f}% ({total[0]}/{total[1]}) |"
            )
        series[label] = results
    svg = out.with_suffix(".svg")
    svg_running(series, {"modified SARSA vs Q-learning": 68.06, "modified SARSA vs cfr": 25.0}, svg)
    rep.add()
    rep.add(f"Running win rate of the first-named bot, per 10 games (dashed: the thesis's figure): ![]({svg.name})")
    rep.add()
    solved = load_thesis()
    if solved is not None:
        value, policies = solved
        rep.add(
            "Our `cfr` in this game plays the dynamic-programming CFR (`arena train liars-dice-cfr --game thesis`, "
            "shipped in the package as `data/cfr-thesis.npz`, probabilities quantised to 1/255); its value for "
            f"the opener of a 5-vs-5 round is {value[5, 5]:+.4f}. Its exact exploitability in the rounds small "
            "enough to walk (perfect-recall best response over the full round, later rounds' values fixed): "
            f"{thesis_cfr.round_exploitability(value, policies, 1):.4f} in the 1-vs-1 round and "
            f"{thesis_cfr.round_exploitability(value, policies, 2):.4f} in the 2-vs-2 round (whose stakes are "
            f"±{-value[1, 2]:.3f}, the value of losing a die there)."
        )
    else:
        rep.add(
            "Our `cfr` had no thesis-game strategy in this run (neither shipped nor trained), so in experiment 3 "
            "it played as the statistician."
        )
    rep.add()
    rep.add("Differences beyond the intervals, and why:")
    rep.add()
    rep.add(
        "* Plain SARSA vs Q-learning agrees with the thesis (the intervals overlap): both use the same "
        "initial table and roulette, and without the profile neither has an edge."
    )
    rep.add(
        "* Modified SARSA beats Q-learning far more often than in the thesis. Our tables start from the "
        "initial values, where Q-learning's roulette makes many bids that turn out false (mostly in the "
        "high bucket: faces 5 and 6, whatever the quantity), and the lie profile turns that into well-timed "
        "liar calls at once. The thesis's Q files had an unknown history before the reported runs (\"after "
        'several attempts", spec 3 and 5.10), so its Q-learner had presumably drifted to fewer false bids; '
        "the thesis's iteration-2 dip is also not reproduced as a dip here, only as noise."
    )
    rep.add(
        "* Modified SARSA vs our cfr: the learners never look at their own dice, so any opponent that does "
        "(the statistician, our cfr) wins almost every game. The thesis's unidentified CFR program let SARSA "
        'win about a quarter of the games. The experiment in the section "Why 0.2% and not 25%" below '
        "finds the reason plausible and quantifies it: the same DP-CFR stopped after only about 10-30 sampled "
        "iterations per die per round (a few thousand in all, instead of our three million) lets a fresh "
        "modified SARSA win a quarter to a half of the games, and from about 100 on SARSA wins almost none. "
        "So the thesis's ≈ 25% is what a far-from-converged CFR gives; the thesis reports neither its CFR's "
        "iterations nor its exploitability, so this cannot be confirmed, only matched."
    )
    rep.add()

    rep.add(f"## Crosstable, 2 players ({games_2p} games per pair; row's win %; learners start fresh per pair)")
    rep.add()
    rep.add("| | " + " | ".join(names) + " |")
    rep.add("|---" * (len(names) + 1) + "|")
    table = {(r, c): "" for r in names for c in names}
    for (a, b), wins in zip(pairs, done[len(plans) : len(plans) + len(pairs)], strict=True):
        pct, half = interval(sum(wins), len(wins))
        table[a, b] = f"{pct:.0f} ± {half:.0f}"
        table[b, a] = f"{100 - pct:.0f} ± {half:.0f}"
    for r in names:
        rep.add(f"| {r} | " + " | ".join(table[r, c] or "—" for c in names) + " |")
    log("2-player crosstable done")
    rep.add()
    rep.add(f"## 3 players ({games_3p} games per trio, seats rotated; wins and mean return per bot)")
    rep.add()
    rep.add("With 3 players `cfr` has no solved strategy and plays as the statistician.")
    rep.add()
    wins3, played, score = done[len(plans) + len(pairs)]
    rep.add("| Bot | Games | Wins % | Mean return |")
    rep.add("|---|---|---|---|")
    for bot_name in sorted(names, key=lambda b: -score[b] / played[b]):
        mean = score[bot_name] / played[bot_name]
        rep.add(f"| {bot_name} | {played[bot_name]} | {100 * wins3[bot_name] / played[bot_name]:.1f} | {mean:+.3f} |")
    log("3-player table done")
    rep.add()
    rep.add("## Exploitability in the 1-die game (standard bidding, highest face wild, single round)")
    rep.add()
    rep.add(
        "Exact best responses (mean of the two seats' gains; 0 = equilibrium, 1 = loses every game). The "
        "learners are measured by their initial roulette weights (M = 2); the first bidder's value at "
        "equilibrium is -0.0276."
    )
    rep.add()
    rep.add("| Bot | Exploitability | First bidder's value in self-play |")
    rep.add("|---|---|---|")
    game = make_game()
    for name, policy in small_game_policies().items():
        rep.add(f"| {name} | {exploitability(game, policy):.4f} | {game_value(game, policy):+.4f} |")
    rep.add()
    solver = Solver(game)
    solver.run(1)  # compile outside the clock
    solver = Solver(game)
    t0 = time.perf_counter()
    expl = solver.solve(0.001, check_every=10)
    rep.add(
        f"CFR+ (alternating updates, vectorised over both dice, numba) reached exploitability {expl:.5f} after "
        f"{solver.iterations} iterations in {time.perf_counter() - t0:.1f} s here (a best response every 10 "
        f"iterations included), value {game_value(game, solver.average()):+.4f}. The exploitability and the value "
        "are cross-checked against OpenSpiel's C++ `exploitability` and `TabularBestResponse` on its own "
        "`liars_dice` game (`tests/bots/test_liars_dice_cfr.py`, slow tests)."
    )
    rep.add()
    dice_game_section(rep, quick)
    log("2-dice exploitability done")
    weak_cfr_section(rep, quick, seed, log, done[-1])
    rep.add(f"Wall time: {time.perf_counter() - started:.0f} s.")
    return "\n".join(rep.lines) + "\n"


def main(argv: Sequence[str] | None = None, pool: RunMany | None = None) -> int:
    """Run the experiments (the independent units on ``pool``, ``--ray``); returns an exit code."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--output", "--out", dest="out", default=None, help=f"default {DOCUMENT}; with --quick a temporary file"
    )
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args(argv)
    out = output_path(args.out, DOCUMENT, args.quick)

    def log(msg: str) -> None:
        print(msg, flush=True)

    text = run(args.quick, args.seed, out, log, pool)
    out.write_text(text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
