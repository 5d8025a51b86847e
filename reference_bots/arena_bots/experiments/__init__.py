"""Experiments reproducing the source documents' results with Arena's reference bots.

Each experiment writes a markdown document (and pictures beside it). The full run's
default path is the committed document under ``docs/experiments/``; a ``--quick`` run
never writes there (:func:`output_path`).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]
"""The checkout the package runs from (for recognising its committed documents)."""


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
