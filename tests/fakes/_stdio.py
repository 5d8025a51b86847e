"""Helpers shared by the fake stdio bots (standard library only: they run as an unprivileged user)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

HELLO = {"hello": {"protocolVersion": "arena.v1", "name": "fake", "client": "tests/fakes"}}
PROTO_HELLO = bytes([12, 0x0A, 10, 0x0A, 8]) + b"arena.v1"
"""A length-delimited BotMessage{hello{protocol_version: "arena.v1"}}, encoded by hand."""


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def send_raw(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def messages() -> Iterator[dict[str, Any]]:
    for line in sys.stdin:
        if line.strip():
            yield json.loads(line)


def action(turn: dict[str, Any], value: int | None = None) -> dict[str, Any]:
    chosen = turn["legalActions"][0] if value is None else value
    return {"action": {"matchId": turn["matchId"], "turnId": turn["turnId"], "action": chosen}}


def play(on_turn: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Say hello, then answer every Turn (with ``on_turn`` when given), until the match ends."""
    send(HELLO)
    for message in messages():
        if "turn" in message:
            if on_turn is None:
                send(action(message["turn"]))
            else:
                on_turn(message["turn"])
        elif "matchEnded" in message:
            return
