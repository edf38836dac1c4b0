"""Writing is crash-safe: a writer killed (SIGKILL) in the middle of a save leaves the
previous checkpoint or the new one, whole, and the next save removes what it left."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from cadence.checkpoint import Checkpoint
from cadence.data.replay_buffers import LazyTensorStorage, ReplayBuffer

# Saves, again and again, a network filled with the step number, that step, and a buffer
# large enough for a save to take a while; prints each step once saved.
_WRITER = """
import sys, torch
from cadence.checkpoint import Checkpoint
from cadence.data.replay_buffers import LazyTensorStorage, ReplayBuffer
path, format = sys.argv[1], sys.argv[2]
net, state = torch.nn.Linear(64, 64), {"step": 0}
buffer = ReplayBuffer(storage=LazyTensorStorage(20000))
buffer.extend(torch.zeros(20000, 16))
checkpoint = Checkpoint(format=format, policy=net, state=state, replay_buffer=buffer)
step = 0
while True:
    step += 1
    with torch.no_grad():
        net.weight.fill_(step)
    state["step"] = step
    checkpoint.save(path)
    print(step, flush=True)
"""


def _leftovers(path: Path, format: str) -> list[Path]:
    """What a save in progress (or killed) has beside or inside ``path``."""
    if format == "directory":
        return [entry for entry in path.iterdir() if entry.name.endswith(".partial")] if path.is_dir() else []
    return [entry for entry in path.parent.iterdir() if entry.name.startswith(f".{path.name}.")]


def _kill_while_saving(path: Path, format: str, delay: float) -> int:
    """Starts the writer, waits for its first checkpoint, kills it ``delay`` seconds after
    a later save has begun; returns the last step it reported saved."""
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), format],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert writer.stdout is not None
        first = int(writer.stdout.readline())
        deadline = time.monotonic() + 30
        while not _leftovers(path, format):
            assert time.monotonic() < deadline, "the writer never started another save"
            time.sleep(0.0002)
        time.sleep(delay)
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=30)
        reported = [int(line) for line in writer.stdout.read().split()]
        return max([first, *reported])
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()


@pytest.mark.parametrize("format", ["archive", "directory"])
def test_a_writer_killed_mid_save_leaves_a_whole_checkpoint(tmp_path: Path, format: str) -> None:
    path = tmp_path / "run.ckpt"
    generator = random.Random(format)
    killed_mid_save = 0
    for attempt in range(3):
        saved = _kill_while_saving(path, format, delay=generator.uniform(0.0, 0.004))
        killed_mid_save += bool(_leftovers(path, format))
        net, state = torch.nn.Linear(64, 64), {"step": -1}
        buffer = ReplayBuffer(storage=LazyTensorStorage(20000))
        result = Checkpoint(policy=net, state=state, replay_buffer=buffer).load(path)
        assert result.loaded == {"policy", "state", "replay_buffer"}, attempt
        step = state["step"]
        # the previous save or the one killed, never a mix of two
        assert step in (saved, saved + 1), (attempt, step, saved)
        assert bool((net.weight == step).all()) and len(buffer) == 20000
        Checkpoint(format=format, policy=net, state=state, replay_buffer=buffer).save(path)
        assert _leftovers(path, format) == [], attempt  # the next save removed the killed one's files
    assert killed_mid_save > 0  # the kills did fall inside saves
