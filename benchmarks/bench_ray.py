"""Collection on Ray: RayCollector against the single-process collector and torchrl's RayCollector.

Cases, each with an MLP policy (observation -> 64 -> action, greedy or tanh):

* ``cartpole`` (CartPole-v1) and ``halfcheetah`` (HalfCheetah-v5): frames per second of
  Cadence's ``SyncDataCollector`` in this process, of ``RayCollector`` with ``--actors``
  actors (asynchronous batches), and of torchrl 0.14.1's ``RayCollector`` with as many
  (its own venv, which needs ``ray`` installed: ``<its python> -m pip install ray==2.60.0``).
  Ray runs locally with ``num_cpus`` = ``--cpus``. The Ray collectors are timed from their
  first batch on (actor start-up, seconds of imports, is reported apart).
* ``kill``: one actor of a running ``RayCollector`` is killed with SIGKILL; reported: the
  frames lost (``stats()``) and the seconds until the restarted actor's first batch.
* ``traffic``: the bytes of one batch (what each actor puts in Ray's object store per batch).
* ``rllib``: RLlib's layer, ``WorkerSet`` with ``--actors`` remote ``RolloutWorker``s (PPO's
  torch policy, 64 hidden units, on CartPole-v1, fragments of ``--frames-per-batch`` steps)
  sampled with ``synchronous_parallel_sample``, against the local worker alone; then one
  remote worker killed with SIGKILL: the env steps its round lost and the seconds until it
  is back (restarted, given the weights, sampling).

Usage::

    python benchmarks/bench_ray.py [--frames 20000] [--frames-per-batch 1000] [--actors 2] [--cpus 2]
                                   [--skip-reference] [--cases cartpole,halfcheetah]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rollout import find_reference_python  # noqa: E402 - the shared way to find torchrl's venv

ENVS = {"cartpole": ("CartPole-v1", 4, 2, True), "halfcheetah": ("HalfCheetah-v5", 17, 6, False)}

# Runs in the reference library's python; prints {"frames_per_s": ..., "startup_s": ...} as its last line.
REFERENCE_SCRIPT = """
import json, sys, time
import ray, torch
from tensordict.nn import TensorDictModule
from torchrl.collectors import Collector
from torchrl.collectors.distributed import RayCollector
from torchrl.envs import GymEnv
env_id, obs, act, discrete = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
frames, fpb, actors, cpus = (int(x) for x in sys.argv[5:9])
ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(obs, 64), torch.nn.Tanh(), torch.nn.Linear(64, act))
head = (lambda x: torch.nn.functional.one_hot(x.argmax(-1), act)) if discrete else torch.tanh
policy = TensorDictModule(lambda o: head(net(o.float())), ["observation"], ["action"])
start = time.perf_counter()
collector = RayCollector([lambda: GymEnv(env_id)] * actors, policy, collector_class=Collector,
                         frames_per_batch=fpb, total_frames=frames + fpb * actors, sync=False,
                         remote_configs={"num_cpus": 1})
it = iter(collector)
next(it)
first = time.perf_counter()
got = 0
for batch in it:
    got += batch.numel()
    if got >= frames:
        break
elapsed = time.perf_counter() - first
collector.shutdown()
print(json.dumps({"frames_per_s": got / elapsed, "startup_s": first - start}))
"""


def make_policy(obs: int, act: int, discrete: bool):  # noqa: ANN201 - a TensorDictModule
    import torch
    from tensordict.nn import TensorDictModule

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(obs, 64), torch.nn.Tanh(), torch.nn.Linear(64, act))

    if discrete:
        def head(x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.one_hot(x.argmax(-1), act).bool()
    else:
        head = torch.tanh
    return TensorDictModule(lambda o: head(net(o.float())), ["observation"], ["action"])


def single_process(case: str, frames: int, fpb: int) -> float:
    """Frames per second of one SyncDataCollector in this process."""
    import torch

    from cadence.collectors import SyncDataCollector
    from cadence.envs import GymEnv

    env_id, obs, act, discrete = ENVS[case]
    torch.set_num_threads(1)
    collector = SyncDataCollector(GymEnv(env_id), make_policy(obs, act, discrete), frames_per_batch=fpb,
                                  total_frames=frames + fpb)
    it = iter(collector)
    next(it)  # warm-up batch
    start = time.perf_counter()
    got = sum(batch.numel() for batch in it)
    elapsed = time.perf_counter() - start
    collector.shutdown()
    return got / elapsed


def ray_collector(case: str, frames: int, fpb: int, actors: int) -> tuple[float, float, int]:
    """(frames per second from the first batch on, start-up seconds, bytes of one batch)."""
    from cadence.collectors.distributed import RayCollector
    from cadence.envs import GymEnv

    env_id, obs, act, discrete = ENVS[case]
    start = time.perf_counter()
    collector = RayCollector([lambda: GymEnv(env_id)] * actors, make_policy(obs, act, discrete),
                             frames_per_batch=fpb, total_frames=-1)
    it = iter(collector)
    first_batch = next(it)
    first = time.perf_counter()
    got = 0
    while got < frames:
        got += next(it).numel()
    elapsed = time.perf_counter() - first
    collector.shutdown()
    size = sum(t.numel() * t.element_size() for t in first_batch.values(True, True))
    return got / elapsed, first - start, size


def kill_cost(case: str, fpb: int, actors: int) -> tuple[int, float]:
    """(frames lost, seconds to the restarted actor's first batch) after a SIGKILL of actor 0."""
    from cadence.collectors.distributed import RayCollector
    from cadence.envs import GymEnv

    env_id, obs, act, discrete = ENVS[case]
    collector = RayCollector([lambda: GymEnv(env_id)] * actors, make_policy(obs, act, discrete),
                             frames_per_batch=fpb, total_frames=-1)
    it = iter(collector)
    for _ in range(2 * actors):
        next(it)
    os.kill(collector.worker_pids()[0], signal.SIGKILL)
    killed = time.perf_counter()
    while True:
        batch = next(it)
        if int(batch["worker_id"][0]) == 0 and collector.stats()["restarts"][0] == 1:
            break
    seconds = time.perf_counter() - killed
    lost = collector.stats()["frames_lost"]
    collector.shutdown()
    return lost, seconds


def _worker_set(fpb: int, actors: int):  # noqa: ANN202 - a WorkerSet
    import gymnasium as gym

    from cadence.interop.rllib import WorkerSet
    from cadence.interop.rllib.algorithms.ppo import PPOTorchPolicy

    config = {"num_workers": actors, "rollout_fragment_length": fpb, "seed": 0, "model": {"fcnet_hiddens": [64]},
              "delay_between_env_runner_restarts_s": 0.0}
    return WorkerSet(env_creator=lambda ctx: gym.make("CartPole-v1"), default_policy_class=PPOTorchPolicy,
                     config=config)


def rllib_workers(frames: int, fpb: int, actors: int) -> tuple[float, float]:
    """(env steps per second of the local RolloutWorker alone, of ``actors`` remote ones)."""
    from cadence.interop.rllib import synchronous_parallel_sample

    workers = _worker_set(fpb, actors)
    local = workers.local_worker()
    local.sample()  # warm-up
    start = time.perf_counter()
    got = 0
    while got < frames:
        got += local.sample().count
    alone = got / (time.perf_counter() - start)
    synchronous_parallel_sample(worker_set=workers)  # warm-up
    start = time.perf_counter()
    got = synchronous_parallel_sample(worker_set=workers, max_env_steps=frames).count
    remote = got / (time.perf_counter() - start)
    workers.stop()
    return alone, remote


def rllib_kill_cost(fpb: int, actors: int) -> tuple[int, float]:
    """(env steps lost in the round of the kill, seconds until the killed worker samples again)."""
    from cadence.interop.rllib import synchronous_parallel_sample

    workers = _worker_set(fpb, actors)
    synchronous_parallel_sample(worker_set=workers)
    victim = workers.worker_pids()[1]
    os.kill(victim, signal.SIGKILL)
    killed = time.perf_counter()
    fragments = synchronous_parallel_sample(worker_set=workers, concat=False)
    lost = fpb * actors - sum(batch.count for batch in fragments)
    while 1 not in workers.healthy_worker_ids():
        synchronous_parallel_sample(worker_set=workers)
    synchronous_parallel_sample(worker_set=workers)  # a round with the restored worker in it
    seconds = time.perf_counter() - killed
    workers.stop()
    return lost, seconds


def reference(python: str, case: str, frames: int, fpb: int, actors: int, cpus: int) -> tuple[float, float]:
    env_id, obs, act, discrete = ENVS[case]
    result = subprocess.run(
        [python, "-c", REFERENCE_SCRIPT, env_id, str(obs), str(act), str(int(discrete)), str(frames), str(fpb),
         str(actors), str(cpus)],
        capture_output=True, text=True, cwd="/",
    )
    if result.returncode != 0:
        raise RuntimeError(f"the reference run failed (exit {result.returncode}):\n{result.stderr[-2000:]}")
    out = json.loads(result.stdout.strip().splitlines()[-1])
    return out["frames_per_s"], out["startup_s"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20_000, help="frames timed per measurement")
    parser.add_argument("--frames-per-batch", type=int, default=1000)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=2, help="num_cpus of the local Ray")
    parser.add_argument("--cases", default="cartpole,halfcheetah")
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--reference-python", default=None)
    args = parser.parse_args(argv)

    import ray
    import torch

    python, why = (None, "--skip-reference") if args.skip_reference else find_reference_python(args.reference_python)
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, ray {ray.__version__}, "
          f"{args.actors} actors on a local Ray of {args.cpus} CPUs, {args.frames} frames timed, "
          f"{args.frames_per_batch} per batch")
    print(f"reference: {why}" if python else f"reference: skipped ({why})")
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    print(f"\n{'case':<14}{'single':>10}{'ray':>10}{'ray/single':>12}{'torchrl ray':>13}{'ray/torchrl':>13}"
          f"{'start-up s':>12}{'batch bytes':>13}")
    for case in args.cases.split(","):
        single = single_process(case, args.frames, args.frames_per_batch)
        fast, startup, size = ray_collector(case, args.frames, args.frames_per_batch, args.actors)
        theirs = reference(python, case, args.frames, args.frames_per_batch, args.actors, args.cpus) if python else None
        theirs_text = f"{theirs[0]:,.0f}" if theirs else "-"
        ratio = f"{fast / theirs[0]:.2f}x" if theirs else "-"
        print(f"{case:<14}{single:>10,.0f}{fast:>10,.0f}{fast / single:>11.2f}x{theirs_text:>13}{ratio:>13}"
              f"{startup:>12.1f}{size:>13,}")
    lost, seconds = kill_cost(args.cases.split(",")[0], args.frames_per_batch, args.actors)
    print(f"\nkill: SIGKILL of actor 0 lost {lost} frames; the restarted actor's first batch came {seconds:.1f} s later")
    alone, remote = rllib_workers(args.frames, args.frames_per_batch, args.actors)
    print(f"\nrllib: WorkerSet, {args.actors} remote RolloutWorkers (PPO, CartPole-v1): {remote:,.0f} env steps/s; "
          f"the local worker alone: {alone:,.0f} ({remote / alone:.2f}x)")
    lost, seconds = rllib_kill_cost(args.frames_per_batch, args.actors)
    print(f"rllib kill: SIGKILL of worker 1 lost {lost} env steps; back and sampling {seconds:.1f} s later")
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
