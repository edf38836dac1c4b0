"""Envs whose agents differ in shape roll out into lazily stacked TensorDicts (issue #19)."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from cadence.data import Stacked
from cadence.envs import EnvBase, ParallelEnv, SerialEnv, check_env_specs
from cadence.envs.utils import SpecMismatchError
from tests.fakes import HeterogeneousAgentsEnv


def _observation_sizes(data: TensorDictBase, leading: int) -> list[int]:
    parts = data["agents"].unbind(leading + 1)
    return [part["observation"].shape[-1] for part in parts]


def test_specs_keys_and_leaf_specs() -> None:
    env = HeterogeneousAgentsEnv(n_agents=3, num_envs=2)
    assert env.action_key == ("agents", "action") and env.reward_key == ("agents", "reward")
    assert isinstance(env.action_spec, Stacked) and env.action_spec.shape == (2, 3, -1)
    assert env.reward_spec.shape == (2, 3, 1)
    assert env.reward_spec == env.output_spec["full_reward_spec"][env.reward_key]
    assert [s.shape for s in env.action_spec.specs] == [(2, 1), (2, 2), (2, 3)]


def test_rand_step_and_rollout_are_lazily_stacked() -> None:
    env = HeterogeneousAgentsEnv(n_agents=3, num_envs=2, max_steps=4)
    data = env.rand_step(env.reset())
    assert isinstance(data["agents"], LazyStackedTensorDict) and data["agents"].batch_size == (2, 3)
    assert _observation_sizes(data["next"], 0) == [2, 3, 4]
    rollout = env.rollout(6, break_when_any_done=False)
    assert rollout.batch_size == (2, 6)
    assert _observation_sizes(rollout, 1) == [2, 3, 4]
    assert rollout["next", "agents", "reward"].shape == (2, 6, 3, 1)  # homogeneous entries stay dense
    assert rollout["next", "done"][:, 3].all() and not rollout["next", "done"][:, 4].any()  # reset after 4 steps
    check_env_specs(env)


def test_a_policy_acting_per_agent() -> None:
    env = HeterogeneousAgentsEnv(n_agents=2, num_envs=1, max_steps=10)

    def push_forward(data: TensorDictBase) -> TensorDictBase:
        for i, agent in enumerate(data["agents"].unbind(1)):
            agent["action"] = torch.ones(1, 1 + i)
        return data

    rollout = env.rollout(3, push_forward)
    last = rollout["next", "agents"][:, -1]
    assert [part["observation"].tolist() for part in last.unbind(1)] == [
        [[pytest.approx(0.3), 0.0]],
        [[pytest.approx(0.3), pytest.approx(0.3), 0.0]],
    ]


def test_actions_are_checked_agent_by_agent() -> None:
    env = HeterogeneousAgentsEnv(n_agents=2, num_envs=1)
    data = env.rand_action(env.reset())
    data["agents"].tensordicts[1]["action"] = torch.zeros(1, 3)
    with pytest.raises(ValueError, match=r"Action \('agents', 'action'\), element 1: expected shape \(1, 2\), got \(1, 3\)"):
        env.step(data)
    data = env.rand_action(env.reset())
    data["agents"].tensordicts[0]["action"] = torch.full((1, 1), 4.0)
    env.run_type_checks = True
    with pytest.raises(SpecMismatchError, match=r"(?s)'agents', 'action'.*element 0 of the stack: expected values in \[-1.0, 1.0\]"):
        env.step(data)


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv])
def test_batched_envs_of_heterogeneous_agents(batched: type) -> None:
    env = batched(2, HeterogeneousAgentsEnv)
    try:
        assert env.action_spec.shape == (2, 2, 3, -1)
        rollout = env.rollout(5, break_when_any_done=False)
        assert rollout.batch_size == (2, 2, 5)
        assert _observation_sizes(rollout, 2) == [2, 3, 4]
        check_env_specs(env)
    finally:
        env.close()


class _SpecsOnlyEnv(EnvBase):
    """An env of three agents whose specs the seed's example sets from outside (it is not stepped)."""

    n_agents = 3

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        return self.full_observation_spec.zero().update(self.full_done_spec.zero())

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise AssertionError("the spec examples do not step")


def test_the_seeds_multi_agent_spec_creation_example_as_written() -> None:
    from cadence.data import Bounded, Categorical, Composite, Unbounded

    env = _SpecsOnlyEnv()
    agent_specs = [(Bounded(-1.0, 1.0, shape=(2,)), Unbounded(shape=(1,)), Unbounded(shape=(16,))) for _ in range(3)]
    # --- the seed's example, as written ---
    action_specs = []
    observation_specs = []
    reward_specs = []
    info_specs = []  # noqa: F841 - in the seed's example too
    for i in range(env.n_agents):
        agent_i_action_spec, agent_i_reward_spec, agent_i_observation_spec = agent_specs[i]
        action_specs.append(agent_i_action_spec)
        reward_specs.append(agent_i_reward_spec)
        observation_specs.append(agent_i_observation_spec)
    env.action_spec = Composite(
        {
            "agents": Composite(
                {"action": torch.stack(action_specs)}, shape=(env.n_agents,)
            )
        }
    )
    env.reward_spec = Composite(
        {
            "agents": Composite(
                {"reward": torch.stack(reward_specs)}, shape=(env.n_agents,)
            )
        }
    )
    env.observation_spec = Composite(
        {
            "agents": Composite(
                {"observation": torch.stack(observation_specs)}, shape=(env.n_agents,)
            )
        }
    )
    env.done_spec = Categorical(
        n=2,
        shape=torch.Size((1,)),
        dtype=torch.bool,
    )
    # --- what the seed says of it ---
    assert env.action_key == ("agents", "action") and env.reward_key == ("agents", "reward")
    assert env.done_key == "done"
    assert env.reward_spec == torch.stack(reward_specs)
    assert env.reward_spec == env.output_spec["full_reward_spec"][env.reward_key]
    assert env.action_spec == env.input_spec["full_action_spec"][env.action_key]
    assert env.observation_spec["agents", "observation"].shape == (3, 16)


def test_the_seeds_spec_creation_with_agents_of_different_shapes() -> None:
    from cadence.data import Bounded, Composite, Unbounded

    env = _SpecsOnlyEnv()
    action_specs = [Bounded(-1.0, 1.0, shape=(1 + i,)) for i in range(env.n_agents)]
    observation_specs = [Unbounded(shape=(2 + i,)) for i in range(env.n_agents)]
    env.action_spec = Composite({"agents": Composite({"action": torch.stack(action_specs)}, shape=(env.n_agents,))})
    env.observation_spec = Composite(
        {"agents": Composite({"observation": torch.stack(observation_specs)}, shape=(env.n_agents,))}
    )
    assert isinstance(env.action_spec, Stacked) and env.action_spec.shape == (3, -1)
    actions = env.full_action_spec.rand()
    assert isinstance(actions["agents"], LazyStackedTensorDict)
    assert [t.shape for t in actions["agents"].get("action", as_list=True)] == [(1,), (2,), (3,)]
    assert env.full_observation_spec.is_in(env.full_observation_spec.zero())
