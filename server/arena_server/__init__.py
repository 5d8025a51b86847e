"""Arena's server: the referee, seats, store, gRPC services and the `arena` CLI."""

__version__ = "0.1.0"
