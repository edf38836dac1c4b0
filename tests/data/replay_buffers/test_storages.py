"""Storages: layouts, reads by flat index, checks on written data, state."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from cadence.data.replay_buffers import LazyMemmapStorage, LazyTensorStorage, ListStorage, TensorStorage


def _transitions(n: int, start: int = 0) -> TensorDict:
    values = torch.arange(start, start + n, dtype=torch.float32)
    return TensorDict(
        {"obs": values[:, None].expand(n, 3).clone(), "next": {"obs": values[:, None] + 1, "done": values[:, None] > 5}},
        [n],
    )


@pytest.mark.parametrize("make", [lambda: LazyTensorStorage(10), lambda: LazyMemmapStorage(10)])
def test_lazy_storages_allocate_from_the_first_write_and_read_by_index(make) -> None:
    storage = make()
    assert storage.shape is None and len(storage) == 0
    storage.set(torch.arange(4), _transitions(4))
    assert storage.shape == (10,) and len(storage) == 4
    sample = storage.get(torch.tensor([3, 0, 3]))
    assert sample.batch_size == (3,)
    assert sample["obs"][:, 0].tolist() == [3.0, 0.0, 3.0]
    assert sample["next", "obs"].squeeze(-1).tolist() == [4.0, 1.0, 4.0]
    assert storage.get(2)["obs"].tolist() == [2.0] * 3
    assert storage.get(slice(1, 3))["obs"][:, 0].tolist() == [1.0, 2.0]
    assert storage.get_entry(("next", "obs")).squeeze(-1).tolist() == [1.0, 2.0, 3.0, 4.0]


def test_memmap_storage_writes_files_in_its_scratch_dir(tmp_path) -> None:
    storage = LazyMemmapStorage(100, scratch_dir=tmp_path)
    storage.set(torch.arange(2), _transitions(2))
    assert (tmp_path / "data" / "obs.memmap").exists()


def test_memmap_storage_removes_the_scratch_dir_it_made_and_keeps_the_users(tmp_path) -> None:
    import gc
    data = TensorDict({"obs": torch.ones(2, 3)}, [2])
    own = LazyMemmapStorage(4)
    own.set(torch.arange(2), data)
    made = own.scratch_dir
    assert made is not None and made.is_dir()
    users = LazyMemmapStorage(4, scratch_dir=tmp_path / "mine")
    users.set(torch.arange(2), data)
    del own, users
    gc.collect()
    # the reference's temporary memory maps go with the buffer; a 1M-frame buffer must not stay in /tmp
    assert not made.exists()
    assert (tmp_path / "mine").is_dir() and any((tmp_path / "mine").rglob("*.memmap"))


def test_two_dim_storages_count_elements_and_read_flat_indices() -> None:
    storage = LazyTensorStorage(1000, ndim=2)
    trajectories = TensorDict({"t": torch.arange(800).reshape(4, 200)}, [4, 200])
    storage.set(torch.arange(4), trajectories)
    assert storage.shape == (5, 200) and storage.max_size == 1000 and len(storage) == 800
    # flat index = row * 200 + column
    assert storage.get(torch.tensor([0, 201, 799]))["t"].tolist() == [0, 201, 799]
    with pytest.raises(ValueError, match="holds no row"):
        LazyTensorStorage(100, ndim=2).set(torch.arange(1), trajectories[:1])


def test_the_tutorial_layout_keeps_whole_trajectories_per_element() -> None:
    # ndim=1 (the default): a [4, 200] batch fills 4 elements, each a trajectory
    storage = LazyMemmapStorage(5000)
    storage.set(torch.arange(4), TensorDict({"obs": torch.zeros(4, 200, 3)}, [4, 200]))
    assert len(storage) == 4 and storage.get(torch.tensor([1, 2])).batch_size == (2, 200)


def test_writes_that_do_not_match_the_storage_name_the_entry() -> None:
    storage = LazyTensorStorage(10)
    storage.set(torch.arange(2), _transitions(2))
    with pytest.raises(ValueError, match=r"missing \[\"\('next', 'done'\)\"\]"):
        storage.set(torch.arange(2), _transitions(2).exclude(("next", "done")))
    with pytest.raises(ValueError, match=r"'obs' has element shape \(4,\), the storage holds \(3,\)"):
        bad = _transitions(2)
        bad["obs"] = torch.zeros(2, 4)
        storage.set(torch.arange(2), bad)
    with pytest.raises(TypeError, match=r"'obs' has dtype torch.float64, the storage holds torch.float32"):
        storage.set(torch.arange(2), _transitions(2).apply(lambda x: x.double() if x.is_floating_point() else x))
    with pytest.raises(TypeError, match="holds TensorDict data; got a Tensor"):
        storage.set(torch.arange(2), torch.zeros(2, 3))


def test_reading_an_empty_storage_says_so() -> None:
    with pytest.raises(ValueError, match="empty"):
        LazyTensorStorage(10).get(torch.tensor([0]))


def test_tensor_storage_uses_the_given_allocation() -> None:
    buffer = torch.zeros(6, 2)
    storage = TensorStorage(buffer)
    storage.set(torch.tensor([5, 1]), torch.ones(2, 2))
    assert buffer[5].tolist() == [1.0, 1.0] and len(storage) == 6
    with pytest.raises(ValueError, match="exceeds"):
        TensorStorage(buffer, max_size=7)


def test_list_storage_holds_any_object() -> None:
    storage = ListStorage(3)
    storage.set(torch.tensor([0, 1, 2]), ["a", 1, {"k": None}])
    storage.set(torch.tensor([0]), ["z"])
    assert storage.get(torch.tensor([2, 0])) == [{"k": None}, "z"]
    with pytest.raises(IndexError, match="out of range"):
        storage.get(torch.tensor([5]))


@pytest.mark.parametrize("make", [lambda: LazyTensorStorage(10), lambda: LazyMemmapStorage(10), lambda: ListStorage(10)])
def test_state_dict_and_dumps_round_trip(make, tmp_path) -> None:
    storage = make()
    data = _transitions(4)
    storage.set(torch.arange(4), data if not isinstance(storage, ListStorage) else list(data.unbind(0)))
    restored = make()
    restored.load_state_dict(storage.state_dict())
    assert len(restored) == 4
    storage.dumps(tmp_path / "s")
    loaded = make()
    loaded.loads(tmp_path / "s")
    for copy in (restored, loaded):
        got = copy.get(torch.tensor([3, 1]))
        want = storage.get(torch.tensor([3, 1]))
        if isinstance(got, list):
            assert all((a == b).all() for a, b in zip(got, want))
        else:
            assert (got == want).all()
