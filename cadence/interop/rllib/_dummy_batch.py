"""The dummy batch of view pruning: zero columns from view requirements, and a SampleBatch
that records every column read through its copies and slices.

``Policy._initialize_loss_from_dummy_batch`` sends such a batch through the policy's
inference, postprocessing and loss to learn which columns each reads.

Examples:
    >>> from cadence.interop.rllib.view_requirement import ViewRequirement
    >>> import gymnasium as gym, numpy as np
    >>> column = _dummy_column("obs", ViewRequirement(space=gym.spaces.Box(-1, 1, (3,), np.float32)), 4)
    >>> column.shape, column.dtype
    ((4, 3), dtype('float32'))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from cadence.interop.rllib._batch_columns import leaves, to_numpy
from cadence.interop.rllib.sample_batch import SampleBatch
from cadence.interop.rllib.view_requirement import ViewRequirement

_SAMPLER_COLUMNS = frozenset({SampleBatch.EPS_ID, SampleBatch.UNROLL_ID, SampleBatch.AGENT_INDEX, SampleBatch.T})
_INT_COLUMNS = _SAMPLER_COLUMNS | {SampleBatch.ENV_ID}
_BOOL_COLUMNS = frozenset({SampleBatch.TERMINATEDS, SampleBatch.TRUNCATEDS, SampleBatch.DONES})


class _TrackedBatch(SampleBatch):
    """A SampleBatch whose copies and slices record reads in its own ``accessed_keys``,
    and whose whole-batch reads (``items()``, ``values()``, ``rows()``, ...) count every column."""

    def _derive(self, data: dict[str, Any]) -> SampleBatch:
        new = _TrackedBatch(data, **self._flags())
        new.accessed_keys = self.accessed_keys
        return new

    def copy(self, shallow: bool = False) -> SampleBatch:
        new = super().copy(shallow)
        new.accessed_keys = self.accessed_keys
        return new


def _reads_all(name: str) -> Any:
    """``SampleBatch.<name>``, counting every column as read first (it hands them all out)."""

    def method(self: _TrackedBatch, *args: Any, **kwargs: Any) -> Any:
        self.accessed_keys.update(key for key in dict.keys(self) if key != SampleBatch.SEQ_LENS)
        return getattr(SampleBatch, name)(self, *args, **kwargs)

    return method


for _name in ("items", "values", "rows", "to_tensordict", "concat"):
    setattr(_TrackedBatch, _name, _reads_all(_name))


def _space_of(value: Any) -> gym.Space | None:
    """A space for one row of a column (``None``: RLlib's default scalar space)."""
    if isinstance(value, Mapping):
        return gym.spaces.Dict({key: _space_of(sub) or gym.spaces.Box(-np.inf, np.inf, ()) for key, sub in value.items()})
    if isinstance(value, tuple):
        return gym.spaces.Tuple([_space_of(sub) or gym.spaces.Box(-np.inf, np.inf, ()) for sub in value])
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        return None
    low, high = (False, True) if array.dtype == np.bool_ else (-np.inf, np.inf)
    if array.dtype.kind in "iu":
        low, high = np.iinfo(array.dtype).min, np.iinfo(array.dtype).max
    return gym.spaces.Box(low, high, array.shape[1:], array.dtype)


def space_zeros(view_col: str, space: gym.Space, rows: tuple[int, ...]) -> Any:
    """Zeros (or a Discrete space's ``start``) of ``space``, with leading dims ``rows``."""
    if isinstance(space, gym.spaces.Dict):
        return {key: space_zeros(f"{view_col}/{key}", sub, rows) for key, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(space_zeros(f"{view_col}/{index}", sub, rows) for index, sub in enumerate(space.spaces))
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        return np.broadcast_to(np.asarray(space.start, space.dtype), rows + tuple(space.shape)).copy()
    if space.shape is not None:
        return np.zeros(rows + tuple(space.shape), dtype=space.dtype)
    raise TypeError(f"view {view_col!r}: cannot build dummy data for its space {space!r} (no shape)")


def _dummy_column(view_col: str, view: ViewRequirement, rows: int) -> Any:
    """A dummy column of ``rows`` rows for one view: zeros from its space."""
    if view_col == SampleBatch.INFOS:
        return [{} for _ in range(rows)]
    lead = (rows, len(view.shift_arr)) if view.multiple_shifts else (rows,)
    if view.space_given:
        return space_zeros(view_col, view.space, lead)
    data_col = view.data_col or view_col
    if data_col == SampleBatch.T:
        return np.broadcast_to(np.arange(rows).reshape((rows,) + (1,) * (len(lead) - 1)), lead).copy()
    dtype = np.int64 if data_col in _INT_COLUMNS else np.bool_ if data_col in _BOOL_COLUMNS else np.float32
    return np.zeros(lead, dtype)


def _check_rows(what: str, value: Any, rows: int) -> Any:
    value = to_numpy(value)
    for _, leaf in leaves(what, value):
        if leaf.ndim == 0 or len(leaf) != rows:
            raise ValueError(
                f"compute_actions_from_input_dict returned {what} of shape {leaf.shape}; expected "
                f"{rows} rows, one per row of the input dict"
            )
    return value


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _stage(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` for the dummy pass; a missing column names the stage that read it."""
    try:
        return fn(*args, **kwargs)
    except KeyError as err:
        raise KeyError(f"_initialize_loss_from_dummy_batch: {what} read a column its batch does not hold: {err.args[0] if err.args else err}") from err
