"""Write the golden playthroughs of every game to tests/games/golden/*.json.

Usage::

    .venv/bin/python scripts/golden.py           # regenerate every file
    .venv/bin/python scripts/golden.py --check   # exit 1 if a file differs from a fresh run

A golden playthrough is one seeded random game written out in full: before
every action, the observation of every seat and of a spectator, the legal
actions (or chance outcomes) and the action taken with its label; at the end,
the final observations and the returns. ``tests/games/test_golden.py`` replays
the recorded actions through the engine and checks every line, so any change
in rules, encodings or observations shows up as a diff of these files.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
from pathlib import Path
from typing import Any

from arena_games import CHANCE, SIMULTANEOUS, State, load_game

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "tests" / "games" / "golden"

CASES: list[tuple[str, str, dict[str, Any], int]] = [
    ("rps.json", "rps", {"rounds": 6}, 1),
    ("rpsls.json", "rps", {"signs": 5, "rounds": 6}, 2),
    ("tic_tac_toe.json", "tic_tac_toe", {}, 3),
    ("tic_tac_toe_4x5_k3.json", "tic_tac_toe", {"rows": 4, "cols": 5, "k": 3}, 4),
    ("dots_and_boxes_2x2.json", "dots_and_boxes", {"rows": 2, "cols": 2}, 5),
    ("dots_and_boxes_2x3.json", "dots_and_boxes", {"rows": 2, "cols": 3}, 6),
    ("liars_dice_thesis_2x2.json", "liars_dice", {"dice": 2}, 7),
    (
        "liars_dice_3p_wild_ones_spot_on.json",
        "liars_dice",
        {"players": 3, "dice": 2, "bidding": "standard", "wild": "ones", "spot_on": True},
        8,
    ),
    (
        "liars_dice_openspiel.json",
        "liars_dice",
        {"players": 2, "dice": 1, "wild": "highest", "bidding": "standard", "rounds": "single"},
        9,
    ),
]
"""(file name, game, parameters, seed)."""


def plain(value: Any) -> Any:
    """An observation (or anything) as JSON-ready lists, dicts and scalars."""
    return json.loads(json.dumps(dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value))


def views(state: State) -> dict[str, Any]:
    """Every seat's observation and the spectator's."""
    out = {str(seat): plain(state.observation(seat)) for seat in range(state.game.num_players)}
    out["spectator"] = plain(state.observation(None))
    return out


def playthrough(name: str, params: dict[str, Any], seed: int) -> dict[str, Any]:
    """Play one game with uniformly random moves from ``random.Random(seed)`` and record everything."""
    game = load_game(name, **params)
    rng = random.Random(seed)
    state = game.new_initial_state()
    steps = []
    while not state.is_terminal():
        player = state.current_player()
        step: dict[str, Any] = {"player": player, "observations": views(state)}
        if player == CHANCE:
            outcomes = list(state.chance_outcomes())
            step["chance"] = [[a, p] for a, p in outcomes]
            x, acc, action = rng.random(), 0.0, outcomes[-1][0]
            for a, p in outcomes:
                acc += p
                if x < acc:
                    action = a
                    break
            step["action"] = action
            step["label"] = game.action_to_string(CHANCE, action)
            state.apply_action(action)
        elif player == SIMULTANEOUS:
            legal = {str(seat): list(state.legal_actions(seat)) for seat in range(game.num_players)}
            actions = [rng.choice(legal[str(seat)]) for seat in range(game.num_players)]
            step["legal"] = legal
            step["actions"] = actions
            step["labels"] = [game.action_to_string(seat, a) for seat, a in enumerate(actions)]
            state.apply_actions(actions)
        else:
            legal_actions = list(state.legal_actions())
            action = rng.choice(legal_actions)
            step["legal"] = {str(player): legal_actions}
            step["action"] = action
            step["label"] = game.action_to_string(player, action)
            state.apply_action(action)
        steps.append(step)
    return {
        "game": name,
        "params": dict(game.params),
        "seed": seed,
        "steps": steps,
        "final": {"observations": views(state), "returns": list(state.returns())},
    }


def render(record: dict[str, Any]) -> str:
    """Stable, diff-friendly JSON: one line per step."""
    head = {k: v for k, v in record.items() if k not in ("steps", "final")}
    lines = [json.dumps(head, sort_keys=True)[:-1] + ', "steps": [']
    steps = record["steps"]
    for i, step in enumerate(steps):
        lines.append(" " + json.dumps(step, sort_keys=True) + ("," if i < len(steps) - 1 else ""))
    lines.append('], "final": ' + json.dumps(record["final"], sort_keys=True) + "}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    stale = []
    for filename, name, params, seed in CASES:
        text = render(playthrough(name, params, seed))
        path = GOLDEN_DIR / filename
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(filename)
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(GOLDEN_DIR.parent.parent.parent)}")
    if stale:
        print("golden files differ from a fresh run: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
