"""The referee: one match from start to end (the loop, clocks, seeds, records)."""
