"""RPSContest programs as Arena bots: the server-side check of a program, and the format's registry entry data.

An RPSContest program (rpscontest.com) is a Python 2 script run once per round with the
opponent's last move in the global ``input`` and its own move left in ``output``. It is
stored and run like every foreign format (:mod:`arena_server.bots.formats`): the runner
:mod:`arena_server.bots.runners.rpscontest_runner` converts it with
:mod:`arena_server.bots.runners.py2to3` inside the sandbox. :func:`program_problems` runs the
same conversion when the bot is added, uploaded or checked, so a program that cannot be
converted is refused then, with the line named.
"""

from __future__ import annotations

from pathlib import Path

from arena_server.bots.runners.py2to3 import ConversionError, convert

THREE_SIGNS_ONLY = "RPSContest programs play 3 signs only"
SUMMARY = (
    "an RPSContest program (Python 2 welcome): run once per round with the opponent's last move "
    "in `input`, its move left in `output`"
)


def read_source(path: Path) -> str:
    """The program's text: UTF-8, or Latin-1 as Python 2 files often were.

    Raises:
        OSError: the file cannot be read.
    """
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def convert_program(path: Path) -> str:
    """The Python 3 text the runner will execute for the program at ``path``.

    Raises:
        ConversionError: the program cannot be converted (the message names the line).
        OSError: the file cannot be read.
    """
    return convert(read_source(path), path.name)


def program_problems(path: Path, python: str = "") -> list[str]:
    """What stops the RPSContest program at ``path`` from running here (one line each; empty when it can run).

    ``python`` (the interpreter that runs bots) is not needed: the conversion is the same for every
    Python 3, and a module the program imports that the interpreter lacks is reported when it plays.
    """
    try:
        convert_program(path)
    except OSError as exc:
        return [f"cannot read {path}: {exc.strerror or exc}"]
    except ConversionError as exc:
        return [f"cannot convert this RPSContest program: {exc}"]
    return []
