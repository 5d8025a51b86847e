"""Bot formats: a file written for another platform, played unchanged through a runner in the subprocess seat.

``native`` is Arena's own protocol: a command line that speaks it. Every other format
(``kaggle``; ``rpscontest`` is added by its own module) is one Python file plus a *runner*,
a standard-library program in :mod:`arena_server.bots.runners` that loads the file the way
its home platform does and speaks Arena's JSON-lines protocol for it. The runner runs
in the same sandboxed subprocess seat as any other bot; it gets its source on the command
line (``python -c``), so the bot's user needs to read nothing of the server.

A format bot is stored like any subprocess bot, with the command ``arena-format:NAME FILE``
(:func:`stored_command`): ``FILE`` is relative to the bot's working directory (its upload
folder, or the folder of the file given to ``arena bot add``). :func:`bot_program` turns a
stored command into the :class:`~arena_server.seats.process.BotProgram` that runs it, so the
registry, the self-check, ``check-bot``, ``arena match`` and :mod:`arena_server.matches.evaluate`
all share one path. Adding a format is one :func:`register_format` call with its runner.
"""

from __future__ import annotations

import ast
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from arena_server.seats.framing import Framing
from arena_server.seats.process import BotProgram
from arena_server.seats.sandbox import DEFAULT_PATH, Limits

FORMAT_PREFIX = "arena-format:"
"""Start of a stored command that names a format instead of a command line."""
RUNNERS_DIR = Path(__file__).parent / "runners"
STDIO_MODULE = "arena_server.bots.runners.stdio"
"""The shared protocol module, registered under this name before a runner starts."""


class FormatError(ValueError):
    """A file that cannot be played in the format asked for; the message says what to do."""


@dataclass(frozen=True)
class BotFormat:
    """One way to submit a bot.

    Attributes:
        name: The format's name (``--NAME FILE`` on the command line).
        summary: One line for help texts.
        runner: The runner's file name in :data:`RUNNERS_DIR` (None: a native command).
        games: The games the format can play (None: any game).
        game_note: Why the format is limited to ``games`` (said when another game is asked for).
        check_file: ``check_file(path, python)`` finds problems that stop a file from running here
            with the interpreter ``python`` (missing modules, syntax the runner cannot convert);
            returns one line per problem.
    """

    name: str
    summary: str
    runner: str | None = None
    games: tuple[str, ...] | None = None
    game_note: str = ""
    check_file: Callable[[Path, str], list[str]] | None = None

    def check_games(self, games: Sequence[str]) -> tuple[str, ...]:
        """The games to register (the format's own when none are given).

        Raises:
            FormatError: a game the format cannot play.
        """
        if self.games is None:
            return tuple(games)
        for game in games:
            if game not in self.games:
                note = f" ({self.game_note})" if self.game_note else ""
                raise FormatError(
                    f"a {self.name} bot plays only {', '.join(self.games)}, not {game}{note}; "
                    f"use --games {','.join(self.games)}"
                )
        return tuple(games) or self.games


FORMATS: dict[str, BotFormat] = {}


def register_format(fmt: BotFormat) -> BotFormat:
    """Add ``fmt`` to :data:`FORMATS` (a format module calls this when it is imported)."""
    if fmt.runner is not None and not (RUNNERS_DIR / fmt.runner).is_file():
        raise ValueError(f"format {fmt.name}: no runner {fmt.runner} in {RUNNERS_DIR}")
    FORMATS[fmt.name] = fmt
    return fmt


def get_format(name: str) -> BotFormat:
    """The format called ``name``.

    Raises:
        FormatError: an unknown name (the message lists the known ones).
    """
    try:
        return FORMATS[name]
    except KeyError:
        raise FormatError(f"unknown bot format {name!r}; formats are: {', '.join(FORMATS)}") from None


def foreign_formats() -> list[BotFormat]:
    """The formats that take a file (every one but ``native``), for command-line options."""
    return [f for f in FORMATS.values() if f.runner is not None]


# -- stored commands ------------------------------------------------------------------------------


def stored_command(fmt: BotFormat, file_name: str) -> str:
    """The command stored for a bot in format ``fmt`` whose file is ``file_name`` in its working directory."""
    return f"{FORMAT_PREFIX}{fmt.name} {shlex.quote(file_name)}"


def parse_command(command: str) -> tuple[BotFormat, str] | None:
    """``(format, file name)`` of a stored format command; None for a native command line.

    Raises:
        FormatError: a format command naming an unknown format or no file.
    """
    if not command.startswith(FORMAT_PREFIX):
        return None
    name, _, rest = command[len(FORMAT_PREFIX) :].partition(" ")
    fmt = get_format(name)
    words = shlex.split(rest)
    if len(words) != 1:
        raise FormatError(f"the command {command!r} should name exactly one file after the format")
    return fmt, words[0]


def runner_source(fmt: BotFormat) -> str:
    """The program passed to ``python -c``: registers the shared protocol module, then runs the runner."""
    assert fmt.runner is not None
    stdio = (RUNNERS_DIR / "stdio.py").read_text()
    runner = (RUNNERS_DIR / fmt.runner).read_text()
    return (
        "import sys, types\n"
        f"_m = types.ModuleType({STDIO_MODULE!r})\n"
        f"sys.modules[{STDIO_MODULE!r}] = _m\n"
        f"exec(compile({stdio!r}, {STDIO_MODULE!r}, 'exec'), _m.__dict__)\n"
        f"exec(compile({runner!r}, {fmt.runner!r}, 'exec'), {{'__name__': '__main__'}})\n"
    )


def runner_python(limits: Limits) -> str:
    """The interpreter for runners: the server's own, unless the bot's user cannot reach it (then ``python3``).

    When the server runs as root, bots run as ``nobody``; a Python under a private home
    (``/root/.pyenv``) is out of its reach, and the system ``python3`` plays instead (with
    its own modules: a missing one is named in the bot's error).
    """
    if os.geteuid() != 0 or limits.run_as is None or limits.run_as == "root" or _reachable(sys.executable):
        return sys.executable
    return shutil.which("python3", path=DEFAULT_PATH) or "python3"


def _reachable(executable: str) -> bool:
    """Whether every folder above ``executable`` (links resolved) lets other users through."""
    real = Path(os.path.realpath(executable))
    return all(not folder.exists() or folder.stat().st_mode & 0o001 for folder in real.parents)


def bot_program(
    command: str,
    framing: Framing,
    workdir: str | Path | None,
    limits: Limits,
    startup_timeout: float = 10.0,
) -> BotProgram:
    """The program that runs a stored command: a native command line as it is, a format file through its runner.

    Raises:
        FormatError: a format command naming an unknown format or no file.
    """
    parsed = parse_command(command)
    if parsed is None:
        return BotProgram(command, framing, workdir=workdir, limits=limits, startup_timeout=startup_timeout)
    fmt, file_name = parsed
    argv = [runner_python(limits), "-B", "-c", runner_source(fmt), file_name]
    return BotProgram(
        argv,
        Framing.JSON,
        workdir=workdir,
        limits=limits,
        startup_timeout=startup_timeout,
        label=f"{fmt.name} runner: {file_name}",
    )


def local_program(
    format_name: str, file: Path, limits: Limits | None = None, startup_timeout: float = 10.0
) -> BotProgram:
    """A program for ``check-bot``, ``arena match`` and ``evaluate``: ``file`` in ``format_name``, run where it lies.

    Raises:
        FormatError: an unknown format, a missing file, or a problem :attr:`BotFormat.check_file` finds.
    """
    limits = limits or Limits()
    command, workdir = prepare_local(format_name, file, limits)
    return bot_program(command, Framing.JSON, workdir, limits, startup_timeout)


def prepare_local(format_name: str, file: Path, limits: Limits | None = None) -> tuple[str, str]:
    """``(stored command, working directory)`` for ``arena bot add --FORMAT file``, after checking the file.

    Raises:
        FormatError: an unknown format, a missing file, or a problem the format's check finds.
    """
    fmt = get_format(format_name)
    if fmt.runner is None:
        raise FormatError("the native format takes a command line (--cmd), not a file")
    path = file.resolve()
    if not path.is_file():
        raise FormatError(f"{file} is not a file; give the {fmt.name} bot's .py file")
    check_file(fmt, path, limits)
    return stored_command(fmt, path.name), str(path.parent)


def check_file(fmt: BotFormat, path: Path, limits: Limits | None = None) -> None:
    """Raise FormatError with every problem the format's check finds in ``path`` (run under ``limits``)."""
    if fmt.check_file is None:
        return
    problems = fmt.check_file(path, runner_python(limits or Limits()))
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise FormatError(problems[0] + more)


# -- checks shared by the Python formats ----------------------------------------------------------


def imported_modules(source: str) -> list[tuple[int, str]]:
    """``(line, top-level module)`` of the absolute imports the file runs when it is loaded.

    Imports inside functions and classes (run later, perhaps after the file extends
    ``sys.path``) and inside ``try`` blocks (optional imports with a fallback) are left out.
    """
    tree = ast.parse(source)

    def loaded(nodes: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for node in nodes:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Try):
                continue
            out.append(node)
            for block in ("body", "orelse"):
                out += loaded(getattr(node, block, []))
        return out

    found: list[tuple[int, str]] = []
    for node in loaded(tree.body):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return sorted(set(found))


def missing_modules(path: Path, python: str) -> list[tuple[int, str]]:
    """The imports of ``path`` that ``python`` cannot find (modules beside the file count as found)."""
    try:
        imports = imported_modules(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return []  # the runner reports syntax errors with their line
    local = {p.stem for p in path.parent.glob("*.py")} | {p.name for p in path.parent.iterdir() if p.is_dir()}
    wanted = sorted({m for _, m in imports if m not in local})
    if not wanted:
        return []
    probe = "import importlib.util as u, sys; print(' '.join(m for m in sys.argv[1:] if u.find_spec(m) is None))"
    try:
        done = subprocess.run([python, "-c", probe, *wanted], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    absent = set(done.stdout.split())
    return [(line, m) for line, m in imports if m in absent]


def python_file_problems(path: Path, python: str) -> list[str]:
    """Problems that stop a Python bot file from starting here: a syntax error, a module not installed."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [f"cannot read {path}: {exc}"]
    try:
        ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        return [f"{path.name} line {exc.lineno}: {exc.msg}"]
    return [
        f"{path.name} line {line} imports {module!r}, which is not installed for the Python that runs bots here "
        f"({python}); install it there or remove the import"
        for line, module in missing_modules(path, python)
    ]


NATIVE = register_format(BotFormat("native", "a program that speaks Arena's protocol (--cmd)"))
KAGGLE = register_format(
    BotFormat(
        "kaggle",
        "a Kaggle rock-paper-scissors agent: the last callable in the file gets (observation, configuration)",
        runner="kaggle_runner.py",
        games=("rps",),
        game_note="Kaggle agents play rock-paper-scissors, with 3 signs or more (configuration.signs)",
        check_file=python_file_problems,
    )
)
