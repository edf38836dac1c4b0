"""WorkerSet: RLlib's RolloutWorkers as Ray actors, with ``restart_failed_env_runners`` (issue #20).

The remote tests run on a local 2-CPU Ray and share one set of two workers (each worker
process imports torch: seconds on 2 cores): sampling, weights, a SIGKILL and an env that
raises at once (their restarts overlap), then the restart budget (one each) running out,
in this order.
"""

from __future__ import annotations

import math
import os
import re
import signal
import time
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from cadence.interop.rllib import DefaultCallbacks
from cadence.interop.rllib.algorithms.ppo import PPOTorchPolicy
from cadence.interop.rllib.policy import RandomPolicy
from cadence.interop.rllib.worker_set import WorkerSet, synchronous_parallel_sample
from tests.fakes import ExplodingEnv


def cartpole(env_context: Any) -> gym.Env:
    return gym.make("CartPole-v1")


class Recreated(DefaultCallbacks):
    """Records the workers that ``on_workers_recreated`` reports."""

    def __init__(self) -> None:
        self.recreated: list[int] = []

    def on_workers_recreated(self, *, algorithm: Any, worker_set: Any, worker_ids: list[int],
                             is_evaluation_workers: bool, **kwargs: Any) -> None:
        self.recreated.extend(worker_ids)


CONFIG = {"rollout_fragment_length": 50, "seed": 0, "callbacks": Recreated, "model": {"fcnet_hiddens": [16]}}


# ------------------------------------------------------------------ no Ray needed
def test_bad_fault_keys_are_named_together_and_old_names_point_to_the_new_ones() -> None:
    with pytest.raises(ValueError) as info:
        WorkerSet(env_creator=cartpole, default_policy_class=RandomPolicy,
                  config={"ignore_worker_failures": True, "num_workers": 1, "num_env_runners": 2,
                          "restart_failed_env_runners": "yes", "max_num_env_runner_restarts": -1})
    message = str(info.value)
    assert "'ignore_worker_failures' is RLlib's old name; use 'ignore_env_runner_failures'" in message
    assert "num_workers and num_env_runners disagree" in message
    assert "restart_failed_env_runners: expected a bool, got 'yes'" in message
    assert "max_num_env_runner_restarts: expected an int >= 0, got -1" in message


@pytest.mark.parametrize(("key", "value"), [
    ("delay_between_env_runner_restarts_s", math.nan), ("delay_between_env_runner_restarts_s", math.inf),
    ("delay_between_env_runner_restarts_s", -0.5), ("env_runner_health_probe_timeout_s", math.nan),
    ("env_runner_health_probe_timeout_s", math.inf), ("env_runner_health_probe_timeout_s", 0),
    ("env_runner_health_probe_timeout_s", -1.0), ("num_cpus_per_worker", math.nan), ("num_cpus_per_worker", math.inf),
    ("max_num_env_runner_restarts", math.inf), ("max_num_env_runner_restarts", 2.5),
])
def test_fault_values_that_are_not_finite_or_out_of_range_are_refused_before_any_worker_starts(key: str,
                                                                                               value: float) -> None:
    with pytest.raises(ValueError, match=rf"{key}: expected .*, got {re.escape(repr(value))}$"):
        WorkerSet(env_creator=cartpole, default_policy_class=RandomPolicy, config={"num_workers": 2, key: value})


def test_every_method_of_a_stopped_set_raises_at_once() -> None:
    workers = WorkerSet(env_creator=cartpole, default_policy_class=RandomPolicy)
    workers.stop()
    workers.stop()  # again: nothing to do
    calls = {"local_worker": workers.local_worker, "remote_workers": workers.remote_workers,
             "healthy_worker_ids": workers.healthy_worker_ids, "num_remote_workers": workers.num_remote_workers,
             "num_healthy_remote_workers": workers.num_healthy_remote_workers,
             "num_remote_worker_restarts": workers.num_remote_worker_restarts, "worker_pids": workers.worker_pids,
             "foreach_worker": lambda: workers.foreach_worker(lambda w: w), "sync_weights": workers.sync_weights,
             "probe_unhealthy_workers": workers.probe_unhealthy_workers}
    for name, call in calls.items():
        with pytest.raises(RuntimeError, match=rf"WorkerSet\.{name}: the set is stopped"):
            call()
    with pytest.raises(RuntimeError, match="synchronous_parallel_sample: the WorkerSet is stopped"):
        synchronous_parallel_sample(worker_set=workers)


def test_without_remote_workers_the_local_worker_samples_and_ray_is_not_started() -> None:
    ray = pytest.importorskip("ray", reason='needs the ray extra: pip install "cadence[ray]"')
    running = ray.is_initialized()
    workers = WorkerSet(env_creator=cartpole, default_policy_class=RandomPolicy,
                        config={"rollout_fragment_length": 30, "restart_failed_env_runners": False})
    fragments = synchronous_parallel_sample(worker_set=workers, max_env_steps=50, concat=False)
    assert [batch.count for batch in fragments] == [30, 30]
    assert workers.foreach_worker(lambda w: w.worker_index) == [0]
    assert workers.num_remote_workers() == 0 and ray.is_initialized() == running
    workers.stop()


def test_both_step_bounds_are_refused() -> None:
    workers = WorkerSet(env_creator=cartpole, default_policy_class=RandomPolicy)
    with pytest.raises(ValueError, match="max_agent_steps or max_env_steps, not both"):
        synchronous_parallel_sample(worker_set=workers, max_agent_steps=1, max_env_steps=1)


# ------------------------------------------------------------------ remote workers
@pytest.fixture(scope="module")
def workers(local_ray: Any) -> Iterator[WorkerSet]:
    workers = WorkerSet(env_creator=ExplodingEnv, default_policy_class=PPOTorchPolicy,
                        config={**CONFIG, "num_workers": 2, "delay_between_env_runner_restarts_s": 0,
                                "max_num_env_runner_restarts": 1})
    yield workers
    workers.stop()


def weights_everywhere(workers: WorkerSet) -> list[np.ndarray]:
    """The first weight matrix of every worker's policy (local first)."""
    return workers.foreach_worker(lambda w: next(iter(w.get_policy().get_weights().values())))


def test_remote_workers_sample_in_parallel_with_their_own_seeds(workers: WorkerSet) -> None:
    assert workers.foreach_worker(lambda w: (w.worker_index, w.num_workers, w.recreated_worker)) == [
        (0, 2, False), (1, 2, False), (2, 2, False)]
    fragments = synchronous_parallel_sample(worker_set=workers, max_env_steps=150, concat=False)
    assert [batch.count for batch in fragments] == [50, 50, 50, 50]  # two rounds of two workers
    assert not np.array_equal(fragments[0]["obs"], fragments[1]["obs"])  # seeds 1000 and 2000
    batch = synchronous_parallel_sample(worker_set=workers)  # one round, concatenated
    assert batch.count == 100 and "advantages" in batch  # postprocessed by PPO in the workers


def test_sync_weights_reaches_every_worker(workers: WorkerSet) -> None:
    local = workers.local_worker()
    trained = {key: np.full_like(value, 0.25) for key, value in local.get_policy().get_weights().items()}
    local.get_policy().set_weights(trained)
    workers.sync_weights()
    assert all(np.all(w == 0.25) for w in weights_everywhere(workers))


def test_a_killed_worker_and_one_whose_env_raises_come_back_with_the_latest_weights(workers: WorkerSet) -> None:
    local = workers.local_worker()
    local.get_policy().set_weights({key: np.full_like(value, 0.5) for key, value in
                                    local.get_policy().get_weights().items()})
    workers.sync_weights()
    workers.foreach_worker(lambda w: setattr(w.env, "explode", True), local_worker=False, remote_worker_ids=[2])
    victim = workers.worker_pids()[1]
    os.kill(victim, signal.SIGKILL)
    failed_at = time.monotonic()
    # both fail in this round, their fragments lost; with no healthy worker left the call
    # waits for the restarted ones and samples from them
    fragments = synchronous_parallel_sample(worker_set=workers, max_env_steps=100, concat=False)
    # a generous bound (no speed is asserted here): benchmarks/bench_ray.py measures it
    assert time.monotonic() - failed_at < 60
    assert [batch.count for batch in fragments] == [50, 50]  # a fresh copy of worker 2: its env is whole again
    assert workers.worker_pids()[1] != victim and workers.num_remote_worker_restarts() == 2
    assert workers.foreach_worker(lambda w: (w.worker_index, w.recreated_worker), local_worker=False) == [
        (1, True), (2, True)]
    assert all(np.all(w == 0.5) for w in weights_everywhere(workers))  # the latest weights, not the first
    assert sorted(local.callbacks.recreated) == [1, 2]


def test_past_the_restart_budget_the_set_raises_one_clear_error(workers: WorkerSet) -> None:
    # worker 1 was restarted once (the kill), worker 2 once (the env): a third failure is one too many
    workers.foreach_worker(lambda w: setattr(w.env, "explode", True), local_worker=False, remote_worker_ids=[2])
    with pytest.raises(RuntimeError, match=r"remote worker 2 failed after 1 restarts \(past "
                                           r"max_num_env_runner_restarts=1\); last: ValueError: the simulator"):
        synchronous_parallel_sample(worker_set=workers)


def test_stop_leaves_no_worker_process_and_the_stopped_set_refuses_at_once(workers: WorkerSet) -> None:
    pids = list(workers.worker_pids().values())
    assert len(pids) == 1  # worker 2 is gone for good
    workers.stop()
    assert all(not alive(pid) for pid in pids)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="synchronous_parallel_sample: the WorkerSet is stopped"):
        synchronous_parallel_sample(worker_set=workers)
    with pytest.raises(RuntimeError, match=r"WorkerSet\.foreach_worker: the set is stopped"):
        workers.foreach_worker(lambda w: w.worker_index)
    assert time.monotonic() - started < 5  # a generous bound (no speed is asserted): no probe was waited for


def test_without_restarts_failures_are_ignored_until_no_worker_is_left(local_ray: Any) -> None:
    workers = WorkerSet(env_creator=cartpole, default_policy_class=RandomPolicy,
                        config={"num_workers": 2, "num_cpus_per_worker": 0, "rollout_fragment_length": 20,
                                "restart_failed_env_runners": False, "ignore_env_runner_failures": True})
    try:
        pids = workers.worker_pids()
        os.kill(pids[1], signal.SIGKILL)
        assert synchronous_parallel_sample(worker_set=workers, max_env_steps=40).count == 40  # worker 2, twice
        assert workers.healthy_worker_ids() == [2] and workers.num_remote_worker_restarts() == 0
        os.kill(pids[2], signal.SIGKILL)
        with pytest.raises(RuntimeError, match="every remote worker failed for good"):
            synchronous_parallel_sample(worker_set=workers)
    finally:
        workers.stop()


def no_licence_on_worker_2(env_context: Any) -> gym.Env:
    if env_context.worker_index == 2:
        raise OSError("no simulator licence on this node")
    return gym.make("CartPole-v1")


def test_a_worker_that_cannot_be_built_is_named_and_leaves_no_worker(local_ray: Any) -> None:
    free = local_ray.available_resources().get("CPU", 0.0)
    with pytest.raises(RuntimeError, match="remote worker 2 could not be built: OSError: no simulator licence"):
        WorkerSet(env_creator=no_licence_on_worker_2, default_policy_class=RandomPolicy,
                  config={"num_workers": 2, "num_cpus_per_worker": 0.5})
    deadline = time.monotonic() + 10  # the workers' CPU shares come back once they are gone
    while local_ray.available_resources().get("CPU", 0.0) < free and time.monotonic() < deadline:
        time.sleep(0.05)
    assert local_ray.available_resources().get("CPU", 0.0) == free


def alive(pid: int, within: float = 15.0) -> bool:
    """Whether the process is still there after ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.1)
    return True
