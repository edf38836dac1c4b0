"""RLlib's ``SampleBatch`` (old API stack): a dict of columns, one row per step.

A :class:`SampleBatch` maps column names (RLlib's constants, e.g. ``SampleBatch.OBS``) to
numpy arrays that all have the same number of rows (``infos`` may be a list of dicts; a column
may be a nested dict or tuple of arrays, e.g. for ``Dict`` or ``Tuple`` observations). Slices are views, as in RLlib;
:meth:`SampleBatch.to_tensordict` and :meth:`SampleBatch.from_tensordict` cross to Cadence's
TensorDicts sharing memory. :class:`MultiAgentBatch`, :data:`DEFAULT_POLICY_ID` and
:func:`concat_samples` are importable from here, as from RLlib's module.

Deliberate differences from RLlib (ray 2.x):

* Every column must have the same number of rows (``seq_lens`` and, when ``seq_lens`` is set,
  the per-sequence ``state_in_*`` columns aside); construction, ``batch[key] = value`` and
  ``update`` check it and name both columns. RLlib only counts the first column. Set columns
  that must change together (``seq_lens`` with ``state_in_*``) in one ``update``.
* Lists become numpy arrays (as in ray 1.x), except ``infos``, which stays a list; tuples are
  structure (as in RLlib), each part a column of its own.
* ``"dones"`` (``SampleBatch.DONES``): a stored ``dones`` column (ray 1.x) is accepted;
  without one, ``batch["dones"]`` is ``terminateds | truncateds`` (ray 2.x returns
  ``terminateds`` alone, though it documents the "or").
* :meth:`SampleBatch.shuffle` takes a ``numpy.random.Generator``: no global RNG.
* :meth:`SampleBatch.to_tensordict` turns a tuple column into a TensorDict keyed ``"0"``,
  ``"1"``, ... (TensorDict keys are strings); it comes back as a dict.

Examples:
    >>> import numpy as np
    >>> from cadence.interop.rllib.sample_batch import SampleBatch
    >>> batch = SampleBatch({"obs": np.zeros((4, 2)), "rewards": np.ones(4)})
    >>> batch
    SampleBatch(4: ['obs', 'rewards'])
    >>> batch[1:3].count, batch.data is batch
    (2, True)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Union

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.interop.rllib._batch_columns import (
    cut_sequences,
    deep_copy_leaf,
    leaves,
    map_column,
    map_columns,
    sequence_bounds,
    take,
    whole_sequences,
)
from cadence.interop.rllib._checked_columns import CheckedColumns
from cadence.interop.rllib.batch_concat import concat_samples, concat_samples_into_ma_batch
from cadence.interop.rllib.multi_agent_batch import DEFAULT_POLICY_ID, MultiAgentBatch
from cadence.interop.rllib.tensordict_bridge import columns_to_tensordict, tensordict_to_columns

__all__ = [
    "DEFAULT_POLICY_ID",
    "MultiAgentBatch",
    "SampleBatch",
    "SampleBatchType",
    "concat_samples",
    "concat_samples_into_ma_batch",
]


def _rebuild(data: dict[str, Any], flags: dict[str, Any]) -> SampleBatch:
    """Unpickles a SampleBatch (through the constructor, so it is checked again)."""
    return SampleBatch(data, **flags)


class SampleBatch(CheckedColumns):
    """A dict of columns with one row per (agent) step: RLlib's batch of experience.

    Args:
        *args: as ``dict(...)``: a mapping of column name -> array (or list, or nested dict).
        _is_training: whether the batch is for training (else inference); defaults to an
            ``"is_training"`` entry of the data, popped, or False.
        _time_major: whether sequence data is time-major (kept for RLlib's code paths).
        _max_seq_len: the longest sequence; defaults to ``max(seq_lens)``.
        _zero_padded: whether the columns are right-zero-padded to ``_max_seq_len`` per
            sequence (then they have ``len(seq_lens) * max_seq_len`` rows, ``infos`` not).
        _num_grad_updates: the policy's gradient updates when the data was collected.
        _trusted_count: Cadence's own hot paths only (the sampler's input dicts, built fragments):
            the row count of columns already in stored form and known to agree, not checked.
        **kwargs: more columns, e.g. ``seq_lens=...`` (None or ``[]`` means none).

    Attributes:
        count: the number of rows (``sum(seq_lens)`` when ``seq_lens`` is set).
        accessed_keys: the columns read since construction (RLlib's tracking, used to prune
            unused views).
        added_keys: the columns added since construction.
        deleted_keys: the columns deleted since construction.

    Raises:
        ValueError: columns with different numbers of rows (names both), or rows that do not
            match ``seq_lens``.
        TypeError: a non-string column name, or a column without rows (e.g. a float).

    Examples:
        >>> import numpy as np
        >>> batch = SampleBatch({SampleBatch.OBS: np.arange(6.0).reshape(3, 2), "infos": [{}, {}, {}]})
        >>> len(batch), batch["obs"][2].tolist()
        (3, [4.0, 5.0])
        >>> SampleBatch(a=np.zeros(2), b=np.zeros(3))
        Traceback (most recent call last):
        ...
        ValueError: column 'b' has 3 rows but column 'a' has 2; all columns of a SampleBatch need the same number of rows
    """

    # Environment data (a row is one step: OBS, then ACTIONS taken from it, then the results).
    OBS = "obs"
    CUR_OBS = "obs"  # RLlib's deprecated alias
    NEXT_OBS = "new_obs"
    ACTIONS = "actions"
    REWARDS = "rewards"
    PREV_ACTIONS = "prev_actions"
    PREV_REWARDS = "prev_rewards"
    TERMINATEDS = "terminateds"
    TRUNCATEDS = "truncateds"
    DONES = "dones"  # ray 1.x's column; read-only alias of terminateds|truncateds otherwise
    INFOS = "infos"
    # Bookkeeping written by the sampler.
    SEQ_LENS = "seq_lens"
    T = "t"
    EPS_ID = "eps_id"
    ENV_ID = "env_id"
    AGENT_INDEX = "agent_index"
    UNROLL_ID = "unroll_id"
    # Policy outputs ("extra action fetches").
    ACTION_DIST_INPUTS = "action_dist_inputs"
    ACTION_PROB = "action_prob"
    ACTION_LOGP = "action_logp"
    ACTION_DIST = "action_dist"
    VF_PREDS = "vf_preds"
    VALUES_BOOTSTRAPPED = "values_bootstrapped"
    OBS_EMBEDS = "obs_embeds"
    RETURNS_TO_GO = "returns_to_go"
    ATTENTION_MASKS = "attention_masks"

    def __init__(
        self,
        *args: Any,
        _is_training: Any = None,
        _time_major: bool | None = None,
        _max_seq_len: int | None = None,
        _zero_padded: bool = False,
        _num_grad_updates: float | None = None,
        _trusted_count: int | None = None,
        **kwargs: Any,
    ) -> None:
        data = dict(*args, **kwargs)
        # RLlib's old input dicts carried the training flag as an entry
        flag = data.pop("is_training", False)
        self._is_training: Any = flag if _is_training is None else _is_training
        self.time_major = _time_major
        self.num_grad_updates = _num_grad_updates
        self.accessed_keys: set[str] = set()
        self.get_interceptor: Callable[[Any], Any] | None = None
        super().__init__(data, max_seq_len=_max_seq_len, zero_padded=_zero_padded, trusted_count=_trusted_count)

    # ----- dict interface (the checked writes live in CheckedColumns) ---------------------------

    def _assign(self, data: Mapping[Any, Any]) -> None:
        data = dict(data)
        if "is_training" in data:  # RLlib's old input-dict flag, not a column
            self.set_training(data.pop("is_training"))
        super()._assign(data)

    def __getitem__(self, key: Union[str, slice]) -> Any:
        """A column by name (with ``"dones"`` derived if not stored), or a slice of rows.

        Raises:
            KeyError: no such column (names it and the columns there are).
        """
        if isinstance(key, slice):
            return self._slice_rows(key)
        if key == self.DONES and not dict.__contains__(self, key):
            return self._derived_dones()
        if key == "is_training":
            return self.is_training
        try:
            value = dict.__getitem__(self, key)
        except KeyError:
            raise KeyError(f"SampleBatch has no column {key!r}; its columns are {list(self.keys())}") from None
        self.accessed_keys.add(key)
        if self.get_interceptor is not None:
            if key not in self.intercepted_values:
                self.intercepted_values[key] = self.get_interceptor(value)
            value = self.intercepted_values[key]
        return value

    def _derived_dones(self) -> Any:
        if not dict.__contains__(self, self.TERMINATEDS):
            raise KeyError(
                "SampleBatch has no column 'dones' and no 'terminateds' to derive it from; "
                f"its columns are {list(self.keys())}"
            )
        terminated = self[self.TERMINATEDS]
        if not dict.__contains__(self, self.TRUNCATEDS):
            return terminated
        truncated = self[self.TRUNCATEDS]
        if isinstance(terminated, torch.Tensor):
            return torch.logical_or(terminated, torch.as_tensor(truncated))
        return np.logical_or(terminated, truncated)

    def get(self, key: str, default: Any = None) -> Any:
        """A column, or ``default``; goes through ``[]`` (derived ``dones``, access tracking).

        Examples:
            >>> import numpy as np
            >>> SampleBatch(terminateds=np.array([False, True])).get("dones").tolist()
            [False, True]
        """
        try:
            return self[key]
        except KeyError:
            return default

    def __reduce__(self) -> tuple[Any, ...]:
        # pickling a dict subclass would otherwise set items before our attributes exist
        return _rebuild, (dict(self), self._flags())

    def _flags(self) -> dict[str, Any]:
        return {
            "_is_training": self._is_training,
            "_time_major": self.time_major,
            "_max_seq_len": self.max_seq_len,
            "_zero_padded": self.zero_padded,
            "_num_grad_updates": self.num_grad_updates,
        }

    def __repr__(self) -> str:
        keys = [key for key in self.keys() if key != self.SEQ_LENS]
        if dict.__contains__(self, self.SEQ_LENS):
            return f"SampleBatch({self.count} (seqs={len(dict.__getitem__(self, self.SEQ_LENS))}): {keys})"
        return f"SampleBatch({self.count}: {keys})"

    __str__ = __repr__

    def __len__(self) -> int:
        """The number of rows (``count``)."""
        return self.count

    # ----- RLlib's accessors ------------------------------------------------------------------

    @property
    def data(self) -> SampleBatch:
        """The columns: the batch itself (ray 1.x code reads ``batch.data``), not a copy.

        Examples:
            >>> import numpy as np
            >>> batch = SampleBatch(obs=np.zeros(2))
            >>> "obs" in batch.data, batch.data is batch
            (True, True)
        """
        return self

    @property
    def is_training(self) -> Any:
        """Whether the batch is for training (else it is for inference, computing actions).

        Examples:
            >>> import numpy as np
            >>> batch = SampleBatch({"obs": np.zeros(1), "is_training": True})
            >>> batch.is_training, batch["is_training"], "is_training" in batch
            (True, True, False)
        """
        if self.get_interceptor is not None and isinstance(self._is_training, bool):
            if "_is_training" not in self.intercepted_values:
                self.intercepted_values["_is_training"] = self.get_interceptor(self._is_training)
            return self.intercepted_values["_is_training"]
        return self._is_training

    def set_training(self, training: Any = True) -> None:
        """Marks the batch as for training (or not).

        Examples:
            >>> batch = SampleBatch()
            >>> batch.set_training(); batch.is_training
            True
        """
        self._is_training = training
        self.intercepted_values.pop("_is_training", None)

    def set_get_interceptor(self, fn: Callable[[Any], Any] | None) -> None:
        """Maps every column read through ``fn`` (cached), e.g. to torch tensors (RLlib's hook).

        Examples:
            >>> import numpy as np, torch
            >>> batch = SampleBatch(obs=np.zeros(2))
            >>> batch.set_get_interceptor(torch.from_numpy)
            >>> type(batch["obs"]).__name__
            'Tensor'
        """
        if fn is not self.get_interceptor:
            self.intercepted_values = {}
        self.get_interceptor = fn

    def env_steps(self) -> int:
        """The number of rows (as :meth:`MultiAgentBatch.env_steps` for one agent).

        Examples:
            >>> import numpy as np
            >>> SampleBatch(obs=np.zeros(5)).env_steps()
            5
        """
        return self.count

    def agent_steps(self) -> int:
        """The number of rows (as :meth:`MultiAgentBatch.agent_steps` for one agent).

        Examples:
            >>> import numpy as np
            >>> SampleBatch(obs=np.zeros(5)).agent_steps()
            5
        """
        return self.count

    def columns(self, keys: Iterable[str]) -> list[Any]:
        """The columns named in ``keys``, in that order.

        Examples:
            >>> import numpy as np
            >>> a, b = SampleBatch(a=np.array([1]), b=np.array([2])).columns(["a", "b"])
            >>> a.tolist(), b.tolist()
            ([1], [2])
        """
        return [self[key] for key in keys]

    def rows(self) -> Iterator[dict[str, Any]]:
        """One dict per row; ``seq_lens`` reads 1 in each, ``state_in_*`` (per sequence) is left out.

        Raises:
            ValueError: the batch is zero-padded (its rows are not the steps).

        Examples:
            >>> import numpy as np
            >>> [int(row["a"]) for row in SampleBatch(a=np.array([1, 2])).rows()]
            [1, 2]
        """
        if self.zero_padded:
            raise ValueError("rows() of a zero-padded SampleBatch: its rows include padding, not only steps")
        has_seqs = dict.__contains__(self, self.SEQ_LENS)
        items = [(k, v) for k, v in dict.items(self) if not (has_seqs and k.startswith("state_in_"))]
        for i in range(self.count):
            yield {k: 1 if k == self.SEQ_LENS else map_column(lambda leaf: leaf[i], v) for k, v in items}

    def size_bytes(self) -> int:
        """The bytes held by the columns (``nbytes`` for arrays, ``sys.getsizeof`` otherwise).

        Examples:
            >>> import numpy as np
            >>> SampleBatch(obs=np.zeros((2, 3), np.float32)).size_bytes()
            24
        """
        total = 0
        for key, value in dict.items(self):
            for _, leaf in leaves(key, value):
                total += leaf.nbytes if isinstance(leaf, np.ndarray) else sys.getsizeof(leaf)
        return total

    # ----- rows: slices, copies, shuffles --------------------------------------------------------

    def _derive(self, data: dict[str, Any]) -> SampleBatch:
        """A new batch of ``data`` with this batch's flags."""
        return SampleBatch(data, **self._flags())

    def _slice_rows(self, index: slice) -> SampleBatch:
        """``batch[a:b]``: views of rows a..b; with ``seq_lens``, whole sequences (RLlib's rule:
        both ends round down to the start of the sequence they fall in)."""
        if index.step not in (None, 1):
            raise ValueError(f"SampleBatch slices need a step of 1, got {index.step}")
        start, stop, _ = index.indices(self.count)
        stop = max(start, stop)
        if not dict.__contains__(self, self.SEQ_LENS):
            return self._derive({k: map_column(lambda leaf: leaf[start:stop], v) for k, v in dict.items(self)})
        seq_lens = dict.__getitem__(self, self.SEQ_LENS)
        first, last = whole_sequences(seq_lens, start, stop, self.count)
        bounds = sequence_bounds(seq_lens)
        steps = (int(bounds[first]), int(bounds[last]))
        padded = (first * self.max_seq_len, last * self.max_seq_len) if self.zero_padded else steps
        data = {}
        for key, value in dict.items(self):
            if key == self.SEQ_LENS or key.startswith("state_in_"):
                lo, hi = first, last
            else:
                lo, hi = steps if key == self.INFOS else padded
            data[key] = map_column(lambda leaf: leaf[lo:hi], value)
        return self._derive(data)

    def slice(self, start: int, end: int, state_start: int | None = None, state_end: int | None = None) -> SampleBatch:
        """Rows ``start..end`` as views; with ``seq_lens``, sequences are cut at both ends.

        Without ``seq_lens`` this is ``batch[start:end]``. With it, the sequences that overlap
        the rows are kept, the first and last shortened to the rows taken (``state_in_*`` rows
        are those sequences' start states); ``state_start``/``state_end`` pick the sequences
        explicitly, the last shortened so the lengths add up to the rows.

        Raises:
            ValueError: a zero-padded batch, a negative ``start``, or sequences too short.

        Examples:
            >>> import numpy as np
            >>> batch = SampleBatch(a=np.arange(5), state_in_0=np.zeros(2), seq_lens=[3, 2])
            >>> part = batch.slice(1, 4)
            >>> part["a"].tolist(), part["seq_lens"].tolist()
            ([1, 2, 3], [2, 1])
        """
        if not dict.__contains__(self, self.SEQ_LENS):
            return self[start:end]
        if self.zero_padded:
            raise ValueError("slice() of a zero-padded SampleBatch: use batch[a:b], which keeps whole sequences")
        if start < 0:
            raise ValueError(f"slice(start={start}) of a batch with seq_lens: start must be >= 0")
        end = max(start, min(end, self.count))
        seq_lens = dict.__getitem__(self, self.SEQ_LENS)
        first, last, new_lens = cut_sequences(seq_lens, start, end, state_start, state_end)
        data = {}
        for key, value in dict.items(self):
            if key == self.SEQ_LENS:
                data[key] = new_lens
            elif key.startswith("state_in_"):
                data[key] = map_column(lambda leaf: leaf[first:last], value)
            else:
                data[key] = map_column(lambda leaf: leaf[start:end], value)
        return self._derive(data)

    def copy(self, shallow: bool = False) -> SampleBatch:
        """A copy: deep (arrays, lists and infos copied) or shallow (new batch, same arrays).

        Examples:
            >>> import numpy as np
            >>> batch = SampleBatch(obs=np.zeros(2))
            >>> deep, shallow = batch.copy(), batch.copy(shallow=True)
            >>> np.shares_memory(deep["obs"], batch["obs"]), np.shares_memory(shallow["obs"], batch["obs"])
            (False, True)
        """
        leaf_copy = (lambda leaf: leaf) if shallow else deep_copy_leaf
        new = self._derive({k: map_column(leaf_copy, v) for k, v in dict.items(self)})
        new.set_get_interceptor(self.get_interceptor)
        new.accessed_keys = set(self.accessed_keys)
        new.added_keys, new.deleted_keys = set(self.added_keys), set(self.deleted_keys)
        return new

    def shuffle(self, rng: np.random.Generator) -> SampleBatch:
        """Shuffles the rows in place (every column by one permutation) and returns ``self``.

        The columns are replaced by shuffled copies, so views taken before (slices,
        :meth:`to_tensordict`) keep the old order.

        Args:
            rng: the random generator to draw the permutation from.

        Raises:
            TypeError: ``rng`` is not a ``numpy.random.Generator``.
            ValueError: the batch has ``seq_lens`` (rows belong to sequences).

        Examples:
            >>> import numpy as np
            >>> batch = SampleBatch(a=np.arange(4), b=np.arange(4) * 10)
            >>> batch.shuffle(np.random.default_rng(0))
            SampleBatch(4: ['a', 'b'])
            >>> bool(np.all(batch["b"] == batch["a"] * 10)), sorted(batch["a"].tolist())
            (True, [0, 1, 2, 3])
        """
        if not isinstance(rng, np.random.Generator):
            raise TypeError(
                "shuffle(rng): expected a numpy.random.Generator (np.random.default_rng(seed)), "
                f"got {type(rng).__name__}"
            )
        if dict.__contains__(self, self.SEQ_LENS):
            raise ValueError("shuffle() of a SampleBatch with 'seq_lens': its rows belong to sequences")
        permutation = rng.permutation(self.count)
        for key, value in list(dict.items(self)):
            dict.__setitem__(self, key, map_column(lambda leaf: take(leaf, permutation), value))
        self.intercepted_values = {}
        return self

    def split_by_episode(self, key: str | None = None) -> list[SampleBatch]:
        """Splits into one batch per episode, in order (views of this batch's rows).

        A new batch starts wherever ``eps_id`` changes (``key="eps_id"``, the default when the
        column is there), or after every done step (``key="dones"``: terminated or truncated).

        Raises:
            KeyError: the column to split by is missing.
            ValueError: ``key`` is neither None, ``"eps_id"`` nor ``"dones"``.

        Examples:
            >>> import numpy as np
            >>> batch = SampleBatch(a=np.arange(5), eps_id=np.array([7, 7, 3, 3, 7]))
            >>> [part["a"].tolist() for part in batch.split_by_episode()]
            [[0, 1], [2, 3], [4]]
        """
        if key not in (None, self.EPS_ID, self.DONES):
            raise ValueError(f"split_by_episode(key={key!r}): expected None, 'eps_id' or 'dones'")
        if self.count == 0:
            return []
        if key == self.EPS_ID or (key is None and dict.__contains__(self, self.EPS_ID)):
            ids = np.asarray(self[self.EPS_ID])
            cuts = [0, *(np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist(), self.count]
        else:
            try:
                dones = np.asarray(self[self.DONES])
            except KeyError:
                raise KeyError(
                    "split_by_episode: the batch has neither 'eps_id' nor 'terminateds'/'dones'; "
                    f"its columns are {list(self.keys())}"
                ) from None
            cuts = [0, *(np.flatnonzero(dones) + 1).tolist()]
            if cuts[-1] != self.count:
                cuts.append(self.count)
        parts = [self[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
        if sum(part.count for part in parts) != self.count:
            raise ValueError("split_by_episode: episode boundaries do not fall on sequence boundaries (seq_lens)")
        return parts

    def concat(self, other: SampleBatch) -> SampleBatch:
        """This batch's rows followed by ``other``'s, as a new batch (see :func:`concat_samples`).

        Examples:
            >>> import numpy as np
            >>> SampleBatch(a=np.array([1, 2])).concat(SampleBatch(a=np.array([3])))["a"].tolist()
            [1, 2, 3]
        """
        return concat_samples([self, other])

    def as_multi_agent(self) -> MultiAgentBatch:
        """This batch as the ``"default_policy"`` batch of a MultiAgentBatch (env steps = rows).

        Examples:
            >>> import numpy as np
            >>> SampleBatch(obs=np.zeros(2)).as_multi_agent()
            MultiAgentBatch({'default_policy': SampleBatch(2: ['obs'])}, env_steps=2)
        """
        return MultiAgentBatch({DEFAULT_POLICY_ID: self}, self.count)

    # ----- TensorDict -----------------------------------------------------------------------------

    def to_tensordict(self, keep_non_tensor: bool = True) -> TensorDict:
        """The batch as a TensorDict of batch size ``[count]`` sharing the columns' memory.

        Numeric columns are viewed with ``torch.from_numpy`` (no copy), nested dicts become
        nested TensorDicts, non-numeric columns (``infos``, strings) a ``NonTensorStack`` of
        rows or, with ``keep_non_tensor=False``, left out. A derived ``dones`` is not a column.

        Raises:
            ValueError: the batch has ``seq_lens`` (``seq_lens`` and ``state_in_*`` have one
                row per sequence, which a TensorDict of ``count`` rows cannot hold).

        Examples:
            >>> import numpy as np
            >>> batch = SampleBatch(obs=np.zeros((2, 3), np.float32), infos=[{}, {}])
            >>> td = batch.to_tensordict()
            >>> td["obs"][1] = 1.0
            >>> batch["obs"][1].tolist(), td.batch_size
            ([1.0, 1.0, 1.0], torch.Size([2]))
        """
        if dict.__contains__(self, self.SEQ_LENS):
            raise ValueError(
                "to_tensordict() of a SampleBatch with 'seq_lens': 'seq_lens' and 'state_in_*' hold "
                f"one row per sequence, not one per step ({self.count}); drop them first"
            )
        return columns_to_tensordict(self, self.count, keep_non_tensor=keep_non_tensor)

    @classmethod
    def from_tensordict(cls, td: TensorDictBase, *, is_training: bool = False) -> SampleBatch:
        """A SampleBatch of a one-dimensional TensorDict's entries, sharing their memory.

        CPU tensors are viewed with ``.numpy()`` (no copy; other devices are copied), nested
        TensorDicts become nested dicts, non-tensor data becomes lists.

        Args:
            td: a TensorDict with batch size ``[n]``.
            is_training: the new batch's training flag.

        Raises:
            ValueError: ``td`` has not exactly one batch dimension.

        Examples:
            >>> import numpy as np, torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"obs": torch.zeros(3, 2), "actions": torch.arange(3)}, batch_size=[3])
            >>> batch = SampleBatch.from_tensordict(td)
            >>> batch["actions"][0] = 9
            >>> batch, td["actions"].tolist()
            (SampleBatch(3: ['obs', 'actions']), [9, 1, 2])
        """
        return cls(tensordict_to_columns(td), _is_training=is_training)

    # ----- inference input ------------------------------------------------------------------------

    def get_single_step_input_dict(
        self, view_requirements: Mapping[str, Any], index: Union[str, int] = "last"
    ) -> SampleBatch:
        """A one-row input dict for a model call at row ``index`` or after the last row.

        For each view marked ``used_for_compute_actions``, the row of its ``data_col`` (or of
        the view's own column). With ``index="last"`` the step *after* the batch is built:
        ``obs`` reads the last ``new_obs``, ``prev_actions``/``prev_rewards`` the last
        ``actions``/``rewards``, anything else its last row. As in RLlib, an int shift is
        not applied again here (the batch's view columns hold shifted data already).
        Views are any objects with ``data_col``, ``shift`` and ``used_for_compute_actions``
        attributes, such as ``ViewRequirement``.

        A view with a list or range shift gets its window at that step,
        ``[1, len(shift), ...]``, from the batch's ``data_col`` (``obs`` extended by the last
        ``new_obs``), zeros before the batch's first row.

        Raises:
            TypeError: ``index`` is neither ``"last"`` nor an int.
            ValueError: a shift that reaches further than
                :data:`~cadence.interop.rllib.view_requirement.MAX_SHIFT` steps (checked
                as ``ViewRequirement`` checks it, before anything is allocated).

        Examples:
            >>> import numpy as np
            >>> from types import SimpleNamespace
            >>> batch = SampleBatch(obs=np.array([0, 1]), new_obs=np.array([1, 2]), actions=np.array([5, 6]))
            >>> views = {"obs": SimpleNamespace(data_col=None, shift=0, used_for_compute_actions=True),
            ...          "prev_actions": SimpleNamespace(data_col="actions", shift=-1, used_for_compute_actions=True)}
            >>> step = batch.get_single_step_input_dict(views)
            >>> step["obs"].tolist(), step["prev_actions"].tolist(), step.count
            ([2], [6], 1)
            >>> from cadence.interop.rllib.view_requirement import ViewRequirement
            >>> window = {"last_actions": ViewRequirement("actions", shift="-3:-1")}
            >>> batch.get_single_step_input_dict(window)["last_actions"].tolist()
            [[0, 5, 6]]
        """
        if index != "last" and (isinstance(index, bool) or not isinstance(index, (int, np.integer))):
            raise TypeError(f"get_single_step_input_dict(index=...): expected 'last' or an int, got {index!r}")
        last_source = {self.OBS: self.NEXT_OBS, self.PREV_ACTIONS: self.ACTIONS, self.PREV_REWARDS: self.REWARDS}
        out: dict[str, Any] = {}
        for view_col, view in view_requirements.items():
            if not getattr(view, "used_for_compute_actions", True):
                continue
            shift = getattr(view, "shift", 0)
            data_col = getattr(view, "data_col", None) or view_col
            if getattr(view, "shift_from", None) is not None or not isinstance(shift, (int, np.integer)):
                out[view_col] = self._window_at(view_col, view, data_col, index)
            elif index == "last":
                out[view_col] = map_column(lambda leaf: leaf[-1:], self[last_source.get(data_col, data_col)])
            else:
                stop = None if index == -1 else index + 1
                out[view_col] = map_column(lambda leaf: leaf[index:stop], self[data_col])
        return SampleBatch(out, seq_lens=np.ones(1, dtype=np.int32))

    def _window_at(self, view_col: str, view: Any, data_col: str, index: Union[str, int]) -> Any:
        from cadence.interop.rllib.view_requirement import ViewRequirement, episode_view

        if not isinstance(view, ViewRequirement):  # a view-like object: its shift parsed (and bounded) as a view's
            view = ViewRequirement(data_col, shift=view.shift)

        column = self[data_col]
        if data_col == self.OBS and self.NEXT_OBS in self:  # the step after the last reads new_obs
            column = _extended(column, self[self.NEXT_OBS])
        step = self.count if index == "last" else int(index) % max(self.count, 1)
        return map_column(lambda leaf: episode_view(view, leaf, timesteps=[step], view_col=view_col), column)


def _extended(obs: Any, new_obs: Any) -> Any:
    """``obs`` with the last row of ``new_obs`` appended, leaf by leaf."""
    return map_columns(lambda leaf, new_leaf: np.concatenate([leaf, new_leaf[-1:]]), obs, new_obs)


#: A SampleBatch or a MultiAgentBatch (RLlib's ``SampleBatchType``).
SampleBatchType = Union[SampleBatch, MultiAgentBatch]
