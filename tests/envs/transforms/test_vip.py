"""VIPTransform and VIPRewardTransform: embeddings of a pixel env, VIP's checkpoint
layout, the goal image at reset, the reward formula, specs, partial resets and batches
(in this process and inside ParallelEnv workers)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from cadence.data import Bounded, Unbounded
from cadence.envs import ParallelEnv, SerialEnv, check_env_specs
from cadence.envs.transforms import RewardSum, TransformedEnv
from cadence.envs.transforms.vip import VIPRewardTransform, VIPTransform
from cadence.modules.resnet import resnet50
from tests.fakes import CountingEnv, RandomPixelsEnv

SIZE = 32  # the images fed to the ResNet: small, for speed


def _goal(batch: tuple[int, ...] = ()) -> TensorDict:
    image = torch.randint(0, 256, (*batch, 16, 16, 3), generator=torch.Generator().manual_seed(9), dtype=torch.uint8)
    return TensorDict(goal_image=image, batch_size=list(batch))


def _reward_env(max_steps: int = 100) -> TransformedEnv:
    return TransformedEnv(RandomPixelsEnv(size=16, max_steps=max_steps),
                          VIPRewardTransform("resnet50", size=SIZE, pretrained=False))


def test_vip_embeddings_specs_and_checkpoint_layout(tmp_path) -> None:
    source = resnet50(1024, generator=torch.Generator().manual_seed(6))
    state = {f"module.convnet.{key}": value for key, value in source.state_dict().items()}
    torch.save({"vip": state}, tmp_path / "vip_50.pt")
    env = TransformedEnv(RandomPixelsEnv(size=16, max_steps=5), VIPTransform("resnet50", size=SIZE, model_dir=tmp_path))
    assert torch.equal(env.transform[0][-1].encoder.fc.weight, source.fc.weight)  # the 2048-to-1024 head
    spec = env.observation_spec
    assert set(spec.keys()) == {"vip_vec"} and isinstance(spec["vip_vec"], Unbounded) and spec["vip_vec"].shape == (1024,)
    check_env_specs(env, seed=0)
    assert env.rollout(2)["next", "vip_vec"].shape == (2, 1024)
    with pytest.raises(FileNotFoundError, match="'vip_50.pt' at .*vip/model.pt"):
        VIPTransform("resnet50", model_dir=tmp_path / "empty")
    with pytest.raises(ValueError, match="fetches nothing at run time"):
        VIPTransform(download=True)
    with pytest.raises(ValueError, match="model_name must be one of \\['resnet50'\\]"):
        VIPTransform("resnet18", pretrained=False)


def test_reset_needs_a_goal_image() -> None:
    env = _reward_env()
    with pytest.raises(KeyError, match="reset\\(\\) needs a 'goal_image' entry .* got entries \\[\\]"):
        env.reset()
    with pytest.raises(ValueError, match="one frame key"):
        VIPRewardTransform(in_keys=["a", "b"], pretrained=False)


def test_reward_is_the_progress_towards_the_goal_in_embedding_space() -> None:
    env = _reward_env()
    assert isinstance(env.state_spec["goal_image"], Bounded) and env.state_spec["goal_image"].shape == (16, 16, 3)
    assert env.observation_spec["goal_embedding"].shape == (1024,)
    assert isinstance(env.reward_spec, Unbounded) and env.reward_spec.shape == (1,)
    goal = _goal()
    check_env_specs(env, seed=0, tensordict=goal.clone())
    env.set_seed(4)
    data = env.rollout(4, tensordict=goal.clone())
    # the same frames, embedded by a separate VIPTransform (same seeded random weights)
    frames_env = TransformedEnv(RandomPixelsEnv(size=16), VIPTransform(size=SIZE, pretrained=False))
    frames_env.set_seed(4)
    embeddings = frames_env.rollout(4)
    encode = VIPTransform(size=SIZE, pretrained=False)
    goal_embedding = encode(TensorDict(pixels=goal["goal_image"]))["vip_vec"]
    before = embeddings["vip_vec"]
    after = embeddings["next", "vip_vec"]
    expected = (before - goal_embedding).norm(dim=-1) - (after - goal_embedding).norm(dim=-1)
    torch.testing.assert_close(data["next", "reward"].squeeze(-1), expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(data["next", "vip_vec"], after, rtol=1e-4, atol=1e-4)
    assert torch.equal(data["goal_embedding"], goal_embedding.expand(4, -1))
    assert torch.equal(data["goal_image"][0], goal["goal_image"])
    # a goal equal to the first frame: no distance at the start
    frames_env.set_seed(4)
    start = frames_env.base_env.reset()["pixels"]
    env.set_seed(4)
    first = env.reset(TensorDict(goal_image=start))
    assert float((first["vip_vec"] - first["goal_embedding"]).norm()) < 1e-4


def test_auto_reset_keeps_the_goal_and_a_batch_gets_one_goal_each() -> None:
    env = _reward_env(max_steps=2)
    data = env.rollout(5, tensordict=_goal(), break_when_any_done=False)
    assert torch.equal(data["goal_embedding"][0], data["goal_embedding"][4])  # kept through the auto-reset
    assert torch.isfinite(data["next", "reward"]).all()
    goals = _goal((2,))
    goals["goal_image"][1] = 0
    batched = TransformedEnv(SerialEnv(2, lambda: RandomPixelsEnv(size=16, max_steps=3)),
                             VIPRewardTransform(size=SIZE, pretrained=False))
    check_env_specs(batched, tensordict=goals.clone())
    out = batched.rollout(4, tensordict=goals.clone(), break_when_any_done=False)
    assert out["next", "reward"].shape == (2, 4, 1)
    assert not torch.equal(out["goal_embedding"][0, 0], out["goal_embedding"][1, 0])


def test_inside_parallel_workers_gives_what_serial_gives() -> None:
    make = lambda: _reward_env(max_steps=3)  # noqa: E731
    goals = _goal((2,))
    with SerialEnv(2, make) as serial:
        serial.set_seed(2)
        expected = serial.rollout(4, tensordict=goals.clone(), break_when_any_done=False)
    with ParallelEnv(2, make) as parallel:
        check_env_specs(parallel, tensordict=goals.clone())
        parallel.set_seed(2)
        got = parallel.rollout(4, tensordict=goals.clone(), break_when_any_done=False)
    # the workers get the actions and the state only: the transform keeps the embeddings it needs
    assert got["next", "reward"].abs().sum() > 0
    torch.testing.assert_close(got["next", "reward"], expected["next", "reward"], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got["goal_embedding"], expected["goal_embedding"], rtol=1e-4, atol=1e-4)


def test_an_env_without_reward_or_frames_is_refused() -> None:
    with pytest.raises(KeyError, match="reads 'pixels', which the env does not emit"):
        TransformedEnv(CountingEnv(), VIPRewardTransform(pretrained=False))


def test_transforms_appended_after_it_see_the_vip_reward() -> None:
    env = _reward_env()
    env.append_transform(RewardSum())
    assert len(env.transform) == 2  # a member of the env's chain, not a host for what comes after
    data = env.rollout(3, tensordict=_goal())
    torch.testing.assert_close(data["next", "episode_reward"], data["next", "reward"].cumsum(0))
    assert data["next", "reward"].abs().sum() > 0
