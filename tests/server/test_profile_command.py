"""``arena profile`` over a real SQLite file filled by real matches."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena_server.cli import main
from tests.conftest import in_thread


def test_profile_distance_is_zero_for_a_bot_and_itself_and_positive_between_bots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "arena.db")
    for bot in ("markov-1", "rotate"):
        for seed in ("a", "b"):
            assert in_thread(main, ["match", bot, "random", "-p", "rounds=400", "--seed", seed, "--db", db]) == 0
    capsys.readouterr()
    assert in_thread(main, ["profile", "markov-1", "markov-1", "--db", db]) == 0
    same = capsys.readouterr().out
    assert "markov-1: 2 match(es)" in same
    assert "profile distance markov-1 ~ markov-1: 0.0000 of 6" in same
    assert in_thread(main, ["profile", "markov-1", "rotate", "--db", db]) == 0
    different = capsys.readouterr().out
    value = float(different.split("profile distance markov-1 ~ rotate: ")[1].split()[0])
    assert value > 1.0


def test_profile_unknown_bot_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "arena.db")
    assert in_thread(main, ["match", "rock", "random", "-p", "rounds=10", "--db", db]) == 0
    assert in_thread(main, ["profile", "rock", "nobody", "--db", db]) == 2
    assert "'nobody' has no stored rps matches" in capsys.readouterr().err
