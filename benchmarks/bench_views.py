"""Trajectory views: Cadence's RLlib ``RolloutWorker.sample()`` vs a plain loop vs ray's RolloutWorker.

Issue #17's speed targets, on CartPole-v1 with ``--num-envs`` envs per worker (default 1 and
8, a table row each, the same count for all three contenders; 1000 env steps per ``sample()``
in all), an MLP policy and the LSTM-style views (``obs``, ``prev_actions``,
``prev_rewards``), env steps per second, best of ``--rounds`` alternating rounds (plain,
cadence, ray, then again):

* ``cadence``: ``cadence.interop.rllib.RolloutWorker(env_creator=..., policy_spec=ViewsPolicy,
  policy_config={"rollout_fragment_length": 1000 // num_envs, "num_envs_per_worker": num_envs,
  "batch_mode": "truncate_episodes"})``;
  ``sample()`` called until ``--steps`` env steps. ``ViewsPolicy`` acts with a torch MLP
  (7 -> 64 -> 64 -> 2, tanh; input: obs, one-hot prev action, prev reward), sampling the
  action from the softmax with a seeded ``torch.Generator``; its loss reads ``obs``,
  ``new_obs``, ``actions``, ``rewards``, ``prev_actions`` and ``prev_rewards``, so pruning
  keeps exactly these (plus the done columns and the sampler's ``eps_id``, ``unroll_id``,
  ``agent_index``, ``t``) and drops ``infos``.
* ``plain``: the same torch module called once per step for all envs on the same input (the
  same ``features`` function, one row per env), gymnasium's CartPole-v1 envs stepped
  directly, the columns ``obs``, ``new_obs``, ``actions``, ``rewards``, ``terminateds``,
  ``truncateds``, ``prev_actions``, ``prev_rewards``, ``eps_id``, ``t`` written into
  preallocated numpy arrays (each env its own rows) and returned as a dict per 1000 steps.
  Target: cadence >= 0.5x plain.
* ``ray``: ray 2.60.0's ``ray.rllib.evaluation.rollout_worker.RolloutWorker`` on the old API
  stack (``AlgorithmConfig().api_stack(enable_rl_module_and_learner=False,
  enable_env_runner_and_connector_v2=False)``, ``rollout_fragment_length=1000 // num_envs``,
  ``num_envs_per_env_runner=num_envs``),
  ``default_policy_class`` a ``ray.rllib.policy.Policy`` subclass acting with the same MLP
  (same weights: the same seed and torch version) on the same views (``obs``,
  ``prev_actions``, ``prev_rewards`` are in ray's default views; ``infos`` removed, as pruning
  removes it in Cadence). Runs in the python of ``benchmarks/ray-venv.sh`` (a subprocess per
  round that prints one JSON line; ``ray.init`` is not needed for a local worker). Target:
  cadence >= 10x ray.

Each measurement builds its worker (or env), runs one warm-up fragment, then times the
``--steps`` steps. ``torch.set_num_threads(1)`` in every process.

Memory (pruning): one fragment of 1000 steps (one env) with a policy whose compute_actions and loss read
``obs`` only, with ``ViewsPolicy``, and with a policy whose loss reads every column (nothing
pruned): the columns the collector stores (its per-episode lists; ``obs``/``new_obs`` are one
list), their peak size during the fragment (``sys.getsizeof`` of the lists and their items,
measured at every step by a callback), and ``SampleBatch.size_bytes()`` of the batch.

``--profile`` runs ``sample()`` under cProfile (the last ``--num-envs`` value) and prints the
top self-time functions.

Usage::

    .venv/bin/python benchmarks/bench_views.py                       # 20000 steps, 3 rounds
    .venv/bin/python benchmarks/bench_views.py --steps 2000 --rounds 1 --skip-ray
    .venv/bin/python benchmarks/bench_views.py --ray-python ~/.cache/cadence-ray-venv/bin/python
    .venv/bin/python benchmarks/bench_views.py --profile --skip-ray --rounds 1
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import platform
import pstats
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
MARKER = "BENCH_VIEWS_JSON "
FRAGMENT = 1000
SEED = 0
PLAIN_TARGET, RAY_TARGET = 0.5, 10.0
COLUMNS = ("obs", "new_obs", "actions", "rewards", "terminateds", "truncateds", "prev_actions", "prev_rewards",
           "eps_id", "t")


# ---------------------------------------------------------------------------------------------
# The policy's network and input, shared by all three contenders (no Cadence or ray here)


def make_net(in_features: int = 7, seed: int = SEED) -> torch.nn.Module:
    """The MLP ``in_features -> 64 -> 64 -> 2`` (tanh), its weights from a seeded generator."""
    generator = torch.Generator().manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Linear(in_features, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
        torch.nn.Linear(64, 2),
    )
    with torch.no_grad():
        for param in net.parameters():
            param.copy_(torch.empty_like(param).uniform_(-0.3, 0.3, generator=generator))
    return net


def features(obs: Any, prev_actions: Any, prev_rewards: Any) -> torch.Tensor:
    """``[B, 7]`` float32: the observation, the one-hot previous action, the previous reward.

    Numpy inputs (acting: Cadence's and ray's input dicts, the plain loop's one-row arrays)
    are assembled in one numpy array; tensors (Cadence's loss) with torch ops.
    """
    if isinstance(obs, torch.Tensor):
        prev_actions = prev_actions.long().reshape(-1)
        return torch.cat([obs.float().reshape(len(prev_actions), -1),
                          torch.nn.functional.one_hot(prev_actions, 2).float(),
                          prev_rewards.float().reshape(-1, 1)], dim=-1)
    obs = np.asarray(obs)
    rows = len(obs)
    x = np.zeros((rows, 7), np.float32)
    x[:, :4] = obs.reshape(rows, -1)
    x[np.arange(rows), 4 + np.asarray(prev_actions, np.int64).reshape(-1)] = 1.0
    x[:, 6] = np.asarray(prev_rewards, np.float32).reshape(-1)
    return torch.from_numpy(x)


def act(net: torch.nn.Module, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Actions ``[B]`` sampled from the softmax of the logits."""
    with torch.no_grad():
        return torch.multinomial(torch.softmax(net(x), -1), 1, generator=generator).squeeze(-1)


# ---------------------------------------------------------------------------------------------
# The plain loop


def plain_sampler(num_envs: int = 1, seed: int = SEED) -> Any:
    """A callable returning one fragment of ``FRAGMENT`` steps (a dict of arrays) per call.

    With ``num_envs`` envs, one policy call per step acts for all of them (one input row
    each) and each env writes its own ``FRAGMENT // num_envs`` rows, one after the other.
    """
    import gymnasium as gym

    envs = [gym.make("CartPole-v1") for _ in range(num_envs)]
    net, generator = make_net(), torch.Generator().manual_seed(seed + 1)
    obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
    prev_action, prev_reward = np.zeros(num_envs, np.int64), np.zeros(num_envs, np.float32)
    eps_id, t = np.arange(num_envs, dtype=np.int64), np.zeros(num_envs, np.int64)
    per_env = FRAGMENT // num_envs

    def fragment() -> dict[str, np.ndarray]:
        nonlocal obs, prev_action, prev_reward, eps_id, t
        n = per_env * num_envs
        out = {
            "obs": np.empty((n, 4), np.float32), "new_obs": np.empty((n, 4), np.float32),
            "actions": np.empty(n, np.int64), "rewards": np.empty(n, np.float32),
            "terminateds": np.empty(n, bool), "truncateds": np.empty(n, bool),
            "prev_actions": np.empty(n, np.int64), "prev_rewards": np.empty(n, np.float32),
            "eps_id": np.empty(n, np.int64), "t": np.empty(n, np.int64),
        }
        for step in range(per_env):
            actions = act(net, features(obs, prev_action, prev_reward), generator).numpy()
            for e, env in enumerate(envs):
                row, action = e * per_env + step, int(actions[e])
                new_obs, reward, terminated, truncated, _ = env.step(action)
                out["obs"][row], out["new_obs"][row], out["actions"][row], out["rewards"][row] = (
                    obs[e], new_obs, action, reward)
                out["terminateds"][row], out["truncateds"][row] = terminated, truncated
                out["prev_actions"][row], out["prev_rewards"][row], out["eps_id"][row], out["t"][row] = (
                    prev_action[e], prev_reward[e], eps_id[e], t[e])
                if terminated or truncated:
                    obs[e], _ = env.reset()
                    prev_action[e], prev_reward[e], eps_id[e], t[e] = 0, 0.0, eps_id[e] + num_envs, 0
                else:
                    obs[e], prev_action[e], prev_reward[e], t[e] = new_obs, action, reward, t[e] + 1
        return out

    return fragment


# ---------------------------------------------------------------------------------------------
# Cadence's RolloutWorker


def cadence_policies() -> dict[str, type]:
    """The Cadence policy classes: ``views`` (timed), ``obs_only`` and ``everything`` (memory)."""
    from cadence.interop.rllib import Policy

    class ViewsPolicy(Policy):
        """MLP on obs + prev_actions + prev_rewards; the loss reads them and the transition."""

        def __init__(self, observation_space: Any, action_space: Any, config: Any) -> None:
            self.net = make_net(7)
            self.generator = torch.Generator().manual_seed(SEED + 1)
            super().__init__(observation_space, action_space, config)
            self._initialize_loss_from_dummy_batch()

        def compute_actions_from_input_dict(self, input_dict: Any, explore: Any = None, **kwargs: Any) -> Any:
            x = features(input_dict["obs"], input_dict["prev_actions"], input_dict["prev_rewards"])
            return act(self.net, x, self.generator).numpy(), [], {}

        def loss(self, model: Any, dist_class: Any, train_batch: Any) -> torch.Tensor:
            x = features(train_batch["obs"], train_batch["prev_actions"], train_batch["prev_rewards"])
            logp = torch.log_softmax(self.net(x), -1).gather(-1, train_batch["actions"].long().reshape(-1, 1))
            # A REINFORCE-like term; new_obs read as a model-based term would (weight 0 here).
            return -(logp.squeeze(-1) * train_batch["rewards"].float()).mean() + 0.0 * train_batch["new_obs"].sum()

    class ObsOnlyPolicy(Policy):
        """MLP on obs only; the loss reads obs only (pruning drops everything it can)."""

        def __init__(self, observation_space: Any, action_space: Any, config: Any) -> None:
            self.net = make_net(4)
            self.generator = torch.Generator().manual_seed(SEED + 1)
            super().__init__(observation_space, action_space, config)
            self._initialize_loss_from_dummy_batch()

        def compute_actions_from_input_dict(self, input_dict: Any, explore: Any = None, **kwargs: Any) -> Any:
            obs = torch.as_tensor(np.asarray(input_dict["obs"]), dtype=torch.float32)
            return act(self.net, obs, self.generator).numpy(), [], {}

        def loss(self, model: Any, dist_class: Any, train_batch: Any) -> torch.Tensor:
            return self.net(train_batch["obs"].float()).logsumexp(-1).mean()

    class EverythingPolicy(ViewsPolicy):
        """ViewsPolicy whose loss also reads every other column (nothing pruned)."""

        def loss(self, model: Any, dist_class: Any, train_batch: Any) -> torch.Tensor:
            for key in list(train_batch.keys()):
                train_batch[key]
            return super().loss(model, dist_class, train_batch)

    return {"views": ViewsPolicy, "obs_only": ObsOnlyPolicy, "everything": EverythingPolicy}


def cadence_worker(policy_cls: type, callbacks: type | None = None, num_envs: int = 1) -> Any:
    import gymnasium as gym
    from cadence.interop.rllib import RolloutWorker

    # rollout_fragment_length is per env (RLlib's meaning): FRAGMENT steps per sample() in all
    config: dict[str, Any] = {"rollout_fragment_length": FRAGMENT // num_envs, "batch_mode": "truncate_episodes",
                              "num_envs_per_worker": num_envs, "seed": SEED}
    if callbacks is not None:
        config["callbacks"] = callbacks
    return RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=policy_cls,
                         policy_config=config)


def time_steps(sample: Any, steps: int, count: Any) -> float:
    """Env steps/s of ``sample()`` called until ``steps`` steps (one warm-up call not timed)."""
    sample()
    done, start = 0, time.perf_counter()
    while done < steps:
        done += count(sample())
    return done / (time.perf_counter() - start)


def measure_cadence(steps: int, num_envs: int) -> float:
    worker = cadence_worker(cadence_policies()["views"], num_envs=num_envs)
    return time_steps(worker.sample, steps, lambda batch: batch.count)


def measure_plain(steps: int, num_envs: int) -> float:
    return time_steps(plain_sampler(num_envs), steps, lambda out: len(out["t"]))


# ---------------------------------------------------------------------------------------------
# Memory: what pruning leaves to collect


def _list_bytes(values: list[Any]) -> int:
    return sys.getsizeof(values) + sum(sys.getsizeof(value) for value in values)


def measure_memory(kind: str) -> dict[str, Any]:
    """Columns stored by the collector, their peak bytes in one fragment, the batch's bytes."""
    from cadence.interop.rllib import DefaultCallbacks

    peak = {"bytes": 0, "columns": set()}

    class Probe(DefaultCallbacks):
        def on_episode_step(self, *, worker: Any = None, episode: Any = None, **kwargs: Any) -> None:
            agents = worker.sampler.collector._agents.values()
            peak["bytes"] = max(peak["bytes"], sum(_list_bytes(b) for a in agents for b in a.buffers.values()))
            peak["columns"].update(key for a in agents for key in a.buffers)

    worker = cadence_worker(cadence_policies()[kind], Probe)
    batch = worker.sample()
    policy = worker.get_policy()
    return {
        "collected": sorted(peak["columns"]),
        "stored_peak_bytes": peak["bytes"],
        "batch_columns": sorted(batch.keys()),
        "batch_bytes": batch.size_bytes(),
        "views": sorted(policy.view_requirements),
        "rows": batch.count,
    }


# ---------------------------------------------------------------------------------------------
# ray's RolloutWorker (runs in the ray venv: --part ray)


def ray_part(steps: int, num_envs: int) -> dict[str, Any]:
    import logging

    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    import gymnasium as gym
    import ray
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
    from ray.rllib.evaluation.rollout_worker import RolloutWorker
    from ray.rllib.policy.policy import Policy

    class RayViewsPolicy(Policy):
        """The same MLP and views as Cadence's ViewsPolicy, as a ray old-stack Policy."""

        def __init__(self, observation_space: Any, action_space: Any, config: Any) -> None:
            super().__init__(observation_space, action_space, config)
            self.net = make_net(7)
            self.generator = torch.Generator().manual_seed(SEED + 1)
            # Cadence's pruning drops infos (the loss does not read it): the same columns here.
            self.view_requirements.pop("infos", None)

        def compute_actions_from_input_dict(self, input_dict: Any, explore: Any = None, timestep: Any = None,
                                            episodes: Any = None, **kwargs: Any) -> Any:
            x = features(input_dict["obs"], input_dict["prev_actions"], input_dict["prev_rewards"])
            return act(self.net, x, self.generator).numpy(), [], {}

        def compute_actions(self, *args: Any, **kwargs: Any) -> Any:  # abstract in ray; the sampler does not call it
            raise NotImplementedError

        def get_weights(self) -> dict[str, Any]:
            return {}

        def set_weights(self, weights: Any) -> None:
            pass

    config = (
        AlgorithmConfig()
        .api_stack(enable_rl_module_and_learner=False, enable_env_runner_and_connector_v2=False)
        .environment("CartPole-v1")
        .framework("torch")
        .env_runners(rollout_fragment_length=FRAGMENT // num_envs, num_envs_per_env_runner=num_envs,
                     batch_mode="truncate_episodes")
        .debugging(seed=SEED)
    )
    worker = RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=RayViewsPolicy,
                           config=config)

    def count(batch: Any) -> int:
        return batch.env_steps() if hasattr(batch, "env_steps") else batch.count

    first = worker.sample()
    inner = first.policy_batches["default_policy"] if hasattr(first, "policy_batches") else first
    rate = time_steps(worker.sample, steps, count)
    return {"steps_per_s": rate, "columns": sorted(inner.keys()), "ray": ray.__version__,
            "torch": torch.__version__, "ray_initialized": bool(ray.is_initialized())}


def run_ray(python: str, steps: int, num_envs: int) -> tuple[float | None, str]:
    """One ray measurement in a subprocess of ``python``: (steps/s, note)."""
    cmd = [python, str(Path(__file__).resolve()), "--part", "ray", "--steps", str(steps), "--num-envs", str(num_envs)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARKER)]
    if proc.returncode or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return None, f"ray part failed (rc {proc.returncode}): " + " | ".join(tail)
    result = json.loads(lines[-1][len(MARKER):])
    if "error" in result:
        return None, result["error"]
    return result["steps_per_s"], (f"ray {result['ray']}, torch {result['torch']}, columns {result['columns']}, "
                                   f"ray.init called: {result['ray_initialized']}")


def find_ray_python() -> tuple[str | None, str]:
    script = ROOT / "benchmarks" / "ray-venv.sh"
    if not script.exists():
        return None, f"{script} is missing"
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    if proc.returncode:
        return None, f"ray-venv.sh failed: {proc.stderr.strip().splitlines()[-1:]}"
    return proc.stdout.strip().splitlines()[-1], ""


# ---------------------------------------------------------------------------------------------


def profile_sample(top: int, num_envs: int) -> str:
    worker = cadence_worker(cadence_policies()["views"], num_envs=num_envs)
    worker.sample()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        worker.sample()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20000, help="timed env steps per measurement (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds, best kept (default: %(default)s)")
    parser.add_argument("--ray-python", default=None, help="python of a venv holding ray[rllib] (default: ray-venv.sh's)")
    parser.add_argument("--skip-ray", action="store_true", help="do not measure ray")
    parser.add_argument("--num-envs", type=lambda text: [int(n) for n in text.split(",")], default=[1, 8],
                        help="envs per worker, comma-separated: each a row of the table (default: 1,8)")
    parser.add_argument("--profile", action="store_true", help="also profile 5 sample() calls (cProfile, self time)")
    parser.add_argument("--part", choices=["ray"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    if args.part == "ray":
        try:
            result = ray_part(args.steps, args.num_envs[0])
        except Exception as error:  # noqa: BLE001 - reported to the parent, which says why
            import traceback

            result = {"error": f"{type(error).__name__}: {error}",
                      "traceback": traceback.format_exc()[-2000:]}
        print(MARKER + json.dumps(result), flush=True)
        return 0

    ray_python, ray_note = (None, "skipped (--skip-ray)") if args.skip_ray else (
        (args.ray_python, "") if args.ray_python else find_ray_python())
    print(f"python {platform.python_version()}, torch {torch.__version__}, numpy {np.__version__}, "
          f"{args.steps} steps x {args.rounds} rounds, {FRAGMENT} steps per sample() (all envs), 1 torch thread",
          flush=True)

    table = []
    for num_envs in args.num_envs:
        results: dict[str, list[float]] = {"plain": [], "cadence": [], "ray": []}
        for round_ in range(args.rounds):
            results["plain"].append(measure_plain(args.steps, num_envs))
            results["cadence"].append(measure_cadence(args.steps, num_envs))
            line = (f"{num_envs} env(s), round {round_ + 1}: plain {results['plain'][-1]:,.0f}  "
                    f"cadence {results['cadence'][-1]:,.0f}")
            if ray_python:
                rate, note = run_ray(ray_python, args.steps, num_envs)
                if rate is None:
                    ray_python, ray_note = None, note
                else:
                    results["ray"].append(rate)
                    ray_note = note
                    line += f"  ray {rate:,.0f}"
            print(line + " steps/s", flush=True)
        table.append((num_envs, results))

    print()
    print("| envs | cadence `RolloutWorker.sample()` | plain loop | cadence / plain (>= 0.5x) | "
          "ray 2.60 `RolloutWorker` (old stack) | cadence / ray (>= 10x) |")
    print("|---|---|---|---|---|---|")
    for num_envs, results in table:
        cadence, plain = max(results["cadence"]), max(results["plain"])
        ratio = cadence / plain
        row = (f"| {num_envs} | {cadence:,.0f} | {plain:,.0f} | {ratio:.2f}x "
               f"{'PASS' if ratio >= PLAIN_TARGET else 'FAIL'} |")
        if results["ray"]:
            ray_ratio = cadence / max(results["ray"])
            row += f" {max(results['ray']):,.0f} | {ray_ratio:.1f}x {'PASS' if ray_ratio >= RAY_TARGET else 'FAIL'} |"
        else:
            row += " not measured | - |"
        print(row)
        per_round = {name: " / ".join(f"{v:,.0f}" for v in values) for name, values in results.items() if values}
        print(f"<!-- {num_envs} env(s), per round: {per_round} -->")
    print(f"\nray: {ray_note}")

    print("\nMemory, one fragment of 1000 steps (collector: peak of its per-episode lists, measured at every step):\n")
    print("| policy (reads) | columns collected | collector peak bytes | batch columns | batch bytes |")
    print("|---|---|---|---|---|")
    described = {"obs_only": "obs only", "views": "obs, prev_*, actions, rewards, new_obs", "everything": "everything"}
    for kind, label in described.items():
        mem = measure_memory(kind)
        print(f"| {label} | {len(mem['collected'])}: {', '.join(mem['collected'])} | {mem['stored_peak_bytes']:,} | "
              f"{len(mem['batch_columns'])}: {', '.join(mem['batch_columns'])} | {mem['batch_bytes']:,} |")

    if args.profile:
        print("\ncProfile of 5 sample() calls (5000 steps), by self time:\n")
        print(profile_sample(15, args.num_envs[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
