"""The shortcut rollout of gymnasium envs: step the simulator, write into arrays.

``GymWrapper.rollout`` takes this path when the env uses the stock readers and has a
single array observation (no pixels, frame skip, info readers or auto-reset) and the
call asks for nothing that needs a tensordict per step (no callback, no first input).
With random actions, the whole rollout's actions are drawn in one call and no
tensordict is built until the end; with a policy, one small tensordict per step carries
the observation to the policy, and what the policy writes is kept as the generic loop
keeps it (its other entries stay at the root for the next step, its ``"next"`` entries
move up). The result is the generic rollout's, entry for entry (the tests compare them).

A ``SerialEnv`` of such wrappers takes the same path: its sub-envs are stepped one
after the other into the same arrays (``SimulatorGroup``).

A simulator whose observations do not have the shape of its declared space is
reported by a ``SpecMismatchError`` naming the key and both shapes, at no cost per
step: the first reset's observation and the last step's are checked once per rollout
(``check_observation``), and a step whose observation cannot be written into the
arrays has its failure translated (the loops run inside one ``try``;
``explain_observation_error``). The other fast paths that write gymnasium observations
into arrays (``ParallelEnv``'s workers, the collectors' gymnasium runner) use the same
two functions. An observation with the right number of
elements but another shape is reshaped by the generic path; here it is accepted where
numpy can write it as it is (``(1, 3)`` for ``(3,)``) and reported otherwise.

Examples:
    >>> from cadence.envs.libs.gym import GymEnv
    >>> env = GymEnv("CartPole-v1")
    >>> env.rollout(100, break_when_any_done=False)["next", "reward"].shape
    torch.Size([100, 1])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.envs.utils import SpecMismatchError

if TYPE_CHECKING:  # pragma: no cover - type hints only
    from cadence.envs.common import EnvBase
    from cadence.envs.libs.gym import GymWrapper

__all__ = ["SimulatorGroup", "check_observation", "explain_observation_error", "fast_gym_rollout"]

_ENV_ROOT_KEYS = ("observation", "done", "terminated", "truncated")
_ENV_NEXT_KEYS = ("observation", "reward", "done", "terminated", "truncated")


def _observation_mismatch(env: EnvBase, obs: Any, where: str, exact: bool = False) -> SpecMismatchError | None:
    """The error for an observation (one step, the whole batch) that does not fit the
    observation spec, or ``None`` if its number of elements (its shape, if ``exact``)
    and its dtype's kind fit."""
    spec = env.full_observation_spec["observation"]
    if obs is None:
        return None
    array = np.asarray(obs)
    target = torch.empty(0, dtype=spec.dtype).numpy().dtype
    fits_size = array.shape == tuple(spec.shape) or (not exact and array.size == spec.shape.numel())
    if fits_size and (array.dtype == target or np.can_cast(array.dtype, target, "same_kind")):
        return None
    return SpecMismatchError(
        f"{type(env).__name__}: the simulator's {where} gave an observation of shape {array.shape} and dtype "
        f"{array.dtype} at key 'observation', but its spec (from the declared observation space) has shape "
        f"{tuple(spec.shape)} and dtype {spec.dtype}: the backend does not keep to its declared space."
    )


def check_observation(env: EnvBase, obs: Any, where: str) -> None:
    """Raises if a raw simulator observation has the wrong number of elements for the
    env's ``"observation"`` spec: what numpy would broadcast silently into the arrays
    of a fast path (a scalar into a row). Done once per rollout or batch, not per step.

    Args:
        env: the env whose ``full_observation_spec["observation"]`` the observation
            must fit (batch dims included).
        obs: the simulator's observation (``None`` is let through: no step was taken).
        where: the simulator call that gave it, for the message (``"step()"``).

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
    spec = env.full_observation_spec["observation"]
    if np.size(obs) != spec.shape.numel():
        error = _observation_mismatch(env, obs, where)
        if error is not None:
            raise error


def explain_observation_error(env: EnvBase, obs: Any, where: str, err: Exception) -> None:
    """Re-raises a failure to write an observation into a fast path's arrays as a
    ``SpecMismatchError`` that names the key and both shapes, or ``err`` itself if the
    observation fits its spec (the failure came from elsewhere, a policy say).

    Fast paths write each step inside one ``try`` and call this in its ``except``, so
    that a well-behaved simulator pays nothing for the check.

    Args:
        env: the env whose ``full_observation_spec["observation"]`` the observation
            must fit (batch dims included).
        obs: the observation that was being written.
        where: the simulator call that gave it, for the message (``"step()"``).
        err: the failure (numpy's ``"could not broadcast ..."``).

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
    error = _observation_mismatch(env, obs, where, exact=True)
    if error is None:
        raise err
    raise error from err


class _StepArrays:
    """The rollout's env data, time first, preallocated from the specs."""

    def __init__(self, env: EnvBase, max_steps: int) -> None:
        batch = tuple(env.batch_size)
        obs_spec = env.full_observation_spec["observation"]
        obs_dtype = torch.empty(0, dtype=obs_spec.dtype).numpy().dtype
        self.next_obs = np.empty((max_steps, *obs_spec.shape), dtype=obs_dtype)
        self.root_obs = np.empty((max_steps, *obs_spec.shape), dtype=obs_dtype)
        self.reward = np.empty((max_steps, *batch), dtype=np.float32)
        self.terminated = np.zeros((max_steps, *batch), dtype=bool)
        self.truncated = np.zeros((max_steps, *batch), dtype=bool)


class SimulatorGroup:
    """Gymnasium simulators stepped as one batch: one vector env, or the sub-envs of a
    ``SerialEnv`` one after the other (their batches stacked on a leading dim).

    Args:
        wrappers: the wrappers whose simulators are stepped; one vector wrapper, or
            several wrappers of the same spaces.
        serial: whether the wrappers are the sub-envs of a serial batch.
    """

    def __init__(self, wrappers: list[GymWrapper], serial: bool) -> None:
        self.wrappers = wrappers
        self.serial = serial
        self.to_backend = wrappers[0]._to_backend
        self._results: tuple[np.ndarray, ...] | None = None

    def reset_all(self) -> Any:
        """Resets every simulator (passing the seeds given to ``set_seed``)."""
        if not self.serial:
            return self.wrappers[0]._reset_backend()[0]
        return self._stack([np.asarray(w._reset_backend()[0]) for w in self.wrappers], "reset()")

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any]:
        """One step of every simulator: (obs, reward, terminated, truncated), batched."""
        if not self.serial:
            obs, reward, terminated, truncated, _ = self.wrappers[0]._env.step(actions)
            return obs, reward, terminated, truncated
        results = [w._env.step(a) for w, a in zip(self.wrappers, actions)]
        obs = self._stack([np.asarray(r[0]) for r in results], "step()")
        return (obs, *(np.stack([np.asarray(r[k]) for r in results]) for k in range(1, 4)))  # type: ignore[return-value]

    def _stack(self, observations: list[np.ndarray], where: str) -> np.ndarray:
        """The sub-envs' observations as one batch; a sub-env whose observation differs
        in shape from the others is named (rather than np.stack's "same shape" error)."""
        try:
            return np.stack(observations)
        except ValueError as err:
            shapes = [obs.shape for obs in observations]
            spec = self.wrappers[0].full_observation_spec["observation"]
            raise SpecMismatchError(
                f"SerialEnv: the sub-envs' {where} gave observations of shapes {shapes} at key 'observation', "
                f"but each sub-env's spec has shape {tuple(spec.shape)}: a backend does not keep to its declared space."
            ) from err

    def reset_done(self, done: np.ndarray, obs: Any) -> Any:
        """Resets the done simulators (or sub-envs); returns the batch's observations."""
        if not self.serial:
            return self.wrappers[0]._env.reset(options={"reset_mask": done})[0]
        obs = np.array(obs, copy=True)
        for i, wrapper in enumerate(self.wrappers):
            if done[i].any():
                if wrapper.is_vector:
                    obs[i] = wrapper._env.reset(options={"reset_mask": done[i]})[0]
                else:
                    obs[i] = wrapper._env.reset()[0]
        return obs


def fast_gym_rollout(
    env: EnvBase,
    max_steps: int,
    policy: Callable[[TensorDictBase], TensorDictBase | None] | None,
    break_when_any_done: bool,
    set_truncated: bool,
    group: SimulatorGroup | None = None,
    actions: torch.Tensor | None = None,
    reset: bool = True,
) -> TensorDictBase:
    """Runs ``env.rollout`` on the shortcut; see the module's docstring for when it applies.

    Args:
        env: the env whose rollout this is (a gymnasium wrapper, or a serial batch of them).
        max_steps: the number of steps.
        policy: a tensordict policy, or ``None`` for random actions from ``env.rng``.
        break_when_any_done: stop at the first done step.
        set_truncated: mark the last step truncated.
        group: the simulators to step when ``env`` is not a single wrapper.
        actions: with no policy, the actions to take (time first) rather than random ones.
        reset: reset the simulators first; ``False`` steps on from where they stand, and
            the first step's root observation is left at zero (the caller, a rollout of
            transforms over time, reads the ``"next"`` entries only).

    Returns:
        The rollout, laid out as the generic ``EnvBase.rollout`` lays it out.
    """
    arrays = _StepArrays(env, max_steps)
    if policy is None and actions is None:
        actions = env.full_action_spec["action"].rand(torch.Size([max_steps]), generator=env.rng)
    if group is None and not env.is_vector:  # type: ignore[attr-defined]
        return _single_rollout(env, arrays, max_steps, policy, break_when_any_done, set_truncated, actions, reset)
    group = group if group is not None else SimulatorGroup([env], serial=False)  # type: ignore[list-item]
    if reset:
        _write_first_observation(env, arrays, group.reset_all())
    else:
        arrays.root_obs[0] = 0
    if policy is None:
        steps = _run_random_batched(env, group, arrays, group.to_backend(actions), break_when_any_done)
        return _assemble(env, arrays, steps, actions, None, set_truncated)
    steps, policy_data = _run_policy(
        env, arrays, policy, break_when_any_done, group.step, group.to_backend, group.reset_done
    )
    return _assemble(env, arrays, steps, None, policy_data, set_truncated)


def _write_first_observation(env: GymWrapper, arrays: _StepArrays, first: Any) -> None:
    """The reset's observation into the rollout's first row, named if it is off its space."""
    check_observation(env, first, "reset()")
    try:
        arrays.root_obs[0] = first
    except (ValueError, TypeError) as err:
        explain_observation_error(env, first, "reset()", err)


def _single_rollout(
    env: GymWrapper,
    arrays: _StepArrays,
    max_steps: int,
    policy: Callable[[TensorDictBase], TensorDictBase | None] | None,
    break_when_any_done: bool,
    set_truncated: bool,
    actions: torch.Tensor | None,
    reset: bool,
) -> TensorDictBase:
    if reset:
        _write_first_observation(env, arrays, env._reset_backend()[0])
    else:
        arrays.root_obs[0] = 0
    if policy is None:
        steps = _run_random_single(env, arrays, env._to_backend(actions), break_when_any_done)
        return _assemble(env, arrays, steps, actions, None, set_truncated)

    def step(action: Any) -> tuple[Any, Any, Any, Any]:
        obs, reward, terminated, truncated, _ = env._env.step(action)
        return obs, reward, terminated, truncated

    steps, policy_data = _run_policy(
        env, arrays, policy, break_when_any_done, step, env._to_backend, lambda done, obs: env._env.reset()[0]
    )
    return _assemble(env, arrays, steps, None, policy_data, set_truncated)


def _run_random_single(env: GymWrapper, arrays: _StepArrays, actions: Any, break_when_any_done: bool) -> int:
    step_env, reset_env = env._env.step, env._env.reset
    next_obs, reward, terminated, truncated = arrays.next_obs, arrays.reward, arrays.terminated, arrays.truncated
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
        explain_observation_error(env, obs, "step()", err)
    check_observation(env, obs, "step()")  # once: an observation numpy broadcast silently
    # the next step starts where this one ended, except after a reset
    arrays.root_obs[1:steps] = next_obs[: steps - 1]
    for t, obs in reset_rows:
        arrays.root_obs[t] = obs
    return steps


def _run_random_batched(
    env: EnvBase, group: SimulatorGroup, arrays: _StepArrays, actions: Any, break_when_any_done: bool
) -> int:
    step, reset_done = group.step, group.reset_done
    next_obs, root_obs = arrays.next_obs, arrays.root_obs
    max_steps = len(next_obs)
    obs = None
    steps = max_steps
    try:  # no cost per step; a failure to write an observation is explained below
        for t in range(max_steps):
            obs, r, te, tr = step(actions[t])
            next_obs[t] = obs
            arrays.reward[t] = r
            arrays.terminated[t] = te
            arrays.truncated[t] = tr
            done = te | tr
            if done.any():
                if break_when_any_done:
                    steps = t + 1
                    break
                if t + 1 < max_steps:
                    obs = reset_done(done, obs)
            if t + 1 < max_steps:
                root_obs[t + 1] = obs
    except (ValueError, TypeError) as err:
        explain_observation_error(env, obs, "step()", err)
    check_observation(env, obs, "step()")  # once: an observation numpy broadcast silently
    return steps


def _run_policy(
    env: EnvBase,
    arrays: _StepArrays,
    policy: Callable[[TensorDictBase], TensorDictBase | None],
    break_when_any_done: bool,
    step: Callable[[Any], tuple[Any, Any, Any, Any]],
    to_backend: Callable[[torch.Tensor], Any],
    reset_done: Callable[[Any, Any], Any],
) -> tuple[int, TensorDictBase]:
    batch, device = env.batch_size, env.device
    root_obs = torch.from_numpy(arrays.root_obs)
    not_done = torch.zeros((*batch, 1), dtype=torch.bool)
    max_steps = len(root_obs)
    steps = max_steps
    carried: dict[str, Any] = {}
    recorded: list[TensorDictBase] = []
    obs = None
    try:  # no cost per step; a failure to write an observation is explained below
        for t in range(max_steps):
            entries = {**carried, "observation": root_obs[t], "done": not_done, "terminated": not_done}
            entries["truncated"] = not_done
            data = TensorDict(entries, batch_size=batch, device=device)
            returned = policy(data)
            data = data if returned is None else returned
            env._check_step_input(data)
            obs, r, te, tr = step(to_backend(data.get("action")))
            arrays.next_obs[t] = obs
            arrays.reward[t] = r
            arrays.terminated[t] = te
            arrays.truncated[t] = tr
            recorded.append(data)
            carried = _carried_entries(data)
            done = np.logical_or(te, tr)
            if done.any():
                if break_when_any_done:
                    steps = t + 1
                    break
                if t + 1 < max_steps:
                    obs = reset_done(done, obs)
            if t + 1 < max_steps:
                arrays.root_obs[t + 1] = obs
    except (ValueError, TypeError) as err:
        explain_observation_error(env, obs, "step()", err)
    check_observation(env, obs, "step()")  # once: an observation numpy broadcast silently
    return steps, env._stack_steps(recorded, contiguous=True)


def _carried_entries(data: TensorDictBase) -> dict[str, Any]:
    """What the policy wrote that the next step's input keeps (``step_mdp``'s rule): its
    root entries but the action, then its ``"next"`` entries moved up, which win.

    Sub-tensordicts are copied (shallowly), so that the next step's policy cannot
    change the recorded step by writing into them.
    """
    carried: dict[str, Any] = {}
    written_next = None
    for key, value in data.items():
        if key == "next":
            written_next = value
        elif key not in _ENV_ROOT_KEYS and key != "action":
            carried[key] = value.copy() if isinstance(value, TensorDictBase) else value
    if written_next is not None:
        for key, value in written_next.items():
            if key in _ENV_NEXT_KEYS:
                continue
            previous = carried.get(key)
            if isinstance(value, TensorDictBase):
                value = previous.update(value) if isinstance(previous, TensorDictBase) else value.copy()
            carried[key] = value
    return carried


def _assemble(
    env: EnvBase,
    arrays: _StepArrays,
    steps: int,
    actions: torch.Tensor | None,
    policy_data: TensorDictBase | None,
    set_truncated: bool,
) -> TensorDictBase:
    """Lays the arrays out as the generic rollout does, ``[*batch, T]``, merged with
    what the policy wrote."""
    nb = env.batch_dims
    batch_size = [*env.batch_size, steps]

    def arrange(array: np.ndarray | torch.Tensor, trailing_one: bool = False) -> torch.Tensor:
        tensor = torch.from_numpy(array[:steps]) if isinstance(array, np.ndarray) else array[:steps]
        if trailing_one:
            tensor = tensor.unsqueeze(-1)
        return tensor.movedim(0, nb) if nb else tensor  # time leads in the arrays

    if set_truncated:
        arrays.truncated[steps - 1] = True
    root_done = torch.zeros(*batch_size, 1, dtype=torch.bool)
    env_next = TensorDict(
        {
            "observation": arrange(arrays.next_obs),
            "reward": arrange(arrays.reward, True),
            "done": arrange(arrays.terminated | arrays.truncated, True),
            "terminated": arrange(arrays.terminated, True),
            "truncated": arrange(arrays.truncated, True),
        },
        batch_size=batch_size,
        device=env.device,
    )
    env_root = {
        "observation": arrange(arrays.root_obs),
        "done": root_done,
        "terminated": root_done.clone(),
        "truncated": root_done.clone(),
    }
    if policy_data is None:
        out = TensorDict({**env_root, "action": arrange(actions), "next": env_next}, batch_size=batch_size, device=env.device)
    else:
        out = policy_data
        out.update(env_root)
        written_next = out.get("next", None)
        if written_next is None:
            out.set("next", env_next)
        else:
            written_next.update(env_next)
    out.names = [None] * nb + ["time"]
    return out
