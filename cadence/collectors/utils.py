"""Helpers for collected batches: ``split_trajectories``.

A collector's batch ``[*batch, T]`` stitches pieces of several trajectories along its
time dim. ``split_trajectories`` lays them out one per row, ``[n_traj, max_len]``,
zero-padded, with a boolean ``mask`` telling the valid steps.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> data = TensorDict(
    ...     {"obs": torch.arange(6.0), "collector": {"traj_ids": torch.tensor([0, 0, 0, 1, 1, 2])}},
    ...     batch_size=[6],
    ... )
    >>> out = split_trajectories(data)
    >>> out.batch_size, out["obs"].tolist()
    (torch.Size([3, 3]), [[0.0, 1.0, 2.0], [3.0, 4.0, 0.0], [5.0, 0.0, 0.0]])
    >>> out["collector", "mask"].tolist()
    [[True, True, True], [True, True, False], [True, False, False]]
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

__all__ = ["split_trajectories"]

NestedKey = str | tuple[str, ...]


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def _unwrap(key: tuple[str, ...]) -> NestedKey:
    return key[0] if len(key) == 1 else key


def _ids_from_done(done: torch.Tensor) -> torch.Tensor:
    """Trajectory ids ``[N, T]`` from done flags ``[N, T]``: a trajectory ends at a done
    step and at the end of each row; ids are unique across rows."""
    n, t = done.shape
    ends = done.clone()
    ends[:, -1] = True
    # a new trajectory starts after every end; number them across the flattened rows
    starts = torch.zeros_like(ends)
    starts[:, 1:] = ends[:, :-1]
    starts[:, 0] = True
    return starts.reshape(-1).cumsum(0).reshape(n, t) - 1


def split_trajectories(
    rollout_tensordict: TensorDictBase,
    *,
    prefix: NestedKey | None = None,
    trajectory_key: NestedKey | None = None,
    done_key: NestedKey | None = None,
    as_nested: bool = False,
) -> TensorDictBase:
    """Splits a batch ``[*batch, T]`` into its trajectories, ``[n_traj, max_len]``.

    Trajectories are read from the trajectory ids (``(prefix, "traj_ids")``, as the
    collectors write them) where present: consecutive steps of a row with the same id
    form one trajectory. Without ids, a trajectory ends at each step whose
    ``("next", done_key)`` is set and at the end of each row. Trajectories come in the
    order they appear, row after row; each is padded with zeros to the longest, and a
    boolean entry ``mask`` (next to the ids) marks the valid steps.

    Args:
        rollout_tensordict: a batch whose last dim is time.
        prefix: where the ids and the mask live; ``"collector"`` if the batch has such an
            entry, else the root.
        trajectory_key: the ids' key (overrides ``prefix``); ``(prefix, "traj_ids")`` by default.
        done_key: the done flag to split on when there are no ids (under ``"next"``);
            ``"done"`` by default.
        as_nested: nested tensors are not supported; must be ``False``.

    Returns:
        A new tensordict ``[n_traj, max_len]`` (dim names ``[None, "time"]``) with the mask.

    Raises:
        ValueError: for ``as_nested=True``, a batch with no dims, or one with neither ids
            nor done flags.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> done = torch.tensor([[False, True, False], [False, False, False]]).unsqueeze(-1)
        >>> data = TensorDict({"r": torch.ones(2, 3), "next": {"done": done}}, batch_size=[2, 3])
        >>> out = split_trajectories(data)
        >>> out.batch_size, out["mask"].sum(-1).tolist()
        (torch.Size([3, 3]), [2, 1, 3])
    """
    if as_nested:
        raise ValueError("split_trajectories: as_nested=True is not supported; expected as_nested=False.")
    data = rollout_tensordict
    if data.batch_dims < 1:
        raise ValueError(
            f"split_trajectories needs a batch with a time dim, got batch size {tuple(data.batch_size)}."
        )
    if trajectory_key is not None:
        traj_key = _as_tuple(trajectory_key)
    else:
        if prefix is None:
            prefix = "collector" if "collector" in data.keys() else ()
        traj_key = _as_tuple(prefix) + ("traj_ids",) if prefix != () else ("traj_ids",)
    mask_key = traj_key[:-1] + ("mask",)
    time_len = data.batch_size[-1]
    rows = data.reshape(-1, time_len)
    ids = rows.get(_unwrap(traj_key), None)
    if ids is None:
        done_name = _as_tuple(done_key if done_key is not None else "done")
        done = rows.get(("next", *done_name), None)
        if done is None:
            raise ValueError(
                f"split_trajectories: the batch has no trajectory ids at {_unwrap(traj_key)!r} and no done flags at "
                f"{('next', *done_name)!r}; its keys are {sorted(map(str, data.keys(True, True)))}."
            )
        ids = _ids_from_done(done.reshape(*rows.batch_size, -1).any(-1))
    else:
        ids = ids.reshape(*rows.batch_size, -1)[..., 0]
        # rows never share a trajectory, even where two rows carry the same id
        change = torch.ones_like(ids, dtype=torch.bool)
        change[:, 1:] = ids[:, 1:] != ids[:, :-1]
        ids = change.reshape(-1).cumsum(0).reshape(ids.shape) - 1
    flat = rows.reshape(-1)
    flat_ids = ids.reshape(-1)
    starts = torch.ones_like(flat_ids, dtype=torch.bool)
    starts[1:] = flat_ids[1:] != flat_ids[:-1]
    start_index = starts.nonzero().squeeze(-1)
    lengths = torch.diff(start_index, append=torch.tensor([flat_ids.numel()]))
    max_len = int(lengths.max())
    offsets = torch.arange(max_len)
    mask = offsets < lengths.unsqueeze(-1)
    index = (start_index.unsqueeze(-1) + offsets).clamp_max(flat_ids.numel() - 1)
    out = flat[index]

    def pad(value: torch.Tensor) -> torch.Tensor:
        view = mask.reshape(*mask.shape, *([1] * (value.ndim - mask.ndim)))
        return torch.where(view, value, torch.zeros((), dtype=value.dtype, device=value.device))

    out = out.apply(pad)
    out.set(_unwrap(mask_key), mask)
    out.names = [None, "time"]
    return out
