"""Says hello, then allocates memory without bound at its first turn."""

from _stdio import messages, send  # type: ignore[import-not-found]

send({"hello": {"protocolVersion": "arena.v1"}})
hoard = []
for message in messages():
    if "turn" in message:
        while True:
            hoard.append(bytearray(16 << 20))
