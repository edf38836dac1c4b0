"""cadence.interop.ding.data: BaseEnvTimestep, to_ndarray, deep_merge_dicts (DI-engine's meaning)."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest
import torch

from cadence.interop.ding import BaseEnvTimestep, deep_merge_dicts, to_ndarray


def test_the_seed_s_step_builds_a_timestep_with_a_reward_of_shape_one() -> None:
    # the seed's AtariEnv.step: obs = to_ndarray(obs); rew = to_ndarray([rew])
    obs, reward = to_ndarray(np.zeros((4, 4), np.uint8)), to_ndarray([1.0], np.float32)
    timestep = BaseEnvTimestep(obs, reward, True, {"eval_episode_return": 21.0})
    assert timestep.reward.shape == (1,) and timestep.reward.dtype == np.float32
    assert timestep.obs.dtype == np.uint8 and timestep.done is True
    assert BaseEnvTimestep._fields == ("obs", "reward", "done", "info")
    obs, reward, done, info = timestep  # unpacks as the seed's loops do
    assert info == {"eval_episode_return": 21.0}


def test_to_ndarray_converts_each_kind() -> None:
    # the seed's random_action: an int sampled from Discrete becomes an int64 array of shape (1,)
    action = to_ndarray([3], dtype=np.int64)
    assert action.dtype == np.int64 and action.shape == (1,)
    tensor = torch.ones(2, requires_grad=True)
    assert np.array_equal(to_ndarray(tensor), np.ones(2, np.float32))
    assert to_ndarray(np.arange(3), dtype=np.float32).dtype == np.float32
    same = np.arange(3)
    assert to_ndarray(same) is same  # no dtype: the array itself
    assert to_ndarray(np.float64(2.5)).shape == () and to_ndarray(7).dtype.kind == "i"
    assert to_ndarray([True, False]).dtype == np.bool_
    assert to_ndarray(True) is True and to_ndarray("cart") == "cart" and to_ndarray(None) is None
    assert to_ndarray([]).shape == (0,)  # DI-engine's gives None here
    nested = to_ndarray({"a": [np.zeros(2), [1, 2]], "b": {"c": (1.0, 2.0)}}, dtype=np.float32)
    assert isinstance(nested["a"], list) and nested["a"][1].dtype == np.float32
    assert nested["b"]["c"].dtype == np.float32
    Point = namedtuple("Point", ["x", "y"])
    point = to_ndarray(Point([1, 2], 3))
    assert isinstance(point, Point) and point.x.shape == (2,) and point.y.shape == ()


def test_to_ndarray_names_what_it_cannot_convert() -> None:
    with pytest.raises(TypeError, match=r"item\['obs'\]\[1\] is an object"):
        to_ndarray({"obs": [np.zeros(1), object()]})
    Pair = namedtuple("Pair", ["left", "right"])
    with pytest.raises(TypeError, match=r"item\.right is a set"):
        to_ndarray(Pair(1, {2}))


def test_deep_merge_dicts_merges_recursively_and_shares_nothing() -> None:
    defaults = {"use_act_scale": False, "delay_reward_step": 0, "model": {"hidden": [64, 64], "act": "relu"}}
    user = {"delay_reward_step": 2, "model": {"hidden": [256]}, "is_train": True}
    merged = deep_merge_dicts(defaults, user)
    assert merged == {
        "use_act_scale": False, "delay_reward_step": 2, "model": {"hidden": [256], "act": "relu"}, "is_train": True,
    }
    merged["model"]["hidden"].append(1)
    assert user["model"]["hidden"] == [256] and defaults["model"]["hidden"] == [64, 64]
    assert deep_merge_dicts(None, None) == {} and deep_merge_dicts(defaults, None) == defaults
    # a value that is a dict on one side only is replaced, not merged
    assert deep_merge_dicts({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}
    assert deep_merge_dicts({"a": {"b": 2}}, {"a": 3}) == {"a": 3}


def test_deep_merge_dicts_keeps_the_defaults_mapping_type() -> None:
    class AttributeDict(dict):  # stands for EasyDict
        def __getattr__(self, name: str) -> object:
            try:
                return self[name]
            except KeyError:
                raise AttributeError(name) from None

    merged = deep_merge_dicts(AttributeDict(cfg_type="MujocoEnvDict", seed=0), {"seed": 5})
    assert isinstance(merged, AttributeDict) and merged.seed == 5 and merged.cfg_type == "MujocoEnvDict"
