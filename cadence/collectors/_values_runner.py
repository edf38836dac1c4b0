"""(Internal to the collectors.) The runner of envs that step on plain tensors.

An env for which :func:`~cadence.envs.values_loop.values_loop_applies` (a backend with a
kernel, a serial or parallel batch of them, a torch-written env, under transforms that all
``steps_on_values``; see :mod:`cadence.envs.step_values`) needs no TensorDict inside a batch:
:class:`~cadence.envs.values_loop.ValuesLoop` steps it on dicts of tensors, and each entry
is stacked at the end of the batch. The policy runs compiled to a function on such a dict
(``compile_policy``) or, any other policy, on one TensorDict of the step's entries
(:func:`~cadence.modules.tensor_view.tensordict_step`).

The batches are the generic runner's, entry for entry (the tests compare them): the same
keys, dtypes and values, ``("collector", "traj_ids")``, the last dim named ``"time"``.

Examples:
    >>> from cadence.envs import GymEnv, RewardSum, StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(5))
    >>> env.append_transform(RewardSum())  # doctest: +ELLIPSIS
    TransformedEnv(...)
    >>> from cadence.envs.values_loop import values_loop_applies
    >>> values_loop_applies(env)
    True
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.collectors._runners import TRAJ_KEY, TrajectoryIds
from cadence.envs.common import EnvBase
from cadence.envs.values_loop import Recording, ValuesLoop
from cadence.modules.tensor_view import TensorStep

__all__ = ["ValuesRunner"]


class _WithTrajectoryIds(Recording):
    """A recording that also keeps, per step, the ids of the trajectories the step belongs to."""

    def __init__(self, dim: int, ids: TrajectoryIds) -> None:
        super().__init__(dim)
        self.ids = ids
        self.traj_ids: list[torch.Tensor] = []

    def add(self, entries: dict[Any, torch.Tensor], next_entries: dict[Any, torch.Tensor],
            steps: int | None = None) -> None:
        # read before a done step renews them: a stretch's steps share them (it ends at a done step)
        self.traj_ids.extend([self.ids.current] * (1 if steps is None else steps))
        super().add(entries, next_entries, steps)


class ValuesRunner:
    """Steps ``env`` on dicts of tensors (see the module).

    Args:
        env: an env for which :func:`~cadence.envs.values_loop.values_loop_applies`.
        ids: its trajectory ids.
    """

    def __init__(self, env: EnvBase, ids: TrajectoryIds) -> None:
        self.env = env
        self.ids = ids
        self.loop = ValuesLoop(env)
        self.root: dict[str, torch.Tensor] | None = None  # the next input's entries

    def reset(self) -> None:
        """Resets the env now; the next batch starts new trajectories."""
        self.root = self.loop.entries(self.env.reset())
        self.ids.restart()

    def state(self) -> TensorDictBase | None:
        """Where the env stands: its next input, as the generic runner keeps it."""
        if self.root is None:
            return None
        return TensorDict(self.root, batch_size=self.env.batch_size).clone()

    def load_state(self, shuttle: TensorDictBase | None) -> None:
        """Continues from ``shuttle`` (what :meth:`state` returned)."""
        self.root = None if shuttle is None else self.loop.entries(shuttle.clone())

    def collect(self, steps: int, policy: TensorStep | None) -> TensorDictBase:
        """Runs ``steps`` steps with the compiled ``policy``, or random actions (``None``)
        drawn as the env's ``rand_action`` draws them (all at the start where the loop takes
        stretches of them)."""
        if self.root is None:
            self.reset()
        batch_size, loop, ids = self.env.batch_size, self.loop, self.ids
        recording = _WithTrajectoryIds(self.env.batch_dims, ids)
        assert self.root is not None
        actions = loop.draw_ahead(steps) if policy is None else None
        self.root = loop.run(self.root, steps, policy, recording, actions=actions,
                             on_done=lambda done: ids.renew(done.reshape(*batch_size, -1).any(-1)))
        extra = {TRAJ_KEY[0]: {TRAJ_KEY[1]: torch.stack(recording.traj_ids, self.env.batch_dims)}}
        return loop.assemble(recording, extra)
