"""Multi-process collectors: ``MultiSyncDataCollector`` and ``MultiaSyncDataCollector``
(aliases ``MultiSyncCollector``, ``MultiAsyncCollector``).

Each worker process runs its own ``SyncDataCollector`` on its own env. The synchronous
collector asks every worker for its share of ``frames_per_batch`` and delivers them
together, concatenated along the first batch dim (stacked on a new first dim when the
env has no batch dims); the asynchronous one keeps every worker collecting and delivers
each worker's batch of ``frames_per_batch`` as soon as it is ready, while the trainer
works on the previous one. Trajectory ids never repeat across workers (worker ``i`` of
``n`` numbers its trajectories ``i, i + n, i + 2n, ...``).

With the fork start method (the default on Linux), the policy's weights live in shared
memory: ``update_policy_weights_()`` copies the trainer's weights there and every worker
uses them at its next step. A worker that raises or dies makes the collector shut the
others down and raise an error that names it; the workers stop on ``shutdown()``, on
``with`` exit and on garbage collection, and by themselves when this process dies.
No shared memory has a name (the weights are anonymous memory that the forked workers
inherit, the batches memory files, see ``_shared.py``): a process killed at any moment
leaves nothing in ``/dev/shm``.

Examples:
    >>> from cadence.collectors import MultiSyncDataCollector
    >>> from cadence.envs import GymEnv
    >>> collector = MultiSyncDataCollector(
    ...     [lambda: GymEnv("Pendulum-v1")] * 2, frames_per_batch=20, total_frames=40
    ... )
    >>> [tuple(batch.batch_size) for batch in collector]
    [(2, 10), (2, 10)]
    >>> collector.shutdown()
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.collectors._compiled_policy import for_workers
from cadence.collectors._shared import BufferLayout, SharedBuffer, map_layout, same_layout
from cadence.collectors.sync import DataCollectorBase, Policy, SyncDataCollector, _check_frames, _load_weights
from cadence.collectors.utils import split_trajectories
from cadence.envs._shared_memory import anonymous_like
from cadence.envs.batched import EnvCreator
from cadence.envs.common import EnvBase, next_seed
from cadence.envs.seeding import validate_seed
from cadence.envs.utils import ExplorationType
from cadence.envs.workers import WorkerError, WorkerPool, WorkerTimeoutError, default_start_method

__all__ = [
    "AsyncCollector",
    "MultiAsyncCollector",
    "MultiSyncCollector",
    "MultiSyncDataCollector",
    "MultiaSyncDataCollector",
    "aSyncDataCollector",
]


class _CollectorWorker:
    """What runs in a worker process: one ``SyncDataCollector``.

    Args:
        shared_weights: the policy's weights in shared memory (fork), swapped into the
            worker's policy so that the trainer's updates reach it; or ``None``.
        share_batches: hand the batches over through a shared buffer (``_shared.py``).
        **kwargs: the collector's arguments.
    """

    def __init__(self, shared_weights: TensorDictBase | None, share_batches: bool = True, **kwargs: Any) -> None:
        policy = kwargs.get("policy")
        if shared_weights is not None and isinstance(policy, torch.nn.Module):
            shared_weights.to_module(policy)
        self.collector = SyncDataCollector(**kwargs)
        self.share_batches = share_batches
        self.buffer: SharedBuffer | None = None

    def collect(self, random: bool, weights: TensorDictBase | None = None) -> TensorDictBase | BufferLayout | None:
        """One batch (``weights``, if given, are loaded into the policy first): copied
        into the shared buffer (``None`` returned) when it fits there; else laid out in a
        new buffer (its layout returned), or returned itself when batches are not shared."""
        if weights is not None:
            self.load_weights(weights)
        collector = self.collector
        batch = collector._collect(random)
        collector._frames += batch.numel()
        collector._iter += 1
        buffer = self.buffer
        if buffer is not None:
            if same_layout(buffer.view, batch):
                buffer.view.update_(batch)
                return None
            buffer.close()
            self.buffer = None
        if self.share_batches:
            try:
                self.buffer = SharedBuffer(batch)
            except TypeError:  # non-tensor entries: the pipe it is
                self.share_batches = False
            else:
                return self.buffer.layout
        return batch

    def stop_sharing(self) -> TensorDictBase:
        """The batch in the buffer, which the parent could not map; the next ones go
        through the pipe."""
        assert self.buffer is not None
        batch = self.buffer.view.clone()
        self.buffer.close()
        self.buffer = None
        self.share_batches = False
        return batch

    def load_weights(self, weights: TensorDictBase) -> None:
        policy = self.collector.policy
        if isinstance(policy, torch.nn.Module):
            _load_weights(policy, weights)

    def set_seed(self, seed: int, static_seed: bool) -> int | None:
        return self.collector.set_seed(seed, static_seed=static_seed)

    def state_dict(self) -> dict[str, Any]:
        return self.collector.state_dict()

    def load_state_dict(self, state: dict[str, Any], continue_episodes: bool) -> None:
        self.collector.load_state_dict(state, continue_episodes=continue_episodes)

    def close(self) -> None:
        if self.buffer is not None:
            self.buffer.close()
        self.collector.shutdown()


class _MultiCollectorBase(DataCollectorBase):
    """What the two multi-process collectors share: the workers, weights, seeds, state."""

    _sync: bool = True

    def __init__(
        self,
        create_env_fn: Callable[..., EnvBase] | Sequence[Callable[..., EnvBase]],
        policy: Policy | None = None,
        *,
        frames_per_batch: int,
        total_frames: int | None = -1,
        num_workers: int | None = None,
        device: torch.device | str | None = None,
        storing_device: torch.device | str | None = None,
        env_device: torch.device | str | None = None,
        policy_device: torch.device | str | None = None,
        create_env_kwargs: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = 0,
        reset_at_each_iter: bool = False,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        split_trajs: bool | None = False,
        exploration_type: ExplorationType = ExplorationType.RANDOM,
        fast_path: bool = True,
        compile_policy: bool | dict[str, Any] = False,
        cudagraph_policy: bool | dict[str, Any] = False,
        timeout: float | None = 300.0,
        start_method: str | None = None,
        share_batches: bool = True,
    ) -> None:
        frames_per_batch, total_frames, init_random_frames = _check_frames(
            frames_per_batch, total_frames, init_random_frames
        )
        compile_policy, cudagraph_policy = for_workers(compile_policy, cudagraph_policy)
        fns = self._env_fns(create_env_fn, num_workers)
        n = len(fns)
        kwargs_list = (
            list(create_env_kwargs)
            if isinstance(create_env_kwargs, Sequence)
            else [dict(create_env_kwargs or {})] * n
        )
        if len(kwargs_list) != n:
            raise ValueError(f"create_env_kwargs: expected one dict per worker ({n}), got {len(kwargs_list)}.")
        if policy is not None and not callable(policy):
            raise TypeError(f"policy must be a callable on tensordicts or None, got {type(policy).__name__}.")
        self.num_workers = n
        self.total_frames = total_frames
        self.init_random_frames = init_random_frames
        self.postproc = postproc
        self.split_trajs = bool(split_trajs)
        self.policy = policy
        self._frames = 0
        self._iter = 0
        self._closed = False
        per_worker = math.ceil(frames_per_batch / n) if self._sync else frames_per_batch
        self.frames_per_batch_worker = per_worker
        self.requested_frames_per_batch = frames_per_batch
        self.frames_per_batch = per_worker * n if self._sync else per_worker
        method = start_method or default_start_method()
        self._shared_weights: TensorDictBase | None = None
        if isinstance(policy, torch.nn.Module) and method == "fork":
            # anonymous shared memory: inherited by the forked workers, named nowhere
            self._shared_weights = anonymous_like(TensorDict.from_module(policy).data)
        self._pending_weights: TensorDictBase | None = None
        factories = []
        for index, (fn, env_kwargs) in enumerate(zip(fns, kwargs_list)):
            factories.append(
                functools.partial(
                    _CollectorWorker,
                    self._shared_weights,
                    share_batches,
                    create_env_fn=fn,
                    create_env_kwargs=env_kwargs,
                    policy=policy,
                    frames_per_batch=per_worker,
                    total_frames=-1,
                    device=device,
                    storing_device=storing_device,
                    env_device=env_device,
                    policy_device=policy_device,
                    max_frames_per_traj=max_frames_per_traj,
                    reset_at_each_iter=reset_at_each_iter,
                    exploration_type=exploration_type,
                    fast_path=fast_path,
                    compile_policy=compile_policy,
                    cudagraph_policy=cudagraph_policy,
                    traj_id_stride=n,
                    traj_id_offset=index,
                )
            )
        self._pool = WorkerPool(factories, timeout=timeout, start_method=method, name=type(self).__name__)
        self.share_batches = share_batches
        self._buffers: dict[int, TensorDictBase] = {}
        self._busy: set[int] = set()
        self._sent_at: dict[int, float] = {}
        self._ready: list[tuple[int, TensorDictBase]] = []

    @staticmethod
    def _env_fns(create_env_fn: Any, num_workers: int | None) -> list[Callable[..., EnvBase]]:
        if isinstance(create_env_fn, Sequence) and not isinstance(create_env_fn, str):
            fns = list(create_env_fn)
            if num_workers is not None and num_workers != len(fns):
                raise ValueError(f"num_workers={num_workers} but create_env_fn lists {len(fns)} env constructors.")
        else:
            if num_workers is None:
                raise ValueError("Give create_env_fn as a list (one env constructor per worker) or pass num_workers.")
            fns = [create_env_fn] * num_workers
        if not fns:
            raise ValueError("A multi-process collector needs at least one worker; create_env_fn is empty.")
        for i, fn in enumerate(fns):
            if isinstance(fn, EnvBase) or not callable(fn):
                raise TypeError(
                    f"create_env_fn[{i}]: expected a callable that builds the env in the worker (an EnvCreator, a "
                    f"function, a lambda), got {type(fn).__name__}."
                )
        # cloudpickled, so that lambdas and closures reach spawned workers too
        return [fn if isinstance(fn, EnvCreator) else EnvCreator(fn, share_state=False) for fn in fns]

    # ------------------------------------------------------------------ workers
    @property
    def pool(self) -> WorkerPool:
        """The worker processes (started on first use)."""
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} was shut down; build a new one.")
        return self._pool.start()

    def _guard(self, error: WorkerError) -> NoReturn:
        """A worker failed: stop every worker and re-raise (the error names the worker)."""
        self.shutdown()
        raise error

    def _random(self) -> bool:
        return self.policy is None or self._frames < self.init_random_frames

    def _send_collect(self, index: int) -> None:
        weights = self._pending_weights
        self.pool.send(index, "collect", self._random(), weights)
        self._busy.add(index)
        self._sent_at[index] = time.monotonic()

    def _check_overdue(self) -> None:
        """Raises for a worker that owes a batch for longer than the timeout (the async
        collector could otherwise go on with the others and never notice it hangs)."""
        timeout = self._pool.timeout
        if timeout is None:
            return
        now = time.monotonic()
        for index in sorted(self._busy):
            if now - self._sent_at[index] > timeout:
                pid = self._pool.pids[index]
                raise WorkerTimeoutError(
                    f"worker {index} of {type(self).__name__!r} (pid {pid}) gave no batch within the timeout of "
                    f"{timeout} s while the other workers delivered theirs; the workers were stopped",
                    index=index,
                    method="collect",
                    timeout=timeout,
                )

    def _finish(self, batch: TensorDictBase) -> TensorDictBase:
        if self.split_trajs:
            batch = split_trajectories(batch, prefix="collector")
        if self.postproc is not None:
            batch = self.postproc(batch)
        return batch

    def _receive(self, index: int) -> TensorDictBase:
        """Reads the batch of worker ``index``: from its shared buffer (mapped when the
        worker sends a new one's layout), or from its pipe."""
        reply = self.pool.recv(index)
        self._busy.discard(index)
        if isinstance(reply, BufferLayout):
            try:
                self._buffers[index] = map_layout(reply)
            except OSError:  # /proc not readable here, say: this worker's batches take the pipe
                return self.pool.call("stop_sharing", indices=[index])[0]
            reply = None
        if reply is None:
            buffer = self._buffers[index]
            # the sync collector copies the buffers when it gathers them; the async one
            # hands a batch over while the worker writes the next one
            return buffer if self._sync else buffer.clone()
        return reply

    def _settle(self) -> None:
        """Reads the batches still on their way (kept for the next iteration)."""
        try:
            for index in sorted(self._busy):
                self._ready.append((index, self._receive(index)))
        except WorkerError as err:
            self._guard(err)
        self._busy.clear()

    # ------------------------------------------------------------------ control
    def update_policy_weights_(self, policy_or_weights: Any = None) -> None:
        """Pushes the trainer's policy weights (or the ones given) to every worker.

        With fork workers the weights are copied into shared memory, which the
        workers' policies use directly; otherwise they travel with the next request.

        Examples:
            >>> import torch
            >>> from tensordict.nn import TensorDictModule
            >>> from cadence.collectors import MultiSyncDataCollector
            >>> from cadence.envs import GymEnv
            >>> policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
            >>> collector = MultiSyncDataCollector([lambda: GymEnv("Pendulum-v1")] * 2, policy, frames_per_batch=10)
            >>> with torch.no_grad():
            ...     _ = policy.module.bias.fill_(0.5)
            >>> collector.update_policy_weights_()
            >>> collector.shutdown()
        """
        source = self.policy if policy_or_weights is None else policy_or_weights
        if source is None:
            return
        if isinstance(source, torch.nn.Module):
            weights = TensorDict.from_module(source).data
        elif isinstance(source, TensorDictBase):
            weights = source
        elif isinstance(source, dict):
            weights = TensorDict(dict(source)).unflatten_keys(".")
        else:
            raise TypeError(
                f"update_policy_weights_ takes a module, a TensorDict of weights or a state dict, got "
                f"{type(source).__name__}."
            )
        if self._shared_weights is not None:
            self._shared_weights.update_(weights)
        else:
            self._pending_weights = weights.clone()

    def set_seed(self, seed: int, static_seed: bool = False) -> int | None:
        """Seeds worker 0 with ``seed``, worker 1 with the seed worker 0 returns, and so
        on; returns the seed after the last. Each worker's next batch starts from a reset.

        Raises:
            TypeError, ValueError: a seed that is not None or an int with
                ``0 <= seed < 2**63``, checked before anything changes: the batches on
                their way are kept and the workers go on as before.

        Examples:
            >>> from cadence.collectors import MultiSyncDataCollector
            >>> from cadence.envs import GymEnv
            >>> runs = []
            >>> for _ in range(2):
            ...     with MultiSyncDataCollector([lambda: GymEnv("Pendulum-v1")] * 2, frames_per_batch=4) as c:
            ...         _ = c.set_seed(0)
            ...         runs.append(c.next()["next", "observation"])
            >>> bool((runs[0] == runs[1]).all())
            True
        """
        # here, not in the workers: a worker's refusal would stop them all, after the batches
        # on their way were dropped
        seed = validate_seed(seed, f"{type(self).__name__}.set_seed")
        self._settle()
        self._ready.clear()
        try:
            for index in range(self.num_workers):
                (out,) = self.pool.call("set_seed", seed, static_seed, indices=[index])
                seed = seed if static_seed else (out if out is not None else next_seed(seed))
        except WorkerError as err:
            self._guard(err)
        return seed

    def state_dict(self) -> dict[str, Any]:
        """Frame and batch counts and each worker's collector state.

        Examples:
            >>> from cadence.collectors import MultiSyncDataCollector
            >>> from cadence.envs import GymEnv
            >>> with MultiSyncDataCollector([lambda: GymEnv("Pendulum-v1")] * 2, frames_per_batch=4) as c:
            ...     _ = c.next()
            ...     state = c.state_dict()
            >>> state["frames"], len(state["workers"])
            (4, 2)
        """
        self._settle()
        try:
            workers = self.pool.call("state_dict")
        except WorkerError as err:
            self._guard(err)
        return {"frames": self._frames, "iter": self._iter, "workers": workers}

    def load_state_dict(self, state_dict: dict[str, Any], *, continue_episodes: bool = False) -> None:
        """Restores what :meth:`state_dict` returned (workers in the same order);
        ``continue_episodes`` as for ``SyncDataCollector.load_state_dict``.

        Examples:
            >>> from cadence.collectors import MultiSyncDataCollector
            >>> from cadence.envs import GymEnv
            >>> with MultiSyncDataCollector([lambda: GymEnv("Pendulum-v1")] * 2, frames_per_batch=4) as c:
            ...     _ = c.next()
            ...     state = c.state_dict()
            ...     _ = c.next()
            ...     c.load_state_dict(state)
            ...     c.state_dict()["frames"]
            4
        """
        workers = state_dict.get("workers")
        if workers is None or len(workers) != self.num_workers:
            raise ValueError(
                f"load_state_dict: expected a state with {self.num_workers} worker states, got "
                f"{None if workers is None else len(workers)}."
            )
        self._settle()
        self._ready.clear()
        self._frames = int(state_dict["frames"])
        self._iter = int(state_dict["iter"])
        try:
            for index, state in enumerate(workers):
                self.pool.call("load_state_dict", state, continue_episodes, indices=[index])
        except WorkerError as err:
            self._guard(err)

    def shutdown(self) -> None:
        """Stops the workers (closing their envs); no process is left behind.

        Examples:
            >>> from cadence.collectors import MultiaSyncDataCollector
            >>> from cadence.envs import GymEnv
            >>> collector = MultiaSyncDataCollector([lambda: GymEnv("Pendulum-v1")] * 2, frames_per_batch=4)
            >>> _ = collector.next()
            >>> collector.shutdown()
            >>> collector._pool.pids
            [None, None]
        """
        if not self._closed:
            self._closed = True
            self._busy.clear()
            self._ready.clear()
            self._buffers.clear()
            self._pool.close()

    def __del__(self) -> None:
        pool = self.__dict__.get("_pool")
        if pool is not None:
            pool.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_workers={self.num_workers}, frames_per_batch={self.frames_per_batch}, "
            f"total_frames={self.total_frames})"
        )


class MultiSyncDataCollector(_MultiCollectorBase):
    """Collects in ``num_workers`` processes and delivers their batches together.

    Each worker collects ``ceil(frames_per_batch / num_workers)`` frames per batch; the
    batch delivered concatenates them along the first batch dim (``[n * B, T]`` for envs
    of batch ``[B]``; ``[n, T]`` for envs without batch dims).

    Args:
        create_env_fn: one env constructor per worker (a list), or one for all with
            ``num_workers``; callables (``EnvCreator`` objects, functions, lambdas), not envs.
        policy: the policy (copied into every worker); ``None`` for random actions.
        frames_per_batch: the frames in each delivered batch.
        total_frames: stop after this many frames (-1 or ``None``: never).
        num_workers: the number of workers when ``create_env_fn`` is a single callable.
        device, storing_device, env_device, policy_device, create_env_kwargs, max_frames_per_traj, reset_at_each_iter, exploration_type, fast_path, compile_policy, cudagraph_policy: as
            for ``SyncDataCollector``, per worker.
        init_random_frames: take random actions until this many frames are delivered.
        postproc: applied to each delivered batch.
        split_trajs: deliver ``split_trajectories(batch)``.
        timeout: seconds a worker may take for a batch before it is reported (and killed).
        start_method: ``"fork"`` (default on Linux) or ``"spawn"``.
        share_batches: hand batches over through shared memory: a buffer that each
            worker lays out like its first batch (and again when the entries change),
            in a memory file that no directory names (see ``_shared.py``); ``False``
            always pickles them through the pipes.

    Examples:
        >>> from cadence.collectors import MultiSyncDataCollector
        >>> from cadence.envs import GymEnv, SerialEnv
        >>> make = lambda: SerialEnv(2, lambda: GymEnv("Pendulum-v1"))
        >>> with MultiSyncDataCollector([make, make], frames_per_batch=40, total_frames=80) as collector:
        ...     for batch in collector:
        ...         print(batch.batch_size, batch["collector", "traj_ids"][:, 0].tolist())
        torch.Size([4, 10]) [0, 2, 1, 3]
        torch.Size([4, 10]) [0, 2, 1, 3]
    """

    _sync = True

    def iterator(self) -> Iterator[TensorDictBase]:
        """Yields the gathered batches until ``total_frames`` frames are delivered."""
        while not self._done_collecting():
            if not self._ready:
                try:
                    for index in range(self.num_workers):
                        self._send_collect(index)
                    self._pending_weights = None
                    self._settle()
                except WorkerError as err:
                    self._guard(err)
            parts = dict(self._ready)
            self._ready.clear()
            batch = self._gather([parts[i] for i in range(self.num_workers)])
            self._frames += batch.numel()
            self._iter += 1
            yield self._finish(batch)

    @staticmethod
    def _gather(parts: list[TensorDictBase]) -> TensorDictBase:
        if parts[0].batch_dims > 1:
            batch = torch.cat(parts, 0)
        else:
            batch = torch.stack(parts, 0)
        batch.names = [None] * (batch.batch_dims - 1) + ["time"]
        return batch


class MultiaSyncDataCollector(_MultiCollectorBase):
    """Keeps ``num_workers`` processes collecting and delivers each worker's batch as
    soon as it is ready.

    Every worker collects batches of ``frames_per_batch`` frames, shaped like a
    ``SyncDataCollector``'s; while the trainer works on one, the workers go on. The
    arguments are ``MultiSyncDataCollector``'s.

    Examples:
        >>> from cadence.collectors import MultiaSyncDataCollector
        >>> from cadence.envs import GymEnv
        >>> make = lambda: GymEnv("Pendulum-v1")
        >>> with MultiaSyncDataCollector([make, make], frames_per_batch=10, total_frames=40) as collector:
        ...     print(sorted(tuple(batch.batch_size) for batch in collector))
        [(10,), (10,), (10,), (10,)]
    """

    _sync = False

    def iterator(self) -> Iterator[TensorDictBase]:
        """Yields the workers' batches as they come until ``total_frames`` frames are delivered."""
        while not self._done_collecting():
            try:
                if not self._ready:
                    pool = self.pool
                    for index in range(self.num_workers):
                        if index not in self._busy:
                            self._send_collect(index)
                    self._pending_weights = None
                    answered = pool.ready(sorted(self._busy)) or [min(self._busy)]  # recv() says it timed out
                    for index in answered:
                        self._ready.append((index, self._receive(index)))
                    self._check_overdue()
                index, batch = self._ready.pop(0)
                self._frames += batch.numel()
                self._iter += 1
                if not self._done_collecting():
                    self._send_collect(index)  # this worker goes on while the trainer works
            except WorkerError as err:
                self._guard(err)
            yield self._finish(batch)


class AsyncCollector(MultiaSyncDataCollector):
    """One collector in a process of its own: batches are collected while the trainer
    works on the last one (a ``MultiaSyncDataCollector`` with one worker).

    Args:
        create_env_fn: builds the env (or the env itself, for the ``"fork"`` start method).
        policy: the collecting policy (random actions if ``None``).
        **kwargs: ``MultiaSyncDataCollector``'s other arguments.

    Examples:
        >>> from cadence.collectors import AsyncCollector
        >>> from cadence.envs import GymEnv
        >>> with AsyncCollector(lambda: GymEnv("Pendulum-v1"), frames_per_batch=10, total_frames=20) as collector:
        ...     print([batch.numel() for batch in collector])
        [10, 10]
    """

    def __init__(self, create_env_fn: Any, policy: Any = None, **kwargs: Any) -> None:
        if kwargs.pop("num_workers", 1) != 1:
            raise ValueError("AsyncCollector runs one worker; use MultiaSyncDataCollector for more.")
        super().__init__([create_env_fn], policy, **kwargs)


MultiSyncCollector = MultiSyncDataCollector
MultiAsyncCollector = MultiaSyncDataCollector
aSyncDataCollector = AsyncCollector  # noqa: N816 - the reference's former name
