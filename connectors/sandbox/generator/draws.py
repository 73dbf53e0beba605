"""Random draws used across the generator (fast, seeded by the caller's `random.Random`)."""

from __future__ import annotations

import random


def uuid4(rng: random.Random) -> str:
    """A version-4 UUID text drawn from `rng` (deterministic per seed)."""
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def ri(rng: random.Random, low: int, high: int) -> int:
    """randint without randint's overhead (the generator draws millions of these)."""
    return low + int(rng.random() * (high - low + 1))
