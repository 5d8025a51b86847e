"""Asks to be kept alive across matches; reports its pid and match count on stderr."""

import os
import sys

from _stdio import action, messages, send  # type: ignore[import-not-found]

send({"hello": {"protocolVersion": "arena.v1", "keepAlive": True}})
matches = 0
for message in messages():
    if "matchStarted" in message:
        matches += 1
        print(f"pid {os.getpid()} match {matches}", file=sys.stderr, flush=True)
    elif "turn" in message:
        send(action(message["turn"]))
