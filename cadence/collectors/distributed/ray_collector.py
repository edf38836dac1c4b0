"""``RayCollector``: Cadence collectors running as Ray actors, surviving the loss of one.

Each actor builds one collector (``collector_class``, a :class:`SyncDataCollector` by
default, so its fast paths serve it) that collects for ever; the driver asks the actors
for batches and yields them as CPU TensorDicts carrying ``"worker_id"`` and
``"policy_version"`` entries (one value per frame). With ``sync=True`` every iteration
stacks one batch from each actor (a new leading dim); with ``sync=False`` each batch is
yielded as soon as it is ready, two requests being kept in flight per actor.

Weights: :meth:`RayCollector.update_policy_weights_` puts the policy's state dict in
Ray's object store once and hands every actor the reference (the version number goes up
by one each time, and each batch says which version collected it).

The weights are checked in the driver first, against the policy's own state dict (the
same keys, shapes and dtypes): wrong ones are refused with one error naming the key, and
nothing is sent. An actor that still fails to load them (a policy with checks of its own)
makes the iterator raise a ``RuntimeError`` naming the actor, the version and the cause.

Faults: an actor that dies (its process killed, say) is restarted by Ray (up to
``max_worker_restarts`` times), given the latest weights again, and collection goes on;
an actor whose collector raises (an exception in the env), or whose batch takes longer
than ``batch_timeout_s`` (an env that hangs), is killed and restarted the same way. The
requests it had in flight are lost (counted in :meth:`RayCollector.stats`). Past the
restart budget the iterator raises one ``RuntimeError`` naming the actor and the cause,
or, with ``ignore_worker_failures=True``, goes on without that actor.

Ray is imported when a collector is built; ``ray.init`` is called then if Ray is not
running yet (with ``ray_init_config``; use ``{"address": "auto"}`` to join a cluster), and
``shutdown()`` stops what it started. ``shutdown()`` gives the actors
:data:`SHUTDOWN_TIMEOUT_S` seconds, all together, to close their collectors, and kills them
then (an actor whose batch is past ``batch_timeout_s`` at once): a hung env cannot hold it up.

Examples:
    >>> import pytest; ray = pytest.importorskip("ray")  # skips without the ray extra
    >>> import torch
    >>> from tensordict.nn import TensorDictModule
    >>> from cadence.collectors.distributed import RayCollector
    >>> from cadence.envs import GymEnv
    >>> policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
    >>> collector = RayCollector(lambda: GymEnv("Pendulum-v1"), policy, frames_per_batch=50, total_frames=200,
    ...                          num_collectors=1, ray_init_config={"num_cpus": 2, "include_dashboard": False})
    >>> [batch.batch_size[0] for batch in collector]
    [50, 50, 50, 50]
    >>> collector.update_policy_weights_({"module.weight": torch.zeros(1, 4), "module.bias": torch.zeros(1)})
    Traceback (most recent call last):
    ...
    ValueError: RayCollector.update_policy_weights_: weights['module.weight']: expected shape (1, 3), got (1, 4); nothing was sent
    >>> collector.shutdown()
"""

from __future__ import annotations

import importlib
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from tensordict import TensorDictBase

from cadence._utils import MAX_QUOTED, quoted
from cadence._weights_board import WeightsBoard
from cadence.collectors.sync import DataCollectorBase, SyncDataCollector, _check_frames

__all__ = ["DEFAULT_BATCH_TIMEOUT_S", "SHUTDOWN_TIMEOUT_S", "RayCollector"]

_INSTALL_HINT = 'pip install "cadence[ray]"'
EnvFactory = Callable[[], Any]

#: ``batch_timeout_s`` by default: an actor whose batch takes longer is taken to hang (RLlib's
#: ``sample_timeout_s`` plays this part, with 60 s); generous, since one batch of a slow
#: simulator may take minutes. Raise it for those, or pass ``None`` to wait for ever.
DEFAULT_BATCH_TIMEOUT_S = 300.0
#: How long ``shutdown()`` waits, for all actors together, for their collectors to close (an
#: actor busy with a batch finishes it first) before it kills them.
SHUTDOWN_TIMEOUT_S = 5.0


def _summary(error: BaseException) -> str:
    """``"Type: message"`` of an exception, its last line only (Ray's errors carry a
    traceback) and cut to :data:`~cadence._utils.MAX_QUOTED` characters."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = f"{type(error).__name__}: {lines[-1] if lines else ''}"
    return text if len(text) <= MAX_QUOTED else text[:MAX_QUOTED] + "..."


def _check_weights(expected: Mapping[str, Any], given: Mapping[Any, Any]) -> None:
    """Raises unless ``given`` has exactly ``expected``'s keys, and tensors of the same shapes and dtypes."""
    where = "RayCollector.update_policy_weights_"
    for key, want in expected.items():
        if key not in given:
            shape = f" (shape {tuple(want.shape)})" if isinstance(want, torch.Tensor) else ""
            raise ValueError(f"{where}: the weights lack key {key!r}{shape} of the policy's state dict; nothing was sent")
    for key in given:
        if key not in expected:
            raise ValueError(f"{where}: key {quoted(key)} is not in the policy's state dict (its keys: "
                             f"{quoted(list(expected))}); nothing was sent")
    for key, want in expected.items():
        got = given[key]
        if not isinstance(want, torch.Tensor):
            continue  # extra state: the policy's own business
        if not isinstance(got, torch.Tensor):
            raise TypeError(f"{where}: weights[{key!r}]: expected a tensor of shape {tuple(want.shape)}, "
                            f"got {type(got).__name__}: {quoted(got)}; nothing was sent")
        if got.shape != want.shape:
            raise ValueError(f"{where}: weights[{key!r}]: expected shape {tuple(want.shape)}, got "
                             f"{tuple(got.shape)}; nothing was sent")
        if got.dtype != want.dtype:
            raise TypeError(f"{where}: weights[{key!r}]: expected dtype {want.dtype}, got {got.dtype}; nothing was sent")


def _import_ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError as err:
        raise ImportError(f"RayCollector needs Ray: {_INSTALL_HINT}") from err


class CollectorActor:
    """What runs in each Ray actor: one collector that collects for ever.

    The driver wraps this class with ``ray.remote``; it is a plain class so that it can be
    used (and tested) in one process too.

    Args:
        create_env_fn: builds the actor's env.
        policy: the policy (a copy of the driver's: Ray sends it over).
        frames_per_batch: frames per batch.
        collector_class: the collector to run.
        collector_kwargs: more arguments for it.
        worker_id: the actor's index, written into every batch.
        weights_board: the driver's ``WeightsBoard`` (:mod:`cadence._weights_board`) actor (``None`` outside Ray).

    Examples:
        >>> from cadence.envs import GymEnv
        >>> actor = CollectorActor(lambda: GymEnv("Pendulum-v1"), None, 10, SyncDataCollector, {}, worker_id=1)
        >>> batch, seconds, pid = actor.next_batch()
        >>> batch.batch_size, batch["worker_id"].unique().tolist(), batch["policy_version"].unique().tolist()
        (torch.Size([10]), [1], [0])
        >>> actor.shutdown()
    """

    def __init__(
        self,
        create_env_fn: EnvFactory,
        policy: Any,
        frames_per_batch: int,
        collector_class: type[DataCollectorBase],
        collector_kwargs: Mapping[str, Any],
        worker_id: int,
        weights_board: Any = None,
    ) -> None:
        self.collector = collector_class(
            create_env_fn, policy, frames_per_batch=frames_per_batch, total_frames=-1, **dict(collector_kwargs)
        )
        self.batches: Iterator[TensorDictBase] = iter(self.collector)
        self.worker_id = worker_id
        self.policy_version = 0
        if weights_board is not None:  # a restarted actor starts from the latest weights, not the first ones
            ray = _import_ray()
            holder, version = ray.get(weights_board.latest.remote())
            if version:
                try:
                    self.set_weights(ray.get(holder[0]), version)
                except Exception as err:  # the cause, not Ray's "the actor died", is what the driver reports
                    raise RuntimeError(f"actor {worker_id} could not load the weights of policy_version {version}: "
                                       f"{_summary(err)}") from err

    def pid(self) -> int:
        """The actor's process id."""
        return os.getpid()

    def set_weights(self, weights: Mapping[str, Any], version: int) -> int:
        """Loads the policy's weights (a state dict) and records their version."""
        self.collector.update_policy_weights_(dict(weights))
        self.policy_version = version
        return version

    def set_seed(self, seed: int) -> int | None:
        """Seeds the actor's collector."""
        return self.collector.set_seed(seed)

    def next_batch(self) -> tuple[TensorDictBase, float, int]:
        """The next batch, on the CPU, with ``"worker_id"`` and ``"policy_version"``, the
        seconds it took and the actor's process id (a new one tells of a restart)."""
        start = time.perf_counter()
        batch = next(self.batches).to("cpu")
        batch = batch.clone() if batch.is_locked else batch
        shape = batch.batch_size
        batch.set("worker_id", torch.full(shape, self.worker_id, dtype=torch.long))
        batch.set("policy_version", torch.full(shape, self.policy_version, dtype=torch.long))
        return batch, time.perf_counter() - start, os.getpid()

    def shutdown(self) -> None:
        """Closes the collector (and its envs)."""
        self.collector.shutdown()


@dataclass
class _Request:
    """A batch asked of an actor: which actor, and the Ray reference."""

    worker: int
    ref: Any


@dataclass
class _Worker:
    """The driver's record of one actor."""

    index: int
    actor: Any
    pid: int = 0  # the process of its current life
    life: int = 0  # how many times it failed (Ray restarts it each time, within the budget)
    live: bool = True
    restarting: bool = False  # failed; waiting for Ray's restart before asking for batches again
    probe: Any = None  # a pid() request telling when the restarted actor answers
    retry_at: float = 0.0
    started: float = 0.0  # when the actor began the batch at the head of ``pending`` (for batch_timeout_s)
    frames: int = 0
    seconds: float = 0.0
    last_error: str = ""
    pending: list[_Request] = field(default_factory=list)
    weight_calls: list[tuple[int, Any]] = field(default_factory=list)  # (version, set_weights ref) not checked yet


class RayCollector(DataCollectorBase):
    """Collects with ``num_collectors`` Ray actors, each running a Cadence collector (see the module).

    Args:
        create_env_fn: builds an env; one callable for every actor, or a list of them, one per actor.
        policy: the policy (a ``TensorDictModule`` or any callable on tensordicts); ``None``
            for random actions.
        frames_per_batch: frames in each actor's batch.
        total_frames: stop after this many frames (-1: never).
        num_collectors: how many actors (default: the length of ``create_env_fn`` if it is a list, else 1).
        sync: stack one batch from every actor per iteration, rather than yield each as it comes.
        collector_class: the collector each actor runs.
        collector_kwargs: more arguments for it (``total_frames`` is the driver's business).
        ray_init_config: arguments of ``ray.init`` if Ray is not running yet.
        remote_configs: Ray options of the actors (default ``{"num_cpus": 1}``).
        max_worker_restarts: how many times each actor may be restarted.
        ignore_worker_failures: past the budget, go on without the actor instead of raising.
        batch_timeout_s: an actor whose batch takes longer than this many seconds is taken to
            hang, and is killed and restarted as a dead one is (past the budget, the error says
            it timed out); ``None``: wait for ever. Default :data:`DEFAULT_BATCH_TIMEOUT_S`.

    Examples:
        The module's example runs one; the arguments are checked before Ray starts:

        >>> RayCollector([print, print], None, frames_per_batch=10, num_collectors=3)
        Traceback (most recent call last):
        ...
        ValueError: RayCollector: 2 env factories for num_collectors=3; give one per actor
        >>> RayCollector(print, None, frames_per_batch=10, batch_timeout_s=float("nan"))
        Traceback (most recent call last):
        ...
        ValueError: RayCollector: batch_timeout_s must be None or a finite number of seconds > 0, got nan
    """

    def __init__(
        self,
        create_env_fn: EnvFactory | Sequence[EnvFactory],
        policy: Any = None,
        *,
        frames_per_batch: int,
        total_frames: int = -1,
        num_collectors: int | None = None,
        sync: bool = False,
        collector_class: type[DataCollectorBase] = SyncDataCollector,
        collector_kwargs: Mapping[str, Any] | None = None,
        ray_init_config: Mapping[str, Any] | None = None,
        remote_configs: Mapping[str, Any] | None = None,
        max_worker_restarts: int = 3,
        ignore_worker_failures: bool = False,
        batch_timeout_s: float | None = DEFAULT_BATCH_TIMEOUT_S,
    ) -> None:
        self.frames_per_batch, self.total_frames, _ = _check_frames(frames_per_batch, total_frames, 0)
        factories = list(create_env_fn) if isinstance(create_env_fn, Sequence) else None
        if num_collectors is None:
            num_collectors = len(factories) if factories is not None else 1
        if isinstance(num_collectors, bool) or not isinstance(num_collectors, int) or num_collectors < 1:
            raise ValueError(f"RayCollector: num_collectors must be a positive int, got {num_collectors!r}")
        if factories is None:
            factories = [create_env_fn] * num_collectors  # type: ignore[list-item]
        elif len(factories) != num_collectors:
            raise ValueError(
                f"RayCollector: {len(factories)} env factories for num_collectors={num_collectors}; give one per actor"
            )
        if isinstance(max_worker_restarts, bool) or not isinstance(max_worker_restarts, int) or max_worker_restarts < 0:
            raise ValueError(f"RayCollector: max_worker_restarts must be an int >= 0, got {max_worker_restarts!r}")
        if batch_timeout_s is not None:
            if isinstance(batch_timeout_s, bool) or not isinstance(batch_timeout_s, (int, float)):
                raise TypeError(f"RayCollector: batch_timeout_s must be None or a number of seconds, got "
                                f"{type(batch_timeout_s).__name__}: {quoted(batch_timeout_s)}")
            if not math.isfinite(batch_timeout_s) or batch_timeout_s <= 0:
                raise ValueError(f"RayCollector: batch_timeout_s must be None or a finite number of seconds > 0, "
                                 f"got {batch_timeout_s!r}")
        kwargs = dict(collector_kwargs or {})
        for reserved in ("total_frames", "frames_per_batch"):
            if reserved in kwargs:
                raise ValueError(f"RayCollector: {reserved!r} goes to RayCollector itself, not in collector_kwargs")
        ray = _import_ray()
        self._ray = ray
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init(**dict(ray_init_config or {}))
        self.policy = policy
        self.sync = bool(sync)
        self.max_worker_restarts = max_worker_restarts
        self.ignore_worker_failures = ignore_worker_failures
        self.batch_timeout_s = None if batch_timeout_s is None else float(batch_timeout_s)
        self.policy_version = 0
        self._weights_ref: Any = None
        self._frames = 0
        self._frames_lost = 0
        self._started = time.perf_counter()
        self._closed = False
        options = {"num_cpus": 1, **dict(remote_configs or {})}
        self._board = ray.remote(WeightsBoard).options(num_cpus=0).remote()
        remote = ray.remote(CollectorActor).options(max_restarts=max_worker_restarts, max_task_retries=0, **options)
        # the constructor's arguments, put in the object store by us and held here: a restart reads them
        # again, and Ray loses arguments that nobody holds (ray-project/ray#53727)
        self._constructor_refs = [ray.put(policy), ray.put(collector_class), ray.put(kwargs)]
        self._constructor_refs += [ray.put(factory) for factory in factories]
        policy_ref, class_ref, kwargs_ref = self._constructor_refs[:3]
        self._workers = [
            _Worker(i, remote.remote(factory_ref, policy_ref, self.frames_per_batch, class_ref, kwargs_ref, i,
                                     self._board))
            for i, factory_ref in enumerate(self._constructor_refs[3:])
        ]
        # waits for the actors to be built: an env that cannot be built fails here, by name
        for worker, pid in zip(self._workers, ray.get([w.actor.pid.remote() for w in self._workers])):
            worker.pid = pid

    # ------------------------------------------------------------------ actors
    @property
    def num_collectors(self) -> int:
        """How many actors the collector started with."""
        return len(self._workers)

    def worker_pids(self) -> list[int]:
        """The process ids of the live actors (for operators, and fault tests); an actor that
        is being restarted is waited for."""
        pids = []
        for worker in self._workers:
            pid = self._current_pid(worker) if worker.live else None
            if pid is not None:
                pids.append(pid)
        return pids

    def _current_pid(self, worker: _Worker, timeout: float = 120.0) -> int | None:
        """The actor's process id, waiting while Ray restarts it; None once it is dead for good."""
        ray = self._ray
        deadline = time.monotonic() + timeout
        while True:
            try:
                return int(ray.get(worker.actor.pid.remote(), timeout=timeout))
            except ray.exceptions.ActorUnavailableError:  # being restarted: ask again
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
            except ray.exceptions.RayActorError:  # dead, its restarts spent (or killed)
                return None

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seeds actor ``i``'s collector with ``seed + i``; returns the next free seed."""
        self._ray.get([w.actor.set_seed.remote(seed + w.index) for w in self._workers if w.live])
        return seed + len(self._workers)

    def update_policy_weights_(self, policy_or_weights: Any = None) -> None:
        """Sends every actor the policy's weights (put in the object store once).

        The weights are checked first against the policy's own state dict: the same keys,
        and tensors of the same shapes and dtypes; anything else is refused before anything
        is sent, and ``policy_version`` stays as it was. An actor that fails to load them
        all the same makes the iterator raise (see the module).

        Args:
            policy_or_weights: a module, a TensorDict of its parameters or a state dict;
                default: the policy given at construction.

        Raises:
            ValueError: a key missing or unknown, or a tensor of the wrong shape (named).
            TypeError: a value that is not a tensor, or of the wrong dtype (named); weights
                for a policy that is not a ``torch.nn.Module`` (it has none to take).
            RuntimeError: called after :meth:`shutdown`.

        Examples:
            The module's example shows a refusal (it needs Ray and a collector).
        """
        if self._closed:
            raise RuntimeError("RayCollector.update_policy_weights_: called after shutdown()")
        if not isinstance(self.policy, torch.nn.Module):
            if policy_or_weights is None:
                return  # no module, no weights: nothing to do (as SyncDataCollector)
            raise TypeError(f"RayCollector.update_policy_weights_: the collector's policy is a "
                            f"{type(self.policy).__name__}, not a torch.nn.Module: it has no weights to update")
        source = self.policy if policy_or_weights is None else policy_or_weights
        if isinstance(source, torch.nn.Module):
            weights = dict(source.state_dict())
        elif isinstance(source, TensorDictBase):
            weights = dict(source.flatten_keys(".").items())  # from_module's nesting, as state dict names
        elif isinstance(source, Mapping):
            weights = dict(source)
        else:
            raise TypeError(f"RayCollector.update_policy_weights_: policy_or_weights must be a torch.nn.Module, a "
                            f"TensorDict or a state dict, got {type(source).__name__}: {quoted(source)}")
        _check_weights(self.policy.state_dict(), weights)
        weights = {key: value.detach().to("cpu") if isinstance(value, torch.Tensor) else value
                   for key, value in weights.items()}
        self.policy_version += 1
        self._weights_ref = self._ray.put(weights)
        self._board.publish.remote([self._weights_ref], self.policy_version)
        for worker in self._workers:
            if worker.live and not worker.restarting:  # a restarting one is sent them when it answers
                self._send_weights(worker)

    def stats(self) -> dict[str, Any]:
        """Frames delivered and lost, restarts and frames per second, per actor."""
        return {
            "frames": self._frames,
            "frames_lost": self._frames_lost,
            "policy_version": self.policy_version,
            "restarts": [w.life for w in self._workers],
            "live": [w.live for w in self._workers],
            "frames_per_s": [w.frames / w.seconds if w.seconds else 0.0 for w in self._workers],
            "seconds": time.perf_counter() - self._started,
        }

    # --------------------------------------------------------------- requests
    def _ask(self, worker: _Worker) -> None:
        if not worker.pending:  # the actor is idle: it starts on this one now
            worker.started = time.monotonic()
        worker.pending.append(_Request(worker.index, worker.actor.next_batch.remote()))

    def _receive(self, request: _Request) -> TensorDictBase | None:
        """The batch of a finished request, or None when its actor failed."""
        ray = self._ray
        worker = self._workers[request.worker]
        if request in worker.pending:
            worker.pending.remove(request)
            worker.started = time.monotonic()  # the actor is on its next request since (or soon after) this one
        try:
            batch, seconds, pid = ray.get(request.ref)
        except ray.exceptions.RayTaskError as err:  # the collector raised: the actor starts afresh
            self._failed(worker, f"its collector raised {err.cause!r}", kill=True)
            return None
        except ray.exceptions.RayActorError as err:  # its process died (or is being restarted)
            self._failed(worker, f"its process died ({type(err).__name__})", kill=False)
            return None
        if pid != worker.pid:  # Ray restarted it between two requests: nothing was lost, but its weights were
            worker.pid = pid
            worker.life += 1
            self._send_weights(worker)
        worker.frames += batch.numel()
        worker.seconds += seconds
        return batch

    def _failed(self, worker: _Worker, cause: str, kill: bool) -> None:
        """Counts a failure (its batch in the making is lost) and waits for Ray's restart."""
        if worker.restarting or not worker.live:
            return  # the same failure, seen through another request
        if kill:
            self._ray.kill(worker.actor, no_restart=False)
        worker.pending.clear()  # its queued requests are lost with it
        worker.weight_calls.clear()  # and so are its weights: a restarted actor is sent the latest
        worker.restarting, worker.probe, worker.retry_at = True, None, time.monotonic()
        worker.life += 1
        worker.last_error = cause
        self._frames_lost += self.frames_per_batch

    def _probed(self, worker: _Worker) -> None:
        """The restarted actor answered (or not yet, or never will: its restarts are spent)."""
        ray = self._ray
        ref, worker.probe = worker.probe, None
        try:
            pid = int(ray.get(ref))
        except ray.exceptions.ActorUnavailableError:  # still starting: ask again shortly
            worker.retry_at = time.monotonic() + 0.05
            return
        except ray.exceptions.RayActorError as err:
            if "could not load the weights" in str(err):  # its restart died on them: that is the cause to report
                worker.last_error += f"; then its restart failed: {_summary(err)}"
            self._give_up(worker)
            return
        if pid == worker.pid:  # the old process, not killed yet
            worker.retry_at = time.monotonic() + 0.05
            return
        worker.pid, worker.restarting = pid, False
        self._send_weights(worker)

    def _send_weights(self, worker: _Worker) -> None:
        """The latest weights for a restarted actor (it read them when it started; they may have changed since)."""
        if self._weights_ref is not None:  # calls go out in order: before its next batch
            ref = worker.actor.set_weights.remote(self._weights_ref, self.policy_version)
            worker.weight_calls.append((self.policy_version, ref))

    def _check_weight_calls(self) -> None:
        """Raises if an actor failed to load weights sent to it (checked as the calls come back)."""
        ray = self._ray
        calls = [(worker, call) for worker in self._workers if worker.live for call in worker.weight_calls]
        if not calls:
            return
        done = set(ray.wait([ref for _, (_, ref) in calls], num_returns=len(calls), timeout=0)[0])
        for worker, (version, ref) in calls:
            if ref not in done:
                continue
            worker.weight_calls.remove((version, ref))
            try:
                ray.get(ref)
            except ray.exceptions.RayTaskError as err:
                raise RuntimeError(f"RayCollector: actor {worker.index} could not load the weights of policy_version "
                                   f"{version}: {_summary(err.cause)}") from None
            except ray.exceptions.RayActorError:  # it died: its batches tell, and its restart gets the latest weights
                pass

    def _check_timeouts(self) -> None:
        """Kills (for Ray to restart) the actors whose batch has taken longer than ``batch_timeout_s``."""
        if self.batch_timeout_s is None:
            return
        now = time.monotonic()
        for worker in self._workers:
            if worker.live and not worker.restarting and self._hung(worker, now):
                self._failed(worker, f"its batch timed out after {self.batch_timeout_s:g} s "
                                     f"(batch_timeout_s={self.batch_timeout_s})", kill=True)

    def _hung(self, worker: _Worker, now: float) -> bool:
        """Whether the actor's batch in the making is past ``batch_timeout_s`` (and not done)."""
        if self.batch_timeout_s is None or not worker.pending or now - worker.started <= self.batch_timeout_s:
            return False
        return not self._ray.wait([worker.pending[0].ref], timeout=0)[0]

    def _give_up(self, worker: _Worker) -> None:
        """Past the restart budget: raise, or go on without the actor."""
        worker.live, worker.restarting = False, False
        cause = worker.last_error
        if not self.ignore_worker_failures:
            raise RuntimeError(
                f"RayCollector: actor {worker.index} failed {worker.life} times, past max_worker_restarts="
                f"{self.max_worker_restarts}; last: {cause}. Pass ignore_worker_failures=True to go on without it."
            )
        if not any(w.live for w in self._workers):
            raise RuntimeError(f"RayCollector: every actor failed past its restart budget; last: {cause}")

    def _next_batch(self, wanted: Callable[[_Worker], int]) -> tuple[_Worker, TensorDictBase] | None:
        """Keeps ``wanted(worker)`` requests in flight per live actor (probing restarted ones)
        and handles the first event: a batch (returned with its actor), or a failure or an
        answered probe (None)."""
        ray = self._ray
        self._check_weight_calls()
        self._check_timeouts()
        now = time.monotonic()
        events: dict[Any, tuple[_Worker, _Request | None]] = {}
        for worker in self._workers:
            if not worker.live:
                continue
            if worker.restarting:
                if worker.probe is None and now >= worker.retry_at:
                    worker.probe = worker.actor.pid.remote()
                if worker.probe is not None:
                    events[worker.probe] = (worker, None)
                continue
            while len(worker.pending) < wanted(worker):
                self._ask(worker)
            events.update((request.ref, (worker, request)) for request in worker.pending)
        if not events:  # every actor waits to be probed again
            time.sleep(0.05)
            return None
        ready, _ = ray.wait(list(events), num_returns=1, timeout=0.05)
        if not ready:
            return None
        worker, request = events[ready[0]]
        if request is None:
            self._probed(worker)
            return None
        batch = self._receive(request)
        return None if batch is None else (worker, batch)

    # -------------------------------------------------------------- iteration
    def iterator(self) -> Iterator[TensorDictBase]:
        """Yields batches until ``total_frames`` frames are delivered (see the module)."""
        if self._closed:
            raise RuntimeError("RayCollector: iterated after shutdown()")
        yield from (self._sync_batches() if self.sync else self._async_batches())

    def _async_batches(self) -> Iterator[TensorDictBase]:
        while not self._done_collecting():
            event = self._next_batch(lambda worker: 2)
            if event is not None:
                self._frames += event[1].numel()
                yield event[1]

    def _sync_batches(self) -> Iterator[TensorDictBase]:
        while not self._done_collecting():
            batches: dict[int, TensorDictBase] = {}
            while any(w.live and w.index not in batches for w in self._workers):
                event = self._next_batch(lambda worker: 0 if worker.index in batches else 1)
                if event is not None:
                    batches.setdefault(event[0].index, event[1])
            stacked = torch.stack([batches[i] for i in sorted(batches)], 0)
            self._frames += stacked.numel()
            yield stacked

    # --------------------------------------------------------------- shutdown
    def shutdown(self) -> None:
        """Closes every actor's collector, kills the actors, and stops Ray if it started it.

        The requests still queued are cancelled, and the actors get :data:`SHUTDOWN_TIMEOUT_S`
        seconds (or ``batch_timeout_s`` if shorter), all together, to close; an actor that
        hangs (past ``batch_timeout_s`` already, or still busy then) is killed without more waiting.
        """
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        now = time.monotonic()
        closing = []
        for worker in self._workers:
            if not worker.live or worker.restarting or self._hung(worker, now):
                continue  # nothing to close gracefully: killed below
            for request in worker.pending:  # queued batches nobody will take: not worth waiting for
                try:
                    ray.cancel(request.ref)
                except Exception:  # noqa: BLE001 - a request that cannot be cancelled is only waited for
                    pass
            closing.append(worker.actor.shutdown.remote())
        grace = SHUTDOWN_TIMEOUT_S if self.batch_timeout_s is None else min(SHUTDOWN_TIMEOUT_S, self.batch_timeout_s)
        if closing:
            ray.wait(closing, num_returns=len(closing), timeout=grace)
        for worker in self._workers:
            ray.kill(worker.actor, no_restart=True)
            worker.live = False
            worker.pending.clear()
        ray.kill(self._board, no_restart=True)
        if self._owns_ray:
            ray.shutdown()

    def state_dict(self) -> dict[str, Any]:
        """The driver's counts (the actors' collectors keep their own state)."""
        return {"frames": self._frames, "policy_version": self.policy_version, "frames_lost": self._frames_lost}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restores the driver's counts."""
        self._frames = int(state_dict["frames"])
        self.policy_version = int(state_dict["policy_version"])
        self._frames_lost = int(state_dict.get("frames_lost", 0))
