"""Pieces the losses share: reducing per-sample losses, running a critic ensemble,
reading action bounds and writing priorities.

Examples:
    >>> import torch
    >>> reduce_loss(torch.tensor([1.0, 3.0]), "mean").item()
    2.0
    >>> next_key(("agent", "reward"))
    ('next', 'agent', 'reward')
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from cadence.data import Bounded, Composite, TensorSpec

__all__ = [
    "REDUCTIONS",
    "action_bounds",
    "check_actor_critic",
    "check_reduction",
    "make_return_estimator",
    "next_key",
    "probe_input",
    "reduce_loss",
    "run_ensemble",
    "spec_leaf",
    "write_priority",
]

#: The reductions a loss accepts: over the batch, ``"none"`` keeps one value per sample.
REDUCTIONS = ("mean", "sum", "none")


def check_reduction(owner: str, reduction: str) -> str:
    """Returns ``reduction`` if it is one of ``REDUCTIONS``; raises a ``ValueError`` naming it otherwise.

    Examples:
        >>> check_reduction("TD3Loss", "sum")
        'sum'
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"{owner}: reduction must be one of {list(REDUCTIONS)}, got {reduction!r}.")
    return reduction


def reduce_loss(value: torch.Tensor, reduction: str) -> torch.Tensor:
    """The mean, the sum, or (``"none"``) the per-sample values themselves.

    Examples:
        >>> import torch
        >>> reduce_loss(torch.ones(2, 3), "sum").item(), reduce_loss(torch.ones(2), "none").shape
        (6.0, torch.Size([2]))
    """
    if reduction == "mean":
        return value.mean()
    if reduction == "sum":
        return value.sum()
    return value


def next_key(key: NestedKey) -> tuple[str, ...]:
    """``key`` under ``"next"``.

    Examples:
        >>> next_key("reward")
        ('next', 'reward')
    """
    return ("next", *key) if isinstance(key, tuple) else ("next", key)


def run_ensemble(
    module: torch.nn.Module, params: TensorDictBase, data: TensorDictBase, out_key: NestedKey
) -> torch.Tensor:
    """Runs ``module`` once per member of the stacked ``params`` (leading dim) on the same
    ``data``, under ``torch.vmap``; returns ``out_key`` of each, stacked: ``[n, *B, ...]``.

    The data is read only (each member runs on its own shallow copy).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> net = TensorDictModule(torch.nn.Linear(2, 1), ["x"], ["y"])
        >>> params = torch.stack([TensorDict.from_module(net).data] * 3)
        >>> run_ensemble(net, params, TensorDict(x=torch.ones(5, 2), batch_size=[5]), "y").shape
        torch.Size([3, 5, 1])
    """

    def one(member: TensorDictBase, inputs: TensorDictBase) -> torch.Tensor:
        with member.to_module(module):
            return module(inputs.copy()).get(out_key)

    return torch.vmap(one, (0, None))(params, data)


def spec_leaf(spec: TensorSpec | None, key: NestedKey = "action") -> TensorSpec | None:
    """The spec of ``key`` when ``spec`` is a Composite holding it, else ``spec`` itself.

    Examples:
        >>> from cadence.data import Bounded, Composite
        >>> spec_leaf(Composite(action=Bounded(-1.0, 1.0, shape=(2,)))).shape
        torch.Size([2])
    """
    if isinstance(spec, Composite):
        return spec.get(key, None) if key in spec.keys(True, True) else None
    return spec


def action_bounds(
    owner: str,
    action_spec: TensorSpec | None,
    bounds: tuple[float | torch.Tensor, float | torch.Tensor] | None,
    fallback_spec: TensorSpec | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(low, high)`` of the actions: from ``bounds``, else a Bounded ``action_spec``, else
    a Bounded ``fallback_spec`` (the actor's own spec). Leading dims that repeat the same
    bounds (an env's batch dims) are dropped so the bounds broadcast against any batch.

    Raises:
        ValueError: both or neither of ``action_spec`` and ``bounds`` (and no usable
            fallback), or a spec that is not Bounded.

    Examples:
        >>> from cadence.data import Bounded
        >>> low, high = action_bounds("TD3Loss", Bounded(-2.0, 2.0, shape=(4, 1)), None)
        >>> low.tolist(), high.tolist()
        ([-2.0], [2.0])
    """
    if action_spec is not None and bounds is not None:
        raise ValueError(f"{owner}: give action_spec or bounds, not both.")
    if bounds is not None:
        if len(bounds) != 2:
            raise ValueError(f"{owner}: bounds must be a (low, high) pair, got {bounds!r}.")
        low = torch.as_tensor(bounds[0], dtype=torch.get_default_dtype())
        high = torch.as_tensor(bounds[1], dtype=torch.get_default_dtype())
    else:
        spec = spec_leaf(action_spec if action_spec is not None else fallback_spec)
        if spec is None:
            raise ValueError(
                f"{owner}: the action bounds are needed (to clip the target policy's noisy actions); give "
                f"action_spec=Bounded(...) or bounds=(low, high), or an actor with a Bounded action spec."
            )
        if not isinstance(spec, Bounded):
            raise ValueError(f"{owner}: the action spec must be Bounded, got {type(spec).__name__}.")
        low, high = spec.low, spec.high
        while low.ndim > 1 and bool((low == low[:1]).all()) and bool((high == high[:1]).all()):
            low, high = low[0], high[0]
    if bool((low >= high).any()):
        raise ValueError(f"{owner}: the action bounds need low < high, got low={low.tolist()}, high={high.tolist()}.")
    return low, high


def probe_input(module: torch.nn.Module) -> TensorDict | None:
    """A batch of one zero input for a tensordict module reading one entry through a
    non-lazy first ``Linear`` (whose ``in_features`` tell the size); ``None`` otherwise.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> probe_input(TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["y"]))["observation"].shape
        torch.Size([1, 3])
    """
    in_keys = list(getattr(module, "in_keys", []))
    first = next((m for m in module.modules() if isinstance(m, torch.nn.Linear)), None)
    if len(in_keys) != 1 or first is None or isinstance(first, torch.nn.LazyLinear):
        return None
    return TensorDict({in_keys[0]: torch.zeros(1, first.in_features)}, [1])


def check_actor_critic(actor: torch.nn.Module, critic: torch.nn.Module, action_key: NestedKey = "action") -> None:
    """Runs ``critic`` on ``actor``'s output for a zero observation (``probe_input``), when
    the actor's first layer tells its size, so that an actor and a critic that disagree on
    the action's size fail when the loss is built rather than at the first update.

    Raises:
        ValueError: the critic cannot read the actor's action.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> actor = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action"])
        >>> critic = TensorDictModule(torch.nn.Linear(1, 1), ["action"], ["state_action_value"])
        >>> check_actor_critic(actor, critic)
        Traceback (most recent call last):
        ...
        ValueError: the critic cannot read the actor's 'action' of shape (1, 2) ...
    """
    probe = probe_input(actor)
    if probe is None:
        return
    with torch.no_grad():
        try:
            data = actor(probe)
        except RuntimeError:
            return  # the actor reads more than its first layer says: nothing to check here
        action = data.get(action_key, None)
        if action is None:
            return
        try:
            critic(data)
        except (RuntimeError, KeyError) as err:
            raise ValueError(
                f"the critic cannot read the actor's {action_key!r} of shape {tuple(action.shape)} (batch of 1): "
                f"{err}. Do the actor's action size and the critic's expected action size match?"
            ) from err


def write_priority(tensordict: TensorDictBase, key: NestedKey, td_error: torch.Tensor) -> None:
    """Writes the per-sample ``td_error`` (``[*B]``) into ``tensordict`` as ``[*B, 1]``,
    detached and on the data's device, for a prioritized replay buffer.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({}, [3])
        >>> write_priority(data, "td_error", torch.ones(3, requires_grad=True))
        >>> data["td_error"].shape, data["td_error"].requires_grad
        (torch.Size([3, 1]), False)
    """
    value = td_error.detach().reshape(*tensordict.batch_size, 1)
    if tensordict.device is not None:
        value = value.to(tensordict.device)
    tensordict.set(key, value)


def make_return_estimator(
    loss: Any, value_type: Any, hyperparams: dict[str, Any], why: str, value_network: Any = None
) -> None:
    """Builds ``loss._value_estimator``: a TD0, TD1 or TD(lambda) return estimator (the losses
    that regress state-action values have no use for an advantage), with the
    estimator's default hyperparameters, the loss's ``gamma`` if it has one, then
    ``hyperparams``; and passes the loss's key names on to it.

    Args:
        loss: the loss being given an estimator.
        value_type: a ``ValueEstimators`` member (the loss's default if ``None``).
        hyperparams: keyword arguments of the estimator.
        why: why GAE does not apply, for the error.
        value_network: the network the estimator runs (``None``: the loss gives it values).

    Raises:
        ValueError: ``value_type`` is not one of the three.

    Examples:
        >>> from cadence.objectives import LossModule, ValueEstimators
        >>> class Loss(LossModule):
        ...     default_value_estimator = ValueEstimators.TD0
        ...     def _forward_keys_to_estimator(self):
        ...         pass
        >>> loss = Loss()
        >>> make_return_estimator(loss, ValueEstimators.TDLambda, {"lmbda": 0.5}, "no advantage here")
        >>> type(loss.value_estimator).__name__
        'TDLambdaEstimator'
        >>> make_return_estimator(loss, ValueEstimators.GAE, {}, "no advantage here")
        Traceback (most recent call last):
        ...
        ValueError: Loss: value estimator <ValueEstimators.GAE: 'Generalized advantage estimate'> does not apply (no advantage here); use one of ['TD0', 'TD1', 'TDLambda'].
    """
    from cadence.objectives.utils import ValueEstimators, default_value_kwargs
    from cadence.objectives.value import TD0Estimator, TD1Estimator, TDLambdaEstimator

    value_type = value_type if value_type is not None else loss.default_value_estimator
    estimators = {
        ValueEstimators.TD0: TD0Estimator,
        ValueEstimators.TD1: TD1Estimator,
        ValueEstimators.TDLambda: TDLambdaEstimator,
    }
    if value_type not in estimators:
        raise ValueError(
            f"{type(loss).__name__}: value estimator {value_type!r} does not apply ({why}); use one of "
            f"{[v.name for v in estimators]}."
        )
    hp = dict(default_value_kwargs(value_type))
    if hasattr(loss, "gamma"):
        hp["gamma"] = loss.gamma
    hp.update(hyperparams)
    loss._value_estimator = estimators[value_type](value_network=value_network, **hp)
    loss._forward_keys_to_estimator()

