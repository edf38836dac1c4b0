"""A small DQN run built as the reference's ``dqn_cartpole.py`` builds it (QValueActor,
EGreedyModule, TensorDictReplayBuffer, DQNLoss, HardUpdate, Adam, Collector, and the
``Checkpoint`` of all of them), and a training loop that records what it draws."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictSequential

from cadence.checkpoint import Checkpoint, GlobalRNGState
from cadence.collectors import Collector
from cadence.data import Composite, OneHot, Unbounded
from cadence.data.replay_buffers import LazyTensorStorage, RandomSampler, TensorDictReplayBuffer
from cadence.envs import EnvBase, GymEnv, RewardSum, StepCounter, TransformedEnv
from cadence.modules import MLP, EGreedyModule, QValueActor
from cadence.objectives import DQNLoss, HardUpdate


class DriftEnv(EnvBase):
    """A discrete-action env whose whole state is in its tensordicts (and its ``rng``): a
    point drifts left or right with noise; episodes end at random or out of bounds. A
    collector restored from a checkpoint continues it exactly, which a gymnasium env's
    hidden physics would not allow."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded(shape=(4,)))
        self.action_spec = OneHot(2)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        return TensorDict({"observation": 0.1 * torch.randn(4, generator=self.rng)})

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        direction = tensordict["action"].long().argmax(-1).float() * 2 - 1
        observation = 0.95 * tensordict["observation"] + 0.1 * direction + 0.05 * torch.randn(4, generator=self.rng)
        done = bool(observation[0].abs() > 1.0) or bool(torch.rand((), generator=self.rng) < 0.05)
        return TensorDict(
            {
                "observation": observation,
                "reward": (1.0 - observation.abs().mean()).reshape(1),
                "done": torch.tensor([done]),
                "terminated": torch.tensor([done]),
            }
        )


def make_drift_env() -> TransformedEnv:
    env = TransformedEnv(DriftEnv())
    env.append_transform(RewardSum())
    env.append_transform(StepCounter())
    return env


def make_cartpole_env() -> TransformedEnv:
    """The script's ``make_env("CartPole-v1")``."""
    env = TransformedEnv(GymEnv("CartPole-v1", device="cpu", from_pixels=False, pixels_only=False))
    env.append_transform(RewardSum())
    env.append_transform(StepCounter())
    return env


@dataclass
class DQNRun:
    """The objects of one run, its checkpoint, and its collector's iterator."""

    model: QValueActor
    greedy: EGreedyModule
    buffer: TensorDictReplayBuffer
    loss: DQNLoss
    updater: HardUpdate
    optimizer: torch.optim.Optimizer
    collector: Collector
    trainer_state: dict[str, Any]
    metrics: dict[str, Any]
    config: dict[str, Any]
    checkpoint: Checkpoint
    init_random_frames: int
    num_updates: int
    _iterator: Iterator[TensorDictBase] | None = field(default=None)

    def next_batch(self) -> TensorDictBase:
        if self._iterator is None:
            self._iterator = iter(self.collector)
        return next(self._iterator)


def make_dqn_run(
    make_env: Callable[[], EnvBase],
    *,
    seed: int,
    format: str = "archive",
    strict: str = "error",
    frames_per_batch: int = 40,
    init_random_frames: int = 40,
    num_updates: int = 3,
    reset_at_each_iter: bool = False,
) -> DQNRun:
    """Builds the run; ``seed`` sets everything random in it (networks, exploration,
    sampler, env), so that two seeds give runs that differ everywhere. A restored
    collector starts new episodes (as the reference's does): with ``reset_at_each_iter``
    every batch does, so that a resumed run can equal an unbroken one batch for batch."""
    torch.manual_seed(seed)  # the script's networks start from torch's global generator
    proof = make_env()
    action_spec = proof.full_action_spec["action"]
    mlp = MLP(
        in_features=proof.observation_spec["observation"].shape[-1],
        activation_class=torch.nn.ReLU,
        out_features=action_spec.space.n,
        num_cells=[16, 16],
        device="cpu",
    )
    model = QValueActor(module=mlp, spec=Composite(action=action_spec), in_keys=["observation"])
    greedy = EGreedyModule(
        annealing_num_steps=400,
        eps_init=1.0,
        eps_end=0.05,
        spec=model.spec,
        device="cpu",
        generator=torch.Generator().manual_seed(seed + 100),
    )
    buffer = TensorDictReplayBuffer(
        pin_memory=False,
        storage=LazyTensorStorage(max_size=300, device="cpu"),
        sampler=RandomSampler(generator=torch.Generator().manual_seed(seed + 200)),
        batch_size=8,
    )
    loss = DQNLoss(value_network=model, loss_function="l2", delay_value=True)
    loss.make_value_estimator(gamma=0.99, device="cpu")
    updater = HardUpdate(loss, value_network_update_interval=4)
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-2)
    env = make_env()
    env.set_seed(seed + 300)
    collector = Collector(
        create_env_fn=env,
        policy=TensorDictSequential(model, greedy),
        frames_per_batch=frames_per_batch,
        total_frames=100 * frames_per_batch,
        device="cpu",
        storing_device="cpu",
        max_frames_per_traj=-1,
        init_random_frames=init_random_frames,
        reset_at_each_iter=reset_at_each_iter,
    )
    trainer_state: dict[str, Any] = {"collected_frames": 0}
    metrics: dict[str, Any] = {}
    config = {"env": {"env_name": "CartPole-v1"}, "checkpoint": {"include_replay_buffer": True}, "seed": seed}
    checkpoint = Checkpoint(
        format=format,
        strict=strict,
        policy=model,
        loss_module=loss,
        optimizer=optimizer,
        replay_buffer=buffer,
        collector=collector,
        exploration=greedy,
        target_updater=updater,
        trainer_state=trainer_state,
        rng=GlobalRNGState(),
        environment_metadata={"env_name": "CartPole-v1"},
        config=config,
        metrics=metrics,
    )
    return DQNRun(
        model, greedy, buffer, loss, updater, optimizer, collector, trainer_state, metrics, config, checkpoint,
        init_random_frames, num_updates,
    )


def train(run: DQNRun, iterations: int) -> list[dict[str, Any]]:
    """The script's loop body, ``iterations`` times; returns, per iteration, the batch,
    the sampled indices, the losses, the parameters, and draws from the global generators."""
    records = []
    for _ in range(iterations):
        data = run.next_batch().reshape(-1)
        run.buffer.extend(data)
        run.trainer_state["collected_frames"] += data.numel()
        run.greedy.step(data.numel())
        record: dict[str, Any] = {
            "batch": data.select("observation", "action", ("next", "observation"), ("next", "reward")).clone(),
            "indices": [],
            "losses": [],
        }
        if run.trainer_state["collected_frames"] >= run.init_random_frames:
            for _ in range(run.num_updates):
                sample = run.buffer.sample()
                loss = run.loss(sample)["loss"]
                run.optimizer.zero_grad()
                loss.backward()
                run.optimizer.step()
                run.updater.step()
                record["indices"].append(sample["index"].clone())
                record["losses"].append(loss.detach().clone())
        run.metrics.clear()
        run.metrics.update({"train/epsilon": float(run.greedy.eps), "train/frames": run.trainer_state["collected_frames"]})
        record["params"] = {key: value.clone() for key, value in run.loss.state_dict().items()}
        record["draws"] = (torch.rand(3), np.random.rand(3), random.random())
        records.append(record)
    return records


def assert_same_records(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> None:
    """The two runs collected, sampled, learned and drew exactly the same."""
    assert len(first) == len(second)
    for step, (a, b) in enumerate(zip(first, second)):
        assert (a["batch"] == b["batch"]).all(), f"iteration {step}: the collected batches differ"
        assert len(a["indices"]) == len(b["indices"]) and all(
            torch.equal(x, y) for x, y in zip(a["indices"], b["indices"])
        ), f"iteration {step}: the sampled indices differ"
        assert all(torch.equal(x, y) for x, y in zip(a["losses"], b["losses"])), f"iteration {step}: losses differ"
        assert a["params"].keys() == b["params"].keys()
        for key in a["params"]:
            assert torch.equal(a["params"][key], b["params"][key]), f"iteration {step}: {key} differs"
        assert torch.equal(a["draws"][0], b["draws"][0]), f"iteration {step}: torch's global draws differ"
        assert np.array_equal(a["draws"][1], b["draws"][1]), f"iteration {step}: numpy's global draws differ"
        assert a["draws"][2] == b["draws"][2], f"iteration {step}: Python's global draws differ"
