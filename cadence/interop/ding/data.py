"""The data pieces of DI-engine's env contract: the timestep tuple, ``to_ndarray`` and
``deep_merge_dicts``, with DI-engine's meaning.

A DI-engine env returns ``BaseEnvTimestep(obs, reward, done, info)`` from ``step``, turns
what its simulator gives into numpy arrays with ``to_ndarray`` (``to_ndarray([reward])``: a
reward of shape ``(1,)``) and merges a user's config into its defaults with
``deep_merge_dicts(default, user)``.

Examples:
    >>> import numpy as np
    >>> to_ndarray({"position": [0.5, 1.0], "lives": 3}, dtype=np.float32)
    {'position': array([0.5, 1. ], dtype=float32), 'lives': array(3., dtype=float32)}
    >>> deep_merge_dicts({"env": {"frame_skip": 4, "seed": 0}}, {"env": {"seed": 7}})
    {'env': {'frame_skip': 4, 'seed': 7}}
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import torch

__all__ = ["BaseEnvTimestep", "deep_merge_dicts", "to_ndarray"]


class BaseEnvTimestep(NamedTuple):
    """What a DI-engine env's ``step`` returns.

    Attributes:
        obs: the next observation (an ndarray, or a dict of them).
        reward: the reward, an ndarray of shape ``(1,)`` (or one per agent).
        done: whether the episode ended, a Python ``bool``.
        info: extra information; at ``done``, ``info["eval_episode_return"]`` (a Python float).

    Examples:
        >>> import numpy as np
        >>> obs, reward, done, info = BaseEnvTimestep(np.zeros(2), np.ones(1), True, {"eval_episode_return": 1.0})
        >>> done, info["eval_episode_return"]
        (True, 1.0)
    """

    obs: Any
    reward: Any
    done: bool
    info: dict[str, Any]


def to_ndarray(item: Any, dtype: np.dtype | type | None = None) -> Any:
    """``item`` with its numbers turned into numpy arrays, as DI-engine's helper does.

    - a tensor becomes its array (moved to the CPU, detached), an array stays (both cast to
      ``dtype`` if given);
    - a list or tuple of numbers becomes one array; a namedtuple keeps its type with each
      field converted; another list or tuple becomes a list of converted items;
    - a dict becomes a dict of converted values;
    - a number (Python or numpy) becomes a 0-d array; ``bool``, ``str`` and ``None`` stay
      as they are (``done`` must stay a Python ``bool``).

    Unlike DI-engine's, an empty list or tuple gives an empty array (not ``None``).

    Args:
        item: what to convert.
        dtype: the dtype of every array made or cast (``None``: numpy's own choice).

    Returns:
        The converted item.

    Raises:
        TypeError: an item of another type, named with its path inside ``item``.

    Examples:
        >>> import numpy as np, torch
        >>> to_ndarray([1.5])
        array([1.5])
        >>> to_ndarray(torch.tensor([1, 2]), dtype=np.int64)
        array([1, 2])
        >>> to_ndarray({"done": True, "obs": (0, 1)})
        {'done': True, 'obs': array([0, 1])}
        >>> to_ndarray({"obs": object()})
        Traceback (most recent call last):
        ...
        TypeError: to_ndarray: item['obs'] is an object, which has no array form (expected arrays, tensors, numbers, lists, tuples or dicts of them)
    """
    return _to_ndarray(item, dtype, "item")


def _to_ndarray(item: Any, dtype: Any, where: str) -> Any:
    if isinstance(item, torch.Tensor):
        array = item.detach().cpu().numpy()
        return array if dtype is None else array.astype(dtype)
    if isinstance(item, np.ndarray):
        return item if dtype is None else item.astype(dtype)
    if item is None or isinstance(item, (bool, str)):
        return item
    if isinstance(item, Mapping):
        return {key: _to_ndarray(value, dtype, f"{where}[{key!r}]") for key, value in item.items()}
    if isinstance(item, (list, tuple)):
        if hasattr(item, "_fields"):  # a namedtuple keeps its type
            return type(item)(*(_to_ndarray(value, dtype, f"{where}.{name}") for name, value in zip(item._fields, item)))
        if all(isinstance(value, (numbers.Number, np.generic)) for value in item):
            return np.asarray(item, dtype=dtype)
        return [_to_ndarray(value, dtype, f"{where}[{index}]") for index, value in enumerate(item)]
    if isinstance(item, (numbers.Number, np.generic)):
        return np.asarray(item, dtype=dtype)
    raise TypeError(
        f"to_ndarray: {where} is {_a(type(item).__name__)}, which has no array form (expected arrays, tensors, "
        f"numbers, lists, tuples or dicts of them)"
    )


def _a(name: str) -> str:
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"


def deep_merge_dicts(original: Mapping[str, Any] | None, new_dict: Mapping[str, Any] | None) -> Any:
    """A new config: ``original`` (the defaults) with ``new_dict`` (the user's) merged in,
    recursively; the user's values win, and keys the defaults lack are added.

    Neither argument is changed, and the result shares nothing with them (DI-engine's
    shares the user's values). The result has ``original``'s mapping type (a plain dict, or
    an ``EasyDict`` when the defaults are one); ``None`` counts as empty.

    Args:
        original: the default config.
        new_dict: the config that overrides it.

    Returns:
        The merged config.

    Examples:
        >>> defaults = {"use_act_scale": False, "model": {"hidden": 64, "layers": 2}}
        >>> user = {"model": {"hidden": 256}, "seed": 3}
        >>> deep_merge_dicts(defaults, user)
        {'use_act_scale': False, 'model': {'hidden': 256, 'layers': 2}, 'seed': 3}
        >>> defaults["model"]["hidden"]  # unchanged
        64
    """
    merged = copy.deepcopy(original) if original is not None else {}
    _merge_into(merged, copy.deepcopy(dict(new_dict or {})))
    return merged


def _merge_into(target: Any, updates: Mapping[str, Any]) -> None:
    for key, value in updates.items():
        current = target.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            _merge_into(current, value)
        else:
            target[key] = value
