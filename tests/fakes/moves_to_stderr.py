"""Writes its answers to stderr instead of stdout."""

import json
import sys
import time
from typing import Any

from _stdio import action, play  # type: ignore[import-not-found]


def on_turn(turn: dict[str, Any]) -> None:
    print(json.dumps(action(turn)), file=sys.stderr, flush=True)
    time.sleep(60)


play(on_turn)
