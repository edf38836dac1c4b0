"""The output buffer of a rollout: allocated once from the first step, written in place.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.envs.rollout_buffer import RolloutBuffer
    >>> step = TensorDict({"obs": torch.zeros(3), "next": {"obs": torch.ones(3)}}, [])
    >>> buffer = RolloutBuffer(step, max_steps=4)
    >>> for t in range(2):
    ...     buffer.write(t, step)
    >>> buffer.result(2).batch_size
    torch.Size([2])
"""

from __future__ import annotations

from typing import Any

from tensordict import TensorDictBase

__all__ = ["RolloutBuffer"]


class RolloutBuffer:
    """Output of a rollout, allocated once from its first step and written in place.

    The leaves are kept as a tree of (name, buffer) pairs so that each step is
    copied with plain string look-ups, level by level. Time is the dimension after
    the step's batch dimensions.

    Args:
        first: the first step; its structure, shapes and dtypes set the layout.
        max_steps: the length of the time dimension.
    """

    def __init__(self, first: TensorDictBase, max_steps: int) -> None:
        self.time_dim = first.batch_dims
        self.data = first.unsqueeze(self.time_dim).expand(*first.batch_size, max_steps).contiguous()
        self.tree = self._tree(first, self.data)

    @staticmethod
    def _tree(step: TensorDictBase, data: TensorDictBase) -> list[tuple[str, Any]]:
        tree: list[tuple[str, Any]] = []
        for key, value in step.items():
            if isinstance(value, TensorDictBase):
                tree.append((key, RolloutBuffer._tree(value, data.get(key))))
            else:
                tree.append((key, data.get(key)))
        return tree

    def write(self, t: int, step: TensorDictBase) -> None:
        """Copies ``step`` into time slot ``t``; a step that does not fit names the key."""
        self._write(self.tree, t, step, ())

    def _write(self, tree: list[tuple[str, Any]], t: int, step: TensorDictBase, path: tuple[str, ...]) -> None:
        for key, target in tree:
            value = step.get(key, None)
            if value is None:
                raise KeyError(f"Step {t} of the rollout holds no {path + (key,)!r}, which its first step had.")
            if isinstance(target, list):
                self._write(target, t, value, path + (key,))
            else:
                slot = target.select(self.time_dim, t)
                try:
                    slot.copy_(value)
                except RuntimeError as err:
                    raise ValueError(
                        f"Step {t} of the rollout has {path + (key,)!r} of shape {tuple(value.shape)} and dtype "
                        f"{value.dtype}, but its first step had shape {tuple(slot.shape)} and dtype {slot.dtype}: "
                        f"the env's data does not keep to its specs (check_env_specs(env) tells where)."
                    ) from err

    def result(self, steps: int) -> TensorDictBase:
        """The first ``steps`` time slots (a view)."""
        if steps == self.data.batch_size[self.time_dim]:
            return self.data
        index = (slice(None),) * self.time_dim + (slice(0, steps),)
        return self.data[index]
