"""Seats: how a bot takes part (in-process, subprocess over stdio with its sandbox and framing, remote gRPC)."""
