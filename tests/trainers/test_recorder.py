"""Tests for cadence/trainers/recorder.py: the tutorial's evaluator."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential

from cadence.envs import GymEnv, TransformedEnv
from cadence.envs.custom import PendulumEnv
from cadence.envs.utils import ExplorationType
from cadence.modules import OrnsteinUhlenbeckProcessModule
from cadence.record import VideoRecorder
from cadence.trainers import Recorder, episode_return


def controller() -> TensorDictModule:
    return TensorDictModule(lambda obs: (-0.5 * obs[..., 2:3]).clamp(-2, 2), ["observation"], ["action"])


def test_records_at_the_first_call_then_every_interval() -> None:
    recorder = Recorder(record_frames=10, policy_exploration=None, environment=PendulumEnv(), record_interval=3)
    recorded = [recorder(None) is not None for _ in range(7)]
    assert recorded == [True, False, False, True, False, False, True]


def test_the_tutorial_recorder_evaluates_without_exploration() -> None:
    # make_recorder of the seed: OU exploration on the policy, ExplorationType.MEAN
    env = GymEnv("Pendulum-v1")
    explore = TensorDictSequential(controller(), OrnsteinUhlenbeckProcessModule(spec=env.action_spec.clone()))
    recorder = Recorder(record_frames=1000, policy_exploration=explore, environment=env,
                        exploration_type=ExplorationType.MEAN, record_interval=10)
    env.set_seed(0)
    result = recorder(None)
    env.set_seed(0)
    with torch.no_grad():
        plain = env.rollout(1000, controller(), break_when_any_done=False)
    assert result["r_evaluation"].item() == pytest.approx(plain["next", "reward"].mean().item())
    assert result["episode_return"].item() == pytest.approx(plain["next", "reward"].sum().item() / 5)  # 5 episodes


def test_log_keys_suffix_and_errors() -> None:
    recorder = Recorder(record_frames=5, policy_exploration=None, environment=PendulumEnv(), suffix="_eval",
                        log_keys=[("next", "reward"), ("next", "th")], out_keys={("next", "th"): "angle"})
    assert sorted(recorder(None).keys()) == ["angle_eval", "episode_return_eval", "r_evaluation_eval"]
    missing = Recorder(record_frames=5, policy_exploration=None, environment=PendulumEnv(), log_keys=["nope"])
    with pytest.raises(KeyError, match=r"log key .+nope.+ is not in the evaluation rollout"):
        missing(None)
    for name, kwargs in (("record_interval", {"record_interval": 0}), ("record_frames", {"record_frames": 0})):
        with pytest.raises(ValueError, match=f"{name} must be a positive int"):
            Recorder(**{"record_frames": 5, "policy_exploration": None, "environment": PendulumEnv(), **kwargs})


def test_recorder_transforms_are_dumped(tmp_path) -> None:
    from cadence.record import CSVLogger, PixelRenderTransform

    logger = CSVLogger("exp", log_dir=str(tmp_path), video_format="pt")
    env = TransformedEnv(GymEnv("Pendulum-v1", render_mode="rgb_array"), PixelRenderTransform())
    env.append_transform(VideoRecorder(logger, tag="eval", skip=1))
    Recorder(record_frames=3, policy_exploration=None, environment=env)(None)
    assert list((tmp_path / "exp" / "videos").iterdir())


def test_episode_return_without_finished_episodes() -> None:
    rollout = TensorDict({"next": {"reward": torch.ones(2, 4, 1), "done": torch.zeros(2, 4, 1, dtype=torch.bool)}},
                         [2, 4])
    assert episode_return(rollout).item() == 4.0
