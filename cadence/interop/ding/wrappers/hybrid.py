"""DI-engine's wrapper for gym-hybrid's parameterised actions: a ``Tuple`` action space
``(Discrete(n), Box(...))`` seen as a ``Dict`` with ``'action_type'`` and ``'action_args'``.

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> from cadence.interop.ding.wrappers import GymHybridDictActionWrapper
    >>> space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)))
    >>> GymHybridDictActionWrapper.dict_space(space)["action_type"]
    Discrete(3)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["GymHybridDictActionWrapper"]

# the keys of DI-engine's own GymHybridDictActionWrapper ('mask' is carried but unused there)
_LEGACY_KEYS = ("type", "args")


class GymHybridDictActionWrapper(gym.ActionWrapper[Any, Any, Any]):
    """See a hybrid ``Tuple(Discrete(n), Box)`` action space as
    ``Dict({'action_type': Discrete(n), 'action_args': Box})``; ``step(dict)`` hands the inner
    env the tuple ``(action_type, action_args)`` it expects.

    The keys are those of DI-engine's gym-hybrid env and hybrid policies. Unlike DI-engine's
    wrapper, whose ``Dict`` is hard-coded for gym-hybrid (``'type'``: ``Discrete(3)``,
    ``'mask'``, ``'args'``: ``Box([0, -1], [1, 1])``), the ``Dict`` here is built from the
    inner env's own space; dicts with DI-engine's ``'type'``/``'args'`` keys are accepted too
    (``'mask'`` is ignored, as there).

    Args:
        env: an env whose action space is ``Tuple((Discrete(n), Box(...)))``.

    Raises:
        ValueError: the action space is not such a ``Tuple`` (it is named).

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> class Hybrid(gym.Env):
        ...     observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        ...     action_space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)))
        ...     def reset(self, *, seed=None, options=None):
        ...         return np.zeros(2, np.float32), {}
        ...     def step(self, action):
        ...         return np.asarray(action[1], np.float32), float(action[0]), False, False, {}
        >>> env = GymHybridDictActionWrapper(Hybrid())
        >>> sorted(env.action_space.spaces)
        ['action_args', 'action_type']
        >>> obs, reward, *_ = env.step({"action_type": 2, "action_args": np.array([0.5, -0.5], np.float32)})
        >>> obs, reward
        (array([ 0.5, -0.5], dtype=float32), 2.0)
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.action_space = self.dict_space(env.action_space)
        self._args_dtype = self.action_space["action_args"].dtype

    @staticmethod
    def dict_space(space: gym.Space[Any]) -> gym.spaces.Dict:
        """The ``Dict`` space that stands for a hybrid ``Tuple(Discrete(n), Box)`` space.

        Args:
            space: the hybrid action space.

        Returns:
            ``Dict({'action_type': Discrete(n), 'action_args': Box})`` (copies of the parts).

        Raises:
            ValueError: ``space`` is not such a ``Tuple`` (it is named).

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(0.0, 1.0, (2,), np.float32)))
            >>> GymHybridDictActionWrapper.dict_space(space)["action_args"]
            Box(0.0, 1.0, (2,), float32)
        """
        parts = space.spaces if isinstance(space, gym.spaces.Tuple) else None
        if (
            parts is None
            or len(parts) != 2
            or not isinstance(parts[0], gym.spaces.Discrete)
            or not isinstance(parts[1], gym.spaces.Box)
        ):
            raise ValueError(
                f"GymHybridDictActionWrapper needs a Tuple((Discrete(n), Box(...))) action space; got {space}"
            )
        discrete, box = parts
        return gym.spaces.Dict(
            {
                "action_type": gym.spaces.Discrete(int(discrete.n), start=int(discrete.start)),
                "action_args": gym.spaces.Box(low=box.low.copy(), high=box.high.copy(), dtype=box.dtype),
            }
        )

    def action(self, action: Mapping[str, Any]) -> tuple[int, np.ndarray]:
        """The inner env's tuple for a dict action.

        Args:
            action: ``{'action_type': int, 'action_args': array}`` (or DI-engine's
                ``{'type', 'mask', 'args'}``).

        Returns:
            ``(action_type, action_args)``, the args as an array of the ``Box``'s dtype.

        Raises:
            TypeError: ``action`` is not a mapping.
            KeyError: a key is missing (the expected keys and those given are named).
        """
        if not isinstance(action, Mapping):
            raise TypeError(
                "GymHybridDictActionWrapper.step needs a dict with 'action_type' and 'action_args'; "
                f"got {type(action).__name__}"
            )
        if "action_type" in action and "action_args" in action:
            action_type, action_args = action["action_type"], action["action_args"]
        elif all(key in action for key in _LEGACY_KEYS):
            action_type, action_args = action["type"], action["args"]
        else:
            raise KeyError(
                "GymHybridDictActionWrapper.step needs the keys 'action_type' and 'action_args' "
                f"(or DI-engine's 'type' and 'args'); got {sorted(action)}"
            )
        return int(np.asarray(action_type).reshape(())), np.asarray(action_args, dtype=self._args_dtype)
