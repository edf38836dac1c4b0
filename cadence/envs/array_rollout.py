"""The random-action rollout of gym-like backends, simulated into preallocated arrays.

``EnvBase.rollout`` with random actions builds a tensordict per step; a backend that
follows gymnasium's calling convention (``GymLikeEnv``: dm_control, a gymnasium env with
dict observations, ...) can instead be stepped straight into numpy arrays, one per
observation entry, with all actions drawn at the start, and laid out as the generic
rollout once at the end. ``GymWrapper`` has its own such shortcut for a single array
observation (:mod:`cadence.envs.libs.gym_rollout`); this one takes what that one leaves:
dict observations, other gym-like backends.

It applies to stock readers (``read_obs``, ``read_reward``, ``read_done``,
``_build_output``, ``_step``), an array or a flat dict of arrays as observation, tensor
specs, no pixels, info readers, type checks or auto-reset, on the CPU. As with the
gymnasium shortcut, the whole call's actions are drawn from ``env.rng`` at the start (the
generator moves on by ``max_steps`` draws even when the rollout stops early); otherwise
the result is the generic rollout's, entry for entry (the tests compare them).

Examples:
    >>> import pytest; dm_control = pytest.importorskip("dm_control")  # skips without dm_control
    >>> from cadence.envs import DMControlEnv
    >>> env = DMControlEnv("cheetah", "run")
    >>> env._array_rollout_applies()
    True
    >>> env.rollout(5, break_when_any_done=False)["next", "position"].shape
    torch.Size([5, 8])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import NonTensor

if TYPE_CHECKING:  # pragma: no cover - type hints only (gym_like builds on this module)
    from cadence.envs.gym_like import GymLikeEnv

__all__ = ["array_rollout", "array_rollout_applies"]


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty(0, dtype=dtype).numpy().dtype


def array_rollout_applies(env: GymLikeEnv) -> bool:
    """Whether :func:`array_rollout` can run ``env``, given stock readers (which
    ``GymLikeEnv._array_rollout_applies`` checks; see the module)."""
    if env.batch_size or env.device not in (None, torch.device("cpu")) or env.run_type_checks or env.auto_reset:
        return False
    if getattr(env, "from_pixels", False) or env.info_dict_reader or len(env.action_keys) != 1:
        return False
    specs = (env.full_observation_spec, env.full_done_spec, env.full_reward_spec)
    if not all(type(key) is str for spec in specs for key in spec.keys(True, True)):
        return False
    if any(isinstance(leaf, NonTensor) for leaf in env.full_observation_spec.values(True, True)):
        return False
    return sorted(env.full_done_spec.keys()) == ["done", "terminated", "truncated"] and env.reward_keys == ["reward"]


def array_rollout(env: GymLikeEnv, max_steps: int, break_when_any_done: bool, set_truncated: bool) -> TensorDictBase:
    """``env.rollout(max_steps, ...)`` with random actions, from a reset (see the module)."""
    obs_specs = {key: env.full_observation_spec[key] for key in env.full_observation_spec.keys()}
    action_key = env.action_keys[0]
    actions = env.full_action_spec[action_key].rand(torch.Size([max_steps]), generator=env.rng)
    backend_actions = env.read_action(actions)
    first = env.reset()
    next_obs = {key: np.empty((max_steps, *spec.shape), _numpy_dtype(spec.dtype)) for key, spec in obs_specs.items()}
    root_obs = {key: np.empty_like(array) for key, array in next_obs.items()}
    for key in obs_specs:
        root_obs[key][0] = first.get(key).numpy()
    reward_spec = env.full_reward_spec["reward"]
    reward = np.empty((max_steps, *reward_spec.shape), _numpy_dtype(reward_spec.dtype))
    terminated = np.zeros(max_steps, bool)
    truncated = np.zeros(max_steps, bool)
    single = list(obs_specs) == ["observation"]
    steps = max_steps
    for t in range(max_steps):
        obs, r, te, tr, _ = env._simulate(backend_actions[t])
        _write(next_obs, obs, t, single)
        reward[t] = r
        terminated[t], truncated[t] = bool(te), bool(tr)
        if te or tr:
            if break_when_any_done:
                steps = t + 1
                break
            if t + 1 < max_steps:  # through reset(), as the generic loop: its checks and bookkeeping
                _write(root_obs, env.reset().select(*obs_specs).numpy(), t + 1, single=False)
                continue
        if t + 1 < max_steps:
            _write(root_obs, obs, t + 1, single)
    return _assemble(env, obs_specs, root_obs, next_obs, reward, terminated, truncated, actions, steps, set_truncated)


def _write(arrays: dict[str, np.ndarray], obs: Any, t: int, single: bool) -> None:
    if single:
        arrays["observation"][t] = obs
        return
    if isinstance(obs, tuple):  # a Tuple space: entries "0", "1", ... (read_obs's rule)
        obs = {str(i): item for i, item in enumerate(obs)}
    for key, array in arrays.items():
        array[t] = obs[key]


def _assemble(
    env: GymLikeEnv,
    obs_specs: dict[str, Any],
    root_obs: dict[str, np.ndarray],
    next_obs: dict[str, np.ndarray],
    reward: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    actions: torch.Tensor,
    steps: int,
    set_truncated: bool,
) -> TensorDictBase:
    if set_truncated:
        truncated[steps - 1] = True
    flags = torch.zeros(steps, 1, dtype=torch.bool)
    done_next = torch.from_numpy(terminated[:steps] | truncated[:steps]).unsqueeze(-1)
    root: dict[str, Any] = {key: torch.from_numpy(root_obs[key][:steps]) for key in obs_specs}
    following: dict[str, Any] = {key: torch.from_numpy(next_obs[key][:steps]) for key in obs_specs}
    following.update(
        reward=torch.from_numpy(reward[:steps]),
        done=done_next,
        terminated=torch.from_numpy(terminated[:steps]).unsqueeze(-1),
        truncated=torch.from_numpy(truncated[:steps]).unsqueeze(-1),
    )
    root.update(done=flags, terminated=flags.clone(), truncated=flags.clone(), next=following)
    root[env.action_keys[0]] = actions[:steps]
    out = TensorDict(root, batch_size=[steps], device=env.device)
    out.names = ["time"]
    return out
