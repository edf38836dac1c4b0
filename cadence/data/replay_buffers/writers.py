"""Writers: where in the storage a replay buffer's new items go.

- ``RoundRobinWriter``: a ring: new items go after the last ones and, once the
  storage is full, overwrite the oldest.
- ``TensorDictRoundRobinWriter``: the same for tensordicts, leaving out the entries a
  buffer adds to its samples (``"index"``, ``"_weight"``), so that sampled data can be
  written back.
- ``TensorDictMaxValueWriter``: keeps the items of highest rank (a reward, say); a new
  item replaces the lowest-ranked one when it ranks higher.

Writers work in rows (positions along the storage's dim 0) and answer the flat element
indices they wrote (``[n, *row_dims]``), which the buffer passes on to its sampler.

Examples:
    >>> import torch
    >>> from cadence.data.replay_buffers.storages import LazyTensorStorage
    >>> writer = RoundRobinWriter()
    >>> writer.register_storage(LazyTensorStorage(4))
    >>> writer.extend(torch.arange(6.0)).tolist()  # the last 4 of 6 items, at their ring positions
    [2, 3, 0, 1]
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from cadence.data.replay_buffers.storages import Storage

__all__ = ["RoundRobinWriter", "TensorDictMaxValueWriter", "TensorDictRoundRobinWriter", "Writer"]

#: Entries a buffer adds to its samples; they are not part of the stored data.
SAMPLE_ONLY_KEYS = ("index", "_weight")


def _num_items(data: Any) -> int:
    if isinstance(data, (torch.Tensor, TensorDictBase)):
        if not data.shape:
            raise ValueError("extend() needs data with a leading dim (one item per row); use add() for one item.")
        return data.shape[0]
    return len(data)


def _one_item(data: Any) -> Any:
    """``data`` as a batch of one."""
    if isinstance(data, (torch.Tensor, TensorDictBase)):
        return data.unsqueeze(0)
    return [data]


class Writer:
    """The interface of writers: ``add`` one item, ``extend`` with many.

    Examples:
        >>> writer = RoundRobinWriter()
        >>> writer.write_count
        0
    """

    def __init__(self) -> None:
        self._storage: Storage | None = None
        self._cursor = 0
        self._write_count = 0

    def register_storage(self, storage: Storage) -> None:
        """Attaches the storage this writer fills."""
        self._storage = storage

    @property
    def storage(self) -> Storage:
        """The registered storage."""
        if self._storage is None:
            raise RuntimeError(f"{type(self).__name__} has no storage; call register_storage(storage) first.")
        return self._storage

    @property
    def write_count(self) -> int:
        """How many items were written since the start (or the last ``empty``)."""
        return self._write_count

    @property
    def cursor(self) -> int:
        """The row the next item goes to."""
        return self._cursor

    def add(self, data: Any) -> int | torch.Tensor:
        """Writes one item; returns its flat index (a tensor of them for ``ndim > 1``)."""
        index = self.extend(_one_item(data))
        return int(index[0]) if index.ndim == 1 else index[0]

    def extend(self, data: Any) -> torch.Tensor:
        """Writes ``data``'s items (along its dim 0); returns their flat indices."""
        raise TypeError(f"{type(self).__name__} must implement extend(data).")

    def _flat_indices(self, rows: torch.Tensor, data: Any) -> torch.Tensor:
        storage = self.storage
        row_size = storage.row_size_for(data)
        if storage.ndim == 1:
            return rows
        inner = data.shape[1 : storage.ndim]
        flat = rows.unsqueeze(-1) * row_size + torch.arange(row_size)
        return flat.reshape(len(rows), *inner)

    def _data_to_write(self, data: Any) -> Any:
        return data

    def empty(self) -> None:
        """Starts over at row 0."""
        self._cursor = 0
        self._write_count = 0

    def state_dict(self) -> dict[str, Any]:
        """The cursor and the write count."""
        return {"cursor": self._cursor, "write_count": self._write_count}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores what ``state_dict`` returned."""
        self._cursor = int(state_dict["cursor"])
        self._write_count = int(state_dict["write_count"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(cursor={self._cursor}, write_count={self._write_count})"


class RoundRobinWriter(Writer):
    """Writes items one after the other, wrapping around to overwrite the oldest.

    An ``extend`` with more items than the storage holds keeps the last ones.

    Examples:
        >>> import torch
        >>> from cadence.data.replay_buffers.storages import LazyTensorStorage
        >>> writer = RoundRobinWriter()
        >>> writer.register_storage(LazyTensorStorage(3))
        >>> writer.extend(torch.zeros(2)).tolist(), writer.extend(torch.ones(2)).tolist(), writer.cursor
        ([0, 1], [2, 0], 1)
    """

    def extend(self, data: Any) -> torch.Tensor:
        storage = self.storage
        data = self._data_to_write(data)
        count = _num_items(data)
        capacity = storage.row_capacity_for(data)
        rows = (self._cursor + torch.arange(count)) % capacity
        if count > capacity:  # only the last `capacity` items stay
            rows, data = rows[-capacity:], data[count - capacity :]
        if count:
            storage.set(rows, data)
        self._cursor = (self._cursor + count) % capacity
        self._write_count += count
        return self._flat_indices(rows, data)


class TensorDictRoundRobinWriter(RoundRobinWriter):
    """A ``RoundRobinWriter`` for tensordicts that leaves out the entries buffers add to
    samples (``"index"``, ``"_weight"``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data.replay_buffers.storages import LazyTensorStorage
        >>> writer = TensorDictRoundRobinWriter()
        >>> writer.register_storage(LazyTensorStorage(3))
        >>> writer.extend(TensorDict({"obs": torch.zeros(2), "index": torch.arange(2)}, [2])).tolist()
        [0, 1]
        >>> sorted(writer.storage.get(torch.tensor([0])).keys())
        ['obs']
    """

    def _data_to_write(self, data: Any) -> Any:
        if isinstance(data, TensorDictBase):
            return data.exclude(*SAMPLE_ONLY_KEYS)
        return data


class TensorDictMaxValueWriter(Writer):
    """Keeps the items of highest rank: while the storage has room, items are appended;
    once full, an item replaces the lowest-ranked stored one if it ranks higher.

    Args:
        rank_key: the entry that ranks items (``("next", "reward")``).
        reduction: how an entry with more than one value per item becomes its rank:
            ``"sum"``, ``"mean"``, ``"max"``, ``"min"`` or ``"median"``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data.replay_buffers.storages import LazyTensorStorage
        >>> writer = TensorDictMaxValueWriter(rank_key="key")
        >>> writer.register_storage(LazyTensorStorage(2))
        >>> _ = writer.extend(TensorDict({"key": torch.tensor([3.0, 1.0, 7.0, 5.0])}, [4]))
        >>> sorted(writer.storage.get(torch.arange(2))["key"].tolist())
        [5.0, 7.0]
    """

    _REDUCTIONS = ("sum", "mean", "max", "min", "median")

    def __init__(self, rank_key: NestedKey | None = None, reduction: str = "sum") -> None:
        super().__init__()
        if reduction not in self._REDUCTIONS:
            raise ValueError(f"TensorDictMaxValueWriter: reduction must be one of {self._REDUCTIONS}, got {reduction!r}.")
        self.rank_key = rank_key if rank_key is not None else ("next", "reward")
        self.reduction = reduction
        self._ranks = torch.empty(0)

    def _rank(self, data: TensorDictBase) -> torch.Tensor:
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"TensorDictMaxValueWriter writes tensordicts; got a {type(data).__name__}.")
        value = data.get(self.rank_key, None)
        if value is None:
            raise KeyError(
                f"TensorDictMaxValueWriter ranks by {self.rank_key!r}, which the data does not hold; it holds "
                f"{sorted(map(str, data.keys(True, True)))}."
            )
        value = value.reshape(value.shape[0], -1).to(torch.float64)
        if self.reduction == "median":
            return value.median(dim=-1).values
        return getattr(value, self.reduction)(dim=-1) if self.reduction in ("sum", "mean") else getattr(
            value, self.reduction
        )(dim=-1).values

    def extend(self, data: Any) -> torch.Tensor:
        storage = self.storage
        data = data.exclude(*SAMPLE_ONLY_KEYS) if isinstance(data, TensorDictBase) else data
        ranks = self._rank(data)
        capacity = storage.row_capacity_for(data)
        if self._ranks.numel() != capacity:
            self._ranks = torch.full((capacity,), -torch.inf, dtype=torch.float64)
        filled = min(self._cursor, capacity)
        # items in order of rank, best first; free rows take the best ones
        order = torch.argsort(ranks, descending=True, stable=True)
        free = min(capacity - filled, len(order))
        rows = [torch.arange(filled, filled + free)]
        chosen = [order[:free]]
        self._ranks[rows[0]] = ranks[chosen[0]]
        rest = order[free:]
        if len(rest):
            # the remaining items, best first, against the stored items, worst first:
            # each pair where the new item ranks higher is a replacement
            worst = torch.argsort(self._ranks, stable=True)[: len(rest)]
            better = ranks[rest[: len(worst)]] > self._ranks[worst]
            rows.append(worst[better])
            chosen.append(rest[: len(worst)][better])
            self._ranks[rows[-1]] = ranks[chosen[-1]]
        rows_t, chosen_t = torch.cat(rows), torch.cat(chosen)
        if len(rows_t):
            storage.set(rows_t, data[chosen_t])
        self._cursor = filled + free
        self._write_count += len(rows_t)
        return self._flat_indices(rows_t, data)

    def empty(self) -> None:
        super().empty()
        self._ranks = torch.empty(0)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "ranks": self._ranks.clone()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._ranks = state_dict["ranks"].clone()
