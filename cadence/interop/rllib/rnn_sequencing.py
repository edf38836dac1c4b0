"""RLlib's sequence chopping for recurrent models: :func:`chop_into_sequences`.

A recurrent model trains on fixed-length sequences: the flat batch ``[B, ...]`` is cut
wherever the episode, the unroll (sample batch) or the agent changes and every
``max_seq_len`` steps, each piece is padded with zeros to one common length, and the
recurrent state is kept only at each sequence's first step. The model then reshapes the
padded ``[NUM_SEQUENCES * MAX_SEQ_LEN, ...]`` columns to ``[NUM_SEQUENCES, MAX_SEQ_LEN, ...]``.
Padding with zeros assumes zero inputs do not change the loss, which holds when the loss
masks the padding by ``seq_lens``.

RLlib's ``pad_batch_to_sequences_of_same_size`` (which applies this to a ``SampleBatch``
in place) is not here: it belongs with the ``SampleBatch`` class.

Examples:
    >>> from cadence.interop.rllib.rnn_sequencing import chop_into_sequences
    >>> f_pad, s_init, seq_lens = chop_into_sequences(
    ...     feature_columns=[[1, 2, 3, 4, 5]], state_columns=[[0, 1, 2, 3, 4]],
    ...     max_seq_len=2, episode_ids=[7] * 5, unroll_ids=[0] * 5, agent_indices=[0] * 5)
    >>> f_pad[0].tolist(), s_init[0].tolist(), seq_lens.tolist()
    ([1, 2, 3, 4, 5, 0], [0, 2, 4], [2, 2, 1])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from cadence._utils import quoted

__all__ = ["MAX_PADDED_ROWS", "MAX_SEQ_LEN", "chop_into_sequences"]

#: the longest sequence (``max_seq_len``, and ``_extra_padding``): lengths are int32, and a
#: padded batch is ``NUM_SEQUENCES * MAX_SEQ_LEN`` rows
MAX_SEQ_LEN = 100_000
#: the most rows a padded column may hold (each sequence padded to the longest)
MAX_PADDED_ROWS = 100_000_000


def _flatten(nest: Any) -> list[Any]:
    """The leaves of a nest of dicts (sorted keys, as dm-tree does) and tuples.

    A list is data, not a nest (RLlib turns a list column into one array).
    """
    if isinstance(nest, Mapping):
        return [leaf for key in sorted(nest) for leaf in _flatten(nest[key])]
    if isinstance(nest, tuple):
        return [leaf for item in nest for leaf in _flatten(item)]
    return [nest]


def _int_arg(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"chop_into_sequences: {name} must be an int in [{minimum}, {MAX_SEQ_LEN}], got {quoted(value)}"
        )
    if not minimum <= value <= MAX_SEQ_LEN:
        raise ValueError(
            f"chop_into_sequences: {name} must be an int in [{minimum}, {MAX_SEQ_LEN}] (MAX_SEQ_LEN), got {value}"
        )
    return int(value)


def _compute_seq_lens(
    episode_ids: ArrayLike | None,
    unroll_ids: ArrayLike | None,
    agent_indices: ArrayLike | None,
    max_seq_len: int,
) -> np.ndarray:
    """Sequence lengths: a cut wherever an id changes, and every ``max_seq_len`` steps."""
    if episode_ids is None:
        raise ValueError(
            "chop_into_sequences: episode_ids is required when seq_lens is not given "
            "(None or empty)"
        )
    ids = {"episode_ids": np.asarray(episode_ids)}
    for name, value in (("unroll_ids", unroll_ids), ("agent_indices", agent_indices)):
        if value is not None:
            ids[name] = np.asarray(value)
    length = len(ids["episode_ids"])
    for name, array in ids.items():
        if array.ndim != 1 or len(array) != length:
            raise ValueError(
                f"chop_into_sequences: {name} must be 1-D with {length} entries (as "
                f"episode_ids), got shape {array.shape}"
            )
    if length == 0:
        return np.zeros(0, dtype=np.int32)
    # Compared one by one: RLlib sums the ids into one key, so that e.g. (episode 1,
    # agent 1) and (episode 2, agent 0) collide and are not cut apart.
    starts_run = np.zeros(length, dtype=bool)
    starts_run[0] = True
    for array in ids.values():
        starts_run[1:] |= array[1:] != array[:-1]
    run_starts = np.flatnonzero(starts_run)
    run_lens = np.diff(np.append(run_starts, length))
    chunks = -(-run_lens // max_seq_len)
    seq_lens = np.full(int(chunks.sum()), max_seq_len, dtype=np.int32)
    # Each run is cut into full pieces and one last piece holding the remainder.
    seq_lens[np.cumsum(chunks) - 1] = run_lens - (chunks - 1) * max_seq_len
    return seq_lens


def _checked_seq_lens(seq_lens: ArrayLike) -> np.ndarray:
    given = np.asarray(seq_lens)
    if given.ndim != 1 or given.dtype.kind not in "iu":
        raise ValueError(
            f"chop_into_sequences: seq_lens must be a 1-D array of ints, got shape "
            f"{given.shape} of dtype {given.dtype}"
        )
    if (given < 1).any():
        raise ValueError(
            f"chop_into_sequences: seq_lens must all be >= 1, got {given.min()} at "
            f"position {int(given.argmin())}"
        )
    if (given > MAX_SEQ_LEN).any():  # int32 lengths, and bounded padding
        raise ValueError(
            f"chop_into_sequences: seq_lens must all be <= MAX_SEQ_LEN={MAX_SEQ_LEN}, got {given.max()} at "
            f"position {int(given.argmax())}"
        )
    return given.astype(np.int32)


def _pad_leaf(
    leaf: Any, column: int, destinations: np.ndarray, padded_length: int
) -> np.ndarray:
    data = leaf if isinstance(leaf, np.ndarray) else np.asarray(leaf)
    if data.ndim == 0 or len(data) != len(destinations):
        raise ValueError(
            f"chop_into_sequences: feature_columns[{column}] has "
            f"{'no time axis' if data.ndim == 0 else f'{len(data)} rows'}; expected "
            f"{len(destinations)} (the sum of seq_lens)"
        )
    if data.dtype == object or data.dtype.kind in "US":
        # Strings and objects (e.g. infos) are padded with None, as RLlib does.
        padded = np.empty((padded_length,) + data.shape[1:], dtype=object)
        padded[...] = None
    else:
        padded = np.zeros((padded_length,) + data.shape[1:], dtype=data.dtype)
    padded[destinations] = data
    return padded


def chop_into_sequences(
    *,
    feature_columns: Sequence[Any],
    state_columns: Sequence[ArrayLike],
    max_seq_len: int,
    episode_ids: ArrayLike | None = None,
    unroll_ids: ArrayLike | None = None,
    agent_indices: ArrayLike | None = None,
    dynamic_max: bool = True,
    shuffle: bool = False,
    seq_lens: ArrayLike | None = None,
    states_already_reduced_to_init: bool = False,
    handle_nested_data: bool = False,
    _extra_padding: int = 0,
    rng: np.random.Generator | None = None,
) -> tuple[list[Any], list[np.ndarray], np.ndarray]:
    """Cuts a flat batch into sequences and pads each to the same length (RLlib's function).

    Args:
        feature_columns: Columns to pad, each with one row per step (``[B, ...]``). A
            list column is one array; with ``handle_nested_data`` a column may also be a
            nest of dicts and tuples of arrays.
        state_columns: Recurrent-state columns; only each sequence's first row is kept.
        max_seq_len: The longest sequence (longer runs are cut into several), >= 1.
        episode_ids: The episode id of each step; required unless ``seq_lens`` is given.
        unroll_ids: The sample batch (unroll) id of each step, so that sequences never
            span two sample batches; ``None``: all one.
        agent_indices: The agent index of each step; ``None``: all one.
        dynamic_max: Pad to the longest sequence found (plus ``_extra_padding``) instead
            of ``max_seq_len``.
        shuffle: Shuffle the sequences (features, states and ``seq_lens`` alike); needs ``rng``.
        seq_lens: Sequence lengths to use instead of computing them from the ids (ignored
            when empty, as in RLlib).
        states_already_reduced_to_init: The state columns already hold one row per
            sequence: returned as they are.
        handle_nested_data: Return each feature column as the list of its padded leaves
            (dict keys sorted); if False, each column must be a single array.
        _extra_padding: Extra zero rows after the longest sequence when ``dynamic_max``.
        rng: The generator that draws the shuffle (never numpy's global one).

    Returns:
        ``(feature_sequences, initial_states, seq_lens)``: the padded feature columns
        (``[NUM_SEQUENCES * MAX_SEQ_LEN, ...]``, dtypes kept; strings and objects padded
        with ``None`` in an object array), the initial states (``[NUM_SEQUENCES, ...]``),
        and the sequence lengths (int32, ``[NUM_SEQUENCES]``).

    Raises:
        ValueError: Ids of different lengths, no ids and no ``seq_lens``, a column whose
            row count is not the sum of ``seq_lens``, a sequence longer than
            ``max_seq_len`` without ``dynamic_max``, ``shuffle`` without ``rng``, a nested
            column without ``handle_nested_data``.
        TypeError: ``rng`` that is not a ``numpy.random.Generator``, a non-int ``max_seq_len``.

    Examples:
        RLlib's own docstring example:

        >>> f_pad, s_init, seq_lens = chop_into_sequences(
        ...     episode_ids=[1, 1, 5, 5, 5, 5],
        ...     unroll_ids=[4, 4, 4, 4, 4, 4],
        ...     agent_indices=[0, 0, 0, 0, 0, 0],
        ...     feature_columns=[[4, 4, 8, 8, 8, 8],
        ...                      [1, 1, 0, 1, 1, 0]],
        ...     state_columns=[[4, 5, 4, 5, 5, 5]],
        ...     max_seq_len=3)
        >>> print([f.tolist() for f in f_pad])
        [[4, 4, 0, 8, 8, 8, 8, 0, 0], [1, 1, 0, 0, 1, 1, 0, 0, 0]]
        >>> print([s.tolist() for s in s_init])
        [[4, 4, 5]]
        >>> print(seq_lens.tolist())
        [2, 3, 1]

        Shuffling draws from the generator it is given:

        >>> _, s_init, seq_lens = chop_into_sequences(
        ...     episode_ids=[1, 1, 5, 5, 5, 5], feature_columns=[[4, 4, 8, 8, 8, 8]],
        ...     state_columns=[[4, 5, 4, 5, 5, 5]], max_seq_len=3,
        ...     shuffle=True, rng=np.random.default_rng(0))
        >>> sorted(zip(seq_lens.tolist(), s_init[0].tolist()))
        [(1, 5), (2, 4), (3, 4)]
    """
    max_seq_len = _int_arg("max_seq_len", max_seq_len, 1)
    _extra_padding = _int_arg("_extra_padding", _extra_padding, 0)
    if shuffle:
        if rng is None:
            raise ValueError(
                "chop_into_sequences: shuffle=True needs rng=numpy.random.Generator "
                "(e.g. numpy.random.default_rng(seed)); numpy's global RNG is never used"
            )
        if not isinstance(rng, np.random.Generator):
            raise TypeError(
                f"chop_into_sequences: rng must be a numpy.random.Generator, got "
                f"{type(rng).__name__}"
            )

    if seq_lens is None or len(seq_lens) == 0:  # type: ignore[arg-type]
        lens = _compute_seq_lens(episode_ids, unroll_ids, agent_indices, max_seq_len)
    else:
        lens = _checked_seq_lens(seq_lens)
    num_seqs = len(lens)
    longest = int(lens.max()) if num_seqs else 0
    if dynamic_max:
        max_seq_len = longest + _extra_padding
    elif longest > max_seq_len:
        raise ValueError(
            f"chop_into_sequences: seq_lens holds a sequence of {longest} steps, longer "
            f"than max_seq_len={max_seq_len} (with dynamic_max=False)"
        )

    # Row i of sequence k goes to k * max_seq_len + i: one scatter per column.
    seq_starts = np.cumsum(lens) - lens
    total = int(lens.sum())
    destinations = np.repeat(
        np.arange(num_seqs, dtype=np.int64) * max_seq_len - seq_starts, lens
    ) + np.arange(total, dtype=np.int64)
    padded_length = num_seqs * max_seq_len
    if padded_length > MAX_PADDED_ROWS:  # before any column is allocated
        raise ValueError(
            f"chop_into_sequences: {num_seqs} sequences padded to {max_seq_len} steps make {padded_length} rows "
            f"per column, more than MAX_PADDED_ROWS={MAX_PADDED_ROWS}"
        )

    feature_sequences: list[Any] = []
    for column, col in enumerate(feature_columns):
        leaves = _flatten(col)
        if not handle_nested_data and (len(leaves) != 1 or leaves[0] is not col):
            raise ValueError(
                f"chop_into_sequences: feature_columns[{column}] is a nested structure "
                f"({type(col).__name__}); pass handle_nested_data=True"
            )
        padded = [_pad_leaf(leaf, column, destinations, padded_length) for leaf in leaves]
        feature_sequences.append(padded if handle_nested_data else padded[0])

    initial_states: list[np.ndarray] = []
    for column, col in enumerate(state_columns):
        state = col if isinstance(col, np.ndarray) else np.asarray(col)
        expected = num_seqs if states_already_reduced_to_init else total
        if state.ndim == 0 or len(state) != expected:
            what = "one row per sequence" if states_already_reduced_to_init else "one row per step"
            raise ValueError(
                f"chop_into_sequences: state_columns[{column}] has shape {state.shape}; "
                f"expected {expected} rows ({what})"
            )
        initial_states.append(state if states_already_reduced_to_init else state[seq_starts])

    if shuffle:
        assert rng is not None  # checked above
        permutation = rng.permutation(num_seqs)

        def reorder(padded: np.ndarray) -> np.ndarray:
            by_seq = padded.reshape((num_seqs, max_seq_len) + padded.shape[1:])
            return by_seq[permutation].reshape(padded.shape)

        feature_sequences = [
            [reorder(leaf) for leaf in col] if handle_nested_data else reorder(col)
            for col in feature_sequences
        ]
        initial_states = [state[permutation] for state in initial_states]
        lens = lens[permutation]

    return feature_sequences, initial_states, lens
