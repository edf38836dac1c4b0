"""Replay-buffer speed: Cadence vs the reference library vs a bare numpy ring buffer.

HalfCheetah-sized transitions (observation 17, action 6, reward, done, next
observation, float32), a buffer of ``--capacity`` (1M) frames on memory-mapped files:

* ``extend``: writing the buffer full in 1000-frame batches (time per batch);
* ``sample``: ``sample(256)`` from the full buffer (uniform);
* ``prioritized``: ``sample(256)`` then ``update_priority`` of those 256, full buffer;
* ``slice 10k`` / ``slice 1M``: ``SliceSampler(slice_len=32)`` samples of 256 frames
  from buffers of 10k and of 1M frames (trajectories of 1000 steps, ends marked in
  ``("next", "done")``); the ratio of the two says how the cost grows with the buffer.
* ``checkpoint`` (Cadence only): ``dumps()`` of the full buffer, then ``loads()`` of it
  into a fresh buffer with and without checksum verification (``verify=``), to show
  what the CRC-32 of the data files costs. ``--only-checkpoint`` runs just this case.

The same script measures both libraries (it imports ``cadence.data.replay_buffers`` or
``torchrl.data.replay_buffers``, whose APIs match), each in its own subprocess and
virtual environment (torchrl pins another tensordict); the numpy floor runs in the
Cadence one. Figures are medians over the repeats.

Usage::

    python benchmarks/bench_replay.py [--capacity 1000000] [--repeats 200] [--skip-reference]
    python benchmarks/bench_replay.py --only-checkpoint [--capacity 1000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from bench_rollout import REPO_ROOT, find_reference_python

# Runs in either library's python: prints {"case": seconds, ...} as its last line.
MEASURE_SCRIPT = r'''
import json, statistics, sys, tempfile, time
import numpy as np
import torch
from tensordict import TensorDict

library, capacity, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
results = {}


def median_time(run, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def transitions(n, trajectory_length=1000, start=0):
    step = (start + torch.arange(n)) % trajectory_length
    return TensorDict(
        {"observation": torch.randn(n, 17), "action": torch.randn(n, 6),
         "next": {"observation": torch.randn(n, 17), "reward": torch.randn(n, 1),
                  "done": (step == trajectory_length - 1).unsqueeze(-1)}},
        [n],
    )


batches = [transitions(1000, start=i * 1000) for i in range(capacity // 1000)]

if library == "numpy":
    arrays = {k: np.zeros((capacity, *v.shape[1:]), dtype=v.numpy().dtype)
              for k, v in batches[0].items(True, True)}
    cursor = 0
    extend_times = []
    for batch in batches:
        start = time.perf_counter()
        values = {k: v.numpy() for k, v in batch.items(True, True)}
        for k, array in arrays.items():
            array[cursor:cursor + 1000] = values[k]
        cursor = (cursor + 1000) % capacity
        extend_times.append(time.perf_counter() - start)
    results["extend"] = statistics.median(extend_times)
    rng = np.random.default_rng(0)
    leaves = list(arrays.values())
    results["sample"] = median_time(lambda: [a[rng.integers(0, capacity, 256)] for a in leaves], repeats)
    print(json.dumps(results))
    sys.exit()

if library == "cadence":
    from cadence.data.replay_buffers import (LazyMemmapStorage, PrioritizedSampler, SliceSampler,
                                             TensorDictReplayBuffer)
else:
    from torchrl.data.replay_buffers import (LazyMemmapStorage, PrioritizedSampler, SliceSampler,
                                             TensorDictReplayBuffer)

scratch = tempfile.mkdtemp()
buffer = TensorDictReplayBuffer(storage=LazyMemmapStorage(capacity, scratch_dir=scratch + "/uniform"), batch_size=256)
buffer.extend(batches[0])  # allocation, outside the timing
extend_times = []
for batch in batches[1:]:
    start = time.perf_counter()
    buffer.extend(batch)
    extend_times.append(time.perf_counter() - start)
buffer.extend(batches[0])
results["extend"] = statistics.median(extend_times)
for _ in range(10):
    buffer.sample()
results["sample"] = median_time(buffer.sample, repeats)

try:
    prioritized = TensorDictReplayBuffer(
        storage=LazyMemmapStorage(capacity, scratch_dir=scratch + "/prioritized"),
        sampler=PrioritizedSampler(capacity, alpha=0.7, beta=0.5), batch_size=256,
    )
    for batch in batches:
        prioritized.extend(batch)
    priorities = torch.rand(256)

    def sample_and_update():
        sample = prioritized.sample()
        prioritized.update_priority(sample["index"], priorities)

    for _ in range(10):
        sample_and_update()
    results["prioritized"] = median_time(sample_and_update, repeats)
except Exception as err:  # the reference's prioritized sampler needs a compiled extension
    results["prioritized"] = f"failed: {type(err).__name__}: {str(err)[:200]}"

for name, frames in (("slice 10k", 10_000), ("slice 1M", capacity)):
    sliced = TensorDictReplayBuffer(
        storage=LazyMemmapStorage(frames, scratch_dir=f"{scratch}/{name[-3:]}"),
        sampler=SliceSampler(slice_len=32, end_key=("next", "done")), batch_size=256,
    )
    for batch in batches[: frames // 1000]:
        sliced.extend(batch)
    for _ in range(3):
        sliced.sample()
    results[name] = median_time(sliced.sample, max(5, repeats // 10))
print(json.dumps(results))
'''


# Runs in Cadence's python: dumps() and loads() of a full buffer; prints {"case": seconds, ...}.
CHECKPOINT_SCRIPT = r'''
import json, shutil, statistics, sys, tempfile, time
from pathlib import Path
import torch
from tensordict import TensorDict
from cadence.data.replay_buffers import LazyMemmapStorage, TensorDictReplayBuffer

capacity, repeats = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
scratch = Path(tempfile.mkdtemp())


def make(name):
    return TensorDictReplayBuffer(storage=LazyMemmapStorage(capacity, scratch_dir=scratch / name), batch_size=256)


buffer = make("source")
for start in range(0, capacity, 1000):
    buffer.extend(TensorDict(
        {"observation": torch.randn(1000, 17), "action": torch.randn(1000, 6),
         "next": {"observation": torch.randn(1000, 17), "reward": torch.randn(1000, 1),
                  "done": torch.zeros(1000, 1, dtype=torch.bool)}},
        [1000],
    ))
times = {"dumps": [], "loads (verify=True)": [], "loads (verify=False)": []}
target = make("target")
for _ in range(repeats):
    start = time.perf_counter()
    buffer.dumps(scratch / "checkpoints")
    times["dumps"].append(time.perf_counter() - start)
    for verify in (True, False):
        start = time.perf_counter()
        target.loads(scratch / "checkpoints", verify=verify)
        times[f"loads (verify={verify})"].append(time.perf_counter() - start)
assert len(target) == capacity
size = sum(f.stat().st_size for f in (scratch / "checkpoints").rglob("*") if f.is_file())
shutil.rmtree(scratch, ignore_errors=True)
print(json.dumps({**{case: statistics.median(values) for case, values in times.items()}, "bytes": size}))
'''


def measure_checkpoint(capacity: int, repeats: int) -> dict[str, float]:
    """Seconds of ``dumps()`` and of ``loads()`` with and without verification (medians), and the checkpoint's bytes."""
    result = subprocess.run(
        [sys.executable, "-c", CHECKPOINT_SCRIPT, str(capacity), str(repeats)], capture_output=True, text=True,
        cwd=REPO_ROOT,
    )
    if result.returncode != 0:
        raise RuntimeError(f"the checkpoint run failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def print_checkpoint(capacity: int, repeats: int) -> None:
    """Measures and prints the checkpoint case."""
    times = measure_checkpoint(capacity, repeats)
    megabytes = times.pop("bytes") / 2**20
    print(f"\ncheckpoint of {capacity:,} frames ({megabytes:,.0f} MiB on disk), medians of {repeats}:")
    print("| case | seconds | MiB/s |")
    print("|---|---|---|")
    for case, seconds in times.items():
        print(f"| {case} | {seconds:.3f} | {megabytes / seconds:,.0f} |")
    verified, unverified = times["loads (verify=True)"], times["loads (verify=False)"]
    print(f"verification adds {verified - unverified:.3f} s ({verified / unverified - 1:+.0%}) to loads()")


def measure(python: str, library: str, capacity: int, repeats: int) -> dict[str, float | str]:
    """Runs the measurements of ``library`` in ``python``; seconds per operation by case."""
    result = subprocess.run(
        [python, "-c", MEASURE_SCRIPT, library, str(capacity), str(repeats)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT if library != "torchrl" else "/",  # keep this repository off the reference's path
    )
    if result.returncode != 0:
        raise RuntimeError(f"the {library} run failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capacity", type=int, default=1_000_000, help="frames (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=200, help="timed calls per case (default: %(default)s)")
    parser.add_argument("--skip-reference", action="store_true", help="do not run torchrl")
    parser.add_argument("--reference-python", default=None, help="python of a venv holding torchrl 0.14.1")
    parser.add_argument("--only-checkpoint", action="store_true", help="run only the dumps()/loads() case")
    parser.add_argument(
        "--checkpoint-repeats", type=int, default=5, help="dumps()/loads() rounds (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    if args.capacity < 10_000 or args.capacity % 1000:
        parser.error("--capacity must be a multiple of 1000, at least 10000")
    if args.only_checkpoint:
        print_checkpoint(args.capacity, args.checkpoint_repeats)
        return 0

    reference, why = (None, "--skip-reference") if args.skip_reference else find_reference_python(
        args.reference_python
    )
    print(f"capacity {args.capacity:,} frames, {args.repeats} repeats, medians; reference: "
          f"{why if reference else f'skipped ({why})'}")
    runs = {"numpy": measure(sys.executable, "numpy", args.capacity, args.repeats),
            "cadence": measure(sys.executable, "cadence", args.capacity, args.repeats)}
    if reference:
        runs["torchrl"] = measure(reference, "torchrl", args.capacity, args.repeats)

    def cell(value: float | str | None) -> str:
        if value is None:
            return "-"
        return f"{value * 1e6:,.0f} us" if isinstance(value, float) else "failed"

    header = "| case | numpy | cadence | torchrl | cadence/numpy speed | cadence/torchrl speed |"
    print()
    print(header)
    print("|---|---|---|---|---|---|")
    for case in ("extend", "sample", "prioritized", "slice 10k", "slice 1M"):
        numpy_t, cadence_t = runs["numpy"].get(case), runs["cadence"].get(case)
        torchrl_t = runs.get("torchrl", {}).get(case)
        vs_numpy = f"{numpy_t / cadence_t:.2f}x" if isinstance(numpy_t, float) and isinstance(cadence_t, float) else "-"
        vs_torchrl = (
            f"{torchrl_t / cadence_t:.2f}x" if isinstance(torchrl_t, float) and isinstance(cadence_t, float) else "-"
        )
        print(f"| {case} | {cell(numpy_t)} | {cell(cadence_t)} | {cell(torchrl_t)} | {vs_numpy} | {vs_torchrl} |")
    for library, result in runs.items():
        for case, value in result.items():
            if isinstance(value, str):
                print(f"{library} {case}: {value}")
    growth = {lib: r["slice 1M"] / r["slice 10k"] for lib, r in runs.items()
              if isinstance(r.get("slice 1M"), float) and isinstance(r.get("slice 10k"), float)}
    for library, ratio in growth.items():
        print(f"{library}: SliceSampler sample time grows {ratio:.2f}x from 10k to {args.capacity:,} frames")
    print_checkpoint(args.capacity, args.checkpoint_repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
