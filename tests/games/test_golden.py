"""Golden playthroughs: replay every recorded game and compare every observation, legal list and label.

Regenerate the files with ``.venv/bin/python scripts/golden.py`` after an
intended change to rules, encodings or observations, and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from arena_games import CHANCE, SIMULTANEOUS, load_game
from tests.scripts_support import load_script

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


GOLDEN = load_script("golden")
FILES = [case[0] for case in GOLDEN.CASES]


def test_every_game_has_a_golden_file() -> None:
    from arena_games import registered_games

    assert {case[1] for case in GOLDEN.CASES} == set(registered_games())
    assert sorted(p.name for p in GOLDEN_DIR.glob("*.json")) == sorted(FILES)


@pytest.mark.parametrize("filename", FILES)
def test_replaying_the_golden_actions_gives_the_golden_observations(filename: str) -> None:
    record: dict[str, Any] = json.loads((GOLDEN_DIR / filename).read_text())
    game = load_game(record["game"], **record["params"])
    state = game.new_initial_state()
    assert record["steps"], "a golden file needs moves"
    for i, step in enumerate(record["steps"]):
        where = f"{filename} step {i}"
        assert state.current_player() == step["player"], where
        assert GOLDEN.views(state) == step["observations"], where
        if step["player"] == CHANCE:
            assert [[a, p] for a, p in state.chance_outcomes()] == step["chance"], where
            assert game.action_to_string(CHANCE, step["action"]) == step["label"], where
            state.apply_action(step["action"])
        elif step["player"] == SIMULTANEOUS:
            for seat, legal in step["legal"].items():
                assert list(state.legal_actions(int(seat))) == legal, where
            labels = [game.action_to_string(seat, a) for seat, a in enumerate(step["actions"])]
            assert labels == step["labels"], where
            state.apply_actions(step["actions"])
        else:
            assert {str(step["player"]): list(state.legal_actions())} == step["legal"], where
            assert game.action_to_string(step["player"], step["action"]) == step["label"], where
            state.apply_action(step["action"])
    assert state.is_terminal()
    assert GOLDEN.views(state) == record["final"]["observations"]
    assert list(state.returns()) == record["final"]["returns"]


@pytest.mark.parametrize("filename", FILES)
def test_a_fresh_seeded_run_reproduces_the_file(filename: str) -> None:
    _, name, params, seed = next(case for case in GOLDEN.CASES if case[0] == filename)
    fresh = GOLDEN.render(GOLDEN.playthrough(name, params, seed))
    assert fresh == (GOLDEN_DIR / filename).read_text(), "run scripts/golden.py and review the diff"
