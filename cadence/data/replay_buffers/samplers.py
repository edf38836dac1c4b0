"""Item samplers: uniform with replacement, epochs without replacement, and prioritized.

Each answers flat element indices of a storage (see ``sampler_base``) and draws from its
own ``torch.Generator``, so the same seed and the same writes give the same samples.
These samplers read nothing of the storage but its length, so any sized object works
as a storage in the examples.

Examples:
    >>> import torch
    >>> sampler = RandomSampler(generator=torch.Generator().manual_seed(0))
    >>> index, info = sampler.sample(list(range(100)), 4)
    >>> index.shape, index.dtype, info
    (torch.Size([4]), torch.int64, {})
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from cadence.data.replay_buffers.sampler_base import Sampler
from cadence.data.replay_buffers.segment_tree import MinSegmentTree, SumSegmentTree, update_together

__all__ = ["RandomSampler", "SamplerWithoutReplacement", "PrioritizedSampler"]

_REDUCTIONS = ("max", "min", "median", "mean")
_NUMPY_FLOATS = {torch.float32: np.float32, torch.float64: np.float64}


def _checked_length(storage: Any, sampler: Sampler) -> int:
    """``len(storage)``, or a ValueError when it is empty (there is nothing to sample)."""
    length = len(storage)
    if length == 0:
        raise ValueError(
            f"{type(sampler).__name__}: cannot sample from an empty storage (len(storage) == 0); "
            "write some items first."
        )
    return length


def _checked_batch_size(batch_size: Any, sampler: Sampler) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 0:
        raise ValueError(
            f"{type(sampler).__name__}: batch_size must be a non-negative int, got {batch_size!r}."
        )
    return int(batch_size)


def _as_numpy(value: Any) -> np.ndarray:
    """A CPU numpy view (or copy) of a tensor, array, list or number."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


class RandomSampler(Sampler):
    """Uniform sampling with replacement over the items written so far.

    Args:
        generator: the random generator to draw from (a fresh one if ``None``).

    Examples:
        >>> import torch
        >>> sampler = RandomSampler(generator=torch.Generator().manual_seed(1))
        >>> index, _ = sampler.sample(list("abcde"), 1000)
        >>> sorted(index.unique().tolist())
        [0, 1, 2, 3, 4]
        >>> sampler.set_seed(1)
        >>> torch.equal(sampler.sample(list("abcde"), 1000)[0], index)
        True
    """

    def sample(self, storage: Any, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        """``batch_size`` indices drawn uniformly from ``[0, len(storage))``.

        Raises:
            ValueError: if the storage is empty or ``batch_size`` is not a non-negative int.

        Examples:
            >>> RandomSampler().sample([7], 3)[0].tolist()
            [0, 0, 0]
        """
        batch_size = _checked_batch_size(batch_size, self)
        length = _checked_length(storage, self)
        index = torch.randint(length, (batch_size,), generator=self.generator, dtype=torch.int64)
        return index, {}


class SamplerWithoutReplacement(Sampler):
    """Epochs of sampling without replacement: each item once per epoch.

    An epoch is an ordering of the ``len(storage)`` items written when it starts (a random
    permutation if ``shuffle``, else storage order); samples take consecutive stretches
    of it. Items written during an epoch join the next one. When a sample needs more
    items than the epoch has left, the epoch ends with it and:

    - with ``drop_last=False``, the batch is completed from the start of a fresh epoch
      (so a batch may repeat an item across the epoch boundary, never within an epoch);
    - with ``drop_last=True``, the short remainder is dropped and the batch is taken
      whole from a fresh epoch (every batch then comes from one epoch, so ``batch_size``
      may not exceed ``len(storage)``).

    ``ran_out`` is ``True`` after a sample that ended an epoch (it took the epoch's last
    item, or, with ``drop_last``, left fewer than ``batch_size`` items, which are
    dropped): iterating until ``ran_out`` visits each item once.

    Args:
        drop_last: drop the short final batch of each epoch instead of completing it.
        shuffle: visit the items of each epoch in a random order (else in storage order).
        generator: the random generator for the permutations (a fresh one if ``None``).

    Examples:
        >>> import torch
        >>> sampler = SamplerWithoutReplacement(generator=torch.Generator().manual_seed(0))
        >>> storage = list(range(10))
        >>> seen = []
        >>> while True:
        ...     index, _ = sampler.sample(storage, 5)
        ...     seen += index.tolist()
        ...     if sampler.ran_out:
        ...         break
        >>> sorted(seen)
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
        >>> SamplerWithoutReplacement(shuffle=False).sample(storage, 4)[0].tolist()
        [0, 1, 2, 3]
    """

    def __init__(
        self,
        drop_last: bool = False,
        shuffle: bool = True,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(generator)
        self.drop_last = bool(drop_last)
        self.shuffle = bool(shuffle)
        # The current epoch's ordering of item indices, and how much of it was handed out.
        self._order: torch.Tensor | None = None
        self._position = 0
        self._ran_out = False

    @property
    def ran_out(self) -> bool:
        """Whether the last sample ended an epoch (the next one starts, or continues, a new one).

        Examples:
            >>> sampler = SamplerWithoutReplacement()
            >>> _ = sampler.sample([1, 2, 3], 2)
            >>> sampler.ran_out
            False
            >>> _ = sampler.sample([1, 2, 3], 1)
            >>> sampler.ran_out
            True
        """
        return self._ran_out

    def _new_epoch(self, length: int) -> None:
        if self.shuffle:
            self._order = torch.randperm(length, generator=self.generator)
        else:
            self._order = torch.arange(length)
        self._position = 0

    def sample(self, storage: Any, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        """The next ``batch_size`` items of the current epoch (see the class docstring).

        Raises:
            ValueError: if the storage is empty, or, with ``drop_last``, holds fewer than
                ``batch_size`` items.

        Examples:
            >>> sampler = SamplerWithoutReplacement(shuffle=False)
            >>> [sampler.sample(list("abcde"), 2)[0].tolist() for _ in range(3)]
            [[0, 1], [2, 3], [4, 0]]
            >>> sampler = SamplerWithoutReplacement(shuffle=False, drop_last=True)
            >>> [sampler.sample(list("abcde"), 2)[0].tolist() for _ in range(3)]
            [[0, 1], [2, 3], [0, 1]]
        """
        batch_size = _checked_batch_size(batch_size, self)
        length = _checked_length(storage, self)
        if self.drop_last and batch_size > length:
            raise ValueError(
                f"SamplerWithoutReplacement(drop_last=True): batch_size={batch_size} is larger "
                f"than the {length} items of the storage, so no full batch fits in an epoch."
            )
        if self._order is not None and self._order.numel() > length:
            # The storage lost items (it was emptied and refilled without telling us): the
            # epoch may name items that no longer exist, so it is abandoned.
            self._order = None
        parts = []
        needed = batch_size
        ended_epoch = False
        while needed > 0:
            if self._order is None or self._position >= self._order.numel():
                self._new_epoch(length)
            assert self._order is not None
            left = self._order.numel() - self._position
            if self.drop_last and left < needed:
                # The remainder is too short for this batch: it is dropped. The sample that
                # left it already reported the end of its epoch.
                self._order = None
                continue
            taken = self._order[self._position : self._position + needed]
            parts.append(taken)
            self._position += taken.numel()
            needed -= taken.numel()
            if self._position == self._order.numel():
                ended_epoch = True
        left = 0 if self._order is None else self._order.numel() - self._position
        self._ran_out = ended_epoch or (self.drop_last and 0 < left < batch_size)
        if not parts:
            return torch.zeros(0, dtype=torch.int64), {}
        index = parts[0] if len(parts) == 1 else torch.cat(parts)
        return index.clone(), {}

    def empty(self) -> None:
        """Forgets the current epoch.

        Examples:
            >>> sampler = SamplerWithoutReplacement(shuffle=False)
            >>> _ = sampler.sample([0, 1, 2], 2)
            >>> sampler.empty()
            >>> sampler.sample([0, 1, 2], 2)[0].tolist()
            [0, 1]
        """
        self._order = None
        self._position = 0
        self._ran_out = False

    def state_dict(self) -> dict[str, Any]:
        """The generator's state, the current epoch's ordering and the position in it.

        Examples:
            >>> sampler = SamplerWithoutReplacement(shuffle=False)
            >>> _ = sampler.sample([0, 1, 2], 2)
            >>> state = sampler.state_dict()
            >>> state["order"].tolist(), state["position"], state["ran_out"]
            ([0, 1, 2], 2, False)
        """
        state = super().state_dict()
        state["order"] = None if self._order is None else self._order.clone()
        state["position"] = self._position
        state["ran_out"] = self._ran_out
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores what ``state_dict`` returned; sampling goes on exactly where it was.

        Examples:
            >>> a = SamplerWithoutReplacement()
            >>> _ = a.sample(list(range(8)), 3)
            >>> b = SamplerWithoutReplacement()
            >>> b.load_state_dict(a.state_dict())
            >>> a.sample(list(range(8)), 4)[0].tolist() == b.sample(list(range(8)), 4)[0].tolist()
            True
        """
        super().load_state_dict(state_dict)
        order = state_dict["order"]
        self._order = None if order is None else torch.as_tensor(order, dtype=torch.int64).clone()
        self._position = int(state_dict["position"])
        self._ran_out = bool(state_dict["ran_out"])

    def __repr__(self) -> str:
        return f"SamplerWithoutReplacement(drop_last={self.drop_last}, shuffle={self.shuffle})"


class PrioritizedSampler(Sampler):
    """Proportional prioritized replay (Schaul et al., 2015, arXiv:1511.05952).

    Item ``i`` with priority ``p_i`` is drawn with probability
    ``P(i) = p_i**alpha / sum_k p_k**alpha``. ``update_priority(index, priority)`` stores
    ``(|priority| + eps)**alpha``; items just written get the maximal priority (raised to
    ``alpha``): the largest ``|priority| + eps`` given since construction, at least 1, or,
    with ``max_priority_within_buffer``, the largest priority among the items held now
    (1 while there is none).

    Each sample reports importance weights under ``info["_weight"]``:
    ``w_i = (N * P(i))**-beta / max_j (N * P(j))**-beta`` with ``N = len(storage)`` and ``j``
    over the items held: the least likely item gets weight 1. ``beta`` is a plain
    attribute, to anneal it during training.

    The priorities live in a sum tree and a min tree (float64, see ``segment_tree``), so
    a sample and an update each cost time logarithmic in ``max_capacity``.

    Args:
        max_capacity: how many items the storage holds at most (flat indices are below it).
        alpha: how strongly priorities shape the draws (0: uniform).
        beta: importance-weight exponent (0: no correction, 1: full correction).
        eps: added to every priority, so that no item is never drawn.
        dtype: the floating dtype of the importance weights.
        reduction: how priorities given per element of one item (a stored trajectory,
            say: a priority of shape ``[B, T]`` for ``B`` indices) become the item's
            priority: ``"max"``, ``"min"``, ``"median"`` or ``"mean"``. The same applies
            when ``index`` itself is multi-dimensional with repeated indices (an
            ``"index"`` entry expanded over each item's elements).
        max_priority_within_buffer: track the maximal priority among the items held now,
            instead of the largest ever given.
        generator: the random generator to draw from (a fresh one if ``None``).

    Examples:
        >>> import torch
        >>> sampler = PrioritizedSampler(4, alpha=1.0, beta=1.0,
        ...                              generator=torch.Generator().manual_seed(0))
        >>> storage = ["a", "b", "c", "d"]
        >>> sampler.extend(torch.arange(4))
        >>> sampler.update_priority(torch.arange(4), torch.tensor([1.0, 1.0, 1.0, 5.0]))
        >>> index, info = sampler.sample(storage, 8000)
        >>> round((index == 3).float().mean().item(), 1)  # 5 / 8
        0.6
        >>> info["_weight"][index == 3][0].item(), info["_weight"][index == 0][0].item()
        (0.20000000298023224, 1.0)
    """

    def __init__(
        self,
        max_capacity: int,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        reduction: str = "max",
        max_priority_within_buffer: bool = False,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(generator)
        if (
            isinstance(max_capacity, bool)
            or not isinstance(max_capacity, (int, np.integer))
            or max_capacity < 1
        ):
            raise ValueError(
                f"PrioritizedSampler: max_capacity must be a positive int, got {max_capacity!r}."
            )
        if not alpha >= 0:
            raise ValueError(f"PrioritizedSampler: alpha must be >= 0, got {alpha!r}.")
        if not beta >= 0:
            raise ValueError(f"PrioritizedSampler: beta must be >= 0, got {beta!r}.")
        if not eps >= 0:
            raise ValueError(f"PrioritizedSampler: eps must be >= 0, got {eps!r}.")
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise ValueError(f"PrioritizedSampler: dtype must be a floating torch dtype, got {dtype!r}.")
        if reduction not in _REDUCTIONS:
            raise ValueError(
                f"PrioritizedSampler: reduction must be one of {_REDUCTIONS}, got {reduction!r}."
            )
        self.max_capacity = int(max_capacity)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.eps = float(eps)
        self.dtype = dtype
        self.reduction = reduction
        self.max_priority_within_buffer = bool(max_priority_within_buffer)
        # Both trees hold p**alpha for written items; the min tree keeps +inf for the others,
        # which is also how "was this index written?" is answered.
        self._sum_tree = SumSegmentTree(self.max_capacity)
        self._min_tree = MinSegmentTree(self.max_capacity)
        # Only with max_priority_within_buffer: the minimum of -p**alpha is minus the maximum
        # over the items held now, kept up to date as items are rewritten or updated.
        self._neg_tree = MinSegmentTree(self.max_capacity) if self.max_priority_within_buffer else None
        self._max_priority = 1.0

    # -- priorities -------------------------------------------------------------------------

    @property
    def default_priority(self) -> float:
        """The priority (raised to ``alpha``) that newly written items get.

        Examples:
            >>> sampler = PrioritizedSampler(3, alpha=0.5, beta=0.4)
            >>> sampler.default_priority
            1.0
            >>> sampler.extend(torch.arange(2))
            >>> sampler.update_priority(0, 4.0)
            >>> round(sampler.default_priority, 6)  # (4 + 1e-8) ** 0.5
            2.0
        """
        if self._neg_tree is not None:
            lowest = self._neg_tree.total
            return 1.0 if lowest == float("inf") else -lowest
        return self._max_priority**self.alpha

    def _set_default_priority(self, index: int | torch.Tensor) -> None:
        flat = self._sum_tree._checked_index(_as_numpy(index)).reshape(-1)
        self._write(flat, self.default_priority)

    def _write(self, index: np.ndarray, powered: np.ndarray | float) -> None:
        if self._neg_tree is None:
            update_together([self._sum_tree, self._min_tree], index, [powered, powered])
        else:
            negated = -np.asarray(powered, dtype=np.float64)
            update_together([self._sum_tree, self._min_tree, self._neg_tree], index, [powered, powered, negated])

    def add(self, index: int | torch.Tensor) -> None:
        """The item at ``index`` was written: it gets the default (maximal) priority.

        Examples:
            >>> sampler = PrioritizedSampler(3, alpha=1.0, beta=1.0)
            >>> sampler.add(2)
            >>> sampler.sample([0, 0, 0], 2)[0].tolist()
            [2, 2]
        """
        self._set_default_priority(index)

    def extend(self, index: torch.Tensor) -> None:
        """The items at ``index`` (flat) were written: they get the default priority.

        Examples:
            >>> sampler = PrioritizedSampler(5, alpha=1.0, beta=1.0)
            >>> sampler.extend(torch.tensor([1, 3]))
            >>> sorted(set(sampler.sample([0] * 5, 50)[0].tolist()))
            [1, 3]
        """
        self._set_default_priority(index)

    def mark_update(self, index: int | torch.Tensor) -> None:
        """The items at ``index`` are about to be overwritten: their old priority is void.

        They get the default priority now (the write notification that follows gives the
        same), so a sampler told of the overwrite either way holds no stale priority.

        Examples:
            >>> sampler = PrioritizedSampler(2, alpha=1.0, beta=1.0)
            >>> sampler.extend(torch.arange(2))
            >>> sampler.update_priority(0, 0.0)
            >>> sampler.mark_update(0)
            >>> sampler.sample([0, 0], 4)[1]["_weight"].tolist()
            [1.0, 1.0, 1.0, 1.0]
        """
        self._set_default_priority(index)

    def update_priority(self, index: int | torch.Tensor, priority: float | torch.Tensor) -> None:
        """Sets the priorities of the items at ``index`` to ``(|priority| + eps)**alpha``.

        Args:
            index: flat item indices (int or tensor/array of any shape) of written items.
            priority: one number for all, one per index (a trailing dim of size 1 is fine),
                or one per element of each item (shape ``index.shape + item_shape``),
                reduced with ``reduction``. A multi-dimensional ``index`` whose entries
                repeat (an index expanded over each item's elements) also has its
                priorities reduced per distinct index; a 1-d ``index`` with repeats keeps
                the last priority given.

        Raises:
            ValueError: for a negative or NaN priority (naming the index), an index that
                is out of range or was never written, or a priority whose shape does not
                fit ``index``.

        Examples:
            >>> sampler = PrioritizedSampler(4, alpha=1.0, beta=1.0, eps=0.0)
            >>> sampler.extend(torch.arange(4))
            >>> sampler.update_priority(torch.tensor([0, 1]), torch.tensor([[2.0], [3.0]]))
            >>> sampler.update_priority(torch.tensor([2, 3]), torch.tensor([[1.0, 4.0], [0.5, 0.25]]))
            >>> sampler.priorities()[:4].tolist()
            [2.0, 3.0, 4.0, 0.5]
            >>> sampler.update_priority(1, float("nan"))
            Traceback (most recent call last):
            ...
            ValueError: PrioritizedSampler.update_priority: the priority for index 1 is nan; priorities must be non-negative numbers.
        """
        index_array = _as_numpy(index)
        if index_array.dtype.kind not in "iu":
            raise ValueError(
                "PrioritizedSampler.update_priority: index must hold integers, got dtype "
                f"{index_array.dtype}."
            )
        index_array = index_array.astype(np.int64, copy=False)
        priority_array = _as_numpy(priority).astype(np.float64, copy=False)
        index_shape, priority_shape = index_array.shape, priority_array.shape
        extra_dims = priority_array.ndim - index_array.ndim
        if priority_array.ndim == 0:
            priority_array = np.broadcast_to(priority_array, index_shape)
        elif extra_dims < 0 or priority_shape[: index_array.ndim] != index_shape:
            raise ValueError(
                "PrioritizedSampler.update_priority: expected a priority of shape "
                f"{tuple(index_shape)} (one per index), with optional trailing dims (one per "
                f"element of an item), or a single number; got shape {tuple(priority_shape)} "
                f"for index of shape {tuple(index_shape)}."
            )
        # Validate before reducing, so that a NaN hidden in one element is still caught.
        # `not >= 0` catches NaN as well as negatives.
        bad = ~(priority_array >= 0)
        if bad.any():
            position = np.unravel_index(int(np.argmax(bad)), bad.shape)
            culprit = index_array[position[: index_array.ndim]] if index_array.ndim else index_array
            raise ValueError(
                f"PrioritizedSampler.update_priority: the priority for index {int(culprit)} is "
                f"{float(priority_array[position])}; priorities must be non-negative numbers."
            )
        if extra_dims > 0:
            trailing = priority_array.reshape(index_shape + (-1,))
            if trailing.shape[-1] == 1:
                priority_array = trailing[..., 0]
            else:
                priority_array = self._reduce(trailing, axis=-1)
        index_flat = self._sum_tree._checked_index(index_array).reshape(-1)
        priority_flat = priority_array.reshape(-1)
        if index_array.ndim > 1:
            index_flat, priority_flat = self._reduce_by_index(index_flat, priority_flat)
        if index_flat.size == 0:
            return
        # (index_flat was checked above: read the leaves directly)
        written = np.isfinite(self._min_tree._leaves[index_flat])
        if not written.all():
            missing = index_flat[~written][0]
            raise ValueError(
                f"PrioritizedSampler.update_priority: index {int(missing)} has not been written "
                "(the sampler was not told of a write there through add/extend)."
            )
        priority_flat = priority_flat + self.eps
        self._write(index_flat, priority_flat**self.alpha)
        if self._neg_tree is None:
            self._max_priority = max(self._max_priority, float(priority_flat.max()))

    def _reduce(self, values: np.ndarray, axis: int) -> np.ndarray:
        if self.reduction == "max":
            return values.max(axis=axis)
        if self.reduction == "min":
            return values.min(axis=axis)
        if self.reduction == "mean":
            return values.mean(axis=axis)
        return np.median(values, axis=axis)

    def _reduce_by_index(self, index: np.ndarray, priority: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One priority per distinct index, reducing the priorities given for it."""
        unique, inverse = np.unique(index, return_inverse=True)
        inverse = inverse.reshape(-1)
        if self.reduction == "max":
            reduced = np.full(unique.shape, -np.inf)
            np.maximum.at(reduced, inverse, priority)
        elif self.reduction == "min":
            reduced = np.full(unique.shape, np.inf)
            np.minimum.at(reduced, inverse, priority)
        elif self.reduction == "mean":
            reduced = np.bincount(inverse, weights=priority) / np.bincount(inverse)
        else:
            # Median per group: sort by (group, value); the middle one or two of each group.
            order = np.lexsort((priority, inverse))
            ordered = priority[order]
            counts = np.bincount(inverse)
            starts = np.cumsum(counts) - counts
            reduced = (ordered[starts + (counts - 1) // 2] + ordered[starts + counts // 2]) / 2
        return unique, reduced

    def priorities(self) -> torch.Tensor:
        """The stored priorities ``(|p| + eps)**alpha`` of all ``max_capacity`` slots (0 if unwritten).

        Examples:
            >>> sampler = PrioritizedSampler(3, alpha=2.0, beta=1.0, eps=0.0)
            >>> sampler.extend(torch.arange(2))
            >>> sampler.update_priority(1, 3.0)
            >>> sampler.priorities().tolist()
            [1.0, 9.0, 0.0]
        """
        return torch.from_numpy(self._sum_tree[:])

    # -- sampling -------------------------------------------------------------------------

    def sample(self, storage: Any, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        """``batch_size`` indices drawn with probability ``P(i)``, and their weights.

        Returns:
            The flat indices (``int64``, shape ``[batch_size]``) and
            ``{"_weight": importance weights of dtype self.dtype}``.

        Raises:
            ValueError: if the storage is empty, or no written item has a positive priority.

        Examples:
            >>> sampler = PrioritizedSampler(3, alpha=1.0, beta=0.5)
            >>> sampler.sample([], 2)
            Traceback (most recent call last):
            ...
            ValueError: PrioritizedSampler: cannot sample from an empty storage (len(storage) == 0); write some items first.
        """
        batch_size = _checked_batch_size(batch_size, self)
        _checked_length(storage, self)
        total = self._sum_tree.total
        if not total > 0:
            raise ValueError(
                "PrioritizedSampler: no item has a positive priority (total priority "
                f"{total}); was the sampler told of the writes through add/extend?"
            )
        # float64 draws: at a million items, float32 would leave gaps in [0, total).
        draws = torch.rand(batch_size, generator=self.generator, dtype=torch.float64).numpy()
        index = self._sum_tree.find_prefix_sum(draws * total)
        # (N P(i))**-beta / max_j (N P(j))**-beta: N and the total cancel, and the largest
        # weight belongs to the smallest priority.
        # the descent's leaves are valid indices: read them directly
        weight = (self._sum_tree._leaves[index] / self._min_tree.total) ** (-self.beta)
        if self.dtype in (torch.float32, torch.float64):
            # numpy's cast then a shared-memory wrap is cheaper than torch's .to for 256 items.
            weight_tensor = torch.from_numpy(weight.astype(_NUMPY_FLOATS[self.dtype]))
        else:
            weight_tensor = torch.from_numpy(weight).to(self.dtype)
        return torch.from_numpy(index), {"_weight": weight_tensor}

    # -- state ----------------------------------------------------------------------------

    def empty(self) -> None:
        """Forgets every priority, and the maximal priority seen.

        Examples:
            >>> sampler = PrioritizedSampler(3, alpha=1.0, beta=1.0)
            >>> sampler.extend(torch.arange(3))
            >>> sampler.empty()
            >>> sampler.priorities().tolist()
            [0.0, 0.0, 0.0]
        """
        self._sum_tree.clear()
        self._min_tree.clear()
        if self._neg_tree is not None:
            self._neg_tree.clear()
        self._max_priority = 1.0

    def state_dict(self) -> dict[str, Any]:
        """The generator's state, the stored priorities, which slots are written, the max priority.

        Examples:
            >>> sampler = PrioritizedSampler(3, alpha=1.0, beta=1.0)
            >>> sampler.add(0)
            >>> state = sampler.state_dict()
            >>> state["priorities"].tolist(), state["written"].tolist(), state["max_priority"]
            ([1.0, 0.0, 0.0], [True, False, False], 1.0)
        """
        state = super().state_dict()
        state["priorities"] = torch.from_numpy(self._sum_tree[:])
        state["written"] = torch.from_numpy(np.isfinite(self._min_tree[:]))
        state["max_priority"] = self._max_priority
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores what ``state_dict`` returned (for the same ``max_capacity``).

        Raises:
            ValueError: if the saved priorities are not ``max_capacity`` long.

        Examples:
            >>> a = PrioritizedSampler(4, alpha=0.7, beta=0.5)
            >>> a.extend(torch.arange(4))
            >>> a.update_priority(torch.arange(4), torch.tensor([0.1, 2.0, 0.5, 1.0]))
            >>> b = PrioritizedSampler(4, alpha=0.7, beta=0.5)
            >>> b.load_state_dict(a.state_dict())
            >>> torch.equal(a.sample([0] * 4, 16)[0], b.sample([0] * 4, 16)[0])
            True
        """
        priorities = _as_numpy(state_dict["priorities"]).astype(np.float64).reshape(-1)
        written = _as_numpy(state_dict["written"]).astype(bool).reshape(-1)
        if priorities.shape != (self.max_capacity,) or written.shape != (self.max_capacity,):
            raise ValueError(
                f"PrioritizedSampler.load_state_dict: expected 'priorities' and 'written' of "
                f"length max_capacity={self.max_capacity}, got {priorities.shape[0]} and "
                f"{written.shape[0]}."
            )
        super().load_state_dict(state_dict)
        slots = np.arange(self.max_capacity)
        self._sum_tree.update(slots, np.where(written, priorities, 0.0))
        self._min_tree.update(slots, np.where(written, priorities, np.inf))
        if self._neg_tree is not None:
            self._neg_tree.update(slots, np.where(written, -priorities, np.inf))
        self._max_priority = float(state_dict["max_priority"])

    def __repr__(self) -> str:
        return (
            f"PrioritizedSampler(max_capacity={self.max_capacity}, alpha={self.alpha}, "
            f"beta={self.beta}, eps={self.eps}, reduction={self.reduction!r})"
        )
