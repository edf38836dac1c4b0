"""DTypeCastTransform and DoubleToFloat: values, specs on single and batched envs."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from cadence.envs import SerialEnv, check_env_specs
from cadence.envs.transforms import DoubleToFloat, DTypeCastTransform, TransformedEnv
from tests.envs.transforms.test_base import DoubleEnv


def test_cast_values_both_ways():
    cast = DTypeCastTransform(torch.float64, torch.float16, in_keys=["obs"], out_keys=["obs16"], in_keys_inv=["a"])
    data = cast(TensorDict({"obs": torch.tensor([1.5], dtype=torch.float64)}, []))
    assert data["obs16"].dtype == torch.float16 and data["obs16"].item() == 1.5
    assert data["obs"].dtype == torch.float64  # written under another key
    assert cast.inv(TensorDict({"a": torch.tensor([0.25], dtype=torch.float16)}, []))["a"].dtype == torch.float64


def test_without_in_keys_every_double_output_is_cast():
    env = TransformedEnv(DoubleEnv(), DoubleToFloat(in_keys_inv=["action"]))
    assert env.transform[0].in_keys == ["obs"]
    data = env.rollout(2)
    assert data["obs"].dtype == data["next", "obs"].dtype == torch.float32
    loose = DoubleToFloat()(TensorDict({"x": torch.zeros(1, dtype=torch.float64), "n": torch.zeros(1, dtype=torch.long)}, []))
    assert loose["x"].dtype == torch.float32 and loose["n"].dtype == torch.long


def test_specs_on_a_batched_env():
    env = TransformedEnv(SerialEnv(2, DoubleEnv), DoubleToFloat(in_keys_inv=["action"]))
    assert env.action_spec.dtype == torch.float32 and env.action_spec.shape == torch.Size([2, 2])
    check_env_specs(env)
    inside = SerialEnv(2, lambda: TransformedEnv(DoubleEnv(), DoubleToFloat(in_keys_inv=["action"])))
    check_env_specs(inside)


def test_reset_output_is_cast_too():
    env = TransformedEnv(DoubleEnv(), DoubleToFloat(in_keys_inv=["action"]))
    assert env.reset()["obs"].dtype == torch.float32
