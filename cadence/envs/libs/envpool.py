"""EnvPool: many copies of one simulator stepped by C++ threads, as one Cadence env.

``MultiThreadedEnvWrapper`` wraps an EnvPool pool that is already built
(``envpool.make(..., env_type="gymnasium")``); ``MultiThreadedEnv`` builds the pool from
a task id. Either is an env of batch size ``[num_workers]`` whose specs come from the
pool's gymnasium spaces (through ``space_to_spec``, as for ``GymWrapper``) and whose
data is laid out as ``GymWrapper`` lays out a gymnasium vector env's: ``"observation"``
(or the keys of a Dict space), ``"reward"`` ``[num_workers, 1]``, ``"done"``,
``"terminated"`` and ``"truncated"`` ``[num_workers, 1]``, and ``"action"`` (one-hot
for discrete actions unless ``categorical_action_encoding=True``).

**Resets.** EnvPool resets an env by itself on the step *after* the one where it is
done: that step ignores the env's action and returns the first observation of the new
episode with a zero reward (gymnasium's ``NEXT_STEP`` autoreset). Cadence does not let
this happen: like every Cadence env, the done sub-envs are reset through ``"_reset"``
right after their done step (``rollout``, ``step_and_maybe_reset`` and the collectors do
it), which calls ``pool.reset(env_id=<the done envs>)``. An explicit reset clears
EnvPool's pending autoreset, so the next step is a real step for every env. Hence the
usual Cadence semantics: the ``"next"`` observation of a done step is the terminal one,
the next root observation is the first of the new episode, and no transition is
lost. ``pool.reset(env_id=...)`` returns the observations of the reset envs only; they
are written back into the batch at their ``info["env_id"]`` rows, the other rows keep
the observations of the last step. Stepping a pool in which a sub-env is done and was
not reset raises ``RuntimeError`` (as gymnasium's vector envs without autoreset do)
rather than returning EnvPool's half-step.

**Seeds.** EnvPool takes its seed when the pool is built (sub-env ``i`` is seeded with
``seed + i``) and cannot be reseeded. ``set_seed(seed)`` therefore rebuilds the pool from
its own configuration with the new seed (``seed`` is folded into the int32 range that
EnvPool accepts) and closes the old one; the new pool must be reset (``env.reset()``,
which ``rollout`` does) before it is stepped. Seeding then reproduces rollouts exactly.

**Speed.** The pool is stepped as one batch, and ``rollout`` takes the shortcut of
``GymWrapper`` (arrays preallocated from the specs, no tensordict per step). Resetting
the done envs costs one more round trip to EnvPool's threads on the steps where some env
is done, which a bare loop that lets EnvPool reset by itself does not pay (and pays
instead with a lost step per episode); ``benchmarks/bench_envpool.py`` measures both.
Only EnvPool's synchronous mode is supported (``batch_size`` equal to ``num_envs``, the
default).

The examples below start with a line that skips them where envpool is not installed.

Examples:
    >>> import pytest; envpool = pytest.importorskip("envpool")  # skips the example without envpool
    >>> from cadence.envs import MultiThreadedEnv
    >>> env = MultiThreadedEnv(4, "CartPole-v1")
    >>> next_seed = env.set_seed(0)
    >>> env.rollout(100, break_when_any_done=False)["next", "observation"].shape
    torch.Size([4, 100, 4])
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
import torch
from packaging.version import InvalidVersion, Version

from cadence.envs.gym_like import default_info_dict_reader
from cadence.envs.libs.gym import GymWrapper, set_gym_backend

__all__ = ["MultiThreadedEnv", "MultiThreadedEnvWrapper"]

_INSTALL_HINT = 'pip install "cadence[envpool]" (or pip install "envpool>=0.9")'

#: keyword arguments of ``envpool.make`` that the wrapper sets itself
_RESERVED_MAKE_KWARGS = ("num_envs", "env_type", "batch_size")

#: attributes that ``envpool.make`` sets on a pool after building it (rendering options)
_POOL_WRAPPER_ATTRS = ("_render_mode", "_render_env_id", "_render_width", "_render_height", "_render_camera_id")


def _import_envpool(caller: str) -> Any:
    """Imports envpool, or raises an ImportError that says how to install it.

    EnvPool releases before 0.9 were built against numpy 1; under numpy 2 they import but
    return corrupted arrays (every env the same observation, ``env_id`` all zeros), so
    they are refused there.
    """
    try:
        import envpool
    except ImportError as err:
        raise ImportError(f"{caller} needs the envpool library, which is not installed: {_INSTALL_HINT}.") from err
    version = getattr(envpool, "__version__", "0")
    try:
        too_old = Version(version) < Version("0.9") and Version(np.__version__) >= Version("2")
    except InvalidVersion:
        too_old = False
    if too_old:
        raise ImportError(
            f"{caller}: envpool {version} was built for numpy 1 and returns corrupted data under numpy "
            f"{np.__version__}; upgrade it: pip install -U \"envpool>=0.9\"."
        )
    return envpool


def _as_int32_seed(seed: int) -> int:
    """Folds any integer into EnvPool's seed range ``[-2**31, 2**31)``; one-to-one on
    any ``2**32`` consecutive integers (so on the 32-bit seeds that ``set_seed`` hands on).

    Examples:
        >>> _as_int32_seed(5), _as_int32_seed(2**32 - 1), _as_int32_seed(-3)
        (5, -1, -3)
    """
    return (int(seed) + 2**31) % 2**32 - 2**31


def _merge_rows(full: Any, part: Any, rows: np.ndarray, num_envs: int) -> Any:
    """``full`` (a batch of ``num_envs``, an array or nested dict of arrays) with ``part``
    written at ``rows``; ``full`` itself is not modified. Entries that are not laid out
    per env (a leading dim other than ``num_envs``/``len(rows)``) are taken from ``part``."""
    if isinstance(part, Mapping):
        if not isinstance(full, Mapping):
            return part
        merged = dict(full)
        for key, value in part.items():
            merged[key] = _merge_rows(full[key], value, rows, num_envs) if key in full else value
        return merged
    if isinstance(part, tuple) and isinstance(full, tuple) and len(part) == len(full):
        return tuple(_merge_rows(f, p, rows, num_envs) for f, p in zip(full, part))
    full_array, part_array = np.asarray(full), np.asarray(part)
    if not full_array.ndim or not part_array.ndim or full_array.shape[0] != num_envs:
        return part
    if part_array.shape[0] != len(rows) or full_array.shape[1:] != part_array.shape[1:]:
        return part
    merged_array = full_array.copy()
    merged_array[rows] = part_array
    return merged_array


def _take_rows(value: Any, order: np.ndarray) -> Any:
    """``value`` (an array or nested dict/tuple of arrays) with its rows in ``order``."""
    if isinstance(value, Mapping):
        return {key: _take_rows(item, order) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(_take_rows(item, order) for item in value)
    array = np.asarray(value)
    return array[order] if array.ndim and array.shape[0] == len(order) else value


def _pool_spaces(pool: Any) -> tuple[Any, Any]:
    """The observation and action spaces of one env of ``pool`` (``None`` if it has none)."""
    with warnings.catch_warnings():
        # EnvPool builds Box spaces from float64 bounds; gymnasium warns when it casts
        # them to the space's float32 dtype, which is the dtype the pool produces.
        warnings.filterwarnings("ignore", message=".*precision lowered.*")
        return getattr(pool, "observation_space", None), getattr(pool, "action_space", None)


class _EnvPoolVectorEnv(gymnasium.vector.VectorEnv):
    """An EnvPool pool seen as a gymnasium vector env *without* autoreset.

    ``reset(options={"reset_mask": mask})`` resets the selected envs and returns the
    observations of the whole batch (those of the other envs are the last step's), as
    gymnasium's vector envs with ``AutoresetMode.DISABLED`` do; ``step`` returns the
    batch in env order. The ``info`` of a partial reset is merged into the batch's the
    same way only when ``merge_info`` is set (``MultiThreadedEnvWrapper`` sets it when an
    info reader is registered; otherwise it holds the reset envs' entries only).
    ``reseed(seed)`` rebuilds the pool with another seed. This is the simulator that
    ``MultiThreadedEnvWrapper`` (a ``GymWrapper``) drives.
    """

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.num_envs = int(pool.config["num_envs"])
        self.metadata = {"autoreset_mode": gymnasium.vector.AutoresetMode.DISABLED, "render_modes": []}
        self.spec = None
        self.merge_info = False
        self.single_observation_space, self.single_action_space = _pool_spaces(pool)
        self.observation_space = gymnasium.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gymnasium.vector.utils.batch_space(self.single_action_space, self.num_envs)
        self._in_order = np.arange(self.num_envs, dtype=np.int32).tobytes()
        self._reset_state()

    def _reset_state(self) -> None:
        self._needs_reset = True  # a fresh pool: no full reset yet
        self._not_reset: np.ndarray | None = None  # envs done at the last step, not reset since
        self._last_obs: Any = None
        self._last_info: dict[str, Any] = {}

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Resets the pool (``seed`` rebuilds it first), or the envs of ``options["reset_mask"]``."""
        mask = None if options is None else options.get("reset_mask")
        if mask is not None:
            mask = np.asarray(mask, dtype=bool).reshape(self.num_envs)
        if seed is not None:
            if mask is not None and not mask.all():
                raise ValueError(
                    "EnvPool cannot reseed part of a pool: a seed is taken when the whole pool is "
                    "rebuilt. Call set_seed(seed) and then a full reset()."
                )
            self.reseed(seed)
        if mask is None or mask.all():
            obs, info = self._unpack_reset(self.pool.reset())
            obs, info = self._in_env_order(obs, info)
            self._needs_reset = False
            self._not_reset = None
        else:
            if self._needs_reset:
                raise RuntimeError(
                    "This EnvPool pool has not been reset since it was built or reseeded (set_seed "
                    "rebuilds it); reset all its envs (env.reset() without '_reset') before a partial reset."
                )
            rows = np.flatnonzero(mask).astype(np.int32)
            if not len(rows):
                return self._last_obs, self._last_info
            part_obs, part_info = self._unpack_reset(self.pool.reset(rows))
            ids = np.asarray(part_info.get("env_id", rows)).reshape(-1)
            if type(part_obs) is np.ndarray and type(self._last_obs) is np.ndarray:  # the common case
                obs = self._last_obs.copy()
                obs[ids] = part_obs
            else:
                obs = _merge_rows(self._last_obs, part_obs, ids, self.num_envs)
            info = _merge_rows(self._last_info, part_info, ids, self.num_envs) if self.merge_info else part_info
            if self._not_reset is not None:
                self._not_reset[ids] = False
                if not self._not_reset.any():
                    self._not_reset = None
        self._last_obs, self._last_info = obs, info
        return obs, info

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Steps every env of the pool with ``actions`` (one row per env, in env order)."""
        if self._needs_reset:
            raise RuntimeError(
                "This EnvPool pool has not been reset since it was built or reseeded (set_seed "
                "rebuilds it); call env.reset() before stepping it."
            )
        if self._not_reset is not None:
            raise RuntimeError(
                f"The EnvPool sub-envs {np.flatnonzero(self._not_reset).tolist()} are done and were not "
                f"reset: reset them (a '_reset' mask, as rollout() and step_and_maybe_reset() do) before "
                f"the next step; EnvPool would otherwise spend that step on its own reset."
            )
        obs, reward, terminated, truncated, info = self.pool.step(actions)
        ids = info.get("env_id")
        if ids is not None and np.asarray(ids).tobytes() != self._in_order:
            order = np.argsort(np.asarray(ids), kind="stable")
            obs, reward, terminated, truncated, info = (
                _take_rows(x, order) for x in (obs, reward, terminated, truncated, info)
            )
        done = np.logical_or(terminated, truncated)
        self._not_reset = done if done.any() else None
        self._last_obs, self._last_info = obs, info
        return obs, reward, terminated, truncated, info

    def close_extras(self, **kwargs: Any) -> None:
        """Closes the pool."""
        self.pool.close()

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _unpack_reset(out: Any) -> tuple[Any, dict[str, Any]]:
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], Mapping):
            return out[0], dict(out[1])
        return out, {}

    def _in_env_order(self, obs: Any, info: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        ids = info.get("env_id")
        if ids is None or np.asarray(ids).tobytes() == self._in_order:
            return obs, info
        order = np.argsort(np.asarray(ids), kind="stable")
        return _take_rows(obs, order), _take_rows(info, order)

    def reseed(self, seed: int) -> None:
        """Replaces the pool by one built from the same configuration with ``seed``
        (folded into int32); the new pool must be reset before it is stepped."""
        old = self.pool
        spec = old.spec
        config = spec.config
        changes: dict[str, Any] = {"seed": _as_int32_seed(seed)}
        if "env_seed" in getattr(config, "_fields", ()):
            changes["env_seed"] = []  # per-env seeds would override the pool's seed
        pool = type(old)(type(spec)(config._replace(**changes)))
        attributes = getattr(old, "__dict__", {})
        for name in _POOL_WRAPPER_ATTRS:
            if name in attributes:
                setattr(pool, name, attributes[name])
        _pool_spaces(pool)  # the pool caches its spaces (built at its first reset otherwise)
        self.pool = pool
        self._reset_state()
        old.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "pool":
            raise AttributeError(name)
        return getattr(self.pool, name)


def _check_pool(env: Any) -> None:
    """Raises if ``env`` is not a synchronous EnvPool pool with gymnasium spaces."""
    config = getattr(env, "config", None)
    if not isinstance(config, Mapping) or "num_envs" not in config or not hasattr(env, "spec"):
        raise TypeError(
            f"MultiThreadedEnvWrapper wraps an EnvPool pool (envpool.make(task_id, env_type='gymnasium', "
            f"num_envs=N)); got {type(env).__name__}."
        )
    space = _pool_spaces(env)[0]
    if not isinstance(space, gymnasium.spaces.Space):
        raise TypeError(
            f"MultiThreadedEnvWrapper needs an EnvPool pool with gymnasium spaces: build it with "
            f"envpool.make(..., env_type='gymnasium'); got {type(env).__name__}, whose observation space "
            f"is {type(space).__name__}."
        )
    batch_size, num_envs = int(config.get("batch_size", 0) or 0), int(config["num_envs"])
    if batch_size not in (0, num_envs):
        raise ValueError(
            f"MultiThreadedEnvWrapper supports EnvPool's synchronous mode only (batch_size == num_envs); "
            f"this pool has num_envs={num_envs} and batch_size={batch_size}."
        )
    if int(config.get("max_num_players", 1)) != 1:
        raise ValueError(
            f"MultiThreadedEnvWrapper supports single-player EnvPool tasks; this pool has "
            f"max_num_players={config['max_num_players']}."
        )


class MultiThreadedEnvWrapper(GymWrapper):
    """Wraps a built EnvPool pool as a Cadence env of batch size ``[num_envs]``.

    The pool is stepped as one batch; done sub-envs are reset through ``"_reset"``
    (``pool.reset(env_id=...)``) right after their done step, so EnvPool's own
    next-step autoreset never runs. ``set_seed`` rebuilds the pool with the new seed
    (EnvPool takes its seed at construction). See the module's docstring for details.

    Args:
        env: a pool built with ``envpool.make(task_id, env_type="gymnasium", num_envs=N)``
            in synchronous mode (the default ``batch_size``).
        device: where the data lives.
        categorical_action_encoding: Discrete actions as indices (``Categorical``) rather
            than one-hot vectors (``OneHot``, the default).
        allow_done_after_reset, run_type_checks: as in ``EnvBase``.

    Raises:
        ImportError: envpool is not installed (the message says how to install it).
        TypeError: ``env`` is not an EnvPool pool with gymnasium spaces.
        ValueError: the pool runs in asynchronous mode or has several players.

    Examples:
        >>> import pytest; envpool = pytest.importorskip("envpool")  # skips the example without envpool
        >>> pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=3, seed=0)
        >>> env = MultiThreadedEnvWrapper(pool, categorical_action_encoding=True)
        >>> env.batch_size, env.action_spec.shape
        (torch.Size([3]), torch.Size([3]))
        >>> env.rollout(5)["next", "reward"].shape
        torch.Size([3, 5, 1])
    """

    _env: _EnvPoolVectorEnv

    def __init__(
        self,
        env: Any,
        *,
        device: torch.device | str | None = None,
        categorical_action_encoding: bool = False,
        allow_done_after_reset: bool = False,
        run_type_checks: bool = False,
    ) -> None:
        _import_envpool(type(self).__name__)
        _check_pool(env)
        with set_gym_backend("gymnasium"):  # EnvPool's spaces are gymnasium's
            super().__init__(
                _EnvPoolVectorEnv(env),
                categorical_action_encoding=categorical_action_encoding,
                device=device,
                allow_done_after_reset=allow_done_after_reset,
                run_type_checks=run_type_checks,
            )

    @property
    def pool(self) -> Any:
        """The EnvPool pool in use (a new one after each ``set_seed``)."""
        return self._env.pool

    @property
    def num_workers(self) -> int:
        """The number of envs in the pool."""
        return self._env.num_envs

    @property
    def task_id(self) -> str:
        """The EnvPool task id (``"CartPole-v1"``...), or the pool's class name if unknown."""
        task = self.__dict__.get("env_name") or self._env.pool.config.get("task_id")
        return str(task) if task else type(self._env.pool).__name__

    def set_info_dict_reader(self, info_dict_reader: default_info_dict_reader) -> MultiThreadedEnvWrapper:
        """Registers a reader of EnvPool's ``info`` dict (``"elapsed_step"``, ...); see
        ``GymLikeEnv.set_info_dict_reader``.

        Examples:
            >>> import pytest; envpool = pytest.importorskip("envpool")  # skips the example without envpool
            >>> from cadence.envs import MultiThreadedEnv, default_info_dict_reader
            >>> env = MultiThreadedEnv(2, "CartPole-v1")
            >>> env = env.set_info_dict_reader(default_info_dict_reader(["elapsed_step"]))
            >>> env.rand_step()["next", "elapsed_step"].tolist()
            [1.0, 1.0]
        """
        self._env.merge_info = True  # partial resets must then give the info of the whole batch
        super().set_info_dict_reader(info_dict_reader)
        return self

    def _set_seed(self, seed: int | None) -> None:
        """Rebuilds the pool with ``seed`` (EnvPool is seeded at construction only)."""
        if seed is not None:
            self._env.reseed(seed)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env={self.task_id}, num_workers={self.num_workers}, "
            f"batch_size={self.batch_size}, device={self.device})"
        )


class MultiThreadedEnv(MultiThreadedEnvWrapper):
    """A batch of ``num_workers`` copies of an EnvPool task, stepped by C++ threads.

    Builds ``envpool.make(env_name, env_type="gymnasium", num_envs=num_workers,
    **create_env_kwargs)`` and wraps it (see ``MultiThreadedEnvWrapper``). Only tasks
    that EnvPool implements can be used (``envpool.list_all_envs()``: classic control,
    Atari, MuJoCo, ...); batch arbitrary Cadence envs with ``SerialEnv``/``ParallelEnv``.

    Args:
        num_workers: the number of envs (the batch size).
        env_name: an EnvPool task id, e.g. ``"CartPole-v1"`` or ``"Pong-v5"``.
        create_env_kwargs: more keyword arguments of ``envpool.make`` (``seed``,
            ``num_threads``, ``max_episode_steps``, ...); ``num_envs``, ``env_type`` and
            ``batch_size`` are set by the wrapper.
        device, categorical_action_encoding, allow_done_after_reset, run_type_checks:
            as in ``MultiThreadedEnvWrapper``.

    Raises:
        ImportError: envpool is not installed (the message says how to install it).
        ValueError: ``env_name`` is not an EnvPool task, ``num_workers`` is not positive,
            or ``create_env_kwargs`` sets what the wrapper sets.

    Examples:
        >>> import pytest; envpool = pytest.importorskip("envpool")  # skips the example without envpool
        >>> env = MultiThreadedEnv(2, "Pendulum-v1", {"seed": 0})
        >>> env.action_spec.shape, env.observation_spec["observation"].shape
        (torch.Size([2, 1]), torch.Size([2, 3]))
        >>> env.rollout(10)["action"].shape
        torch.Size([2, 10, 1])
    """

    def __init__(
        self,
        num_workers: int,
        env_name: str,
        create_env_kwargs: dict[str, Any] | None = None,
        *,
        device: torch.device | str | None = None,
        categorical_action_encoding: bool = False,
        allow_done_after_reset: bool = False,
        run_type_checks: bool = False,
    ) -> None:
        envpool = _import_envpool(type(self).__name__)
        if int(num_workers) < 1:
            raise ValueError(f"MultiThreadedEnv needs num_workers >= 1, got {num_workers}.")
        create_env_kwargs = dict(create_env_kwargs or {})
        reserved = sorted(key for key in _RESERVED_MAKE_KWARGS if key in create_env_kwargs)
        if reserved:
            raise ValueError(
                f"MultiThreadedEnv sets {reserved} itself (num_envs=num_workers, env_type='gymnasium', "
                f"synchronous mode); remove them from create_env_kwargs."
            )
        available = envpool.list_all_envs()
        if env_name not in available:
            raise ValueError(
                f"MultiThreadedEnv: {env_name!r} is not an EnvPool task (envpool.list_all_envs() lists the "
                f"{len(available)} available ones, e.g. 'CartPole-v1', 'Pendulum-v1', 'Pong-v5')."
            )
        self.env_name = env_name
        self.create_env_kwargs = create_env_kwargs
        pool = envpool.make(env_name, env_type="gymnasium", num_envs=int(num_workers), **create_env_kwargs)
        super().__init__(
            pool,
            device=device,
            categorical_action_encoding=categorical_action_encoding,
            allow_done_after_reset=allow_done_after_reset,
            run_type_checks=run_type_checks,
        )
