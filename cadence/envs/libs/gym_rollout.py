"""The shortcut rollout of gymnasium envs: step the simulator, write into arrays.

``GymWrapper.rollout`` takes this path when the env uses the stock readers and has a
single array observation (no pixels, frame skip, info readers or auto-reset) and the
call asks for nothing that needs a tensordict per step (no callback, no first input).
With random actions, the whole rollout's actions are drawn in one call and no
tensordict is built until the end; with a policy, one small tensordict per step carries
the observation to the policy, and what the policy writes is kept as the generic loop
keeps it (its other entries stay at the root for the next step, its ``"next"`` entries
move up). The result is the generic rollout's, entry for entry (the tests compare them).

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

if TYPE_CHECKING:  # pragma: no cover - type hints only
    from cadence.envs.libs.gym import GymWrapper

__all__ = ["fast_gym_rollout"]

_ENV_ROOT_KEYS = ("observation", "done", "terminated", "truncated")
_ENV_NEXT_KEYS = ("observation", "reward", "done", "terminated", "truncated")


class _StepArrays:
    """The rollout's env data, time first, preallocated from the specs."""

    def __init__(self, env: GymWrapper, max_steps: int) -> None:
        batch = tuple(env.batch_size)
        obs_spec = env.full_observation_spec["observation"]
        obs_dtype = torch.empty(0, dtype=obs_spec.dtype).numpy().dtype
        self.next_obs = np.empty((max_steps, *obs_spec.shape), dtype=obs_dtype)
        self.root_obs = np.empty((max_steps, *obs_spec.shape), dtype=obs_dtype)
        self.reward = np.empty((max_steps, *batch), dtype=np.float32)
        self.terminated = np.zeros((max_steps, *batch), dtype=bool)
        self.truncated = np.zeros((max_steps, *batch), dtype=bool)


def fast_gym_rollout(
    env: GymWrapper,
    max_steps: int,
    policy: Callable[[TensorDictBase], TensorDictBase | None] | None,
    break_when_any_done: bool,
    set_truncated: bool,
) -> TensorDictBase:
    """Runs ``env.rollout`` on the shortcut; see the module's docstring for when it applies.

    Args:
        env: a gymnasium env wrapper whose rollout may take the shortcut.
        max_steps: the number of steps.
        policy: a tensordict policy, or ``None`` for random actions from ``env.rng``.
        break_when_any_done: stop at the first done step.
        set_truncated: mark the last step truncated.

    Returns:
        The rollout, laid out as the generic ``EnvBase.rollout`` lays it out.
    """
    arrays = _StepArrays(env, max_steps)
    obs, _ = env._reset_backend()
    arrays.root_obs[0] = obs
    if policy is None:
        actions = env.full_action_spec["action"].rand(torch.Size([max_steps]), generator=env.rng)
        run = _run_random_vector if env.is_vector else _run_random_single
        steps = run(env, arrays, env._to_backend(actions), break_when_any_done)
        policy_data = None
    else:
        steps, policy_data = _run_policy(env, arrays, policy, break_when_any_done)
        actions = None
    return _assemble(env, arrays, steps, actions, policy_data, set_truncated)


def _run_random_single(env: GymWrapper, arrays: _StepArrays, actions: Any, break_when_any_done: bool) -> int:
    step_env, reset_env = env._env.step, env._env.reset
    next_obs, reward, terminated, truncated = arrays.next_obs, arrays.reward, arrays.terminated, arrays.truncated
    max_steps = len(next_obs)
    steps = max_steps
    reset_rows: list[tuple[int, Any]] = []
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
    # the next step starts where this one ended, except after a reset
    arrays.root_obs[1:steps] = next_obs[: steps - 1]
    for t, obs in reset_rows:
        arrays.root_obs[t] = obs
    return steps


def _run_random_vector(env: GymWrapper, arrays: _StepArrays, actions: Any, break_when_any_done: bool) -> int:
    step_env, reset_env = env._env.step, env._env.reset
    next_obs, root_obs = arrays.next_obs, arrays.root_obs
    max_steps = len(next_obs)
    for t in range(max_steps):
        obs, r, te, tr, _ = step_env(actions[t])
        next_obs[t] = obs
        arrays.reward[t] = r
        arrays.terminated[t] = te
        arrays.truncated[t] = tr
        done = te | tr
        if done.any():
            if break_when_any_done:
                return t + 1
            if t + 1 < max_steps:
                obs, _ = reset_env(options={"reset_mask": done})
        if t + 1 < max_steps:
            root_obs[t + 1] = obs
    return max_steps


def _run_policy(
    env: GymWrapper,
    arrays: _StepArrays,
    policy: Callable[[TensorDictBase], TensorDictBase | None],
    break_when_any_done: bool,
) -> tuple[int, TensorDictBase]:
    step_env = env._env.step
    batch, device = env.batch_size, env.device
    root_obs = torch.from_numpy(arrays.root_obs)
    not_done = torch.zeros((*batch, 1), dtype=torch.bool)
    max_steps = len(root_obs)
    steps = max_steps
    carried: dict[str, Any] = {}
    recorded: list[TensorDictBase] = []
    for t in range(max_steps):
        entries = {**carried, "observation": root_obs[t], "done": not_done, "terminated": not_done}
        entries["truncated"] = not_done
        data = TensorDict(entries, batch_size=batch, device=device)
        returned = policy(data)
        data = data if returned is None else returned
        env._check_step_input(data)
        obs, r, te, tr, _ = step_env(env._to_backend(data.get("action")))
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
                obs = env._env.reset(options={"reset_mask": done})[0] if env.is_vector else env._env.reset()[0]
        if t + 1 < max_steps:
            arrays.root_obs[t + 1] = obs
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
    env: GymWrapper,
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
