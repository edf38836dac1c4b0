"""Column helpers behind ``SampleBatch``: nested leaves, row counts, sequence ranges.

A column is a leaf (a numpy array, a torch tensor or a list with one row per step) or a
structure of columns: a dict (e.g. a ``Dict`` observation) or a tuple (a ``Tuple`` space's
value). As in RLlib, a list is data (it becomes an array) and a tuple is structure. These
helpers are private to the rllib interop package.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import torch

INFOS = "infos"


_STRUCTURE_BY_TYPE: dict[type, bool] = {}


def is_structure(value: Any) -> bool:
    """Whether ``value`` is a container of columns (a dict or a tuple), not a leaf."""
    kind = type(value)
    known = _STRUCTURE_BY_TYPE.get(kind)
    if known is None:  # asked once per type: the per-step check stays a dict lookup
        known = _STRUCTURE_BY_TYPE[kind] = issubclass(kind, (Mapping, tuple))
    return known


def map_column(fn: Callable[[Any], Any], value: Any) -> Any:
    """Applies ``fn`` to every leaf of a column (dicts stay dicts, tuples tuples)."""
    if isinstance(value, Mapping):
        return {key: map_column(fn, sub) for key, sub in value.items()}
    if isinstance(value, tuple):
        return tuple(map_column(fn, sub) for sub in value)
    return fn(value)


def map_columns(fn: Callable[..., Any], first: Any, *others: Any) -> Any:
    """``fn(leaf, *other_leaves)`` over columns of one structure (``first``'s); ``None`` others stay None."""
    if isinstance(first, Mapping):
        return {key: map_columns(fn, sub, *[_part(o, key) for o in others]) for key, sub in first.items()}
    if isinstance(first, tuple):
        return tuple(map_columns(fn, sub, *[_part(o, i) for o in others]) for i, sub in enumerate(first))
    return fn(first, *others)


def to_numpy(value: Any) -> Any:
    """Leaves as numpy arrays (tensors detached and moved to the CPU), structures kept.

    Examples:
        >>> import torch
        >>> to_numpy({"a": torch.ones(2), "b": (3, [4, 5])})
        {'a': array([1., 1.], dtype=float32), 'b': (array(3), array([4, 5]))}
    """
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if is_structure(value):
        return map_column(to_numpy, value)
    return value if isinstance(value, np.ndarray) else np.asarray(value)


def _part(value: Any, key: Any) -> Any:
    return None if value is None else value[key]


def stack_steps(steps: list[Any], dtype: Any = None) -> Any:
    """One value per step (each a leaf or a structure) as one column, time first.

    Examples:
        >>> import numpy as np
        >>> column = stack_steps([{"a": np.zeros(2), "b": (1, 2)}, {"a": np.ones(2), "b": (3, 4)}])
        >>> column["a"].shape, column["b"][1].tolist()
        ((2, 2), [2, 4])
    """
    if steps and is_structure(steps[0]):
        return map_columns(lambda *leaf_steps: np.asarray(leaf_steps, dtype=dtype), steps[0], *steps[1:])
    return np.asarray(steps, dtype=dtype)


def leaves(path: str, value: Any) -> Iterator[tuple[str, Any]]:
    """(path, leaf) pairs of a column, paths written ``"obs/pos"`` (tuple parts ``"obs/0"``)."""
    if isinstance(value, Mapping):
        for key, sub in value.items():
            yield from leaves(f"{path}/{key}", sub)
    elif isinstance(value, tuple):
        for index, sub in enumerate(value):
            yield from leaves(f"{path}/{index}", sub)
    else:
        yield path, value


def rows_of(key: str, value: Any) -> int | None:
    """The number of rows of a column (None for an empty dict); its leaves must agree."""
    rows, first = None, key
    for path, leaf in leaves(key, value):
        try:
            n = len(leaf)
        except TypeError:
            raise TypeError(
                f"column {path!r}: expected an array with one row per step, got {type(leaf).__name__} {leaf!r}"
            ) from None
        if rows is None:
            rows, first = n, path
        elif n != rows:
            raise ValueError(
                f"column {path!r} has {n} rows but {first!r} has {rows}; a nested column's leaves need the same rows"
            )
    return rows


def as_column(key: str, value: Any) -> Any:
    """A column in stored form: lists as numpy arrays (``infos`` stays a list), structures copied."""
    if isinstance(value, Mapping):
        return {sub_key: as_column(f"{key}/{sub_key}", sub) for sub_key, sub in value.items()}
    if isinstance(value, tuple):
        return tuple(as_column(f"{key}/{index}", sub) for index, sub in enumerate(value))
    if isinstance(value, list) and key != INFOS:
        try:
            return np.asarray(value)
        except ValueError as err:
            raise ValueError(f"column {key!r}: a list must form one numpy array, one row per step ({err})") from None
    return value


def take(leaf: Any, index: np.ndarray) -> Any:
    """Rows ``index`` of one leaf (a list, a numpy array or a tensor)."""
    if isinstance(leaf, list):
        return [leaf[i] for i in index]
    if isinstance(leaf, torch.Tensor):
        return leaf[torch.as_tensor(index)]
    return leaf[index]


def deep_copy_leaf(leaf: Any) -> Any:
    """A copy of one leaf that shares nothing with it."""
    if isinstance(leaf, np.ndarray):
        return leaf.copy()
    if isinstance(leaf, torch.Tensor):
        return leaf.clone()
    return copy.deepcopy(leaf)


def concat_leaves(path: str, parts: list[Any]) -> Any:
    """One column's values from several batches, end to end."""
    if isinstance(parts[0], Mapping):
        keys = list(parts[0])
        for part in parts[1:]:
            if not isinstance(part, Mapping) or list(part) != keys:
                got = list(part) if isinstance(part, Mapping) else type(part).__name__
                raise ValueError(f"concat: column {path!r} has keys {keys} in one batch and {got} in another")
        return {key: concat_leaves(f"{path}/{key}", [part[key] for part in parts]) for key in keys}
    if isinstance(parts[0], tuple):
        size = len(parts[0])
        for part in parts[1:]:
            if not isinstance(part, tuple) or len(part) != size:
                got = f"{len(part)} parts" if isinstance(part, tuple) else type(part).__name__
                raise ValueError(f"concat: column {path!r} is a tuple of {size} parts in one batch and {got} in another")
        return tuple(concat_leaves(f"{path}/{index}", [part[index] for part in parts]) for index in range(size))
    if all(isinstance(part, list) for part in parts):
        return [item for part in parts for item in part]
    if all(isinstance(part, torch.Tensor) for part in parts):
        return torch.cat(parts)
    try:
        return np.concatenate([np.asarray(part) for part in parts])
    except ValueError as err:
        raise ValueError(f"concat: column {path!r} does not concatenate ({err})") from None


def sequence_bounds(seq_lens: Any) -> np.ndarray:
    """Row offsets of the sequences: ``[0, len0, len0 + len1, ...]``."""
    return np.concatenate([[0], np.cumsum(np.asarray(seq_lens))]).astype(np.int64)


def whole_sequences(seq_lens: Any, start: int, stop: int, count: int) -> tuple[int, int]:
    """The sequences ``first..last`` (exclusive) that ``batch[start:stop]`` keeps.

    RLlib's rule: both ends round down to the start of the sequence they fall in (``stop`` at
    the end of the batch keeps the last sequence).
    """
    bounds = sequence_bounds(seq_lens)
    first = int(np.searchsorted(bounds, start, side="right")) - 1
    last = len(bounds) - 1 if stop >= count else int(np.searchsorted(bounds, stop, side="right")) - 1
    return first, last


def cut_sequences(
    seq_lens: Any, start: int, end: int, state_start: int | None, state_end: int | None
) -> tuple[int, int, np.ndarray]:
    """The sequences ``first..last`` (exclusive) that rows ``start..end`` touch, and their new lengths.

    Without ``state_start`` the sequences overlapping the rows are kept, the first and last
    shortened to the rows; with it, ``seq_lens[state_start:state_end]`` are kept and the last
    shortened so the lengths add up to the rows.
    """
    bounds = sequence_bounds(seq_lens)
    if state_start is None:
        first = int(np.searchsorted(bounds[1:], start, side="right"))
        last = max(first, int(np.searchsorted(bounds[:-1], end, side="left")))
        lengths = np.minimum(bounds[first + 1 : last + 1], end) - np.maximum(bounds[first:last], start)
        return first, last, lengths.astype(np.int32)
    if state_end is None:
        raise ValueError("slice(): state_start needs state_end")
    lengths = np.asarray(seq_lens)[state_start:state_end].astype(np.int32)
    excess = int(lengths.sum()) - (end - start)
    if excess < 0 or (len(lengths) > 0 and lengths[-1] < excess) or (len(lengths) == 0 and excess):
        raise ValueError(
            f"slice(): seq_lens[{state_start}:{state_end}] = {lengths.tolist()} cannot cover {end - start} rows"
        )
    if len(lengths) > 0:
        lengths[-1] -= excess
    return state_start, state_end, lengths
