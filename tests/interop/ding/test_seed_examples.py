"""The seed's examples (di-engine-env-migration.txt) run as written, on Cadence's contract."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest
import torch
from easydict import EasyDict

from cadence.interop.ding import (
    BaseEnv,
    DataRuleError,
    DingEnvAdapter,
    check_all,
    deep_merge_dicts,
    demonstrate_correct_procedure,
    to_ndarray,
)
from tests.interop.ding.seed_envs import AtariEnv, CartpoleEnv, MujocoEnv, ScaledFloatFrameWrapper


@pytest.fixture
def ale():
    return pytest.importorskip("ale_py", reason="the seed's AtariEnv needs the atari extra (ale-py)")


def test_the_order_of_calls_the_seed_gives(ale, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    easydict_cfg = EasyDict(env_id="ALE/Pong-v5", max_steps=50)
    atari_env = AtariEnv(easydict_cfg)
    atari_env.seed(413)
    atari_env.enable_save_replay('./replay_video')
    obs = atari_env.reset()
    assert obs.dtype == np.uint8 and obs.shape == (210, 160, 3)
    assert atari_env._replay_path == "./replay_video"
    timestep = atari_env.step(np.array([0]))
    assert timestep.reward.shape == (1,) and isinstance(timestep.done, bool)
    atari_env.close()


def test_the_seeds_atari_env_in_the_procedure_and_the_checker(ale):
    demonstrate_correct_procedure(AtariEnv, cfg=EasyDict(max_steps=40))
    # the seed's step writes `to_ndarray([rew])` of ALE's Python float: a float64 reward, which the
    # contract's float32 reward space refuses (DI-engine's own checker says so too); named here
    with pytest.raises(DataRuleError) as caught:
        check_all(AtariEnv(EasyDict(max_steps=40)))
    assert caught.value.key == "reward" and "float64" in str(caught.value)


def test_the_seeds_atari_env_runs_in_cadence(ale):
    env = DingEnvAdapter(AtariEnv(EasyDict(max_steps=30)), categorical_action_encoding=True)
    env.set_seed(0)
    data = env.rollout(60, break_when_any_done=False)
    assert data["next", "observation"].shape == (60, 210, 160, 3) and data["observation"].dtype == torch.uint8
    assert data["next", "truncated"].any() or data["next", "terminated"].any()


def test_the_seeds_cartpole_spaces_pass_the_checker():
    env = CartpoleEnv()
    assert env.observation_space.shape == (4,) and env.action_space == gym.spaces.Discrete(2)
    assert env.reward_space.shape == (1,)
    check_all(CartpoleEnv())
    demonstrate_correct_procedure(CartpoleEnv)


def test_the_seeds_collector_and_evaluator_cfgs():
    cfg = EasyDict(collector_env_num=4, evaluator_env_num=2, env_id="ALE/Pong-v5")
    env_fn = AtariEnv
    collector_env_cfg = env_fn.create_collector_env_cfg(cfg)
    evaluator_env_cfg = env_fn.create_evaluator_env_cfg(cfg)
    assert len(collector_env_cfg) == 4 and all(c.is_train for c in collector_env_cfg)
    assert len(evaluator_env_cfg) == 2 and not any(c.is_train for c in evaluator_env_cfg)
    # BaseEnv's own versions give independent copies (the seed's share one object)
    assert collector_env_cfg[0] is collector_env_cfg[1]
    ours = BaseEnv.create_collector_env_cfg(EasyDict(collector_env_num=2, env_id="Pong"))
    assert ours[0] is not ours[1] and ours[0] == ours[1]


def test_the_seeds_default_config_and_merge():
    default = MujocoEnv.default_config()
    assert default == {"use_act_scale": False, "delay_reward_step": 0, "cfg_type": "MujocoEnvDict"}
    env = MujocoEnv({"use_act_scale": True})
    assert env._cfg == {"use_act_scale": True, "delay_reward_step": 0}
    assert deep_merge_dicts(MujocoEnv.default_config(), {"delay_reward_step": 2}).delay_reward_step == 2


def test_the_seeds_scaled_float_frame_wrapper_updates_its_space(ale):
    gym.register_envs(ale)
    env = ScaledFloatFrameWrapper(gym.make("ALE/Pong-v5"))
    assert env.observation_space == gym.spaces.Box(0.0, 1.0, (210, 160, 3), np.float32)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and env.observation_space.contains(obs)


def seed_random_action(self) -> np.ndarray:
    """The seed's random_action, as written."""
    random_action = self.action_space.sample()
    if isinstance(random_action, np.ndarray):
        pass
    elif isinstance(random_action, int):
        random_action = to_ndarray([random_action], dtype=np.int64)
    elif isinstance(random_action, dict):
        random_action = to_ndarray(random_action)
    else:
        raise TypeError(
            '`random_action` should be either int/np.ndarray or dict of int/np.ndarray, but get {}: {}'.format(
                type(random_action), random_action
            )
        )
    return random_action


def test_the_seeds_random_action_and_base_envs():
    class Box(CartpoleEnv):
        @property
        def action_space(self) -> gym.Space:
            return gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    box = Box()
    assert seed_random_action(box).shape == (2,) and box.random_action().dtype == np.float32
    # gymnasium's Discrete samples numpy ints, which the seed's version refuses; BaseEnv's takes them
    with pytest.raises(TypeError, match="should be either int/np.ndarray"):
        seed_random_action(CartpoleEnv())
    action = CartpoleEnv().random_action()
    assert action.dtype == np.int64 and action.shape == (1,)


def test_the_seeds_replay_path_default(tmp_path):
    env = AtariEnv(EasyDict())
    env.enable_save_replay()
    assert env._replay_path == './video' and not os.path.exists(tmp_path / "video")
