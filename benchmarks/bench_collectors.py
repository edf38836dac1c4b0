"""Collector speed: a plain loop vs Cadence's collectors vs the reference library's.

Two cases, measured in alternating rounds (medians shown), frames per second:

* ``pendulum x8``: Pendulum-v1, 8 envs in one process, ``frames_per_batch=1000``, a policy
  MLP [64, 64] (``cadence.modules.MLP``, tanh) followed by Ornstein-Uhlenbeck exploration.
  - ``plain``: ``gymnasium.vector.SyncVectorEnv`` x8, the same MLP called on the
    observation tensor under ``torch.no_grad()``, the same OU noise written out on
    tensors (``theta``, ``sigma``, ``dt``, ``eps`` as the module's defaults) and the same
    clamp to the action bounds; the floor for this work.
  - ``cadence``: ``SyncDataCollector(SerialEnv(8, GymEnv("Pendulum-v1")),
    TensorDictSequential(TensorDictModule(mlp), OrnsteinUhlenbeckProcessModule(spec)))``.
  - ``torchrl``: the same with torchrl 0.14.1's classes (``SyncDataCollector``,
    ``SerialEnv``, ``GymEnv``, ``MLP``, ``OrnsteinUhlenbeckProcessModule``), in its own
    virtual environment (a subprocess per measurement, found as ``bench_rollout.py``
    finds it).
* ``halfcheetah``: HalfCheetah-v5, one env per process, ``frames_per_batch=1000``, an MLP
  [64, 64] policy: Cadence's ``SyncDataCollector`` against ``MultiSyncDataCollector``
  with 2 worker processes.

Each measurement collects one warm-up batch, then times ``--batches`` batches.

Usage::

    python benchmarks/bench_collectors.py [--batches 20] [--rounds 3] [--skip-reference]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rollout import find_reference_python  # noqa: E402  (the reference venv, found once)

FRAMES_PER_BATCH = 1000
NUM_ENVS = 8

# Runs in the reference library's python; prints {"frames_per_s": ...} as its last line.
REFERENCE_SCRIPT = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import torch
torch.set_num_threads(1)
from tensordict.nn import TensorDictModule, TensorDictSequential
try:
    from torchrl.collectors import SyncDataCollector
except ImportError:  # torchrl 0.14 names it Collector
    from torchrl.collectors import Collector as SyncDataCollector
from torchrl.envs import GymEnv, SerialEnv
from torchrl.modules import MLP, OrnsteinUhlenbeckProcessModule

batches, seed = int(sys.argv[1]), int(sys.argv[2])
env = SerialEnv(8, lambda: GymEnv("Pendulum-v1"))
env.set_seed(seed)
torch.manual_seed(seed)
mlp = MLP(in_features=3, out_features=1, num_cells=[64, 64], activation_class=torch.nn.Tanh)
policy = TensorDictSequential(
    TensorDictModule(mlp, in_keys=["observation"], out_keys=["action"]),
    OrnsteinUhlenbeckProcessModule(spec=env.action_spec.clone(), annealing_num_steps=1_000_000),
)
collector = SyncDataCollector(env, policy, frames_per_batch=1000, total_frames=-1)
it = iter(collector)
next(it)
start = time.perf_counter()
frames = sum(next(it).numel() for _ in range(batches))
elapsed = time.perf_counter() - start
collector.shutdown()
print(json.dumps({"frames_per_s": frames / elapsed}))
"""


def _mlp(in_features: int, out_features: int, seed: int) -> object:
    import torch

    from cadence.modules import MLP

    torch.manual_seed(seed)
    return MLP(in_features=in_features, out_features=out_features, num_cells=[64, 64], activation_class=torch.nn.Tanh)


def plain_pendulum(batches: int, seed: int) -> float:
    """SyncVectorEnv x8 + the MLP on a tensor + OU noise on tensors: frames/s."""
    import gymnasium
    import torch

    mlp = _mlp(3, 1, seed)
    envs = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("Pendulum-v1") for _ in range(NUM_ENVS)])
    obs, _ = envs.reset(seed=seed)
    generator = torch.Generator().manual_seed(seed)
    theta, mu, sigma, dt, eps = 0.15, 0.0, 0.2, 1e-2, 1.0
    low, high = torch.full((NUM_ENVS, 1), -2.0), torch.full((NUM_ENVS, 1), 2.0)
    noise = torch.zeros(NUM_ENVS, 1)
    steps = FRAMES_PER_BATCH // NUM_ENVS

    def run(n: int) -> None:
        nonlocal obs, noise
        for _ in range(n):
            action = mlp(torch.from_numpy(obs))
            noise = noise + theta * (mu - noise) * dt + sigma * math.sqrt(dt) * torch.randn(
                (NUM_ENVS, 1), generator=generator
            )
            action = torch.maximum(torch.minimum(action + eps * noise, high), low)
            obs, _, terminated, truncated, _ = envs.step(action.numpy())
            done = terminated | truncated
            if done.any():
                obs, _ = envs.reset(options={"reset_mask": done})

    with torch.no_grad():
        run(steps)
        start = time.perf_counter()
        run(steps * batches)
        elapsed = time.perf_counter() - start
    envs.close()
    return steps * batches * NUM_ENVS / elapsed


def cadence_pendulum(batches: int, seed: int) -> float:
    from tensordict.nn import TensorDictModule, TensorDictSequential

    from cadence.collectors import SyncDataCollector
    from cadence.envs import GymEnv, SerialEnv
    from cadence.modules import OrnsteinUhlenbeckProcessModule

    env = SerialEnv(NUM_ENVS, lambda: GymEnv("Pendulum-v1"))
    env.set_seed(seed)
    policy = TensorDictSequential(
        TensorDictModule(_mlp(3, 1, seed), in_keys=["observation"], out_keys=["action"]),
        OrnsteinUhlenbeckProcessModule(env.action_spec.clone(), annealing_num_steps=1_000_000),
    )
    collector = SyncDataCollector(env, policy, frames_per_batch=FRAMES_PER_BATCH)
    return _time_collector(collector, batches)


def _cheetah_policy(seed: int) -> object:
    import torch
    from tensordict.nn import TensorDictModule, TensorDictSequential

    class ToFloat(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.float()

    # HalfCheetah observes float64; the policy runs in float32
    return TensorDictSequential(
        TensorDictModule(ToFloat(), in_keys=["observation"], out_keys=["observation_f32"]),
        TensorDictModule(_mlp(17, 6, seed), in_keys=["observation_f32"], out_keys=["action"]),
    )


def _make_cheetah() -> object:
    from cadence.envs import GymEnv

    return GymEnv("HalfCheetah-v5")


def cadence_cheetah_single(batches: int, seed: int) -> float:
    from cadence.collectors import SyncDataCollector

    collector = SyncDataCollector(_make_cheetah, _cheetah_policy(seed), frames_per_batch=FRAMES_PER_BATCH)
    collector.set_seed(seed)
    return _time_collector(collector, batches)


def cadence_cheetah_multi(batches: int, seed: int) -> float:
    from cadence.collectors import MultiSyncDataCollector

    collector = MultiSyncDataCollector([_make_cheetah] * 2, _cheetah_policy(seed), frames_per_batch=FRAMES_PER_BATCH)
    collector.set_seed(seed)
    return _time_collector(collector, batches)


def _time_collector(collector: object, batches: int) -> float:
    iterator = iter(collector)  # type: ignore[call-overload]
    next(iterator)
    start = time.perf_counter()
    frames = sum(next(iterator).numel() for _ in range(batches))
    elapsed = time.perf_counter() - start
    collector.shutdown()  # type: ignore[attr-defined]
    return frames / elapsed


def reference_pendulum(python: str, batches: int, seed: int) -> float:
    result = subprocess.run(
        [python, "-c", REFERENCE_SCRIPT, str(batches), str(seed)], capture_output=True, text=True, timeout=1800
    )
    if result.returncode != 0:
        raise RuntimeError(f"the torchrl measurement failed: {result.stderr.strip()[-2000:]}")
    return float(json.loads(result.stdout.strip().splitlines()[-1])["frames_per_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=20, help="timed batches per measurement (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-reference", action="store_true", help="do not run torchrl")
    parser.add_argument("--reference-python", default=None, help="python of a venv holding torchrl 0.14.1")
    args = parser.parse_args(argv)
    if args.batches < 1 or args.rounds < 1:
        parser.error("need --batches >= 1 and --rounds >= 1")
    warnings.simplefilter("ignore")

    import gymnasium
    import torch

    import cadence

    torch.set_num_threads(1)
    if args.skip_reference:
        reference, why = None, "--skip-reference"
    else:
        reference, why = find_reference_python(args.reference_python)
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, gymnasium {gymnasium.__version__}, "
          f"cadence {cadence.__version__}")
    print(f"reference: {why}" if reference else f"reference: skipped ({why})")
    print(f"frames_per_batch={FRAMES_PER_BATCH}, {args.batches} timed batches per measurement, "
          f"{args.rounds} rounds, medians shown")
    print()
    cases: dict[str, dict[str, Callable[[], float]]] = {
        "pendulum x8": {
            "plain": lambda: plain_pendulum(args.batches, args.seed),
            "cadence": lambda: cadence_pendulum(args.batches, args.seed),
        },
        "halfcheetah": {
            "single": lambda: cadence_cheetah_single(max(1, args.batches // 2), args.seed),
            "multi x2": lambda: cadence_cheetah_multi(max(1, args.batches // 2), args.seed),
        },
    }
    if reference:
        cases["pendulum x8"]["torchrl"] = lambda: reference_pendulum(reference, args.batches, args.seed)
    results: dict[str, dict[str, list[float]]] = {case: {who: [] for who in runs} for case, runs in cases.items()}
    for round_index in range(args.rounds):
        for case, runs in cases.items():
            for who, run in runs.items():
                speed = run()
                results[case][who].append(speed)
                print(f"round {round_index + 1}/{args.rounds}  {case:<12} {who:<9} {speed:12,.0f} frames/s", flush=True)
    print()
    median = {case: {who: statistics.median(v) for who, v in by.items()} for case, by in results.items()}
    pendulum = median["pendulum x8"]
    torchrl = pendulum.get("torchrl")
    print("| case | plain frames/s | cadence frames/s | torchrl frames/s | cadence/plain | cadence/torchrl |")
    print("|---|---|---|---|---|---|")
    torchrl_cell = f"{torchrl:,.0f}" if torchrl else "skipped"
    versus_torchrl = f"{pendulum['cadence'] / torchrl:.2f}x" if torchrl else "-"
    print(
        f"| pendulum x8 | {pendulum['plain']:,.0f} | {pendulum['cadence']:,.0f} | {torchrl_cell} | "
        f"{pendulum['cadence'] / pendulum['plain']:.2f}x | {versus_torchrl} |"
    )
    cheetah = median["halfcheetah"]
    print()
    print("| case | single frames/s | multi x2 frames/s | multi/single |")
    print("|---|---|---|---|")
    print(
        f"| halfcheetah | {cheetah['single']:,.0f} | {cheetah['multi x2']:,.0f} | "
        f"{cheetah['multi x2'] / cheetah['single']:.2f}x |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
