"""SimpleListCollector: one observation store, pruned columns, inference dicts, fragments."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from cadence.interop.rllib import Episode, SampleBatch, SampleCollector, SimpleListCollector, ViewRequirement
from tests.interop.rllib._sampling_helpers import CountPolicy, ObsOnlyPolicy, ready

SB = SampleBatch
OBS = gym.spaces.Box(0.0, 1e6, (1,), np.float32)
ACT = gym.spaces.Discrete(2)
PID = "default_policy"


def _collector(policy: Any, **kwargs: Any) -> SimpleListCollector:
    return SimpleListCollector({PID: policy}, **kwargs)


def _run(collector: SimpleListCollector, episode: Episode, steps: int, start: int = 0, done_at: int | None = None) -> None:
    """Steps with obs = t, action = t % 2, reward = t."""
    for t in range(start, start + steps):
        collector.get_inference_input_dict(PID)
        done = done_at is not None and t + 1 == done_at
        collector.add_action_reward_next_obs(episode.episode_id, 0, episode.env_id, PID, done, {
            SB.ACTIONS: np.int64(t % 2), SB.REWARDS: float(t), SB.TERMINATEDS: done, SB.TRUNCATEDS: False,
            SB.INFOS: {"t": t}, SB.NEXT_OBS: np.array([t + 1.0], np.float32),
        })
        collector.episode_step(episode)


def _started(collector: SimpleListCollector, eps_id: int = 11, env_id: int = 0) -> Episode:
    episode = Episode(eps_id, env_id)
    collector.add_init_obs(episode, 0, env_id, PID, 0, np.array([0.0], np.float32))
    return episode


def test_obs_stored_once_and_new_obs_is_the_next_obs() -> None:
    collector = _collector(ready(CountPolicy(OBS, ACT, {})), rollout_fragment_length=100)
    episode = _started(collector)
    _run(collector, episode, 5)
    buffers = collector.buffers(episode.episode_id)
    assert SB.NEXT_OBS not in buffers  # no second store
    assert len(buffers[SB.OBS]) == 5 + 1  # T + 1 observations serve obs and new_obs
    assert len(buffers[SB.ACTIONS]) == 5
    batch = collector.postprocess_episode(episode, is_done=False, build=True)
    np.testing.assert_array_equal(batch[SB.NEXT_OBS][:-1], batch[SB.OBS][1:])
    assert batch[SB.NEXT_OBS][:, 0].tolist() == [1, 2, 3, 4, 5]


def test_pruned_columns_are_not_collected() -> None:
    policy = ready(ObsOnlyPolicy(OBS, ACT, {}))
    assert SB.ACTIONS not in policy.view_requirements and SB.NEXT_OBS not in policy.view_requirements
    collector = _collector(policy)
    episode = _started(collector)
    _run(collector, episode, 3)
    buffers = collector.buffers(episode.episode_id)
    assert set(buffers) == {SB.OBS, SB.REWARDS, SB.TERMINATEDS, SB.TRUNCATEDS}
    batch = collector.postprocess_episode(episode, build=True)
    assert SB.ACTIONS not in batch and SB.INFOS not in batch and SB.PREV_ACTIONS not in batch
    assert batch.count == 3


def test_inference_dict_uses_past_only_and_skips_positive_shifts() -> None:
    policy = ready(CountPolicy(OBS, ACT, {}))
    policy.view_requirements["next_actions"] = ViewRequirement(SB.ACTIONS, shift=1, space=ACT)
    policy.view_requirements["frames"] = ViewRequirement(SB.OBS, shift="-3:0", space=OBS)
    collector = _collector(policy)
    episode = _started(collector)
    first = collector.get_inference_input_dict(PID)
    assert "next_actions" not in first
    assert first[SB.PREV_ACTIONS].tolist() == [0]  # before the episode: zeros
    assert first["frames"].shape == (1, 4, 1) and first["frames"][0, :, 0].tolist() == [0, 0, 0, 0]
    _run(collector, episode, 4)
    now = collector.get_inference_input_dict(PID)
    assert now[SB.OBS][0, 0] == 4.0 and now[SB.PREV_ACTIONS].tolist() == [1]  # action at t=3
    assert now["frames"][0, :, 0].tolist() == [1, 2, 3, 4]
    assert collector.forward_pass_agent_keys[PID] == [(episode.episode_id, 0, 0)]


def test_fragment_reads_the_previous_fragment_and_trims_memory() -> None:
    policy = ready(CountPolicy(OBS, ACT, {}))
    policy.view_requirements["frames"] = ViewRequirement(SB.OBS, shift="-3:0", space=OBS)
    policy.view_requirements["last_reward"] = ViewRequirement(SB.REWARDS, shift=-1)
    collector = _collector(policy, rollout_fragment_length=4)
    episode = _started(collector)
    _run(collector, episode, 4)
    [first] = collector.try_build_truncated_episode_multi_agent_batch()
    # Only the lookback (3 steps) and the current observation stay.
    assert len(collector.buffers(episode.episode_id)[SB.ACTIONS]) == 3
    assert len(collector.buffers(episode.episode_id)[SB.OBS]) == 4
    _run(collector, episode, 4, start=4)
    [second] = collector.try_build_truncated_episode_multi_agent_batch()
    assert second[SB.T].tolist() == [4, 5, 6, 7]
    assert second[SB.PREV_ACTIONS][0] == first[SB.ACTIONS][-1] == 1  # the real previous action
    assert second["last_reward"][0] == 3.0
    assert second["frames"][0, :, 0].tolist() == [1, 2, 3, 4]
    assert first[SB.EPS_ID].tolist() == second[SB.EPS_ID].tolist()[:4]
    assert first[SB.UNROLL_ID][0] != second[SB.UNROLL_ID][0]


def test_episode_end_drops_the_episode_and_checks_dones() -> None:
    collector = _collector(ready(CountPolicy(OBS, ACT, {})))
    episode = _started(collector)
    _run(collector, episode, 3, done_at=3)
    batch = collector.postprocess_episode(episode, is_done=True, check_dones=True, build=True)
    assert batch[SB.TERMINATEDS].tolist() == [False, False, True]
    with pytest.raises(KeyError):
        collector.buffers(episode.episode_id)
    other = _started(collector, eps_id=12)
    _run(collector, other, 2)
    with pytest.raises(ValueError, match="terminateds=False and truncateds=False"):
        collector.postprocess_episode(other, is_done=True, check_dones=True, build=True)


def test_view_on_a_column_not_collected_is_named() -> None:
    policy = ready(CountPolicy(OBS, ACT, {}))
    collector = _collector(policy)
    episode = _started(collector)
    _run(collector, episode, 2)
    policy.view_requirements["vf"] = ViewRequirement("vf_preds")
    with pytest.raises(KeyError, match="'vf' reads column 'vf_preds'"):
        collector.postprocess_episode(episode, build=True)


def test_non_training_columns_are_dropped_after_postprocessing() -> None:
    policy = ready(CountPolicy(OBS, ACT, {}))
    assert not policy.view_requirements[SB.INFOS].used_for_training if SB.INFOS in policy.view_requirements else True
    policy.view_requirements["t_copy"] = ViewRequirement(SB.T, used_for_training=False, used_for_compute_actions=False)
    collector = _collector(policy)
    episode = _started(collector)
    _run(collector, episode, 2)
    batch = collector.postprocess_episode(episode, build=True)
    assert "t_copy" not in batch
    assert "t_copy" in policy.postprocessed[-1]  # postprocessing saw it


def test_clip_rewards() -> None:
    collector = _collector(ready(CountPolicy(OBS, ACT, {})), clip_rewards=True)
    episode = _started(collector)
    _run(collector, episode, 3)
    assert collector.postprocess_episode(episode, build=True)[SB.REWARDS].tolist() == [0.0, 1.0, 1.0]


def test_contract_is_checked_at_class_definition() -> None:
    with pytest.raises(TypeError, match="must define .*postprocess_episode"):
        class Half(SampleCollector):
            def add_init_obs(self, *args: Any) -> None:
                pass

    class Base(SampleCollector, abstract=True):
        pass

    assert Base({}).rollout_fragment_length == 200
    with pytest.raises(ValueError, match="count_steps_by"):
        SimpleListCollector({}, count_steps_by="steps")


def test_inference_views_follow_changes_made_after_sampling_started() -> None:
    policy = ready(CountPolicy(OBS, ACT, {}))
    policy.view_requirements["last_rewards"] = ViewRequirement(SB.REWARDS, shift=-1)
    collector = _collector(policy)
    episode = _started(collector)
    _run(collector, episode, 3)  # rewards 0, 1, 2
    assert collector.get_inference_input_dict(PID)["last_rewards"].tolist() == [2.0]
    _run(collector, episode, 1, start=3)  # reward 3
    policy.view_requirements["last_rewards"].shift = -3
    assert collector.get_inference_input_dict(PID)["last_rewards"].tolist() == [1.0]
    _run(collector, episode, 1, start=4)
    policy.view_requirements["last_rewards"].used_for_compute_actions = False
    assert "last_rewards" not in collector.get_inference_input_dict(PID)
