"""JSON lines: answers its first turn with a valid message of the wrong kind (a server Turn echoed back)."""

import time

from _stdio import messages, send  # type: ignore[import-not-found]

send({"hello": {"protocolVersion": "arena.v1"}})
for message in messages():
    if "turn" in message:
        send({"turn": message["turn"]})
        time.sleep(60)
