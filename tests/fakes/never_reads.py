"""Says hello, then never reads its stdin and never answers."""

import time

from _stdio import send  # type: ignore[import-not-found]

send({"hello": {"protocolVersion": "arena.v1"}})
time.sleep(120)
