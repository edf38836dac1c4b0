"""The checked storage under ``SampleBatch``: a dict whose columns always have matching rows.

Every change (construction, ``[]=``, ``update``, ``pop``, ``del``) checks that the columns have
the same number of rows, and rolls back on an error, so a batch is never left inconsistent.
``seq_lens`` (one entry per sequence) and, when it is set, the ``state_in_*`` columns (one row
per sequence) follow their own rule; zero-padded batches have ``len(seq_lens) * max_seq_len``
rows in every column but ``infos``. The class also keeps RLlib's tracking of the columns
added and deleted (``SampleBatch`` adds the columns read), which policy construction uses to
prune views nobody needs.

Examples:
    >>> import numpy as np
    >>> from cadence.interop.rllib.sample_batch import SampleBatch
    >>> batch = SampleBatch(obs=np.zeros(3))
    >>> batch["rewards"] = np.zeros(2)
    Traceback (most recent call last):
    ...
    ValueError: column 'rewards' has 2 rows but column 'obs' has 3; all columns of a SampleBatch need the same number of rows
    >>> list(batch), batch.count
    (['obs'], 3)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from cadence.interop.rllib._batch_columns import as_column, rows_of

__all__ = ["CheckedColumns"]

_MISSING = object()


class CheckedColumns(dict):
    """A dict of columns checked for matching rows on every change (the base of SampleBatch).

    Args:
        data: column name -> column.
        max_seq_len: the longest sequence (defaults to ``max(seq_lens)``).
        zero_padded: whether the columns are right-zero-padded per sequence.
        trusted_count: for Cadence's own code only: the row count of columns already in
            stored form and known to agree, which are then not checked.

    Attributes:
        count: the number of rows (``sum(seq_lens)`` when ``seq_lens`` is set).
        added_keys, deleted_keys: columns added and deleted since construction.

    Examples:
        >>> import numpy as np
        >>> cols = CheckedColumns({"a": [1, 2], "seq_lens": [1, 1], "state_in_0": np.zeros(2)})
        >>> cols.count, cols.max_seq_len, type(cols["a"]).__name__
        (2, 1, 'ndarray')
    """

    SEQ_LENS = "seq_lens"
    INFOS = "infos"

    def __init__(
        self,
        data: Mapping[Any, Any] = (),
        max_seq_len: int | None = None,
        zero_padded: bool = False,
        trusted_count: int | None = None,
    ) -> None:
        self.max_seq_len = max_seq_len
        self.zero_padded = zero_padded
        self.count = 0
        self.added_keys: set[str] = set()
        self.deleted_keys: set[str] = set()
        # read-side caches (SampleBatch's get-interceptor) are dropped when a column changes
        self.intercepted_values: dict[str, Any] = {}
        if trusted_count is not None:
            # built by Cadence's own code with columns known to agree (the sampler's per-step
            # input dicts): the checks would run at every step, for nothing
            super().__init__(data)
            self.count = trusted_count
            return
        super().__init__(self._normalized(dict(data)))
        self._after_change()

    def _normalized(self, data: Mapping[Any, Any]) -> dict[str, Any]:
        """``data`` in stored form; ``seq_lens`` of None or ``[]`` is dropped."""
        out: dict[str, Any] = {}
        for key, value in data.items():
            if not isinstance(key, str):
                raise TypeError(f"column names must be str, got {type(key).__name__} {key!r}")
            if key == self.SEQ_LENS:
                if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
                    continue
                _check_seq_lens(value)  # before the int32 conversion, which would truncate 2.5 to 2
                out[key] = np.asarray(value, dtype=np.int32) if isinstance(value, (list, tuple)) else value
            else:
                out[key] = as_column(key, value)
        return out

    def _after_change(self) -> None:
        """Fills in ``max_seq_len``, checks every column's rows and sets ``count``."""
        seq_lens = dict.get(self, self.SEQ_LENS)
        if seq_lens is not None and self.max_seq_len is None and len(seq_lens) > 0:
            self.max_seq_len = int(max(seq_lens))
        lengths = {key: rows_of(key, value) for key, value in dict.items(self) if key != self.SEQ_LENS}
        per_sequence = [k for k in lengths if seq_lens is not None and k.startswith("state_in_")]
        # zero-padding pads the tensor columns, not the infos (RLlib's layout)
        per_step = [self.INFOS] if self.zero_padded and self.INFOS in lengths else []
        ref_key, rows = None, 0
        for key, n in lengths.items():
            if n is None or key in per_sequence or key in per_step:
                continue
            if ref_key is None:
                ref_key, rows = key, n
            elif n != rows:
                raise ValueError(
                    f"column {key!r} has {n} rows but column {ref_key!r} has {rows}; "
                    "all columns of a SampleBatch need the same number of rows"
                )
        if seq_lens is None:
            self.count = rows
            return
        n_seqs, count = len(seq_lens), int(np.sum(np.asarray(seq_lens)))
        if self.zero_padded:
            if self.max_seq_len is None:
                raise ValueError("a zero-padded SampleBatch needs _max_seq_len")
            expected, rule = n_seqs * self.max_seq_len, f"len(seq_lens) * max_seq_len = {n_seqs} * {self.max_seq_len}"
        else:
            expected, rule = count, "sum(seq_lens)"
        if ref_key is not None and rows != expected:
            raise ValueError(f"column {ref_key!r} has {rows} rows but 'seq_lens' needs {expected} ({rule})")
        for key in per_sequence:
            if lengths[key] != n_seqs:
                raise ValueError(
                    f"column {key!r} has {lengths[key]} rows but 'seq_lens' has {n_seqs} sequences; "
                    "state_in_* columns hold one row per sequence"
                )
        for key in per_step:
            if lengths[key] != count:
                raise ValueError(f"column {key!r} has {lengths[key]} rows, expected sum(seq_lens) = {count}")
        self.count = count

    def _assign(self, data: Mapping[Any, Any]) -> None:
        """Sets several columns at once, checked together; on an error nothing changes."""
        data = dict(data)
        dropped = [key for key in data if key == self.SEQ_LENS and not self._normalized({key: data[key]})]
        new = self._normalized(data)
        old = {key: dict.get(self, key, _MISSING) for key in [*new, *dropped]}
        old_max = self.max_seq_len
        for key in dropped:
            dict.pop(self, key, None)
        dict.update(self, new)
        try:
            self._after_change()
        except Exception:
            for key, value in old.items():
                if value is _MISSING:
                    dict.pop(self, key, None)
                else:
                    dict.__setitem__(self, key, value)
            self.max_seq_len = old_max
            self._after_change()
            raise
        for key in new:
            if old[key] is _MISSING:
                self.added_keys.add(key)
            self.intercepted_values.pop(key, None)
        for key in dropped:
            if old[key] is not _MISSING:
                self.deleted_keys.add(key)

    def __setitem__(self, key: str, value: Any) -> None:
        """Sets (or replaces) a column; its rows are checked against the other columns."""
        self._assign({key: value})

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Sets several columns, checked together (e.g. ``seq_lens`` with ``state_in_*``).

        Examples:
            >>> import numpy as np
            >>> from cadence.interop.rllib.sample_batch import SampleBatch
            >>> batch = SampleBatch(obs=np.zeros(3), state_in_0=np.zeros(3))
            >>> batch.update(seq_lens=[2, 1], state_in_0=np.zeros(2))
            >>> batch
            SampleBatch(3 (seqs=2): ['obs', 'state_in_0'])
        """
        self._assign(dict(*args, **kwargs))

    def __ior__(self, other: Mapping[str, Any]) -> CheckedColumns:  # type: ignore[override]
        self._assign(other)
        return self

    def __delitem__(self, key: str) -> None:
        self.pop(key)

    def pop(self, key: str, *default: Any) -> Any:  # type: ignore[override]
        """Removes a column and returns it (``default`` if given and absent).

        Examples:
            >>> import numpy as np
            >>> from cadence.interop.rllib.sample_batch import SampleBatch
            >>> batch = SampleBatch(obs=np.zeros(2), t=np.arange(2))
            >>> batch.pop("t").tolist(), batch.deleted_keys
            ([0, 1], {'t'})
        """
        if not dict.__contains__(self, key):
            if default:
                return default[0]
            raise KeyError(f"SampleBatch has no column {key!r}; its columns are {list(self.keys())}")
        value = dict.pop(self, key)
        try:
            self._after_change()
        except Exception:
            dict.__setitem__(self, key, value)
            raise
        self.deleted_keys.add(key)
        self.intercepted_values.pop(key, None)
        return value

    def popitem(self) -> tuple[str, Any]:
        """Removes and returns the last column as ``(name, column)``.

        Examples:
            >>> import numpy as np
            >>> CheckedColumns({"a": np.zeros(1), "b": np.ones(1)}).popitem()[0]
            'b'
        """
        key = next(reversed(self.keys()))
        return key, self.pop(key)

    def setdefault(self, key: str, default: Any = None) -> Any:
        """The column ``key``, first set to ``default`` (checked) if it is missing.

        Examples:
            >>> import numpy as np
            >>> CheckedColumns({"a": np.zeros(2)}).setdefault("b", [1, 2]).tolist()
            [1, 2]
        """
        if not dict.__contains__(self, key):
            self[key] = default
        return self[key]

    def clear(self) -> None:
        """Removes every column (``count`` becomes 0).

        Examples:
            >>> import numpy as np
            >>> cols = CheckedColumns({"a": np.zeros(2)})
            >>> cols.clear(); cols.count, cols.deleted_keys
            (0, {'a'})
        """
        self.deleted_keys.update(self.keys())
        dict.clear(self)
        self.intercepted_values.clear()
        self.count = 0


def _check_seq_lens(seq_lens: Any) -> None:
    """Raises naming ``seq_lens`` unless it is a 1-D array of integer lengths >= 0 (negative
    lengths can sum to the row count and pass every other check)."""
    lengths = np.asarray(seq_lens.cpu() if hasattr(seq_lens, "cpu") else seq_lens)
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu":
        raise ValueError(
            f"'seq_lens' must be a 1-D array of integer sequence lengths, got shape {lengths.shape} and dtype "
            f"{lengths.dtype}"
        )
    negative = np.flatnonzero(lengths < 0)
    if negative.size:
        raise ValueError(
            f"'seq_lens' must hold lengths >= 0, got {int(lengths[negative[0]])} at index {int(negative[0])}"
        )
