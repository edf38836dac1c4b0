"""Helpers of the losses: value-estimator choice, distances, frozen parameters, target updates.

Examples:
    >>> import torch
    >>> distance_loss(torch.tensor([1.0, 3.0]), torch.tensor([0.0, 1.0]), "l2").tolist()
    [1.0, 4.0]
    >>> default_value_kwargs(ValueEstimators.TDLambda)
    {'gamma': 0.99, 'lmbda': 0.95, 'differentiable': True}
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase

if TYPE_CHECKING:  # pragma: no cover - type hints only
    from cadence.objectives.common import LossModule

__all__ = [
    "HardUpdate",
    "SoftUpdate",
    "TargetNetUpdater",
    "ValueEstimators",
    "default_value_kwargs",
    "distance_loss",
    "hold_out_net",
    "hold_out_params",
]


class ValueEstimators(enum.Enum):
    """The value estimators a loss can be given with ``make_value_estimator``.

    Examples:
        >>> ValueEstimators.TD0.name, ValueEstimators["GAE"] is ValueEstimators.GAE
        ('TD0', True)
    """

    TD0 = "Bootstrapped TD (1-step return)"
    TD1 = "TD(1) (infinity-step return)"
    TDLambda = "TD(lambda)"
    GAE = "Generalized advantage estimate"


def default_value_kwargs(value_type: ValueEstimators) -> dict[str, Any]:
    """The default hyperparameters of an estimator.

    Args:
        value_type: the estimator.

    Examples:
        >>> default_value_kwargs(ValueEstimators.TD0)
        {'gamma': 0.99, 'differentiable': True}
    """
    if value_type in (ValueEstimators.TD0, ValueEstimators.TD1):
        return {"gamma": 0.99, "differentiable": True}
    if value_type in (ValueEstimators.TDLambda, ValueEstimators.GAE):
        return {"gamma": 0.99, "lmbda": 0.95, "differentiable": True}
    raise ValueError(f"default_value_kwargs: unknown value estimator {value_type!r}; expected one of "
                     f"{[v.name for v in ValueEstimators]}.")


def distance_loss(
    v1: torch.Tensor, v2: torch.Tensor, loss_function: str = "l2", strict_shape: bool = True
) -> torch.Tensor:
    """The elementwise distance between two tensors: ``"l2"`` (squared error), ``"l1"``
    or ``"smooth_l1"`` (Huber with delta 1).

    Args:
        v1: a tensor.
        v2: another, of the same shape (broadcast if ``strict_shape`` is off).
        loss_function: which distance.
        strict_shape: refuse tensors of different shapes.

    Examples:
        >>> import torch
        >>> distance_loss(torch.tensor([0.0, 3.0]), torch.zeros(2), "smooth_l1").tolist()
        [0.0, 2.5]
    """
    if strict_shape and v1.shape != v2.shape:
        raise ValueError(
            f"distance_loss: the two tensors differ in shape ({tuple(v1.shape)} and {tuple(v2.shape)}); pass "
            f"strict_shape=False to broadcast them."
        )
    if loss_function == "l2":
        return (v1 - v2).pow(2)
    if loss_function == "l1":
        return (v1 - v2).abs()
    if loss_function == "smooth_l1":
        return torch.nn.functional.smooth_l1_loss(v1, v2, reduction="none")
    raise ValueError(f"distance_loss: loss_function must be 'l2', 'l1' or 'smooth_l1', got {loss_function!r}.")


@contextlib.contextmanager
def hold_out_net(network: torch.nn.Module | Iterable[torch.Tensor]) -> Iterator[None]:
    """Within the block, ``network``'s parameters (or the given tensors) take no gradient
    (their ``requires_grad`` is restored afterwards).

    Examples:
        >>> import torch
        >>> net = torch.nn.Linear(2, 1)
        >>> with hold_out_net(net):
        ...     out = net(torch.ones(2))
        >>> out.requires_grad, net.weight.requires_grad
        (False, True)
    """
    parameters = list(network.parameters() if isinstance(network, torch.nn.Module) else network)
    states = [p.requires_grad for p in parameters]
    for parameter in parameters:
        parameter.requires_grad_(False)
    try:
        yield
    finally:
        for parameter, state in zip(parameters, states):
            parameter.requires_grad_(state)


def hold_out_params(params: TensorDictBase) -> TensorDictBase:
    """A detached copy of ``params`` (same memory): computing with it gives them no gradient.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> hold_out_params(TensorDict({"w": torch.nn.Parameter(torch.ones(2))}, []))["w"].requires_grad
        False
    """
    return params.detach()


class TargetNetUpdater:
    """Moves a loss's target parameters (``target_<name>_params``) towards its trainable
    ones (``<name>_params``) at each ``step()``; subclasses say how.

    Args:
        loss_module: a ``LossModule`` with target parameters.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.objectives.common import LossModule
        >>> loss = LossModule()
        >>> loss.convert_to_functional(TensorDictModule(torch.nn.Linear(1, 1), ["x"], ["y"]), "net",
        ...                            create_target_params=True)
        >>> class Halfway(TargetNetUpdater):
        ...     def _step(self):
        ...         sources, targets = self._leaf_lists()
        ...         torch._foreach_lerp_(targets, sources, 0.5)
        >>> Halfway(loss).initialized
        False
    """

    def __init__(self, loss_module: LossModule) -> None:
        pairs = loss_module._target_pairs()
        if not pairs():
            raise ValueError(
                f"{type(self).__name__}: {type(loss_module).__name__} has no target parameters "
                f"(convert_to_functional(..., create_target_params=True) makes them)."
            )
        self.loss_module = loss_module
        self._pairs = pairs
        self.initialized = False

    def _leaf_lists(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The (trainable, target) leaves as two lists, read once and reused while the
        loss keeps the same tensors (``loss.to(...)`` replaces some: then read again)."""
        pairs = self._pairs()
        check = [(source, target, next(iter(source.keys(True, True)))) for source, target in pairs]
        fingerprint = tuple(id(target.get(key)) for _, target, key in check)
        cached = self.__dict__.get("_cached_leaves")
        if cached is None or cached[0] != fingerprint:
            # the tensors themselves (not .data views): a parameter keeps its object when
            # the loss moves, and torch.no_grad (step()) lets them be written in place
            sources, targets = [], []
            for source, target in pairs:
                for key, value in source.items(True, True):
                    sources.append(value)
                    targets.append(target.get(key))
            cached = self._cached_leaves = (fingerprint, sources, targets)
        return cached[1], cached[2]

    @torch.no_grad()
    def init_(self) -> None:
        """Copies the trainable parameters into the targets."""
        sources, targets = self._leaf_lists()
        torch._foreach_copy_(targets, sources)
        self.initialized = True

    @torch.no_grad()
    def step(self) -> None:
        """One update of the targets."""
        self._step()

    def _step(self) -> None:
        raise TypeError(f"{type(self).__name__} must implement _step().")

    def state_dict(self) -> dict[str, Any]:
        """The updater's own progress (the target parameters themselves belong to the
        loss's state): whether ``init_`` ran, and a subclass's counters.

        Examples:
            >>> import torch
            >>> from tensordict.nn import TensorDictModule
            >>> from cadence.objectives.common import LossModule
            >>> loss = LossModule()
            >>> loss.convert_to_functional(TensorDictModule(torch.nn.Linear(1, 1), ["x"], ["y"]), "net",
            ...                            create_target_params=True)
            >>> updater = SoftUpdate(loss, tau=0.1)
            >>> updater.init_()
            >>> updater.state_dict()
            {'initialized': True}
        """
        return {"initialized": self.initialized}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned (checked whole before anything changes).

        Raises:
            ValueError: an entry is missing, unknown or not of its type.

        Examples:
            >>> import torch
            >>> from tensordict.nn import TensorDictModule
            >>> from cadence.objectives.common import LossModule
            >>> loss = LossModule()
            >>> loss.convert_to_functional(TensorDictModule(torch.nn.Linear(1, 1), ["x"], ["y"]), "net",
            ...                            create_target_params=True)
            >>> updater = SoftUpdate(loss, tau=0.1)
            >>> updater.load_state_dict({"initialized": True})
            >>> updater.initialized
            True
        """
        self._check_state(state_dict, {"initialized": bool})
        self.initialized = state_dict["initialized"]

    def _check_state(self, state_dict: Any, fields: dict[str, type]) -> None:
        """Raises ``ValueError`` unless ``state_dict`` holds exactly ``fields``, each of its type."""
        owner = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict) or set(state_dict) != set(fields):
            found = sorted(map(str, state_dict)) if isinstance(state_dict, dict) else type(state_dict).__name__
            raise ValueError(f"{owner}: expected a dict of {sorted(fields)}, got {found}.")
        for name, kind in fields.items():
            value = state_dict[name]
            # bool is an int to Python: a counter must not take True, a flag must not take 1
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise ValueError(f"{owner}: {name!r} should be a {kind.__name__}, got {value!r}.")


class SoftUpdate(TargetNetUpdater):
    """Polyak averaging: ``target <- eps * target + (1 - eps) * param`` at each step.

    Args:
        loss_module: a loss with target parameters.
        eps: the share of the target kept (``1 - tau``).
        tau: the share of the parameters taken (``1 - eps``); give one of the two.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.objectives.common import LossModule
        >>> class Loss(LossModule):
        ...     def __init__(self, net):
        ...         super().__init__()
        ...         self.convert_to_functional(net, "net", create_target_params=True)
        >>> loss = Loss(TensorDictModule(torch.nn.Linear(1, 1, bias=False), ["x"], ["y"]))
        >>> _ = loss.target_net_params["module", "weight"].zero_()
        >>> with torch.no_grad():
        ...     _ = loss.net_params["module", "weight"].fill_(1.0)
        >>> SoftUpdate(loss, tau=0.1).step()
        >>> loss.target_net_params["module", "weight"].item()
        0.10000000149011612
    """

    def __init__(self, loss_module: LossModule, *, eps: float | None = None, tau: float | None = None) -> None:
        if (eps is None) == (tau is None):
            raise ValueError(f"SoftUpdate: give one of eps and tau (eps = 1 - tau); got eps={eps}, tau={tau}.")
        eps = 1.0 - tau if tau is not None else eps
        if not 0.0 <= eps <= 1.0:
            raise ValueError(f"SoftUpdate: eps must lie in [0, 1], got {eps}.")
        super().__init__(loss_module)
        self.eps = float(eps)

    def _step(self) -> None:
        sources, targets = self._leaf_lists()
        torch._foreach_lerp_(targets, sources, 1.0 - self.eps)  # one call for all leaves


class HardUpdate(TargetNetUpdater):
    """Copies the parameters into the targets every ``value_network_update_interval`` steps.

    Args:
        loss_module: a loss with target parameters.
        value_network_update_interval: steps between copies.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.objectives.common import LossModule
        >>> loss = LossModule()
        >>> loss.convert_to_functional(TensorDictModule(torch.nn.Linear(1, 1, bias=False), ["x"], ["y"]), "net",
        ...                            create_target_params=True)
        >>> updater = HardUpdate(loss, value_network_update_interval=2)
        >>> with torch.no_grad():
        ...     _ = loss.net_params["module", "weight"].fill_(5.0)
        >>> updater.step(); loss.target_net_params["module", "weight"].item() == 5.0
        False
        >>> updater.step(); loss.target_net_params["module", "weight"].item()
        5.0
    """

    def __init__(self, loss_module: LossModule, *, value_network_update_interval: int = 1000) -> None:
        if value_network_update_interval < 1:
            raise ValueError(
                f"HardUpdate: value_network_update_interval must be >= 1, got {value_network_update_interval}."
            )
        super().__init__(loss_module)
        self.value_network_update_interval = int(value_network_update_interval)
        self.counter = 0

    def _step(self) -> None:
        self.counter += 1
        if self.counter % self.value_network_update_interval == 0:
            sources, targets = self._leaf_lists()
            torch._foreach_copy_(targets, sources)

    def state_dict(self) -> dict[str, Any]:
        """Whether ``init_`` ran, and the steps counted towards the next copy.

        Examples:
            >>> import torch
            >>> from tensordict.nn import TensorDictModule
            >>> from cadence.objectives.common import LossModule
            >>> loss = LossModule()
            >>> loss.convert_to_functional(TensorDictModule(torch.nn.Linear(1, 1), ["x"], ["y"]), "net",
            ...                            create_target_params=True)
            >>> updater = HardUpdate(loss, value_network_update_interval=10)
            >>> updater.step(); updater.step()
            >>> resumed = HardUpdate(loss, value_network_update_interval=10)
            >>> resumed.load_state_dict(updater.state_dict())
            >>> resumed.counter
            2
        """
        return {**super().state_dict(), "counter": self.counter}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned: the next copy falls on the same step.

        Raises:
            ValueError: an entry is missing, unknown or not of its type, or the counter is negative.

        Examples:
            >>> import torch
            >>> from tensordict.nn import TensorDictModule
            >>> from cadence.objectives.common import LossModule
            >>> loss = LossModule()
            >>> loss.convert_to_functional(TensorDictModule(torch.nn.Linear(1, 1), ["x"], ["y"]), "net",
            ...                            create_target_params=True)
            >>> HardUpdate(loss).load_state_dict({"initialized": False, "counter": -1})
            Traceback (most recent call last):
            ...
            ValueError: HardUpdate.load_state_dict: 'counter' must be >= 0, got -1.
        """
        self._check_state(state_dict, {"initialized": bool, "counter": int})
        if state_dict["counter"] < 0:
            raise ValueError(f"HardUpdate.load_state_dict: 'counter' must be >= 0, got {state_dict['counter']}.")
        self.initialized = state_dict["initialized"]
        self.counter = state_dict["counter"]
