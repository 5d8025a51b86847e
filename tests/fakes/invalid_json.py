"""JSON lines: answers its first turn with JavaScript-style JSON (unquoted keys)."""

import time

from _stdio import messages, send  # type: ignore[import-not-found]

send({"hello": {"protocolVersion": "arena.v1"}})
for message in messages():
    if "turn" in message:
        print("{action: {turnId: " + str(message["turn"]["turnId"]) + ", action: 0}}", flush=True)
        time.sleep(60)
