"""DDPG on Pendulum-v1 with the reference library's own classes (torchrl 0.14.1), for
``bench_learning.py``.

Run it with the reference venv's python (``PY_REF=$(../shared/tools/reference-venv.sh)``), not
Cadence's: it imports ``torchrl``. It builds the training loop the way torchrl's
``sota-implementations/ddpg`` does: a ``TransformedEnv(GymEnv(...))`` with ``InitTracker``,
``StepCounter``, ``DoubleToFloat`` and ``RewardSum``; an ``MLP`` actor squashed by a
``TanhModule`` onto the action bounds; an ``MLP`` critic on (observation, action) in a
``ValueOperator``; ``AdditiveGaussianModule`` exploration; a ``Collector`` (``SyncDataCollector``
in older releases) with ``init_random_frames``; a ``TensorDictReplayBuffer`` on a
``LazyTensorStorage``; ``DDPGLoss`` with target networks for both actor and critic, its TD(0)
value estimator, ``SoftUpdate`` and two Adam optimizers. The hyperparameters' defaults are those
of ``cadence train`` (``cadence.trainers.config.TrainConfig``).

Output: one JSON object per line on stdout. At each evaluation (every ``--eval-interval``
collected frames)::

    {"frames": F, "wall_s": S, "eval_return": R, "train_return": T or null, "eval_s": E}

``wall_s`` counts from the start of the collection loop (the earlier evaluations included)
up to the start of this evaluation, as ``cadence train`` stamps its ``metrics.csv`` rows;
``eval_s`` is the time this evaluation took;
``eval_return`` is the mean return of ``--eval-episodes`` deterministic episodes on a separate
env; ``train_return`` the mean return of the training episodes finished since the previous
evaluation. At the end::

    {"done": true, "frames": N, "wall_s": S, "construction_s": C}

``construction_s`` is the time to build envs, networks, collector, buffer, loss and optimizers
(after the imports). Everything else the libraries print goes to stderr.

Usage::

    $PY_REF benchmarks/_reference_ddpg.py --total-frames 15000 --seed 0
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

# whatever the libraries print goes to stderr; the JSON lines go to the real stdout
_STDOUT = sys.stdout
sys.stdout = sys.stderr

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tensordict.nn import TensorDictModule, TensorDictSequential  # noqa: E402
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer  # noqa: E402
from torchrl.data.replay_buffers.samplers import RandomSampler  # noqa: E402
from torchrl.envs import (  # noqa: E402
    Compose,
    DoubleToFloat,
    ExplorationType,
    InitTracker,
    RewardSum,
    StepCounter,
    TransformedEnv,
    set_exploration_type,
)
from torchrl.envs.libs.gym import GymEnv  # noqa: E402
from torchrl.modules import MLP, AdditiveGaussianModule, TanhModule, ValueOperator  # noqa: E402
from torchrl.objectives import DDPGLoss, SoftUpdate  # noqa: E402

try:  # torchrl 0.14 renamed SyncDataCollector to Collector
    from torchrl.collectors import Collector  # noqa: E402
except ImportError:  # older releases
    from torchrl.collectors import SyncDataCollector as Collector  # noqa: E402


def emit(record: dict) -> None:
    _STDOUT.write(json.dumps(record) + "\n")
    _STDOUT.flush()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="Pendulum-v1", help="gymnasium id (default Pendulum-v1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--total-frames", type=int, default=15_000)
    parser.add_argument("--frames-per-batch", type=int, default=50)
    parser.add_argument("--init-random-frames", type=int, default=1_000)
    parser.add_argument("--buffer-size", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--updates-per-frame", type=float, default=1.0)
    parser.add_argument("--hidden-sizes", default="256,256", help="comma-separated layer sizes")
    parser.add_argument("--actor-lr", type=float, default=1e-3)
    parser.add_argument("--critic-lr", type=float, default=1e-3)
    parser.add_argument("--gamma", type=float, default=0.98)
    parser.add_argument("--tau", type=float, default=0.005)
    parser.add_argument(
        "--exploration-noise", type=float, default=0.1,
        help="Gaussian sigma as a fraction of the action range's half-width",
    )
    parser.add_argument("--eval-interval", type=int, default=1_000)
    parser.add_argument("--eval-episodes", type=int, default=1)
    parser.add_argument("--eval-max-steps", type=int, default=1_000,
                        help="step limit of an evaluation episode (Pendulum ends at 200 itself)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = parser.parse_args(argv)
    args.hidden_sizes = [int(size) for size in args.hidden_sizes.split(",") if size.strip()]
    return args


def make_env(name: str, seed: int) -> TransformedEnv:
    env = TransformedEnv(
        GymEnv(name, device="cpu"),
        Compose(InitTracker(), StepCounter(), DoubleToFloat(), RewardSum()),
    )
    env.set_seed(seed)
    return env


def make_agent(env: TransformedEnv, args: argparse.Namespace):
    action_spec = env.action_spec_unbatched
    observation_size = env.observation_spec["observation"].shape[-1]
    action_size = action_spec.shape[-1]

    actor_net = MLP(
        in_features=observation_size, out_features=action_size, num_cells=args.hidden_sizes,
        activation_class=torch.nn.ReLU,
    )
    actor = TensorDictSequential(
        TensorDictModule(actor_net, in_keys=["observation"], out_keys=["param"]),
        TanhModule(in_keys=["param"], out_keys=["action"], spec=action_spec),
    )
    critic_net = MLP(
        in_features=observation_size + action_size, out_features=1, num_cells=args.hidden_sizes,
        activation_class=torch.nn.ReLU,
    )
    # the MLP concatenates its inputs on the last dim; out key: "state_action_value"
    critic = ValueOperator(critic_net, in_keys=["observation", "action"])

    # check both on a fake step (the shapes and keys the loss will read)
    with torch.no_grad():
        probe = env.fake_tensordict()
        actor(probe)
        critic(probe)

    half_width = float(((action_spec.space.high - action_spec.space.low) / 2).float().mean())
    sigma = args.exploration_noise * half_width
    noise = AdditiveGaussianModule(
        spec=action_spec, sigma_init=sigma, sigma_end=sigma, annealing_num_steps=1,
    )
    explore = TensorDictSequential(actor, noise)
    return actor, critic, explore


def evaluate(env: TransformedEnv, actor, episodes: int, max_steps: int) -> float:
    returns = []
    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        for _ in range(episodes):
            rollout = env.rollout(max_steps, actor, break_when_any_done=True, auto_cast_to_device=False)
            returns.append(float(rollout["next", "reward"].sum()))
    return sum(returns) / len(returns)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    random.seed(args.seed)

    start = time.perf_counter()
    train_env = make_env(args.env, args.seed)
    eval_env = make_env(args.env, args.seed + 1)
    actor, critic, explore = make_agent(train_env, args)

    collector = Collector(
        train_env,
        explore,
        frames_per_batch=args.frames_per_batch,
        total_frames=args.total_frames,
        init_random_frames=args.init_random_frames,
        device="cpu",
    )
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(args.buffer_size),
        sampler=RandomSampler(),
        batch_size=args.batch_size,
    )
    loss_module = DDPGLoss(actor, critic, delay_actor=True, delay_value=True, loss_function="l2")
    loss_module.make_value_estimator(gamma=args.gamma)
    target_updater = SoftUpdate(loss_module, tau=args.tau)
    actor_optim = torch.optim.Adam(
        list(loss_module.actor_network_params.flatten_keys().values()), lr=args.actor_lr
    )
    critic_optim = torch.optim.Adam(
        list(loss_module.value_network_params.flatten_keys().values()), lr=args.critic_lr
    )
    updates_per_batch = round(args.frames_per_batch * args.updates_per_frame)
    construction_s = time.perf_counter() - start

    frames = 0
    next_eval = args.eval_interval
    finished_returns: list[float] = []
    loop_start = time.perf_counter()
    for data in collector:
        frames += data.numel()
        data = data.reshape(-1)
        done = data["next", "done"].squeeze(-1)
        if done.any():
            finished_returns.extend(data["next", "episode_reward"][done].squeeze(-1).tolist())
        buffer.extend(data)

        if frames >= args.init_random_frames:
            for _ in range(updates_per_batch):
                batch = buffer.sample()
                losses = loss_module(batch)
                actor_optim.zero_grad(set_to_none=True)
                critic_optim.zero_grad(set_to_none=True)
                # the actor's loss reads detached critic parameters: one backward serves both
                (losses["loss_actor"] + losses["loss_value"]).backward()
                critic_optim.step()
                actor_optim.step()
                target_updater.step()

        if frames >= next_eval:
            eval_start = time.perf_counter()
            eval_return = evaluate(eval_env, actor, args.eval_episodes, args.eval_max_steps)
            train_return = sum(finished_returns) / len(finished_returns) if finished_returns else None
            finished_returns = []
            emit({
                "frames": frames,
                "wall_s": round(eval_start - loop_start, 4),
                "eval_return": eval_return,
                "train_return": train_return,
                "eval_s": round(time.perf_counter() - eval_start, 4),
            })
            while next_eval <= frames:
                next_eval += args.eval_interval

    wall_s = time.perf_counter() - loop_start
    collector.shutdown()
    emit({"done": True, "frames": frames, "wall_s": round(wall_s, 4), "construction_s": round(construction_s, 4)})


if __name__ == "__main__":
    main()
