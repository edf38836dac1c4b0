"""Small DI-engine-style envs for the env manager tests: a counting env and its faulty
variants (flaky reset, stuck step, stuck reset, dying step, raising step, abnormal step),
and a CartPole-backed env with DI-engine's data rules.

Each is built from a config dict (``functools.partial(Env, cfg)`` makes a factory).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from cadence.interop.ding.base_env import BaseEnv
from cadence.interop.ding.data import BaseEnvTimestep

__all__ = [
    "AbnormalEnv",
    "CartPoleEnv",
    "CountingEnv",
    "DyingEnv",
    "FlakyResetEnv",
    "RaisingStepEnv",
    "StuckResetEnv",
    "StuckStepEnv",
]


class CountingEnv(BaseEnv):
    """Obs ``[t, draw]`` (float32): ``t`` counts the steps from ``start`` (a reset kwarg), ``draw``
    is drawn once per episode from the episode's seed; episodes of ``length`` steps, reward 1.

    ``token`` is unique to each instance and ``pid`` is the process it lives in, so that tests
    can tell a renewed env from the old one; ``resets`` counts this instance's resets.
    """

    config = dict(length=3)

    def __init__(self, cfg: dict | None = None) -> None:
        self._cfg = {**self.config, **(cfg or {})}
        self._init_flag = False
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.reward_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.length: int = self._cfg["length"]
        self.token = os.urandom(8).hex()
        self.resets = 0
        self.closed = False
        self._t = self._start = 0
        self._draw = 0.0

    @property
    def pid(self) -> int:
        return os.getpid()

    def reset(self, start: int = 0) -> np.ndarray:
        self._init_flag = True
        self.resets += 1
        self._before_reset()
        self._t = self._start = start
        self._draw = float(np.random.default_rng(self.episode_seed()).random())
        self._eval_episode_return = 0.0
        return self._obs()

    def step(self, action: Any) -> BaseEnvTimestep:
        self._t += 1
        early = self._before_step(self._t - self._start)
        if early is not None:
            return early
        self._eval_episode_return += 1.0
        done = self._t - self._start >= self.length
        info = {"eval_episode_return": self._eval_episode_return} if done else {}
        return BaseEnvTimestep(self._obs(), np.ones(1, np.float32), done, info)

    def close(self) -> None:
        self.closed = True

    def _obs(self) -> np.ndarray:
        return np.array([self._t, self._draw], np.float32)

    # the faulty variants override these
    def _before_reset(self) -> None:
        pass

    def _before_step(self, step: int) -> BaseEnvTimestep | None:
        return None


class FlakyResetEnv(CountingEnv):
    """Its reset raises on the attempts numbered in ``fail_on`` (counted across instances and
    processes in the file ``counter``; ``fail_on="all"`` fails every one)."""

    config = dict(length=3, counter="", fail_on=())

    def _before_reset(self) -> None:
        path = Path(self._cfg["counter"])
        attempt = int(path.read_text() or 0) + 1 if path.exists() else 1
        path.write_text(str(attempt))
        fail_on = self._cfg["fail_on"]
        if fail_on == "all" or attempt in fail_on:
            raise RuntimeError(f"flaky reset, attempt {attempt}")


class StuckStepEnv(CountingEnv):
    """Sleeps ``seconds`` in the ``stuck_at``-th step of an episode."""

    config = dict(length=5, stuck_at=2, seconds=60.0)

    def _before_step(self, step: int) -> BaseEnvTimestep | None:
        if step == self._cfg["stuck_at"]:
            time.sleep(self._cfg["seconds"])
        return None


class StuckResetEnv(CountingEnv):
    """Sleeps ``seconds`` in every reset."""

    config = dict(length=3, seconds=60.0)

    def _before_reset(self) -> None:
        time.sleep(self._cfg["seconds"])


class DyingEnv(CountingEnv):
    """Ends its process with ``os._exit(3)`` in the ``exit_at``-th step (subprocess managers only)."""

    config = dict(length=5, exit_at=1)

    def _before_step(self, step: int) -> BaseEnvTimestep | None:
        if step == self._cfg["exit_at"]:
            os._exit(3)
        return None


class RaisingStepEnv(CountingEnv):
    """Raises ``ValueError`` in the ``raise_at``-th step of an episode."""

    config = dict(length=5, raise_at=1)

    def _before_step(self, step: int) -> BaseEnvTimestep | None:
        if step == self._cfg["raise_at"]:
            raise ValueError(f"bad step {step}")
        return None


class AbnormalEnv(CountingEnv):
    """Its first step ever returns DI-engine's abnormal timestep (``info["abnormal"]``, done)."""

    config = dict(length=3)

    def __init__(self, cfg: dict | None = None) -> None:
        super().__init__(cfg)
        self.abnormal_sent = False

    def _before_step(self, step: int) -> BaseEnvTimestep | None:
        if not self.abnormal_sent:
            self.abnormal_sent = True
            return BaseEnvTimestep(None, None, True, {"abnormal": True})
        return None


class CartPoleEnv(BaseEnv):
    """gymnasium's CartPole-v1 with DI-engine's data rules: float32 obs, reward of shape (1,),
    ``done`` a bool, ``info["eval_episode_return"]`` at done; made at the first reset."""

    def __init__(self, cfg: dict | None = None) -> None:
        self._cfg = cfg or {}
        self._init_flag = False
        self.observation_space = gym.spaces.Box(
            np.array([-4.8, -np.inf, -0.42, -np.inf], np.float32),
            np.array([4.8, np.inf, 0.42, np.inf], np.float32),
            dtype=np.float32,
        )
        self.action_space = gym.spaces.Discrete(2)
        self.reward_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)

    def reset(self) -> np.ndarray:
        if not self._init_flag:
            self._env = gym.make("CartPole-v1")
            self._init_flag = True
        seed = self.episode_seed()
        obs, _ = self._env.reset(seed=seed) if seed is not None else self._env.reset()
        self._eval_episode_return = 0.0
        return obs.astype(np.float32)

    def step(self, action: Any) -> BaseEnvTimestep:
        action = int(action.item()) if isinstance(action, np.ndarray) else int(action)
        obs, reward, terminated, truncated, _ = self._env.step(action)
        self._eval_episode_return += float(reward)
        done = bool(terminated or truncated)
        info = {"eval_episode_return": self._eval_episode_return} if done else {}
        return BaseEnvTimestep(obs.astype(np.float32), np.array([reward], np.float32), done, info)

    def close(self) -> None:
        if self._init_flag:
            self._env.close()
            self._init_flag = False
