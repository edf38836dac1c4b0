"""SyncSampler: batch modes, fragments across episodes, horizons, done flags, views, ids."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from cadence.interop.rllib import SampleBatch, SyncSampler, ViewRequirement
from cadence.interop.rllib.sampler import raise_time_limit
from tests.interop.rllib._sampling_helpers import CounterEnv, CountPolicy, ready

SB = SampleBatch


def _sampler(num_envs: int = 1, length: int = 1000, policy: Any = None, **kwargs: Any) -> SyncSampler:
    envs = [CounterEnv(length) for _ in range(num_envs)]
    policy = policy or ready(CountPolicy(envs[0].observation_space, envs[0].action_space, {}))
    return SyncSampler(envs=envs, policy_map={"default_policy": policy}, seed=0, **kwargs)


def test_truncate_fragments_cross_episodes_with_two_envs() -> None:
    sampler = _sampler(num_envs=2, length=7, rollout_fragment_length=5)
    policy = sampler.policy_map["default_policy"]
    first, second = sampler.get_data(), sampler.get_data()
    assert first.count == second.count == 10  # exactly 5 env steps per env
    # t of env rows: first fragment 0..4, second: 5, 6 (end of episode), then a new episode 0..2.
    assert sorted(first[SB.T].tolist()) == sorted([0, 1, 2, 3, 4] * 2)
    assert sorted(second[SB.T].tolist()) == sorted([5, 6, 0, 1, 2] * 2)
    # The cut episodes keep their eps_id and get a new unroll_id.
    cut = set(first[SB.EPS_ID].tolist())
    assert len(cut) == 2 and cut <= set(second[SB.EPS_ID].tolist())
    for eps_id in cut:
        before = first[SB.UNROLL_ID][first[SB.EPS_ID] == eps_id]
        after = second[SB.UNROLL_ID][second[SB.EPS_ID] == eps_id]
        assert len(set(before.tolist())) == 1 and not set(before.tolist()) & set(after.tolist())
        # prev_actions at the fragment start is the real previous action (t=4 -> action 0).
        rows = second[SB.EPS_ID] == eps_id
        assert second[SB.T][rows][0] == 5 and second[SB.PREV_ACTIONS][rows][0] == 4 % 2
        assert second[SB.PREV_ACTIONS][rows][1] == 5 % 2
    # Every postprocessing saw one episode (the policy asserts it): fragment ends + episode ends.
    assert len(policy.postprocessed) == 2 + 4
    # New episodes start from the reset observation, with zeros before them.
    fresh = second[SB.T] == 0
    assert second[SB.OBS][fresh][:, 0].tolist() == [0.0, 0.0] and second[SB.PREV_ACTIONS][fresh].tolist() == [0, 0]


def test_complete_episodes_are_whole_from_t0() -> None:
    sampler = _sampler(num_envs=2, length=6, rollout_fragment_length=2, batch_mode="complete_episodes")
    for _ in range(3):
        batch = sampler.get_data()
        for episode in batch.split_by_episode():
            assert episode[SB.T].tolist() == [0, 1, 2, 3, 4, 5]  # fragment length ignored
            assert episode[SB.TERMINATEDS].tolist() == [False] * 5 + [True]


def test_complete_episodes_with_different_lengths_keep_running_episodes() -> None:
    envs = [CounterEnv(3), CounterEnv(5)]
    policy = ready(CountPolicy(envs[0].observation_space, envs[0].action_space, {}))
    sampler = SyncSampler(envs=envs, policy_map={"default_policy": policy}, batch_mode="complete_episodes", seed=0)
    lengths = [sampler.get_data().count for _ in range(3)]
    assert lengths == [3, 5, 3]  # env 1's episode, started at the beginning, is returned whole


def test_horizon_cuts_and_resets() -> None:
    sampler = _sampler(length=1000, rollout_fragment_length=8, horizon=3)
    batch = sampler.get_data()
    assert batch[SB.T].tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
    assert batch[SB.TRUNCATEDS].tolist() == [False, False, True] * 2 + [False, False]
    assert not batch[SB.TERMINATEDS].any()
    assert batch[SB.OBS][:, 0].tolist() == [0, 1, 2, 0, 1, 2, 0, 1]  # reset at the horizon
    assert len(set(batch[SB.EPS_ID].tolist())) == 3


def test_soft_horizon_no_done_no_reset() -> None:
    sampler = _sampler(length=1000, rollout_fragment_length=8, horizon=3, soft_horizon=True)
    batch = sampler.get_data()
    assert batch[SB.T].tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
    assert not batch[SB.TRUNCATEDS].any() and not batch[SB.TERMINATEDS].any()
    assert batch[SB.OBS][:, 0].tolist() == list(range(8))  # the env goes on
    assert sampler.envs[0].resets == 1
    assert len(set(batch[SB.EPS_ID].tolist())) == 3  # a new logical episode each horizon


def test_no_done_at_end_still_resets() -> None:
    sampler = _sampler(length=3, rollout_fragment_length=7, no_done_at_end=True)
    batch = sampler.get_data()
    assert not batch[SB.TERMINATEDS].any() and not batch[SB.TRUNCATEDS].any()
    assert batch[SB.T].tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert sampler.envs[0].resets == 3


def test_horizon_above_the_time_limit_raises_it() -> None:
    env = gym.wrappers.TimeLimit(CounterEnv(1000), max_episode_steps=4)
    policy = ready(CountPolicy(env.observation_space, env.action_space, {}))
    sampler = SyncSampler(envs=[env], policy_map={"default_policy": policy}, rollout_fragment_length=12, horizon=6)
    batch = sampler.get_data()
    assert batch[SB.T].tolist() == [0, 1, 2, 3, 4, 5] * 2
    assert batch[SB.TRUNCATEDS].tolist() == ([False] * 5 + [True]) * 2
    cartpole = gym.make("CartPole-v1")
    assert raise_time_limit(cartpole, 600) and cartpole.spec.max_episode_steps == 600
    assert not raise_time_limit(gym.make("CartPole-v1"), 100)  # a lower horizon cuts, the limit stays


def test_window_views_in_the_training_batch() -> None:
    envs = [CounterEnv(1000)]
    policy = ready(CountPolicy(envs[0].observation_space, envs[0].action_space, {}))
    policy.view_requirements["frames"] = ViewRequirement(SB.OBS, shift="-3:0", space=envs[0].observation_space)
    sampler = SyncSampler(envs=envs, policy_map={"default_policy": policy}, rollout_fragment_length=3)
    first, second = sampler.get_data(), sampler.get_data()
    assert first["frames"].shape == (3, 4, 1)
    assert first["frames"][:, :, 0].tolist() == [[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 2]]
    assert second["frames"][:, :, 0].tolist() == [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5]]
    # Inference saw the window too (past data only), and never new_obs.
    assert all("frames" in keys and SB.NEXT_OBS not in keys for keys in policy.inference_keys)


def test_new_obs_is_the_next_obs_within_episodes() -> None:
    batch = _sampler(num_envs=2, length=4, rollout_fragment_length=10).get_data()
    for episode in batch.split_by_episode():
        np.testing.assert_array_equal(episode[SB.NEXT_OBS][:-1], episode[SB.OBS][1:])
        assert episode[SB.NEXT_OBS][-1, 0] == episode[SB.OBS][-1, 0] + 1


def test_episode_ids_come_from_the_seed() -> None:
    ids = [set(_sampler(length=2, rollout_fragment_length=6).get_data()[SB.EPS_ID].tolist()) for _ in range(2)]
    assert ids[0] == ids[1] and len(ids[0]) == 3
    other = SyncSampler(envs=[CounterEnv(2)], seed=1, rollout_fragment_length=6,
                        policy_map={"default_policy": ready(CountPolicy(CounterEnv().observation_space, CounterEnv().action_space, {}))})
    assert set(other.get_data()[SB.EPS_ID].tolist()) != ids[0]


def test_env_id_and_agent_index_views() -> None:
    envs = [CounterEnv(1000) for _ in range(2)]
    policy = ready(CountPolicy(envs[0].observation_space, envs[0].action_space, {}))
    policy.view_requirements[SB.ENV_ID] = ViewRequirement(used_for_compute_actions=False)
    sampler = SyncSampler(envs=envs, policy_map={"default_policy": policy}, rollout_fragment_length=3)
    batch = sampler.get_data()
    assert sorted(batch[SB.ENV_ID].tolist()) == [0, 0, 0, 1, 1, 1] and not batch[SB.AGENT_INDEX].any()


def test_bad_arguments_are_named() -> None:
    env = CounterEnv()
    policy = ready(CountPolicy(env.observation_space, env.action_space, {}))
    pm = {"default_policy": policy}
    with pytest.raises(ValueError, match="batch_mode"):
        SyncSampler(envs=[env], policy_map=pm, batch_mode="episodes")
    with pytest.raises(ValueError, match="rollout_fragment_length"):
        SyncSampler(envs=[env], policy_map=pm, rollout_fragment_length=0)
    with pytest.raises(ValueError, match="soft_horizon"):
        SyncSampler(envs=[env], policy_map=pm, soft_horizon=True)
    with pytest.raises(TypeError, match=r"envs\[0\]"):
        SyncSampler(envs=[object()], policy_map=pm)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="multi-agent"):
        SyncSampler(envs=[env], policy_map={"a": policy, "b": policy})


def test_policy_outputs_are_checked_and_extra_fetches_collected() -> None:
    class Extra(CountPolicy):
        def compute_actions_from_input_dict(self, input_dict: SampleBatch, explore: Any = None, **kwargs: Any) -> Any:
            actions, state, _ = super().compute_actions_from_input_dict(input_dict, explore, **kwargs)
            return actions, state, {SB.VF_PREDS: np.asarray(input_dict[SB.OBS])[:, 0] * 10}

        def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> Any:
            return super().loss(model, dist_class, train_batch) + train_batch[SB.VF_PREDS].sum()

    env = CounterEnv()
    policy = ready(Extra(env.observation_space, env.action_space, {}))
    batch = SyncSampler(envs=[env], policy_map={"default_policy": policy}, rollout_fragment_length=3).get_data()
    assert batch[SB.VF_PREDS].tolist() == [0.0, 10.0, 20.0]

    class WrongRows(CountPolicy):
        def compute_actions_from_input_dict(self, input_dict: SampleBatch, explore: Any = None, **kwargs: Any) -> Any:
            return np.zeros(len(input_dict[SB.OBS]) + 1, np.int64), [], {}

    policy = WrongRows(env.observation_space, env.action_space, {})  # unpruned: pruning would catch it first
    with pytest.raises(ValueError, match=r"actions of shape \(2,\) for 1 agents"):
        SyncSampler(envs=[CounterEnv()], policy_map={"default_policy": policy}).get_data()
