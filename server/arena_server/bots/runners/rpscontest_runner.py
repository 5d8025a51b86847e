"""Plays an RPSContest program as an Arena subprocess bot (standard library only).

Usage: ``python3 rpscontest_runner.py PROGRAM.py`` where ``PROGRAM.py`` is already
converted to Python 3 (:mod:`arena_server.bots.py2to3`). This file is copied next to
the program and run inside the sandbox, so it imports nothing of Arena's.

As on RPSContest, the program runs once per round in one namespace that persists for
the match: the global ``input`` is ``""`` in the first round and the opponent's last
move (``"R"``, ``"P"`` or ``"S"``) after; the program leaves its move in ``output``.
Arena's protocol (JSON lines) uses a private copy of the original stdout; the
program's own stdout goes to stderr (the bot's log) and its stdin is empty, so
nothing it prints or reads touches the protocol. A program that raises, or leaves
anything but "R", "P" or "S" in ``output``, resigns with a one-line reason saying so.
"""

from __future__ import annotations

import builtins
import functools
import io
import json
import numbers
import os
import sys
import traceback
from typing import Any

MOVES = "RPS"
"""RPSContest's moves in Arena's action order (0 rock, 1 paper, 2 scissors)."""

THREE_SIGNS_ONLY = "RPSContest programs play 3 signs only"


class _Py2Division:
    """``a /__py2div__/ b``: Python 2's ``/`` (floor for two integers, true division otherwise)."""

    __array_ufunc__ = None  # numpy arrays defer to us instead of broadcasting

    @staticmethod
    def divide(a: Any, b: Any) -> Any:
        if isinstance(a, numbers.Integral) and isinstance(b, numbers.Integral):
            return a // b
        return a / b

    def __rtruediv__(self, a: Any) -> Any:
        return _Partial(a, left=True)

    def __truediv__(self, b: Any) -> Any:
        return _Partial(b, left=False)


class _Partial:
    __array_ufunc__ = None

    def __init__(self, value: Any, left: bool) -> None:
        self.value, self.left = value, left

    def __truediv__(self, b: Any) -> Any:  # (a / D) / b
        return _Py2Division.divide(self.value, b)

    def __rtruediv__(self, a: Any) -> Any:  # a /= D / b
        return _Py2Division.divide(a, self.value)


def _raw_input(*_: object) -> str:
    raise RuntimeError(
        "raw_input() is not available: RPSContest programs have no console; "
        "the opponent's last move is in the global `input`"
    )


def _cmp(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


def namespace() -> dict[str, Any]:
    """A fresh namespace for one match, with what Python 2 programs expect of their builtins."""
    return {
        "__name__": "__main__",
        "__builtins__": builtins,
        "__py2div__": _Py2Division(),
        "raw_input": _raw_input,
        "reduce": functools.reduce,
        "cmp": _cmp,
        "map": lambda *a: list(builtins.map(*a)),
        "filter": lambda *a: list(builtins.filter(*a)),
        "zip": lambda *a: list(builtins.zip(*a)),
    }


def _where(exc: BaseException, filename: str) -> str:
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    return f" at line {lines[-1]}" if lines else ""


class Runner:
    """One program, one match at a time."""

    def __init__(self, path: str, protocol: io.TextIOBase, log: io.TextIOBase) -> None:
        self.path = path
        self.protocol = protocol
        self.log = log
        with open(path, encoding="utf-8") as f:
            self.code = compile(f.read(), path, "exec", dont_inherit=True)
        self.ns: dict[str, Any] = {}
        self.seat = 0
        self.refusal = ""

    def send(self, message: dict[str, Any]) -> None:
        self.protocol.write(json.dumps(message) + "\n")
        self.protocol.flush()

    def started(self, match: dict[str, Any]) -> None:
        self.seat = int(match.get("seat", 0))
        signs = match.get("params", {}).get("signs", {})
        value = next(iter(signs.values()), 3) if isinstance(signs, dict) else 3
        self.refusal = "" if int(value) == 3 else f"{THREE_SIGNS_ONLY}; this match has signs={value}"
        self.ns = namespace()

    def move(self, turn: dict[str, Any]) -> dict[str, Any]:
        match_id, turn_id = turn.get("matchId", ""), turn.get("turnId", 0)
        if self.refusal:
            return {"resign": {"matchId": match_id, "reason": self.refusal}}
        rps = turn.get("observation", {}).get("rps", {})
        last = rps.get("lastRound", [])
        round_number = int(rps.get("round", 0)) + 1
        self.ns["input"] = MOVES[last[1 - self.seat]] if len(last) == 2 else ""
        try:
            exec(self.code, self.ns)
        except BaseException as exc:  # the program's own failure: it loses, saying why
            traceback.print_exc(file=self.log)
            self.log.flush()
            reason = f"the program raised {type(exc).__name__}: {exc}{_where(exc, self.path)} in round {round_number}"
            return {"resign": {"matchId": match_id, "reason": reason[:300]}}
        output = self.ns.get("output")
        if not isinstance(output, str) or output not in ("R", "P", "S"):
            shown = repr(output)[:40] if "output" in self.ns else "nothing (no global `output`)"
            reason = f"the program's output was {shown} in round {round_number}; it must be 'R', 'P' or 'S'"
            return {"resign": {"matchId": match_id, "reason": reason}}
        return {"action": {"matchId": match_id, "turnId": turn_id, "action": MOVES.index(output)}}

    def serve(self, messages: io.TextIOBase) -> None:
        self.send({"hello": {"protocolVersion": "arena.v1", "games": ["rps"], "client": "arena rpscontest runner"}})
        for line in messages:
            if not line.strip():
                continue
            message = json.loads(line)
            if "matchStarted" in message:
                self.started(message["matchStarted"])
            elif "turn" in message:
                self.send(self.move(message["turn"]))
            elif "matchEnded" in message:
                return
            elif "ping" in message:
                self.send({"pong": {"nonce": message["ping"].get("nonce", "0")}})


def main(argv: list[str]) -> int:
    """Run the program named in ``argv[1]``; the protocol stays on private copies of stdin and stdout."""
    if len(argv) != 2:
        print("usage: rpscontest_runner.py PROGRAM.py", file=sys.stderr)
        return 2
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    messages = os.fdopen(os.dup(0), "r", encoding="utf-8")
    os.dup2(2, 1)  # the program's prints go to the log
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # and it reads nothing of the protocol
    os.close(null)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), encoding="utf-8", line_buffering=True)
    sys.stdin = io.TextIOWrapper(os.fdopen(0, "rb", closefd=False), encoding="utf-8")
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[1])))
    Runner(argv[1], protocol, sys.stderr).serve(messages)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
