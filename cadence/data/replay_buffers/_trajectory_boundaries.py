"""Where stored trajectories end, kept up to date write by write (for the slice samplers).

``TrajectoryBoundaries`` keeps the flat positions whose element ends a trajectory, as a
sorted tensor, and the write cursor. A write is only noted; the next ``table`` call
reads the written elements (and, for trajectory ids, the element before each written
run, whose successor changed) and splices their end flags into the sorted ends, at a
cost of ``O(written + trajectories)``, whatever the storage's size. ``TrajectoryTable``
is the result: each trajectory's first element and length on the storage's ring.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.data.replay_buffers.storages import LazyTensorStorage
    >>> storage = LazyTensorStorage(8)
    >>> storage.set(torch.arange(8), TensorDict({"episode": torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])}, [8]))
    >>> boundaries = TrajectoryBoundaries(end_key=None, traj_key=None, ends=None, trajectories=None)
    >>> boundaries.note_write(torch.arange(8))
    >>> table = boundaries.table(storage)
    >>> table.starts.tolist(), table.lengths.tolist()
    ([0, 3, 5], [3, 2, 3])
    >>> storage.set(torch.arange(2), TensorDict({"episode": torch.tensor([3, 3])}, [2]))
    >>> boundaries.note_write(torch.arange(2))  # the ring wraps: 0-1 are the newest, 2 is left alone
    >>> table = boundaries.table(storage)
    >>> table.starts.tolist(), table.lengths.tolist()
    ([0, 2, 3, 5], [2, 1, 2, 3])
"""

from __future__ import annotations

import math
import threading
from typing import Any

import torch

__all__ = ["TrajectoryBoundaries", "TrajectoryTable"]

NestedKey = str | tuple[str, ...]

_DEFAULT_TRAJ_KEY = "episode"
_DEFAULT_END_KEY = ("next", "done")


# ---------------------------------------------------------------------------------------
# Storage access
# ---------------------------------------------------------------------------------------


def layout(storage: Any) -> tuple[int, int]:
    """The storage's element capacity and its elements per row (1 for ``ndim=1``)."""
    shape = getattr(storage, "shape", None)
    if shape is None:
        return int(storage.max_size), 1
    return math.prod(shape), math.prod(shape[1:])


def read_entry(storage: Any, key: NestedKey) -> torch.Tensor:
    """The stored tensor for ``key`` over the written elements, in flat-index order (a view)."""
    get_entry = getattr(storage, "get_entry", None)
    if get_entry is None:
        raise TypeError(
            f"slice samplers read trajectory entries with storage.get_entry(key); "
            f"{type(storage).__name__} has no such method (use a tensor storage)."
        )
    try:
        return get_entry(key)
    except TypeError as err:  # the base storage says it keeps no entries by key
        raise TypeError(
            f"slice samplers need a storage that keeps entries by key; {type(storage).__name__} does not ({err})."
        ) from err


def per_element(values: torch.Tensor, count: int) -> torch.Tensor:
    """A per-element flag from an entry read at ``count`` elements (trailing dims ORed)."""
    return values.reshape(count, -1).any(-1)


def distinct(positions: torch.Tensor, size: int) -> torch.Tensor:
    """The distinct values of ``positions`` (all in ``[0, size)``), sorted."""
    if positions.numel() * 8 < size:
        return torch.unique(positions)
    # many positions: marking them in a mask beats sorting them
    mask = torch.zeros(size, dtype=torch.bool)
    mask[positions] = True
    return torch.nonzero(mask).flatten()


def replace_last(key: NestedKey, name: str) -> NestedKey:
    """``key`` with its last name replaced (``("next", "truncated")`` -> ``("next", "done")``)."""
    return name if isinstance(key, str) else (*key[:-1], name)


# ---------------------------------------------------------------------------------------
# Trajectory boundaries, kept up to date write by write
# ---------------------------------------------------------------------------------------


class TrajectoryTable:
    """The stored trajectories: first element, length, and ``size`` (the ring they live on).

    A trajectory may wrap around the end of a full storage: its elements are
    ``(start + arange(length)) % size``.
    """

    def __init__(self, starts: torch.Tensor, lengths: torch.Tensor, ends: torch.Tensor, size: int) -> None:
        self.starts = starts
        self.lengths = lengths
        self.ends = ends  # sorted: trajectory k ends at ends[k] and starts after ends[k - 1]
        self.size = size
        self._eligible: dict[tuple[int, bool], torch.Tensor] = {}

    def eligible(self, min_length: int, strict: bool) -> torch.Tensor:
        """The trajectories a slice of ``min_length`` may come from (all of them if not ``strict``)."""
        key = (min_length, strict)
        if key not in self._eligible:
            if strict:
                self._eligible[key] = torch.nonzero(self.lengths >= min_length).flatten()
            else:
                self._eligible[key] = torch.arange(self.lengths.numel())
        return self._eligible[key]

    def locate(self, position: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The trajectory holding each flat ``position``, and the position's offset in it."""
        # the first end at or after the position; past the last end, the wrapping trajectory (0)
        traj = torch.searchsorted(self.ends, position)
        traj = torch.where(traj == self.ends.numel(), 0, traj)
        offset = (position - self.starts[traj]) % self.size
        return traj, offset


class TrajectoryBoundaries:
    """Where stored trajectories end, updated from write notifications.

    Keeps the flat positions whose element ends a trajectory (a sorted tensor) and the
    write cursor. Writes are only noted (``note_write``); the next ``table`` call reads
    the written elements (and, for trajectory ids, their left neighbours, whose "next
    element" changed) and splices their end flags into the sorted ends.
    """

    def __init__(
        self,
        end_key: NestedKey | None,
        traj_key: NestedKey | None,
        ends: torch.Tensor | None,
        trajectories: torch.Tensor | None,
    ) -> None:
        self.end_key = end_key
        self.traj_key = traj_key
        self.given_ends = None if ends is None else torch.as_tensor(ends).reshape(-1).to(torch.bool)
        self.given_trajectories = None if trajectories is None else torch.as_tensor(trajectories).reshape(-1)
        # ("traj" | "end" | "given_ends" | "given_traj" | "rows", key); found at the first read
        self.source: tuple[str, NestedKey | None] | None = None
        if self.given_ends is not None:
            self.source = ("given_ends", None)
        elif self.given_trajectories is not None:
            self.source = ("given_traj", None)
        # a buffer may sample in a prefetch thread while another extends: a write noted
        # during a rebuild must neither be lost nor hidden behind the rebuilt table
        self._lock = threading.RLock()
        self.version = 0  # bumped whenever the trajectories may have changed; never goes back
        self.reset()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def reset(self) -> None:
        """Forgets every write (the storage was emptied)."""
        with self._lock:
            self.ends = torch.empty(0, dtype=torch.long)
            self.pending: list[torch.Tensor] = []
            self.pending_count = 0
            self.last_written: int | None = None
            self.covered = 0  # the highest flat index ever written + 1
            self.version += 1
            self._table: TrajectoryTable | None = None

    # ------------------------------------------------------------------ writes
    def note_write(self, index: torch.Tensor) -> None:
        """Notes that the elements at flat ``index`` were written (read at the next ``table``)."""
        index = torch.as_tensor(index, dtype=torch.long).reshape(-1)
        if index.numel() == 0:
            return
        with self._lock:
            self._note_write(index)

    def _note_write(self, index: torch.Tensor) -> None:
        self.pending.append(index)
        self.pending_count += index.numel()
        self.last_written = int(index[-1])
        self.covered = max(self.covered, int(index.max()) + 1)
        if self.pending_count > 4 * self.covered:
            # many writes and no sample: the positions written are at most `covered`
            merged = distinct(torch.cat(self.pending), self.covered)
            self.pending, self.pending_count = [merged], merged.numel()
        self._table = None

    # ------------------------------------------------------------------ reads
    def table(self, storage: Any) -> TrajectoryTable:
        """The trajectory table for the storage as it is now (cached until the next write)."""
        with self._lock:
            return self._current_table(storage)

    def _current_table(self, storage: Any) -> TrajectoryTable:
        size = len(storage)
        if self._table is not None and self._table.size == size:
            return self._table
        capacity, row_size = layout(storage)
        if self.source is None:
            self.source = self._resolve(storage, row_size)
        positions = torch.cat(self.pending) if self.pending else torch.empty(0, dtype=torch.long)
        if size < self.covered:
            # the storage holds fewer elements than were written to it (emptied behind our
            # back): start again from what it holds now
            self.ends = torch.empty(0, dtype=torch.long)
            positions = torch.arange(size)
            self.covered = size
            if self.last_written is None or self.last_written >= size:
                self.last_written = size - 1
        elif size > self.covered:
            # elements written without a notification (a storage filled directly)
            positions = torch.cat([positions, torch.arange(self.covered, size)])
            if self.last_written is None:
                self.last_written = size - 1
            self.covered = size
        self.pending, self.pending_count = [], 0
        positions = distinct(positions[positions < size], size)
        if positions.numel():
            self._splice(storage, positions, size, row_size)
            self.version += 1  # the trajectories may have changed (epochs drawn on them are stale)
        self._table = self._build(size, capacity)
        return self._table

    def _resolve(self, storage: Any, row_size: int) -> tuple[str, NestedKey | None]:
        """Which entry marks trajectory ends: the trajectory ids, else the end flags, else rows."""
        if self.traj_key is None and self.end_key is None:
            candidates = [("traj", _DEFAULT_TRAJ_KEY), ("end", _DEFAULT_END_KEY)]
        else:
            candidates = [("traj", self.traj_key), ("end", self.end_key)]
        tried = []
        for kind, key in candidates:
            if key is None:
                continue
            tried.append(key)
            try:
                read_entry(storage, key)
            except KeyError:
                continue
            return kind, key
        if row_size > 1:
            return "rows", None
        raise KeyError(
            f"slice samplers find trajectories from an id entry (traj_key) or an end-of-trajectory entry "
            f"(end_key); the storage holds none of {tried} and has one dim (ndim=1), so its rows cannot "
            f"serve as trajectories."
        )

    def _flags(self, storage: Any, positions: torch.Tensor, size: int, row_size: int) -> torch.Tensor:
        """Whether the element at each (sorted, unique) position ends a trajectory."""
        kind, key = self.source  # type: ignore[misc]
        count = positions.numel()
        following = (positions + 1) % size
        if kind == "end":
            flags = per_element(read_entry(storage, key).index_select(0, positions), count)
        elif kind == "traj":
            ids = read_entry(storage, key)
            flags = per_element(ids.index_select(0, positions) != ids.index_select(0, following), count)
        elif kind == "given_ends":
            flags = self._given(self.given_ends, size, "ends")[positions]
        elif kind == "given_traj":
            ids = self._given(self.given_trajectories, size, "trajectories")
            flags = ids[positions] != ids[following]
        else:
            flags = torch.zeros(count, dtype=torch.bool)
        if row_size > 1:  # a row is one trajectory at most
            flags = flags | (positions % row_size == row_size - 1)
        return flags

    @staticmethod
    def _given(values: torch.Tensor, size: int, name: str) -> torch.Tensor:
        if values.numel() < size:
            raise ValueError(
                f"slice samplers: the given {name} tensor has {values.numel()} elements, the storage holds {size}."
            )
        return values

    def _splice(self, storage: Any, written: torch.Tensor, size: int, row_size: int) -> None:
        """Replaces the end flags of the written positions (and of the affected neighbours)."""
        positions = written
        if self.source is not None and self.source[0] in ("traj", "given_traj"):
            # an id end depends on the next element too: the element before each written
            # run now has a new successor
            left = (written - 1) % size
            positions = distinct(torch.cat([written, left]), size)
        flags = self._flags(storage, positions, size, row_size)
        kept = self.ends[(self.ends < size) & ~torch.isin(self.ends, positions)]
        self.ends, _ = torch.sort(torch.cat([kept, positions[flags]]))

    def _build(self, size: int, capacity: int) -> TrajectoryTable:
        cuts = [self.ends]
        # nothing follows the newest element: the write cursor ends a trajectory, and so
        # does the last element of a storage that is not full yet
        if self.last_written is not None and self.last_written < size:
            cuts.append(torch.tensor([self.last_written]))
        if size < capacity:
            cuts.append(torch.tensor([size - 1]))
        ends = torch.unique(torch.cat(cuts))
        previous = torch.roll(ends, 1)
        lengths = (ends - previous - 1) % size + 1
        starts = (previous + 1) % size
        return TrajectoryTable(starts, lengths, ends, size)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The sorted ends, the writes not read yet, the write cursor and the entry used."""
        with self._lock:
            pending = torch.cat(self.pending) if self.pending else torch.empty(0, dtype=torch.long)
            return {
                "ends": self.ends.clone(),
                "pending": pending,
                "last_written": self.last_written,
                "covered": self.covered,
                "source": self.source,
                "version": self.version,
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what ``state_dict`` returned."""
        with self._lock:
            self.reset()
            self.ends = state["ends"].clone()
            self.pending = [state["pending"].clone()] if state["pending"].numel() else []
            self.pending_count = int(state["pending"].numel())
            self.last_written = state["last_written"]
            self.covered = int(state["covered"])
            self.source = state["source"]
            self.version = int(state["version"])
