"""Tests for cadence/envs/env_specs.py: one env's view of a batch's specs."""

from __future__ import annotations

import pytest
import torch

from cadence.data import Bounded
from cadence.envs import GymEnv, ParallelEnv, SerialEnv


@pytest.mark.parametrize("name", [
    "action_spec", "full_action_spec", "state_spec", "full_state_spec", "observation_spec",
    "full_observation_spec", "reward_spec", "full_reward_spec", "done_spec", "full_done_spec",
    "input_spec", "output_spec",
])
def test_unbatched_specs_are_one_env_of_the_batch(name: str) -> None:
    single = GymEnv("Pendulum-v1")
    batch = SerialEnv(3, lambda: GymEnv("Pendulum-v1"))
    assert getattr(batch, f"{name}_unbatched") == getattr(single, name)
    assert getattr(single, f"{name}_unbatched") == getattr(single, name)


def test_unbatched_specs_of_nested_batches_and_parallel_envs() -> None:
    nested = SerialEnv(2, lambda: GymEnv("CartPole-v1", num_envs=3))
    assert nested.batch_size == torch.Size([2, 3])
    assert nested.action_spec_unbatched == GymEnv("CartPole-v1").action_spec
    with ParallelEnv(2, lambda: GymEnv("Pendulum-v1")) as parallel:
        assert parallel.full_action_spec_unbatched["action"].shape == torch.Size([1])


def test_setting_an_unbatched_spec_expands_it_over_the_batch() -> None:
    batch = SerialEnv(3, lambda: GymEnv("Pendulum-v1"))
    batch.action_spec_unbatched = Bounded(-1.0, 1.0, shape=(1,))
    assert batch.action_spec.shape == torch.Size([3, 1])
    assert float(batch.action_spec.space.high.max()) == 1.0
