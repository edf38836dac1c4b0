"""RayReplayBuffer: a buffer in a Ray actor, extended from tasks, sampled and reprioritized
from the driver and from tasks, checkpointed with the buffer's own dumps/loads, closed.

Each actor starts a worker process that imports torch (seconds on a small machine), so
the tests share one prioritized buffer (emptied and seeded by each) where they can, and
the module's buffers are built at once.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
import torch
from tensordict import TensorDict

from cadence.data.replay_buffers import (
    CheckpointError,
    LazyTensorStorage,
    ListStorage,
    SamplerWithoutReplacement,
    TensorDictPrioritizedReplayBuffer,
)
from cadence.data.replay_buffers.ray_buffer import RayReplayBuffer

# small shares of the session's 2 CPUs, so that several buffers and tasks fit at once
ACTOR = {"num_cpus": 0.25}
TASK_CPUS = 0.25
CAPACITY = 20


@pytest.fixture(scope="module")
def ray(local_ray: ModuleType) -> ModuleType:
    """The session's local Ray (tests/conftest.py)."""
    return local_ray


def _prioritized_buffer() -> RayReplayBuffer:
    return RayReplayBuffer(
        replay_buffer_cls=TensorDictPrioritizedReplayBuffer,
        alpha=1.0,
        beta=0.5,
        eps=1e-12,
        storage=functools.partial(LazyTensorStorage, CAPACITY),
        batch_size=64,
        remote_config=ACTOR,
    )


def _list_buffer() -> RayReplayBuffer:
    return RayReplayBuffer(storage=ListStorage(10), sampler=SamplerWithoutReplacement, batch_size=2,
                           remote_config=ACTOR)


@dataclass
class Buffers:
    """The module's buffers, built at once (each actor's process imports torch: their starts overlap)."""

    shared: RayReplayBuffer  # emptied and seeded by each test that takes it
    fresh: RayReplayBuffer  # loads the shared one's checkpoint
    listed: RayReplayBuffer  # a list buffer, closed by its test


@pytest.fixture(scope="module")
def buffers(ray: ModuleType) -> Iterator[Buffers]:
    with ThreadPoolExecutor(3) as pool:
        built = Buffers(*pool.map(lambda build: build(), [_prioritized_buffer, _prioritized_buffer, _list_buffer]))
    yield built
    for buffer in (built.shared, built.fresh, built.listed):
        buffer.close()


@pytest.fixture
def buffer(buffers: Buffers) -> RayReplayBuffer:
    """The shared buffer, empty and seeded."""
    buffers.shared.empty()
    buffers.shared.set_seed(0)
    return buffers.shared


def _steps(start: int, n: int) -> TensorDict:
    values = torch.arange(start, start + n, dtype=torch.float32)
    return TensorDict({"obs": values.unsqueeze(-1).expand(n, 3).clone(), "step": values.long()}, [n])


def test_without_ray_building_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(ImportError, match=r'pip install "cadence\[ray\]"'):
        RayReplayBuffer(storage=LazyTensorStorage(10))


def test_a_class_that_is_no_replay_buffer_is_refused() -> None:
    with pytest.raises(TypeError, match="replay_buffer_cls must be a ReplayBuffer class.*LazyTensorStorage"):
        RayReplayBuffer(replay_buffer_cls=LazyTensorStorage)  # type: ignore[arg-type]


def test_extended_from_a_task_sampled_in_the_driver(ray: ModuleType, buffer: RayReplayBuffer) -> None:
    @ray.remote(num_cpus=TASK_CPUS)
    def collect(buffer: RayReplayBuffer, starts: list[int]) -> list[int]:
        return [index for start in starts for index in buffer.extend(_steps(start, 5)).tolist()]

    assert ray.get(collect.remote(buffer, [0, 100])) == list(range(10))
    local = _steps(200, 5)
    assert buffer.extend(local).tolist() == list(range(10, 15))
    assert local["index"].tolist() == list(range(10, 15))  # as the local buffer writes it
    assert buffer.add(TensorDict({"obs": torch.full((3,), 300.0), "step": torch.tensor(300)}, [])) == 15
    assert len(buffer) == 16 and buffer.write_count == 16 and buffer.batch_size == 64

    sample = buffer.sample()
    assert sample.batch_size == torch.Size([64])
    assert set(sample["step"].tolist()) <= {*range(5), *range(100, 105), *range(200, 205), 300}
    assert (sample["obs"] == sample["step"].unsqueeze(-1).float()).all()  # items arrive whole
    assert torch.equal(buffer[sample["index"]]["step"], sample["step"])
    assert buffer.sample(batch_size=3).batch_size == torch.Size([3])
    data, info = buffer.sample(return_info=True)
    assert torch.equal(data["index"], info["index"]) and torch.equal(data["_weight"], info["_weight"])


def test_priorities_updated_remotely_change_what_is_sampled(ray: ModuleType, buffer: RayReplayBuffer) -> None:
    @ray.remote(num_cpus=TASK_CPUS)
    def learn(buffer: RayReplayBuffer, favourite: int) -> None:
        index = torch.arange(10)
        buffer.update_tensordict_priority(TensorDict({"index": index, "td_error": (index == favourite) * 100.0}, [10]))

    assert buffer.priority_key == "td_error"
    buffer.extend(_steps(0, 10))
    assert len(set(buffer.sample()["index"].tolist())) > 1  # equal priorities at first

    buffer.update_priority(torch.arange(10), torch.tensor([0.0] * 7 + [50.0, 0.0, 0.0]))
    assert set(buffer.sample()["index"].tolist()) == {7}

    ray.get(learn.remote(buffer, 2))  # a learner elsewhere sends priorities back
    sample = buffer.sample()
    assert set(sample["index"].tolist()) == {2}
    assert sorted(sample.keys()) == ["_weight", "index", "obs", "step"]

    sample["td_error"] = torch.zeros(64)  # the driver sends a sample's priorities back: all equal again
    buffer.update_tensordict_priority(sample)
    assert len(set(buffer.sample()["index"].tolist())) > 1


def test_dumps_then_loads_into_a_fresh_buffer_gives_the_same_contents(
    buffer: RayReplayBuffer, buffers: Buffers, tmp_path: Path
) -> None:
    buffer.extend(_steps(0, 25))  # wraps around: the cursor is part of the state
    priority = torch.zeros(CAPACITY)
    priority[3], priority[4] = 10.0, 20.0
    buffer.update_priority(torch.arange(CAPACITY), priority)
    buffer.dumps(tmp_path / "buffer")
    with buffers.fresh as restored:
        restored.loads(tmp_path / "buffer")

        assert len(restored) == len(buffer) == CAPACITY
        assert restored.write_count == buffer.write_count == 25
        assert (restored[torch.arange(CAPACITY)] == buffer[torch.arange(CAPACITY)]).all()
        first, second = buffer.sample(), restored.sample()  # priorities and generator came along
        assert set(first["index"].tolist()) <= {3, 4}
        assert torch.equal(first["index"], second["index"]) and torch.equal(first["_weight"], second["_weight"])
        assert buffer.extend(_steps(50, 1)).tolist() == restored.extend(_steps(50, 1)).tolist() == [5]

        # errors of the buffer's loads come back as themselves, and leave the buffer as it was
        with pytest.raises(FileNotFoundError, match="holds no complete checkpoint"):
            restored.loads(tmp_path / "nothing here")
        TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=0.5, storage=LazyTensorStorage(30)).dumps(tmp_path / "big")
        with pytest.raises(CheckpointError, match=f"capacity 30, this buffer's capacity is {CAPACITY}"):
            restored.loads(tmp_path / "big")
        assert (restored[torch.arange(CAPACITY)] == buffer[torch.arange(CAPACITY)]).all()

    local = TensorDictPrioritizedReplayBuffer(  # the checkpoint is the buffer's own: a local buffer reads it
        alpha=1.0, beta=0.5, storage=LazyTensorStorage(CAPACITY)
    )
    local.loads(tmp_path / "buffer")
    assert len(local) == CAPACITY and local.write_count == 25


def test_a_constructor_error_is_raised_here_and_leaves_no_actor(ray: ModuleType) -> None:
    free = ray.available_resources().get("CPU", 0.0)
    with pytest.raises(ValueError, match="shared=True"):
        RayReplayBuffer(storage=LazyTensorStorage(10), shared=True, remote_config=ACTOR)
    deadline = time.monotonic() + 10  # the actor's CPU share comes back once it is gone
    while ray.available_resources().get("CPU", 0.0) < free and time.monotonic() < deadline:
        time.sleep(0.05)
    # at least as much as before (an earlier test's actor may hand its share back meanwhile)
    assert ray.available_resources().get("CPU", 0.0) >= free


def test_a_list_buffer_holds_any_data_iterates_and_closes(ray: ModuleType, buffers: Buffers) -> None:
    buffer = buffers.listed
    with pytest.raises(ValueError, match="is empty: extend it before sampling"):  # raised as itself
        buffer.sample()
    assert buffer.extend(["a", "b", "c", "d"]).tolist() == [0, 1, 2, 3]
    batches = list(buffer)  # until the sampler without replacement runs out
    assert len(batches) == 2 and sorted(batches[0] + batches[1]) == ["a", "b", "c", "d"]
    with pytest.raises(TypeError, match="hosts a ReplayBuffer: use update_priority"):
        buffer.update_tensordict_priority(TensorDict({"index": torch.zeros(1)}, [1]))

    actor = buffer.actor
    buffer.close()
    assert buffer.closed
    with pytest.raises(ray.exceptions.RayActorError):  # the actor is gone
        ray.get(actor.length.remote(), timeout=30)
    with pytest.raises(RuntimeError, match="was closed"):
        len(buffer)
    buffer.shutdown()  # a second close does nothing
    assert "closed" in repr(buffer)
