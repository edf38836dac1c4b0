"""Burn-in of recurrent states on stored sequences: ``BurnInTransform``.

A sequence sampled from a replay buffer carries the recurrent states its collector
stored, which are stale once the recurrent modules have been trained further. This
transform runs the modules, without gradients, over the first ``burn_in`` steps of each
sequence and hands back the remaining steps, their first step holding the fresh
recurrent states.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule
    >>> class Accumulate(torch.nn.Module):  # hidden_{t+1} = hidden_t + x_t, over a whole sequence
    ...     def forward(self, x, hidden):
    ...         return hidden[..., :1, :] + x.cumsum(-2)
    >>> module = TensorDictModule(Accumulate(), ["x", "hidden"], [("next", "hidden")])
    >>> data = TensorDict({"x": torch.ones(1, 5, 1), "hidden": torch.zeros(1, 5, 1)}, [1, 5])
    >>> out = BurnInTransform([module], burn_in=3)(data)
    >>> out.batch_size, out["hidden"][0, :, 0].tolist()
    (torch.Size([1, 2]), [3.0, 0.0])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import unravel_key

from cadence.data import Composite
from cadence.envs.transforms.base import NestedKey, Transform

__all__ = ["BurnInTransform"]


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    key = unravel_key(key)
    return (key,) if isinstance(key, str) else tuple(key)


def _as_key(parts: tuple[str, ...]) -> NestedKey:
    return parts[0] if len(parts) == 1 else parts


class BurnInTransform(Transform):
    """Burns in the recurrent states of sequences: runs ``modules`` over the first
    ``burn_in`` steps and returns the other ``T - burn_in`` steps with up-to-date states.

    The input has its time dim last (batch ``[*B, T]``). The modules are called, in
    order and under ``torch.no_grad()``, once on the burn-in part ``[*B, burn_in]`` of
    (a copy of) the data: like recurrent modules in sequence mode, each must process a
    whole sequence at once (a recurrent module reads its state at the first step, and
    where an episode starts, and writes the state that follows each step under
    ``("next", ...)``). For each destination key ``k`` of ``out_keys``, the value the
    modules wrote at ``("next", k)`` on the last burn-in step is written at ``k`` on
    the first returned step, the state the recurrent modules start from; the other
    returned steps keep their stored values (zeros if the data held no ``k``).

    The modules are used as they are (their current parameters), and are kept out of
    this transform's module tree: ``transform.parameters()`` does not list theirs.

    This transform is for replay buffers and modules (``transform(data)``); it cannot
    be appended to an env. ``inv`` leaves data unchanged (what is written to a buffer is
    kept whole). The input is not modified.

    Args:
        modules: the modules to run on the burn-in steps (``TensorDictModule``-like:
            with ``in_keys`` and ``out_keys``), in order.
        burn_in: the number of steps to burn in (a positive integer).
        out_keys: the keys to refresh on the first returned step; by default, every
            key ``k`` for which ``("next", k)`` is an output of a module (e.g.
            ``"hidden"`` for a module writing ``("next", "hidden")``).

    Raises:
        ValueError: at construction, for a bad ``burn_in`` or when no out key is given
            or found.
        RuntimeError: when called on data with no batch dim or with ``T <= burn_in``
            steps, or when appended to an env.
        KeyError: when the data lacks an entry a module reads, or the modules do not
            write ``("next", k)`` for an out key ``k``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> class Accumulate(torch.nn.Module):
        ...     def forward(self, x, hidden):
        ...         return hidden[..., :1, :] + x.cumsum(-2)
        >>> module = TensorDictModule(Accumulate(), ["x", "hidden"], [("next", "hidden")])
        >>> burn = BurnInTransform([module], burn_in=2)
        >>> burn.out_keys
        ['hidden']
        >>> x = torch.arange(1.0, 6.0).reshape(1, 5, 1)
        >>> data = TensorDict({"x": x, "hidden": torch.zeros(1, 5, 1)}, [1, 5])
        >>> out = burn(data)
        >>> out["x"][0, :, 0].tolist(), out["hidden"][0, :, 0].tolist()  # hidden = 1 + 2
        ([3.0, 4.0, 5.0], [3.0, 0.0, 0.0])
    """

    def __init__(
        self,
        modules: Sequence[Any],
        burn_in: int,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        if isinstance(burn_in, bool) or not isinstance(burn_in, int) or burn_in <= 0:
            raise ValueError(f"BurnInTransform: burn_in must be a positive integer, got {burn_in!r}.")
        if isinstance(modules, torch.nn.Module) or not isinstance(modules, Sequence):
            modules = [modules]  # type: ignore[list-item]
        modules = list(modules)
        if not modules:
            raise ValueError("BurnInTransform: expected at least one module to burn in with, got none.")
        for index, module in enumerate(modules):
            if not callable(module) or not hasattr(module, "in_keys") or not hasattr(module, "out_keys"):
                raise TypeError(
                    f"BurnInTransform: module {index} must be a TensorDictModule (callable, with in_keys and "
                    f"out_keys), got {type(module).__name__}."
                )
        if out_keys is None:
            found: list[NestedKey] = []
            for module in modules:
                for key in module.out_keys:
                    parts = _as_tuple(key)
                    if parts[0] == "next" and len(parts) > 1 and _as_key(parts[1:]) not in found:
                        found.append(_as_key(parts[1:]))
            if not found:
                raise ValueError(
                    "BurnInTransform: none of the modules writes a ('next', ...) entry (a recurrent state), so "
                    "there is nothing to burn in; pass out_keys. The modules write "
                    f"{[list(m.out_keys) for m in modules]}."
                )
            out_keys = found
        super().__init__(in_keys=out_keys, out_keys=out_keys)
        self.out_keys = [_as_key(_as_tuple(key)) for key in self.out_keys]
        self.in_keys = list(self.out_keys)
        self.burn_in = burn_in
        # the user's modules, outside this module tree (their parameters stay theirs)
        self.__dict__["_burn_in_modules"] = modules

    @property
    def modules_to_burn_in(self) -> list[Any]:
        """The modules run over the burn-in steps."""
        return self.__dict__["_burn_in_modules"]

    # ------------------------------------------------------------------ data
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Returns the last ``T - burn_in`` steps, their first step holding the burnt-in states."""
        return self._burn_in(tensordict)

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._burn_in(tensordict)

    def _burn_in(self, tensordict: TensorDictBase) -> TensorDictBase:
        if tensordict.batch_dims == 0:
            raise RuntimeError(
                "BurnInTransform expects data whose last batch dim is time (batch [*B, T]), got data with no batch "
                "dim."
            )
        steps = tensordict.batch_size[-1]
        if steps <= self.burn_in:
            raise RuntimeError(
                f"BurnInTransform: cannot burn in {self.burn_in} steps of sequences of {steps} steps (batch size "
                f"{tuple(tensordict.batch_size)}): the sequences must be longer than burn_in."
            )
        time_dim = tensordict.batch_dims - 1
        needed = [key for module in self.modules_to_burn_in for key in module.in_keys]
        # a copy of what the modules read: their outputs never reach the input's memory
        burnt = tensordict[..., : self.burn_in].select(*needed, strict=False).clone()
        with torch.no_grad():
            for index, module in enumerate(self.modules_to_burn_in):
                present = set(burnt.keys(include_nested=True))
                missing = [key for key in module.in_keys if unravel_key(key) not in present]
                if missing:
                    raise KeyError(
                        f"BurnInTransform: module {index} ({type(module).__name__}) reads {missing}, which the data "
                        f"does not hold; it holds {sorted(map(str, present))}."
                    )
                result = module(burnt)
                if isinstance(result, TensorDictBase):
                    burnt = result
        out = tensordict[..., self.burn_in :]
        last = (slice(None),) * time_dim + (self.burn_in - 1,)
        first = (slice(None),) * time_dim + (0,)
        for key in self.out_keys:
            source = _as_key(("next", *_as_tuple(key)))
            state = burnt.get(source, None)
            if state is None:
                raise KeyError(
                    f"BurnInTransform: the modules did not write {source!r}, the burnt-in value of out key {key!r}; "
                    f"they wrote {sorted(map(str, burnt.keys(include_nested=True, leaves_only=True)))}."
                )
            state = state[last].detach()
            stored = out.get(key, None)
            if stored is None:
                shape = (*out.batch_size, *state.shape[time_dim:])
                value = torch.zeros(shape, dtype=state.dtype, device=state.device)
            else:
                value = stored.clone()  # not in place: `out` views the input's memory
            value[first] = state.to(value.dtype)
            out.set(key, value)
        return out

    # ------------------------------------------------------------------ not an env transform
    _NOT_IN_ENV = "BurnInTransform transforms stored sequences (a data transform); it cannot be used in an env."

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(self._NOT_IN_ENV)

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(self._NOT_IN_ENV)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        raise RuntimeError(
            "BurnInTransform is a data transform: call it on the sequences a replay buffer samples (or use it in a "
            "module); it cannot be appended to an env."
        )

    def __repr__(self) -> str:
        modules = len(self.modules_to_burn_in)
        return f"BurnInTransform(burn_in={self.burn_in}, modules={modules}, out_keys={self.out_keys})"
