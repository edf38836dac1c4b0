"""(Internal.) Shared memory that no file names: tensordicts laid out in one block.

``torch``'s ``share_memory_()`` creates a named segment under ``/dev/shm`` and unlinks it
a moment later; a process killed in that moment leaves the segment behind. The buffers
here never have a name: :func:`anonymous_like` maps anonymous shared memory, which the
processes forked afterwards inherit (the ``"fork"`` start method). A tensordict's leaves
are laid out one after the other in the block (:func:`plan`) and viewed from it
(:func:`carve`); the collectors use the same layout for the memory files they hand over
between running processes (``cadence/collectors/_shared.py``).

Examples:
    >>> import os
    >>> import torch
    >>> from tensordict import TensorDict
    >>> shared = anonymous_like(TensorDict({"a": torch.zeros(2, 3), "b": {"c": torch.ones(2)}}, [2]))
    >>> pid = os.fork()
    >>> if pid == 0:  # the child writes, the parent sees it
    ...     _ = shared["a"].fill_(7.0)
    ...     os._exit(0)
    >>> _ = os.waitpid(pid, 0)
    >>> shared["a"].sum().item(), shared["b", "c"].tolist()
    (42.0, [1.0, 1.0])
"""

from __future__ import annotations

import mmap
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

__all__ = ["Leaf", "anonymous_like", "carve", "plan"]

# Each leaf starts on a cache line, which also satisfies every dtype's alignment.
_ALIGN = 64

Leaf = tuple[Any, int, tuple[int, ...], torch.dtype]  # (key, byte offset, shape, dtype)


def plan(data: TensorDictBase) -> tuple[list[Leaf], int]:
    """Where each leaf of ``data`` goes in a block, and the block's size in bytes.

    Args:
        data: a tensordict of tensors.

    Returns:
        ``[(key, offset, shape, dtype), ...]`` in ``data``'s leaf order, and the size.

    Raises:
        TypeError: if a leaf is not a tensor (non-tensor data cannot be laid out).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> plan(TensorDict({"a": torch.zeros(3), "b": torch.zeros(2, dtype=torch.int8)}))
        ([('a', 0, (3,), torch.float32), ('b', 64, (2,), torch.int8)], 66)
    """
    leaves: list[Leaf] = []
    size = 0
    for key, value in data.items(include_nested=True, leaves_only=True):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"shared memory holds tensors only; the entry {key!r} is a {type(value).__name__}")
        size = -(-size // _ALIGN) * _ALIGN
        leaves.append((key, size, tuple(value.shape), value.dtype))
        size += value.numel() * value.element_size()
    return leaves, size


def carve(
    block: torch.Tensor, leaves: list[Leaf], batch_size: Any, names: list[str | None] | None = None
) -> TensorDictBase:
    """The tensordict whose leaves view ``block`` (bytes) as :func:`plan` laid them out.

    Args:
        block: a one-dimensional ``uint8`` tensor at least as long as the plan's size.
        leaves: the plan's leaves.
        batch_size: the tensordict's batch size.
        names: its dim names, if any.

    Examples:
        >>> import torch
        >>> block = torch.zeros(128, dtype=torch.uint8)
        >>> carve(block, [("x", 64, (2,), torch.int16)], [2])["x"].tolist()
        [0, 0]
    """
    out = TensorDict({}, batch_size=batch_size)
    for key, offset, shape, dtype in leaves:
        nbytes = torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()
        out.set(key, block[offset : offset + nbytes].view(dtype).view(shape))
    if names is not None and any(name is not None for name in names):
        out.names = names
    return out


def anonymous_like(data: TensorDictBase) -> TensorDictBase:
    """A copy of ``data`` in anonymous shared memory, which forked processes share.

    Nothing names the memory, so nothing is left behind when the processes end, however
    they end. Processes started with ``"spawn"`` do not see it (they would get a copy).

    Args:
        data: a tensordict of CPU tensors (its nesting, batch size and dim names are kept).

    Returns:
        The copy; every leaf is a view of one block.

    Raises:
        TypeError: if a leaf is not a tensor.
        ValueError: if a leaf is not on the CPU.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> anonymous_like(TensorDict({"a": torch.arange(3)}, [3]))["a"].tolist()
        [0, 1, 2]
    """
    for key, value in data.items(include_nested=True, leaves_only=True):
        if isinstance(value, torch.Tensor) and value.device.type != "cpu":
            raise ValueError(f"shared memory holds CPU tensors; the entry {key!r} is on {value.device}")
    leaves, size = plan(data)
    # An anonymous MAP_SHARED mapping (mmap's default flags with fd -1); the tensor keeps it alive.
    block = torch.frombuffer(mmap.mmap(-1, max(size, 1)), dtype=torch.uint8)
    out = carve(block, leaves, data.batch_size, _names(data))
    for key, _, _, _ in leaves:
        out.get(key).copy_(data.get(key))
    return out


def _names(data: TensorDictBase) -> list[str | None] | None:
    try:
        return list(data.names)
    except (AttributeError, RuntimeError):  # a lazy stack, say, has no names
        return None
