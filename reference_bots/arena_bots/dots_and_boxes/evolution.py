"""The thesis's evolutionary algorithm (spec 5-6, 8) with progress, checkpoints, a CSV and plots.

One repetition: a population of N random networks is scored by a round robin
(every pair plays twice, each side starting once, 2/1/0 points a game, fitness
reset every generation, reported as fitness / (4(N-1))); the next generation
is the top ``round(elitism * N)`` (at least one) copied unchanged plus
offspring of two roulette-wheel parents (drawn independently from the whole
old population, so p1 = p2 is possible) by uniform crossover (each weight from
either parent with probability 0.5) and Gaussian mutation (each weight gets
N(0, sigma^2) noise with probability p). The whole new population is
re-evaluated.

Choices where the thesis is silent (each is an option of ``arena train
dots-and-boxes``):

* hidden layers: one of 10 sigmoid units; all layers have biases; initial
  weights N(0, 1); the output unit is a sigmoid too (it only ranks moves).
* mutation: per weight, additive, sigma = 0.3.
* "an evaluation" = one individual's fitness evaluation, so 1000 evaluations
  with N = 10 are 100 round robins: the initial one plus 99 generations
  (``--unit round-robin`` or ``--unit game`` for the other readings).
* testing: every 5 generations (and the first and last), the best individual
  of the generation plays 20 games against ``greedy``, 10 starting, with its
  own random stream so testing never changes the evolution.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

import numpy as np

from arena_bots.dots_and_boxes import kernels as K
from arena_bots.dots_and_boxes.board import geometry
from arena_bots.dots_and_boxes.neuro import REPRESENTATIONS, Genome, layer_sizes, num_weights
from arena_bots.numba_helpers import seed_state
from arena_bots.progress import ProgressBar

UNITS = ("individual", "round-robin", "game")
CSV_FIELDS = (
    "repetition", "generation", "evaluations", "games", "best", "mean", "worst",
    "test_wins", "test_draws", "test_losses", "seconds",
)  # fmt: skip


class TrainError(ValueError):
    """Bad training settings or an incompatible checkpoint (the message says what to do)."""


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a training run (the checkpoint must match it to resume)."""

    rows: int = 3
    cols: int = 3
    representation: str = "thesis"
    hidden: tuple[int, ...] = (10,)
    population: int = 10
    elitism: float = 0.1
    mutation: float = 0.1
    sigma: float = 0.3
    init_std: float = 1.0
    evaluations: int = 1000
    unit: str = "individual"
    repetitions: int = 10
    test_every: int = 5
    test_games: int = 20
    seed: int = 2023

    def check(self) -> None:
        if self.representation not in REPRESENTATIONS:
            raise TrainError(f"--representation {self.representation!r}: use one of {sorted(REPRESENTATIONS)}")
        if self.unit not in UNITS:
            raise TrainError(f"--unit {self.unit!r}: use one of {', '.join(UNITS)}")
        if self.population < 2:
            raise TrainError(f"--population {self.population}: a round robin needs at least 2 individuals")
        if not 0 <= self.elitism < 1:
            raise TrainError(f"--elitism {self.elitism}: use a fraction in [0, 1)")
        if not 0 <= self.mutation <= 1:
            raise TrainError(f"--mutation {self.mutation}: use a probability in [0, 1]")
        if self.sigma < 0 or self.init_std <= 0:
            raise TrainError("--sigma must be >= 0 and --init-std > 0")
        if self.repetitions < 1 or self.test_every < 1 or self.test_games < 2:
            raise TrainError("--repetitions and --test-every must be >= 1 and --test-games >= 2")
        if not (1 <= self.rows <= 10 and 1 <= self.cols <= 10):
            raise TrainError(f"board {self.rows}x{self.cols}: rows and cols must be 1..10")
        if self.generations() < 0:
            raise TrainError(f"--evaluations {self.evaluations} is less than one round robin")

    def elites(self) -> int:
        return max(1, round(self.elitism * self.population)) if self.elitism > 0 else 0

    def generations(self) -> int:
        """Generation steps after the initial evaluation."""
        n = self.population
        if self.unit == "individual":
            return self.evaluations // n - 1
        if self.unit == "round-robin":
            return self.evaluations - 1
        return self.evaluations // (n * (n - 1)) - 1

    def tested(self, gen: int) -> bool:
        return gen % self.test_every == 0 or gen == self.generations()


@dataclass
class RunResult:
    """What a training run leaves: per-generation rows and the best individual of every repetition."""

    config: TrainConfig
    rows: list[dict[str, Any]] = field(default_factory=list)
    finals: list[tuple[np.ndarray, float]] = field(default_factory=list)
    """(weights, win rate against greedy) of each repetition's last best individual."""
    games: int = 0
    seconds: float = 0.0

    def best_genome(self, provenance: dict[str, Any]) -> Genome:
        cfg = self.config
        i = max(range(len(self.finals)), key=lambda k: self.finals[k][1])
        weights, rate = self.finals[i]
        prov = dict(provenance)
        prov.update({"repetition": i, "win_rate_vs_greedy_at_end": rate, "config": asdict(cfg)})
        return Genome(cfg.representation, cfg.rows, cfg.cols, cfg.hidden, weights.copy(), prov)


class Progress(ProgressBar):
    """The training's progress bar (rate and ETA) on a terminal; silent when stderr is not a terminal."""

    def __init__(self, total: int, stream: TextIO | None = None, label: str = "") -> None:
        super().__init__(total, label or "train", stream)


def _new_population(cfg: TrainConfig, rng: np.random.Generator, n_weights: int) -> np.ndarray:
    return rng.normal(0.0, cfg.init_std, (cfg.population, n_weights))


def next_generation(cfg: TrainConfig, pop: np.ndarray, fitness: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Elitism, roulette-wheel parents, uniform crossover, Gaussian mutation (spec 5.3)."""
    n, w = pop.shape
    order = np.argsort(-fitness, kind="stable")
    out = np.empty_like(pop)
    e = cfg.elites()
    out[:e] = pop[order[:e]]
    total = float(fitness.sum())
    probs = fitness / total if total > 0 else np.full(n, 1.0 / n)
    for k in range(e, n):
        p1, p2 = rng.choice(n, size=2, p=probs)
        mask = rng.random(w) < 0.5
        child = np.where(mask, pop[p1], pop[p2])
        mutate = rng.random(w) < cfg.mutation
        child = child + mutate * rng.normal(0.0, cfg.sigma, w)
        out[k] = child
    return out


def _checkpoint_save(path: Path, cfg: TrainConfig, state: dict[str, Any], pop: np.ndarray, fitness: np.ndarray) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        np.savez(fh, population=pop, fitness=fitness, meta=np.array(json.dumps({"config": asdict(cfg), **state})))
    tmp.replace(path)


def _checkpoint_load(path: Path, cfg: TrainConfig) -> tuple[dict[str, Any], np.ndarray, np.ndarray] | None:
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            pop, fitness = data["population"].copy(), data["fitness"].copy()
    except (OSError, ValueError, KeyError) as exc:
        raise TrainError(f"checkpoint {path} is unreadable ({exc}); delete it to start over") from None
    saved = dict(meta.pop("config"))
    saved["hidden"] = tuple(saved["hidden"])
    if saved != asdict(cfg):
        diff = sorted(k for k in saved if saved[k] != asdict(cfg).get(k))
        raise TrainError(
            f"checkpoint {path} was made with different settings ({', '.join(diff)}); rerun with the same "
            "options, use another --out, or pass --fresh to start over"
        )
    return meta, pop, fitness


class RunMany(Protocol):
    """Runs independent calls somewhere else (a Ray cluster) and yields their results as they finish."""

    def map_unordered(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> Iterator[Any]:
        """Call ``fn(*args)`` for every ``args`` in ``calls``; yield the results in the order they finish."""
        ...


@dataclass
class Resume:
    """Where an interrupted repetition stands: the population, its fitness and every random stream."""

    generation: int
    """The next generation to evaluate."""
    pop: np.ndarray
    fitness: np.ndarray
    np_state: Any
    k_state: list[int]
    t_state: list[int]


@dataclass
class Repetition:
    """One finished repetition: its rows, its last best individual (weights, rate vs greedy) and its games."""

    repetition: int
    rows: list[dict[str, Any]]
    final: tuple[np.ndarray, float]
    games: int


AfterGeneration = Callable[[dict[str, Any], int, Resume | None, tuple[np.ndarray, float] | None], None]
"""Called after each generation with its row, the generation, the state to resume from
(None after the last generation) and, after the last one, the final best individual."""


def run_repetition(
    cfg: TrainConfig, rep: int, resume: Resume | None = None, after: AfterGeneration | None = None
) -> Repetition:
    """Run repetition ``rep`` of ``cfg`` (from ``resume`` if given); it depends only on ``cfg.seed`` and ``rep``.

    Repetitions are independent (each has its own random streams), so they can
    run in any order and in any process with the same numbers.
    """
    geo = geometry(cfg.rows, cfg.cols)
    sizes = layer_sizes(cfg.representation, cfg.rows, cfg.cols, cfg.hidden)
    n_w = num_weights(sizes)
    rep_code = REPRESENTATIONS[cfg.representation]
    gens = cfg.generations()
    n = cfg.population
    games_per_rr = n * (n - 1)
    rng = np.random.default_rng([cfg.seed, rep])
    krng = np.array([seed_state(cfg.seed * 7919 + rep, 1)], dtype=np.uint64)
    trng = np.array([seed_state(cfg.seed * 7919 + rep, 2)], dtype=np.uint64)
    fitness: np.ndarray | None
    if resume is not None:
        rng.bit_generator.state = resume.np_state
        krng[:] = np.array(resume.k_state, dtype=np.uint64)
        trng[:] = np.array(resume.t_state, dtype=np.uint64)
        pop, fitness, gen0 = resume.pop, resume.fitness, resume.generation
    else:
        pop, fitness, gen0 = _new_population(cfg, rng, n_w), None, 0
    rows: list[dict[str, Any]] = []
    final: tuple[np.ndarray, float] | None = None
    games = 0
    for gen in range(gen0, gens + 1):
        if gen > 0:
            assert fitness is not None
            pop = next_generation(cfg, pop, fitness, rng)
        fitness = K.round_robin(rep_code, sizes, pop, geo.num_edges, geo.num_boxes, geo.edge_boxes, geo.box_edges, krng)
        games += games_per_rr
        norm = fitness / (4.0 * (n - 1))
        row: dict[str, Any] = {
            "repetition": rep,
            "generation": gen,
            "evaluations": (gen + 1) * n,
            "games": (gen + 1) * games_per_rr,
            "best": round(float(norm.max()), 6),
            "mean": round(float(norm.mean()), 6),
            "worst": round(float(norm.min()), 6),
            "test_wins": "",
            "test_draws": "",
            "test_losses": "",
        }
        if cfg.tested(gen):
            best = pop[int(np.argmax(fitness))]
            wdl = K.match_vs(
                rep_code,
                sizes,
                best,
                K.KIND_GREEDY,
                cfg.test_games,
                geo.num_edges,
                geo.num_boxes,
                geo.edge_boxes,
                geo.box_edges,
                trng,
            )
            row["test_wins"], row["test_draws"], row["test_losses"] = (int(x) for x in wdl)
            if gen == gens:
                final = (best.copy(), float(wdl[0]) / cfg.test_games)
        rows.append(row)
        if after is not None:
            state = (
                None
                if gen == gens
                else Resume(
                    gen + 1, pop, fitness, rng.bit_generator.state, [int(x) for x in krng], [int(x) for x in trng]
                )
            )
            after(row, gen, state, final if gen == gens else None)
    assert final is not None  # the last generation is always tested
    return Repetition(rep, rows, final, games)


def train(
    cfg: TrainConfig,
    out_dir: Path | None = None,
    *,
    progress: Progress | None = None,
    fresh: bool = False,
    log: Callable[[str], None] | None = None,
    pool: RunMany | None = None,
) -> RunResult:
    """Run every repetition; with ``out_dir``, write ``generations.csv`` and resume from ``checkpoint.npz``.

    The checkpoint is written after every generation, so an interrupted run
    continues where it stopped and produces the same numbers as an
    uninterrupted one. With ``pool`` (``--ray``), the repetitions left run
    there at the same time; the checkpoint then advances a whole repetition at
    a time, in repetition order, and the numbers are the same as without it
    (only the ``seconds`` column, the run's wall clock, differs).
    """
    cfg.check()
    n_w = num_weights(layer_sizes(cfg.representation, cfg.rows, cfg.cols, cfg.hidden))
    gens = cfg.generations()
    result = RunResult(cfg)
    ckpt: Path | None = None
    start_rep = 0
    resume: Resume | None = None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        ckpt = out_dir / "checkpoint.npz"
        if fresh and ckpt.exists():
            ckpt.unlink()
        loaded = _checkpoint_load(ckpt, cfg)
        if loaded is not None:
            meta, pop, fitness = loaded
            start_rep, start_gen = int(meta["repetition"]), int(meta["generation"]) + 1
            result.rows = list(meta["rows"])
            result.finals = [(np.array(w, dtype=np.float64), float(r)) for w, r in meta["finals"]]
            result.games = int(meta["games"])
            result.seconds = float(meta["seconds"])
            if pop.shape[0] > 0:
                resume = Resume(start_gen, pop, fitness, meta["np_state"], meta["k_state"], meta["t_state"])
            if log:
                log(f"resuming from {ckpt}: repetition {start_rep + 1}, generation {start_gen}")
    t0 = time.perf_counter() - result.seconds
    done_reps = start_rep

    def save(rep: int, gen: int, state: Resume | None) -> None:
        if ckpt is None:
            return
        meta: dict[str, Any] = {
            "repetition": rep,
            "generation": gen,
            "rows": result.rows,
            "finals": [(w.tolist(), r) for w, r in result.finals],
            "games": result.games,
            "seconds": result.seconds,
        }
        if state is None:  # the next repetition starts fresh from its own seed
            meta.update({"repetition": rep + 1, "generation": -1, "np_state": None, "k_state": [], "t_state": []})
            _checkpoint_save(ckpt, cfg, meta, np.zeros((0, n_w)), np.zeros(0))
        else:
            meta.update({"np_state": state.np_state, "k_state": state.k_state, "t_state": state.t_state})
            _checkpoint_save(ckpt, cfg, meta, state.pop, state.fitness)

    def tick(done: int, note: str) -> None:
        if progress is not None:
            rate = result.games / max(result.seconds, 1e-9)
            progress.update(done, f"{note} {rate:,.0f} games/s")

    if pool is None:
        for rep in range(start_rep, cfg.repetitions):

            def after(
                row: dict[str, Any],
                gen: int,
                state: Resume | None,
                final: tuple[np.ndarray, float] | None,
                rep: int = rep,
            ) -> None:
                result.games += cfg.population * (cfg.population - 1)
                result.seconds = time.perf_counter() - t0
                row["seconds"] = round(result.seconds, 2)
                result.rows.append(row)
                if final is not None:
                    result.finals.append(final)
                save(rep, gen, state)
                tick(rep * (gens + 1) + gen + 1, f"rep {rep + 1}/{cfg.repetitions} gen {gen}/{gens}")

            run_repetition(cfg, rep, resume if rep == start_rep else None, after)
    else:
        calls = [(cfg, rep, resume if rep == start_rep else None) for rep in range(start_rep, cfg.repetitions)]
        waiting: dict[int, Repetition] = {}
        for got in pool.map_unordered(run_repetition, calls):
            waiting[got.repetition] = got
            while done_reps in waiting:  # store in repetition order, so the checkpoint stays a prefix
                r = waiting.pop(done_reps)
                result.games += r.games
                result.seconds = time.perf_counter() - t0
                for row in r.rows:
                    row["seconds"] = round(result.seconds, 2)
                result.rows.extend(r.rows)
                result.finals.append(r.final)
                save(done_reps, gens, None)
                done_reps += 1
            finished = len(waiting) + done_reps
            tick(finished * (gens + 1), f"{finished}/{cfg.repetitions} repetitions")
    if out_dir is not None:
        write_csv(result.rows, out_dir / "generations.csv")
    return result


def command_line(cfg: TrainConfig) -> str:
    """The ``arena train dots-and-boxes`` command that reproduces ``cfg``."""
    return (
        f"arena train dots-and-boxes --rows {cfg.rows} --cols {cfg.cols} --representation {cfg.representation} "
        f"--hidden {','.join(map(str, cfg.hidden))} --population {cfg.population} --elitism {cfg.elitism} "
        f"--mutation {cfg.mutation} --sigma {cfg.sigma} --init-std {cfg.init_std} --evaluations {cfg.evaluations} "
        f"--unit {cfg.unit} --repetitions {cfg.repetitions} --test-every {cfg.test_every} "
        f"--test-games {cfg.test_games} --seed {cfg.seed}"
    )


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in CSV_FIELDS})


def curves(result: RunResult) -> dict[str, np.ndarray]:
    """Mean over repetitions per generation: best, mean and worst fitness, and the test win rate (NaN if untested)."""
    cfg = result.config
    gens = cfg.generations() + 1
    best = np.zeros((cfg.repetitions, gens))
    mean = np.zeros_like(best)
    worst = np.zeros_like(best)
    win = np.full_like(best, np.nan)
    for row in result.rows:
        r, g = int(row["repetition"]), int(row["generation"])
        best[r, g], mean[r, g], worst[r, g] = row["best"], row["mean"], row["worst"]
        if row["test_wins"] != "":
            win[r, g] = int(row["test_wins"]) / cfg.test_games
    tested = ~np.isnan(win[0])
    return {
        "generation": np.arange(gens),
        "best": best.mean(axis=0),
        "mean": mean.mean(axis=0),
        "worst": worst.mean(axis=0),
        "win": np.nanmean(win[:, tested], axis=0) if tested.any() else np.zeros(0),
        "win_generation": np.arange(gens)[tested],
        "win_per_rep": win[:, tested],
        "mean_min": mean.min(),
        "mean_max": mean.max(),
    }


def plots_available() -> bool:
    """Whether matplotlib (the optional ``plots`` extra) is installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot_learning(results: dict[str, RunResult], path: Path, title: str) -> bool:
    """Best/mean fitness and the win rate against greedy per generation, one line per run; False without matplotlib."""
    if not plots_available():
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for label, res in results.items():
        c = curves(res)
        line = ax1.plot(c["generation"], c["best"], label=f"{label}: best")[0]
        ax1.plot(c["generation"], c["mean"], linestyle="--", color=line.get_color(), label=f"{label}: mean")
        ax2.plot(c["win_generation"], c["win"], marker=".", color=line.get_color(), label=label)
    ax1.set_xlabel("generation")
    ax1.set_ylabel("normalised fitness (mean of repetitions)")
    ax1.set_ylim(0, 1)
    ax1.legend(fontsize=7)
    ax2.set_xlabel("generation")
    ax2.set_ylabel("best individual's win rate vs greedy (20 games)")
    ax2.set_ylim(0, 1)
    ax2.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def plot_study(rows: list[tuple[str, float, float, float]], path: Path, title: str) -> bool:
    """Bar chart of (label, mean final win rate, low, high); False without matplotlib."""
    if not plots_available():
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    labels = [r[0] for r in rows]
    means = np.array([r[1] for r in rows])
    lo = means - np.array([r[2] for r in rows])
    hi = np.array([r[3] for r in rows]) - means
    ax.bar(labels, means, yerr=[lo, hi], capsize=4, color="tab:blue")
    ax.set_ylim(0, 1)
    ax.set_ylabel("final win rate vs greedy")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True
