"""A KL penalty on the reward: ``KLRewardTransform``.

The transform keeps a frozen copy of a policy's parameters (the reference policy
``pi_0``) and, at each step, penalises the reward with the log-ratio of the action's
probability under the current policy and under ``pi_0``: an estimate of
``KL[pi_current || pi_0]`` that keeps fine-tuned policies close to where they started.

Examples:
    >>> import torch
    >>> from tensordict.nn import NormalParamExtractor, ProbabilisticTensorDictModule as Prob
    >>> from tensordict.nn import ProbabilisticTensorDictSequential as Seq, TensorDictModule as Mod
    >>> from cadence.envs.custom import PendulumEnv
    >>> from cadence.envs.transforms import TransformedEnv
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> features = Mod(lambda th, thdot: torch.stack([th, thdot], -1), ["th", "thdot"], ["obs"])
    >>> net = Mod(torch.nn.Sequential(torch.nn.Linear(2, 2), NormalParamExtractor()), ["obs"], ["loc", "scale"])
    >>> actor = Seq(features, net, Prob(["loc", "scale"], ["action"], distribution_class=torch.distributions.Normal,
    ...                                 return_log_prob=True))
    >>> env = TransformedEnv(PendulumEnv(seed=0), KLRewardTransform(actor, coef=0.5))
    >>> data = env.rollout(3, actor)
    >>> data["next", "kl"].abs().max().item()  # the policy has not changed yet
    0.0
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase, TensorDictParams
from tensordict.nn import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential
from tensordict.utils import unravel_key

from cadence.data import Composite, Unbounded
from cadence.envs.transforms.base import NestedKey, Transform

__all__ = ["KLRewardTransform"]


class KLRewardTransform(Transform):
    """Adds a ``KL[pi_current || pi_0]`` correction term to the reward.

    At construction the transform stores a frozen copy of ``actor``'s parameters and
    buffers: the reference policy ``pi_0``. For each step it reads, in the step's input
    (the data the policy acted on), the action taken and the log-probability the policy
    wrote for it (``log_prob_key``; when the input has none, as with random actions, the
    log-probability of the action under the actor's current parameters is used), computes
    the log-probability of the same action under ``pi_0``, and writes

    - ``kl = log_prob_current - log_prob_0`` at ``kl_key`` in the step's output (next to
      the reward: ``data["next", "kl"]`` in a rollout), and
    - ``reward - coef * kl`` at each ``out_key``.

    ``kl`` is the single-sample estimate of the KL divergence (its mean over actions drawn
    from the current policy is the divergence); it is ``0`` as long as the actor's
    parameters have not moved. Log-probabilities with trailing dims (a factorised
    ``Normal`` over an action vector) are summed over them: the joint log-probability of
    the action.

    Specs: each reward ``out_key`` is an ``Unbounded`` leaf of the reward's shape and
    dtype (the reward spec keeps its shape); ``kl_key`` is an ``Unbounded`` observation of
    the same shape, ``0`` after a reset (like ``"episode_reward"`` of ``RewardSum``).

    Called on a bare tensordict (``transform(data)``, e.g. collected data of batch
    ``[*B, T]``), the transform reads the action, the inputs of the actor and the
    log-probabilities at the root, and the rewards under ``"next"`` when the data has
    them there (else at the root); ``kl`` is written next to the rewards.

    The live ``actor`` is kept out of this transform's module tree (its parameters stay
    its own); the frozen copy is part of it and follows ``.to()``.

    Args:
        actor: the policy: a ``ProbabilisticTensorDictModule`` or a
            ``ProbabilisticTensorDictSequential`` (anything with ``get_dist``, ``in_keys``
            and a distribution to sample the action from).
        coef: the coefficient of the KL term.
        in_keys: the rewards to penalise (``"reward"``).
        out_keys: where the penalised rewards go (``in_keys``).
        requires_grad: if ``True``, the frozen copy is made of differentiable leaf
            parameters (``nn.Parameter`` copies of the actor's parameters, listed by
            ``transform.parameters()``) and the KL term keeps its graph; by default the
            copy is made of buffers and the KL term is computed without gradients.
        log_prob_key: where the policy writes the action's log-probability (the
            actor's ``log_prob_key``, e.g. ``"action_log_prob"``, by default).
        action_key: the action (the actor's sampled key by default).
        kl_key: where the KL term goes (``"kl"``).

    Raises:
        TypeError: for an actor without ``get_dist``.
        ValueError: when the actor samples several keys and no ``action_key`` is given,
            or ``kl_key`` names an existing entry of the env.
        KeyError: when a step's input lacks the action or an input of the actor.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import NormalParamExtractor, ProbabilisticTensorDictModule as Prob
        >>> from tensordict.nn import ProbabilisticTensorDictSequential as Seq, TensorDictModule as Mod
        >>> net = Mod(torch.nn.Sequential(torch.nn.Linear(1, 2), NormalParamExtractor()), ["obs"], ["loc", "scale"])
        >>> actor = Seq(net, Prob(["loc", "scale"], ["action"], distribution_class=torch.distributions.Normal,
        ...                       return_log_prob=True))
        >>> kl_reward = KLRewardTransform(actor, coef=2.0)
        >>> data = actor(TensorDict({"obs": torch.zeros(4, 1)}, [4]))
        >>> data["next"] = TensorDict({"reward": torch.ones(4, 1)}, [4])
        >>> kl_reward(data.clone())["next", "kl"].abs().max().item()  # the actor has not moved
        0.0
        >>> with torch.no_grad():
        ...     _ = net.module[0].bias.add_(1.0)  # the policy moves on
        >>> out = kl_reward(actor(data))  # actions and log-probs of the moved policy
        >>> bool((out["next", "kl"] != 0).all())
        True
        >>> bool(torch.allclose(out["next", "reward"], 1 - 2.0 * out["next", "kl"]))
        True
    """

    def __init__(
        self,
        actor: Any,
        coef: float = 1.0,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        requires_grad: bool = False,
        log_prob_key: NestedKey | None = None,
        action_key: NestedKey | None = None,
        kl_key: NestedKey = "kl",
    ) -> None:
        super().__init__(in_keys if in_keys is not None else ["reward"], out_keys)
        if not callable(getattr(actor, "get_dist", None)) or not hasattr(actor, "in_keys"):
            raise TypeError(
                "KLRewardTransform: actor must be a ProbabilisticTensorDictModule or a "
                f"ProbabilisticTensorDictSequential (with get_dist and in_keys), got {type(actor).__name__}."
            )
        self.coef = float(coef)
        self.requires_grad = bool(requires_grad)
        self.action_key = unravel_key(action_key) if action_key is not None else self._find_action_key(actor)
        if log_prob_key is None:
            log_prob_key = getattr(actor, "log_prob_key", None)
        self.log_prob_key = unravel_key(log_prob_key) if log_prob_key is not None else None
        self.kl_key = unravel_key(kl_key)
        self.__dict__["_actor"] = actor  # the live policy: outside this module tree
        params = TensorDict.from_module(actor)
        if self.requires_grad:
            frozen = params.apply(
                lambda t: torch.nn.Parameter(t.detach().clone()) if isinstance(t, torch.nn.Parameter)
                else t.detach().clone()
            )
        else:
            frozen = params.detach().clone()
        self.frozen_params = TensorDictParams(frozen, no_convert=True)
        self._reward_specs: dict[NestedKey, Any] = {}
        self._env_batch_dims = 0

    @staticmethod
    def _find_action_key(actor: Any) -> NestedKey:
        last = actor
        if isinstance(actor, ProbabilisticTensorDictSequential):
            last = actor.module[-1]
        keys = list(getattr(last, "dist_sample_keys", []) or [])
        if isinstance(last, ProbabilisticTensorDictModule) and not keys:
            keys = [k for k in last.out_keys if k not in last.log_prob_keys]
        if len(keys) != 1:
            raise ValueError(
                f"KLRewardTransform: cannot tell the action among the actor's sampled keys {keys}; pass action_key."
            )
        return unravel_key(keys[0])

    @property
    def actor(self) -> Any:
        """The live policy (whose current log-probabilities are compared with the frozen copy's)."""
        return self.__dict__["_actor"]

    # ------------------------------------------------------------------ the KL term
    def _grad_context(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext() if self.requires_grad else torch.no_grad()

    def _joint(self, log_prob: torch.Tensor, batch_dims: int) -> torch.Tensor:
        if log_prob.ndim > batch_dims:
            return log_prob.flatten(batch_dims).sum(-1)
        return log_prob

    def _log_prob(self, inputs: TensorDictBase, action: torch.Tensor) -> torch.Tensor:
        return self._joint(self.actor.get_dist(inputs.copy()).log_prob(action), inputs.batch_dims)

    def _kl(self, data: TensorDictBase) -> torch.Tensor:
        """``log_prob_current - log_prob_0`` of the action of each element of ``data`` (batch shape)."""
        action = data.get(self.action_key, None)
        if action is None:
            raise KeyError(
                f"KLRewardTransform: the data lacks the action {self.action_key!r}; it holds "
                f"{sorted(map(str, data.keys(True, True)))}."
            )
        present = set(data.keys(include_nested=True))
        missing = [key for key in self.actor.in_keys if unravel_key(key) not in present]
        if missing:
            raise KeyError(
                f"KLRewardTransform: the data lacks the actor's inputs {missing}; it holds "
                f"{sorted(map(str, data.keys(True, True)))}."
            )
        inputs = data.select(*self.actor.in_keys)
        with self._grad_context():
            with self.frozen_params.to_module(self.actor):
                reference = self._log_prob(inputs, action)
            current = data.get(self.log_prob_key, None) if self.log_prob_key is not None else None
            if current is None:
                current = self._log_prob(inputs, action)
            else:
                current = self._joint(current, data.batch_dims)
                if not self.requires_grad:
                    current = current.detach()
            return current - reference

    def _penalise(self, kl: torch.Tensor, rewards: TensorDictBase) -> None:
        """Writes ``reward - coef * kl`` at each out key and ``kl`` at ``kl_key`` of ``rewards``."""
        written = False
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            reward = rewards.get(in_key, None)
            if reward is None:
                continue
            term = kl.reshape(*kl.shape, *[1] * (reward.ndim - kl.ndim)).to(reward.dtype)
            rewards.set(out_key, reward - self.coef * term)
            if not written:
                rewards.set(self.kl_key, term.expand_as(reward).clone())
                written = True

    # ------------------------------------------------------------------ data
    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        kl = self._kl(tensordict)
        self._penalise(kl, next_tensordict)
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        spec = self._reward_specs.get(self.in_keys[0]) if self.in_keys else None
        if spec is None:
            return tensordict_reset
        extra = tensordict_reset.batch_size[: tensordict_reset.batch_dims - self._env_batch_dims]
        zeros = torch.zeros((*extra, *spec.shape), dtype=spec.dtype, device=tensordict_reset.device)
        tensordict_reset.set(self.kl_key, zeros)
        return tensordict_reset

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Penalises the rewards of collected data (under ``"next"`` when they are there)."""
        return self._call(tensordict)

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        nested = tensordict.get("next", None)
        in_next = isinstance(nested, TensorDictBase) and any(
            key in nested.keys(include_nested=True) for key in self.in_keys
        )
        rewards = nested if in_next else tensordict
        if not any(key in rewards.keys(include_nested=True) for key in self.in_keys):
            raise KeyError(
                f"KLRewardTransform: the data holds none of the rewards {self.in_keys}, at its root or under 'next'."
            )
        self._penalise(self._kl(tensordict), rewards)
        return tensordict

    # ------------------------------------------------------------------ specs
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        reward_spec = output_spec["full_reward_spec"]
        self._reward_specs = {key: reward_spec[key] for key in self.in_keys if key in reward_spec.keys(True, True)}
        self._env_batch_dims = len(output_spec.shape)
        taken = set()
        for name in ("full_observation_spec", "full_reward_spec", "full_done_spec"):
            taken |= set(output_spec[name].keys(True, True))
        if self.kl_key in taken:
            raise ValueError(
                f"KLRewardTransform: kl_key {self.kl_key!r} names an entry the env already emits; pick another kl_key."
            )
        return super().transform_output_spec(output_spec)

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        return self._output_leaf_specs(
            reward_spec, lambda leaf: Unbounded(shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)
        )

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        leaf = self._reward_specs.get(self.in_keys[0]) if self.in_keys else None
        if leaf is not None:
            observation_spec[self.kl_key] = Unbounded(shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)
        return observation_spec

    def __repr__(self) -> str:
        return (
            f"KLRewardTransform(coef={self.coef}, in_keys={self.in_keys}, out_keys={self.out_keys}, "
            f"action_key={self.action_key!r}, log_prob_key={self.log_prob_key!r}, kl_key={self.kl_key!r})"
        )
