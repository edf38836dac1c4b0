"""Rollout speed of CartPole-v1: bare gymnasium vs Cadence vs the reference library.

Five cases, each measured in every round:

* ``single``: one env. A bare gymnasium loop (``action_space.sample()``, reset when done)
  against ``GymEnv("CartPole-v1").rollout(steps, break_when_any_done=False)`` in Cadence
  and in torchrl 0.14.1.
* ``batched``: ``num_envs`` envs in one batch. A bare ``gymnasium.vector.SyncVectorEnv``
  loop against ``GymEnv("CartPole-v1", num_envs=n).rollout(steps // n, ...)`` in both
  libraries (the same number of env steps in total).
* ``transforms``: Pendulum-v1 through ``Compose(StepCounter(200), RewardSum(), InitTracker(),
  DoubleToFloat(), ObservationNorm(...))``, random actions, against a bare Pendulum loop.
* ``pendulum policy``: Pendulum-v1 driven by a 3-64-64-1 MLP actor under ``torch.no_grad()``:
  the bare loop steps with its output on each observation; Cadence and torchrl get it as
  ``TensorDictModule(mlp, ["observation"], ["action"])``.
* ``policy``: one env driven by a small MLP (4-64-2 action values) under ``torch.no_grad()``.
  The bare loop calls the same ``torch.nn`` module on each observation and steps with its
  argmax; Cadence and torchrl get it as ``TensorDictSequential(TensorDictModule(mlp,
  ["observation"], ["action_value"]), QValueModule(spec=env.action_spec))`` and run
  ``rollout(steps, policy, break_when_any_done=False)``.

Cadence and the bare loop of a case run in this process, built and warmed up once per
round, then timed in ``--blocks`` blocks that alternate between the two (so that the
machine's drifts, or another guest's load on a shared host, hit both alike; one long run
each let the ratio move by 1.5x between rounds). torchrl pins another tensordict, so it runs
in its own virtual environment, the one ``../shared/tools/reference-venv.sh`` prints (from the
repository root), one subprocess per round; only the rollout itself is timed there. Each
figure is the median over the rounds.

Usage::

    python benchmarks/bench_rollout.py [--steps 20000] [--rounds 3] [--num-envs 8] [--policy-steps 5000]
                                       [--blocks 10] [--skip-reference]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
REFERENCE_VENV_SCRIPT = REPO_ROOT / ".." / "shared" / "tools" / "reference-venv.sh"
#: A contender built and ready: ``run(steps)`` advances it by ``steps`` env steps.
Runner = Callable[[int], None]
ENV_ID = "CartPole-v1"
WARMUP_STEPS = 200

# Runs in the reference library's python; prints {"steps_per_s": ...} as its last line.
REFERENCE_SCRIPT = """
import json, sys, time
import torch
from tensordict.nn import TensorDictModule, TensorDictSequential
from torchrl.envs import GymEnv

steps, num_envs, seed, with_policy = (int(x) for x in sys.argv[1:5])
variant = sys.argv[5] if len(sys.argv) > 5 else ""
if variant == "pendulum":
    env = GymEnv("Pendulum-v1")
elif variant == "chain":
    from torchrl.envs import (Compose, DoubleToFloat, InitTracker, ObservationNorm, RewardSum, StepCounter,
                              TransformedEnv)
    env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(StepCounter(200), RewardSum(), InitTracker(), DoubleToFloat(),
        ObservationNorm(loc=torch.zeros(3), scale=torch.ones(3), in_keys=["observation"])))
elif num_envs > 1:
    env = GymEnv("{env_id}", num_envs=num_envs)
else:
    env = GymEnv("{env_id}")
env.set_seed(seed)
policy = None
if with_policy and variant == "pendulum":
    net = torch.nn.Sequential(torch.nn.Linear(3, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                              torch.nn.Linear(64, 1))
    policy = TensorDictModule(net, in_keys=["observation"], out_keys=["action"])
elif with_policy:
    net = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2))
    from torchrl.modules import QValueModule
    policy = TensorDictSequential(
        TensorDictModule(net, in_keys=["observation"], out_keys=["action_value"]),
        QValueModule(spec=env.action_spec),
    )
n = steps // max(num_envs, 1)
with torch.no_grad():
    env.rollout(max(1, {warmup} // max(num_envs, 1)), policy, break_when_any_done=False)
    start = time.perf_counter()
    env.rollout(n, policy, break_when_any_done=False)
    elapsed = time.perf_counter() - start
env.close()
print(json.dumps({{"steps_per_s": n * max(num_envs, 1) / elapsed}}))
""".format(env_id=ENV_ID, warmup=WARMUP_STEPS)


def cadence_transform_chain(seed: int) -> Runner:
    """A rollout through the issue's five-transform chain on Pendulum-v1."""
    import torch

    from cadence.envs import GymEnv
    from cadence.envs.transforms import (
        Compose,
        DoubleToFloat,
        InitTracker,
        ObservationNorm,
        RewardSum,
        StepCounter,
        TransformedEnv,
    )

    chain = Compose(
        StepCounter(200), RewardSum(), InitTracker(), DoubleToFloat(),
        ObservationNorm(loc=torch.zeros(3), scale=torch.ones(3), in_keys=["observation"]),
    )
    env = TransformedEnv(GymEnv("Pendulum-v1"), chain)
    env.set_seed(seed)

    def run(steps: int) -> None:
        env.rollout(steps, break_when_any_done=False)

    return run


def make_actor_net() -> Any:
    """The policy network of the ``pendulum policy`` case: a 3-64-64-1 MLP actor."""
    import torch

    return torch.nn.Sequential(
        torch.nn.Linear(3, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)
    )


def cadence_pendulum_policy(seed: int) -> Runner:
    """Cadence's ``GymEnv("Pendulum-v1").rollout`` with the MLP actor as a ``TensorDictModule``."""
    import torch
    from tensordict.nn import TensorDictModule

    from cadence.envs.libs.gym import GymEnv

    env = GymEnv("Pendulum-v1")
    env.set_seed(seed)
    policy = TensorDictModule(make_actor_net(), in_keys=["observation"], out_keys=["action"])

    def run(steps: int) -> None:
        with torch.no_grad():
            env.rollout(steps, policy, break_when_any_done=False)

    return run


def make_net() -> Any:
    """The policy network of the ``policy`` case: 4-64-2 action values for CartPole."""
    import torch

    return torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2))


def bare_random(seed: int, env_id: str = ENV_ID) -> Runner:
    """A plain gymnasium loop with random actions (``action_space.sample()``), reset when done."""
    import gymnasium

    env = gymnasium.make(env_id)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    sample, step, reset = env.action_space.sample, env.step, env.reset

    def run(steps: int) -> None:
        for _ in range(steps):
            _, _, terminated, truncated, _ = step(sample())
            if terminated or truncated:
                reset()

    return run


def bare_batched(seed: int, num_envs: int) -> Runner:
    """A SyncVectorEnv loop (env steps counted over all envs)."""
    import gymnasium

    envs = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make(ENV_ID) for _ in range(num_envs)])
    envs.reset(seed=seed)
    envs.action_space.seed(seed)
    sample, step = envs.action_space.sample, envs.step  # the vector env resets done envs itself

    def run(steps: int) -> None:
        for _ in range(steps // num_envs):
            step(sample())

    return run


def bare_policy(seed: int, env_id: str = ENV_ID, actor: bool = False) -> Runner:
    """A plain gymnasium loop calling the policy network on each observation: the action its
    argmax (CartPole's MLP), or its output (``actor``: the Pendulum MLP actor)."""
    import gymnasium
    import torch

    net = make_actor_net() if actor else make_net()
    env = gymnasium.make(env_id)
    obs = env.reset(seed=seed)[0]
    step, reset = env.step, env.reset

    def run(steps: int) -> None:
        nonlocal obs
        with torch.no_grad():
            for _ in range(steps):
                out = net(torch.from_numpy(obs))
                obs, _, terminated, truncated, _ = step(out.numpy() if actor else int(out.argmax()))
                if terminated or truncated:
                    obs = reset()[0]

    return run


def cadence_rollout(seed: int, num_envs: int, with_policy: bool = False) -> Runner:
    """Cadence's ``GymEnv(...).rollout`` (random actions, or the MLP and ``QValueModule``)."""
    import torch
    from tensordict.nn import TensorDictModule, TensorDictSequential

    from cadence.envs.libs.gym import GymEnv
    from cadence.modules import QValueModule

    env = GymEnv(ENV_ID, num_envs=num_envs) if num_envs > 1 else GymEnv(ENV_ID)
    env.set_seed(seed)
    policy = None
    if with_policy:
        policy = TensorDictSequential(
            TensorDictModule(make_net(), in_keys=["observation"], out_keys=["action_value"]),
            QValueModule(spec=env.action_spec),
        )

    def run(steps: int) -> None:
        with torch.no_grad():
            env.rollout(max(1, steps // num_envs), policy, break_when_any_done=False)

    return run


def measure(runners: dict[str, Runner], steps: int, blocks: int) -> dict[str, float]:
    """Steps per second of each runner over ``steps`` steps, taken in ``blocks`` blocks that
    alternate between the runners (the machine's drifts, or another guest's load on its
    cores, then hit them alike); each runner is warmed up first."""
    elapsed = dict.fromkeys(runners, 0.0)
    for run in runners.values():
        run(WARMUP_STEPS)
    block = max(1, steps // blocks)
    for index in range(blocks):
        order = list(runners.items())
        if index % 2:
            order.reverse()
        for who, run in order:
            start = time.perf_counter()
            run(block)
            elapsed[who] += time.perf_counter() - start
    for run in runners.values():  # a runner that holds processes or an env says how to let go
        close = getattr(run, "close", None)
        if close is not None:
            close()
    return {who: block * blocks / seconds for who, seconds in elapsed.items()}


def find_reference_python(explicit: str | None) -> tuple[str | None, str]:
    """Returns the reference library's python, or None with the reason it is unavailable."""
    if explicit:
        return explicit, "given with --reference-python"
    if not REFERENCE_VENV_SCRIPT.exists():
        return None, f"{REFERENCE_VENV_SCRIPT} not found"
    try:
        result = subprocess.run(
            ["bash", str(REFERENCE_VENV_SCRIPT)], capture_output=True, text=True, cwd=REPO_ROOT, timeout=1800
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"{REFERENCE_VENV_SCRIPT.name} failed: {err}"
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        return None, f"{REFERENCE_VENV_SCRIPT.name} failed (exit {result.returncode}): {result.stderr.strip()[-500:]}"
    python = lines[-1].strip()
    check = subprocess.run(
        [python, "-c", "import torchrl; print(torchrl.__version__)"], capture_output=True, text=True
    )
    if check.returncode != 0:
        return None, f"torchrl does not import in {python}: {check.stderr.strip()[-500:]}"
    return python, f"torchrl {check.stdout.strip()} at {python}"


def reference_rollout(
    python: str, steps: int, seed: int, num_envs: int, with_policy: bool = False, variant: str = ""
) -> float:
    """Steps per second of torchrl's ``GymEnv(...).rollout``, measured in a subprocess
    (``variant``: ``"chain"`` for the transforms case, ``"pendulum"`` for the actor's)."""
    extra = [variant] if variant else []
    result = subprocess.run(
        [python, "-c", REFERENCE_SCRIPT, str(steps), str(num_envs), str(seed), str(int(with_policy)), *extra],
        capture_output=True,
        text=True,
        cwd="/",  # keep this repository (and its ``cadence``) off the reference's path
    )
    if result.returncode != 0:
        raise RuntimeError(f"the reference run failed (exit {result.returncode}):\n{result.stderr[-2000:]}")
    return float(json.loads(result.stdout.strip().splitlines()[-1])["steps_per_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per measurement (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default: %(default)s)")
    parser.add_argument("--num-envs", type=int, default=8, help="envs of the batched case (default: %(default)s)")
    parser.add_argument(
        "--policy-steps", type=int, default=5_000, help="env steps of the policy case (default: %(default)s)"
    )
    parser.add_argument(
        "--blocks", type=int, default=10, help="alternating blocks per measurement (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-reference", action="store_true", help="do not run torchrl")
    parser.add_argument("--reference-python", default=None, help="python of a venv holding torchrl 0.14.1")
    args = parser.parse_args(argv)
    if args.steps < args.num_envs * args.blocks or args.rounds < 1 or args.num_envs < 2 or args.blocks < 1:
        parser.error("need --steps >= --num-envs * --blocks, --rounds >= 1, --num-envs >= 2 and --blocks >= 1")

    import gymnasium
    import torch

    import cadence

    if args.skip_reference:
        reference, why = None, "--skip-reference"
    else:
        reference, why = find_reference_python(args.reference_python)
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, gymnasium {gymnasium.__version__}, "
          f"cadence {cadence.__version__}")
    print(f"reference: {why}" if reference else f"reference: skipped ({why})")
    print(f"{ENV_ID}, {args.steps} env steps per measurement, {args.rounds} rounds, medians shown")
    print()

    # each case: its in-process contenders (built once per round, measured in alternating
    # blocks) and its steps; torchrl runs in its own process, once per round
    cases: dict[str, tuple[dict[str, Callable[[], Runner]], int]] = {
        "single": ({"bare": lambda: bare_random(args.seed), "cadence": lambda: cadence_rollout(args.seed, 1)},
                   args.steps),
        f"batched x{args.num_envs}": (
            {"bare": lambda: bare_batched(args.seed, args.num_envs),
             "cadence": lambda: cadence_rollout(args.seed, args.num_envs)},
            args.steps,
        ),
        "policy": ({"bare": lambda: bare_policy(args.seed),
                    "cadence": lambda: cadence_rollout(args.seed, 1, with_policy=True)}, args.policy_steps),
        "pendulum policy": ({"bare": lambda: bare_policy(args.seed, "Pendulum-v1", actor=True),
                             "cadence": lambda: cadence_pendulum_policy(args.seed)}, args.policy_steps),
        "transforms": ({"bare": lambda: bare_random(args.seed, "Pendulum-v1"),
                        "cadence": lambda: cadence_transform_chain(args.seed)}, args.policy_steps),
    }
    references: dict[str, Callable[[], float]] = {}
    if reference:
        references = {
            "single": lambda: reference_rollout(reference, args.steps, args.seed, 1),
            f"batched x{args.num_envs}": lambda: reference_rollout(reference, args.steps, args.seed, args.num_envs),
            "policy": lambda: reference_rollout(reference, args.policy_steps, args.seed, 1, True),
            "pendulum policy": lambda: reference_rollout(reference, args.policy_steps, args.seed, 1, True, "pendulum"),
            "transforms": lambda: reference_rollout(reference, args.policy_steps, args.seed, 1, variant="chain"),
        }

    results: dict[str, dict[str, list[float]]] = {
        case: {who: [] for who in (*makers, *(["torchrl"] if case in references else []))}
        for case, (makers, _) in cases.items()
    }
    for round_index in range(args.rounds):
        for case, (makers, steps) in cases.items():
            speeds = measure({who: make() for who, make in makers.items()}, steps, args.blocks)
            if case in references:
                speeds["torchrl"] = references[case]()
            for who, speed in speeds.items():
                results[case][who].append(speed)
                print(f"round {round_index + 1}/{args.rounds}  {case:<15} {who:<8} {speed:12,.0f} steps/s", flush=True)
    print()

    # cadence/bare: the median of the rounds' ratios (each round times the two in alternation);
    # torchrl/bare: of the medians (torchrl runs apart)
    columns = ("bare steps/s", "cadence steps/s", "torchrl steps/s", "cadence/bare", "torchrl/bare", "cadence/bare by round")
    widths = (13, 15, 15, 12, 12, 21)
    header = f"| {'case':<15} | " + " | ".join(f"{c:>{w}}" for c, w in zip(columns, widths)) + " |"
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    for case, by_who in results.items():
        median = {who: statistics.median(speeds) for who, speeds in by_who.items()}
        bare = median["bare"]
        torchrl = median.get("torchrl")
        by_round = [c / b for c, b in zip(by_who["cadence"], by_who["bare"])]
        print(
            f"| {case:<15} | {bare:>13,.0f} | {median['cadence']:>15,.0f} | "
            f"{(f'{torchrl:,.0f}' if torchrl else 'skipped'):>15} | {statistics.median(by_round):>12.3f} | "
            f"{(f'{torchrl / bare:.3f}' if torchrl else '-'):>12} | {', '.join(f'{r:.2f}' for r in by_round):>21} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
