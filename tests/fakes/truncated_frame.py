"""Proto framing: says hello, then announces a 20-byte message, writes 5 bytes and exits."""

import sys

from _stdio import PROTO_HELLO, send_raw  # type: ignore[import-not-found]

send_raw(PROTO_HELLO)
sys.stdin.buffer.read(1)  # wait for the server to talk
send_raw(bytes([20]) + b"\x12\x05abc")
sys.exit(0)
