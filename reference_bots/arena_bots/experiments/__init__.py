"""Experiments reproducing the source documents' results with Arena's reference bots.

Each experiment writes a markdown document (and pictures beside it). The full run's
default path is the committed document under ``docs/experiments/``; a ``--quick`` run
never writes there (:func:`output_path`).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from arena_bots.progress import ProgressBar

REPOSITORY = Path(__file__).resolve().parents[3]
"""The checkout the package runs from (for recognising its committed documents)."""


class RunMany(Protocol):
    """Runs independent calls somewhere else (a Ray cluster, ``--ray``) and yields their results as they finish."""

    def map_unordered(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> Iterator[Any]:
        """Call ``fn(*args)`` for every ``args`` in ``calls``; yield the results in the order they finish."""
        ...


def _numbered(fn: Callable[..., Any], index: int, args: tuple[Any, ...]) -> tuple[int, Any]:
    """``(index, fn(*args))``: lets results that come back in any order be put back in place."""
    return index, fn(*args)


class Units:
    """An experiment's independent units of work, run here or on a pool, counted on one progress bar.

    Every caller builds its calls (with their seeds) in a fixed order and gets
    the results back in that order, so the numbers do not depend on where or in
    which order the calls ran.

    Args:
        pool: where to run the calls (``--ray``); None runs them here, one after another.
        total: how many calls the whole experiment makes (the progress bar's length).
        label: the progress bar's label.
    """

    def __init__(self, pool: RunMany | None, total: int, label: str) -> None:
        self.pool = pool
        self.done = 0
        self.bar = ProgressBar(total, label)

    def run(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> list[Any]:
        """``[fn(*args) for args in calls]``, on the pool when there is one; the results in the order of ``calls``."""
        out: list[Any] = [None] * len(calls)
        if self.pool is None:
            for i, args in enumerate(calls):
                out[i] = fn(*args)
                self._step()
            return out
        for i, result in self.pool.map_unordered(_numbered, [(fn, i, args) for i, args in enumerate(calls)]):
            out[i] = result
            self._step()
        return out

    def _step(self) -> None:
        self.done += 1
        self.bar.update(self.done)

    def close(self) -> None:
        """Stop drawing the progress bar."""
        self.bar.close()


class OutputError(ValueError):
    """The output path cannot be used (a committed document under --quick, or not writable)."""


def output_path(given: str | None, default: str, quick: bool, option: str = "--output") -> Path:
    """Where an experiment writes its document, checked before the experiment starts.

    Args:
        given: the path the user gave, or None.
        default: the committed document (relative to the repository), the full run's default.
        quick: a ``--quick`` run: its numbers are not comparable, so the committed document is never the target;
            without ``given`` it writes into a fresh temporary folder (and says where on stderr).
        option: the option's name, for messages.

    Raises:
        OutputError: ``--quick`` would overwrite the committed document, or the folder cannot be written.
    """
    if given is None:
        if quick:
            folder = Path(tempfile.mkdtemp(prefix="arena-quick-"))
            path = folder / Path(default).name
            print(
                f"arena: --quick writes to {path} (the committed {default} is left alone; {option} PATH chooses)",
                file=sys.stderr,
                flush=True,
            )
            return path
        path = Path(default)
        path.parent.mkdir(parents=True, exist_ok=True)
        return _writable(path, str(path), default, option)
    path = Path(given)
    if quick:
        committed = {Path(default).resolve(), (REPOSITORY / default).resolve()}
        if path.resolve() in committed:
            raise OutputError(
                f"{option} {given} is the committed document; a --quick run would overwrite it with numbers that "
                f"are not comparable. Leave out {option} (a temporary file is used) or give another path"
            )
    if not path.parent.is_dir():
        raise OutputError(f"{option} {given}: the folder {path.parent} does not exist; create it or pick another path")
    return _writable(path, given, default, option)


def _writable(path: Path, given: str, default: str, option: str) -> Path:
    try:
        if path.is_dir():
            raise OutputError(f"{option} {given} is a folder; give a file path such as {path / Path(default).name}")
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".arena-write-test-"):
            pass
        if path.exists():
            with path.open("a"):
                pass
    except OSError as exc:
        raise OutputError(f"{option} {given} cannot be written ({exc.strerror or exc}); pick another path") from None
    return path
