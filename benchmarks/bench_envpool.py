"""EnvPool CartPole-v1: ``MultiThreadedEnv(...).rollout`` against a bare EnvPool loop.

Run from the repository root (envpool installed: ``pip install "cadence[envpool]"``)::

    python benchmarks/bench_envpool.py                    # 8 envs, 2500 steps, 5 rounds
    python benchmarks/bench_envpool.py --envs 16 --steps 5000 --rounds 3

Three cases, measured in alternating rounds (one of each per round), median reported:

- ``bare (autoreset)``: ``pool.step(actions[t])`` with random actions drawn beforehand,
  EnvPool resetting done envs by itself on the following step (the floor);
- ``bare (reset done)``: the same loop, resetting the done envs right after their done
  step with ``pool.reset(env_id=done_ids)``, which is what Cadence does (so that no step
  is spent on EnvPool's own reset, see ``cadence/envs/libs/envpool.py``);
- ``cadence``: ``MultiThreadedEnv(envs, "CartPole-v1").rollout(steps,
  break_when_any_done=False)`` with random actions from the action spec, returning the
  rollout as a ``[envs, steps]`` tensordict.

Steps are env steps (``envs * steps`` per call). Construction is not timed; each case
runs a 100-step warm-up first. The reference library is not measured here (its
environment has no envpool).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np


def bare_autoreset(pool, actions: np.ndarray) -> None:
    pool.reset()
    for action in actions:
        pool.step(action)


def bare_reset_done(pool, actions: np.ndarray) -> None:
    pool.reset()
    for action in actions:
        _, _, terminated, truncated, _ = pool.step(action)
        done = terminated | truncated
        if done.any():
            pool.reset(np.flatnonzero(done))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    warnings.filterwarnings("ignore", message=".*precision lowered.*")
    import envpool
    import torch

    from cadence.envs import MultiThreadedEnv

    pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=args.envs, seed=0)
    env = MultiThreadedEnv(args.envs, "CartPole-v1", {"seed": 0})
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, size=(args.steps, args.envs), dtype=np.int64)
    warm = actions[:100]

    cases = {
        "bare (autoreset)": (lambda: bare_autoreset(pool, warm), lambda: bare_autoreset(pool, actions)),
        "bare (reset done)": (lambda: bare_reset_done(pool, warm), lambda: bare_reset_done(pool, actions)),
        "cadence": (
            lambda: env.rollout(100, break_when_any_done=False),
            lambda: env.rollout(args.steps, break_when_any_done=False),
        ),
    }
    timings: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, (warm_up, run) in cases.items():
            warm_up()
            start = time.perf_counter()
            run()
            timings[name].append(time.perf_counter() - start)

    total = args.envs * args.steps
    rates = {name: total / statistics.median(times) for name, times in timings.items()}
    print(
        f"CartPole-v1, {args.envs} envs x {args.steps} steps, median of {args.rounds} rounds "
        f"(envpool {envpool.__version__}, numpy {np.__version__}, torch {torch.__version__}, "
        f"{__import__('os').cpu_count()} CPUs)"
    )
    print(f"{'case':<20}{'steps/s':>12}{'cadence/case':>14}")
    for name, rate in rates.items():
        print(f"{name:<20}{rate:>12,.0f}{rates['cadence'] / rate:>14.3f}")


if __name__ == "__main__":
    main()
