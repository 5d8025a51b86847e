"""Smoke test of ``arena experiment liars-dice-thesis --quick --output ...`` (a few seconds)."""

from __future__ import annotations

from pathlib import Path

from arena_bots.experiments import liars_dice_thesis
from tests.conftest import in_thread


def test_interval_is_the_normal_95_percent_interval() -> None:
    pct, half = liars_dice_thesis.interval(697, 1008)
    assert round(pct, 3) == 69.147 and round(half, 2) == 2.85  # the spec's iteration-3 row


def test_quick_run_writes_every_section_without_touching_the_document(tmp_path: Path) -> None:
    out = tmp_path / "ld.md"
    document = Path("docs/experiments/liars-dice-thesis.md")
    before = document.read_text() if document.exists() else None
    assert in_thread(liars_dice_thesis.main, ["--quick", "--out", str(out), "--seed", "3"]) == 0
    text = out.read_text()
    for title in (
        "plain SARSA vs Q-learning",
        "modified SARSA vs Q-learning",
        "modified SARSA vs cfr",
        "Crosstable, 2 players",
        "3 players",
        "Exploitability in the 1-die game",
        "Exploitability in the 2-dice game",
        "Why 0.2% and not 25%",
        "Wall time",
    ):
        assert title in text
    svg = out.with_suffix(".svg").read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == 3
    assert (document.read_text() if document.exists() else None) == before
