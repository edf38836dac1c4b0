"""Tests for cadence/trainers/agents.py: each algorithm's networks, losses and updates."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from cadence.envs import GymEnv, SerialEnv
from cadence.envs.utils import ExplorationType, set_exploration_type
from cadence.trainers.agents import build_agent
from cadence.trainers.config import ConfigError, TrainConfig


@pytest.mark.parametrize("algorithm,groups", [("ddpg", ["actor", "critic"]), ("td3", ["actor", "critic"]),
                                              ("sac", ["actor", "alpha", "critic"])])
def test_agents_act_within_bounds_and_learn(algorithm: str, groups: list[str]) -> None:
    env = GymEnv("Pendulum-v1")
    agent = build_agent(TrainConfig(algorithm=algorithm, hidden_sizes=[32]), env)
    assert sorted(agent.optimizer_groups()) == groups
    data = env.rollout(64)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        action = agent.policy(data.exclude("action"))["action"]
    assert action.dtype == torch.float32 and action.abs().max() <= 2.0
    before = {name: p.detach().clone() for name, p in agent.loss.named_parameters()}
    losses = agent.update(data)
    assert {"loss_actor"} <= set(losses) and all(isinstance(v, float) for v in losses.values())
    changed = {name for name, p in agent.loss.named_parameters() if not torch.equal(p, before[name])}
    assert any("actor" in name for name in changed) or algorithm == "td3"  # TD3 delays its actor
    assert any("value" in name for name in changed)


def test_td3_updates_its_actor_every_policy_delay_steps() -> None:
    env = GymEnv("Pendulum-v1")
    agent = build_agent(TrainConfig(algorithm="td3", hidden_sizes=[16], policy_delay=2), env)
    data = env.rollout(32)
    actor = agent.groups["actor"]
    snapshots = []
    for _ in range(4):
        snapshots.append([p.detach().clone() for p in actor])
        agent.update(data)
    snapshots.append([p.detach().clone() for p in actor])
    moved = [not all(torch.equal(a, b) for a, b in zip(x, y)) for x, y in zip(snapshots, snapshots[1:])]
    assert moved == [False, True, False, True]


def test_same_seed_same_networks_and_the_global_generator_untouched() -> None:
    env = GymEnv("Pendulum-v1")
    state = torch.get_rng_state()
    a = build_agent(TrainConfig(hidden_sizes=[8]), env)
    assert torch.equal(torch.get_rng_state(), state)
    b = build_agent(TrainConfig(hidden_sizes=[8]), env)
    c = build_agent(TrainConfig(hidden_sizes=[8], seed=1), env)
    pairs = zip(a.loss.state_dict().values(), b.loss.state_dict().values())
    assert all(torch.equal(x, y) for x, y in pairs)
    assert not torch.equal(a.policy.module[1][0].weight, c.policy.module[1][0].weight)


def test_float64_observations_and_batched_envs() -> None:
    pytest.importorskip("mujoco", reason="HalfCheetah needs gymnasium[mujoco]")
    env = SerialEnv(2, lambda: GymEnv("HalfCheetah-v5"))
    assert env.observation_spec["observation"].dtype == torch.float64
    agent = build_agent(TrainConfig(hidden_sizes=[16]), env)
    data = env.rollout(8)
    assert agent.explore(data[:, 0].exclude("action"))["action"].shape == (2, 6)
    agent.update(data.reshape(-1))


def test_discrete_actions_are_refused() -> None:
    with pytest.raises(ConfigError, match="ddpg needs a continuous, bounded action space; CartPole-v1 has"):
        build_agent(TrainConfig(env="CartPole-v1"), GymEnv("CartPole-v1"))


class _Float64Actions(gymnasium.Env):
    """A gymnasium env whose actions are float64, as dm_control's are."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float64)
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        assert action.dtype == np.float64
        return self.observation_space.sample(), float(-abs(action).sum()), False, False, {}


@pytest.mark.parametrize("algorithm", ["ddpg", "td3", "sac"])
def test_every_agent_acts_in_the_env_action_dtype(algorithm: str) -> None:
    from cadence.envs.libs.gym import GymWrapper

    env = GymWrapper(gymnasium.wrappers.TimeLimit(_Float64Actions(), 20))
    agent = build_agent(TrainConfig(algorithm=algorithm, hidden_sizes=[8]), env)
    for module in (agent.policy, agent.explore):
        data = env.rollout(5, module)  # refused by the env's spec check before the cast was there
        assert data["action"].dtype == torch.float64
    agent.update(data)


def test_sac_on_a_dm_control_task_acts_in_float64() -> None:
    pytest.importorskip("dm_control", reason="dm_control tasks need the dm_control extra")
    from cadence.trainers.environments import make_env

    config = TrainConfig(algorithm="sac", env="cartpole/swingup", hidden_sizes=[8])
    env = make_env(config, seed=0)
    agent = build_agent(config, env)
    assert env.rollout(3, agent.explore)["action"].dtype == torch.float64
