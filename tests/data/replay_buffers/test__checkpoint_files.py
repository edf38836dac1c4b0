"""Buffer checkpoints on disk: files that hold no code, every bad file a CheckpointError
that names it, and a buffer left as it was when loads() fails."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data.replay_buffers import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedReplayBuffer,
    PrioritizedSliceSampler,
    RandomSampler,
    ReplayBuffer,
    SliceSampler,
    SliceSamplerWithoutReplacement,
    TensorDictMaxValueWriter,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
    TensorStorage,
)
from cadence.data.replay_buffers._checkpoint_files import write_meta
from cadence.data.replay_buffers.checkpoint import CheckpointError, latest_checkpoint
from cadence.envs.transforms import Transform


# ---------------------------------------------------------------- helpers
def _plant_marker(path: str) -> None:
    """What a planted payload runs, if anything unpickles it: it leaves a file behind."""
    Path(path).write_text("the payload ran")


class _Payload:
    """A pickle that calls ``_plant_marker(marker)`` when it is loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Callable[[str], None], tuple[str]]:
        return (_plant_marker, (str(self.marker),))


def _buffer(tmp_path: Path, *, storage: str = "memmap", prioritized: bool = False, capacity: int = 20) -> Any:
    make_storage = {
        "memmap": lambda: LazyMemmapStorage(capacity, scratch_dir=tempfile.mkdtemp(dir=tmp_path)),
        "tensor": lambda: LazyTensorStorage(capacity),
        "list": lambda: ListStorage(capacity),
    }[storage]
    if storage == "list":
        if prioritized:
            return PrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=make_storage(), batch_size=4)
        return ReplayBuffer(storage=make_storage(), batch_size=4)
    if prioritized:
        return TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=make_storage(), batch_size=4)
    return TensorDictReplayBuffer(storage=make_storage(), batch_size=4)


def _fill(buffer: Any, start: float, n: int) -> None:
    values = torch.arange(start, start + n, dtype=torch.float32)
    if isinstance(buffer.storage, ListStorage):
        buffer.extend(values)
        return
    data = TensorDict(
        {"obs": values[:, None].expand(n, 3).clone(),
         "next": {"obs": values[:, None] + 1, "done": values[:, None] > 5}},
        [n],
    )
    buffer.extend(data)
    if isinstance(buffer, TensorDictPrioritizedReplayBuffer):
        data["td_error"] = values / 10 + 1
        buffer.update_tensordict_priority(data)


def _checkpoint(tmp_path: Path, **kwargs: Any) -> Path:
    """A checkpoint of a buffer of 27 writes (20 held, the cursor at 7); its directory."""
    buffer = _buffer(tmp_path, **kwargs)
    buffer.set_seed(1)
    for start in (0, 100, 200):
        _fill(buffer, start, 9)
    buffer.dumps(tmp_path / "ckpt")
    return latest_checkpoint(tmp_path / "ckpt")


def _plain(value: Any) -> Any:
    """``value`` with tensors and tensordicts as lists, for comparisons."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return value.tolist()
    if isinstance(value, TensorDictBase):
        return {str(key): item.tolist() for key, item in value.items(True, True)}
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _contents(buffer: Any) -> Any:
    """Everything loads() may change: the items, the fill, the cursor, the sampler's state."""
    items = buffer[torch.arange(len(buffer))] if len(buffer) else None
    return _plain([len(buffer), buffer.write_count, buffer.writer.state_dict(), buffer.sampler.state_dict(), items])


def _target(tmp_path: Path, **kwargs: Any) -> Any:
    """A buffer built like the checkpoint's, holding other data (so that a failed load shows)."""
    buffer = _buffer(tmp_path, **kwargs)
    buffer.set_seed(7)
    _fill(buffer, 1000, 5)
    return buffer


def _assert_still_usable(buffer: Any, before: Any) -> None:
    assert _contents(buffer) == before  # nothing changed...
    buffer.sample()  # ...and the buffer goes on
    _fill(buffer, 5000, 2)
    assert len(buffer) == before[0] + 2


def _reseal(meta_file: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edits a metadata file and writes it back with a matching checksum (a careful forger)."""
    body = json.loads(meta_file.read_text())
    body.pop("crc32")
    edit(body)
    write_meta(meta_file, body)


def _describe(meta_file: Path, locate: Callable[[dict[str, Any]], dict[str, Any]], data_file: Path) -> None:
    """Records ``data_file``'s present size and checksum in its metadata entry (``locate``)."""
    content = data_file.read_bytes()

    def edit(body: dict[str, Any]) -> None:
        locate(body).update(bytes=len(content), crc32=zlib.crc32(content))

    _reseal(meta_file, edit)


def _leaf(body: dict[str, Any]) -> dict[str, Any]:
    return body["data"]["leaves"][0]


def _state(body: dict[str, Any]) -> dict[str, Any]:
    return body["state"]


# ---------------------------------------------------------------- what the files hold
def test_a_checkpoint_holds_json_raw_data_and_weights_only_state(tmp_path) -> None:
    directory = _checkpoint(tmp_path, prioritized=True)
    files = sorted(str(file.relative_to(directory)) for file in directory.rglob("*") if file.is_file())
    assert files == ["buffer.json", "buffer.pt", "storage/data/0.bin", "storage/data/1.bin", "storage/data/2.bin",
                     "storage/storage.json"]
    for name in ("buffer.json", "storage/storage.json"):
        assert isinstance(json.loads((directory / name).read_text()), dict)
    assert (directory / "storage/data/0.bin").stat().st_size == 20 * 3 * 4  # raw float32, nothing else
    torch.load(directory / "buffer.pt", weights_only=True)  # loads with torch's data-only unpickler


def test_a_list_storage_checkpoint_holds_data_only(tmp_path) -> None:
    directory = _checkpoint(tmp_path, storage="list")
    assert sorted(file.name for file in directory.rglob("*") if file.is_file()) == [
        "buffer.json", "buffer.pt", "storage.json", "storage.pt"]
    assert len(torch.load(directory / "storage" / "storage.pt", weights_only=True)["items"]) == 20


# ---------------------------------------------------------------- planted payloads
_MEMMAP_FILES = ["buffer.json", "buffer.pt", "storage/storage.json", "storage/data/0.bin"]
_LIST_FILES = ["buffer.json", "buffer.pt", "storage/storage.json", "storage/storage.pt"]


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize(
    ("storage", "name"), [("memmap", name) for name in _MEMMAP_FILES] + [("list", name) for name in _LIST_FILES]
)
def test_a_payload_planted_in_any_file_is_refused_and_never_runs(tmp_path, storage: str, name: str,
                                                                 verify: bool) -> None:
    marker = tmp_path / "payload-ran"
    pickle.loads(pickle.dumps(_Payload(marker)))  # the payload is live: unpickled, it runs...
    assert marker.exists()
    marker.unlink()
    directory = _checkpoint(tmp_path, storage=storage)
    planted = directory / name
    if planted.suffix == ".pt":  # a torch checkpoint whose pickle calls _plant_marker
        torch.save({"sampler": _Payload(marker), "writer": {}, "transform": {}, "items": [_Payload(marker)]}, planted)
    else:
        planted.write_bytes(pickle.dumps(_Payload(marker)))
    # a careful forger also records the planted file's size and checksum in the metadata
    if name == "buffer.pt":
        _describe(directory / "buffer.json", _state, planted)
    elif name == "storage/storage.pt":
        _describe(directory / "storage/storage.json", _state, planted)
    elif name.endswith(".bin"):
        _describe(directory / "storage/storage.json", _leaf, planted)
    buffer = _target(tmp_path, storage=storage)
    before = _contents(buffer)
    with pytest.raises(CheckpointError, match=f"{planted.name}: ") as raised:
        buffer.loads(tmp_path / "ckpt", verify=verify)
    assert not marker.exists()  # ...but loads() never unpickles it
    assert str(planted) in str(raised.value) or (planted.suffix == ".bin" and planted.name in str(raised.value))
    if planted.suffix == ".pt":
        assert "refused without running anything" in str(raised.value)
        assert "weights_only" not in str(raised.value)  # no advice to load it unsafely
    _assert_still_usable(buffer, before)


def test_storage_loads_refuses_a_planted_payload(tmp_path) -> None:
    marker = tmp_path / "payload-ran"
    storage = ListStorage(4)
    storage.set(torch.arange(2), ["a", "b"])
    storage.dumps(tmp_path / "s")
    torch.save({"rows_written": 1, "items": [_Payload(marker)]}, tmp_path / "s" / "storage.pt")
    _describe(tmp_path / "s" / "storage.json", _state, tmp_path / "s" / "storage.pt")
    restored = ListStorage(4)
    with pytest.raises(CheckpointError, match="storage.pt: not a state file that holds only data"):
        restored.loads(tmp_path / "s")
    assert not marker.exists() and len(restored) == 0


# ---------------------------------------------------------------- damaged files
def _truncate(file: str, keep: float) -> Callable[[Path], None]:
    def damage(directory: Path) -> None:
        content = (directory / file).read_bytes()
        (directory / file).write_bytes(content[: int(len(content) * keep)])

    return damage


def _flip_byte(file: str) -> Callable[[Path], None]:
    def damage(directory: Path) -> None:
        content = bytearray((directory / file).read_bytes())
        content[len(content) // 2] ^= 0xFF
        (directory / file).write_bytes(bytes(content))

    return damage


def _remove(file: str) -> Callable[[Path], None]:
    def damage(directory: Path) -> None:
        target = directory / file
        shutil.rmtree(target) if target.is_dir() else target.unlink()

    return damage


def _edit_storage_meta(edit: Callable[[dict[str, Any]], None], reseal: bool) -> Callable[[Path], None]:
    def damage(directory: Path) -> None:
        file = directory / "storage" / "storage.json"
        if reseal:
            _reseal(file, edit)
        else:
            body = json.loads(file.read_text())
            edit(body)
            file.write_text(json.dumps(body))

    return damage


def _set_shape(body: dict[str, Any]) -> None:
    _leaf(body)["shape"] = [20, 4]


def _set_rows(body: dict[str, Any]) -> None:
    body["rows_written"] = 15


def _set_bytes(body: dict[str, Any]) -> None:
    _leaf(body)["bytes"] = 1000


def _set_batch(body: dict[str, Any]) -> None:
    body["data"]["batch_size"] = [10]
    for leaf in body["data"]["leaves"]:
        leaf["shape"][0] = 10


DAMAGES = {
    "data file truncated": (
        _truncate("storage/data/0.bin", 0.5), r"0\.bin: holds 120 bytes, its metadata says 240 \(truncated\)"),
    "data file zero-length": (_truncate("storage/data/0.bin", 0.0), r"0\.bin: holds 0 bytes, its metadata says 240"),
    "data file with a flipped byte": (_flip_byte("storage/data/0.bin"), r"0\.bin: its checksum differs"),
    "data folder missing": (_remove("storage/data"), r"0\.bin: missing"),
    "buffer.pt truncated": (
        _truncate("buffer.pt", 0.5), r"buffer\.pt: holds \d+ bytes, its metadata says \d+ \(truncated\)"),
    "buffer.pt zero-length": (_truncate("buffer.pt", 0.0), r"buffer\.pt: holds 0 bytes"),
    "buffer.pt with a flipped byte": (_flip_byte("buffer.pt"), r"buffer\.pt: its checksum differs"),
    "buffer.pt missing": (_remove("buffer.pt"), r"buffer\.pt: missing"),
    "buffer.json truncated": (_truncate("buffer.json", 0.5), r"buffer\.json: not valid JSON"),
    "buffer.json zero-length": (_truncate("buffer.json", 0.0), r"buffer\.json: not valid JSON"),
    "buffer.json missing": (_remove("buffer.json"), r"buffer\.json: missing\.$"),
    "storage.json truncated": (_truncate("storage/storage.json", 0.5), r"storage\.json: not valid JSON"),
    "storage.json missing": (_remove("storage/storage.json"), r"storage\.json: missing"),
    "storage folder missing": (_remove("storage"), r"storage\.json: missing"),
    "shape edited": (
        _edit_storage_meta(_set_shape, reseal=False), r"storage\.json: its content does not match its checksum"),
    "shape edited, checksum redone": (
        _edit_storage_meta(_set_shape, reseal=True),
        r"storage\.json: its entries do not match this storage's: missing \[\], unexpected \[\]; 'obs': element shape "
        r"\[4\] float32, this storage's \[3\] float32"),
    "rows_written edited, checksum redone": (
        _edit_storage_meta(_set_rows, reseal=True), r"storage\.json: data of batch size \[20\] for 15 written rows"),
    "batch size edited, checksum redone": (
        _edit_storage_meta(_set_batch, reseal=True), r"storage\.json: data of batch size \[10\] for 20 written rows"),
    "byte count edited, checksum redone": (
        _edit_storage_meta(_set_bytes, reseal=True), r"0\.bin: its metadata gives 1000 bytes, but shape \[20, 3\]"),
}


@pytest.mark.parametrize("case", list(DAMAGES))
def test_a_damaged_checkpoint_raises_checkpoint_error_naming_the_file_and_changes_nothing(tmp_path, case: str) -> None:
    damage, message = DAMAGES[case]
    damage(_checkpoint(tmp_path, prioritized=True))
    buffer = _target(tmp_path, prioritized=True)
    before = _contents(buffer)
    with pytest.raises(CheckpointError, match=message):
        buffer.loads(tmp_path / "ckpt")
    _assert_still_usable(buffer, before)


def test_without_verification_sizes_are_still_checked_but_not_checksums(tmp_path) -> None:
    directory = _checkpoint(tmp_path)
    _flip_byte("storage/data/0.bin")(directory)
    buffer = _target(tmp_path)
    buffer.loads(tmp_path / "ckpt", verify=False)  # a flipped byte goes unseen without the checksum...
    assert len(buffer) == 20
    _truncate("storage/data/0.bin", 0.9)(directory)
    with pytest.raises(CheckpointError, match=r"0\.bin: holds 216 bytes"):  # ...a short file does not
        buffer.loads(tmp_path / "ckpt", verify=False)


def test_an_older_pickled_checkpoint_is_refused_unread(tmp_path) -> None:
    directory = _checkpoint(tmp_path)
    (directory / "buffer.json").unlink()  # the layout of older checkpoints: pickles, no JSON
    (directory / "storage" / "storage.json").unlink()
    buffer = _target(tmp_path)
    with pytest.raises(CheckpointError, match="written by an older Cadence, whose checkpoints held pickles"):
        buffer.loads(tmp_path / "ckpt")


def test_no_checkpoint_at_all_is_a_file_not_found_error(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="holds no complete checkpoint"):
        _buffer(tmp_path).loads(tmp_path)


# ---------------------------------------------------------------- checkpoints that do not fit
MISMATCHES = {
    "capacity 1000 into 100": ({"capacity": 1000}, {"capacity": 100},
                               r"buffer\.json: the checkpoint holds a buffer of capacity 1000, this buffer's "
                               r"capacity is 100;"),
    "capacity 100 into 1000": ({"capacity": 100}, {"capacity": 1000},
                               r"buffer\.json: the checkpoint holds a buffer of capacity 100, this buffer's "
                               r"capacity is 1000;"),
    "prioritized into uniform": ({"prioritized": True}, {},
                                 r"buffer\.json: the checkpoint's sampler is a PrioritizedSampler, this buffer's a "
                                 r"RandomSampler; its priorities would be lost"),
    "uniform into prioritized": ({}, {"prioritized": True},
                                 r"buffer\.json: the checkpoint's sampler is a RandomSampler, this buffer's a "
                                 r"PrioritizedSampler; it holds no priorities to load"),
    "list storage into tensor storage": ({"storage": "list"}, {"storage": "tensor"}, "writer is a RoundRobinWriter"),
}


@pytest.mark.parametrize("case", list(MISMATCHES))
def test_a_checkpoint_of_another_buffer_raises_checkpoint_error_and_changes_nothing(tmp_path, case: str) -> None:
    written, loading, message = MISMATCHES[case]
    _checkpoint(tmp_path, **written)
    buffer = _target(tmp_path, **loading)
    before = _contents(buffer)
    with pytest.raises(CheckpointError, match=message):
        buffer.loads(tmp_path / "ckpt")
    _assert_still_usable(buffer, before)


@pytest.mark.parametrize(("written", "loading"), [("list", "tensor"), ("tensor", "list")])
def test_another_kind_of_storage_is_refused(tmp_path, written: str, loading: str) -> None:
    data = [torch.tensor(float(i)) for i in range(5)]
    storages = {"list": lambda: ListStorage(10), "tensor": lambda: LazyTensorStorage(10)}
    source = ReplayBuffer(storage=storages[written](), batch_size=2)
    source.extend(torch.stack(data))
    source.dumps(tmp_path / "ckpt")
    target = ReplayBuffer(storage=storages[loading](), batch_size=2)
    target.extend(torch.full((3,), -1.0))
    before = _plain([len(target), target[torch.arange(3)]])
    kinds = {"list": "ListStorage", "tensor": "LazyTensorStorage"}
    with pytest.raises(CheckpointError, match=rf"storage\.json: written by a {kinds[written]}, which this "
                                              rf"{kinds[loading]} cannot load"):
        target.loads(tmp_path / "ckpt")
    assert _plain([len(target), target[torch.arange(3)]]) == before


def test_other_entries_are_refused_by_a_storage_that_holds_data(tmp_path) -> None:
    _checkpoint(tmp_path)
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(20), batch_size=2)
    buffer.extend(TensorDict({"obs": torch.zeros(3, 5)}, [3]))
    with pytest.raises(CheckpointError, match=r"storage\.json: its entries do not match this storage's: missing \[\], "
                                              r"unexpected \[\"\('next', 'done'\)\", \"\('next', 'obs'\)\"\]"):
        buffer.loads(tmp_path / "ckpt")
    assert len(buffer) == 3


def test_a_preallocated_storage_without_allocation_is_refused(tmp_path) -> None:
    _checkpoint(tmp_path, storage="tensor")
    buffer = TensorDictReplayBuffer(storage=TensorStorage(None, max_size=20), batch_size=2)
    with pytest.raises(CheckpointError, match="has no allocation to load into"):
        buffer.loads(tmp_path / "ckpt")


class _Scale(Transform):
    """A buffer transform with state (a buffer), to check that transform states must fit."""

    def __init__(self) -> None:
        super().__init__(in_keys=["obs"])
        self.register_buffer("scale", torch.tensor(2.0))

    def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        return value * self.scale


def test_a_transform_state_that_does_not_fit_is_refused_and_every_part_put_back(tmp_path) -> None:
    _checkpoint(tmp_path, prioritized=True)  # written without transforms
    buffer = _target(tmp_path, prioritized=True)
    buffer.append_transform(_Scale())
    before = _contents(buffer)
    with pytest.raises(CheckpointError, match=r"buffer\.pt: the transform state does not fit this buffer's Compose"):
        buffer.loads(tmp_path / "ckpt")
    _assert_still_usable(buffer, before)  # the sampler's state, loaded before the transform's, was put back


# ---------------------------------------------------------------- what loads
def test_a_memmap_checkpoint_loads_into_an_in_memory_storage_and_back(tmp_path) -> None:
    _checkpoint(tmp_path, prioritized=True)
    expected = _buffer(tmp_path, prioritized=True)
    expected.loads(tmp_path / "ckpt")
    in_memory = _buffer(tmp_path, storage="tensor", prioritized=True)
    in_memory.loads(tmp_path / "ckpt")
    assert _contents(in_memory) == _contents(expected)
    assert _plain(in_memory.sample()) == _plain(expected.sample())


def test_a_list_storage_dumps_data_of_many_kinds_and_loads_it_back(tmp_path) -> None:
    items = [
        "a", 3, 2.5, None, b"raw", (1, "x"), [torch.ones(2)], {"k": np.arange(3), 4: {1, 2}},
        TensorDict({"obs": torch.zeros(2, 3), "next": {"r": torch.ones(2)}}, [2]), np.float32(1.5), frozenset({"f"}),
    ]
    buffer = ReplayBuffer(storage=ListStorage(20), batch_size=2)
    buffer.extend(items)
    buffer.dumps(tmp_path / "ckpt")
    restored = ReplayBuffer(storage=ListStorage(20), batch_size=2)
    restored.loads(tmp_path / "ckpt")
    loaded = restored[torch.arange(len(items))]
    assert _plain(loaded) == _plain(items)
    assert [type(item) for item in loaded] == [type(item) for item in items]
    assert loaded[8]["next", "r"].tolist() == [1.0, 1.0]


class _Opaque:
    pass


def test_a_list_storage_refuses_to_dump_objects_that_need_code_and_writes_nothing(tmp_path) -> None:
    buffer = ReplayBuffer(storage=ListStorage(10), batch_size=2)
    buffer.extend(["a", "b", {"inner": _Opaque()}])
    with pytest.raises(TypeError, match=r"ListStorage state\['items'\]\[2\]\['inner'\] is a _Opaque, which a "
                                        r"checkpoint cannot hold"):
        buffer.dumps(tmp_path / "ckpt")
    assert not (tmp_path / "ckpt").exists()


class _NumpySampler(RandomSampler):
    """A sampler whose state holds what weights_only cannot load by itself: numpy arrays, a numpy RNG state."""

    def __init__(self) -> None:
        super().__init__()
        self.rng = np.random.default_rng(3)
        self.seen = np.zeros(4, dtype=np.int64)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "rng": self.rng.bit_generator.state, "seen": self.seen, "legacy":
                np.random.RandomState(5).get_state()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self.rng.bit_generator.state = state_dict["rng"]
        self.seen = state_dict["seen"]
        assert isinstance(state_dict["legacy"][1], np.ndarray)  # a numpy array, as RandomState gave it


def test_numpy_state_round_trips_without_pickled_numpy(tmp_path) -> None:
    buffer = ReplayBuffer(storage=LazyTensorStorage(10), sampler=_NumpySampler(), batch_size=2)
    buffer.extend(torch.arange(5.0))
    buffer.sampler.rng.random(3)
    buffer.sampler.seen[1] = 9
    buffer.dumps(tmp_path / "ckpt")
    restored = ReplayBuffer(storage=LazyTensorStorage(10), sampler=_NumpySampler(), batch_size=2)
    restored.loads(tmp_path / "ckpt")
    assert restored.sampler.seen.tolist() == [0, 9, 0, 0]
    assert restored.sampler.rng.random() == buffer.sampler.rng.random()


def test_an_empty_buffer_round_trips(tmp_path) -> None:
    for storage in ("memmap", "tensor", "list"):
        path = tmp_path / storage
        _buffer(tmp_path, storage=storage).dumps(path)
        restored = _target(tmp_path, storage=storage)
        restored.loads(path)
        assert len(restored) == 0 and restored.write_count == 0


def test_a_dumped_storage_checks_its_own_capacity(tmp_path) -> None:
    storage = LazyMemmapStorage(10, scratch_dir=tmp_path / "scratch")
    storage.set(torch.arange(3), TensorDict({"obs": torch.ones(3, 2)}, [3]))
    storage.dumps(tmp_path / "s")
    with pytest.raises(CheckpointError, match=r"storage\.json: written by a storage of max_size=10, this "
                                              r"LazyTensorStorage has max_size=5"):
        LazyTensorStorage(5).loads(tmp_path / "s")
    loaded = LazyTensorStorage(10)
    loaded.loads(tmp_path / "s")
    assert loaded.get(torch.tensor([2]))["obs"].tolist() == [[1.0, 1.0]]
    assert os.listdir(tmp_path / "s" / "data") == ["0.bin"]


def test_an_edited_shape_is_caught_by_the_file_size_when_the_storage_is_empty(tmp_path) -> None:
    _edit_storage_meta(_set_shape, reseal=True)(_checkpoint(tmp_path))
    buffer = _buffer(tmp_path)  # nothing allocated yet: nothing to compare the entries with
    with pytest.raises(CheckpointError, match=r"0\.bin: its metadata gives 240 bytes, but shape \[20, 4\] of float32 "
                                              r"takes 320"):
        buffer.loads(tmp_path / "ckpt")
    assert len(buffer) == 0 and buffer.storage.shape is None


_COMPONENTS = {
    "slice sampler, trajectories of 2 dims": lambda scratch: {
        "storage": LazyMemmapStorage(60, scratch_dir=tempfile.mkdtemp(dir=scratch), ndim=2),
        "sampler": SliceSampler(slice_len=4, end_key=("next", "done"))},
    "slice sampler without replacement": lambda scratch: {
        "storage": LazyTensorStorage(60), "sampler": SliceSamplerWithoutReplacement(slice_len=4, traj_key="episode")},
    "prioritized slice sampler": lambda scratch: {
        "storage": LazyTensorStorage(60),
        "sampler": PrioritizedSliceSampler(60, alpha=0.7, beta=0.5, slice_len=4, traj_key="episode")},
    "max-value writer": lambda scratch: {
        "storage": LazyTensorStorage(60), "writer": TensorDictMaxValueWriter(rank_key="reward")},
}


@pytest.mark.parametrize("case", list(_COMPONENTS))
def test_every_sampler_and_writer_state_round_trips(tmp_path, case: str) -> None:
    def make() -> TensorDictReplayBuffer:
        return TensorDictReplayBuffer(**_COMPONENTS[case](tmp_path), batch_size=8)

    def data(start: int) -> TensorDict:
        steps = torch.arange(start, start + 40, dtype=torch.float32)
        td = TensorDict({"obs": steps[:, None], "reward": steps.flip(0), "episode": steps.long() // 10,
                         "next": {"done": (steps % 10 == 9)[:, None]}}, [40])
        return td.reshape(4, 10) if case.endswith("2 dims") else td

    buffer = make()
    buffer.set_seed(2)
    buffer.extend(data(0))
    buffer.sample()
    buffer.extend(data(40))
    buffer.dumps(tmp_path / "ckpt")
    restored = make()
    restored.loads(tmp_path / "ckpt")
    assert _contents(restored) == _contents(buffer)
    assert [_plain(restored.sample()) for _ in range(3)] == [_plain(buffer.sample()) for _ in range(3)]


def _set_list_rows(body: dict[str, Any]) -> None:
    body["rows_written"] = 3


def _set_allocated_rows(body: dict[str, Any]) -> None:
    body["shape"] = [7]


@pytest.mark.parametrize(
    ("storage", "edit", "message"),
    [
        ("list", _set_list_rows, r"storage\.pt: holds a state of rows_written=20, its metadata says 3"),
        ("memmap", _set_allocated_rows, r"storage\.json: field 'shape' gives 7 rows, fewer than the 20 rows"),
    ],
)
def test_metadata_that_contradicts_the_data_is_refused(tmp_path, storage: str, edit: Any, message: str) -> None:
    _edit_storage_meta(edit, reseal=True)(_checkpoint(tmp_path, storage=storage))
    buffer = _target(tmp_path, storage=storage)
    before = _contents(buffer)
    with pytest.raises(CheckpointError, match=message):
        buffer.loads(tmp_path / "ckpt")
    _assert_still_usable(buffer, before)
