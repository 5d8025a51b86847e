"""Progress bars with a rate and an ETA for long runs (tournaments, experiments, training).

Drawn with ``rich`` on stderr when stderr is a terminal; silent otherwise (a log
file or a pipe gets the results, not hundreds of redraws). The caller reports
``update(done, note)`` and ``close()``; nothing else about ``rich`` leaks out.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


def is_terminal(stream: TextIO) -> bool:
    """True when ``stream`` is an interactive terminal."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


class ProgressBar:
    """``label [#####     ] 12/40 0:00:03 ETA 0:00:07 note`` on a terminal; nothing when not a terminal.

    Args:
        total: the number of steps.
        label: what is being counted, shown before the bar.
        stream: where to draw (default stderr).
        enabled: force the bar on or off (default: only when ``stream`` is a terminal).
    """

    def __init__(self, total: int, label: str = "", stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream: TextIO = stream if stream is not None else sys.stderr
        self.total = max(1, total)
        self.enabled = is_terminal(self.stream) if enabled is None else enabled
        self._progress: Progress | None = None
        if self.enabled:
            console = Console(file=self.stream, force_terminal=True)
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=30),  # the whole line fits 80 columns with a 20-character label
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[note]}"),
                console=console,
                transient=False,
                # lines printed to stdout go above the bar only when stdout is that terminal too;
                # ``> results.txt`` keeps them in the file
                redirect_stdout=is_terminal(sys.stdout),
            )
            self._task = self._progress.add_task(label.strip(), total=self.total, note="")
            self._progress.start()

    def update(self, done: int, note: str = "", total: int | None = None) -> None:
        """Show ``done`` steps finished (of ``total`` if it changed), with an optional note after the bar."""
        if total is not None:
            self.total = max(1, total)
        if self._progress is not None:
            self._progress.update(self._task, completed=min(done, self.total), total=self.total, note=note)
            if done >= self.total:
                self.close()

    def close(self) -> None:
        """Stop drawing (the last state stays on the screen)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
