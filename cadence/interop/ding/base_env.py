"""``BaseEnv``: DI-engine's environment base class, as the seed's contract states it.

An env written for DI-engine subclasses ``BaseEnv`` and writes ``reset()``, ``step()``
and ``close()`` itself; everything else has a working default here:

* lazy init: ``__init__`` only keeps the config; the simulator is made by the first
  ``reset()`` (so that env managers can build envs cheaply and in other processes);
* ``seed(seed, dynamic_seed=True)`` keeps the seed; :meth:`BaseEnv.episode_seed` gives
  the seed of the next episode: the same one every time for a static seed (evaluators),
  ``seed + 100 * randint(1, 1000)`` drawn from a ``numpy.random.Generator`` seeded with
  ``seed`` for a dynamic one (collectors), so that runs reproduce;
* ``random_action()`` samples the action space, as the contract's ndarrays: int64 for
  discrete actions (shape ``(1,)`` for ``Discrete``), float32 for continuous ones, a
  dict (or tuple) of them for composite spaces;
* the three spaces (``observation_space``, ``action_space``, ``reward_space``);
* ``create_collector_env_cfg`` / ``create_evaluator_env_cfg``: pop the env count and
  return that many deep copies with ``is_train`` set;
* ``default_config()``: the class's ``config`` as an ``EasyDict`` with ``cfg_type``;
* ``enable_save_replay(path)``: keeps the path; the env decides how to record.

Examples:
    >>> import numpy as np, gymnasium as gym
    >>> from cadence.interop.ding import BaseEnv, BaseEnvTimestep, to_ndarray
    >>> class CountdownEnv(BaseEnv):
    ...     config = dict(length=3)
    ...     def __init__(self, cfg: dict) -> None:
    ...         self._cfg = cfg
    ...         self._init_flag = False
    ...         self.observation_space = gym.spaces.Box(0, 10, (1,), np.float32)
    ...         self.action_space = gym.spaces.Discrete(2)
    ...         self.reward_space = gym.spaces.Box(0, 1, (1,), np.float32)
    ...     def reset(self) -> np.ndarray:
    ...         self._init_flag = True
    ...         self._left = self._cfg["length"]
    ...         self._eval_episode_return = 0.0
    ...         return np.array([self._left], np.float32)
    ...     def step(self, action: np.ndarray) -> BaseEnvTimestep:
    ...         self._left -= 1
    ...         self._eval_episode_return += 1.0
    ...         done = self._left == 0
    ...         info = {"eval_episode_return": self._eval_episode_return} if done else {}
    ...         return BaseEnvTimestep(np.array([self._left], np.float32), to_ndarray([1.0], np.float32), done, info)
    ...     def close(self) -> None:
    ...         self._init_flag = False
    >>> env = CountdownEnv(CountdownEnv.default_config())
    >>> env.seed(0)
    >>> obs = env.reset()
    >>> env.random_action().dtype, env.step(np.array([1])).obs
    (dtype('int64'), array([2.], dtype=float32))
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from cadence.interop._contracts import require_methods
from cadence.interop.ding.data import BaseEnvTimestep, to_ndarray

try:
    from easydict import EasyDict
except ImportError as error:  # pragma: no cover - the test command installs the extra
    raise ImportError(
        "cadence.interop.ding needs easydict (DI-engine's configs are EasyDicts): pip install 'cadence[ding]'"
    ) from error

__all__ = ["BaseEnv", "SEED_MAX"]

# what a seed may be: numpy's generators and gymnasium's envs both take seeds in [0, 2**32)
SEED_MAX = 2**32 - 1
# a dynamic seed is `seed + 100 * k` with k drawn from [1, 1000)
_DYNAMIC_LOW, _DYNAMIC_HIGH, _DYNAMIC_STEP = 1, 1000, 100
# the methods every env must write itself: the contract gives them no meaning of their own
_REQUIRED = ("reset", "step", "close")


class BaseEnv:
    """The base class of an environment written to DI-engine's contract.

    A subclass writes ``__init__(cfg)`` (keeping the config; no simulator yet),
    ``reset() -> obs``, ``step(action) -> BaseEnvTimestep`` and ``close()``; it usually
    sets the three spaces in ``__init__`` and may override any default below. A subclass
    missing one of ``reset``/``step``/``close`` is refused when it is defined, unless it
    declares itself a base for others: ``class MyBase(BaseEnv, abstract=True)``.

    The defaults do not rely on ``BaseEnv.__init__`` having run: DI-engine's own envs
    never call it.

    Examples:
        >>> import numpy as np, gymnasium as gym
        >>> from cadence.interop.ding import BaseEnv, BaseEnvTimestep
        >>> class Coin(BaseEnv):
        ...     def __init__(self, cfg: dict) -> None:
        ...         self._cfg = cfg
        ...         self.action_space = gym.spaces.Discrete(2)
        ...     def reset(self) -> np.ndarray:
        ...         self._rng = np.random.default_rng(self.episode_seed())
        ...         return np.zeros(1, np.float32)
        ...     def step(self, action: np.ndarray) -> BaseEnvTimestep:
        ...         reward = np.array([float(self._rng.integers(2) == action.item())], np.float32)
        ...         return BaseEnvTimestep(np.zeros(1, np.float32), reward, True, {"eval_episode_return": float(reward[0])})
        ...     def close(self) -> None:
        ...         pass
        >>> env = Coin({})
        >>> env.seed(7, dynamic_seed=False)
        >>> [env.episode_seed() for _ in range(2)]
        [7, 7]
        >>> env.seed(7)
        >>> first = [env.episode_seed() for _ in range(3)]
        >>> env.seed(7)
        >>> first == [env.episode_seed() for _ in range(3)], all((s - 7) % 100 == 0 for s in first)
        (True, True)
        >>> class Broken(BaseEnv):
        ...     def reset(self) -> np.ndarray:
        ...         return np.zeros(1, np.float32)
        Traceback (most recent call last):
        ...
        TypeError: Broken must define step(), close() (BaseEnv's contract); declare `class Broken(BaseEnv, abstract=True)` for a base class
    """

    #: the env's default configuration; :meth:`default_config` returns a copy
    config: dict = {}
    #: ``False`` until the first ``reset()`` made the simulator (lazy init)
    _init_flag: bool = False
    #: where ``enable_save_replay`` asked for videos; ``None``: no videos
    _replay_path: str | None = None

    def __init_subclass__(cls, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if abstract:
            return
        require_methods(cls, BaseEnv, _REQUIRED)

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        """Keeps the config and makes no simulator (lazy init).

        Args:
            cfg: the env's configuration; ``None`` for an empty one.
        """
        self._cfg = EasyDict() if cfg is None else cfg
        self._init_flag = False

    # -- the methods each env writes ------------------------------------------------------

    def reset(self) -> Any:
        """Starts an episode and returns its first observation (the subclass's)."""
        raise TypeError(f"{type(self).__name__}.reset() is not defined")  # unreachable: __init_subclass__

    def step(self, action: Any) -> BaseEnvTimestep:
        """Acts once and returns ``BaseEnvTimestep(obs, reward, done, info)`` (the subclass's)."""
        raise TypeError(f"{type(self).__name__}.step() is not defined")  # unreachable: __init_subclass__

    def close(self) -> None:
        """Releases the simulator (the subclass's)."""
        raise TypeError(f"{type(self).__name__}.close() is not defined")  # unreachable: __init_subclass__

    # -- seeds ------------------------------------------------------------------------------

    def seed(self, seed: int, dynamic_seed: bool = True) -> None:
        """Keeps the seed that the next ``reset()`` calls apply.

        Args:
            seed: an int in ``[0, 2**32 - 1]``.
            dynamic_seed: ``True`` (collectors) for a new seed each episode, drawn from a
                generator seeded with ``seed``; ``False`` (evaluators) for ``seed`` every
                episode.

        Raises:
            ValueError: if ``seed`` is not an int in range.

        Examples:
            >>> from cadence.interop.ding import DingEnvWrapper
            >>> env = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
            >>> env.seed(3, dynamic_seed=False)
            >>> env.episode_seed()
            3
        """
        check_seed(seed)
        self._seed = int(seed)
        self._dynamic_seed = bool(dynamic_seed)
        self._seed_generator = np.random.default_rng(self._seed)
        self._action_space_seeded = None  # random_action() seeds its space again

    def episode_seed(self) -> int | None:
        """The seed for the episode about to start: call it once per ``reset()``.

        A subclass whose own ``seed()`` sets ``self._seed`` without calling
        ``super().seed()`` still gets dynamic seeds, but seeding it again with the same
        seed does not restart their sequence: call ``super().seed(seed, dynamic_seed)``.

        Returns:
            ``None`` if :meth:`seed` was never called; the seed itself for a static seed;
            ``seed + 100 * k``, ``k`` drawn uniformly from ``[1, 1000)``, for a dynamic one.

        Examples:
            >>> from cadence.interop.ding import DingEnvWrapper
            >>> env = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
            >>> env.episode_seed() is None
            True
            >>> env.seed(5)
            >>> 105 <= env.episode_seed() <= 5 + 100 * 999
            True
        """
        seed = getattr(self, "_seed", None)
        if seed is None:
            return None
        if not getattr(self, "_dynamic_seed", True):
            return seed
        generator = getattr(self, "_seed_generator", None)
        if generator is None:  # a subclass's seed() set _seed itself
            generator = self._seed_generator = np.random.default_rng(seed)
        return seed + _DYNAMIC_STEP * int(generator.integers(_DYNAMIC_LOW, _DYNAMIC_HIGH))

    # -- spaces -----------------------------------------------------------------------------

    @property
    def observation_space(self) -> gym.Space:
        """The observations' space (a ``gymnasium.spaces.Space``)."""
        return self._space("observation_space")

    @observation_space.setter
    def observation_space(self, space: gym.Space | None) -> None:
        self._observation_space = space

    @property
    def action_space(self) -> gym.Space:
        """The actions' space (a ``gymnasium.spaces.Space``)."""
        return self._space("action_space")

    @action_space.setter
    def action_space(self, space: gym.Space | None) -> None:
        self._action_space = space

    @property
    def reward_space(self) -> gym.Space:
        """The rewards' space: a ``Box`` of shape ``(1,)`` by the contract."""
        return self._space("reward_space")

    @reward_space.setter
    def reward_space(self, space: gym.Space | None) -> None:
        self._reward_space = space

    def _space(self, name: str) -> gym.Space:
        space = getattr(self, "_" + name, None)
        if space is None:
            raise AttributeError(
                f"{type(self).__name__} has no {name}: set self.{name} (or self._{name}) to a "
                "gymnasium space in __init__, or after the first reset() for an env that learns it then"
            )
        return space

    # -- the optional methods -----------------------------------------------------------------

    def random_action(self) -> np.ndarray | dict[str, Any] | tuple[Any, ...]:
        """A random action from the action space, in the contract's types.

        The space is seeded from :meth:`seed`'s seed on first use, so that the random
        actions reproduce too.

        Returns:
            An ndarray: int64 of shape ``(1,)`` for ``Discrete``, int64 for the other
            integer spaces, float32 for ``Box``; a dict (``Dict`` spaces) or tuple
            (``Tuple`` spaces) of them.

        Examples:
            >>> from cadence.interop.ding import DingEnvWrapper
            >>> env = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
            >>> env.seed(0)
            >>> obs = env.reset()
            >>> action = env.random_action()
            >>> action.dtype, action.shape
            (dtype('int64'), (1,))
        """
        space = self.action_space
        seed = getattr(self, "_seed", None)
        if seed is not None and getattr(self, "_action_space_seeded", None) != (id(space), seed):
            space.seed(seed)
            self._action_space_seeded = (id(space), seed)
        return contract_action(space.sample(), space)

    def enable_save_replay(self, replay_path: str | None = None) -> None:
        """Asks for a video of each episode in ``replay_path`` (called after ``seed``, before ``reset``).

        This keeps the path; recording is the env's own business (``DingEnvWrapper``
        records one mp4 per episode).

        Args:
            replay_path: the folder; ``None`` for ``"./video"``.

        Examples:
            >>> from cadence.interop.ding import DingEnvWrapper
            >>> env = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
            >>> env.enable_save_replay("videos")
            >>> env.replay_path
            'videos'
        """
        self._replay_path = "./video" if replay_path is None else str(replay_path)

    @property
    def replay_path(self) -> str | None:
        """Where :meth:`enable_save_replay` asked for videos, or ``None``."""
        return self._replay_path

    # -- configuration --------------------------------------------------------------------------

    @classmethod
    def default_config(cls) -> EasyDict:
        """The class's ``config`` as an ``EasyDict`` (a deep copy), with ``cfg_type``.

        Merge it with a user's config by ``deep_merge_dicts(default, user)``: the user's
        values win.

        Examples:
            >>> from cadence.interop.ding import BaseEnv
            >>> class Tiny(BaseEnv, abstract=True):
            ...     config = dict(length=5)
            >>> Tiny.default_config()
            {'length': 5, 'cfg_type': 'TinyDict'}
        """
        cfg = EasyDict(copy.deepcopy(dict(cls.config)))
        cfg.cfg_type = cls.__name__ + "Dict"
        return cfg

    @staticmethod
    def create_collector_env_cfg(cfg: dict) -> list[dict]:
        """The configs of the collector envs: pops ``collector_env_num``, sets ``is_train=True``.

        Args:
            cfg: the env config; ``collector_env_num`` is removed from it, as DI-engine does.

        Returns:
            ``collector_env_num`` deep copies of the rest (each its own: changing one
            changes no other).

        Raises:
            KeyError: if ``cfg`` has no ``collector_env_num``.

        Examples:
            >>> from cadence.interop.ding import BaseEnv
            >>> cfg = {"collector_env_num": 2, "env_id": "Pong"}
            >>> BaseEnv.create_collector_env_cfg(cfg), cfg
            ([{'env_id': 'Pong', 'is_train': True}, {'env_id': 'Pong', 'is_train': True}], {'env_id': 'Pong'})
        """
        return _env_cfgs(cfg, "collector_env_num", is_train=True)

    @staticmethod
    def create_evaluator_env_cfg(cfg: dict) -> list[dict]:
        """The configs of the evaluator envs: pops ``evaluator_env_num``, sets ``is_train=False``.

        Args:
            cfg: the env config; ``evaluator_env_num`` is removed from it.

        Returns:
            ``evaluator_env_num`` deep copies of the rest.

        Raises:
            KeyError: if ``cfg`` has no ``evaluator_env_num``.

        Examples:
            >>> from easydict import EasyDict
            >>> from cadence.interop.ding import BaseEnv
            >>> cfgs = BaseEnv.create_evaluator_env_cfg(EasyDict(evaluator_env_num=1, env_id="Pong"))
            >>> cfgs[0].is_train, type(cfgs[0]).__name__
            (False, 'EasyDict')
        """
        return _env_cfgs(cfg, "evaluator_env_num", is_train=False)

    # -- the rest ---------------------------------------------------------------------------------

    def __enter__(self) -> BaseEnv:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(cfg={getattr(self, '_cfg', None)!r})"


def check_seed(seed: Any) -> None:
    """Refuses a seed that is not an int in ``[0, 2**32 - 1]``, naming it.

    Args:
        seed: the seed.

    Raises:
        ValueError: if it is not.

    Examples:
        >>> check_seed(3)
        >>> check_seed(-1)
        Traceback (most recent call last):
        ...
        ValueError: seed must be an int in [0, 4294967295], got -1
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= SEED_MAX:
        raise ValueError(f"seed must be an int in [0, {SEED_MAX}], got {seed!r}")


def contract_action(action: Any, space: gym.Space) -> Any:
    """A sampled action in the contract's types (int64 / float32 / uint8 ndarrays).

    Args:
        action: what ``space.sample()`` gave.
        space: its space.

    Returns:
        ``Discrete``: an int64 array of shape ``(1,)``; other arrays: integers as int64
        (booleans too), floats as float32; ``Dict``/``Tuple``: a dict/tuple of those.

    Raises:
        TypeError: for a sample of any other kind, naming it.

    Examples:
        >>> import gymnasium as gym
        >>> contract_action(gym.spaces.Discrete(3).sample(), gym.spaces.Discrete(3)).shape
        (1,)
        >>> contract_action(gym.spaces.MultiBinary(2).sample(), gym.spaces.MultiBinary(2)).dtype
        dtype('int64')
    """
    if isinstance(space, gym.spaces.Dict):
        return {key: contract_action(action[key], space[key]) for key in space.spaces}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(contract_action(part, sub) for part, sub in zip(action, space.spaces))
    if isinstance(action, (int, np.integer)) and not isinstance(action, bool):
        return to_ndarray([int(action)], np.int64)
    if isinstance(action, np.ndarray):
        if action.dtype == np.uint8 or action.dtype in (np.int64, np.float32):
            return action
        if np.issubdtype(action.dtype, np.integer) or action.dtype == np.bool_:
            return action.astype(np.int64)
        if np.issubdtype(action.dtype, np.floating):
            return action.astype(np.float32)
    raise TypeError(
        f"random_action: a sample of {space} must be an int, an ndarray, or a dict/tuple of them; "
        f"got {type(action).__name__}: {action!r}"
    )


def _env_cfgs(cfg: dict, count_key: str, *, is_train: bool) -> list[dict]:
    if count_key not in cfg:
        raise KeyError(f"the env config has no {count_key!r} (how many envs to make); its keys: {sorted(cfg)}")
    count = cfg.pop(count_key)
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
        raise ValueError(f"{count_key} must be an int >= 0, got {count!r}")
    cfgs = [copy.deepcopy(cfg) for _ in range(int(count))]
    for one in cfgs:
        one["is_train"] = is_train  # EasyDict mirrors items and attributes
    return cfgs
