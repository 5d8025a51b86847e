"""Writes 20 MB to stderr before saying hello and at every turn, then plays correctly."""

import sys
from typing import Any

from _stdio import action, play, send  # type: ignore[import-not-found]

junk = ("x" * 1023 + "\n") * 1024
for _ in range(20):
    sys.stderr.write(junk)
sys.stderr.flush()


def on_turn(turn: dict[str, Any]) -> None:
    sys.stderr.write(junk)
    sys.stderr.flush()
    send(action(turn))


play(on_turn)
