"""(Internal to the collectors.) What steps an env for a batch: trajectory ids and the
generic runner (any env, a tensordict per step). The values runner (``_values_runner.py``:
the step loop on plain tensors) builds on these.

The runners keep where the env stands between batches (its next input, the "shuttle")
and return batches ``[*env.batch_size, T]`` whose last dim is named ``"time"``, holding
``("collector", "traj_ids")``. For the same env, seed and policy both give the batches
that ``env.rollout(..., break_when_any_done=False)`` gives, entry for entry.

Examples:
    >>> import torch
    >>> ids = TrajectoryIds(torch.Size([3]), stride=2, offset=1)
    >>> ids.restart()
    >>> ids.current.tolist()
    [1, 3, 5]
    >>> ids.renew(torch.tensor([False, True, False]))
    >>> ids.current.tolist()
    [1, 7, 5]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from cadence.envs.common import EnvBase

__all__ = ["EnvRunner", "TrajectoryIds"]

TRAJ_KEY = ("collector", "traj_ids")


class TrajectoryIds:
    """Trajectory ids of a batch of envs, unique across batches and across workers.

    The ``k``-th trajectory started by this runner gets the id ``k * stride + offset``,
    so ``n`` workers with ``stride=n`` and offsets ``0..n-1`` never share an id.

    Args:
        batch_size: the env's batch size.
        stride: the number of id spaces interleaved (the number of workers).
        offset: this runner's id space (its worker index).
    """

    def __init__(self, batch_size: torch.Size, stride: int = 1, offset: int = 0) -> None:
        self.batch_size = torch.Size(batch_size)
        self.stride = stride
        self.offset = offset
        self.count = 0
        self.current = torch.full(self.batch_size, -1, dtype=torch.long)

    def _take(self, n: int) -> torch.Tensor:
        local = torch.arange(self.count, self.count + n)
        self.count += n
        return local * self.stride + self.offset

    def restart(self) -> None:
        """New ids for every env (after a full reset)."""
        self.current = self._take(self.batch_size.numel()).reshape(self.batch_size)

    def renew(self, done: torch.Tensor) -> None:
        """New ids for the envs where ``done`` (shaped like the batch) is set."""
        n = int(done.sum())
        if n:
            current = self.current.clone()
            current[done] = self._take(n)
            self.current = current

    def state_dict(self) -> dict[str, Any]:
        """The counter and the current ids."""
        return {"count": self.count, "current": self.current.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned."""
        self.count = int(state["count"])
        self.current = state["current"].clone()


def _done_keys(env: EnvBase) -> list[tuple[str, ...]]:
    """The ``("next", ..., "done")`` keys whose shape leads with the env's batch."""
    keys = []
    for key in env.done_keys:
        key_t = (key,) if isinstance(key, str) else tuple(key)
        if key_t[-1] == "done" and env.full_done_spec[key].shape[: env.batch_dims] == env.batch_size:
            keys.append(("next", *key_t))
    return keys


class EnvRunner:
    """Steps any env with ``step_and_maybe_reset``, one tensordict per step.

    Args:
        env: the env.
        ids: its trajectory ids.
    """

    def __init__(self, env: EnvBase, ids: TrajectoryIds) -> None:
        self.env = env
        self.ids = ids
        self.shuttle: TensorDictBase | None = None
        self._done_keys = _done_keys(env)
        if not self._done_keys:
            raise ValueError(
                f"The collector needs a 'done' entry shaped like the env's batch {tuple(env.batch_size)}; "
                f"{type(env).__name__} has done keys {env.done_keys}."
            )

    def reset(self) -> None:
        """Resets the env now; the next batch starts new trajectories."""
        self.shuttle = self.env.reset()
        self.ids.restart()

    def _done(self, data: TensorDictBase) -> torch.Tensor:
        nb = self.env.batch_dims
        done = None
        for key in self._done_keys:
            value = data.get(key).reshape(*data.batch_size[:nb], -1).any(-1)
            done = value if done is None else done | value
        assert done is not None
        return done

    def collect(self, steps: int, act: Callable[[TensorDictBase], TensorDictBase | None]) -> TensorDictBase:
        """Runs ``steps`` steps with ``act`` (a policy, or the env's ``rand_action``)."""
        if self.shuttle is None:
            self.reset()
        ids: list[torch.Tensor] = []

        def record_ids(env: EnvBase, data: TensorDictBase) -> None:
            # the ids are kept aside: an entry of the step would travel on with step_mdp,
            # and the next step's write would land in the same nested tensordict
            ids.append(self.ids.current)
            done = self._done(data)
            if done.any():
                self.ids.renew(done)

        env = self.env
        batch, self.shuttle = env._tensordict_loop(self.shuttle, steps, act, record_ids, reset_after_last=True,
                                                   contiguous=not env._has_dynamic_specs())
        batch.set(TRAJ_KEY, torch.stack(ids, env.batch_dims))
        return batch

    def state(self) -> TensorDictBase | None:
        """Where the env stands: its next input."""
        return None if self.shuttle is None else self.shuttle.clone()

    def load_state(self, shuttle: TensorDictBase | None) -> None:
        """Continues from ``shuttle`` (what :meth:`state` returned)."""
        self.shuttle = None if shuttle is None else shuttle.clone()
