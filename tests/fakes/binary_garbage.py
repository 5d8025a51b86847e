"""Proto framing: says hello, then writes binary garbage on stdout instead of an Action."""

import random
import sys
import time

from _stdio import PROTO_HELLO, send_raw  # type: ignore[import-not-found]

send_raw(PROTO_HELLO)
sys.stdin.buffer.read(1)
rng = random.Random(4)
send_raw(bytes([9]) + bytes([0xFF] * 2) + bytes(rng.randrange(256) for _ in range(7)))
time.sleep(60)
