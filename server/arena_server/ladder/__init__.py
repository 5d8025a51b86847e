"""The ladder: rating fits, matchmaking, tournaments."""
