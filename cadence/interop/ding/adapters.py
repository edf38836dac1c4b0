"""The two adapters between DI-engine's env contract and Cadence's ``EnvBase``.

* :class:`DingEnvAdapter` runs a DI-engine-style env (a ``BaseEnv``: ``reset() -> obs``,
  ``step(a) -> BaseEnvTimestep``, three gymnasium spaces) as a Cadence env: specs from its
  spaces, so ``ParallelEnv``, transforms, collectors and replay buffers work on it. It is
  a :class:`~cadence.envs.libs.gym.GymWrapper` over a small gymnasium view of the env, so
  it takes the gymnasium fast paths (rollouts, ``ParallelEnv`` workers, collectors).
  Each step checks the contract's data rules (arrays of the space's dtype and shape, a
  one-dimensional reward, a Python bool ``done``, ``info["eval_episode_return"]`` at
  done) and names the rule, the key and the value of a break; ``run_type_checks=True``
  also checks each value against its space's bounds.
* :func:`as_ding_env` runs any (unbatched) Cadence env as a ``BaseEnv``: spaces from its
  specs, the contract's ndarrays out, DI-engine's seeds in.

Examples:
    >>> from cadence.interop.ding import DingEnvAdapter, DingEnvWrapper, as_ding_env, check_all
    >>> env = DingEnvAdapter(DingEnvWrapper(cfg={"env_id": "CartPole-v1"}))
    >>> env.rollout(5)["next", "observation"].shape
    torch.Size([5, 4])
    >>> from cadence.envs.libs.gym import GymEnv
    >>> check_all(as_ding_env(GymEnv("Pendulum-v1")))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDictBase

from cadence.data import MultiOneHot, OneHot
from cadence.envs.common import EnvBase
from cadence.envs.libs.gym import GymWrapper, spec_to_space
from cadence.interop.ding.base_env import SEED_MAX, BaseEnv
from cadence.interop.ding.data import BaseEnvTimestep
from cadence.interop.ding.ding_env_wrapper import DingEnvWrapper
from cadence.interop.ding.rules import (
    CONTRACT_DTYPES,
    DataRuleError,
    SPACE_RULE,
    check_done,
    check_info,
    check_obs,
    check_reward,
)

__all__ = ["CadenceDingEnv", "DingEnvAdapter", "as_ding_env", "as_gymnasium_space", "spec_to_space"]


class DingEnvAdapter(GymWrapper):
    """A DI-engine-style env as a Cadence env.

    Args:
        env: the DI-engine env (any object with ``seed``, ``reset``, ``step``, ``close``
            and the three spaces), or a callable with no arguments that makes it.
        categorical_action_encoding: ``Discrete`` actions as indices (``Categorical``)
            rather than one-hot vectors (``OneHot``, the default, as ``GymEnv``'s).
        run_type_checks: also check every observation against its space's bounds.
        **kwargs: the other ``GymWrapper`` options (``device``, ``auto_reset``, ...).

    Seeds: ``set_seed(s)`` calls the env's ``seed(s mod 2**32, dynamic_seed=True)`` at the
    next reset, so that each later episode gets its own seed, reproducibly. A done step
    whose ``info`` says ``"TimeLimit.truncated"`` is a truncation, any other a termination.

    Raises:
        DataRuleError: at the step (or reset) where the env breaks a data rule.

    Examples:
        >>> from cadence.envs import ParallelEnv
        >>> from cadence.interop.ding import DingEnvAdapter, DingEnvWrapper
        >>> make = lambda: DingEnvAdapter(DingEnvWrapper(cfg={"env_id": "CartPole-v1"}))
        >>> env = ParallelEnv(2, make)
        >>> _ = env.set_seed(0)
        >>> env.rollout(3)["next", "reward"].shape
        torch.Size([2, 3, 1])
        >>> env.close()
    """

    def __init__(
        self,
        env: Any | Callable[[], Any],
        *,
        categorical_action_encoding: bool = False,
        run_type_checks: bool = False,
        **kwargs: Any,
    ) -> None:
        if not hasattr(env, "step") and callable(env):
            env = env()
        self.ding_env = env
        super().__init__(
            _GymnasiumView(env, full_checks=run_type_checks),
            categorical_action_encoding=categorical_action_encoding,
            run_type_checks=run_type_checks,
            **kwargs,
        )

    def __repr__(self) -> str:
        return f"DingEnvAdapter(env={self.ding_env!r}, device={self.device})"


class _GymnasiumView(gym.Env):
    """A DI-engine env seen through gymnasium's calling convention, checking its data.

    ``reset(seed=s)`` seeds it (dynamic seeds) and resets; ``step(a)`` hands it the
    contract's action (an int64 ``(1,)`` array for ``Discrete``) and returns
    ``(obs, reward, terminated, truncated, info)``. Public attributes it lacks are the
    env's (``enable_save_replay``, ...).
    """

    def __init__(self, env: Any, full_checks: bool) -> None:
        self.env = env
        self._full_checks = full_checks
        try:
            spaces = env.observation_space, env.action_space
        except AttributeError:
            spaces = None
        if spaces is None or None in spaces:  # an env that learns its spaces at the first reset
            env.reset()
        # DI-engine's own envs build their spaces with gym 0.25's classes
        self.observation_space = as_gymnasium_space(env.observation_space, f"{type(env).__name__}.observation_space")
        self.action_space = as_gymnasium_space(env.action_space, f"{type(env).__name__}.action_space")
        self._discrete = isinstance(self.action_space, gym.spaces.Discrete)
        # a DingEnvWrapper (not a subclass with its own step) is stepped before its contract
        # conversion: the same episode, without arrays built only to be read back here
        if type(env).step is DingEnvWrapper.step and not full_checks:
            self.step = env._step_gymnasium  # type: ignore[method-assign]
        self._obs_layout = _array_layout(self.observation_space)
        self._steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self.env.seed(int(seed) & SEED_MAX, dynamic_seed=True)
        obs = self.env.reset()
        self._steps = 0
        self._check_obs(obs, "reset")
        return obs, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._discrete:
            action = np.array((action,), dtype=np.int64)  # the contract's (1,) int64 array
        timestep = self.env.step(action)
        self._steps += 1
        try:
            obs, reward, done, info = timestep
        except (TypeError, ValueError):
            obs = reward = done = info = None
        # the cheap checks first, each a type or attribute test; the named checks only on a miss
        if type(done) is not bool or type(reward) is not np.ndarray or reward.shape != (1,) or done or type(info) is not dict:
            self._check_step(timestep)
        layout = self._obs_layout
        if self._full_checks or layout is None or not (
            type(obs) is np.ndarray and obs.dtype is layout[0] and obs.shape == layout[1]
        ):
            self._check_obs(obs, f"step {self._steps}")
        if done and info.get("TimeLimit.truncated", False):
            return obs, float(reward[0]), False, True, info
        return obs, float(reward[0]), done, False, info

    def _check_step(self, timestep: Any) -> None:
        where = f"step {self._steps}"
        if not (isinstance(timestep, tuple) and len(timestep) == 4):
            raise DataRuleError("step returns BaseEnvTimestep(obs, reward, done, info)", "timestep", timestep, where)
        _, reward, done, info = timestep
        check_done(done, where)
        check_reward(reward, where)
        if reward.shape != (1,):
            raise DataRuleError("reward has shape (1,): one agent", "reward", reward, where)
        check_info(info, done, where)

    def _check_obs(self, obs: Any, where: str) -> None:
        layout = self._obs_layout
        check_obs(obs, self.observation_space, where)  # names the rule broken, if any
        if layout is not None and not (type(obs) is np.ndarray and obs.shape == layout[1]):
            raise DataRuleError(SPACE_RULE, "obs", obs, where, f"{self.observation_space} holds shape {layout[1]}")

    def close(self) -> None:
        self.env.close()

    def render(self) -> Any:
        render = getattr(self.env, "render", None)
        return None if render is None else render()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)


def as_gymnasium_space(space: Any, name: str = "space") -> gym.Space:
    """``space`` as a gymnasium space: gymnasium's are returned, old gym's (DI-engine's) rebuilt.

    Args:
        space: a ``gymnasium.spaces`` or ``gym.spaces`` (gym <= 0.26) Box, Discrete,
            MultiDiscrete, MultiBinary, Dict or Tuple.
        name: its name in messages.

    Returns:
        The same space in gymnasium's classes.

    Raises:
        TypeError: for anything else, naming it.

    Examples:
        >>> import gymnasium as gym
        >>> space = gym.spaces.Discrete(3)
        >>> as_gymnasium_space(space) is space
        True
    """
    if isinstance(space, gym.Space):
        return space
    kind = type(space).__name__
    module = type(space).__module__.split(".")[0]
    if module == "gym":
        if kind == "Box":
            return gym.spaces.Box(space.low, space.high, tuple(space.shape), space.dtype)
        if kind == "Discrete":
            return gym.spaces.Discrete(int(space.n), start=int(getattr(space, "start", 0)))
        if kind == "MultiDiscrete":
            return gym.spaces.MultiDiscrete(np.asarray(space.nvec), dtype=space.dtype)
        if kind == "MultiBinary":
            return gym.spaces.MultiBinary(space.n)
        if kind == "Dict":
            return gym.spaces.Dict({k: as_gymnasium_space(v, f"{name}[{k!r}]") for k, v in space.spaces.items()})
        if kind == "Tuple":
            return gym.spaces.Tuple(tuple(as_gymnasium_space(v, f"{name}[{i}]") for i, v in enumerate(space.spaces)))
    raise TypeError(
        f"{name} must be a gymnasium (or gym) Box, Discrete, MultiDiscrete, MultiBinary, Dict or Tuple space, got {space!r}"
    )


def _array_layout(space: gym.Space) -> tuple[np.dtype, tuple[int, ...]] | None:
    """(dtype, shape) of a space whose values are one contract array, else ``None``."""
    if isinstance(space, gym.spaces.Box) and np.dtype(space.dtype) in CONTRACT_DTYPES:
        return np.dtype(space.dtype), space.shape  # numpy's builtin dtypes are singletons: `is` compares them
    return None


# ---------------------------------------------------------------------------------------------
# A Cadence env as a DI-engine env


class CadenceDingEnv(BaseEnv):
    """A Cadence env as a ``BaseEnv``: what :func:`as_ding_env` returns.

    Args:
        env: an unbatched Cadence env, or a callable with no arguments making one (made
            at the first ``reset``: lazy init, as DI-engine's env managers expect).
        cfg: the DI-engine config this env was made with (kept, not read).

    Examples:
        >>> from cadence.envs.libs.gym import GymEnv
        >>> from cadence.interop.ding import as_ding_env
        >>> env = as_ding_env(lambda: GymEnv("CartPole-v1"))
        >>> env.seed(0, dynamic_seed=False)
        >>> obs = env.reset()
        >>> timestep = env.step(env.random_action())
        >>> obs.dtype, timestep.reward.dtype, type(timestep.done)
        (dtype('float32'), dtype('float32'), <class 'bool'>)
        >>> env.close()
    """

    def __init__(self, env: EnvBase | Callable[[], EnvBase], cfg: Mapping[str, Any] | None = None) -> None:
        self._cfg = {} if cfg is None else cfg
        self._make_env = None if isinstance(env, EnvBase) else env
        self._env: EnvBase | None = None
        self._init_flag = False
        self._eval_episode_return = 0.0
        if isinstance(env, EnvBase):
            self._adopt(env)
        elif not callable(env):
            raise TypeError(f"as_ding_env takes a Cadence EnvBase or a callable making one, got {env!r}")

    def _adopt(self, env: EnvBase) -> None:
        if not isinstance(env, EnvBase):
            raise TypeError(f"as_ding_env: the factory must make a Cadence EnvBase, it made {env!r}")
        if env.batch_size:
            raise ValueError(
                f"as_ding_env takes an unbatched env (batch_size []), got batch_size {list(env.batch_size)}: "
                "DI-engine batches envs with its env managers"
            )
        self._env = env
        self._init_flag = True
        self._obs_keys = list(env.observation_spec.keys(True, True))
        self._single_obs = self._obs_keys == ["observation"]
        self._action_key = env.action_key
        self._action_spec = env.action_spec
        self._one_hot = isinstance(self._action_spec, (OneHot, MultiOneHot))
        observation = spec_to_space(env.observation_spec)
        self.observation_space = observation["observation"] if self._single_obs else observation
        self.action_space = spec_to_space(self._action_spec)
        reward_spec = env.reward_spec
        self.reward_space = gym.spaces.Box(-np.inf, np.inf, (max(1, reward_spec.shape.numel()),), np.float32)
        self._next_td: TensorDictBase | None = None

    def _space(self, name: str) -> gym.Space:
        if not self._init_flag and getattr(self, "_" + name, None) is None:
            self._adopt(self._make_env())
        return super()._space(name)

    def reset(self) -> Any:
        """Starts an episode (making the env on the first call) and returns its observation.

        Examples:
            >>> from cadence.envs.libs.gym import GymEnv
            >>> from cadence.interop.ding import as_ding_env
            >>> as_ding_env(GymEnv("Pendulum-v1")).reset().shape
            (3,)
        """
        if not self._init_flag:
            self._adopt(self._make_env())
        seed = self.episode_seed()
        if seed is not None:
            self._env.set_seed(seed)
        td = self._env.reset()
        self._eval_episode_return = 0.0
        return self._observation(td)

    def step(self, action: Any) -> BaseEnvTimestep:
        """Acts once with a contract action (an int64 ``(1,)`` array for ``Discrete``).

        Returns:
            ``BaseEnvTimestep``: float32/int64/uint8 arrays, a reward of shape ``(1,)``,
            a Python bool ``done``; at done ``info["eval_episode_return"]`` and, for a
            truncation, ``info["TimeLimit.truncated"]``.

        Raises:
            RuntimeError: before the first ``reset``.

        Examples:
            >>> import numpy as np
            >>> from cadence.envs.libs.gym import GymEnv
            >>> from cadence.interop.ding import as_ding_env
            >>> env = as_ding_env(GymEnv("CartPole-v1"))
            >>> _ = env.reset()
            >>> env.step(np.array([1])).reward
            array([1.], dtype=float32)
        """
        if not self._init_flag or self._next_td is None:
            raise RuntimeError("as_ding_env: step() before the first reset(): call reset() first")
        td = self._next_td
        td.set(self._action_key, self._action_tensor(action))
        out = self._env.step(td).get("next")
        reward = out.get("reward").detach().cpu().numpy().astype(np.float32).reshape(-1)
        self._eval_episode_return += float(reward.sum())
        done = bool(out.get("done").any())
        info: dict[str, Any] = {}
        if done:
            info["eval_episode_return"] = self._eval_episode_return
            truncated = out.get("truncated", None)
            terminated = out.get("terminated", None)
            if truncated is not None and bool(truncated.any()) and not (terminated is not None and bool(terminated.any())):
                info["TimeLimit.truncated"] = True
        obs = self._observation(out)
        return BaseEnvTimestep(obs, reward, done, info)

    def close(self) -> None:
        """Closes the Cadence env (a factory-made one is made again at the next ``reset``).

        Examples:
            >>> from cadence.envs.libs.gym import GymEnv
            >>> from cadence.interop.ding import as_ding_env
            >>> as_ding_env(lambda: GymEnv("CartPole-v1")).close()  # never made: nothing to close
        """
        if self._env is not None and not self._env.is_closed:
            self._env.close()
        if self._make_env is not None:
            self._env = None
            self._init_flag = False

    def _observation(self, td: TensorDictBase) -> Any:
        self._next_td = td.select(*self._obs_keys, strict=False)  # the next step's input
        if self._single_obs:
            return _contract_array(td.get("observation"))
        obs: dict[str, Any] = {}
        for key in self._obs_keys:  # nested keys give nested dicts, as the Dict space nests
            path = (key,) if isinstance(key, str) else key
            node = obs
            for name in path[:-1]:
                node = node.setdefault(name, {})
            node[path[-1]] = _contract_array(td.get(key))
        return obs

    def _action_tensor(self, action: Any) -> torch.Tensor:
        spec = self._action_spec
        if isinstance(action, Mapping):
            raise TypeError(f"as_ding_env: the env's action is one tensor ({self._action_key!r}), got a dict {action!r}")
        value = torch.as_tensor(np.asarray(action))
        if isinstance(spec, OneHot):
            index = int(value.reshape(()))
            if not 0 <= index < spec.space.n:
                raise DataRuleError(SPACE_RULE, "action", np.asarray(action), "step", f"Discrete({spec.space.n})")
            hot = torch.zeros(spec.shape, dtype=spec.dtype)
            hot[index] = 1
            return hot
        return value.to(spec.dtype).reshape(spec.shape)

    def __repr__(self) -> str:
        return f"as_ding_env({self._env if self._env is not None else self._make_env!r})"


def as_ding_env(env: EnvBase | Callable[[], EnvBase], cfg: Mapping[str, Any] | None = None) -> CadenceDingEnv:
    """Any unbatched Cadence env as a DI-engine ``BaseEnv``.

    Pass a factory (``lambda: GymEnv(...)``) for lazy init: DI-engine's env managers build
    their envs in other processes and only ``reset`` makes the simulator.

    Args:
        env: the env, or a callable with no arguments making it.
        cfg: a DI-engine config to keep with it.

    Returns:
        A :class:`CadenceDingEnv`.

    Examples:
        >>> from cadence.envs.libs.gym import GymEnv
        >>> from cadence.interop.ding import as_ding_env
        >>> env = as_ding_env(GymEnv("CartPole-v1"))
        >>> env.observation_space.shape, env.action_space
        ((4,), Discrete(2))
    """
    return CadenceDingEnv(env, cfg)


def _contract_array(value: torch.Tensor) -> np.ndarray:
    array = value.detach().cpu().numpy()
    if array.dtype == np.uint8:
        return array.copy()
    if np.issubdtype(array.dtype, np.floating):
        return array.astype(np.float32)  # astype copies: no memory shared with the env
    return array.astype(np.int64)
