"""WorkerPool: calls, faults (exceptions, dead and hung workers), restarts, and cleanup.

Every test runs real worker processes; none may leave one behind or hang.
"""

from __future__ import annotations

import faulthandler
import functools
import gc
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import cadence
from cadence.envs.workers import (
    WorkerDiedError,
    WorkerError,
    WorkerException,
    WorkerPool,
    WorkerTimeoutError,
    default_start_method,
)


@pytest.fixture(autouse=True)
def _bounded_and_clean() -> Iterator[None]:
    # No pytest-timeout here: a hang dumps the stacks and ends the run rather than
    # blocking it forever.
    faulthandler.dump_traceback_later(60, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
    leftovers = [p for p in multiprocessing.active_children() if p.name.startswith("test-")]
    assert not leftovers, f"worker processes left behind: {leftovers}"


class Echo:
    """A worker object with a method for each thing a worker can do."""

    def __init__(self, index: int = 0, marker: str | None = None) -> None:
        self.index = index
        self.calls = 0
        self.marker = marker

    def ping(self, *args: Any, **kwargs: Any) -> tuple[int, int, tuple, dict]:
        self.calls += 1
        return self.index, self.calls, args, kwargs

    def fail_if(self, index: int, message: str) -> int:
        if self.index == index:
            raise ValueError(message)
        return self.index

    def sleep_if(self, index: int, seconds: float) -> int:
        if self.index == index:
            time.sleep(seconds)
        return self.index

    def exit_now(self, code: int) -> None:
        os._exit(code)

    def unpicklable(self) -> Any:
        return threading.Lock()

    def settings(self) -> tuple[int, bool]:
        return torch.get_num_threads(), signal.getsignal(signal.SIGINT) is signal.SIG_IGN

    def warns(self) -> int:
        with warnings.catch_warnings(record=True) as caught:
            warnings.warn("a warning from the worker", UserWarning)
        return len(caught)

    def close(self) -> None:
        if self.marker is not None:
            Path(self.marker).write_text(f"closed {self.index}")


def echo_pool(n: int, timeout: float | None = 10.0, **kwargs: Any) -> WorkerPool:
    return WorkerPool([functools.partial(Echo, i) for i in range(n)], timeout=timeout, name="test-echo", **kwargs)


def failing_factory() -> Echo:
    raise KeyError("no such env in the factory")


def is_running(pid: int) -> bool:
    """Whether ``pid`` is a process that still runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def assert_gone(pids: list[Any], within: float = 2.0) -> None:
    deadline = time.monotonic() + within
    running = [pid for pid in pids if pid is not None and is_running(pid)]
    while running and time.monotonic() < deadline:
        time.sleep(0.02)
        running = [pid for pid in running if is_running(pid)]
    assert not running, f"processes {running} still run"


# ---------------------------------------------------------------------------------------
# Calls
# ---------------------------------------------------------------------------------------


def test_call_returns_the_results_in_worker_order_with_args_and_kwargs():
    with echo_pool(3) as pool:
        assert not pool.is_started  # nothing starts before the first call
        assert pool.call("ping", 1, key="v") == [(i, 1, (1,), {"key": "v"}) for i in range(3)]
        assert pool.is_started and pool.num_workers == 3
        assert len(set(pool.pids)) == 3 and os.getpid() not in pool.pids


def test_indices_select_workers_and_order_the_results():
    with echo_pool(3) as pool:
        assert [r[0] for r in pool.call("ping", indices=[2, 0])] == [2, 0]
        assert [r[1] for r in pool.call("ping")] == [2, 1, 2]  # worker 1 was not called
        with pytest.raises(IndexError, match="worker index 3 out of range: the pool has 3 workers"):
            pool.call("ping", indices=[3])
        with pytest.raises(ValueError, match="must not repeat"):
            pool.call("ping", indices=[1, 1])
        with pytest.raises(TypeError, match="must be an int, got str"):
            pool.call("ping", indices=["0"])
        assert [r[1] for r in pool.call("ping")] == [3, 2, 3]  # nothing was sent by the bad calls


def test_get_attr_and_send_recv():
    with echo_pool(2) as pool:
        assert pool.get_attr("index") == [0, 1]
        assert pool.get_attr("index", indices=[1]) == [1]
        with pytest.raises(WorkerException, match="AttributeError") as info:
            pool.get_attr("missing")
        assert info.value.method == "get_attr"
        pool.send(1, "ping", "x")
        with pytest.raises(RuntimeError, match="owes 1 reply"):
            pool.call("ping")  # refused before anything was sent to worker 0
        assert pool.recv(1) == (1, 1, ("x",), {})
        with pytest.raises(RuntimeError, match="no reply to read"):
            pool.recv(0)
        assert [r[1] for r in pool.call("ping")] == [1, 2]


def test_start_and_first_call_are_fast():
    pool = echo_pool(2)
    try:
        begin = time.perf_counter()
        pool.start()
        pool.call("ping")
        assert time.perf_counter() - begin < 1.0
    finally:
        pool.close()


def test_child_runs_one_thread_ignores_sigint_and_filters_warnings(monkeypatch):
    with echo_pool(1) as pool:
        assert pool.call("settings") == [(1, True)]
        assert pool.call("warns") == [0]
    monkeypatch.setattr(cadence, "filter_warnings_subprocess", False)
    with echo_pool(1) as pool:
        assert pool.call("warns") == [1]


def test_worker_threads_and_busy_wait_are_options():
    with echo_pool(2, worker_threads=2, busy_wait=1e-3) as pool:
        assert pool.call("settings") == [(2, True), (2, True)]
        # calls in a row and calls after a pause (the workers sleep again) answer alike
        assert [pool.call("ping") for _ in range(20)] == [[(0, n, (), {}), (1, n, (), {})] for n in range(1, 21)]
        time.sleep(0.01)
        assert pool.call("ping", 5) == [(0, 21, (5,), {}), (1, 21, (5,), {})]
    with pytest.raises(ValueError, match="busy_wait must be >= 0 seconds, got -1"):
        WorkerPool([Echo], busy_wait=-1)
    with pytest.raises(ValueError, match="worker_threads must be an int >= 1, got 0"):
        WorkerPool([Echo], worker_threads=0)


def test_a_busy_waiting_pool_still_notices_a_dead_worker_and_times_out():
    with echo_pool(2, timeout=1.0, busy_wait=0.05) as pool:
        pool.call("ping")
        os.kill(pool.pids[1], signal.SIGKILL)
        begin = time.perf_counter()
        with pytest.raises(WorkerDiedError, match="worker 1"):
            pool.call("ping")
        assert time.perf_counter() - begin < 0.9


def test_child_can_use_torch_after_the_parent_used_its_thread_pool():
    big = torch.randn(512, 512)
    (big @ big).sum()
    pool = WorkerPool([lambda: torch], timeout=10, name="test-torch")
    with pool:
        assert pool.call("ones", 3)[0].sum().item() == 3.0  # a tensor comes back as a copy


def test_shared_memory_tensors_made_before_start_are_shared_under_fork():
    shared = torch.zeros(3).share_memory_()
    private = torch.zeros(3)

    class Writer:
        def write(self, value: float) -> None:
            shared.fill_(value)
            private.fill_(value)

    with WorkerPool([Writer], timeout=10, name="test-shm") as pool:
        pool.call("write", 7.0)
    assert shared.tolist() == [7.0, 7.0, 7.0]
    assert private.tolist() == [0.0, 0.0, 0.0]  # plain memory is copied on write


def test_object_close_runs_when_the_worker_exits(tmp_path):
    markers = [tmp_path / f"closed-{i}" for i in range(2)]
    pool = WorkerPool(
        [functools.partial(Echo, i, str(m)) for i, m in enumerate(markers)], timeout=10, name="test-close"
    )
    pool.start()
    pool.close()
    assert [m.read_text() for m in markers] == ["closed 0", "closed 1"]


# ---------------------------------------------------------------------------------------
# Faults
# ---------------------------------------------------------------------------------------


def test_exception_in_a_worker_names_it_and_carries_the_child_traceback():
    with echo_pool(3) as pool:
        with pytest.raises(WorkerException) as info:
            pool.call("fail_if", 1, "the pole fell over")
        err = info.value
        assert isinstance(err, WorkerError) and isinstance(err, RuntimeError)
        assert err.index == 1 and err.method == "fail_if"
        message = str(err)
        assert "worker 1" in message and "'fail_if'" in message and "ValueError" in message
        assert "the pole fell over" in message and "Traceback" in message
        assert "in fail_if" in message  # the child-side function, from the child's traceback
        assert isinstance(err.remote_exception, ValueError) and err.__cause__ is err.remote_exception
        # the other workers' replies were read: the pipes are in sync, the worker usable
        assert [r[:2] for r in pool.call("ping")] == [(0, 1), (1, 1), (2, 1)]


def test_several_failures_raise_the_first_and_note_the_others():
    with echo_pool(2) as pool:
        pool.call("ping", indices=[0])
        with pytest.raises(WorkerException) as info:
            pool.call("fail_if", 0, "x", indices=[1, 0])
        assert info.value.index == 0
        with pytest.raises(WorkerException, match="raised AttributeError") as info:
            pool.call("nope_not_a_method")
        assert info.value.index == 0 and "worker 1" in info.value.__notes__[0]
        assert [other.index for other in info.value.others] == [1]  # each failure, for callers that handle them


def test_workers_of_a_killed_parent_exit_by_themselves_busy_or_idle(tmp_path):
    # An idle worker reads the end of its pipe; a busy one (in a long call) does not, and
    # learns of its parent's death from the pidfd it waits on.
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            """
            import time
            from cadence.envs.workers import WorkerPool

            class Sleeper:
                def sleep(self, seconds):
                    time.sleep(seconds)

            pool = WorkerPool([Sleeper, Sleeper], timeout=60)
            pool.start()
            pool.send(0, "sleep", 60.0)
            print(" ".join(str(pid) for pid in pool.pids), flush=True)
            time.sleep(60)
            """
        )
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(is_running(pid) for pid in pids)
        parent.kill()
        parent.wait()
        assert_gone(pids, within=8.0)
    finally:
        parent.kill()
        parent.wait()


def test_unpicklable_result_is_a_worker_exception_and_the_worker_lives_on():
    with echo_pool(1) as pool:
        with pytest.raises(WorkerException, match="unpicklable"):
            pool.call("unpicklable")
        assert pool.call("ping") == [(0, 1, (), {})]


def test_sigkilled_worker_is_reported_at_once_and_others_keep_working():
    with echo_pool(3) as pool:
        pool.start()
        os.kill(pool.pids[1], signal.SIGKILL)
        begin = time.monotonic()
        with pytest.raises(WorkerDiedError, match=r"worker 1 .*SIGKILL") as info:
            pool.call("ping")
        assert time.monotonic() - begin < 2.0
        assert info.value.index == 1 and info.value.exitcode == -signal.SIGKILL
        assert not pool.is_alive(1) and pool.is_alive(0)
        assert [r[:2] for r in pool.call("ping", indices=[0, 2])] == [(0, 2), (2, 2)]  # in sync
        with pytest.raises(WorkerDiedError, match=r"worker 1 .*dead.*restart\(1\)"):
            pool.call("ping")
        pool.restart(1)
        assert pool.restart_count(1) == 1 and pool.restart_count(0) == 0
        assert [r[:2] for r in pool.call("ping")] == [(0, 4), (1, 1), (2, 4)]


def test_worker_killed_during_a_call_is_noticed_before_the_timeout():
    with echo_pool(2, timeout=30) as pool:
        pool.start()
        threading.Timer(0.2, os.kill, (pool.pids[0], signal.SIGKILL)).start()
        begin = time.monotonic()
        with pytest.raises(WorkerDiedError, match="worker 0"):
            pool.call("sleep_if", 0, 20.0)
        assert time.monotonic() - begin < 2.0
        assert pool.call("ping", indices=[1]) == [(1, 1, (), {})]


def test_worker_that_exits_reports_its_exit_code():
    with echo_pool(2) as pool:
        with pytest.raises(WorkerDiedError, match="exited with code 3") as info:
            pool.call("exit_now", 3, indices=[1])
        assert info.value.exitcode == 3
        pool.send(0, "exit_now", 4)
        with pytest.raises(WorkerDiedError, match="exited with code 4"):
            pool.recv(0)
        with pytest.raises(WorkerDiedError, match="worker 0 .*dead"):
            pool.recv(0)


def test_hung_worker_times_out_is_killed_and_can_be_restarted():
    with echo_pool(2, timeout=0.5) as pool:
        pool.start()
        hung = pool.pids[1]
        begin = time.monotonic()
        with pytest.raises(WorkerTimeoutError) as info:
            pool.call("sleep_if", 1, 30.0)
        assert time.monotonic() - begin < 1.5
        err = info.value
        assert err.index == 1 and err.method == "sleep_if" and err.timeout == 0.5
        assert "worker 1" in str(err) and "'sleep_if'" in str(err) and "0.5 s" in str(err)
        assert_gone([hung])
        assert pool.call("ping", indices=[0]) == [(0, 1, (), {})]
        with pytest.raises(WorkerDiedError, match="no reply within 0.5 s"):
            pool.call("ping", indices=[1])
        pool.restart(1)
        assert pool.call("ping") == [(0, 2, (), {}), (1, 1, (), {})]


def test_interrupted_call_does_not_shift_later_replies():
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    with echo_pool(2) as pool:
        pool.start()
        previous = signal.signal(signal.SIGALRM, interrupt)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.1)
            with pytest.raises(KeyboardInterrupt):
                pool.call("sleep_if", 1, 0.4)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        assert pool.call("ping") == [(0, 1, (), {}), (1, 1, (), {})]


def test_factory_error_fails_start_and_closes_the_pool():
    pool = WorkerPool([Echo, failing_factory], timeout=10, name="test-factory")
    with pytest.raises(WorkerException, match="no such env in the factory") as info:
        pool.start()
    assert info.value.index == 1 and info.value.method == "factory"
    assert "in failing_factory" in str(info.value)
    assert pool.is_closed


# ---------------------------------------------------------------------------------------
# Life cycle and cleanup
# ---------------------------------------------------------------------------------------


def test_close_is_fast_idempotent_and_leaves_no_child():
    pool = echo_pool(3)
    pool.start()
    pids = pool.pids
    begin = time.perf_counter()
    pool.close()
    assert time.perf_counter() - begin < 0.5
    assert_gone(pids, within=0.5)
    pool.close()
    assert pool.is_closed and not pool.is_started and pool.pids == [None] * 3
    with pytest.raises(RuntimeError, match="closed"):
        pool.call("ping")
    with pytest.raises(RuntimeError, match="closed"):
        pool.restart(0)


def test_close_ends_busy_workers_too():
    pool = echo_pool(2)
    pool.start()
    pids = pool.pids
    pool.send(0, "sleep_if", 0, 30.0)
    begin = time.perf_counter()
    pool.close(timeout=0.2)
    assert time.perf_counter() - begin < 1.0
    assert_gone(pids, within=0.5)


def test_garbage_collected_pool_leaves_no_child():
    pool = echo_pool(2)
    pids = pool.start().pids
    del pool
    gc.collect()
    assert_gone(pids)


def test_pools_inside_workers_are_closed_with_them():
    class Outer:  # has no close(): its pool is closed with the worker all the same
        def __init__(self) -> None:
            self.inner = WorkerPool([Echo, Echo], timeout=10, name="test-inner").start()

        def inner_pids(self) -> list[int | None]:
            return self.inner.pids

    with WorkerPool([Outer], timeout=10, name="test-outer") as pool:
        inner_pids = pool.call("inner_pids")[0]
        assert all(is_running(pid) for pid in inner_pids)
    assert_gone(inner_pids)


def test_script_without_main_guard_works_and_leaves_no_child_when_it_exits(tmp_path):
    # No `if __name__ == "__main__":` guard, closures as factories, no close(): the
    # seed tutorial's style. The pool must start, serve, and be reaped at exit.
    script = tmp_path / "no_guard.py"
    script.write_text(
        textwrap.dedent(
            """
            from cadence.envs.workers import WorkerPool

            offset = 10
            pool = WorkerPool([lambda: offset, lambda: offset + 1], timeout=30)
            print(pool.call("__add__", 1))
            print(" ".join(str(pid) for pid in pool.pids))
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result, pids = done.stdout.strip().splitlines()
    assert result == "[11, 12]"
    assert_gone([int(pid) for pid in pids.split()])


# ---------------------------------------------------------------------------------------
# Arguments and start methods
# ---------------------------------------------------------------------------------------


def test_bad_arguments_are_refused_with_what_came():
    with pytest.raises(ValueError, match="at least one factory"):
        WorkerPool([])
    with pytest.raises(TypeError, match=r"factories\[1\] must be callable.*3"):
        WorkerPool([Echo, 3])
    with pytest.raises(ValueError, match="start_method must be one of .*'threads'"):
        WorkerPool([Echo], start_method="threads")
    with pytest.raises(ValueError, match="timeout must be a positive number.*-1"):
        WorkerPool([Echo], timeout=-1)
    with echo_pool(1) as pool:
        with pytest.raises(TypeError, match="method must be the name of a method.*got int"):
            pool.call(3)


def test_default_start_method_is_fork_unless_cuda_is_initialised(monkeypatch):
    assert default_start_method() == ("fork" if sys.platform.startswith("linux") else "spawn")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.warns(RuntimeWarning, match="CUDA is initialised.*'spawn'"):
        assert default_start_method() == "spawn"


def test_spawn_needs_picklable_factories():
    offset = 1
    pool = WorkerPool([lambda: offset], start_method="spawn", name="test-spawn")
    with pytest.raises(TypeError, match=r"factories\[0\].*must be picklable"):
        pool.start()
    assert pool.is_closed


@pytest.mark.slow
def test_spawn_start_method_serves_calls():
    # Slow: the spawned child imports torch and cadence afresh.
    with WorkerPool([functools.partial(dict, a=1)], start_method="spawn", timeout=60, name="test-spawn") as pool:
        assert pool.call("get", "a") == [1]
        with pytest.raises(WorkerException, match="KeyError"):
            pool.call("pop", "missing")
        assert pool.call("get", "a") == [1]
        assert pool.start_method == "spawn"


def test_an_argument_free_request_is_pickled_once() -> None:
    from unittest import mock

    import cadence.envs.workers as workers

    with WorkerPool([lambda: "ab", lambda: "cd"]) as pool:
        with mock.patch.object(workers.pickle, "dumps", wraps=workers.pickle.dumps) as dumps:
            assert [pool.call("upper") for _ in range(5)] == [["AB", "CD"]] * 5
            assert pool.call("center", 4, "*") == ["*ab*", "*cd*"]
        assert dumps.call_count == 2  # "upper" once, "center" with its arguments once
