"""RLlib's ``WorkerSet`` (old API stack): a local :class:`RolloutWorker` and ``num_workers``
remote ones, each a Ray actor, with RLlib's fault tolerance; and :func:`synchronous_parallel_sample`.

``WorkerSet(env_creator=..., default_policy_class=..., config=...)`` builds the local worker
(index 0, in this process) and, if ``config["num_workers"]`` (or ``num_env_runners``) is above
0, that many remote workers (indices 1, 2, ...) as Ray actors, each with
``num_cpus_per_worker`` CPUs (default 1). Every worker gets the same ``config``, so a worker
seeds its envs with ``seed + 1000 * worker_index`` as RLlib's. Ray is started (``ray.init()``)
if it is not running; :meth:`WorkerSet.stop` stops what it started. A training loop::

    workers = WorkerSet(env_creator=..., default_policy_class=PPOTorchPolicy, config=config)
    batch = synchronous_parallel_sample(worker_set=workers, max_env_steps=config["train_batch_size"])
    workers.local_worker().learn_on_batch(batch)
    workers.sync_weights()

Faults, with RLlib's keys and meaning:

=========================================  =====================================================
``restart_failed_env_runners``             (default ``True``) a remote worker that fails, its
                                           process killed or a call on it raising (an env that
                                           throws), is restarted by Ray as an identical copy: the
                                           same index and config, ``recreated_worker`` set. What
                                           it was computing is lost; the others' results stand.
``ignore_env_runner_failures``             (default ``False``) without restarts, go on with the
                                           other workers instead of raising; with restarts, the
                                           same for a worker past its restart budget.
``max_num_env_runner_restarts``            (default 1000) restarts allowed per worker.
``delay_between_env_runner_restarts_s``    (default 60.0) a worker whose call raised is
                                           restarted this long after (RLlib's back-pressure on
                                           crash loops); a killed process restarts at once.
``env_runner_health_probe_timeout_s``      (default 30.0) how long a call waits for restarted
                                           workers when no healthy remote worker is left.
=========================================  =====================================================

Before each call on the workers (:meth:`WorkerSet.foreach_worker`,
:meth:`WorkerSet.sync_weights`, and so :func:`synchronous_parallel_sample`) the set probes the
failed ones without waiting; a restarted worker that answers gets the local worker's weights
(or the last synced ones) before anything else, and ``callbacks.on_workers_recreated`` is
called. A worker that is dead for good (restarts off or spent) makes the call raise one
``RuntimeError`` naming it, its restarts and the cause, unless ``ignore_env_runner_failures``.
Where RLlib keeps such a worker silently "unhealthy", Cadence says so.

RLlib's old names (``recreate_failed_workers``, ``ignore_worker_failures``, ...) are refused
with the new name, as Ray 2.60 does; the values are checked when the set is built (finite,
and not negative; the probe timeout above 0), before any worker starts.

After :meth:`WorkerSet.stop` the set is done with: every method but ``stop`` raises a
``RuntimeError`` saying so (and ``stop`` again does nothing).

Examples:
    >>> import gymnasium as gym
    >>> from cadence.interop.rllib.policy import RandomPolicy
    >>> workers = WorkerSet(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=RandomPolicy,
    ...                     config={"num_workers": 0, "rollout_fragment_length": 10})
    >>> synchronous_parallel_sample(worker_set=workers, max_env_steps=25).count  # the local worker, 3 times
    30
    >>> workers.stop()
"""

from __future__ import annotations

import importlib
import math
import os
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from cadence._utils import quoted
from cadence.interop.rllib.batch_concat import concat_samples
from cadence.interop.rllib.callbacks import DefaultCallbacks
from cadence.interop.rllib.multi_agent_batch import MultiAgentBatch
from cadence.interop.rllib.rollout_worker import RolloutWorker
from cadence.interop.rllib.sample_batch import SampleBatch

__all__ = ["FAULT_DEFAULTS", "WorkerSet", "synchronous_parallel_sample"]

#: The fault-tolerance keys a WorkerSet reads, with RLlib's defaults (Ray 2.60).
FAULT_DEFAULTS: dict[str, Any] = {
    "restart_failed_env_runners": True,
    "ignore_env_runner_failures": False,
    "max_num_env_runner_restarts": 1000,
    "delay_between_env_runner_restarts_s": 60.0,
    "env_runner_health_probe_timeout_s": 30.0,
}
# RLlib's earlier names of those keys; Ray 2.60 refuses them too.
_RENAMED = {
    "recreate_failed_workers": "restart_failed_env_runners",
    "recreate_failed_env_runners": "restart_failed_env_runners",
    "ignore_worker_failures": "ignore_env_runner_failures",
    "max_num_worker_restarts": "max_num_env_runner_restarts",
    "delay_between_worker_restarts_s": "delay_between_env_runner_restarts_s",
    "worker_health_probe_timeout_s": "env_runner_health_probe_timeout_s",
}
# Keys with two names in RLlib's history: the count of remote workers, and their CPUs.
_COUNT_KEYS = ("num_workers", "num_env_runners")
_CPU_KEYS = ("num_cpus_per_worker", "num_cpus_per_env_runner")


def _import_ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError as err:
        raise ImportError('WorkerSet: num_workers > 0 runs workers as Ray actors; pip install "cadence[ray]"') from err


def _process_id(worker: RolloutWorker) -> int:
    return os.getpid()


def _one_of(config: Mapping[str, Any], names: tuple[str, ...], default: Any, problems: list[str]) -> Any:
    """The value under either name (they must agree if both are given)."""
    given = {name: config[name] for name in names if config.get(name) is not None}
    if len(set(map(repr, given.values()))) > 1:
        problems.append(f"{' and '.join(given)} disagree: {given}")
    return next(iter(given.values()), default)


def _fault_config(config: Mapping[str, Any]) -> tuple[int, float, dict[str, Any]]:
    """``(num_workers, cpus per worker, fault keys)``, all problems raised together."""
    problems = [f"{old!r} is RLlib's old name; use {new!r}" for old, new in _RENAMED.items() if old in config]
    num_workers = _one_of(config, _COUNT_KEYS, 0, problems)
    cpus = _one_of(config, _CPU_KEYS, 1, problems)
    faults = {key: config.get(key, default) for key, default in FAULT_DEFAULTS.items()}
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        problems.append(f"num_workers: expected an int >= 0, got {quoted(num_workers)}")
    if not _finite_number(cpus) or cpus < 0:
        problems.append(f"num_cpus_per_worker: expected a finite number >= 0, got {quoted(cpus)}")
    for key in ("restart_failed_env_runners", "ignore_env_runner_failures"):
        if not isinstance(faults[key], bool):
            problems.append(f"{key}: expected a bool, got {quoted(faults[key])}")
    restarts = faults["max_num_env_runner_restarts"]
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 0:
        problems.append(f"max_num_env_runner_restarts: expected an int >= 0, got {quoted(restarts)}")
    delay = faults["delay_between_env_runner_restarts_s"]
    if not _finite_number(delay) or delay < 0:  # 0: restart at once
        problems.append(f"delay_between_env_runner_restarts_s: expected a finite number of seconds >= 0, "
                        f"got {quoted(delay)}")
    probe = faults["env_runner_health_probe_timeout_s"]
    if not _finite_number(probe) or probe <= 0:  # 0 would give up on a restart before it could answer
        problems.append(f"env_runner_health_probe_timeout_s: expected a finite number of seconds > 0, "
                        f"got {quoted(probe)}")
    if problems:
        raise ValueError("WorkerSet: bad config: " + "; ".join(problems))
    return num_workers, cpus, faults


def _finite_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


class _RemoteRolloutWorker(RolloutWorker):
    """The RolloutWorker in each Ray actor: ``recreated_worker`` says whether Ray restarted it."""

    def __init__(self, **kwargs: Any) -> None:
        ray = _import_ray()
        super().__init__(recreated_worker=ray.get_runtime_context().was_current_actor_reconstructed, **kwargs)


@dataclass
class _Remote:
    """The driver's record of one remote worker."""

    index: int
    actor: Any
    pid: int = 0  # the process of its current life
    healthy: bool = True
    dead: bool = False  # restarts off or spent: never asked again
    restarts: int = 0
    kill_at: float | None = None  # a worker whose call raised is killed (so restarted) then
    probe: Any = None  # a pid request telling when the restarted worker answers
    last_error: str = ""


class WorkerSet:
    """A local :class:`RolloutWorker` plus ``num_workers`` remote ones in Ray actors (see the module).

    Args:
        env_creator: ``env_creator(env_context)`` -> an env, as for :class:`RolloutWorker`.
        default_policy_class: The policy class (or ``(cls, obs_space, act_space, config)``).
        config: The RolloutWorker's config plus ``num_workers`` and the fault keys.
        num_workers: Overrides ``config["num_workers"]``.
        local_worker: Whether to build the local worker (RLlib's default: yes).

    Raises:
        ValueError: A bad count or fault key (one error naming them all), no worker at all,
            or the RolloutWorker's error for a bad worker config.
        RuntimeError: A remote worker that cannot be built (names it and the cause); the
            others are stopped.

    Examples:
        The module's example runs one; a remote set needs Ray, and its workers' config is
        checked before any starts:

        >>> WorkerSet(env_creator=print, config={"num_workers": 2, "recreate_failed_workers": True,
        ...                                      "delay_between_env_runner_restarts_s": -1})
        Traceback (most recent call last):
        ...
        ValueError: WorkerSet: bad config: 'recreate_failed_workers' is RLlib's old name; use 'restart_failed_env_runners'; delay_between_env_runner_restarts_s: expected a finite number of seconds >= 0, got -1
        >>> WorkerSet(env_creator=print, local_worker=False)
        Traceback (most recent call last):
        ...
        ValueError: WorkerSet: local_worker=False needs num_workers > 0: there would be no worker
    """

    def __init__(
        self, *, env_creator: Callable[..., Any], default_policy_class: Any = None,
        config: Mapping[str, Any] | None = None, num_workers: int | None = None, local_worker: bool = True,
    ) -> None:
        config = dict(config or {})
        if num_workers is not None:
            config["num_workers"] = num_workers
            config.pop("num_env_runners", None)
        self.num_workers, cpus, faults = _fault_config(config)
        if not local_worker and not self.num_workers:
            raise ValueError("WorkerSet: local_worker=False needs num_workers > 0: there would be no worker")
        self.restart_failed = faults["restart_failed_env_runners"]
        self.ignore_failures = faults["ignore_env_runner_failures"]
        self.max_restarts = faults["max_num_env_runner_restarts"] if self.restart_failed else 0
        self.restart_delay_s = float(faults["delay_between_env_runner_restarts_s"])
        self.probe_timeout_s = float(faults["env_runner_health_probe_timeout_s"])
        self.config = config
        worker_args = {"env_creator": env_creator, "policy_spec": default_policy_class, "policy_config": config,
                       "num_workers": self.num_workers}
        self._local = RolloutWorker(worker_index=0, **worker_args) if local_worker else None
        self._callbacks = self._local.callbacks if self._local is not None else config.get("callbacks", DefaultCallbacks)()
        self._weights_ref: Any = None
        self._remotes: list[_Remote] = []
        self._ray: Any = None
        self._owns_ray = False
        self._stopped = False
        if self.num_workers:
            self._start_remotes(worker_args, cpus)

    def _start_remotes(self, worker_args: Mapping[str, Any], cpus: float) -> None:
        ray = self._ray = _import_ray()
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init()
        remote = ray.remote(_RemoteRolloutWorker).options(num_cpus=cpus, max_restarts=self.max_restarts,
                                                         max_task_retries=0)
        # put in the object store and held here: a restart reads them again, and Ray loses
        # arguments that nobody holds (ray-project/ray#53727)
        self._arg_refs = {key: ray.put(value) for key, value in worker_args.items()}
        self._remotes = [_Remote(i, remote.remote(worker_index=i, **self._arg_refs))
                         for i in range(1, self.num_workers + 1)]
        # waits for the workers to be built: one that cannot be built fails here, by index and cause
        built = [(record, record.actor.apply.remote(_process_id)) for record in self._remotes]
        for record, ref in built:
            try:
                record.pid = ray.get(ref)
            except ray.exceptions.RayError as err:
                self.stop()
                lines = [line.strip() for line in str(err).splitlines() if line.strip()]
                raise RuntimeError(f"WorkerSet: remote worker {record.index} could not be built: "
                                   f"{lines[-1] if lines else type(err).__name__}") from None

    def _check_running(self, method: str) -> None:
        """Raises once the set is stopped: its workers are gone, and Ray may be too."""
        if self._stopped:
            raise RuntimeError(f"WorkerSet.{method}: the set is stopped (stop() was called); build a new WorkerSet")

    # ----------------------------------------------------------------- access
    def local_worker(self) -> RolloutWorker | None:
        """The worker in this process (``None`` with ``local_worker=False``).

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> workers = WorkerSet(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=RandomPolicy)
            >>> workers.local_worker().worker_index
            0
        """
        self._check_running("local_worker")
        return self._local

    def remote_workers(self) -> list[Any]:
        """The remote workers' Ray actor handles, by index (1, 2, ...).

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> workers = WorkerSet(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=RandomPolicy)
            >>> workers.remote_workers()
            []
        """
        self._check_running("remote_workers")
        return [record.actor for record in self._remotes]

    def healthy_worker_ids(self) -> list[int]:
        """The indices of the remote workers that are up.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> workers = WorkerSet(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=RandomPolicy)
            >>> workers.healthy_worker_ids()
            []
        """
        self._check_running("healthy_worker_ids")
        return [record.index for record in self._remotes if record.healthy]

    def num_remote_workers(self) -> int:
        """How many remote workers the set started with.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> workers = WorkerSet(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=RandomPolicy)
            >>> workers.num_remote_workers()
            0
        """
        self._check_running("num_remote_workers")
        return len(self._remotes)

    def num_healthy_remote_workers(self) -> int:
        """How many remote workers are up.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> workers = WorkerSet(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=RandomPolicy)
            >>> workers.num_healthy_remote_workers()
            0
        """
        self._check_running("num_healthy_remote_workers")
        return len(self.healthy_worker_ids())

    def num_remote_worker_restarts(self) -> int:
        """How many times remote workers were restarted and restored, in all.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> workers = WorkerSet(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=RandomPolicy)
            >>> workers.num_remote_worker_restarts()
            0
        """
        self._check_running("num_remote_worker_restarts")
        return sum(record.restarts for record in self._remotes)

    def worker_pids(self) -> dict[int, int]:
        """``{index: process id}`` of the healthy remote workers (for operators, and fault tests).

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> workers = WorkerSet(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=RandomPolicy)
            >>> workers.worker_pids()
            {}
        """
        self._check_running("worker_pids")
        return {record.index: record.pid for record in self._remotes if record.healthy}

    # ------------------------------------------------------------------ calls
    def foreach_worker(
        self, func: Callable[[RolloutWorker], Any], *, local_worker: bool = True, healthy_only: bool = True,
        remote_worker_ids: Collection[int] | None = None, timeout_seconds: float | None = None,
    ) -> list[Any]:
        """``func(worker)`` on the local worker and, in parallel, on the healthy remote ones.

        Failed workers are probed first (see the module). A remote worker that fails during
        the call, or does not answer within ``timeout_seconds``, has no result.

        Args:
            func: Runs on each worker (sent to the remote ones by Ray).
            local_worker: Include the local worker (its result comes first).
            healthy_only: Only healthy remote workers (``False``: also those that failed and
                may be restarting; those dead for good never).
            remote_worker_ids: Only these remote workers (default: all).
            timeout_seconds: How long to wait for the remote results (``None``: for all).

        Returns:
            The results: the local worker's, then the remote workers' by index.

        Raises:
            RuntimeError: A remote worker failed for good (see the module), unless
                ``ignore_env_runner_failures``.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> workers = WorkerSet(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=RandomPolicy)
            >>> workers.foreach_worker(lambda worker: worker.env.spec.id)
            ['CartPole-v1']
        """
        self._check_running("foreach_worker")
        self._restore(wait=False)
        wanted = None if remote_worker_ids is None else set(remote_worker_ids)
        callable_now = [record for record in self._remotes
                        if (record.healthy or not (healthy_only or record.dead))
                        and (wanted is None or record.index in wanted)]
        calls = {record.actor.apply.remote(func): record for record in callable_now}
        results = [func(self._local)] if local_worker and self._local is not None else []
        return results + self._gather(calls, timeout_seconds)

    def _gather(self, calls: dict[Any, _Remote], timeout_seconds: float | None) -> list[Any]:
        """The results of the remote calls that succeeded, by worker index; failures recorded."""
        if not calls:
            return []
        ray = self._ray
        ready, _ = ray.wait(list(calls), num_returns=len(calls), timeout=timeout_seconds)
        done = {}
        for ref in ready:
            record = calls[ref]
            try:
                done[record.index] = ray.get(ref)
            except ray.exceptions.RayTaskError as err:  # the call raised: its process lives on, in doubt
                self._failed(record, f"{type(err.cause).__name__}: {err.cause}", alive=True)
            except ray.exceptions.RayActorError as err:  # its process died
                self._failed(record, f"its process died ({type(err).__name__})", alive=False)
        return [done[index] for index in sorted(done)]

    def sync_weights(self, policies: Collection[str] | None = None, from_worker: Any = None) -> None:
        """Sends the local worker's weights (or ``from_worker``'s) to the healthy remote workers.

        The weights are put in Ray's object store once; the call does not wait for the
        workers (calls on a worker run in order, so its next sample uses them), and a worker
        restored later gets the same.

        Args:
            policies: Only these policy ids (default: all).
            from_worker: A :class:`RolloutWorker` (or remote handle) to take the weights from.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.algorithms.ppo import PPOTorchPolicy
            >>> workers = WorkerSet(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=PPOTorchPolicy)
            >>> workers.sync_weights(policies=["default_policy"])  # no remote worker here: nothing to send
        """
        self._check_running("sync_weights")
        source = self._local if from_worker is None else from_worker
        if source is None:
            raise ValueError("WorkerSet.sync_weights: no local worker to take the weights from; pass from_worker")
        if not self._remotes:
            return
        ray = self._ray
        weights = source.get_weights() if isinstance(source, RolloutWorker) else ray.get(source.get_weights.remote())
        if policies is not None:
            weights = {policy_id: value for policy_id, value in weights.items() if policy_id in set(policies)}
        self._restore(wait=False)
        self._weights_ref = ray.put(weights)
        for record in self._remotes:
            if record.healthy:
                record.actor.set_weights.remote(self._weights_ref)

    # ----------------------------------------------------------------- faults
    def _failed(self, record: _Remote, cause: str, alive: bool) -> None:
        """Marks a worker failed; with restarts, Ray brings it back (a raising one is killed for that)."""
        ray = self._ray
        record.healthy, record.last_error, record.probe = False, cause, None
        if not self.restart_failed or record.restarts >= self.max_restarts:
            if alive:
                ray.kill(record.actor, no_restart=True)
            self._give_up(record)
            return
        record.kill_at = time.monotonic() + self.restart_delay_s if alive else None

    def _give_up(self, record: _Remote) -> None:
        """Restarts off or spent: raise, or go on without the worker."""
        record.healthy, record.dead = False, True
        budget = (f"past max_num_env_runner_restarts={self.max_restarts}" if self.restart_failed
                  else "restart_failed_env_runners=False")
        if not self.ignore_failures:
            raise RuntimeError(
                f"WorkerSet: remote worker {record.index} failed after {record.restarts} restarts ({budget}); last: "
                f"{record.last_error}. Set ignore_env_runner_failures=True to go on without it."
            )
        if all(r.dead for r in self._remotes):
            raise RuntimeError(f"WorkerSet: every remote worker failed for good; last: {record.last_error}")

    def _restore(self, wait: bool, timeout_s: float | None = None) -> list[int]:
        """Probes the failed workers; restores those that answer (weights, then healthy).

        With ``wait``, or when no remote worker is healthy, waits up to ``timeout_s`` (default:
        the probe timeout) for one to come back. Returns the indices restored.
        """
        failed = [r for r in self._remotes if not r.healthy and not r.dead]
        if not failed:
            return []
        ray = self._ray
        must_wait = wait or not any(r.healthy for r in self._remotes)
        # waiting, a worker still sitting out its restart delay is given that delay on top
        now = time.monotonic()
        delay = max([r.kill_at - now for r in failed if r.kill_at is not None], default=0.0)
        timeout_s = self.probe_timeout_s if timeout_s is None else timeout_s
        deadline = now + (timeout_s + max(delay, 0.0) if must_wait else 0.0)
        restored: list[int] = []
        while True:
            now = time.monotonic()
            for record in failed:
                if record.kill_at is not None and now >= record.kill_at:
                    ray.kill(record.actor, no_restart=False)
                    record.kill_at = None
                if record.kill_at is None and record.probe is None and not record.healthy and not record.dead:
                    record.probe = record.actor.apply.remote(_process_id)
            probes = {r.probe: r for r in failed if r.probe is not None}
            ready = ray.wait(list(probes), num_returns=len(probes), timeout=0)[0] if probes else []
            for ref in ready:
                record = probes[ref]
                record.probe = None
                if self._answered(record, ref):
                    restored.append(record.index)
            waiting = [r for r in failed if not r.healthy and not r.dead]
            if not waiting or (restored and not wait) or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        if restored:
            self._callbacks.on_workers_recreated(algorithm=None, worker_set=self, worker_ids=restored,
                                                 is_evaluation_workers=False)
        return restored

    def _answered(self, record: _Remote, ref: Any) -> bool:
        """A probe came back: the restarted worker (restored), the old process, or death for good."""
        ray = self._ray
        try:
            pid = int(ray.get(ref))
        except ray.exceptions.ActorUnavailableError:  # still starting: probed again
            return False
        except ray.exceptions.RayActorError:  # its restarts are spent
            self._give_up(record)
            return False
        if pid == record.pid:  # the old process, not killed yet
            return False
        weights = self._local.get_weights() if self._local is not None else None
        weights_ref = ray.put(weights) if weights is not None else self._weights_ref
        if weights_ref is not None:  # before anything else it is asked to do
            record.actor.set_weights.remote(weights_ref)
        record.pid, record.healthy, record.restarts = pid, True, record.restarts + 1
        return True

    def probe_unhealthy_workers(self, timeout_seconds: float | None = None) -> list[int]:
        """Waits (up to ``timeout_seconds``, default the probe timeout) for failed workers to
        come back; returns the indices restored.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> workers = WorkerSet(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=RandomPolicy)
            >>> workers.probe_unhealthy_workers()
            []
        """
        self._check_running("probe_unhealthy_workers")
        return self._restore(wait=True, timeout_s=timeout_seconds)

    def stop(self) -> None:
        """Stops the local worker, kills the remote ones, and stops Ray if the set started it.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> workers = WorkerSet(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=RandomPolicy)
            >>> workers.stop()
            >>> workers.foreach_worker(lambda worker: worker.worker_index)
            Traceback (most recent call last):
            ...
            RuntimeError: WorkerSet.foreach_worker: the set is stopped (stop() was called); build a new WorkerSet
        """
        if self._stopped:
            return
        self._stopped = True
        if self._local is not None:
            self._local.stop()
        ray = self._ray
        for record in self._remotes:
            if not record.dead:
                try:
                    ray.get(record.actor.stop.remote(), timeout=10)
                except Exception:  # noqa: BLE001 - a worker that cannot stop is killed below all the same
                    pass
            ray.kill(record.actor, no_restart=True)
            record.healthy, record.dead = False, True
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False


def _steps(batch: SampleBatch | MultiAgentBatch, agent_steps: bool) -> int:
    return batch.agent_steps() if agent_steps else batch.env_steps()


def synchronous_parallel_sample(
    *, worker_set: WorkerSet, max_agent_steps: int | None = None, max_env_steps: int | None = None,
    concat: bool = True,
) -> SampleBatch | MultiAgentBatch | list[SampleBatch | MultiAgentBatch]:
    """Samples from every healthy remote worker in parallel (the local worker if there are
    none) until ``max_env_steps`` (or ``max_agent_steps``) are collected; one round if neither.

    A worker that fails during a round costs its fragment; the round's other fragments are
    kept, and restored workers join the next round. If no remote worker is healthy, the call
    waits for a restarted one (up to ``env_runner_health_probe_timeout_s``).

    Args:
        worker_set: The workers.
        max_agent_steps, max_env_steps: At most one: the steps to reach.
        concat: One batch (:func:`concat_samples`) rather than the list of fragments.

    Raises:
        ValueError: Both step bounds given.
        RuntimeError: A worker failed for good (see the module), or none came back in time.

    Examples:
        >>> import gymnasium as gym
        >>> from cadence.interop.rllib.policy import RandomPolicy
        >>> workers = WorkerSet(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=RandomPolicy,
        ...                     config={"rollout_fragment_length": 4})
        >>> [batch.count for batch in synchronous_parallel_sample(worker_set=workers, max_env_steps=10, concat=False)]
        [4, 4, 4]
    """
    if max_agent_steps is not None and max_env_steps is not None:
        raise ValueError("synchronous_parallel_sample: give max_agent_steps or max_env_steps, not both")
    if worker_set._stopped:
        raise RuntimeError("synchronous_parallel_sample: the WorkerSet is stopped (stop() was called); "
                           "build a new WorkerSet")
    target = max_agent_steps if max_agent_steps is not None else max_env_steps
    batches: list[SampleBatch | MultiAgentBatch] = []
    collected = 0
    while (target is None and not batches) or (target is not None and collected < target):
        if worker_set.num_remote_workers() == 0:
            fragments = [worker_set.local_worker().sample()]
        else:
            fragments = worker_set.foreach_worker(lambda worker: worker.sample(), local_worker=False)
            if not fragments and worker_set.num_healthy_remote_workers() == 0 and not worker_set.probe_unhealthy_workers():
                raise RuntimeError(
                    f"synchronous_parallel_sample: no remote worker came back within "
                    f"env_runner_health_probe_timeout_s={worker_set.probe_timeout_s}"
                )
        batches.extend(fragments)
        collected += sum(_steps(batch, max_agent_steps is not None) for batch in fragments)
    return concat_samples(batches) if concat else batches
