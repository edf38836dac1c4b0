"""(Internal to the multi-process collectors.) Batches handed over through memory files.

A worker lays its first batch out in a :class:`SharedBuffer` and answers with the
buffer's :class:`BufferLayout`; the parent maps the same memory (:func:`map_layout`).
From then on the worker copies each batch into the buffer and answers with ``None``;
a batch whose entries differ gets a new buffer.

The buffer is a memory file (``memfd``, Linux) that no directory names: the worker holds
it open and the parent opens it through ``/proc/<worker pid>/fd/<fd>``. Nothing ever
appears in ``/dev/shm``, so processes killed at any moment leave nothing behind; the
memory goes with the last process that maps it. Where ``memfd`` is missing, the buffer
is a file in a fresh temporary directory (under ``/dev/shm`` where it exists), removed
as soon as the parent mapped it.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> batch = TensorDict({"a": torch.arange(4.0), "b": {"c": torch.ones(4, 2)}}, batch_size=[4])
    >>> buffer = SharedBuffer(batch)  # in the worker
    >>> parent_view = map_layout(buffer.layout)  # in the parent
    >>> buffer.view.update_(batch * 2)["a"].tolist() == parent_view["a"].tolist()
    True
    >>> same_layout(buffer.view, batch)
    True
    >>> buffer.close()
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import shutil
import tempfile
from typing import Any

import torch
from tensordict import TensorDictBase

from cadence.envs._shared_memory import Leaf, carve, plan

__all__ = ["BufferLayout", "SharedBuffer", "map_layout", "same_layout"]


def _signature(data: TensorDictBase) -> set[tuple[Any, tuple[int, ...], torch.dtype]]:
    return {(key, tuple(value.shape), value.dtype) for key, value in data.items(True, True)}


def same_layout(buffer: TensorDictBase, batch: TensorDictBase) -> bool:
    """Whether ``batch`` has the entries, shapes and dtypes of ``buffer``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> same_layout(TensorDict({"a": torch.zeros(2)}, [2]), TensorDict({"a": torch.ones(2)}, [2]))
        True
    """
    return buffer.batch_size == batch.batch_size and _signature(buffer) == _signature(batch)


@dataclasses.dataclass(frozen=True)
class BufferLayout:
    """What another process needs to map a :class:`SharedBuffer` (it pickles).

    Attributes:
        path: ``/proc/<pid>/fd/<fd>`` of the memory file, or the temporary file.
        size: the buffer's size in bytes.
        leaves: where each entry lies (``(key, offset, shape, dtype)``).
        batch_size: the batch size.
        names: the dim names.
        named_file: whether ``path`` is a file in a temporary directory, which
            :func:`map_layout` removes once mapped.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> buffer = SharedBuffer(TensorDict({"a": torch.zeros(3)}, [3]))
        >>> buffer.layout.size, buffer.layout.batch_size
        (12, (3,))
        >>> buffer.close()
    """

    path: str
    size: int
    leaves: list[Leaf]
    batch_size: tuple[int, ...]
    names: list[str | None] | None
    named_file: bool


def _memory_file() -> int | None:
    create = getattr(os, "memfd_create", None)
    if create is None:
        return None
    try:
        return create("cadence-batch", os.MFD_CLOEXEC)
    except OSError:  # a kernel or sandbox without memfd
        return None


class SharedBuffer:
    """A buffer laid out like ``batch`` (and holding its values), for another process to map.

    Args:
        batch: a tensordict of CPU tensors.

    Raises:
        TypeError: if an entry is not a tensor (such batches go through the pipe).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> buffer = SharedBuffer(TensorDict({"a": torch.arange(3)}, [3]))
        >>> buffer.view["a"].tolist(), buffer.layout.named_file
        ([0, 1, 2], False)
        >>> buffer.close()
    """

    def __init__(self, batch: TensorDictBase) -> None:
        leaves, size = plan(batch)
        self._directory: str | None = None
        fd = _memory_file()
        if fd is None:
            base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
            self._directory = tempfile.mkdtemp(prefix="cadence-collector-", dir=base)
            path = os.path.join(self._directory, "batch")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        else:
            path = f"/proc/{os.getpid()}/fd/{fd}"
        self._fd: int | None = fd
        os.ftruncate(fd, max(size, 1))
        block = torch.frombuffer(mmap.mmap(fd, max(size, 1)), dtype=torch.uint8)
        names = list(batch.names) if any(name is not None for name in batch.names) else None
        self.view = carve(block, leaves, batch.batch_size, names)
        for key, _, _, _ in leaves:
            self.view.get(key).copy_(batch.get(key))
        self.layout = BufferLayout(path, size, leaves, tuple(batch.batch_size), names, self._directory is not None)

    def close(self) -> None:
        """Closes the file (mappings stay valid) and removes it if it has a name.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> buffer = SharedBuffer(TensorDict({"a": torch.zeros(1)}, [1]))
            >>> buffer.close()
            >>> buffer.close()
        """
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None


def map_layout(layout: BufferLayout) -> TensorDictBase:
    """Maps the buffer that another process laid out (see :class:`SharedBuffer`).

    Args:
        layout: the buffer's layout.

    Returns:
        This process's view of the buffer.

    Raises:
        OSError: if the buffer cannot be opened (its process is gone, or ``/proc`` is
            not readable here).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> buffer = SharedBuffer(TensorDict({"a": torch.ones(2)}, [2]))
        >>> map_layout(buffer.layout)["a"].tolist()
        [1.0, 1.0]
        >>> buffer.close()
    """
    fd = os.open(layout.path, os.O_RDWR)
    try:
        mapping = mmap.mmap(fd, max(layout.size, 1))
    finally:
        os.close(fd)
    if layout.named_file:  # mapped: the name can go
        shutil.rmtree(os.path.dirname(layout.path), ignore_errors=True)
    return carve(torch.frombuffer(mapping, dtype=torch.uint8), layout.leaves, layout.batch_size, layout.names)
