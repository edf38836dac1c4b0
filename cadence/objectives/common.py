"""``LossModule``: the parent of every loss.

A loss holds the networks it trains as *functional* modules: each network's parameters
live in a ``TensorDictParams`` (``<name>_params``) that the loss swaps into the network
when it runs it (``with self.<name>_params.to_module(self.<name>): ...``), so the same
network can run with its trainable parameters, with a detached copy of them, or with a
lagging *target* copy (``target_<name>_params``) that ``SoftUpdate``/``HardUpdate``
move. ``loss.parameters()`` yields the trainable parameters only, each once.

A loss reads the entries of its input under names held in ``loss.tensor_keys`` (its
``_AcceptedKeys``); ``set_keys`` renames them, and forwards the names the value
estimator also reads. The value estimator is built on first use from
``default_value_estimator``, or explicitly with ``make_value_estimator``.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule
    >>> class MeanValue(LossModule):
    ...     def __init__(self, value_network):
    ...         super().__init__()
    ...         self.convert_to_functional(value_network, "value_network", create_target_params=True)
    ...     def forward(self, tensordict):
    ...         with self.value_network_params.to_module(self.value_network):
    ...             value = self.value_network(tensordict.copy())["state_value"]
    ...         return TensorDict({"loss_value": value.pow(2).mean()}, [])
    >>> loss = MeanValue(TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["state_value"]))
    >>> len(list(loss.parameters())), sorted(loss(TensorDict({"observation": torch.ones(4, 3)}, [4])).keys())
    (2, ['loss_value'])
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictParams
from tensordict.utils import NestedKey

from cadence.objectives.utils import ValueEstimators

__all__ = ["LossModule", "missing_keys_error"]


def missing_keys_error(loss: Any, missing: Iterable[NestedKey], tensordict: TensorDictBase) -> KeyError:
    """The error a loss raises for input that lacks entries: it names them and what is there.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> str(missing_keys_error("DDPGLoss", ["reward"], TensorDict({"obs": torch.zeros(1)}, [])))
        '"DDPGLoss needs [\\'reward\\'] in its input, which holds [\\'obs\\']."'
    """
    name = loss if isinstance(loss, str) else type(loss).__name__
    return KeyError(
        f"{name} needs {[k for k in missing]} in its input, which holds {sorted(map(str, tensordict.keys(True, True)))}."
    )


class LossModule(torch.nn.Module):
    """The parent of losses: functional networks, target parameters, keys, value estimator.

    Subclasses call ``convert_to_functional`` for each network in ``__init__``, implement
    ``forward(tensordict) -> TensorDict`` of ``loss_*`` entries (and metrics), and, if they
    use a value estimator, ``make_value_estimator`` and ``default_value_estimator``.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> loss = LossModule()
        >>> loss.convert_to_functional(TensorDictModule(torch.nn.Linear(2, 1), ["x"], ["y"]), "net")
        >>> sorted(loss.net_params.keys(True, True)), loss.target_net_params["module", "weight"].requires_grad
        ([('module', 'bias'), ('module', 'weight')], False)
    """

    #: The estimator ``value_estimator`` builds when none was made.
    default_value_estimator: ValueEstimators | None = None

    @dataclasses.dataclass
    class _AcceptedKeys:
        """The entries a loss reads and writes, by role (subclasses add theirs)."""

    def __init__(self) -> None:
        super().__init__()
        self._value_estimator: Any = None
        self._functional_names: list[str] = []
        self._target_names: list[str] = []
        self._hidden_modules: set[str] = set()
        self.tensor_keys = self._AcceptedKeys()

    # ------------------------------------------------------------------ networks
    def convert_to_functional(
        self,
        module: torch.nn.Module,
        module_name: str,
        expand_dim: int | None = None,
        create_target_params: bool = False,
        compare_against: Iterable[torch.nn.Parameter] | None = None,
    ) -> None:
        """Registers ``module`` as ``self.<module_name>`` and its parameters as
        ``self.<module_name>_params``.

        Args:
            module: the network.
            module_name: the attribute names to use.
            expand_dim: make this many copies of the parameters, stacked on a leading
                dim (an ensemble, run with ``torch.vmap``); copies after the first are
                initialised afresh (``reset_parameters``).
            create_target_params: also keep a target copy, ``target_<module_name>_params``,
                that target updaters move; without one, that attribute is a detached
                view of the trainable parameters.
            compare_against: parameters of networks converted earlier; those this module
                shares with them stay the same objects (so ``parameters()`` yields them once).
        """
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"convert_to_functional: {module_name!r} must be a torch.nn.Module, got {type(module).__name__}.")
        if module_name in self._functional_names:
            raise ValueError(f"convert_to_functional: {module_name!r} was converted already.")
        params = TensorDict.from_module(module)
        if expand_dim is not None:
            params = self._ensemble(module, params, expand_dim)
            # the module's own parameters never run (the stacked ones are swapped in):
            # parameters() leaves them out
            self._hidden_modules.add(module_name)
        # the trainable parameters are the module's own objects: those it shares with the
        # networks of compare_against are the same objects there, and parameters() yields
        # each once, so nothing is duplicated or detached
        setattr(self, module_name, module)
        setattr(self, f"{module_name}_params", TensorDictParams(params, no_convert=True))
        self._functional_names.append(module_name)
        if create_target_params:
            if expand_dim is not None:
                target = params.detach().clone()
            else:
                # a frozen copy of the network holds the target parameters, so that losses can
                # run it as it is (target_network()) instead of swapping parameters in
                target_module = copy.deepcopy(module)
                target_module.requires_grad_(False)
                setattr(self, f"_target_{module_name}", target_module)
                target = TensorDict.from_module(target_module)
            setattr(self, f"target_{module_name}_params", TensorDictParams(target, no_convert=True))
            # neither the copy nor its parameters are trainable: parameters() leaves them out
            self._hidden_modules.update({f"_target_{module_name}", f"target_{module_name}_params"})
            self._target_names.append(module_name)

    @staticmethod
    def _ensemble(module: torch.nn.Module, params: TensorDictBase, size: int) -> TensorDictBase:
        if size < 1:
            raise ValueError(f"convert_to_functional: expand_dim must be >= 1, got {size}.")
        copies = [params.data.clone()]
        for _ in range(size - 1):
            fresh = copy.deepcopy(module)
            for submodule in fresh.modules():
                reset = getattr(submodule, "reset_parameters", None)
                if callable(reset):
                    reset()
            copies.append(TensorDict.from_module(fresh).data.clone())
        stacked = torch.stack(copies, 0)
        return stacked.apply(lambda value: torch.nn.Parameter(value))

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, torch.nn.Parameter]]:
        """The trainable parameters, each once (``parameters()`` reads them here)."""
        hidden = tuple(f"{prefix}.{name}." if prefix else f"{name}." for name in self.__dict__.get("_hidden_modules", ()))
        for name, parameter in super().named_parameters(prefix, recurse, remove_duplicate):
            if hidden and name.startswith(hidden):
                continue
            yield name, parameter

    def target_network(self, module_name: str) -> torch.nn.Module:
        """The network ``module_name`` with its target parameters: a frozen copy that runs
        as it is (the network itself, under ``torch.no_grad``, when it has no target copy).

        Examples:
            >>> import torch
            >>> from tensordict.nn import TensorDictModule
            >>> loss = LossModule()
            >>> loss.convert_to_functional(TensorDictModule(torch.nn.Linear(2, 1), ["x"], ["y"]), "net",
            ...                            create_target_params=True)
            >>> target = loss.target_network("net")
            >>> target is not loss.net, target.module.weight.requires_grad
            (True, False)
        """
        if module_name not in self._functional_names:
            raise AttributeError(f"{type(self).__name__} has no network {module_name!r}; it has {self._functional_names}.")
        copy_ = self.__dict__["_modules"].get(f"_target_{module_name}")
        return copy_ if copy_ is not None else getattr(self, module_name)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            # without a target copy, the target parameters are the trainable ones, detached
            if name.startswith("target_") and name.endswith("_params"):
                source = name[len("target_") : -len("_params")]
                if source in self.__dict__.get("_functional_names", ()):
                    return getattr(self, f"{source}_params").detach()
            raise

    def _target_pairs(self) -> Callable[[], list[tuple[TensorDictBase, TensorDictBase]]]:
        """A function giving (trainable, target) parameter pairs, read afresh at each call
        (so that ``loss.to(device)`` is followed)."""
        names = list(self._target_names)

        def pairs() -> list[tuple[TensorDictBase, TensorDictBase]]:
            return [(getattr(self, f"{n}_params"), getattr(self, f"target_{n}_params")) for n in names]

        return pairs if names else (lambda: [])  # type: ignore[return-value]

    # ------------------------------------------------------------------ value estimator
    @property
    def value_estimator(self) -> Any:
        """The value estimator (built from ``default_value_estimator`` on first use)."""
        if self._value_estimator is None:
            if self.default_value_estimator is None:
                raise AttributeError(f"{type(self).__name__} uses no value estimator.")
            self.make_value_estimator(self.default_value_estimator)
        return self._value_estimator

    @value_estimator.setter
    def value_estimator(self, estimator: Any) -> None:
        self._value_estimator = estimator

    def make_value_estimator(self, value_type: ValueEstimators | None = None, **hyperparams: Any) -> LossModule:
        """Builds the value estimator ``value_type`` with ``hyperparams``; returns the loss."""
        raise TypeError(
            f"{type(self).__name__} defines no make_value_estimator(value_type, **hyperparams); losses that use "
            f"a value estimator implement it."
        )

    # ------------------------------------------------------------------ keys
    def set_keys(self, **kwargs: NestedKey) -> LossModule:
        """Renames the entries the loss reads or writes, by role (``set_keys(reward="r")``).

        Raises:
            ValueError: a role the loss does not have.
        """
        roles = {field.name for field in dataclasses.fields(self.tensor_keys)}
        unknown = sorted(set(kwargs) - roles)
        if unknown:
            raise ValueError(f"{type(self).__name__}.set_keys: unknown roles {unknown}; the roles are {sorted(roles)}.")
        for role, key in kwargs.items():
            setattr(self.tensor_keys, role, key)
        if self._value_estimator is not None:
            self._forward_keys_to_estimator()
        return self

    def _forward_keys_to_estimator(self) -> None:
        """Passes the key names the value estimator shares with the loss on to it."""
        estimator = self._value_estimator
        accepted = getattr(estimator, "tensor_keys", None)
        if accepted is None:
            return
        shared = {field.name for field in dataclasses.fields(accepted)} & {
            field.name for field in dataclasses.fields(self.tensor_keys)
        }
        if shared:
            estimator.set_keys(**{role: getattr(self.tensor_keys, role) for role in shared})

    def _require(self, tensordict: TensorDictBase, *keys: NestedKey) -> None:
        """Raises a ``KeyError`` naming the entries among ``keys`` that ``tensordict`` lacks."""
        present = tensordict.keys(True, True)
        missing = [key for key in keys if key not in present]
        if missing:
            raise missing_keys_error(self, missing, tensordict)

    # ------------------------------------------------------------------ running
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The losses (``loss_*`` entries, summed by the caller) and metrics of a batch."""
        raise TypeError(f"{type(self).__name__} must implement forward(tensordict).")

    def __repr__(self) -> str:
        networks = ", ".join(self._functional_names)
        return f"{type(self).__name__}(networks=[{networks}])"
