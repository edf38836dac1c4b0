"""RayCollector on a local 2-CPU Ray: batches, weights, faults, shutdown (issues #20, #31).

Building a collector starts its actors (each imports torch and Cadence: seconds on 2 cores),
so the tests share them: one asynchronous collector serves the batch, weight, fault and
shutdown tests, in this order, and each other collector tests several faults in a row.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium
import pytest
import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential

ray = pytest.importorskip("ray", reason='Ray is not installed (pip install "cadence[ray]"); RayCollector is untested')

from cadence.collectors.distributed import RayCollector  # noqa: E402
from cadence.envs import GymEnv, GymWrapper  # noqa: E402
from tests.fakes import CountingEnv, FailingEnv  # noqa: E402

pytestmark = pytest.mark.usefixtures("local_ray")  # tests/conftest.py: the Ray the Ray tests share


def cartpole() -> GymEnv:
    return GymEnv("CartPole-v1")


def failing() -> FailingEnv:
    return FailingEnv(fail_at=80)


def steady() -> CountingEnv:
    return CountingEnv(max_count=100)  # the failing env's data, without the failure


#: long enough to be a hang for every batch of these tests; the collector kills the actor first
HANG_S = 3600.0
#: the tests' batch_timeout_s: their batches of 50 frames take milliseconds
TIMEOUT_S = 2.0


class HangsAt60(CountingEnv):
    """Hangs in its 60th step (the second batch of 50)."""

    def __init__(self) -> None:
        super().__init__(max_count=100)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if float(self.count.max()) + 1 >= 60:
            time.sleep(HANG_S)
        return super()._step(tensordict)


class HangsOnceThenFails(FailingEnv):
    """Hangs in a step while ``flag`` exists, deleting it (so the restarted actor goes on),
    and breaks at step 80 as FailingEnv does."""

    def __init__(self, flag: str) -> None:
        super().__init__(fail_at=80)
        self.flag = flag

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if os.path.exists(self.flag):
            os.remove(self.flag)
            time.sleep(HANG_S)
        return super()._step(tensordict)


class HangsInProcess(gymnasium.Wrapper):
    """Hangs in ``step`` in the actor whose process id is written in ``flag``."""

    def __init__(self, env: gymnasium.Env, flag: str) -> None:
        super().__init__(env)
        self.flag = flag

    def step(self, action: Any) -> Any:
        if os.path.exists(self.flag) and Path(self.flag).read_text() == str(os.getpid()):
            time.sleep(HANG_S)
        return self.env.step(action)


def hangable_cartpole(flag: str) -> GymWrapper:
    return GymWrapper(HangsInProcess(gymnasium.make("CartPole-v1"), flag))


class Picky(torch.nn.Linear):
    """A layer with a check of its own, which the driver cannot know: it refuses a negative bias."""

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        if (state_dict[prefix + "bias"] < 0).any():
            raise ValueError("Picky refuses a negative bias")
        super()._load_from_state_dict(state_dict, prefix, *args)


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

    def __init__(self, hang_flag: Path) -> None:
        self.policy = marked_policy(0.0)
        self.hang_flag = hang_flag  # holds the process id of an actor whose env is to hang
        self.collector = RayCollector(functools.partial(hangable_cartpole, str(hang_flag)), self.policy,
                                      frames_per_batch=1000, total_frames=-1, num_collectors=2)
        self.batches = iter(self.collector)


@pytest.fixture(scope="module")
def shared(local_ray: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    state = Shared(tmp_path_factory.mktemp("ray") / "hang")
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


def test_weight_updates_reach_every_actor_and_wrong_ones_are_refused_first(shared: Shared) -> None:
    good = shared.policy.state_dict()
    weight = "module.0.module.weight"
    with pytest.raises(ValueError, match=re.escape(f"weights['{weight}']: expected shape (1, 4), got (2, 4)")):
        shared.collector.update_policy_weights_({**good, weight: torch.zeros(2, 4)})
    with pytest.raises(TypeError, match=re.escape(f"weights['{weight}']: expected dtype torch.float32, got torch.float64")):
        shared.collector.update_policy_weights_({**good, weight: torch.zeros(1, 4, dtype=torch.float64)})
    with pytest.raises(ValueError, match="the weights lack key 'module.0.module.bias'"):
        shared.collector.update_policy_weights_({weight: good[weight]})
    with pytest.raises(ValueError, match="key 'extra' is not in the policy's state dict"):
        shared.collector.update_policy_weights_({**good, "extra": torch.zeros(1)})
    assert shared.collector.policy_version == 0  # nothing was published: the batches below say version 0 or 1
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


def test_shutdown_kills_a_hung_actor_and_leaves_no_actor_process(shared: Shared) -> None:
    pids = shared.collector.worker_pids()
    assert len(pids) == 2
    shared.hang_flag.write_text(str(pids[0]))  # actor 0's env hangs in its next step
    in_a_row = 0
    while in_a_row < 4:  # batches from actor 1 only: actor 0 hangs (batch_timeout_s, 300 s, is far off)
        in_a_row = in_a_row + 1 if int(next(shared.batches)["worker_id"][0]) == 1 else 0
    started = time.monotonic()
    shared.collector.shutdown()
    # a generous bound (no speed is asserted): it waited 30 s per hung actor before
    assert time.monotonic() - started < 20
    assert gone(pids)
    with pytest.raises(RuntimeError, match="after shutdown"):
        next(iter(shared.collector))


def test_sync_weights_an_actor_refuses_surface_then_its_hung_batch_is_named_past_the_budget() -> None:
    # one actor, whose env hangs in its 60th step (the second batch), and no restart left
    # (the async test below sees a hung actor restarted)
    policy = TensorDictModule(Picky(1, 1), ["count"], ["action"])
    collector = RayCollector(HangsAt60, policy, frames_per_batch=50, total_frames=-1, sync=True,
                             max_worker_restarts=0, batch_timeout_s=TIMEOUT_S)
    try:
        batches = iter(collector)
        assert next(batches)["worker_id"][:, 0].tolist() == [0]
        # weights the driver cannot fault (the right shapes), refused by the actor's policy
        collector.update_policy_weights_({"module.weight": torch.ones(1, 1), "module.bias": -torch.ones(1)})
        with pytest.raises(RuntimeError, match="actor 0 could not load the weights of policy_version 1: "
                                               "ValueError: Picky refuses a negative bias"):
            next(batches)
        # meanwhile its second batch hangs
        with pytest.raises(RuntimeError, match=r"actor 0 failed 1 times, past max_worker_restarts=0; last: its batch "
                                               r"timed out after 2 s \(batch_timeout_s=2.0\)"):
            next(iter(collector))
    finally:
        collector.shutdown()


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


def test_async_a_hung_actor_is_restarted_then_an_env_that_raises_exhausts_the_budget(tmp_path: Path) -> None:
    flag = tmp_path / "hang"
    collector = RayCollector(functools.partial(HangsOnceThenFails, str(flag)), None, frames_per_batch=50,
                             total_frames=-1, max_worker_restarts=1, batch_timeout_s=TIMEOUT_S)
    try:
        first_pid = collector.worker_pids()[0]
        flag.touch()  # the first life hangs in its first step; the restarted actor collects
        batches = iter(collector)
        assert next(batches).batch_size == torch.Size([50])
        assert collector.stats()["restarts"] == [1] and collector.worker_pids()[0] != first_pid
        # its second batch breaks at step 80: the second failure, past the budget
        with pytest.raises(RuntimeError, match=r"actor 0 failed 2 times, past max_worker_restarts=1.*broke at step 80"):
            for _ in batches:
                pass
    finally:
        collector.shutdown()


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="2 env factories for num_collectors=3"):
        RayCollector([cartpole, cartpole], None, frames_per_batch=10, num_collectors=3)
    with pytest.raises(ValueError, match="'total_frames' goes to RayCollector"):
        RayCollector(cartpole, None, frames_per_batch=10, collector_kwargs={"total_frames": 5})
    for bad in (float("nan"), float("inf"), 0, -1.0):
        with pytest.raises(ValueError, match=f"batch_timeout_s must be None or a finite number of seconds > 0, got {bad}"):
            RayCollector(cartpole, None, frames_per_batch=10, batch_timeout_s=bad)
    with pytest.raises(TypeError, match="batch_timeout_s must be None or a number of seconds, got str: '5'"):
        RayCollector(cartpole, None, frames_per_batch=10, batch_timeout_s="5")
