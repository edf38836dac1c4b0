"""DQN (Mnih et al., 2015) and double DQN (van Hasselt et al., 2016).

``DQNLoss`` fits ``Q(s, a)`` for the action taken to ``r + gamma * Q'(s', a*)`` where
``a* = argmax_a Q'(s', a)`` (``Q'`` the target network), or, with ``double_dqn=True``,
``a* = argmax_a Q(s', a)`` picked by the online network and valued by the target one. Its
output is ``loss``; it writes each sample's squared TD error into its input
(``"td_error"``) for prioritized replay. Actions are one-hot vectors or indices
(``action_space="one_hot"`` or ``"categorical"``).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.data import OneHot
    >>> from cadence.modules import QValueActor
    >>> loss = DQNLoss(QValueActor(torch.nn.Linear(3, 2), spec=OneHot(2)))
    >>> data = TensorDict({"observation": torch.randn(8, 3),
    ...     "action": torch.nn.functional.one_hot(torch.randint(2, (8,)), 2),
    ...     "next": {"observation": torch.randn(8, 3), "reward": torch.randn(8, 1),
    ...              "done": torch.zeros(8, 1, dtype=torch.bool), "terminated": torch.zeros(8, 1, dtype=torch.bool)}}, [8])
    >>> list(loss(data).keys()), data["td_error"].shape
    (['loss'], torch.Size([8, 1]))
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey

from cadence.data import Categorical, OneHot, TensorSpec
from cadence.modules import QValueActor
from cadence.objectives._shared import (
    make_return_estimator,
    check_reduction,
    next_key,
    probe_input,
    reduce_loss,
    spec_leaf,
    write_priority,
)
from cadence.objectives.common import LossModule
from cadence.objectives.utils import ValueEstimators, distance_loss

__all__ = ["DQNLoss"]

_SPACE_NAMES = {"one_hot": "one_hot", "one-hot": "one_hot", "onehot": "one_hot", "categorical": "categorical"}


def _action_space(action_space: str | TensorSpec | None, value_network: torch.nn.Module) -> str:
    """``"one_hot"`` or ``"categorical"``: from ``action_space`` (a name or a spec), else the
    network's (its own, or that of a Q-value module inside it), else ``"one_hot"`` with a
    warning (the reference's default)."""
    if action_space is None:
        for module in value_network.modules():  # the network itself first, then a QValueModule in a sequence
            action_space = getattr(module, "action_space", None) or spec_leaf(getattr(module, "spec", None))
            if action_space is not None:
                break
        else:
            warnings.warn(
                "DQNLoss: action_space was not given and the value network does not say it; using 'one_hot'. "
                "Pass action_space='one_hot' or 'categorical' (or the action spec) to silence this.",
                UserWarning,
                stacklevel=3,
            )
            return "one_hot"
    if isinstance(action_space, str):
        if action_space.lower() not in _SPACE_NAMES:
            raise ValueError(
                f"DQNLoss: action_space must be 'one_hot' or 'categorical' (or a OneHot/Categorical spec), got "
                f"{action_space!r}."
            )
        return _SPACE_NAMES[action_space.lower()]
    if isinstance(action_space, OneHot):
        return "one_hot"
    if isinstance(action_space, Categorical):
        return "categorical"
    raise ValueError(
        f"DQNLoss: cannot tell the action space: give action_space='one_hot' or 'categorical' (or a OneHot/Categorical "
        f"spec), or a QValueActor that knows it; got action_space={action_space!r}."
    )


def _check_action_count(value_network: torch.nn.Module, action_space: str | TensorSpec | None, key: NestedKey) -> None:
    """A network whose action values disagree with the spec's number of actions fails here."""
    spec = spec_leaf(action_space) if isinstance(action_space, TensorSpec) else None
    spec = spec if spec is not None else spec_leaf(getattr(value_network, "spec", None))
    if not isinstance(spec, (OneHot, Categorical)):
        return
    count = spec.space.n if hasattr(spec, "space") else spec.shape[-1]
    probe = probe_input(value_network)
    if probe is None:
        return
    with torch.no_grad():
        try:
            values = value_network(probe).get(key, None)
        except (RuntimeError, KeyError):
            return
    if values is not None and values.shape[-1] != count:
        raise ValueError(
            f"DQNLoss: the value network writes {values.shape[-1]} action values under {key!r}, but the action spec "
            f"has {count} actions."
        )


class DQNLoss(LossModule):
    """The DQN loss.

    Args:
        value_network: a ``QValueActor`` (or any tensordict module writing the action
            values ``[*B, n]`` under ``"action_value"``); a plain ``nn.Module`` is wrapped
            in a ``QValueActor`` reading ``"observation"``.

    Keyword Args:
        loss_function: the distance, ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        delay_value: keep target parameters for the value network.
        double_dqn: pick the next action with the online network, value it with the
            target network.
        gamma: the discount, if given here (else the value estimator's).
        action_space: ``"one_hot"`` or ``"categorical"`` (or a OneHot/Categorical spec);
            by default the value network's.
        priority_key: where the TD error is written (default ``"td_error"``).
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over the batch.

    Examples:
        >>> import torch
        >>> from cadence.modules import QValueActor
        >>> loss = DQNLoss(QValueActor(torch.nn.Linear(4, 3), action_space="categorical"), double_dqn=True)
        >>> loss.action_space, sorted(loss.value_network_params.keys(True, True))[:1]
        ('categorical', [('module', '0', 'module', 'bias')])
    """

    @dataclasses.dataclass
    class _AcceptedKeys:
        """The entries the loss reads and writes."""

        advantage: NestedKey = "advantage"
        value_target: NestedKey = "value_target"
        value: NestedKey = "chosen_action_value"
        action_value: NestedKey = "action_value"
        action: NestedKey = "action"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"

    default_value_estimator = ValueEstimators.TD0

    def __init__(
        self,
        value_network: torch.nn.Module,
        *,
        loss_function: str = "l2",
        delay_value: bool = True,
        double_dqn: bool = False,
        gamma: float | None = None,
        action_space: str | TensorSpec | None = None,
        priority_key: NestedKey | None = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        self.reduction = check_reduction("DQNLoss", reduction)
        distance_loss(torch.zeros(1), torch.zeros(1), loss_function)  # an unknown distance fails here
        if not isinstance(value_network, TensorDictModuleBase):
            if not isinstance(value_network, torch.nn.Module):
                raise TypeError(f"DQNLoss: value_network must be a torch.nn.Module, got {type(value_network).__name__}.")
            value_network = QValueActor(
                value_network,
                action_space=action_space if isinstance(action_space, str) else None,
                spec=action_space if isinstance(action_space, TensorSpec) else None,
            )
        self.action_space = _action_space(action_space, value_network)
        _check_action_count(value_network, action_space, self.tensor_keys.action_value)
        self.convert_to_functional(value_network, "value_network", create_target_params=delay_value)
        self.value_in_keys = list(value_network.in_keys)
        self.loss_function = loss_function
        self.double_dqn = bool(double_dqn)
        if priority_key is not None:
            self.tensor_keys.priority = priority_key
        if gamma is not None:
            self.gamma = gamma

    # ------------------------------------------------------------------ value estimator
    def make_value_estimator(self, value_type: ValueEstimators | None = None, **hyperparams: Any) -> DQNLoss:
        """Builds the target estimator: TD0, TD1 or TDLambda (DQN has no GAE).

        The estimator runs no network: the loss gives it the next states' values.
        """
        make_return_estimator(self, value_type, hyperparams, "DQN regresses action values")
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
    def _action_values(self, data: TensorDictBase, params: TensorDictBase) -> torch.Tensor:
        inputs = data.select(*self.value_in_keys, strict=False).copy()
        with params.to_module(self.value_network):
            return self.value_network(inputs).get(self.tensor_keys.action_value)

    def _pick(self, action_values: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The values of ``action`` (one-hot or indices), ``[*B]``."""
        if self.action_space == "one_hot":
            if action.shape != action_values.shape:
                raise ValueError(
                    f"DQNLoss: one-hot actions of shape {tuple(action.shape)} do not match the action values of "
                    f"shape {tuple(action_values.shape)}."
                )
            return (action_values * action.to(action_values.dtype)).sum(-1)
        index = action.long()
        if index.shape == action_values.shape[:-1]:
            index = index.unsqueeze(-1)
        if index.shape != (*action_values.shape[:-1], 1):
            raise ValueError(
                f"DQNLoss: categorical actions of shape {tuple(action.shape)} do not match the action values of "
                f"shape {tuple(action_values.shape)} (expected {tuple(action_values.shape[:-1])} or with a trailing 1)."
            )
        return action_values.gather(-1, index).squeeze(-1)

    def _next_state_value(self, tensordict: TensorDictBase) -> torch.Tensor:
        """``Q'(s', a*)``, ``[*B, 1]`` (no gradient)."""
        next_data = tensordict.get("next")
        with torch.no_grad():
            target_values = self._action_values(next_data, self.target_value_network_params)
            if not self.double_dqn:
                return target_values.max(-1, keepdim=True).values
            online_values = self._action_values(next_data, self.value_network_params.detach())
            return target_values.gather(-1, online_values.argmax(-1, keepdim=True))

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The loss of a batch (``"loss"``); writes the TD error into ``tensordict``."""
        keys = self.tensor_keys
        needed = [*self.value_in_keys, keys.action, *[next_key(k) for k in self.value_in_keys]]
        needed += [next_key(keys.reward), next_key(keys.done), next_key(keys.terminated)]
        self._require(tensordict, *dict.fromkeys(needed))
        predicted = self._pick(self._action_values(tensordict, self.value_network_params), tensordict.get(keys.action))
        next_value = self._next_state_value(tensordict)
        with torch.no_grad():
            target = self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)
        loss = distance_loss(predicted, target, loss_function=self.loss_function)
        write_priority(tensordict, keys.priority, (predicted - target).pow(2))
        return TensorDict({"loss": reduce_loss(loss, self.reduction)}, [])
