"""An env written in torch on the array protocol (:mod:`cadence.envs.array_simulator`).

An ``EnvBase`` subclass whose ``_step`` and ``_reset`` take and return TensorDicts (the
seed's ``PendulumEnv``, a user's own env) gets a :class:`TorchEnvSimulator`: its ``_step``
is called on a TensorDict holding where the env stands (its observation and state entries,
moved from the last output by reference: no ``step_mdp``) and the action; the output's
observations, nested ones included, are copied into the arrays. What ``step()`` adds on
the generic path stays: the action checked (and cast) as ``step()`` does, the done flags
completed, resets through ``_reset_done``. The collectors' array runner and ``SerialEnv``
then skip the per-step ``"next"`` TensorDicts, the step_mdp and the stacking (a rollout
steps the env on values instead: ``EnvBase._step_values``, which keeps a graph through it).

It is ``EnvBase``'s own ``array_kernel``: a class keeps it while it keeps ``step()``'s
bookkeeping (``EnvBase.kernel`` states the rule), and it applies on the CPU, with static specs of tensors and the arrays' layout
(:func:`~cadence.envs.array_simulator.arrays_fit`, ``"truncated"`` optional). The arrays
hold copies: a path that trains through the simulator (the seed's Pendulum tutorial) does
not take it.

A stateless env's state travels in its data (:attr:`~cadence.envs.array_simulator.ArraySimulator.state_in_data`):
this simulator keeps it from step to step, so only paths that own the data from step to
step use it (not ``ParallelEnv``'s workers, whose input may carry another state).

Examples:
    >>> import torch
    >>> from cadence.envs import PendulumEnv
    >>> env = PendulumEnv()
    >>> type(env._array_simulator()).__name__
    'TorchEnvSimulator'
    >>> env.rollout(5)["next", "params", "g"].shape
    torch.Size([5])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tensordict import TensorDictBase

from cadence.data import NonTensor
from cadence.envs.array_simulator import ArraySimulator, arrays_fit, defining_class
from cadence.envs.utils import SpecMismatchError

if TYPE_CHECKING:  # pragma: no cover - type hints only
    from cadence.envs.common import EnvBase

__all__ = ["TorchEnvSimulator", "torch_simulator_applies"]

def torch_simulator_applies(env: EnvBase) -> bool:
    """Whether :class:`TorchEnvSimulator` can step ``env`` (see the module).

    Examples:
        >>> from cadence.envs import PendulumEnv
        >>> env = PendulumEnv()
        >>> torch_simulator_applies(env)
        True
        >>> env.run_type_checks = True
        >>> torch_simulator_applies(env)
        False
    """
    if env.device not in (None, torch.device("cpu")) or env.run_type_checks or env.auto_reset:
        return False
    if env._has_dynamic_specs() or not arrays_fit(env, truncated_optional=True):
        return False
    specs = (env.full_observation_spec, env.full_state_spec, env.full_done_spec, env.full_reward_spec)
    return not any(isinstance(leaf, NonTensor) for spec in specs for leaf in spec.values(True, True))


class TorchEnvSimulator(ArraySimulator):
    """An env written in torch, stepped through its own ``_step`` into the arrays.

    The raw observation of the protocol is the env's output TensorDict; :meth:`stand_at`
    tells the simulator where the env stands when another path reset or stepped it.

    Args:
        env: an env for which :func:`torch_simulator_applies`.

    Examples:
        >>> import torch
        >>> from cadence.envs import PendulumEnv
        >>> simulator = TorchEnvSimulator(PendulumEnv())
        >>> out = simulator.reset_all()
        >>> obs, reward, terminated, truncated = simulator.step(torch.zeros(1))
        >>> obs["th"].shape, reward.shape, bool(terminated)
        (torch.Size([]), torch.Size([]), False)
    """

    follows_env_reset = False  # it keeps where the env stands (the next _step's input) itself

    @classmethod
    def for_env(cls, env: EnvBase) -> TorchEnvSimulator | None:
        return cls(env) if torch_simulator_applies(env) else None

    def describe(self) -> str:
        return f"torch: {defining_class(type(self.env), '_step')}._step, stepped into arrays"

    def __init__(self, env: EnvBase) -> None:
        super().__init__(env, list(env.full_observation_spec.keys(True, True)))
        # what the next _step reads: the observation and state entries, by top-level name
        self._carried = sorted({*env.full_observation_spec.keys(), *env.full_state_spec.keys()})
        self.state_in_data = len(env.full_state_spec.keys()) > 0
        self._declared = {
            *self.observation_keys,
            *env.full_state_spec.keys(True, True),
            *env.full_reward_spec.keys(True, True),
            *env.full_done_spec.keys(True, True),
        }
        self._done_keys = list(env.full_done_spec.keys(True, True))
        self._batch_shape = tuple(env.batch_size)
        self._never_truncated = np.zeros(self._batch_shape, dtype=np.bool_)
        self._current: TensorDictBase | None = None  # where the env stands
        self._checked = False

    # ------------------------------------------------------------------ the protocol
    def to_backend(self, action: torch.Tensor) -> Any:
        """The protocol's ``to_backend``: the action tensor as it is."""
        return action

    def reset_all(self) -> Any:
        """The protocol's ``reset_all``: the env's reset, where it then stands."""
        out = self.env.reset()
        self.stand_at(out)
        return out

    def step(self, action: Any) -> tuple[Any, Any, Any, Any]:
        """The protocol's ``step``: the env's ``_step`` on where it stands, with ``step()``'s action check."""
        env = self.env
        if self._current is None:
            raise RuntimeError(f"{type(env).__name__}: the array simulator was stepped before a reset")
        data = self._current.set("action", action)
        env._check_step_input(data)  # step()'s own check: shapes, and a cast to the spec's dtype
        out = env._step(data)
        env._complete_done(out)
        if not self._checked:
            self._check_output(out)
        self._current = out.select(*self._carried, *self._done_keys, strict=False)
        batch = self._batch_shape  # the protocol's flags and rewards: shaped like the batch
        truncated = out.get("truncated", None)  # an env may declare no truncation
        return (
            out,
            out.get("reward").reshape(batch),
            out.get("terminated").reshape(batch),
            self._never_truncated if truncated is None else truncated.reshape(batch),
        )

    def reset_done(self, done: np.ndarray, obs: Any) -> Any:
        """The protocol's ``reset_done``: the generic loop's partial reset of the done components."""
        assert self._current is not None
        # the generic loop's partial reset, of the components `done` selects (a step counter
        # outside the env may end an episode the env's own flags go on with)
        self._current.set("done", torch.from_numpy(np.array(done, dtype=np.bool_)).reshape(*self._batch_shape, 1))
        next_root, _ = self.env._reset_done(self._current)
        self.stand_at(next_root)
        return next_root

    def write_observation(self, targets: dict[Any, np.ndarray], index: tuple[Any, ...], obs: Any) -> None:
        """The protocol's ``write_observation``: each observation entry of the output at ``index``."""
        for key, value in obs.items(True, True):  # one walk through the output (nested keys as tuples)
            target = targets.get(key)
            if target is not None:
                target[index] = value.detach().numpy()

    def stand_at(self, entries: TensorDictBase) -> None:
        self._current = entries.select(*self._carried, strict=False)

    # ------------------------------------------------------------------ checks
    def _check_output(self, out: TensorDictBase) -> None:
        """Once: the step's output keeps to the specs (the arrays hold the declared entries
        only; the generic loop would not stack the steps either)."""
        env = self.env
        undeclared = sorted(map(str, {key for key in out.keys(True, True)} - self._declared))
        if undeclared:
            raise SpecMismatchError(
                f"{type(env).__name__}._step returned entries its specs do not declare: {undeclared}; declare them "
                f"in the observation, reward or done specs (check_env_specs(env) checks the env)"
            )
        for key in self.observation_keys:
            value, spec = out.get(key, None), env.full_observation_spec[key]
            if value is None or value.shape != spec.shape:
                got = "nothing" if value is None else f"shape {tuple(value.shape)}"
                raise SpecMismatchError(
                    f"{type(env).__name__}._step returned {got} at observation key {key!r}, its spec has shape "
                    f"{tuple(spec.shape)}"
                )
        self._checked = True
