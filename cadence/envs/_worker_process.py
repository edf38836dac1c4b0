"""(Internal to ``workers.py``.) What runs in a worker process, and how worker processes are started and
stopped: the child's serving loop, the message constants both sides share, the start of a
child, and the shutdown used by ``WorkerPool.close()``, garbage collection and interpreter exit.

Protocol (one ``multiprocessing.Pipe`` per worker, every message pickled with
``pickle.HIGHEST_PROTOCOL`` and sent with ``send_bytes``; an argument-free request, a
``ParallelEnv`` step on shared memory say, is pickled once by the parent and unpickled
once by the child, and a ``None`` reply is pickled once, so that the hot path pickles
nothing):

* parent -> child: ``(method, args, kwargs)``; ``method`` is a ``str``, the reserved name
  ``"__cadence_get_attr__"`` reads the attribute ``args[0]``, and ``method=None`` asks the
  child to close its object and exit.
* child -> parent: the bare result, or a ``RemoteError`` (the exception's type, message,
  traceback text, and the exception itself when it pickles). One reply per request, in
  order; right after the factory ran, the child sends one extra reply: ``None``, or the
  factory's ``RemoteError``.

Examples:
    >>> from cadence.envs._worker_process import describe_exit
    >>> describe_exit(-9)
    'killed by SIGKILL (exit code -9)'
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import multiprocessing.connection
import multiprocessing.util  # imported before our atexit hook, so that ours runs first
import os
import pickle
import select
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from cadence.envs.worker_errors import RemoteError

GET_ATTR = "__cadence_get_attr__"
FACTORY = "__cadence_factory__"
STALE = "__cadence_stale__"  # stands for the method of an interrupted call, in messages
PROTOCOL = pickle.HIGHEST_PROTOCOL
CLOSE_MESSAGE = pickle.dumps((None, (), {}), protocol=PROTOCOL)
# How often a worker checks for its parent where it cannot wait on a pidfd, and how long
# an orphaned worker gives its own shutdown (on the pipe's end-of-file) before it exits hard.
ORPHAN_CHECK_S = 1.0
ORPHAN_GRACE_S = 2.0
def public_method_name(method: str) -> str:
    """The name a user knows a request by (the reserved names stand for pool methods).

    Examples:
        >>> public_method_name(GET_ATTR), public_method_name("step")
        ('get_attr', 'step')
    """
    return {GET_ATTR: "get_attr", FACTORY: "factory"}.get(method, method)


def describe_method(method: str) -> str:
    """A request, as error messages name it.

    Examples:
        >>> describe_method(FACTORY), describe_method("step")
        ('its factory', "'step'")
    """
    if method == GET_ATTR:
        return "get_attr"
    if method == FACTORY:
        return "its factory"
    if method == STALE:
        return "a call interrupted earlier"
    return repr(method)


# gives the CPU to another runnable process between two polls of a busy wait
_yield_cpu: Callable[[], None] = getattr(os, "sched_yield", lambda: time.sleep(0))


def ready_check(conn: multiprocessing.connection.Connection) -> Callable[[], Any]:
    """A cheap "has ``conn`` something to read?" for a busy wait: a ``select.poll`` made
    once (``Connection.poll(0)`` builds a selector at every call, several microseconds).

    Examples:
        >>> import multiprocessing
        >>> a, b = multiprocessing.Pipe()
        >>> ready = ready_check(a)
        >>> bool(ready()), b.send_bytes(b"x"), bool(ready())
        (False, None, True)
    """
    if not hasattr(select, "poll"):
        return lambda: conn.poll(0)
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return lambda: poller.poll(0)


def poll_briefly(ready: Callable[[], Any], seconds: float) -> None:
    """Returns once ``ready()`` says a pipe has something to read, or after ``seconds``:
    polls it, giving the CPU away between polls. A message that comes within that time is
    then read without the wake-up of a sleeping process (tens of microseconds, more where
    the process slept longer); the CPU it costs is what other runnable processes do not take.

    Args:
        ready: says whether the pipe (or any of several) can be read: :func:`ready_check`,
            or a ``select.poll`` object's ``poll`` bound to a zero timeout.
        seconds: how long to poll at most.

    Examples:
        >>> import multiprocessing
        >>> a, b = multiprocessing.Pipe()
        >>> b.send_bytes(b"x")
        >>> poll_briefly(ready_check(a), 0.001)
        >>> a.recv_bytes()
        b'x'
    """
    clock = time.perf_counter
    end = clock() + seconds
    while not ready() and clock() < end:
        _yield_cpu()


# ---------------------------------------------------------------------------------------
# The child
# ---------------------------------------------------------------------------------------


def wait_for_exit(pid: int, direct_child: bool) -> None:
    """Returns once the process ``pid`` (this process's parent, if ``direct_child``) has
    exited: at once through a pidfd (Linux 5.3+), else by checking every ``ORPHAN_CHECK_S``."""
    try:
        fd: int | None = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfd here
        fd = None
    try:
        if direct_child and os.getppid() != pid:
            return  # it died before the pidfd was opened (which may then be another process's)
        if fd is not None:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            poller.poll()  # a pidfd turns readable when its process exits
            return
        while (os.getppid() == pid) if direct_child else _exists(pid):
            time.sleep(ORPHAN_CHECK_S)
    finally:
        if fd is not None:
            os.close(fd)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watch_parent(parent_pid: int, direct_child: bool) -> None:
    # The pipe's end-of-file is not enough to notice the parent's death: processes forked
    # later (by this pool or by anybody) may hold copies of the parent's end, and a worker
    # busy in a long call reads no pipe. Nor is PR_SET_PDEATHSIG: it fires when the
    # parent's *thread* that forked this process ends, not the parent.
    wait_for_exit(parent_pid, direct_child)
    time.sleep(ORPHAN_GRACE_S)
    os._exit(1)


def serve(obj: Any, conn: multiprocessing.connection.Connection, busy_wait: float = 0.0) -> None:
    recv_bytes, send_bytes = conn.recv_bytes, conn.send_bytes
    loads, dumps = pickle.loads, pickle.dumps
    # the hot path (a step on shared memory: no arguments, no result) unpickles and pickles nothing
    bare_requests: dict[bytes, tuple[Any, tuple[Any, ...], dict[str, Any]]] = {}
    none_reply = dumps(None, protocol=PROTOCOL)
    ready = ready_check(conn)
    while True:
        if busy_wait:  # the next request of a step loop comes soon: no sleep before it
            poll_briefly(ready, busy_wait)
        try:
            message = recv_bytes()
        except (EOFError, OSError):  # the parent is gone
            return
        try:
            request = bare_requests.get(message)
            if request is None:
                request = loads(message)
                if not request[1] and not request[2]:
                    bare_requests[message] = request
            method, args, kwargs = request
            if method is None:
                return
            if method == GET_ATTR:
                result = getattr(obj, args[0])
            else:
                result = getattr(obj, method)(*args, **kwargs)
            reply = none_reply if result is None else dumps(result, protocol=PROTOCOL)
        except Exception as err:  # SystemExit and the like end the worker, on purpose
            reply = dumps(RemoteError(err), protocol=PROTOCOL)
        try:
            send_bytes(reply)
        except OSError:  # the parent is gone
            return


def worker_main(
    index: int,
    factory: Callable[[], Any],
    conn: multiprocessing.connection.Connection,
    parent_pid: int,
    filter_warnings: bool,
    direct_child: bool = True,
    busy_wait: float = 0.0,
    threads: int = 1,
) -> None:
    # Ctrl-C reaches every process of the terminal's group; the parent alone handles it
    # (it closes the pool).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # After a fork this process holds copies of the parent ends of every pool's pipes;
    # they are the parent's, and holding them would hide the parent's death from siblings.
    for state in list(LIVE_STATES):
        for other in state.conns:
            if other is not None:
                other.close()
    LIVE_STATES.clear()
    # N workers with a full thread pool each would oversubscribe the cores; one thread
    # (the default) also keeps the child off the parent's OpenMP pool, which does not
    # survive fork.
    torch.set_num_threads(threads)
    if filter_warnings:
        warnings.simplefilter("ignore")
    threading.Thread(
        target=watch_parent, args=(parent_pid, direct_child), name="cadence-parent-watch", daemon=True
    ).start()
    try:
        obj = factory()
    except Exception as err:
        with contextlib.suppress(OSError):  # the parent may be gone
            conn.send_bytes(pickle.dumps(RemoteError(err), protocol=PROTOCOL))
        return
    obj_close = getattr(obj, "close", None)
    try:
        conn.send_bytes(pickle.dumps(None, protocol=PROTOCOL))
        serve(obj, conn, busy_wait)
    except OSError:  # the parent is gone before the ready message
        pass
    finally:
        try:
            if callable(obj_close):
                obj_close()
        finally:
            shutdown_all()  # pools that the object itself started


# ---------------------------------------------------------------------------------------
# Starting a child
# ---------------------------------------------------------------------------------------


def default_start_method() -> str:
    """Returns the start method that :class:`WorkerPool` uses when it is given none.

    ``"fork"`` on Linux: the seed tutorial's scripts build their environments at module
    level with no ``if __name__ == "__main__":`` guard, which ``"spawn"`` and
    ``"forkserver"`` need (they re-import the main script in every child), and a fork
    starts in milliseconds without re-importing anything; closures work as factories.
    ``"spawn"`` when CUDA is already initialised in this process (CUDA does not survive a
    fork; a warning says so) and on other platforms, where fork is unsafe or missing.

    Returns:
        ``"fork"`` or ``"spawn"``.

    Examples:
        >>> default_start_method() in ("fork", "spawn")
        True
    """
    if torch.cuda.is_initialized():
        warnings.warn(
            "CUDA is initialised in this process and does not survive fork(): the workers "
            "use the 'spawn' start method, so their factories must be picklable and the main "
            "script needs an `if __name__ == '__main__':` guard",
            RuntimeWarning,
            stacklevel=3,
        )
        return "spawn"
    if sys.platform.startswith("linux"):
        return "fork"
    return "spawn"


def start_worker(
    ctx: Any,
    child_conn: multiprocessing.connection.Connection,
    index: int,
    factory: Callable[[], Any],
    *,
    name: str,
    filter_warnings: bool,
    busy_wait: float,
    threads: int,
) -> Any:
    """Starts the child that serves ``factory()``'s object on ``child_conn`` (closed here
    once the child has its copy) and returns its process. Its first reply is the factory's
    outcome (``None`` or a ``RemoteError``). The parent's end of the pipe must be in a
    ``LIVE_STATES`` pool before the fork, so that the child closes its copy of it.

    Args:
        ctx: the multiprocessing context (its start method).
        child_conn: the child's end of the worker's pipe.
        index: the worker's index in its pool.
        factory: builds the object, in the child.
        name: the process's name.
        filter_warnings: filter all warnings in the child.
        busy_wait: seconds the child polls its pipe after each reply (see ``poll_briefly``).
        threads: ``torch.set_num_threads`` in the child.

    Raises:
        Exception: whatever starting the process raised (under spawn, a factory that does
            not pickle).

    Examples:
        >>> import multiprocessing
        >>> ctx = multiprocessing.get_context("fork")
        >>> conn, child_conn = ctx.Pipe()
        >>> proc = start_worker(ctx, child_conn, 0, dict, name="demo", filter_warnings=True, busy_wait=0.0,
        ...                     threads=1)
        >>> conn.recv_bytes() == pickle.dumps(None, protocol=PROTOCOL)  # the factory ran
        True
        >>> conn.send_bytes(CLOSE_MESSAGE); proc.join(5); proc.exitcode
        0
    """
    proc = ctx.Process(
        target=worker_main,
        args=(
            index,
            factory,
            child_conn,
            os.getpid(),
            filter_warnings,
            ctx.get_start_method() != "forkserver",  # a forkserver's children are the server's
            busy_wait,
            threads,
        ),
        name=name,
        daemon=False,  # daemonic processes may not have children; the pool reaps its own
    )
    try:
        proc.start()
    finally:
        child_conn.close()  # the child's copy alone must remain, so that its death shows
    return proc


# ---------------------------------------------------------------------------------------
# Shutdown, shared by close(), garbage collection and interpreter exit
# ---------------------------------------------------------------------------------------


class PoolState:
    """The processes and pipes of a pool: all that shutting it down needs, no pool reference."""

    def __init__(self, num_workers: int) -> None:
        self.owner_pid = os.getpid()
        self.processes: list[Any] = [None] * num_workers
        self.conns: list[multiprocessing.connection.Connection | None] = [None] * num_workers
        self.closed = False


LIVE_STATES: set[PoolState] = set()


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "it closed its pipe"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"killed by {name} (exit code {exitcode})"
    return f"exited with code {exitcode}"


def wait_exit(processes: list[Any], timeout: float) -> list[Any]:
    """Waits until the processes exit or ``timeout`` passes; returns those still running."""
    deadline = time.monotonic() + timeout
    running = [p for p in processes if p.exitcode is None]
    while running:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        multiprocessing.connection.wait([p.sentinel for p in running], timeout=left)
        running = [p for p in running if p.exitcode is None]
    return running


def shutdown(state: PoolState, timeout: float) -> None:
    # A forked child holds a copy of its parent's pools: never let it touch them.
    if state.closed or state.owner_pid != os.getpid():
        return
    state.closed = True
    LIVE_STATES.discard(state)
    started = []
    for conn, proc in zip(state.conns, state.processes):
        if proc is None:
            continue
        started.append(proc)
        if conn is not None and proc.exitcode is None:
            with contextlib.suppress(OSError, ValueError):  # a closed pipe: the worker is going anyway
                conn.send_bytes(CLOSE_MESSAGE)
    stragglers = wait_exit(started, timeout)
    for proc in stragglers:
        proc.terminate()
    stragglers = wait_exit(stragglers, 0.2)
    for proc in stragglers:
        proc.kill()
    for proc in started:
        proc.join()
        proc.close()
    for conn in state.conns:
        if conn is not None:
            conn.close()
    state.processes[:] = [None] * len(state.processes)
    state.conns[:] = [None] * len(state.conns)


def shutdown_all() -> None:
    for state in list(LIVE_STATES):
        shutdown(state, 1.0)


# multiprocessing's own exit hook joins every non-daemon child with no timeout, which
# would wait forever on idle workers; atexit runs hooks in reverse order, so this one
# (registered after multiprocessing.util was imported) stops the workers first.
atexit.register(shutdown_all)
