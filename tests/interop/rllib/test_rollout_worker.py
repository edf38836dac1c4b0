"""RolloutWorker: the seed's examples, config keys and errors, callbacks, weights, learning."""

from __future__ import annotations

import unittest
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.spaces import Discrete

from cadence.interop.rllib import DefaultCallbacks, Policy, RolloutWorker, SampleBatch, ViewRequirement, override
from tests.interop.rllib._sampling_helpers import CounterEnv, CountPolicy

SB = SampleBatch


class TinyTorchPolicy(Policy):
    """Stands in for ``ppo.PPOTorchPolicy`` in the seed's example (PPO comes in a later step):
    a linear score on obs, acting greedily, with a loss so that view pruning runs."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        super().__init__(observation_space, action_space, config)
        self.w = torch.zeros(int(np.prod(observation_space.shape)), action_space.n, requires_grad=True)
        self.learned: list[SampleBatch] = []

    def compute_actions_from_input_dict(self, input_dict: SampleBatch, explore: Any = None, **kwargs: Any) -> Any:
        obs = torch.as_tensor(np.asarray(input_dict[SB.OBS]), dtype=torch.float32)
        return (obs @ self.w).argmax(-1).numpy().astype(np.int64), [], {}

    def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
        logits = train_batch[SB.OBS].float() @ self.w
        return -(torch.log_softmax(logits, -1).gather(-1, train_batch[SB.ACTIONS].long()[:, None]).sum()
                 * train_batch[SB.REWARDS].float().mean())

    def learn_on_batch(self, samples: SampleBatch) -> dict[str, Any]:
        self.learned.append(samples)
        return {"count": samples.count}

    def get_weights(self) -> dict[str, np.ndarray]:
        return {"w": self.w.detach().numpy().copy()}

    def set_weights(self, weights: dict[str, Any]) -> None:
        with torch.no_grad():
            self.w.copy_(torch.as_tensor(weights["w"]))


# The seed's configs: PPO's DEFAULT_CONFIG is replaced by the tiny policy's (PPO comes later).
DEFAULT_CONFIG: dict[str, Any] = {"rollout_fragment_length": 20, "seed": 0}


class SeedExampleTest(unittest.TestCase):
    """The seed's "Setting ViewRequirements manually after Policy construction", as written."""

    def test_next_actions_view_after_construction(self) -> None:
        # Modify view_requirements in the Policy object.
        action_space = Discrete(2)
        rollout_worker = RolloutWorker(
            env_creator=lambda _: gym.make("CartPole-v0"),
            policy_config=DEFAULT_CONFIG,
            policy_spec=TinyTorchPolicy,
        )
        policy = rollout_worker.policy_map["default_policy"]
        # Add the next action to the view reqs of the policy.
        # This should be visible then in postprocessing and train batches.
        policy.view_requirements["next_actions"] = ViewRequirement(
            SampleBatch.ACTIONS, shift=1, space=action_space)
        # Check, whether a sampled batch has the requested `next_actions` view.
        batch = rollout_worker.sample()
        self.assertTrue("next_actions" in batch.data)
        # Within an episode's fragment, next_actions[t] is actions[t + 1].
        for episode in batch.split_by_episode():
            np.testing.assert_array_equal(episode["next_actions"][:-1], episode[SB.ACTIONS][1:])

    def test_next_actions_in_a_postprocessing_callback(self) -> None:
        # Doing the same in a custom postprocessing callback function:
        class MyCallback(DefaultCallbacks):
            # ...

            @override(DefaultCallbacks)
            def on_postprocess_trajectory(self, worker, episode, agent_id, policy_id,
                                          policies, postprocessed_batch, original_batches,
                                          **kwargs):
                postprocessed_batch["next_actions"] = np.concatenate(
                    [postprocessed_batch["actions"][1:],
                    np.zeros_like([policies[policy_id].action_space.sample()])])

        rollout_worker = RolloutWorker(
            env_creator=lambda _: gym.make("CartPole-v0"),
            policy_config={**DEFAULT_CONFIG, "callbacks": MyCallback},
            policy_spec=TinyTorchPolicy,
        )
        batch = rollout_worker.sample()
        self.assertTrue("next_actions" in batch.data)
        self.assertEqual(batch["next_actions"].shape, batch[SB.ACTIONS].shape)


def _worker(config: dict[str, Any] | None = None, length: int = 1000, spec: Any = CountPolicy) -> RolloutWorker:
    return RolloutWorker(env_creator=lambda ctx: CounterEnv(length), policy_spec=spec, policy_config=config or {})


def test_worker_builds_prunes_and_samples_fragments_per_env() -> None:
    worker = _worker({"rollout_fragment_length": 4, "num_envs_per_worker": 2, "seed": 1}, length=6)
    policy = worker.get_policy()
    assert policy is worker.policy_map["default_policy"] and policy.loss_initialized
    assert SB.INFOS not in policy.view_requirements  # pruned: nobody reads infos
    assert len(worker.envs) == 2
    batch = worker.sample()
    assert batch.count == 8 and SB.INFOS not in batch
    assert sorted(batch[SB.T].tolist()) == sorted([0, 1, 2, 3] * 2)


def test_worker_batch_modes_and_horizon_keys() -> None:
    complete = _worker({"batch_mode": "complete_episodes", "rollout_fragment_length": 2}, length=5).sample()
    assert complete[SB.T].tolist() == [0, 1, 2, 3, 4]
    horizon = _worker({"rollout_fragment_length": 5, "horizon": 2}).sample()
    assert horizon[SB.TRUNCATEDS].tolist() == [False, True, False, True, False]
    soft = _worker({"rollout_fragment_length": 5, "horizon": 2, "soft_horizon": True}).sample()
    assert not soft[SB.TRUNCATEDS].any() and soft[SB.OBS][:, 0].tolist() == [0, 1, 2, 3, 4]
    no_done = _worker({"rollout_fragment_length": 5, "no_done_at_end": True}, length=2).sample()
    assert not no_done[SB.TERMINATEDS].any() and no_done[SB.T].tolist() == [0, 1, 0, 1, 0]


def test_seed_makes_sampling_repeatable() -> None:
    ids = [_worker({"seed": 5, "rollout_fragment_length": 6}, length=2).sample()[SB.EPS_ID].tolist() for _ in range(2)]
    assert ids[0] == ids[1]


def test_callbacks_order() -> None:
    calls: list[str] = []

    class Recorder(DefaultCallbacks):
        def on_episode_start(self, *, worker, base_env, policies, episode, env_index=None, **kwargs):
            assert worker is not None and "default_policy" in policies
            calls.append(f"start {episode.length}")

        def on_episode_step(self, *, worker, base_env, policies=None, episode, env_index=None, **kwargs):
            calls.append(f"step {episode.length}")

        def on_postprocess_trajectory(self, *, worker, episode, agent_id, policy_id, policies,
                                      postprocessed_batch, original_batches, **kwargs):
            assert agent_id == 0 and policy_id == "default_policy"
            assert original_batches[agent_id][0] == policy_id and isinstance(original_batches[agent_id][2], SampleBatch)
            calls.append(f"postprocess {postprocessed_batch.count}")

        def on_episode_end(self, *, worker, base_env, policies, episode, env_index=None, **kwargs):
            calls.append(f"end {episode.length}")

        def on_sample_end(self, *, worker, samples, **kwargs):
            calls.append(f"sample_end {samples.count}")

    worker = _worker({"callbacks": Recorder, "rollout_fragment_length": 3}, length=2)
    worker.sample()
    assert calls == [
        "start 0", "step 1", "step 2", "postprocess 2", "end 2",
        "start 0", "step 1", "postprocess 1", "sample_end 3",
    ]
    assert isinstance(worker.callbacks, Recorder)


def test_weights_and_learning_delegate_to_the_policy() -> None:
    worker = RolloutWorker(env_creator=lambda _: gym.make("CartPole-v1"), policy_spec=TinyTorchPolicy,
                           policy_config={"rollout_fragment_length": 5})
    weights = worker.get_weights()
    assert list(weights) == ["default_policy"] and weights["default_policy"]["w"].shape == (4, 2)
    worker.set_weights({"default_policy": {"w": np.ones((4, 2), np.float32)}})
    assert worker.get_policy().w.sum().item() == 8.0
    batch = worker.sample()
    assert worker.learn_on_batch(batch) == {"default_policy": {"count": 5}}
    assert worker.get_policy().learned[-1] is batch
    with pytest.raises(KeyError, match="'other'"):
        worker.set_weights({"other": {}})


def test_policy_spec_tuple_and_env_context() -> None:
    seen: list[Any] = []

    def creator(ctx: Any) -> gym.Env:
        seen.append((dict(ctx), ctx.vector_index))
        return CounterEnv(ctx["length"])

    worker = RolloutWorker(env_creator=creator, policy_spec=(CountPolicy, None, None, {}),
                           policy_config={"env_config": {"length": 3}, "num_envs_per_worker": 2})
    assert seen == [({"length": 3}, 0), ({"length": 3}, 1)]
    assert worker.env is worker.envs[0]


def test_config_errors_name_every_problem() -> None:
    with pytest.raises(ValueError) as info:
        _worker({"rollout_fragment_lenght": 5, "rollout_fragment_length": 0, "soft_horizon": True,
                 "batch_mode": "episodes", "callbacks": object, "sample_async": 1})
    message = str(info.value)
    for part in ("unknown key 'rollout_fragment_lenght'", "rollout_fragment_length: expected an int >= 1, got 0",
                 "soft_horizon=True needs a horizon", "batch_mode", "callbacks", "sample_async: expected a bool"):
        assert part in message, (part, message)
    with pytest.raises(ValueError, match="num_envs_per_worker"):
        _worker({"num_envs_per_worker": 0})
    with pytest.raises(ValueError, match="horizon: expected"):
        _worker({"horizon": -1})
    with pytest.raises(TypeError, match="policy_spec"):
        _worker(spec=dict)
    with pytest.raises(TypeError, match="gymnasium.Env"):
        RolloutWorker(env_creator=lambda _: object(), policy_spec=CountPolicy)
    _worker({"lr": 0.1, "gamma": 0.9})  # the policy's keys pass through


def test_cadence_envs_are_wrapped() -> None:
    from cadence.envs.libs.gym import GymEnv

    worker = RolloutWorker(env_creator=lambda _: GymEnv("CartPole-v1"), policy_spec=CountPolicy,
                           policy_config={"rollout_fragment_length": 30, "num_envs_per_worker": 2, "seed": 0})
    batch = worker.sample()
    assert batch.count == 60 and batch[SB.OBS].shape == (60, 4)
    assert batch[SB.TERMINATEDS].any()  # obs[0] % 2 is mostly action 0: it falls over within 30 steps
    for episode in batch.split_by_episode():
        np.testing.assert_array_equal(episode[SB.NEXT_OBS][:-1], episode[SB.OBS][1:])


def test_sample_async_runs_in_a_thread_and_reports_failures() -> None:
    from cadence.interop.rllib import AsyncSampler

    worker = _worker({"sample_async": True, "rollout_fragment_length": 4, "seed": 0}, length=3)
    assert isinstance(worker.sampler, AsyncSampler)
    first, second = worker.sample(), worker.sample()
    assert first.count == second.count == 4
    assert first[SB.T].tolist() == [0, 1, 2, 0] and second[SB.T].tolist() == [1, 2, 0, 1]
    worker.stop()
    with pytest.raises(RuntimeError, match="after stop"):
        worker.sample()

    class Broken(CountPolicy):
        def compute_actions_from_input_dict(self, input_dict: SampleBatch, explore: Any = None, **kwargs: Any) -> Any:
            if len(self.postprocessed) > 0:
                raise ValueError("policy broke")
            return super().compute_actions_from_input_dict(input_dict, explore, **kwargs)

    broken = _worker({"sample_async": True, "rollout_fragment_length": 2}, spec=Broken)
    broken.get_policy().postprocessed.clear()
    broken.sample()
    with pytest.raises(RuntimeError, match="sampling thread failed: ValueError: policy broke"):
        broken.sampler.get_data(timeout=30)
    broken.stop()
