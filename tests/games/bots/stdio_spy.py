"""A stdio bot (JSON lines, standard library only) that echoes every message it receives to stderr.

It answers each turn with a seeded random legal action. The test reads the
echoed lines from the seat's stderr log to see exactly what crossed the pipe.
"""

from __future__ import annotations

import json
import random
import sys

rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
sys.stdout.write(json.dumps({"hello": {"protocolVersion": "arena.v1", "name": "stdio-spy"}}) + "\n")
sys.stdout.flush()
for line in sys.stdin:
    if not line.strip():
        continue
    sys.stderr.write("RECEIVED " + line.strip() + "\n")
    sys.stderr.flush()
    message = json.loads(line)
    if "turn" in message:
        turn = message["turn"]
        answer = {
            "matchId": turn["matchId"],
            "turnId": turn["turnId"],
            "action": rng.choice(turn["legalActions"]),
        }
        sys.stdout.write(json.dumps({"action": answer}) + "\n")
        sys.stdout.flush()
    elif "matchEnded" in message:
        break
