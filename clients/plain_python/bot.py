#!/usr/bin/env python3
"""An Arena bot in plain Python: JSON lines on stdin/stdout, standard library only.

Run it as a subprocess bot with JSON-lines framing, for example:

    arena check-bot --cmd "python3 clients/plain_python/bot.py" --framing json

It plays every game: in rock-paper-scissors it throws what beats the opponent's
previous sign (random in the first round); in every other game it picks a legal
action at random. Replace ``choose`` with your own strategy.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any


def send(message: dict[str, Any]) -> None:
    """Write one message as one line and flush (the server waits for the newline)."""
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def choose(turn: dict[str, Any], seat: int, rng: random.Random) -> int:
    """Pick an action from the Turn; ``turn["legalActions"]`` is never empty."""
    legal = turn["legalActions"]
    rps = turn.get("observation", {}).get("rps")
    if rps and rps.get("lastRound"):
        signs = rps["signs"]
        opponent = rps["lastRound"][1 - seat]
        # in the 3-sign game (and its odd generalisation) sign i beats sign i-1
        if signs == 3:
            return int(opponent + 1) % 3
    return int(rng.choice(legal))


def main() -> int:
    rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else None)
    send(
        {
            "hello": {
                "protocolVersion": "arena.v1",
                "name": "plain-python",
                "games": [],
                "client": "plain_python/1",
            }
        }
    )
    seat = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "matchStarted" in message:
            seat = message["matchStarted"].get("seat", 0)
        elif "turn" in message:
            turn = message["turn"]
            action = choose(turn, seat, rng)
            send({"action": {"matchId": turn["matchId"], "turnId": turn["turnId"], "action": action}})
        elif "ping" in message:
            send({"pong": {"nonce": message["ping"].get("nonce", "0")}})
        elif "matchEnded" in message:
            return 0  # one process per match: exit once the match is over
        elif "error" in message:
            print(f"server error: {message['error']}", file=sys.stderr)
            if message["error"].get("fatal"):
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
