"""Smoke test of `arena experiment rpsls-thesis --quick` (about 10-15 s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena_bots.experiments import rpsls_thesis
from tests.conftest import in_thread


def test_ceilings_match_the_spec_appendix() -> None:
    assert rpsls_thesis.fixed_ceiling(3) == pytest.approx(69.23, abs=0.01)
    assert rpsls_thesis.fixed_ceiling(100) == pytest.approx(50.62, abs=0.01)
    assert rpsls_thesis.biased_ceiling(0.1) == pytest.approx(58.06, abs=0.01)
    assert rpsls_thesis.biased_ceiling(0.5) == pytest.approx(71.43, abs=0.01)


def test_fixed_preference_strings_put_rock_on_every_kth_move() -> None:
    fams = rpsls_thesis.make_strings(rpsls_thesis.QUICK, seed=1)
    s = fams["fixed3"][0]
    assert (s[2::3] == 0).all()
    assert 0.15 < (s[0::3] == 0).mean() < 0.25  # the other positions are uniform
    assert abs((fams["p70"][0] == 0).mean() - 0.7) < 0.02


def test_quick_run_writes_every_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rpsls.md"
    assert in_thread(rpsls_thesis.main, ["--quick", "--out", str(out), "--seed", "7"]) == 0
    text = out.read_text()
    for title in (
        "Table 4.1",
        "Table 4.2",
        "Table 4.4",
        "Table 4.5",
        "Table 4.9",
        "Table 4.11",
        "Table 4.14",
    ):
        assert title in text
    assert "QUICK" in text
    assert "Round robin, 3 signs" in text and "Round robin, 5 signs" in text
    assert "Table 4.1" in capsys.readouterr().out
