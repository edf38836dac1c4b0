"""The seed's example envs (di-engine-env-migration.txt), their method bodies as written.

The seed shows AtariEnv's ``__init__``, ``seed``, ``reset``, ``step``,
``enable_save_replay`` and ``create_*_env_cfg``, CartpoleEnv's three spaces and
MujocoEnv's ``default_config``; what it leaves out (``_make_env``, the spaces of Atari,
``close``) is filled in here, marked as such. The seed's Atari code drives an old-gym
simulator (``seed()``, ``reset() -> obs``, 4-tuple ``step``): :class:`OldGymApi` gives a
gymnasium env that calling convention.
"""

from __future__ import annotations

import copy
from typing import List, Optional

import gymnasium as gym
import numpy as np
from easydict import EasyDict

from cadence.interop.ding import BaseEnv, BaseEnvTimestep, deep_merge_dicts, to_ndarray


class OldGymApi:
    """A gymnasium env with old gym's calls, as the seed's AtariEnv expects (not in the seed)."""

    def __init__(self, env: gym.Env) -> None:
        self.env = env
        self._seed: Optional[int] = None
        self.observation_space = env.observation_space
        self.action_space = env.action_space

    def seed(self, seed: int) -> None:
        self._seed = seed

    def reset(self) -> np.ndarray:
        obs, _ = self.env.reset(seed=self._seed)
        self._seed = None
        return obs

    def step(self, action: int):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated or truncated, info

    def close(self) -> None:
        self.env.close()


class AtariEnv(BaseEnv):
    """The seed's AtariEnv: every method the seed shows, as written."""

    def __init__(self, cfg: dict) -> None:
        self._cfg = cfg
        self._init_flag = False
        # not in the seed: where the example's ``self._replay_path`` starts, and the spaces
        self._replay_path = None
        self._observation_space = gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
        self._action_space = gym.spaces.Discrete(6)
        self._reward_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def _make_env(self, only_info: bool = False):  # not in the seed
        import ale_py

        gym.register_envs(ale_py)
        return OldGymApi(gym.make(self._cfg.get("env_id", "ALE/Pong-v5"), max_episode_steps=self._cfg.get("max_steps")))

    def seed(self, seed: int, dynamic_seed: bool = True) -> None:
        self._seed = seed
        self._dynamic_seed = dynamic_seed
        np.random.seed(self._seed)

    def reset(self) -> np.ndarray:
        if not self._init_flag:
            self._env = self._make_env(only_info=False)
            self._init_flag = True
        if hasattr(self, '_seed') and hasattr(self, '_dynamic_seed') and self._dynamic_seed:
            np_seed = 100 * np.random.randint(1, 1000)
            self._env.seed(self._seed + np_seed)
        elif hasattr(self, '_seed'):
            self._env.seed(self._seed)
        obs = self._env.reset()
        obs = to_ndarray(obs)
        self._eval_episode_return = 0.
        return obs

    def step(self, action: np.ndarray) -> BaseEnvTimestep:
        assert isinstance(action, np.ndarray), type(action)
        action = action.item()
        obs, rew, done, info = self._env.step(action)
        self._eval_episode_return += rew
        obs = to_ndarray(obs)
        rew = to_ndarray([rew])  # Transformed to an array with shape (1, )
        if done:
            info['eval_episode_return'] = self._eval_episode_return
        return BaseEnvTimestep(obs, rew, done, info)

    def close(self) -> None:  # not in the seed
        if self._init_flag:
            self._env.close()
            self._init_flag = False

    def __repr__(self) -> str:  # not in the seed
        return "AtariEnv"

    def enable_save_replay(self, replay_path: Optional[str] = None) -> None:
        if replay_path is None:
            replay_path = './video'
        self._replay_path = replay_path

    @staticmethod
    def create_collector_env_cfg(cfg: dict) -> List[dict]:
        collector_env_num = cfg.pop('collector_env_num')
        cfg = copy.deepcopy(cfg)
        cfg.is_train = True
        return [cfg for _ in range(collector_env_num)]

    @staticmethod
    def create_evaluator_env_cfg(cfg: dict) -> List[dict]:
        evaluator_env_num = cfg.pop('evaluator_env_num')
        cfg = copy.deepcopy(cfg)
        cfg.is_train = False
        return [cfg for _ in range(evaluator_env_num)]


class CartpoleEnv(BaseEnv):
    """The seed's CartpoleEnv spaces, as written, over gymnasium's CartPole (the rest not in the seed)."""

    def __init__(self, cfg: dict = {}) -> None:
        self._observation_space = gym.spaces.Box(
            low=np.array([-4.8, float("-inf"), -0.42, float("-inf")]),
            high=np.array([4.8, float("inf"), 0.42, float("inf")]),
            shape=(4, ),
            dtype=np.float32
        )
        self._action_space = gym.spaces.Discrete(2)
        self._reward_space = gym.spaces.Box(low=0.0, high=1.0, shape=(1, ), dtype=np.float32)
        self._cfg = cfg
        self._init_flag = False

    @property
    def observation_space(self) -> gym.spaces.Space:
        return self._observation_space

    @property
    def action_space(self) -> gym.spaces.Space:
        return self._action_space

    @property
    def reward_space(self) -> gym.spaces.Space:
        return self._reward_space

    # not in the seed: the env itself, written to the contract with BaseEnv's helpers
    def reset(self) -> np.ndarray:
        if not self._init_flag:
            self._env = gym.make("CartPole-v1")
            self._init_flag = True
        obs, _ = self._env.reset(seed=self.episode_seed())
        self._eval_episode_return = 0.0
        return obs.astype(np.float32)

    def step(self, action: np.ndarray) -> BaseEnvTimestep:
        obs, rew, terminated, truncated, info = self._env.step(int(action.item()))
        self._eval_episode_return += rew
        done = bool(terminated or truncated)
        if done:
            info["eval_episode_return"] = self._eval_episode_return
            if truncated and not terminated:
                info["TimeLimit.truncated"] = True
        return BaseEnvTimestep(obs.astype(np.float32), to_ndarray([rew], np.float32), done, info)

    def close(self) -> None:
        if self._init_flag:
            self._env.close()
            self._init_flag = False


class MujocoEnv(BaseEnv, abstract=True):
    """The seed's MujocoEnv default_config, as written."""

    @classmethod
    def default_config(cls: type) -> EasyDict:
        cfg = EasyDict(copy.deepcopy(cls.config))
        cfg.cfg_type = cls.__name__ + 'Dict'
        return cfg

    config = dict(
        use_act_scale=False,
        delay_reward_step=0,
    )

    def __init__(self, cfg) -> None:
        self._cfg = deep_merge_dicts(self.config, cfg)


class ScaledFloatFrameWrapper(gym.ObservationWrapper):
    """The seed's ScaledFloatFrameWrapper ``__init__``, as written (``observation`` not in the seed)."""

    def __init__(self, env):
        super().__init__(env)  # the seed's "# ..."
        self.observation_space = gym.spaces.Box(low=0., high=1., shape=env.observation_space.shape, dtype=np.float32)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return (observation / 255.0).astype(np.float32)
