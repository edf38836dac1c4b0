"""Gymnasium's implementation of the array protocol (:mod:`cadence.envs.array_simulator`).

It is ``GymWrapper``'s ``array_kernel`` (``EnvBase.kernel`` states the rule): a wrapper
class that keeps the stock readers, with a single array observation (no pixels, frame
skip, info readers or auto-reset), gives a :class:`GymSimulator`: its simulator (one
env or a vector env) stepped straight into preallocated arrays. Every path that steps
arrays then serves it: the time loop (``rollout``, the manual loop, the collectors'
batches), ``SerialEnv`` of such wrappers, ``ParallelEnv``'s workers and the collectors'
array runner. :meth:`GymSimulator.write_stretch` steps one env and a ``SyncVectorEnv``'s sub-envs
(any other vector env through the protocol's ``step``): one (non-vector) env writes its
flags on done steps only, and a stretch's root observations are its next ones shifted by
a step, written once.

The results are the generic path's, entry for entry (the tests compare them). An
observation with the right number of elements but another shape is reshaped by the
generic path; here it is accepted where numpy can write it as it is (``(1, 3)`` for
``(3,)``) and reported otherwise (a ``SpecMismatchError`` naming the key and both shapes).

Gymnasium's own ``SyncVectorEnv`` (as ``GymEnv(name, num_envs=N)`` builds it) has its
sub-envs stepped and reset one by one, into this simulator's arrays: its own step merges
every sub-env's info and copies the batch (about an eighth of a step of four
HalfCheetahs). The wrapper steps them so on every path (``GymWrapper._owns_sub_envs``),
never touching the vector env's own state, and keeps where each one stands: its masked
resets hand that back for the rows they do not reset.

Examples:
    >>> from cadence.envs.libs.gym import GymEnv
    >>> env = GymEnv("CartPole-v1")
    >>> type(env._array_simulator()).__name__
    'GymSimulator'
    >>> env.rollout(100, break_when_any_done=False)["next", "reward"].shape
    torch.Size([100, 1])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import torch

from cadence.data import NonTensor
from cadence.envs.array_simulator import (
    STEP_MACHINERY,
    ArraySimulator,
    StepArrays,
    check_observation,
    explain_observation_error,
)
from cadence.envs.gym_like_simulator import GymLikeSimulator

if TYPE_CHECKING:  # pragma: no cover - type hints only
    from cadence.envs.common import EnvBase
    from cadence.envs.libs.gym import GymWrapper

__all__ = ["GymSimulator", "check_observation", "explain_observation_error"]


class GymSimulator(ArraySimulator):
    """One gymnasium wrapper's simulator (an env or a vector env) on the array protocol.

    Args:
        wrapper: a ``GymWrapper`` for which :meth:`for_env` gives this kernel.

    Examples:
        >>> from cadence.envs.libs.gym import GymEnv
        >>> simulator = GymSimulator(GymEnv("Pendulum-v1", num_envs=2))
        >>> obs = simulator.reset_all()
        >>> simulator.step(simulator.to_backend(torch.zeros(2, 1)))[1].shape
        (2,)
    """

    #: It steps the gymnasium env itself, reading nothing through the wrapper's readers.
    REPLACES = STEP_MACHINERY | {
        "_step", "_reset", "_simulate", "_output_transform", "_build_output", "_observation_entries",
        "read_obs", "_read_entry", "read_reward", "read_done", "read_action",
    }
    #: A wrapper class with its own readers or ``_simulate`` keeps the gym-like kernel
    #: (which calls ``_simulate`` and ``read_action``) where it keeps that one's readers.
    FALLBACK = GymLikeSimulator

    @classmethod
    def for_env(cls, env: EnvBase) -> ArraySimulator | None:
        """Gymnasium's kernel for a single array observation without pixels, frame skip,
        info readers, type checks or auto-reset; else the gym-like one where it applies."""
        wrapper: Any = env
        if (
            list(wrapper.full_observation_spec.keys(True, True)) == ["observation"]
            and not isinstance(wrapper.full_observation_spec["observation"], NonTensor)
            and wrapper.action_keys == ["action"]
            and not wrapper.from_pixels
            and wrapper.frame_skip == 1
            and not wrapper.info_dict_reader
            and not wrapper.run_type_checks
            and not wrapper.auto_reset
            and wrapper.autoreset_mode == "Disabled"
        ):
            return cls(wrapper)
        return GymLikeSimulator.for_env(env)

    def describe(self) -> str:
        return f"gymnasium {'vector env' if self.is_vector else 'env'}, stepped into arrays"

    def __init__(self, wrapper: GymWrapper) -> None:
        super().__init__(wrapper, ("observation",))
        self.wrapper = wrapper
        self.is_vector = wrapper.is_vector
        self._sub_envs = wrapper._sub_envs if self.is_vector else None

    def to_backend(self, action: torch.Tensor) -> Any:
        """The protocol's ``to_backend``: the wrapper's conversion to a gymnasium action."""
        return self.wrapper._to_backend(action)

    def reset_all(self) -> Any:
        """The protocol's ``reset_all``: the wrapper's reset of the gymnasium env (or vector env)."""
        return self.wrapper._reset_backend()[0]

    def step(self, action: Any) -> tuple[Any, Any, Any, Any]:
        """The protocol's ``step``: gymnasium's ``step`` (of a vector env other than gymnasium's
        own ``SyncVectorEnv``: :meth:`write_stretch` steps the others)."""
        obs, reward, terminated, truncated, _ = self.wrapper._env.step(action)
        return obs, reward, terminated, truncated

    def write_step(self, action: Any, t: int, arrays: StepArrays, check: bool) -> tuple[Any, bool]:
        """One step, as :meth:`write_stretch` steps (where the simulators stand next is left
        to the caller); the row may be written before (a worker's shared row), so its flags
        are cleared first."""
        if self.is_vector and self._sub_envs is None:  # through the protocol's step
            return super().write_step(action, t, arrays, check)
        arrays.terminated[t] = arrays.truncated[t] = False
        obs, _, done = self._write_rows((action,), t, arrays, check, resets=False, roots=False)
        return obs, done

    def write_stretch(
        self, actions: Any, start: int, arrays: StepArrays, check: bool, resets: bool = False
    ) -> tuple[Any, int, bool]:
        """One env, or a ``SyncVectorEnv``'s sub-envs one by one, stepped straight into the
        arrays' rows (no intermediate arrays); any other vector env through its ``step``.
        One env writes its flags on done steps only (the rows' flags start cleared, as
        :meth:`StepArrays.allocate` leaves them) and its root rows once at the end: the
        next rows shifted by a step, but after its resets."""
        if self.is_vector and self._sub_envs is None:
            return super().write_stretch(actions, start, arrays, check, resets)
        return self._write_rows(actions, start, arrays, check, resets, roots=True)

    def _write_rows(
        self, actions: Any, start: int, arrays: StepArrays, check: bool, resets: bool, roots: bool
    ) -> tuple[Any, int, bool]:
        """:meth:`write_stretch`'s steps; ``roots``: also where the simulators stand next (a
        single step leaves that to its caller)."""
        next_obs, reward, terminated, truncated = (arrays.next_obs["observation"], arrays.reward,
                                                   arrays.terminated, arrays.truncated)
        steps = min(len(actions), len(reward) - start)
        obs: Any = None
        done = False
        try:  # costs nothing unless a write fails: then the observation is named
            if self._sub_envs is None:
                env = self.wrapper._env
                reset_rows: list[tuple[int, Any]] = []
                for k in range(steps):
                    t = start + k
                    obs, reward[t], te, tr, _ = env.step(actions[k])
                    next_obs[t] = obs
                    if te or tr:
                        terminated[t], truncated[t] = te, tr
                        if resets and k + 1 < steps:
                            obs = env.reset()[0]
                            reset_rows.append((t + 1, obs))
                            continue
                        done, steps = True, k + 1
                        break
                root_obs = arrays.root_obs.get("observation") if roots else None
                if root_obs is not None:
                    root_obs[start + 1 : start + steps + 1] = next_obs[start : start + steps]
                    for t, row in reset_rows:
                        root_obs[t] = row
            else:  # the wrapper's record of where each sub-env stands follows (its masked reset reads it)
                current = self.wrapper._sub_env_obs
                for k in range(steps):
                    t, action = start + k, actions[k]
                    row_obs, row_reward, row_terminated, row_truncated = next_obs[t], reward[t], terminated[t], truncated[t]
                    for i, sub_env in enumerate(self._sub_envs):
                        obs, row_reward[i], row_terminated[i], row_truncated[i], _ = sub_env.step(action[i])
                        current[i] = row_obs[i] = obs
                    done = bool(row_terminated.any() or row_truncated.any())
                    reset = done and resets and k + 1 < steps
                    obs = self.stand_next(row_obs, t, arrays, reset) if roots or reset else row_obs
                    if done and not reset:
                        steps = k + 1
                        break
                    done = False
            if check:  # what numpy would broadcast silently (a scalar)
                check_observation(self.env, obs, "step()")
        except (ValueError, TypeError) as err:
            explain_observation_error(self.env, obs, "step()", err)
        return obs, steps, done

    def reset_done(self, done: np.ndarray, obs: Any) -> Any:
        """The protocol's ``reset_done``: the done sub-envs of a vector env reset, or the one env."""
        if self._sub_envs is not None:  # the wrapper's masked reset, sub-env by sub-env
            return self.wrapper._reset_sub_envs(done)
        if self.is_vector:
            return self.wrapper._env.reset(options={"reset_mask": done})[0]
        return self.wrapper._env.reset()[0]

    def write_observation(self, targets: dict[str, np.ndarray], index: tuple[Any, ...], obs: Any) -> None:
        """The protocol's ``write_observation``: the one ``"observation"`` entry."""
        targets["observation"][index] = obs

    def check_observation(self, obs: Any, where: str) -> None:
        check_observation(self.env, obs, where)

    def explain_error(self, obs: Any, where: str, err: Exception) -> NoReturn:
        explain_observation_error(self.env, obs, where, err)
