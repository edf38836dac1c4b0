"""Dict and Tuple observations and actions through the worker, the collector and the models.

RLlib users bring goal-conditioned envs (Dict observations) and hybrid actions (Tuple);
every view is built leaf by leaf and the batch keeps the structure.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Bounded, Categorical, Composite, Unbounded
from cadence.envs import EnvBase
from cadence.interop.rllib import Policy, RolloutWorker, SampleBatch, SyncSampler, ViewRequirement
from cadence.interop.rllib.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy
from cadence.interop.rllib.models import FullyConnectedNetwork

SB = SampleBatch
LENGTH = 4


class GoalEnv(gym.Env):
    """obs = {"pos": position, "goal": step % 3}; action = (direction, size); ends after LENGTH steps."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict(
            pos=gym.spaces.Box(-100, 100, (2,), np.float32), goal=gym.spaces.Discrete(3)
        )
        self.action_space = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (1,), np.float32)))
        self.count = 0
        self.pos = np.zeros(2, np.float32)

    def _obs(self) -> dict[str, Any]:
        return {"pos": self.pos.copy(), "goal": np.int64(self.count % 3)}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.count, self.pos = 0, np.zeros(2, np.float32)
        return self._obs(), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        assert isinstance(action, tuple) and self.action_space.contains(action), action
        direction, size = action
        self.count += 1
        self.pos = self.pos + np.array([1.0 if direction else -1.0, float(size[0])], np.float32)
        return self._obs(), float(direction), self.count >= LENGTH, False, {}


class StructPolicy(Policy):
    """Acts (goal % 2, [t / 10]) from the Dict obs; reads prev_actions and a window of obs."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        super().__init__(observation_space, action_space, config)
        self.view_requirements["obs_window"] = ViewRequirement(SB.OBS, shift="-2:0", space=observation_space)
        self.seen: list[SampleBatch] = []

    def compute_actions_from_input_dict(self, input_dict: SampleBatch, explore: Any = None, **kwargs: Any) -> Any:
        self.seen.append(input_dict)
        goal = np.asarray(input_dict[SB.OBS]["goal"])
        input_dict[SB.PREV_ACTIONS], input_dict["obs_window"]  # read: inference views
        size = (np.asarray(input_dict[SB.T], np.float32) / 10)[:, None]
        return (goal % 2, size), [], {}

    def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
        obs, new_obs, window = train_batch[SB.OBS], train_batch[SB.NEXT_OBS], train_batch["obs_window"]
        direction, size = train_batch[SB.ACTIONS]
        prev_direction, _ = train_batch[SB.PREV_ACTIONS]
        total = obs["pos"].sum() + new_obs["pos"].sum() + window["pos"].sum() + direction.sum() + size.sum()
        return (total + prev_direction.sum() + train_batch[SB.REWARDS].sum()).float().requires_grad_()


def _worker(env_creator: Any = lambda _: GoalEnv(), **config: Any) -> RolloutWorker:
    policy_config = {"rollout_fragment_length": 6, "seed": 0, **config}
    return RolloutWorker(env_creator=env_creator, policy_spec=StructPolicy, policy_config=policy_config)


def test_dict_obs_and_tuple_actions_keep_their_structure_in_every_view() -> None:
    worker = _worker()
    batch = worker.sample()
    assert batch.count == 6
    obs, new_obs, actions, prev = batch[SB.OBS], batch[SB.NEXT_OBS], batch[SB.ACTIONS], batch[SB.PREV_ACTIONS]
    assert sorted(obs) == ["goal", "pos"] and obs["pos"].shape == (6, 2) and obs["pos"].dtype == np.float32
    assert obs["goal"].tolist() == [0, 1, 2, 0, 0, 1]  # a new episode at t = 4
    assert new_obs["goal"].tolist() == [1, 2, 0, 1, 1, 2]
    assert isinstance(actions, tuple) and actions[0].shape == (6,) and actions[1].shape == (6, 1)
    assert actions[0].tolist() == [0, 1, 0, 0, 0, 1]  # goal % 2
    np.testing.assert_allclose(actions[1][:, 0], [0.0, 0.1, 0.2, 0.3, 0.0, 0.1], rtol=1e-6)
    # prev_actions: zeros before each episode's first step, then the action before.
    assert prev[0].tolist() == [0, 0, 1, 0, 0, 0]
    np.testing.assert_allclose(prev[1][:, 0], [0.0, 0.0, 0.1, 0.2, 0.0, 0.0], rtol=1e-6)
    # A window of 3 Dict observations: one [3, ...] entry per leaf and step, zeros before the start.
    window = batch["obs_window"]
    assert window["pos"].shape == (6, 3, 2) and window["goal"].shape == (6, 3)
    assert window["goal"][2].tolist() == [0, 1, 2] and window["goal"][4].tolist() == [0, 0, 0]
    np.testing.assert_array_equal(window["pos"][3][-1], obs["pos"][3])
    assert batch[SB.EPS_ID][3] != batch[SB.EPS_ID][4]


def test_inference_sees_dicts_and_tuples_from_past_data_only() -> None:
    worker = _worker()
    policy = worker.policy_map["default_policy"]
    policy.seen.clear()
    worker.sample()
    first, second = policy.seen[0], policy.seen[1]
    assert set(first[SB.OBS]) == {"goal", "pos"} and first[SB.OBS]["pos"].shape == (1, 2)
    assert isinstance(first[SB.PREV_ACTIONS], tuple) and first[SB.PREV_ACTIONS][1].shape == (1, 1)
    assert first["obs_window"]["goal"].tolist() == [[0, 0, 0]]
    assert second["obs_window"]["goal"].tolist() == [[0, 0, 1]] and second[SB.PREV_ACTIONS][0].tolist() == [0]
    assert SB.NEXT_OBS not in first


def test_several_envs_stack_the_leaves_and_the_collector_stores_obs_once() -> None:
    worker = _worker(num_envs_per_worker=2)
    policy = worker.policy_map["default_policy"]
    policy.seen.clear()
    batch = worker.sample()
    assert batch.count == 12 and policy.seen[0][SB.OBS]["pos"].shape == (2, 2)
    assert policy.seen[0][SB.PREV_ACTIONS][1].shape == (2, 1)
    collector = worker.sampler.collector
    for buffers in (agent.buffers for agent in collector._agents.values()):
        assert SB.NEXT_OBS not in buffers and SB.OBS in buffers  # one store serves obs and new_obs


def test_nested_batches_cross_to_tensordict_and_concatenate() -> None:
    worker = _worker()
    batch = worker.sample()
    td = batch.to_tensordict()
    assert td["obs", "pos"].shape == (6, 2) and td["actions", "0"].shape == (6,)
    assert np.shares_memory(td["obs", "pos"].numpy(), batch[SB.OBS]["pos"])
    both = batch.concat(worker.sample())
    assert both.count == 12 and both[SB.ACTIONS][1].shape == (12, 1) and both[SB.OBS]["goal"].shape == (12,)
    assert both[1:3][SB.ACTIONS][0].tolist() == batch[SB.ACTIONS][0][1:3].tolist()


def test_wrong_rows_in_a_tuple_action_are_named() -> None:
    class WrongRows(StructPolicy):
        def compute_actions_from_input_dict(self, input_dict: SampleBatch, explore: Any = None, **kwargs: Any) -> Any:
            (direction, _), _, _ = super().compute_actions_from_input_dict(input_dict)
            return (direction, np.zeros((3, 1), np.float32)), [], {}

    policy = WrongRows(GoalEnv().observation_space, GoalEnv().action_space, {})
    with pytest.raises(ValueError, match=r"actions/1 of shape \(3, 1\) for 1 agents"):
        SyncSampler(envs=[GoalEnv()], policy_map={"default_policy": policy}, rollout_fragment_length=2).get_data()


class TwoPartEnv(EnvBase):
    """A Cadence env with two observation entries ("position", and "target" in a sub-spec)."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_spec = Composite(
            position=Unbounded(shape=(2,)), task=Composite(target=Categorical(4, shape=(), dtype=torch.int64))
        )
        self.action_spec = Bounded(-1.0, 1.0, shape=(2,))
        self.position = torch.zeros(2)
        self.steps = 0

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self.position, self.steps = torch.zeros(2), 0
        return TensorDict({"position": self.position.clone(), ("task", "target"): torch.tensor(3)}, [])

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.position = self.position + tensordict.get("action")
        self.steps += 1
        return TensorDict({
            "position": self.position.clone(), ("task", "target"): torch.tensor(3),
            "reward": torch.ones(1), "done": torch.tensor([self.steps >= 3]),
        }, [])


class ZeroActionPolicy(Policy):
    def compute_actions_from_input_dict(self, input_dict: SampleBatch, explore: Any = None, **kwargs: Any) -> Any:
        n = len(input_dict[SB.OBS]["position"])
        return np.full((n, 2), 0.5, np.float32), [], {}

    def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
        return train_batch[SB.OBS]["position"].sum().requires_grad_()


def test_a_cadence_env_with_several_observation_entries_gives_dict_observations() -> None:
    worker = RolloutWorker(env_creator=lambda _: TwoPartEnv(), policy_spec=ZeroActionPolicy,
                           policy_config={"rollout_fragment_length": 4, "seed": 0})
    space = worker.policy_map["default_policy"].observation_space
    assert isinstance(space, gym.spaces.Dict) and isinstance(space["task"], gym.spaces.Dict)
    batch = worker.sample()
    assert batch[SB.OBS]["task"]["target"].tolist() == [3, 3, 3, 3]
    np.testing.assert_allclose(batch[SB.OBS]["position"][:, 0], [0.0, 0.5, 1.0, 0.0])
    assert batch[SB.TERMINATEDS].tolist() == [False, False, True, False]


def test_models_flatten_dict_and_tuple_observations() -> None:
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Dict(x=gym.spaces.Box(-1, 1, (2,), np.float32))))
    model = FullyConnectedNetwork(space, gym.spaces.Discrete(2), 2, {"fcnet_hiddens": [8]}, "fc",
                                  generator=torch.Generator().manual_seed(0))
    obs = (np.array([0, 2]), {"x": np.ones((2, 2), np.float32)})
    logits, _ = model(SampleBatch({SB.OBS: obs}))
    assert logits.shape == (2, 2)


def test_ppo_learns_on_dict_observations() -> None:
    class DictCartPole(gym.ObservationWrapper):
        def __init__(self) -> None:
            super().__init__(gym.make("CartPole-v1"))
            self.observation_space = gym.spaces.Dict(
                cart=gym.spaces.Box(-np.inf, np.inf, (2,), np.float32), pole=gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
            )

        def observation(self, observation: np.ndarray) -> dict[str, np.ndarray]:
            return {"cart": observation[:2], "pole": observation[2:]}

    config = {**DEFAULT_CONFIG, "rollout_fragment_length": 64, "train_batch_size": 64, "sgd_minibatch_size": 32,
              "num_sgd_iter": 2, "seed": 0}
    worker = RolloutWorker(env_creator=lambda _: DictCartPole(), policy_spec=PPOTorchPolicy, policy_config=config)
    batch = worker.sample()
    assert batch[SB.OBS]["pole"].shape == (64, 2) and "advantages" in batch and "value_targets" in batch
    stats = worker.learn_on_batch(batch)["default_policy"]
    assert stats["num_grad_updates_lifetime"] == 4 and np.isfinite(stats["learner_stats"]["total_loss"])
