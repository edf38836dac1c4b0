"""SAC (Haarnoja et al., 2018): a stochastic actor trained to maximise the soft value
``min_i Q_i(s, a) - alpha * log pi(a|s)``, an ensemble of critics fitted to soft
bootstrapped returns, and the entropy weight ``alpha`` tuned to a target entropy.

Without a value network ``SACLoss`` is the second version of the paper ("Soft
Actor-Critic Algorithms and Applications"): the critics' target is
``r + gamma * (min_i Q'_i(s', a') - alpha * log pi(a'|s'))`` with ``a' ~ pi(s')``. With a
value network it is the first: the critics regress to ``r + gamma * V'(s')`` and ``V(s)``
to ``min_i Q_i(s, a) - alpha * log pi(a|s)``, ``a ~ pi(s)``.

Outputs: ``loss_actor``, ``loss_qvalue``, ``loss_alpha`` (``loss_value`` with a value
network) and the metrics ``alpha`` and ``entropy`` (``-log pi`` of the actor's samples,
averaged). The largest squared TD error over the critics is written into the input
(``"td_error"``) for prioritized replay.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule
    >>> from cadence.data import Bounded
    >>> from cadence.modules import MLP, NormalParamExtractor, ProbabilisticActor, TanhNormal, ValueOperator
    >>> net = TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 2), NormalParamExtractor()),
    ...                        ["observation"], ["loc", "scale"])
    >>> actor = ProbabilisticActor(net, in_keys=["loc", "scale"], distribution_class=TanhNormal,
    ...                            spec=Bounded(-1.0, 1.0, shape=(1,)))
    >>> critic = ValueOperator(MLP(in_features=4, out_features=1, num_cells=[8]), in_keys=["observation", "action"])
    >>> loss = SACLoss(actor, critic)
    >>> data = TensorDict({"observation": torch.randn(8, 3), "action": torch.rand(8, 1) * 2 - 1,
    ...     "next": {"observation": torch.randn(8, 3), "reward": torch.randn(8, 1),
    ...              "done": torch.zeros(8, 1, dtype=torch.bool), "terminated": torch.zeros(8, 1, dtype=torch.bool)}}, [8])
    >>> sorted(loss(data).keys())
    ['alpha', 'entropy', 'loss_actor', 'loss_alpha', 'loss_qvalue']
    >>> loss.target_entropy
    -1.0
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import ProbabilisticTensorDictSequential, TensorDictModule
from tensordict.utils import NestedKey

from cadence.data import TensorSpec
from cadence.objectives._shared import (
    check_actor_critic,
    make_return_estimator,
    check_reduction,
    next_key,
    reduce_loss,
    run_ensemble,
    spec_leaf,
    write_priority,
)
from cadence.objectives.common import LossModule
from cadence.objectives.utils import ValueEstimators, distance_loss

__all__ = ["SACLoss"]


class SACLoss(LossModule):
    """The SAC loss, with automatic entropy tuning.

    Args:
        actor_network: a probabilistic actor (``ProbabilisticActor``) whose distribution
            can be sampled with ``rsample`` (a ``TanhNormal``, say).
        qvalue_network: a critic writing ``"state_action_value"`` from the observation and
            action; its parameters are stacked ``num_qvalue_nets`` times.
        value_network: a state-value network writing ``"state_value"``: the first version
            of SAC. ``None`` (the default) is the second version.

    Keyword Args:
        num_qvalue_nets: how many critics.
        loss_function: the critics' (and value network's) distance, ``"l2"``, ``"l1"`` or
            ``"smooth_l1"``.
        alpha_init: the initial entropy weight.
        min_alpha: a floor on the entropy weight (``None``: none).
        max_alpha: a ceiling on it (``None``: none).
        action_spec: the action spec, for ``target_entropy="auto"`` (by default the
            actor's spec; else the size of the first sampled action).
        fixed_alpha: keep ``alpha`` at ``alpha_init`` (``loss_alpha`` is then zero).
        generator: the generator actions are sampled with, when the actor's distribution
            takes one (cadence's ``TanhNormal`` does; torch's own distributions draw from
            torch's global generator).
        target_entropy: the entropy ``alpha`` is tuned towards; ``"auto"`` is minus the
            number of action dims (the last dim of the action spec).
        delay_actor: keep target parameters for the actor (used for the next actions).
        delay_qvalue: keep target parameters for the critics.
        delay_value: keep target parameters for the value network (first version).
        gamma: the discount, if given here (else the value estimator's).
        priority_key: where the TD error is written (default ``"td_error"``).
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over the batch.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.modules import MLP, NormalParamExtractor, ProbabilisticActor, TanhNormal, ValueOperator
        >>> net = TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 4), NormalParamExtractor()),
        ...                        ["observation"], ["loc", "scale"])
        >>> actor = ProbabilisticActor(net, in_keys=["loc", "scale"], distribution_class=TanhNormal)
        >>> critic = ValueOperator(MLP(in_features=5, out_features=1, num_cells=[8]), in_keys=["observation", "action"])
        >>> loss = SACLoss(actor, critic, alpha_init=0.5, min_alpha=0.1)
        >>> round(loss.alpha.item(), 6), "log_alpha" in dict(loss.named_parameters())
        (0.5, True)
    """

    @dataclasses.dataclass
    class _AcceptedKeys:
        """The entries the loss reads and writes."""

        action: NestedKey = "action"
        value: NestedKey = "state_value"
        state_action_value: NestedKey = "state_action_value"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"

    default_value_estimator = ValueEstimators.TD0

    def __init__(
        self,
        actor_network: ProbabilisticTensorDictSequential,
        qvalue_network: TensorDictModule,
        value_network: TensorDictModule | None = None,
        *,
        num_qvalue_nets: int = 2,
        loss_function: str = "smooth_l1",
        alpha_init: float = 1.0,
        min_alpha: float | None = None,
        max_alpha: float | None = None,
        action_spec: TensorSpec | None = None,
        fixed_alpha: bool = False,
        target_entropy: str | float = "auto",
        delay_actor: bool = False,
        delay_qvalue: bool = True,
        delay_value: bool = True,
        gamma: float | None = None,
        priority_key: NestedKey | None = None,
        reduction: str = "mean",
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.generator = generator if generator is not None else torch.Generator()
        self.reduction = check_reduction("SACLoss", reduction)
        distance_loss(torch.zeros(1), torch.zeros(1), loss_function)  # an unknown distance fails here
        if not hasattr(actor_network, "get_dist"):
            raise TypeError(
                f"SACLoss: actor_network must be a probabilistic actor (with get_dist), got "
                f"{type(actor_network).__name__}."
            )
        if num_qvalue_nets < 1:
            raise ValueError(f"SACLoss: num_qvalue_nets must be >= 1, got {num_qvalue_nets}.")
        if alpha_init <= 0:
            raise ValueError(f"SACLoss: alpha_init must be > 0, got {alpha_init}.")
        if min_alpha is not None and max_alpha is not None and min_alpha > max_alpha:
            raise ValueError(f"SACLoss: min_alpha ({min_alpha}) exceeds max_alpha ({max_alpha}).")
        check_actor_critic(actor_network, qvalue_network)
        self.convert_to_functional(actor_network, "actor_network", create_target_params=delay_actor)
        self.convert_to_functional(
            qvalue_network, "qvalue_network", expand_dim=num_qvalue_nets, create_target_params=delay_qvalue
        )
        self.has_value_network = value_network is not None
        if value_network is not None:
            self.convert_to_functional(
                value_network,
                "value_network",
                create_target_params=delay_value,
                compare_against=list(actor_network.parameters()),
            )
            self.value_in_keys = list(value_network.in_keys)
        self.actor_in_keys = list(actor_network.in_keys)
        self.qvalue_in_keys = list(qvalue_network.in_keys)
        self.num_qvalue_nets = int(num_qvalue_nets)
        self.loss_function = loss_function
        self.fixed_alpha = bool(fixed_alpha)
        self.min_log_alpha = math.log(min_alpha) if min_alpha is not None else None
        self.max_log_alpha = math.log(max_alpha) if max_alpha is not None else None
        log_alpha = torch.tensor(math.log(alpha_init), dtype=torch.get_default_dtype())
        if self.fixed_alpha:
            self.register_buffer("log_alpha", log_alpha)
        else:
            self.log_alpha = torch.nn.Parameter(log_alpha)
        self.target_entropy = self._initial_target_entropy(target_entropy, action_spec, actor_network)
        if priority_key is not None:
            self.tensor_keys.priority = priority_key
        if gamma is not None:
            self.gamma = gamma

    @staticmethod
    def _initial_target_entropy(
        target_entropy: str | float, action_spec: TensorSpec | None, actor_network: torch.nn.Module
    ) -> float | None:
        if target_entropy != "auto":
            if isinstance(target_entropy, str):
                raise ValueError(f"SACLoss: target_entropy must be 'auto' or a number, got {target_entropy!r}.")
            return float(target_entropy)
        spec = spec_leaf(action_spec if action_spec is not None else getattr(actor_network, "spec", None))
        if spec is None:
            return None  # set from the first sampled action
        shape = spec.shape[-1:]
        return -float(math.prod(shape)) if len(shape) else -1.0

    @property
    def alpha(self) -> torch.Tensor:
        """The entropy weight, ``exp(log_alpha)`` within ``[min_alpha, max_alpha]`` (no gradient)."""
        with torch.no_grad():
            return self._clamped_log_alpha().exp()

    def _clamped_log_alpha(self) -> torch.Tensor:
        if self.min_log_alpha is None and self.max_log_alpha is None:
            return self.log_alpha
        return self.log_alpha.clamp(self.min_log_alpha, self.max_log_alpha)

    # ------------------------------------------------------------------ value estimator
    def make_value_estimator(self, value_type: ValueEstimators | None = None, **hyperparams: Any) -> SACLoss:
        """Builds the critics' target estimator: TD0, TD1 or TDLambda (SAC has no GAE).

        The estimator runs no network: the loss gives it the soft next-state value.
        """
        make_return_estimator(self, value_type, hyperparams, "the critics are state-action values")
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
        next_inputs = self.value_in_keys if self.has_value_network else self.actor_in_keys
        needed += [next_key(k) for k in next_inputs]
        needed += [next_key(keys.reward), next_key(keys.done), next_key(keys.terminated)]
        self._require(tensordict, *dict.fromkeys(needed))

    def _sample(
        self, data: TensorDictBase, params: TensorDictBase, reparameterize: bool
    ) -> tuple[TensorDictBase, torch.Tensor]:
        """``data`` with an action drawn from the actor (run with ``params``) written in, and its log-prob."""
        inputs = data.select(*self.actor_in_keys, strict=False).copy()
        with params.to_module(self.actor_network):
            dist = self.actor_network.get_dist(inputs)
        if hasattr(dist, "generator"):  # cadence's distributions draw from a given generator
            dist.generator = self.generator
        action = dist.rsample() if reparameterize else dist.sample()
        log_prob = dist.log_prob(action)
        out = data.select(*self.qvalue_in_keys, strict=False).copy()
        out.set(self.tensor_keys.action, action)
        return out, log_prob

    def _update_target_entropy(self, action: torch.Tensor, batch_dims: int) -> None:
        if self.target_entropy is None:
            # "auto" with no spec: minus the number of dims of one action
            self.target_entropy = -float(math.prod(action.shape[batch_dims:]))

    def actor_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """``alpha * log pi(a|s) - min_i Q_i(s, a)``, ``a ~ pi(s)`` reparameterised (the
        critics' parameters held out), and ``log pi(a|s)``, per sample."""
        keys = self.tensor_keys
        data, log_prob = self._sample(tensordict, self.actor_network_params, reparameterize=True)
        self._update_target_entropy(data.get(keys.action), tensordict.batch_dims)
        values = run_ensemble(
            self.qvalue_network, self.qvalue_network_params.detach(), data, keys.state_action_value
        )
        min_value = values.min(0).values.squeeze(-1)
        return self.alpha * log_prob - min_value, log_prob

    def alpha_loss(self, log_prob: torch.Tensor) -> torch.Tensor:
        """``-log_alpha * (log pi + target_entropy)``, per sample (zeros with a fixed alpha)."""
        if self.fixed_alpha:
            return torch.zeros_like(log_prob)
        assert self.target_entropy is not None
        return -self._clamped_log_alpha() * (log_prob.detach() + self.target_entropy)

    def _next_state_value(self, tensordict: TensorDictBase) -> torch.Tensor:
        """The soft value of the next states, ``[*B, 1]`` (no gradient)."""
        keys = self.tensor_keys
        next_data = tensordict.get("next")
        with torch.no_grad():
            if self.has_value_network:
                inputs = next_data.select(*self.value_in_keys, strict=False).copy()
                with self.target_value_network_params.to_module(self.value_network):
                    return self.value_network(inputs).get(keys.value)
            data, log_prob = self._sample(next_data, self.target_actor_network_params, reparameterize=False)
            values = run_ensemble(
                self.qvalue_network, self.target_qvalue_network_params, data, keys.state_action_value
            )
            return values.min(0).values - self.alpha * log_prob.unsqueeze(-1)

    def qvalue_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """The critics' loss (summed over the critics) and squared TD error (their largest), per sample."""
        keys = self.tensor_keys
        next_value = self._next_state_value(tensordict)
        with torch.no_grad():
            target = self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)
        data = tensordict.select(*self.qvalue_in_keys, strict=False)
        predicted = run_ensemble(self.qvalue_network, self.qvalue_network_params, data, keys.state_action_value)
        predicted = predicted.squeeze(-1)
        loss = distance_loss(predicted, target.expand_as(predicted), loss_function=self.loss_function).sum(0)
        return loss, (predicted - target).pow(2).max(0).values

    def value_loss(self, tensordict: TensorDictBase) -> torch.Tensor:
        """First version only: ``V(s)`` against ``min_i Q_i(s, a) - alpha log pi(a|s)``, ``a ~ pi(s)``."""
        keys = self.tensor_keys
        with torch.no_grad():
            data, log_prob = self._sample(tensordict, self.actor_network_params.detach(), reparameterize=False)
            values = run_ensemble(self.qvalue_network, self.qvalue_network_params.detach(), data, keys.state_action_value)
            target = values.min(0).values.squeeze(-1) - self.alpha * log_prob
        inputs = tensordict.select(*self.value_in_keys, strict=False).copy()
        with self.value_network_params.to_module(self.value_network):
            predicted = self.value_network(inputs).get(keys.value).squeeze(-1)
        return distance_loss(predicted, target, loss_function=self.loss_function)

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The losses and metrics of a batch; writes the TD error into ``tensordict``."""
        self._check_input(tensordict)
        loss_qvalue, td_error = self.qvalue_loss(tensordict)
        write_priority(tensordict, self.tensor_keys.priority, td_error)
        loss_actor, log_prob = self.actor_loss(tensordict)
        out = {
            "loss_actor": reduce_loss(loss_actor, self.reduction),
            "loss_qvalue": reduce_loss(loss_qvalue, self.reduction),
            "loss_alpha": reduce_loss(self.alpha_loss(log_prob), self.reduction),
            "alpha": self.alpha,
            "entropy": -log_prob.detach().mean(),
        }
        if self.has_value_network:
            out["loss_value"] = reduce_loss(self.value_loss(tensordict), self.reduction)
        return TensorDict(out, [])
