"""Shared memory of the multi-process collectors (and of ``ParallelEnv``): a main process
killed at any moment leaves nothing in ``/dev/shm`` or the temporary directory, and its
orphaned workers exit by themselves.

Each trial is a fresh main process forked from a helper that imported torch and cadence
once (so a trial costs milliseconds, not an interpreter start); it builds a collector
or a ``ParallelEnv`` and iterates, and is SIGKILLed a few milliseconds into its first batch.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

KINDS = ("MultiSyncDataCollector", "MultiaSyncDataCollector", "ParallelEnv")
TRIALS = 30

HELPER = textwrap.dedent(
    """
    import os
    import sys

    import torch  # noqa: F401  (imported once; every trial is a fork of this process)
    from cadence.collectors import MultiaSyncDataCollector, MultiSyncDataCollector
    from cadence.envs import GymEnv, ParallelEnv


    def say(text):
        os.write(1, (text + "\\n").encode())


    def trial(kind):
        os.setsid()  # a session of its own: the test finds every process it starts by it
        make = lambda: GymEnv("CartPole-v1")
        if kind == "ParallelEnv":
            env = ParallelEnv(2, make)
            say("start")
            while True:
                env.rollout(64, break_when_any_done=False)  # the chunked path
                env.rollout(16)  # step by step
        cls = {"MultiSyncDataCollector": MultiSyncDataCollector, "MultiaSyncDataCollector": MultiaSyncDataCollector}
        collector = cls[kind]([make, make], frames_per_batch=64)
        say("start")
        for _ in collector:
            pass


    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            try:
                trial(line.strip())
            finally:
                os._exit(1)
        say(f"pid {pid}")
        _, status = os.waitpid(pid, 0)
        say(f"status {status}")
    """
)


def _session_processes(sid: int) -> list[int]:
    """The running (not zombie) processes of session ``sid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(entry))
    return found


def _shm() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def _ours(names: set[str], pids: set[int]) -> set[str]:
    """The names that are not plainly another process's (torch names its segments
    ``torch_<pid>_...``; other processes' entries of the moment come and go)."""
    kept = set()
    for name in names:
        match = re.match(r"torch_(\d+)_", name)
        if match and int(match.group(1)) not in pids:
            continue
        kept.add(name)
    return kept


class Helper:
    """The helper process: send it a kind, read its lines (with a timeout: nothing hangs)."""

    def __init__(self, script: Path, temp: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "TMPDIR": str(temp)},
        )
        self.temp = temp
        self.pending = b""

    def send(self, kind: str) -> None:
        self.proc.stdin.write(kind.encode() + b"\n")
        self.proc.stdin.flush()

    def line(self, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            assert ready, f"the helper said nothing for {timeout} s"
            chunk = os.read(fd, 4096)
            assert chunk, "the helper exited"
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def helper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helper]:
    root = tmp_path_factory.mktemp("main-kill")
    script = root / "helper.py"
    script.write_text(HELPER)
    temp = root / "tmp"
    temp.mkdir()
    started = Helper(script, temp)
    yield started
    started.close()


def _trial(helper: Helper, kind: str, delay: float) -> list[str]:
    """Starts a main process, SIGKILLs it ``delay`` s into its first batch, and says what it left."""
    before, temp_before = _shm(), set(helper.temp.iterdir())
    helper.send(kind)
    said = {helper.line(), helper.line()}  # the helper's "pid N" and the trial's "start", in either order
    assert "start" in said, said
    (pid,) = [int(line.split()[1]) for line in said if line.startswith("pid ")]
    try:
        time.sleep(delay)
        pids = set(_session_processes(pid))
        os.kill(pid, signal.SIGKILL)
        answer = helper.line()
        assert answer.startswith("status "), answer
        status = int(answer.split()[1])
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, "the main process ended by itself"
        failures = []
        deadline = time.monotonic() + 10.0
        left = _session_processes(pid)
        while left and time.monotonic() < deadline:
            pids |= set(left)
            time.sleep(0.02)
            left = _session_processes(pid)
        if left:
            failures.append(f"processes {left} still run 10 s after the kill")
        new = _ours(_shm() - before, pids)
        if new:
            time.sleep(0.2)  # another process's passing entry would be gone by now
            new = _ours(new & _shm(), pids)
        if new:
            failures.append(f"left in /dev/shm: {sorted(new)}")
        # torch makes its compile cache folder there on first use, whatever happens next
        new_temp = {p for p in set(helper.temp.iterdir()) - temp_before if not p.name.startswith("torchinductor_")}
        if new_temp:
            failures.append(f"left in the temporary directory: {sorted(new_temp)}")
        return failures
    finally:  # whatever failed, nothing of the trial's session runs on
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


@pytest.mark.parametrize("kind", KINDS)
def test_a_killed_main_process_leaves_no_shared_memory_and_no_process(kind: str, helper: Helper) -> None:
    failures = []
    for trial in range(TRIALS):
        # 0 to 58 ms: the workers' start, the first batch (about 35 ms here), the buffers' hand-over
        delay = (trial * 7 % 30) * 2 / 1000
        failures += [f"trial {trial} (killed after {delay * 1000:.0f} ms): {text}" for text in _trial(helper, kind, delay)]
    assert not failures, "\n".join(failures)
