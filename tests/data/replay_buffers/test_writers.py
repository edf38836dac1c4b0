"""Writers: ring order at the capacity boundary, max-value ranking, state."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from cadence.data.replay_buffers import (
    LazyTensorStorage,
    RoundRobinWriter,
    TensorDictMaxValueWriter,
    TensorDictRoundRobinWriter,
)


def _writer(capacity: int, writer=None, ndim: int = 1):
    writer = writer or RoundRobinWriter()
    writer.register_storage(LazyTensorStorage(capacity, ndim=ndim))
    return writer


def test_round_robin_overwrites_the_oldest_exactly_at_the_boundary() -> None:
    writer = _writer(5)
    assert writer.extend(torch.arange(3.0)).tolist() == [0, 1, 2]
    assert writer.extend(torch.arange(3.0, 5.0)).tolist() == [3, 4]  # exactly full
    assert writer.cursor == 0 and len(writer.storage) == 5
    assert writer.extend(torch.tensor([5.0, 6.0])).tolist() == [0, 1]  # the two oldest go
    assert writer.storage.get(torch.arange(5)).tolist() == [5.0, 6.0, 2.0, 3.0, 4.0]
    assert writer.add(torch.tensor(7.0)) == 2
    assert writer.write_count == 8
    # more items than the capacity: the last 5 stay, each at its ring position
    assert writer.extend(torch.arange(10.0, 17.0)).tolist() == [0, 1, 2, 3, 4]
    assert writer.storage.get(torch.arange(5)).tolist() == [12.0, 13.0, 14.0, 15.0, 16.0]
    assert writer.cursor == 0 and writer.write_count == 15


def test_round_robin_on_trajectories_returns_their_element_indices() -> None:
    writer = _writer(6, ndim=2)
    index = writer.extend(TensorDict({"x": torch.zeros(2, 3)}, [2, 3]))
    assert index.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert writer.extend(TensorDict({"x": torch.ones(1, 3)}, [1, 3])).tolist() == [[0, 1, 2]]


def test_tensordict_writer_leaves_out_the_sample_entries() -> None:
    writer = _writer(4, TensorDictRoundRobinWriter())
    writer.extend(TensorDict({"x": torch.zeros(2), "index": torch.arange(2), "_weight": torch.ones(2)}, [2]))
    assert sorted(writer.storage.get(torch.arange(2)).keys()) == ["x"]


def test_max_value_writer_keeps_the_best_items() -> None:
    writer = _writer(3, TensorDictMaxValueWriter(rank_key="score"))
    writer.extend(TensorDict({"score": torch.tensor([1.0, 5.0]), "id": torch.tensor([0, 1])}, [2]))
    writer.extend(TensorDict({"score": torch.tensor([0.0, 9.0, 3.0, 4.0]), "id": torch.tensor([2, 3, 4, 5])}, [4]))
    kept = writer.storage.get(torch.arange(3))
    assert sorted(kept["score"].tolist()) == [4.0, 5.0, 9.0]
    writer.extend(TensorDict({"score": torch.tensor([0.5]), "id": torch.tensor([6])}, [1]))  # ranks lowest: dropped
    assert sorted(writer.storage.get(torch.arange(3))["id"].tolist()) == [1, 3, 5]


def test_max_value_writer_reduces_multi_valued_ranks_and_names_a_missing_key() -> None:
    writer = _writer(1, TensorDictMaxValueWriter(rank_key=("next", "reward"), reduction="mean"))
    writer.extend(TensorDict({"next": {"reward": torch.tensor([[1.0, 3.0], [2.0, 2.5]])}}, [2]))
    assert writer.storage.get(torch.arange(1))["next", "reward"].tolist() == [[2.0, 2.5]]
    with pytest.raises(KeyError, match="ranks by \\('next', 'reward'\\)"):
        writer.extend(TensorDict({"obs": torch.zeros(1)}, [1]))
    with pytest.raises(ValueError, match="reduction must be one of"):
        TensorDictMaxValueWriter(reduction="mode")


def test_writer_state_round_trip() -> None:
    writer = _writer(4)
    writer.extend(torch.arange(6.0))
    other = _writer(4)
    other.load_state_dict(writer.state_dict())
    assert (other.cursor, other.write_count) == (2, 6)
