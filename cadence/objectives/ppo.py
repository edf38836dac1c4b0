"""PPO (Schulman et al., 2017): a policy-gradient step on the importance-weighted advantage,
kept close to the policy that collected the data, with a critic and an entropy bonus.

With ``ratio = pi(a|s) / pi_old(a|s)`` (``pi_old``'s log-probability is the data's
``"action_log_prob"``, as ``ProbabilisticActor(return_log_prob=True)`` writes it) and the
advantage ``A`` (computed by the value estimator, GAE by default, when the data lacks it):

* ``PPOLoss``: ``loss_objective = -ratio * A`` (no constraint: use with care);
* ``ClipPPOLoss``: ``loss_objective = -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)``;
* ``KLPENPPOLoss``: ``loss_objective = -ratio * A + beta * KL(pi_old || pi)``, with ``beta``
  raised or lowered after each batch as the KL runs above or below its target.

All three add ``loss_critic = critic_coeff * d(value_target, V(s))`` and
``loss_entropy = -entropy_coeff * H(pi(.|s))``, and report ``entropy``, ``kl_approx``
(``mean(log pi_old - log pi)``) and ``ESS`` (the effective sample size of the importance
weights over the batch size).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule
    >>> from cadence.modules import OneHotCategorical, ProbabilisticActor, ValueOperator
    >>> actor = ProbabilisticActor(TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["logits"]),
    ...     in_keys=["logits"], distribution_class=OneHotCategorical, return_log_prob=True)
    >>> critic = ValueOperator(torch.nn.Linear(3, 1))
    >>> with torch.no_grad():  # collected data: the old log-probabilities are constants
    ...     data = actor(TensorDict({"observation": torch.randn(4, 5, 3)}, [4, 5]))
    >>> data["next"] = TensorDict({"observation": torch.randn(4, 5, 3), "reward": torch.randn(4, 5, 1),
    ...     "done": torch.zeros(4, 5, 1, dtype=torch.bool), "terminated": torch.zeros(4, 5, 1, dtype=torch.bool)}, [4, 5])
    >>> out = ClipPPOLoss(actor, critic)(data)
    >>> sorted(out.keys())
    ['ESS', 'clip_fraction', 'entropy', 'kl_approx', 'loss_critic', 'loss_entropy', 'loss_objective']
    >>> round(out["clip_fraction"].item(), 6), round(out["ESS"].item(), 6)
    (0.0, 1.0)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import ProbabilisticTensorDictSequential, TensorDictModule
from tensordict.utils import NestedKey

from cadence.objectives._shared import check_reduction, next_key, reduce_loss
from cadence.objectives.common import LossModule
from cadence.objectives.utils import ValueEstimators, default_value_kwargs, distance_loss

__all__ = ["ClipPPOLoss", "KLPENPPOLoss", "PPOLoss"]


def _entropy(dist: torch.distributions.Distribution, samples: int) -> torch.Tensor:
    """The entropy of ``dist``: its closed form, else a Monte-Carlo estimate from
    ``samples`` reparameterised draws (so that it still has a gradient)."""
    try:
        return dist.entropy()
    except NotImplementedError:
        draws = dist.rsample((samples,))
        return -dist.log_prob(draws).mean(0)


def _match(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``value`` (``[*B]`` or ``[*B, 1]``) shaped as ``like`` (``[*B]``)."""
    if value.shape == like.shape:
        return value
    if value.shape == (*like.shape, 1):
        return value.squeeze(-1)
    raise ValueError(f"the advantage of shape {tuple(value.shape)} does not match the log-probabilities' {tuple(like.shape)}.")


class PPOLoss(LossModule):
    """The PPO loss without a constraint on the policy's step (the parent of
    ``ClipPPOLoss`` and ``KLPENPPOLoss``).

    Args:
        actor_network: a probabilistic actor (``ProbabilisticActor``) whose ``get_dist``
            gives the policy's distribution.
        critic_network: a state-value network writing ``"state_value"``; may share
            modules with the actor (``ActorValueOperator``).

    Keyword Args:
        entropy_bonus: add the entropy term.
        samples_mc_entropy: draws for the entropy when the distribution has no closed form.
        entropy_coeff: the entropy term's weight.
        critic_coeff: the critic term's weight; ``None`` leaves ``loss_critic`` out.
            (The reference's names since its v0.11; ``entropy_coef`` and
            ``critic_coef`` are refused naming these.)
        loss_critic_type: the critic's distance, ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        normalize_advantage: standardize the advantage over the batch first.
        gamma: the discount, if given here (else the value estimator's).
        separate_losses: the critic loss gives no gradient to the modules the critic
            shares with the actor.
        advantage_key: the advantage's entry (also ``set_keys(advantage=...)``).
        value_target_key: the value target's entry.
        value_key: the state value's entry.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over the batch.
        clip_value: clip the critic's change from the data's ``"state_value"`` to
            ``[-clip_value, clip_value]`` in a second critic loss and take the larger
            of the two (``None``: no clipping).

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.modules import OneHotCategorical, ProbabilisticActor, ValueOperator
        >>> actor = ProbabilisticActor(TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["logits"]),
        ...     in_keys=["logits"], distribution_class=OneHotCategorical, return_log_prob=True)
        >>> loss = PPOLoss(actor, ValueOperator(torch.nn.Linear(3, 1)))
        >>> loss.tensor_keys.sample_log_prob, type(loss.value_estimator).__name__
        ('action_log_prob', 'GAE')
    """

    @dataclasses.dataclass
    class _AcceptedKeys:
        """The entries the loss reads and writes."""

        advantage: NestedKey = "advantage"
        value_target: NestedKey = "value_target"
        value: NestedKey = "state_value"
        sample_log_prob: NestedKey = "action_log_prob"
        action: NestedKey = "action"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"

    default_value_estimator = ValueEstimators.GAE

    def __init__(
        self,
        actor_network: ProbabilisticTensorDictSequential,
        critic_network: TensorDictModule | None = None,
        *,
        entropy_bonus: bool = True,
        samples_mc_entropy: int = 1,
        entropy_coeff: float = 0.01,
        critic_coeff: float | None = 1.0,
        loss_critic_type: str = "smooth_l1",
        normalize_advantage: bool = False,
        gamma: float | None = None,
        separate_losses: bool = False,
        advantage_key: NestedKey | None = None,
        value_target_key: NestedKey | None = None,
        value_key: NestedKey | None = None,
        reduction: str = "mean",
        clip_value: float | None = None,
        **renamed: Any,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        for old_name in renamed:  # the reference's former spellings get the new name in the error
            new_name = {"entropy_coef": "entropy_coeff", "critic_coef": "critic_coeff"}.get(old_name)
            hint = f"; the argument is called {new_name!r}" if new_name else ""
            raise TypeError(f"{name}: unexpected argument {old_name!r}{hint}")
        self.reduction = check_reduction(name, reduction)
        distance_loss(torch.zeros(1), torch.zeros(1), loss_critic_type)  # an unknown distance fails here
        if not hasattr(actor_network, "get_dist"):
            raise TypeError(
                f"{name}: actor_network must be a probabilistic actor (with get_dist), got {type(actor_network).__name__}."
            )
        if critic_network is None and critic_coeff is not None:
            raise ValueError(f"{name}: without a critic_network, critic_coeff must be None (no critic loss).")
        if samples_mc_entropy < 1:
            raise ValueError(f"{name}: samples_mc_entropy must be >= 1, got {samples_mc_entropy}.")
        if clip_value is not None and clip_value <= 0:
            raise ValueError(f"{name}: clip_value must be > 0 or None, got {clip_value}.")
        self.convert_to_functional(actor_network, "actor_network")
        self.actor_in_keys = list(actor_network.in_keys)
        self.critic_in_keys: list[NestedKey] = []
        self._shared_critic_ids: set[int] = set()
        if critic_network is not None:
            actor_parameters = list(actor_network.parameters())
            self.convert_to_functional(critic_network, "critic_network", compare_against=actor_parameters)
            self.critic_in_keys = list(critic_network.in_keys)
            self._shared_critic_ids = {id(p) for p in actor_parameters} & {id(p) for p in critic_network.parameters()}
        self.has_critic = critic_network is not None
        self.entropy_bonus = bool(entropy_bonus)
        self.samples_mc_entropy = int(samples_mc_entropy)
        self.entropy_coeff = float(entropy_coeff)
        self.critic_coeff = None if critic_coeff is None else float(critic_coeff)
        self.loss_critic_type = loss_critic_type
        self.normalize_advantage = bool(normalize_advantage)
        self.separate_losses = bool(separate_losses)
        self.clip_value = None if clip_value is None else float(clip_value)
        # the log-probability entry is where the actor writes it
        log_prob_key = getattr(actor_network, "log_prob_key", None)
        if log_prob_key is not None:
            self.tensor_keys.sample_log_prob = log_prob_key
        given = {"advantage": advantage_key, "value_target": value_target_key, "value": value_key}
        self.set_keys(**{role: key for role, key in given.items() if key is not None})
        if gamma is not None:
            self.gamma = gamma

    # ------------------------------------------------------------------ value estimator
    def make_value_estimator(self, value_type: ValueEstimators | None = None, **hyperparams: Any) -> PPOLoss:
        """Builds the advantage estimator (GAE, TD0, TD1 or TDLambda) on the critic."""
        from cadence.objectives.value import GAE, TD0Estimator, TD1Estimator, TDLambdaEstimator

        value_type = value_type if value_type is not None else self.default_value_estimator
        estimators = {
            ValueEstimators.TD0: TD0Estimator,
            ValueEstimators.TD1: TD1Estimator,
            ValueEstimators.TDLambda: TDLambdaEstimator,
            ValueEstimators.GAE: GAE,
        }
        if value_type not in estimators:
            raise ValueError(
                f"{type(self).__name__}: unknown value estimator {value_type!r}; use one of "
                f"{[v.name for v in estimators]}."
            )
        if not self.has_critic:
            raise ValueError(
                f"{type(self).__name__} has no critic_network to build a value estimator on: give the data its "
                f"{self.tensor_keys.advantage!r} entry."
            )
        hp = dict(default_value_kwargs(value_type))
        if hasattr(self, "gamma"):
            hp["gamma"] = self.gamma
        hp.update(hyperparams)
        self._value_estimator = estimators[value_type](value_network=self.critic_network, **hp)
        self._forward_keys_to_estimator()
        return self

    def _forward_keys_to_estimator(self) -> None:
        keys = self.tensor_keys
        self._value_estimator.set_keys(
            advantage=keys.advantage,
            value_target=keys.value_target,
            value=keys.value,
            reward=keys.reward,
            done=keys.done,
            terminated=keys.terminated,
        )

    # ------------------------------------------------------------------ pieces
    def _advantage(self, tensordict: TensorDictBase) -> torch.Tensor:
        """The data's advantage, computed (and written, with the value target) when absent."""
        keys = self.tensor_keys
        if keys.advantage not in tensordict.keys(True, True):
            if not self.has_critic:
                self._require(tensordict, keys.advantage)
            self._require(
                tensordict,
                *dict.fromkeys(
                    [*self.critic_in_keys, *[next_key(k) for k in self.critic_in_keys], next_key(keys.reward)]
                ),
            )
            with torch.no_grad():
                self.value_estimator(
                    tensordict,
                    params=self.critic_network_params.detach(),
                    target_params=self.target_critic_network_params,
                )
        advantage = tensordict.get(keys.advantage)
        if self.normalize_advantage and advantage.numel() > 1:
            advantage = (advantage - advantage.mean()) / advantage.std().clamp_min(1e-6)
        return advantage

    def _distribution(self, tensordict: TensorDictBase) -> torch.distributions.Distribution:
        inputs = tensordict.select(*self.actor_in_keys, strict=False).copy()
        with self.actor_network_params.to_module(self.actor_network):
            return self.actor_network.get_dist(inputs)

    def _log_weight(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, torch.distributions.Distribution]:
        """``log pi(a|s) - log pi_old(a|s)`` per sample, and the current distribution."""
        keys = self.tensor_keys
        previous = tensordict.get(keys.sample_log_prob)
        if previous.requires_grad:
            raise ValueError(
                f"{type(self).__name__}: the data's {keys.sample_log_prob!r} requires grad: collect the data under "
                f"torch.no_grad() (the old policy's log-probabilities are constants)."
            )
        dist = self._distribution(tensordict)
        log_prob = dist.log_prob(tensordict.get(keys.action))
        if previous.shape != log_prob.shape and previous.shape == (*log_prob.shape, 1):
            previous = previous.squeeze(-1)
        return log_prob - previous, dist

    def _critic_params(self) -> TensorDictBase:
        params = self.critic_network_params
        if self.separate_losses and self._shared_critic_ids:
            shared = self._shared_critic_ids
            return params.apply(lambda p: p.detach() if id(p) in shared else p)
        return params

    def loss_critic(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``critic_coeff * d(value_target, V(s))`` per sample, and the clipped fraction
        (with ``clip_value``)."""
        keys = self.tensor_keys
        self._require(tensordict, keys.value_target)
        target = tensordict.get(keys.value_target)
        old_value = tensordict.get(keys.value, None) if self.clip_value is not None else None
        if self.clip_value is not None and old_value is None:
            self._require(tensordict, keys.value)
        inputs = tensordict.select(*self.critic_in_keys, strict=False).copy()
        with self._critic_params().to_module(self.critic_network):
            value = self.critic_network(inputs).get(keys.value)
        loss = distance_loss(target, value, loss_function=self.loss_critic_type)
        clip_fraction = None
        if old_value is not None:
            change = value - old_value
            clipped = old_value + change.clamp(-self.clip_value, self.clip_value)
            loss = torch.maximum(loss, distance_loss(target, clipped, loss_function=self.loss_critic_type))
            clip_fraction = (change.abs() > self.clip_value).float().mean().detach()
        assert self.critic_coeff is not None
        if loss.ndim == tensordict.batch_dims + 1 and loss.shape[-1] == 1:
            loss = loss.squeeze(-1)  # one value per sample
        return self.critic_coeff * loss, clip_fraction

    def _objective(
        self, log_weight: torch.Tensor, advantage: torch.Tensor, tensordict: TensorDictBase,
        dist: torch.distributions.Distribution, out: dict[str, torch.Tensor],
    ) -> torch.Tensor:
        """The per-sample policy loss (subclasses constrain it) and its metrics, into ``out``."""
        return -(log_weight.exp() * advantage)

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The losses and metrics of a batch (the advantage is computed into a shallow copy
        of ``tensordict`` when absent)."""
        keys = self.tensor_keys
        tensordict = tensordict.copy()
        self._require(tensordict, *dict.fromkeys([*self.actor_in_keys, keys.action, keys.sample_log_prob]))
        advantage = self._advantage(tensordict)
        log_weight, dist = self._log_weight(tensordict)
        advantage = _match(advantage, log_weight)
        out: dict[str, torch.Tensor] = {}
        objective = self._objective(log_weight, advantage, tensordict, dist, out)
        out["loss_objective"] = reduce_loss(objective, self.reduction)
        with torch.no_grad():
            flat = log_weight.detach().reshape(-1)
            out["kl_approx"] = (-flat).mean()
            # effective sample size of the importance weights, over the batch size
            out["ESS"] = (2 * flat.logsumexp(0) - (2 * flat).logsumexp(0)).exp() / flat.numel()
        if self.entropy_bonus:
            entropy = _entropy(dist, self.samples_mc_entropy)
            out["entropy"] = entropy.detach().mean()
            out["loss_entropy"] = reduce_loss(-self.entropy_coeff * entropy, self.reduction)
        if self.critic_coeff is not None:
            loss_critic, value_clip_fraction = self.loss_critic(tensordict)
            out["loss_critic"] = reduce_loss(loss_critic, self.reduction)
            if value_clip_fraction is not None:
                out["value_clip_fraction"] = value_clip_fraction
        return TensorDict(out, [])


class ClipPPOLoss(PPOLoss):
    """The clipped PPO loss: ``-min(ratio * A, clip(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * A)``.

    Args:
        actor_network: a probabilistic actor.
        critic_network: a state-value network.

    Keyword Args:
        clip_epsilon: how far the ratio may move from 1 before its gradient is cut.
        **kwargs: as ``PPOLoss`` (``entropy_bonus``, ``samples_mc_entropy``,
            ``entropy_coeff``, ``critic_coeff``, ``loss_critic_type``, ``normalize_advantage``,
            ``gamma``, ``separate_losses``, the keys, ``reduction``, ``clip_value``).

    Outputs ``clip_fraction`` too: the share of samples whose ratio lies outside
    ``[1 - clip_epsilon, 1 + clip_epsilon]``.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.modules import OneHotCategorical, ProbabilisticActor, ValueOperator
        >>> actor = ProbabilisticActor(TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["logits"]),
        ...     in_keys=["logits"], distribution_class=OneHotCategorical, return_log_prob=True)
        >>> ClipPPOLoss(actor, ValueOperator(torch.nn.Linear(3, 1)), clip_epsilon=0.1).clip_epsilon
        0.1
    """

    def __init__(
        self,
        actor_network: ProbabilisticTensorDictSequential,
        critic_network: TensorDictModule | None = None,
        *,
        clip_epsilon: float = 0.2,
        **kwargs: Any,
    ) -> None:
        super().__init__(actor_network, critic_network, **kwargs)
        if not 0.0 < clip_epsilon:
            raise ValueError(f"ClipPPOLoss: clip_epsilon must be > 0, got {clip_epsilon}.")
        self.clip_epsilon = float(clip_epsilon)

    def _objective(
        self, log_weight: torch.Tensor, advantage: torch.Tensor, tensordict: TensorDictBase,
        dist: torch.distributions.Distribution, out: dict[str, torch.Tensor],
    ) -> torch.Tensor:
        ratio = log_weight.exp()
        clipped = ratio.clamp(1.0 - self.clip_epsilon, 1.0 + self.clip_epsilon)
        out["clip_fraction"] = ((ratio.detach() - 1.0).abs() > self.clip_epsilon).float().mean()
        return -torch.minimum(ratio * advantage, clipped * advantage)


class KLPENPPOLoss(PPOLoss):
    """The KL-penalised PPO loss: ``-ratio * A + beta * KL(pi_old || pi)``.

    The old policy's distribution is rebuilt from its parameters in the data (the
    entries the actor's distribution reads, e.g. ``"loc"``/``"scale"`` or ``"logits"``,
    as the actor wrote them when collecting). After each batch ``beta`` is multiplied by
    ``increment`` if the mean KL exceeded ``1.5 * dtarg``, by ``decrement`` if it fell
    under ``dtarg / 1.5``.

    Args:
        actor_network: a probabilistic actor.
        critic_network: a state-value network.

    Keyword Args:
        dtarg: the target KL.
        beta: the initial KL weight.
        increment: ``beta``'s factor when the KL is too large (> 1).
        decrement: ``beta``'s factor when the KL is too small (< 1).
        samples_mc_kl: draws for the KL when it has no closed form.
        **kwargs: as ``PPOLoss``.

    Outputs ``kl`` (the mean KL) too.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.modules import OneHotCategorical, ProbabilisticActor, ValueOperator
        >>> actor = ProbabilisticActor(TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["logits"]),
        ...     in_keys=["logits"], distribution_class=OneHotCategorical, return_log_prob=True)
        >>> loss = KLPENPPOLoss(actor, None, critic_coeff=None, beta=1.0, dtarg=0.01)
        >>> with torch.no_grad():
        ...     data = actor(TensorDict({"observation": torch.randn(6, 3)}, [6]))
        >>> data["advantage"] = torch.randn(6, 1)
        >>> out = loss(data)
        >>> out["kl"].abs().item() < 1e-6, loss.beta.item()  # no step taken yet: KL 0, beta halved
        (True, 0.5)
    """

    def __init__(
        self,
        actor_network: ProbabilisticTensorDictSequential,
        critic_network: TensorDictModule | None = None,
        *,
        dtarg: float = 0.01,
        beta: float = 1.0,
        increment: float = 2.0,
        decrement: float = 0.5,
        samples_mc_kl: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(actor_network, critic_network, **kwargs)
        if increment < 1.0 or not 0.0 < decrement <= 1.0:
            raise ValueError(
                f"KLPENPPOLoss: increment must be >= 1 and decrement in (0, 1], got increment={increment}, "
                f"decrement={decrement}."
            )
        if samples_mc_kl < 1:
            raise ValueError(f"KLPENPPOLoss: samples_mc_kl must be >= 1, got {samples_mc_kl}.")
        self.dtarg = float(dtarg)
        self.register_buffer("beta", torch.tensor(float(beta)))
        self.increment = float(increment)
        self.decrement = float(decrement)
        self.samples_mc_kl = int(samples_mc_kl)

    def _old_distribution(self, tensordict: TensorDictBase) -> torch.distributions.Distribution:
        builder = self.actor_network.module[-1]
        params = [k for k in builder.in_keys]
        self._require(tensordict, *params)
        return builder.get_dist(tensordict.select(*params))

    def _objective(
        self, log_weight: torch.Tensor, advantage: torch.Tensor, tensordict: TensorDictBase,
        dist: torch.distributions.Distribution, out: dict[str, torch.Tensor],
    ) -> torch.Tensor:
        old = self._old_distribution(tensordict)
        try:
            kl = torch.distributions.kl_divergence(old, dist)
        except NotImplementedError:
            draws = old.sample((self.samples_mc_kl,))
            kl = (old.log_prob(draws) - dist.log_prob(draws)).mean(0)
        beta = self.beta.clone()
        with torch.no_grad():
            mean_kl = kl.detach().mean()
            if mean_kl > 1.5 * self.dtarg:
                self.beta.mul_(self.increment)
            elif mean_kl < self.dtarg / 1.5:
                self.beta.mul_(self.decrement)
        out["kl"] = mean_kl
        return -(log_weight.exp() * advantage) + beta * kl
