"""Tests of the ladder: ratings, scheduling, tournaments, replays (issue 5)."""
