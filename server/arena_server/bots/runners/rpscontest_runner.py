"""Runner for RPSContest programs: plays a Python 2 rpscontest.com entry, unchanged, as an Arena bot.

Started by the subprocess seat as ``python -c <source> PROGRAM_FILE`` (see
:func:`arena_server.bots.formats.runner_source`, which also registers
:mod:`arena_server.bots.runners.py2to3` for it); standard library only.

The program is converted to Python 3 when the runner starts (the same conversion the
server ran when the bot was added, so its errors were reported then, naming the line).
As on RPSContest, the converted program runs once per round in one namespace that
persists for the match: the global ``input`` is ``""`` in the first round and the
opponent's last move (``"R"``, ``"P"`` or ``"S"``) after; the program leaves its move in
``output``. The namespace also holds what Python 2 programs take for granted
(:func:`namespace`). Prints go to the bot's log and stdin is empty
(:class:`~arena_server.bots.runners.stdio.Protocol`); files it writes land in a private
folder. A program that raises, or leaves anything but ``"R"``, ``"P"`` or ``"S"`` in
``output``, resigns with a one-line reason (the line it raised at, the round, the bad
value); asked to play with more than 3 signs, it resigns saying RPSContest programs
play 3 signs only.
"""

from __future__ import annotations

import builtins
import functools
import numbers
import os
import sys
import traceback
from typing import Any

from arena_server.bots.runners.py2to3 import DIVISION_HELPER, RENAMED, ConversionError, convert
from arena_server.bots.runners.stdio import Protocol, Resign, param, private_workdir, serve

TAG = "[rpscontest]"
MOVES = "RPS"
"""RPSContest's moves in Arena's action order (0 rock, 1 paper, 2 scissors)."""
THREE_SIGNS_ONLY = "RPSContest programs play 3 signs only"


class Py2Division:
    """``a /__py2div__/ b`` is Python 2's ``a / b``: floor division of two integers, true division otherwise.

    ``a / D`` returns a left half that divides by what follows; ``D / b`` (from ``x /= D / b``)
    returns a right half that ``x`` is divided by. Precedence and associativity are those of ``/``.
    """

    __array_ufunc__ = None  # numpy arrays defer to these objects instead of broadcasting them

    @staticmethod
    def divide(a: Any, b: Any) -> Any:
        if isinstance(a, numbers.Integral) and isinstance(b, numbers.Integral):
            return a // b
        return a / b

    def __rtruediv__(self, a: Any) -> _Half:
        return _Half(a)

    def __truediv__(self, b: Any) -> _Half:
        return _Half(b)


class _Half:
    __array_ufunc__ = None

    def __init__(self, value: Any) -> None:
        self.value = value

    def __truediv__(self, b: Any) -> Any:  # (a / D) / b
        return Py2Division.divide(self.value, b)

    def __rtruediv__(self, a: Any) -> Any:  # a /= (D / b)
        return Py2Division.divide(a, self.value)


def _raw_input(*_: object) -> str:
    raise RuntimeError(
        "raw_input() is not available: RPSContest programs have no console; "
        "the opponent's last move is in the global `input`"
    )


def _cmp(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


def namespace() -> dict[str, Any]:
    """A fresh namespace for one match, with what Python 2 programs expect of their builtins."""
    return {
        "__name__": "__main__",
        "__builtins__": builtins,
        DIVISION_HELPER: Py2Division(),
        "raw_input": _raw_input,
        **{old: getattr(builtins, new) for old, new in RENAMED.items()},  # also reachable as names
        "reduce": functools.reduce,
        "cmp": _cmp,
        "map": lambda *a: list(builtins.map(*a)),
        "filter": lambda *a: list(builtins.filter(*a)),
        "zip": lambda *a: list(builtins.zip(*a, strict=False)),
    }


def _line(exc: BaseException, filename: str) -> str:
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    return f" at line {lines[-1]}" if lines else ""


class RpsContestPlayer:
    """One match of one program: a fresh namespace, run once per round."""

    def __init__(self, protocol: Protocol, code: Any, filename: str, started: dict[str, Any]) -> None:
        self.protocol = protocol
        self.code = code
        self.filename = filename
        self.seat = int(started.get("seat", 0))
        signs = param(started.get("params", {}), "signs", 3)
        self.refusal = "" if signs == 3 else f"{THREE_SIGNS_ONLY}; this match has signs={signs}"
        self.ns = namespace()

    def act(self, turn: dict[str, Any]) -> int:
        """The action for ``turn``: the program run once; raises Resign (with the reason) when it cannot play."""
        if self.refusal:
            raise Resign(self.refusal)
        rps = turn.get("observation", {}).get("rps", {})
        last = rps.get("lastRound", [])
        round_number = int(rps.get("round", 0)) + 1
        self.ns["input"] = MOVES[last[1 - self.seat]] if len(last) == 2 else ""
        try:
            exec(self.code, self.ns)
        except BaseException as exc:  # the program's own failure: it loses, saying why
            traceback.print_exc()
            sys.stderr.flush()
            text = " ".join(str(exc).split())[:160]
            reason = (
                f"the program raised {type(exc).__name__}: {text}{_line(exc, self.filename)} in round {round_number}"
            )
            raise Resign(reason) from None
        output = self.ns.get("output")
        if not isinstance(output, str) or output not in ("R", "P", "S"):
            shown = repr(output)[:40] if "output" in self.ns else "not set (no global `output`)"
            reason = f"the program's output was {shown} in round {round_number}; it must be 'R', 'P' or 'S'"
            raise Resign(reason)
        return MOVES.index(output)


def load(protocol: Protocol, path: str) -> Any:
    """The program at ``path``, converted and compiled; exits with one line in the log when it cannot be."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        try:
            source = data.decode("utf-8")
        except UnicodeDecodeError:
            source = data.decode("latin-1")
        return compile(convert(source, os.path.basename(path)), os.path.basename(path), "exec", dont_inherit=True)
    except (OSError, ConversionError) as exc:
        protocol.say(f"cannot run the RPSContest program: {exc}")
        sys.exit(1)


def main() -> int:
    if len(sys.argv) != 2:
        sys.stderr.write(f"{TAG} usage: rpscontest_runner PROGRAM_FILE\n")
        return 2
    path = os.path.abspath(sys.argv[1])
    protocol = Protocol(TAG)
    code = load(protocol, path)
    private_workdir(os.path.dirname(path), "rpscontest-")
    sys.path.insert(0, os.path.dirname(path))
    filename = os.path.basename(path)
    return serve(
        protocol,
        os.path.splitext(filename)[0],
        ["rps"],
        lambda started: RpsContestPlayer(protocol, code, filename, started),
    )


if __name__ == "__main__":
    sys.exit(main())
