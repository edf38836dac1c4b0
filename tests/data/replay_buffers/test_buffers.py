"""Replay buffers: the tutorial's buffer, samples, priorities, prefetch, checkpoints."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from cadence.data.replay_buffers import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedReplayBuffer,
    PrioritizedSampler,
    RandomSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)
from cadence.envs import RandomCropTensorDict

REPO_ROOT = Path(__file__).resolve().parents[3]


def _trajectories(n: int, length: int = 200, start: int = 0) -> TensorDict:
    steps = torch.arange(start, start + n * length, dtype=torch.float32).reshape(n, length, 1)
    return TensorDict(
        {"observation": steps.expand(n, length, 3).clone(), "action": torch.zeros(n, length, 1),
         "next": {"observation": steps + 1, "reward": torch.ones(n, length, 1),
                  "done": torch.zeros(n, length, 1, dtype=torch.bool)}},
        [n, length],
    )


# ---------------------------------------------------------------- the tutorial, as written
def test_the_tutorials_make_replay_buffer_runs_as_written() -> None:
    tmpdir = tempfile.TemporaryDirectory()
    buffer_scratch_dir = tmpdir.name

    def make_replay_buffer(buffer_size, batch_size, random_crop_len, prefetch=3, prb=False):
        if prb:
            sampler = PrioritizedSampler(
                max_capacity=buffer_size,
                alpha=0.7,
                beta=0.5,
            )
        else:
            sampler = RandomSampler()
        replay_buffer = TensorDictReplayBuffer(
            storage=LazyMemmapStorage(
                buffer_size,
                scratch_dir=buffer_scratch_dir,
            ),
            batch_size=batch_size,
            sampler=sampler,
            pin_memory=False,
            prefetch=prefetch,
            transform=RandomCropTensorDict(random_crop_len, sample_dim=1),
        )
        return replay_buffer

    def ceil_div(x, y):
        return -x // (-y)

    traj_len = 200
    buffer_size = ceil_div(1_000_000, traj_len)
    frames_per_batch = 800
    update_to_data = 64
    random_crop_len = 25
    batch_size = ceil_div(64 * frames_per_batch, update_to_data * random_crop_len)
    for prb in (False, True):
        replay_buffer = make_replay_buffer(
            buffer_size=buffer_size, batch_size=batch_size, random_crop_len=random_crop_len, prefetch=3, prb=prb
        )
        for start in range(0, 3 * 800, 800):  # three collector batches of [4, 200]
            replay_buffer.extend(_trajectories(4, start=start).cpu())
            for _ in range(4):
                sampled_tensordict = replay_buffer.sample()
                assert sampled_tensordict.batch_size == (batch_size, random_crop_len)
                # the crop keeps consecutive steps of one trajectory
                observation = sampled_tensordict["observation"][..., 0]
                assert torch.equal(observation[:, 1:] - observation[:, :-1], torch.ones(batch_size, 24))
                if prb:
                    sampled_tensordict.set("td_error", torch.rand(sampled_tensordict.shape))
                    replay_buffer.update_tensordict_priority(sampled_tensordict)
        assert len(replay_buffer) == 12
        assert "_weight" in sampled_tensordict.keys() if prb else "index" in sampled_tensordict.keys()
    tmpdir.cleanup()


def test_the_tutorial_storage_with_ndim_2_counts_frames() -> None:
    buffer = TensorDictReplayBuffer(storage=LazyMemmapStorage(1000, ndim=2), batch_size=16)
    buffer.extend(_trajectories(4))
    assert len(buffer) == 800 and buffer.storage.shape == (5, 200)
    sample = buffer.sample()
    assert sample.batch_size == (16,)
    assert torch.equal(sample["observation"][:, 0], sample["index"].float())  # frame i holds value i


# ---------------------------------------------------------------- samples
def test_samples_carry_their_index_and_priorities_go_back() -> None:
    buffer = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyTensorStorage(8), batch_size=4000)
    data = TensorDict({"obs": torch.arange(8.0)}, [8])
    buffer.extend(data)
    assert data["index"].tolist() == list(range(8))
    data["td_error"] = torch.tensor([0.0] * 7 + [1.0])
    buffer.update_tensordict_priority(data)
    sample = buffer.sample()
    assert torch.equal(sample["obs"], sample["index"].float())
    assert (sample["index"] == 7).float().mean() > 0.99  # the others have priority eps only


def test_trajectory_samples_send_the_largest_priority_of_each_item() -> None:
    buffer = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyTensorStorage(3), batch_size=3)
    buffer.extend(_trajectories(3, length=5))
    sample = buffer.sample()
    sample["td_error"] = torch.arange(15.0).reshape(3, 5)
    buffer.update_tensordict_priority(sample)
    # each sampled row is one item: it takes the largest priority of its steps (alpha = 1, eps ~ 0)
    best: dict[int, float] = {}
    for row, item in enumerate(sample["index"][:, 0].tolist()):
        best[item] = max(best.get(item, 0.0), float(sample["td_error"][row].max()))
    expected = torch.ones(3, dtype=torch.float64)  # unsampled items keep the default priority
    for item, value in best.items():
        expected[item] = value
    assert torch.allclose(buffer.sampler.priorities().double(), expected, atol=1e-6)
    with pytest.raises(KeyError, match="td_error"):
        buffer.update_tensordict_priority(sample.exclude("td_error"))


def test_same_seed_same_samples() -> None:
    def run() -> list[list[int]]:
        buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=5,
                                        transform=RandomCropTensorDict(3, sample_dim=1))
        buffer.set_seed(11)
        buffer.extend(_trajectories(10, length=6))
        return [buffer.sample()["observation"][:, :, 0].tolist() for _ in range(3)]

    assert run() == run()


def test_an_empty_buffer_or_no_batch_size_says_so() -> None:
    buffer = ReplayBuffer(storage=LazyTensorStorage(4))
    with pytest.raises(ValueError, match="needs a batch size"):
        buffer.sample()
    with pytest.raises(ValueError, match="empty"):
        buffer.sample(2)


def test_list_storage_buffers_collate_and_iterate_an_epoch() -> None:
    buffer = ReplayBuffer(storage=ListStorage(10), sampler=SamplerWithoutReplacement(), batch_size=2)
    buffer.extend([torch.tensor([i]) for i in range(6)])
    batches = list(buffer)
    assert len(batches) == 3 and all(b.shape == (2, 1) for b in batches)
    assert sorted(torch.cat(batches).squeeze(-1).tolist()) == list(range(6))
    strings = ReplayBuffer(batch_size=3)
    strings.extend(["a", "b"])
    assert set(strings.sample()) <= {"a", "b"}


def test_extend_along_another_dim() -> None:
    buffer = ReplayBuffer(storage=LazyTensorStorage(10), dim_extend=1, batch_size=2)
    buffer.extend(torch.arange(6.0).reshape(2, 3))  # 3 items of 2 values, laid along dim 1
    assert len(buffer) == 3 and buffer[torch.tensor([2])].tolist() == [[2.0, 5.0]]


def test_prefetch_samples_ahead_while_another_thread_extends() -> None:
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(5000), batch_size=32, prefetch=3)
    buffer.extend(TensorDict({"x": torch.zeros(100, 2)}, [100]))
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(50):
                buffer.extend(TensorDict({"x": torch.full((40, 2), float(i))}, [40]))
        except BaseException as err:  # noqa: BLE001 - reported to the test thread
            errors.append(err)

    thread = threading.Thread(target=writer)
    thread.start()
    for _ in range(200):
        sample = buffer.sample()
        assert sample.batch_size == (32,)
        # items are whole: both values of an item were written together
        assert torch.equal(sample["x"][:, 0], sample["x"][:, 1])
    thread.join()
    assert not errors and len(buffer) == 2100


def test_prioritized_replay_buffer_rejects_bad_priorities() -> None:
    buffer = PrioritizedReplayBuffer(alpha=0.6, beta=0.4, storage=LazyTensorStorage(10), batch_size=2)
    buffer.extend(torch.arange(4.0))
    with pytest.raises(ValueError, match="priorit"):
        buffer.update_priority(torch.tensor([1]), torch.tensor([-1.0]))
    with pytest.raises(ValueError, match="priorit"):
        buffer.update_priority(torch.tensor([1]), torch.tensor([float("nan")]))


# ---------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("prioritized", [False, True])
def test_dumps_then_loads_continues_exactly(tmp_path, prioritized: bool) -> None:
    def make() -> TensorDictReplayBuffer:
        storage = LazyMemmapStorage(20, scratch_dir=tempfile.mkdtemp(dir=tmp_path))
        if prioritized:
            return TensorDictPrioritizedReplayBuffer(alpha=0.8, beta=0.6, storage=storage, batch_size=6)
        return TensorDictReplayBuffer(storage=storage, batch_size=6)

    buffer = make()
    buffer.set_seed(3)
    for start in (0, 40, 80):  # wraps around: the cursor is not at 0
        data = TensorDict({"x": torch.arange(start, start + 9.0)}, [9])
        buffer.extend(data)
        data["td_error"] = torch.rand(9, generator=torch.Generator().manual_seed(start))
        if prioritized:
            buffer.update_tensordict_priority(data)
    buffer.dumps(tmp_path / "ckpt")
    expected = [buffer.sample()["x"].tolist() for _ in range(3)]
    buffer.extend(TensorDict({"x": torch.full((3,), -1.0)}, [3]))
    expected_after_write = buffer.sample()["x"].tolist()

    restored = make()
    restored.loads(tmp_path / "ckpt")
    assert len(restored) == 20 and restored.write_count == 27
    assert [restored.sample()["x"].tolist() for _ in range(3)] == expected
    restored.extend(TensorDict({"x": torch.full((3,), -1.0)}, [3]))
    assert restored.sample()["x"].tolist() == expected_after_write


_KILLED_WRITER = textwrap.dedent(
    """
    import sys, time, torch
    from pathlib import Path
    from tensordict import TensorDict
    from cadence.data.replay_buffers import LazyMemmapStorage, TensorDictReplayBuffer

    path, scratch = Path(sys.argv[1]), sys.argv[2]
    buffer = TensorDictReplayBuffer(storage=LazyMemmapStorage(100, scratch_dir=scratch), batch_size=4)
    buffer.extend(TensorDict({"x": torch.arange(10.0)}, [10]))
    buffer.dumps(path)  # the first checkpoint: complete
    buffer.extend(TensorDict({"x": torch.arange(100.0, 150.0)}, [50]))
    storage_writer = buffer.storage._dump_writer

    def slow_writer():
        write = storage_writer()

        def slow_write(directory):
            write(directory)  # half the checkpoint is on disk...
            (path / "WRITING").write_text("now")
            time.sleep(60)  # ...and the process is killed here

        return slow_write

    buffer.storage._dump_writer = slow_writer
    buffer.dumps(path)
    """
)


def test_a_process_killed_while_dumping_leaves_the_last_checkpoint_loadable(tmp_path) -> None:
    path = tmp_path / "ckpt"
    path.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(path), str(tmp_path / "scratch")], env=env)
    try:
        deadline = time.monotonic() + 60
        while not (path / "WRITING").exists():
            assert process.poll() is None, "the writer exited before the second checkpoint"
            assert time.monotonic() < deadline, "the writer never reached the second checkpoint"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()
    assert process.returncode == -signal.SIGKILL
    assert any(p.name.endswith(".partial") for p in path.iterdir())  # the interrupted write is there...
    buffer = TensorDictReplayBuffer(storage=LazyMemmapStorage(100, scratch_dir=tmp_path / "fresh"), batch_size=4)
    buffer.loads(path)  # ...and the first checkpoint is what loads
    assert len(buffer) == 10 and buffer.write_count == 10
    assert buffer[torch.arange(10)]["x"].tolist() == list(range(10))
    buffer.dumps(path)  # the next write clears the leftovers
    assert not any(p.name.endswith(".partial") for p in path.iterdir())


def test_add_writes_the_index_over_the_items_own_batch_dims() -> None:
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(4), batch_size=1)
    buffer.extend(_trajectories(1, length=5))
    trajectory = _trajectories(1, length=5)[0]  # one element: a [5] trajectory
    assert buffer.add(trajectory) == 1
    assert trajectory["index"].tolist() == [1] * 5


def test_the_reference_s_compilable_flag_is_kept_and_shared_writers_are_refused():
    # the reference's PPO script builds its buffer with compilable=cfg.compile.compile
    storage = LazyTensorStorage(8, compilable=True)
    buffer = TensorDictReplayBuffer(storage=storage, batch_size=2, compilable=True)
    buffer.extend(TensorDict({"x": torch.arange(4.0)}, [4]))
    assert buffer.compilable and storage.compilable and buffer.sample()["x"].shape == (2,)
    with pytest.raises(ValueError, match="shared=True: a buffer written by several processes"):
        TensorDictReplayBuffer(storage=LazyTensorStorage(8), shared=True)
