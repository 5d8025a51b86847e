"""Attacks on Arena's promises, performed for real against a live server (issue 12)."""
