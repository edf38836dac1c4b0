"""RewardScaling and RewardSum: values, specs, resets (full and partial)."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from cadence.envs import GymEnv, SerialEnv, check_env_specs
from cadence.envs.transforms import RewardScaling, RewardSum, TransformedEnv
from tests.fakes import CountingEnv


def test_reward_scaling_values_and_specs():
    env = TransformedEnv(CountingEnv(max_count=100), RewardScaling(loc=0.5, scale=3.0))
    assert env.rollout(2)["next", "reward"].squeeze(-1).tolist() == [3.5, 3.5]
    check_env_specs(env)
    check_env_specs(TransformedEnv(SerialEnv(2, CountingEnv), RewardScaling(0.0, 2.0)))
    standard = RewardScaling(loc=1.0, scale=4.0, standard_normal=True)
    assert standard(TensorDict({"reward": torch.full((1,), 9.0)}, []))["reward"].item() == 2.0


def test_reward_sum_counts_and_resets():
    env = TransformedEnv(CountingEnv(max_count=3), RewardSum())
    data = env.rollout(7, break_when_any_done=False)
    assert data["next", "episode_reward"].squeeze(-1).tolist() == [1, 2, 3, 1, 2, 3, 1]
    assert data["episode_reward"].squeeze(-1).tolist() == [0, 1, 2, 0, 1, 2, 0]
    check_env_specs(env)


def test_reward_sum_partial_reset_keeps_the_others():
    env = TransformedEnv(SerialEnv(3, lambda: CountingEnv(max_count=100)), RewardSum())
    check_env_specs(env)
    data = env.reset()
    for _ in range(2):
        data = env._step_mdp(env.step(env.rand_action(data)))
    data["_reset"] = torch.tensor([[True], [False], [False]])
    out = env.reset(data)
    assert out["episode_reward"].squeeze(-1).tolist() == [0.0, 2.0, 2.0]


def test_reward_sum_on_gym_and_nested_key_names():
    env = TransformedEnv(GymEnv("Pendulum-v1"), RewardSum())
    data = env.rollout(4)
    assert torch.allclose(data["next", "episode_reward"], data["next", "reward"].cumsum(0))
    assert RewardSum(in_keys=[("agents", "reward")]).out_keys == [("agents", "episode_reward")]
