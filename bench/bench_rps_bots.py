"""Decision speed of every hosted RPS bot at move 1,000 and at move 100,000, and experiment wall times.

Each bot plays RPSLS (5 signs) against a seeded uniformly random move stream
through ``Bot.act`` (the call the referee makes, with the same Turn values);
we time the decisions in a window starting at move 1,000 and at move 100,000.
The baseline is the ``rock`` bot measured in the same run (its ``act`` is a
bare method call), so ratios are comparable across noisy machines.

    .venv/bin/python bench/bench_rps_bots.py            # bots + the --quick experiment
    .venv/bin/python bench/bench_rps_bots.py --full     # also the full experiment (~20-30 min)
    .venv/bin/python bench/bench_rps_bots.py --bots sicilian,mksu --window 500
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

from arena_bots import hosted_bots
from arena_client import MatchInfo, SeatInfo, TimeControl, Turn
from arena_games.rps import RpsObservation

SIGNS = 5
ROUNDS = 100_000 + 5_000


def time_bot(name: str, checkpoints: tuple[int, ...], window: int) -> list[float]:
    """Seconds per decision in ``window`` moves starting at each checkpoint."""
    bot = hosted_bots()[name].factory(1)
    seats = (SeatInfo(0, name), SeatInfo(1, "random stream"))
    params: dict[str, int | str | bool] = {"signs": SIGNS, "rounds": ROUNDS, "draw_band": 0}
    bot.on_match_start(MatchInfo("bench", "rps", params, 0, seats, TimeControl(), ""))
    opp = np.random.default_rng(0).integers(0, SIGNS, ROUNDS)
    actions = tuple(range(SIGNS))
    budget, bank = timedelta(seconds=1), timedelta(seconds=10)
    last: tuple[int, ...] = ()
    out = []
    t = 0
    for cp in checkpoints:
        while t < cp:
            obs = RpsObservation(SIGNS, ROUNDS, t, (0, 0), last)
            last = (bot.act(Turn("bench", t, 0, obs, actions, budget, bank)), int(opp[t]))
            t += 1
        start = time.perf_counter()
        for _ in range(window):
            obs = RpsObservation(SIGNS, ROUNDS, t, (0, 0), last)
            last = (bot.act(Turn("bench", t, 0, obs, actions, budget, bank)), int(opp[t]))
            t += 1
        out.append((time.perf_counter() - start) / window)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bots", default="", help="comma-separated names (default: every hosted RPS bot)")
    parser.add_argument("--window", type=int, default=2000, help="decisions timed per checkpoint")
    parser.add_argument("--full", action="store_true", help="also time the full experiment")
    parser.add_argument("--skip-experiment", action="store_true")
    args = parser.parse_args()
    names = args.bots.split(",") if args.bots else sorted(n for n, h in hosted_bots().items() if "rps" in h.games)
    checkpoints = (1_000, 100_000)
    base = time_bot("rock", checkpoints, args.window)
    print(
        f"RPSLS decisions through Bot.act, {args.window} timed per checkpoint; baseline 'rock' "
        f"{base[0] * 1e6:.2f} / {base[1] * 1e6:.2f} us"
    )
    print(f"{'bot':22} {'us@1k':>8} {'us@100k':>8} {'dec/s@1k':>10} {'dec/s@100k':>11} {'x rock@100k':>12}")
    for name in names:
        t1, t2 = time_bot(name, checkpoints, args.window)
        print(f"{name:22} {t1 * 1e6:8.2f} {t2 * 1e6:8.2f} {1 / t1:10,.0f} {1 / t2:11,.0f} {t2 / base[1]:12.1f}")
    if not args.skip_experiment:
        from arena_bots.experiments import rpsls_thesis

        modes = [["--quick"]] + ([[]] if args.full else [])
        for extra in modes:
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                rpsls_thesis.main([*extra, "--out", str(Path(tmp) / "out.md")])
                label = "--quick" if extra else "full"
                print(f"\nexperiment rpsls-thesis {label}: wall time {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
