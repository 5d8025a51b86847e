"""The part every format runner shares: Arena's JSON-lines protocol on private pipes, and a private folder.

A runner is a small standard-library program that plays a bot written for another platform
(a Kaggle agent, an RPSContest program) as an Arena subprocess bot. It is started with the
server's Python (or ``python3`` when the bot's user cannot reach that one) inside the sandbox,
where no server file is readable, so :func:`arena_server.bots.formats.runner_source` passes this
module and the runner to the interpreter as source text (``python -c``), with this module
registered under its own name first. Nothing here may import anything outside the standard
library.

What it guarantees to the foreign program:

* :class:`Protocol` moves the protocol off file descriptors 0 and 1 before the program is
  loaded: the protocol keeps private duplicates, fd 1 becomes a copy of stderr (so ``print``,
  C extensions and child processes write into the bot's log) and fd 0 reads ``/dev/null``
  (so ``input()`` cannot swallow a Turn).
* :func:`private_workdir` gives every run (one process per match) a fresh folder holding
  links to the program's own files, so files it writes are its own and are gone after the match.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any
from typing import Protocol as _Interface

PROTOCOL_VERSION = "arena.v1"


class Resign(Exception):
    """Raised by :meth:`Player.act` to give up the match; its message is the reason the server records."""


class Player(_Interface):
    """One match of a foreign bot: answers Turns with actions."""

    def act(self, turn: dict[str, Any]) -> int:
        """The action for ``turn`` (a Turn in proto3 JSON form); raises :class:`Resign` to give up the match."""
        ...


class Protocol:
    """JSON lines to and from the server on private copies of stdin and stdout.

    Args:
        tag: Prefix of the runner's own lines in the log, e.g. ``"[kaggle]"``.
    """

    def __init__(self, tag: str) -> None:
        self.tag = tag
        sys.stdout.flush()
        self._out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
        self._in = os.fdopen(os.dup(0), "r", encoding="utf-8")
        os.dup2(2, 1)  # fd 1 (print, C code, children) now goes to the log
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdout = sys.stderr  # Python-level prints too, without buffering surprises
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as the process

    def send(self, message: dict[str, Any]) -> None:
        self._out.write(json.dumps(message, separators=(",", ":")) + "\n")
        self._out.flush()

    def messages(self) -> Iterator[dict[str, Any]]:
        for line in self._in:
            if line.strip():
                yield json.loads(line)

    def say(self, text: str) -> None:
        """A line of the runner's own in the bot's log."""
        sys.stderr.write(f"{self.tag} {text}\n")
        sys.stderr.flush()


def private_workdir(program_dir: str, prefix: str) -> str:
    """A fresh folder for this run holding links to the program's files; becomes the working directory.

    The program's own folder stays read-only; whatever the program writes lands in the new
    folder, which lives in the bot's private ``/tmp`` (removed with the bot's sandbox).
    """
    folder = tempfile.mkdtemp(prefix=prefix)
    try:
        entries = os.listdir(program_dir)
    except OSError:
        entries = []
    for entry in entries:
        with contextlib.suppress(OSError):
            os.symlink(os.path.join(program_dir, entry), os.path.join(folder, entry))
    os.chdir(folder)
    return folder


def seconds(duration: Any, default: float = 0.0) -> float:
    """A proto3 JSON Duration (``"1.500s"``) in seconds."""
    if isinstance(duration, str) and duration.endswith("s"):
        try:
            return float(duration[:-1])
        except ValueError:
            return default
    return default


def param(params: dict[str, Any], name: str, default: Any) -> Any:
    """A game parameter from MatchStarted's ``params`` map (a ParamValue in JSON form)."""
    value = params.get(name)
    if not isinstance(value, dict):
        return default
    for kind, convert in (("intValue", int), ("doubleValue", float), ("boolValue", bool), ("stringValue", str)):
        if kind in value:
            return convert(value[kind])
    return default


def serve(protocol: Protocol, name: str, games: list[str], start: Callable[[dict[str, Any]], Player]) -> int:
    """Say Hello, then play: ``start(match_started)`` makes the player of the match. Returns the exit code."""
    client = f"arena-{protocol.tag.strip('[]')}-runner/1"
    protocol.send({"hello": {"protocolVersion": PROTOCOL_VERSION, "name": name, "games": games, "client": client}})
    player: Player | None = None
    for message in protocol.messages():
        if "matchStarted" in message:
            player = start(message["matchStarted"])
        elif "turn" in message:
            turn = message["turn"]
            if player is None:
                protocol.say("a Turn came before MatchStarted")
                return 1
            try:
                action = player.act(turn)
            except Resign as exc:
                protocol.send({"resign": {"matchId": turn.get("matchId", ""), "reason": str(exc)}})
                continue
            protocol.send({"action": {"matchId": turn["matchId"], "turnId": turn["turnId"], "action": action}})
        elif "ping" in message:
            protocol.send({"pong": {"nonce": message["ping"].get("nonce", "0")}})
        elif "matchEnded" in message:
            return 0
        elif "error" in message:
            protocol.say(f"server error: {message['error']}")
            if message["error"].get("fatal"):
                return 1
    return 0
