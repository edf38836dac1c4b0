"""The env implementation check: does an env keep DI-engine's contract?

:func:`check_all` runs every check of DI-engine's ``env_implementation_check`` on an env:

0. the three spaces' dtypes (float32 floats, int64 integers, uint8 images);
1. ``reset()``: the observation belongs to the observation space;
2. ``step()``: for three episodes, each action from ``random_action()`` belongs to the
   action space, each observation and reward to its space, ``done`` is a Python bool,
   ``info`` a dict with ``eval_episode_return`` at done;
3. consecutive observations share no memory (an env that hands out the same array twice
   makes every stored transition change under the learner).

:func:`demonstrate_correct_procedure` plays the order of calls a DI-engine user makes
(build, lazy init, ``seed``, ``reset``, steps, ``reset`` keeping the seed).

Each failure raises :class:`~cadence.interop.ding.rules.DataRuleError` naming the rule, the
key, the value and the step. DI-engine's false alarms are not kept: a uint8 image space
passes (its check reads "int" in "uint8" and asks for int64), ``Discrete(n)`` refuses ``n``
(its check lets ``n`` through), ``MultiBinary`` spaces are checked (its check reads a
``nvec`` they lack) and ``Dict``/``Tuple`` spaces are checked part by part; and each step
draws a new random action (its check repeats the first one for every step).

Examples:
    >>> from cadence.interop.ding import DingEnvWrapper, check_all
    >>> check_all(DingEnvWrapper(cfg={"env_id": "CartPole-v1"}))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from cadence.interop.ding.base_env import contract_action
from cadence.interop.ding.rules import (
    DataRuleError,
    check_done,
    check_in_space,
    check_info,
    check_space_dtype,
)

__all__ = ["check_all", "check_obs_deepcopy", "check_reset", "check_space_dtype_of", "check_step", "demonstrate_correct_procedure"]

SHARED_RULE = "consecutive observations share no memory (return a copy)"
REWARD_SPACE_RULE = "reward_space is a one-dimensional Box (shape (1,))"
END_RULE = "episodes end (done=True) within max_episode_steps"


def check_space_dtype_of(env: Any) -> None:
    """Check 0: the observation, action and reward spaces' dtypes (after a ``reset``).

    Args:
        env: a ``BaseEnv``.

    Raises:
        DataRuleError: naming the space.

    Examples:
        >>> from cadence.interop.ding import DingEnvWrapper
        >>> check_space_dtype_of(DingEnvWrapper(cfg={"env_id": "Pendulum-v1"}))
    """
    env.reset()
    for name in ("observation_space", "action_space", "reward_space"):
        check_space_dtype(getattr(env, name), name)
    reward_space = env.reward_space
    if not isinstance(reward_space, gym.spaces.Box) or len(reward_space.shape) != 1:
        raise DataRuleError(REWARD_SPACE_RULE, "reward_space", reward_space, "reward_space")


def check_reset(env: Any) -> None:
    """Check 1: ``reset()`` returns an observation of the observation space.

    Args:
        env: a ``BaseEnv``.

    Raises:
        DataRuleError: naming the key and the value.

    Examples:
        >>> from cadence.interop.ding import DingEnvWrapper
        >>> check_reset(DingEnvWrapper(cfg={"env_id": "CartPole-v1"}))
    """
    check_in_space(env.reset(), env.observation_space, "obs", "reset")


def check_step(env: Any, episodes: int = 3, max_episode_steps: int = 100_000) -> None:
    """Check 2: ``episodes`` episodes of random actions keep every step's data rules.

    Args:
        env: a ``BaseEnv``.
        episodes: how many episodes to play.
        max_episode_steps: an episode still running after this many steps fails the check.

    Raises:
        DataRuleError: naming the rule, the key, the value and the step.

    Examples:
        >>> from cadence.interop.ding import DingEnvWrapper
        >>> check_step(DingEnvWrapper(cfg={"env_id": "CartPole-v1"}), episodes=1)
    """
    for episode in range(episodes):
        env.reset()
        for step in range(1, max_episode_steps + 1):
            where = f"episode {episode}, step {step}"
            action = _random_action(env, where)
            obs, reward, done, info = _step(env, action, where)
            check_in_space(obs, env.observation_space, "obs", where)
            check_in_space(reward, env.reward_space, "reward", where)
            check_done(done, where)
            check_info(info, done, where)
            if done:
                break
        else:
            raise DataRuleError(END_RULE, "done", False, f"episode {episode}", f"{max_episode_steps} steps")


def check_obs_deepcopy(env: Any, max_episode_steps: int = 100_000) -> None:
    """Check 3: over one episode, no observation shares memory with the one before it.

    Args:
        env: a ``BaseEnv``.
        max_episode_steps: the episode's longest length.

    Raises:
        DataRuleError: naming the key (``obs``, ``obs['pixels']``, ...) and the step.

    Examples:
        >>> from cadence.interop.ding import DingEnvWrapper
        >>> check_obs_deepcopy(DingEnvWrapper(cfg={"env_id": "CartPole-v1"}))
    """
    previous = env.reset()
    for step in range(1, max_episode_steps + 1):
        where = f"step {step}"
        obs, _, done, _ = _step(env, _random_action(env, where), where)
        _check_no_shared_memory(previous, obs, "obs", where)
        previous = obs
        if done:
            return
    raise DataRuleError(END_RULE, "done", False, "check_obs_deepcopy", f"{max_episode_steps} steps")


def check_all(env: Any, episodes: int = 3, max_episode_steps: int = 100_000) -> None:
    """Runs checks 0 to 3 on ``env``; returns ``None`` when all pass.

    Args:
        env: a ``BaseEnv`` (a DI-engine env, a ``DingEnvWrapper``, ``as_ding_env(...)``).
        episodes: the episodes of check 2.
        max_episode_steps: an episode longer than this fails (so that the check ends).

    Raises:
        DataRuleError: the first rule broken, with the rule, the key, the value and where.

    Examples:
        >>> import numpy as np, gymnasium as gym
        >>> from cadence.interop.ding import BaseEnv, BaseEnvTimestep, check_all
        >>> class Shared(BaseEnv):  # hands out the same array every step
        ...     def __init__(self, cfg: dict) -> None:
        ...         self.observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        ...         self.action_space = gym.spaces.Discrete(2)
        ...         self.reward_space = gym.spaces.Box(0, 1, (1,), np.float32)
        ...         self._obs = np.zeros(2, np.float32)
        ...     def reset(self) -> np.ndarray:
        ...         self._t = 0
        ...         return self._obs
        ...     def step(self, action: np.ndarray) -> BaseEnvTimestep:
        ...         self._t += 1
        ...         done = self._t == 5
        ...         info = {"eval_episode_return": 0.0} if done else {}
        ...         return BaseEnvTimestep(self._obs, np.zeros(1, np.float32), done, info)
        ...     def close(self) -> None:
        ...         pass
        >>> check_all(Shared({}))
        Traceback (most recent call last):
        ...
        cadence.interop.ding.rules.DataRuleError: step 1: obs breaks the rule "consecutive observations share no memory (return a copy)": got ndarray float32 shape (2,) [0. 0.] (the same memory as the observation before it)
    """
    check_space_dtype_of(env)
    check_reset(env)
    check_step(env, episodes, max_episode_steps)
    check_obs_deepcopy(env, max_episode_steps)


def demonstrate_correct_procedure(
    env_fn: Callable[[Mapping[str, Any]], Any],
    cfg: Mapping[str, Any] | None = None,
    episodes: int = 3,
    max_episode_steps: int = 100_000,
) -> None:
    """Plays the calls a DI-engine user makes, checking each promise of the contract.

    Builds ``env_fn(cfg)`` (no simulator yet: lazy init), ``seed(4)``, ``reset()``,
    random actions until ``episodes`` episodes ended (each with ``eval_episode_return``),
    resetting after each, and checks that ``reset`` kept the seed.

    Args:
        env_fn: the env class (or any callable ``cfg -> env``).
        cfg: its config; ``None`` passes ``{}`` as DI-engine does.
        episodes: how many episodes to play.
        max_episode_steps: an episode longer than this fails.

    Raises:
        DataRuleError: naming the promise broken.

    Examples:
        >>> from cadence.interop.ding import DingEnvWrapper, demonstrate_correct_procedure
        >>> demonstrate_correct_procedure(lambda cfg: DingEnvWrapper(cfg={"env_id": "CartPole-v1", **cfg}))
    """
    env = env_fn({} if cfg is None else cfg)
    if getattr(env, "_init_flag", False) or getattr(env, "_env", None) is not None:
        raise DataRuleError(
            "lazy init: no simulator before the first reset()", "_init_flag", getattr(env, "_init_flag", None), "__init__"
        )
    env.seed(4)
    _check_seed_kept(env, "seed(4)")
    env.reset()
    if not getattr(env, "_init_flag", True):
        raise DataRuleError("reset() makes the simulator and sets _init_flag", "_init_flag", False, "reset")
    ended = 0
    for step in range(1, episodes * max_episode_steps + 1):
        where = f"step {step}"
        _, _, done, info = _step(env, _random_action(env, where), where)
        check_done(done, where)
        check_info(info, done, where)
        if done:
            ended += 1
            if ended == episodes:
                return
            env.reset()
            _check_seed_kept(env, f"reset after episode {ended}")
    raise DataRuleError(END_RULE, "done", False, "demonstrate_correct_procedure", f"{max_episode_steps} steps")


def _check_seed_kept(env: Any, where: str) -> None:
    if getattr(env, "_seed", None) != 4:
        raise DataRuleError("seed(seed) keeps the seed in self._seed", "_seed", getattr(env, "_seed", None), where)


def _random_action(env: Any, where: str) -> Any:
    if callable(getattr(env, "random_action", None)):
        action = env.random_action()
    else:
        action = contract_action(env.action_space.sample(), env.action_space)
    check_in_space(action, env.action_space, "random_action()", where)
    return action


def _step(env: Any, action: Any, where: str) -> tuple[Any, Any, Any, Any]:
    timestep = env.step(action)
    if not (isinstance(timestep, tuple) and len(timestep) == 4):
        raise DataRuleError("step returns BaseEnvTimestep(obs, reward, done, info)", "timestep", timestep, where)
    return timestep


def _check_no_shared_memory(before: Any, after: Any, key: str, where: str) -> None:
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for name in set(before) & set(after):
            _check_no_shared_memory(before[name], after[name], f"{key}[{name!r}]", where)
    elif isinstance(before, (tuple, list)) and isinstance(after, (tuple, list)):
        for i, (one, two) in enumerate(zip(before, after)):
            _check_no_shared_memory(one, two, f"{key}[{i}]", where)
    elif isinstance(before, np.ndarray) and isinstance(after, np.ndarray):
        if before is after or np.shares_memory(before, after):
            raise DataRuleError(SHARED_RULE, key, after, where, "the same memory as the observation before it")
