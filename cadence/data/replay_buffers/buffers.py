"""Replay buffers: a storage, a sampler and a writer composed, with transforms on the way out.

- ``ReplayBuffer``: any data (tensors, tensordicts, Python objects in a ``ListStorage``).
- ``TensorDictReplayBuffer``: tensordicts; samples carry their storage ``"index"`` (and
  the sampler's extras, such as ``"_weight"``), and ``update_tensordict_priority(td)``
  sends ``td[priority_key]`` back to the sampler.
- ``PrioritizedReplayBuffer`` / ``TensorDictPrioritizedReplayBuffer``: the same with a
  ``PrioritizedSampler`` built from ``alpha``, ``beta`` and ``eps``.

Writes and samples hold one lock, so a ``prefetch=N`` buffer (which samples ``N``
batches ahead in a background thread) can be extended at the same time. ``dumps`` and
``loads`` save and restore data, sampler (priorities, generator) and writer (cursor) in
a crash-safe checkpoint directory (``checkpoint``), in files that hold no code, sized and
checksummed (``_checkpoint_files``); ``loads`` raises ``CheckpointError`` on any bad file
and leaves the buffer as it was.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.data.replay_buffers import LazyTensorStorage, TensorDictReplayBuffer
    >>> buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=4)
    >>> _ = buffer.extend(TensorDict({"obs": torch.randn(10, 3)}, [10]))
    >>> sample = buffer.sample()
    >>> len(buffer), sample["obs"].shape, sample["index"].shape
    (10, torch.Size([4, 3]), torch.Size([4]))
"""

from __future__ import annotations

import collections
import copy
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase
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
from cadence.data.replay_buffers.checkpoint import CheckpointError, latest_checkpoint, write_checkpoint
from cadence.data.replay_buffers.sampler_base import Sampler
from cadence.data.replay_buffers.samplers import PrioritizedSampler, RandomSampler
from cadence.data.replay_buffers.slice_samplers import PrioritizedSliceSampler
from cadence.data.replay_buffers.storages import ListStorage, Storage
from cadence.data.replay_buffers.writers import RoundRobinWriter, TensorDictRoundRobinWriter, Writer

__all__ = [
    "PrioritizedReplayBuffer",
    "ReplayBuffer",
    "TensorDictPrioritizedReplayBuffer",
    "TensorDictReplayBuffer",
]

BUFFER_FORMAT = "cadence.replay_buffers.buffer"


def _built(component: Any, kind: type, default: Callable[[], Any]) -> Any:
    """A component given as an instance or as a constructor; ``default()`` if ``None``.

    (Not ``component or default()``: an empty storage is falsy.)"""
    if component is None:
        return default()
    if isinstance(component, kind):
        return component
    if callable(component):
        return component()
    raise TypeError(f"expected a {kind.__name__} or a callable building one, got {type(component).__name__}.")


def _stack_items(items: list[Any]) -> Any:
    """The default collation of a ``ListStorage`` sample: tensors and tensordicts are
    stacked, anything else stays a list."""
    if items and all(isinstance(item, (torch.Tensor, TensorDictBase)) for item in items):
        return torch.stack(items)
    return items


class ReplayBuffer:
    """A composable replay buffer.

    Args:
        storage: where items live (a ``ListStorage(1000)`` if ``None``); an instance or
            a callable building one, as for the other components.
        sampler: which items a sample holds (``RandomSampler``).
        writer: where new items go (``RoundRobinWriter``).
        collate_fn: turns what the storage returns into a batch (stacks the items of a
            ``ListStorage``; tensor storages already return one).
        pin_memory: pin samples in page-locked memory (when CUDA is there).
        prefetch: how many samples to prepare ahead in a background thread.
        transform: applied to each sample (a ``Transform``, ``Compose`` or callable).
        batch_size: the default size of ``sample()``.
        dim_extend: the dim of ``extend``'s data that holds the items (0).
        generator: the sampler's generator (the sampler keeps its own if ``None``).
        compilable: the reference's switch that lets ``torch.compile`` trace its buffer
            (and gives up sharing the writer between processes). Cadence's sampling runs
            in numpy and is never traced: a compiled function is compiled around
            ``sample()``. The flag is kept (``buffer.compilable``) and changes nothing.
        shared: the reference's buffer written by several processes at once. Cadence's
            buffers are written by one process (the multi-process collectors deliver
            their batches to it), so only ``False`` is taken; ``True`` is refused.

    Examples:
        >>> import torch
        >>> buffer = ReplayBuffer(batch_size=2)
        >>> buffer.extend(["a", "b", "c"]).tolist()
        [0, 1, 2]
        >>> sorted(set(buffer.sample()) | {"a", "b", "c"})
        ['a', 'b', 'c']
    """

    _default_writer: type[Writer] = RoundRobinWriter

    def __init__(
        self,
        *,
        storage: Storage | Callable[[], Storage] | None = None,
        sampler: Sampler | Callable[[], Sampler] | None = None,
        writer: Writer | Callable[[], Writer] | None = None,
        collate_fn: Callable[[Any], Any] | None = None,
        pin_memory: bool = False,
        prefetch: int | None = None,
        transform: Callable[[Any], Any] | None = None,
        batch_size: int | None = None,
        dim_extend: int | None = None,
        generator: torch.Generator | None = None,
        compilable: bool = False,
        shared: bool = False,
    ) -> None:
        from cadence.envs.transforms.base import Compose  # buffers are usable without envs imported first

        if shared:
            raise ValueError(
                "shared=True: a buffer written by several processes at once is not something Cadence's buffers do; "
                "write from one process (MultiSyncDataCollector/MultiaSyncDataCollector deliver the workers' "
                "batches to it), or share a LazyMemmapStorage's files for reading."
            )
        self.compilable = compilable
        self._storage: Storage = _built(storage, Storage, lambda: ListStorage(1000))
        self._sampler: Sampler = _built(sampler, Sampler, RandomSampler)
        self._writer: Writer = _built(writer, Writer, self._default_writer)
        self._writer.register_storage(self._storage)
        if generator is not None:
            self._sampler.generator = generator
        if collate_fn is None:
            collate_fn = _stack_items if isinstance(self._storage, ListStorage) else (lambda data: data)
        self._collate_fn = collate_fn
        self._pin_memory = pin_memory
        if prefetch is not None and prefetch < 0:
            raise ValueError(f"prefetch must be None or >= 0, got {prefetch}.")
        self._prefetch = prefetch or 0
        self._executor: ThreadPoolExecutor | None = None
        self._prefetched: collections.deque[Future[Any]] = collections.deque()
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be None or >= 1, got {batch_size}.")
        self._batch_size = batch_size
        self.dim_extend = dim_extend or 0
        self._lock = threading.RLock()
        self._transform = Compose()
        if transform is not None:
            self.append_transform(transform)

    # ------------------------------------------------------------------ components
    @property
    def storage(self) -> Storage:
        """The storage."""
        return self._storage

    @property
    def sampler(self) -> Sampler:
        """The sampler."""
        return self._sampler

    @property
    def writer(self) -> Writer:
        """The writer."""
        return self._writer

    @property
    def transform(self) -> Any:
        """The ``Compose`` of transforms applied to samples."""
        return self._transform

    @property
    def batch_size(self) -> int | None:
        """The default sample size."""
        return self._batch_size

    @property
    def write_count(self) -> int:
        """How many items were written (overwritten ones included)."""
        return self._writer.write_count

    def __len__(self) -> int:
        return len(self._storage)

    def append_transform(self, transform: Callable[[Any], Any]) -> ReplayBuffer:
        """Applies ``transform`` to samples, after the transforms already there."""
        self._transform.append(self._as_transform(transform))
        return self

    def insert_transform(self, index: int, transform: Callable[[Any], Any]) -> ReplayBuffer:
        """Applies ``transform`` to samples, at position ``index`` among the transforms."""
        self._transform.insert(index, self._as_transform(transform))
        return self

    @staticmethod
    def _as_transform(transform: Callable[[Any], Any]) -> Any:
        from cadence.envs.transforms.base import Transform

        if isinstance(transform, Transform):
            return transform
        if not callable(transform):
            raise TypeError(f"a buffer transform must be a Transform or a callable, got {type(transform).__name__}.")
        return _callable_transform(transform)

    def set_seed(self, seed: int) -> None:
        """Seeds the sampler and the transforms that draw (those with a ``generator``)."""
        self._sampler.set_seed(seed)
        for index, transform in enumerate(self._transform):
            generator = getattr(transform, "generator", None)
            if isinstance(generator, torch.Generator):
                generator.manual_seed(seed + 1 + index)

    # ------------------------------------------------------------------ writes
    def add(self, data: Any) -> int | torch.Tensor:
        """Writes one item; returns its index."""
        with self._lock:
            index = self._writer.add(data)
            self._sampler.add(index)
        return index

    def extend(self, data: Any) -> torch.Tensor:
        """Writes the items of ``data`` (along ``dim_extend``); returns their indices."""
        if self.dim_extend and isinstance(data, (torch.Tensor, TensorDictBase)):
            data = data.transpose(0, self.dim_extend)
        with self._lock:
            index = self._writer.extend(data)
            self._sampler.extend(index.reshape(-1))
        return index

    def update_priority(self, index: int | torch.Tensor, priority: float | torch.Tensor) -> None:
        """Sets the priorities of the items at ``index`` (prioritized samplers)."""
        with self._lock:
            self._sampler.update_priority(index, priority)

    def empty(self) -> None:
        """Removes every item (and the sampler's and writer's state)."""
        with self._lock:
            self._drop_prefetched()
            self._storage.empty()
            self._writer.empty()
            self._sampler.empty()

    # ------------------------------------------------------------------ samples
    def sample(self, batch_size: int | None = None, return_info: bool = False) -> Any:
        """A batch of items, transformed.

        Args:
            batch_size: how many items (the buffer's ``batch_size`` if ``None``).
            return_info: also return the sampler's information (``"index"``, weights).

        Raises:
            ValueError: the buffer is empty, or no batch size is known.
        """
        size = self._resolve_batch_size(batch_size)
        if self._prefetch and size == self._batch_size:
            self._fill_prefetch(size)
            data, info = self._prefetched.popleft().result()
            self._fill_prefetch(size)
        else:
            data, info = self._sample(size)
        return (data, info) if return_info else data

    def _resolve_batch_size(self, batch_size: int | None) -> int:
        size = batch_size if batch_size is not None else self._batch_size
        if size is None:
            raise ValueError(
                f"{type(self).__name__}.sample() needs a batch size: pass sample(batch_size) or build the buffer "
                f"with batch_size=."
            )
        return size

    def _fill_prefetch(self, batch_size: int) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cadence-prefetch")
        while len(self._prefetched) < self._prefetch:
            self._prefetched.append(self._executor.submit(self._sample, batch_size))

    def _drop_prefetched(self) -> None:
        while self._prefetched:
            self._prefetched.popleft().cancel()

    def _sample(self, batch_size: int) -> tuple[Any, dict[str, Any]]:
        with self._lock:
            if len(self._storage) == 0:
                raise ValueError(f"{type(self).__name__} is empty: extend it before sampling.")
            index, info = self._sampler.sample(self._storage, batch_size)
            data = self._collate_fn(self._storage.get(index))
        info = {**info, "index": index}
        data = self._decorate(data, info)
        if len(self._transform):
            data = self._transform(data)
        if self._pin_memory and torch.cuda.is_available():
            data = data.pin_memory()
        return data, info

    def _decorate(self, data: Any, info: dict[str, Any]) -> Any:
        """Adds what a sample carries besides the items (tensordict buffers add the index)."""
        return data

    def __iter__(self) -> Iterator[Any]:
        """Samples of ``batch_size`` until the sampler runs out (forever for samplers with replacement)."""
        self._resolve_batch_size(None)
        while True:
            yield self.sample()
            if self._sampler.ran_out:
                return

    def __getitem__(self, index: int | slice | torch.Tensor) -> Any:
        with self._lock:
            return self._storage.get(index)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Storage, sampler, writer and transform state."""
        with self._lock:
            return {
                "storage": self._storage.state_dict(),
                "sampler": self._sampler.state_dict(),
                "writer": self._writer.state_dict(),
                "transform": self._transform.state_dict(),
            }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores what ``state_dict`` returned."""
        with self._lock:
            self._drop_prefetched()
            self._storage.load_state_dict(state_dict["storage"])
            self._sampler.load_state_dict(state_dict["sampler"])
            self._writer.load_state_dict(state_dict["writer"])
            self._transform.load_state_dict(state_dict["transform"])

    def dumps(self, path: str | Path) -> None:
        """Saves the buffer into the directory ``path``, crash-safely: the previous
        checkpoint there stays loadable until the new one is complete.

        A checkpoint holds no code (see ``_checkpoint_files``): ``buffer.json`` (the
        classes of the storage, sampler and writer, the capacity, and the size and CRC-32
        of ``buffer.pt``), ``buffer.pt`` (the sampler's, writer's and transforms' state,
        read with ``torch.load(weights_only=True)``) and ``storage/`` (``storage.json``
        and raw data files, each with its size and CRC-32).

        Raises:
            TypeError: a state holds something a checkpoint cannot hold without code (an
                object of a ``ListStorage`` that is not data, say); nothing is written.

        Examples:
            >>> import tempfile, torch
            >>> from cadence.data.replay_buffers import LazyTensorStorage
            >>> buffer = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
            >>> _ = buffer.extend(torch.arange(4.0))
            >>> folder = tempfile.mkdtemp()
            >>> buffer.dumps(folder)
            >>> restored = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
            >>> restored.loads(folder)
            >>> restored[torch.arange(4)].tolist()
            [0.0, 1.0, 2.0, 3.0]
        """
        with self._lock:
            state = encode_state(
                {
                    "sampler": self._sampler.state_dict(),
                    "writer": self._writer.state_dict(),
                    "transform": self._transform.state_dict(),
                },
                f"{type(self).__name__} state",
            )
            write_storage = self._storage._dump_writer()
            header = {
                "format": BUFFER_FORMAT,
                "version": CHECKPOINT_VERSION,
                "buffer": type(self).__name__,
                "storage": type(self._storage).__name__,
                "sampler": type(self._sampler).__name__,
                "writer": type(self._writer).__name__,
                "capacity": self._storage.max_size,
            }

            def write(directory: Path) -> None:
                write_storage(directory / "storage")
                entry = save_state(state, directory / "buffer.pt")
                write_meta(directory / "buffer.json", {**header, "state": entry})

            write_checkpoint(path, write)

    def loads(self, path: str | Path, *, verify: bool = True) -> None:
        """Restores the last complete checkpoint that ``dumps`` wrote into ``path``.

        Everything is read and checked before anything changes: if ``loads`` raises,
        the buffer is as it was (its data, priorities, cursor and generator).

        A checkpoint loads into a buffer built like the one that wrote it: the same
        sampler and writer classes (a prioritized checkpoint into a uniform buffer would
        lose its priorities; the reverse would have none), the same storage capacity (a
        larger checkpoint would lose items, and a smaller one's cursor and priorities
        are laid out for its own capacity), the same kind of storage (``ListStorage``,
        or one of the tensor storages, which share one format) with the same entries.

        Args:
            path: the directory ``dumps`` wrote.
            verify: compare the files' CRC-32 checksums (reading the data once more);
                sizes, shapes and kinds are checked either way.

        Raises:
            FileNotFoundError: ``path`` holds no complete checkpoint.
            CheckpointError: a file is missing, truncated, damaged or holds anything but
                data (nothing in it runs), or the checkpoint does not fit this buffer;
                the message names the file.

        Examples:
            >>> import tempfile, torch
            >>> from cadence.data.replay_buffers import LazyTensorStorage
            >>> folder = tempfile.mkdtemp()
            >>> PrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyTensorStorage(10)).dumps(folder)
            >>> ReplayBuffer(storage=LazyTensorStorage(10)).loads(folder)  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            cadence.data.replay_buffers.checkpoint.CheckpointError: ...: ... its priorities would be lost; ...
        """
        directory = latest_checkpoint(path)
        file = directory / "buffer.json"
        older = (directory / "buffer.pt").exists() and not (directory / "storage" / "storage.json").exists()
        if older and not file.exists():
            raise CheckpointError(
                f"{file}: missing; {directory} was written by an older Cadence, whose checkpoints held pickles, "
                f"which are not loaded (they can run code)."
            )
        with self._lock:  # a write between the checks and the loading would void the checks
            meta = read_meta(file, BUFFER_FORMAT, verify)
            self._check_components_fit(meta, file)
            storage_state = self._storage._read_dump(directory / "storage", verify)
            state = load_state(directory / "buffer.pt", field(meta, "state", dict, file), verify)
            if not isinstance(state, dict) or set(state) != {"sampler", "writer", "transform"}:
                raise CheckpointError(
                    f"{directory / 'buffer.pt'}: expected a dict of 'sampler', 'writer' and 'transform' states, got "
                    f"{sorted(map(str, state)) if isinstance(state, dict) else type(state).__name__}."
                )
            self._drop_prefetched()
            parts = (("sampler", self._sampler), ("writer", self._writer), ("transform", self._transform))
            previous = {name: copy.deepcopy(part.state_dict()) for name, part in parts}
            for name, part in parts:
                try:
                    part.load_state_dict(state[name])
                except Exception as error:  # the state does not fit: put every part back as it was
                    for restored, other in parts:
                        other.load_state_dict(previous[restored])
                    raise CheckpointError(
                        f"{directory / 'buffer.pt'}: the {name} state does not fit this buffer's "
                        f"{type(part).__name__} ({type(error).__name__}: {error})."
                    ) from error
            try:
                self._storage._apply_dump(storage_state)  # checked whole by _read_dump: only I/O can fail here
            except BaseException:
                for restored, other in parts:  # the storage may hold part of the checkpoint now
                    other.load_state_dict(previous[restored])
                raise

    def _check_components_fit(self, meta: dict[str, Any], file: Path) -> None:
        """Raises ``CheckpointError`` unless the checkpoint's sampler, writer and capacity are this buffer's."""
        field(meta, "buffer", str, file)  # what wrote it, for people reading the file: the parts are checked
        field(meta, "storage", str, file)  # (the storage by its own storage.json)
        for name, component in (("sampler", self._sampler), ("writer", self._writer)):
            written = field(meta, name, str, file)
            if written != type(component).__name__:
                note = ""
                if _prioritized_name(written) and not _prioritized(component):
                    note = "; its priorities would be lost"
                elif _prioritized(component) and not _prioritized_name(written):
                    note = "; it holds no priorities to load"
                raise CheckpointError(
                    f"{file}: the checkpoint's {name} is a {written}, this buffer's a {type(component).__name__}"
                    f"{note}; load it into a buffer built with the same {name}."
                )
        capacity = field(meta, "capacity", int, file)
        if capacity != self._storage.max_size:
            raise CheckpointError(
                f"{file}: the checkpoint holds a buffer of capacity {capacity}, this buffer's capacity is "
                f"{self._storage.max_size}; load it into a buffer of the same capacity."
            )

    def __del__(self) -> None:
        executor = self.__dict__.get("_executor")
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(storage={self._storage!r}, sampler={self._sampler!r}, writer={self._writer!r}, "
            f"batch_size={self._batch_size})"
        )


class TensorDictReplayBuffer(ReplayBuffer):
    """A buffer of tensordicts: samples hold ``"index"`` (and the sampler's extras, such
    as ``"_weight"``), spread over the sample's batch dims; ``extend`` writes
    ``"index"`` into the data it is given.

    Args:
        priority_key: the entry ``update_tensordict_priority`` reads (``"td_error"``).
        **kwargs: as ``ReplayBuffer``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data.replay_buffers import LazyTensorStorage
        >>> buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=3)
        >>> data = TensorDict({"obs": torch.arange(4.0)}, [4])
        >>> _ = buffer.extend(data)
        >>> data["index"].tolist()
        [0, 1, 2, 3]
    """

    _default_writer = TensorDictRoundRobinWriter

    def __init__(self, *, priority_key: NestedKey = "td_error", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.priority_key = priority_key

    def add(self, data: TensorDictBase) -> int | torch.Tensor:
        index = super().add(data)
        data.set("index", _spread(torch.as_tensor(index), data.batch_size))
        self._set_given_priority(data, index)
        return index

    def extend(self, data: TensorDictBase) -> torch.Tensor:
        index = super().extend(data)
        if self.dim_extend == 0 and data.batch_size[: index.ndim] == index.shape:
            data.set("index", _spread(index, data.batch_size))
        self._set_given_priority(data, index)
        return index

    def _set_given_priority(self, data: TensorDictBase, index: Any) -> None:
        """Data extended with priorities already computed (``priority_key``) keep them."""
        prioritized = isinstance(self._sampler, (PrioritizedSampler, PrioritizedSliceSampler))
        if prioritized and self.priority_key in data.keys(True, True):
            self._update_from(data.get("index"), data.get(self.priority_key))

    def _decorate(self, data: Any, info: dict[str, Any]) -> Any:
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"{type(self).__name__} holds tensordicts; its storage returned a {type(data).__name__}.")
        for key, value in info.items():
            if isinstance(value, torch.Tensor) and value.ndim >= 1:
                data.set(key, _spread(value, data.batch_size))
        return data

    def update_tensordict_priority(self, data: TensorDictBase) -> None:
        """Sends ``data[priority_key]`` back as the priorities of the items ``data["index"]``
        names; an item seen several times (the steps of a sampled trajectory) takes the
        largest of its priorities."""
        index = data.get("index", None)
        if index is None:
            raise KeyError(
                f"update_tensordict_priority needs the 'index' entry of a sample; the data holds "
                f"{sorted(map(str, data.keys(True, True)))}."
            )
        priority = data.get(self.priority_key, None)
        if priority is None:
            raise KeyError(
                f"update_tensordict_priority reads priorities at {self.priority_key!r}, which the data does not hold; "
                f"it holds {sorted(map(str, data.keys(True, True)))}."
            )
        self._update_from(index, priority)

    def _update_from(self, index: torch.Tensor, priority: torch.Tensor) -> None:
        index = index.reshape(-1)
        priority = priority.detach().to(torch.float64)
        if priority.numel() != index.numel():
            if priority.shape[: index.ndim] == index.shape or priority.numel() % index.numel():
                raise ValueError(
                    f"{self.priority_key!r} has {priority.numel()} values for {index.numel()} indices "
                    f"(shapes {tuple(priority.shape)} and {tuple(index.shape)})."
                )
            priority = priority.reshape(index.numel(), -1).amax(-1)
        priority = priority.reshape(-1)
        unique, inverse = torch.unique(index, return_inverse=True)
        best = torch.full(unique.shape, -torch.inf, dtype=priority.dtype).scatter_reduce(
            0, inverse, priority, reduce="amax"
        )
        self.update_priority(unique, best)


def _spread(value: torch.Tensor, batch_size: torch.Size) -> torch.Tensor:
    """``value`` (leading dims of ``batch_size``) broadcast over the remaining batch dims."""
    extra = len(batch_size) - value.ndim
    if extra <= 0:
        return value
    return value.reshape(*value.shape, *[1] * extra).expand(*batch_size)


class PrioritizedReplayBuffer(ReplayBuffer):
    """A ``ReplayBuffer`` with a ``PrioritizedSampler``.

    Args:
        alpha: how much priorities shape sampling (0: uniform).
        beta: how much importance weights correct for it (1: fully).
        eps: added to priorities so that none is zero.
        dtype: the priorities' dtype.
        storage: as ``ReplayBuffer`` (a ``ListStorage(1000)`` if ``None``).
        **kwargs: as ``ReplayBuffer`` (but ``sampler``).

    Examples:
        >>> import torch
        >>> buffer = PrioritizedReplayBuffer(alpha=0.7, beta=0.5, batch_size=4)
        >>> _ = buffer.extend(torch.arange(8.0))
        >>> buffer.update_priority(torch.arange(8), torch.tensor([0.0] * 7 + [100.0]))
        >>> data, info = buffer.sample(return_info=True)
        >>> sorted(info)
        ['_weight', 'index']
    """

    def __init__(
        self,
        *,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        storage: Storage | Callable[[], Storage] | None = None,
        **kwargs: Any,
    ) -> None:
        if "sampler" in kwargs:
            raise TypeError(f"{type(self).__name__} builds its own PrioritizedSampler; pass alpha/beta/eps instead.")
        storage = _built(storage, Storage, lambda: ListStorage(1000))
        sampler = PrioritizedSampler(storage.max_size, alpha, beta, eps=eps, dtype=dtype)
        super().__init__(storage=storage, sampler=sampler, **kwargs)


class TensorDictPrioritizedReplayBuffer(TensorDictReplayBuffer):
    """A ``TensorDictReplayBuffer`` with a ``PrioritizedSampler``: samples hold
    ``"_weight"`` (importance weights); ``update_tensordict_priority`` and extends with a
    ``priority_key`` entry set priorities.

    Args:
        alpha: how much priorities shape sampling (0: uniform).
        beta: how much importance weights correct for it (1: fully).
        priority_key: where priorities are read (``"td_error"``).
        eps: added to priorities so that none is zero.
        dtype: the priorities' dtype.
        storage: as ``ReplayBuffer`` (a ``ListStorage(1000)`` if ``None``).
        **kwargs: as ``ReplayBuffer`` (but ``sampler``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data.replay_buffers import LazyTensorStorage
        >>> buffer = TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyTensorStorage(10), batch_size=2)
        >>> _ = buffer.extend(TensorDict({"obs": torch.zeros(5, 3)}, [5]))
        >>> sample = buffer.sample()
        >>> sample["td_error"] = torch.ones(2)
        >>> buffer.update_tensordict_priority(sample)
        >>> sorted(sample.keys())
        ['_weight', 'index', 'obs', 'td_error']
    """

    def __init__(
        self,
        *,
        alpha: float,
        beta: float,
        priority_key: NestedKey = "td_error",
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        storage: Storage | Callable[[], Storage] | None = None,
        **kwargs: Any,
    ) -> None:
        if "sampler" in kwargs:
            raise TypeError(f"{type(self).__name__} builds its own PrioritizedSampler; pass alpha/beta/eps instead.")
        storage = _built(storage, Storage, lambda: ListStorage(1000))
        sampler = PrioritizedSampler(storage.max_size, alpha, beta, eps=eps, dtype=dtype)
        super().__init__(storage=storage, sampler=sampler, priority_key=priority_key, **kwargs)


def _prioritized(sampler: Sampler) -> bool:
    return isinstance(sampler, (PrioritizedSampler, PrioritizedSliceSampler))


def _prioritized_name(name: str) -> bool:
    return name in (PrioritizedSampler.__name__, PrioritizedSliceSampler.__name__)


def _callable_transform(function: Callable[[Any], Any]) -> Any:
    """A plain callable as a buffer transform."""
    from cadence.envs.transforms.base import Transform

    class CallableTransform(Transform):
        def forward(self, data: Any) -> Any:
            return function(data)

        def __repr__(self) -> str:
            return f"CallableTransform({function!r})"

    return CallableTransform()
