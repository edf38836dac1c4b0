"""Gym-like backends on the array protocol (:mod:`cadence.envs.array_simulator`).

A backend that follows gymnasium's calling convention (``GymLikeEnv``: dm_control, a
gymnasium env with dict or tuple observations, ...) with the stock readers gives a
:class:`GymLikeSimulator`: its simulator stepped straight into numpy arrays, one per
observation entry, rather than through the readers and a tensordict per step. Random
rollouts, serial batches of such envs and the collectors' array runner then step it.

It is ``GymLikeEnv``'s ``array_kernel``: a class keeps it while it keeps the stock readers
(``read_obs``, ``read_reward``, ``read_done``, ``_build_output``, ``_step``: :attr:`GymLikeSimulator.REPLACES`;
``EnvBase.kernel`` states the rule). It applies (:func:`gym_like_simulator_applies`) to an array or a flat dict of arrays
as observation, tensor specs, one ``"action"``, a reward of shape ``(1,)``, the three
root done flags, no batch dims, pixels, info readers, type checks or auto-reset, on the
CPU. Resets go through ``env.reset()`` (its checks and bookkeeping, as the generic loop's).
The results are the generic path's, entry for entry (the tests compare them).

Examples:
    >>> import pytest; dm_control = pytest.importorskip("dm_control")  # skips without dm_control
    >>> from cadence.envs import DMControlEnv
    >>> env = DMControlEnv("cheetah", "run")
    >>> type(env._array_simulator()).__name__
    'GymLikeSimulator'
    >>> env.rollout(5, break_when_any_done=False)["next", "position"].shape
    torch.Size([5, 8])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from cadence.data import NonTensor
from cadence.envs.array_simulator import STEP_MACHINERY, ArraySimulator

if TYPE_CHECKING:  # pragma: no cover - type hints only (gym_like builds on this module)
    from cadence.envs.common import EnvBase
    from cadence.envs.gym_like import GymLikeEnv

__all__ = ["GymLikeSimulator", "gym_like_simulator_applies"]


def gym_like_simulator_applies(env: GymLikeEnv) -> bool:
    """Whether a :class:`GymLikeSimulator` can step ``env`` with its settings now, given a
    class that keeps the stock readers (see the module).

    Examples:
        >>> from cadence.envs import GymEnv
        >>> gym_like_simulator_applies(GymEnv("Pendulum-v1")), gym_like_simulator_applies(GymEnv("Pendulum-v1", num_envs=2))
        (True, False)
    """
    if env.batch_size or env.device not in (None, torch.device("cpu")) or env.run_type_checks or env.auto_reset:
        return False
    if getattr(env, "from_pixels", False) or env.info_dict_reader or env.action_keys != ["action"]:
        return False
    specs = (env.full_observation_spec, env.full_done_spec, env.full_reward_spec)
    if not all(type(key) is str for spec in specs for key in spec.keys(True, True)):
        return False
    if any(isinstance(leaf, NonTensor) for leaf in env.full_observation_spec.values(True, True)):
        return False
    return (
        sorted(env.full_done_spec.keys()) == ["done", "terminated", "truncated"]
        and env.reward_keys == ["reward"]
        and tuple(env.full_reward_spec["reward"].shape) == (1,)
    )


class GymLikeSimulator(ArraySimulator):
    """A gym-like env's simulator on the array protocol (see the module).

    Args:
        env: a ``GymLikeEnv`` with stock readers for which :func:`gym_like_simulator_applies`.

    Examples:
        >>> import torch
        >>> from cadence.envs import GymEnv
        >>> simulator = GymLikeSimulator(GymEnv("Pendulum-v1"))
        >>> obs = simulator.reset_all()
        >>> simulator.step(simulator.to_backend(torch.zeros(1)))[0].shape
        (3,)
    """

    #: It writes what the stock readers would read (and calls ``_simulate``, ``read_action``).
    REPLACES = STEP_MACHINERY | {"_step", "_build_output", "read_obs", "_read_entry", "read_reward", "read_done"}

    @classmethod
    def for_env(cls, env: EnvBase) -> GymLikeSimulator | None:
        return cls(env) if gym_like_simulator_applies(env) else None  # type: ignore[arg-type]

    def describe(self) -> str:
        return f"gym-like: {type(self.env).__name__}'s simulator, stepped into arrays"

    def __init__(self, env: GymLikeEnv) -> None:
        super().__init__(env, list(env.full_observation_spec.keys()))
        self._single = self.observation_keys == ("observation",)

    def to_backend(self, action: torch.Tensor) -> Any:
        """The protocol's ``to_backend``: the env's own action reader."""
        return self.env.read_action(action)  # type: ignore[attr-defined]

    def reset_all(self) -> Any:
        """The protocol's ``reset_all``: the env's ``reset`` (its checks and bookkeeping included)."""
        return self.env.reset()  # its checks and bookkeeping, as the generic loop's

    def step(self, action: Any) -> tuple[Any, Any, Any, Any]:
        """The protocol's ``step``: the backend's step through the env's ``_simulate``."""
        obs, reward, terminated, truncated, _ = self.env._simulate(action)  # type: ignore[attr-defined]
        return obs, reward, bool(terminated), bool(truncated)

    def reset_done(self, done: np.ndarray, obs: Any) -> Any:
        """The protocol's ``reset_done``: one env, so a reset of it."""
        return self.env.reset()

    def write_observation(self, targets: dict[str, np.ndarray], index: tuple[Any, ...], obs: Any) -> None:
        """The protocol's ``write_observation``: one entry, or each key of a dict or tuple observation."""
        if self._single and not hasattr(obs, "keys"):
            targets["observation"][index] = obs
            return
        if isinstance(obs, tuple):  # a Tuple space: entries "0", "1", ... (read_obs's rule)
            obs = {str(i): item for i, item in enumerate(obs)}
        for key, array in targets.items():
            array[index] = obs[key]

    def entries(self, obs: Any) -> dict[str, Any]:
        if isinstance(obs, Mapping) or hasattr(obs, "keys"):
            return {key: obs[key] for key in self.observation_keys}
        return super().entries(obs)
