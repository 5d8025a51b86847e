"""RPSContest programs as Arena bots: convert the source, pack it with its runner, describe the program.

An RPSContest program (rpscontest.com) is a Python 2 script run once per round with
the opponent's last move in the global ``input`` and its own move left in ``output``.
:func:`bundle` converts the script with :mod:`arena_server.bots.py2to3` (a conversion
error names the line), writes it with the stdlib-only runner
(:mod:`arena_server.bots.runners.rpscontest_runner`) into a folder, and returns the
command that plays it through the ordinary sandboxed subprocess seat, JSON-lines framing.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from arena_server.bots.py2to3 import ConversionError, convert
from arena_server.seats.framing import Framing
from arena_server.seats.process import BotProgram
from arena_server.seats.sandbox import Limits

RUNNER = Path(__file__).parent / "runners" / "rpscontest_runner.py"
PROGRAM_NAME = "program.py"
"""The converted program's name inside a bundle (the original is kept beside it as ``original.py2``)."""
COMMAND = f"python3 -I -S {RUNNER.name} {PROGRAM_NAME}"
"""How a bundle runs, from inside its folder: the machine's Python 3, standard library only."""
GAMES = ("rps",)
THREE_SIGNS_ONLY = "RPSContest programs play 3 signs only"


class RpsContestError(Exception):
    """The program cannot be used: unreadable, not convertible, or asked to play RPSLS."""


@dataclass(frozen=True)
class Bundle:
    """A folder holding a converted program and its runner."""

    folder: Path
    command: str = COMMAND
    framing: Framing = Framing.JSON
    games: tuple[str, ...] = GAMES

    def program(self, limits: Limits | None = None, startup_timeout: float = 10.0) -> BotProgram:
        """The subprocess-seat description of this bundle."""
        return BotProgram(
            self.command,
            self.framing,
            workdir=str(self.folder),
            limits=limits or Limits(),
            startup_timeout=startup_timeout,
        )


def read_source(path: Path) -> str:
    """The program's text (UTF-8, or Latin-1 as Python 2 files often were)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RpsContestError(f"cannot read RPSContest program {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def convert_program(path: Path) -> str:
    """The Python 3 text of the RPSContest program at ``path``.

    Raises:
        RpsContestError: unreadable, or a conversion error (naming the line).
    """
    try:
        return convert(read_source(path), path.name)
    except ConversionError as exc:
        raise RpsContestError(f"cannot convert RPSContest program {exc}") from None


def bundle(path: Path, folder: Path) -> Bundle:
    """Convert the program at ``path`` and write it, its original and the runner into ``folder``.

    The folder is created if needed and left readable by everyone (bots may run as ``nobody``).

    Raises:
        RpsContestError: as :func:`convert_program`.
    """
    converted = convert_program(path)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    (folder / PROGRAM_NAME).write_text(converted, encoding="utf-8")
    shutil.copyfile(path, folder / "original.py2")
    shutil.copyfile(RUNNER, folder / RUNNER.name)
    for item in folder.iterdir():
        item.chmod(0o644)
    return Bundle(folder)


def check_signs(game: str, params: dict[str, object]) -> None:
    """Refuse, in one line, a match an RPSContest program cannot play (another game, or RPSLS)."""
    if game != "rps":
        raise RpsContestError(f"RPSContest programs play rps only, not {game}")
    signs = params.get("signs", 3)
    if int(str(signs)) != 3:
        raise RpsContestError(f"{THREE_SIGNS_ONLY}; this match asks for signs={signs}")
