"""Answers every turn twice; the second answer is stale. Logs the server's errors to stderr."""

import sys

from _stdio import HELLO, action, messages, send  # type: ignore[import-not-found]

send(HELLO)
for message in messages():
    if "turn" in message:
        send(action(message["turn"]))
        send(action(message["turn"]))
    elif "error" in message:
        print(
            "server error:",
            message["error"]["code"],
            message["error"]["message"],
            file=sys.stderr,
            flush=True,
        )
    elif "matchEnded" in message:
        break
