"""Gymnasium's implementation of the array protocol (:mod:`cadence.envs.array_simulator`).

It is ``GymWrapper``'s ``array_kernel`` (``EnvBase.kernel`` states the rule): a wrapper
class that keeps the stock readers, with a single array observation (no pixels, frame
skip, info readers or auto-reset), gives a :class:`GymSimulator`: its simulator (one
env or a vector env) stepped straight into preallocated arrays. Every path that steps
arrays then serves it: ``rollout`` with random actions or a policy (when the call asks
for nothing that needs a tensordict per step), ``SerialEnv`` of such wrappers,
``ParallelEnv``'s workers and the collectors' array runner. One (non-vector) env has
its own faster loops: no arrays of flags per step, the rollout's root observations
copied from the next ones at the end.

The results are the generic path's, entry for entry (the tests compare them). An
observation with the right number of elements but another shape is reshaped by the
generic path; here it is accepted where numpy can write it as it is (``(1, 3)`` for
``(3,)``) and reported otherwise (a ``SpecMismatchError`` naming the key and both shapes).

Gymnasium's own ``SyncVectorEnv`` (as ``GymEnv(name, num_envs=N)`` builds it) has its
sub-envs stepped and reset one by one, into this simulator's arrays: its own step merges
every sub-env's info and copies the batch (about an eighth of a step of four
HalfCheetahs). The vector env's list of current observations is kept up to date, so that
its own masked resets (the generic path) see where every sub-env stands.

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
from tensordict import TensorDictBase

from cadence.data import NonTensor
from cadence.envs.array_simulator import (
    STEP_MACHINERY,
    ArraySimulator,
    StepArrays,
    TensorDictPolicy,
    assemble_rollout,
    check_observation,
    explain_observation_error,
)
from cadence.envs.gym_like_simulator import GymLikeSimulator
from cadence.envs.libs.gym_backend import gym_backend

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
        self._sub_envs = _stock_sync_vector_envs(wrapper._env) if self.is_vector else None

    def to_backend(self, action: torch.Tensor) -> Any:
        """The protocol's ``to_backend``: the wrapper's conversion to a gymnasium action."""
        return self.wrapper._to_backend(action)

    def reset_all(self) -> Any:
        """The protocol's ``reset_all``: the wrapper's reset of the gymnasium env (or vector env)."""
        return self.wrapper._reset_backend()[0]

    def step(self, action: Any) -> tuple[Any, Any, Any, Any]:
        """The protocol's ``step``: gymnasium's ``step`` (of a vector env other than gymnasium's
        own ``SyncVectorEnv``: :meth:`write_step` steps the others)."""
        obs, reward, terminated, truncated, _ = self.wrapper._env.step(action)
        return obs, reward, terminated, truncated

    def write_step(self, action: Any, t: int, arrays: StepArrays, check: bool) -> tuple[Any, bool]:
        """One env, or a ``SyncVectorEnv``'s sub-envs one by one, stepped straight into the
        arrays' row (no intermediate arrays); any other vector env through its ``step``."""
        if self.is_vector and self._sub_envs is None:
            return super().write_step(action, t, arrays, check)
        next_obs, reward, terminated, truncated = (arrays.next_obs["observation"], arrays.reward,
                                                   arrays.terminated, arrays.truncated)
        obs: Any = None
        try:  # costs nothing unless a write fails: then the observation is named
            if self._sub_envs is None:
                obs, reward[t], terminated[t], truncated[t], _ = self.wrapper._env.step(action)
                next_obs[t] = obs
                any_done = bool(terminated[t] or truncated[t])
            else:  # the vector env's list of current observations follows (its masked reset reads it)
                current = self.wrapper._env._env_obs
                row_obs, row_reward, row_terminated, row_truncated = next_obs[t], reward[t], terminated[t], truncated[t]
                for i, sub_env in enumerate(self._sub_envs):
                    obs, row_reward[i], row_terminated[i], row_truncated[i], _ = sub_env.step(action[i])
                    current[i] = row_obs[i] = obs
                obs = row_obs
                any_done = bool(row_terminated.any() or row_truncated.any())
            if check:  # what numpy would broadcast silently (a scalar)
                check_observation(self.env, obs, "step()")
        except (ValueError, TypeError) as err:
            explain_observation_error(self.env, obs, "step()", err)
        return obs, any_done

    def reset_done(self, done: np.ndarray, obs: Any) -> Any:
        """The protocol's ``reset_done``: the done sub-envs of a vector env reset, or the one env."""
        if self._sub_envs is not None:
            vector = self.wrapper._env
            obs = np.array(obs)  # the step's observation may be a row of the caller's arrays: left as it is
            for i in np.flatnonzero(done):  # as the vector env's masked reset does, sub-env by sub-env
                vector._env_obs[i], _ = self._sub_envs[i].reset(seed=None, options={})
                vector._autoreset_envs[i] = False
                obs[i] = vector._env_obs[i]
            return obs
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

    def rollout(
        self,
        max_steps: int,
        policy: TensorDictPolicy | None,
        break_when_any_done: bool,
        set_truncated: bool,
        actions: torch.Tensor | None = None,
        reset: bool = True,
    ) -> TensorDictBase:
        if policy is not None or self.is_vector:
            return super().rollout(max_steps, policy, break_when_any_done, set_truncated, actions, reset)
        env = self.env
        if actions is None:
            actions = env.full_action_spec["action"].rand(torch.Size([max_steps]), generator=env.rng)
        arrays = StepArrays.allocate(env, self.observation_keys, max_steps)
        if reset:
            self.write_reset(arrays)
        else:
            arrays.root_obs["observation"][0] = 0
        steps = self._run_random(arrays, self.to_backend(actions), break_when_any_done)
        return assemble_rollout(env, arrays, steps, actions, None, set_truncated)

    def _run_random(self, arrays: StepArrays, actions: Any, break_when_any_done: bool) -> int:
        """One env with given actions: only the done steps write their flags, and the root
        observations are the next ones shifted by a step, but after a reset."""
        step_env, reset_env = self.wrapper._env.step, self.wrapper._env.reset
        next_obs, reward = arrays.next_obs["observation"], arrays.reward
        terminated, truncated = arrays.terminated, arrays.truncated
        max_steps = len(next_obs)
        steps = max_steps
        reset_rows: list[tuple[int, Any]] = []
        obs = None
        try:  # no cost per step; a failure to write an observation is explained below
            for t in range(max_steps):
                obs, r, te, tr, _ = step_env(actions[t])
                next_obs[t] = obs
                reward[t] = r
                if te or tr:
                    terminated[t] = te
                    truncated[t] = tr
                    if break_when_any_done:
                        steps = t + 1
                        break
                    if t + 1 < max_steps:
                        reset_rows.append((t + 1, reset_env()[0]))
        except (ValueError, TypeError) as err:
            explain_observation_error(self.env, obs, "step()", err)
        check_observation(self.env, obs, "step()")  # once: an observation numpy broadcast silently
        root_obs = arrays.root_obs["observation"]
        root_obs[1:steps] = next_obs[: steps - 1]
        for t, obs in reset_rows:
            root_obs[t] = obs
        return steps


def _stock_sync_vector_envs(vector: Any) -> list[Any] | None:
    """The sub-envs of gymnasium's own ``SyncVectorEnv`` without autoreset (not a subclass,
    nor a vector wrapper: their step may do more), with the private state its masked reset
    reads; ``None`` for any other vector env."""
    try:
        sync_vector_env = gym_backend("vector.SyncVectorEnv")
    except (ModuleNotFoundError, AttributeError):
        return None
    if type(vector) is not sync_vector_env or not all(hasattr(vector, name) for name in ("_env_obs", "_autoreset_envs")):
        return None
    space = vector.single_observation_space
    if not isinstance(getattr(space, "shape", None), tuple) or getattr(space, "dtype", None) is None:
        return None
    return list(vector.envs)
