"""Worker processes driven by small messages: the process layer under ``ParallelEnv``.

A :class:`WorkerPool` runs N child processes. Each child builds one Python object with
its own factory (an environment, usually) and then serves calls on it: the parent sends
``(method, args, kwargs)`` over the worker's pipe, the child runs
``getattr(obj, method)(*args, **kwargs)`` and sends the result back.

The messages and the child's side are in ``_worker_process.py``.

Failures come back as :class:`WorkerError` subclasses that carry the worker's index:
:class:`WorkerException` (the object raised; the worker stays usable),
:class:`WorkerDiedError` (the process is gone) and :class:`WorkerTimeoutError` (no reply
in time; the pool kills the worker so that nothing hangs).

Examples:
    >>> with WorkerPool([lambda: [1, 2, 3], lambda: [4, 5]]) as pool:
    ...     pool.call("__len__")
    [3, 2]
"""

from __future__ import annotations

import contextlib
import functools
import math
import multiprocessing
import multiprocessing.connection
import operator
import pickle
import select
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from cadence.envs._worker_process import (
    FACTORY,
    GET_ATTR,
    LIVE_STATES,
    PROTOCOL,
    PoolState,
    STALE,
    default_start_method,
    describe_exit,
    describe_method,
    poll_briefly,
    public_method_name,
    ready_check,
    shutdown,
    start_worker,
)
from cadence.envs.worker_errors import (
    RemoteError,
    WorkerDiedError,
    WorkerError,
    WorkerException,
    WorkerTimeoutError,
    first_with_notes,
)

__all__ = [
    "WorkerDiedError",
    "WorkerError",
    "WorkerException",
    "WorkerPool",
    "WorkerTimeoutError",
    "default_start_method",
]

_HAS_POLL = hasattr(select, "poll")


# ---------------------------------------------------------------------------------------
# The pool
# ---------------------------------------------------------------------------------------


class WorkerPool:
    """N worker processes, each serving calls on one object built by its own factory.

    Each worker runs ``factories[i]()`` in its process at :meth:`start` and then, for every
    :meth:`call`, runs ``getattr(obj, method)(*args, **kwargs)`` there and sends the result
    back. A call goes out to every selected worker first and is then gathered in order, so
    the workers run in parallel. Arguments and results are pickled, i.e. copied; tensors are
    slow to pickle (hundreds of microseconds each), so exchange bulk data through
    shared-memory tensors instead: under fork, tensors made with ``.share_memory_()``
    before :meth:`start` (or :meth:`restart`) and reachable from the factory are the same
    memory in the child.

    In the child: SIGINT is ignored (the parent handles Ctrl-C and closes the pool),
    ``torch.set_num_threads(worker_threads)``, and all warnings are filtered unless
    ``cadence.filter_warnings_subprocess`` is ``False`` when the pool starts. When a worker
    exits normally (close, or its parent is gone) its object's ``close()`` is called, if
    it has one.

    The pool stops its workers on :meth:`close`, on ``with`` exit, when it is garbage
    collected, and at interpreter exit; an orphaned worker (its parent killed) exits by
    itself: at once when it reads its pipe's end, else within ``ORPHAN_GRACE_S`` (2 s) of
    its parent's death, which it waits for on a pidfd. A pool is not thread-safe: use
    it from one thread.

    Args:
        factories: one callable per worker, run in the child to build its object. Under
            the ``"fork"`` start method any callable works (closures, lambdas); under
            ``"spawn"`` they must pickle.
        timeout: seconds a call waits for the replies (and :meth:`start` for the
            factories) before the silent workers are killed; ``None`` waits forever
            (a worker that dies is still noticed at once).
        start_method: ``"fork"``, ``"spawn"`` or ``"forkserver"``; ``None`` picks
            :func:`default_start_method` at start.
        name: names the pool in messages (``"worker 1 of 'name'"``) and its processes
            (``"{name}-{index}"``).
        busy_wait: seconds that a worker, after each reply, and the parent, before each
            reply, poll the pipe (giving the CPU away between polls) before they sleep on
            it: for calls that follow each other closely (a step loop), where waking a
            sleeping process costs more than the call. ``0`` sleeps at once.
        worker_threads: ``torch.set_num_threads`` in each worker.

    Raises:
        ValueError: if ``factories`` is empty, ``timeout`` is not positive, ``busy_wait``
            is negative, ``worker_threads`` is below 1, or ``start_method`` is not
            available here.
        TypeError: if a factory is not callable.

    Examples:
        >>> class Counter:
        ...     def __init__(self, start: int) -> None:
        ...         self.value = start
        ...     def add(self, n: int = 1) -> int:
        ...         self.value += n
        ...         return self.value
        >>> with WorkerPool([lambda: Counter(0), lambda: Counter(10)], timeout=10) as pool:
        ...     pool.call("add")
        ...     pool.call("add", 5, indices=[1])
        ...     pool.get_attr("value")
        [1, 11]
        [16]
        [1, 16]
    """

    def __init__(
        self,
        factories: Sequence[Callable[[], Any]],
        *,
        timeout: float | None = 60.0,
        start_method: str | None = None,
        name: str = "worker",
        busy_wait: float = 0.0,
        worker_threads: int = 1,
    ) -> None:
        factories = list(factories)
        if not factories:
            raise ValueError("WorkerPool needs at least one factory, got an empty sequence")
        for i, factory in enumerate(factories):
            if not callable(factory):
                raise TypeError(f"factories[{i}] must be callable (it builds the worker's object), got {factory!r}")
        if start_method is not None and start_method not in multiprocessing.get_all_start_methods():
            raise ValueError(
                f"start_method must be one of {multiprocessing.get_all_start_methods()} or None, got {start_method!r}"
            )
        if not busy_wait >= 0:
            raise ValueError(f"busy_wait must be >= 0 seconds, got {busy_wait!r}")
        if isinstance(worker_threads, bool) or not isinstance(worker_threads, int) or worker_threads < 1:
            raise ValueError(f"worker_threads must be an int >= 1, got {worker_threads!r}")
        n = len(factories)
        self._factories = factories
        self.busy_wait = float(busy_wait)
        self._worker_threads = worker_threads
        self.timeout = timeout
        self._requested_method = start_method
        self._start_method: str | None = None
        self._name = name
        self._all = tuple(range(n))
        self._state = PoolState(n)
        self._conns = self._state.conns
        self._procs = self._state.processes
        self._fds = [-1] * n
        self._pollers: list[Any] = [None] * n
        self._ready: list[Callable[[], Any]] = [bool] * n  # a busy wait's check of each pipe, made at launch
        self._dead: list[str | None] = [None] * n  # why a worker cannot serve, or None
        self._pending = [0] * n  # replies sent for but not read yet
        self._stale = [0] * n  # of those, replies of an interrupted call, to drop
        self._sent_methods: list[list[str]] = [[] for _ in range(n)]  # send() without recv()
        self._restarts = [0] * n
        self._bare_messages: dict[str, bytes] = {}  # argument-free requests (a step), pickled once
        self._started = False
        self._closed = False
        self._ctx: Any = None  # the multiprocessing context, chosen at start
        self._filter_warnings = True
        self._finalizer = weakref.finalize(self, shutdown, self._state, 1.0)

    # -- properties ------------------------------------------------------------------

    @property
    def num_workers(self) -> int:
        """The number of workers.

        Examples:
            >>> WorkerPool([dict] * 3).num_workers
            3
        """
        return len(self._factories)

    @property
    def pids(self) -> list[int | None]:
        """The process id of each worker (``None`` before start and after close).

        Examples:
            >>> with WorkerPool([dict] * 2) as pool:
            ...     all(isinstance(pid, int) for pid in pool.start().pids)
            True
        """
        return [None if p is None else p.pid for p in self._procs]

    @property
    def is_started(self) -> bool:
        """Whether the workers were started (and the pool not closed since).

        Examples:
            >>> pool = WorkerPool([dict])
            >>> pool.is_started, pool.start().is_started, pool.close(), pool.is_started
            (False, True, None, False)
        """
        return self._started

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` ran; a closed pool cannot be used again.

        Examples:
            >>> pool = WorkerPool([dict])
            >>> pool.close()
            >>> pool.is_closed
            True
        """
        return self._closed

    @property
    def start_method(self) -> str | None:
        """The start method in use (``None`` before start unless one was given).

        Examples:
            >>> WorkerPool([dict], start_method="spawn").start_method
            'spawn'
        """
        return self._start_method or self._requested_method

    @property
    def timeout(self) -> float | None:
        """Seconds a call waits for its replies; ``None`` waits forever. Can be set.

        Examples:
            >>> pool = WorkerPool([dict], timeout=5)
            >>> pool.timeout = 0.5
            >>> pool.timeout
            0.5
        """
        return self._timeout

    @timeout.setter
    def timeout(self, value: float | None) -> None:
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"timeout must be a positive number of seconds or None, got {value!r}")
            value = float(value)
        self._timeout = value

    def restart_count(self, index: int) -> int:
        """How many times worker ``index`` was restarted.

        Examples:
            >>> WorkerPool([dict]).restart_count(0)
            0
        """
        return self._restarts[self._check_index(index)]

    def is_alive(self, index: int) -> bool:
        """Whether worker ``index`` is running and usable.

        Examples:
            >>> with WorkerPool([dict]) as pool:
            ...     pool.is_alive(0), pool.start().is_alive(0)
            (False, True)
        """
        i = self._check_index(index)
        proc = self._procs[i]
        return self._started and self._dead[i] is None and proc is not None and proc.exitcode is None

    # -- life cycle ------------------------------------------------------------------

    def start(self) -> WorkerPool:
        """Starts the workers and waits until every factory has run; does nothing if started.

        Calls start the pool by themselves; call this to pay the start-up (and see the
        factories' errors) up front. If a factory fails, the pool is closed.

        Returns:
            The pool itself.

        Raises:
            RuntimeError: if the pool is closed.
            WorkerException: if a factory raised (its traceback is in the message).
            WorkerDiedError, WorkerTimeoutError: if a worker died or hung in its factory.

        Examples:
            >>> pool = WorkerPool([dict, dict]).start()
            >>> pool.is_started
            True
            >>> pool.close()
        """
        if self._started:
            return self
        self._check_open()
        self._start_method = self._requested_method or default_start_method()
        self._ctx = multiprocessing.get_context(self._start_method)
        import cadence  # read at start, so that users may set it any time before

        self._filter_warnings = bool(getattr(cadence, "filter_warnings_subprocess", True))
        self._started = True
        LIVE_STATES.add(self._state)
        try:
            for i in self._all:
                self._launch(i)
            deadline = None if self._timeout is None else time.monotonic() + self._timeout
            failures: list[WorkerError] = []
            for i in self._all:
                try:
                    self._await_ready(i, deadline)
                except WorkerError as err:
                    failures.append(err)
            if failures:
                raise first_with_notes(failures)
        except BaseException:
            self.close()
            raise
        return self

    def restart(self, index: int) -> None:
        """Kills worker ``index`` if it runs and starts a fresh one from its factory.

        Starts the whole pool instead if it was not started yet. The new worker's replies
        are in sync whatever state the old one was in.

        Args:
            index: the worker to restart.

        Raises:
            RuntimeError: if the pool is closed.
            WorkerException, WorkerDiedError, WorkerTimeoutError: if the new worker's
                factory failed (the worker stays dead; restart it again to retry).

        Examples:
            >>> with WorkerPool([dict, dict]) as pool:
            ...     old = pool.start().pids[1]
            ...     pool.restart(1)
            ...     pool.pids[1] != old, pool.restart_count(1)
            (True, 1)
        """
        i = self._check_index(index)
        if not self._started:
            self.start()
            return
        proc = self._procs[i]
        if proc is not None:
            if proc.exitcode is None:
                proc.kill()
            proc.join()
            proc.close()
            self._procs[i] = None
        conn = self._conns[i]
        if conn is not None:
            conn.close()
            self._conns[i] = None
        self._dead[i] = "its restart failed"  # until the new process is up
        self._restarts[i] += 1
        self._launch(i)
        try:
            self._await_ready(i, None if self._timeout is None else time.monotonic() + self._timeout)
        except WorkerError:
            raise
        except BaseException:  # interrupted: the ready reply is read before the next request
            self._stale[i] = self._pending[i]
            raise

    def close(self, timeout: float = 1.0) -> None:
        """Stops the workers: asks them to exit, waits up to ``timeout`` seconds, then kills.

        Idempotent. Each worker calls its object's ``close()`` (if any) on the way out.
        Replies not read yet are dropped.

        Args:
            timeout: seconds the workers get to exit by themselves.

        Examples:
            >>> pool = WorkerPool([dict]).start()
            >>> pool.close()
            >>> pool.close()
            >>> pool.is_closed
            True
        """
        self._closed = True
        self._started = False
        if self._finalizer.detach() is not None:
            shutdown(self._state, timeout)
        self._pollers[:] = [None] * len(self._pollers)
        for sent in self._sent_methods:
            sent.clear()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        status = "closed" if self._closed else "started" if self._started else "not started"
        return f"WorkerPool(name={self._name!r}, num_workers={self.num_workers}, {status})"

    # -- calls -----------------------------------------------------------------------

    def call(self, method: str, *args: Any, indices: Sequence[int] | None = None, **kwargs: Any) -> list[Any]:
        """Calls ``method(*args, **kwargs)`` on the objects of the selected workers.

        The request goes to every selected worker first, then the replies are gathered in
        the order of ``indices``. If some workers fail, the replies of the others are still
        read (so that every pipe stays in sync) and the first failure, in that order, is
        raised; the others are attached to it as notes.

        Args:
            method: the name of the method to call on each worker's object.
            *args: positional arguments (pickled).
            indices: the workers to call, in the order of the results; ``None`` for all.
            **kwargs: keyword arguments (pickled).

        Returns:
            One result per selected worker, in the order of ``indices``.

        Raises:
            WorkerException: a method raised (the worker stays usable).
            WorkerDiedError: a worker is dead, or died during the call.
            WorkerTimeoutError: a worker gave no reply within :attr:`timeout` (it is killed).
            RuntimeError: the pool is closed, or a selected worker still owes a reply to
                :meth:`send`.

        Examples:
            >>> with WorkerPool([lambda: "ab", lambda: "cd"]) as pool:
            ...     pool.call("upper"), pool.call("center", 4, "*", indices=[1])
            (['AB', 'CD'], ['*cd*'])
        """
        if not self._started:
            self.start()
        if type(method) is not str:
            raise TypeError(f"method must be the name of a method (a str), got {type(method).__name__}: {method!r}")
        indices = self._all if indices is None else self._check_indices(indices)
        message = None if args or kwargs else self._bare_messages.get(method)
        if message is None:
            message = pickle.dumps((method, args, kwargs), protocol=PROTOCOL)
            if not args and not kwargs:
                self._bare_messages[method] = message
        conns, dead, pending = self._conns, self._dead, self._pending
        failures: dict[int, WorkerError] | None = None
        for i in indices:
            if pending[i] or dead[i] is not None:  # rare: settle it before anything is sent
                failures = self._prepare_call(indices, method)
                break
        try:
            for i in indices:
                if failures is not None and i in failures:
                    continue
                try:
                    conns[i].send_bytes(message)
                except OSError:  # its end of the pipe is gone: the worker is dying or dead
                    failures = failures or {}
                    failures[i] = self._died(i, method)
                    continue
                pending[i] += 1
            deadline = None if self._timeout is None else time.monotonic() + self._timeout
            results: list[Any] = [None] * len(indices)
            for k, i in enumerate(indices):
                if failures is not None and i in failures:
                    continue
                try:
                    results[k] = self._receive(i, method, deadline)
                except WorkerError as err:
                    failures = failures or {}
                    failures[i] = err
        except BaseException:
            # Interrupted (Ctrl-C, a signal handler): the replies still on their way must
            # be dropped before the next request, or every later reply would be off by one.
            for i in indices:
                self._stale[i] = pending[i]
            raise
        if failures:
            raise first_with_notes([failures[i] for i in indices if i in failures])
        return results

    def send(self, index: int, method: str, *args: Any, **kwargs: Any) -> None:
        """Sends one request to worker ``index``; read its reply with :meth:`recv`.

        Args:
            index: the worker.
            method: the method to call on its object.
            *args: positional arguments (pickled).
            **kwargs: keyword arguments (pickled).

        Raises:
            WorkerDiedError: the worker is dead.
            RuntimeError: the pool is closed.

        Examples:
            >>> with WorkerPool([lambda: [3, 1, 2]]) as pool:
            ...     pool.send(0, "index", 2)
            ...     pool.recv(0)
            2
        """
        i = self._check_index(index)
        if not self._started:
            self.start()
        if type(method) is not str:
            raise TypeError(f"method must be the name of a method (a str), got {type(method).__name__}: {method!r}")
        message = pickle.dumps((method, args, kwargs), protocol=PROTOCOL)
        if self._stale[i]:
            self._drain_stale(i)
        if self._dead[i] is not None:
            raise self._dead_error(i, method)
        try:
            self._conns[i].send_bytes(message)
        except OSError:
            raise self._died(i, method) from None
        self._pending[i] += 1
        self._sent_methods[i].append(method)

    def recv(self, index: int) -> Any:
        """Reads the reply of worker ``index`` to its oldest unanswered :meth:`send`.

        Waits up to :attr:`timeout` seconds from now.

        Args:
            index: the worker.

        Returns:
            The method's result.

        Raises:
            WorkerException, WorkerDiedError, WorkerTimeoutError: as for :meth:`call`.
            RuntimeError: no request was sent to that worker.

        Examples:
            >>> with WorkerPool([lambda: {"a": 1}]) as pool:
            ...     pool.send(0, "get", "a")
            ...     pool.recv(0)
            1
        """
        i = self._check_index(index)
        self._check_open()
        sent = self._sent_methods[i]
        if self._started and self._dead[i] is not None:
            raise self._dead_error(i, sent.pop(0) if sent else "recv")
        if not sent:
            raise RuntimeError(f"{self._label(i)} has no reply to read: send({i}, ...) a request first")
        method = sent.pop(0)
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        return self._receive(i, method, deadline)

    def abandon(self, indices: Sequence[int] | None = None) -> None:
        """Drops the replies that the selected workers still owe to :meth:`send`.

        They are read and thrown away before the next request, so that later replies stay
        in order: for a caller interrupted (Ctrl-C, say) between its sends and receives.

        Args:
            indices: the workers; ``None`` for all.

        Examples:
            >>> with WorkerPool([lambda: "ab"]) as pool:
            ...     pool.send(0, "upper")
            ...     pool.abandon()
            ...     pool.call("lower")
            ['ab']
        """
        for i in self._all if indices is None else self._check_indices(indices):
            self._stale[i] = self._pending[i]
            self._sent_methods[i].clear()

    def ready(self, indices: Sequence[int], timeout: float | None = None) -> list[int]:
        """Waits until one of the selected workers has a reply to read (or died).

        Use it with :meth:`send`/:meth:`recv` to serve whichever worker answers first;
        :meth:`recv` on a returned index does not block (it raises if the worker died).

        Args:
            indices: workers that owe a reply to :meth:`send`.
            timeout: seconds to wait; ``None`` waits for :attr:`timeout`.

        Returns:
            The indices whose reply (or death) can be read now, in ``indices`` order;
            empty if none answered in time.

        Examples:
            >>> with WorkerPool([lambda: "ab", lambda: "cd"]) as pool:
            ...     pool.send(1, "upper")
            ...     ready = pool.ready([1])
            ...     ready, pool.recv(ready[0])
            ([1], 'CD')
        """
        if not self._started:
            self.start()
        chosen = self._check_indices(indices)
        waiting: dict[Any, int] = {}
        for i in chosen:
            if self._dead[i] is not None:
                return [i]  # recv() says why
            waiting[self._conns[i]] = i
            waiting[self._procs[i].sentinel] = i
        left = self._timeout if timeout is None else timeout
        answered = multiprocessing.connection.wait(list(waiting), timeout=left)
        found = {waiting[obj] for obj in answered}
        return [i for i in chosen if i in found]

    def get_attr(self, name: str, indices: Sequence[int] | None = None) -> list[Any]:
        """Reads the attribute ``name`` of the selected workers' objects.

        Args:
            name: the attribute.
            indices: the workers, in the order of the results; ``None`` for all.

        Returns:
            One value per selected worker.

        Raises:
            WorkerException: an object has no such attribute (or reading it raised).

        Examples:
            >>> with WorkerPool([lambda: 1 + 2j, lambda: 3 - 4j]) as pool:
            ...     pool.get_attr("imag")
            [2.0, -4.0]
        """
        return self.call(GET_ATTR, name, indices=indices)

    # -- internals -------------------------------------------------------------------

    def _label(self, i: int) -> str:
        label = f"worker {i}" if self._name == "worker" else f"worker {i} of {self._name!r}"
        proc = self._procs[i]
        return label if proc is None else f"{label} (pid {proc.pid})"

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"this WorkerPool ({self._name!r}) is closed; build a new one")

    def _check_index(self, index: int) -> int:
        try:
            i = operator.index(index)
        except TypeError:
            raise TypeError(f"a worker index must be an int, got {type(index).__name__}: {index!r}") from None
        if not 0 <= i < len(self._factories):
            raise IndexError(f"worker index {i} out of range: the pool has {len(self._factories)} workers")
        return i

    def _check_indices(self, indices: Sequence[int]) -> tuple[int, ...]:
        out = tuple(self._check_index(i) for i in indices)
        if len(set(out)) != len(out):
            raise ValueError(f"indices must not repeat a worker, got {list(out)}")
        return out

    def _launch(self, i: int) -> None:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        self._conns[i] = parent_conn  # registered before the fork: the child closes its copy
        try:
            proc = start_worker(
                self._ctx,
                child_conn,
                i,
                self._factories[i],
                name=f"{self._name}-{i}",
                filter_warnings=self._filter_warnings,
                busy_wait=self.busy_wait,
                threads=self._worker_threads,
            )
        except Exception as err:
            self._conns[i] = None
            parent_conn.close()
            if self._start_method == "fork":
                raise
            raise TypeError(
                f"could not start {self._label(i)} with the {self._start_method!r} start method, which "
                f"pickles the factory: factories[{i}] = {self._factories[i]!r} must be picklable "
                f"(a module-level function or class, or functools.partial of one), got: {err}"
            ) from err
        self._procs[i] = proc
        self._fds[i] = parent_conn.fileno()
        if _HAS_POLL:
            poller = select.poll()
            poller.register(self._fds[i], select.POLLIN)
            poller.register(proc.sentinel, select.POLLIN)
            self._pollers[i] = poller
            self._ready[i] = functools.partial(poller.poll, 0)  # the pipe or the process's end
        else:
            self._ready[i] = ready_check(parent_conn)
        self._dead[i] = None
        self._pending[i] = 1  # the factory's ready reply
        self._stale[i] = 0
        self._sent_methods[i].clear()

    def _await_ready(self, i: int, deadline: float | None) -> None:
        try:
            self._receive(i, FACTORY, deadline)
        except WorkerException as err:
            # The child exits after a failed factory; reap it.
            self._dead[i] = f"its factory raised {err.remote_traceback.strip().splitlines()[-1]}"
            proc = self._procs[i]
            proc.join(1.0)
            if proc.exitcode is None:
                proc.kill()
            raise

    def _prepare_call(self, indices: Sequence[int], method: str) -> dict[int, WorkerError] | None:
        # Refuse before sending anything, so that no worker gets a request it should not.
        for i in indices:
            owed = self._pending[i] - self._stale[i]
            if owed > 0 and self._dead[i] is None:
                raise RuntimeError(
                    f"{self._label(i)} still owes {owed} reply(ies) to send() "
                    f"(methods {self._sent_methods[i]}): recv({i}) them before call()"
                )
        failures: dict[int, WorkerError] = {}
        for i in indices:
            if self._stale[i]:
                try:
                    self._drain_stale(i)
                except WorkerError as err:
                    failures[i] = err
                    continue
            if self._dead[i] is not None:
                failures[i] = self._dead_error(i, method)
        return failures or None

    def _drain_stale(self, i: int) -> None:
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while self._stale[i] and self._dead[i] is None:
            self._stale[i] -= 1
            with contextlib.suppress(WorkerException):  # the error of a call nobody waits for any more
                self._receive(i, STALE, deadline)
        self._stale[i] = 0

    def _receive(self, i: int, method: str, deadline: float | None) -> Any:
        conn = self._conns[i]
        poller = self._pollers[i]
        if self.busy_wait:
            poll_briefly(self._ready[i], self.busy_wait)
        if poller is not None:
            ms = -1 if deadline is None else max(0, math.ceil((deadline - time.monotonic()) * 1000))
            ready = poller.poll(ms)
            fd = self._fds[i]
            has_data = False
            for ready_fd, _ in ready:
                if ready_fd == fd:
                    has_data = True
        else:
            proc = self._procs[i]
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = multiprocessing.connection.wait([conn, proc.sentinel], timeout=left)
            has_data = conn in ready
        if has_data:  # a reply, or the end-of-file of a dead worker
            try:
                payload = conn.recv_bytes()
            except (EOFError, OSError):
                raise self._died(i, method) from None
            self._pending[i] -= 1
            try:
                reply = pickle.loads(payload)
            except Exception as err:
                raise WorkerException(
                    f"the reply of {self._label(i)} to {describe_method(method)} could not be unpickled in the parent: "
                    f"{type(err).__name__}: {err}",
                    index=i,
                    method=public_method_name(method),
                ) from err
            if type(reply) is RemoteError:
                raise reply.as_exception(self._label(i), i, public_method_name(method), describe_method(method))
            return reply
        if ready:  # only the process sentinel: the worker exited without a reply
            raise self._died(i, method)
        return self._timed_out(i, method)

    def _died(self, i: int, method: str) -> WorkerDiedError:
        proc = self._procs[i]
        proc.join(1.0)  # it may still be on its way out after closing its pipe
        exitcode = proc.exitcode
        if exitcode is None:  # alive but its pipe is gone: it cannot serve, end it
            proc.kill()
            proc.join()
            how = "it closed its pipe and was killed by the pool"
        else:
            how = describe_exit(exitcode)
        self._dead[i] = how
        self._pending[i] = 0
        self._sent_methods[i].clear()
        return WorkerDiedError(
            f"{self._label(i)} died during {describe_method(method)}: {how}; restart({i}) starts a new one",
            index=i,
            exitcode=proc.exitcode,
        )

    def _dead_error(self, i: int, method: str) -> WorkerDiedError:
        proc = self._procs[i]
        return WorkerDiedError(
            f"{self._label(i)} cannot run {describe_method(method)}: it is dead ({self._dead[i]}); "
            f"restart({i}) starts a new one",
            index=i,
            exitcode=None if proc is None else proc.exitcode,
        )

    def _timed_out(self, i: int, method: str) -> NoReturn:
        proc = self._procs[i]
        proc.kill()  # a hung worker would hang every later call and close()
        proc.join()
        self._dead[i] = f"killed by the pool after {describe_method(method)} gave no reply within {self._timeout} s"
        self._pending[i] = 0
        self._sent_methods[i].clear()
        raise WorkerTimeoutError(
            f"{self._label(i)} gave no reply to {describe_method(method)} within the timeout of {self._timeout} s; "
            f"the worker was killed (restart({i}) starts a new one)",
            index=i,
            method=public_method_name(method),
            timeout=self._timeout,
        )

