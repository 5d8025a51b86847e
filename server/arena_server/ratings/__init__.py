"""Rating mathematics, pure (numpy and openskill only).

The Bradley-Terry fit with its intervals, Plackett-Luce updates, score intervals.
"""
