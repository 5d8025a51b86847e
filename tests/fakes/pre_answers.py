"""Answers its turn and, in the same write, the turn it expects next (seat 0 of a two-player RPS match).

The server reads both Actions at once. The second answers a turn the bot was never given, however
quickly the server would have given it: a protocol error, not an answer to that next turn.
"""

import json
import sys
from typing import Any

from _stdio import action, play  # type: ignore[import-not-found]


def on_turn(turn: dict[str, Any]) -> None:
    ahead = {"action": {"matchId": turn["matchId"], "turnId": turn["turnId"] + 2, "action": 0}}
    sys.stdout.write(json.dumps(action(turn)) + "\n" + json.dumps(ahead) + "\n")
    sys.stdout.flush()


play(on_turn)
