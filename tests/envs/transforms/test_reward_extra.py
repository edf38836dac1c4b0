"""RewardClipping, BinarizeReward, SignTransform, Reward2GoTransform, TargetReturn."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from cadence.data import Binary, Bounded
from cadence.envs import SerialEnv, check_env_specs
from cadence.envs.custom import PendulumEnv
from cadence.envs.transforms import TransformedEnv
from cadence.envs.transforms.reward_extra import (
    BinarizeReward,
    Reward2GoTransform,
    RewardClipping,
    SignTransform,
    TargetReturn,
)
from tests.fakes import CountingEnv


def _flat(value: torch.Tensor) -> list:
    return value.squeeze(-1).tolist()


def _check_all_specs(make_transform, make_env=lambda: CountingEnv(max_count=4)) -> None:
    check_env_specs(TransformedEnv(make_env(), make_transform()))
    check_env_specs(TransformedEnv(SerialEnv(2, make_env), make_transform()))
    check_env_specs(SerialEnv(2, lambda: TransformedEnv(make_env(), make_transform())))


def test_reward_clipping_values_and_specs():
    data = TensorDict({"reward": torch.tensor([[-3.0], [0.25], [7.0]])}, [3])
    assert _flat(RewardClipping(-1.0, 1.0)(data.clone())["reward"]) == [-1.0, 0.25, 1.0]
    assert _flat(RewardClipping(clamp_min=0.0)(data.clone())["reward"]) == [0.0, 0.25, 7.0]
    env = TransformedEnv(PendulumEnv(), RewardClipping(-1.0, 0.0))
    assert isinstance(env.reward_spec, Bounded)
    assert env.rollout(5)["next", "reward"].min() >= -1.0
    _check_all_specs(lambda: RewardClipping(-0.5, 0.5), PendulumEnv)
    _check_all_specs(lambda: RewardClipping(clamp_max=0.5))
    with pytest.raises(ValueError, match="clamp_min"):
        RewardClipping(1.0, 0.0)


def test_binarize_reward_values_and_specs():
    data = TensorDict({"reward": torch.tensor([[0.0], [2.5], [-1.0]])}, [3])
    out = BinarizeReward()(data)["reward"]
    assert out.dtype == torch.int8 and _flat(out) == [0, 1, 1]
    env = TransformedEnv(CountingEnv(max_count=3), BinarizeReward())
    assert isinstance(env.reward_spec, Binary) and env.reward_spec.dtype == torch.int8
    assert _flat(env.rollout(3)["next", "reward"]) == [1, 1, 1]
    _check_all_specs(BinarizeReward)
    _check_all_specs(BinarizeReward, PendulumEnv)


def test_sign_transform_outputs_inputs_and_specs():
    env = TransformedEnv(PendulumEnv(), SignTransform(in_keys=["reward", "th"], in_keys_inv=["action"]))
    data = env.rollout(4)
    assert set(data["next", "reward"].unique().tolist()) <= {-1.0, 0.0, 1.0}
    assert set(data["next", "th"].unique().tolist()) <= {-1.0, 0.0, 1.0}
    assert isinstance(env.action_spec, Bounded) and env.action_spec.space.high.max() == 1
    inv = env.transform.inv(TensorDict({"action": torch.tensor([-0.3])}, []))
    assert inv["action"].tolist() == [-1.0]
    _check_all_specs(lambda: SignTransform(in_keys=["reward", "count"], in_keys_inv=["action"]))
    ints = SignTransform(in_keys=["x"])(TensorDict({"x": torch.tensor([-4, 0, 9])}, []))["x"]
    assert ints.tolist() == [-1, 0, 1] and ints.dtype == torch.int64


def test_reward2go_values_on_batched_trajectories():
    reward = torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0]]).unsqueeze(-1)
    done = torch.tensor([[False, True, False, True], [False, False, False, False]]).unsqueeze(-1)
    data = TensorDict({"next": {"reward": reward, "done": done}}, [2, 4])
    out = Reward2GoTransform(gamma=0.5)(data.clone())["next", "reward_to_go"]
    assert _flat(out[0]) == [2.0, 2.0, 5.0, 4.0]
    assert _flat(out[1]) == [1.875, 1.75, 1.5, 1.0]
    inv = Reward2GoTransform(gamma=1.0, out_keys=["r2g"]).inv(data.clone())["r2g"]
    assert _flat(inv[0]) == [3.0, 2.0, 7.0, 4.0]
    # on a real rollout
    rollout = CountingEnv(max_count=3).rollout(6, break_when_any_done=False)
    assert _flat(Reward2GoTransform()(rollout)["next", "reward_to_go"]) == [3, 2, 1, 3, 2, 1]


def test_reward2go_refuses_envs_and_bad_data():
    with pytest.raises(TypeError, match="trajectories"):
        TransformedEnv(CountingEnv(), Reward2GoTransform())
    with pytest.raises(ValueError, match="time"):
        Reward2GoTransform()(TensorDict({"next": {"reward": torch.ones(1), "done": torch.zeros(1, dtype=bool)}}, []))
    with pytest.raises(KeyError, match="done"):
        Reward2GoTransform()(TensorDict({"next": {"reward": torch.ones(2, 1)}}, [2]))


def test_target_return_modes_resets_and_specs():
    env = TransformedEnv(CountingEnv(max_count=2), TargetReturn(5.0))
    data = env.rollout(4, break_when_any_done=False)
    assert _flat(data["target_return"]) == [5.0, 4.0, 5.0, 4.0]
    assert _flat(data["next", "target_return"]) == [4.0, 3.0, 4.0, 3.0]
    constant = TransformedEnv(CountingEnv(max_count=100), TargetReturn(2.0, mode="constant", out_keys=["goal"]))
    assert _flat(constant.rollout(3)["next", "goal"]) == [2.0, 2.0, 2.0]
    batched = TransformedEnv(SerialEnv(3, lambda: CountingEnv(max_count=100)), TargetReturn(10.0))
    data = batched.reset()
    for _ in range(2):
        data = batched._step_mdp(batched.step(batched.rand_action(data)))
    data["_reset"] = torch.tensor([[False], [True], [False]])
    assert _flat(batched.reset(data)["target_return"]) == [8.0, 10.0, 8.0]
    assert "target_return" in batched.full_state_spec.keys()
    _check_all_specs(lambda: TargetReturn(3.0))
    with pytest.raises(ValueError, match="mode"):
        TargetReturn(1.0, mode="sum")
    with pytest.raises(KeyError, match="target_return"):
        env.step(env.rand_action(env.reset().exclude("target_return")))
