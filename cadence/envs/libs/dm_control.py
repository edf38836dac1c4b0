"""The DeepMind Control Suite: ``DMControlWrapper`` around a built env, ``DMControlEnv`` by name.

Observations keep dm_control's names and dtypes (``"position"``, ``"velocity"``...,
float64; a scalar observation gets shape ``(1,)``); the action is a float64 ``Bounded``
spec read from the env's ``BoundedArray``; the reward is float64 of shape ``(1,)``. A
dm_control episode ends either at its time limit (the last step keeps discount 1: the
env is *truncated*) or by a termination (discount 0: *terminated*).

``from_pixels=True`` adds the frame rendered by ``physics.render`` as ``"pixels"``
(uint8, ``H x W x 3``). MuJoCo renders through OpenGL; without a display, dm_control
needs ``MUJOCO_GL`` set to a headless backend before it is imported. When it is not set,
importing dm_control through this module sets it to ``"egl"`` if ``libEGL`` is found,
else to ``"osmesa"`` if ``libOSMesa`` is, else leaves dm_control to choose.

``get_simulator_state``/``set_simulator_state`` capture and restore everything that
decides the env's future (physics, the task's random state, the step counter), so that a
checkpoint resumes a run exactly.

The examples below start with a line that skips them where dm_control is not installed.

Examples:
    >>> import pytest; dm_control = pytest.importorskip("dm_control")  # skips without dm_control
    >>> from cadence.envs.libs.dm_control import DMControlEnv
    >>> env = DMControlEnv("cheetah", "run")
    >>> next_seed = env.set_seed(0)
    >>> env.rollout(10)["next", "velocity"].shape
    torch.Size([10, 9])
"""

from __future__ import annotations

import ctypes.util
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from cadence._utils import ClassProperty
from cadence.data import Bounded, Categorical, Composite, TensorSpec, Unbounded
from cadence.envs.gym_like import GymLikeEnv

__all__ = ["DMControlEnv", "DMControlWrapper"]

_INSTALL_HINT = 'pip install "cadence[dm_control]"'


def _default_gl_backend() -> str | None:
    """The headless OpenGL backend to give dm_control when ``MUJOCO_GL`` is unset."""
    if ctypes.util.find_library("EGL"):
        return "egl"
    if ctypes.util.find_library("OSMesa"):
        return "osmesa"
    return None


def _import_dm_control(caller: str = "DMControlEnv") -> Any:
    """Imports dm_control (choosing a headless GL backend first), or raises an ImportError
    that says how to install it."""
    if "MUJOCO_GL" not in os.environ:
        backend = _default_gl_backend()
        if backend is not None:
            os.environ["MUJOCO_GL"] = backend
    try:
        import dm_control
        from dm_control import suite  # noqa: F401 - loads the suite submodule
    except ImportError as err:
        raise ImportError(f"{caller} needs the dm_control library, which is not installed: {_INSTALL_HINT}.") from err
    return dm_control


def _torch_dtype(np_dtype: Any) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype=np_dtype)).dtype


def _array_to_spec(array_spec: Any, device: torch.device | None) -> TensorSpec:
    """A dm_env ``Array``/``BoundedArray`` spec as a Cadence spec; scalars get shape ``(1,)``."""
    shape = tuple(array_spec.shape) or (1,)
    dtype = _torch_dtype(array_spec.dtype)
    if hasattr(array_spec, "minimum") and hasattr(array_spec, "maximum"):
        low = torch.tensor(np.array(array_spec.minimum), dtype=dtype).expand(shape).clone()
        high = torch.tensor(np.array(array_spec.maximum), dtype=dtype).expand(shape).clone()
        return Bounded(low, high, shape=shape, dtype=dtype, device=device)
    return Unbounded(shape=shape, dtype=dtype, device=device)


def _suite_tasks() -> dict[str, list[str]]:
    """dm_control's suite tasks, domain -> task names ({} without dm_control)."""
    try:
        suite = _import_dm_control().suite
    except ImportError:
        return {}
    tasks: dict[str, list[str]] = {}
    for domain, task in suite.ALL_TASKS:
        tasks.setdefault(domain, []).append(task)
    return tasks


class DMControlWrapper(GymLikeEnv):
    """Wraps a built dm_control environment (``dm_control.suite.load(...)``) as a Cadence env.

    Args:
        env: a ``dm_control.rl.control.Environment`` (or another ``dm_env.Environment``
            whose observations are a dict of arrays).
        from_pixels: add the frame rendered by ``env.physics.render`` as ``"pixels"``.
        pixels_only: with ``from_pixels``, drop the state observations.
        frame_skip: repeat each action this many times, summing the rewards and stopping
            early at the end of an episode.
        device: where the data lives.
        batch_size: must be empty (dm_control envs are single; batch them with
            ``SerialEnv``/``ParallelEnv``).
        render_kwargs: keyword arguments of ``physics.render`` (``height``, ``width``,
            ``camera_id``); dm_control's defaults (240 x 320, camera 0) otherwise.
        allow_done_after_reset, auto_reset, auto_reset_replace, run_type_checks: as in
            ``EnvBase``.

    Raises:
        ValueError: a non-empty ``batch_size`` or ``frame_skip < 1``.
        RuntimeError: ``from_pixels=True`` and no OpenGL backend renders here.

    Examples:
        >>> import pytest; dm_control = pytest.importorskip("dm_control")  # skips without dm_control
        >>> suite = DMControlWrapper.lib.suite  # through Cadence: picks a headless GL backend first
        >>> env = DMControlWrapper(suite.load("cartpole", "balance"))
        >>> env.action_spec.shape, env.observation_spec["position"].shape
        (torch.Size([1]), torch.Size([3]))
        >>> env.reward_spec.dtype
        torch.float64
    """

    #: the suite's tasks as ``[(domain, [task, ...]), ...]`` (empty without dm_control)
    available_envs = ClassProperty(lambda cls: list(_suite_tasks().items()))
    #: the dm_control module (imported on first access)
    lib = ClassProperty(lambda cls: _import_dm_control(cls.__name__))

    def __init__(
        self,
        env: Any,
        *,
        from_pixels: bool = False,
        pixels_only: bool = True,
        frame_skip: int = 1,
        device: torch.device | str | None = None,
        batch_size: torch.Size | tuple[int, ...] | list[int] | None = None,
        render_kwargs: Mapping[str, Any] | None = None,
        allow_done_after_reset: bool = False,
        auto_reset: bool = False,
        auto_reset_replace: bool = True,
        run_type_checks: bool = False,
    ) -> None:
        if batch_size is not None and torch.Size(batch_size) != torch.Size():
            raise ValueError(
                f"{type(self).__name__}: batch_size must be empty, got {tuple(batch_size)}; batch several "
                "dm_control envs with SerialEnv or ParallelEnv."
            )
        if frame_skip < 1:
            raise ValueError(f"frame_skip must be >= 1, got {frame_skip}.")
        super().__init__(
            device=device,
            allow_done_after_reset=allow_done_after_reset,
            auto_reset=auto_reset,
            auto_reset_replace=auto_reset_replace,
            run_type_checks=run_type_checks,
        )
        self._env = env
        self.from_pixels = from_pixels
        self.pixels_only = pixels_only and from_pixels
        self.frame_skip = frame_skip
        self.render_kwargs = dict(render_kwargs or {})
        self._build_specs()

    # ------------------------------------------------------------------ specs
    def _build_specs(self) -> None:
        device = self.device
        observation_spec = self._env.observation_spec()
        children = {} if self.pixels_only else {k: _array_to_spec(s, device) for k, s in observation_spec.items()}
        if self.from_pixels:
            self._env.reset()  # a first reset places the bodies; this probe reads the frame's shape
            pixels = self._render()
            children["pixels"] = Bounded(0, 255, shape=pixels.shape, dtype=torch.uint8, device=device)
        self.full_observation_spec = Composite(children, shape=(), device=device)
        self.action_spec = _array_to_spec(self._env.action_spec(), device)
        self.reward_spec = _array_to_spec(self._env.reward_spec(), device)
        flag = Categorical(2, shape=(1,), dtype=torch.bool, device=device)
        self.full_done_spec = Composite(
            done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=(), device=device
        )

    def _render(self) -> torch.Tensor:
        try:
            frame = self._env.physics.render(**self.render_kwargs)
        except Exception as err:  # the GL backends fail with assorted errors
            raise RuntimeError(
                f"{type(self).__name__}: from_pixels=True needs an OpenGL backend that renders here, and "
                f"physics.render failed with MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}: {err!r}. Set MUJOCO_GL "
                "to 'egl' (GPU, needs libEGL) or 'osmesa' (CPU, needs libOSMesa) before dm_control is imported."
            ) from err
        return torch.from_numpy(np.ascontiguousarray(frame))

    # ------------------------------------------------------------------ the loop
    def _observation_entries(self, obs: Any) -> dict[str, Any]:
        entries = {} if self.pixels_only else self.read_obs(obs)
        if self.from_pixels:
            pixels = self._render()
            entries["pixels"] = pixels if self.device is None else pixels.to(self.device)
        return entries

    def _reset_backend(self, **kwargs: Any) -> tuple[Any, Mapping[str, Any]]:
        timestep = self._env.reset()
        return timestep.observation, {}

    def _simulate(self, action: Any) -> tuple[Any, Any, Any, Any, Mapping[str, Any]]:
        """Steps dm_control ``frame_skip`` times (fewer at an episode's end), summing rewards.

        A last step with discount 0 is a termination; one with a non-zero discount (the
        time limit) is a truncation."""
        reward = 0.0
        for _ in range(self.frame_skip):
            timestep = self._env.step(action)
            reward = reward + (timestep.reward or 0.0)
            if timestep.last():
                break
        last = timestep.last()
        terminated = last and timestep.discount == 0
        return timestep.observation, reward, terminated, last and not terminated, {}

    def _set_seed(self, seed: int | None) -> None:
        """Reseeds the task's ``numpy.random.RandomState``, which draws each episode's
        initial state; the next reset starts from it."""
        if seed is None:
            return
        task = getattr(self._env, "task", None)
        if task is None or not hasattr(task, "_random"):
            raise TypeError(
                f"{type(self).__name__}.set_seed needs a dm_control env whose task holds a random state "
                f"(env.task.random); {type(self._env).__name__} has none."
            )
        task._random = np.random.RandomState(int(seed) % 2**32)

    # ------------------------------------------------------------------ checkpoints
    def get_simulator_state(self) -> dict[str, Any]:
        """Everything that decides the env's future: the physics' integration state (time,
        positions, velocities, controls, warm start...), the task's random state and the
        step counter of the episode.

        Returns:
            A dict of numpy arrays and Python values (picklable; ``torch.save`` takes it).

        Examples:
            >>> import pytest; dm_control = pytest.importorskip("dm_control")  # skips without dm_control
            >>> env = DMControlEnv("cartpole", "balance")
            >>> _ = env.reset()
            >>> sorted(env.get_simulator_state())
            ['physics', 'random', 'reset_next_step', 'step_count']
        """
        import mujoco

        physics, task = self._env.physics, self._env.task
        return {
            "physics": physics.get_state(sig=int(mujoco.mjtState.mjSTATE_INTEGRATION)).copy(),
            "random": task.random.get_state(),
            "step_count": int(getattr(self._env, "_step_count", 0)),
            "reset_next_step": bool(getattr(self._env, "_reset_next_step", False)),
        }

    def set_simulator_state(self, state: Mapping[str, Any]) -> None:
        """Restores a state taken by ``get_simulator_state`` (on this env or on another one
        built the same way); stepping then continues exactly as the original did.

        Args:
            state: the dict ``get_simulator_state`` returned.

        Raises:
            KeyError: an entry is missing (the message names the expected ones).

        Examples:
            >>> import pytest; dm_control = pytest.importorskip("dm_control")  # skips without dm_control
            >>> env = DMControlEnv("cartpole", "balance")
            >>> _ = env.reset()
            >>> state = env.get_simulator_state()
            >>> _ = env.rand_step()
            >>> env.set_simulator_state(state)
            >>> env.get_simulator_state()["step_count"]
            0
        """
        import mujoco

        missing = {"physics", "random", "step_count", "reset_next_step"} - set(state)
        if missing:
            raise KeyError(
                f"set_simulator_state: the state lacks {sorted(missing)}; expected the dict of "
                "get_simulator_state() with 'physics', 'random', 'step_count' and 'reset_next_step'."
            )
        physics, sig = self._env.physics, int(mujoco.mjtState.mjSTATE_INTEGRATION)
        values = np.asarray(state["physics"], dtype=np.float64)
        physics.set_state(values, sig=sig)
        physics.forward()  # derived quantities (positions of bodies, sensors) from the state
        physics.set_state(values, sig=sig)  # the integration state exactly as it was taken
        random = np.random.RandomState()
        random.set_state(state["random"])
        self._env.task._random = random
        self._env._step_count = int(state["step_count"])
        self._env._reset_next_step = bool(state["reset_next_step"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={type(self._env).__name__}, batch_size={self.batch_size}, device={self.device})"


class DMControlEnv(DMControlWrapper):
    """A dm_control suite env built from its domain and task names (``suite.load``).

    Args:
        env_name: the domain, e.g. ``"cheetah"``.
        task_name: the task, e.g. ``"run"``.
        seed: seed the env right away (as ``set_seed(seed)``).
        task_kwargs: keyword arguments of the task (``suite.load``'s ``task_kwargs``),
            e.g. ``{"time_limit": 5.0}`` (seconds of simulated time per episode).
        environment_kwargs: keyword arguments of the control ``Environment``, e.g.
            ``{"n_sub_steps": 2}`` or ``{"flat_observation": True}``.
        visualize_reward: color the bodies by reward (``suite.load``'s option).
        **kwargs: the wrapper's options (``from_pixels``, ``pixels_only``,
            ``frame_skip``, ``device``, ``batch_size``, ``render_kwargs``...).

    Raises:
        ImportError: dm_control is not installed (the message says how to install it).
        ValueError: an unknown domain or task (the message lists the valid ones).

    Examples:
        >>> import pytest; dm_control = pytest.importorskip("dm_control")  # skips without dm_control
        >>> env = DMControlEnv("cheetah", "run", frame_skip=2)
        >>> sorted(env.observation_spec.keys())
        ['position', 'velocity']
        >>> env.action_spec.shape, env.action_spec.dtype
        (torch.Size([6]), torch.float64)
        >>> ("cheetah", ["run"]) in DMControlEnv.available_envs
        True
    """

    def __init__(
        self,
        env_name: str,
        task_name: str,
        *,
        seed: int | None = None,
        task_kwargs: Mapping[str, Any] | None = None,
        environment_kwargs: Mapping[str, Any] | None = None,
        visualize_reward: bool = False,
        **kwargs: Any,
    ) -> None:
        suite = _import_dm_control(type(self).__name__).suite
        tasks = _suite_tasks()
        if env_name not in tasks:
            raise ValueError(
                f"{type(self).__name__}: unknown dm_control domain {env_name!r}; valid domains: {', '.join(sorted(tasks))}."
            )
        if task_name not in tasks[env_name]:
            raise ValueError(
                f"{type(self).__name__}: domain {env_name!r} has no task {task_name!r}; valid tasks: "
                f"{', '.join(tasks[env_name])}."
            )
        self.env_name, self.task_name = env_name, task_name
        env = suite.load(
            env_name,
            task_name,
            task_kwargs=dict(task_kwargs or {}),
            environment_kwargs=dict(environment_kwargs) if environment_kwargs else None,
            visualize_reward=visualize_reward,
        )
        super().__init__(env, **kwargs)
        if seed is not None:
            self.set_seed(seed)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env={self.env_name}, task={self.task_name}, batch_size={self.batch_size}, "
            f"device={self.device})"
        )
