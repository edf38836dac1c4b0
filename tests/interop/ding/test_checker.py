"""check_all / demonstrate_correct_procedure: every DI-engine check, without its false alarms."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from cadence.interop.ding import BaseEnv, BaseEnvTimestep, DataRuleError, check_all, demonstrate_correct_procedure


class SpaceEnv(BaseEnv):
    """An env over any observation/action space: observations sampled, episodes of 4 steps."""

    def __init__(self, cfg: dict, obs_space: gym.Space | None = None, action_space: gym.Space | None = None) -> None:
        self._cfg = cfg
        self._init_flag = False
        self.observation_space = obs_space or gym.spaces.Box(-1, 1, (2,), np.float32)
        self.action_space = action_space or gym.spaces.Discrete(3)
        self.reward_space = gym.spaces.Box(-1, 1, (1,), np.float32)
        self.actions: list[Any] = []

    def _obs(self) -> Any:
        from cadence.interop.ding.base_env import contract_action

        sample = self.observation_space.sample()
        if isinstance(self.observation_space, gym.spaces.Discrete):
            return np.array([sample], np.int64)
        return contract_action(sample, self.observation_space) if not isinstance(sample, np.ndarray) or sample.dtype != np.uint8 else sample

    def reset(self) -> Any:
        self._init_flag = True
        self.observation_space.seed(0)
        self._t = 0
        return self._obs()

    def step(self, action: Any) -> BaseEnvTimestep:
        self.actions.append(action)
        self._t += 1
        done = self._t == 4
        return BaseEnvTimestep(self._obs(), np.zeros(1, np.float32), done, {"eval_episode_return": 0.0} if done else {})

    def close(self) -> None:
        self._init_flag = False


@pytest.mark.parametrize(
    "obs_space",
    [
        gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),  # DI-engine: "If int, then must be np.int64"
        gym.spaces.MultiBinary(4),  # DI-engine: AttributeError on nvec
        gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,), np.float32), "b": gym.spaces.Discrete(3)}),
        gym.spaces.Tuple((gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.MultiDiscrete([2, 4]))),
        gym.spaces.Discrete(5),
    ],
)
def test_di_engines_false_alarms_pass(obs_space):
    check_all(SpaceEnv({}, obs_space))


@pytest.mark.parametrize(
    "action_space",
    [gym.spaces.MultiBinary(3), gym.spaces.Dict({"k": gym.spaces.Discrete(2), "x": gym.spaces.Box(-1, 1, (1,), np.float32)})],
)
def test_composite_and_binary_action_spaces_pass(action_space):
    check_all(SpaceEnv({}, action_space=action_space))


def test_each_step_draws_a_new_random_action():
    env = SpaceEnv({}, action_space=gym.spaces.Box(-1, 1, (3,), np.float32))
    check_all(env)
    assert len({a.tobytes() for a in env.actions}) == len(env.actions) > 10


def test_discrete_n_is_refused_where_di_engine_lets_it_through():
    class OffByOne(SpaceEnv):
        def random_action(self) -> np.ndarray:
            return np.array([self.action_space.n], np.int64)

    with pytest.raises(DataRuleError, match=r"random_action\(\) breaks .*Discrete\(3\) holds 0 <= a < 3"):
        check_all(OffByOne({}))


@pytest.mark.parametrize(
    "break_it, key, rule",
    [
        (lambda ts: ts._replace(obs=ts.obs.astype(np.float64)), "obs", "dtype float32, int64 or uint8"),
        (lambda ts: ts._replace(reward=ts.reward.astype(np.float64)), "reward", "dtype float32, int64 or uint8"),
        (lambda ts: ts._replace(reward=np.zeros((1, 1), np.float32)), "reward", "belong to their space"),
        (lambda ts: ts._replace(done=np.bool_(ts.done)), "done", "Python bool"),
        (lambda ts: ts._replace(info={}), "info['eval_episode_return']", "eval_episode_return"),
    ],
)
def test_a_broken_step_is_named_with_rule_key_value_and_step(break_it, key, rule):
    class Broken(SpaceEnv):
        def step(self, action: Any) -> BaseEnvTimestep:
            return break_it(super().step(action))

    with pytest.raises(DataRuleError) as caught:
        check_all(Broken({}))
    assert caught.value.key == key and rule in caught.value.rule and "step" in caught.value.where


def test_space_dtypes_and_reward_space_shape_are_checked():
    with pytest.raises(DataRuleError, match="observation_space breaks .*dtype float64"):
        check_all(SpaceEnv({}, gym.spaces.Box(-1, 1, (2,), np.float64)))

    class ScalarReward(SpaceEnv):
        def __init__(self, cfg: dict) -> None:
            super().__init__(cfg)
            self.reward_space = gym.spaces.Box(-1, 1, (), np.float32)

    with pytest.raises(DataRuleError, match="reward_space is a one-dimensional Box"):
        check_all(ScalarReward({}))


def test_shared_observations_are_found_inside_dicts_and_views():
    class Views(SpaceEnv):
        def __init__(self, cfg: dict) -> None:
            super().__init__(cfg, gym.spaces.Dict({"x": gym.spaces.Box(-1, 1, (2,), np.float32)}))
            self._buffer = np.zeros(4, np.float32)

        def _obs(self) -> Any:
            return {"x": self._buffer[:2]}  # a fresh view of the same memory each time

    with pytest.raises(DataRuleError, match=r"step 1: obs\['x'\] breaks the rule \"consecutive observations share no memory"):
        check_all(Views({}))


def test_an_endless_env_fails_instead_of_hanging():
    class Endless(SpaceEnv):
        def step(self, action: Any) -> BaseEnvTimestep:
            return super().step(action)._replace(done=False, info={})

    with pytest.raises(DataRuleError, match="episodes end"):
        check_all(Endless({}), max_episode_steps=50)


def test_demonstrate_correct_procedure_checks_lazy_init_and_the_seed():
    demonstrate_correct_procedure(SpaceEnv)

    class Eager(SpaceEnv):
        def __init__(self, cfg: dict) -> None:
            super().__init__(cfg)
            self._init_flag = True

    with pytest.raises(DataRuleError, match="lazy init"):
        demonstrate_correct_procedure(Eager)

    class ForgetsSeed(SpaceEnv):
        def reset(self) -> Any:
            self._seed = None
            return super().reset()

    with pytest.raises(DataRuleError, match=r"reset after episode 1: _seed breaks"):
        demonstrate_correct_procedure(ForgetsSeed)
