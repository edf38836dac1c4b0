"""Seeds: the range ``set_seed`` accepts (``validate_seed``, called first by every public
``set_seed``) and how one seed leads to the next (``next_seed``).

Examples:
    >>> from cadence.envs.seeding import next_seed, validate_seed
    >>> next_seed(validate_seed(0)) == next_seed(0)
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SEED_RANGE", "next_seed", "validate_seed"]

#: The seeds ``set_seed`` takes: ``SEED_RANGE[0] <= seed < SEED_RANGE[1]``, i.e. the
#: non-negative int64 values. Non-negative, because numpy's ``SeedSequence`` and
#: gymnasium's ``reset(seed=...)`` refuse negative seeds (and ``torch.Generator`` would
#: silently map ``-1`` onto ``2**64 - 1``); below ``2**63``, because ``torch.Generator``
#: takes at most ``2**64 - 1`` and an int64 holds every such seed, so that a seed can be
#: kept in a tensor, a tensordict or a checkpoint and come back unchanged. Backends with a
#: narrower range (EnvPool's int32, dm_control's 32-bit RandomState) fold the seed into it.
SEED_RANGE: tuple[int, int] = (0, 2**63)


def validate_seed(seed: Any, owner: str = "set_seed") -> int | None:
    """Checks a seed before anything is seeded; every public ``set_seed`` calls it first.

    Args:
        seed: the seed given: ``None`` (leave the generators as they are) or an int in
            ``SEED_RANGE`` (numpy integers are accepted too).
        owner: what is being seeded, for the message (``"GymEnv.set_seed"``).

    Returns:
        The seed as a Python int (``None`` stays ``None``).

    Raises:
        TypeError: the seed is not an int (``1.5``, ``"3"``, ``True``...).
        ValueError: the seed lies outside ``SEED_RANGE``.

    Examples:
        >>> validate_seed(3), validate_seed(None)
        (3, None)
        >>> validate_seed(-1, "MyEnv.set_seed")
        Traceback (most recent call last):
        ...
        ValueError: MyEnv.set_seed: the seed must be an int with 0 <= seed < 2**63, got -1
    """
    if seed is None:
        return None
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(
            f"{owner}: the seed must be None or an int with 0 <= seed < 2**63, got {type(seed).__name__} {seed!r}"
        )
    seed = int(seed)
    if not SEED_RANGE[0] <= seed < SEED_RANGE[1]:
        raise ValueError(f"{owner}: the seed must be an int with 0 <= seed < 2**63, got {seed}")
    return seed


def next_seed(seed: int) -> int:
    """Derives the seed that follows ``seed``: deterministic, spread over 32 bits.

    Examples:
        >>> next_seed(0) == next_seed(0), next_seed(0) != next_seed(1)
        (True, True)
    """
    return int(np.random.SeedSequence(seed).generate_state(1, dtype=np.uint32)[0])
