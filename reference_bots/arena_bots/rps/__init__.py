"""Rock-paper-scissors (and RPSLS) bots: the RPSLS thesis agents, Shannon's mind reader, the sicilian ensemble."""
