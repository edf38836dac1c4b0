"""Tensordict-reading policies and value functions: deterministic and
probabilistic actors, value operators, actor-critic containers, the greedy
Q-value actor and the tanh squashing module.

They are ``tensordict.nn`` modules: they read their ``in_keys`` from a tensordict
and write their ``out_keys`` into it, so they plug into env rollouts, collectors
and losses unchanged.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.modules import MLP, ValueOperator
    >>> value = ValueOperator(MLP(out_features=1, num_cells=[8]), in_keys=["observation", "action"])
    >>> value.out_keys
    ['state_action_value']
    >>> value(TensorDict(observation=torch.zeros(4, 3), action=torch.zeros(4, 1), batch_size=[4]))["state_action_value"].shape
    torch.Size([4, 1])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import (
    InteractionType,
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictModuleBase,
    TensorDictSequential,
)
from torch import nn

from cadence.data import Bounded, Categorical, Composite, OneHot, TensorSpec
from cadence.data.dtypes import cast
from cadence.modules.distributions import Delta, TanhDelta, TanhNormal

__all__ = [
    "Actor",
    "ValueOperator",
    "ProbabilisticActor",
    "ActorCriticWrapper",
    "ActorValueOperator",
    "QValueModule",
    "QValueActor",
    "TanhModule",
    "NormalParamExtractor",
]

NestedKey = str | tuple[str, ...]


def _key_list(keys: NestedKey | Sequence[NestedKey] | None, default: list[NestedKey]) -> list[NestedKey]:
    if keys is None:
        return list(default)
    if isinstance(keys, (str, tuple)):
        return [keys]
    return list(keys)


def _as_composite(spec: TensorSpec | None, out_keys: Sequence[NestedKey], owner: str) -> Composite:
    """The spec of ``out_keys`` as a Composite (a leaf spec is put under the single out key)."""
    if spec is None:
        return Composite()
    if isinstance(spec, Composite):
        return spec
    if len(out_keys) != 1:
        raise ValueError(
            f"{owner}: a leaf spec needs exactly one out key to describe, got out_keys={list(out_keys)}; "
            "pass a Composite keyed by out key instead"
        )
    composite = Composite()
    composite[out_keys[0]] = spec
    return composite


def _spec_leaf(spec: Composite, key: NestedKey) -> TensorSpec | None:
    return spec.get(key, None) if key in spec else None


def bounds_of(spec: Bounded) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``low`` and ``high`` of a Bounded spec, without its uniform leading batch dims.

    An env with ``batch_size=[4]`` has an action spec of shape ``[4, 6]``; its bounds
    are the same for each env, and dropping that dim lets them broadcast against
    data of any batch shape (a replay buffer's ``[B, T, 6]``).

    Args:
        spec: a Bounded spec.

    Returns:
        The ``(low, high)`` tensors.

    Examples:
        >>> from cadence.data import Bounded
        >>> from cadence.modules.actors import bounds_of
        >>> low, high = bounds_of(Bounded(-2.0, 2.0, shape=(4, 1)))
        >>> low.shape, high.tolist()
        (torch.Size([1]), [2.0])
    """
    low, high = spec.low, spec.high
    while low.ndim > 1 and bool((low == low[:1]).all()) and bool((high == high[:1]).all()):
        low, high = low[0], high[0]
    return low, high


def _projected(value: torch.Tensor, spec: TensorSpec | None) -> torch.Tensor:
    """``value`` projected into ``spec`` (``None``: left as it is): clamped into a Bounded
    spec's bounds (two ops, cheaper than asking first), any other spec's ``project`` where
    the value lies outside it."""
    if spec is None:
        return value
    if isinstance(spec, Bounded):
        low, high = bounds_of(spec)
        return torch.maximum(torch.minimum(value, high.to(value.device)), low.to(value.device))
    return value if spec.is_in(value) else spec.project(value)


def _project(tensordict: TensorDictBase, spec: Composite, keys: Sequence[NestedKey]) -> None:
    """Writes back each key's value projected into its spec, where it lies outside."""
    for key in keys:
        value = tensordict.get(key, None)
        if value is not None:
            projected = _projected(value, _spec_leaf(spec, key))
            if projected is not value:
                tensordict.set(key, projected)


class _HoldsSpec:
    """Moves ``self.spec`` along with the parameters in ``.to(device)``."""

    spec: Composite

    def to(self, *args: Any, **kwargs: Any) -> Any:
        out = super().to(*args, **kwargs)  # type: ignore[misc]
        device = torch._C._nn._parse_to(*args, **kwargs)[0]
        if device is not None and not self.spec.is_empty():
            self.spec = self.spec.to(device)
        return out


class Actor(_HoldsSpec, TensorDictModule):
    """A deterministic policy: ``module(observation) -> action`` on tensordicts.

    Args:
        module: the network (any callable module).
        in_keys: the keys it reads; default ``["observation"]``.
        out_keys: the keys it writes; default ``["action"]``.
        spec: the spec of the output(s): a leaf (for a single out key) or a
            Composite keyed by out key. Kept as ``actor.spec``.
        safe: project outputs that fall outside ``spec`` back into it.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data import Bounded
        >>> from cadence.modules import Actor
        >>> actor = Actor(torch.nn.Linear(3, 1), spec=Bounded(-1.0, 1.0, shape=(1,)), safe=True)
        >>> with torch.no_grad():
        ...     _ = actor.module.bias.fill_(10.0)
        >>> actor(TensorDict(observation=torch.zeros(3)))["action"].tolist()
        [1.0]
        >>> actor.spec["action"].shape
        torch.Size([1])
    """

    def __init__(
        self,
        module: nn.Module,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        *,
        spec: TensorSpec | None = None,
        safe: bool = False,
    ) -> None:
        in_list = _key_list(in_keys, ["observation"])
        out_list = _key_list(out_keys, ["action"])
        super().__init__(module, in_keys=in_list, out_keys=out_list)
        self.spec = _as_composite(spec, out_list, "Actor")
        self.safe = safe

    def forward(self, tensordict: TensorDictBase, *args: Any, **kwargs: Any) -> TensorDictBase:
        """Writes the module's outputs (projected into the spec if ``safe``)."""
        out = super().forward(tensordict, *args, **kwargs)
        if self.safe:
            _project(out, self.spec, self.out_keys)
        return out


class ValueOperator(TensorDictModule):
    """A value function on tensordicts.

    Its default out key is ``"state_action_value"`` when ``"action"`` is one of
    the in keys (a Q-function) and ``"state_value"`` otherwise.

    Args:
        module: the network; called with the in keys' values in order.
        in_keys: the keys it reads; default ``["observation"]``.
        out_keys: the keys it writes; default as above.

    Examples:
        >>> import torch
        >>> from cadence.modules import MLP, ValueOperator
        >>> ValueOperator(MLP(out_features=1, num_cells=[8])).out_keys
        ['state_value']
    """

    def __init__(
        self,
        module: nn.Module,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        in_list = _key_list(in_keys, ["observation"])
        default_out = "state_action_value" if "action" in in_list else "state_value"
        out_list = _key_list(out_keys, [default_out])
        super().__init__(module, in_keys=in_list, out_keys=out_list)


_BOUNDED_DISTRIBUTIONS: tuple[type, ...] = (TanhNormal, TanhDelta)


class ProbabilisticActor(_HoldsSpec, ProbabilisticTensorDictSequential):
    """A policy that writes a sample of a distribution built from its module's outputs.

    ``module`` writes the distribution's parameters (e.g. ``"loc"``/``"scale"``, or
    ``"param"`` for :class:`TanhDelta`); a ``ProbabilisticTensorDictModule`` reads
    them (``in_keys``; a dict maps distribution kwarg names to keys) and writes the
    sample under ``out_keys``. Which sample it is follows the interaction type
    (``tensordict.nn.set_interaction_type`` / ``cadence.envs.utils.set_exploration_type``):
    ``RANDOM`` draws, ``DETERMINISTIC`` takes the distribution's
    ``deterministic_sample``, ``MODE``/``MEAN`` its mode/mean.

    When the distribution is bounded (:class:`TanhNormal`, :class:`TanhDelta`) and
    ``spec`` gives a Bounded spec for the action, its bounds fill the ``low``/``high``
    distribution kwargs that are not given.

    Args:
        module: a tensordict module writing the distribution's parameters.
        in_keys: the parameter keys (a list, or a dict ``{kwarg: key}``).
        out_keys: the sample's key(s); default ``["action"]``.
        spec: the spec of the sample: a leaf or a Composite keyed by out key.
        distribution_class: the distribution built from the parameters.
        distribution_kwargs: extra kwargs of the distribution.
        return_log_prob: also write the sample's log-probability.
        default_interaction_type: the interaction type used when none is set.
        safe: project samples that fall outside ``spec`` back into it.
        cache_dist: keep the last distribution (see tensordict).
        n_empirical_estimate: samples averaged for ``MEAN`` when the distribution
            has no closed-form mean.
        log_prob_key: where to write the log-probability.
        generator: a ``torch.Generator`` that ``RANDOM`` samples are drawn from.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.data import Bounded, Composite
        >>> from cadence.modules import ProbabilisticActor, TanhDelta
        >>> net = TensorDictModule(torch.nn.Linear(3, 2), in_keys=["observation"], out_keys=["param"])
        >>> actor = ProbabilisticActor(net, in_keys=["param"], distribution_class=TanhDelta,
        ...     spec=Composite(action=Bounded(-2.0, 2.0, shape=(2,))))
        >>> action = actor(TensorDict(observation=torch.randn(5, 3), batch_size=[5]))["action"]
        >>> action.shape, bool(action.abs().max() <= 2.0)
        (torch.Size([5, 2]), True)
    """

    def __init__(
        self,
        module: TensorDictModuleBase,
        in_keys: NestedKey | Sequence[NestedKey] | dict[str, NestedKey],
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        *,
        spec: TensorSpec | None = None,
        distribution_class: type = Delta,
        distribution_kwargs: dict | None = None,
        return_log_prob: bool = False,
        default_interaction_type: InteractionType = InteractionType.DETERMINISTIC,
        safe: bool = False,
        cache_dist: bool = False,
        n_empirical_estimate: int = 1000,
        log_prob_key: NestedKey | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        if not isinstance(module, TensorDictModuleBase):
            raise TypeError(
                "ProbabilisticActor: expected module to be a tensordict module (e.g. TensorDictModule) that writes "
                f"the distribution's parameters, got {type(module).__name__}"
            )
        out_list = _key_list(out_keys, ["action"])
        composite = _as_composite(spec, out_list, "ProbabilisticActor")
        kwargs = dict(distribution_kwargs or {})
        if isinstance(distribution_class, type) and issubclass(distribution_class, _BOUNDED_DISTRIBUTIONS):
            leaf = _spec_leaf(composite, out_list[0])
            if isinstance(leaf, Bounded) and ("low" not in kwargs or "high" not in kwargs):
                low, high = bounds_of(leaf)
                kwargs.setdefault("low", low)
                kwargs.setdefault("high", high)
        if isinstance(in_keys, (str, tuple)):
            in_keys = [in_keys]
        prob_module = ProbabilisticTensorDictModule(
            in_keys=in_keys if isinstance(in_keys, dict) else list(in_keys),
            out_keys=out_list,
            default_interaction_type=default_interaction_type,
            distribution_class=distribution_class,
            distribution_kwargs=kwargs,
            return_log_prob=return_log_prob,
            log_prob_key=log_prob_key,
            cache_dist=cache_dist,
            n_empirical_estimate=n_empirical_estimate,
            generator=generator,
        )
        super().__init__(module, prob_module)
        self.spec = composite
        self.safe = safe

    def forward(self, tensordict: TensorDictBase, *args: Any, **kwargs: Any) -> TensorDictBase:
        """Writes the distribution's parameters and a sample (projected into the spec if ``safe``)."""
        out = super().forward(tensordict, *args, **kwargs)
        if self.safe:
            _project(out, self.spec, self.module[-1].out_keys)
        return out


class ActorCriticWrapper(TensorDictSequential):
    """An actor followed by a critic that shares nothing with it.

    Running it writes the action, then the value (a Q-value reads the action just
    written). Its submodules are ``module[0]`` (the actor) and ``module[1]`` (the
    critic), so parameters taken with ``TensorDict.from_module`` nest under
    ``"module"``, ``"0"``/``"1"``.

    Args:
        policy_operator: the actor.
        value_operator: the critic.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.modules import MLP, Actor, ActorCriticWrapper, ValueOperator
        >>> actor = Actor(MLP(out_features=1, num_cells=[8]))
        >>> critic = ValueOperator(MLP(out_features=1, num_cells=[8]), in_keys=["observation", "action"])
        >>> ac = ActorCriticWrapper(actor, critic)
        >>> sorted(ac(TensorDict(observation=torch.zeros(2, 3), batch_size=[2])).keys())
        ['action', 'observation', 'state_action_value']
        >>> ac.get_policy_operator() is actor, ac.get_value_operator() is critic
        (True, True)
    """

    def __init__(self, policy_operator: TensorDictModuleBase, value_operator: TensorDictModuleBase) -> None:
        super().__init__(policy_operator, value_operator)

    def get_policy_operator(self) -> TensorDictModuleBase:
        """The actor."""
        return self.module[0]

    def get_value_operator(self) -> TensorDictModuleBase:
        """The critic."""
        return self.module[1]

    get_policy_head = get_policy_operator
    get_value_head = get_value_operator


class ActorValueOperator(TensorDictSequential):
    """An actor and a critic on top of a shared trunk (``common_operator``).

    Running it computes the trunk once, then the actor and the critic heads.

    Args:
        common_operator: the shared trunk (e.g. writes ``"hidden"``).
        policy_operator: the actor head, reading the trunk's outputs.
        value_operator: the critic head, reading the trunk's outputs.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.modules import Actor, ActorValueOperator, ValueOperator
        >>> trunk = TensorDictModule(torch.nn.Linear(3, 4), in_keys=["observation"], out_keys=["hidden"])
        >>> head = Actor(torch.nn.Linear(4, 1), in_keys=["hidden"])
        >>> value = ValueOperator(torch.nn.Linear(4, 1), in_keys=["hidden"])
        >>> avo = ActorValueOperator(trunk, head, value)
        >>> sorted(avo(TensorDict(observation=torch.zeros(3))).keys())
        ['action', 'hidden', 'observation', 'state_value']
        >>> sorted(avo.get_value_operator()(TensorDict(observation=torch.zeros(3))).keys())
        ['hidden', 'observation', 'state_value']
        >>> avo.get_policy_head() is head
        True
    """

    def __init__(
        self,
        common_operator: TensorDictModuleBase,
        policy_operator: TensorDictModuleBase,
        value_operator: TensorDictModuleBase,
    ) -> None:
        super().__init__(common_operator, policy_operator, value_operator)

    def get_policy_operator(self) -> TensorDictSequential:
        """The trunk followed by the actor head (probabilistic if the head is)."""
        common, policy = self.module[0], self.module[1]
        if isinstance(policy, ProbabilisticTensorDictSequential):
            # flattened: tensordict's get_dist does not look into a nested probabilistic sequence
            return ProbabilisticTensorDictSequential(common, *policy.module)
        return TensorDictSequential(common, policy)

    def get_value_operator(self) -> TensorDictSequential:
        """The trunk followed by the critic head."""
        return TensorDictSequential(self.module[0], self.module[2])

    def get_policy_head(self) -> TensorDictModuleBase:
        """The actor head alone."""
        return self.module[1]

    def get_value_head(self) -> TensorDictModuleBase:
        """The critic head alone."""
        return self.module[2]


_ONE_HOT_NAMES = ("one_hot", "one-hot", "onehot")
_CATEGORICAL_NAMES = ("categorical",)


def _action_space_of(action_space: str | None, spec: TensorSpec | None, owner: str) -> str:
    if isinstance(spec, Composite):
        spec = _spec_leaf(spec, "action")
    if action_space is not None:
        if not isinstance(action_space, str):  # TorchRL refuses specs here too
            raise TypeError(
                f"{owner}: action_space names the space ('one_hot' or 'categorical'), got a "
                f"{type(action_space).__name__}; pass a spec as spec=..."
            )
        name = action_space.lower()
        if name in _ONE_HOT_NAMES:
            return "one_hot"
        if name in _CATEGORICAL_NAMES:
            return "categorical"
        raise ValueError(f"{owner}: expected action_space 'one_hot' or 'categorical', got {action_space!r}")
    if isinstance(spec, OneHot):
        return "one_hot"
    if isinstance(spec, Categorical):
        return "categorical"
    raise ValueError(
        f"{owner}: cannot tell the action space: expected action_space='one_hot'/'categorical' or a OneHot/"
        f"Categorical spec, got action_space=None and spec={spec!r}"
    )


class QValueModule(TensorDictModuleBase):
    """Picks the greedy action from action values: ``argmax`` over the last dim.

    Reads ``action_value_key`` (and the boolean ``action_mask_key`` if given:
    masked-out actions are never picked) and writes ``"action"`` (one-hot or an
    index, as the action space says), the action values and
    ``"chosen_action_value"`` (the value of the chosen action, shape ``[*B, 1]``).

    Args:
        action_space: ``"one_hot"`` or ``"categorical"``; inferred from ``spec`` if
            not given.
        action_value_key: where the action values are.
        action_mask_key: where the mask of allowed actions is, if any.
        out_keys: the keys of the action, the action values and the chosen value.
        spec: the action spec (OneHot or Categorical, or a Composite with ``"action"``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.modules import QValueModule
        >>> q = QValueModule(action_space="categorical")
        >>> out = q(TensorDict(action_value=torch.tensor([[1.0, 3.0, 2.0]]), batch_size=[1]))
        >>> out["action"].tolist(), out["chosen_action_value"].tolist()
        ([1], [[3.0]])
    """

    def __init__(
        self,
        action_space: str | None = None,
        action_value_key: NestedKey = "action_value",
        action_mask_key: NestedKey | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        spec: TensorSpec | None = None,
    ) -> None:
        super().__init__()
        self.action_space = _action_space_of(action_space, spec, "QValueModule")
        leaf = _spec_leaf(spec, "action") if isinstance(spec, Composite) else spec
        # a Categorical spec with a trailing dim of one gets actions of shape [*B, 1]
        self._keep_dim = isinstance(leaf, Categorical) and leaf.shape[-1:] == torch.Size([1])
        self._action_dtype = leaf.dtype if leaf is not None else (torch.long)
        self.action_value_key = action_value_key
        self.action_mask_key = action_mask_key
        self.in_keys = [action_value_key] + ([action_mask_key] if action_mask_key is not None else [])
        self.out_keys = list(out_keys) if out_keys is not None else ["action", action_value_key, "chosen_action_value"]
        if len(self.out_keys) != 3:
            raise ValueError(f"QValueModule: expected 3 out keys (action, action values, chosen value), got {self.out_keys}")
        self.spec = spec

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Writes the greedy action and its value."""
        values = tensordict.get(self.action_value_key, None)
        if values is None:
            raise KeyError(
                f"QValueModule: the tensordict holds no action values at {self.action_value_key!r}; "
                f"it holds {sorted(map(str, tensordict.keys(True, True)))}"
            )
        mask = None
        if self.action_mask_key is not None:
            mask = tensordict.get(self.action_mask_key, None)
            if mask is None:
                raise KeyError(
                    f"QValueModule: the tensordict holds no action mask at {self.action_mask_key!r}; "
                    f"it holds {sorted(map(str, tensordict.keys(True, True)))}"
                )
        action, chosen = self.greedy(values, mask)
        action_key, values_key, chosen_key = self.out_keys
        tensordict.set(action_key, action)
        tensordict.set(values_key, values)
        tensordict.set(chosen_key, chosen)
        return tensordict

    def greedy(self, values: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The arithmetic of :meth:`forward` on tensors: the greedy action (one-hot or an
        index, as the action space says) and the chosen action's value (``[*B, 1]``).

        Args:
            values: the action values, ``[*B, n]``.
            mask: the actions allowed (``[*B, n]``, bool), or ``None``.

        Examples:
            >>> import torch
            >>> action, chosen = QValueModule(action_space="one_hot").greedy(torch.tensor([[1.0, 3.0]]))
            >>> action.tolist(), chosen.tolist()
            ([[0, 1]], [[3.0]])
        """
        if mask is None:  # the best value and its index in one op
            chosen, index = values.max(-1)
            chosen = chosen.unsqueeze(-1)
        else:  # a masked action's value stays what it is; only the argmax skips it
            index = values.masked_fill(~mask.bool(), float("-inf")).argmax(-1)
            chosen = values.gather(-1, index.unsqueeze(-1))
        if self.action_space == "one_hot":
            action = torch.nn.functional.one_hot(index, values.shape[-1])
        else:
            action = index.unsqueeze(-1) if self._keep_dim else index
        return cast(action, self._action_dtype), chosen


class QValueActor(_HoldsSpec, TensorDictSequential):
    """A greedy Q-value policy: a network writes action values, the argmax is the action.

    Args:
        module: the network mapping the in keys to action values (``[*B, n]``).
        in_keys: the keys it reads; default ``["observation"]``.
        spec: the action spec (OneHot or Categorical, or a Composite with ``"action"``).
        action_space: ``"one_hot"`` or ``"categorical"``; inferred from ``spec`` if not given.
        action_value_key: where the action values are written.
        action_mask_key: the key of a boolean mask of allowed actions, if any.
        safe: project actions outside ``spec`` back into it.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data import OneHot
        >>> from cadence.modules import QValueActor
        >>> actor = QValueActor(torch.nn.Linear(3, 4), spec=OneHot(4))
        >>> out = actor(TensorDict(observation=torch.zeros(2, 3), batch_size=[2]))
        >>> out["action"].shape, out["chosen_action_value"].shape
        (torch.Size([2, 4]), torch.Size([2, 1]))
    """

    def __init__(
        self,
        module: nn.Module,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        spec: TensorSpec | None = None,
        action_space: str | None = None,
        action_value_key: NestedKey = "action_value",
        action_mask_key: NestedKey | None = None,
        safe: bool = False,
    ) -> None:
        in_list = _key_list(in_keys, ["observation"])
        if not isinstance(module, TensorDictModuleBase):
            module = TensorDictModule(module, in_keys=in_list, out_keys=[action_value_key])
        qvalue = QValueModule(
            action_space=action_space,
            action_value_key=action_value_key,
            action_mask_key=action_mask_key,
            spec=spec,
        )
        super().__init__(module, qvalue)
        self.spec = _as_composite(spec, ["action"], "QValueActor")
        self.safe = safe
        self.action_space = qvalue.action_space

    def forward(self, tensordict: TensorDictBase, *args: Any, **kwargs: Any) -> TensorDictBase:
        """Writes the action values, the greedy action and its value."""
        out = super().forward(tensordict, *args, **kwargs)
        if self.safe:
            _project(out, self.spec, ["action"])
        return out


class TanhModule(TensorDictModuleBase):
    """Squashes entries into ``[low, high]`` with ``low + (high - low) * (tanh(x) + 1) / 2``.

    Args:
        in_keys: the keys to squash.
        out_keys: where to write the results; default ``in_keys``.
        spec: the output spec(s): a leaf (one out key) or a Composite keyed by out key;
            a Bounded spec gives the bounds when ``low``/``high`` are not given.
        low: the lower bound (number or tensor); default the spec's, else -1.
        high: the upper bound; default the spec's, else 1.
        clamp: keep the tanh strictly inside ``(-1, 1)`` (by the dtype's resolution),
            so that the outputs can be inverted (``atanh``) without infinities.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data import Bounded
        >>> from cadence.modules import TanhModule
        >>> squash = TanhModule(in_keys=["raw"], out_keys=["action"], spec=Bounded(0.0, 4.0, shape=(2,)))
        >>> squash(TensorDict(raw=torch.tensor([0.0, 50.0])))["action"].tolist()
        [2.0, 4.0]
    """

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey],
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        *,
        spec: TensorSpec | None = None,
        low: float | torch.Tensor | None = None,
        high: float | torch.Tensor | None = None,
        clamp: bool = False,
    ) -> None:
        super().__init__()
        in_list = _key_list(in_keys, [])
        out_list = _key_list(out_keys, in_list)
        if len(in_list) != len(out_list):
            raise ValueError(f"TanhModule: expected as many out keys as in keys, got {in_list} and {out_list}")
        self.in_keys = in_list
        self.out_keys = out_list
        self.spec = _as_composite(spec, out_list, "TanhModule")
        self.clamp = clamp
        for i, key in enumerate(out_list):
            leaf = _spec_leaf(self.spec, key)
            spec_low, spec_high = bounds_of(leaf) if isinstance(leaf, Bounded) else (None, None)
            key_low = torch.as_tensor(low if low is not None else (spec_low if spec_low is not None else -1.0))
            key_high = torch.as_tensor(high if high is not None else (spec_high if spec_high is not None else 1.0))
            if bool((key_low >= key_high).any()):
                raise ValueError(f"TanhModule: expected low < high for out key {key!r}, got low={key_low}, high={key_high}")
            self.register_buffer(f"_low_{i}", key_low.float() if not key_low.is_floating_point() else key_low)
            self.register_buffer(f"_high_{i}", key_high.float() if not key_high.is_floating_point() else key_high)

    def squash(self, index: int, value: torch.Tensor) -> torch.Tensor:
        """The squashed ``value`` of the ``index``-th in key (what ``forward`` writes).

        Examples:
            >>> import torch
            >>> TanhModule(in_keys=["x"], low=0.0, high=2.0).squash(0, torch.zeros(1)).tolist()
            [1.0]
        """
        u = torch.tanh(value)
        if self.clamp:
            bound = 1.0 - torch.finfo(u.dtype).eps
            u = u.clamp(-bound, bound)
        low, high = getattr(self, f"_low_{index}"), getattr(self, f"_high_{index}")
        return (high + low) / 2 + (high - low) / 2 * u

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Writes the squashed values."""
        for i, (in_key, out_key) in enumerate(zip(self.in_keys, self.out_keys)):
            value = tensordict.get(in_key, None)
            if value is None:
                raise KeyError(
                    f"TanhModule: the tensordict holds nothing at {in_key!r}; "
                    f"it holds {sorted(map(str, tensordict.keys(True, True)))}"
                )
            tensordict.set(out_key, self.squash(i, value))
        return tensordict
