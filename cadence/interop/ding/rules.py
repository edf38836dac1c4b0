"""The data rules of DI-engine's env contract, as checks that name what broke them.

The seed's rules: every observation, action and reward is a numpy array of dtype
float32 (floats), int64 (integers) or uint8 (images), or a dict/tuple of such arrays; the
reward is one-dimensional (``to_ndarray([reward])``: shape ``(1,)``); ``done`` is a Python
``bool``; ``info`` is a dict that holds ``"eval_episode_return"`` (a Python number) when
the episode ends. Values also belong to their space: right shape and dtype, inside a
``Box``'s bounds, ``0 <= a < n`` for ``Discrete(n)``.

Each check raises :class:`DataRuleError`, whose message says the rule, the key (``obs``,
``obs['pixels']``, ``reward``, ...), the value that came and where (``reset``, ``step 12``).

Examples:
    >>> import numpy as np, gymnasium as gym
    >>> from cadence.interop.ding import BaseEnvTimestep
    >>> space = gym.spaces.Box(-1, 1, (2,), np.float32)
    >>> check_timestep(BaseEnvTimestep(np.zeros(2, np.float32), np.zeros(1, np.float32), False, {}), space, "step 1")
    >>> check_timestep(BaseEnvTimestep(np.zeros(2, np.float32), np.zeros(1, np.float32), np.bool_(True), {}), space, "step 2")
    Traceback (most recent call last):
    ...
    cadence.interop.ding.rules.DataRuleError: step 2: done breaks the rule "done is a Python bool, not numpy.bool_": got numpy.bool True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = [
    "DataRuleError",
    "check_done",
    "check_in_space",
    "check_info",
    "check_reward",
    "check_space_dtype",
    "check_timestep",
    "describe",
]

ARRAY_RULE = "data are numpy arrays of dtype float32, int64 or uint8 (or dicts/tuples of them)"
REWARD_RULE = "reward is a one-dimensional numpy array (to_ndarray([reward]): shape (1,))"
DONE_RULE = "done is a Python bool, not numpy.bool_"
INFO_RULE = "info is a dict"
RETURN_RULE = "when done, info['eval_episode_return'] is a Python number"
SPACE_RULE = "values belong to their space"
SPACE_DTYPE_RULE = "float spaces are float32, integer spaces int64 (uint8 for images)"

CONTRACT_DTYPES = (np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.uint8))


class DataRuleError(ValueError):
    """An env broke one of the contract's data rules.

    Attributes:
        rule: the rule, in words.
        key: what broke it (``"obs"``, ``"obs['pixels']"``, ``"reward"``, ...).
        value: what came.
        where: when (``"reset"``, ``"step 12"``, ``"observation_space"``).

    Examples:
        >>> error = DataRuleError("done is a Python bool", "done", 1, "step 3")
        >>> print(error)
        step 3: done breaks the rule "done is a Python bool": got int 1
        >>> error.key
        'done'
    """

    def __init__(self, rule: str, key: str, value: Any, where: str, detail: str = "") -> None:
        self.rule, self.key, self.value, self.where = rule, key, value, where
        message = f'{where}: {key} breaks the rule "{rule}": got {describe(value)}'
        super().__init__(message + (f" ({detail})" if detail else ""))


def describe(value: Any) -> str:
    """A short description of a value for error messages: type, dtype, shape, a few numbers.

    Args:
        value: anything.

    Returns:
        e.g. ``"ndarray float64 shape (2,) [0. 1.]"`` or ``"numpy.bool True"``.

    Examples:
        >>> describe(np.zeros(2))
        'ndarray float64 shape (2,) [0. 0.]'
        >>> describe(3)
        'int 3'
    """
    if isinstance(value, np.ndarray):
        text = np.array2string(value, threshold=6, edgeitems=2, max_line_width=60)
        return f"ndarray {value.dtype} shape {value.shape} {text}"
    if isinstance(value, np.generic):
        return f"numpy.{type(value).__name__} {value.item()!r}"
    if isinstance(value, gym.Space):
        return repr(value)
    if value is MISSING:
        return "nothing (no such key)"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 80 else text[:77] + '...'}"


def check_in_space(value: Any, space: gym.Space, key: str, where: str) -> None:
    """Checks that ``value`` is a contract array (or dict/tuple of them) inside ``space``.

    ``Discrete`` values may be of shape ``()`` or ``(1,)`` (the contract's actions are
    ``(1,)``); ``MultiBinary`` values may keep the space's own int8 dtype. Spaces of other
    kinds (``Text``, ``Graph``, ...) are not checked.

    Args:
        value: the value.
        space: its space.
        key: its name in messages.
        where: when it came.

    Raises:
        DataRuleError: naming the rule, the key and the value.

    Examples:
        >>> import gymnasium as gym
        >>> check_in_space(np.array([1]), gym.spaces.Discrete(2), "action", "step 1")
        >>> check_in_space(np.array([2]), gym.spaces.Discrete(2), "action", "step 1")
        Traceback (most recent call last):
        ...
        cadence.interop.ding.rules.DataRuleError: step 1: action breaks the rule "values belong to their space": got ndarray int64 shape (1,) [2] (Discrete(2) holds 0 <= a < 2)
    """
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(value, Mapping):
            raise DataRuleError(SPACE_RULE, key, value, where, f"{space} needs a dict")
        if set(value) != set(space.spaces):
            raise DataRuleError(
                SPACE_RULE, key, value, where, f"keys {sorted(value)} but the space has {sorted(space.spaces)}"
            )
        for name, sub in space.spaces.items():
            check_in_space(value[name], sub, f"{key}[{name!r}]", where)
        return
    if isinstance(space, gym.spaces.Tuple):
        if not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or len(value) != len(space.spaces):
            raise DataRuleError(SPACE_RULE, key, value, where, f"{space} needs a tuple of {len(space.spaces)}")
        for i, (part, sub) in enumerate(zip(value, space.spaces)):
            check_in_space(part, sub, f"{key}[{i}]", where)
        return
    if not isinstance(space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return
    _check_array(value, key, where, allowed=(space.dtype,) if isinstance(space, gym.spaces.MultiBinary) else ())
    if isinstance(space, gym.spaces.Discrete):
        if value.shape not in ((), (1,)):
            raise DataRuleError(SPACE_RULE, key, value, where, f"{space} holds shape () or (1,)")
        if not np.issubdtype(value.dtype, np.integer):
            raise DataRuleError(SPACE_RULE, key, value, where, f"{space} holds int64")
        low, high = int(space.start), int(space.start + space.n)
        if not low <= int(value.reshape(())) < high:
            raise DataRuleError(SPACE_RULE, key, value, where, f"{space} holds {low} <= a < {high}")
        return
    if value.shape != space.shape:
        raise DataRuleError(SPACE_RULE, key, value, where, f"{space} holds shape {space.shape}")
    if value.dtype != space.dtype and not (isinstance(space, gym.spaces.MultiBinary) and value.dtype == np.int64):
        raise DataRuleError(SPACE_RULE, key, value, where, f"{space} holds dtype {space.dtype}")
    if isinstance(space, gym.spaces.Box):
        inside = (value >= space.low) & (value <= space.high)  # NaN is outside
        if not inside.all():
            raise DataRuleError(SPACE_RULE, key, value, where, f"outside the bounds of {space}")
    elif isinstance(space, gym.spaces.MultiDiscrete):
        if not ((value >= space.start) & (value < space.start + space.nvec)).all():
            raise DataRuleError(SPACE_RULE, key, value, where, f"{space} holds start <= a < start + nvec")
    elif not np.isin(value, (0, 1)).all():
        raise DataRuleError(SPACE_RULE, key, value, where, f"{space} holds 0 or 1")


def check_space_dtype(space: gym.Space, name: str) -> None:
    """Checks a space's dtype against the contract: float32 floats, int64 integers, uint8 images.

    ``MultiBinary`` (gymnasium fixes it to int8) and ``Dict``/``Tuple`` (checked part by
    part) pass on their own terms.

    Args:
        space: the space.
        name: its name (``"observation_space"``, ...).

    Raises:
        DataRuleError: naming the space and its dtype.

    Examples:
        >>> import gymnasium as gym
        >>> check_space_dtype(gym.spaces.Box(0, 255, (84, 84), np.uint8), "observation_space")
        >>> check_space_dtype(gym.spaces.Box(0, 1, (2,), np.float64), "observation_space")
        Traceback (most recent call last):
        ...
        cadence.interop.ding.rules.DataRuleError: observation_space: observation_space breaks the rule "float spaces are float32, integer spaces int64 (uint8 for images)": got Box(0.0, 1.0, (2,), float64) (dtype float64)
    """
    if isinstance(space, gym.spaces.Dict):
        for key, sub in space.spaces.items():
            check_space_dtype(sub, f"{name}[{key!r}]")
        return
    if isinstance(space, gym.spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            check_space_dtype(sub, f"{name}[{i}]")
        return
    if isinstance(space, gym.spaces.MultiBinary) or space.dtype is None:
        return
    dtype = np.dtype(space.dtype)
    if dtype not in CONTRACT_DTYPES:
        raise DataRuleError(SPACE_DTYPE_RULE, name, space, name, f"dtype {dtype}")


def check_reward(reward: Any, where: str) -> None:
    """Checks the reward: a one-dimensional numeric numpy array.

    Args:
        reward: the reward.
        where: when it came.

    Raises:
        DataRuleError: if it is not.

    Examples:
        >>> check_reward(np.array([1.0], np.float32), "step 1")
        >>> check_reward(np.float32(1.0), "step 2")
        Traceback (most recent call last):
        ...
        cadence.interop.ding.rules.DataRuleError: step 2: reward breaks the rule "reward is a one-dimensional numpy array (to_ndarray([reward]): shape (1,))": got numpy.float32 1.0
    """
    if not isinstance(reward, np.ndarray) or reward.ndim != 1 or not np.issubdtype(reward.dtype, np.number):
        raise DataRuleError(REWARD_RULE, "reward", reward, where)


def check_done(done: Any, where: str) -> None:
    """Checks that ``done`` is a Python bool.

    Args:
        done: the flag.
        where: when it came.

    Raises:
        DataRuleError: if it is not.

    Examples:
        >>> check_done(False, "step 1")
        >>> check_done(np.array(True), "step 2")
        Traceback (most recent call last):
        ...
        cadence.interop.ding.rules.DataRuleError: step 2: done breaks the rule "done is a Python bool, not numpy.bool_": got ndarray bool shape () True
    """
    if type(done) is not bool:
        raise DataRuleError(DONE_RULE, "done", done, where)


def check_info(info: Any, done: bool, where: str) -> None:
    """Checks that ``info`` is a dict, with ``eval_episode_return`` (a Python number) at done.

    Args:
        info: the info.
        done: whether the episode ended at this step.
        where: when it came.

    Raises:
        DataRuleError: if not.

    Examples:
        >>> check_info({"eval_episode_return": 3.0}, True, "step 9")
        >>> check_info({}, True, "step 9")
        Traceback (most recent call last):
        ...
        cadence.interop.ding.rules.DataRuleError: step 9: info['eval_episode_return'] breaks the rule "when done, info['eval_episode_return'] is a Python number": got nothing (no such key)
    """
    if not isinstance(info, Mapping):
        raise DataRuleError(INFO_RULE, "info", info, where)
    if done:
        value = info.get("eval_episode_return", MISSING)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DataRuleError(RETURN_RULE, "info['eval_episode_return']", value, where)


def check_timestep(timestep: Any, observation_space: gym.Space | None, where: str) -> None:
    """Checks a whole ``BaseEnvTimestep``: obs (in its space), reward, done and info.

    Args:
        timestep: what ``step`` returned.
        observation_space: the observations' space; ``None`` checks only the dtypes.
        where: when it came (``"step 12"``).

    Raises:
        DataRuleError: naming the first rule broken.

    Examples:
        >>> from cadence.interop.ding import BaseEnvTimestep
        >>> check_timestep(BaseEnvTimestep(np.zeros(2), np.zeros(1, np.float32), False, {}), None, "step 4")
        Traceback (most recent call last):
        ...
        cadence.interop.ding.rules.DataRuleError: step 4: obs breaks the rule "data are numpy arrays of dtype float32, int64 or uint8 (or dicts/tuples of them)": got ndarray float64 shape (2,) [0. 0.]
    """
    if not (isinstance(timestep, tuple) and len(timestep) == 4):
        raise DataRuleError(
            "step returns BaseEnvTimestep(obs, reward, done, info)", "timestep", timestep, where
        )
    obs, reward, done, info = timestep
    check_obs(obs, observation_space, where)
    check_reward(reward, where)
    check_done(done, where)
    check_info(info, done, where)


def check_obs(obs: Any, observation_space: gym.Space | None, where: str) -> None:
    """Checks an observation: contract arrays, inside ``observation_space`` when given.

    Args:
        obs: the observation.
        observation_space: its space, or ``None``.
        where: when it came (``"reset"``, ``"step 3"``).

    Raises:
        DataRuleError: naming the rule, the key and the value.

    Examples:
        >>> check_obs({"a": np.zeros(1, np.int64)}, None, "reset")
        >>> check_obs([1.0], None, "reset")
        Traceback (most recent call last):
        ...
        cadence.interop.ding.rules.DataRuleError: reset: obs breaks the rule "data are numpy arrays of dtype float32, int64 or uint8 (or dicts/tuples of them)": got list [1.0]
    """
    if observation_space is None:
        _check_nested(obs, "obs", where)
    else:
        check_in_space(obs, observation_space, "obs", where)


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


def _check_array(value: Any, key: str, where: str, allowed: tuple[Any, ...] = ()) -> None:
    if not isinstance(value, np.ndarray):
        raise DataRuleError(ARRAY_RULE, key, value, where)
    if value.dtype not in CONTRACT_DTYPES and value.dtype not in allowed:
        raise DataRuleError(ARRAY_RULE, key, value, where)


def _check_nested(value: Any, key: str, where: str) -> None:
    if isinstance(value, Mapping):
        for name, item in value.items():
            _check_nested(item, f"{key}[{name!r}]", where)
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            _check_nested(item, f"{key}[{i}]", where)
    else:
        _check_array(value, key, where)
