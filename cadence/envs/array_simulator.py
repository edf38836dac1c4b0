"""The protocol a backend implements to be stepped into preallocated arrays: an env's kernel.

The time loop (``cadence.envs.values_loop``: rollouts, the manual loop and the collectors'
batches) and ``ParallelEnv``'s workers step simulators
without building a tensordict per step: they ask the env for its :class:`ArraySimulator`
(``env._array_simulator()``, ``None`` where the env has none) and write each step's
observations, rewards and done flags straight into numpy arrays laid out from the specs
(:class:`StepArrays`), time first. Nothing else about the backend is known to them, so
that every backend that implements the protocol gets every such path:

- gymnasium (one env or a vector env; ``cadence.envs.libs.gym_simulator.GymSimulator``),
- gym-like backends with stock readers, dm_control and gymnasium envs with dict or tuple
  observations among them (``cadence.envs.gym_like_simulator.GymLikeSimulator``),
- a serial batch of any of these (:class:`SerialSimulators`).

A backend implements five methods: ``to_backend`` (the batch's actions in its format),
``reset_all``, ``step`` (one step of every simulator, results batched, without resets),
``reset_done`` (resets the simulators a mask selects) and ``write_observation`` (its raw
observation into the arrays, one array per observation entry). The rest is provided on
top of these: :meth:`ArraySimulator.write_step` (one step written at time ``t``),
and :meth:`ArraySimulator.write_stretch` (steps with given actions up to a done step, or on
through resets); a backend overrides ``write_step`` or ``write_stretch`` where it can be faster
(one gymnasium env writes its flags on done steps only).

An observation off its declared space is named (a ``SpecMismatchError`` with the key and
both shapes) at no cost per step: a failed write is translated
(:meth:`ArraySimulator.explain_error`, from inside one ``try``), and the first step of a
batch checks what numpy would broadcast silently (a scalar into a row,
:meth:`ArraySimulator.check_observation`).

Examples:
    >>> from cadence.envs import GymEnv, SerialEnv
    >>> simulator = SerialEnv(2, lambda: GymEnv("CartPole-v1"))._array_simulator()
    >>> type(simulator).__name__, simulator.observation_keys
    ('SerialSimulators', ('observation',))
    >>> SerialEnv(2, lambda: GymEnv("CartPole-v1")).rollout(5, break_when_any_done=False)["next", "observation"].shape
    torch.Size([2, 5, 4])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import numpy as np
import torch

from cadence.envs.utils import SpecMismatchError

if TYPE_CHECKING:  # pragma: no cover - type hints only (the env core builds on this module)
    from cadence.envs.common import EnvBase

__all__ = [
    "STEP_MACHINERY",
    "ArraySimulator",
    "arrays_fit",
    "SerialSimulators",
    "StepArrays",
    "check_observation",
    "defining_class",
    "explain_observation_error",
]

#: ``EnvBase``'s step bookkeeping, which every kernel stands in for: a class that defines one
#: of these takes its own steps (``step()`` on TensorDicts, every step; see ``EnvBase.kernel``)
STEP_MACHINERY = frozenset(
    {"step", "reset", "_step_mdp", "_reset_done", "_complete_done", "_check_step_input", "_step_as_values"}
)


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The numpy dtype of a torch dtype.

    Examples:
        >>> numpy_dtype(torch.float32)
        dtype('float32')
    """
    return torch.empty(0, dtype=dtype).numpy().dtype


def _observation_mismatch(
    env: EnvBase, obs: Any, where: str, key: str = "observation", exact: bool = False
) -> SpecMismatchError | None:
    """The error for an observation entry (one step, the whole batch) that does not fit its
    spec, or ``None`` if its number of elements (its shape, if ``exact``) and its dtype's
    kind fit."""
    spec = env.full_observation_spec[key]
    if obs is None:
        return None
    array = np.asarray(obs)
    target = numpy_dtype(spec.dtype)
    fits_size = array.shape == tuple(spec.shape) or (not exact and array.size == spec.shape.numel())
    if fits_size and (array.dtype == target or np.can_cast(array.dtype, target, "same_kind")):
        return None
    return SpecMismatchError(
        f"{type(env).__name__}: the simulator's {where} gave an observation of shape {array.shape} and dtype "
        f"{array.dtype} at key {key!r}, but its spec (from the declared observation space) has shape "
        f"{tuple(spec.shape)} and dtype {spec.dtype}: the backend does not keep to its declared space."
    )


def check_observation(env: EnvBase, obs: Any, where: str, key: str = "observation") -> None:
    """Raises if a raw observation entry has the wrong number of elements for its spec:
    what numpy would broadcast silently into the arrays of a fast path (a scalar into a
    row). Done once per rollout or batch, not per step.

    Args:
        env: the env whose ``full_observation_spec[key]`` the observation must fit
            (batch dims included).
        obs: the simulator's observation entry (``None`` is let through: no step was taken).
        where: the simulator call that gave it, for the message (``"step()"``).
        key: the observation entry.

    Raises:
        SpecMismatchError: naming the key, the spec's shape and dtype and the
            observation's.

    Examples:
        >>> import numpy as np
        >>> from cadence.envs.libs.gym import GymEnv
        >>> env = GymEnv("CartPole-v1")
        >>> check_observation(env, np.zeros(4, dtype=np.float32), "step()")
        >>> check_observation(env, np.float32(0), "step()")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        cadence.envs.utils.SpecMismatchError: GymEnv: the simulator's step() gave an observation of shape () ... has shape (4,) ...
    """
    spec = env.full_observation_spec[key]
    if np.size(obs) != spec.shape.numel():
        error = _observation_mismatch(env, obs, where, key)
        if error is not None:
            raise error


def explain_observation_error(env: EnvBase, obs: Any, where: str, err: Exception, key: str = "observation") -> NoReturn:
    """Re-raises a failure to write an observation entry into a fast path's arrays as a
    ``SpecMismatchError`` that names the key and both shapes, or ``err`` itself if the
    observation fits its spec (the failure came from elsewhere, a policy say).

    Fast paths write each step inside one ``try`` and call this in its ``except``, so
    that a well-behaved simulator pays nothing for the check.

    Args:
        env: the env whose ``full_observation_spec[key]`` the observation must fit
            (batch dims included).
        obs: the observation entry that was being written.
        where: the simulator call that gave it, for the message (``"step()"``).
        err: the failure (numpy's ``"could not broadcast ..."``).
        key: the observation entry.

    Raises:
        SpecMismatchError: from ``err``, if ``obs`` does not have the spec's shape.
        Exception: ``err`` itself otherwise.

    Examples:
        >>> import numpy as np
        >>> from cadence.envs.libs.gym import GymEnv
        >>> env = GymEnv("CartPole-v1")
        >>> obs = np.zeros(5, dtype=np.float32)
        >>> try:  # doctest: +ELLIPSIS
        ...     np.empty(4, dtype=np.float32)[...] = obs
        ... except ValueError as err:
        ...     explain_observation_error(env, obs, "step()", err)
        Traceback (most recent call last):
            ...
        cadence.envs.utils.SpecMismatchError: GymEnv: the simulator's step() gave an observation of shape (5,) ... has shape (4,) ...
    """
    error = _observation_mismatch(env, obs, where, key, exact=True)
    if error is None:
        raise err
    raise error from err


class StepArrays:
    """A rollout's or a batch's env data, time first, laid out from the env's specs.

    ``root_obs`` has one row more than the steps: row ``t + 1`` is where the env stands
    after step ``t`` (a reset observation where it was done), so that the last row is
    where the next batch starts. Rewards and flags are shaped ``[T, *batch]``.

    Args:
        next_obs: per observation entry, ``[T, *batch, ...]``.
        root_obs: per observation entry, ``[T + 1, *batch, ...]``.
        reward: ``[T, *batch]``.
        terminated: ``[T, *batch]``, bool.
        truncated: ``[T, *batch]``, bool.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> arrays = StepArrays.allocate(GymEnv("Pendulum-v1"), ("observation",), 10)
        >>> arrays.root_obs["observation"].shape, arrays.reward.shape
        ((11, 3), (10,))
    """

    def __init__(
        self,
        next_obs: dict[str, np.ndarray],
        root_obs: dict[str, np.ndarray],
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> None:
        self.next_obs = next_obs
        self.root_obs = root_obs
        self.reward = reward
        self.terminated = terminated
        self.truncated = truncated

    @classmethod
    def allocate(cls, env: EnvBase, keys: Sequence[str], steps: int) -> StepArrays:
        """Empty arrays for ``steps`` steps of ``env``'s observation entries ``keys`` (flags all false)."""
        batch = tuple(env.batch_size)
        next_obs, root_obs = {}, {}
        for key in keys:
            spec = env.full_observation_spec[key]
            next_obs[key] = np.empty((steps, *spec.shape), dtype=numpy_dtype(spec.dtype))
            root_obs[key] = np.empty((steps + 1, *spec.shape), dtype=numpy_dtype(spec.dtype))
        reward = np.empty((steps, *batch), dtype=numpy_dtype(env.full_reward_spec["reward"].dtype))
        return cls(next_obs, root_obs, reward, np.zeros((steps, *batch), dtype=bool),
                   np.zeros((steps, *batch), dtype=bool))

    def row(self, index: int) -> StepArrays:
        """The arrays of batch row ``index`` (views: what is written there lands here)."""
        return StepArrays(
            {key: array[:, index] for key, array in self.next_obs.items()},
            {key: array[:, index] for key, array in self.root_obs.items()},
            self.reward[:, index], self.terminated[:, index], self.truncated[:, index],
        )


class ArraySimulator:
    """A batch of simulators stepped into numpy arrays (the protocol; see the module).

    A backend subclasses it and defines ``to_backend``, ``reset_all``, ``step``,
    ``reset_done`` and ``write_observation`` (:attr:`PROTOCOL`; a subclass missing one is
    refused when it is created); it may override :meth:`write_step` or
    :meth:`write_stretch` to be faster. The arrays it writes hold one
    entry per observation key, shaped as the env's specs (batch dims first); rewards
    and flags are shaped like the batch (the specs' trailing ``1`` left out).

    Args:
        env: the env whose simulators these are (its specs lay out the arrays, its
            errors name it).
        observation_keys: the env's observation entries (flat names).

    Examples:
        >>> from cadence.envs import GymEnv
        >>> simulator = GymEnv("Pendulum-v1")._array_simulator()
        >>> isinstance(simulator, ArraySimulator), simulator.observation_keys
        (True, ('observation',))
    """

    def __init__(self, env: EnvBase, observation_keys: Sequence[str]) -> None:
        self.env = env
        self.observation_keys = tuple(observation_keys)

    # ------------------------------------------------------------------ what a backend implements
    #: The methods a subclass defines (checked when the subclass is created):
    #:
    #: - ``to_backend(action)``: the batch's action (one ``"action"`` tensor, or its
    #:   time-first stack) in the backend's format;
    #: - ``reset_all()``: resets every simulator (with the seeds ``set_seed`` gave) and
    #:   returns the raw observation;
    #: - ``step(action)``: one step of every simulator, no reset: the raw observation and
    #:   the reward, termination and truncation, batched (plain numbers for an env with no
    #:   batch dims);
    #: - ``reset_done(done, obs)``: resets the simulators ``done`` (shaped like the batch)
    #:   selects and returns the batch's raw observation (``obs`` where nothing was reset);
    #: - ``write_observation(targets, index, obs)``: writes the raw observation into
    #:   ``targets[key][index]`` for each entry.
    PROTOCOL = ("to_backend", "reset_all", "step", "reset_done", "write_observation")

    if TYPE_CHECKING:  # their signatures, for type checkers; a subclass defines them
        def to_backend(self, action: torch.Tensor) -> Any: ...
        def reset_all(self) -> Any: ...
        def step(self, action: Any) -> tuple[Any, Any, Any, Any]: ...
        def reset_done(self, done: np.ndarray, obs: Any) -> Any: ...
        def write_observation(self, targets: dict[str, np.ndarray], index: tuple[Any, ...], obs: Any) -> None: ...

    #: The env methods this kernel stands in for (it does what they do without calling them):
    #: an env class that defines one of them below the class that declared this kernel
    #: (``array_kernel = ...`` in its body) takes those steps itself, and gets
    #: :attr:`FALLBACK` (``EnvBase.__init_subclass__`` applies the rule once, per class).
    REPLACES: ClassVar[frozenset[str]] = STEP_MACHINERY

    #: The kernel such a class gets instead (``None``: the generic step through ``step()``).
    FALLBACK: ClassVar[type[ArraySimulator] | None] = None

    @classmethod
    def for_env(cls, env: EnvBase) -> ArraySimulator | None:
        """This kernel over ``env``, or ``None`` where the env's settings now need the
        generic step (a device, type checks...); by default, always this kernel."""
        return cls(env)

    def describe(self) -> str:
        """What takes the env's steps, in words (``env.kernel`` shows it).

        Examples:
            >>> from cadence.envs import GymEnv
            >>> GymEnv("Pendulum-v1")._array_simulator().describe()
            'gymnasium env, stepped into arrays'
        """
        return f"{type(self).__name__}, stepped into arrays"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        missing = [name for name in cls.PROTOCOL if not callable(getattr(cls, name, None))]
        if missing:
            raise TypeError(
                f"{cls.__name__} implements the array protocol but does not define {missing} "
                f"(an ArraySimulator defines {list(cls.PROTOCOL)}; see cadence.envs.array_simulator)"
            )

    # ------------------------------------------------------------------ checks
    def entries(self, obs: Any) -> dict[str, Any]:
        """The raw observation's entries by key (to check them one by one)."""
        if isinstance(obs, tuple):  # a Tuple space: entries "0", "1", ... (read_obs's rule)
            obs = {str(i): item for i, item in enumerate(obs)}
        if len(self.observation_keys) == 1 and not hasattr(obs, "keys"):
            return {self.observation_keys[0]: obs}
        return {key: obs[key] for key in self.observation_keys}

    def check_observation(self, obs: Any, where: str) -> None:
        """:func:`check_observation` for each entry of a raw observation."""
        if obs is not None:
            for key, value in self.entries(obs).items():
                check_observation(self.env, value, where, key)

    def explain_error(self, obs: Any, where: str, err: Exception) -> NoReturn:
        """:func:`explain_observation_error` for the entry that does not fit, or ``err``."""
        if obs is not None:
            try:
                parts = self.entries(obs)
            except (KeyError, TypeError, IndexError):
                parts = {}
            for key, value in parts.items():
                error = _observation_mismatch(self.env, value, where, key, exact=True)
                if error is not None:
                    raise error from err
        raise err

    # ------------------------------------------------------------------ provided
    def write_step(self, action: Any, t: int, arrays: StepArrays, check: bool) -> tuple[Any, bool]:
        """Steps every simulator once, without resets, and writes the step at time ``t``:
        ``next_obs[t]``, ``reward[t]``, ``terminated[t]``, ``truncated[t]``. Every path
        that steps a kernel (the loop's step on values, the collectors, ``ParallelEnv``'s
        workers, rollouts) steps it here; a backend overrides it to write faster.

        Args:
            action: the batch's action in the backend's format (:meth:`to_backend`).
            t: the row of ``arrays`` to write.
            arrays: where to write.
            check: check what numpy would broadcast silently (a scalar into a row): once
                per set of arrays or episode, not per step.

        Returns:
            The raw observation (for :meth:`reset_done`) and whether any simulator is done.

        Examples:
            >>> import torch
            >>> from cadence.envs import GymEnv
            >>> env = GymEnv("Pendulum-v1")
            >>> simulator = env._array_simulator()
            >>> arrays = StepArrays.allocate(env, simulator.observation_keys, 2)
            >>> _ = simulator.reset_all()
            >>> _, done = simulator.write_step(simulator.to_backend(torch.zeros(1)), 0, arrays, check=True)
            >>> done, arrays.terminated[0].item()
            (False, False)
        """
        obs: Any = None
        try:  # costs nothing unless a write fails: then the observation is named
            obs, reward, terminated, truncated = self.step(action)
            if check:
                self.check_observation(obs, "step()")
            self.write_observation(arrays.next_obs, (t,), obs)
            _write_row(arrays.reward, t, reward)
            _write_row(arrays.terminated, t, terminated)
            _write_row(arrays.truncated, t, truncated)
        except (ValueError, TypeError) as err:
            self.explain_error(obs, "step()", err)
        if type(terminated) is bool and type(truncated) is bool:  # one env: no array op
            return obs, terminated or truncated
        return obs, bool(arrays.terminated[t].any() or arrays.truncated[t].any())

    def stand_next(self, obs: Any, t: int, arrays: StepArrays, reset: bool) -> Any:
        """Writes where each simulator stands after step ``t`` into ``root_obs[t + 1]``: where
        it went, or, with ``reset``, a fresh reset where the step was done. Returns the raw
        observation there (for :meth:`reset_done`)."""
        if not reset:  # copies of the rows just written
            for key, root in arrays.root_obs.items():
                root[t + 1] = arrays.next_obs[key][t]
            return obs
        done = np.asarray(arrays.terminated[t] | arrays.truncated[t])  # an array, also with no batch dims
        try:
            obs = self.reset_done(done, obs)
            self.write_observation(arrays.root_obs, (t + 1,), obs)
        except (ValueError, TypeError) as err:
            self.explain_error(obs, "reset()", err)
        return obs

    def write_stretch(
        self, actions: Any, start: int, arrays: StepArrays, check: bool, resets: bool = False
    ) -> tuple[Any, int, bool]:
        """Steps every simulator with ``actions[0]``, ``actions[1]``, ... (the backend's
        format, time first), written from row ``start`` on as :meth:`write_step` writes, and
        where the simulators stand next in ``root_obs``'s next row. Without ``resets`` it
        stops after the first step where any simulator is done; with ``resets`` the done
        simulators are reset (a done last step is not) and it goes on. It stops where the
        actions or rows run out. This is the kernel's loop over a stretch of given actions
        (``ValuesLoop.run``); a backend overrides it (or :meth:`write_step`) to step faster.

        Returns:
            The raw observation where the simulators stand (for :meth:`reset_done`), the
            steps taken, and whether the last one is done (and not reset).

        Examples:
            >>> import torch
            >>> from cadence.envs import GymEnv
            >>> env = GymEnv("CartPole-v1", num_envs=2)
            >>> simulator = env._array_simulator()
            >>> arrays = StepArrays.allocate(env, simulator.observation_keys, 50)
            >>> _ = simulator.reset_all()
            >>> actions = simulator.to_backend(env.full_action_spec["action"].rand(torch.Size([50])))
            >>> _, steps, done = simulator.write_stretch(actions, 0, arrays, check=True, resets=True)
            >>> steps
            50
        """
        obs, done = None, False
        n = min(len(actions), len(arrays.reward) - start)
        for k in range(n):
            obs, done = self.write_step(actions[k], start + k, arrays, check and k == 0)
            reset = done and resets and k + 1 < n
            obs = self.stand_next(obs, start + k, arrays, reset)
            if done and not reset:
                return obs, k + 1, True
        return obs, n, done


class SerialSimulators(ArraySimulator):
    """The simulators of a ``SerialEnv``'s sub-envs, stepped one after the other, each
    on its batch row of the same arrays.

    The sub-envs have the same spaces, so the first one converts the batch's actions.

    Args:
        env: the serial batch.
        simulators: its sub-envs' simulators, in order.

    Examples:
        >>> from cadence.envs import GymEnv, SerialEnv
        >>> len(SerialEnv(3, lambda: GymEnv("Pendulum-v1"))._array_simulator().simulators)
        3
    """

    @classmethod
    def for_env(cls, env: EnvBase) -> SerialSimulators | None:
        """The sub-envs' kernels, where every sub-env has one (and no type checks run)."""
        batch: Any = env
        batch.start()
        if batch.run_type_checks:
            return None
        simulators = [sub._array_simulator() for sub in batch._envs]
        if any(simulator is None for simulator in simulators):
            return None
        return cls(env, simulators)

    def describe(self) -> str:
        return f"serial: {len(self.simulators)} x ({self.simulators[0].describe()})"

    def __init__(self, env: EnvBase, simulators: Sequence[ArraySimulator]) -> None:
        super().__init__(env, simulators[0].observation_keys)
        self.simulators = list(simulators)
        self._rows: tuple[StepArrays, list[StepArrays]] | None = None

    def to_backend(self, action: torch.Tensor) -> Any:
        """The protocol's ``to_backend``: the first row's conversion (every row takes the same)."""
        return self.simulators[0].to_backend(action)

    def reset_all(self) -> list[Any]:
        """The protocol's ``reset_all``: each row's simulators reset, their raw observations in a list."""
        return [simulator.reset_all() for simulator in self.simulators]

    def step(self, action: Any) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray]:
        """The protocol's ``step``: each row stepped on its part of ``action``; flags and rewards stacked."""
        results = [simulator.step(action[i]) for i, simulator in enumerate(self.simulators)]
        return (
            [result[0] for result in results],
            *(np.stack([np.asarray(result[k]) for result in results]) for k in (1, 2, 3)),
        )  # type: ignore[return-value]

    def reset_done(self, done: np.ndarray, obs: list[Any]) -> list[Any]:
        """The protocol's ``reset_done``: the rows with a done reset, the others' observations kept."""
        obs = list(obs)
        for i, simulator in enumerate(self.simulators):
            if done[i].any():
                obs[i] = simulator.reset_done(done[i], obs[i])
        return obs

    def write_observation(self, targets: dict[str, np.ndarray], index: tuple[Any, ...], obs: list[Any]) -> None:
        """The protocol's ``write_observation``: each row writes its observation at ``(*index, row)``."""
        for i, simulator in enumerate(self.simulators):
            simulator.write_observation(targets, (*index, i), obs[i])

    def check_observation(self, obs: Any, where: str) -> None:
        if obs is not None:
            for i, (simulator, sub_obs) in enumerate(zip(self.simulators, obs)):
                try:
                    simulator.check_observation(sub_obs, where)
                except SpecMismatchError as err:  # which sub-env
                    raise SpecMismatchError(f"{type(self.env).__name__} sub-env {i}: {err}") from err

    def explain_error(self, obs: Any, where: str, err: Exception) -> NoReturn:
        if obs is not None:
            for i, (simulator, sub_obs) in enumerate(zip(self.simulators, obs)):
                for key, value in simulator.entries(sub_obs).items():
                    error = _observation_mismatch(simulator.env, value, where, key, exact=True)
                    if error is not None:
                        raise SpecMismatchError(f"{type(self.env).__name__} sub-env {i}: {error}") from err
        raise err

    def write_step(self, action: Any, t: int, arrays: StepArrays, check: bool) -> tuple[list[Any], bool]:
        # each sub-env on its row of the arrays (views made once per set of arrays)
        if self._rows is None or self._rows[0] is not arrays:
            self._rows = (arrays, [arrays.row(i) for i in range(len(self.simulators))])
        rows = self._rows[1]
        obs, any_done = [], False
        i = 0
        try:
            for i, simulator in enumerate(self.simulators):
                row_obs, row_done = simulator.write_step(action[i], t, rows[i], check)
                obs.append(row_obs)
                any_done = any_done or row_done
        except SpecMismatchError as err:  # which sub-env
            raise SpecMismatchError(f"{type(self.env).__name__} sub-env {i}: {err}") from err
        return obs, any_done


def defining_class(cls: type, name: str) -> str:
    """The name of the class on ``cls``'s MRO whose body defines ``name`` (for ``env.kernel``).

    Examples:
        >>> from cadence.envs import PendulumEnv
        >>> defining_class(PendulumEnv, "_step"), defining_class(PendulumEnv, "step")
        ('PendulumEnv', 'EnvBase')
    """
    return next(klass.__name__ for klass in cls.__mro__ if name in klass.__dict__)


def _write_row(target: np.ndarray, t: int, value: Any) -> None:
    """Writes a batch's rewards or flags (a number, or an array of the batch's shape, as they
    come) into row ``t``."""
    try:
        target[t] = value
    except ValueError:  # another layout of the same values ([n, 1] for [n], say)
        target[t] = np.asarray(value).reshape(target[t].shape)


def arrays_fit(env: EnvBase) -> bool:
    """Whether ``env``'s rewards and done flags have the layout the arrays hold: one
    ``"action"``, one ``"reward"`` and the three root flags, each shaped ``[*batch, 1]``.

    Examples:
        >>> from cadence.envs import GymEnv, PendulumEnv
        >>> arrays_fit(GymEnv("Pendulum-v1")), arrays_fit(PendulumEnv())  # the torch Pendulum declares no truncation
        (True, False)
    """
    batch = tuple(env.batch_size)
    specs = env.full_done_spec
    if env.action_keys != ["action"] or env.reward_keys != ["reward"]:
        return False
    names = set(specs.keys(True, True))  # nested (per-agent) flags are tuples: not the layout
    if names != {"done", "terminated", "truncated"}:
        return False
    return all(tuple(spec.shape) == (*batch, 1) for spec in (*specs.values(), env.full_reward_spec["reward"]))
