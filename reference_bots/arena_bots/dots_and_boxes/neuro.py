"""The thesis's individual (spec 4) and its genome files.

A genome is the weight vector of a fixed-shape feed-forward sigmoid network
with one output. Two input representations:

* ``thesis`` (spec 3-4): the board (E flags, 1 = drawn) followed by the
  one-hot candidate edge, 2E inputs; the network only plays the board size it
  was trained on.
* ``features`` (the conclusion's "other input representations"): 5 position
  inputs (the mover's box margin / B, the share of edges drawn, the shares of
  boxes with two and with three sides, a constant 1) and 5 per-candidate
  inputs (boxes it closes / 2, boxes it gives a third side / 2, boxes the
  opponent could then take in a row / B, whether it lies on the border,
  whether it hands over a long chain of 3+). It sees the score and the chains
  and is independent of the board size.

A genome file is JSON: ``format``, ``representation``, ``rows``, ``cols`` (the
board it was trained on), ``hidden`` (layer sizes), ``weights`` (layer by
layer, the row-major out x in matrix, then the biases) and ``provenance`` (the
command, seed and settings that produced it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from arena_bots.dots_and_boxes import kernels as K

FORMAT = "arena-dots-and-boxes-genome/1"
REPRESENTATIONS = {"thesis": K.REP_THESIS, "features": K.REP_FEATURES}
GENOME_DIR = Path(__file__).parent / "genomes"
SHIPPED = {"thesis": GENOME_DIR / "thesis-3x3.json", "features": GENOME_DIR / "features-3x3.json"}


class GenomeError(ValueError):
    """A genome file that cannot be used (the message says why and what to do)."""


def num_inputs(representation: str, rows: int, cols: int) -> int:
    """Input layer size of a network for this representation and board."""
    if representation == "thesis":
        return 2 * (2 * rows * cols + rows + cols)
    if representation == "features":
        return K.SHARED_FEATURES + K.MOVE_FEATURES
    raise GenomeError(f"unknown representation {representation!r}; use one of {sorted(REPRESENTATIONS)}")


def layer_sizes(representation: str, rows: int, cols: int, hidden: tuple[int, ...]) -> np.ndarray:
    """``[inputs, hidden..., 1]`` as the kernels want it."""
    if not hidden or any(h < 1 for h in hidden):
        raise GenomeError(f"hidden layers {hidden!r} must be one or more positive sizes")
    return np.array([num_inputs(representation, rows, cols), *hidden, 1], np.int64)


def num_weights(sizes: np.ndarray) -> int:
    """Weights plus biases of a network with these layer sizes."""
    return int(sum(int(sizes[i + 1]) * (int(sizes[i]) + 1) for i in range(len(sizes) - 1)))


@dataclass
class Genome:
    """One network: its representation, shape and weights.

    Attributes:
        representation: ``thesis`` or ``features``.
        rows: Rows of boxes it was trained on.
        cols: Columns of boxes it was trained on.
        hidden: Hidden layer sizes.
        weights: float64 vector of :func:`num_weights` values.
        provenance: How it was made (command, seed, settings, results).
    """

    representation: str
    rows: int
    cols: int
    hidden: tuple[int, ...]
    weights: np.ndarray
    provenance: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sizes = layer_sizes(self.representation, self.rows, self.cols, self.hidden)
        self.weights = np.ascontiguousarray(self.weights, dtype=np.float64)
        expected = num_weights(self.sizes)
        if self.weights.shape != (expected,):
            raise GenomeError(
                f"a {self.representation} network {list(self.sizes)} needs {expected} weights, got {self.weights.size}"
            )
        if not np.isfinite(self.weights).all():
            raise GenomeError("the genome has non-finite weights (NaN or infinity)")

    @property
    def rep(self) -> int:
        return REPRESENTATIONS[self.representation]

    def plays(self, rows: int, cols: int) -> bool:
        """Whether the network's input fits a ``rows`` x ``cols`` board."""
        return self.representation == "features" or (rows, cols) == (self.rows, self.cols)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "representation": self.representation,
            "rows": self.rows,
            "cols": self.cols,
            "hidden": list(self.hidden),
            "provenance": self.provenance,
            "weights": [round(float(w), 6) for w in self.weights],
        }


def save_genome(genome: Genome, path: str | Path) -> None:
    """Write ``genome`` as JSON (weights rounded to 6 decimals), atomically."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(genome.to_json(), indent=1) + "\n")
    tmp.replace(path)


def load_genome(path: str | Path) -> Genome:
    """Read a genome file written by :func:`save_genome` (``arena train dots-and-boxes``).

    Raises:
        GenomeError: The file is missing, not JSON, or not a usable genome.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise GenomeError(f"genome file {path} does not exist; train one with `arena train dots-and-boxes`") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GenomeError(f"genome file {path} is not readable JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise GenomeError(f'{path} is not a dots and boxes genome (expected "format": "{FORMAT}")')
    try:
        return Genome(
            str(data["representation"]),
            int(data["rows"]),
            int(data["cols"]),
            tuple(int(h) for h in data["hidden"]),
            np.array(data["weights"], dtype=np.float64),
            dict(data.get("provenance", {})),
        )
    except GenomeError as exc:
        raise GenomeError(f"{path}: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise GenomeError(f"{path}: missing or malformed field ({exc}); rewrite it with save_genome") from None
