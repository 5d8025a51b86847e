"""Tests of the RPS reference bots (RPSLS thesis agents, mind reader, sicilian) and their experiment."""
