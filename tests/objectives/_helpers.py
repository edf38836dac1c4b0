"""Tiny networks, fixed batches and short training loops shared by the loss tests."""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential

from cadence.data.replay_buffers import LazyTensorStorage, RandomSampler, TensorDictReplayBuffer
from cadence.envs import ExplorationType, GymEnv, PendulumEnv, set_exploration_type


class Critic(torch.nn.Module):
    """``Linear(cat(observation, action))``: a Q-network whose weights the tests read."""

    def __init__(self, observation_size: int, action_size: int, hidden: int | None = None) -> None:
        super().__init__()
        if hidden is None:
            self.net = torch.nn.Linear(observation_size + action_size, 1)
        else:
            self.net = torch.nn.Sequential(
                torch.nn.Linear(observation_size + action_size, hidden), torch.nn.ReLU(),
                torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1),
            )

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([observation, action], -1))


def huber(x: torch.Tensor) -> torch.Tensor:
    """Smooth L1 with delta 1, written out."""
    return torch.where(x.abs() < 1, 0.5 * x * x, x.abs() - 0.5)


def transitions(
    batch: int, observation_size: int, action: torch.Tensor, *, seed: int = 0, terminated_every: int = 3
) -> TensorDict:
    """A fixed batch of transitions with some terminated ones."""
    g = torch.Generator().manual_seed(seed)
    terminated = (torch.arange(batch) % terminated_every == 0).unsqueeze(-1)
    return TensorDict(
        {
            "observation": torch.randn(batch, observation_size, generator=g),
            "action": action,
            "next": {
                "observation": torch.randn(batch, observation_size, generator=g),
                "reward": torch.randn(batch, 1, generator=g),
                "done": terminated.clone(),
                "terminated": terminated,
            },
        },
        [batch],
    )


def grads_are_empty(params: TensorDictBase) -> bool:
    """No gradient, or only zeros, on any of ``params``."""
    return all(p.grad is None or not p.grad.any() for p in params.values(True, True))


def grads_are_set(params: TensorDictBase) -> bool:
    """Some non-zero gradient on ``params``."""
    return any(p.grad is not None and p.grad.any() for p in params.values(True, True))


# ---------------------------------------------------------------------------- pendulum
def _features(th: torch.Tensor, thdot: torch.Tensor) -> torch.Tensor:
    return torch.stack([th.cos(), th.sin(), thdot / 8.0], -1)


PENDULUM_FEATURES = TensorDictModule(_features, ["th", "thdot"], ["observation"])


def pendulum_env(num_envs: int, seed: int) -> PendulumEnv:
    env = PendulumEnv(batch_size=[num_envs])
    env.set_seed(seed)
    return env


def pendulum_rollout(env: PendulumEnv, policy: TensorDictModule, steps: int) -> TensorDictBase:
    """``steps`` steps of every env with ``policy`` reading ``"observation"`` (made from the
    angle and speed, at the root and under ``"next"``), flattened into transitions."""
    with torch.no_grad():
        data = env.rollout(steps, TensorDictSequential(PENDULUM_FEATURES, policy))
        data.set(("next", "observation"), _features(data.get(("next", "th")), data.get(("next", "thdot"))))
    return data


def pendulum_return(env: PendulumEnv, actor: TensorDictModule, steps: int = 100) -> float:
    """The mean return of ``steps`` deterministic steps from fresh states."""
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        data = pendulum_rollout(env, actor, steps)
    return data.get(("next", "reward")).sum(-2).mean().item()


def train_off_policy_pendulum(
    loss: torch.nn.Module,
    actor: TensorDictModule,
    explore: TensorDictModule,
    *,
    updater: Callable[[], None],
    iterations: int = 12,
    updates_per_iteration: int = 150,
    lr: float = 3e-3,
    seed: int = 0,
) -> tuple[float, float]:
    """Trains ``loss`` on Pendulum (16 envs, 100-step rollouts); returns the deterministic
    return before and after."""
    torch.manual_seed(seed)
    env = pendulum_env(16, seed)
    eval_env = pendulum_env(16, seed + 1)
    before = pendulum_return(eval_env, actor)
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(50_000), sampler=RandomSampler(), batch_size=256)
    optimizer = torch.optim.Adam(loss.parameters(), lr=lr)
    for _ in range(iterations):
        with set_exploration_type(ExplorationType.RANDOM):
            data = pendulum_rollout(env, explore, 100)
        buffer.extend(data.reshape(-1).select("observation", "action", ("next", "observation"),
                                              ("next", "reward"), ("next", "done"), ("next", "terminated")))
        for _ in range(updates_per_iteration):
            out = loss(buffer.sample())
            total = sum(v for k, v in out.items() if k.startswith("loss"))
            optimizer.zero_grad()
            total.backward()
            optimizer.step()
            updater()
    eval_env.set_seed(seed + 1)
    return before, pendulum_return(eval_env, actor)


class GaussianNoise(torch.nn.Module):
    """Adds clipped Gaussian noise to a deterministic action (exploration for DDPG/TD3)."""

    def __init__(self, sigma: float, low: float, high: float) -> None:
        super().__init__()
        self.sigma, self.low, self.high = sigma, low, high

    def forward(self, action: torch.Tensor) -> torch.Tensor:
        return (action + self.sigma * torch.randn_like(action)).clamp(self.low, self.high)


# ---------------------------------------------------------------------------- cartpole
def cartpole_lengths(env: GymEnv, policy: TensorDictModule, episodes: int = 5) -> float:
    """The mean length of ``episodes`` episodes (up to 500 steps) with ``policy``."""
    lengths = []
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        for _ in range(episodes):
            lengths.append(env.rollout(500, policy).batch_size[-1])
    return sum(lengths) / len(lengths)


def missing_key_message(loss: torch.nn.Module, data: TensorDictBase) -> str:
    """The message of the ``KeyError`` ``loss(data)`` raises (fails if it raises none)."""
    try:
        loss(data)
    except KeyError as err:
        return str(err.args[0])
    raise AssertionError("expected a KeyError")
