"""Casting a tensor to a dtype on the step path.

``tensor.to(dtype)`` parses its arguments (device, dtype, copy...) on every call, which
costs about as much as the cast of a step's few entries itself; ``tensor.long()`` and its
kind take none. Policies' actions are cast once a step (a bool one-hot into an int64
spec, say), so the step path casts through :func:`cast`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["cast"]

#: The argument-free casts of the usual dtypes.
_CASTS: dict[torch.dtype, Callable[[torch.Tensor], torch.Tensor]] = {
    torch.bool: torch.Tensor.bool,
    torch.uint8: torch.Tensor.byte,
    torch.int8: torch.Tensor.char,
    torch.int16: torch.Tensor.short,
    torch.int32: torch.Tensor.int,
    torch.int64: torch.Tensor.long,
    torch.float16: torch.Tensor.half,
    torch.bfloat16: torch.Tensor.bfloat16,
    torch.float32: torch.Tensor.float,
    torch.float64: torch.Tensor.double,
}


def cast(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``tensor`` in ``dtype``: ``tensor`` itself if it has it, else a cast copy (``to(dtype)``'s result).

    Examples:
        >>> import torch
        >>> cast(torch.tensor([True, False]), torch.int64).tolist()
        [1, 0]
        >>> x = torch.zeros(2)
        >>> cast(x, torch.float32) is x
        True
    """
    if tensor.dtype == dtype:
        return tensor
    method = _CASTS.get(dtype)
    return method(tensor) if method is not None else tensor.to(dtype)
