"""Shared helpers of the sampling tests: a counting env and policies that check what they see."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from cadence.interop.rllib import Policy, SampleBatch

SB = SampleBatch


class CounterEnv(gym.Env):
    """obs = [steps since reset (+ offset)], reward 1, terminates after ``length`` steps."""

    def __init__(self, length: int = 1000) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1e6, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.length = length
        self.count = 0
        self.resets = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.count = 0
        self.resets += 1
        return np.array([0.0], np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        assert self.action_space.contains(action), action
        self.count += 1
        return np.array([float(self.count)], np.float32), 1.0, self.count >= self.length, False, {"count": self.count}


class CountPolicy(Policy):
    """Acts ``obs % 2``; reads prev_actions at inference; its postprocessing checks one episode."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        super().__init__(observation_space, action_space, config)
        self.postprocessed: list[SampleBatch] = []
        self.inference_keys: list[set[str]] = []

    def compute_actions_from_input_dict(self, input_dict: SampleBatch, explore: Any = None, **kwargs: Any) -> Any:
        obs = np.asarray(input_dict[SB.OBS])
        np.asarray(input_dict[SB.PREV_ACTIONS])  # read: stays an inference view
        self.inference_keys.append(set(input_dict.keys()))
        return (obs[:, 0].astype(np.int64) % 2), [], {}

    def postprocess_trajectory(self, sample_batch: SampleBatch, other_agent_batches: Any = None,
                               episode: Any = None) -> SampleBatch:
        eps_ids = set(np.asarray(sample_batch[SB.EPS_ID]).tolist())
        assert len(eps_ids) == 1, f"postprocess_trajectory saw several episodes: {eps_ids}"
        t = np.asarray(sample_batch[SB.T])
        assert (np.diff(t) == 1).all(), t
        self.postprocessed.append(sample_batch.copy())
        return sample_batch

    def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
        total = sum(train_batch[key].float().sum() for key in (SB.OBS, SB.NEXT_OBS, SB.ACTIONS, SB.PREV_ACTIONS))
        return (total + train_batch[SB.REWARDS].sum()).float().requires_grad_()


class ObsOnlyPolicy(Policy):
    """Reads only ``obs`` (inference and loss): everything else prunable is pruned."""

    def compute_actions_from_input_dict(self, input_dict: SampleBatch, explore: Any = None, **kwargs: Any) -> Any:
        return np.zeros(len(input_dict[SB.OBS]), np.int64), [], {}

    def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
        return train_batch[SB.OBS].float().sum().requires_grad_()


def ready(policy: Policy) -> Policy:
    """Runs the policy's view pruning (what RolloutWorker does) and clears its records."""
    policy._initialize_loss_from_dummy_batch()
    for name in ("postprocessed", "inference_keys"):
        if hasattr(policy, name):
            getattr(policy, name).clear()
    return policy
