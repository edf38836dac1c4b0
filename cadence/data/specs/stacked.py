"""``Stacked``: leaf specs of different shapes stacked along a new dim, kept one by one.

Agents of one group may observe or act in different shapes (heterogeneous agents). Their
specs cannot become one dense spec, so ``torch.stack`` keeps them as they are: the
stacked spec's shape has the stack's length at the stack dim and ``-1`` wherever the
elements' sizes differ. Indexing the stack dim gives an element back; every other
operation (``expand``, ``squeeze``, ``unsqueeze``, ``clone``, ``to``) is applied to each
element.

Values of such a spec are ragged. Inside a :class:`~cadence.data.Composite` (the usual
case: ``torch.stack`` of per-agent Composites) they live in a lazily stacked TensorDict
(``tensordict.LazyStackedTensorDict``), one TensorDict per element; on its own a
``Stacked`` spec makes and checks nested tensors (``torch.nested``) when it is stacked
along dim 0, and checks lists of tensors or dense tensors (when the sizes happen to agree)
along any dim.

Examples:
    >>> import torch
    >>> from cadence.data import Unbounded
    >>> spec = torch.stack([Unbounded(shape=(3,)), Unbounded(shape=(5,))], dim=0)
    >>> type(spec).__name__, spec.shape
    ('Stacked', torch.Size([2, -1]))
    >>> spec[1].shape
    torch.Size([5])
    >>> spec.is_in([torch.zeros(3), torch.ones(5)]), spec.is_in([torch.zeros(5), torch.ones(5)])
    (True, False)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from .base import (
    DEVICE_TYPING,
    Reason,
    ShapeLike,
    TensorSpec,
    _norm_dim,
    _normalise_index,
    _register_ragged_stack,
    _shape_args,
    _to_size,
)

__all__ = ["Stacked"]


def _split_stacked_index(idx: Any, batch_ndim: int, stack_dim: int, what: str) -> tuple[tuple[Any, ...], Any, int]:
    """Split an index of a stacked spec into the part for the elements and the part that picks them.

    Only integers, slices, lists or 1-d integer tensors (and one Ellipsis) can index a
    stacked spec: they keep track of where the stack dim goes.

    Args:
        idx: the index, as given to ``spec[idx]``.
        batch_ndim: how many leading dims can be indexed.
        stack_dim: where the elements are stacked.
        what: the name to use in errors.

    Returns:
        ``(element_index, pick, new_stack_dim)``: the index to apply to every element, the
        index along the stack dim (``slice(None)`` when the index stops before it) and where
        the stack dim lands in the result (meaningless when ``pick`` is an int).

    Examples:
        >>> _split_stacked_index((0, slice(None), 2), 3, 1, "spec")
        ((0, 2), slice(None, None, None), 0)
    """
    items = _normalise_index(idx, batch_ndim, what)
    for item in items:
        if item is None or (isinstance(item, (torch.Tensor, np.ndarray)) and item.dtype in (torch.bool, np.bool_)):
            raise IndexError(f"{what}: a stacked spec takes int, slice, list or integer-tensor indices, got {item!r}")
    before, rest = items[:stack_dim], items[stack_dim:]
    pick = rest[0] if rest else slice(None)
    removed_before = sum(1 for item in before if isinstance(item, int))
    return before + tuple(rest[1:]), pick, stack_dim - removed_before


def _picked_positions(pick: Any, length: int, what: str) -> list[int] | int:
    """The element positions that ``pick`` selects along a stack of ``length`` (an int stays an int)."""
    if isinstance(pick, (int, np.integer)):
        if not -length <= int(pick) < length:
            raise IndexError(f"{what}: index {int(pick)} is out of range for a stack of {length}")
        return int(pick) % length
    if isinstance(pick, slice):
        return list(range(length))[pick]
    positions = torch.as_tensor(pick).reshape(-1).tolist()
    for p in positions:
        if not -length <= p < length:
            raise IndexError(f"{what}: index {p} is out of range for a stack of {length}")
    return [p % length for p in positions]


def _stacked_shape(shapes: Sequence[torch.Size], dim: int) -> torch.Size:
    """The shape of a stack: the elements' shape with the count inserted, -1 where sizes differ."""
    merged = [size if all(s[j] == size for s in shapes) else -1 for j, size in enumerate(shapes[0])]
    return torch.Size(merged[:dim] + [len(shapes)] + merged[dim:])


class Stacked(TensorSpec):
    """Specs of one class and dtype but different shapes, stacked along ``dim``.

    ``torch.stack`` builds it when the specs' shapes differ (it is rarely built by hand).
    The elements must have as many dims as each other and the same dtype and device.

    Args:
        *specs: the element specs.
        dim: where the new dim goes (counted on the elements' dims).

    Examples:
        >>> import torch
        >>> from cadence.data import Bounded
        >>> from cadence.data.specs.stacked import Stacked
        >>> spec = Stacked(Bounded(-1, 1, shape=(2,)), Bounded(0, 1, shape=(4,)), dim=0)
        >>> spec.shape, spec.dtype
        (torch.Size([2, -1]), torch.float32)
        >>> value = spec.rand(generator=torch.Generator().manual_seed(0))
        >>> value.is_nested, [t.shape[0] for t in value.unbind()]
        (True, [2, 4])
        >>> spec.is_in(value)
        True
        >>> spec.expand(3, 2, -1).shape, spec.expand(3, 2, -1)[0, 1].shape
        (torch.Size([3, 2, -1]), torch.Size([4]))
    """

    def __init__(self, *specs: TensorSpec, dim: int = 0) -> None:
        if not specs:
            raise ValueError("Stacked: expected at least one spec")
        first = specs[0]
        for i, spec in enumerate(specs):
            if not isinstance(spec, TensorSpec):
                raise TypeError(f"Stacked: element {i} is a {type(spec).__name__}, not a spec")
            if spec.ndim != first.ndim:
                raise ValueError(
                    f"Stacked: the elements must have the same number of dims: element 0 has shape "
                    f"{tuple(first.shape)}, element {i} has shape {tuple(spec.shape)}"
                )
            if spec.dtype != first.dtype or spec.device != first.device:
                raise ValueError(
                    f"Stacked: the elements must share dtype and device: element 0 is {first.dtype} on "
                    f"{first.device}, element {i} is {spec.dtype} on {spec.device}"
                )
        d = _norm_dim(dim, first.ndim + 1, "Stacked")
        if d > first._batch_ndim():
            raise ValueError(f"Stacked: dim {dim} would split the elements' domain dims")
        super().__init__(_stacked_shape([s.shape for s in specs], d), device=first.device, dtype=first.dtype)
        self._elements: tuple[TensorSpec, ...] = tuple(specs)
        self._stack_dim = d
        self._event_dims_of_elements = first._event_dims

    # ------------------------------------------------------------ properties
    @property
    def stack_dim(self) -> int:
        """The dim along which the elements are stacked."""
        return self._stack_dim

    @property
    def specs(self) -> tuple[TensorSpec, ...]:
        """The element specs, in order."""
        return self._elements

    def __len__(self) -> int:
        return len(self._elements)

    def _batch_ndim(self) -> int:
        return self.ndim - self._event_dims_of_elements

    def _map(self, fn: Callable[[TensorSpec], TensorSpec], dim: int | None = None) -> Stacked:
        return Stacked(*(fn(s) for s in self._elements), dim=self._stack_dim if dim is None else dim)

    # ------------------------------------------------------------ generation
    def _nested(self, make: Callable[[TensorSpec], torch.Tensor], shape: ShapeLike | None, what: str) -> torch.Tensor:
        if (shape is not None and len(_to_size(shape))) or self._stack_dim != 0:
            raise ValueError(
                f"{self._short_name()}.{what}: ragged values can only be made stacked along dim 0 with no "
                "leading shape (a nested tensor); generate them from the Composite that holds this spec "
                "(a lazily stacked TensorDict) or from spec.unbind(dim)"
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "nested tensors are a prototype": known, and wanted here
            return torch.nested.nested_tensor([make(s) for s in self._elements])

    def rand(self, shape: ShapeLike | None = None, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """A nested tensor of random values, one per element (stacked along dim 0 only)."""
        return self._nested(lambda s: s.rand(generator=generator), shape, "rand")

    def zero(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """A nested tensor of zeros, one per element (stacked along dim 0 only)."""
        return self._nested(lambda s: s.zero(), shape, "zero")

    def one(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """A nested tensor of ones, one per element (stacked along dim 0 only)."""
        return self._nested(lambda s: s.one(), shape, "one")

    # -------------------------------------------------------------- checking
    def _parts(self, val: Any) -> list[Any] | Reason:
        """``val`` split into one value per element, or why it cannot be."""
        if isinstance(val, (list, tuple)):
            parts = list(val)
        elif isinstance(val, torch.Tensor) and val.is_nested:
            if self._stack_dim != 0:
                return lambda: f"a nested tensor stacks along dim 0, but this spec stacks along dim {self._stack_dim}"
            parts = list(val.unbind(0))
        elif isinstance(val, torch.Tensor):
            lead = val.ndim - self.ndim
            if lead < 0:
                return lambda: f"expected shape {tuple(self.shape)} (possibly with leading batch dims), got {tuple(val.shape)}"
            parts = list(val.unbind(lead + self._stack_dim))
        else:
            return lambda: f"expected a tensor, a nested tensor or a list of tensors, got {type(val).__name__}"
        if len(parts) != len(self._elements):
            return lambda: f"expected {len(self._elements)} stacked values, got {len(parts)}"
        return parts

    def _check(self, val: Any) -> Reason | None:
        parts = self._parts(val)
        if callable(parts):
            return parts
        for i, (spec, part) in enumerate(zip(self._elements, parts)):
            reason = spec._check(part)
            if reason is not None:
                return lambda i=i, reason=reason: f"element {i} of the stack: {reason()}"
        return None

    def type_check(self, value: Any, key: Any = None) -> None:
        """Raise ``ValueError`` if ``value``'s dtype is not the spec's (nested tensors and lists too)."""
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            super().type_check(v, key)

    def project(self, val: Any) -> Any:
        """Project each element's value onto its spec; returns the same kind of value it got."""
        parts = self._parts(val)
        if callable(parts):
            raise ValueError(f"{self._short_name()}.project: {parts()}")
        projected = [spec.project(part) for spec, part in zip(self._elements, parts)]
        if isinstance(val, (list, tuple)):
            return type(val)(projected)
        if val.is_nested:
            return torch.nested.as_nested_tensor(projected)
        return torch.stack(projected, val.ndim - self.ndim + self._stack_dim)

    def encode(self, val: Any, *, ignore_device: bool = False) -> Any:
        """Encode a list of per-element values (or a nested/dense tensor) element by element."""
        if isinstance(val, torch.Tensor) and not val.is_nested and val.ndim >= self.ndim:
            return self.project(val)
        parts = list(val.unbind(0)) if isinstance(val, torch.Tensor) else list(val)
        if len(parts) != len(self._elements):
            raise ValueError(f"{self._short_name()}.encode: expected {len(self._elements)} values, got {len(parts)}")
        return [spec.encode(part, ignore_device=ignore_device) for spec, part in zip(self._elements, parts)]

    def _short_name(self) -> str:
        return f"Stacked(shape={tuple(self.shape)}, dim={self._stack_dim}, dtype={self.dtype})"

    # ------------------------------------------------------------ structural
    def expand(self, *shape: Any) -> Stacked:
        """Expand every element; ``-1`` keeps a size (it must be used for the ragged dims).

        Examples:
            >>> import torch
            >>> from cadence.data import Unbounded
            >>> spec = torch.stack([Unbounded(shape=(3,)), Unbounded(shape=(5,))])
            >>> spec.expand(4, 2, -1).specs[1].shape
            torch.Size([4, 5])
        """
        new = _shape_args(shape)
        lead = len(new) - self.ndim
        if lead < 0:
            raise ValueError(f"{self._short_name()}.expand: the new shape {tuple(new)} has fewer dims than the spec")
        at = lead + self._stack_dim
        if new[at] not in (-1, len(self._elements)):
            raise ValueError(f"{self._short_name()}.expand: the stack dim has {len(self._elements)} elements, got {new[at]}")
        for j, size in enumerate(self.shape):
            if size == -1 and new[lead + j] != -1:
                raise ValueError(
                    f"{self._short_name()}.expand: dim {j} differs between the elements; pass -1 there, got {tuple(new)}"
                )
        element_shape = new[:at] + new[at + 1 :]
        return self._map(lambda s: s.expand(element_shape), dim=at)

    def squeeze(self, dim: int | None = None) -> TensorSpec:
        """Remove size-1 dims (all of them, or ``dim``); squeezing the stack dim of one element gives it back."""
        if dim is None:
            out: TensorSpec = self
            for d in reversed(range(self._batch_ndim())):
                if self.shape[d] == 1:
                    out = out.squeeze(d)
            return out
        d = _norm_dim(dim, self.ndim, f"{self._short_name()}.squeeze")
        if self.shape[d] != 1:
            return self
        if d == self._stack_dim:
            return self._elements[0]
        element_dim = d if d < self._stack_dim else d - 1
        return self._map(lambda s: s.squeeze(element_dim), dim=self._stack_dim - (d < self._stack_dim))

    def unsqueeze(self, dim: int) -> Stacked:
        """Insert a size-1 dim at ``dim``."""
        d = _norm_dim(dim, self.ndim + 1, f"{self._short_name()}.unsqueeze")
        if d <= self._stack_dim:
            return self._map(lambda s: s.unsqueeze(d), dim=self._stack_dim + 1)
        return self._map(lambda s: s.unsqueeze(d - 1))

    def __getitem__(self, idx: Any) -> TensorSpec:
        """Index the leading dims; an int at the stack dim gives that element's spec."""
        what = f"{self._short_name()}[...]"
        element_index, pick, new_dim = _split_stacked_index(idx, self._batch_ndim(), self._stack_dim, what)
        positions = _picked_positions(pick, len(self._elements), what)
        if isinstance(positions, int):
            return self._elements[positions][element_index] if element_index else self._elements[positions]
        chosen = [self._elements[p] for p in positions]
        if element_index:
            chosen = [s[element_index] for s in chosen]
        if not chosen:
            raise IndexError(f"{what}: the index selects no element")
        return torch.stack(chosen, new_dim)

    def unbind(self, dim: int = 0) -> tuple[TensorSpec, ...]:
        """Split along a dim; along the stack dim this gives the elements.

        Examples:
            >>> import torch
            >>> from cadence.data import Unbounded
            >>> spec = torch.stack([Unbounded(shape=(3,)), Unbounded(shape=(5,))])
            >>> [s.shape for s in spec.unbind(0)]
            [torch.Size([3]), torch.Size([5])]
        """
        d = _norm_dim(dim, self.ndim, f"{self._short_name()}.unbind")
        if d == self._stack_dim:
            return self._elements
        if self.shape[d] == -1:
            raise ValueError(f"{self._short_name()}.unbind: dim {d} differs between the elements")
        return tuple(self[(slice(None),) * d + (i,)] for i in range(self.shape[d]))

    def clone(self) -> Stacked:
        """A deep copy."""
        return self._map(lambda s: s.clone())

    def to(self, dest: DEVICE_TYPING | torch.dtype) -> Stacked:
        """Every element moved to a device or cast to a dtype."""
        return self._map(lambda s: s.to(dest))

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is Stacked
            and other._stack_dim == self._stack_dim
            and len(other._elements) == len(self._elements)
            and all(a == b for a, b in zip(self._elements, other._elements))
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ",\n".join("    " + repr(s).replace("\n", "\n    ") for s in self._elements)
        return f"Stacked(\n{inner},\n    shape={self.shape}, dim={self._stack_dim}, device={self.device}, dtype={self.dtype})"

    @classmethod
    def _stack(cls, specs: list[TensorSpec], dim: int) -> TensorSpec:
        return Stacked(*specs, dim=dim)


# stack_specs (in base) hands same-class specs of different shapes to Stacked
_register_ragged_stack(Stacked._stack)
