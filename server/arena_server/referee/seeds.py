"""Match seeds: the commitment, the chance RNG and the hosted bots' seeds, all derived from one secret.

The commitment is ``sha256(seed)``; chance outcomes come from
``random.Random(sha256(b"arena-chance:" + seed))``, sampled by cumulative
probability in the order the engine lists them (:func:`sample_outcome`), so
anyone can verify a revealed seed.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from collections.abc import Sequence


def seed_hash(seed: str) -> str:
    """The commitment announced at the start: hex SHA-256 of the UTF-8 seed."""
    return hashlib.sha256(seed.encode()).hexdigest()


def new_seed() -> str:
    """A fresh 128-bit seed as 32 hex characters."""
    return secrets.token_hex(16)


def chance_rng(seed: str) -> random.Random:
    """The match's chance RNG. Keyed differently from the commitment, so the hash reveals nothing."""
    return random.Random(hashlib.sha256(b"arena-chance:" + seed.encode()).digest())


def bot_seed(seed: str, seat: int) -> int:
    """A deterministic per-seat seed for hosted bots, derived from the match seed."""
    return int.from_bytes(hashlib.sha256(f"arena-bot:{seat}:{seed}".encode()).digest()[:8], "big")


def sample_outcome(outcomes: Sequence[tuple[int, float]], rng: random.Random) -> int:
    x = rng.random()
    acc = 0.0
    for action, prob in outcomes:
        acc += prob
        if x < acc:
            return action
    return outcomes[-1][0]
