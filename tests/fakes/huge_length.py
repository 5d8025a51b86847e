"""Proto framing: says hello, then a length prefix announcing 2 GiB, then waits."""

import sys
import time

from _stdio import PROTO_HELLO, send_raw  # type: ignore[import-not-found]

send_raw(PROTO_HELLO)
sys.stdin.buffer.read(1)
send_raw(bytes([0x80, 0x80, 0x80, 0x80, 0x08]) + b"\x12")  # varint 2**31
time.sleep(60)
