"""User-path throughput: Cadence vs a plain loop (the floor) vs the reference library, per row.

Five rows, each a path a user of the tutorial walks; every figure is frames (env steps) per
second, the median over ``--rounds`` rounds. In each round the plain loop and Cadence's
contender of a row are built, warmed up, and timed in blocks that alternate between the two
(``bench_rollout.measure``: ``--blocks`` blocks for the step counts, one 1000-frame batch per
block for the collectors), so that the machine's drifts hit both alike; row 3's two
contenders run one after the other (an idle ``ParallelEnv``'s workers wait busily), torchrl
once per round in its own process. ``torch.set_num_threads(1)`` everywhere; acting runs
under ``torch.no_grad()``.

Common setup, "the tutorial's chain": Pendulum-v1 through ``Compose(DoubleToFloat(),
ObservationNorm(loc=zeros(3), scale=ones(3), in_keys=["observation"]), StepCounter(200),
RewardSum(), CatTensors(in_keys=["observation"], out_key="observation_vector",
del_keys=False))`` on ``GymEnv("Pendulum-v1")`` in a ``TransformedEnv``; the policy is
``TensorDictModule(MLP(in_features=3, out_features=1, num_cells=[64, 64]),
["observation_vector"], ["action"])`` (tanh, the default). Every process calls
``torch.manual_seed(seed)`` right before building an MLP, so Cadence's, torchrl's and the
plain loop's networks hold the same weights (the script checks the weights' checksum that
the torchrl subprocess reports against its own).

The plain loop ("plain", the floor) does the same work by hand: ``gymnasium.make("Pendulum-v1")``,
the observation turned into a float32 tensor, normalized as ``(obs - loc) / scale``, the same
MLP called on it, the action clamped to [-2, 2] and turned into numpy, a step counter and a
reward sum kept, a reset at 200 steps or when the env is done.

Rows:

1. ``collector``: ``SyncDataCollector(TransformedEnv(chain), policy, frames_per_batch=1000,
   total_frames=-1)``; one warm-up batch is iterated, then ``--batches`` batches are timed.
   Plain: the loop above also writing each step's observation, action, reward and done into
   preallocated torch tensors of 1000 rows (a new set per batch).
2. ``manual loop``: the seed's manual loop on the transformed env, ``td = env.reset(); for i in
   range(steps): policy(td); _, td = env.step_and_maybe_reset(td)`` under ``torch.no_grad()``
   (200 warm-up steps, then ``--steps`` timed). Plain: the loop above, no storage.
3. ``parallel``: ``SyncDataCollector(ParallelEnv(2, lambda: GymEnv("HalfCheetah-v5",
   num_envs=4)), policy, frames_per_batch=1000)`` against the same collector on
   ``SerialEnv(8, lambda: GymEnv("HalfCheetah-v5"))``; the policy is
   ``TensorDictModule(MLP(17 -> 6, [64, 64]).double(), ["observation"], ["action"])``
   (HalfCheetah observes float64, so the MLP runs in float64 in both libraries). One warm-up
   batch, then ``max(1, --batches // 2)`` timed batches. The ratio is ParallelEnv / SerialEnv
   within each library (no plain loop); the collector is shut down and the env closed after
   each measurement. torchrl is run the same way.
4. ``dm_control``: ``DMControlEnv("cheetah", "run")`` (``cadence.envs``).
   ``random``: ``env.rollout(steps, break_when_any_done=False)`` with random actions, against
   a bare ``dm_control.suite.load("cheetah", "run")`` loop: uniform actions within the action
   spec's bounds from a ``numpy.random.Generator``, ``env.step(action)``, ``env.reset()`` when
   ``time_step.last()``. ``collector``: ``SyncDataCollector(TransformedEnv(DMControlEnv(...),
   Compose(DoubleToFloat(), CatTensors(["position", "velocity"], "observation_vector"))),
   TensorDictModule(MLP(17 -> 6, [64, 64]), ["observation_vector"], ["action"]),
   frames_per_batch=1000)`` (one warm-up batch, ``max(1, --batches // 2)`` timed) against the
   bare loop that concatenates position and velocity into a float32 tensor, calls the same MLP
   and steps with its output as numpy, and, as row 1's plain collector loop does, writes each
   step's observation, action, reward and done into preallocated tensors of 1000 rows. torchrl's ``DMControlEnv`` runs only if dm_control
   imports in the reference venv (it is not installed there by its setup script; nothing is
   installed into it here).
5. ``rollout``: ``TransformedEnv(chain).rollout(steps, break_when_any_done=False)``, random
   actions (200 warm-up steps first), against a bare gymnasium Pendulum-v1 loop with
   ``action_space.sample()``, no transforms, reset when done.

Cadence and the plain loops run in this process. torchrl 0.14.1 pins another tensordict, so it
runs in its own virtual environment (the python ``../shared/tools/reference-venv.sh`` prints,
found by ``bench_rollout.find_reference_python``), one subprocess per measurement that prints
one JSON line last; only the same span is timed there. torchrl 0.14 calls ``SyncDataCollector``
``Collector``; the script imports either.

Goals (from the issue): row 1 cadence/plain >= 0.5x, row 2 >= 0.35x, row 3 ParallelEnv /
SerialEnv >= 1.2x, row 4 >= 0.7x (random and collector), row 5 >= 0.5x.

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_pipeline.py
    .venv/bin/python benchmarks/bench_pipeline.py --rows 1,2,5 --steps 2000 --batches 2 --rounds 1
    .venv/bin/python benchmarks/bench_pipeline.py --skip-reference
    .venv/bin/python benchmarks/bench_pipeline.py --reference-python ~/.cache/cadence-reference-venv/bin/python
    .venv/bin/python benchmarks/bench_pipeline.py [--rows 1,2,3,4,5] [--steps 5000] [--batches 4]
                                                  [--rounds 3] [--blocks 10] [--seed 0] [--busy-wait S]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rollout import Runner, bare_random, find_reference_python, measure  # noqa: E402  (shared with it)

FRAMES_PER_BATCH = 1000
WARMUP_STEPS = 200
MAX_STEPS = 200  # the chain's StepCounter(200) and the plain loop's reset
GOALS: dict[str, float] = {
    "1 collector": 0.5,
    "2 manual loop": 0.35,
    "3 parallel": 1.2,
    "4 dmc random": 0.7,
    "4 dmc collector": 0.7,
    "5 rollout": 0.5,
}

# Runs in the reference library's python: argv = case, size, seed; prints
# {"frames_per_s": ..., "weights": ...} as its last line.
REFERENCE_SCRIPT = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import torch
torch.set_num_threads(1)
from tensordict.nn import TensorDictModule
try:
    from torchrl.collectors import SyncDataCollector
except ImportError:  # torchrl 0.14 names it Collector
    from torchrl.collectors import Collector as SyncDataCollector
from torchrl.envs import (CatTensors, Compose, DoubleToFloat, GymEnv, ObservationNorm, ParallelEnv, RewardSum,
                          SerialEnv, StepCounter, TransformedEnv)
from torchrl.modules import MLP

case, size, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


def mlp(n_in, n_out):
    torch.manual_seed(seed)
    return MLP(in_features=n_in, out_features=n_out, num_cells=[64, 64])


def checksum(net):
    return float(sum(p.double().sum() for p in net.parameters()))


def chain_env():
    env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(
        DoubleToFloat(),
        ObservationNorm(loc=torch.zeros(3), scale=torch.ones(3), in_keys=["observation"]),
        StepCounter(200),
        RewardSum(),
        CatTensors(in_keys=["observation"], out_key="observation_vector", del_keys=False),
    ))
    env.set_seed(seed)
    return env


def time_collector(collector, batches):
    it = iter(collector)
    next(it)
    start = time.perf_counter()
    frames = sum(next(it).numel() for _ in range(batches))
    elapsed = time.perf_counter() - start
    collector.shutdown()
    return frames / elapsed


net = None
if case == "collector":
    net = mlp(3, 1)
    policy = TensorDictModule(net, ["observation_vector"], ["action"])
    env = chain_env()
    speed = time_collector(SyncDataCollector(env, policy, frames_per_batch=1000, total_frames=-1), size)
    if not getattr(env, "is_closed", False):  # torchrl's collector.shutdown() closes a batched env itself
        env.close()
elif case == "manual":
    net = mlp(3, 1)
    policy = TensorDictModule(net, ["observation_vector"], ["action"])
    env = chain_env()
    with torch.no_grad():
        td = env.reset()
        for _ in range(200):
            policy(td)
            _, td = env.step_and_maybe_reset(td)
        start = time.perf_counter()
        for _ in range(size):
            policy(td)
            _, td = env.step_and_maybe_reset(td)
        speed = size / (time.perf_counter() - start)
    env.close()
elif case in ("parallel", "serial"):
    net = mlp(17, 6).double()
    policy = TensorDictModule(net, ["observation"], ["action"])
    if case == "parallel":
        env = ParallelEnv(2, lambda: GymEnv("HalfCheetah-v5", num_envs=4))
    else:
        env = SerialEnv(8, lambda: GymEnv("HalfCheetah-v5"))
    env.set_seed(seed)
    speed = time_collector(SyncDataCollector(env, policy, frames_per_batch=1000, total_frames=-1), size)
    if not getattr(env, "is_closed", False):  # torchrl's collector.shutdown() closes a batched env itself
        env.close()
elif case == "rollout":
    env = chain_env()
    env.rollout(200, break_when_any_done=False)
    start = time.perf_counter()
    env.rollout(size, break_when_any_done=False)
    speed = size / (time.perf_counter() - start)
    env.close()
elif case == "dmc_random":
    from torchrl.envs import DMControlEnv
    env = DMControlEnv("cheetah", "run")
    env.set_seed(seed)
    env.rollout(200, break_when_any_done=False)
    start = time.perf_counter()
    env.rollout(size, break_when_any_done=False)
    speed = size / (time.perf_counter() - start)
    env.close()
elif case == "dmc_collector":
    from torchrl.envs import DMControlEnv
    net = mlp(17, 6)
    policy = TensorDictModule(net, ["observation_vector"], ["action"])
    env = TransformedEnv(DMControlEnv("cheetah", "run"), Compose(
        DoubleToFloat(), CatTensors(in_keys=["position", "velocity"], out_key="observation_vector")))
    env.set_seed(seed)
    speed = time_collector(SyncDataCollector(env, policy, frames_per_batch=1000, total_frames=-1), size)
    if not getattr(env, "is_closed", False):  # torchrl's collector.shutdown() closes a batched env itself
        env.close()
else:
    raise SystemExit(f"unknown case {case!r}")
print(json.dumps({"frames_per_s": speed, "weights": checksum(net) if net is not None else None}))
"""


# ---------------------------------------------------------------------------------------------
# shared pieces


def make_mlp(in_features: int, out_features: int, seed: int) -> Any:
    """``cadence.modules.MLP(in -> out, [64, 64])``, tanh, built right after ``manual_seed(seed)``."""
    import torch

    from cadence.modules import MLP

    torch.manual_seed(seed)
    return MLP(in_features=in_features, out_features=out_features, num_cells=[64, 64])


def weights_checksum(net: Any) -> float:
    return float(sum(p.double().sum() for p in net.parameters()))


def cadence_chain_env(seed: int) -> Any:
    """``TransformedEnv(GymEnv("Pendulum-v1"), <the tutorial's chain>)`` in Cadence."""
    import torch

    from cadence.envs import (
        CatTensors,
        Compose,
        DoubleToFloat,
        GymEnv,
        ObservationNorm,
        RewardSum,
        StepCounter,
        TransformedEnv,
    )

    env = TransformedEnv(
        GymEnv("Pendulum-v1"),
        Compose(
            DoubleToFloat(),
            ObservationNorm(loc=torch.zeros(3), scale=torch.ones(3), in_keys=["observation"]),
            StepCounter(MAX_STEPS),
            RewardSum(),
            CatTensors(in_keys=["observation"], out_key="observation_vector", del_keys=False),
        ),
    )
    env.set_seed(seed)
    return env


def cadence_pendulum_policy(seed: int) -> Any:
    from tensordict.nn import TensorDictModule

    return TensorDictModule(make_mlp(3, 1, seed), ["observation_vector"], ["action"])


def collector_runner(collector: Any) -> Runner:
    """``run(frames)`` iterates ``frames // FRAMES_PER_BATCH`` batches (at least one) of
    ``collector``; ``run.close()`` shuts it down."""
    iterator = iter(collector)

    def run(frames: int) -> None:
        for _ in range(max(1, frames // FRAMES_PER_BATCH)):
            next(iterator)

    run.close = collector.shutdown  # type: ignore[attr-defined]
    return run


# ---------------------------------------------------------------------------------------------
# rows 1 and 2: the plain Pendulum loop, with or without storage


class StepStorage:
    """What a plain collector loop keeps: each step's observation, action, reward and done
    written into preallocated tensors of ``FRAMES_PER_BATCH`` rows (a new set per batch)."""

    def __init__(self, observation_size: int, action_size: int) -> None:
        self.sizes = (observation_size, action_size)
        self.row = FRAMES_PER_BATCH

    def _allocate(self) -> None:
        import torch

        self.observation = torch.empty(FRAMES_PER_BATCH, self.sizes[0])
        self.action = torch.empty(FRAMES_PER_BATCH, self.sizes[1])
        self.reward = torch.empty(FRAMES_PER_BATCH, 1)
        self.done = torch.empty(FRAMES_PER_BATCH, 1, dtype=torch.bool)
        self.row = 0

    def add(self, observation: Any, action: Any, reward: float, done: bool) -> None:
        if self.row == FRAMES_PER_BATCH:
            self._allocate()
        row = self.row
        self.observation[row] = observation
        self.action[row] = action
        self.reward[row] = reward
        self.done[row] = done
        self.row = row + 1


def plain_pendulum(seed: int, store: bool) -> Runner:
    """The tutorial's work by hand (gymnasium + torch).

    With ``store``, each step's observation, action, reward and done go into preallocated
    tensors of ``FRAMES_PER_BATCH`` rows (a new set each ``FRAMES_PER_BATCH`` steps).
    """
    import gymnasium
    import torch

    mlp = make_mlp(3, 1, seed)
    env = gymnasium.make("Pendulum-v1")
    loc, scale = torch.zeros(3), torch.ones(3)
    state: dict[str, Any] = {"obs": env.reset(seed=seed)[0], "count": 0, "ret": 0.0}

    storage = StepStorage(3, 1) if store else None

    def run(n: int) -> None:
        obs, count, ret = state["obs"], state["count"], state["ret"]
        with torch.no_grad():
            for _ in range(n):
                observation = (torch.from_numpy(obs).to(torch.float32) - loc) / scale
                action = mlp(observation).clamp(-2.0, 2.0)
                obs, reward, terminated, truncated, _ = env.step(action.numpy())
                count += 1
                ret += float(reward)
                done = terminated or truncated or count >= MAX_STEPS
                if storage is not None:
                    storage.add(observation, action, float(reward), done)
                if done:
                    obs, _ = env.reset()
                    count, ret = 0, 0.0
        state.update(obs=obs, count=count, ret=ret)

    return run


def cadence_collector(seed: int) -> Runner:
    """Row 1: ``SyncDataCollector`` on the transformed Pendulum with the MLP policy."""
    from cadence.collectors import SyncDataCollector

    env = cadence_chain_env(seed)
    return collector_runner(
        SyncDataCollector(env, cadence_pendulum_policy(seed), frames_per_batch=FRAMES_PER_BATCH, total_frames=-1)
    )


def cadence_manual(seed: int) -> Runner:
    """Row 2: the seed's ``policy(td); _, td = env.step_and_maybe_reset(td)`` loop."""
    import torch

    env = cadence_chain_env(seed)
    policy = cadence_pendulum_policy(seed)
    state = {"td": env.reset()}

    def run(steps: int) -> None:
        td = state["td"]
        with torch.no_grad():
            for _ in range(steps):
                policy(td)
                _, td = env.step_and_maybe_reset(td)
        state["td"] = td

    return run


# ---------------------------------------------------------------------------------------------
# row 3: ParallelEnv vs SerialEnv on HalfCheetah


def _cheetah_policy(seed: int) -> Any:
    from tensordict.nn import TensorDictModule

    return TensorDictModule(make_mlp(17, 6, seed).double(), ["observation"], ["action"])


def _make_cheetah_x4() -> Any:
    from cadence.envs import GymEnv

    return GymEnv("HalfCheetah-v5", num_envs=4)


def _make_cheetah() -> Any:
    from cadence.envs import GymEnv

    return GymEnv("HalfCheetah-v5")


def cadence_cheetah(seed: int, parallel: bool, busy_wait: float | None = None) -> Runner:
    """Row 3: a collector on ``ParallelEnv(2, GymEnv(..., num_envs=4))`` (its ``busy_wait``
    if given, else its default) or ``SerialEnv(8, GymEnv(...))``; ``run.close()`` closes it."""
    from cadence.collectors import SyncDataCollector
    from cadence.envs import ParallelEnv, SerialEnv

    options = {} if busy_wait is None else {"busy_wait": busy_wait}
    env = ParallelEnv(2, _make_cheetah_x4, **options) if parallel else SerialEnv(8, _make_cheetah)
    env.set_seed(seed)
    run = collector_runner(SyncDataCollector(env, _cheetah_policy(seed), frames_per_batch=FRAMES_PER_BATCH,
                                             total_frames=-1))
    shutdown = run.close  # type: ignore[attr-defined]

    def close() -> None:
        shutdown()
        env.close()

    run.close = close  # type: ignore[attr-defined]
    return run


# ---------------------------------------------------------------------------------------------
# row 4: dm_control cheetah-run


def plain_dmc(seed: int, with_policy: bool) -> Runner:
    """Bare ``dm_control.suite`` loop: random actions, or the MLP on concatenated position+velocity
    with each step stored (as a collector keeps it)."""
    import numpy as np
    import torch
    from dm_control import suite

    env = suite.load("cheetah", "run", task_kwargs={"random": seed})
    spec = env.action_spec()
    low, high = spec.minimum, spec.maximum
    rng = np.random.default_rng(seed)
    mlp = make_mlp(17, 6, seed) if with_policy else None
    state: dict[str, Any] = {"time_step": env.reset()}

    storage = StepStorage(17, 6) if with_policy else None  # the collector's storage, as row 1's plain loop keeps it

    def run(n: int) -> None:
        time_step = state["time_step"]
        with torch.no_grad():
            for _ in range(n):
                if mlp is None:
                    action = rng.uniform(low, high)
                else:
                    observation = time_step.observation
                    vector = torch.from_numpy(
                        np.concatenate([observation["position"], observation["velocity"]])
                    ).to(torch.float32)
                    action_t = mlp(vector)
                    action = action_t.numpy()
                time_step = env.step(action)
                if storage is not None:
                    storage.add(vector, action_t, time_step.reward, time_step.last())
                if time_step.last():
                    time_step = env.reset()
        state["time_step"] = time_step

    return run


def cadence_dmc_random(seed: int) -> Runner:
    """Row 4, random: ``DMControlEnv("cheetah", "run").rollout(steps, break_when_any_done=False)``."""
    from cadence.envs import DMControlEnv

    env = DMControlEnv("cheetah", "run")
    env.set_seed(seed)

    def run(steps: int) -> None:
        env.rollout(steps, break_when_any_done=False)

    return run


def cadence_dmc_collector(seed: int) -> Runner:
    """Row 4, collector: DMControlEnv + DoubleToFloat + CatTensors, MLP policy."""
    from tensordict.nn import TensorDictModule

    from cadence.collectors import SyncDataCollector
    from cadence.envs import CatTensors, Compose, DMControlEnv, DoubleToFloat, TransformedEnv

    env = TransformedEnv(
        DMControlEnv("cheetah", "run"),
        Compose(DoubleToFloat(), CatTensors(in_keys=["position", "velocity"], out_key="observation_vector")),
    )
    env.set_seed(seed)
    policy = TensorDictModule(make_mlp(17, 6, seed), ["observation_vector"], ["action"])
    return collector_runner(SyncDataCollector(env, policy, frames_per_batch=FRAMES_PER_BATCH, total_frames=-1))


# ---------------------------------------------------------------------------------------------
# row 5: random rollout through the chain


def cadence_rollout(seed: int) -> Runner:
    """Row 5: ``TransformedEnv(chain).rollout(steps, break_when_any_done=False)``, random actions
    (the plain loop: ``bench_rollout.bare_random`` on Pendulum-v1)."""
    env = cadence_chain_env(seed)

    def run(steps: int) -> None:
        env.rollout(steps, break_when_any_done=False)

    return run


# ---------------------------------------------------------------------------------------------
# the reference library


class ReferenceRunner:
    """Runs one torchrl measurement per subprocess and checks its MLP weights against ours."""

    def __init__(self, python: str, seed: int) -> None:
        self.python = python
        self.seed = seed
        self.weight_notes: list[str] = []

    def __call__(self, case: str, size: int, expected_weights: float | None = None) -> float:
        result = subprocess.run(
            [self.python, "-c", REFERENCE_SCRIPT, case, str(size), str(self.seed)],
            capture_output=True,
            text=True,
            cwd="/",  # keep this repository (and its ``cadence``) off the reference's path
            timeout=1800,
        )
        if result.returncode != 0:
            raise RuntimeError(f"the torchrl measurement {case!r} failed: {result.stderr.strip()[-2000:]}")
        report = json.loads(result.stdout.strip().splitlines()[-1])
        weights = report.get("weights")
        if expected_weights is not None and weights is not None and abs(weights - expected_weights) > 1e-6:
            note = f"torchrl's {case} MLP weights differ from Cadence's (checksum {weights} vs {expected_weights})"
            if note not in self.weight_notes:
                self.weight_notes.append(note)
        return float(report["frames_per_s"])

    def imports(self, module: str) -> bool:
        check = subprocess.run([self.python, "-c", f"import {module}"], capture_output=True, text=True, cwd="/")
        return check.returncode == 0


# ---------------------------------------------------------------------------------------------


def _cell(value: float | None) -> str:
    return f"{value:,.0f}" if value is not None else "skipped"


def _ratio(numerator: float | None, denominator: float | None) -> str:
    return f"{numerator / denominator:.2f}x" if numerator is not None and denominator else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1,2,3,4,5", help="comma-separated rows to run (default: %(default)s)")
    parser.add_argument(
        "--steps", type=int, default=5000, help="timed env steps of rows 2, 4 (random) and 5 (default: %(default)s)"
    )
    parser.add_argument(
        "--batches",
        type=int,
        default=4,
        help="timed 1000-frame batches of row 1; rows 3 and 4 (collector) time max(1, half) (default: %(default)s)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default: %(default)s)")
    parser.add_argument(
        "--blocks", type=int, default=10, help="alternating blocks of rows 2, 4 (random) and 5 (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--busy-wait", type=float, default=None, help="row 3: ParallelEnv(busy_wait=...) in seconds (default: its own)"
    )
    parser.add_argument("--skip-reference", action="store_true", help="do not run torchrl")
    parser.add_argument("--reference-python", default=None, help="python of a venv holding torchrl 0.14.1")
    args = parser.parse_args(argv)
    try:
        rows = sorted({int(r) for r in args.rows.split(",") if r.strip()})
    except ValueError:
        parser.error(f"--rows takes comma-separated row numbers, got {args.rows!r}")
    if not rows or any(r not in range(1, 6) for r in rows):
        parser.error("--rows takes numbers from 1 to 5")
    if args.steps < 1 or args.batches < 1 or args.rounds < 1:
        parser.error("need --steps >= 1, --batches >= 1 and --rounds >= 1")
    warnings.simplefilter("ignore")
    logging.getLogger("absl").setLevel(logging.ERROR)  # dm_control's deprecation chatter on each env load

    import gymnasium
    import torch

    import cadence

    torch.set_num_threads(1)
    if args.skip_reference:
        reference_python, why = None, "--skip-reference"
    else:
        reference_python, why = find_reference_python(args.reference_python)
    reference = ReferenceRunner(reference_python, args.seed) if reference_python else None
    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, gymnasium {gymnasium.__version__}, "
        f"cadence {cadence.__version__}"
    )
    print(f"reference: {why}" if reference else f"reference: skipped ({why})")
    half = max(1, args.batches // 2)
    print(
        f"rows {','.join(map(str, rows))}; {args.steps} timed steps (rows 2, 4 random, 5), {args.batches} timed "
        f"batches of {FRAMES_PER_BATCH} (row 1), {half} (rows 3, 4 collector); {args.rounds} rounds, medians shown"
    )
    skipped: dict[str, str] = {}  # (row) -> why torchrl is not measured there

    pendulum_weights = weights_checksum(make_mlp(3, 1, args.seed))
    cheetah_weights = weights_checksum(make_mlp(17, 6, args.seed))
    # each case: its in-process contenders (built once per round, timed in alternating blocks
    # by bench_rollout.measure), its frames and blocks, and torchrl's measurements (once per round)
    Case = tuple[dict[str, Callable[[], Runner]], int, int, dict[str, Callable[[], float]]]
    cases: dict[str, Case] = {}
    batch_frames, half_frames = args.batches * FRAMES_PER_BATCH, half * FRAMES_PER_BATCH
    if 1 in rows:
        cases["1 collector"] = (
            {"plain": lambda: plain_pendulum(args.seed, store=True), "cadence": lambda: cadence_collector(args.seed)},
            batch_frames, args.batches,
            {"torchrl": lambda: reference("collector", args.batches, pendulum_weights)} if reference else {},
        )
    if 2 in rows:
        cases["2 manual loop"] = (
            {"plain": lambda: plain_pendulum(args.seed, store=False), "cadence": lambda: cadence_manual(args.seed)},
            args.steps, args.blocks,
            {"torchrl": lambda: reference("manual", args.steps, pendulum_weights)} if reference else {},
        )
    if 3 in rows:
        # one after the other, not in alternation: an idle ParallelEnv's workers wait busily
        cases["3 parallel"] = (
            {"cadence serial": lambda: cadence_cheetah(args.seed, parallel=False),
             "cadence parallel": lambda: cadence_cheetah(args.seed, parallel=True, busy_wait=args.busy_wait)},
            half_frames, 0,
            {"torchrl serial": lambda: reference("serial", half, cheetah_weights),
             "torchrl parallel": lambda: reference("parallel", half, cheetah_weights)} if reference else {},
        )
    if 4 in rows:
        dmc_reference = reference is not None and reference.imports("dm_control")
        cases["4 dmc random"] = (
            {"plain": lambda: plain_dmc(args.seed, with_policy=False), "cadence": lambda: cadence_dmc_random(args.seed)},
            args.steps, args.blocks,
            {"torchrl": lambda: reference("dmc_random", args.steps)} if dmc_reference else {},
        )
        cases["4 dmc collector"] = (
            {"plain": lambda: plain_dmc(args.seed, with_policy=True),
             "cadence": lambda: cadence_dmc_collector(args.seed)},
            half_frames, half,
            {"torchrl": lambda: reference("dmc_collector", half, cheetah_weights)} if dmc_reference else {},
        )
        if reference and not dmc_reference:
            skipped["4 dmc random"] = skipped["4 dmc collector"] = "dm_control not installed in the reference venv"
    if 5 in rows:
        cases["5 rollout"] = (
            {"plain": lambda: bare_random(args.seed, "Pendulum-v1"), "cadence": lambda: cadence_rollout(args.seed)},
            args.steps, args.blocks,
            {"torchrl": lambda: reference("rollout", args.steps)} if reference else {},
        )
    for case, reason in skipped.items():
        print(f"torchrl {case}: skipped ({reason})")
    print()

    results: dict[str, dict[str, list[float]]] = {
        case: {who: [] for who in (*makers, *others)} for case, (makers, _, _, others) in cases.items()
    }
    failures: dict[tuple[str, str], str] = {}
    for round_index in range(args.rounds):
        for case, (makers, frames, blocks, others) in cases.items():
            if blocks:  # the contenders in alternation
                groups = [(tuple(makers), lambda makers=makers: {who: make() for who, make in makers.items()})]
            else:  # one at a time
                groups = [((who,), lambda who=who, make=make: {who: make()}) for who, make in makers.items()]
            for names, build in groups:
                if any((case, who) in failures for who in names):
                    continue
                try:
                    speeds = measure(build(), frames, max(1, blocks))
                except Exception as err:  # report and carry on with the other contenders
                    for who in names:
                        failures[case, who] = f"{type(err).__name__}: {str(err).strip()[-1500:]}"
                    print(f"round {round_index + 1}/{args.rounds}  {case:<16} {'/'.join(names):<16} FAILED: {err}")
                    continue
                for who, speed in speeds.items():
                    results[case][who].append(speed)
                    print(f"round {round_index + 1}/{args.rounds}  {case:<16} {who:<16} {speed:12,.0f} frames/s",
                          flush=True)
            for who, run in others.items():
                if (case, who) in failures:
                    continue
                try:
                    speed = run()
                except Exception as err:
                    failures[case, who] = f"{type(err).__name__}: {str(err).strip()[-1500:]}"
                    print(f"round {round_index + 1}/{args.rounds}  {case:<16} {who:<16} FAILED: {failures[case, who]}")
                    continue
                results[case][who].append(speed)
                print(f"round {round_index + 1}/{args.rounds}  {case:<16} {who:<16} {speed:12,.0f} frames/s", flush=True)
    print()
    # cadence/plain: the median of the rounds' ratios (each round times the two in alternation)
    paired: dict[str, float | None] = {}
    for case, by_who in results.items():
        cad_rounds, plain_rounds = by_who.get("cadence", []), by_who.get("plain", [])
        by_round = [c / p for c, p in zip(cad_rounds, plain_rounds)] if len(cad_rounds) == len(plain_rounds) else []
        paired[case] = statistics.median(by_round) if by_round else None
        if by_round:
            print(f"{case}: cadence/plain by round {', '.join(f'{r:.2f}' for r in by_round)}")
    median: dict[str, dict[str, float]] = {
        case: {who: statistics.median(speeds) for who, speeds in by_who.items() if speeds}
        for case, by_who in results.items()
    }

    for case in cases:
        m = median[case]
        goal = GOALS[case]
        if case == "3 parallel":
            ratio = _ratio(m.get("cadence parallel"), m.get("cadence serial"))
            print(
                f"{case}: cadence parallel {_cell(m.get('cadence parallel'))}, serial {_cell(m.get('cadence serial'))} "
                f"-> {ratio} (goal >= {goal}x); torchrl parallel {_cell(m.get('torchrl parallel'))}, serial "
                f"{_cell(m.get('torchrl serial'))} -> {_ratio(m.get('torchrl parallel'), m.get('torchrl serial'))}"
            )
        else:
            print(
                f"{case}: plain {_cell(m.get('plain'))}, cadence {_cell(m.get('cadence'))}, torchrl "
                f"{_cell(m.get('torchrl'))}; cadence/plain {_ratio(paired[case], 1.0)} "
                f"(goal >= {goal}x), torchrl/plain {_ratio(m.get('torchrl'), m.get('plain'))}"
            )
    if reference:
        for note in reference.weight_notes:
            print(f"note: {note}")
    for (case, who), why in failures.items():
        print(f"FAILED: {case} {who}: {why.splitlines()[-1] if why.splitlines() else why}")
    print()

    print(
        "| row | plain frames/s | cadence frames/s | torchrl frames/s | cadence/plain | torchrl/plain | goal | met |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for case in cases:
        m = median[case]
        goal = GOALS[case]
        if case == "3 parallel":
            par, ser = m.get("cadence parallel"), m.get("cadence serial")
            met = "yes" if par is not None and ser and par / ser >= goal else "no"
            print(
                f"| {case} (parallel/serial) | - | {_cell(par)} / {_cell(ser)} | "
                f"{_cell(m.get('torchrl parallel'))} / {_cell(m.get('torchrl serial'))} | {_ratio(par, ser)} | "
                f"{_ratio(m.get('torchrl parallel'), m.get('torchrl serial'))} | >= {goal}x SerialEnv | {met} |"
            )
            continue
        cad, plain, ref = m.get("cadence"), m.get("plain"), m.get("torchrl")
        ratio = paired[case]
        met = "yes" if ratio is not None and ratio >= goal else "no"
        torchrl_cell = _cell(ref) if ref is not None or case not in skipped else "skipped (no dm_control)"
        print(
            f"| {case} | {_cell(plain)} | {_cell(cad)} | {torchrl_cell} | {_ratio(ratio, 1.0)} | "
            f"{_ratio(ref, plain)} | >= {goal}x | {met} |"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
