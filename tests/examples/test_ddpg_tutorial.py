"""``examples/ddpg_tutorial.py``, the seed DDPG tutorial as one script, run end to end on
HalfCheetah in a subprocess, the way a user runs it: it exits 0, its progress bar reaches the
total, it saves a PNG plot, and its ParallelEnv workers are gone when it ends.

The short run (1_600 frames: two batches, no training yet) checks the plumbing; the long
one (8_000 frames) gets past the tutorial's ``init_random_frames`` (5_000) and to its
recorder's first evaluation (``record_interval=10`` batches of 800 frames), so that the
progress bar's description with "reward eval" appears.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import signal
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "examples" / "ddpg_tutorial.py"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gymnasium") is None or importlib.util.find_spec("mujoco") is None,
    reason="the tutorial runs HalfCheetah-v4: needs gymnasium[mujoco]",
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# a tqdm line: " 50%|#####     | 800/1600 [..." or, past the total, ": 10400it [..."
PROGRESS = re.compile(r"(?:(\d+)/(\d+)|(\d+)it) \[")


def _run(tmp_path: pathlib.Path, total_frames: int, timeout: float) -> subprocess.CompletedProcess:
    plot = tmp_path / "plot dir" / "ddpg.png"
    plot.parent.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in ("DISPLAY", "WAYLAND_DISPLAY", "MPLBACKEND")}
    command = [sys.executable, str(SCRIPT), "--total-frames", str(total_frames), "--plot", str(plot)]
    # a session of its own: if the run hangs, the script and anything it started go together
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        # communicate() returns once every holder of the pipes is gone: workers left
        # running after the script ends would keep it waiting (and fail the test here)
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"the tutorial did not finish within {timeout} s; its output ended with:\n{stderr[-3000:]}")
    result = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    assert result.returncode == 0, f"exit code {result.returncode}; stderr ends with:\n{stderr[-3000:]}"
    assert not _processes_running(str(plot)), "processes started by the tutorial are still running"
    return result


def _processes_running(marker: str) -> list[int]:
    """Ids of live processes whose command line holds ``marker`` (the run's own plot path:
    forked workers share the script's command line). Linux only; elsewhere, none."""
    proc = pathlib.Path("/proc")
    if not proc.is_dir():
        return []
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next((line for line in (entry / "status").read_text().splitlines() if line.startswith("State:")), "")
        except OSError:  # gone meanwhile
            continue
        if marker in cmdline and "zombie" not in state:
            found.append(int(entry.name))
    return found


def _last_progress(stderr: str) -> int:
    counts = []
    for line in re.split(r"[\r\n]", stderr):
        for match in PROGRESS.finditer(line):
            counts.append(int(match.group(1) or match.group(3)))
    assert counts, f"no progress bar in the output:\n{stderr[-3000:]}"
    return counts[-1]


def _check_plot(result: subprocess.CompletedProcess) -> None:
    plot = pathlib.Path(result.args[result.args.index("--plot") + 1])
    assert f"reward plot saved to {plot}" in result.stdout
    data = plot.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 100 and height > 100
    assert data[-8:-4] == b"IEND"


def test_the_tutorial_runs_two_batches(tmp_path: pathlib.Path) -> None:
    result = _run(tmp_path, total_frames=1600, timeout=300)
    assert _last_progress(result.stderr) == 1600
    assert "1600/1600" in result.stderr
    assert "reward eval" not in result.stderr  # no update nor evaluation before 5_000 frames
    _check_plot(result)


@pytest.mark.slow
def test_the_tutorial_trains_and_evaluates(tmp_path: pathlib.Path) -> None:
    result = _run(tmp_path, total_frames=8000, timeout=600)
    assert _last_progress(result.stderr) >= 8000
    description = [line for line in re.split(r"[\r\n]", result.stderr) if "reward eval" in line]
    assert description, f"the training description never showed:\n{result.stderr[-3000:]}"
    figures = re.search(r"reward eval: reward: *(-?[\d.]+), .*grad norm= *([\d.]+), loss_value= *([\d.]+)",
                        description[-1])
    assert figures, description[-1]  # numbers (a nan would not match)
    _check_plot(result)
