"""Concatenating batches: RLlib's ``concat_samples`` and ``concat_samples_into_ma_batch``.

Both are importable from :mod:`cadence.interop.rllib.sample_batch` too, as from RLlib's module.

Examples:
    >>> import numpy as np
    >>> from cadence.interop.rllib.sample_batch import SampleBatch, concat_samples
    >>> concat_samples([SampleBatch(t=np.arange(2)), SampleBatch(t=np.arange(3))]).count
    5
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Union

from cadence.interop.rllib._batch_columns import concat_leaves
from cadence.interop.rllib.multi_agent_batch import MultiAgentBatch

if TYPE_CHECKING:
    from cadence.interop.rllib.sample_batch import SampleBatch

__all__ = ["concat_samples", "concat_samples_into_ma_batch"]


def _sample_batch_class() -> type[SampleBatch]:
    # imported late: sample_batch imports this module at its top
    from cadence.interop.rllib.sample_batch import SampleBatch

    return SampleBatch


def _check_batch(i: int, sample: Any, where: str) -> None:
    if not isinstance(sample, (_sample_batch_class(), MultiAgentBatch)):
        raise TypeError(f"{where}: item {i} is a {type(sample).__name__}, expected a SampleBatch or MultiAgentBatch")


def _check_compatible(head: SampleBatch, batch: SampleBatch, i: int) -> None:
    """Raises if ``batch`` (the i-th non-empty one) cannot follow ``head``."""
    if batch.zero_padded != head.zero_padded or batch.time_major != head.time_major:
        raise ValueError(
            f"concat_samples: non-empty batch {i} has zero_padded={batch.zero_padded}, time_major="
            f"{batch.time_major}; batch 0 has zero_padded={head.zero_padded}, time_major={head.time_major}"
        )
    if (batch.max_seq_len is None) != (head.max_seq_len is None):
        raise ValueError(
            f"concat_samples: non-empty batch {i} has max_seq_len={batch.max_seq_len}, batch 0 has "
            f"{head.max_seq_len}; all or none must set it"
        )
    if head.zero_padded and batch.max_seq_len != head.max_seq_len:
        raise ValueError(
            f"concat_samples: zero-padded batches need one max_seq_len, got {head.max_seq_len} (batch 0) "
            f"and {batch.max_seq_len} (batch {i})"
        )
    if set(batch.keys()) != set(head.keys()):
        missing = sorted(set(head.keys()) - set(batch.keys()))
        extra = sorted(set(batch.keys()) - set(head.keys()))
        raise ValueError(
            f"concat_samples: non-empty batch {i} lacks columns {missing} and has extra columns {extra} "
            "compared with batch 0"
        )


def concat_samples(samples: Iterable[Union[SampleBatch, MultiAgentBatch]]) -> Union[SampleBatch, MultiAgentBatch]:
    """Concatenates SampleBatches (to a SampleBatch) or, if any is one, MultiAgentBatches.

    Empty batches are skipped. The batches must have the same columns and consistent
    sequence settings (``zero_padded``, ``time_major``, ``max_seq_len`` given or not);
    ``seq_lens`` are joined, ``num_grad_updates`` averaged weighted by rows. A mix of
    SampleBatches and MultiAgentBatches treats each SampleBatch as the default policy's.

    Args:
        samples: the batches, in order.

    Returns:
        A new batch holding copies of the data (an empty SampleBatch if all are empty).

    Raises:
        ValueError: different columns (names the batch and the columns), columns that do not
            concatenate (names the column), or inconsistent sequence settings.
        TypeError: an item is not a SampleBatch or MultiAgentBatch (names its index).

    Examples:
        >>> import numpy as np
        >>> from cadence.interop.rllib.sample_batch import SampleBatch
        >>> b1 = SampleBatch(a=np.array([1, 2]), infos=[{"x": 1}, {}])
        >>> b2 = SampleBatch(a=np.array([3]), infos=[{}])
        >>> both = concat_samples([b1, b2])
        >>> both["a"].tolist(), both["infos"]
        ([1, 2, 3], [{'x': 1}, {}, {}])
    """
    sample_batch = _sample_batch_class()
    samples = list(samples)
    for i, sample in enumerate(samples):
        _check_batch(i, sample, "concat_samples")
    if any(isinstance(sample, MultiAgentBatch) for sample in samples):
        return concat_samples_into_ma_batch(samples)
    batches = [sample for sample in samples if sample.count > 0]
    if not batches:
        return sample_batch()
    head = batches[0]
    for i, batch in enumerate(batches[1:], start=1):
        _check_compatible(head, batch, i)
    data = {key: concat_leaves(key, [dict.__getitem__(batch, key) for batch in batches]) for key in head.keys()}
    weighted = [(b.num_grad_updates, b.count) for b in batches if b.num_grad_updates is not None]
    return sample_batch(
        data,
        _time_major=head.time_major,
        _zero_padded=head.zero_padded,
        _max_seq_len=None if head.max_seq_len is None else max(b.max_seq_len for b in batches),
        _num_grad_updates=sum(n * c for n, c in weighted) / sum(c for _, c in weighted) if weighted else None,
    )


def concat_samples_into_ma_batch(samples: Iterable[Union[SampleBatch, MultiAgentBatch]]) -> MultiAgentBatch:
    """Concatenates batches into a MultiAgentBatch: per policy, env steps summed.

    A SampleBatch counts as the ``"default_policy"`` batch (empty ones are skipped).

    Args:
        samples: the batches, in order.

    Returns:
        The new MultiAgentBatch.

    Raises:
        TypeError: an item is not a SampleBatch or MultiAgentBatch (names its index).

    Examples:
        >>> import numpy as np
        >>> from cadence.interop.rllib.sample_batch import MultiAgentBatch, SampleBatch
        >>> ma = MultiAgentBatch({"default_policy": SampleBatch(a=np.array([1, 2]))}, 2)
        >>> out = concat_samples_into_ma_batch([ma, SampleBatch(a=np.array([3]))])
        >>> out["default_policy"]["a"].tolist(), out.env_steps()
        ([1, 2, 3], 3)
    """
    sample_batch = _sample_batch_class()
    per_policy: dict[Any, list[SampleBatch]] = {}
    env_steps = 0
    for i, sample in enumerate(samples):
        _check_batch(i, sample, "concat_samples_into_ma_batch")
        if isinstance(sample, sample_batch):
            if sample.count == 0:
                continue
            sample = sample.as_multi_agent()
        for policy_id, batch in sample.policy_batches.items():
            per_policy.setdefault(policy_id, []).append(batch)
        env_steps += sample.env_steps()
    return MultiAgentBatch({pid: concat_samples(batches) for pid, batches in per_policy.items()}, env_steps)
