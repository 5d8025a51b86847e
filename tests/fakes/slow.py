"""Answers correctly, but only after sleeping argv[1] seconds."""

import sys
import time
from typing import Any

from _stdio import action, play, send  # type: ignore[import-not-found]


def on_turn(turn: dict[str, Any]) -> None:
    time.sleep(float(sys.argv[1]))
    send(action(turn))


play(on_turn)
