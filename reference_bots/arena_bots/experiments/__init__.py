"""Experiments reproducing the source documents' results with Arena's reference bots."""
