"""Columns of numpy arrays <-> a ``tensordict.TensorDict``, sharing memory both ways.

RLlib keeps its batches as dicts of numpy arrays; Cadence keeps them as TensorDicts. These two
functions cross between the two without copying the data, so a policy written against RLlib's
:class:`~cadence.interop.rllib.sample_batch.SampleBatch` and a Cadence loss or replay buffer
can work on the same memory.

Rules:

* A numeric numpy column (bool, int, uint, float, complex) becomes ``torch.from_numpy(column)``:
  the same memory. The only exception is an array with a negative stride (``a[::-1]``), which
  torch cannot view: it is copied (``np.ascontiguousarray``).
* A nested dict becomes a nested TensorDict of the same batch size; a tuple (a ``Tuple``
  space's column) one keyed ``"0"``, ``"1"``, ... (it comes back as a dict with those keys).
* A non-numeric column (a list such as ``infos``, a numpy array of ``str``/``object``) becomes a
  ``NonTensorStack`` of its rows, or is left out with ``keep_non_tensor=False``. The rows
  themselves (e.g. the info dicts) are the same objects; the container is new.
* Back from a TensorDict, a CPU tensor becomes ``tensor.detach().numpy()`` (the same memory);
  a tensor on another device is copied to the CPU (it cannot be shared); non-tensor data
  becomes a list of its rows.

Examples:
    >>> import numpy as np
    >>> from cadence.interop.rllib.tensordict_bridge import columns_to_tensordict, tensordict_to_columns
    >>> obs = np.zeros((3, 2), dtype=np.float32)
    >>> td = columns_to_tensordict({"obs": obs, "infos": [{}, {}, {}]}, 3)
    >>> td["obs"][0, 0] = 7.0
    >>> float(obs[0, 0])
    7.0
    >>> back = tensordict_to_columns(td)
    >>> np.shares_memory(back["obs"], obs), back["infos"]
    (True, [{}, {}, {}])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from tensordict import NonTensorStack, TensorDict, TensorDictBase, is_non_tensor

__all__ = ["columns_to_tensordict", "tensordict_to_columns"]

# numpy kinds that torch.from_numpy can view: bool, signed, unsigned, float, complex
_NUMERIC_KINDS = frozenset("biufc")


def _to_tensor(key: str, value: np.ndarray) -> torch.Tensor:
    """Views a numeric numpy array as a tensor (copying only what torch cannot view)."""
    if any(stride < 0 for stride in value.strides):
        # torch has no negative strides: the one case where sharing is impossible
        value = np.ascontiguousarray(value)
    try:
        return torch.from_numpy(value)
    except TypeError as err:
        raise TypeError(f"column {key!r}: numpy dtype {value.dtype} has no torch equivalent ({err})") from None


def columns_to_tensordict(
    columns: Mapping[str, Any], batch_size: int, *, keep_non_tensor: bool = True
) -> TensorDict:
    """Builds a TensorDict of batch size ``[batch_size]`` that shares memory with ``columns``.

    Args:
        columns: column name -> numpy array (or torch tensor, list, or nested dict of these),
            each with ``batch_size`` rows.
        batch_size: the number of rows.
        keep_non_tensor: keep non-numeric columns as a ``NonTensorStack`` of rows (default),
            or leave them out.

    Returns:
        The TensorDict; numeric leaves are views of the numpy arrays.

    Raises:
        ValueError: a column does not have ``batch_size`` rows (names the column).
        TypeError: a column is of a type that is not an array, a list or a dict.

    Examples:
        >>> import numpy as np
        >>> td = columns_to_tensordict({"obs": {"pos": np.zeros((2, 3))}, "t": np.arange(2)}, 2)
        >>> td["obs", "pos"].shape, td.batch_size
        (torch.Size([2, 3]), torch.Size([2]))
    """
    out = TensorDict({}, batch_size=[batch_size])
    for key, value in columns.items():
        converted = _column_to_entry(str(key), value, batch_size, keep_non_tensor)
        if converted is not None:
            out.set(key, converted)
    return out


def _column_to_entry(key: str, value: Any, batch_size: int, keep_non_tensor: bool) -> Any:
    """One column as a TensorDict entry, or None where the column is left out."""
    if isinstance(value, Mapping):
        return columns_to_tensordict(
            {f"{k}": v for k, v in value.items()}, batch_size, keep_non_tensor=keep_non_tensor
        )
    if isinstance(value, tuple):  # a Tuple space's column: TensorDict keys are strings
        return columns_to_tensordict(
            {f"{i}": v for i, v in enumerate(value)}, batch_size, keep_non_tensor=keep_non_tensor
        )
    rows = len(value) if hasattr(value, "__len__") else None
    if rows != batch_size:
        raise ValueError(f"column {key!r} has {rows} rows, expected {batch_size} (the batch size)")
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray) and value.dtype.kind in _NUMERIC_KINDS:
        return _to_tensor(key, value)
    if isinstance(value, (np.ndarray, list)):
        if not keep_non_tensor:
            return None
        # tolist() turns object/str arrays into Python rows; lists are kept row for row
        rows_list = value.tolist() if isinstance(value, np.ndarray) else list(value)
        stack = NonTensorStack.from_list(rows_list)
        if stack.batch_size[:1] != torch.Size([batch_size]):
            raise ValueError(f"column {key!r}: its rows do not stack to {batch_size} non-tensor entries")
        return stack
    raise TypeError(
        f"column {key!r}: expected a numpy array, a torch tensor, a list or a dict, got {type(value).__name__}"
    )


def tensordict_to_columns(td: TensorDictBase) -> dict[str, Any]:
    """Turns a one-dimensional TensorDict into a dict of numpy columns sharing its memory.

    Args:
        td: a TensorDict with one batch dimension (its rows become the batch's rows).

    Returns:
        column name -> numpy array (CPU tensors viewed, not copied), nested dicts for nested
        TensorDicts, lists for non-tensor data.

    Raises:
        ValueError: ``td`` does not have exactly one batch dimension.
        TypeError: a tensor's dtype has no numpy equivalent (e.g. bfloat16), or an entry is of
            an unknown kind (names the key).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"rewards": torch.ones(3)}, batch_size=[3])
        >>> cols = tensordict_to_columns(td)
        >>> cols["rewards"][0] = 5.0
        >>> td["rewards"].tolist()
        [5.0, 1.0, 1.0]
    """
    if td.batch_dims != 1:
        raise ValueError(
            f"expected a TensorDict with one batch dimension (one row per step), got batch size "
            f"{list(td.batch_size)}; flatten it first, e.g. td.reshape(-1)"
        )
    return _entries_to_columns(td, prefix="")


def _entries_to_columns(td: TensorDictBase, prefix: str) -> dict[str, Any]:
    """The entries of ``td`` (recursively) as numpy columns."""
    out: dict[str, Any] = {}
    for key, value in td.items():
        name = f"{prefix}{key}"
        if is_non_tensor(value):
            out[key] = value.tolist()
        elif isinstance(value, TensorDictBase):
            out[key] = _entries_to_columns(value, prefix=f"{name}/")
        elif isinstance(value, torch.Tensor):
            out[key] = _to_numpy(name, value)
        else:
            raise TypeError(
                f"entry {name!r}: expected a tensor, a TensorDict or non-tensor data, got {type(value).__name__}"
            )
    return out


def _to_numpy(key: str, value: torch.Tensor) -> np.ndarray:
    """A CPU tensor's numpy view; other devices are copied (there is nothing to share)."""
    value = value.detach()
    if value.device.type != "cpu":
        value = value.cpu()
    try:
        return value.numpy()
    except TypeError as err:
        raise TypeError(
            f"entry {key!r}: torch dtype {value.dtype} has no numpy equivalent ({err}); convert it first"
        ) from None
