"""RayCollector on a local 2-CPU Ray: batches, weights, faults, shutdown (issue #20).

Building a collector starts its actors (each imports torch and Cadence: seconds on 2 cores),
so the tests share them: one asynchronous collector serves the batch, weight, fault and
shutdown tests, in this order.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from types import ModuleType

import pytest
import torch
from tensordict.nn import TensorDictModule, TensorDictSequential

ray = pytest.importorskip("ray", reason='Ray is not installed (pip install "cadence[ray]"); RayCollector is untested')

from cadence.collectors.distributed import RayCollector  # noqa: E402
from cadence.envs import GymEnv  # noqa: E402
from tests.fakes import CountingEnv, FailingEnv  # noqa: E402

pytestmark = pytest.mark.usefixtures("local_ray")  # tests/conftest.py: the Ray the Ray tests share


def cartpole() -> GymEnv:
    return GymEnv("CartPole-v1")


def failing() -> FailingEnv:
    return FailingEnv(fail_at=80)


def steady() -> CountingEnv:
    return CountingEnv(max_count=100)  # the failing env's data, without the failure


def marked_policy(bias: float) -> TensorDictSequential:
    """A CartPole policy that writes its bias as "marker": which weights collected a frame."""
    marker = torch.nn.Linear(4, 1)
    torch.nn.init.zeros_(marker.weight)
    torch.nn.init.constant_(marker.bias, bias)
    return TensorDictSequential(
        TensorDictModule(marker, ["observation"], ["marker"]),
        TensorDictModule(lambda m: torch.nn.functional.one_hot((m[..., 0] > 0).long(), 2).bool(), ["marker"], ["action"]),
    )


class Shared:
    """The asynchronous collector the tests share, with its policy and batch iterator."""

    def __init__(self) -> None:
        self.policy = marked_policy(0.0)
        self.collector = RayCollector(cartpole, self.policy, frames_per_batch=1000, total_frames=-1, num_collectors=2)
        self.batches = iter(self.collector)


@pytest.fixture(scope="module")
def shared(local_ray: ModuleType) -> Iterator[Shared]:
    state = Shared()
    yield state
    state.collector.shutdown()


def gone(pids: list[int], within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        if not alive:
            return True
        time.sleep(0.1)
    return False


def test_async_batches(shared: Shared) -> None:
    batches = [next(shared.batches) for _ in range(2)]
    while {int(b["worker_id"][0]) for b in batches} != {0, 1}:  # one actor may start seconds after the other
        batches.append(next(shared.batches))
        assert len(batches) < 200, "only one actor delivers"
    assert all(b.batch_size == torch.Size([1000]) for b in batches)
    assert all(b["worker_id"].unique().numel() == 1 and b.device == torch.device("cpu") for b in batches)
    assert all(int(b["policy_version"][0]) == 0 and float(b["marker"].mean()) == 0.0 for b in batches)


def test_weight_updates_reach_every_actor(shared: Shared) -> None:
    torch.nn.init.constant_(shared.policy[0].module.bias, 5.0)
    shared.collector.update_policy_weights_()
    updated = set()
    for _ in range(30):
        batch = next(shared.batches)
        version = int(batch["policy_version"][0])
        assert float(batch["marker"].mean()) == (5.0 if version == 1 else 0.0)  # the version names the weights
        if version == 1:
            updated.add(int(batch["worker_id"][0]))
        if updated == {0, 1}:
            break
    assert updated == {0, 1}


def test_an_actor_killed_mid_collection_is_restarted_with_the_latest_weights(shared: Shared) -> None:
    torch.nn.init.constant_(shared.policy[0].module.bias, 3.0)
    shared.collector.update_policy_weights_()  # version 2
    victim = shared.collector.worker_pids()[0]
    os.kill(victim, signal.SIGKILL)  # mid-collection: each actor always has a request to work on
    killed_at = time.monotonic()
    while True:
        batch = next(shared.batches)
        if int(batch["worker_id"][0]) == 0 and shared.collector.stats()["restarts"][0] == 1:
            break
        # a generous bound (no speed is asserted here): benchmarks/bench_ray.py measures the delay
        assert time.monotonic() - killed_at < 60, "no batch from the restarted actor"
    # the restarted actor collected with the latest weights, read when it started again
    assert int(batch["policy_version"][0]) == 2 and float(batch["marker"].mean()) == 3.0
    assert shared.collector.worker_pids()[0] != victim
    stats = shared.collector.stats()
    assert stats["frames_lost"] <= 1000 and stats["restarts"] == [1, 0] and stats["live"] == [True, True]


def test_shutdown_leaves_no_actor_process(shared: Shared) -> None:
    pids = shared.collector.worker_pids()
    assert len(pids) == 2
    shared.collector.shutdown()
    assert gone(pids)
    with pytest.raises(RuntimeError, match="after shutdown"):
        next(iter(shared.collector))


def test_sync_batches_total_frames_and_an_env_that_raises_past_the_budget_ignored() -> None:
    # the second actor's env breaks at its 80th step, in the second batch; no restart, and ignored
    collector = RayCollector([steady, failing], None, frames_per_batch=50, total_frames=200, sync=True,
                             max_worker_restarts=0, ignore_worker_failures=True)
    try:
        batches = list(collector)
        assert [tuple(b.batch_size) for b in batches] == [(2, 50), (1, 50), (1, 50)]  # 200 frames
        assert batches[0]["worker_id"][:, 0].tolist() == [0, 1] and batches[1]["worker_id"][:, 0].tolist() == [0]
        stats = collector.stats()
        assert stats["frames"] == 200 and stats["restarts"] == [0, 1] and stats["live"] == [True, False]
    finally:
        collector.shutdown()


def test_an_env_that_raises_restarts_its_actor_then_past_the_budget_the_iterator_raises() -> None:
    collector = RayCollector(failing, None, frames_per_batch=50, total_frames=-1, max_worker_restarts=1)
    try:
        with pytest.raises(RuntimeError, match=r"actor 0 failed 2 times, past max_worker_restarts=1.*broke at step 80"):
            for _ in collector:
                pass
    finally:
        collector.shutdown()


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="2 env factories for num_collectors=3"):
        RayCollector([cartpole, cartpole], None, frames_per_batch=10, num_collectors=3)
    with pytest.raises(ValueError, match="'total_frames' goes to RayCollector"):
        RayCollector(cartpole, None, frames_per_batch=10, collector_kwargs={"total_frames": 5})
