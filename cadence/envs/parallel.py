"""``ParallelEnv``: one process per sub-env, data exchanged through shared memory.

The parent lays out three shared-memory tensordicts from the specs before the
workers start (forked workers inherit them): the step inputs (actions, state), the
step outputs (the ``"next"`` data) and the current data of each worker (what a reset
returns, kept up to date by every step). A step is then one small message per worker
(``"step"``) and one in-place copy each way. Envs whose data cannot live in fixed
buffers (dynamic ``-1`` dims, non-tensor entries) are detected from their specs and
send their data through the pipes instead.

A rollout with random actions that never stops early runs in chunks: each worker
rolls its own env out on its array simulator (:mod:`cadence.envs.array_simulator`), with actions drawn here (so the
result equals ``SerialEnv``'s for the same seed), in one message per rollout.

A gymnasium simulator whose observations do not have the shape of its declared space
is named (a ``SpecMismatchError`` with the key and both shapes, raised in the worker and
reported here with its index) on every path: the chunks check as ``GymEnv.rollout``
does, and a worker stepping into the shared arrays translates a failed write and
checks the first observation after each reset for what numpy would broadcast silently.

Faults never hang the caller (see ``workers.py``): an exception in a worker is raised
here with its index and traceback; a worker that hangs past ``timeout`` raises a timeout
error; a dead worker is noticed at once and, with ``max_restarts``, rebuilt (and
reseeded, if it was seeded) on whichever call finds it dead: every call to the workers
goes through one method, ``_on_workers``. A reset or a rollout chunk, which start
afresh anyway, is sent again to the rebuilt worker; a step cannot be replayed, so the
rebuilt worker is reset and its step output is that reset's data with no reward and
the episode truncated (``done`` and ``truncated`` set), which ``step_and_maybe_reset``,
``rollout`` and the collectors treat as any other end of episode. Past ``max_restarts``
the error names the worker and how it died.

Examples:
    >>> from cadence.envs import GymEnv, ParallelEnv
    >>> env = ParallelEnv(2, lambda: GymEnv("Pendulum-v1", g=9.81))
    >>> env.g
    [9.81, 9.81]
    >>> env.rollout(4)["next", "reward"].shape
    torch.Size([2, 4, 1])
    >>> env.close()
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from cadence.data import NonTensor
from cadence.envs._shared_memory import anonymous_like
from cadence.envs.array_simulator import ArraySimulator, StepArrays, arrays_fit
from cadence.envs.batched import BatchedEnvBase, BatchedMethod, EnvCreator, EnvFactory, SerialEnv
from cadence.envs.common import EnvBase, next_seed
from cadence.envs.utils import exclude_pruned
from cadence.envs.values_loop import ValuesLoop, values_loop_applies
from cadence.envs.workers import WorkerDiedError, WorkerError, WorkerPool, default_start_method

__all__ = ["ParallelEnv", "ParallelSimulators"]

_CALLABLE = "<callable>"  # what a worker answers for an attribute that is a method


def _same_request(index: int, request: tuple[Any, ...]) -> tuple[Any, ...]:
    """What a rebuilt worker is sent again: the very request it died on."""
    return request


class _SharedBuffers:
    """The shared-memory tensordicts of a parallel batch, laid out from its specs.

    The memory is anonymous (see ``_shared_memory.py``): the forked workers inherit it,
    and no process killed at any moment can leave a segment behind in ``/dev/shm``.
    """

    def __init__(self, env: ParallelEnv) -> None:
        zeros = env._step_spec().zero()
        action_keys = list(env.full_action_spec.keys(True, True))
        # what a step reads: the actions and, for stateless envs, the state
        self.input_keys = action_keys + list(env.full_state_spec.keys(True, True))
        self.input = anonymous_like(zeros.select(*self.input_keys))
        # what a step writes: the "next" data
        self.output = anonymous_like(zeros.get("next"))
        # what a worker stands at: a reset's output, updated by each step
        self.current = anonymous_like(zeros.exclude("next", *action_keys))
        self.current_keys = list(self.current.keys(True, True))


class _EnvWorker:
    """What runs in a worker process: one env and its slices of the shared buffers."""

    def __init__(self, creator: EnvCreator, index: int, buffers: _SharedBuffers | None) -> None:
        self.env = creator()
        self.index = index
        self.shared = buffers is not None
        # a single "action" stepped into the shared arrays through the array protocol
        self.simulator = self.env._array_simulator() if arrays_fit(self.env) else None
        if buffers is not None:
            self.input = buffers.input[index]
            self.output = buffers.output[index]
            self.current = buffers.current[index]
            self.current_keys = buffers.current_keys
            self.reward_keys = self.env.reward_keys
        if buffers is not None and self.simulator is not None:
            self._bind_arrays()

    @property
    def fast(self) -> bool:
        """Whether this worker steps its simulator into the shared arrays and rolls out in
        chunks (the loop on values over its env)."""
        return self.simulator is not None and values_loop_applies(self.env)

    def _bind_arrays(self) -> None:
        """Numpy views of the shared slices, for stepping the simulator directly."""
        assert self.simulator is not None
        self.observation_checked = False  # the first step after a reset checks its observation
        self.action = self.input.get("action")
        flat = {name: self.output.get(name).numpy().reshape(-1) for name in ("reward", "done", "terminated", "truncated")}
        self.reward_out, self.done_out = flat["reward"], flat["done"]
        self.terminated_out, self.truncated_out = flat["terminated"], flat["truncated"]
        keys = self.simulator.observation_keys
        self.obs_out = {key: self.output.get(key).numpy() for key in keys}
        self.obs_now = {key: self.current.get(key).numpy() for key in keys}
        self.done_now = {name: self.current.get(name).numpy().reshape(-1) for name in ("done", "terminated", "truncated")}
        # the shared output as one step's arrays (a time dim of one): the kernel writes it in place
        batch = tuple(self.env.batch_size)
        self.arrays = StepArrays(
            {key: out[None] for key, out in self.obs_out.items()}, {},
            self.reward_out.reshape(1, *batch), self.terminated_out.reshape(1, *batch),
            self.truncated_out.reshape(1, *batch),
        )

    # ------------------------------------------------------------------ protocol
    def set_seed(self, seed: int | None, static_seed: bool) -> int | None:
        return self.env.set_seed(seed, static_seed=static_seed)

    def reset(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        out = self.env.reset(tensordict)
        if not self.shared:
            return out
        self.observation_checked = False
        self.current.update_(out.select(*self.current_keys, strict=False))
        return None

    def step(self, tensordict: TensorDictBase | None = None) -> TensorDictBase | None:
        if not self.shared:
            assert tensordict is not None
            return self.env.step(tensordict).get("next")
        if self.simulator is not None:
            self._step_arrays()
            return None
        data = self.env.step(self.input.copy())
        result = data.get("next")
        self.output.update_(result)
        self.current.update_(result.select(*self.current_keys, strict=False))
        return None

    def _step_arrays(self) -> None:
        simulator = self.simulator
        assert simulator is not None
        # once per episode: what numpy would broadcast silently (a scalar)
        simulator.write_step(simulator.to_backend(self.action), 0, self.arrays, check=not self.observation_checked)
        self.observation_checked = True
        for key, now in self.obs_now.items():
            now[...] = self.obs_out[key]
        self.done_out[...] = self.terminated_out | self.truncated_out
        for name, out in (("done", self.done_out), ("terminated", self.terminated_out), ("truncated", self.truncated_out)):
            self.done_now[name][...] = out

    def rollout_chunk(self, actions: torch.Tensor, max_steps: int, set_truncated: bool) -> TensorDictBase:
        # the time loop over this worker's env, from a reset, with the given actions
        loop = ValuesLoop(self.env)
        recording = loop.recording()
        root = loop.entries(self.env.reset())
        loop.run(root, max_steps, None, recording, actions=actions, reset_after_last=False)
        data = loop.assemble(recording)
        if set_truncated:
            self.env._mark_truncated(data)
        if self.shared:
            last = data[..., -1].get("next")
            self.current.update_(last.select(*self.current_keys, strict=False))
        return data

    def env_attr(self, name: str) -> Any:
        value = getattr(self.env, name)
        return _CALLABLE if callable(value) else value

    def env_call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return getattr(self.env, name)(*args, **kwargs)

    def close(self) -> None:
        self.env.close()


class ParallelSimulators(ArraySimulator):
    """A ``ParallelEnv``'s workers on the array protocol: a step writes the batch's action
    into the shared input and sends every worker one message; each steps its own simulator
    into the shared output, which this reads as numpy views (copied into the caller's
    arrays by :meth:`write_observation`). Resets of the done components go through the
    env's ``reset`` with ``"_reset"`` masks (rare: at the end of episodes).

    Args:
        env: a ``ParallelEnv`` with shared buffers whose workers all have array simulators.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> env = ParallelEnv(2, lambda: GymEnv("Pendulum-v1"))
        >>> simulator = env._array_simulator()
        >>> type(simulator).__name__, simulator.observation_keys
        ('ParallelSimulators', ('observation',))
        >>> env.close()
    """

    @classmethod
    def for_env(cls, env: EnvBase) -> ArraySimulator | None:
        """The workers, where each steps its own kernel into the shared arrays (in-process:
        the one env's kernel); ``None`` otherwise."""
        batch: Any = env
        batch.start()
        if batch._in_process is not None:
            return batch._in_process._array_simulator()
        return cls(batch) if batch._workers_step_arrays() else None

    def describe(self) -> str:
        return f"parallel: {self.env.num_workers} workers, each stepping its kernel into shared arrays"

    def __init__(self, env: ParallelEnv) -> None:
        super().__init__(env, list(env.full_observation_spec.keys()))
        shared = env._shared
        assert shared is not None
        batch = tuple(env.batch_size)
        self._action = shared.input.get("action")
        self._obs = {key: shared.output.get(key).numpy() for key in self.observation_keys}
        self._reward = shared.output.get("reward").numpy().reshape(batch)
        self._terminated = shared.output.get("terminated").numpy().reshape(batch)
        self._truncated = shared.output.get("truncated").numpy().reshape(batch)

    def to_backend(self, action: torch.Tensor) -> Any:
        """The protocol's ``to_backend``: the action as it is (each worker converts its part)."""
        return action  # each worker converts its part

    def reset_all(self) -> Any:
        """The protocol's ``reset_all``: the ParallelEnv's reset, as arrays."""
        out = self.env.reset()
        return {key: out.get(key).numpy() for key in self.observation_keys}

    def step(self, action: Any) -> tuple[Any, Any, Any, Any]:
        """The protocol's ``step``: the action written into shared memory, one message to the workers, their
        results read from shared memory."""
        self._action.copy_(action)
        self.env._step_shared()  # type: ignore[attr-defined]
        return self._obs, self._reward, self._terminated, self._truncated

    def reset_done(self, done: np.ndarray, obs: Any) -> Any:
        """The protocol's ``reset_done``: a partial reset of the workers whose sub-envs are done."""
        env = self.env
        entries: dict[str, Any] = {key: torch.from_numpy(np.array(obs[key])) for key in self.observation_keys}
        entries["_reset"] = torch.from_numpy(np.array(done)).unsqueeze(-1)
        out = env.reset(TensorDict(entries, batch_size=env.batch_size))
        return {key: out.get(key).numpy() for key in self.observation_keys}

    def write_observation(self, targets: dict[str, np.ndarray], index: tuple[Any, ...], obs: Any) -> None:
        """The protocol's ``write_observation``: each observation entry at ``index``."""
        for key, array in targets.items():
            array[index] = obs[key]


class ParallelEnv(BatchedEnvBase):
    """``num_workers`` envs, each in its own process, with the API of any env.

    Args:
        num_workers: the number of sub-envs (and processes).
        create_env_fn: builds a sub-env (an ``EnvCreator`` or any callable; closures
            and lambdas work: workers are forked); or one per worker.
        create_env_kwargs: its keyword arguments; or one dict per worker.
        device: the batch's device.
        timeout: seconds a worker may take to answer before a timeout error.
        max_restarts: how many times each worker may be rebuilt after dying, on any
            call (reset, step, rollout); see the module's docstring. ``restarts``
            counts them.
        start_method: ``"fork"`` (the default on Linux, see ``workers.py``) or
            ``"spawn"``; spawned workers send their data through the pipes.
        pin_memory: return step outputs in pinned memory, for fast copies to a GPU
            (needs CUDA; without it the outputs are ordinary tensors).
        serial_for_single: with one worker, keep its env in this process (as a
            ``SerialEnv`` of one would: same batch size and data, no process, no
            message per step); more workers are unaffected.
        num_threads: ``torch.set_num_threads`` in this process when the workers start
            (``None``: the threads it had less one per worker, at least one), so that
            its own threads leave the workers their cores; the count it had comes back
            at :meth:`close` (unless changed since).
        num_sub_threads: ``torch.set_num_threads`` in each worker.
        busy_wait: seconds that each worker, after a reply, and this process, before
            one, poll their pipe before they sleep on it, giving the CPU away between polls
            (see ``WorkerPool``): a step loop then wakes no sleeping process (measured: it
            helps on two cores shared by two workers and this process, and more with free
            cores). ``0`` sleeps at once.

    Examples:
        >>> from cadence.envs import GymEnv, ParallelEnv
        >>> with ParallelEnv(2, lambda: GymEnv("CartPole-v1", num_envs=3)) as env:
        ...     print(env.batch_size, env.rollout(5, break_when_any_done=False).batch_size)
        torch.Size([2, 3]) torch.Size([2, 3, 5])
        >>> single = ParallelEnv(1, lambda: GymEnv("CartPole-v1"), serial_for_single=True)
        >>> single.batch_size, single.runs_in_process
        (torch.Size([1]), True)
    """

    #: The workers, each stepping its own kernel into the shared arrays.
    array_kernel = ParallelSimulators

    def __init__(
        self,
        num_workers: int,
        create_env_fn: EnvFactory | Sequence[EnvFactory],
        create_env_kwargs: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
        *,
        device: torch.device | str | None = None,
        timeout: float | None = 60.0,
        max_restarts: int = 0,
        start_method: str | None = None,
        pin_memory: bool = False,
        serial_for_single: bool = False,
        num_threads: int | None = None,
        num_sub_threads: int = 1,
        busy_wait: float = 5e-4,
    ) -> None:
        super().__init__(num_workers, create_env_fn, create_env_kwargs, device=device)
        if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int)
                                        or num_threads < 1):
            raise ValueError(f"num_threads must be None or an int >= 1, got {num_threads!r}")
        self.num_threads = num_threads
        self.num_sub_threads = num_sub_threads
        self.busy_wait = busy_wait
        self._threads_before: tuple[int, int] | None = None  # (count before start, count set)
        self.serial_for_single = serial_for_single
        # one worker kept in this process: a SerialEnv of one does the work
        self._in_process = (
            SerialEnv(1, self.create_env_fn, device=device) if serial_for_single and num_workers == 1 else None
        )
        if self._in_process is not None:
            self._in_process.rng = self.rng  # its random actions come from this env's seeded generator
        self.timeout = timeout
        self.max_restarts = max_restarts
        self.start_method = start_method or default_start_method()
        self.pin_memory = pin_memory and torch.cuda.is_available()
        self._restarts = [0] * num_workers
        self._worker_seeds: list[int | None] = [None] * num_workers
        self._pool: WorkerPool | None = None
        self._shared: _SharedBuffers | None = None
        self._current: list[TensorDictBase | None] = [None] * num_workers

    @property
    def runs_in_process(self) -> bool:
        """Whether the env runs in this process (``serial_for_single`` with one worker)."""
        return self._in_process is not None

    # ------------------------------------------------------------------ workers
    def _uses_pipes(self) -> bool:
        """Whether data must go through the pipes: dynamic dims, non-tensor data, or
        workers that do not inherit this process's memory."""
        spec = self._step_spec()
        leaves = [leaf for _, leaf in spec.items(include_nested=True, leaves_only=True)]
        return (
            self.start_method != "fork"
            or self._has_dynamic_specs()
            or any(isinstance(leaf, NonTensor) for leaf in leaves)
        )

    def _start_workers(self) -> None:
        if self._in_process is not None:
            self._in_process.start()
            self._fast_workers = False
            return
        self._shared = None if self._uses_pipes() else _SharedBuffers(self)
        factories = [
            functools.partial(_EnvWorker, creator, index, self._shared)
            for index, creator in enumerate(self.create_env_fn)
        ]
        self._pool = WorkerPool(
            factories,
            timeout=self.timeout,
            start_method=self.start_method,
            name=type(self).__name__,
            busy_wait=self.busy_wait,
            worker_threads=self.num_sub_threads,
        )
        # an idle intra-op thread of this process spins on a core for a while after each
        # op (OpenMP): with the workers on the other cores, it takes theirs
        before = torch.get_num_threads()
        threads = self.num_threads if self.num_threads is not None else max(1, before - self.num_workers)
        torch.set_num_threads(threads)
        self._threads_before = (before, threads)
        try:
            self._pool.start()
        except BaseException:
            torch.set_num_threads(before)
            self._threads_before = None
            raise
        self._fast_workers = all(self._pool.get_attr("fast"))

    @property
    def pool(self) -> WorkerPool:
        """The worker processes (started on first use)."""
        self.start()
        assert self._pool is not None
        return self._pool

    def _call_workers(self, name: str, *args: Any, **kwargs: Any) -> list[Any]:
        if self._in_process is not None:
            return self._in_process._call_workers(name, *args, **kwargs)
        return self.pool.call("env_call", name, args, kwargs)

    def _worker_attribute(self, name: str) -> list[Any] | BatchedMethod:
        if self._in_process is not None:
            values = self._in_process._worker_attribute(name)
            return BatchedMethod(self, name) if isinstance(values, BatchedMethod) else values
        values = self.pool.call("env_attr", name)
        if any(isinstance(value, str) and value == _CALLABLE for value in values):
            return BatchedMethod(self, name)
        return values

    def _seed_workers(self, seed: int | None, static_seed: bool) -> int | None:
        if self._in_process is not None:
            return self._in_process._seed_workers(seed, static_seed)
        for index in range(self.num_workers):
            self._worker_seeds[index] = seed
            (next_one,) = self.pool.call("set_seed", seed, static_seed, indices=[index])
            seed = seed if static_seed else next_one
        return seed

    @property
    def restarts(self) -> list[int]:
        """How many times each worker was rebuilt after dying (see ``max_restarts``).

        Examples:
            >>> from cadence.envs import GymEnv, ParallelEnv
            >>> with ParallelEnv(2, lambda: GymEnv("CartPole-v1"), max_restarts=1) as env:
            ...     env.restarts
            [0, 0]
        """
        return list(self._restarts)

    # ------------------------------------------------------------------ dead workers: one way for every path
    def _on_workers(
        self,
        method: str,
        requests: dict[int, tuple[Any, ...]],
        retry: Callable[[int, tuple[Any, ...]], tuple[Any, ...]] | None = None,
    ) -> tuple[dict[int, Any], list[int]]:
        """Sends each selected worker its request, gathers the answers, rebuilds the dead.

        Resets, steps and rollouts all reach the workers through here (the shared-memory
        step sends its one message itself and comes to :meth:`_recover` on a failure).

        Args:
            method: the worker method.
            requests: the arguments of each selected worker, by index.
            retry: for a request that starts afresh anyway (a reset, a rollout chunk):
                what a rebuilt worker is sent instead, ``retry(index, request)``; its
                answer stands for the lost one. ``None`` for a request that cannot be
                replayed (a step): a rebuilt worker is reset, its answer is the reset's,
                and the caller marks the episode that was cut short.

        Returns:
            The answers by index, and the indices of the workers that were rebuilt.
        """
        answers: dict[int, Any] = {}
        failures = self._exchange(method, requests, answers)
        if not failures:
            return answers, []
        return answers, self._recover(method, requests, failures, answers, retry)

    def _exchange(self, method: str, requests: dict[int, tuple[Any, ...]], answers: dict[int, Any]) -> dict[int, WorkerError]:
        """Sends every request, then reads every reply (so the pipes stay in step whatever
        fails); fills ``answers`` and returns the failures by index."""
        pool = self.pool
        failures: dict[int, WorkerError] = {}
        try:
            for index, args in requests.items():
                try:
                    pool.send(index, method, *args)
                except WorkerError as err:
                    failures[index] = err
            for index in requests:
                if index not in failures:
                    try:
                        answers[index] = pool.recv(index)
                    except WorkerError as err:
                        failures[index] = err
        except BaseException:  # interrupted: the replies on their way must not answer later calls
            pool.abandon(list(requests))
            raise
        return failures

    def _recover(
        self,
        method: str,
        requests: dict[int, tuple[Any, ...]] | None,
        failures: dict[int, WorkerError],
        answers: dict[int, Any],
        retry: Callable[[int, tuple[Any, ...]], tuple[Any, ...]] | None,
    ) -> list[int]:
        """Rebuilds the workers that died in a call and brings each back as
        :meth:`_on_workers` says; raises what is not a death (an exception in the env,
        a timeout) and a death past ``max_restarts``. Returns the rebuilt indices."""
        rebuilt: list[int] = []
        while failures:
            others = [err for err in failures.values() if not isinstance(err, WorkerDiedError)]
            if others:  # the env's own error: the caller must see it (the dead are rebuilt at the next call)
                first = others[0]
                if not first.others:  # else the pool noted the others already
                    for err in others[1:]:
                        first.add_note(f"also: {type(err).__name__}: {str(err).splitlines()[0]}")
                raise first
            for index, cause in failures.items():
                self._rebuild(index, cause)
            rebuilt.extend(failures)
            if retry is None:
                fresh, again = self._on_workers("reset", {index: (None,) for index in failures}, _same_request)
                answers.update(fresh)
                rebuilt.extend(again)
                break
            assert requests is not None
            failures = self._exchange(method, {index: retry(index, requests[index]) for index in failures}, answers)
        return sorted(set(rebuilt))

    def _rebuild(self, index: int, cause: WorkerError) -> None:
        """Starts worker ``index`` afresh (and reseeds it if it was seeded), or raises."""
        if self._restarts[index] >= self.max_restarts:
            how = str(cause).removesuffix(f"; restart({index}) starts a new one")  # the pool's hint, not ours
            raise WorkerDiedError(
                f"{how}. {type(self).__name__} did not rebuild worker {index}: it used "
                f"{self._restarts[index]} of max_restarts={self.max_restarts} restarts",
                index=index,
                exitcode=getattr(cause, "exitcode", None),
            ) from cause
        self._restarts[index] += 1
        self.pool.restart(index)
        seed = self._worker_seeds[index]
        if seed is not None:
            # a fresh seed: the rebuilt env must not replay the episode that was cut short
            self.pool.call("set_seed", next_seed(seed + self._restarts[index]), False, indices=[index])

    def _whole_reset(self, index: int, request: tuple[Any, ...]) -> tuple[Any, ...]:
        """A rebuilt worker's reset request: every part of its fresh env starts, whatever
        the ``"_reset"`` masks of the lost request selected."""
        (sub,) = request
        if sub is None:
            return request
        sub = sub.copy()
        for key in self.reset_keys:
            mask = sub.get(key, None)
            if mask is not None:
                sub.set(key, torch.ones_like(mask))
        return (sub,)

    def _adopt_rebuilt(
        self, tensordict: TensorDictBase, inputs: list[TensorDictBase | None], rebuilt: list[int], answers: dict[int, Any]
    ) -> None:
        """After a partial reset: a rebuilt worker whose request reset only part of its
        batch was reset whole; its fresh data replaces the input's old data, which the
        partial reset would otherwise keep for the parts it did not select."""
        for index in rebuilt:
            sub = inputs[index]
            masks = [] if sub is None else [sub.get(key, None) for key in self.reset_keys]
            if all(mask is None or bool(mask.all()) for mask in masks):
                continue
            fresh = answers[index] if self._shared is None else self._shared.current[index]
            for key, value in fresh.items(include_nested=True, leaves_only=True):
                old = tensordict.get(key, None)
                if isinstance(old, torch.Tensor) and isinstance(value, torch.Tensor) and old.shape[1:] == value.shape:
                    old = old.clone()  # not in place: the input's tensors may be a past step's
                    old[index] = value
                    tensordict.set(key, old)

    def _flag_interrupted(self, output: TensorDictBase) -> None:
        """A rebuilt worker's step output: no reward, the episode truncated (done, not terminated)."""
        for key in self.reward_keys:
            output.get(key).zero_()
        for key in self.done_keys:
            name = key if isinstance(key, str) else key[-1]
            output.get(key).fill_(name in ("done", "truncated"))

    # ------------------------------------------------------------------ reset and step
    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        self.start()
        if self._in_process is not None:
            return self._in_process._reset(tensordict, **kwargs)
        selected = list(range(self.num_workers))
        inputs: list[TensorDictBase | None] = [None] * self.num_workers
        if tensordict is not None:
            inputs = list(tensordict.unbind(0))
            selected = [i for i, sub in enumerate(inputs) if self._selected(sub)]
        answers, rebuilt = self._on_workers("reset", {i: (inputs[i],) for i in selected}, self._whole_reset)
        if rebuilt and tensordict is not None:
            self._adopt_rebuilt(tensordict, inputs, rebuilt, answers)
        if self._shared is not None:
            return self._shared.current.clone()
        for index, out in answers.items():
            self._current[index] = out
        return self._stack([self._current_of(i) for i in range(self.num_workers)])

    def _current_of(self, index: int) -> TensorDictBase:
        current = self._current[index]
        if current is None:
            raise RuntimeError(f"ParallelEnv: worker {index} was asked to keep its data before any reset.")
        return current

    def _stack(self, parts: list[TensorDictBase]) -> TensorDictBase:
        if self._has_dynamic_specs():
            return LazyStackedTensorDict.lazy_stack(parts, 0)
        return torch.stack(parts, 0)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.start()
        if self._in_process is not None:
            return self._in_process._step(tensordict)
        shared = self._shared
        if shared is None:
            answers, rebuilt = self._on_workers("step", {i: (sub,) for i, sub in enumerate(tensordict.unbind(0))})
            for index in rebuilt:  # the answer is the fresh reset's: make it a step's
                out = answers[index].clone()
                for key in self.reward_keys:
                    spec = self.full_reward_spec[key]
                    out.set(key, torch.zeros(spec.shape[1:], dtype=spec.dtype, device=spec.device))
                self._flag_interrupted(out)
                answers[index] = out
            results = [answers[i] for i in range(self.num_workers)]
            for index, result in enumerate(results):
                self._current[index] = exclude_pruned(result, self.reward_keys)
            return self._stack(results)
        shared.input.update_(tensordict.select(*shared.input_keys))
        self._step_shared()
        output = shared.output.clone()
        return output.pin_memory() if self.pin_memory else output

    def _step_shared(self) -> None:
        """Steps every worker on the shared input (one message for all: the hot path);
        a rebuilt worker's output is its fresh reset, the episode truncated."""
        try:
            self.pool.call("step")
        except WorkerError as err:
            failures = {failure.index: failure for failure in (err, *err.others)}
            for index in self._recover("step", None, failures, {}, None):
                self._mark_interrupted(index)

    def _mark_interrupted(self, index: int) -> None:
        """The step output of a rebuilt worker: its fresh reset, the episode truncated."""
        assert self._shared is not None
        output, current = self._shared.output[index], self._shared.current[index]
        output_keys = set(output.keys(True, True))
        for key in self._shared.current_keys:
            if key in output_keys:
                output.get(key).copy_(current.get(key))
        self._flag_interrupted(output)

    def _workers_step_arrays(self) -> bool:
        """Whether every worker steps its own kernel into the shared arrays (what
        :class:`ParallelSimulators` and the loop on values step through)."""
        return (self._shared is not None and self._fast_workers and not self.run_type_checks
                and bool(self._cached("arrays_fit", lambda: arrays_fit(self))))

    def _values_step_applies(self) -> bool:
        # the loop on values steps the workers through their kernel (ParallelSimulators)
        self.start()
        if self._in_process is not None:
            return self._in_process._values_step_applies()
        return self._workers_step_arrays()

    # ------------------------------------------------------------------ rollout in chunks
    def _rollout_on_workers(self, max_steps: int, **kwargs: Any) -> TensorDictBase | None:
        self.start()
        if self._in_process is not None:
            return None  # the loop steps the serial batch in this process
        chunks_apply = self._fast_workers and kwargs["policy"] is None and not kwargs["break_when_any_done"]
        if not (chunks_apply and self._plain_rollout(kwargs)):
            return None  # the loop steps the workers, on the shared arrays where they serve
        actions = self.full_action_spec["action"].rand(torch.Size([max_steps]), generator=self.rng)
        # a worker rebuilt mid-chunk rolls the same actions out again, from its fresh reset
        chunks, _ = self._on_workers(
            "rollout_chunk",
            {i: (actions[:, i].clone(), max_steps, kwargs["set_truncated"]) for i in range(self.num_workers)},
            _same_request,
        )
        data = torch.stack([chunks[i] for i in range(self.num_workers)], 0)
        data.names = [None] * (data.batch_dims - 1) + ["time"]
        if self._shared is None:
            last = exclude_pruned(data[..., -1].get("next"), self.reward_keys)
            self._current = list(last.unbind(0))
        return data

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        """Stops the workers; no process is left behind."""
        if self._pool is not None:
            self._pool.close()
        if self._in_process is not None:
            self._in_process.close()
        if self._threads_before is not None:
            before, threads = self._threads_before
            if torch.get_num_threads() == threads:  # nobody changed it since
                torch.set_num_threads(before)
            self._threads_before = None
        super().close()
