"""``arena experiment rpsls-thesis``: the RPSLS thesis's experiments rerun, plus an RPS round robin.

Reruns every table of Bizjak (2020) (``specs/rpsls-thesis.md`` §4) with its
match lengths: 100,000 rounds per algorithm-vs-algorithm match, 1,000,000 per
match against a pre-generated string (10 random strings, 10 strings per
fixed-preference period k = 3, 10, 100, and :data:`STRINGS_PER_P` strings per
rock probability p = 10%..90%), every studied algorithm swept over its
parameters (MUPN and MV over r = 1..6; SUPP, MKSU and MKIA over r = 1..6 and
epsilon 0.9 and 0.95), one run per setting, fresh state per match. Matches run
in the numba kernels the hosted bots use (:mod:`arena_bots.rps.thesis_kernels`).

Each table is printed with our figure, the thesis's and the difference, and
all of them are written as markdown (default ``docs/experiments/rpsls-thesis.md``),
with an explanation wherever a cell differs by more than 2 points. Then every
hosted RPS bot plays every other for 1000 rounds with 3 and with 5 signs
(through the real Bot objects, :func:`arena_bots.experiments.duel.duel`) and
the crosstables are appended.

``--quick`` runs 5,000/20,000-round matches, fewer strings and 200-round
round-robin matches, for CI.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

import arena_bots.rps.thesis_agents as T
import arena_bots.rps.thesis_kernels as K
from arena_bots import hosted_bots
from arena_bots.experiments import output_path
from arena_bots.experiments.duel import duel
from arena_bots.progress import Steps

DOCUMENT = "docs/experiments/rpsls-thesis.md"
"""The committed document a full run writes (a --quick run never does)."""

SIGNS = 5
ORDERS = (1, 2, 3, 4, 5, 6)
EPSILONS = (0.9, 0.95)
P_VALUES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
PERIODS = (3, 10, 100)
STRINGS_PER_P = 1
STUDIED = ("MUPN", "MV", "SUPP", "MKSU", "MKIA")
OPPONENTS = ("VP", "VPS", "VO", "VK", "MUPN", "MV", "Random", "SUPP", "MKSU")

# ---- the thesis's figures (specs/rpsls-thesis.md §4)
THESIS_T41 = {
    "VP": (50, 60, 58, 58, 60),
    "VPS": (86, 86, 94, 93, 94),
    "VO": (100, 100, 98, 99, 100),
    "VK": (100, 100, 98, 100, 100),
    "MUPN": (50, 50, 49, 50, 50),
    "MV": (50, 50, 50, 50, 50),
    "Random": (50, 50, 50, 50, 50),
    "SUPP": (50, 50, 49, 50, 50),
    "MKSU": (50, 49, 49, 50, 50),
}
THESIS_T42 = (65.11, 66.11, 66.11, 66.56, 67.11)
THESIS_T44 = (58.0, 60.0)
THESIS_FIXED = {
    100: [(50, 51, 50, 50, 50)] + [(50, 50, 50, 50, 50)] * 5,
    10: [
        (50, 56, 52, 54, 54),
        (51, 56, 52, 54, 54),
        (51, 56, 53, 54, 54),
        (51, 56, 53, 54, 54),
        (51, 55, 52, 53, 54),
        (51, 53, 51, 53, 53),
    ],
    3: [
        (57, 69, 67, 67, 67),
        (65, 69, 67, 67, 68),
        (66, 69, 68, 68, 68),
        (67, 69, 67, 68, 68),
        (68, 69, 65, 67, 68),
        (68, 69, 66, 67, 68),
    ],
}
THESIS_FIXED_AVG = {10: (50.83, 55.33, 52.17, 53.67, 53.83), 3: (65.00, 69.00, 66.67, 66.67, 67.83)}
THESIS_T411 = [
    (51, 52, 53, 50, 53),
    (50, 50, 50, 50, 50),
    (51, 57, 53, 55, 54),
    (54, 65, 59, 61, 61),
    (58, 71, 66, 68, 68),
    (65, 78, 72, 74, 75),
    (72, 84, 79, 81, 81),
    (81, 89, 85, 88, 87),
    (90, 95, 90, 93, 93),
]
THESIS_T410 = (63.56, 71.22, 67.44, 68.89, 69.11)
THESIS_T412 = {
    "VP": (60, 56),
    "VPS": (86, 87),
    "VO": (100, 100),
    "VK": (100, 100),
    "MUPN": (50, 48),
    "MV": (50, 50),
    "Random": (50, 50),
    "SUPP": (50, 49),
    "MKSU": (49, 48),
}
THESIS_T413 = [(56, 53), (56, 54), (56, 55), (56, 54), (55, 54), (53, 53)]
THESIS_T414 = [(52, 47), (50, 50), (57, 57), (65, 65), (71, 71), (78, 78), (84, 84), (89, 89), (95, 95)]


def fixed_ceiling(k: int) -> float:
    """Appendix A: best decisive-only success against rock-every-k-th strings."""
    return 100.0 * (1 + 0.4 * (k - 1)) / (1 + 0.8 * (k - 1))


def biased_ceiling(p: float) -> float:
    """Appendix A: best decisive-only success against P(rock) = p strings."""
    if p >= 0.2:
        return 100.0 * (3 * p + 1) / (p + 3)
    q = (1 - p) / 4
    return 100.0 * 2 * q / (3 * q + p)


@dataclass(frozen=True)
class Plan:
    """Match lengths and string counts of one run."""

    rounds_vs_algorithms: int
    rounds_vs_strings: int
    random_strings: int
    strings_per_period: int
    strings_per_p: int
    round_robin_rounds: int


FULL = Plan(100_000, 1_000_000, 10, 10, STRINGS_PER_P, 1000)
QUICK = Plan(5_000, 20_000, 2, 2, 1, 200)


def studied_settings(name: str) -> list[tuple[str, T.AgentSpec]]:
    """The thesis's sweep for one studied algorithm: (setting label, spec)."""
    if name == "MUPN":
        return [(f"r={r}", T.mupn(r)) for r in ORDERS]
    if name == "MV":
        return [(f"r={r}", T.mv(r)) for r in ORDERS]
    if name == "MV+pre":
        return [(f"r={r}", T.mv(r, preprocess=True)) for r in ORDERS]
    make: Callable[[int, float], T.AgentSpec] = {"SUPP": T.supp, "MKSU": T.mksu, "MKIA": T.mkia}[name]
    return [(f"r={r},eps={e}", make(r, e)) for r in ORDERS for e in EPSILONS]


def opponent_spec(name: str) -> T.AgentSpec:
    return {
        "VP": T.vp(),
        "VPS": T.vps(),
        "VO": T.vo(),
        "VK": T.vk(),
        "MUPN": T.mupn(),
        "MV": T.mv(),
        "Random": T.random_agent(),
        "SUPP": T.supp(),
        "MKSU": T.mksu(),
    }[name]


def success(out: np.ndarray) -> float:
    """wins / (wins + losses) in percent (the thesis's metric)."""
    decisive = int(out[0] + out[1])
    return 100.0 * int(out[0]) / decisive if decisive else 50.0


def make_strings(plan: Plan, seed: int) -> dict[str, list[np.ndarray]]:
    """The string families, generated once so every algorithm plays the same strings."""
    n = plan.rounds_vs_strings
    fams: dict[str, list[np.ndarray]] = {}
    fams["random"] = [
        np.random.default_rng([seed, 1, i]).integers(0, SIGNS, n, dtype=np.int64) for i in range(plan.random_strings)
    ]
    for k in PERIODS:
        out = []
        for i in range(plan.strings_per_period):
            s = np.random.default_rng([seed, 2, k, i]).integers(0, SIGNS, n, dtype=np.int64)
            s[k - 1 :: k] = 0  # every k-th move is rock (period k, spec §4.3)
            out.append(s)
        fams[f"fixed{k}"] = out
    for p in P_VALUES:
        probs = [p] + [(1 - p) / 4] * 4
        fams[f"p{round(p * 100)}"] = [
            np.random.default_rng([seed, 3, round(p * 100), i]).choice(SIGNS, size=n, p=probs).astype(np.int64)
            for i in range(plan.strings_per_p)
        ]
    return fams


class Runner:
    """Runs matches with reproducible per-match seeds and keeps timing."""

    def __init__(self, seed: int, log: Callable[[str], None]) -> None:
        self.seed = seed
        self.counter = itertools.count(1)
        self.log = log

    def next_seed(self) -> int:
        return self.seed * 1_000_003 + next(self.counter)

    def vs_agent(self, spec: T.AgentSpec, opp: T.AgentSpec, rounds: int) -> float:
        a = T.build_agent(spec, SIGNS, self.next_seed())
        b = T.build_agent(opp, SIGNS, self.next_seed())
        return success(K.play_agents(*a, *b, rounds))

    def vs_string(self, spec: T.AgentSpec, seq: np.ndarray) -> float:
        a = T.build_agent(spec, SIGNS, self.next_seed())
        return success(K.play_vs_string(*a, seq))


def fmt(x: float) -> str:
    return f"{x:.2f}"


def cell(ours: float, thesis: float | None) -> str:
    if thesis is None:
        return fmt(ours)
    d = ours - thesis
    mark = "**" if abs(d) > 2 else ""
    return f"{mark}{ours:.2f} / {thesis:g} ({d:+.2f}){mark}"


class Report:
    """Collects markdown and the list of cells that differ by more than 2 points."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.big: list[str] = []

    def table(self, title: str, header: Sequence[str], rows: Sequence[Sequence[str]], note: str = "") -> None:
        self.lines += ["", f"### {title}", ""]
        if note:
            self.lines += [note, ""]
        self.lines.append("| " + " | ".join(header) + " |")
        self.lines.append("|" + "---|" * len(header))
        for row in rows:
            self.lines.append("| " + " | ".join(row) + " |")
        print(f"\n{title}")
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
        for row in [list(header), *map(list, rows)]:
            print("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)))

    def compare(self, where: str, ours: float, thesis: float) -> str:
        if abs(ours - thesis) > 2:
            self.big.append(f"{where}: ours {ours:.2f}, thesis {thesis:g} ({ours - thesis:+.2f})")
        return cell(ours, thesis)


EXPLANATIONS = """\
Why cells differ by more than 2 points (from the full run; every listed cell falls under one of these):

1. **MKSU (16 of the 19 cells).** The thesis never lists MKSU's "nine" sub-agents (spec §3.4). Ours follows
   the eight non-meta agents MUPN, MV, SUPP, VK, VO, VP, VPS and random; five of them are fixed strategies
   that are pure noise against VP, VPS and the strings, and the meta still follows them during its first r
   rounds, whenever it explores (10% or 5%) and until their Q-values fall below the learners'. So our MKSU
   sits 2-4 points under the thesis's, which is 0-2 points under its MKIA. The Q-learning meta itself
   matches: MKIA, the same code over MUPN, MV and SUPP, is within 1.1 points of the thesis in every cell.
   A closer MKSU needs the thesis's unlisted sub-agents and their parameters.
2. **MV against VPS (Table 4.1/4.3).** MV fixes each key's prediction on one of VPS's two counters, which
   gives 75% (3 wins, 1 loss) or 100% (3 wins, 1 draw) for that key, 85.7% on average (spec Appendix A).
   With one run per order the mean scatters by about 2 points: order 3 alone gives 82.5-88.0 over seeds
   1-8 (mean 84.6). MUPN, which overwrites its successor every round, lands on 85.7 with no scatter.
3. **SUPP against VPS.** Per order (epsilon 0.9) our SUPP scores 95.8, 95.4, 94.4, 92.7, 89.6, 86.7: the
   orders 5 and 6 (3,125 and 15,625 states of 5 Q-values, random initial values) are still learning after
   100,000 rounds. The thesis's 94 needs faster learning at long orders; its Q initialisation range and
   whether it learns before a full key exists are unstated (spec §3.3).
4. **MV with preprocessing against VP (Table 4.12).** MV against VP depends strongly on the order (single
   runs at orders 1-6: 48.7, 67.0, 73.0, 66.2, 55.3, 52.1) and varies by several points between runs. Our
   MV and MV+pre agree (59.6 and 59.3); the thesis's drop from 60 to 56 is within single-run scatter, and
   the 0.9/0.1 mixture only changes the argmax of near-flat rows.

Everything else, including the RL agents against VK/VO (capped at 96.9% on average by 5-10% exploration,
spec §7 item 15), the fixed-preference strings (MV at the Appendix A ceilings) and the preprocessing drop
at P(rock) = 10% (46.8 against the thesis's 47), is within 2 points. Quick mode (5,000/20,000-round
matches, fewer strings) is noisy and learns less; only the full run is comparable with the thesis.
"""


def experiment_algorithms(plan: Plan, run: Runner, rep: Report) -> dict[str, dict[str, list[float]]]:
    """Experiment 1 (§4.1): studied settings x test opponents. Returns results[studied][opponent]."""
    results: dict[str, dict[str, list[float]]] = {}
    for name in (*STUDIED, "MV+pre"):
        results[name] = {}
        for opp in OPPONENTS:
            results[name][opp] = [
                run.vs_agent(spec, opponent_spec(opp), plan.rounds_vs_algorithms) for _, spec in studied_settings(name)
            ]
        run.log(f"experiment 1: {name} done")
    mean = {n: {o: float(np.mean(v)) for o, v in d.items()} for n, d in results.items()}
    rows = []
    for opp in OPPONENTS:
        rows.append(
            [
                opp,
                *[
                    rep.compare(f"Table 4.1 {opp} vs {n}", mean[n][opp], THESIS_T41[opp][i])
                    for i, n in enumerate(STUDIED)
                ],
            ]
        )
    rep.table(
        "Table 4.1: studied algorithm (column, mean over its settings) vs test algorithm (row, defaults)",
        ["test \\ studied", *STUDIED],
        rows,
        f"Cells: ours / thesis (difference), success = wins / decisive rounds, "
        f"{plan.rounds_vs_algorithms:,} rounds per match. Bold: differs by more than 2 points.",
    )
    avgs = [float(np.mean([mean[n][o] for o in OPPONENTS])) for n in STUDIED]
    rep.table(
        "Table 4.2: average success against the other algorithms",
        ["algorithm", "average"],
        [
            [n, rep.compare(f"Table 4.2 {n}", a, THESIS_T42[i])]
            for i, (n, a) in enumerate(zip(STUDIED, avgs, strict=True))
        ],
    )
    rep.table(
        "Table 4.3: Markov chains (MV) against the other algorithms",
        ["test algorithm", "MV"],
        [[o, cell(mean["MV"][o], THESIS_T41[o][1])] for o in OPPONENTS if o != "Random"],
    )
    by_eps = [float(np.mean(results["MKSU"]["VP"][i :: len(EPSILONS)])) for i in range(len(EPSILONS))]
    rep.table(
        "Table 4.4: MKSU against always counter (VP) by epsilon",
        ["test algorithm", "MKSU eps=0.90", "MKSU eps=0.95"],
        [
            [
                "VP",
                *[
                    rep.compare(f"Table 4.4 eps={e}", v, THESIS_T44[i])
                    for i, (e, v) in enumerate(zip(EPSILONS, by_eps, strict=True))
                ],
            ]
        ],
    )
    rows = [
        [
            o,
            cell(mean["MV"][o], THESIS_T412[o][0]),
            rep.compare(f"Table 4.12 MV+pre vs {o}", mean["MV+pre"][o], THESIS_T412[o][1]),
        ]
        for o in OPPONENTS
    ]
    rows.append(
        [
            "average",
            cell(float(np.mean([mean["MV"][o] for o in OPPONENTS])), 66.11),
            cell(float(np.mean([mean["MV+pre"][o] for o in OPPONENTS])), 65.33),
        ]
    )
    rep.table(
        "Table 4.12: MV without / with preprocessing against the algorithms",
        ["test algorithm", "MV", "MV+pre"],
        rows,
    )
    return results


def per_order(name: str, vals: list[float]) -> list[float]:
    """Collapse a sweep to one value per order (SUPP-like sweeps average the two epsilons)."""
    if len(vals) == len(ORDERS):
        return vals
    k = len(EPSILONS)
    return [float(np.mean(vals[i * k : (i + 1) * k])) for i in range(len(ORDERS))]


def experiment_strings(plan: Plan, run: Runner, rep: Report, seed: int) -> None:
    """Experiment 2 (§4.2) and the preprocessing and oracle extras (§4.3)."""
    fams = make_strings(plan, seed)
    names = (*STUDIED, "MV+pre")
    # res[family][name] = list over settings of mean over that family's strings
    res: dict[str, dict[str, list[float]]] = {}
    for fam, strings in fams.items():
        res[fam] = {}
        for name in names:
            res[fam][name] = [
                float(np.mean([run.vs_string(spec, s) for s in strings])) for _, spec in studied_settings(name)
            ]
        run.log(f"experiment 2: {fam} done")
    rep.table(
        "Random strings (§4.2.2, no table in the thesis: '50% for every algorithm')",
        ["algorithm", "average"],
        [[n, rep.compare(f"random strings {n}", float(np.mean(res["random"][n])), 50)] for n in STUDIED],
        f"{len(fams['random'])} strings of {plan.rounds_vs_strings:,} rounds.",
    )
    for k, tnum in ((100, "4.5"), (10, "4.7"), (3, "4.9")):
        fam = f"fixed{k}"
        rows = []
        for i, r in enumerate(ORDERS):
            rows.append(
                [
                    str(r),
                    *[
                        rep.compare(f"Table {tnum} r={r} {n}", per_order(n, res[fam][n])[i], THESIS_FIXED[k][i][j])
                        for j, n in enumerate(STUDIED)
                    ],
                ]
            )
        rep.table(
            f"Table {tnum}: algorithms against strings with rock every {k} moves (by order r)",
            ["r", *STUDIED],
            rows,
            f"Ceiling (spec Appendix A): {fixed_ceiling(k):.2f}%. {len(fams[fam])} strings of "
            f"{plan.rounds_vs_strings:,} rounds.",
        )
        if k in THESIS_FIXED_AVG:
            tavg = "4.6" if k == 10 else "4.8"
            rep.table(
                f"Table {tavg}: average success against strings with rock every {k} moves",
                ["algorithm", "average"],
                [
                    [n, rep.compare(f"Table {tavg} {n}", float(np.mean(res[fam][n])), THESIS_FIXED_AVG[k][j])]
                    for j, n in enumerate(STUDIED)
                ],
            )
    rows = []
    for i, p in enumerate(P_VALUES):
        fam = f"p{round(p * 100)}"
        rows.append(
            [
                f"{round(p * 100)}%",
                *[
                    rep.compare(f"Table 4.11 p={round(p * 100)}% {n}", float(np.mean(res[fam][n])), THESIS_T411[i][j])
                    for j, n in enumerate(STUDIED)
                ],
                fmt(biased_ceiling(p)),
            ]
        )
    rep.table(
        "Table 4.11: success against strings with P(rock) = p",
        ["P(rock)", *STUDIED, "ceiling"],
        rows,
        f"{plan.strings_per_p} string(s) of {plan.rounds_vs_strings:,} rounds per p; each cell averages all settings.",
    )
    pfams = [f"p{round(p * 100)}" for p in P_VALUES]
    rep.table(
        "Table 4.10: average success against the probabilistic strings (all p)",
        ["algorithm", "average"],
        [
            [
                n,
                rep.compare(f"Table 4.10 {n}", float(np.mean([np.mean(res[f][n]) for f in pfams])), THESIS_T410[j]),
            ]
            for j, n in enumerate(STUDIED)
        ],
    )
    mv10 = per_order("MV", res["fixed10"]["MV"])
    pre10 = per_order("MV+pre", res["fixed10"]["MV+pre"])
    rows = [
        [
            str(r),
            cell(mv10[i], THESIS_T413[i][0]),
            rep.compare(f"Table 4.13 r={r} MV+pre", pre10[i], THESIS_T413[i][1]),
        ]
        for i, r in enumerate(ORDERS)
    ]
    rows.append(["average", cell(float(np.mean(mv10)), 55.33), cell(float(np.mean(pre10)), 53.83)])
    rep.table("Table 4.13: MV without / with preprocessing, rock every 10 moves", ["order", "MV", "MV+pre"], rows)
    for k in (3, 100):
        a = float(np.mean(res[f"fixed{k}"]["MV"]))
        b = float(np.mean(res[f"fixed{k}"]["MV+pre"]))
        rep.lines.append(f"\nRock every {k} moves: MV {a:.2f}, MV+pre {b:.2f} (the thesis: equal).")
    rows = []
    for i, f in enumerate(pfams):
        rows.append(
            [
                f"{P_VALUES[i] * 100:.0f}%",
                cell(float(np.mean(res[f]["MV"])), THESIS_T414[i][0]),
                rep.compare(f"Table 4.14 {f} MV+pre", float(np.mean(res[f]["MV+pre"])), THESIS_T414[i][1]),
            ]
        )
    rows.append(
        [
            "average",
            cell(float(np.mean([np.mean(res[f]["MV"]) for f in pfams])), 71.22),
            cell(float(np.mean([np.mean(res[f]["MV+pre"]) for f in pfams])), 70.56),
        ]
    )
    rep.table("Table 4.14: MV without / with preprocessing, P(rock) = p", ["P(rock)", "MV", "MV+pre"], rows)
    always_spock = T.AgentSpec("const", move=4, label="always Spock")
    sp = float(np.mean([run.vs_string(always_spock, s) for s in fams["p10"]]))
    rep.lines.append(f"\nAlways Spock against the p = 10% strings: {sp:.2f}% (the thesis: 'about 42%').")
    print(f"always Spock vs p=10%: {sp:.2f} (thesis ~42)")
    # the optimal meta-classifier (oracle)
    orows = []
    for label, children in (
        ("over MKSU's 8 sub-agents", T.mksu_children()),
        ("over MKIA's 3", T.mkia_children()),
    ):
        spec = T.oracle(children)
        rnd = float(np.mean([run.vs_string(spec, s) for s in fams["random"]]))
        algs = float(np.mean([run.vs_agent(spec, opponent_spec(o), plan.rounds_vs_algorithms) for o in OPPONENTS]))
        p50 = float(np.mean([run.vs_string(spec, s) for s in fams["p50"]]))
        orows.append([label, fmt(rnd), fmt(algs), fmt(p50)])
    rep.table(
        "Extra B (§4.3.2): the optimal meta-classifier (reads the opponent's move first)",
        ["oracle", "random strings", "mean vs the 9 algorithms", "P(rock)=50%"],
        orows,
        "The thesis: 'over 90%' against random strings and similar everywhere; an artefact of picking, "
        "after the fact, whichever of several sub-agents happened to win (with 3 sub-agents far less so).",
    )


def round_robin(plan: Plan, rep: Report, seed: int, log: Callable[[str], None]) -> None:
    """Every hosted RPS bot against every other, 3 and 5 signs, through the Bot objects."""
    bots = {name: hb for name, hb in sorted(hosted_bots().items()) if "rps" in hb.games}
    names = list(bots)
    for signs in (3, 5):
        score = {a: dict.fromkeys(names, 0) for a in names}
        for i, a in enumerate(names):
            for j in range(i + 1, len(names)):
                b = names[j]
                res = duel(
                    bots[a].factory(seed * 7919 + 2 * (i * 97 + j)),
                    bots[b].factory(seed * 7919 + 2 * (i * 97 + j) + 1),
                    signs=signs,
                    rounds=plan.round_robin_rounds,
                )
                score[a][b] = res.score
                score[b][a] = -res.score
        log(f"round robin with {signs} signs done")
        totals = {a: sum(score[a].values()) for a in names}
        wins = {a: sum(1 for b in names if score[a][b] > 0) for a in names}
        order = sorted(names, key=lambda a: (-wins[a], -totals[a]))
        short = {a: str(k + 1) for k, a in enumerate(order)}
        rows = [
            [
                f"{short[a]}. {a}",
                str(wins[a]),
                str(totals[a]),
                *["." if a == b else str(score[a][b]) for b in order],
            ]
            for a in order
        ]
        rep.table(
            f"Round robin, {signs} signs, {plan.round_robin_rounds} rounds per match",
            ["bot", "matches won", "total score", *[short[b] for b in order]],
            rows,
            "Cell = row's rounds won minus rounds lost against the column bot (one match per pair, seeded).",
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the experiments; returns an exit code."""
    parser = argparse.ArgumentParser(prog="arena experiment rpsls-thesis", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short matches and few strings (CI smoke run)")
    parser.add_argument(
        "--output",
        "--out",
        dest="out",
        default=None,
        help=f"markdown output path (default {DOCUMENT}; with --quick a temporary file)",
    )
    parser.add_argument("--seed", type=int, default=2020, help="master seed (strings and every agent)")
    parser.add_argument(
        "--only", choices=("thesis", "round-robin"), default=None, help="run only one part (default: both)"
    )
    args = parser.parse_args(argv)
    out = output_path(args.out, DOCUMENT, args.quick)
    plan = QUICK if args.quick else FULL
    start = time.perf_counter()

    def echo(msg: str) -> None:
        print(f"[{time.perf_counter() - start:7.1f}s] {msg}", file=sys.stderr, flush=True)

    # one log line per stage: each studied algorithm (experiment 1), each string family (experiment 2),
    # each round robin; the bar (a terminal only) counts them
    stages = 0 if args.only == "round-robin" else len(STUDIED) + 1 + 1 + len(PERIODS) + len(P_VALUES)
    stages += 0 if args.only == "thesis" else 2
    log = Steps(echo, stages, "rpsls-thesis")
    rep = Report()
    run = Runner(args.seed, log)
    mode = "QUICK (short matches, NOT comparable with the thesis)" if args.quick else "full"
    try:
        if args.only != "round-robin":
            experiment_algorithms(plan, run, rep)
            experiment_strings(plan, run, rep, args.seed)
        if args.only != "thesis":
            round_robin(plan, rep, args.seed, log)
    finally:
        log.close()
    elapsed = time.perf_counter() - start
    head = [
        "# RPSLS thesis experiments, rerun",
        "",
        "Generated by `arena experiment rpsls-thesis"
        + (" --quick" if args.quick else "")
        + f" --seed {args.seed}` in {elapsed:.0f} s. Mode: **{mode}**.",
        "",
        "Bizjak (2020), `specs/rpsls-thesis.md`. Success = wins / (wins + losses) in percent, averaged "
        "over the studied algorithm's parameter settings (MUPN, MV: r = 1..6; SUPP, MKSU, MKIA: r = 1..6 x "
        "epsilon 0.9, 0.95), one run per setting, fresh state per match. Test opponents use the defaults: "
        "MUPN r=2, MV r=3, SUPP order 3, alpha 0.2, gamma 0.9, epsilon 0.9; MKSU over MUPN, MV, SUPP, VK, "
        "VO, VP, VPS, random. "
        "The choices made where the thesis is ambiguous are listed in docs/bots.md, 'Rock-paper-scissors bots'.",
    ]
    if rep.big:
        tail = ["", "## Differences of more than 2 points", "", EXPLANATIONS, "Cells:", ""]
        tail += [f"- {b}" for b in rep.big]
    else:
        tail = ["", "No cell differs from the thesis by more than 2 points."]
    text = "\n".join(head + rep.lines + tail) + "\n"
    out.write_text(text)
    print(f"\nwrote {out} ({len(rep.big)} cells differ by more than 2 points) in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
