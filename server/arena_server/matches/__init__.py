"""Running and stored matches: the hub that seats bots and feeds spectators, replays, text rendering."""
