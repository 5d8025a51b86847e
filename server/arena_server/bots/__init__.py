"""Bots the server knows: the registry of submitted bots, uploads, conformance checks, failure records."""
