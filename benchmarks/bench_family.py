"""Collector throughput over a family of user configurations: fast path vs generic path vs torchrl.

``benchmarks/bench_pipeline.py`` row 1 times one configuration; this script times seven, to show
the collector's fast path covers a family of them. Per variant, ``SyncDataCollector(env, policy,
frames_per_batch=1000, total_frames=-1)`` runs three ways, each once per round (alternating
rounds, medians shown; one warm-up batch, then ``--batches`` timed batches):

* ``cadence fast``: the default construction; the table names the runner it took
  (``type(collector._runner).__name__``: ValuesRunner or EnvRunner);
* ``cadence generic``: ``SyncDataCollector(..., fast_path=False)`` with
  ``env.use_values_path = False`` on the outermost ``TransformedEnv`` (every step on
  TensorDicts, the reference behaviour);
* ``torchrl``: torchrl 0.14.1 running the same variant in its own virtual environment (one
  subprocess per measurement, ``cwd="/"``, that prints one JSON line last); a variant that
  cannot run there is reported and shown as "skipped".

``torch.set_num_threads(1)`` everywhere; ``torch.manual_seed(seed)`` right before each MLP
(``MLP(in, out, num_cells=[64, 64])``, tanh), so both libraries hold the same weights (the
script compares the torchrl subprocess's weight checksum with its own).

Variants ("the tutorial's chain" is bench_pipeline's: ``Compose(DoubleToFloat(),
ObservationNorm(loc=zeros(3), scale=ones(3), in_keys=["observation"]), StepCounter(200),
RewardSum(), CatTensors(in_keys=["observation"], out_key="observation_vector", del_keys=False))``):

1. ``chain-mlp``: bench_pipeline row 1 exactly: ``TransformedEnv(GymEnv("Pendulum-v1"), chain)``,
   ``TensorDictModule(MLP(3 -> 1), ["observation_vector"], ["action"])``.
2. ``chain-probabilistic``: the same env; ``ProbabilisticActor(TensorDictModule(Sequential(
   MLP(3 -> 2), NormalParamExtractor()), ["observation_vector"], ["loc", "scale"]),
   in_keys=["loc", "scale"], out_keys=["action"], spec=env.action_spec,
   distribution_class=TanhNormal, distribution_kwargs={"low": -2.0, "high": 2.0})``.
3. ``chain-ou``: the same env; ``TensorDictSequential(TensorDictModule(MLP(3 -> 1),
   ["observation_vector"], ["action"]), OrnsteinUhlenbeckProcessModule(spec=env.action_spec))``
   (no InitTracker: the chain is unchanged, so the noise runs across episodes).
4. ``stateful-chain``: ``TransformedEnv(GymEnv("Pendulum-v1"), Compose(DoubleToFloat(),
   VecNorm(in_keys=["observation"], decay=0.99), CatFrames(N=3, dim=-1, in_keys=["observation"],
   out_keys=["stacked"]), RewardScaling(loc=0.0, scale=0.1), StepCounter(200), RewardSum()))``,
   ``TensorDictModule(MLP(9 -> 1), ["stacked"], ["action"])``.
5. ``serial-chain``: ``TransformedEnv(SerialEnv(4, lambda: GymEnv("Pendulum-v1")), chain)``,
   the MLP(3 -> 1) policy of variant 1.
6. ``cartpole-discrete``: ``TransformedEnv(GymEnv("CartPole-v1"), Compose(StepCounter(500),
   RewardSum()))``, ``TensorDictSequential(TensorDictModule(MLP(4 -> 2), ["observation"],
   ["action_value"]), QValueModule(spec=env.action_spec))``.

7. ``torch-pendulum``: the seed's ``PendulumEnv()``, written in torch (stateless, its
   ``"params"`` nested in the data; torchrl's ``torchrl.envs.custom.PendulumEnv``),
   ``TensorDictModule(ThetaPolicy(MLP(2 -> 1)), ["th", "thdot"], ["action"])`` where
   ``ThetaPolicy`` stacks the angle and its speed into the MLP's input.

The plain floor is bench_pipeline row 1's plain loop (``plain_pendulum(seed,
store=True)``: gymnasium + the same MLP, storing each step into preallocated tensors), run once
per round; "fast/plain" is given for the single-env Pendulum variants (1-4).

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_family.py
    .venv/bin/python benchmarks/bench_family.py --rounds 1 --batches 2
    .venv/bin/python benchmarks/bench_family.py --skip-reference --variants chain-mlp,serial-chain
    .venv/bin/python benchmarks/bench_family.py [--variants a,b] [--batches 4] [--rounds 3] [--seed 0]
                                                [--reference-python PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pipeline import (  # noqa: E402  (row 1's pieces, reused as they are)
    FRAMES_PER_BATCH,
    MAX_STEPS,
    _cell,
    _ratio,
    cadence_chain_env,
    cadence_pendulum_policy,
    collector_runner,
    make_mlp,
    plain_pendulum,
    weights_checksum,
)
from bench_rollout import find_reference_python, measure  # noqa: E402  (the reference venv, found once)

#: variant -> (in_features, out_features) of its MLP, for the weights check
VARIANTS: dict[str, tuple[int, int]] = {
    "chain-mlp": (3, 1),
    "chain-probabilistic": (3, 2),
    "chain-ou": (3, 1),
    "stateful-chain": (9, 1),
    "serial-chain": (3, 1),
    "cartpole-discrete": (4, 2),
    "torch-pendulum": (2, 1),
}
PLAIN_COMPARABLE = {"chain-mlp", "chain-probabilistic", "chain-ou", "stateful-chain"}

# Runs in the reference library's python: argv = variant, batches, seed; prints
# {"frames_per_s": ..., "weights": ...} as its last line.
REFERENCE_SCRIPT = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import torch
torch.set_num_threads(1)
from tensordict.nn import NormalParamExtractor, TensorDictModule, TensorDictSequential
try:
    from torchrl.collectors import SyncDataCollector
except ImportError:  # torchrl 0.14 names it Collector
    from torchrl.collectors import Collector as SyncDataCollector
from torchrl.envs import (CatFrames, CatTensors, Compose, DoubleToFloat, GymEnv, ObservationNorm, RewardScaling,
                          RewardSum, SerialEnv, StepCounter, TransformedEnv, VecNorm)
from torchrl.modules import MLP, OrnsteinUhlenbeckProcessModule, ProbabilisticActor, QValueModule, TanhNormal

variant, batches, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


def mlp(n_in, n_out):
    torch.manual_seed(seed)
    return MLP(in_features=n_in, out_features=n_out, num_cells=[64, 64])


class ThetaPolicy(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, th, thdot):
        return self.net(torch.stack([th, thdot], -1).float())


def chain():
    return Compose(
        DoubleToFloat(),
        ObservationNorm(loc=torch.zeros(3), scale=torch.ones(3), in_keys=["observation"]),
        StepCounter(200),
        RewardSum(),
        CatTensors(in_keys=["observation"], out_key="observation_vector", del_keys=False),
    )


if variant == "stateful-chain":
    env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(
        DoubleToFloat(),
        VecNorm(in_keys=["observation"], decay=0.99),
        CatFrames(N=3, dim=-1, in_keys=["observation"], out_keys=["stacked"]),
        RewardScaling(loc=0.0, scale=0.1),
        StepCounter(200),
        RewardSum(),
    ))
elif variant == "serial-chain":
    env = TransformedEnv(SerialEnv(4, lambda: GymEnv("Pendulum-v1")), chain())
elif variant == "cartpole-discrete":
    env = TransformedEnv(GymEnv("CartPole-v1"), Compose(StepCounter(500), RewardSum()))
elif variant == "torch-pendulum":
    from torchrl.envs.custom import PendulumEnv
    env = PendulumEnv()
else:
    env = TransformedEnv(GymEnv("Pendulum-v1"), chain())
env.set_seed(seed)

if variant in ("chain-mlp", "serial-chain"):
    net = mlp(3, 1)
    policy = TensorDictModule(net, ["observation_vector"], ["action"])
elif variant == "chain-probabilistic":
    net = mlp(3, 2)
    policy = ProbabilisticActor(
        TensorDictModule(torch.nn.Sequential(net, NormalParamExtractor()), ["observation_vector"], ["loc", "scale"]),
        in_keys=["loc", "scale"], out_keys=["action"], spec=env.action_spec,
        distribution_class=TanhNormal, distribution_kwargs={"low": -2.0, "high": 2.0})
elif variant == "chain-ou":
    net = mlp(3, 1)
    policy = TensorDictSequential(TensorDictModule(net, ["observation_vector"], ["action"]),
                                  OrnsteinUhlenbeckProcessModule(spec=env.action_spec))
elif variant == "stateful-chain":
    net = mlp(9, 1)
    policy = TensorDictModule(net, ["stacked"], ["action"])
elif variant == "cartpole-discrete":
    net = mlp(4, 2)
    policy = TensorDictSequential(TensorDictModule(net, ["observation"], ["action_value"]),
                                  QValueModule(spec=env.action_spec))
elif variant == "torch-pendulum":
    net = mlp(2, 1)
    policy = TensorDictModule(ThetaPolicy(net), ["th", "thdot"], ["action"])
else:
    raise SystemExit(f"unknown variant {variant!r}")

collector = SyncDataCollector(env, policy, frames_per_batch=1000, total_frames=-1)
it = iter(collector)
next(it)
start = time.perf_counter()
frames = sum(next(it).numel() for _ in range(batches))
speed = frames / (time.perf_counter() - start)
collector.shutdown()
if not getattr(env, "is_closed", False):
    env.close()
print(json.dumps({"frames_per_s": speed, "weights": float(sum(p.double().sum() for p in net.parameters()))}))
"""


# ---------------------------------------------------------------------------------------------
# Cadence's variants


def _tutorial_chain() -> Any:
    """bench_pipeline's chain as a fresh ``Compose`` (for envs other than the single Pendulum)."""
    import torch

    from cadence.envs import CatTensors, Compose, DoubleToFloat, ObservationNorm, RewardSum, StepCounter

    return Compose(
        DoubleToFloat(),
        ObservationNorm(loc=torch.zeros(3), scale=torch.ones(3), in_keys=["observation"]),
        StepCounter(MAX_STEPS),
        RewardSum(),
        CatTensors(in_keys=["observation"], out_key="observation_vector", del_keys=False),
    )


def _make_pendulum() -> Any:
    from cadence.envs import GymEnv

    return GymEnv("Pendulum-v1")


def _theta_policy(net: Any) -> Any:
    """``ThetaPolicy(net)``: the MLP on the stacked angle and angular speed."""
    import torch

    class ThetaPolicy(torch.nn.Module):
        def __init__(self, net: Any) -> None:
            super().__init__()
            self.net = net

        def forward(self, th: Any, thdot: Any) -> Any:
            return self.net(torch.stack([th, thdot], -1).float())

    return ThetaPolicy(net)


def cadence_variant(variant: str, seed: int) -> tuple[Any, Any]:
    """Builds (env, policy) of ``variant`` in Cadence, seeded (see the module's docstring)."""
    import torch
    from tensordict.nn import TensorDictModule, TensorDictSequential

    from cadence.envs import (
        CatFrames,
        Compose,
        DoubleToFloat,
        GymEnv,
        PendulumEnv,
        RewardScaling,
        RewardSum,
        SerialEnv,
        StepCounter,
        TransformedEnv,
        VecNorm,
    )
    from cadence.modules import (
        NormalParamExtractor,
        OrnsteinUhlenbeckProcessModule,
        ProbabilisticActor,
        QValueModule,
        TanhNormal,
    )

    n_in, n_out = VARIANTS[variant]
    if variant in ("chain-mlp", "chain-probabilistic", "chain-ou"):
        env = cadence_chain_env(seed)  # seeded there
    else:
        if variant == "stateful-chain":
            transform = Compose(
                DoubleToFloat(),
                VecNorm(in_keys=["observation"], decay=0.99),
                CatFrames(N=3, dim=-1, in_keys=["observation"], out_keys=["stacked"]),
                RewardScaling(loc=0.0, scale=0.1),
                StepCounter(MAX_STEPS),
                RewardSum(),
            )
            env = TransformedEnv(GymEnv("Pendulum-v1"), transform)
        elif variant == "serial-chain":
            env = TransformedEnv(SerialEnv(4, _make_pendulum), _tutorial_chain())
        elif variant == "torch-pendulum":
            env = PendulumEnv()
        else:
            env = TransformedEnv(GymEnv("CartPole-v1"), Compose(StepCounter(500), RewardSum()))
        env.set_seed(seed)

    if variant in ("chain-mlp", "serial-chain"):
        policy: Any = cadence_pendulum_policy(seed)
    elif variant == "chain-probabilistic":
        net = torch.nn.Sequential(make_mlp(n_in, n_out, seed), NormalParamExtractor())
        policy = ProbabilisticActor(
            TensorDictModule(net, ["observation_vector"], ["loc", "scale"]),
            in_keys=["loc", "scale"],
            out_keys=["action"],
            spec=env.action_spec,
            distribution_class=TanhNormal,
            distribution_kwargs={"low": -2.0, "high": 2.0},
        )
    elif variant == "chain-ou":
        policy = TensorDictSequential(
            TensorDictModule(make_mlp(n_in, n_out, seed), ["observation_vector"], ["action"]),
            OrnsteinUhlenbeckProcessModule(spec=env.action_spec),
        )
    elif variant == "stateful-chain":
        policy = TensorDictModule(make_mlp(n_in, n_out, seed), ["stacked"], ["action"])
    elif variant == "torch-pendulum":
        policy = TensorDictModule(_theta_policy(make_mlp(n_in, n_out, seed)), ["th", "thdot"], ["action"])
    else:
        policy = TensorDictSequential(
            TensorDictModule(make_mlp(n_in, n_out, seed), ["observation"], ["action_value"]),
            QValueModule(spec=env.action_spec),
        )
    return env, policy


def cadence_collect(variant: str, batches: int, seed: int, fast: bool, runners: dict[str, str]) -> float:
    """Times Cadence's collector on ``variant``; the fast run records its runner in ``runners``."""
    from cadence.collectors import SyncDataCollector

    env, policy = cadence_variant(variant, seed)
    try:
        if not fast:
            env.use_values_path = False  # the outermost TransformedEnv: steps stay on TensorDicts
        collector = SyncDataCollector(
            env, policy, frames_per_batch=FRAMES_PER_BATCH, total_frames=-1, fast_path=fast
        )
        if fast:
            runners[variant] = type(collector._runner).__name__
        # one warm-up batch, then ``batches`` timed; the collector shut down after
        return measure({"cadence": collector_runner(collector)}, batches * FRAMES_PER_BATCH, batches)["cadence"]
    finally:
        if not getattr(env, "is_closed", False):
            env.close()


# ---------------------------------------------------------------------------------------------
# the reference library


def reference_collect(python: str, variant: str, batches: int, seed: int, notes: list[str]) -> float:
    """torchrl's frames/s on ``variant`` in a subprocess; a weight mismatch is noted in ``notes``."""
    result = subprocess.run(
        [python, "-c", REFERENCE_SCRIPT, variant, str(batches), str(seed)],
        capture_output=True,
        text=True,
        cwd="/",  # keep this repository (and its ``cadence``) off the reference's path
        timeout=1800,
    )
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"exit {result.returncode}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    expected = weights_checksum(make_mlp(*VARIANTS[variant], seed))
    if abs(report["weights"] - expected) > 1e-6:
        note = f"torchrl's {variant} MLP weights differ from Cadence's ({report['weights']} vs {expected})"
        if note not in notes:
            notes.append(note)
    return float(report["frames_per_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated variants (default: all)")
    parser.add_argument("--batches", type=int, default=4, help="timed 1000-frame batches (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-reference", action="store_true", help="do not run torchrl")
    parser.add_argument("--reference-python", default=None, help="python of a venv holding torchrl 0.14.1")
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if not variants or unknown:
        parser.error(f"--variants takes names from {', '.join(VARIANTS)}; got {unknown or args.variants!r}")
    if args.batches < 1 or args.rounds < 1:
        parser.error("need --batches >= 1 and --rounds >= 1")
    warnings.simplefilter("ignore")

    import gymnasium
    import torch

    import cadence

    torch.set_num_threads(1)
    if args.skip_reference:
        reference_python, why = None, "--skip-reference"
    else:
        reference_python, why = find_reference_python(args.reference_python)
    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, gymnasium {gymnasium.__version__}, "
        f"cadence {cadence.__version__}"
    )
    print(f"reference: {why}" if reference_python else f"reference: skipped ({why})")
    print(
        f"variants {','.join(variants)}; {args.batches} timed batches of {FRAMES_PER_BATCH} after one warm-up; "
        f"{args.rounds} rounds, medians shown\n"
    )

    runners: dict[str, str] = {}
    notes: list[str] = []
    contenders: dict[tuple[str, str], Callable[[], float]] = {
        ("plain floor", "plain"): lambda: measure(
            {"plain": plain_pendulum(args.seed, store=True)}, args.batches * FRAMES_PER_BATCH, 1
        )["plain"]
    }
    for variant in variants:
        for who, fast in (("cadence fast", True), ("cadence generic", False)):
            contenders[variant, who] = lambda v=variant, f=fast: cadence_collect(v, args.batches, args.seed, f, runners)
        if reference_python:
            contenders[variant, "torchrl"] = lambda v=variant: reference_collect(
                reference_python, v, args.batches, args.seed, notes
            )

    results: dict[tuple[str, str], list[float]] = {key: [] for key in contenders}
    failures: dict[tuple[str, str], str] = {}
    for round_index in range(args.rounds):
        for (variant, who), run in contenders.items():
            if (variant, who) in failures:
                continue
            label = f"round {round_index + 1}/{args.rounds}  {variant:<20} {who:<16}"
            try:
                speed = run()
            except Exception as err:  # report and carry on with the other contenders
                failures[variant, who] = f"{type(err).__name__}: {str(err).strip()[-1500:]}"
                print(f"{label} FAILED: {failures[variant, who]}", flush=True)
                continue
            results[variant, who].append(speed)
            print(f"{label} {speed:12,.0f} frames/s", flush=True)
    print()
    median = {key: statistics.median(speeds) for key, speeds in results.items() if speeds}

    plain = median.get(("plain floor", "plain"))
    print(f"plain floor (row 1's plain loop): {_cell(plain)} frames/s")
    for note in notes:
        print(f"note: {note}")
    for (variant, who), why_failed in failures.items():
        kind = "torchrl skipped" if who == "torchrl" else "FAILED"
        print(f"{kind}: {variant} {who}: {why_failed.splitlines()[-1] if why_failed.strip() else why_failed}")
    print()

    print(
        "| variant | runner (fast path) | cadence fast frames/s | cadence generic frames/s | fast/generic "
        "| torchrl frames/s | fast/torchrl | fast/plain |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for variant in variants:
        fast, generic = median.get((variant, "cadence fast")), median.get((variant, "cadence generic"))
        ref = median.get((variant, "torchrl"))
        versus_plain = _ratio(fast, plain) if variant in PLAIN_COMPARABLE else "-"
        print(
            f"| {variant} | {runners.get(variant, '-')} | {_cell(fast)} | {_cell(generic)} | {_ratio(fast, generic)} "
            f"| {_cell(ref)} | {_ratio(fast, ref)} | {versus_plain} |"
        )
    cadence_failed = [key for key in failures if key[1] != "torchrl"]
    return 1 if cadence_failed else 0


if __name__ == "__main__":
    sys.exit(main())
