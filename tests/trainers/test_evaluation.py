"""Tests for cadence/trainers/evaluation.py: deterministic evaluation and videos."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tensordict.nn import TensorDictModule, TensorDictSequential

from cadence.envs import GymEnv, SerialEnv
from cadence.modules import AdditiveGaussianModule
from cadence.trainers.evaluation import evaluate_policy, record_video


def pd_controller() -> TensorDictModule:
    """Pushes the pendulum against its angular velocity: a deterministic policy."""
    return TensorDictModule(lambda obs: (-0.5 * obs[..., 2:3]).clamp(-2, 2), ["observation"], ["action"])


def test_episodes_are_whole_and_repeat_for_a_seed() -> None:
    env = GymEnv("Pendulum-v1")
    first = evaluate_policy(pd_controller(), env, episodes=3, seed=5, max_steps=500)
    assert first.lengths == [200, 200, 200]  # Pendulum's time limit ends them
    assert len(set(first.returns)) == 3  # each episode starts from its own seeded reset
    _ = env.rollout(37)  # whatever the env did since, the same seed plays the same episodes
    assert evaluate_policy(pd_controller(), env, episodes=3, seed=5, max_steps=500).returns == first.returns
    assert evaluate_policy(pd_controller(), env, episodes=3, seed=6, max_steps=500).returns != first.returns
    assert evaluate_policy(pd_controller(), env, episodes=1, seed=5, max_steps=50).lengths == [50]


def test_exploration_is_off() -> None:
    env = GymEnv("Pendulum-v1")
    explore = TensorDictSequential(pd_controller(), AdditiveGaussianModule(env.action_spec, sigma_init=1.0))
    noisy_free = evaluate_policy(pd_controller(), env, episodes=1, seed=0, max_steps=200)
    assert evaluate_policy(explore, env, episodes=1, seed=0, max_steps=200).returns == noisy_free.returns


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"evaluate_policy needs an unbatched env, got batch size \(2,\)"):
        evaluate_policy(None, SerialEnv(2, lambda: GymEnv("Pendulum-v1")), episodes=1, seed=0, max_steps=5)
    with pytest.raises(ValueError, match="episodes must be >= 1, got 0"):
        evaluate_policy(None, GymEnv("Pendulum-v1"), episodes=0, seed=0, max_steps=5)


def test_video_holds_every_frame_of_the_episode(tmp_path: Path) -> None:
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg", reason="mp4 videos need the video extra")
    path = tmp_path / "episode.mp4"
    env = GymEnv("Pendulum-v1", from_pixels=True, pixels_only=False)
    result = record_video(pd_controller(), env, path, seed=0, max_steps=40)
    assert result.lengths == [40]
    assert imageio_ffmpeg.count_frames_and_secs(str(path))[0] == 41  # the reset frame and one per step
    plain = evaluate_policy(pd_controller(), GymEnv("Pendulum-v1"), episodes=1, seed=0, max_steps=40)
    assert result.returns == pytest.approx(plain.returns)
    with pytest.raises(KeyError, match="the env writes no 'pixels'"):
        record_video(pd_controller(), GymEnv("Pendulum-v1"), tmp_path / "none.mp4", seed=0, max_steps=3)


def test_policy_output_is_used() -> None:
    still = TensorDictModule(lambda obs: torch.zeros(*obs.shape[:-1], 1), ["observation"], ["action"])
    env = GymEnv("Pendulum-v1")
    assert evaluate_policy(still, env, 1, 0, 200).returns != evaluate_policy(pd_controller(), env, 1, 0, 200).returns
