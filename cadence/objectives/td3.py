"""TD3 (Fujimoto et al., 2018): DDPG with twin critics, clipped noise on the target
policy's actions, and the smaller of the target critics as the bootstrap value.

``TD3Loss`` trains an ensemble of ``num_qvalue_nets`` critics (one network, stacked
parameters, run under ``torch.vmap``) towards ``r + gamma * min_i Q'_i(s', a')`` where
``a' = clip(pi'(s') + clip(noise, -noise_clip, noise_clip), low, high)``, and the actor
to maximise the first critic. Its outputs are ``loss_actor``, ``loss_qvalue`` and the
metrics ``pred_value``, ``state_action_value_actor``, ``next_state_value`` and
``target_value``; it writes each sample's largest squared TD error over the critics
into its input (``"td_error"``) for prioritized replay.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule
    >>> from cadence.modules import MLP, Actor, ValueOperator
    >>> actor = Actor(torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Tanh()))
    >>> critic = ValueOperator(MLP(in_features=4, out_features=1, num_cells=[8]), in_keys=["observation", "action"])
    >>> loss = TD3Loss(actor, critic, bounds=(-1.0, 1.0), generator=torch.Generator().manual_seed(0))
    >>> data = TensorDict({"observation": torch.randn(8, 3), "action": torch.rand(8, 1) * 2 - 1,
    ...     "next": {"observation": torch.randn(8, 3), "reward": torch.randn(8, 1),
    ...              "done": torch.zeros(8, 1, dtype=torch.bool), "terminated": torch.zeros(8, 1, dtype=torch.bool)}}, [8])
    >>> sorted(loss(data).keys())
    ['loss_actor', 'loss_qvalue', 'next_state_value', 'pred_value', 'state_action_value_actor', 'target_value']
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule
from tensordict.utils import NestedKey

from cadence.data import TensorSpec
from cadence.objectives._shared import (
    check_actor_critic,
    make_return_estimator,
    action_bounds,
    check_reduction,
    next_key,
    reduce_loss,
    run_ensemble,
    write_priority,
)
from cadence.objectives.common import LossModule
from cadence.objectives.utils import ValueEstimators, distance_loss

__all__ = ["TD3Loss"]


class TD3Loss(LossModule):
    """The TD3 loss.

    Args:
        actor_network: a deterministic actor writing ``"action"`` from the observation.
        qvalue_network: a critic writing ``"state_action_value"`` from the observation and
            action; its parameters are stacked ``num_qvalue_nets`` times (the first copy is
            the network's own, the others are freshly initialised).

    Keyword Args:
        action_spec: a Bounded spec of the actions (exclusive with ``bounds``).
        bounds: ``(low, high)`` of the actions (exclusive with ``action_spec``). With
            neither, the actor's Bounded ``spec`` is used.
        num_qvalue_nets: how many critics.
        policy_noise: the standard deviation of the Gaussian noise added to the target
            policy's actions.
        noise_clip: that noise is clipped to ``[-noise_clip, noise_clip]``.
        priority_key: where the TD error is written (default ``"td_error"``; also
            ``set_keys(priority=...)``).
        loss_function: the critics' distance, ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        delay_actor: keep target parameters for the actor.
        delay_qvalue: keep target parameters for the critics.
        gamma: the discount, if given here (else the value estimator's).
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over the batch.
        generator: the ``torch.Generator`` the target policy noise is drawn from (by
            default one the loss owns, seeded by the OS).

    Examples:
        >>> import torch
        >>> from cadence.data import Bounded
        >>> from cadence.modules import MLP, Actor, ValueOperator
        >>> actor = Actor(MLP(in_features=3, out_features=2, num_cells=[8]))
        >>> critic = ValueOperator(MLP(in_features=5, out_features=1, num_cells=[8]), in_keys=["observation", "action"])
        >>> loss = TD3Loss(actor, critic, action_spec=Bounded(-1.0, 1.0, shape=(2,)), num_qvalue_nets=3)
        >>> loss.qvalue_network_params["module", "0", "weight"].shape
        torch.Size([3, 8, 5])
    """

    @dataclasses.dataclass
    class _AcceptedKeys:
        """The entries the loss reads and writes."""

        action: NestedKey = "action"
        state_action_value: NestedKey = "state_action_value"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"

    default_value_estimator = ValueEstimators.TD0

    def __init__(
        self,
        actor_network: TensorDictModule,
        qvalue_network: TensorDictModule,
        *,
        action_spec: TensorSpec | None = None,
        bounds: tuple[float | torch.Tensor, float | torch.Tensor] | None = None,
        num_qvalue_nets: int = 2,
        policy_noise: float = 0.2,
        noise_clip: float = 0.5,
        priority_key: NestedKey | None = None,
        loss_function: str = "smooth_l1",
        delay_actor: bool = True,
        delay_qvalue: bool = True,
        gamma: float | None = None,
        reduction: str = "mean",
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.reduction = check_reduction("TD3Loss", reduction)
        distance_loss(torch.zeros(1), torch.zeros(1), loss_function)  # an unknown distance fails here
        if num_qvalue_nets < 1:
            raise ValueError(f"TD3Loss: num_qvalue_nets must be >= 1, got {num_qvalue_nets}.")
        if policy_noise < 0 or noise_clip < 0:
            raise ValueError(
                f"TD3Loss: policy_noise and noise_clip must be >= 0, got policy_noise={policy_noise}, "
                f"noise_clip={noise_clip}."
            )
        low, high = action_bounds("TD3Loss", action_spec, bounds, getattr(actor_network, "spec", None))
        self.register_buffer("action_low", low)
        self.register_buffer("action_high", high)
        check_actor_critic(actor_network, qvalue_network)
        self.convert_to_functional(actor_network, "actor_network", create_target_params=delay_actor)
        self.convert_to_functional(
            qvalue_network, "qvalue_network", expand_dim=num_qvalue_nets, create_target_params=delay_qvalue
        )
        self.actor_in_keys = list(actor_network.in_keys)
        self.qvalue_in_keys = list(qvalue_network.in_keys)
        self.num_qvalue_nets = int(num_qvalue_nets)
        self.policy_noise = float(policy_noise)
        self.noise_clip = float(noise_clip)
        self.loss_function = loss_function
        if priority_key is not None:
            self.tensor_keys.priority = priority_key
        if gamma is not None:
            self.gamma = gamma
        self.generator = generator if generator is not None else torch.Generator()
        if generator is None:
            self.generator.seed()

    # ------------------------------------------------------------------ value estimator
    def make_value_estimator(self, value_type: ValueEstimators | None = None, **hyperparams: Any) -> TD3Loss:
        """Builds the critics' target estimator: TD0, TD1 or TDLambda (TD3 has no GAE).

        The estimator runs no network: the loss gives it ``min_i Q'_i(s', a')``.
        """
        make_return_estimator(self, value_type, hyperparams, "a state-action critic has no advantage")
        return self

    def _forward_keys_to_estimator(self) -> None:
        keys = self.tensor_keys
        self._value_estimator.set_keys(
            value=keys.state_action_value, reward=keys.reward, done=keys.done, terminated=keys.terminated
        )

    # ------------------------------------------------------------------ pieces
    def _check_input(self, tensordict: TensorDictBase) -> None:
        keys = self.tensor_keys
        needed = [*self.actor_in_keys, *[k for k in self.qvalue_in_keys if k != keys.action], keys.action]
        needed += [next_key(k) for k in self.actor_in_keys]
        needed += [next_key(keys.reward), next_key(keys.done), next_key(keys.terminated)]
        self._require(tensordict, *dict.fromkeys(needed))

    def _target_noise(self, action: torch.Tensor) -> torch.Tensor:
        noise = torch.randn(action.shape, generator=self.generator, device=self.generator.device, dtype=action.dtype)
        noise = noise.to(action.device) * self.policy_noise
        return noise.clamp(-self.noise_clip, self.noise_clip)

    def _next_state_value(self, tensordict: TensorDictBase) -> torch.Tensor:
        """``min_i Q'_i(s', a')`` with the smoothed target action, ``[*B, 1]`` (no gradient)."""
        keys = self.tensor_keys
        with torch.no_grad():
            next_data = tensordict.get("next").select(*self.actor_in_keys, *self.qvalue_in_keys, strict=False)
            next_data = next_data.exclude(keys.action)
            with self.target_actor_network_params.to_module(self.actor_network):
                next_data = self.actor_network(next_data)
            action = next_data.get(keys.action)
            action = action + self._target_noise(action)
            low, high = self.action_low.to(action.device), self.action_high.to(action.device)
            next_data.set(keys.action, torch.maximum(torch.minimum(action, high), low))
            next_values = run_ensemble(
                self.qvalue_network, self.target_qvalue_network_params, next_data, keys.state_action_value
            )
            return next_values.min(0).values

    def value_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The critics' loss, reduced as ``reduction`` says, and its metadata
        (``"td_error"`` per sample, ``"pred_value"``, ``"next_state_value"``,
        ``"target_value"``), as the reference returns them: ``loss, _ = loss.value_loss(data)``
        trains the critics alone.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from cadence.data import Bounded
            >>> from cadence.modules import MLP, Actor, ValueOperator
            >>> actor = Actor(MLP(in_features=3, out_features=2, num_cells=[8]))
            >>> critic = ValueOperator(MLP(in_features=5, out_features=1, num_cells=[8]),
            ...                        in_keys=["observation", "action"])
            >>> loss = TD3Loss(actor, critic, action_spec=Bounded(-1.0, 1.0, shape=(2,)))
            >>> data = TensorDict({"observation": torch.randn(4, 3), "action": torch.rand(4, 2),
            ...     "next": {"observation": torch.randn(4, 3), "reward": torch.ones(4, 1),
            ...              "done": torch.zeros(4, 1, dtype=torch.bool),
            ...              "terminated": torch.zeros(4, 1, dtype=torch.bool)}}, [4])
            >>> critic_loss, metadata = loss.value_loss(data)
            >>> critic_loss.shape, metadata["td_error"].shape, loss.actor_loss(data)[0].shape
            (torch.Size([]), torch.Size([4]), torch.Size([]))
        """
        loss, td_error, metrics = self._per_sample_value_loss(tensordict)
        return reduce_loss(loss, self.reduction), {"td_error": td_error.detach(), **metrics}

    def actor_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The actor's loss ``-Q_1(s, pi(s))`` (the critics' parameters held out), reduced
        as ``reduction`` says, and its metadata (``"state_action_value_actor"``)."""
        loss, value = self._per_sample_actor_loss(tensordict)
        return reduce_loss(loss, self.reduction), {"state_action_value_actor": value.detach()}

    def _per_sample_value_loss(
        self, tensordict: TensorDictBase
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """The critics' loss (summed over the critics) and squared TD error (their largest),
        per sample, and metrics."""
        keys = self.tensor_keys
        next_value = self._next_state_value(tensordict)
        with torch.no_grad():
            target = self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)
        data = tensordict.select(*self.qvalue_in_keys, strict=False)
        predicted = run_ensemble(self.qvalue_network, self.qvalue_network_params, data, keys.state_action_value)
        predicted = predicted.squeeze(-1)
        loss = distance_loss(predicted, target.expand_as(predicted), loss_function=self.loss_function).sum(0)
        td_error = (predicted - target).pow(2).max(0).values
        metrics = {
            "pred_value": predicted.detach().mean(),
            "next_state_value": next_value.detach().mean(),
            "target_value": target.detach().mean(),
        }
        return loss, td_error, metrics

    def _per_sample_actor_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """``-Q_1(s, pi(s))`` per sample (the critics' parameters held out), and ``Q_1``."""
        keys = self.tensor_keys
        data = tensordict.select(*self.actor_in_keys, strict=False)
        with self.actor_network_params.to_module(self.actor_network):
            data = self.actor_network(data)
        # the first critic alone, its parameters detached: the actor loss trains the actor only
        first_critic = self.qvalue_network_params.detach()[0]
        with first_critic.to_module(self.qvalue_network):
            value = self.qvalue_network(data.select(*self.qvalue_in_keys, strict=False)).get(keys.state_action_value)
        value = value.squeeze(-1)
        return -value, value

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The losses and metrics of a batch; writes the TD error into ``tensordict``."""
        self._check_input(tensordict)
        loss_qvalue, td_error, metrics = self._per_sample_value_loss(tensordict)
        write_priority(tensordict, self.tensor_keys.priority, td_error)
        loss_actor, actor_value = self._per_sample_actor_loss(tensordict)
        return TensorDict(
            {
                "loss_actor": reduce_loss(loss_actor, self.reduction),
                "loss_qvalue": reduce_loss(loss_qvalue, self.reduction),
                "pred_value": metrics["pred_value"],
                "state_action_value_actor": actor_value.detach().mean(),
                "next_state_value": metrics["next_state_value"],
                "target_value": metrics["target_value"],
            },
            [],
        )
