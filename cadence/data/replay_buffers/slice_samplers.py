"""Slice samplers: batches made of runs of consecutive steps from stored trajectories.

A slice sampler answers ``num_slices`` runs of ``slice_len`` consecutive elements
(``batch_size = num_slices * slice_len``), each inside one stored trajectory: a slice
never crosses a trajectory's end, nor the write cursor (where the newest element sits
next to the oldest one). The index order is slice after slice, so
``index.reshape(num_slices, -1)`` gives the slices.

Where trajectories end comes from, in this order: a trajectory-id entry (``traj_key``,
an element ends its trajectory when the next element's id differs), an end-of-episode
entry (``end_key``, ``("next", "done")`` by default), and, for storages with ``ndim >= 2``,
the rows along dim 0 (each row ends a trajectory in any case).

Speed: the samplers keep the trajectory ends as a sorted tensor and update it from the
write notifications (``extend``), reading only the written elements and their left
neighbours. A sample then costs ``O(batch)``, whatever the buffer's size; the
per-write update costs ``O(written + trajectories)``.

- ``SliceSampler``: slices drawn with replacement (a uniform trajectory, then a uniform
  start inside it).
- ``SliceSamplerWithoutReplacement``: each trajectory gives one slice per epoch.
- ``PrioritizedSliceSampler``: slice starts drawn in proportion to the priorities of
  the elements they start at, with importance weights.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.data.replay_buffers.storages import LazyTensorStorage
    >>> storage = LazyTensorStorage(100)
    >>> episode = torch.tensor([0] * 6 + [1] * 4)
    >>> storage.set(torch.arange(10), TensorDict({"episode": episode}, [10]))
    >>> sampler = SliceSampler(slice_len=3, generator=torch.Generator().manual_seed(0))
    >>> sampler.extend(torch.arange(10))
    >>> index, info = sampler.sample(storage, 6)
    >>> slices = episode[index].reshape(2, 3)
    >>> bool((slices == slices[:, :1]).all())  # each slice stays in one episode
    True
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch

from ._trajectory_boundaries import (
    NestedKey,
    TrajectoryBoundaries,
    TrajectoryTable,
    per_element,
    read_entry,
    replace_last,
)
from .sampler_base import Sampler
from .samplers import PrioritizedSampler

__all__ = ["PrioritizedSliceSampler", "SliceSampler", "SliceSamplerWithoutReplacement"]

# ---------------------------------------------------------------------------------------
# SliceSampler
# ---------------------------------------------------------------------------------------


def _span_pair(span: bool | int | tuple[bool | int, bool | int]) -> tuple[bool | int, bool | int]:
    pair = tuple(span) if isinstance(span, (tuple, list)) else (span, span)
    if len(pair) != 2:
        raise ValueError(f"span must be a bool, an int or a (left, right) pair, got {span!r}.")
    for side in pair:
        if not isinstance(side, (bool, int)) or side < 0:
            raise ValueError(f"span must hold bools or non-negative ints, got {span!r}.")
    return pair  # type: ignore[return-value]


class SliceSampler(Sampler):
    """Samples slices of consecutive elements, each inside one stored trajectory.

    Each of the ``num_slices`` slices comes from a trajectory drawn uniformly among
    those long enough, starting at a uniform position inside it; the index holds the
    slices one after the other. Trajectories end where the ``traj_key`` id changes,
    else where the ``end_key`` flag is set, and always at the write cursor and at the end
    of each row of a storage with ``ndim >= 2``.

    Args:
        num_slices: how many slices per sample (``slice_len = batch_size // num_slices``).
            Exclusive with ``slice_len``.
        slice_len: the length of each slice (``num_slices = batch_size // slice_len``).
            Exclusive with ``num_slices``. ``batch_size`` must be divisible by whichever
            is given.
        end_key: the entry flagging the last element of a trajectory.
        traj_key: the entry holding each element's trajectory id (an element ends its
            trajectory where the next one's id differs). Given both, ``traj_key`` is
            used if the storage holds it, else ``end_key``; given neither, ``"episode"``
            then ``("next", "done")``. With none of them stored, a storage with
            ``ndim >= 2`` has one trajectory per row; a one-dim one raises a
            ``KeyError`` naming the keys tried.
        ends: a boolean end flag per element, given instead of reading ``end_key``
            (for static datasets whose signal is at hand).
        trajectories: a trajectory id per element, given instead of reading ``traj_key``.
        cache_values: kept for the reference API (meant for static datasets): the
            boundaries are always cached here, and kept right across writes by
            updating them from the write notifications, so there is nothing to switch.
        truncated_key: where the info marks the last element of each slice (``True``),
            so that value estimators stop there; its ``"done"`` sibling gets the stored
            done flag ORed with it and its ``"terminated"`` sibling the stored one.
            ``None`` returns no such info.
        strict_length: if ``True``, trajectories shorter than the slice length are
            skipped (an error if none is long enough); if ``False`` they give shorter
            slices, and the batch is smaller than asked (the truncated flags say where
            each slice ends).
        compile: kept for the reference API; the index computation is a handful of
            vectorised ops per sample, with nothing worth compiling.
        span: lets slices start before a trajectory's first element and/or end after
            its last (``(left, right)``; one value for both sides), clipping them there:
            ``True`` keeps at least one element, an int ``i`` keeps at least
            ``slice_len - i``. Such slices are shorter, so the batch may be too.
        use_gpu: kept for the reference API; the indices are computed on the CPU (a
            sample costs ``O(batch)`` there).
        generator: the random generator to draw from.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data.replay_buffers.storages import LazyTensorStorage
        >>> storage = LazyTensorStorage(50)
        >>> done = torch.zeros(20, 1, dtype=torch.bool)
        >>> done[[7, 19]] = True  # two episodes: 0-7 and 8-19
        >>> storage.set(torch.arange(20), TensorDict({"next": {"done": done}}, [20]))
        >>> sampler = SliceSampler(num_slices=4, generator=torch.Generator().manual_seed(1))
        >>> sampler.extend(torch.arange(20))
        >>> index, info = sampler.sample(storage, 20)
        >>> slices = index.reshape(4, 5)
        >>> bool(((slices[:, 0] > 7) == (slices[:, -1] > 7)).all())  # never across 7|8
        True
        >>> info[("next", "truncated")].reshape(4, 5)[:, -1].all().item()
        True
    """

    def __init__(
        self,
        *,
        num_slices: int | None = None,
        slice_len: int | None = None,
        end_key: NestedKey | None = None,
        traj_key: NestedKey | None = None,
        ends: torch.Tensor | None = None,
        trajectories: torch.Tensor | None = None,
        cache_values: bool = False,
        truncated_key: NestedKey | None = ("next", "truncated"),
        strict_length: bool = True,
        compile: bool | dict[str, Any] = False,
        span: bool | int | tuple[bool | int, bool | int] = False,
        use_gpu: torch.device | bool = False,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(generator)
        if (num_slices is None) == (slice_len is None):
            raise ValueError(
                f"{type(self).__name__} needs exactly one of num_slices and slice_len, "
                f"got num_slices={num_slices!r}, slice_len={slice_len!r}."
            )
        for name, value in (("num_slices", num_slices), ("slice_len", slice_len)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{type(self).__name__}: {name} must be a positive int, got {value!r}.")
        if ends is not None and trajectories is not None:
            raise ValueError(f"{type(self).__name__}: give ends or trajectories, not both.")
        self.num_slices = num_slices
        self.slice_len = slice_len
        self.end_key = end_key
        self.traj_key = traj_key
        self.cache_values = cache_values
        self.truncated_key = truncated_key
        self.strict_length = strict_length
        self.compile = compile
        self.span = _span_pair(span)
        self.use_gpu = use_gpu
        self._boundaries = TrajectoryBoundaries(end_key, traj_key, ends, trajectories)

    # ------------------------------------------------------------------ notifications
    def add(self, index: int | torch.Tensor) -> None:
        self._boundaries.note_write(torch.as_tensor(index, dtype=torch.long).reshape(1))

    def extend(self, index: torch.Tensor) -> None:
        self._boundaries.note_write(index)

    def empty(self) -> None:
        self._boundaries.reset()

    # ------------------------------------------------------------------ sampling
    def _slice_shape(self, batch_size: int) -> tuple[int, int]:
        """``(num_slices, slice_len)`` for ``batch_size``, checking that it divides evenly."""
        name, value = ("num_slices", self.num_slices) if self.num_slices is not None else ("slice_len", self.slice_len)
        try:
            count = -1 if isinstance(batch_size, bool) else operator.index(batch_size)  # ints, numpy ints
        except TypeError:
            count = -1  # a float, say: reported below with the value given
        if count < 1 or count % value:  # type: ignore[operator]
            raise ValueError(
                f"{type(self).__name__}: batch_size={batch_size!r} must be a positive multiple of {name}={value}."
            )
        batch_size = count
        if self.num_slices is not None:
            return self.num_slices, batch_size // self.num_slices
        return batch_size // self.slice_len, self.slice_len  # type: ignore[operator]

    def _table(self, storage: Any) -> TrajectoryTable:
        if len(storage) == 0:
            raise RuntimeError(f"{type(self).__name__}: cannot sample from an empty storage (len 0).")
        return self._boundaries.table(storage)

    def _eligible(self, table: TrajectoryTable, slice_len: int) -> torch.Tensor:
        eligible = table.eligible(slice_len, self.strict_length)
        if eligible.numel() == 0:
            raise RuntimeError(
                f"{type(self).__name__}: no stored trajectory holds slice_len={slice_len} elements (the longest "
                f"holds {int(table.lengths.max())}); store longer trajectories, ask for shorter slices, or pass "
                f"strict_length=False."
            )
        return eligible

    def sample(self, storage: Any, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        """The flat indices of ``num_slices`` slices, one after the other, and their info.

        Args:
            storage: the storage to sample from.
            batch_size: the number of elements asked for (a multiple of ``num_slices``
                or ``slice_len``).

        Returns:
            The ``int64`` index and the info (slice-end flags under ``truncated_key``).

        Examples:
            >>> import torch
            >>> from cadence.data.replay_buffers.storages import LazyTensorStorage
            >>> from tensordict import TensorDict
            >>> storage = LazyTensorStorage(10, ndim=2)
            >>> storage.set(torch.arange(2), TensorDict({"obs": torch.zeros(2, 5)}, [2, 5]))
            >>> sampler = SliceSampler(slice_len=5)  # rows are the trajectories
            >>> sampler.extend(torch.arange(10))
            >>> sorted(sampler.sample(storage, 5)[0].tolist()) in ([0, 1, 2, 3, 4], [5, 6, 7, 8, 9])
            True
        """
        num_slices, slice_len = self._slice_shape(batch_size)
        table = self._table(storage)
        eligible = self._eligible(table, slice_len)
        pick = torch.randint(eligible.numel(), (num_slices,), generator=self.generator)
        traj = eligible[pick]
        begin, length = self._place(table.lengths[traj], slice_len)
        index = self._gather(table.starts[traj] + begin, length, table.size)
        return index, self._info(storage, index, length)

    def _place(self, traj_length: torch.Tensor, slice_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A uniform slice start in each trajectory of ``traj_length``; the slices' offset and length."""
        left, right = (slice_len - 1 if side is True else min(int(side), slice_len - 1) for side in self.span)
        low = torch.full_like(traj_length, -left)
        high = torch.clamp(traj_length - slice_len + right, min=0)
        draw = torch.rand(traj_length.shape, generator=self.generator, dtype=torch.float64)
        offset = low + torch.floor(draw * (high - low + 1).to(torch.float64)).to(torch.long)
        offset = torch.minimum(offset, high)  # guards the rare rounding of draw * n up to n
        begin = torch.clamp(offset, min=0)
        stop = torch.minimum(offset + slice_len, traj_length)
        return begin, stop - begin

    @staticmethod
    def _gather(first: torch.Tensor, length: torch.Tensor, size: int) -> torch.Tensor:
        """Flat indices of runs ``first[k] .. first[k] + length[k] - 1`` (mod ``size``), run after run."""
        longest = int(length.max())
        runs = first.unsqueeze(1) + torch.arange(longest)
        if bool((length == longest).all()):  # the usual case: every slice full length
            return runs.flatten() % size
        # a boolean mask keeps row-major order: each run's elements, run after run
        return runs[torch.arange(longest) < length.unsqueeze(1)] % size

    def _info(self, storage: Any, index: torch.Tensor, length: torch.Tensor) -> dict[str, Any]:
        """Marks each slice's last element truncated, ORs that into the done flags, copies terminated."""
        if self.truncated_key is None:
            return {}
        truncated = torch.zeros(index.numel(), 1, dtype=torch.bool)
        truncated[torch.cumsum(length, 0) - 1] = True
        done = self._stored_flag(storage, replace_last(self.truncated_key, "done"), index)
        terminated = self._stored_flag(storage, replace_last(self.truncated_key, "terminated"), index)
        return {
            self.truncated_key: truncated,
            replace_last(self.truncated_key, "done"): truncated if done is None else done | truncated,
            replace_last(self.truncated_key, "terminated"): (
                torch.zeros_like(truncated) if terminated is None else terminated
            ),
        }

    @staticmethod
    def _stored_flag(storage: Any, key: NestedKey, index: torch.Tensor) -> torch.Tensor | None:
        """The stored boolean ``key`` at ``index`` as ``[n, 1]``, or ``None`` if not stored."""
        try:
            values = read_entry(storage, key)
        except (KeyError, TypeError):
            return None
        return per_element(values.index_select(0, index), index.numel()).unsqueeze(-1)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "boundaries": self._boundaries.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._boundaries.load_state_dict(state_dict["boundaries"])

    def __repr__(self) -> str:
        shape = f"num_slices={self.num_slices}" if self.num_slices is not None else f"slice_len={self.slice_len}"
        return f"{type(self).__name__}({shape}, strict_length={self.strict_length})"


# ---------------------------------------------------------------------------------------
# SliceSamplerWithoutReplacement
# ---------------------------------------------------------------------------------------


class SliceSamplerWithoutReplacement(SliceSampler):
    """Samples slices as ``SliceSampler`` does, each trajectory giving one slice per epoch.

    An epoch visits every trajectory long enough once, in a random order (or in storage
    order with ``shuffle=False``), ``num_slices`` trajectories per sample: no element
    comes twice in an epoch, and a sample holds one slice of a trajectory at most.
    ``ran_out`` turns ``True`` with the epoch's last sample (the next sample starts a new
    epoch); writing to the storage starts a new epoch too.

    Args:
        num_slices: how many slices per sample. Exclusive with ``slice_len``.
        slice_len: the length of each slice. Exclusive with ``num_slices``.
        drop_last: if ``True``, an epoch ends when fewer than ``num_slices`` trajectories
            are left (they are skipped); if ``False``, its last sample holds them, and
            is smaller.
        end_key: as in ``SliceSampler``.
        traj_key: as in ``SliceSampler``.
        ends: as in ``SliceSampler``.
        trajectories: as in ``SliceSampler``.
        truncated_key: as in ``SliceSampler``.
        strict_length: as in ``SliceSampler``.
        shuffle: whether each epoch visits the trajectories in a random order.
        compile: as in ``SliceSampler``.
        use_gpu: as in ``SliceSampler``.
        cache_values: as in ``SliceSampler``.
        generator: the random generator to draw from.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data.replay_buffers.storages import LazyTensorStorage
        >>> storage = LazyTensorStorage(100)
        >>> episode = torch.arange(6).repeat_interleave(4)  # six episodes of four steps
        >>> storage.set(torch.arange(24), TensorDict({"episode": episode}, [24]))
        >>> sampler = SliceSamplerWithoutReplacement(num_slices=2, generator=torch.Generator().manual_seed(0))
        >>> sampler.extend(torch.arange(24))
        >>> seen = []
        >>> while not sampler.ran_out:
        ...     seen += episode[sampler.sample(storage, 8)[0]].reshape(2, 4)[:, 0].tolist()
        >>> sorted(seen)
        [0, 1, 2, 3, 4, 5]
    """

    def __init__(
        self,
        *,
        num_slices: int | None = None,
        slice_len: int | None = None,
        drop_last: bool = False,
        end_key: NestedKey | None = None,
        traj_key: NestedKey | None = None,
        ends: torch.Tensor | None = None,
        trajectories: torch.Tensor | None = None,
        truncated_key: NestedKey | None = ("next", "truncated"),
        strict_length: bool = True,
        shuffle: bool = True,
        compile: bool | dict[str, Any] = False,
        use_gpu: torch.device | bool = False,
        cache_values: bool = False,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(
            num_slices=num_slices,
            slice_len=slice_len,
            end_key=end_key,
            traj_key=traj_key,
            ends=ends,
            trajectories=trajectories,
            cache_values=cache_values,
            truncated_key=truncated_key,
            strict_length=strict_length,
            compile=compile,
            use_gpu=use_gpu,
            generator=generator,
        )
        self.drop_last = drop_last
        self.shuffle = shuffle
        self._order = torch.empty(0, dtype=torch.long)  # this epoch's trajectories, in visiting order
        self._cursor = 0
        self._epoch_of: tuple[int, int] | None = None  # (table version, slice_len) the epoch was drawn for
        self._ran_out = False

    @property
    def ran_out(self) -> bool:
        """Whether the current epoch has given all its slices."""
        return self._ran_out

    @ran_out.setter
    def ran_out(self, value: bool) -> None:
        self._ran_out = bool(value)

    def _left(self, num_slices: int) -> int:
        """How many trajectories the epoch can still give."""
        left = self._order.numel() - self._cursor
        return 0 if self.drop_last and left < num_slices else left

    def sample(self, storage: Any, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        """The next slices of the epoch (``num_slices`` of them, fewer at an epoch's end).

        Args:
            storage: the storage to sample from.
            batch_size: the number of elements asked for (a multiple of ``num_slices``
                or ``slice_len``).

        Returns:
            The ``int64`` index and the info (slice-end flags under ``truncated_key``).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from cadence.data.replay_buffers.storages import LazyTensorStorage
            >>> storage = LazyTensorStorage(9)
            >>> storage.set(torch.arange(9), TensorDict({"episode": torch.arange(3).repeat_interleave(3)}, [9]))
            >>> sampler = SliceSamplerWithoutReplacement(slice_len=3, shuffle=False)
            >>> sampler.extend(torch.arange(9))
            >>> [sampler.sample(storage, 6)[0].tolist() for _ in range(2)]
            [[0, 1, 2, 3, 4, 5], [6, 7, 8]]
        """
        num_slices, slice_len = self._slice_shape(batch_size)
        table = self._table(storage)
        eligible = self._eligible(table, slice_len)
        epoch_of = (self._boundaries.version, slice_len)
        if epoch_of != self._epoch_of or self._left(num_slices) == 0:
            if self.drop_last and eligible.numel() < num_slices:
                raise RuntimeError(
                    f"{type(self).__name__}: only {eligible.numel()} trajectories hold slice_len={slice_len} "
                    f"elements, fewer than num_slices={num_slices}, and drop_last=True drops them all."
                )
            order = torch.randperm(eligible.numel(), generator=self.generator) if self.shuffle else None
            self._order = eligible if order is None else eligible[order]
            self._cursor, self._epoch_of = 0, epoch_of
        traj = self._order[self._cursor : self._cursor + num_slices]
        self._cursor += traj.numel()
        self._ran_out = self._left(num_slices) == 0
        begin, length = self._place(table.lengths[traj], slice_len)
        index = self._gather(table.starts[traj] + begin, length, table.size)
        return index, self._info(storage, index, length)

    def empty(self) -> None:
        super().empty()
        self._order, self._cursor, self._epoch_of, self._ran_out = torch.empty(0, dtype=torch.long), 0, None, False

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "order": self._order.clone(),
            "cursor": self._cursor,
            "epoch_of": self._epoch_of,
            "ran_out": self._ran_out,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._order = state_dict["order"].clone()
        self._cursor = int(state_dict["cursor"])
        self._epoch_of = state_dict["epoch_of"]
        self._ran_out = bool(state_dict["ran_out"])


# ---------------------------------------------------------------------------------------
# PrioritizedSliceSampler
# ---------------------------------------------------------------------------------------


class PrioritizedSliceSampler(SliceSampler):
    """Samples slices whose first elements are drawn by priority (prioritized experience replay).

    Every element has a priority, kept by a ``PrioritizedSampler`` (new elements get the
    maximal one; ``update_priority`` sets ``(|p| + eps)**alpha``). A slice starts at
    element ``i`` with probability proportional to ``p_i**alpha`` among the elements a
    slice may start at: with ``strict_length``, those at least ``slice_len - 1`` steps
    before their trajectory's end; without, any element (its slice is cut at the
    trajectory's end). So an element late in a trajectory only comes in the batch
    after an earlier start, whatever its own priority; aggregating priorities over
    slices (or using a per-step error) is up to the user.

    ``info["_weight"]`` holds, for every element of a slice, the importance weight of its
    start, ``(p_start / p_min)**-beta`` (the ``PrioritizedSampler`` formula: the least
    likely element weighs 1).

    Start draws come from the full priority tree; draws at a position no slice may start
    at are dropped and drawn again, which leaves the draws exactly proportional to the
    priorities of the possible starts. If the priority mass sits almost wholly on
    impossible starts (rare), the possible starts are enumerated instead, at a cost
    linear in the storage's size.

    Args:
        max_capacity: the storage's capacity in elements (flat indices are below it).
        alpha: how strongly priorities shape the draws (0: uniform over starts).
        beta: importance-weight exponent (a plain attribute, to anneal it).
        eps: added to every priority, so that no element is never drawn.
        dtype: the floating dtype of the importance weights.
        reduction: how per-step priorities of one element reduce (see ``PrioritizedSampler``).
        max_priority_within_buffer: see ``PrioritizedSampler``.
        num_slices: as in ``SliceSampler``.
        slice_len: as in ``SliceSampler``.
        end_key: as in ``SliceSampler``.
        traj_key: as in ``SliceSampler``.
        ends: as in ``SliceSampler``.
        trajectories: as in ``SliceSampler``.
        cache_values: as in ``SliceSampler``.
        truncated_key: as in ``SliceSampler``.
        strict_length: as in ``SliceSampler`` (see above for the possible starts).
        compile: as in ``SliceSampler``.
        span: only its right side applies: a slice may start up to that many elements
            closer to its trajectory's end, and is then cut there (a slice starts at a
            drawn element, so nothing comes before its trajectory's first one).
        generator: the random generator to draw from.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data.replay_buffers.storages import LazyTensorStorage
        >>> storage = LazyTensorStorage(20)
        >>> storage.set(torch.arange(20), TensorDict({"episode": torch.arange(2).repeat_interleave(10)}, [20]))
        >>> sampler = PrioritizedSliceSampler(20, alpha=1.0, beta=0.5, slice_len=4,
        ...                                   generator=torch.Generator().manual_seed(0))
        >>> sampler.extend(torch.arange(20))
        >>> sampler.update_priority(torch.arange(20), torch.full((20,), 1e-6).index_fill(0, torch.tensor([12]), 1.0))
        >>> index, info = sampler.sample(storage, 8)
        >>> index.reshape(2, 4).tolist()  # both slices start at the one prioritized element
        [[12, 13, 14, 15], [12, 13, 14, 15]]
        >>> info["_weight"].shape
        torch.Size([8])
    """

    # rejection rounds before enumerating the possible starts
    _MAX_ROUNDS = 8

    def __init__(
        self,
        max_capacity: int,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float32,
        reduction: str = "max",
        max_priority_within_buffer: bool = False,
        *,
        num_slices: int | None = None,
        slice_len: int | None = None,
        end_key: NestedKey | None = None,
        traj_key: NestedKey | None = None,
        ends: torch.Tensor | None = None,
        trajectories: torch.Tensor | None = None,
        cache_values: bool = False,
        truncated_key: NestedKey | None = ("next", "truncated"),
        strict_length: bool = True,
        compile: bool | dict[str, Any] = False,
        span: bool | int | tuple[bool | int, bool | int] = False,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(
            num_slices=num_slices,
            slice_len=slice_len,
            end_key=end_key,
            traj_key=traj_key,
            ends=ends,
            trajectories=trajectories,
            cache_values=cache_values,
            truncated_key=truncated_key,
            strict_length=strict_length,
            compile=compile,
            span=span,
            generator=generator,
        )
        # the priorities and their trees; it draws from this sampler's generator
        self._prioritized = PrioritizedSampler(
            max_capacity,
            alpha,
            beta,
            eps=eps,
            dtype=dtype,
            reduction=reduction,
            max_priority_within_buffer=max_priority_within_buffer,
            generator=self.generator,
        )
        self._possible: dict[tuple[int, int], int] = {}  # (table version, slice_len) -> possible starts

    # ------------------------------------------------------------------ priorities
    @property
    def max_capacity(self) -> int:
        """The number of elements priorities are kept for."""
        return self._prioritized.max_capacity

    @property
    def alpha(self) -> float:
        """The priority exponent."""
        return self._prioritized.alpha

    @property
    def beta(self) -> float:
        """The importance-weight exponent (settable, to anneal it)."""
        return self._prioritized.beta

    @beta.setter
    def beta(self, value: float) -> None:
        self._prioritized.beta = float(value)

    @property
    def eps(self) -> float:
        """What is added to every priority."""
        return self._prioritized.eps

    def priorities(self) -> torch.Tensor:
        """The stored priorities ``(|p| + eps)**alpha`` of all ``max_capacity`` elements (0 if unwritten)."""
        return self._prioritized.priorities()

    def add(self, index: int | torch.Tensor) -> None:
        super().add(index)
        self._prioritized.add(index)

    def extend(self, index: torch.Tensor) -> None:
        super().extend(index)
        self._prioritized.extend(index)

    def mark_update(self, index: int | torch.Tensor) -> None:
        self._prioritized.mark_update(index)

    def update_priority(self, index: int | torch.Tensor, priority: float | torch.Tensor) -> None:
        """Sets the priorities of the elements at ``index`` (see ``PrioritizedSampler.update_priority``).

        Examples:
            >>> sampler = PrioritizedSliceSampler(4, alpha=1.0, beta=1.0, eps=0.0, slice_len=2)
            >>> sampler.extend(torch.arange(4))
            >>> sampler.update_priority(torch.tensor([1, 2]), torch.tensor([3.0, 0.5]))
            >>> sampler.priorities().tolist()
            [1.0, 3.0, 0.5, 1.0]
        """
        self._prioritized.update_priority(index, priority)

    def empty(self) -> None:
        super().empty()
        self._prioritized.empty()
        self._possible = {}

    # ------------------------------------------------------------------ sampling
    def _latest_start(self, lengths: torch.Tensor, slice_len: int) -> torch.Tensor:
        """The last offset a slice may start at in trajectories of ``lengths`` (-1: none)."""
        right = self.span[1]
        right = slice_len - 1 if right is True else min(int(right), slice_len - 1)
        if self.strict_length:
            latest = lengths - slice_len + right
            return torch.where(lengths >= slice_len, latest, -1)
        return lengths - 1

    def sample(self, storage: Any, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        """``num_slices`` slices with prioritized starts, their info and importance weights.

        Args:
            storage: the storage to sample from.
            batch_size: the number of elements asked for (a multiple of ``num_slices``
                or ``slice_len``).

        Returns:
            The ``int64`` index and the info: ``"_weight"`` (one weight per element) and
            the slice-end flags under ``truncated_key``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from cadence.data.replay_buffers.storages import LazyTensorStorage
            >>> storage = LazyTensorStorage(6)
            >>> storage.set(torch.arange(6), TensorDict({"episode": torch.zeros(6, dtype=torch.long)}, [6]))
            >>> sampler = PrioritizedSliceSampler(6, alpha=1.0, beta=1.0, slice_len=6)
            >>> sampler.extend(torch.arange(6))
            >>> sampler.sample(storage, 6)[0].tolist()
            [0, 1, 2, 3, 4, 5]
        """
        num_slices, slice_len = self._slice_shape(batch_size)
        table = self._table(storage)
        self._eligible(table, slice_len)  # raises if no trajectory is long enough
        latest = self._latest_start(table.lengths, slice_len)
        start, weight = self._draw_starts(storage, table, latest, num_slices, slice_len)
        traj, offset = table.locate(start)
        length = torch.minimum(table.lengths[traj] - offset, torch.tensor(slice_len))
        index = self._gather(start, length, table.size)
        info = self._info(storage, index, length)
        info["_weight"] = self._spread(weight, length)
        return index, info

    def _possible_starts(self, table: TrajectoryTable, latest: torch.Tensor, slice_len: int) -> int:
        key = (self._boundaries.version, slice_len)
        if key not in self._possible:
            self._possible = {key: int((latest + 1).clamp(min=0).sum())}
        return self._possible[key]

    def _draw_starts(
        self, storage: Any, table: TrajectoryTable, latest: torch.Tensor, num_slices: int, slice_len: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``num_slices`` start positions drawn by priority among the possible ones, with their weights."""
        # the share of draws that land on possible starts: first guessed from their count
        # (exact for equal priorities), then measured on the draws made
        share = self._possible_starts(table, latest, slice_len) / table.size
        most = 64 * num_slices + 4096
        starts, weights, found, drawn, accepted = [], [], 0, 0, 0
        for _ in range(self._MAX_ROUNDS):
            wanted = num_slices - found
            draws = min(math.ceil(1.25 * wanted / max(share, 1e-12)) + 8, most)
            position, info = self._prioritized.sample(storage, draws)
            traj, offset = table.locate(position)
            keep = offset <= latest[traj]
            starts.append(position[keep][:wanted])
            weights.append(info["_weight"][keep][:wanted])
            found += starts[-1].numel()
            if found == num_slices:
                return torch.cat(starts), torch.cat(weights)
            drawn, accepted = drawn + draws, accepted + int(keep.sum())
            share = accepted / drawn
        return self._enumerated_starts(table, latest, num_slices)

    def _enumerated_starts(
        self, table: TrajectoryTable, latest: torch.Tensor, num_slices: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Draws among all possible starts listed out: exact whatever the priorities, ``O(size)``."""
        count = (latest + 1).clamp(min=0)
        possible = self._gather(table.starts[count > 0], count[count > 0], table.size)
        stored = self.priorities()
        priority = stored[possible]
        if not bool((priority > 0).any()):
            raise RuntimeError(
                f"{type(self).__name__}: every possible slice start has priority 0; update_priority with "
                f"positive values (or eps > 0)."
            )
        pick = torch.multinomial(priority, num_slices, replacement=True, generator=self.generator)
        lowest = stored[: table.size].min()
        weight = (priority[pick] / lowest) ** (-self.beta)
        return possible[pick], weight.to(self._prioritized.dtype)

    @staticmethod
    def _spread(value: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        """Each slice's value repeated over its elements."""
        longest = int(length.max())
        grid = value.unsqueeze(1).expand(-1, longest)
        return grid[torch.arange(longest) < length.unsqueeze(1)]

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["priorities"] = self._prioritized.state_dict()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        # the inner sampler's generator is this one: restore the priorities, then the generator
        self._prioritized.load_state_dict(state_dict["priorities"])
        self.generator.set_state(state_dict["generator"])
        self._possible = {}

    def __repr__(self) -> str:
        shape = f"num_slices={self.num_slices}" if self.num_slices is not None else f"slice_len={self.slice_len}"
        return (
            f"{type(self).__name__}(max_capacity={self.max_capacity}, alpha={self.alpha}, beta={self.beta}, "
            f"{shape}, strict_length={self.strict_length})"
        )
