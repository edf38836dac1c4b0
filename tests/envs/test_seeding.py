"""Seeds: the range every ``set_seed`` accepts, and the next seed."""

from __future__ import annotations

import numpy as np
import pytest

from cadence.envs import GymEnv, PendulumEnv
from cadence.envs.seeding import SEED_RANGE, next_seed, validate_seed


def test_validate_seed_accepts_the_whole_documented_range():
    assert validate_seed(None) is None
    assert validate_seed(0) == 0 and validate_seed(np.int64(5)) == 5 and type(validate_seed(np.int64(5))) is int
    assert SEED_RANGE == (0, 2**63)
    for edge in (0, 2**63 - 1):  # every backend takes both ends
        env = GymEnv("CartPole-v1")
        assert isinstance(env.set_seed(edge), int)
        env.rollout(2)
        PendulumEnv().set_seed(edge)
    with pytest.raises(ValueError, match=r"got 9223372036854775808"):
        validate_seed(2**63)


@pytest.mark.parametrize(("bad", "error"), [(-1, ValueError), (2**64, ValueError), (1.5, TypeError), ("3", TypeError), (True, TypeError), (np.float64(2.0), TypeError)])
def test_validate_seed_names_the_owner_and_the_range(bad, error):
    with pytest.raises(error, match=r"^Thing.set_seed: the seed must be .*int with 0 <= seed < 2\*\*63, got "):
        validate_seed(bad, "Thing.set_seed")


def test_next_seed_takes_any_valid_seed_and_stays_in_range():
    for seed in (0, 1, 2**32, SEED_RANGE[1] - 1):
        following = next_seed(seed)
        assert validate_seed(following) == following and following < 2**32
