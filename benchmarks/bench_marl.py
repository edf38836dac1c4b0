"""Multi-agent rollout speed: PettingZoo and VMAS, bare vs Cadence vs the reference library.

Cases (each measured in every round, medians shown):

* ``pettingzoo random``: MPE ``simple_spread_v3`` (3 agents, 25-step episodes, the
  parallel API). The bare loop samples each agent's action space and calls
  ``env.step(actions)``, resetting when an episode ends; Cadence and torchrl run
  ``PettingZooEnv``/``PettingZooWrapper(...).rollout(steps, break_when_any_done=False)``.
* ``pettingzoo policy``: the same env driven by one small MLP shared by the agents
  (18-64-5, greedy action). The bare loop calls it on the stacked observations; the
  libraries get it as a ``TensorDictModule`` reading ``("agent", "observation")``.
* ``vmas random``: VMAS ``balance`` with ``--vmas-envs`` (1,024) envs and 5 agents.
  The bare loop draws ``env.get_random_action`` per agent and calls ``env.step``;
  Cadence and torchrl run ``VmasEnv(...).rollout``.
* ``vmas policy``: the same with an MLP (16-64-2, tanh) shared by the agents.

Cadence and the bare loops run in this process, the reference (torchrl 0.14.1) in its own
virtual environment (``../shared/tools/reference-venv.sh``; it needs ``pettingzoo``,
``mpe2`` and ``vmas`` there: ``<its python> -m pip install pettingzoo mpe2 vmas``), one
subprocess per round. Only the stepping is timed. One torch thread everywhere. Cadence and the
bare loop of a case are built once per round and timed in ``--blocks`` blocks that alternate
between the two (``bench_rollout.measure``), so that the machine's drifts hit both alike; a
block is one ``rollout`` call (its reset and the stacking of its data included), so blocks
of fewer than a few hundred steps weigh those more than a user's rollouts do.

Usage::

    python benchmarks/bench_marl.py [--steps 5000] [--vmas-steps 60] [--vmas-envs 1024] [--rounds 3]
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rollout import Runner, find_reference_python, measure  # noqa: E402 - shared with the rollout bench

WARMUP = 50

# Runs in the reference library's python; prints {"steps_per_s": ...} as its last line.
REFERENCE_SCRIPT = """
import json, sys, time
import torch
torch.set_num_threads(1)
from tensordict.nn import TensorDictModule
case, steps, seed, with_policy, num_envs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5])
if case == "pettingzoo":
    from mpe2 import simple_spread_v3
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper
    env = PettingZooWrapper(simple_spread_v3.parallel_env(N=3, max_cycles=25), seed=seed)
    group, sizes, frames = "agent", (18, 5), 1
else:
    from torchrl.envs.libs.vmas import VmasEnv
    env = VmasEnv("balance", num_envs=num_envs, n_agents=5, seed=seed)
    group, sizes, frames = "agents", (16, 2), num_envs
policy = None
if with_policy:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(sizes[0], 64), torch.nn.Tanh(), torch.nn.Linear(64, sizes[1]))
    head = (lambda x: x.argmax(-1)) if case == "pettingzoo" else torch.tanh
    policy = TensorDictModule(lambda obs: head(net(obs)), in_keys=[(group, "observation")], out_keys=[(group, "action")])
with torch.no_grad():
    env.rollout(max(2, WARMUP // frames), policy, break_when_any_done=False)
    start = time.perf_counter()
    env.rollout(steps, policy, break_when_any_done=False)
    elapsed = time.perf_counter() - start
print(json.dumps({"steps_per_s": steps * frames / elapsed}))
""".replace("WARMUP", str(WARMUP))


def spread_net(seed: int):  # noqa: ANN201 - a torch module, torch imported lazily
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(18, 64), torch.nn.Tanh(), torch.nn.Linear(64, 5))


def balance_net(seed: int):  # noqa: ANN201
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2))


def bare_pettingzoo(seed: int, with_policy: bool) -> Runner:
    """A plain PettingZoo parallel loop."""
    import numpy as np
    import torch
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(N=3, max_cycles=25)
    observations = env.reset(seed=seed)[0]
    for i, agent in enumerate(env.possible_agents):
        env.action_space(agent).seed(seed + i)
    net = spread_net(seed) if with_policy else None

    def run(steps: int) -> None:
        nonlocal observations
        with torch.no_grad():
            for _ in range(steps):
                if net is None:
                    actions = {agent: env.action_space(agent).sample() for agent in env.agents}
                else:
                    obs = torch.from_numpy(np.stack([observations[agent] for agent in env.agents]))
                    chosen = net(obs).argmax(-1).tolist()
                    actions = dict(zip(env.agents, chosen))
                observations, _, terminated, truncated, _ = env.step(actions)
                if any(terminated.values()) or any(truncated.values()):
                    observations = env.reset()[0]

    return run


def cadence_pettingzoo(seed: int, with_policy: bool) -> Runner:
    """``PettingZooEnv("simple_spread_v3").rollout``."""
    import torch
    from tensordict.nn import TensorDictModule

    from cadence.envs.libs.pettingzoo import PettingZooEnv

    env = PettingZooEnv("simple_spread_v3", parallel=True, N=3, max_cycles=25, seed=seed)
    policy = None
    if with_policy:
        net = spread_net(seed)
        policy = TensorDictModule(
            lambda obs: net(obs).argmax(-1), in_keys=[("agent", "observation")], out_keys=[("agent", "action")]
        )

    def run(steps: int) -> None:
        with torch.no_grad():
            env.rollout(steps, policy, break_when_any_done=False)

    return run


def bare_vmas(seed: int, num_envs: int, with_policy: bool) -> Runner:
    """Stepping VMAS directly (``run(steps)`` takes ``steps // num_envs`` batched steps)."""
    import torch
    import vmas

    env = vmas.make_env("balance", num_envs=num_envs, n_agents=5, seed=seed, device="cpu")
    observations = env.reset()
    net = balance_net(seed) if with_policy else None

    def run(steps: int) -> None:
        nonlocal observations
        with torch.no_grad():
            for _ in range(max(1, steps // num_envs)):
                if net is None:
                    actions = [env.get_random_action(agent) for agent in env.agents]
                else:
                    actions = list(torch.tanh(net(torch.stack(observations, 1))).unbind(1))
                observations, _, dones, _ = env.step(actions)
                if dones.any():
                    for index in dones.nonzero().reshape(-1).tolist():
                        env.reset_at(index, return_observations=False)
                    observations = env.get_from_scenario(
                        get_observations=True, get_rewards=False, get_infos=False, get_dones=False
                    )[0]

    return run


def cadence_vmas(seed: int, num_envs: int, with_policy: bool) -> Runner:
    """``VmasEnv("balance").rollout`` (``run(steps)`` takes ``steps // num_envs`` batched steps)."""
    import torch
    from tensordict.nn import TensorDictModule

    from cadence.envs.libs.vmas import VmasEnv

    env = VmasEnv("balance", num_envs=num_envs, n_agents=5, seed=seed)
    policy = None
    if with_policy:
        net = balance_net(seed)
        policy = TensorDictModule(
            lambda obs: torch.tanh(net(obs)), in_keys=[("agents", "observation")], out_keys=[("agents", "action")]
        )

    def run(steps: int) -> None:
        with torch.no_grad():
            env.rollout(max(1, steps // num_envs), policy, break_when_any_done=False)

    return run


def reference(python: str, case: str, steps: int, seed: int, with_policy: bool, num_envs: int = 1) -> float:
    """Env steps per second of torchrl's wrapper, measured in a subprocess."""
    result = subprocess.run(
        [python, "-c", REFERENCE_SCRIPT, case, str(steps), str(seed), str(int(with_policy)), str(num_envs)],
        capture_output=True,
        text=True,
        cwd="/",  # keep this repository (and its ``cadence``) off the reference's path
    )
    if result.returncode != 0:
        raise RuntimeError(f"the reference run failed (exit {result.returncode}):\n{result.stderr[-2000:]}")
    return float(json.loads(result.stdout.strip().splitlines()[-1])["steps_per_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5000, help="PettingZoo steps per measurement (default: %(default)s)")
    parser.add_argument("--vmas-steps", type=int, default=60, help="VMAS batched steps per measurement (default: %(default)s)")
    parser.add_argument("--vmas-envs", type=int, default=1024, help="VMAS envs simulated at once (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default: %(default)s)")
    parser.add_argument(
        "--blocks", type=int, default=10, help="alternating blocks per measurement (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-reference", action="store_true", help="do not run torchrl")
    parser.add_argument("--reference-python", default=None, help="python of a venv holding torchrl 0.14.1")
    args = parser.parse_args(argv)

    import torch

    import cadence

    torch.set_num_threads(1)
    python, why = (None, "--skip-reference") if args.skip_reference else find_reference_python(args.reference_python)
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, cadence {cadence.__version__}, 1 torch thread")
    print(f"reference: {why}" if python else f"reference: skipped ({why})")
    print(f"simple_spread_v3 (N=3): {args.steps} steps; VMAS balance (5 agents): {args.vmas_steps} steps of "
          f"{args.vmas_envs} envs; {args.rounds} rounds, medians shown")
    print()
    # each case: its in-process contenders (built once per round, timed in alternating
    # blocks), its env steps (VMAS counts every simulated env) and torchrl's run
    cases: dict[str, tuple[dict[str, Callable[[], Runner]], int, Callable[[], float] | None]] = {}
    vmas_steps = args.vmas_steps * args.vmas_envs
    for with_policy, label in ((False, "random"), (True, "policy")):
        cases[f"pettingzoo {label}"] = (
            {"bare": lambda p=with_policy: bare_pettingzoo(args.seed, p),
             "cadence": lambda p=with_policy: cadence_pettingzoo(args.seed, p)},
            args.steps,
            (lambda p=with_policy: reference(python, "pettingzoo", args.steps // 4, args.seed, p)) if python else None,
        )
        cases[f"vmas {label}"] = (
            {"bare": lambda p=with_policy: bare_vmas(args.seed, args.vmas_envs, p),
             "cadence": lambda p=with_policy: cadence_vmas(args.seed, args.vmas_envs, p)},
            vmas_steps,
            (lambda p=with_policy: reference(python, "vmas", args.vmas_steps, args.seed, p, args.vmas_envs))
            if python else None,
        )
    order = ["pettingzoo random", "pettingzoo policy", "vmas random", "vmas policy"]
    results: dict[str, dict[str, list[float]]] = {
        case: {who: [] for who in (*cases[case][0], *(["torchrl"] if cases[case][2] else []))} for case in order
    }
    for _ in range(args.rounds):
        for case in order:
            makers, steps, torchrl_run = cases[case]
            blocks = args.blocks if case.startswith("pettingzoo") else min(args.blocks, max(1, args.vmas_steps // 6))
            speeds = measure({who: make() for who, make in makers.items()}, steps, blocks)
            if torchrl_run is not None:
                speeds["torchrl"] = torchrl_run()
            for who, speed in speeds.items():
                results[case][who].append(speed)
    print(f"{'case':<20}{'bare':>12}{'cadence':>12}{'torchrl':>12}{'cadence/bare':>14}{'cadence/torchrl':>17}")
    for case in order:
        medians = {who: statistics.median(values) for who, values in results[case].items()}
        torchrl = medians.get("torchrl")
        cadence_speed = medians["cadence"]
        torchrl_text = f"{torchrl:,.0f}" if torchrl else "-"
        versus_torchrl = f"{cadence_speed / torchrl:.2f}x" if torchrl else "-"
        # each round times cadence and the bare loop in alternation: the rounds' ratios are paired
        by_round = [c / b for c, b in zip(results[case]["cadence"], results[case]["bare"])]
        print(
            f"{case:<20}{medians['bare']:>12,.0f}{cadence_speed:>12,.0f}{torchrl_text:>12}"
            f"{statistics.median(by_round):>13.2f}x{versus_torchrl:>17}"
        )
        print(f"{'':<20}cadence/bare by round: {', '.join(f'{r:.2f}' for r in by_round)}")
    print("\n(env steps per second; VMAS counts every simulated env; cadence/bare: the median of the rounds')")
    return 0


if __name__ == "__main__":
    sys.exit(main())
