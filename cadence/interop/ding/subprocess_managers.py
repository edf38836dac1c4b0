"""DI-engine's subprocess env managers: each env in a worker process of Cadence's
:class:`~cadence.envs.workers.WorkerPool`, with DI-engine's semantics and config.

:class:`SyncSubprocessEnvManager` steps the given envs in parallel and waits for all of them;
:class:`AsyncSubprocessEnvManager` returns as soon as ``wait_num`` envs answered (after at
least ``step_wait_timeout`` seconds), and the others join ``ready_obs`` when they come back.

A step costs one message to each env's worker and one reply: the worker runs the env's
``step`` and, when the episode ended and the manager wants it, its ``reset`` too, and sends
back the timestep (with the last observation of the episode) together with the new first
observation. Timeouts are the pool's: a worker that gives no reply in time is killed, so a
stuck env never hangs the manager, and a worker that dies is noticed at once.

Examples:
    >>> from cadence.interop.ding.subprocess_managers import SyncSubprocessEnvManager
    >>> with SyncSubprocessEnvManager(_demo_env_fns(2, length=2), {"episode_num": 1}) as manager:
    ...     manager.launch()
    ...     while not manager.done:
    ...         timesteps = manager.step({i: 0 for i in manager.ready_obs})
    ...     [t.info["eval_episode_return"] for t in timesteps.values()]
    [2.0, 2.0]
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import numbers
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from cadence._utils import quoted
from cadence.envs.worker_errors import RemoteError, WorkerError, WorkerException, WorkerTimeoutError
from cadence.envs.workers import WorkerPool
from cadence.interop.ding.data import BaseEnvTimestep
from cadence.interop.ding.manager_common import (
    first_failure,
    EnvManagerError,
    EnvState,
    Seed,
    _apply_seed,
    _demo_env_fns,  # noqa: F401 - the examples use it
    _describe,
    _describe_exit,
    MAX_TIMEOUT_S,
    is_abnormal_timestep,
    seconds_are_valid,
)
from cadence.interop.ding.managers import BaseEnvManager

__all__ = ["AsyncSubprocessEnvManager", "SyncSubprocessEnvManager"]

# what the worker did after a step, in its reply: (timestep, what, payload)
_NO_RESET, _RESET, _RESET_FAILED = 0, 1, 2
# a close gives the workers this long to close their envs (DI-engine waits 5 s a pipe)
_CLOSE_GRACE_S = 5.0
# the smallest wait the pool accepts, to collect a reply that may already be there
_POLL_S = 1e-3


class _EnvServer:
    """The object a worker serves: one env, and a ``step`` that resets it in the same reply.

    Plain numeric arrays cross the pipe as ``(bytearray, dtype.str, shape)``: pickling an
    ndarray (its dtype above all) costs several times more than the step of a small env.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self._reset_kwargs: Mapping[str, Any] | None = None

    def reset(self, kwargs: Mapping[str, Any] | None, seed: Seed | None) -> Any:
        if seed is not None:
            _apply_seed(self.env, seed)
        self._reset_kwargs = kwargs  # the auto-resets of this env use them too
        return self.env.reset(**kwargs) if kwargs else self.env.reset()

    def step(self, action: Any, reset_if_done: bool) -> tuple[Any, ...]:
        timestep = self.env.step(action)
        what, payload = _NO_RESET, None
        # a malformed timestep is reported by the manager, which names the env
        if reset_if_done and getattr(timestep, "done", False) and not _abnormal(timestep):
            kwargs = self._reset_kwargs
            try:
                payload = self.env.reset(**kwargs) if kwargs else self.env.reset()
                what = _RESET
            except Exception as err:  # the manager retries it as DI-engine does
                what, payload = _RESET_FAILED, RemoteError(err)
        if type(timestep) is BaseEnvTimestep:
            obs, reward, done, info = timestep
            if _packable(obs) and _packable(reward):
                return (
                    bytearray(obs), obs.dtype.str, obs.shape,
                    bytearray(reward), reward.dtype.str, reward.shape,
                    done, info, what, payload,
                )  # fmt: skip
        return timestep, what, payload

    def step_packed(self, data: bytearray, dtype: str, shape: tuple[int, ...], reset_if_done: bool) -> tuple[Any, ...]:
        return self.step(_unpack(data, dtype, shape), reset_if_done)

    def env_getattr(self, key: str) -> Any:
        return getattr(self.env, key, None)

    def env_call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return getattr(self.env, method)(*args, **kwargs)

    def close(self) -> None:
        self.env.close()


def _packable(value: Any) -> bool:
    return type(value) is np.ndarray and value.dtype.kind in "biufc" and value.flags.c_contiguous


def _unpack(data: bytearray, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    # over a bytearray, the array is writable and owns no copy
    return np.frombuffer(data, dtype).reshape(shape)


def _timestep_of(reply: tuple[Any, ...]) -> tuple[Any, int, Any]:
    """A step reply as ``(timestep, what the worker did after it, payload)``."""
    if len(reply) == 3:
        return reply
    obs, obs_dtype, obs_shape, reward, reward_dtype, reward_shape, done, info, what, payload = reply
    timestep = BaseEnvTimestep(
        np.frombuffer(obs, obs_dtype).reshape(obs_shape),
        np.frombuffer(reward, reward_dtype).reshape(reward_shape),
        done,
        info,
    )
    return timestep, what, payload


def _abnormal(timestep: Any) -> bool:
    try:
        return is_abnormal_timestep(timestep)
    except AttributeError:
        return False


class _ServerFactory:
    """Builds a worker's :class:`_EnvServer`; ``replay_path`` is read when the worker starts."""

    def __init__(self, env_fn: Callable[[], Any], replay_path: str | None) -> None:
        self.env_fn = env_fn
        self.replay_path = replay_path

    def __call__(self) -> _EnvServer:
        env = self.env_fn()
        if self.replay_path is not None:
            env.enable_save_replay(self.replay_path)
        return _EnvServer(env)


class AsyncSubprocessEnvManager(BaseEnvManager):
    """Each env in its own worker process; ``step`` returns once ``wait_num`` envs answered.

    DI-engine's ``AsyncSubprocessEnvManager``, on Cadence's :class:`~cadence.envs.workers.WorkerPool`.
    :meth:`step` sends each given env its action and then gathers replies, from these envs
    and from those still out from earlier steps, until every one came back, or until at
    least ``wait_num`` did, at least ``step_wait_timeout`` seconds passed and one of them can
    act again. The others stay out: they are neither in ``ready_obs`` nor may they step,
    and a later :meth:`step` (``step({})`` too) collects them.

    Everything else is :class:`~cadence.interop.ding.managers.BaseEnvManager`'s, with these
    differences. Auto-reset happens in the worker, in the same reply as the final step.
    ``step_timeout`` bounds each step from when it was sent: an env that overruns it has
    its worker killed and raises :class:`~cadence.interop.ding.managers.EnvManagerError`
    (``None``: no bound, a stuck env then stays out forever; a dead worker is always
    noticed). ``reset_timeout`` bounds a reset (``None``: ``connect_timeout``, as DI-engine's
    reset waits that long). Resetting an env whose worker died or was killed starts a fresh
    worker process, as does each retry of a failed reset with ``retry_type="renew"``.

    Config keys on top of the base ones (DI-engine's names and defaults): ``wait_num`` (2),
    ``step_wait_timeout`` (0.01 s), ``connect_timeout`` (60 s: a worker's start, and
    attribute reads), ``context`` (``"fork"``, ``"spawn"`` on Windows: the workers' start
    method). Accepted with no effect here: ``shared_memory`` and ``copy_on_get``
    (observations travel in the one reply of each step), ``reset_inplace`` (the worker
    always resets in place, and the timestep keeps the episode's last observation).

    Args:
        env_fn: one callable per env, run in the env's worker (under ``"spawn"`` they must pickle).
        cfg: the manager config (merged into :meth:`default_config`).

    Raises:
        TypeError, ValueError: as :class:`~cadence.interop.ding.managers.BaseEnvManager`,
            and for the keys above.

    Examples:
        >>> manager = AsyncSubprocessEnvManager(_demo_env_fns(3), {"wait_num": 1, "step_wait_timeout": 0})
        >>> manager.launch()
        >>> timesteps = manager.step({0: 1, 1: 1, 2: 1})
        >>> len(timesteps) >= 1, sorted(set(timesteps) | set(manager.ready_obs) | set(manager.stepping_env))
        (True, [0, 1, 2])
        >>> manager.close()
    """

    config: ClassVar[dict[str, Any]] = dict(
        episode_num=float("inf"),
        max_retry=1,
        step_timeout=None,
        auto_reset=True,
        retry_type="reset",
        reset_timeout=None,
        retry_waiting_time=0.1,
        # accepted, no effect: observations come back in the step's reply
        shared_memory=True,
        copy_on_get=True,
        # the workers' start method
        context="spawn" if platform.system().lower() == "windows" else "fork",
        # step returns once this many envs answered ...
        wait_num=2,
        # ... and at least this many seconds passed (None: wait for all)
        step_wait_timeout=0.01,
        # seconds a worker may take to start (and to answer an attribute read)
        connect_timeout=60,
        # accepted, no effect: the worker always resets in place, keeping the last obs in the timestep
        reset_inplace=False,
    )

    def __init__(self, env_fn: Sequence[Callable[[], Any]], cfg: Mapping[str, Any] | None = None) -> None:
        super().__init__(env_fn, cfg)
        self._context: str = self._cfg.context
        self._wait_num: float = self._cfg.wait_num
        self._step_wait_timeout: float | None = self._cfg.step_wait_timeout
        self._connect_timeout: float | None = self._cfg.connect_timeout
        self._pool: WorkerPool | None = None
        self._factories: list[_ServerFactory] = []
        self._stepping: dict[int, float] = {}  # env id -> the monotonic time its step must be back by

    def _check_config(self, cfg: Mapping[str, Any]) -> None:
        super()._check_config(cfg)
        name = type(self).__name__
        methods = multiprocessing.get_all_start_methods()
        if cfg["context"] not in methods:
            raise ValueError(f"{name} config: context must be one of {methods}, got {cfg['context']!r}")
        wait_num = cfg["wait_num"]
        if isinstance(wait_num, bool) or not isinstance(wait_num, numbers.Real) or not wait_num >= 1:
            raise ValueError(f"{name} config: wait_num must be an int >= 1 or float('inf'), got {wait_num!r}")
        for key, allow_zero in (("step_wait_timeout", True), ("connect_timeout", False)):
            value = cfg[key]
            if not seconds_are_valid(value, allow_none=True, allow_zero=allow_zero):
                bounds = f"[0, {MAX_TIMEOUT_S:g}]" if allow_zero else f"(0, {MAX_TIMEOUT_S:g}]"
                raise ValueError(
                    f"{name} config: {key} must be None or a number of seconds in {bounds}, got {quoted(value)}"
                )

    # -- properties --------------------------------------------------------------------

    def _ready_ids(self) -> list[int]:
        # the envs whose step is still out are not ready (DI-engine's ready_obs_id lists them)
        stepping = self._stepping
        return [i for i, state in self._env_states.items() if state == EnvState.RUN and i not in stepping]

    @property
    def ready_env(self) -> list[int]:
        """DI-engine's name for :attr:`ready_obs_id`: the envs ``RUN`` and not still stepping.

        Examples:
            >>> with AsyncSubprocessEnvManager(_demo_env_fns(2)) as manager:
            ...     manager.launch()
            ...     manager.ready_env
            [0, 1]
        """
        return self.ready_obs_id

    @property
    def stepping_env(self) -> list[int]:
        """The ids of the envs whose step was sent and has not come back yet.

        Examples:
            >>> with AsyncSubprocessEnvManager(_demo_env_fns(2)) as manager:
            ...     manager.launch()
            ...     manager.stepping_env
            []
        """
        return sorted(self._stepping)

    @property
    def pids(self) -> list[int | None]:
        """The process id of each env's worker (``None`` when it has none: not launched, closed).

        Examples:
            >>> with AsyncSubprocessEnvManager(_demo_env_fns(2)) as manager:
            ...     manager.launch()
            ...     all(isinstance(pid, int) for pid in manager.pids)
            True
        """
        if self._pool is None:
            return [None] * self._env_num
        return self._pool.pids

    # -- stepping ----------------------------------------------------------------------

    def step(self, actions: Mapping[int, Any]) -> dict[int, BaseEnvTimestep]:
        """Sends each env of ``actions`` its action and returns the timesteps that came back.

        See the class docstring for when it returns; the result may hold envs stepped by
        earlier calls and lack some of ``actions``. Otherwise as
        :meth:`~cadence.interop.ding.managers.BaseEnvManager.step`.

        Args:
            actions: env id -> action, for envs in :attr:`ready_obs`; ``{}`` only collects.

        Returns:
            env id -> ``BaseEnvTimestep``, for the envs that answered.

        Raises:
            RuntimeError: if the manager is not launched or is closed.
            ValueError: for an env id that is not ready to act.
            EnvManagerError: if an env raised, timed out (its worker is killed) or died; or
                its auto-reset failed every attempt (the manager is then closed).

        Examples:
            >>> with AsyncSubprocessEnvManager(_demo_env_fns(2), {"wait_num": 2}) as manager:
            ...     manager.launch()
            ...     sorted(manager.step({0: 1, 1: 1}))
            [0, 1]
        """
        self._check_open("step")
        self._check_actions(actions)
        failures: list[EnvManagerError] = []
        deadline = math.inf if self._step_timeout is None else time.monotonic() + self._step_timeout
        for env_id, action in actions.items():
            try:
                self._send_step(env_id, action, self._reset_if_done(env_id))
            except WorkerError as err:
                failures.append(self._worker_failure(env_id, err))
                continue
            self._stepping[env_id] = deadline
        timesteps: dict[int, BaseEnvTimestep] = {}
        want = max(1, min(self._wait_num, len(actions)))
        swt = self._step_wait_timeout
        started = time.monotonic()
        try:
            while self._stepping:
                self._set_timeout(None)  # pool.ready() and recv() wait as told below
                now = time.monotonic()
                # a failure counts as an answer (it is reported once the others are in)
                enough = len(timesteps) + len(failures) >= want and (
                    bool(failures) or any(self._env_states[i] == EnvState.RUN for i in timesteps)
                )
                if enough and swt is not None and now - started >= swt:
                    break
                until = min(self._stepping.values())
                if enough and swt is not None:
                    until = min(until, started + swt)
                if until <= now:  # step deadlines passed: collect those envs, or time them out
                    for env_id in [i for i, d in self._stepping.items() if d <= now]:
                        self._collect(env_id, timesteps, failures, wait=_POLL_S)
                    continue
                ready = self._pool.ready(list(self._stepping), timeout=None if until == math.inf else until - now)
                for env_id in ready:
                    self._collect(env_id, timesteps, failures, wait=None)
        except BaseException:
            self._abandon_stepping()
            raise
        if failures:
            raise first_failure(failures, timesteps)
        return timesteps

    def _reset_if_done(self, env_id: int) -> bool:
        return self._auto_reset and self._env_episode_count[env_id] + 1 < self._episode_num

    def _send_step(self, env_id: int, action: Any, reset_if_done: bool) -> None:
        if type(action) is np.ndarray and _packable(action):
            self._pool.send(env_id, "step_packed", bytearray(action), action.dtype.str, action.shape, reset_if_done)
        else:
            self._pool.send(env_id, "step", action, reset_if_done)

    def _collect(
        self,
        env_id: int,
        timesteps: dict[int, BaseEnvTimestep],
        failures: list[EnvManagerError],
        wait: float | None,
    ) -> None:
        """Reads env ``env_id``'s step reply (waiting at most ``wait`` s) into the manager's state."""
        if wait is not None:
            self._set_timeout(wait)
        try:
            reply = self._pool.recv(env_id)
        except WorkerError as err:
            del self._stepping[env_id]
            failures.append(self._worker_failure(env_id, err))
            return
        finally:
            if wait is not None:
                self._set_timeout(None)
        del self._stepping[env_id]
        self._take_reply(env_id, reply, timesteps, failures)

    def _take_reply(
        self, env_id: int, reply: Any, timesteps: dict[int, BaseEnvTimestep], failures: list[EnvManagerError]
    ) -> None:
        timestep, what, payload = _timestep_of(reply)
        timesteps[env_id] = timestep
        try:
            self._after_step(env_id, timestep, what, payload)
        except EnvManagerError as err:
            if self._closed:  # its auto-reset failed every attempt: nothing more to collect
                err.timesteps = timesteps
                raise
            del timesteps[env_id]
            failures.append(err)

    def _worker_failure(self, env_id: int, err: WorkerError) -> EnvManagerError:
        self._env_states[env_id] = EnvState.ERROR
        back = f"the env is excluded until reset({{{env_id}: None}})"
        if isinstance(err, WorkerTimeoutError):
            message = (
                f"env {env_id}: step gave no reply within step_timeout={self._step_timeout} s; its worker process "
                f"was killed and {back} starts a new one"
            )
        elif isinstance(err, WorkerException):
            message = f"env {env_id}: step raised {_describe(err)}; {back}\n\nTraceback in the worker:\n{err.remote_traceback.rstrip()}"
        else:
            exitcode = getattr(err, "exitcode", None)
            message = (
                f"env {env_id}: its worker process died during step ({_describe_exit(exitcode)}); "
                f"{back} starts a new one"
            )
        failure = EnvManagerError(message, env_id=env_id, method="step")
        failure.__cause__ = err
        return failure

    def _abandon_stepping(self) -> None:
        """After an interruption: the replies still out are dropped and their envs need a reset."""
        if self._pool is not None and self._stepping and not self._closed:
            self._pool.abandon(list(self._stepping))
            for env_id in self._stepping:
                self._env_states[env_id] = EnvState.ERROR
        self._stepping.clear()

    def _can_step(self, env_id: int) -> bool:
        return env_id not in self._stepping

    def _set_timeout(self, seconds: float | None) -> None:
        pool = self._pool
        if pool.timeout != seconds:
            pool.timeout = seconds

    def _reset_wait(self) -> float | None:
        return self._reset_timeout if self._reset_timeout is not None else self._connect_timeout

    # -- backend hooks -----------------------------------------------------------------

    def _open_envs(self) -> None:
        paths = self._env_replay_path or [None] * self._env_num
        self._factories = [_ServerFactory(fn, path) for fn, path in zip(self._env_fn, paths)]
        pool = WorkerPool(
            self._factories, timeout=self._connect_timeout, start_method=self._context, name=type(self).__name__
        )
        try:
            pool.start()  # closes the pool itself if a worker fails
        except WorkerError as err:
            i = err.index
            raise EnvManagerError(
                f"env {i}: env_fn[{i}]() failed in its worker process: {_describe(err)}", env_id=i, method="env_fn"
            ) from err
        self._pool = pool
        self._stepping = {}

    def _close_envs(self) -> None:
        pool, self._pool = self._pool, None
        self._stepping = {}
        if pool is not None:
            pool.close(timeout=_CLOSE_GRACE_S)

    def _reset_envs(self, env_ids: list[int], seeds: dict[int, Seed | None]) -> None:
        # One round: every env resets in parallel; the failures then retry one by one.
        pool = self._pool
        for env_id in env_ids:
            self._drain(env_id)
        failures: dict[int, BaseException] = {}
        sent: list[int] = []
        for env_id in env_ids:
            self._env_states[env_id] = EnvState.RESET
            seed = seeds[env_id]
            try:
                if not pool.is_alive(env_id):
                    self._renew(env_id)
                    seed = self._last_seed[env_id]
                pool.send(env_id, "reset", self._reset_param[env_id], seed)
            except Exception as err:
                failures[env_id] = err
                continue
            sent.append(env_id)
        wait = self._reset_wait()
        deadline = None if wait is None else time.monotonic() + wait
        received: set[int] = set()
        try:
            for env_id in sent:
                self._set_timeout(None if deadline is None else max(deadline - time.monotonic(), _POLL_S))
                try:
                    obs = pool.recv(env_id)
                except WorkerError as err:
                    failures[env_id] = err
                    continue
                finally:
                    received.add(env_id)
                self._ready_obs[env_id] = obs
                self._env_states[env_id] = EnvState.RUN
        except BaseException:
            unread = [i for i in sent if i not in received]
            pool.abandon(unread)
            for env_id in unread:
                self._env_states[env_id] = EnvState.ERROR
            raise
        for env_id in env_ids:
            if env_id in failures:
                self._reset_with_retry(env_id, seeds[env_id], first_error=failures[env_id])

    def _drain(self, env_id: int) -> None:
        """Reads and drops the reply of a step still out (a reset follows; errors do not matter)."""
        if env_id not in self._stepping:
            return
        deadline = self._stepping.pop(env_id)
        wait = self._reset_wait() if deadline == math.inf else max(deadline - time.monotonic(), _POLL_S)
        self._set_timeout(wait)
        try:
            self._pool.recv(env_id)
        except WorkerError:
            pass  # a dead or killed worker is restarted by the reset

    def _reset_env(self, env_id: int, seed: Seed | None) -> Any:
        pool = self._pool
        if not pool.is_alive(env_id):
            self._renew(env_id)
            seed = seed if seed is not None else self._last_seed[env_id]
        self._set_timeout(self._reset_wait())
        return pool.call("reset", self._reset_param[env_id], seed, indices=[env_id])[0]

    def _must_renew(self, env_id: int) -> bool:
        return not self._pool.is_alive(env_id)

    def _renew(self, env_id: int) -> None:
        paths = self._env_replay_path
        self._factories[env_id].replay_path = None if paths is None else paths[env_id]
        self._stepping.pop(env_id, None)
        self._set_timeout(self._connect_timeout)
        self._pool.restart(env_id)

    def _auto_reset_error(self, env_id: int, payload: Any) -> BaseException:
        remote: RemoteError = payload
        err = WorkerException(
            f"env {env_id}: its auto-reset raised {remote.type_name}: {remote.message}",
            index=env_id,
            method="reset",
            remote_traceback=remote.traceback,
            remote_exception=remote.exception(),
        )
        return err

    def _env_attribute(self, key: str, is_method: bool) -> list[Any]:
        if is_method:
            return [functools.partial(self._call_env, i, key) for i in range(self._env_num)]
        self._refuse_if_stepping(key)
        self._set_timeout(self._connect_timeout)
        try:
            return self._pool.call("env_getattr", key)
        except WorkerError as err:
            raise EnvManagerError(
                f"env {err.index}: reading its attribute {key!r} failed: {_describe(err)}",
                env_id=err.index,
                method=key,
            ) from err

    def _call_env(self, env_id: int, method: str, *args: Any, **kwargs: Any) -> Any:
        self._check_open(method)
        self._refuse_if_stepping(method, [env_id])
        self._set_timeout(self._connect_timeout)
        try:
            return self._pool.call("env_call", method, args, kwargs, indices=[env_id])[0]
        except WorkerError as err:
            raise EnvManagerError(
                f"env {env_id}: {method} raised {_describe(err)}", env_id=env_id, method=method
            ) from err

    def _refuse_if_stepping(self, what: str, env_ids: Sequence[int] | None = None) -> None:
        busy = sorted(self._stepping if env_ids is None else set(env_ids) & set(self._stepping))
        if busy:
            raise RuntimeError(
                f"{type(self).__name__}: {what} needs envs {busy}, whose steps have not come back yet; "
                "collect them with step({}) first"
            )


class SyncSubprocessEnvManager(AsyncSubprocessEnvManager):
    """Each env in its own worker process; ``step`` waits for every env it was given.

    DI-engine's ``SyncSubprocessEnvManager``: :class:`AsyncSubprocessEnvManager` with
    ``wait_num=inf`` and ``step_wait_timeout=None``, and a step path that sends every action
    and then reads the replies in order (one message each way per env per step). The
    timesteps come in the order of ``actions``; interaction is reproducible.

    Args:
        env_fn: one callable per env, run in the env's worker.
        cfg: the manager config (merged into :meth:`default_config`; the keys of
            :class:`AsyncSubprocessEnvManager`, ``wait_num`` and ``step_wait_timeout`` unused).

    Examples:
        >>> with SyncSubprocessEnvManager(_demo_env_fns(2, length=3), {"episode_num": 1}) as manager:
        ...     manager.seed(0)
        ...     manager.launch()
        ...     _ = manager.step({0: 1, 1: 1})
        ...     manager.ready_obs
        {0: array([1.], dtype=float32), 1: array([1.], dtype=float32)}
    """

    config: ClassVar[dict[str, Any]] = dict(
        AsyncSubprocessEnvManager.config,
        wait_num=float("inf"),  # all the envs
        step_wait_timeout=None,
    )

    def step(self, actions: Mapping[int, Any]) -> dict[int, BaseEnvTimestep]:
        """Steps each env of ``actions`` in its worker, in parallel; returns all their timesteps.

        As :meth:`~cadence.interop.ding.managers.BaseEnvManager.step`; each env's reply must
        come within ``step_timeout`` of the send, or its worker is killed.

        Args:
            actions: env id -> action, for envs in :attr:`ready_obs`.

        Returns:
            env id -> ``BaseEnvTimestep``, in the order of ``actions``.

        Raises:
            RuntimeError: if the manager is not launched or is closed.
            ValueError: for an env id that is not ready to act.
            EnvManagerError: if an env raised, timed out or died (the others' timesteps are
                in its ``timesteps``), or its auto-reset failed every attempt (the manager
                is then closed).

        Examples:
            >>> with SyncSubprocessEnvManager(_demo_env_fns(2, length=1)) as manager:
            ...     manager.launch()
            ...     timesteps = manager.step({1: 0, 0: 0})
            ...     list(timesteps), timesteps[0].obs, manager.ready_obs[0]
            ([1, 0], array([1.], dtype=float32), array([0.], dtype=float32))
        """
        if self._closed:
            self._check_open("step")
        self._check_actions(actions)
        pool = self._pool
        count, episode_num, auto_reset = self._env_episode_count, self._episode_num, self._auto_reset
        send_step = self._send_step
        failures: list[EnvManagerError] = []
        sent: list[int] = []
        for env_id, action in actions.items():
            try:
                send_step(env_id, action, auto_reset and count[env_id] + 1 < episode_num)
            except WorkerError as err:
                failures.append(self._worker_failure(env_id, err))
                continue
            sent.append(env_id)
        step_timeout = self._step_timeout
        deadline = None if step_timeout is None else time.monotonic() + step_timeout
        timesteps: dict[int, BaseEnvTimestep] = {}
        read = 0
        try:
            for env_id in sent:
                # set each time: an auto-reset retried in between may have changed it
                if deadline is not None:
                    pool.timeout = max(deadline - time.monotonic(), _POLL_S)
                elif pool.timeout is not None:
                    pool.timeout = None
                try:
                    reply = pool.recv(env_id)
                except WorkerError as err:
                    read += 1
                    failures.append(self._worker_failure(env_id, err))
                    continue
                read += 1
                self._take_reply(env_id, reply, timesteps, failures)
        except BaseException:
            if not self._closed:  # interrupted: drop the replies still out, their envs need a reset
                unread = sent[read:]
                pool.abandon(unread)
                for env_id in unread:
                    self._env_states[env_id] = EnvState.ERROR
            raise
        if failures:
            raise first_failure(failures, timesteps)
        return timesteps
