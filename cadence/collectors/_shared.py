"""(Internal to the multi-process collectors.) Batches handed over through shared memory.

A worker's first batch travels through its pipe (pickled); the parent then lays out a
buffer of the same entries in memory-mapped files (under ``/dev/shm`` where it exists),
the worker maps the same files, and the files are unlinked at once (the mappings live
on, and nothing is left on disk if a process dies). From then on the worker copies each
batch into the buffer and answers with ``None``; the parent reads the buffer. A batch
whose entries differ from the buffer's goes through the pipe again, and gets a new buffer.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> batch = TensorDict({"a": torch.arange(4.0), "b": {"c": torch.ones(4, 2)}}, batch_size=[4])
    >>> layout, parent_view = share_like(batch)
    >>> worker_view = map_layout(layout)
    >>> worker_view.update_(batch * 2)["a"].tolist() == parent_view["a"].tolist()
    True
    >>> same_layout(worker_view, batch)
    True
    >>> release(layout)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

__all__ = ["map_layout", "release", "same_layout", "share_like"]

Layout = dict[str, Any]


def _signature(data: TensorDictBase) -> set[tuple[Any, tuple[int, ...], torch.dtype]]:
    return {(key, tuple(value.shape), value.dtype) for key, value in data.items(True, True)}


def same_layout(buffer: TensorDictBase, batch: TensorDictBase) -> bool:
    """Whether ``batch`` has the entries, shapes and dtypes of ``buffer``."""
    return buffer.batch_size == batch.batch_size and _signature(buffer) == _signature(batch)


def _shared_dir() -> str:
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return tempfile.mkdtemp(prefix="cadence-collector-", dir=base)


def share_like(batch: TensorDictBase) -> tuple[Layout, TensorDictBase]:
    """Lays out a shared buffer with ``batch``'s entries (holding its values).

    Returns:
        A picklable layout (file names, shapes, dtypes) for :func:`map_layout` in the
        other process, and this process's view of the buffer. The files must be removed
        with :func:`release` once the other side mapped them.
    """
    directory = _shared_dir()
    leaves: list[tuple[Any, str | None, tuple[int, ...], torch.dtype]] = []
    tensors: dict[Any, torch.Tensor] = {}
    for n, (key, value) in enumerate(batch.items(True, True)):
        if value.numel() == 0:
            leaves.append((key, None, tuple(value.shape), value.dtype))
            tensors[key] = torch.empty_like(value)
            continue
        path = os.path.join(directory, f"{n}.bin")
        with open(path, "wb") as handle:
            handle.truncate(value.numel() * value.element_size())
        tensor = torch.from_file(path, shared=True, size=value.numel(), dtype=value.dtype).view(value.shape)
        tensor.copy_(value)
        leaves.append((key, path, tuple(value.shape), value.dtype))
        tensors[key] = tensor
    layout = {"dir": directory, "leaves": leaves, "batch_size": tuple(batch.batch_size), "names": batch.names}
    return layout, _assemble(tensors, layout)


def _assemble(tensors: dict[Any, torch.Tensor], layout: Layout) -> TensorDictBase:
    out = TensorDict({}, batch_size=layout["batch_size"])
    for key, tensor in tensors.items():
        out.set(key, tensor)
    if any(name is not None for name in layout["names"]):
        out.names = layout["names"]
    return out


def map_layout(layout: Layout) -> TensorDictBase:
    """Maps the buffer that :func:`share_like` laid out (in another process)."""
    tensors: dict[Any, torch.Tensor] = {}
    for key, path, shape, dtype in layout["leaves"]:
        if path is None:
            tensors[key] = torch.empty(shape, dtype=dtype)
            continue
        numel = 1
        for size in shape:
            numel *= size
        tensors[key] = torch.from_file(path, shared=True, size=numel, dtype=dtype).view(shape)
    return _assemble(tensors, layout)


def release(layout: Layout) -> None:
    """Removes the buffer's files (the mappings stay valid)."""
    shutil.rmtree(layout["dir"], ignore_errors=True)
