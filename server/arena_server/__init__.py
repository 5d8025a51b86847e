"""Arena's server: the referee, seats, store, gRPC services and the `arena` CLI."""

__version__ = "0.1.0"

from arena_client import _native

_native.guard()  # the server's compiled modules are used only when built from these sources (see arena_client._native)
