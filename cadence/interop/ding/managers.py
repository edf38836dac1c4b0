"""DI-engine's env managers (the ``BaseEnvManager`` v1 API): N DI-engine envs behind one
``ready_obs`` / ``step(actions)`` loop, with auto-reset, episode limits, retries and timeouts.

This module holds :class:`BaseEnvManager`, which runs its envs one after the other in the
caller's process. ``cadence.interop.ding.subprocess_managers`` holds
``SyncSubprocessEnvManager`` and ``AsyncSubprocessEnvManager``, which run each env in a
worker of Cadence's :class:`~cadence.envs.workers.WorkerPool`.

The loop a DI-engine collector runs::

    manager = BaseEnvManager([lambda: MyEnv(cfg) for _ in range(4)], BaseEnvManager.default_config())
    manager.seed(0)
    manager.launch()
    while not manager.done:
        obs = manager.ready_obs                      # {env_id: obs} of the envs ready to act
        timesteps = manager.step({i: policy(o) for i, o in obs.items()})
    manager.close()

How they differ from DI-engine 0.5.3's, on purpose, is listed in
:mod:`cadence.interop.ding.manager_common`.

Examples:
    >>> from cadence.interop.ding.managers import BaseEnvManager
    >>> manager = BaseEnvManager(_demo_env_fns(2, length=2), {"episode_num": 1})
    >>> manager.launch()
    >>> while not manager.done:
    ...     timesteps = manager.step({i: 0 for i in manager.ready_obs})
    >>> manager.close()
"""
from __future__ import annotations

import contextlib
import numbers
import time
from collections.abc import Callable, Mapping, Sequence
from types import MethodType
from typing import Any, ClassVar


from cadence.interop.ding.data import BaseEnvTimestep, deep_merge_dicts
from cadence.interop.ding.manager_common import (  # _demo_env_fns: the examples' envs
    check_env_id,
    check_reset_param,
    first_failure,
    step_refusal,
    _apply_seed,
    _demo_env_fns,  # noqa: F401
    _check_config,
    _describe,
    _InProcessTimeout,
    _time_limit,
    EnvManagerError,
    EnvState,
    is_abnormal_timestep,
    Seed,
)

try:
    from easydict import EasyDict
except ImportError as error:  # pragma: no cover - the ding extra installs it
    raise ImportError(
        "cadence.interop.ding needs easydict (DI-engine's configs are EasyDicts): pip install 'cadence[ding]'"
    ) from error

__all__ = ["BaseEnvManager"]




class BaseEnvManager:
    """Runs N DI-engine envs in this process, one after the other: DI-engine's ``BaseEnvManager``.

    ``env_fn[i]()`` builds env ``i`` (a DI-engine env: ``seed``, ``reset() -> obs``,
    ``step(action) -> BaseEnvTimestep``, ``close``, spaces). The constructor builds one more,
    :attr:`env_ref`, left unlaunched, for the spaces. :meth:`launch` builds the envs and resets
    them; then ``ready_obs`` gives the observation of each env ready to act and
    :meth:`step` takes one action per env (a dict ``env_id -> action``) and returns a dict
    ``env_id -> timestep``.

    After an env's episode ends, the manager counts it and, with ``auto_reset``, resets the
    env at once: the timestep keeps the episode's last observation and ``ready_obs`` has the
    new episode's first one. After ``episode_num`` episodes an env is ``DONE``; :attr:`done`
    is ``True`` once all are. An env whose timestep has ``info["abnormal"]`` is excluded
    (state ``ERROR``) until it is reset, as is an env whose ``step`` raised or timed out.

    A failed ``reset`` is tried ``max_retry`` times in all, ``retry_waiting_time`` seconds
    apart; ``retry_type="renew"`` builds a fresh env from ``env_fn`` before each retry
    (``"reset"`` resets the same one again). When every attempt failed, the manager closes
    and raises an :class:`EnvManagerError` that names the env, the attempts and the last error.

    Config keys (:meth:`default_config`, DI-engine's names and defaults): ``episode_num``
    (``inf``), ``max_retry`` (1), ``retry_type`` (``"reset"``), ``auto_reset`` (``True``),
    ``step_timeout`` and ``reset_timeout`` (``None``: none), ``retry_waiting_time`` (0.1).
    ``cfg`` may be partial, a plain dict or an ``EasyDict``: it is merged into the defaults
    (DI-engine's managers expect the merge done by the caller; a merged config works the
    same). Other keys (``type``, ``import_names``, ...) are kept and ignored.

    Timeouts here: the envs run in this process, so a timeout is a ``SIGALRM`` timer that
    raises ``TimeoutError`` inside the env's Python code, after exactly the given seconds
    (DI-engine's watchdog uses the same signal but fires at ``timeout + 1`` s and refuses
    float timeouts). It works in the main thread only (elsewhere: a warning,
    no limit), cannot stop C code that never returns to the interpreter, and cannot survive
    an env that kills its process; :class:`~cadence.interop.ding.subprocess_managers.SyncSubprocessEnvManager`
    can (it kills the env's worker).

    Args:
        env_fn: one callable per env, each returning a new env.
        cfg: the manager config (merged into :meth:`default_config`); ``None`` for the defaults.

    Raises:
        TypeError: if ``env_fn`` is not a non-empty list of callables, or ``cfg`` not a mapping.
        ValueError: if a config value is out of range (named with its key).

    Examples:
        >>> manager = BaseEnvManager(_demo_env_fns(2, length=2), {"episode_num": 2})
        >>> manager.env_num, manager.closed
        (2, True)
        >>> manager.launch()
        >>> manager.ready_obs
        {0: array([0.], dtype=float32), 1: array([0.], dtype=float32)}
        >>> _ = manager.step({0: 1, 1: 1})
        >>> timesteps = manager.step({0: 1, 1: 1})        # the episodes end
        >>> timesteps[0].obs, timesteps[0].done, manager.ready_obs[0]
        (array([2.], dtype=float32), True, array([0.], dtype=float32))
        >>> while not manager.done:
        ...     _ = manager.step({i: 1 for i in manager.ready_obs_id})
        >>> manager.close()
        >>> manager.ready_obs
        Traceback (most recent call last):
        ...
        RuntimeError: BaseEnvManager is closed: ready_obs is not available; launch() it again to use it
    """

    config: ClassVar[dict[str, Any]] = dict(
        # the episodes each env runs before it is DONE
        episode_num=float("inf"),
        # attempts of a failed reset, in all (0 and 1: no retry)
        max_retry=1,
        # what a retry does: "reset" the same env, or "renew" it (a fresh one from env_fn)
        retry_type="reset",
        # reset an env as soon as its episode ends
        auto_reset=True,
        # seconds a step / a reset may take; None: no limit
        step_timeout=None,
        reset_timeout=None,
        # seconds between two attempts of a failed reset
        retry_waiting_time=0.1,
    )

    @classmethod
    def default_config(cls) -> EasyDict:
        """The class's default config: a deep copy of ``config`` as an ``EasyDict``, with ``cfg_type``.

        Returns:
            The defaults, to merge a user's config into (``deep_merge_dicts(default, user)``).

        Examples:
            >>> cfg = BaseEnvManager.default_config()
            >>> cfg.episode_num, cfg.max_retry, cfg.retry_type, cfg.cfg_type
            (inf, 1, 'reset', 'BaseEnvManagerDict')
        """
        cfg = EasyDict(deep_merge_dicts(dict(cls.config), {}))
        cfg.cfg_type = cls.__name__ + "Dict"
        return cfg

    def __init__(self, env_fn: Sequence[Callable[[], Any]], cfg: Mapping[str, Any] | None = None) -> None:
        if isinstance(env_fn, (str, bytes)) or not isinstance(env_fn, Sequence) or len(env_fn) == 0:
            raise TypeError(
                f"{type(self).__name__}: env_fn must be a non-empty list of callables (one per env), got {env_fn!r}"
            )
        for i, fn in enumerate(env_fn):
            if not callable(fn):
                raise TypeError(f"{type(self).__name__}: env_fn[{i}] must be callable (it builds env {i}), got {fn!r}")
        if cfg is not None and not isinstance(cfg, Mapping):
            raise TypeError(
                f"{type(self).__name__}: cfg must be a dict or an EasyDict (merged into default_config()), "
                f"got {type(cfg).__name__}: {cfg!r}"
            )
        merged = deep_merge_dicts(self.default_config(), cfg)
        self._check_config(merged)
        self._cfg: EasyDict = merged
        self._env_fn = list(env_fn)
        self._env_num = len(self._env_fn)
        self._closed = True
        self._launched_once = False
        self._env_replay_path: list[str] | None = None
        self._env_ref = self._env_fn[0]()
        self._observation_space, self._action_space, self._reward_space = self._read_spaces(self._env_ref)
        ids = range(self._env_num)
        self._env_states: dict[int, EnvState] = {i: EnvState.VOID for i in ids}
        self._env_seed: dict[int, int | None] = {i: None for i in ids}  # applied at the next reset, once
        self._env_dynamic_seed: bool | None = None
        self._last_seed: dict[int, Seed | None] = {i: None for i in ids}  # re-applied to a renewed env
        self._env_episode_count: dict[int, int] = {i: 0 for i in ids}
        self._ready_obs: dict[int, Any] = {i: None for i in ids}
        self._reset_param: dict[int, dict[str, Any] | None] = {i: {} for i in ids}
        self._episode_num = merged.episode_num
        self._max_retry = max(int(merged.max_retry), 1)
        self._retry_type: str = merged.retry_type
        self._auto_reset = bool(merged.auto_reset)
        self._step_timeout: float | None = merged.step_timeout
        self._reset_timeout: float | None = merged.reset_timeout
        self._retry_waiting_time: float = merged.retry_waiting_time
        self._envs: list[Any] = []

    def _check_config(self, cfg: Mapping[str, Any]) -> None:
        _check_config(cfg, type(self).__name__)

    @staticmethod
    def _read_spaces(env: Any) -> tuple[Any, Any, Any]:
        try:
            return env.observation_space, env.action_space, env.reward_space
        except Exception:
            # Some envs know their spaces only after a reset; DI-engine resets the reference
            # env then (and closes it), so do the same.
            env.reset()
            try:
                return env.observation_space, env.action_space, env.reward_space
            finally:
                env.close()

    # -- properties --------------------------------------------------------------------

    @property
    def env_num(self) -> int:
        """The number of envs.

        Examples:
            >>> BaseEnvManager(_demo_env_fns(3)).env_num
            3
        """
        return self._env_num

    @property
    def env_ref(self) -> Any:
        """An env built by ``env_fn[0]`` in the constructor and never launched, for its spaces.

        Examples:
            >>> type(BaseEnvManager(_demo_env_fns(1)).env_ref).__name__
            '_DemoEnv'
        """
        return self._env_ref

    @property
    def observation_space(self) -> Any:
        """The observation space of the envs (read from :attr:`env_ref`).

        Examples:
            >>> BaseEnvManager(_demo_env_fns(1)).observation_space.shape
            (1,)
        """
        return self._observation_space

    @property
    def action_space(self) -> Any:
        """The action space of the envs (read from :attr:`env_ref`; :meth:`seed` seeds it).

        Examples:
            >>> BaseEnvManager(_demo_env_fns(1)).action_space
            Discrete(2)
        """
        return self._action_space

    @property
    def reward_space(self) -> Any:
        """The reward space of the envs (read from :attr:`env_ref`).

        Examples:
            >>> BaseEnvManager(_demo_env_fns(1)).reward_space.shape
            (1,)
        """
        return self._reward_space

    @property
    def closed(self) -> bool:
        """Whether the manager is closed (also before the first :meth:`launch`).

        Examples:
            >>> manager = BaseEnvManager(_demo_env_fns(1))
            >>> manager.closed, manager.launch(), manager.closed, manager.close(), manager.closed
            (True, None, False, None, True)
        """
        return self._closed

    @property
    def ready_obs(self) -> dict[int, Any]:
        """The observation of each env ready to act (state ``RUN``), by env id.

        Raises:
            RuntimeError: if the manager is not launched or is closed.

        Examples:
            >>> with BaseEnvManager(_demo_env_fns(2)) as manager:
            ...     manager.launch()
            ...     manager.ready_obs
            {0: array([0.], dtype=float32), 1: array([0.], dtype=float32)}
        """
        self._check_open("ready_obs")
        return {i: self._ready_obs[i] for i in self._ready_ids()}

    @property
    def ready_obs_id(self) -> list[int]:
        """The ids of the envs ready to act (the keys of :attr:`ready_obs`).

        Raises:
            RuntimeError: if the manager is not launched or is closed.

        Examples:
            >>> with BaseEnvManager(_demo_env_fns(2)) as manager:
            ...     manager.launch()
            ...     manager.ready_obs_id
            [0, 1]
        """
        self._check_open("ready_obs_id")
        return self._ready_ids()

    def _ready_ids(self) -> list[int]:
        return [i for i, state in self._env_states.items() if state == EnvState.RUN]

    @property
    def active_env(self) -> list[int]:
        """The ids of the envs in state ``RUN`` (for the async manager: also those whose step
        is still on its way; :attr:`ready_obs_id` leaves those out).

        Examples:
            >>> with BaseEnvManager(_demo_env_fns(2)) as manager:
            ...     manager.launch()
            ...     manager.active_env
            [0, 1]
        """
        return [i for i, state in self._env_states.items() if state == EnvState.RUN]

    @property
    def env_states(self) -> dict[int, EnvState]:
        """The state of each env, by env id (a copy).

        Examples:
            >>> manager = BaseEnvManager(_demo_env_fns(1))
            >>> manager.env_states
            {0: <EnvState.VOID: 0>}
        """
        return dict(self._env_states)

    def env_state_done(self, env_id: int) -> bool:
        """Whether env ``env_id`` ran its ``episode_num`` episodes.

        Args:
            env_id: the env.

        Examples:
            >>> BaseEnvManager(_demo_env_fns(1)).env_state_done(0)
            False
        """
        return self._env_states[self._check_env_id(env_id, "env_state_done")] == EnvState.DONE

    @property
    def done(self) -> bool:
        """Whether every env ran its ``episode_num`` episodes (all ``DONE``).

        Examples:
            >>> with BaseEnvManager(_demo_env_fns(1, length=1), {"episode_num": 1}) as manager:
            ...     manager.launch()
            ...     manager.done, manager.step({0: 0})[0].done, manager.done
            (False, True, True)
        """
        return all(state == EnvState.DONE for state in self._env_states.values())

    @property
    def method_name_list(self) -> list[str]:
        """The env methods that :meth:`__getattr__` may hand out (DI-engine's list).

        Examples:
            >>> "render" in BaseEnvManager(_demo_env_fns(1)).method_name_list
            True
        """
        return ["reset", "step", "seed", "close", "enable_save_replay", "render", "reward_shaping", "enable_save_figure"]

    def __getattr__(self, key: str) -> Any:
        """An attribute of every env, as a list by env id; only for attributes :attr:`env_ref` has.

        Methods are handed out only if they are in :attr:`method_name_list`.

        Raises:
            AttributeError: if the envs have no such attribute.
            RuntimeError: for a method not in :attr:`method_name_list`, or if the manager
                is not launched or closed.

        Examples:
            >>> with BaseEnvManager(_demo_env_fns(2, length=4)) as manager:
            ...     manager.launch()
            ...     manager.length
            [4, 4]
        """
        if key.startswith("_"):  # private names, and lookups before __init__ finished
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}")
        env_ref = self.__dict__.get("_env_ref")
        if env_ref is None or not hasattr(env_ref, key):
            raise AttributeError(
                f"{type(self).__name__} has no attribute {key!r}, and neither has its env "
                f"({type(env_ref).__name__})"
            )
        is_method = isinstance(getattr(env_ref, key), MethodType)
        if is_method and key not in self.method_name_list:
            raise RuntimeError(
                f"{type(self).__name__}: the env method {key!r} is not in method_name_list "
                f"({self.method_name_list}); override method_name_list to hand it out"
            )
        self._check_open(key)
        return self._env_attribute(key, is_method)

    # -- life cycle --------------------------------------------------------------------

    def launch(self, reset_param: Mapping[int, Mapping[str, Any] | None] | None = None) -> None:
        """Builds the envs (applying :meth:`enable_save_replay`'s paths) and resets them all.

        Args:
            reset_param: the keyword arguments of each env's ``reset``, for every env id
                (``None`` for an env: a plain ``reset()``); kept for its later resets.
                ``None``: plain resets.

        Raises:
            RuntimeError: if the manager is launched already (close it first).
            ValueError, TypeError: if ``reset_param`` does not give every env id a dict or ``None``.
            EnvManagerError: if an env could not be built or reset (the manager is then closed).

        Examples:
            >>> manager = BaseEnvManager(_demo_env_fns(2))
            >>> manager.launch({0: {"start": 5}, 1: None})
            >>> manager.ready_obs
            {0: array([5.], dtype=float32), 1: array([0.], dtype=float32)}
            >>> manager.close()
        """
        if not self._closed:
            raise RuntimeError(f"{type(self).__name__} is launched already: close() it before launch()")
        if reset_param is not None:
            self._check_reset_param(reset_param, "launch")
            missing = sorted(set(range(self._env_num)) - set(reset_param))
            if missing:
                raise ValueError(
                    f"{type(self).__name__}.launch: reset_param must give every env id 0..{self._env_num - 1} "
                    f"its reset kwargs (or None); missing {missing}"
                )
        ids = range(self._env_num)
        self._env_episode_count = {i: 0 for i in ids}
        self._ready_obs = {i: None for i in ids}
        self._reset_param = {i: {} for i in ids}
        self._open_envs()
        self._env_states = {i: EnvState.INIT for i in ids}
        self._closed = False
        self._launched_once = True
        self.reset(reset_param)

    def reset(self, reset_param: Mapping[int, Mapping[str, Any] | None] | None = None) -> None:
        """Resets the given envs now (seeding them first if :meth:`seed` set a seed since).

        Envs reset themselves after each episode (``auto_reset``); call this for an env that
        is ``ERROR`` (abnormal, failed) or ``NEED_RESET``, or to restart all, e.g. before an
        evaluation. Episode counts are kept, as in DI-engine.

        Args:
            reset_param: env id -> keyword arguments of its ``reset`` (``None``: a plain
                ``reset()``), kept for its later resets; only these envs are reset.
                ``None``: every env, with its kept arguments.

        Raises:
            RuntimeError: if the manager is not launched or is closed.
            ValueError, TypeError: for an unknown env id or arguments that are not a dict.
            EnvManagerError: if an env failed every attempt (the manager is then closed).

        Examples:
            >>> with BaseEnvManager(_demo_env_fns(2)) as manager:
            ...     manager.launch()
            ...     _ = manager.step({0: 1, 1: 1})
            ...     manager.reset({1: {"start": 3}})
            ...     manager.ready_obs
            {0: array([1.], dtype=float32), 1: array([3.], dtype=float32)}
        """
        self._check_open("reset")
        if reset_param is None:
            env_ids = list(range(self._env_num))
        else:
            self._check_reset_param(reset_param, "reset")
            env_ids = list(reset_param)
            for env_id, kwargs in reset_param.items():
                self._reset_param[env_id] = None if kwargs is None else dict(kwargs)
        seeds: dict[int, Seed | None] = {}
        for env_id in env_ids:
            seed = self._env_seed[env_id]
            if seed is not None:
                seeds[env_id] = self._last_seed[env_id] = (seed, self._env_dynamic_seed)
                self._env_seed[env_id] = None  # a seed is applied once, as in DI-engine
            else:
                seeds[env_id] = None
        self._reset_envs(env_ids, seeds)

    def close(self) -> None:
        """Closes the envs; idempotent. Afterwards only :meth:`launch` (and the setup methods) work.

        Examples:
            >>> manager = BaseEnvManager(_demo_env_fns(1))
            >>> manager.launch()
            >>> manager.close(); manager.close()
            >>> manager.env_states
            {0: <EnvState.VOID: 0>}
        """
        if self._closed:
            return
        self._closed = True
        try:
            self._close_envs()
        finally:
            self._env_states = {i: EnvState.VOID for i in range(self._env_num)}

    def __enter__(self) -> BaseEnvManager:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        status = "closed" if self._closed else "launched"
        return f"{type(self).__name__}(env_num={self._env_num}, {status})"

    # -- setup -------------------------------------------------------------------------

    def seed(self, seed: int | Sequence[int] | Mapping[int, int], dynamic_seed: bool | None = None) -> None:
        """Sets the seeds that the next :meth:`reset` (or :meth:`launch`) applies, once.

        Args:
            seed: an int (env ``i`` gets ``seed + i``), a list with one seed per env, or a
                dict env id -> seed for some envs.
            dynamic_seed: passed to each env's ``seed(seed, dynamic_seed)``: ``True`` for a
                new seed each episode drawn from ``seed`` (collectors), ``False`` for the
                same one every episode (evaluators); ``None`` calls ``seed(seed)`` and
                leaves the choice to the env.

        Raises:
            ValueError: if a list has the wrong length, or a dict an unknown env id.
            TypeError: for another kind of seed.

        Examples:
            >>> with BaseEnvManager(_demo_env_fns(2)) as manager:
            ...     manager.seed(10, dynamic_seed=False)
            ...     manager.launch()
            ...     manager.last_seed
            [10, 11]
        """
        if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
            seeds = {i: int(seed) + i for i in range(self._env_num)}
        elif isinstance(seed, Sequence) and not isinstance(seed, (str, bytes)):
            if len(seed) != self._env_num:
                raise ValueError(
                    f"{type(self).__name__}.seed: a list of seeds needs one per env ({self._env_num}), got {len(seed)}"
                )
            seeds = dict(enumerate(seed))
        elif isinstance(seed, Mapping):
            for env_id in seed:
                self._check_env_id(env_id, "seed")
            seeds = dict(seed)
        else:
            raise TypeError(
                f"{type(self).__name__}.seed: seed must be an int, a list of ints (one per env) or a dict "
                f"env id -> int, got {type(seed).__name__}: {seed!r}"
            )
        self._env_seed.update(seeds)
        self._env_dynamic_seed = dynamic_seed
        first = seeds.get(0, next(iter(seeds.values()), None))
        with contextlib.suppress(Exception):  # composite or exotic spaces may not take a seed
            self._action_space.seed(first)  # so that random_action reproduces

    def enable_save_replay(self, replay_path: str | Sequence[str]) -> None:
        """Asks every env to record its episodes: applied to the envs built by the next
        :meth:`launch` (and to renewed ones).

        Args:
            replay_path: one folder for all envs, or a list with one per env.

        Raises:
            ValueError: if a list does not have one path per env.

        Examples:
            >>> with BaseEnvManager(_demo_env_fns(2)) as manager:
            ...     manager.enable_save_replay("videos")
            ...     manager.launch()
            ...     manager.replay_path
            ['videos', 'videos']
        """
        if isinstance(replay_path, str):
            paths = [replay_path] * self._env_num
        else:
            paths = list(replay_path)
            if len(paths) != self._env_num:
                raise ValueError(
                    f"{type(self).__name__}.enable_save_replay: give one path, or one per env ({self._env_num}); "
                    f"got {len(paths)}"
                )
        self._env_replay_path = paths

    def random_action(self) -> dict[int, Any]:
        """A random action (``action_space.sample()``) for each env ready to act.

        Raises:
            RuntimeError: if the manager is not launched or is closed.

        Examples:
            >>> with BaseEnvManager(_demo_env_fns(2)) as manager:
            ...     manager.launch()
            ...     sorted(manager.random_action())
            [0, 1]
        """
        self._check_open("random_action")
        return {env_id: self._action_space.sample() for env_id in self._ready_ids()}

    def reward_shaping(self, env_id: int, transitions: list[dict]) -> list[dict]:
        """Runs env ``env_id``'s ``reward_shaping(transitions)`` and returns its result.

        Args:
            env_id: the env.
            transitions: the transitions of its episode.

        Examples:
            >>> with BaseEnvManager(_demo_env_fns(1)) as manager:
            ...     manager.launch()
            ...     manager.reward_shaping(0, [{"reward": 1.0}])
            [{'reward': 2.0}]
        """
        self._check_open("reward_shaping")
        return self._call_env(self._check_env_id(env_id, "reward_shaping"), "reward_shaping", transitions)

    def enable_save_figure(self, env_id: int, figure_path: str) -> None:
        """Runs env ``env_id``'s ``enable_save_figure(figure_path)``.

        Args:
            env_id: the env.
            figure_path: the folder of its figures.

        Examples:
            >>> with BaseEnvManager(_demo_env_fns(1)) as manager:
            ...     manager.launch()
            ...     manager.enable_save_figure(0, "figures")
            ...     manager.figure_path
            ['figures']
        """
        self._check_open("enable_save_figure")
        self._call_env(self._check_env_id(env_id, "enable_save_figure"), "enable_save_figure", figure_path)

    # -- stepping ----------------------------------------------------------------------

    def step(self, actions: Mapping[int, Any]) -> dict[int, BaseEnvTimestep]:
        """Steps each env of ``actions`` with its action; returns their timesteps by env id.

        An env whose episode ends is counted and, with ``auto_reset`` and episodes left,
        reset at once: its timestep keeps the last observation, ``ready_obs`` has the new
        one. An abnormal timestep (``info["abnormal"]``) is returned and its env excluded
        until reset. If an env raises or times out, the others are still stepped; the env
        is excluded until reset and an :class:`EnvManagerError` names it, with the others'
        timesteps in its ``timesteps``.

        Args:
            actions: env id -> action, for envs in :attr:`ready_obs`.

        Returns:
            env id -> ``BaseEnvTimestep(obs, reward, done, info)``, in the order of ``actions``.

        Raises:
            RuntimeError: if the manager is not launched or is closed.
            ValueError: for an env id that is not ready to act (its state is named).
            EnvManagerError: if an env failed (see above), or its auto-reset failed every
                attempt (the manager is then closed).

        Examples:
            >>> with BaseEnvManager(_demo_env_fns(2, length=1), {"auto_reset": False}) as manager:
            ...     manager.launch()
            ...     timesteps = manager.step({0: 1, 1: 1})
            ...     [t.done for t in timesteps.values()], manager.env_states[0]
            ([True, True], <EnvState.NEED_RESET: 6>)
        """
        self._check_open("step")
        self._check_actions(actions)
        timesteps: dict[int, BaseEnvTimestep] = {}
        failures: list[EnvManagerError] = []
        for env_id, action in actions.items():
            try:
                with _time_limit(self._step_timeout, f"env {env_id}'s step"):
                    timestep = self._envs[env_id].step(action)
            except Exception as err:
                self._env_states[env_id] = EnvState.ERROR
                failures.append(self._step_error(env_id, err))
                continue
            timesteps[env_id] = timestep
            try:
                self._after_step(env_id, timestep, None, None)
            except EnvManagerError as err:
                err.timesteps = timesteps
                raise
        if failures:
            raise first_failure(failures, timesteps)
        return timesteps

    # -- shared internals --------------------------------------------------------------

    def _after_step(self, env_id: int, timestep: Any, reset_state: int | None, payload: Any) -> None:
        """Takes a timestep into the manager's state (DI-engine's order of checks).

        ``reset_state``: ``None`` for the in-process manager (this method resets the env);
        else what the worker did after a final step: 0 nothing, 1 reset (``payload`` is the
        new obs), 2 its reset raised (``payload`` is the error).
        """
        try:
            done = timestep.done
            abnormal = is_abnormal_timestep(timestep)
        except AttributeError:
            self._env_states[env_id] = EnvState.ERROR
            raise EnvManagerError(
                f"env {env_id}: step must return a BaseEnvTimestep(obs, reward, done, info), "
                f"got {type(timestep).__name__}: {timestep!r:.200}",
                env_id=env_id,
                method="step",
            ) from None
        if abnormal:
            self._env_states[env_id] = EnvState.ERROR
            return
        if not done:
            self._ready_obs[env_id] = timestep.obs
            return
        self._env_episode_count[env_id] += 1
        if self._env_episode_count[env_id] >= self._episode_num:
            self._env_states[env_id] = EnvState.DONE
        elif not self._auto_reset:
            self._env_states[env_id] = EnvState.NEED_RESET
        elif reset_state is None:
            self._reset_with_retry(env_id, None)
        elif reset_state == 1:
            self._ready_obs[env_id] = payload
        else:
            # the worker's reset failed: that was the first attempt; the rest go the usual way
            self._reset_with_retry(env_id, None, first_error=self._auto_reset_error(env_id, payload))

    def _auto_reset_error(self, env_id: int, payload: Any) -> BaseException:  # pragma: no cover - subprocess only
        return payload

    def _reset_with_retry(self, env_id: int, seed: Seed | None, first_error: BaseException | None = None) -> None:
        """Resets one env: ``max_retry`` attempts in all, then the manager closes and raises."""
        errors: list[BaseException] = [] if first_error is None else [first_error]
        self._env_states[env_id] = EnvState.RESET
        while len(errors) < self._max_retry:
            attempt_seed = seed
            if errors:
                time.sleep(self._retry_waiting_time)
                if self._retry_type == "renew" or self._must_renew(env_id):
                    try:
                        self._renew(env_id)
                    except Exception as err:
                        errors.append(err)
                        continue
                    attempt_seed = self._last_seed[env_id]  # a fresh env gets its seed again
            try:
                obs = self._reset_env(env_id, attempt_seed)
            except Exception as err:
                errors.append(err)
                continue
            self._ready_obs[env_id] = obs
            self._env_states[env_id] = EnvState.RUN
            return
        self._env_states[env_id] = EnvState.ERROR
        last = errors[-1]
        self.close()
        raise EnvManagerError(
            f"env {env_id}: reset failed on all {len(errors)} attempt(s) (max_retry={self._max_retry}, "
            f"retry_type={self._retry_type!r}); {type(self).__name__} is closed. "
            f"Last error: {_describe(last)}",
            env_id=env_id,
            method="reset",
        ) from last

    def _check_open(self, what: str) -> None:
        if self._closed:
            name = type(self).__name__
            if not self._launched_once:
                raise RuntimeError(f"{name} is not launched: {what} is not available; call launch() first")
            raise RuntimeError(f"{name} is closed: {what} is not available; launch() it again to use it")

    def _check_env_id(self, env_id: Any, what: str) -> int:
        return check_env_id(f"{type(self).__name__}.{what}", env_id, self._env_num)

    def _check_reset_param(self, reset_param: Any, what: str) -> None:
        check_reset_param(f"{type(self).__name__}.{what}", reset_param, self._env_num)

    def _refuse_step(self, env_id: Any) -> None:
        raise step_refusal(type(self).__name__, env_id, self._env_states.get(env_id), self._env_num, self._ready_ids())

    def _check_actions(self, actions: Any) -> None:
        if not isinstance(actions, Mapping):
            raise TypeError(
                f"{type(self).__name__}.step: actions must be a dict env id -> action (the ids of ready_obs), "
                f"got {type(actions).__name__}"
            )
        states = self._env_states
        for env_id in actions:
            if states.get(env_id) is not EnvState.RUN or not self._can_step(env_id):
                self._refuse_step(env_id)

    def _can_step(self, env_id: int) -> bool:
        return True

    def _step_error(self, env_id: int, err: BaseException) -> EnvManagerError:
        if isinstance(err, _InProcessTimeout):
            message = (
                f"env {env_id}: step gave no result within step_timeout={self._step_timeout} s and was interrupted; "
                f"the env is excluded until reset({{{env_id}: None}})"
            )
        else:
            message = (
                f"env {env_id}: step raised {_describe(err)}; the env is excluded until reset({{{env_id}: None}})"
            )
        failure = EnvManagerError(message, env_id=env_id, method="step")
        failure.__cause__ = err
        return failure

    # -- backend hooks (the subprocess managers override these) -------------------------

    def _open_envs(self) -> None:
        envs: list[Any] = []
        for i, fn in enumerate(self._env_fn):
            try:
                envs.append(self._build_env(i))
            except Exception as err:
                for env in envs:
                    with contextlib.suppress(Exception):
                        env.close()
                raise EnvManagerError(f"env {i}: env_fn[{i}]() raised {_describe(err)}", env_id=i, method="env_fn") from err
        self._envs = envs

    def _build_env(self, env_id: int) -> Any:
        env = self._env_fn[env_id]()
        if self._env_replay_path is not None:
            env.enable_save_replay(self._env_replay_path[env_id])
        return env

    def _close_envs(self) -> None:
        errors: list[tuple[int, BaseException]] = []
        for i, env in enumerate(self._envs):
            try:
                env.close()
            except Exception as err:  # close the others anyway
                errors.append((i, err))
        self._envs = []
        if errors:
            i, err = errors[0]
            raise EnvManagerError(f"env {i}: close raised {_describe(err)}", env_id=i, method="close") from err

    def _reset_envs(self, env_ids: list[int], seeds: dict[int, Seed | None]) -> None:
        for env_id in env_ids:
            self._reset_with_retry(env_id, seeds[env_id])

    def _reset_env(self, env_id: int, seed: Seed | None) -> Any:
        """One attempt: seeds (if given) and resets env ``env_id``; returns its observation."""
        env = self._envs[env_id]
        kwargs = self._reset_param[env_id]
        with _time_limit(self._reset_timeout, f"env {env_id}'s reset"):
            if seed is not None:
                _apply_seed(env, seed)
            return env.reset(**kwargs) if kwargs else env.reset()

    def _must_renew(self, env_id: int) -> bool:
        return False

    def _renew(self, env_id: int) -> None:
        old = self._envs[env_id]
        with contextlib.suppress(Exception):  # it failed already; a fresh one replaces it anyway
            old.close()
        self._envs[env_id] = self._build_env(env_id)

    def _env_attribute(self, key: str, is_method: bool) -> list[Any]:
        return [getattr(env, key, None) for env in self._envs]

    def _call_env(self, env_id: int, method: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._envs[env_id], method)(*args, **kwargs)


