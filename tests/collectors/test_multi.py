"""Multi-process collectors: totals and shapes, ids across workers, weight updates,
seeds and state, and no process left behind (normal end, break, exception, faults)."""

from __future__ import annotations

import faulthandler
import gc
import multiprocessing
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule

from cadence.collectors import (
    MultiaSyncDataCollector,
    MultiAsyncCollector,
    MultiSyncCollector,
    MultiSyncDataCollector,
    SyncDataCollector,
)
from cadence.envs import GymEnv, PendulumEnv, SerialEnv
from cadence.envs.libs.gym import GymWrapper
from cadence.envs.utils import SpecMismatchError
from cadence.envs.workers import WorkerDiedError, WorkerException
from tests.fakes import OffSpaceEnv

NAMES = ("MultiSyncDataCollector", "MultiaSyncDataCollector")


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture(autouse=True)
def _no_leftovers() -> Iterator[None]:
    faulthandler.dump_traceback_later(120, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
    gc.collect()
    leftovers = [p for p in multiprocessing.active_children() if p.name.startswith(NAMES)]
    assert not leftovers, f"worker processes left behind: {leftovers}"


def pids_of(collector: Any) -> list[int]:
    return [pid for pid in collector._pool.pids if pid is not None]


def assert_gone(pids: list[int], within: float = 3.0) -> None:
    deadline = time.monotonic() + within
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pids if _running(pid)]


def pendulum() -> GymEnv:
    return GymEnv("Pendulum-v1")


def linear_policy() -> TensorDictModule:
    torch.manual_seed(0)
    return TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])


def test_sync_total_shapes_and_ids() -> None:
    collector = MultiSyncDataCollector([pendulum] * 2, linear_policy(), frames_per_batch=400, total_frames=1600)
    batches = list(collector)
    collector.shutdown()
    assert [b.batch_size for b in batches] == [torch.Size([2, 200])] * 4
    assert sum(b.numel() for b in batches) == 1600 and batches[0].names == [None, "time"]
    ids = torch.cat([b["collector", "traj_ids"] for b in batches], -1)
    # Pendulum truncates at 200 steps: each worker runs 4 trajectories, ids interleaved
    assert ids[0].unique().tolist() == [0, 2, 4, 6] and ids[1].unique().tolist() == [1, 3, 5, 7]


def test_sync_batched_envs_concatenate() -> None:
    make = lambda: SerialEnv(2, pendulum)  # noqa: E731
    with MultiSyncCollector(make, num_workers=2, frames_per_batch=40, total_frames=80) as collector:
        batches = list(collector)
    assert [b.batch_size for b in batches] == [torch.Size([4, 10])] * 2


def test_async_total_and_shapes() -> None:
    with MultiAsyncCollector([pendulum] * 2, linear_policy(), frames_per_batch=50, total_frames=500) as collector:
        batches = list(collector)
    assert len(batches) == 10 and all(b.batch_size == torch.Size([50]) for b in batches)
    firsts = {int(b["collector", "traj_ids"][0]) for b in batches}
    assert firsts <= {0, 1, 2, 3} and {0, 1} <= firsts


@pytest.mark.parametrize("cls", [MultiSyncDataCollector, MultiaSyncDataCollector])
def test_workers_pick_up_new_weights(cls: type) -> None:
    policy = linear_policy()
    collector = cls([pendulum] * 2, policy, frames_per_batch=20)
    try:
        first = collector.next()
        assert not first["action"].eq(0.25).all()
        with torch.no_grad():
            policy.module.weight.zero_()
            policy.module.bias.fill_(0.25)
        collector.update_policy_weights_()
        # the async workers may have started their next batch with the old weights
        for _ in range(4):
            batch = collector.next()
        assert batch["action"].eq(0.25).all()
    finally:
        collector.shutdown()


def test_weights_given_as_state_dict() -> None:
    policy = linear_policy()
    with MultiSyncDataCollector([pendulum] * 2, policy, frames_per_batch=20) as collector:
        other = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
        with torch.no_grad():
            other.module.weight.zero_()
            other.module.bias.fill_(-0.5)
        collector.update_policy_weights_(other.state_dict())
        assert collector.next()["action"].eq(-0.5).all()


def test_set_seed_reproduces_and_state_dict_round_trip() -> None:
    outs = []
    for _ in range(2):
        with MultiSyncDataCollector([pendulum] * 2, frames_per_batch=20, total_frames=40) as collector:
            collector.set_seed(3)
            outs.append(torch.cat(list(collector), -1))
    assert torch.equal(outs[0]["next", "observation"], outs[1]["next", "observation"])
    with MultiSyncDataCollector([pendulum] * 2, frames_per_batch=20) as collector:
        collector.next()
        state = collector.state_dict()
        assert state["frames"] == 20 and len(state["workers"]) == 2
        collector.next()
        collector.load_state_dict(state)
        assert collector.state_dict()["frames"] == 20
        with pytest.raises(ValueError, match="worker states"):
            collector.load_state_dict({"frames": 0, "iter": 0, "workers": []})


@pytest.mark.parametrize("cls", [MultiSyncDataCollector, MultiaSyncDataCollector])
@pytest.mark.parametrize("how", ["break", "exception", "gc"])
def test_no_process_left_behind(cls: type, how: str) -> None:
    collector = cls([pendulum] * 2, frames_per_batch=20, total_frames=1000)
    pids: list[int] = []
    if how == "break":
        for _ in collector:
            pids = pids_of(collector)
            break
        collector.shutdown()
    elif how == "exception":
        with pytest.raises(ZeroDivisionError):
            with collector:
                for _ in collector:
                    pids = pids_of(collector)
                    raise ZeroDivisionError
    else:
        collector.next()
        pids = pids_of(collector)
        del collector
        gc.collect()
    assert len(pids) == 2
    assert_gone(pids)


class RaisingEnv(PendulumEnv):
    """Raises at its fifth step."""

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.steps = getattr(self, "steps", 0) + 1
        if self.steps == 5:
            raise RuntimeError("the simulator exploded")
        return super()._step(tensordict)


class DyingEnv(PendulumEnv):
    """Kills its process at its fifth step."""

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.steps = getattr(self, "steps", 0) + 1
        if self.steps == 5:
            os._exit(3)
        return super()._step(tensordict)


# The faulty worker shares the collector with a healthy one, which a loaded machine may
# run far ahead: with a total_frames, the healthy worker could deliver them all before the
# fault. So the collectors run without one (they stop only by raising), and each batch
# checks the deadline, so that a fault that goes unnoticed fails the test rather than hangs it.
def _raises_within_10_s(collector: Any, error: type[Exception], message: str) -> None:
    start = time.monotonic()
    with pytest.raises(error, match=message):
        for _ in collector:
            assert time.monotonic() - start < 10, f"no {error.__name__} 10 s after the fault"
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("cls", [MultiSyncDataCollector, MultiaSyncDataCollector])
def test_a_worker_that_raises_is_named(cls: type) -> None:
    with cls([PendulumEnv, RaisingEnv], frames_per_batch=20, total_frames=-1) as collector:
        _raises_within_10_s(collector, WorkerException, r"worker 1 .*the simulator exploded")
        assert collector._closed


@pytest.mark.parametrize("cls", [MultiSyncDataCollector, MultiaSyncDataCollector])
def test_a_worker_that_dies_is_named(cls: type) -> None:
    with cls([DyingEnv, PendulumEnv], frames_per_batch=20, total_frames=-1) as collector:
        _raises_within_10_s(collector, WorkerDiedError, r"worker 0 .*exited with code 3")


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match=r"create_env_fn\[0\]"):
        MultiSyncDataCollector([pendulum(), pendulum], frames_per_batch=10)
    with pytest.raises(ValueError, match="num_workers"):
        MultiSyncDataCollector(pendulum, frames_per_batch=10)
    with pytest.raises(ValueError, match="num_workers=3"):
        MultiSyncDataCollector([pendulum] * 2, num_workers=3, frames_per_batch=10)


def _marking_backend(graph_module: Any, example_inputs: Any) -> Any:
    """Stands for inductor in the workers: leaves one file per compiling process."""
    Path(os.environ["CADENCE_TEST_COMPILE_MARKS"], str(os.getpid())).touch()
    return graph_module.forward


def test_compile_and_cudagraph_options_reach_the_workers(tmp_path: Path, monkeypatch: Any, recwarn: Any) -> None:
    monkeypatch.setenv("CADENCE_TEST_COMPILE_MARKS", str(tmp_path))
    with MultiSyncDataCollector(
        [pendulum] * 2, linear_policy(), frames_per_batch=20, total_frames=60,
        compile_policy={"backend": _marking_backend, "warmup": 1}, cudagraph_policy=True,
    ) as collector:
        batches = list(collector)
    assert len(batches) == 3
    assert len(list(tmp_path.iterdir())) == 2, "each worker compiles its own policy"
    if not torch.cuda.is_available():  # said once, in the main process, not by each worker
        skipped = [w for w in recwarn if "cudagraph_policy skipped" in str(w.message)]
        assert len(skipped) == 1 and skipped[0].filename == __file__
    with pytest.raises(TypeError, match="compile_policy: expected a bool or a dict"):
        MultiSyncDataCollector([pendulum] * 2, linear_policy(), frames_per_batch=20, compile_policy="max")


def _shared_dirs() -> set[str]:
    return {name for name in os.listdir("/dev/shm") if name.startswith("cadence-collector-")} if os.path.isdir(
        "/dev/shm"
    ) else set()


@pytest.mark.parametrize("share_batches", [True, False])
def test_delivered_batches_stay_as_delivered(share_batches: bool) -> None:
    before = _shared_dirs()
    with MultiaSyncDataCollector(
        [lambda: SerialEnv(2, pendulum)] * 2, frames_per_batch=20, total_frames=200, share_batches=share_batches
    ) as collector:
        batches = [(batch, batch.clone()) for batch in collector]
    for batch, copy in batches:
        assert torch.equal(batch["next", "observation"], copy["next", "observation"])
        # within a batch, each step starts where the previous one ended (Pendulum: no done here)
        assert torch.equal(batch["observation"][:, 1:], batch["next", "observation"][:, :-1])
    assert _shared_dirs() == before


@pytest.mark.parametrize("memfd", [True, False])
def test_shared_buffer_layout_and_fallback(memfd: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from tensordict import TensorDict

    from cadence.collectors import _shared

    if not memfd:  # a system without memory files: a named file, gone once mapped
        monkeypatch.setattr(_shared, "_memory_file", lambda: None)
    data = TensorDict({"a": torch.arange(6.0).reshape(2, 3), "empty": torch.zeros(2, 3, 0)}, batch_size=[2, 3])
    data.names = [None, "time"]
    buffer = _shared.SharedBuffer(data)  # the worker's side
    assert buffer.layout.named_file is not memfd
    parent_view = _shared.map_layout(buffer.layout)
    assert not os.path.exists(buffer.layout.path) or memfd
    assert torch.equal(parent_view["a"], data["a"]) and parent_view.names == [None, "time"]
    buffer.view.update_(data + 1)
    assert torch.equal(parent_view["a"], data["a"] + 1)
    buffer.close()
    assert torch.equal(parent_view["a"], data["a"] + 1)  # the mapping outlives the file
    assert not _shared.same_layout(buffer.view, data.exclude("empty"))
    assert not _shared.same_layout(buffer.view, data.float().apply(lambda x: x.double()))


@pytest.mark.slow
def test_spawned_workers_get_weights_through_the_pipe() -> None:
    policy = linear_policy()
    collector = MultiSyncDataCollector([pendulum] * 2, policy, frames_per_batch=20, start_method="spawn")
    try:
        collector.next()
        with torch.no_grad():
            policy.module.weight.zero_()
            policy.module.bias.fill_(0.3)
        collector.update_policy_weights_()
        assert collector.next()["action"].eq(0.3).all()
    finally:
        collector.shutdown()


class HangingEnv(PendulumEnv):
    """Hangs at its third step."""

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.steps = getattr(self, "steps", 0) + 1
        if self.steps == 3:
            time.sleep(60)
        return super()._step(tensordict)


@pytest.mark.parametrize("cls", [MultiSyncDataCollector, MultiaSyncDataCollector])
def test_a_worker_that_hangs_is_named_after_the_timeout(cls: type) -> None:
    from cadence.envs.workers import WorkerTimeoutError

    collector = cls([PendulumEnv, HangingEnv], frames_per_batch=20, total_frames=1_000_000, timeout=1.0)
    start = time.monotonic()
    with pytest.raises(WorkerTimeoutError, match=r"worker 1 "):
        for _ in collector:
            pass
    assert time.monotonic() - start < 10


# ---------------------------------------------------------------- bad values (issue #14)
@pytest.mark.parametrize("at", ["reset", "step"])
@pytest.mark.parametrize("cls", [MultiSyncDataCollector, MultiaSyncDataCollector])
def test_an_observation_off_its_declared_shape_is_named_by_the_worker(cls: type, at: str) -> None:
    make = lambda: GymWrapper(OffSpaceEnv(shape=(4,), at=at))  # noqa: E731
    collector = cls([make, make], frames_per_batch=8, total_frames=16)
    with pytest.raises(WorkerException) as info:
        collector.next()
    message = str(info.value)
    assert f"worker {info.value.index} of '{cls.__name__}'" in message
    assert "raised SpecMismatchError in 'collect'" in message
    assert (
        "gave an observation of shape (4,) and dtype float32 at key 'observation', "
        "but its spec (from the declared observation space) has shape (3,)" in message
    )
    assert f"{at}()" in message  # which call gave it
    assert isinstance(info.value.remote_exception, SpecMismatchError)
    assert collector._closed


def _per_worker(batches: list[TensorDictBase], workers: int = 2) -> list[list[torch.Tensor]]:
    """Each worker's delivered observations, in order (its trajectory ids are ``i mod workers``)."""
    out: list[list[torch.Tensor]] = [[] for _ in range(workers)]
    for batch in batches:
        ids = batch["collector", "traj_ids"].reshape(-1)
        out[int(ids[0]) % workers].append(batch["next", "observation"])
    return out


@pytest.mark.parametrize("cls", [MultiSyncDataCollector, MultiaSyncDataCollector])
def test_set_seed_rejects_bad_seeds_before_anything_changes(cls: type) -> None:
    # the workers used to be asked first: their refusal shut the collector down
    runs = []
    for refuse in (False, True):
        with cls([pendulum] * 2, frames_per_batch=20) as collector:
            collector.set_seed(3)
            batches = [collector.next()]
            if refuse:
                message = rf"{cls.__name__}.set_seed: the seed must be .*0 <= seed < 2\*\*63"
                for bad, error in ((-1, ValueError), (2**64, ValueError), (1.5, TypeError)):
                    with pytest.raises(error, match=message):
                        collector.set_seed(bad)
            while len(batches) < 6:
                batches.append(collector.next())
            assert not collector._closed
        runs.append(batches if cls is MultiSyncDataCollector else _per_worker(batches))
    if cls is MultiSyncDataCollector:
        for plain, refused in zip(*runs):
            assert torch.equal(plain["next", "observation"], refused["next", "observation"])
    else:  # the delivery order depends on timing; each worker's own sequence does not
        compared = 0
        for plain, refused in zip(*runs):
            for a, b in zip(plain, refused):
                assert torch.equal(a, b)
                compared += 1
        assert compared >= 1


def test_async_collector_is_one_worker_collecting_ahead() -> None:
    from cadence.collectors import AsyncCollector, aSyncDataCollector

    with AsyncCollector(pendulum, frames_per_batch=10, total_frames=30) as collector:
        collector.set_seed(2)
        batches = list(collector)
    assert [batch.numel() for batch in batches] == [10, 10, 10] and collector.num_workers == 1
    with SyncDataCollector(pendulum(), frames_per_batch=10, total_frames=30) as reference:
        reference.set_seed(2)
        expected = list(reference)
    for ours, theirs in zip(batches, expected):
        assert torch.equal(ours["next", "observation"], theirs["next", "observation"])
    assert aSyncDataCollector is AsyncCollector
    with pytest.raises(ValueError, match="AsyncCollector runs one worker"):
        AsyncCollector(pendulum, frames_per_batch=10, num_workers=2)
