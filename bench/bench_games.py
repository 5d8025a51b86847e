"""Random playouts per second for every game: our pure-Python engines, and OpenSpiel's where installed.

Run with ``.venv/bin/python bench/bench_games.py`` (about 30-40 seconds; ``--seconds`` changes the
time spent per measurement). Both engines are driven by the same Python loop (uniform random legal
moves from a seeded ``random.Random``, chance outcomes sampled uniformly), so the ratio compares the
engines, not the drivers. Our ``apply_action`` checks legality on every move, as the referee needs.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

from arena_games import CHANCE, SIMULTANEOUS, TERMINAL, Game, load_game

try:
    import pyspiel
except ImportError:  # OpenSpiel is optional
    pyspiel = None

# (label, our game name, our parameters, OpenSpiel game name and parameters or None)
CASES: list[tuple[str, str, dict[str, Any], tuple[str, dict[str, Any]] | None]] = [
    ("tic_tac_toe 3x3", "tic_tac_toe", {}, ("tic_tac_toe", {})),
    (
        "tic_tac_toe 15x15 k=5",
        "tic_tac_toe",
        {"rows": 15, "cols": 15, "k": 5},
        ("mnk", {"m": 15, "n": 15, "k": 5}),
    ),
    ("dots_and_boxes 3x3", "dots_and_boxes", {}, ("dots_and_boxes", {"num_rows": 3, "num_cols": 3})),
    (
        "dots_and_boxes 5x5",
        "dots_and_boxes",
        {"rows": 5, "cols": 5},
        ("dots_and_boxes", {"num_rows": 5, "num_cols": 5}),
    ),
    (
        "liars_dice single 2x1 (OpenSpiel's)",
        "liars_dice",
        {"dice": 1, "wild": "highest", "bidding": "standard", "rounds": "single"},
        ("liars_dice", {}),
    ),
    (
        "liars_dice single 2x5 standard",
        "liars_dice",
        {"wild": "highest", "bidding": "standard", "rounds": "single"},
        ("liars_dice", {"numdice": 5}),
    ),
    ("liars_dice thesis 2x5 elimination", "liars_dice", {}, None),
    ("liars_dice 6 players x 5 dice", "liars_dice", {"players": 6, "wild": "ones", "spot_on": True}, None),
    ("rps 1000 rounds", "rps", {}, None),
]


def ours_playout(game: Game, rng: random.Random) -> int:
    """One random game with our engine; returns its length."""
    state = game.new_initial_state()
    randrange = rng.randrange
    n = game.num_players
    while True:
        player = state.current_player()
        if player == TERMINAL:
            return len(state.history)
        if player == CHANCE:
            outcomes = state.chance_outcomes()
            state.apply_action(outcomes[randrange(len(outcomes))][0])
        elif player == SIMULTANEOUS:
            state.apply_actions([_pick(state.legal_actions(seat), randrange) for seat in range(n)])
        else:
            state.apply_action(_pick(state.legal_actions(), randrange))


def _pick(actions: Any, randrange: Callable[[int], int]) -> int:
    return int(actions[randrange(len(actions))])


def openspiel_playout(game: Any, rng: random.Random) -> int:
    """One random game with OpenSpiel's engine; returns its length."""
    state = game.new_initial_state()
    randrange = rng.randrange
    while not state.is_terminal():
        if state.is_chance_node():
            outcomes = state.chance_outcomes()
            state.apply_action(outcomes[randrange(len(outcomes))][0])
        else:
            legal = state.legal_actions()
            state.apply_action(legal[randrange(len(legal))])
    return len(state.history())


def measure(playout: Callable[[Any, random.Random], int], game: Any, seconds: float) -> tuple[float, float]:
    """(playouts per second, mean game length) over about ``seconds``."""
    rng = random.Random(12345)
    playout(game, rng)  # warm up
    count = 0
    moves = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        moves += playout(game, rng)
        count += 1
        now = time.perf_counter()
        if now >= deadline:
            break
    return count / (now - start), moves / count


def main() -> None:
    parser = argparse.ArgumentParser(description="random playouts per second, ours vs OpenSpiel")
    parser.add_argument("--seconds", type=float, default=1.5, help="time per measurement")
    args = parser.parse_args()
    if pyspiel is None:
        print("open_spiel is not installed: only our engines are measured (pip install open_spiel)")
    header = f"{'game':36} {'length':>7} {'ours/s':>10} {'OpenSpiel/s':>12} {'OpenSpiel/ours':>15}"
    print(header)
    print("-" * len(header))
    for label, name, params, theirs in CASES:
        game = load_game(name, **params)
        ours_rate, length = measure(ours_playout, game, args.seconds)
        os_text, ratio_text = "-", "-"
        if pyspiel is not None and theirs is not None:
            os_game = pyspiel.load_game(theirs[0], theirs[1])
            os_rate, _ = measure(openspiel_playout, os_game, args.seconds)
            os_text, ratio_text = f"{os_rate:,.0f}", f"{os_rate / ours_rate:.2f}x"
        print(f"{label:36} {length:7.1f} {ours_rate:10,.0f} {os_text:>12} {ratio_text:>15}", flush=True)


if __name__ == "__main__":
    main()
