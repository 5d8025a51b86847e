"""Answers a turn it was never given (turn_id + 5)."""

import time
from typing import Any

from _stdio import play, send  # type: ignore[import-not-found]


def on_turn(turn: dict[str, Any]) -> None:
    send({"action": {"matchId": turn["matchId"], "turnId": turn["turnId"] + 5, "action": 0}})
    time.sleep(60)


play(on_turn)
