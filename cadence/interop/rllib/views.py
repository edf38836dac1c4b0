"""Trajectory views on Cadence TensorDicts: RLlib's view requirements for native collectors.

RLlib builds ``prev_actions``, ``prev_rewards``, frame windows (``"-3:0"``) and the like
from the steps of each episode. This module builds the same views on Cadence's own
batches, after collection, so that the collectors' fast paths stay as they are:

* :func:`add_views`: writes each view of a ``{name: ViewRequirement}`` dict into a
  collector batch (``[T]`` or ``[*B, T]``, time last) as a new entry, computed per
  trajectory (``("collector", "traj_ids")`` splits episodes) with one gather for all
  steps (no Python loop over time or trajectories). Steps before an episode's start and
  past its end are zeros, as in RLlib's collector (and :func:`episode_view`).
* :class:`ViewCarry`: the state that lets a trajectory running across two batches see
  its real previous steps (``add_views(td, views, carry=carry)`` reads and updates it).
* :class:`TrajectoryViews`: a callable holding a :class:`ViewCarry`, to pass as
  ``SyncDataCollector(..., postproc=TrajectoryViews(views))``: this is the documented
  equivalent of a ``view_requirements=`` collector argument.
* :func:`add_slice_views`: the views of a batch sampled by a ``SliceSampler``: each
  slice is its own segment: steps past its last step are zeros, and so are steps before
  its first step, unless the buffer's storage is given: then the real steps before the
  slice (same trajectory id) are read back from it. :class:`SliceViews` is the same as a buffer
  transform: ``buffer.append_transform(SliceViews(views, storage=buffer.storage))``.

Data columns are named as RLlib names them and mapped to Cadence's keys
(:data:`DEFAULT_KEY_MAP`: ``obs`` -> ``observation``, ``new_obs`` ->
``("next", "observation")``, ``actions`` -> ``action``, ``rewards`` ->
``("next", "reward")``, ``terminateds``/``truncateds`` -> ``("next", "terminated")`` /
``("next", "truncated")``); ``key_map`` adds to or overrides this, and any other name is
used as a key as it is. Positive shifts read the same batch only: at the last step of a
trajectory that the batch cuts, ``shift=1`` gives zeros (use ``new_obs``, i.e.
``("next", "observation")``, for the real next observation). ``batch_repeat_value`` other
than 1 is not supported here (a TensorDict batch has a value at every step). The zeros
have the data's shape and dtype (a requirement's ``space`` is not read).

Examples:
    >>> from cadence.collectors import SyncDataCollector
    >>> from cadence.envs import GymEnv
    >>> from cadence.interop.rllib import ViewRequirement
    >>> from cadence.interop.rllib.views import TrajectoryViews
    >>> views = {
    ...     "prev_actions": ViewRequirement("actions", shift=-1),
    ...     "prev_rewards": ViewRequirement("rewards", shift=-1),
    ...     "frames": ViewRequirement("obs", shift="-3:0"),
    ... }
    >>> collector = SyncDataCollector(
    ...     GymEnv("CartPole-v1"), policy=None, frames_per_batch=64, total_frames=128,
    ...     postproc=TrajectoryViews(views),
    ... )
    >>> for batch in collector:
    ...     print(batch["prev_actions"].shape, batch["frames"].shape)
    torch.Size([64, 2]) torch.Size([64, 4, 4])
    torch.Size([64, 2]) torch.Size([64, 4, 4])
    >>> collector.shutdown()
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from cadence.interop.rllib.view_requirement import ViewRequirement

__all__ = [
    "DEFAULT_KEY_MAP",
    "SliceViews",
    "TrajectoryViews",
    "ViewCarry",
    "add_slice_views",
    "add_views",
]

DEFAULT_KEY_MAP: dict[str, NestedKey] = {
    "obs": "observation",
    "new_obs": ("next", "observation"),
    "actions": "action",
    "rewards": ("next", "reward"),
    "terminateds": ("next", "terminated"),
    "truncateds": ("next", "truncated"),
}
"""RLlib column names -> Cadence keys (the key a view's ``data_col`` reads)."""


class ViewCarry:
    """The last steps of each batch row, so that a trajectory cut by a batch goes on.

    :func:`add_views` reads it (the previous batch's last steps precede this batch's
    first, row by row, when the trajectory ids match) and then updates it in place. Keep
    one carry per stream of batches (per collector), and :meth:`clear` it when the
    stream restarts.

    Attributes:
        traj_ids: ``[N, H]`` trajectory ids of the kept steps (``None`` before any batch).
        ends: ``[N, H]`` end flags of the kept steps (``None`` without ``end_key``).
        columns: key -> ``[N, H, ...]`` the kept values of each column read by a view.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> carry = ViewCarry()
        >>> ids = {"traj_ids": torch.zeros(4, dtype=torch.long)}
        >>> td = TensorDict({"action": torch.arange(4.0), "collector": ids}, [4])
        >>> _ = add_views(td, {"prev_actions": ViewRequirement("actions", shift=-1)}, carry=carry)
        >>> carry.columns["action"].tolist()
        [[3.0]]
    """

    def __init__(self) -> None:
        self.traj_ids: torch.Tensor | None = None
        self.ends: torch.Tensor | None = None
        self.columns: dict[NestedKey, torch.Tensor] = {}

    def clear(self) -> None:
        """Forgets the kept steps: the next batch starts fresh.

        Examples:
            >>> carry = ViewCarry()
            >>> carry.clear()
            >>> carry.traj_ids is None
            True
        """
        self.traj_ids, self.ends, self.columns = None, None, {}

    def __repr__(self) -> str:
        shape = None if self.traj_ids is None else tuple(self.traj_ids.shape)
        return f"ViewCarry(steps={shape}, columns={list(self.columns)})"


def _resolve(
    name: str, requirement: ViewRequirement, key_map: Mapping[str, NestedKey]
) -> NestedKey:
    col = requirement.data_col if requirement.data_col is not None else name
    return key_map.get(col, col)


def _is_identity(name: str, requirement: ViewRequirement, key_map: Mapping[str, NestedKey]) -> bool:
    """Whether the view is its own column unchanged (nothing to write)."""
    return (
        _resolve(name, requirement, key_map) == name
        and not requirement.multiple_shifts
        and requirement.shift == 0
    )


def _segment_bounds(
    ids: torch.Tensor, ends: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per step (``[N, L]``), the index of its segment's first and last step."""
    n, length = ids.shape
    steps = torch.arange(length, device=ids.device).expand(n, length)
    new = torch.ones_like(ids, dtype=torch.bool)
    new[:, 1:] = ids[:, 1:] != ids[:, :-1]
    if ends is not None:
        new[:, 1:] |= ends[:, :-1]
    first = torch.cummax(torch.where(new, steps, torch.zeros_like(steps)), dim=1).values
    # A segment's last step: one before the next segment start at or after t + 1.
    last_flag = torch.ones_like(new)
    last_flag[:, :-1] = new[:, 1:]
    big = torch.full_like(steps, length)
    marked = torch.where(last_flag, steps, big)
    last = torch.flip(torch.cummin(torch.flip(marked, [1]), dim=1).values, [1])
    return first, last


def _flag(td: TensorDictBase, key: NestedKey | None, lead: tuple[int, ...]) -> torch.Tensor | None:
    if key is None:
        return None
    value = td.get(key, None)
    if value is None:
        raise KeyError(
            f"add_views: end_key {key!r} is not in the batch (expected a bool flag "
            f"[..., T] or [..., T, 1]); came keys {sorted(map(str, td.keys(True, True)))}"
        )
    return value.reshape(*lead, -1).any(-1) if value.dim() > len(lead) else value.bool()


def add_views(
    td: TensorDictBase,
    view_requirements: Mapping[str, ViewRequirement],
    *,
    traj_key: NestedKey = ("collector", "traj_ids"),
    key_map: Mapping[str, NestedKey] | None = None,
    carry: ViewCarry | None = None,
    end_key: NestedKey | None = None,
) -> TensorDictBase:
    """Writes each view of ``view_requirements`` into ``td``, computed per trajectory.

    Each step ``t`` of view ``name`` holds ``column[t + s]`` for each offset ``s`` of the
    requirement's shift, where ``column`` is the entry its ``data_col`` names (mapped by
    ``key_map``, then :data:`DEFAULT_KEY_MAP`), read within ``t``'s trajectory only: steps
    before the trajectory's start or past its end are zeros. Trajectories are runs of
    equal ``traj_key`` ids along time (and, with ``end_key``, end after a flagged step).
    All steps are gathered at once.

    Args:
        td: A batch ``[T]`` or ``[*B, T]``, time last (a collector's output).
        view_requirements: View name -> requirement; each view is written under its name,
            shaped ``[*B, T, *step]`` for an int shift and ``[*B, T, K, *step]`` for a
            list or range shift of ``K`` offsets.
        traj_key: The trajectory-id entry (``[*B, T]``).
        key_map: RLlib column names -> keys, on top of :data:`DEFAULT_KEY_MAP`.
        carry: A :class:`ViewCarry`, read and then updated in place: the previous batch's
            last steps precede this one's, so ``prev_actions`` at ``t = 0`` of a
            trajectory going on from that batch is its real previous action.
        end_key: Optional bool entry marking a trajectory's last step (e.g. a slice end).

    Returns:
        ``td``, with the views set (in place).

    Raises:
        KeyError: A view's column or ``traj_key`` is missing (names the key).
        ValueError: ``batch_repeat_value != 1``, a 0-d batch, a column with another
            batch shape, or a carry kept for another batch shape.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({
        ...     "action": torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]),
        ...     "collector": {"traj_ids": torch.tensor([0, 0, 0, 1, 1])},
        ... }, [5])
        >>> views = {"prev_actions": ViewRequirement("actions", shift=-1),
        ...          "window": ViewRequirement("actions", shift="-1:0")}
        >>> out = add_views(td, views)
        >>> out["prev_actions"].tolist()
        [0.0, 1.0, 2.0, 0.0, 4.0]
        >>> out["window"][3].tolist()
        [0.0, 4.0]
    """
    keys = {**DEFAULT_KEY_MAP, **(key_map or {})}
    if td.batch_dims == 0:
        raise ValueError(f"add_views: expected a batch [T] or [*B, T] (time last), came {td.batch_size}")
    lead = tuple(td.batch_size[:-1])
    n, t_len = int(np.prod(lead)) if lead else 1, td.batch_size[-1]
    ids = td.get(traj_key, None)
    if ids is None:
        raise KeyError(
            f"add_views: traj_key {traj_key!r} is not in the batch (expected trajectory "
            f"ids shaped {tuple(td.batch_size)}); came keys {sorted(map(str, td.keys(True, True)))}"
        )
    ids = ids.reshape(n, t_len)
    ends = _flag(td, end_key, tuple(td.batch_size))
    ends = None if ends is None else ends.reshape(n, t_len)

    plan: list[tuple[str, NestedKey, ViewRequirement]] = []
    back = 0
    for name, req in view_requirements.items():
        if not isinstance(req, ViewRequirement):
            raise TypeError(
                f"add_views: view {name!r}: expected a ViewRequirement, came {type(req).__name__}"
            )
        if req.batch_repeat_value != 1:
            raise ValueError(
                f"add_views: view {name!r} has batch_repeat_value={req.batch_repeat_value}; "
                "expected 1 (a TensorDict batch has a value at every step)"
            )
        key = _resolve(name, req, keys)
        if key not in td.keys(True, True):
            raise KeyError(
                f"add_views: view {name!r} reads {key!r} (data_col {req.data_col or name!r}), "
                f"which is not in the batch; came keys {sorted(map(str, td.keys(True, True)))}"
            )
        if _is_identity(name, req, keys):
            continue  # the view is the column itself
        plan.append((name, key, req))
        back = max(back, -int(req.shift_arr.min()))

    prior = 0
    if carry is not None and carry.traj_ids is not None:
        if carry.traj_ids.shape[0] != n:
            raise ValueError(
                f"add_views: the carry was kept for {carry.traj_ids.shape[0]} batch rows, "
                f"came a batch of {n} rows ({tuple(td.batch_size)}); clear() it for a new stream"
            )
        prior = carry.traj_ids.shape[1]
        ext_ids = torch.cat([carry.traj_ids.to(ids.device), ids], 1)
        ext_ends = None
        if ends is not None:
            kept = carry.ends
            if kept is None:
                kept = torch.zeros_like(carry.traj_ids, dtype=torch.bool)
            ext_ends = torch.cat([kept.to(ends.device), ends], 1)
    else:
        ext_ids, ext_ends = ids, ends
    first, last = _segment_bounds(ext_ids, ext_ends)
    first, last = first[:, prior:], last[:, prior:]
    steps = torch.arange(prior, prior + t_len, device=ids.device)

    columns: dict[NestedKey, torch.Tensor] = {}
    for _name, key, _req in plan:
        if key in columns:
            continue
        value = td.get(key)
        if tuple(value.shape[: td.batch_dims]) != tuple(td.batch_size):
            raise ValueError(
                f"add_views: {key!r} expected shape [{tuple(td.batch_size)}, ...], "
                f"came {tuple(value.shape)}"
            )
        flat = value.reshape(n, t_len, *value.shape[td.batch_dims:])
        if prior:
            kept = carry.columns.get(key) if carry is not None else None
            if kept is None or kept.shape[2:] != flat.shape[2:]:
                kept = flat.new_zeros((n, prior, *flat.shape[2:]))
            flat_ext = torch.cat([kept.to(flat.device, flat.dtype), flat], 1)
        else:
            flat_ext = flat
        columns[key] = flat_ext

    for name, key, req in plan:
        data = columns[key]
        step_shape = data.shape[2:]
        offsets = torch.tensor(req.shift_arr.tolist(), dtype=torch.long, device=data.device)
        pos = steps[None, :, None] + offsets[None, None, :]  # [1, T, K]
        valid = (pos >= first[..., None]) & (pos <= last[..., None])  # [N, T, K]
        idx = pos.clamp(0, data.shape[1] - 1).expand(n, t_len, -1).reshape(n, -1)
        gathered = data[torch.arange(n, device=data.device)[:, None], idx]  # [N, T*K, *step]
        gathered = gathered.reshape(n, t_len, len(offsets), *step_shape)
        mask = valid.reshape(n, t_len, len(offsets), *([1] * len(step_shape)))
        out = torch.where(mask, gathered, torch.zeros((), dtype=gathered.dtype, device=gathered.device))
        if not req.multiple_shifts:
            out = out[:, :, 0]
        td.set(name, out.reshape(*td.batch_size, *out.shape[2:]))

    if carry is not None:
        keep = min(back, prior + t_len)
        carry.traj_ids = ext_ids[:, ext_ids.shape[1] - keep:].clone()
        carry.ends = None if ext_ends is None else ext_ends[:, ext_ends.shape[1] - keep:].clone()
        carry.columns = {key: col[:, col.shape[1] - keep:].clone() for key, col in columns.items()}
    return td


class TrajectoryViews:
    """A collector ``postproc`` adding trajectory views to every batch, with a carry.

    ``SyncDataCollector(..., postproc=TrajectoryViews(views))`` yields batches holding the
    views; trajectories that run across batches see their real previous steps (the carry
    is kept, row by row, between calls). Use a new instance (or :meth:`reset`) for a new
    stream of batches; do not combine with ``split_trajs=True`` (the collector applies
    ``postproc`` after splitting).

    Args:
        view_requirements: View name -> requirement (see :func:`add_views`).
        traj_key: The trajectory-id entry.
        key_map: RLlib column names -> keys, on top of :data:`DEFAULT_KEY_MAP`.
        end_key: Optional bool entry marking a trajectory's last step.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> views = TrajectoryViews({"prev_actions": ViewRequirement("actions", shift=-1)})
        >>> ids = {"traj_ids": torch.zeros(2, dtype=torch.long)}
        >>> first = views(TensorDict({"action": torch.tensor([1.0, 2.0]), "collector": ids}, [2]))
        >>> second = views(TensorDict({"action": torch.tensor([3.0, 4.0]), "collector": ids}, [2]))
        >>> second["prev_actions"].tolist()
        [2.0, 3.0]
    """

    def __init__(
        self,
        view_requirements: Mapping[str, ViewRequirement],
        *,
        traj_key: NestedKey = ("collector", "traj_ids"),
        key_map: Mapping[str, NestedKey] | None = None,
        end_key: NestedKey | None = None,
    ) -> None:
        self.view_requirements = dict(view_requirements)
        self.traj_key = traj_key
        self.key_map = dict(key_map or {})
        self.end_key = end_key
        self.carry = ViewCarry()

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        """Adds the views to ``td`` (in place) and keeps its last steps; returns ``td``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> views = TrajectoryViews({"frames": ViewRequirement("obs", shift="-1:0")})
            >>> ids = {"traj_ids": torch.zeros(3, dtype=torch.long)}
            >>> td = TensorDict({"observation": torch.ones(3, 2), "collector": ids}, [3])
            >>> views(td)["frames"].shape
            torch.Size([3, 2, 2])
        """
        return add_views(
            td, self.view_requirements, traj_key=self.traj_key, key_map=self.key_map,
            carry=self.carry, end_key=self.end_key,
        )

    def reset(self) -> None:
        """Forgets the carry: the next batch is the start of a new stream.

        Examples:
            >>> views = TrajectoryViews({})
            >>> views.reset()
            >>> views.carry.traj_ids is None
            True
        """
        self.carry.clear()

    def __repr__(self) -> str:
        return f"TrajectoryViews(views={list(self.view_requirements)}, traj_key={self.traj_key!r})"


def add_slice_views(
    sample: TensorDictBase,
    view_requirements: Mapping[str, ViewRequirement],
    *,
    slice_end_key: NestedKey = ("next", "truncated"),
    traj_key: NestedKey | None = ("collector", "traj_ids"),
    key_map: Mapping[str, NestedKey] | None = None,
    storage: Any | None = None,
) -> TensorDictBase:
    """Adds the views to a batch sampled by a ``SliceSampler`` (slices one after another).

    A ``SliceSampler`` batch is flat (``[num_slices * slice_len]``, shorter slices
    allowed), its slices of consecutive steps of one trajectory laid one after the
    other, each slice's last step flagged ``True`` under ``slice_end_key`` (the sampler's
    ``truncated_key``). Each slice is built as its own segment: past its last step the
    views are zeros. Before its first step they are zeros too, unless ``storage`` is
    given: then the steps preceding the slice are read back from the storage (at the
    sample's ``"index"`` minus 1, 2, ...) as long as they hold the same ``traj_key`` id,
    so that a slice starting inside an episode sees its real past (zeros before the
    episode's start, as always). Two slices of one trajectory next to each other stay
    apart thanks to the end flags.

    Args:
        sample: The sampled batch, 1-D (a ``TensorDictReplayBuffer`` sample).
        view_requirements: View name -> requirement (see :func:`add_views`).
        slice_end_key: The bool entry flagging each slice's last step.
        traj_key: The trajectory-id entry, if the storage holds it (else ``None`` or a
            missing key: the end flags alone split the slices).
        key_map: RLlib column names -> keys, on top of :data:`DEFAULT_KEY_MAP`.
        storage: The buffer's 1-D storage (``buffer.storage``) to read the steps before
            each slice from; needs ``"index"`` and ``traj_key`` in the sample.

    Returns:
        ``sample``, with the views set (in place).

    Raises:
        KeyError: ``slice_end_key``, a view's column, or (with ``storage``) ``"index"``
            or ``traj_key`` is missing (names the key).
        ValueError: ``storage`` given with a sample that is not 1-D.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> sample = TensorDict({
        ...     "action": torch.tensor([5.0, 6.0, 7.0, 2.0, 3.0, 4.0]),
        ...     "next": {"truncated": torch.tensor([[0], [0], [1], [0], [0], [1]]).bool()},
        ... }, [6])
        >>> views = {"prev_actions": ViewRequirement("actions", shift=-1)}
        >>> add_slice_views(sample, views)["prev_actions"].tolist()
        [0.0, 5.0, 6.0, 0.0, 2.0, 3.0]
    """
    back = max([0, *(-int(req.shift_arr.min()) for req in view_requirements.values())])
    if storage is not None and back > 0:
        return _slice_views_from_storage(
            sample, view_requirements, slice_end_key, traj_key, key_map, storage
        )
    remove = None
    if traj_key is None or sample.get(traj_key, None) is None:
        remove = "_slice_views_ids"
        sample.set(remove, torch.zeros(sample.batch_size, dtype=torch.long, device=sample.device))
        traj_key = remove
    try:
        return add_views(sample, view_requirements, traj_key=traj_key, key_map=key_map, end_key=slice_end_key)
    finally:
        if remove is not None:
            del sample[remove]


class SliceViews:
    """A replay-buffer transform adding trajectory views to ``SliceSampler`` samples.

    ``buffer.append_transform(SliceViews(views, storage=buffer.storage))`` makes every
    ``buffer.sample()`` hold the views (see :func:`add_slice_views`; without ``storage``,
    steps before each slice are zeros).

    Args:
        view_requirements: View name -> requirement (see :func:`add_views`).
        slice_end_key: The bool entry flagging each slice's last step.
        traj_key: The trajectory-id entry.
        key_map: RLlib column names -> keys, on top of :data:`DEFAULT_KEY_MAP`.
        storage: The buffer's storage, to read the steps before each slice from.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data.replay_buffers import (
        ...     LazyTensorStorage, SliceSampler, TensorDictReplayBuffer)
        >>> buffer = TensorDictReplayBuffer(
        ...     storage=LazyTensorStorage(100), batch_size=8,
        ...     sampler=SliceSampler(num_slices=2, traj_key=("collector", "traj_ids")))
        >>> ids = {"traj_ids": torch.arange(20) // 10}
        >>> _ = buffer.extend(TensorDict({"action": torch.arange(20.0), "collector": ids}, [20]))
        >>> views = {"prev_actions": ViewRequirement("actions", shift=-1)}
        >>> _ = buffer.append_transform(SliceViews(views, storage=buffer.storage))
        >>> sample = buffer.sample()
        >>> first = sample["action"][0].item()
        >>> sample["prev_actions"][0].item() == (0.0 if first % 10 == 0 else first - 1)
        True
    """

    def __init__(
        self,
        view_requirements: Mapping[str, ViewRequirement],
        *,
        slice_end_key: NestedKey = ("next", "truncated"),
        traj_key: NestedKey | None = ("collector", "traj_ids"),
        key_map: Mapping[str, NestedKey] | None = None,
        storage: Any | None = None,
    ) -> None:
        self.view_requirements = dict(view_requirements)
        self.slice_end_key = slice_end_key
        self.traj_key = traj_key
        self.key_map = dict(key_map or {})
        self.storage = storage

    def __call__(self, sample: TensorDictBase) -> TensorDictBase:
        """Adds the views to ``sample`` (in place) and returns it.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> ends = torch.tensor([[False], [True]])
            >>> sample = TensorDict({"action": torch.ones(2), "next": {"truncated": ends}}, [2])
            >>> SliceViews({"p": ViewRequirement("actions", shift=-1)})(sample)["p"].tolist()
            [0.0, 1.0]
        """
        return add_slice_views(
            sample, self.view_requirements, slice_end_key=self.slice_end_key,
            traj_key=self.traj_key, key_map=self.key_map, storage=self.storage,
        )

    def __repr__(self) -> str:
        return f"SliceViews(views={list(self.view_requirements)}, storage={self.storage is not None})"


def _slice_views_from_storage(
    sample: TensorDictBase,
    view_requirements: Mapping[str, ViewRequirement],
    slice_end_key: NestedKey,
    traj_key: NestedKey | None,
    key_map: Mapping[str, NestedKey] | None,
    storage: Any,
) -> TensorDictBase:
    """:func:`add_slice_views` with the steps before each slice read from ``storage``."""
    if sample.batch_dims != 1:
        raise ValueError(f"add_slice_views: with storage, expected a 1-D sample, came {sample.batch_size}")
    for key in ("index", traj_key):
        if key is None or sample.get(key, None) is None:
            raise KeyError(
                f"add_slice_views: with storage, the sample needs {key!r} (expected "
                f"shape {tuple(sample.batch_size)}); came keys {sorted(map(str, sample.keys(True, True)))}"
            )
    keys = {**DEFAULT_KEY_MAP, **(key_map or {})}
    cols = {_resolve(name, req, keys) for name, req in view_requirements.items()}
    back = max([0, *(-int(req.shift_arr.min()) for req in view_requirements.values())])
    ends = _flag(sample, slice_end_key, tuple(sample.batch_size))
    if ends is None:  # pragma: no cover - slice_end_key is never None here
        raise KeyError("add_slice_views: slice_end_key is None; expected the slices' end flags")
    m = sample.batch_size[0]
    index = sample.get("index").reshape(m)
    ids = sample.get(traj_key).reshape(m)
    is_start = torch.ones(m, dtype=torch.bool)
    is_start[1:] = ends[:-1]
    slice_of = torch.cumsum(is_start.long(), 0) - 1
    starts = torch.nonzero(is_start).flatten()
    n_slices = starts.numel()
    # The extended layout: `back` read-back steps, then the slice, slice after slice.
    new_pos = torch.arange(m) + back * (slice_of + 1)
    prefix_pos = (new_pos[starts] - back)[:, None] + torch.arange(back)  # [S, back]
    prefix_index = index[starts][:, None] - back + torch.arange(back)  # [S, back]
    size = len(storage)
    inside = (prefix_index >= 0) & (prefix_index < size)
    stored = storage.get(prefix_index.clamp(0, max(size - 1, 0)).flatten())
    stored_ids = stored.get(traj_key).reshape(n_slices, back)
    same = inside & (stored_ids == ids[starts][:, None])
    sentinel = torch.minimum(ids.min(), stored_ids.min() if stored_ids.numel() else ids.min()) - 1
    total = m + n_slices * back
    ext_ids = torch.empty(total, dtype=ids.dtype)
    ext_ids[new_pos] = ids
    ext_ids[prefix_pos.flatten()] = torch.where(same, stored_ids, sentinel).flatten()
    ext_ends = torch.zeros(total, dtype=torch.bool)
    ext_ends[new_pos] = ends
    ext = TensorDict({"_ids": ext_ids, "_ends": ext_ends}, [total])
    for col in cols:
        value = sample.get(col)
        buf = value.new_zeros((total, *value.shape[1:]))
        buf[new_pos] = value
        buf[prefix_pos.flatten()] = stored.get(col).to(value.dtype).reshape(n_slices * back, *value.shape[1:])
        ext.set(col, buf)
    add_views(ext, view_requirements, traj_key="_ids", key_map=key_map, end_key="_ends")
    for name, req in view_requirements.items():
        if not _is_identity(name, req, keys):
            sample.set(name, ext.get(name)[new_pos])
    return sample
