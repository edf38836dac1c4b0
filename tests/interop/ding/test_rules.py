"""The data rules: each break names the rule, the key, the value and where."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from cadence.interop.ding import BaseEnvTimestep, DataRuleError
from cadence.interop.ding.rules import check_in_space, check_space_dtype, check_timestep

BOX = gym.spaces.Box(-1, 1, (2,), np.float32)
GOOD = BaseEnvTimestep(np.zeros(2, np.float32), np.zeros(1, np.float32), False, {})


@pytest.mark.parametrize(
    "timestep, key, rule",
    [
        (GOOD._replace(obs=[0.0, 0.0]), "obs", "numpy arrays"),
        (GOOD._replace(obs=np.zeros(2)), "obs", "dtype float32, int64 or uint8"),
        (GOOD._replace(obs=np.zeros(3, np.float32)), "obs", "belong to their space"),
        (GOOD._replace(obs=np.full(2, 2.0, np.float32)), "obs", "belong to their space"),
        (GOOD._replace(obs=np.array([np.nan, 0], np.float32)), "obs", "belong to their space"),
        (GOOD._replace(reward=np.float32(1)), "reward", "one-dimensional"),
        (GOOD._replace(reward=np.zeros(())), "reward", "one-dimensional"),
        (GOOD._replace(done=np.bool_(False)), "done", "Python bool"),
        (GOOD._replace(done=0), "done", "Python bool"),
        (GOOD._replace(info=[]), "info", "info is a dict"),
        (GOOD._replace(done=True), "info['eval_episode_return']", "eval_episode_return"),
        (GOOD._replace(done=True, info={"eval_episode_return": np.array(1.0)}), "info['eval_episode_return']", "Python number"),
        ((1, 2), "timestep", "BaseEnvTimestep"),
    ],
)
def test_each_break_is_named(timestep, key, rule):
    with pytest.raises(DataRuleError) as caught:
        check_timestep(timestep, BOX, "step 7")
    error = caught.value
    assert error.key == key and rule in error.rule and error.where == "step 7"
    assert str(error).startswith(f"step 7: {key} breaks the rule")


def test_a_good_timestep_passes_and_python_floats_count_as_returns():
    check_timestep(GOOD, BOX, "step 1")
    check_timestep(GOOD._replace(done=True, info={"eval_episode_return": 3}), BOX, "step 1")
    check_timestep(GOOD._replace(done=True, info={"eval_episode_return": np.float64(3)}), BOX, "step 1")


def test_composite_spaces_name_the_inner_key():
    space = gym.spaces.Dict({"pixels": gym.spaces.Box(0, 255, (2, 2), np.uint8), "pos": gym.spaces.Tuple((BOX,))})
    good = {"pixels": np.zeros((2, 2), np.uint8), "pos": (np.zeros(2, np.float32),)}
    check_in_space(good, space, "obs", "reset")
    with pytest.raises(DataRuleError, match=r"obs\['pos'\]\[0\] breaks"):
        check_in_space({**good, "pos": (np.zeros(2),)}, space, "obs", "reset")
    with pytest.raises(DataRuleError, match=r"keys \['pixels'\] but the space has \['pixels', 'pos'\]"):
        check_in_space({"pixels": good["pixels"]}, space, "obs", "reset")


def test_discrete_multibinary_multidiscrete_values():
    check_in_space(np.array([2]), gym.spaces.Discrete(3), "a", "s")
    check_in_space(np.array(2), gym.spaces.Discrete(3), "a", "s")
    check_in_space(np.array([5]), gym.spaces.Discrete(3, start=4), "a", "s")
    for bad in (np.array([3]), np.array([-1]), np.array([1.0]), np.array([1, 1])):
        with pytest.raises(DataRuleError):
            check_in_space(bad, gym.spaces.Discrete(3), "a", "s")
    check_in_space(np.array([0, 1, 1], np.int8), gym.spaces.MultiBinary(3), "a", "s")
    check_in_space(np.array([0, 1, 1], np.int64), gym.spaces.MultiBinary(3), "a", "s")
    with pytest.raises(DataRuleError, match="holds 0 or 1"):
        check_in_space(np.array([0, 2, 1], np.int64), gym.spaces.MultiBinary(3), "a", "s")
    check_in_space(np.array([1, 2]), gym.spaces.MultiDiscrete([2, 3]), "a", "s")
    with pytest.raises(DataRuleError, match="start <= a < start \\+ nvec"):
        check_in_space(np.array([2, 2]), gym.spaces.MultiDiscrete([2, 3]), "a", "s")


def test_space_dtypes():
    check_space_dtype(gym.spaces.Box(0, 255, (4, 4, 3), np.uint8), "observation_space")  # DI-engine's false alarm
    check_space_dtype(gym.spaces.MultiBinary(4), "observation_space")
    check_space_dtype(gym.spaces.Discrete(4), "action_space")
    check_space_dtype(gym.spaces.Dict({"a": gym.spaces.Discrete(2)}), "action_space")
    with pytest.raises(DataRuleError, match=r"action_space\['b'\].*dtype int32"):
        check_space_dtype(gym.spaces.Dict({"b": gym.spaces.Box(0, 1, (1,), np.int32)}), "action_space")
