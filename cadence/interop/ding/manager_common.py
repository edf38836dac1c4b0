"""What DI-engine's three env managers share: env states, errors, config checks, seeds.

:class:`EnvState` (DI-engine's names and values), :class:`EnvManagerError`,
:func:`is_abnormal_timestep`, the checks of a manager's config, the in-process time limit of
:class:`~cadence.interop.ding.managers.BaseEnvManager`, and a small demo env for the examples.

Where these managers differ from DI-engine 0.5.3's, on purpose:

* ``cfg`` may be partial (a dict or an EasyDict): it is merged into ``default_config()``;
  values are checked at construction (DI-engine raises ``AttributeError`` on a missing key).
* an env that fails in ``step`` (raises, times out, dies) is excluded until it is reset and
  the error names it; the other envs and the manager go on (DI-engine's subprocess managers
  close themselves; its ``BaseEnvManager`` re-runs the failed ``step`` with the same action).
  Errors are :class:`EnvManagerError` (a ``RuntimeError``) chained to the env's exception.
* ``info["abnormal"]`` excludes the env in ``BaseEnvManager`` too (DI-engine's ignores it).
* ``step`` refuses env ids that are not ready (DI-engine's ``BaseEnvManager`` steps ``DONE``
  envs; its async manager sends a second action to an env whose step is still out).
* ``ready_obs`` never blocks, and after ``close()`` it (like every call but ``launch``,
  ``close`` and the setup methods) raises ``RuntimeError`` (DI-engine's subprocess
  managers hang there, or whenever no env can become ready).
* the auto-reset of a subprocess env runs in its worker in the same round trip as the
  final step, and the timestep keeps the terminal observation (DI-engine resets in a
  background thread whose errors are lost, or with ``reset_inplace`` returns the first
  observation of the next episode in place of the terminal one).
* timeouts are exact floats (DI-engine's fire at ``timeout + 1`` s and refuse floats); a
  subprocess env that overruns is killed, never left running.
* a renewed env (``retry_type="renew"``, or a dead worker) gets its env's replay path and
  last seed again (DI-engine's renewed env has neither); a failing ``seed()`` counts as a
  failed reset attempt (DI-engine's subprocess managers log it and go on).
* ``reset()`` resets every env it is asked to (DI-engine's skips running envs once
  ``enable_save_replay`` was called).
* the async manager's ``ready_obs_id`` lists the envs of ``ready_obs`` (DI-engine's also
  lists the envs whose step is still out).

Examples:
    >>> EnvState.RUN.name, int(EnvState.DONE)
    ('RUN', 4)
"""

from __future__ import annotations

import contextlib
import enum
import functools
import numbers
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from cadence._utils import quoted
from cadence.envs.worker_errors import WorkerDiedError, WorkerException, WorkerTimeoutError
from cadence.interop.ding.data import BaseEnvTimestep


__all__ = ["MAX_TIMEOUT_S", "EnvManagerError", "EnvState", "Seed", "is_abnormal_timestep", "seconds_are_valid"]

#: the longest timeout or wait a manager takes (one day): a wait longer than that is a hang,
#: and ``inf`` would overflow the waits it bounds (and then be reported as env 0 failing)
MAX_TIMEOUT_S = 86_400.0


def seconds_are_valid(value: Any, allow_none: bool, allow_zero: bool) -> bool:
    """Whether ``value`` is a finite number of seconds within ``(0, MAX_TIMEOUT_S]``
    (``[0, ...]`` with ``allow_zero``), or ``None`` where that is allowed.

    Examples:
        >>> seconds_are_valid(2.5, allow_none=False, allow_zero=False)
        True
        >>> seconds_are_valid(float("inf"), allow_none=True, allow_zero=True)
        False
    """
    if value is None:
        return allow_none
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return (value >= 0 if allow_zero else value > 0) and value <= MAX_TIMEOUT_S

# A seed as the managers hand it to an env: (seed, dynamic_seed); dynamic_seed None means
# "call env.seed(seed)" and let the env's own default decide, as DI-engine does.
Seed = tuple[int, "bool | None"]


class EnvState(enum.IntEnum):
    """The state of one env in a manager, with DI-engine's names and values.

    ``VOID``: not launched (or closed); ``INIT``: built, not reset yet; ``RUN``: ready to
    act (in ``ready_obs``); ``RESET``: being reset; ``DONE``: ran its ``episode_num``
    episodes; ``ERROR``: failed or returned an abnormal timestep, excluded until reset;
    ``NEED_RESET``: finished an episode with ``auto_reset=False``.

    Examples:
        >>> EnvState.RUN, int(EnvState.NEED_RESET)
        (<EnvState.RUN: 2>, 6)
    """

    VOID = 0
    INIT = 1
    RUN = 2
    RESET = 3
    DONE = 4
    ERROR = 5
    NEED_RESET = 6


class EnvManagerError(RuntimeError):
    """An env of a manager failed; the message names the env, the method and what came.

    A ``RuntimeError``, as DI-engine's managers raise. When ``step`` fails for some envs,
    the timesteps of the others are in ``timesteps`` (the manager's state already took
    them in: their next observations are in ``ready_obs``).

    Args:
        message: the error message.
        env_id: the env that failed (``-1`` when not one env).
        method: the env method that failed (``"reset"``, ``"step"``, ``"env_fn"``, ...).
        timesteps: the timesteps of the envs that did step, by env id.

    Examples:
        >>> err = EnvManagerError("env 1: step raised ValueError: bad action", env_id=1, method="step")
        >>> err.env_id, err.method, err.timesteps, isinstance(err, RuntimeError)
        (1, 'step', {}, True)
    """

    def __init__(
        self,
        message: str,
        env_id: int = -1,
        method: str = "",
        timesteps: dict[int, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.env_id = env_id
        self.method = method
        self.timesteps: dict[int, Any] = {} if timesteps is None else timesteps


def is_abnormal_timestep(timestep: Any) -> bool:
    """Whether an env flagged this timestep abnormal (``info["abnormal"]``), as DI-engine reads it.

    ``info`` may be a dict, or a list/tuple of dicts (one per agent): any of them counts.

    Args:
        timestep: what an env's ``step`` returned.

    Returns:
        ``True`` if the timestep is abnormal: the manager then excludes its env until reset.

    Examples:
        >>> is_abnormal_timestep(BaseEnvTimestep(None, None, True, {"abnormal": True}))
        True
        >>> is_abnormal_timestep(BaseEnvTimestep(None, None, False, ({}, {"abnormal": False})))
        False
    """
    info = timestep.info
    if type(info) is dict:  # the common case first: one lookup
        return bool(info.get("abnormal", False))
    if isinstance(info, Mapping):
        return bool(info.get("abnormal", False))
    if isinstance(info, (list, tuple)):
        return any(isinstance(part, Mapping) and bool(part.get("abnormal", False)) for part in info)
    return False


# ---------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------


def _check_config(cfg: Mapping[str, Any], manager: str) -> None:
    """Refuses values that DI-engine would trip over later (or silently misuse)."""

    def fail(key: str, expected: str) -> None:
        raise ValueError(f"{manager} config: {key} must be {expected}, got {quoted(cfg[key])}")

    episode_num = cfg["episode_num"]
    if isinstance(episode_num, bool) or not isinstance(episode_num, numbers.Real) or not episode_num >= 1:
        fail("episode_num", "an int >= 1 or float('inf')")
    max_retry = cfg["max_retry"]
    if isinstance(max_retry, bool) or not isinstance(max_retry, numbers.Integral) or max_retry < 0:
        fail("max_retry", "an int >= 0 (0 and 1 both mean one attempt, no retry)")
    if cfg["retry_type"] not in ("reset", "renew"):
        fail("retry_type", "'reset' (reset the same env again) or 'renew' (build a fresh env)")
    if not isinstance(cfg["auto_reset"], (bool, np.bool_)):
        fail("auto_reset", "a bool")
    for key in ("step_timeout", "reset_timeout"):
        if not seconds_are_valid(cfg[key], allow_none=True, allow_zero=False):
            fail(key, f"None (no timeout) or a number of seconds in (0, {MAX_TIMEOUT_S:g}]")
    if not seconds_are_valid(cfg["retry_waiting_time"], allow_none=False, allow_zero=True):
        fail("retry_waiting_time", f"a number of seconds in [0, {MAX_TIMEOUT_S:g}]")


# ---------------------------------------------------------------------------------------
# In-process timeouts
# ---------------------------------------------------------------------------------------


class _InProcessTimeout(TimeoutError):
    """Raised inside an env's code by the alarm of :func:`_time_limit`."""


@contextlib.contextmanager
def _time_limit(seconds: float | None, what: str) -> Iterator[None]:
    """Interrupts the block with a ``TimeoutError`` after ``seconds``, by ``SIGALRM``.

    Only the main thread of a POSIX process receives signals: elsewhere the block runs
    without a limit (a warning says so). The signal interrupts Python code and sleeps, not
    a C call that never returns to the interpreter. The caller's own SIGALRM handler and
    timer are put back afterwards (DI-engine's watchdog resets them to the default).
    """
    if seconds is None:
        yield
        return
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        warnings.warn(
            f"BaseEnvManager cannot enforce a timeout on {what} here (it needs SIGALRM, i.e. the main "
            "thread of a POSIX process): it runs without one; use SyncSubprocessEnvManager, whose "
            "timeouts kill the env's process",
            RuntimeWarning,
            stacklevel=4,
        )
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise _InProcessTimeout(f"{what} took longer than {seconds} s (interrupted by SIGALRM)")

    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    previous_delay, previous_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_delay > 0:  # the caller had a timer running: give it back what is left
            left = max(previous_delay - (time.monotonic() - started), 1e-6)
            signal.setitimer(signal.ITIMER_REAL, left, previous_interval)


# ---------------------------------------------------------------------------------------
# The in-process manager (and what all managers share)
# ---------------------------------------------------------------------------------------



def _apply_seed(env: Any, seed: Seed) -> None:
    value, dynamic = seed
    if dynamic is None:
        env.seed(value)
    else:
        env.seed(value, dynamic)


def _describe(err: BaseException) -> str:
    """One line on what went wrong: the env's own exception where a worker relayed it."""
    if isinstance(err, WorkerException) and err.remote_traceback.strip():
        return f"{err.remote_traceback.strip().splitlines()[-1]} (in its worker process)"
    if isinstance(err, WorkerTimeoutError):
        return f"no reply within {err.timeout} s (its worker process was killed)"
    if isinstance(err, WorkerDiedError):
        return f"its worker process died ({_describe_exit(err.exitcode)})"
    text = str(err).strip()
    if not text:
        return type(err).__name__
    return f"{type(err).__name__}: {text}"


def _describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "exit code unknown"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


# ---------------------------------------------------------------------------------------
# A tiny env for the examples
# ---------------------------------------------------------------------------------------


class _DemoEnv:
    """A DI-engine env for the docstrings' examples: obs ``[t]`` (float32), reward 1, episodes of
    ``length`` steps; ``reset(start=0)`` starts the count at ``start``."""

    def __init__(self, length: int = 3) -> None:
        self.length = length
        self.observation_space = gym.spaces.Box(0, np.inf, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.reward_space = gym.spaces.Box(0, 1, (1,), np.float32)
        self.last_seed: int | None = None
        self.replay_path: str | None = None
        self.figure_path: str | None = None

    def seed(self, seed: int, dynamic_seed: bool = True) -> None:
        self.last_seed = seed

    def enable_save_replay(self, replay_path: str) -> None:
        self.replay_path = replay_path

    def enable_save_figure(self, figure_path: str) -> None:
        self.figure_path = figure_path

    def reward_shaping(self, transitions: list[dict]) -> list[dict]:
        return [{**t, "reward": 2 * t["reward"]} for t in transitions]

    def reset(self, start: int = 0) -> np.ndarray:
        self._t, self._start = start, start
        return np.array([self._t], np.float32)

    def step(self, action: Any) -> BaseEnvTimestep:
        self._t += 1
        done = self._t - self._start >= self.length
        info = {"eval_episode_return": float(self._t - self._start)} if done else {}
        return BaseEnvTimestep(np.array([self._t], np.float32), np.ones(1, np.float32), done, info)

    def close(self) -> None:
        pass


def _demo_env_fns(n: int, length: int = 3) -> list[Callable[[], _DemoEnv]]:
    """``n`` factories of :class:`_DemoEnv` (for the examples)."""
    return [functools.partial(_DemoEnv, length) for _ in range(n)]


def check_env_id(where: str, env_id: Any, env_num: int) -> int:
    """``env_id`` as an int if it names one of ``env_num`` envs, else a ``ValueError`` saying where."""
    if isinstance(env_id, bool) or not isinstance(env_id, numbers.Integral) or not 0 <= env_id < env_num:
        raise ValueError(f"{where}: env ids are 0..{env_num - 1}, got {env_id!r}")
    return int(env_id)


def check_reset_param(where: str, reset_param: Any, env_num: int) -> None:
    """Refuses a ``reset_param`` that is not a dict env id -> reset kwargs (or ``None``)."""
    if not isinstance(reset_param, Mapping):
        raise TypeError(
            f"{where}: reset_param must be a dict env id -> reset kwargs (a dict, or None), "
            f"got {type(reset_param).__name__}: {reset_param!r}"
        )
    for env_id, kwargs in reset_param.items():
        check_env_id(where, env_id, env_num)
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise TypeError(
                f"{where}: reset_param[{env_id}] must be a dict of reset kwargs or None, "
                f"got {type(kwargs).__name__}: {kwargs!r}"
            )


def step_refusal(manager: str, env_id: Any, state: EnvState | None, env_num: int, ready: list[int]) -> ValueError:
    """The error for a ``step`` action given to an env that cannot act now, saying why."""
    if state is None:
        return ValueError(f"{manager}.step: no env {env_id!r}; env ids are 0..{env_num - 1}")
    hint = {
        EnvState.ERROR: f"it failed or returned an abnormal timestep; reset({{{env_id}: None}}) brings it back",
        EnvState.NEED_RESET: f"its episode ended with auto_reset=False; reset({{{env_id}: None}}) starts another",
        EnvState.DONE: "it ran its episode_num episodes",
    }.get(state, "its previous step has not come back yet" if state == EnvState.RUN else "it is not ready")
    return ValueError(
        f"{manager}.step: env {env_id} cannot act: its state is {state.name} ({hint}); step only the envs "
        f"of ready_obs ({ready})"
    )


def first_failure(failures: list[EnvManagerError], timesteps: dict[int, Any]) -> EnvManagerError:
    """The first of several step failures, the others as notes, the good timesteps attached."""
    first = failures[0]
    for other in failures[1:]:
        first.add_note(f"also: {str(other).splitlines()[0]}")
    first.timesteps = timesteps
    return first
