"""(Internal.) The collectors' ``compile_policy=`` and ``cudagraph_policy=`` options.

``compile_policy`` runs the policy through ``torch.compile`` (after ``warmup`` eager
calls: :func:`cadence.utils.compile_with_warmup`, which falls back to the eager policy
with a warning where ``torch.compile`` cannot run). ``cudagraph_policy`` wraps it in
tensordict's ``CudaGraphModule``, which needs a CUDA device: without one the policy runs
as it is and a warning says so. Neither ever raises because of the machine.

Examples:
    >>> import torch
    >>> from tensordict.nn import TensorDictModule
    >>> policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
    >>> with_options(policy, compile_policy=False, cudagraph_policy=False) is policy
    True
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import torch

__all__ = ["for_workers", "with_options"]


def _options(value: bool | dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    if not value:
        return None
    if value is True:
        return {}
    if isinstance(value, dict):
        return dict(value)
    raise TypeError(f"{name}: expected a bool or a dict of keyword arguments, got {type(value).__name__}: {value!r}")


def with_options(
    policy: Callable[..., Any],
    compile_policy: bool | dict[str, Any] | None,
    cudagraph_policy: bool | dict[str, Any] | None,
) -> Callable[..., Any]:
    """``policy`` compiled and/or CUDA-graphed as the options ask (see the module).

    Args:
        policy: the collector's policy.
        compile_policy: ``True`` for ``torch.compile``'s defaults, or its keyword
            arguments (``{"mode": ..., "warmup": 1}``; ``warmup`` eager calls come first).
        cudagraph_policy: ``True`` or ``CudaGraphModule``'s keyword arguments
            (``{"warmup": 10}``).

    Examples:
        >>> import warnings, torch
        >>> from tensordict.nn import TensorDictModule
        >>> policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     same = with_options(policy, compile_policy=False, cudagraph_policy={"warmup": 10})
        >>> same is policy or torch.cuda.is_available(), "cudagraph_policy" in str(caught[0].message)
        (True, True)
    """
    compile_options = _options(compile_policy, "compile_policy")
    graph_options = _options(cudagraph_policy, "cudagraph_policy")
    if graph_options is not None and not torch.cuda.is_available():
        _warn_cudagraph_skipped()
        graph_options = None
    if compile_options is not None:
        from cadence.utils import compile_with_warmup

        warmup = int(compile_options.pop("warmup", 1))
        policy = compile_with_warmup(policy, warmup=warmup, **compile_options)
    if graph_options is not None:
        from tensordict.nn import CudaGraphModule

        policy = CudaGraphModule(policy, **graph_options)
    return policy


def for_workers(
    compile_policy: bool | dict[str, Any] | None, cudagraph_policy: bool | dict[str, Any] | None
) -> tuple[bool | dict[str, Any] | None, bool | dict[str, Any] | None]:
    """The options as a multi-process collector hands them to its workers, checked in the
    main process: a bad value raises here (not in a worker), and ``cudagraph_policy`` on a
    machine without CUDA warns once here and reaches the workers as ``False``.

    Examples:
        >>> import warnings, torch
        >>> with warnings.catch_warnings(record=True):
        ...     warnings.simplefilter("always")
        ...     options = for_workers({"mode": "default"}, True)
        >>> options == ({"mode": "default"}, torch.cuda.is_available())
        True
    """
    _options(compile_policy, "compile_policy")
    if _options(cudagraph_policy, "cudagraph_policy") is not None and not torch.cuda.is_available():
        _warn_cudagraph_skipped()
        cudagraph_policy = False
    return compile_policy, cudagraph_policy


def _warn_cudagraph_skipped() -> None:
    warnings.warn(
        "cudagraph_policy skipped: CUDA graphs need a CUDA device and none is available; the policy runs as it is.",
        UserWarning,
        stacklevel=4,
    )
