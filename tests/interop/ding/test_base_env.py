"""BaseEnv: the contract's defaults (seeds, spaces, random actions, configs)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from easydict import EasyDict

from cadence.interop.ding import BaseEnv, BaseEnvTimestep
from cadence.interop.ding.base_env import contract_action


class Minimal(BaseEnv):
    """Writes only what the contract leaves to each env; never calls BaseEnv.__init__."""

    config = dict(length=4, nested=dict(a=1))

    def __init__(self, cfg: dict, action_space: gym.Space | None = None) -> None:
        self._cfg = cfg
        self.action_space = action_space or gym.spaces.Discrete(3)

    def reset(self) -> np.ndarray:
        return np.zeros(1, np.float32)

    def step(self, action: np.ndarray) -> BaseEnvTimestep:
        return BaseEnvTimestep(np.zeros(1, np.float32), np.zeros(1, np.float32), True, {"eval_episode_return": 0.0})

    def close(self) -> None:
        pass


def test_a_subclass_missing_a_required_method_is_refused_when_defined():
    with pytest.raises(TypeError, match=r"NoStep must define step\(\)"):

        class NoStep(BaseEnv):
            def reset(self) -> None: ...

            def close(self) -> None: ...

    class Base(BaseEnv, abstract=True):  # a base for others may leave them
        def close(self) -> None: ...

    class Full(Base):
        def reset(self) -> None: ...

        def step(self, action: object) -> None: ...

    assert Full({})._cfg == {}


def test_static_seed_repeats_dynamic_seeds_follow_the_seed_and_reproduce():
    env = Minimal({})
    assert env.episode_seed() is None
    env.seed(11, dynamic_seed=False)
    assert [env.episode_seed() for _ in range(3)] == [11, 11, 11]
    env.seed(11)
    first = [env.episode_seed() for _ in range(50)]
    assert all(111 <= s <= 11 + 100 * 999 and (s - 11) % 100 == 0 for s in first)
    assert len(set(first)) > 40  # drawn, not fixed
    env.seed(11)
    assert [env.episode_seed() for _ in range(50)] == first
    other = Minimal({})
    other.seed(12)
    assert [s - 12 for s in (other.episode_seed() for _ in range(50))] != [s - 11 for s in first]


def test_a_subclass_seed_that_only_sets_the_attributes_still_gets_dynamic_seeds():
    class OwnSeed(Minimal):
        def seed(self, seed: int, dynamic_seed: bool = True) -> None:
            self._seed, self._dynamic_seed = seed, dynamic_seed

    env = OwnSeed({})
    env.seed(3)
    seeds = [env.episode_seed() for _ in range(20)]
    assert all((s - 3) % 100 == 0 and s > 3 for s in seeds) and len(set(seeds)) > 10
    again = OwnSeed({})
    again.seed(3)
    assert [again.episode_seed() for _ in range(20)] == seeds  # the same seed, the same sequence

    class CallsSuper(Minimal):
        def seed(self, seed: int, dynamic_seed: bool = True) -> None:
            super().seed(seed, dynamic_seed)
            self.seeded = True

    env = CallsSuper({})
    env.seed(3)
    assert [env.episode_seed() for _ in range(20)] == seeds and env.seeded
    env.seed(3)
    assert [env.episode_seed() for _ in range(20)] == seeds


@pytest.mark.parametrize("bad", [-1, 2**32, 1.5, "3", True, None])
def test_bad_seeds_are_named(bad):
    with pytest.raises(ValueError, match="seed must be an int in"):
        Minimal({}).seed(bad)


@pytest.mark.parametrize(
    "space, dtype, shape",
    [
        (gym.spaces.Discrete(4), np.int64, (1,)),
        (gym.spaces.Box(-1, 1, (3,), np.float64), np.float32, (3,)),
        (gym.spaces.Box(0, 255, (2, 2), np.uint8), np.uint8, (2, 2)),
        (gym.spaces.MultiDiscrete([2, 3]), np.int64, (2,)),
        (gym.spaces.MultiBinary(5), np.int64, (5,)),
    ],
)
def test_random_action_is_in_the_contracts_types(space, dtype, shape):
    env = Minimal({}, space)
    env.seed(0)
    action = env.random_action()
    assert isinstance(action, np.ndarray) and action.dtype == dtype and action.shape == shape


def test_random_action_of_composite_spaces_and_its_reproducibility():
    space = gym.spaces.Dict(
        {"action_type": gym.spaces.Discrete(3), "action_args": gym.spaces.Box(-1, 1, (2,), np.float32)}
    )
    env = Minimal({}, space)
    env.seed(5)
    first = [env.random_action() for _ in range(5)]
    assert set(first[0]) == {"action_type", "action_args"} and first[0]["action_type"].dtype == np.int64
    env.seed(5)
    again = [env.random_action() for _ in range(5)]
    assert all(np.array_equal(a["action_args"], b["action_args"]) for a, b in zip(first, again))
    tup = Minimal({}, gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (1,), np.float32))))
    assert isinstance(tup.random_action(), tuple)
    with pytest.raises(TypeError, match="random_action"):
        contract_action("left", gym.spaces.Text(4))


def test_spaces_missing_are_named():
    class NoSpaces(Minimal):
        def __init__(self, cfg: dict) -> None:
            self._cfg = cfg

    with pytest.raises(AttributeError, match="NoSpaces has no observation_space"):
        NoSpaces({}).observation_space


def test_default_config_is_a_copy_with_cfg_type():
    cfg = Minimal.default_config()
    assert isinstance(cfg, EasyDict) and cfg.cfg_type == "MinimalDict" and cfg.nested.a == 1
    cfg.nested.a = 9
    assert Minimal.config["nested"]["a"] == 1


@pytest.mark.parametrize("make", [dict, EasyDict])
def test_env_cfgs_pop_the_count_and_are_independent_copies(make):
    cfg = make(collector_env_num=3, evaluator_env_num=2, env_id="Pong", wrapper=dict(skip=4))
    collectors = BaseEnv.create_collector_env_cfg(cfg)
    assert "collector_env_num" not in cfg and len(collectors) == 3
    assert all(c["is_train"] is True and "evaluator_env_num" in c for c in collectors)
    collectors[0]["wrapper"]["skip"] = 1
    assert collectors[1]["wrapper"]["skip"] == 4 and cfg["wrapper"]["skip"] == 4
    evaluators = BaseEnv.create_evaluator_env_cfg(cfg)
    assert len(evaluators) == 2 and all(e["is_train"] is False for e in evaluators)
    assert type(evaluators[0]) is make


def test_env_cfgs_name_a_missing_or_bad_count():
    with pytest.raises(KeyError, match="'collector_env_num'"):
        BaseEnv.create_collector_env_cfg({"env_id": "Pong"})
    with pytest.raises(ValueError, match="evaluator_env_num must be an int >= 0, got -1"):
        BaseEnv.create_evaluator_env_cfg({"evaluator_env_num": -1})


def test_enable_save_replay_keeps_the_path_and_context_manager_closes():
    closed = []

    class Closing(Minimal):
        def close(self) -> None:
            closed.append(True)

    env = Closing({})
    assert env.replay_path is None
    env.enable_save_replay()
    assert env.replay_path == "./video"
    with env:
        pass
    assert closed == [True]
    assert "Closing(cfg={})" == repr(env)
