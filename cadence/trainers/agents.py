"""The networks, loss, optimiser and exploration of each algorithm ``cadence train`` runs.

``build_agent(config, env)`` returns an :class:`Agent`: a deterministic ``policy`` (what
evaluation and the saved policy run), an ``explore`` policy (what collects data), the
``loss`` module, its ``optimizer`` (one Adam with a parameter group per network) and
``update(batch)``, one gradient step with the target-network update.

Examples:
    >>> from cadence.envs import GymEnv
    >>> from cadence.trainers.config import TrainConfig
    >>> agent = build_agent(TrainConfig(hidden_sizes=[8]), GymEnv("Pendulum-v1"))
    >>> type(agent.loss).__name__, sorted(agent.optimizer_groups())
    ('DDPGLoss', ['actor', 'critic'])
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential

from cadence.data import Bounded
from cadence.envs.common import EnvBase
from cadence.modules import MLP, AdditiveGaussianModule, NormalParamExtractor, ProbabilisticActor, TanhNormal
from cadence.objectives import DDPGLoss, SACLoss, SoftUpdate, TD3Loss
from cadence.trainers.config import ConfigError, TrainConfig

__all__ = ["ActionCast", "Agent", "AsFloat32", "QNetwork", "ScaleToBounds", "build_agent", "continuous_action_spec"]


class ScaleToBounds(torch.nn.Module):
    """Maps ``[-1, 1]`` (a tanh's output) affinely onto ``[low, high]``, in float32.

    Args:
        low: the lower bounds.
        high: the upper bounds.

    Examples:
        >>> import torch
        >>> ScaleToBounds(torch.tensor([-2.0]), torch.tensor([2.0]))(torch.tensor([0.5])).tolist()
        [1.0]
    """

    def __init__(self, low: torch.Tensor, high: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("center", ((high + low) / 2).float())
        self.register_buffer("half_width", ((high - low) / 2).float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.center + self.half_width * x


class ActionCast(torch.nn.Module):
    """Casts an action to the env's action dtype (the networks compute in float32;
    dm_control, for one, takes float64 actions).

    Args:
        dtype: the action spec's dtype.

    Examples:
        >>> import torch
        >>> ActionCast(torch.float64)(torch.zeros(2)).dtype
        torch.float64
    """

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def forward(self, action: torch.Tensor) -> torch.Tensor:
        return action.to(self.dtype)


def _acting_in(env_action_dtype: torch.dtype, policy: TensorDictModule) -> TensorDictModule:
    """``policy`` as it acts in the env: its float32 actions cast to the env's dtype. The
    one place where every agent's actions meet the env's spec; the losses keep float32."""
    if env_action_dtype == torch.float32:
        return policy
    cast = TensorDictModule(ActionCast(env_action_dtype), ["action"], ["action"])
    return TensorDictSequential(policy, cast)


class AsFloat32(torch.nn.Module):
    """Casts its input to float32 (gymnasium envs may observe float64 vectors, which the
    trainer keeps as they come so that the collector steps the simulators directly).

    Examples:
        >>> import torch
        >>> AsFloat32()(torch.zeros(2, dtype=torch.float64)).dtype
        torch.float32
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float()


class QNetwork(torch.nn.Module):
    """``Q(s, a)``: an MLP on the observation and action concatenated (as float32).

    Args:
        in_features: the observation's plus the action's size.
        hidden_sizes: the hidden layer sizes.

    Examples:
        >>> import torch
        >>> QNetwork(4, [16])(torch.zeros(4, 3), torch.zeros(4, 1)).shape
        torch.Size([4, 1])
    """

    def __init__(self, in_features: int, hidden_sizes: list[int]) -> None:
        super().__init__()
        self.net = MLP(in_features=in_features, out_features=1, num_cells=list(hidden_sizes),
                       activation_class=torch.nn.ReLU)

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([observation.float(), action.float()], -1))


@dataclasses.dataclass
class Agent:
    """What a training run drives (see the module's docstring): ``policy`` (deterministic),
    ``explore`` (what collects), the ``loss`` and its ``optimizer`` (one parameter group per
    network), the soft ``target_updater``, and TD3's ``policy_delay``.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.trainers.config import TrainConfig
        >>> env = GymEnv("Pendulum-v1")
        >>> agent = build_agent(TrainConfig(hidden_sizes=[8]), env)
        >>> sorted(agent.update(env.rollout(16)))
        ['loss_actor', 'loss_value']
        >>> agent.updates
        1
    """

    policy: TensorDictModule
    explore: TensorDictModule
    loss: torch.nn.Module
    optimizer: torch.optim.Optimizer
    target_updater: SoftUpdate
    policy_delay: int = 1
    updates: int = 0
    # the parameters of each optimiser group, by name
    groups: dict[str, list[torch.nn.Parameter]] = dataclasses.field(default_factory=dict)

    def optimizer_groups(self) -> list[str]:
        """The names of the optimiser's parameter groups."""
        return list(self.groups)

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        """One gradient step on ``batch`` (the actor every ``policy_delay`` steps), then the
        soft update of the targets; returns the losses as floats."""
        losses = self.loss(batch)
        self.updates += 1
        update_actor = self.updates % self.policy_delay == 0
        total = sum(
            value for key, value in losses.items()
            if key.startswith("loss_") and (update_actor or key != "loss_actor")
        )
        self.optimizer.zero_grad(set_to_none=True)
        total.backward()
        self.optimizer.step()
        self.target_updater.step()
        return {key: float(value.detach()) for key, value in losses.items() if key.startswith("loss_")}

    def state_dict(self) -> dict[str, Any]:
        """Networks (through the loss; the policy's alone too, for ``cadence eval``),
        optimiser, exploration state and the update count."""
        return {
            "policy": self.policy.state_dict(),
            "loss": self.loss.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "explore": self.explore.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores :meth:`state_dict`."""
        self.loss.load_state_dict(state["loss"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.explore.load_state_dict(state["explore"])
        self.updates = int(state["updates"])


def continuous_action_spec(config: TrainConfig, env: EnvBase) -> Bounded:
    """One env's action spec, which ``config.algorithm`` acts in: continuous and bounded.

    Raises:
        ConfigError: if the env's actions are not continuous and bounded.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.trainers.config import TrainConfig
        >>> continuous_action_spec(TrainConfig(), GymEnv("Pendulum-v1")).shape
        torch.Size([1])
        >>> continuous_action_spec(TrainConfig(env="CartPole-v1"), GymEnv("CartPole-v1"))
        Traceback (most recent call last):
        ...
        cadence.trainers.config.ConfigError: ddpg needs a continuous, bounded action space; CartPole-v1 has OneHot actions
    """
    spec = env.full_action_spec["action"] if "action" in env.full_action_spec.keys() else None
    if not isinstance(spec, Bounded) or not spec.dtype.is_floating_point:
        raise ConfigError(
            f"{config.algorithm} needs a continuous, bounded action space; {config.env} has "
            f"{type(spec).__name__ if spec is not None else 'no action'} actions"
        )
    # one env's action (a batched env's spec repeats it per env): what the networks and losses read
    size = spec.shape[-1]
    low, high = spec.space.low.reshape(-1, size)[0], spec.space.high.reshape(-1, size)[0]
    return Bounded(low=low, high=high, shape=(size,), dtype=spec.dtype)


def build_agent(config: TrainConfig, env: EnvBase, generator: torch.Generator | None = None) -> Agent:
    """The agent of ``config.algorithm`` for ``env`` (observation ``"observation"``,
    bounded continuous ``"action"``).

    Args:
        config: the run's config.
        env: an env built by :func:`cadence.trainers.environments.make_env` (its specs
            size the networks).
        generator: the generator of exploration noise and of the losses' own draws.

    Raises:
        ConfigError: if the env's actions are not continuous and bounded.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.trainers.config import TrainConfig
        >>> agent = build_agent(TrainConfig(algorithm="sac", hidden_sizes=[8]), GymEnv("Pendulum-v1"))
        >>> sorted(agent.optimizer_groups())
        ['actor', 'alpha', 'critic']
    """
    generator = generator if generator is not None else torch.Generator().manual_seed(config.seed)
    spec = continuous_action_spec(config, env)
    # torch initialises layers from its global generator: seed a fork of it, so that the
    # networks depend on the config's seed alone and the caller's global state is untouched
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return _build_agent(config, env, spec, generator)


def _build_agent(config: TrainConfig, env: EnvBase, spec: Bounded, generator: torch.Generator) -> Agent:
    low, high = spec.space.low.float(), spec.space.high.float()
    action_size = spec.shape[-1]
    observation_size = env.observation_spec["observation"].shape[-1]
    hidden = list(config.hidden_sizes)
    critic = TensorDictModule(
        QNetwork(observation_size + action_size, hidden), ["observation", "action"], ["state_action_value"]
    )
    if config.algorithm == "sac":
        backbone = MLP(in_features=observation_size, out_features=2 * action_size, num_cells=hidden,
                       activation_class=torch.nn.ReLU)
        actor = ProbabilisticActor(
            TensorDictModule(
                torch.nn.Sequential(AsFloat32(), backbone, NormalParamExtractor()), ["observation"], ["loc", "scale"]
            ),
            in_keys=["loc", "scale"], distribution_class=TanhNormal, distribution_kwargs={"low": low, "high": high},
            spec=spec, return_log_prob=False, generator=generator,
        )
        loss: torch.nn.Module = SACLoss(actor, critic, action_spec=spec, generator=generator)
        policy, explore = actor, actor
    else:
        net = torch.nn.Sequential(
            AsFloat32(),
            MLP(in_features=observation_size, out_features=action_size, num_cells=hidden,
                activation_class=torch.nn.ReLU),
            torch.nn.Tanh(),
            ScaleToBounds(low, high),
        )
        policy = TensorDictModule(net, ["observation"], ["action"])
        sigma = config.exploration_noise * float(((high - low) / 2).mean())
        noise = AdditiveGaussianModule(
            spec, sigma_init=sigma, sigma_end=sigma, annealing_num_steps=1, generator=generator
        )
        explore = TensorDictSequential(policy, noise)
        if config.algorithm == "ddpg":
            loss = DDPGLoss(policy, critic)
        else:
            loss = TD3Loss(
                policy, critic, action_spec=spec, policy_noise=config.target_policy_noise,
                noise_clip=config.target_noise_clip, generator=generator,
            )
    loss.make_value_estimator(gamma=config.gamma)
    actor_ids = {id(p) for p in loss.actor_network.parameters()}
    groups: dict[str, list[torch.nn.Parameter]] = {"actor": [], "critic": []}
    for name, parameter in loss.named_parameters():
        if id(parameter) in actor_ids:
            groups["actor"].append(parameter)
        elif "log_alpha" in name:
            groups.setdefault("alpha", []).append(parameter)
        else:
            groups["critic"].append(parameter)
    rates = {"actor": config.actor_lr, "critic": config.critic_lr, "alpha": config.alpha_lr}
    optimizer = torch.optim.Adam([{"params": params, "lr": rates[name]} for name, params in groups.items()])
    return Agent(
        policy=_acting_in(spec.dtype, policy),
        explore=_acting_in(spec.dtype, explore),
        loss=loss,
        optimizer=optimizer,
        target_updater=SoftUpdate(loss, tau=config.tau),
        policy_delay=config.policy_delay if config.algorithm == "td3" else 1,
        groups=groups,
    )

