"""Specs: the shape, dtype, device and domain of every tensor an env reads or writes.

Names follow the newest torchrl API (``Composite``, ``Bounded``, ``Unbounded``,
``Categorical``, ``OneHot``, ``Binary``, ``MultiCategorical``, ``MultiOneHot``,
``NonTensor``); the older names (``CompositeSpec``, ``BoundedTensorSpec``, ...) are
aliases of the same classes.

Things to know:

- **Dynamic dims**: ``-1`` in a shape marks a dim whose size varies. ``is_in`` accepts
  any size there; ``rand``/``zero``/``one`` produce size ``1`` there.
- **Leading batch dims**: ``is_in`` accepts values with extra leading dims (a rollout of
  ``T`` steps is in the spec of one step).
- **Stacking**: ``torch.stack(specs, dim)`` stacks identical specs into an expanded spec,
  specs that differ in per-element parameters (``Bounded`` bounds, masks,
  ``MultiCategorical`` nvec) into one spec with stacked parameters, and Composites child
  by child. Specs of one class whose shapes differ (heterogeneous agents) give a
  ``Stacked`` spec (``-1`` where sizes differ), and Composites holding them a
  ``StackedComposite`` whose values are ``LazyStackedTensorDict``s. Specs of different
  classes, dtypes, devices or numbers of dims raise ``ValueError``.
- ``zero()`` is zero-filled even where zero lies outside the domain (e.g. ``OneHot``).
- **NaN**: never in a ``Bounded`` spec (whatever its bounds); always in an ``Unbounded``
  float spec, which checks only dtype and shape (the reference library's rule).
- **Masks**: ``Categorical``, ``OneHot``, ``MultiCategorical`` and ``MultiOneHot`` take a
  mask of allowed values (``update_mask``); ``rand`` raises ``ValueError`` naming the
  entries where the mask allows nothing.
- **Bad arguments** fail at construction: NaN bounds or ``low > high``, a count of
  categories below one (``OneHot(0)``), a ``dtype`` that is not a ``torch.dtype``.

Examples:
    >>> import torch
    >>> from cadence.data import Composite, Unbounded, Bounded, Binary
    >>> spec = Composite(observation=Unbounded(shape=(3, -1, 2)), action=Bounded(-1, 1, shape=(2,)))
    >>> spec.zero()["observation"].shape
    torch.Size([3, 1, 2])
"""

from __future__ import annotations

import torch

from .base import DEVICE_TYPING, ShapeLike, TensorSpec, stack_specs
from .composite import Composite, NestedKey, StackedComposite, holds_ragged
from .discrete import Binary, Categorical, MultiCategorical, MultiOneHot, OneHot
from .leaves import Bounded, NonTensor, Unbounded
from .stacked import Stacked


class UnboundedContinuous(Unbounded):
    """An :class:`Unbounded` spec with a floating dtype (default ``torch.get_default_dtype()``).

    Calling it returns a plain :class:`Unbounded` instance.

    Examples:
        >>> from cadence.data import UnboundedContinuous, Unbounded
        >>> spec = UnboundedContinuous(shape=(2,))
        >>> type(spec).__name__, spec.dtype
        ('Unbounded', torch.float32)
    """

    def __new__(  # type: ignore[misc]
        cls, shape: ShapeLike | None = (1,), device: DEVICE_TYPING | None = None, dtype: torch.dtype | None = None
    ) -> Unbounded:
        return Unbounded(shape=shape, device=device, dtype=dtype)


class UnboundedDiscrete(Unbounded):
    """An :class:`Unbounded` spec with an integer dtype (default ``torch.int64``).

    Calling it returns a plain :class:`Unbounded` instance.

    Examples:
        >>> from cadence.data import UnboundedDiscrete
        >>> UnboundedDiscrete(shape=(2,)).dtype
        torch.int64
    """

    def __new__(  # type: ignore[misc]
        cls, shape: ShapeLike | None = (1,), device: DEVICE_TYPING | None = None, dtype: torch.dtype = torch.int64
    ) -> Unbounded:
        return Unbounded(shape=shape, device=device, dtype=dtype)


# Older names, as the TorchRL tutorials import them.
CompositeSpec = Composite
BoundedTensorSpec = Bounded
UnboundedContinuousTensorSpec = UnboundedContinuous
UnboundedDiscreteTensorSpec = UnboundedDiscrete
DiscreteTensorSpec = Categorical
OneHotDiscreteTensorSpec = OneHot
BinaryDiscreteTensorSpec = Binary
MultiDiscreteTensorSpec = MultiCategorical
MultiOneHotDiscreteTensorSpec = MultiOneHot
NonTensorSpec = NonTensor

__all__ = [
    "TensorSpec",
    "Composite",
    "Bounded",
    "Unbounded",
    "UnboundedContinuous",
    "UnboundedDiscrete",
    "Categorical",
    "OneHot",
    "Binary",
    "MultiCategorical",
    "MultiOneHot",
    "NonTensor",
    "Stacked",
    "StackedComposite",
    "CompositeSpec",
    "BoundedTensorSpec",
    "UnboundedContinuousTensorSpec",
    "UnboundedDiscreteTensorSpec",
    "DiscreteTensorSpec",
    "OneHotDiscreteTensorSpec",
    "BinaryDiscreteTensorSpec",
    "MultiDiscreteTensorSpec",
    "MultiOneHotDiscreteTensorSpec",
    "NonTensorSpec",
    "NestedKey",
    "stack_specs",
    "holds_ragged",
]

