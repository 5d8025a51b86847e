"""Exits with status 3 before saying anything."""

import sys

print("cannot find my model file weights.bin", file=sys.stderr)
sys.exit(3)
