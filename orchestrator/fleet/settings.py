"""How fast a simulated fleet's time runs, and the seed it is drawn from: checked in one place.

Besides its preset, a fleet is built with a speed (fleet seconds per wall second, or ``max``:
the fastest, ``MAX_SPEED_FACTOR``) and a seed. ``fleet init``, ``demo`` and ``simulate`` check
what a user typed with these, and opening a fleet file checks what it holds the same way, so
a value one accepts the others never refuse; errors name the field.
"""

from __future__ import annotations

from orchestrator.contracts.constants import MAX_SPEED_FACTOR as MAX_SPEED_FACTOR

#: What ``max`` means: the fastest scaled speed (see ``MAX_SPEED_FACTOR``).
MAX_SPEED = MAX_SPEED_FACTOR
#: Seeds are stored as text and drawn from through ``str``; keep them to what SQLite and every
#: tool reading the fleet can hold.
MAX_SEED = 2**63 - 1


def parse_speed(value: str | float) -> float:
    """``max`` (``MAX_SPEED``) or a factor of fleet time over wall time in (0, 1e6]; errors
    name ``speed``."""
    if isinstance(value, str) and value.strip().lower() == "max":
        return MAX_SPEED
    if isinstance(value, bool):
        raise ValueError(f"speed: {value!r} is neither a number nor 'max'")
    try:
        speed = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"speed: {str(value)[:40]!r} is neither a number nor 'max'") from None
    if not 0 < speed <= MAX_SPEED_FACTOR:  # also nan and inf
        raise ValueError(
            f"speed: must be above 0 and at most {MAX_SPEED_FACTOR:g} fleet seconds per wall "
            "second (or 'max', the same as 1e6)"
        )
    return speed


def check_seed(seed: object) -> int:
    """A seed is a whole number from 0 to 2**63-1; errors name ``seed``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError("seed: must be a whole number from 0 to 2**63-1")
    return seed
