"""A thin gymnasium face on an unbatched Cadence ``EnvBase``, for RLlib's samplers.

:func:`as_gymnasium_env` wraps a Cadence env so that :class:`SyncSampler` can call
``reset(seed=...) -> (obs, info)`` and ``step(action) -> (obs, reward, terminated,
truncated, info)`` on it. An env whose only observation entry is ``"observation"`` gives that
array; any other observation spec gives a (nested) dict of arrays, its space the matching
``Dict``. ``OneHot`` actions are taken as indices (a ``Discrete`` space), as RLlib's policies
emit them. The env's own time
limits are not visible here, so a ``horizon`` cannot raise them (it still cuts episodes).

Examples:
    >>> from cadence.envs.libs.gym import GymEnv
    >>> env = as_gymnasium_env(GymEnv("CartPole-v1"))
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, env.action_space
    ((4,), Discrete(2))
    >>> obs, reward, terminated, truncated, info = env.step(1)
    >>> type(reward), terminated, truncated
    (<class 'float'>, False, False)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from cadence.data import MultiOneHot, OneHot
from cadence.envs.common import EnvBase
from cadence.envs.libs.gym import spec_to_space

__all__ = ["CadenceGymnasiumEnv", "as_gymnasium_env"]


class CadenceGymnasiumEnv(gym.Env):
    """An unbatched Cadence env behind gymnasium's ``reset``/``step`` (see the module).

    Args:
        env: The Cadence env (``batch_size`` ``[]``).

    Attributes:
        env: The wrapped Cadence env.

    Raises:
        ValueError: A batched env.
        TypeError: ``env`` is not a Cadence ``EnvBase``.

    Examples:
        >>> from cadence.envs.libs.gym import GymEnv
        >>> CadenceGymnasiumEnv(GymEnv("Pendulum-v1")).action_space
        Box(-2.0, 2.0, (1,), float32)
    """

    def __init__(self, env: EnvBase) -> None:
        if not isinstance(env, EnvBase):
            raise TypeError(f"as_gymnasium_env: expected a Cadence EnvBase, got {type(env).__name__}")
        if env.batch_size:
            raise ValueError(
                f"as_gymnasium_env: expected an unbatched env (batch_size []), got batch_size {list(env.batch_size)}; "
                "use num_envs_per_worker for several envs"
            )
        # One "observation" entry: that array (RLlib's usual obs); anything else: a Dict obs.
        self._obs_keys = list(env.observation_spec.keys())
        self._single = list(env.observation_spec.keys(True, True)) == ["observation"]
        self.env = env
        self._action_spec = env.action_spec
        space = spec_to_space(env.observation_spec)
        self.observation_space = space["observation"] if self._single else space
        self.action_space = spec_to_space(self._action_spec)
        self._td: Any = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Starts an episode (seeding the env first if ``seed`` is given).

        Examples:
            >>> from cadence.envs.libs.gym import GymEnv
            >>> as_gymnasium_env(GymEnv("CartPole-v1")).reset(seed=1)[0].dtype
            dtype('float32')
        """
        if seed is not None:
            self.env.set_seed(int(seed))
        td = self.env.reset()
        self._td = td.select(*self._obs_keys)
        return self._obs(td), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Acts once; ``terminated``/``truncated`` from the env's flags (``done`` if it has no others).

        Raises:
            RuntimeError: Before the first ``reset()``.

        Examples:
            >>> from cadence.envs.libs.gym import GymEnv
            >>> env = as_gymnasium_env(GymEnv("CartPole-v1"))
            >>> _ = env.reset(seed=0)
            >>> env.step(0)[1]
            1.0
        """
        if self._td is None:
            raise RuntimeError("as_gymnasium_env: step() before the first reset(): call reset() first")
        td = self._td
        td.set(self.env.action_key, self._action_tensor(action))
        out = self.env.step(td).get("next")
        self._td = out.select(*self._obs_keys)
        done = bool(out.get("done").any())
        terminated = out.get("terminated", None)
        truncated = out.get("truncated", None)
        is_terminated = bool(terminated.any()) if terminated is not None else done
        is_truncated = bool(truncated.any()) if truncated is not None else False
        reward = float(out.get("reward").sum())
        return self._obs(out), reward, is_terminated, is_truncated, {}

    def _obs(self, td: Any) -> Any:
        if self._single:
            return td.get("observation").detach().cpu().numpy()
        return td.select(*self._obs_keys).detach().cpu().numpy()  # a nested dict of arrays

    def _action_tensor(self, action: Any) -> torch.Tensor:
        spec = self._action_spec
        value = torch.as_tensor(np.asarray(action))
        if isinstance(spec, OneHot):  # RLlib's policies emit the index of a Discrete action
            hot = torch.zeros(spec.shape, dtype=spec.dtype)
            hot[int(value.reshape(()))] = 1
            return hot
        if isinstance(spec, MultiOneHot):
            raise TypeError("as_gymnasium_env: MultiOneHot actions are not supported yet")
        return value.to(spec.dtype).reshape(spec.shape)

    def close(self) -> None:
        """Closes the Cadence env.

        Examples:
            >>> from cadence.envs.libs.gym import GymEnv
            >>> as_gymnasium_env(GymEnv("CartPole-v1")).close()
        """
        if not self.env.is_closed:
            self.env.close()


def as_gymnasium_env(env: Any) -> gym.Env:
    """``env`` if it is a gymnasium env, else a Cadence ``EnvBase`` wrapped (see the module).

    Args:
        env: A gymnasium env or an unbatched Cadence env.

    Returns:
        A gymnasium env.

    Raises:
        TypeError: Neither a gymnasium env nor a Cadence ``EnvBase`` (names the type).

    Examples:
        >>> import gymnasium as gym
        >>> env = gym.make("CartPole-v1")
        >>> as_gymnasium_env(env) is env
        True
        >>> as_gymnasium_env(object())
        Traceback (most recent call last):
        ...
        TypeError: expected a gymnasium.Env or a Cadence EnvBase, got object
    """
    if isinstance(env, gym.Env):
        return env
    if isinstance(env, EnvBase):
        return CadenceGymnasiumEnv(env)
    raise TypeError(f"expected a gymnasium.Env or a Cadence EnvBase, got {type(env).__name__}")
