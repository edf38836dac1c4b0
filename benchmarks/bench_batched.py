"""Batched and parallel envs: bare gymnasium vs Cadence vs the reference library.

Cases, each measured in alternating rounds (medians shown), random actions, rollouts
that never stop early (``break_when_any_done=False``):

* ``cartpole x8``: 8 CartPole-v1 envs in one process. Bare: a
  ``gymnasium.vector.SyncVectorEnv`` x8 loop. Cadence: ``SerialEnv(8, GymEnv)`` and
  ``GymEnv(num_envs=8)``. torchrl: ``SerialEnv(8, GymEnv)``.
* ``halfcheetah 2x4``: 8 HalfCheetah-v5 envs (gymnasium[mujoco]). Bare: a single-process
  ``SyncVectorEnv`` x8 loop. Cadence and torchrl: ``ParallelEnv(2, GymEnv(num_envs=4))``,
  two processes, four envs each. EnvPool with 2 threads too, if it is installed.
* ``cartpole parallel x2``: ``ParallelEnv(2, GymEnv("CartPole-v1"))`` in Cadence and in
  torchrl; also the time to build it and take the first reset, and to close it.

torchrl runs in its own virtual environment (``../shared/tools/reference-venv.sh``), one
subprocess per measurement, timing only what is measured here too.

Usage::

    python benchmarks/bench_batched.py [--steps 16000] [--rounds 3] [--skip-reference]
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

from bench_rollout import find_reference_python

WARMUP = 40  # batch steps before timing

# Runs in the reference library's python; prints a JSON dict as its last line.
REFERENCE_SCRIPT = """
import json, sys, time
case, steps = sys.argv[1], int(sys.argv[2])
start = time.perf_counter()
from torchrl.envs import GymEnv, ParallelEnv, SerialEnv
if case == "cartpole_serial8":
    env, width = SerialEnv(8, lambda: GymEnv("CartPole-v1")), 8
elif case == "halfcheetah_parallel2x4":
    env, width = ParallelEnv(2, lambda: GymEnv("HalfCheetah-v5", num_envs=4)), 8
else:
    env, width = ParallelEnv(2, lambda: GymEnv("CartPole-v1")), 2
built = time.perf_counter()
env.reset()
startup = time.perf_counter() - built
env.rollout({warmup}, break_when_any_done=False)
start = time.perf_counter()
env.rollout(steps // width, break_when_any_done=False)
speed = (steps // width) * width / (time.perf_counter() - start)
start = time.perf_counter()
env.close()
print(json.dumps({{"steps_per_s": speed, "startup_s": startup, "close_s": time.perf_counter() - start}}))
""".format(warmup=WARMUP)


def bare_sync_vector(env_id: str, steps: int, num_envs: int = 8) -> dict[str, float]:
    """A plain ``SyncVectorEnv`` loop with random actions (it resets done envs itself)."""
    import gymnasium

    envs = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make(env_id) for _ in range(num_envs)])
    envs.reset(seed=0)
    envs.action_space.seed(0)
    sample, step = envs.action_space.sample, envs.step
    for _ in range(WARMUP):
        step(sample())
    n = steps // num_envs
    start = time.perf_counter()
    for _ in range(n):
        step(sample())
    speed = n * num_envs / (time.perf_counter() - start)
    envs.close()
    return {"steps_per_s": speed}


def cadence_run(make: Callable[[], Any], width: int, steps: int) -> dict[str, float]:
    """Builds a Cadence env, times its first reset, a rollout and its closing."""
    start = time.perf_counter()
    env = make()
    env.reset()
    startup = time.perf_counter() - start
    env.rollout(WARMUP, break_when_any_done=False)
    n = steps // width
    start = time.perf_counter()
    env.rollout(n, break_when_any_done=False)
    speed = n * width / (time.perf_counter() - start)
    start = time.perf_counter()
    env.close()
    return {"steps_per_s": speed, "startup_s": startup, "close_s": time.perf_counter() - start}


def envpool_run(env_id: str, steps: int, num_envs: int = 8, num_threads: int = 2) -> dict[str, float]:
    """EnvPool stepping ``num_envs`` envs on ``num_threads`` threads, random actions."""
    import envpool
    import numpy as np

    pool = envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, num_threads=num_threads)
    pool.reset()
    space = pool.action_space
    rng = np.random.default_rng(0)
    n = steps // num_envs
    actions = rng.uniform(space.low, space.high, size=(n + WARMUP, num_envs, *space.shape)).astype(space.dtype)
    for t in range(WARMUP):
        pool.step(actions[t])
    start = time.perf_counter()
    for t in range(WARMUP, WARMUP + n):
        pool.step(actions[t])
    speed = n * num_envs / (time.perf_counter() - start)
    pool.close()
    return {"steps_per_s": speed}


def reference_run(python: str, case: str, steps: int) -> dict[str, float]:
    """A torchrl measurement, in a subprocess of the reference python."""
    result = subprocess.run(
        [python, "-c", REFERENCE_SCRIPT, case, str(steps)], capture_output=True, text=True, cwd="/"
    )
    if result.returncode != 0:
        raise RuntimeError(f"the reference run failed (exit {result.returncode}):\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=16_000, help="env steps per measurement (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default: %(default)s)")
    parser.add_argument("--skip-reference", action="store_true", help="do not run torchrl")
    parser.add_argument("--reference-python", default=None, help="python of a venv holding torchrl 0.14.1")
    args = parser.parse_args(argv)

    import importlib.util

    from cadence.envs import GymEnv, ParallelEnv, SerialEnv

    reference, why = (None, "--skip-reference") if args.skip_reference else find_reference_python(args.reference_python)
    print(f"reference: {why}" if reference else f"reference: skipped ({why})")
    steps = args.steps
    cases: dict[str, dict[str, Callable[[], dict[str, float]]]] = {
        "cartpole x8": {
            "bare": lambda: bare_sync_vector("CartPole-v1", steps),
            "cadence SerialEnv(8)": lambda: cadence_run(lambda: SerialEnv(8, lambda: GymEnv("CartPole-v1")), 8, steps),
            "cadence GymEnv(num_envs=8)": lambda: cadence_run(lambda: GymEnv("CartPole-v1", num_envs=8), 8, steps),
        },
        "halfcheetah 2x4": {
            "bare": lambda: bare_sync_vector("HalfCheetah-v5", steps),
            "cadence ParallelEnv(2, x4)": lambda: cadence_run(
                lambda: ParallelEnv(2, lambda: GymEnv("HalfCheetah-v5", num_envs=4)), 8, steps
            ),
        },
        "cartpole parallel x2": {
            "cadence ParallelEnv(2)": lambda: cadence_run(lambda: ParallelEnv(2, lambda: GymEnv("CartPole-v1")), 2, steps),
        },
    }
    if importlib.util.find_spec("envpool") is not None:
        cases["halfcheetah 2x4"]["envpool (2 threads)"] = lambda: envpool_run("HalfCheetah-v5", steps)
    if reference:
        cases["cartpole x8"]["torchrl SerialEnv(8)"] = lambda: reference_run(reference, "cartpole_serial8", steps)
        cases["halfcheetah 2x4"]["torchrl ParallelEnv(2, x4)"] = lambda: reference_run(
            reference, "halfcheetah_parallel2x4", steps // 4  # torchrl runs at a few percent: fewer steps
        )
        cases["cartpole parallel x2"]["torchrl ParallelEnv(2)"] = lambda: reference_run(
            reference, "cartpole_parallel2", max(steps // 8, 200)
        )

    results: dict[str, dict[str, list[dict[str, float]]]] = {c: {w: [] for w in runs} for c, runs in cases.items()}
    for round_index in range(args.rounds):
        for case, runs in cases.items():
            for who, run in runs.items():
                try:
                    figures = run()
                except Exception as err:  # noqa: BLE001 - a contender that cannot run is reported, not fatal
                    print(f"round {round_index + 1}  {case:<21} {who:<28} failed: {type(err).__name__}: {err}")
                    continue
                results[case][who].append(figures)
                print(f"round {round_index + 1}  {case:<21} {who:<28} {figures['steps_per_s']:12,.0f} steps/s", flush=True)

    print()
    print("| case | contender | steps/s | vs bare | vs torchrl | start + first reset | close |")
    print("|---|---|---|---|---|---|---|")
    for case, by_who in results.items():
        medians = {
            who: {key: statistics.median(f[key] for f in runs) for key in runs[0]} for who, runs in by_who.items() if runs
        }
        bare = medians.get("bare", {}).get("steps_per_s")
        torchrl = next((m["steps_per_s"] for who, m in medians.items() if who.startswith("torchrl")), None)
        for who, m in medians.items():
            speed = m["steps_per_s"]
            vs_bare = f"{speed / bare:.2f}x" if bare else "-"
            vs_ref = f"{speed / torchrl:.1f}x" if torchrl and not who.startswith("torchrl") else "-"
            startup = f"{m['startup_s']:.2f} s" if "startup_s" in m else "-"
            closing = f"{m['close_s']:.3f} s" if "close_s" in m else "-"
            print(f"| {case} | {who} | {speed:,.0f} | {vs_bare} | {vs_ref} | {startup} | {closing} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
