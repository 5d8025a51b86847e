"""``arena train dots-and-boxes`` and the thesis experiment: fitness bookkeeping, resumable checkpoints, the CLI."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from arena_bots.dots_and_boxes import evolution as ev
from arena_bots.dots_and_boxes.neuro import load_genome

SMALL = ev.TrainConfig(evaluations=80, repetitions=2, test_every=3, test_games=6, seed=5)


def _arena(*argv: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "arena_server.cli", *argv], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def test_evaluation_units_and_generation_counts() -> None:
    assert ev.TrainConfig().generations() == 99  # 1000 individual evaluations = 100 round robins
    assert replace(ev.TrainConfig(), unit="round-robin").generations() == 999
    assert replace(ev.TrainConfig(), unit="game").generations() == 10  # 1000 // 90 = 11 round robins
    assert ev.TrainConfig().elites() == 1
    with pytest.raises(ev.TrainError, match=r"--population 1: a round robin needs at least 2"):
        replace(SMALL, population=1).check()


def test_round_robin_fitness_is_relative_so_the_mean_is_always_one_half(tmp_path: Path) -> None:
    result = ev.train(SMALL, tmp_path)
    n = SMALL.population
    assert len(result.rows) == 2 * 8
    assert all(row["mean"] == 0.5 for row in result.rows)
    assert all(0 <= row["worst"] <= 0.5 <= row["best"] <= 1 for row in result.rows)
    assert result.games == 2 * 8 * n * (n - 1)
    tested = [row for row in result.rows if row["test_wins"] != ""]
    assert [row["generation"] for row in tested[:4]] == [0, 3, 6, 7]
    assert all(row["test_wins"] + row["test_draws"] + row["test_losses"] == 6 for row in tested)
    with open(tmp_path / "generations.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 16 and rows[0].keys() >= {"best", "mean", "worst", "test_wins", "seconds"}


def test_elites_survive_unchanged_and_zero_fitness_never_parents() -> None:
    rng = np.random.default_rng(1)
    cfg = replace(SMALL, mutation=1.0, sigma=1.0)
    pop = np.arange(10, dtype=np.float64)[:, None] * np.ones((10, 4))
    fitness = np.zeros(10)
    fitness[7] = 5
    fitness[2] = 3
    new = ev.next_generation(cfg, pop, fitness, rng)
    assert np.array_equal(new[0], pop[7])
    # without mutation every child is made of genes of parents 7 and 2 only
    new = ev.next_generation(replace(cfg, mutation=0.0), pop, fitness, rng)
    assert set(np.unique(new)) <= {2.0, 7.0}


class _Stop(Exception):
    pass


class _StopAfter(ev.Progress):
    def __init__(self, total: int, after: int) -> None:
        super().__init__(total, io.StringIO())
        self.after = after

    def update(self, done: int, note: str = "") -> None:
        if done == self.after:
            raise _Stop


def test_an_interrupted_run_resumes_to_the_same_numbers(tmp_path: Path) -> None:
    whole = ev.train(SMALL, tmp_path / "whole")
    with pytest.raises(_Stop):
        ev.train(SMALL, tmp_path / "cut", progress=_StopAfter(16, 11))
    resumed = ev.train(SMALL, tmp_path / "cut")
    strip = [{k: v for k, v in row.items() if k != "seconds"} for row in resumed.rows]
    assert strip == [{k: v for k, v in row.items() if k != "seconds"} for row in whole.rows]
    assert [r for _, r in resumed.finals] == [r for _, r in whole.finals]
    with pytest.raises(ev.TrainError, match=r"different settings \(mutation\).*--fresh"):
        ev.train(replace(SMALL, mutation=0.2), tmp_path / "cut")


def test_train_cli_writes_csv_genome_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _arena(
        "train", "dots-and-boxes", "--evaluations", "50", "--repetitions", "2", "--representation", "features",
        "--out", str(out), "--seed", "9", "--no-plots",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "mean normalised fitness: min 0.5000 max 0.5000" in done.stdout
    assert "ETA" not in done.stderr  # the progress bar is drawn on a terminal only (stderr is a pipe here)
    genome = load_genome(out / "best-genome.json")
    assert genome.representation == "features"
    assert genome.provenance["seed"] == 9 and "--representation features" in genome.provenance["command"]
    assert (out / "generations.csv").read_text().count("\n") == 1 + 2 * 5
    bad = _arena("train", "dots-and-boxes", "--population", "1", "--out", str(tmp_path / "x"))
    assert bad.returncode == 2
    assert bad.stderr.strip() == "arena: --population 1: a round robin needs at least 2 individuals"


@pytest.mark.slow
def test_quick_experiment_writes_every_section(tmp_path: Path) -> None:
    out = tmp_path / "dab.md"
    done = _arena("experiment", "dots-and-boxes-thesis", "--quick", "--output", str(out), timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text()
    for heading in ("## 1. Learning curves", "## 2. Parameter study", "## 3. The representation",
                    "### 3×3 boxes", "### 5×5 boxes", "Mean fitness is flat by construction"):  # fmt: skip
        assert heading in text
    assert "min 0.500000, max 0.500000" in text


@pytest.mark.slow
def test_the_shipped_thesis_genome_is_reproduced_by_its_recorded_command() -> None:
    """Provenance: rerunning the recorded settings and seed gives the shipped weights (about 30 s)."""
    from arena_bots.dots_and_boxes.bots import shipped_genome

    shipped = shipped_genome("thesis")
    cfg = dict(shipped.provenance["config"])
    cfg["hidden"] = tuple(cfg["hidden"])
    result = ev.train(ev.TrainConfig(**cfg))
    again = result.best_genome({})
    assert shipped.provenance["command"].startswith(ev.command_line(ev.TrainConfig(**cfg)))
    assert np.allclose(again.weights, shipped.weights, atol=1e-6)
    assert again.provenance["win_rate_vs_greedy_at_end"] == shipped.provenance["win_rate_vs_greedy_at_end"]
