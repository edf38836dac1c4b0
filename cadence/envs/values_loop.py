"""The step loop on plain tensors: what ``rollout`` and the collectors run for envs that
step on values (see :mod:`cadence.envs.step_values`).

:class:`ValuesLoop` takes one step from a dict of the input's entries: it writes the
action (a compiled policy's, or random ones drawn as ``rand_action`` draws them), steps
the env as :class:`~cadence.envs.step_values.StepValues` (``EnvBase._step_as_values``),
and makes the next input by moving entries between dicts (``step_mdp``'s rule: the
action and the rewards stay behind). Resets (rare) go through the env's own
``_reset_done`` on a TensorDict. :meth:`ValuesLoop.assemble` stacks each entry once.

It serves envs for which :func:`values_loop_applies`: the steps run on values, every key is
a string (no nested entries), every entry a tensor, on the CPU, without type checks or auto-reset, with one root
``"done"``. Its results are the generic loop's, entry for entry (the tests compare them).

Examples:
    >>> from cadence.envs import GymEnv, StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(3))
    >>> loop = ValuesLoop(env)
    >>> root = loop.entries(env.reset())
    >>> steps = [loop.step(root, None)]
    >>> sorted(steps[0].next_entries)
    ['done', 'observation', 'reward', 'step_count', 'terminated', 'truncated']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import NonTensor
from cadence.envs.step_values import StepValues

if TYPE_CHECKING:  # pragma: no cover - type hints only (the env core imports this module)
    from cadence.envs.common import EnvBase

__all__ = ["ValuesLoop", "ValuesStep", "values_loop_applies"]

Entries = dict[str, torch.Tensor]
TensorPolicy = Callable[[Entries], None]


def values_loop_applies(env: EnvBase) -> bool:
    """Whether :class:`ValuesLoop` can step ``env`` (see the module).

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.custom import PendulumEnv
        >>> values_loop_applies(GymEnv("Pendulum-v1")), values_loop_applies(PendulumEnv())
        (True, False)
    """
    if env.device not in (None, torch.device("cpu")) or env.run_type_checks or env.auto_reset:
        return False
    if not env._values_step_applies():
        return False
    specs = (env.full_observation_spec, env.full_done_spec, env.full_reward_spec, env.full_action_spec,
             env.full_state_spec)
    if not all(type(key) is str for spec in specs for key in spec.keys(True, True)):
        return False
    if any(isinstance(leaf, NonTensor) for spec in specs for leaf in spec.values(True, True)):
        return False  # text, graphs...: kept as they come, they do not stack as tensors
    return "done" in env.full_done_spec.keys() and env.full_done_spec["done"].shape[: env.batch_dims] == env.batch_size


class ValuesStep(NamedTuple):
    """One step: its input's entries (with the action), its results, the next input's
    entries (before any reset), and its done flag."""

    entries: Entries
    next_entries: dict[Any, torch.Tensor]
    next_root: Entries
    done: torch.Tensor


class ValuesLoop:
    """Steps ``env`` on dicts of tensors (see the module).

    Args:
        env: an env for which :func:`values_loop_applies`.
    """

    def __init__(self, env: EnvBase) -> None:
        self.env = env
        action_keys = list(env.action_keys)
        self._single_action = action_keys[0] if len(action_keys) == 1 else None
        self._rewards = set(env.reward_keys)
        # step_mdp's rule: the step's results leave "next", the action and rewards stay behind
        self._dropped = {"next", *action_keys, *self._rewards}

    @staticmethod
    def entries(td: TensorDictBase) -> Entries:
        """The root entries of a flat tensordict (``"next"`` left out)."""
        return {key: value for key, value in td.items() if key != "next"}

    def step(self, root: Entries, policy: TensorPolicy | None) -> ValuesStep:
        """One step from the input entries ``root`` (not changed): the policy's action, or
        random actions drawn from ``env.rng`` as ``rand_action`` draws them."""
        env = self.env
        values = dict(root)
        if policy is not None:
            policy(values)
        elif self._single_action is not None:
            values[self._single_action] = env.full_action_spec[self._single_action].rand(None, generator=env.rng)
        else:
            values.update(env.full_action_spec.rand(None, generator=env.rng).items())
        next_entries = env._step_as_values(StepValues(values, env.batch_size, env.device)).entries
        dropped, rewards = self._dropped, self._rewards
        next_root = {key: value for key, value in values.items() if key not in dropped}
        for key, value in next_entries.items():
            if key not in rewards:
                next_root[key] = value
        return ValuesStep(values, next_entries, next_root, next_entries["done"])

    def reset_done(self, next_root: Entries) -> Entries:
        """The next input with its done components reset (through the env's ``_reset_done``)."""
        reset, _ = self.env._reset_done(TensorDict(next_root, batch_size=self.env.batch_size))
        return self.entries(reset)

    def assemble(self, steps: list[ValuesStep], extra: dict[str, Any] | None = None) -> TensorDictBase:
        """The steps stacked on a trailing ``"time"`` dim, with ``extra`` root entries (already stacked)."""
        env = self.env
        nb = env.batch_dims
        entries: dict[Any, Any] = self._stacked([step.entries for step in steps], nb, "input")
        entries["next"] = self._stacked([step.next_entries for step in steps], nb, "next")
        if extra:
            entries.update(extra)
        out = TensorDict(entries, batch_size=torch.Size([*env.batch_size, len(steps)]))
        out.names = [None] * nb + ["time"]
        return out

    @staticmethod
    def _stacked(steps: list[dict[Any, torch.Tensor]], dim: int, where: str) -> dict[Any, torch.Tensor]:
        out = {}
        for key in steps[0]:
            try:
                out[key] = torch.stack([step[key] for step in steps], dim)
            except (KeyError, RuntimeError) as err:
                raise ValueError(
                    f"The steps' {where} entry {key!r} does not stack ({err!r}); the env's data does not keep to "
                    "its specs: check_env_specs(env) names the entry."
                ) from err
        return out
