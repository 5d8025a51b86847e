"""Runners: standard-library programs that play bots of other platforms (see arena_server.bots.formats)."""
