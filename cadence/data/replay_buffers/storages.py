"""Storages: where a replay buffer keeps its items.

A storage holds up to ``max_size`` elements, counted along its first ``ndim`` dims.
Writers fill it by *rows* (positions along dim 0: one transition for ``ndim=1``, one
``[T]`` trajectory of a ``[n, T]`` batch for ``ndim=2``); samplers read it by *flat
element indices* (row-major over the first ``ndim`` dims, see ``sampler_base``).

- ``ListStorage``: a Python list of arbitrary items (the buffer collates them).
- ``TensorStorage``: preallocated tensors or a ``TensorDict`` given by the user.
- ``LazyTensorStorage``: tensors allocated, in memory, at the first write, laid out
  like the data written.
- ``LazyMemmapStorage``: the same on memory-mapped files (in ``scratch_dir``).

Tensor storages read a sample with one indexing call per entry and build the sample's
``TensorDict`` directly; they check that written data have the stored entries, shapes
and dtypes, and say which differ.

``dumps``/``loads`` write and read a storage in files that hold no code (JSON metadata,
raw data files, ``weights_only`` state; see ``_checkpoint_files``), each sized and
checksummed; ``loads`` checks everything before it changes anything and raises
``CheckpointError`` naming the bad file.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> storage = LazyTensorStorage(100)
    >>> storage.set(torch.arange(3), TensorDict({"obs": torch.ones(3, 4)}, [3]))
    >>> len(storage), storage.get(torch.tensor([0, 2]))["obs"].shape
    (3, torch.Size([2, 4]))
"""

from __future__ import annotations

import copy
import math
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from tensordict import MemoryMappedTensor, TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from cadence.data.replay_buffers._checkpoint_files import (
    VERSION as CHECKPOINT_VERSION,
    encode_state,
    field,
    load_state,
    read_meta,
    save_state,
    write_meta,
)
from cadence.data.replay_buffers._tensor_dumps import STORAGE_FORMAT, read_tensor_dump, tensor_dump_writer
from cadence.data.replay_buffers.checkpoint import CheckpointError

__all__ = ["LazyMemmapStorage", "LazyTensorStorage", "ListStorage", "Storage", "TensorStorage"]


class Storage:
    """The interface of replay-buffer storages.

    Args:
        max_size: the number of elements the storage holds (along its first ``ndim`` dims).
        ndim: how many leading dims count elements.

    Examples:
        >>> storage = ListStorage(2)
        >>> storage.max_size, storage.ndim, len(storage)
        (2, 1, 0)
    """

    def __init__(self, max_size: int, ndim: int = 1) -> None:
        if int(max_size) < 1:
            raise ValueError(f"{type(self).__name__}: max_size must be >= 1, got {max_size}.")
        if ndim < 1:
            raise ValueError(f"{type(self).__name__}: ndim must be >= 1, got {ndim}.")
        self.max_size = int(max_size)
        self.ndim = ndim
        self._rows_written = 0  # the highest row written + 1, up to the row capacity

    # ------------------------------------------------------------------ layout
    @property
    def row_size(self) -> int:
        """Elements per row (the product of dims 1 to ``ndim - 1``); 1 for ``ndim=1``."""
        return 1

    @property
    def row_capacity(self) -> int:
        """How many rows fit: ``max_size // row_size``."""
        return self.max_size // self.row_size

    def row_capacity_for(self, data: Any) -> int:
        """How many rows of ``data``'s layout fit (a lazy storage knows its rows only then)."""
        return self.row_capacity

    def row_size_for(self, data: Any) -> int:
        """Elements per row of ``data``'s layout."""
        return self.row_size

    @property
    def shape(self) -> torch.Size | None:
        """The first ``ndim`` dims of the allocated storage (``None`` before the first write)."""
        return torch.Size([self.row_capacity])

    def __len__(self) -> int:
        return min(self._rows_written, self.row_capacity) * self.row_size

    # ------------------------------------------------------------------ data
    def set(self, rows: torch.Tensor, data: Any) -> None:
        """Writes ``data`` (leading dim ``len(rows)``) at the positions ``rows`` along dim 0."""
        raise TypeError(f"{type(self).__name__} must implement set(rows, data).")

    def get(self, index: int | slice | torch.Tensor | Sequence[int]) -> Any:
        """The elements at flat indices ``index``."""
        raise TypeError(f"{type(self).__name__} must implement get(index).")

    def __getitem__(self, index: int | slice | torch.Tensor | Sequence[int]) -> Any:
        return self.get(index)

    def get_entry(self, key: NestedKey) -> torch.Tensor:
        """One entry over all written elements, ``[len(self), ...]`` in flat-index order."""
        raise TypeError(f"{type(self).__name__} keeps no entries by key; use a tensor storage.")

    def empty(self) -> None:
        """Forgets every element (the allocation, if any, is kept)."""
        self._rows_written = 0

    def _mark_written(self, rows: torch.Tensor) -> None:
        if rows.numel():
            self._rows_written = max(self._rows_written, int(rows.max()) + 1)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The stored data and the fill level."""
        return {"rows_written": self._rows_written}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores what ``state_dict`` returned."""
        self._rows_written = int(state_dict["rows_written"])

    # ------------------------------------------------------------------ checkpoints
    # A dump is ``storage.json`` (sealed metadata: the storage's kind, size, fill level and
    # the files' sizes and checksums) beside data files that hold no code (see
    # ``_checkpoint_files``). ``loads`` reads and checks everything (``_read_dump``)
    # before it changes anything (``_apply_dump``), so a bad dump leaves the storage as it was.
    _dump_family = ""  # storages whose dumps load into one another ("" : this class only)

    def dumps(self, path: str | Path) -> None:
        """Writes the storage into the directory ``path``: ``storage.json`` and its data files.

        Raises:
            TypeError: the storage holds something a checkpoint cannot hold without code
                (see ``ListStorage``).

        Examples:
            >>> import tempfile
            >>> storage = ListStorage(4)
            >>> storage.set(torch.arange(2), ["a", torch.ones(2)])
            >>> folder = tempfile.mkdtemp()
            >>> storage.dumps(folder)
            >>> restored = ListStorage(4)
            >>> restored.loads(folder)
            >>> restored.get(0), len(restored)
            ('a', 2)
        """
        self._dump_writer()(Path(path))

    def _dump_writer(self) -> Callable[[Path], None]:
        """Checks that the storage can be dumped (raising ``TypeError`` if not); returns
        the function that writes the dump into a directory."""
        state = encode_state(self.state_dict(), f"{type(self).__name__} state")
        header = self._dump_header()

        def write(path: Path) -> None:
            path.mkdir(parents=True, exist_ok=True)
            entry = save_state(state, path / "storage.pt")
            write_meta(path / "storage.json", {**header, "state": entry})

        return write

    def _dump_header(self) -> dict[str, Any]:
        return {
            "format": STORAGE_FORMAT,
            "version": CHECKPOINT_VERSION,
            "storage": type(self).__name__,
            "family": self._dump_family or type(self).__name__,
            "max_size": self.max_size,
            "ndim": self.ndim,
            "rows_written": self._rows_written,
        }

    def loads(self, path: str | Path, *, verify: bool = True) -> None:
        """Reads what ``dumps`` wrote into ``path``; nothing changes if it fails.

        Args:
            path: the directory ``dumps`` wrote.
            verify: compare the files' checksums (sizes, shapes and kinds are always checked).

        Raises:
            CheckpointError: a file is missing, truncated, damaged, holds anything but
                data, or the dump does not fit this storage (another kind of storage,
                another ``max_size``, ``ndim``, entries, shapes or dtypes).

        Examples:
            >>> import tempfile
            >>> folder = tempfile.mkdtemp()
            >>> ListStorage(4).dumps(folder)
            >>> ListStorage(8).loads(folder)  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            cadence.data.replay_buffers.checkpoint.CheckpointError: .../storage.json: ... max_size=4, ... max_size=8 ...
        """
        self._apply_dump(self._read_dump(Path(path), verify))

    def _read_dump(self, path: Path, verify: bool) -> Any:
        """Reads and checks the dump in ``path``; returns what ``_apply_dump`` takes. Changes nothing."""
        file = path / "storage.json"
        meta = read_meta(file, STORAGE_FORMAT, verify)
        self._check_dump_fits(meta, file)
        state = load_state(path / "storage.pt", field(meta, "state", dict, file), verify)
        return self._check_dumped_state(state, path / "storage.pt", meta["rows_written"])

    def _check_dump_fits(self, meta: dict[str, Any], file: Path) -> None:
        """Raises ``CheckpointError`` unless the dump's kind, ``max_size`` and ``ndim`` are this storage's."""
        family = field(meta, "family", str, file)
        written_by = field(meta, "storage", str, file)
        if family != (self._dump_family or type(self).__name__):
            raise CheckpointError(
                f"{file}: written by a {written_by}, which this {type(self).__name__} cannot load "
                f"(build the buffer with the kind of storage that wrote the checkpoint)."
            )
        max_size = field(meta, "max_size", int, file)
        if max_size != self.max_size:
            raise CheckpointError(
                f"{file}: written by a storage of max_size={max_size}, this {type(self).__name__} has "
                f"max_size={self.max_size} (a checkpoint loads into a storage of its own capacity)."
            )
        ndim = field(meta, "ndim", int, file)
        if ndim != self.ndim:
            raise CheckpointError(f"{file}: written by a storage of ndim={ndim}, this one has ndim={self.ndim}.")
        if field(meta, "rows_written", int, file) < 0:
            raise CheckpointError(f"{file}: field 'rows_written' is negative.")

    def _check_dumped_state(self, state: Any, file: Path, rows_written: int) -> Any:
        """``state`` if it is a state dict of ``rows_written`` rows (subclasses check more)."""
        if not isinstance(state, dict):
            raise CheckpointError(f"{file}: holds a {type(state).__name__}, not a storage state dict.")
        if state.get("rows_written") != rows_written:
            raise CheckpointError(
                f"{file}: holds a state of rows_written={state.get('rows_written')!r}, its metadata says "
                f"{rows_written}."
            )
        return state

    def _apply_dump(self, state: Any) -> None:
        """Loads a state ``_read_dump`` checked; if this storage still refuses it, its
        previous state is restored and ``CheckpointError`` raised."""
        previous = copy.deepcopy(self.state_dict())
        try:
            self.load_state_dict(state)
        except Exception as error:  # a custom storage's own checks: the dump does not fit it
            self.load_state_dict(previous)
            raise CheckpointError(f"the dumped state does not fit this {type(self).__name__}: {error}") from error

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_size={self.max_size}, ndim={self.ndim}, len={len(self)})"


class ListStorage(Storage):
    """A list of arbitrary items (tensors, tensordicts, any Python object).

    ``dumps`` writes items made of tensors, ``TensorDict`` objects, numpy arrays and
    scalars, numbers, strings, bytes, ``None``, and lists, tuples, sets and dicts of
    them, read back with ``torch.load(weights_only=True)``. Any other object (a
    dataclass, a function, an instance of your own class) would need code to be rebuilt:
    ``dumps`` refuses it with a ``TypeError`` that names the item, and writes nothing.

    Args:
        max_size: the number of items it holds.

    Examples:
        >>> storage = ListStorage(3)
        >>> storage.set(torch.tensor([0, 1]), ["a", {"b": 1}])
        >>> storage.get(torch.tensor([1, 0]))
        [{'b': 1}, 'a']
    """

    def __init__(self, max_size: int = 1000) -> None:
        super().__init__(max_size, ndim=1)
        self._items: list[Any] = []

    def set(self, rows: torch.Tensor, data: Any) -> None:
        items = list(data.unbind(0)) if isinstance(data, (torch.Tensor, TensorDictBase)) else list(data)
        positions = rows.tolist()
        if len(items) != len(positions):
            raise ValueError(f"ListStorage.set: {len(positions)} positions for {len(items)} items.")
        for position, item in zip(positions, items):
            if position < len(self._items):
                self._items[position] = item
            elif position == len(self._items):
                self._items.append(item)
            else:
                raise IndexError(
                    f"ListStorage.set: position {position} leaves a gap (the storage holds {len(self._items)} items)."
                )
        self._mark_written(rows)

    def get(self, index: int | slice | torch.Tensor | Sequence[int]) -> Any:
        if isinstance(index, int):
            return self._items[: len(self)][index]
        if isinstance(index, slice):
            return self._items[: len(self)][index]
        positions = index.tolist() if isinstance(index, torch.Tensor) else list(index)
        size = len(self)
        bad = [p for p in positions if not -size <= p < size]
        if bad:
            raise IndexError(f"ListStorage.get: indices {bad[:5]} are out of range for {size} items.")
        return [self._items[p] for p in positions]

    def empty(self) -> None:
        super().empty()
        self._items = []

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "items": list(self._items)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._items = list(state_dict["items"])

    _dump_family = "list"

    def _check_dumped_state(self, state: Any, file: Path, rows_written: int) -> Any:
        state = super()._check_dumped_state(state, file, rows_written)
        items, rows = state.get("items"), state.get("rows_written")
        if not isinstance(items, list) or not isinstance(rows, int) or len(items) != rows or rows > self.max_size:
            raise CheckpointError(
                f"{file}: expected 'items', a list of 'rows_written' items (at most {self.max_size}); got "
                f"{type(items).__name__} of {len(items) if isinstance(items, list) else '?'} items, "
                f"rows_written={rows!r}."
            )
        return state

    def _apply_dump(self, state: Any) -> None:
        self.load_state_dict(state)  # checked whole by _check_dumped_state: it cannot fail halfway


def _leaf_signature(data: TensorDictBase | torch.Tensor, ndim: int) -> dict[NestedKey, tuple[torch.Size, torch.dtype]]:
    """Each entry's shape after the leading ``ndim`` dims, and its dtype."""
    if isinstance(data, torch.Tensor):
        return {"": (data.shape[ndim:], data.dtype)}
    return {key: (value.shape[ndim:], value.dtype) for key, value in data.items(True, True)}


def _as_plain(tensor: torch.Tensor) -> torch.Tensor:
    """A plain tensor on the same memory (indexing a ``MemoryMappedTensor`` costs more)."""
    return tensor.as_subclass(torch.Tensor) if isinstance(tensor, MemoryMappedTensor) else tensor


class TensorStorage(Storage):
    """Tensors (or a ``TensorDict`` of them) preallocated by the user.

    Args:
        storage: the tensor or tensordict whose first ``ndim`` dims hold the elements.
        max_size: how many elements to use (all of them if ``None``).
        device: where the data lives (the storage's own device if ``None``).
        ndim: how many leading dims count elements.

    Examples:
        >>> import torch
        >>> storage = TensorStorage(torch.zeros(10, 3))
        >>> storage.set(torch.tensor([4]), torch.ones(1, 3))
        >>> storage.max_size, len(storage), storage.get(torch.tensor([4])).tolist()
        (10, 5, [[1.0, 1.0, 1.0]])
    """

    def __init__(
        self,
        storage: torch.Tensor | TensorDictBase | None,
        max_size: int | None = None,
        *,
        device: torch.device | str | None = None,
        ndim: int = 1,
    ) -> None:
        if storage is not None:
            available = math.prod(storage.shape[:ndim])
            max_size = available if max_size is None else max_size
            if max_size > available:
                raise ValueError(
                    f"TensorStorage: max_size={max_size} exceeds the {available} elements of the given storage "
                    f"(shape {tuple(storage.shape)}, ndim={ndim})."
                )
        if max_size is None:
            raise ValueError("TensorStorage needs a storage or a max_size.")
        super().__init__(max_size, ndim)
        self.device = torch.device(device) if device is not None else None
        self._storage: torch.Tensor | TensorDictBase | None = None
        if storage is not None:
            self._adopt(storage if device is None else storage.to(device))

    # ------------------------------------------------------------------ layout
    def _adopt(self, storage: torch.Tensor | TensorDictBase) -> None:
        """Takes ``storage`` as the allocation: caches its leaves, flattened over the element dims."""
        self._storage = storage
        if self.device is None:
            self.device = storage.device
        self._row_size = math.prod(storage.shape[1 : self.ndim])
        self._signature = _leaf_signature(storage, self.ndim)
        if isinstance(storage, torch.Tensor):
            self._leaves = {"": _as_plain(storage)}
        else:
            self._leaves = {key: _as_plain(value) for key, value in storage.items(True, True)}
        # flat views over the element dims, for reads by flat index
        self._flat_leaves = {key: value.flatten(0, self.ndim - 1) for key, value in self._leaves.items()}
        self._sample_layout = None if isinstance(storage, torch.Tensor) else _layout(storage)
        # an element's own batch dims (the [T] of trajectories stored one per element)
        self._element_batch = torch.Size() if isinstance(storage, torch.Tensor) else storage.batch_size[self.ndim :]

    @property
    def row_size(self) -> int:
        return self._row_size if self._storage is not None else 1

    @property
    def shape(self) -> torch.Size | None:
        return None if self._storage is None else self._storage.shape[: self.ndim]

    @property
    def initialized(self) -> bool:
        """Whether the storage is allocated."""
        return self._storage is not None

    # ------------------------------------------------------------------ writes
    def _check(self, data: torch.Tensor | TensorDictBase) -> None:
        if isinstance(data, torch.Tensor) != isinstance(self._storage, torch.Tensor):
            raise TypeError(
                f"{type(self).__name__} holds {type(self._storage).__name__} data; got a {type(data).__name__}."
            )
        got = _leaf_signature(data, self.ndim)
        if got == self._signature:
            return
        missing = sorted(map(str, set(self._signature) - set(got)))
        extra = sorted(map(str, set(got) - set(self._signature)))
        if missing or extra:
            raise ValueError(
                f"{type(self).__name__}: the data's entries differ from the stored ones: missing {missing}, "
                f"unexpected {extra}."
            )
        for key, (shape, dtype) in self._signature.items():
            got_shape, got_dtype = got[key]
            if got_shape != shape:
                raise ValueError(
                    f"{type(self).__name__}: entry {key!r} has element shape {tuple(got_shape)}, the storage holds "
                    f"{tuple(shape)} (leading dims {self.ndim})."
                )
            if got_dtype != dtype:
                raise TypeError(
                    f"{type(self).__name__}: entry {key!r} has dtype {got_dtype}, the storage holds {dtype}."
                )

    def set(self, rows: torch.Tensor, data: Any) -> None:
        if self._storage is None:
            self._allocate(data)
        self._check(data)
        rows = rows.to(torch.long)
        contiguous = bool(rows.numel()) and int(rows[-1]) - int(rows[0]) == rows.numel() - 1
        if contiguous:  # the usual round-robin write: a slice copy
            start, stop = int(rows[0]), int(rows[-1]) + 1
        values = {"": data} if isinstance(data, torch.Tensor) else dict(data.items(True, True))
        for key, leaf in self._leaves.items():
            value = values[key].to(leaf.device, non_blocking=True)
            if contiguous:
                leaf[start:stop].copy_(value)
            else:
                leaf.index_copy_(0, rows.to(leaf.device), value)
        self._mark_written(rows)

    def _allocate(self, data: Any) -> None:
        raise ValueError(
            f"{type(self).__name__} has no allocation; give it a storage (tensor or TensorDict) to write into."
        )

    # ------------------------------------------------------------------ reads
    def _flat_index(self, index: int | slice | torch.Tensor | Sequence[int]) -> torch.Tensor | int | slice:
        size = len(self)
        if isinstance(index, int):
            if not -size <= index < size:
                raise IndexError(f"{type(self).__name__}: index {index} is out of range for {size} elements.")
            return index % size
        if isinstance(index, slice):
            return slice(*index.indices(size))
        index = torch.as_tensor(index, dtype=torch.long)
        return index

    def get(self, index: int | slice | torch.Tensor | Sequence[int]) -> Any:
        if self._storage is None:
            raise ValueError(f"{type(self).__name__} is empty: nothing was written to it yet.")
        flat = self._flat_index(index)
        if isinstance(flat, torch.Tensor):
            picked = {key: value.index_select(0, flat.to(value.device)) for key, value in self._flat_leaves.items()}
            batch = flat.shape
            if flat.ndim != 1:
                picked = {key: value.reshape(*flat.shape, *value.shape[1:]) for key, value in picked.items()}
        else:
            picked = {key: value[flat] for key, value in self._flat_leaves.items()}
            batch = torch.Size([]) if isinstance(flat, int) else torch.Size([len(range(*flat.indices(len(self))))])
        if self._sample_layout is None:
            return picked[""]
        return _build(self._sample_layout, picked, torch.Size([*batch, *self._element_batch]), self.device)

    def get_entry(self, key: NestedKey) -> torch.Tensor:
        if self._storage is None:
            raise ValueError(f"{type(self).__name__} is empty: nothing was written to it yet.")
        key = key if isinstance(key, str) else tuple(key)
        if len(key) == 1 and isinstance(key, tuple):
            key = key[0]
        if key not in self._flat_leaves:
            raise KeyError(f"{type(self).__name__} holds no entry {key!r}; it holds {sorted(map(str, self._flat_leaves))}.")
        return self._flat_leaves[key][: len(self)]

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["storage"] = None if self._storage is None else _plain_copy(self._storage[: self._filled_rows()])
        return state

    def _filled_rows(self) -> int:
        return min(self._rows_written, self.row_capacity)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        data = state_dict["storage"]
        self.empty()
        if data is not None:
            rows = data.shape[0]
            if self._storage is None:
                self._allocate(data)
            self.set(torch.arange(rows), data)
        super().load_state_dict(state_dict)

    # ------------------------------------------------------------------ checkpoints
    # The written rows go to raw files, one per entry (``data/<n>.bin``), described in
    # ``storage.json``: the three tensor storages share this format, so a
    # ``LazyMemmapStorage`` checkpoint loads into a ``LazyTensorStorage`` and back.
    _dump_family = "tensor"

    def _dump_writer(self) -> Callable[[Path], None]:
        return tensor_dump_writer(self, self._dump_header())

    def _read_dump(self, path: Path, verify: bool) -> Any:
        return read_tensor_dump(self, path, verify, can_allocate=type(self)._allocate is not TensorStorage._allocate)

    def _apply_dump(self, state: Any) -> None:
        self.load_state_dict(state)  # every way it could fail was checked by _read_dump


class LazyTensorStorage(TensorStorage):
    """Tensors in memory, allocated at the first write with the data's entries, shapes and dtypes.

    Args:
        max_size: the number of elements (along the first ``ndim`` dims).
        device: where the data lives (``"cpu"``).
        ndim: how many leading dims count elements; with ``ndim=2`` a ``[n, T]`` batch
            fills ``n`` rows of ``T`` elements, and the storage has
            ``max_size // T`` rows.
        compilable: the reference's switch that lets ``torch.compile`` trace its
            storage. Cadence's storages index their tensors in one call and are never
            traced (the buffer's sampling runs in numpy, outside a compiled graph), so
            the flag is kept (``storage.compilable``) and changes nothing.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> storage = LazyTensorStorage(1000, ndim=2)
        >>> storage.set(torch.arange(4), TensorDict({"obs": torch.zeros(4, 200, 3)}, [4, 200]))
        >>> storage.shape, len(storage)
        (torch.Size([5, 200]), 800)
    """

    def __init__(
        self, max_size: int, *, device: torch.device | str = "cpu", ndim: int = 1, compilable: bool = False
    ) -> None:
        super().__init__(None, max_size, device=device, ndim=ndim)
        self.compilable = compilable

    def _row_layout(self, data: Any) -> tuple[int, torch.Size]:
        if data.ndim < self.ndim:
            raise ValueError(
                f"{type(self).__name__}(ndim={self.ndim}) needs data with at least {self.ndim} leading dims, "
                f"got batch shape {tuple(data.shape)}."
            )
        inner = data.shape[1 : self.ndim]
        rows = self.max_size // max(1, math.prod(inner))
        if rows < 1:
            raise ValueError(
                f"{type(self).__name__}: max_size={self.max_size} holds no row of {math.prod(inner)} elements "
                f"(data batch shape {tuple(data.shape)})."
            )
        return rows, torch.Size([rows, *inner])

    def row_capacity_for(self, data: Any) -> int:
        return self.row_capacity if self.initialized else self._row_layout(data)[0]

    def row_size_for(self, data: Any) -> int:
        return self.row_size if self.initialized else math.prod(self._row_layout(data)[1][1:])

    def _allocate(self, data: Any) -> None:
        _, shape = self._row_layout(data)
        device = self.device
        if isinstance(data, torch.Tensor):
            storage: Any = torch.empty((*shape, *data.shape[self.ndim :]), dtype=data.dtype, device=device)
        else:
            storage = _plain_template(data, self.ndim, shape).to(device).clone()
        self._adopt(storage)


class LazyMemmapStorage(LazyTensorStorage):
    """Like ``LazyTensorStorage``, on memory-mapped files: the data can exceed RAM and is
    shared with other processes that open the same files.

    Args:
        max_size: the number of elements (along the first ``ndim`` dims).
        scratch_dir: the directory of the files, kept after the storage is gone; if ``None``,
            a new temporary one, removed when the storage is garbage-collected or at exit.
        device: the device samples are returned on (``"cpu"``).
        ndim: how many leading dims count elements.
        compilable: as for ``LazyTensorStorage`` (kept, changes nothing).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> storage = LazyMemmapStorage(10)
        >>> storage.set(torch.arange(2), TensorDict({"obs": torch.ones(2, 3)}, [2]))
        >>> storage.get(torch.tensor([1]))["obs"].tolist()
        [[1.0, 1.0, 1.0]]
    """

    def __init__(
        self,
        max_size: int,
        *,
        scratch_dir: str | Path | None = None,
        device: torch.device | str = "cpu",
        ndim: int = 1,
        compilable: bool = False,
    ) -> None:
        super().__init__(max_size, device=device, ndim=ndim, compilable=compilable)
        self.scratch_dir = Path(scratch_dir) if scratch_dir is not None else None

    def _allocate(self, data: Any) -> None:
        _, shape = self._row_layout(data)
        if self.scratch_dir is None:
            self.scratch_dir = Path(tempfile.mkdtemp(prefix="cadence-memmap-"))
            # a folder the storage made is the storage's: removed with it (or at exit), as the
            # reference's temporary files are; a folder the user named is left alone
            weakref.finalize(self, shutil.rmtree, str(self.scratch_dir), True)
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        if isinstance(data, torch.Tensor):
            storage: Any = MemoryMappedTensor.empty(
                (*shape, *data.shape[self.ndim :]), dtype=data.dtype, filename=self.scratch_dir / "data.memmap"
            )
        else:
            storage = _plain_template(data, self.ndim, shape).memmap_like(prefix=self.scratch_dir / "data")
        self._adopt(storage)

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, scratch_dir={str(self.scratch_dir)!r})"


def _plain_copy(data: torch.Tensor | TensorDictBase) -> torch.Tensor | TensorDictBase:
    """A copy of ``data`` in plain memory (not on the storage's memory-mapped files)."""
    if isinstance(data, torch.Tensor):
        return _as_plain(data).clone()
    return data.to_tensordict() if data.is_memmap() else data.clone()


def _plain_template(data: TensorDictBase, ndim: int, shape: torch.Size) -> TensorDictBase:
    """One element of ``data`` (in plain memory, even if ``data`` is memory-mapped),
    expanded to the storage's ``shape`` followed by the element's own batch dims."""
    element = data[(0,) * ndim]
    if element.is_memmap():
        element = element.to_tensordict()
    return element.expand(*shape, *element.batch_size)


# ---------------------------------------------------------------------- sample building
def _layout(data: TensorDictBase) -> list[tuple[str, Any]]:
    """The nesting of a tensordict's entries: (name, flat key) for leaves, (name, sub-layout) for sub-tensordicts."""

    def walk(td: TensorDictBase, prefix: tuple[str, ...]) -> list[tuple[str, Any]]:
        layout: list[tuple[str, Any]] = []
        for name, value in td.items():
            key = (*prefix, name)
            if isinstance(value, TensorDictBase):
                layout.append((name, walk(value, key)))
            else:
                layout.append((name, key[0] if len(key) == 1 else key))
        return layout

    return walk(data, ())


def _build(layout: Iterable[tuple[str, Any]], leaves: dict[Any, torch.Tensor], batch: torch.Size,
           device: torch.device | None) -> TensorDict:
    """A tensordict of ``leaves`` nested as ``layout`` says, built without re-checking shapes
    (the storage made every leaf with the batch dims leading)."""
    source: dict[str, Any] = {}
    for name, item in layout:
        source[name] = _build(item, leaves, batch, device) if isinstance(item, list) else leaves[item]
    return _new_tensordict(source, batch_size=batch, device=device)


# TensorDict's constructor checks every leaf's shape and device (tens of microseconds a
# sample); the leaves here were made by indexing the storage's own tensors, so those
# checks cannot fail, and tensordict's unchecked constructor is used where it exists.
_new_tensordict = getattr(TensorDict, "_new_unsafe", TensorDict)
