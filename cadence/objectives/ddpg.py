"""DDPG (Lillicrap et al., 2016): a deterministic actor trained to maximise a critic, and
a critic fitted to bootstrapped returns computed with target networks.

``DDPGLoss`` follows the seed tutorial's loss: its outputs are ``loss_actor``,
``loss_value`` and the metrics ``pred_value``, ``target_value``, ``pred_value_max`` and
``target_value_max``; it writes each sample's squared TD error into its input under
``"td_error"`` for prioritized replay.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule
    >>> actor = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
    >>> critic = TensorDictModule(_Critic(3, 1), ["observation", "action"], ["state_action_value"])
    >>> loss = DDPGLoss(actor, critic)
    >>> data = TensorDict({"observation": torch.randn(8, 3), "action": torch.randn(8, 1),
    ...     "next": {"observation": torch.randn(8, 3), "reward": torch.randn(8, 1),
    ...              "done": torch.zeros(8, 1, dtype=torch.bool), "terminated": torch.zeros(8, 1, dtype=torch.bool)}}, [8])
    >>> sorted(loss(data).keys())
    ['loss_actor', 'loss_value', 'pred_value', 'pred_value_max', 'target_value', 'target_value_max']
    >>> data["td_error"].shape
    torch.Size([8, 1])
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential
from tensordict.utils import NestedKey

from cadence.objectives._shared import check_actor_critic, make_return_estimator
from cadence.objectives.common import LossModule
from cadence.objectives.utils import ValueEstimators, distance_loss, hold_out_net

__all__ = ["DDPGLoss"]


class _Critic(torch.nn.Module):
    """A tiny Q-network for examples: ``Linear(cat(observation, action))``."""

    def __init__(self, observation_size: int, action_size: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(observation_size + action_size, 1)

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.cat([observation, action], -1))


class DDPGLoss(LossModule):
    """The DDPG loss.

    Args:
        actor_network: writes the action (``"action"``) from the observation.
        value_network: writes ``"state_action_value"`` from the observation and action.
        loss_function: the critic's distance, ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        delay_actor: keep target parameters for the actor (the paper: yes).
        delay_value: keep target parameters for the critic (the paper: yes).
        gamma: the discount, if given here (else the value estimator's).
        reduction: how the losses are reduced over the batch, ``"mean"`` or ``"sum"``.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> actor = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
        >>> critic = TensorDictModule(_Critic(3, 1), ["observation", "action"], ["state_action_value"])
        >>> loss = DDPGLoss(actor, critic, gamma=0.9)
        >>> round(float(loss.make_value_estimator(ValueEstimators.TDLambda, lmbda=0.5).value_estimator.gamma), 6)
        0.9
    """

    @dataclasses.dataclass
    class _AcceptedKeys:
        """The entries the loss reads and writes."""

        state_action_value: NestedKey = "state_action_value"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"

    default_value_estimator = ValueEstimators.TD0

    def __init__(
        self,
        actor_network: TensorDictModule,
        value_network: TensorDictModule,
        *,
        loss_function: str = "l2",
        delay_actor: bool = True,
        delay_value: bool = True,
        gamma: float | None = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        if reduction not in ("mean", "sum"):
            raise ValueError(f"DDPGLoss: reduction must be 'mean' or 'sum', got {reduction!r}.")
        distance_loss(torch.zeros(1), torch.zeros(1), loss_function)  # an unknown distance fails here
        check_actor_critic(actor_network, value_network)
        self.convert_to_functional(actor_network, "actor_network", create_target_params=delay_actor)
        self.convert_to_functional(
            value_network,
            "value_network",
            create_target_params=delay_value,
            compare_against=list(actor_network.parameters()),
        )
        self._shares_parameters = bool(
            {id(p) for p in actor_network.parameters()} & {id(p) for p in value_network.parameters()}
        )
        self.actor_in_keys = list(actor_network.in_keys)
        self.value_in_keys = list(value_network.in_keys)
        # the estimator runs actor then critic on the next observations
        self.actor_critic = TensorDictSequential(actor_network, value_network)
        self.loss_function = loss_function
        self.reduction = reduction
        if gamma is not None:
            self.gamma = gamma

    # ------------------------------------------------------------------ value estimator
    def make_value_estimator(self, value_type: ValueEstimators | None = None, **hyperparams: Any) -> DDPGLoss:
        """Builds the critic's target estimator (TD0, TD1 or TDLambda; DDPG has no GAE)."""
        make_return_estimator(self, value_type, hyperparams, "a state-action critic has no advantage", value_network=self.actor_critic)
        return self

    def _forward_keys_to_estimator(self) -> None:
        self._value_estimator.set_keys(
            value=self.tensor_keys.state_action_value,
            reward=self.tensor_keys.reward,
            done=self.tensor_keys.done,
            terminated=self.tensor_keys.terminated,
        )

    # ------------------------------------------------------------------ losses
    def _needed_keys(self) -> list[NestedKey]:
        keys = self.tensor_keys
        needed = [*self.actor_in_keys, *[k for k in self.value_in_keys if k not in self.actor_network.out_keys]]
        needed += [("next", keys.reward), ("next", keys.done), ("next", keys.terminated)]
        needed += [("next", k) if isinstance(k, str) else ("next", *k) for k in self.actor_in_keys]
        needed += [k for k in self.value_in_keys if k in self.actor_network.out_keys]  # the action taken
        return list(dict.fromkeys(needed))

    def _check_input(self, tensordict: TensorDictBase) -> None:
        # a get per key is cheaper than listing the input's keys: that is for the error
        for key in self._needed_keys():
            if tensordict.get(key, None) is None:
                self._require(tensordict, *self._needed_keys())

    # The trainable parameters (<name>_params) are the networks' own parameter objects, so
    # the networks run as they are; only target or detached parameters are swapped in.

    def _critic_held_out(self) -> Any:
        """The critic with its parameters out of the graph: their ``requires_grad`` off for
        the block, or, if the actor shares some of them, a detached copy swapped in."""
        if self._shares_parameters:
            return self.value_network_params.detach().to_module(self.value_network)
        return hold_out_net(self.value_network_params.values(True, True))

    def _tensor_steps(self) -> dict[str, Any] | None:
        """The four networks (actor, critic and their targets) as functions on dicts of
        tensors (``cadence.modules.tensor_view``) when they are ``TensorDictModule``s of
        plain modules with plain keys: an update then builds no tensordict per call.
        ``None`` otherwise (the networks run on tensordicts)."""
        cached = self.__dict__.get("_tensor_steps_cache")
        if cached is None:
            from cadence.modules.tensor_view import compile_policy

            steps = {
                "actor": compile_policy(self.actor_network),
                "critic": compile_policy(self.value_network),
                "target_actor": compile_policy(self.target_network("actor_network")),
                "target_critic": compile_policy(self.target_network("value_network")),
            }
            plain_keys = all(isinstance(k, str) for k in [*self.actor_in_keys, *self.value_in_keys])
            cached = steps if plain_keys and all(step is not None for step in steps.values()) else {}
            self.__dict__["_tensor_steps_cache"] = cached
        return cached or None

    def _critic_of_actor(self, tensordict: TensorDictBase, critic: str, actor: str, prefix: tuple = ()) -> torch.Tensor:
        """``critic(s, actor(s))`` on the states of ``tensordict`` (under ``prefix``)."""
        steps = self._tensor_steps()
        if steps is not None:
            values = {key: tensordict.get((*prefix, key)) for key in self.actor_in_keys}
            steps[actor](values)
            steps[critic](values)
            return values[self.tensor_keys.state_action_value]
        source = tensordict.get(prefix) if prefix else tensordict
        data = source.select(*self.actor_in_keys, strict=False)
        networks = {
            "actor": self.actor_network, "critic": self.value_network,
            "target_actor": self.target_network("actor_network"), "target_critic": self.target_network("value_network"),
        }
        return networks[critic](networks[actor](data)).get(self.tensor_keys.state_action_value)

    def loss_actor(self, tensordict: TensorDictBase) -> torch.Tensor:
        """``-Q(s, pi(s))``, per sample, with the critic's parameters held out."""
        with self._critic_held_out():
            return -self._critic_of_actor(tensordict, "critic", "actor").squeeze(-1)

    def loss_value(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The critic's distance to its target, and (TD error, prediction, target), per sample."""
        steps = self._tensor_steps()
        if steps is not None:
            values = {key: tensordict.get(key) for key in self.value_in_keys}
            steps["critic"](values)
            predicted = values[self.tensor_keys.state_action_value].squeeze(-1)
        else:
            data = self.value_network(tensordict.copy())
            predicted = data.get(self.tensor_keys.state_action_value).squeeze(-1)
        with torch.no_grad():
            # Q'(s', mu'(s')) from the target networks, run as they are
            next_value = self._critic_of_actor(tensordict, "target_critic", "target_actor", ("next",))
            target = self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)
        loss = distance_loss(predicted, target, loss_function=self.loss_function)
        td_error = (predicted - target).pow(2)
        return loss, td_error, predicted, target

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The losses and metrics of a batch; writes ``td_error`` into ``tensordict``."""
        self._check_input(tensordict)
        loss_value, td_error, predicted, target = self.loss_value(tensordict)
        td_error = td_error.detach().unsqueeze(tensordict.ndim)
        if tensordict.device is not None:
            td_error = td_error.to(tensordict.device)
        tensordict.set(self.tensor_keys.priority, td_error)
        loss_actor = self.loss_actor(tensordict)
        reduce = torch.mean if self.reduction == "mean" else torch.sum
        return TensorDict(
            {
                "loss_actor": reduce(loss_actor),
                "loss_value": reduce(loss_value),
                "pred_value": predicted.mean().detach(),
                "target_value": target.mean().detach(),
                "pred_value_max": predicted.max().detach(),
                "target_value_max": target.max().detach(),
            },
            [],
        )
