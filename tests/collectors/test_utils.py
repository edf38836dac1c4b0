"""split_trajectories: ids or done flags, padding, the mask, order, errors."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from cadence.collectors.utils import split_trajectories


def test_split_by_ids_rows_and_padding() -> None:
    ids = torch.tensor([[0, 0, 2, 2], [1, 1, 1, 3]])
    data = TensorDict(
        {"x": torch.arange(8.0).reshape(2, 4), "collector": {"traj_ids": ids}}, batch_size=[2, 4], names=[None, "time"]
    )
    out = split_trajectories(data)
    assert out.batch_size == torch.Size([4, 3])
    assert out.names == [None, "time"]
    assert out["x"].tolist() == [[0, 1, 0], [2, 3, 0], [4, 5, 6], [7, 0, 0]]
    assert out["collector", "mask"].sum(-1).tolist() == [2, 2, 3, 1]
    assert out["collector", "traj_ids"][:, 0].tolist() == [0, 2, 1, 3]


def test_split_by_done_without_ids() -> None:
    done = torch.tensor([False, True, False, False, True, False]).unsqueeze(-1)
    data = TensorDict({"x": torch.arange(6.0), "next": {"done": done}}, batch_size=[6])
    out = split_trajectories(data)
    assert out["mask"].sum(-1).tolist() == [2, 3, 1]
    assert out["x"][1].tolist() == [2.0, 3.0, 4.0]


def test_same_id_in_two_rows_is_two_trajectories() -> None:
    data = TensorDict({"traj_ids": torch.zeros(2, 3, dtype=torch.long)}, batch_size=[2, 3])
    assert split_trajectories(data).batch_size == torch.Size([2, 3])


def test_explicit_trajectory_key() -> None:
    data = TensorDict({"x": torch.ones(4), "meta": {"ids": torch.tensor([5, 5, 7, 7])}}, batch_size=[4])
    out = split_trajectories(data, trajectory_key=("meta", "ids"))
    assert out["meta", "mask"].tolist() == [[True, True], [True, True]]


def test_errors_name_what_is_missing() -> None:
    with pytest.raises(ValueError, match="no trajectory ids"):
        split_trajectories(TensorDict({"x": torch.ones(3)}, batch_size=[3]))
    with pytest.raises(ValueError, match="time dim"):
        split_trajectories(TensorDict({"x": torch.ones(())}, batch_size=[]))
    with pytest.raises(ValueError, match="as_nested"):
        split_trajectories(TensorDict({"traj_ids": torch.zeros(3)}, batch_size=[3]), as_nested=True)
