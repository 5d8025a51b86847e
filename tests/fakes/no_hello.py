"""Starts with an Action instead of a Hello."""

import time

from _stdio import send  # type: ignore[import-not-found]

send({"action": {"matchId": "x", "turnId": 1, "action": 0}})
time.sleep(60)
