"""(Internal to the collectors.) The runner of envs that step on plain tensors.

A ``TransformedEnv`` whose transforms all ``steps_on_values`` over a backend that steps on
values (a stock gymnasium or dm_control env, a ``SerialEnv`` of such; see
:mod:`cadence.envs.step_values`) needs no TensorDict inside a batch:
:class:`~cadence.envs.values_loop.ValuesLoop` steps it on dicts of tensors, and each entry
is stacked at the end of the batch. The policy runs compiled to a function on such a dict
(``compile_policy``) or, any other ``TensorDictModuleBase``, on one TensorDict of the
step's entries (:func:`tensordict_step`).

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

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.collectors._runners import TRAJ_KEY, TrajectoryIds
from cadence.envs.common import EnvBase
from cadence.envs.values_loop import ValuesLoop, any_done
from cadence.modules.tensor_view import TensorStep, tensordict_step

__all__ = ["ValuesRunner", "tensordict_step"]


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
        drawn as the env's ``rand_action`` draws them."""
        if self.root is None:
            self.reset()
        batch_size, loop = self.env.batch_size, self.loop
        recording = loop.recording()
        ids: list[torch.Tensor] = []
        root = self.root
        assert root is not None
        for _ in range(steps):
            ids.append(self.ids.current)
            step = loop.step(root, policy)
            recording.add(step.entries, step.next_entries)
            root = step.next_root
            if any_done(step.done):
                self.ids.renew(step.done.reshape(*batch_size, -1).any(-1))
                root = loop.reset_done(root)
        self.root = root
        traj_ids = {TRAJ_KEY[0]: {TRAJ_KEY[1]: torch.stack(ids, self.env.batch_dims)}}
        return loop.assemble(recording, traj_ids)
