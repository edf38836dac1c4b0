"""``DingEnvWrapper``: a plain gymnasium env as a ``BaseEnv`` that keeps the data rules.

The seed's tool for "simple environments such as ClassicControl, Box2d, Atari, Mujoco,
GymHybrid": give it a gymnasium env, or a config naming one (``{"env_id": ...}``, made at
the first ``reset``), and it speaks the contract:

* observations as float32 arrays (integers as int64, images stay uint8; a ``Discrete``
  observation becomes an int64 array of shape ``(1,)``), the observation space to match;
* the reward as a float32 array of shape ``(1,)``, ``done`` a Python bool
  (``terminated or truncated``; a truncation alone also sets
  ``info["TimeLimit.truncated"]``, as old gym's ``TimeLimit`` did);
* ``info["eval_episode_return"]`` at done: the episode's summed reward, a Python float;
* actions: an int64 array of shape ``(1,)`` becomes the numpy integer a ``Discrete``
  space samples,
  dicts are converted key by key, and with ``cfg["act_scale"]`` a ``Box`` action in
  ``[-1, 1]`` is mapped onto the space's bounds;
* seeds as :class:`~cadence.interop.ding.base_env.BaseEnv` gives them (static or dynamic,
  passed to gymnasium's ``reset(seed=...)``); ``enable_save_replay(path)`` writes one mp4
  per episode.

``cfg["env_wrapper"]`` names a preset chain of :mod:`cadence.interop.ding.wrappers`
(``"default"``: none; ``"atari_default"``, ``"mujoco_default"``, ``"gym_hybrid_default"``) or
lists callables ``env -> wrapped env`` applied in order.

Examples:
    >>> from cadence.interop.ding import DingEnvWrapper
    >>> env = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
    >>> env.seed(0, dynamic_seed=False)
    >>> obs = env.reset()
    >>> obs.dtype, obs.shape
    (dtype('float32'), (4,))
    >>> timestep = env.step(env.random_action())
    >>> timestep.reward, type(timestep.done)
    (array([1.], dtype=float32), <class 'bool'>)
    >>> env.close()
"""

from __future__ import annotations

import copy
import itertools
import os
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from cadence.interop.ding.base_env import BaseEnv
from cadence.interop.ding.data import BaseEnvTimestep, to_ndarray

__all__ = ["DingEnvWrapper", "contract_observation", "contract_observation_space"]

# each wrapper instance's videos get their own file names
_video_ids = itertools.count()


class DingEnvWrapper(BaseEnv):
    """A gymnasium env as a ``BaseEnv``: the contract's data, seeds, spaces and videos.

    Args:
        env: a gymnasium env (the wrapper is ready at once), or ``None`` to make
            ``cfg["env_id"]`` at the first ``reset`` (lazy init; reading a space before
            that makes it then).
        cfg: the config: ``env_id``, ``env_wrapper`` (a preset name or a list of
            callables), ``act_scale``, ``rew_clip`` (rewards below -10 become -10, as
            DI-engine's), ``is_train`` (the Atari preset clips rewards and loses
            episodes at lives only when training), and for ``gymnasium.make``
            ``env_kwargs`` (a dict).
        seed_api: pass the episode seeds to the env's ``reset`` (``False`` for envs that
            take no seed; ``random_action`` is still seeded).
        caller: ``"collector"`` or ``"evaluator"``: picks the presets' training or
            evaluation chain when ``cfg`` has no ``is_train``.
        is_gymnasium: accepted for DI-engine's signature; the env is always gymnasium's.

    Raises:
        KeyError: with no ``env`` and no ``cfg["env_id"]``.
        TypeError: if ``env`` is not a gymnasium env.

    Examples:
        >>> import gymnasium as gym
        >>> from cadence.interop.ding import DingEnvWrapper
        >>> env = DingEnvWrapper(gym.make("Pendulum-v1"), cfg={"act_scale": True})
        >>> env.seed(1, dynamic_seed=False)
        >>> first = env.reset()
        >>> env.close(); env.reset().tolist() == first.tolist()
        True
        >>> env.observation_space.dtype, env.reward_space.shape
        (dtype('float32'), (1,))
        >>> timestep = env.step(np.array([1.0], np.float32))  # +1 in [-1, 1]: the top of [-2, 2]
        >>> env.close()
    """

    def __init__(
        self,
        env: gym.Env | None = None,
        cfg: Mapping[str, Any] | None = None,
        seed_api: bool = True,
        caller: str = "collector",
        is_gymnasium: bool = True,
    ) -> None:
        if caller not in ("collector", "evaluator"):
            raise ValueError(f"caller must be 'collector' or 'evaluator', got {caller!r}")
        self._cfg = {} if cfg is None else cfg
        self._seed_api = seed_api
        self._caller = caller
        if env is None and "env_id" not in self._cfg:
            raise KeyError(
                f"DingEnvWrapper needs a gymnasium env or cfg['env_id'] to make one; the cfg's keys: {sorted(self._cfg)}"
            )
        if env is not None and not isinstance(env, gym.Env):
            raise TypeError(f"DingEnvWrapper wraps a gymnasium.Env, got {type(env).__name__}: {env!r}")
        self._given_env = env
        self._env: gym.Env | None = None
        self._init_flag = False
        self._replay_path = None
        self._video_id = next(_video_ids)
        self._episode_count = 0
        self._frames: list[np.ndarray] | None = None
        self._eval_episode_return = 0.0
        if env is not None:  # nothing to delay: the simulator exists already
            self._make()

    # -- lazy init ----------------------------------------------------------------------------

    def _make(self) -> None:
        if self._given_env is not None:
            env = self._given_env
        else:
            kwargs = dict(self._cfg.get("env_kwargs", None) or {})
            if self._replay_path is not None:
                kwargs.setdefault("render_mode", "rgb_array")
            env = gym.make(_registered(self._cfg["env_id"]), **kwargs)
        for wrap in self._wrapper_chain():
            env = wrap(env)
        self._env = env
        self._init_flag = True
        self._raw_observation_space = env.observation_space
        self.observation_space = contract_observation_space(env.observation_space)
        self.action_space = env.action_space
        low, high = getattr(env, "reward_range", (-np.inf, np.inf))
        self.reward_space = gym.spaces.Box(low=float(low), high=float(high), shape=(1,), dtype=np.float32)
        self._discrete_action = isinstance(env.action_space, gym.spaces.Discrete)
        # the common case, decided once: one Box observation, converted by a single astype
        raw = env.observation_space
        self._obs_dtype = _contract_dtype(raw.dtype) if isinstance(raw, gym.spaces.Box) else None
        self._rew_clip = bool(self._cfg.get("rew_clip", False))
        self._act_scale = bool(self._cfg.get("act_scale", False))

    def _wrapper_chain(self) -> list[Callable[[gym.Env], gym.Env]]:
        chain = self._cfg.get("env_wrapper", "default")
        if isinstance(chain, str):
            from cadence.interop.ding.presets import preset_wrappers

            return preset_wrappers(chain, {"is_train": self._caller == "collector", **self._cfg})
        for i, wrap in enumerate(chain):
            if not callable(wrap):
                raise TypeError(f"cfg['env_wrapper'][{i}] must be a callable env -> env, got {wrap!r}")
        return list(chain)

    def _space(self, name: str) -> gym.Space:
        if not self._init_flag and getattr(self, "_" + name, None) is None:
            self._make()
        return super()._space(name)

    # -- the contract -------------------------------------------------------------------------

    def reset(self) -> Any:
        """Starts an episode (making the env on the first call) and returns its observation.

        Returns:
            The first observation, in the contract's dtypes.

        Examples:
            >>> from cadence.interop.ding import DingEnvWrapper
            >>> env = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
            >>> env.reset().shape
            (4,)
        """
        if not self._init_flag:
            self._make()
        self._write_video()
        seed = self.episode_seed()  # drawn even when not passed on, so that the sequence stays the same
        obs, _ = self._env.reset(seed=seed if self._seed_api else None)
        self._eval_episode_return = 0.0
        if self._replay_path is not None:
            self._frames = [self._render()]
        return contract_observation(obs, self._raw_observation_space)

    def step(self, action: Any) -> BaseEnvTimestep:
        """Acts once.

        Args:
            action: an ndarray (an int64 ``(1,)`` array for a ``Discrete`` space), an
                int, or a dict of them.

        Returns:
            ``BaseEnvTimestep(obs, reward, done, info)`` in the contract's types.

        Raises:
            RuntimeError: before the first ``reset``.
            TypeError: for an action of another kind, naming it.

        Examples:
            >>> from cadence.interop.ding import DingEnvWrapper
            >>> env = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
            >>> _ = env.reset()
            >>> env.step(np.array([0])).reward
            array([1.], dtype=float32)
        """
        obs, reward, terminated, truncated, info = self._step_gymnasium(action)
        if self._obs_dtype is not None and type(obs) is np.ndarray:
            obs = obs.astype(self._obs_dtype)  # a copy: no memory shared with the env's next step
        else:
            obs = contract_observation(obs, self._raw_observation_space)
        return BaseEnvTimestep(obs, np.array([reward], np.float32), terminated or truncated, info)

    def _step_gymnasium(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """``step`` before the contract's conversion: gymnasium's five values, the episode's
        bookkeeping done (return, reward clip, video, the done ``info``). ``DingEnvAdapter``
        calls it to skip building arrays that it would only read back."""
        if not self._init_flag:
            raise RuntimeError("DingEnvWrapper.step() before the first reset(): call reset() first")
        kind = type(action)
        if self._discrete_action and kind is np.ndarray and action.size == 1 and action.dtype.kind in "iu":
            # the contract's int64 (1,) array as the numpy integer gymnasium's Discrete samples
            action = action[0] if action.ndim == 1 else action.reshape(-1)[0]
        elif self._discrete_action and (kind is np.int64 or kind is int):
            pass
        else:
            action = self._gym_action(action, self.action_space, "action")
        obs, reward, terminated, truncated, info = self._env.step(action)
        reward = float(reward)
        if self._rew_clip:
            reward = max(-10.0, reward)
        self._eval_episode_return += reward
        terminated, truncated = bool(terminated), bool(truncated)
        if self._frames is not None:
            self._frames.append(self._render())
        if terminated or truncated:
            info = dict(info)
            info["eval_episode_return"] = self._eval_episode_return
            if truncated and not terminated:
                info["TimeLimit.truncated"] = True
            self._write_video()
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        """Closes the gymnasium env (a later ``reset`` makes it again if it came from ``env_id``).

        Examples:
            >>> from cadence.interop.ding import DingEnvWrapper
            >>> env = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
            >>> env.close()  # nothing made yet: nothing to do
        """
        if self._env is not None:
            self._write_video()
            self._env.close()
        if self._given_env is None:
            self._env = None
            self._init_flag = False

    def enable_save_replay(self, replay_path: str | None = None) -> None:
        """Writes an mp4 of every episode to ``replay_path`` (call it after ``seed``, before ``reset``).

        The env must render ``rgb_array`` frames: envs made from ``env_id`` are made so;
        a given env must have been made with ``render_mode="rgb_array"``.

        Args:
            replay_path: the folder; ``None`` for ``"./video"``.

        Examples:
            >>> import os, tempfile
            >>> from cadence.interop.ding import DingEnvWrapper
            >>> folder = tempfile.mkdtemp()
            >>> env = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
            >>> env.seed(0)
            >>> env.enable_save_replay(folder)
            >>> obs, done = env.reset(), False
            >>> while not done:
            ...     done = env.step(np.array([0])).done
            >>> env.close()
            >>> [name.endswith("-episode-0.mp4") for name in os.listdir(folder)]
            [True]
        """
        super().enable_save_replay(replay_path)
        if self._init_flag and getattr(self._env, "render_mode", None) != "rgb_array":
            raise ValueError(
                f"enable_save_replay: the env renders {getattr(self._env, 'render_mode', None)!r}, "
                "videos need render_mode='rgb_array' (make the gymnasium env with it, or pass cfg['env_id'])"
            )

    def clone(self, caller: str = "collector") -> DingEnvWrapper:
        """A new wrapper with a deep copy of the config and of a given env (not yet reset).

        Args:
            caller: the clone's caller (``"collector"`` or ``"evaluator"``).

        Examples:
            >>> from cadence.interop.ding import DingEnvWrapper
            >>> env = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
            >>> twin = env.clone("evaluator")
            >>> twin._cfg == env._cfg and twin._cfg is not env._cfg
            True
        """
        given = None if self._given_env is None else copy.deepcopy(self._given_env)
        return DingEnvWrapper(given, copy.deepcopy(self._cfg), seed_api=self._seed_api, caller=caller)

    # -- helpers --------------------------------------------------------------------------------

    def _gym_action(self, action: Any, space: gym.Space, key: str) -> Any:
        if isinstance(action, Mapping):
            subspaces = space.spaces if isinstance(space, gym.spaces.Dict) else {}
            return {k: self._gym_action(v, subspaces.get(k), f"{key}[{k!r}]") for k, v in action.items()}
        if isinstance(action, (int, np.integer)) and not isinstance(action, bool):
            return int(action)
        if not isinstance(action, np.ndarray):
            raise TypeError(f"{key} must be an ndarray, an int or a dict of them, got {type(action).__name__}: {action!r}")
        if isinstance(space, gym.spaces.Discrete) and action.size == 1 and np.issubdtype(action.dtype, np.integer):
            return int(action.reshape(()))
        if isinstance(space, gym.spaces.Box) and self._act_scale:
            return space.low + (np.clip(action, -1.0, 1.0) + 1.0) * 0.5 * (space.high - space.low)
        return action

    def _render(self) -> np.ndarray:
        frame = self._env.render()
        if not isinstance(frame, np.ndarray) or frame.ndim != 3:
            raise ValueError(
                f"enable_save_replay: the env's render() gave {type(frame).__name__}, not an RGB frame; "
                "make it with render_mode='rgb_array'"
            )
        return frame

    def _write_video(self) -> None:
        frames, self._frames = self._frames, None
        if not frames or len(frames) < 2:
            return
        from cadence.record.loggers._video import write_mp4

        os.makedirs(self._replay_path, exist_ok=True)
        name = f"rl-video-{os.getpid()}-{self._video_id}-episode-{self._episode_count}.mp4"
        fps = float(self._env.metadata.get("render_fps", 30) or 30)
        write_mp4(os.path.join(self._replay_path, name), np.stack(frames), fps=fps)
        self._episode_count += 1

    def __repr__(self) -> str:
        name = self._cfg.get("env_id") or getattr(getattr(self._given_env, "spec", None), "id", None)
        return f"DingEnvWrapper({name or type(self._given_env).__name__})"


def _registered(env_id: str) -> str:
    """``env_id``, after registering ale-py's games when it names one gymnasium does not know."""
    if env_id not in gym.registry:
        try:
            import ale_py
        except ImportError:
            return env_id  # gymnasium's own error names the id
        gym.register_envs(ale_py)
    return env_id


def contract_observation_space(space: gym.Space) -> gym.Space:
    """The space of :func:`contract_observation`'s results: float32 floats, int64 integers.

    Args:
        space: a gymnasium observation space.

    Returns:
        ``Box`` spaces of another float dtype as float32, of another integer dtype (not
        uint8) as int64; ``Dict``/``Tuple`` part by part; the rest as they are.

    Examples:
        >>> import gymnasium as gym
        >>> contract_observation_space(gym.spaces.Box(0, 1, (2,), np.float64))
        Box(0.0, 1.0, (2,), float32)
    """
    if isinstance(space, gym.spaces.Dict):
        return gym.spaces.Dict({k: contract_observation_space(v) for k, v in space.spaces.items()})
    if isinstance(space, gym.spaces.Tuple):
        return gym.spaces.Tuple(tuple(contract_observation_space(v) for v in space.spaces))
    if isinstance(space, gym.spaces.Box):
        dtype = _contract_dtype(space.dtype)
        if dtype != space.dtype:
            return gym.spaces.Box(space.low.astype(dtype), space.high.astype(dtype), space.shape, dtype)
    return space


def contract_observation(obs: Any, space: gym.Space | None = None) -> Any:
    """A gymnasium observation as contract arrays (a fresh copy: no shared memory).

    Args:
        obs: the observation.
        space: its space (a ``Discrete`` one gives an int64 array of shape ``(1,)``).

    Returns:
        float32 for floats, int64 for integers, uint8 kept; dicts and tuples part by part.

    Examples:
        >>> import gymnasium as gym
        >>> contract_observation(3, gym.spaces.Discrete(5))
        array([3])
        >>> contract_observation(np.zeros(2)).dtype
        dtype('float32')
    """
    if isinstance(obs, Mapping):
        subspaces = space.spaces if isinstance(space, gym.spaces.Dict) else {}
        return {k: contract_observation(v, subspaces.get(k)) for k, v in obs.items()}
    if isinstance(obs, tuple):
        subspaces = space.spaces if isinstance(space, gym.spaces.Tuple) else (None,) * len(obs)
        return tuple(contract_observation(v, s) for v, s in zip(obs, subspaces))
    if isinstance(space, gym.spaces.Discrete):
        return np.array([int(obs)], np.int64)
    array = to_ndarray(obs)
    if not isinstance(array, np.ndarray):
        return array
    return array.astype(_contract_dtype(array.dtype), copy=True)


def _contract_dtype(dtype: Any) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return dtype
    if np.issubdtype(dtype, np.floating):
        return np.dtype(np.float32)
    if np.issubdtype(dtype, np.integer) or dtype == np.bool_:
        return np.dtype(np.int64)
    return dtype
