"""Leaf specs: one tensor each (Unbounded, Bounded, Categorical, Binary, OneHot, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tensordict import NonTensorData

from .base import DEVICE_TYPING, Reason, ShapeLike, TensorSpec, _concrete, _shape_matches, _summarise, _to_size

__all__ = [
    "Unbounded",
    "Bounded",
    "Categorical",
    "Binary",
    "OneHot",
    "MultiCategorical",
    "MultiOneHot",
    "NonTensor",
]


def _range_text(val: torch.Tensor) -> str:
    if val.numel() == 0:
        return "no values"
    return f"values in [{val.min().item()}, {val.max().item()}]"


class Unbounded(TensorSpec):
    """A tensor with any value of its dtype.

    Args:
        shape: the shape (default ``(1,)``); ``-1`` marks a dynamic dim.
        device: the device (default CPU).
        dtype: the dtype (default ``torch.get_default_dtype()``).

    ``rand`` draws from a standard normal for floating dtypes and uniformly from
    ``[-100, 100)`` for integer dtypes.

    Examples:
        >>> import torch
        >>> from cadence.data import Unbounded
        >>> spec = Unbounded(shape=(3, -1, 2))
        >>> spec.zero().shape
        torch.Size([3, 1, 2])
        >>> spec.is_in(torch.zeros(3, 7, 2))
        True
    """

    def __init__(
        self,
        shape: ShapeLike | None = (1,),
        device: DEVICE_TYPING | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(shape, device, dtype if dtype is not None else torch.get_default_dtype())

    @property
    def domain(self) -> str:
        """``"continuous"`` for floating dtypes, else ``"discrete"``."""
        return "continuous" if self.dtype.is_floating_point or self.dtype.is_complex else "discrete"

    def rand(self, shape: ShapeLike | None = None, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """A random value (normal for floats, uniform in [-100, 100) for integers).

        Examples:
            >>> from cadence.data import Unbounded
            >>> Unbounded(shape=(2,)).rand((5,)).shape
            torch.Size([5, 2])
        """
        full = self._full_shape(shape)
        if self.dtype.is_floating_point or self.dtype.is_complex:
            return self._randn(full, generator, self.dtype)
        if self.dtype == torch.bool:
            return self._randint(2, full, generator).bool()
        low = 0 if not self.dtype.is_signed else -100
        return (self._randint(100 - low, full, generator) + low).to(self.dtype)


class Bounded(TensorSpec):
    """A tensor whose values lie in ``[low, high]`` (both inclusive), element-wise.

    Args:
        low: the lower bound: a number (broadcast to ``shape``) or a tensor.
        high: the upper bound: a number or a tensor.
        shape: the shape; when omitted, the broadcast shape of ``low`` and ``high``.
        device: the device (default CPU).
        dtype: the dtype; when omitted, the bounds' dtype if they are tensors or arrays,
            else ``torch.get_default_dtype()``.

    ``rand`` is uniform in the bounds (integers: each value equally likely);
    ``project`` clamps (and rounds for integer dtypes). ``low`` and ``high`` are stored
    with the spec's full shape, and ``torch.stack`` of specs with different bounds
    stacks them.

    Examples:
        >>> import torch
        >>> from cadence.data import Bounded
        >>> spec = Bounded(low=-1, high=1, shape=(2,))
        >>> spec.dtype, spec.low.tolist(), spec.high.tolist()
        (torch.float32, [-1.0, -1.0], [1.0, 1.0])
        >>> Bounded(low=torch.zeros(3), high=torch.ones(3)).shape
        torch.Size([3])
        >>> spec.is_in(spec.rand())
        True
    """

    _param_names = ("low", "high")
    _value_param_names = ("low", "high")

    low: torch.Tensor
    high: torch.Tensor

    def __init__(
        self,
        low: float | int | torch.Tensor | np.ndarray,
        high: float | int | torch.Tensor | np.ndarray,
        shape: ShapeLike | None = None,
        device: DEVICE_TYPING | None = None,
        dtype: torch.dtype | None = None,
        domain: str | None = None,
    ) -> None:
        is_arr = isinstance(low, (torch.Tensor, np.ndarray)) or isinstance(high, (torch.Tensor, np.ndarray))
        low_t = torch.as_tensor(low)
        high_t = torch.as_tensor(high)
        if dtype is None:
            if domain == "discrete":
                dtype = torch.int64
            elif is_arr:
                dtype = torch.promote_types(low_t.dtype, high_t.dtype)
                if not dtype.is_floating_point and dtype != torch.bool and domain == "continuous":
                    dtype = torch.get_default_dtype()
            else:
                dtype = torch.get_default_dtype()
        if shape is None:
            try:
                shape = torch.broadcast_shapes(low_t.shape, high_t.shape)
            except RuntimeError:
                raise ValueError(
                    f"Bounded: low of shape {tuple(low_t.shape)} and high of shape {tuple(high_t.shape)} "
                    "do not broadcast"
                ) from None
        super().__init__(shape, device, dtype)
        conc = self._concrete_shape
        try:
            self.low = low_t.to(device=self.device, dtype=dtype).expand(conc)
            self.high = high_t.to(device=self.device, dtype=dtype).expand(conc)
        except RuntimeError:
            raise ValueError(
                f"Bounded: low of shape {tuple(low_t.shape)} and high of shape {tuple(high_t.shape)} "
                f"do not broadcast to the spec shape {tuple(self.shape)}"
            ) from None
        if bool((self.low > self.high).any()):
            raise ValueError(f"Bounded: expected low <= high everywhere, got low={low!r}, high={high!r}")

    @property
    def domain(self) -> str:
        """``"continuous"`` for floating dtypes, else ``"discrete"``."""
        return "continuous" if self.dtype.is_floating_point else "discrete"

    @property
    def space(self) -> Any:
        """An object with ``low`` and ``high`` attributes (torchrl-style ``spec.space.low``)."""
        return _Box(self.low, self.high)

    def rand(self, shape: ShapeLike | None = None, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """A uniform random value within the bounds.

        Examples:
            >>> from cadence.data import Bounded
            >>> Bounded(0, 10, shape=(3,), dtype=torch.int64).rand((2,)).shape
            torch.Size([2, 3])
        """
        full = self._full_shape(shape)
        if self.dtype.is_floating_point:
            u = self._uniform(full, generator)
            low, high = self.low, self.high
            span = high - low
            if not bool(torch.isfinite(span).all()):
                n = self._randn(full, generator, self.dtype)
                out = torch.where(torch.isfinite(span), low + span * u, n)
                return torch.maximum(torch.minimum(out, high), low)
            return torch.minimum(low + span * u, high)
        if self.dtype == torch.bool:
            u = self._uniform(full, generator)
            lo, hi = self.low.to(torch.int64), self.high.to(torch.int64)
            return (lo + (u * (hi - lo + 1)).floor().to(torch.int64)).clamp(max=1).bool()
        u = self._uniform(full, generator, torch.float64)
        lo, hi = self.low.to(torch.float64), self.high.to(torch.float64)
        out = lo + (u * (hi - lo + 1)).floor()
        return torch.minimum(out, hi).to(self.dtype)

    def _check_values(self, val: torch.Tensor) -> Reason | None:
        if bool(((val < self.low) | (val > self.high)).any()):
            return lambda: f"expected values in [{_summarise(self.low)}, {_summarise(self.high)}], got {_range_text(val)}"
        return None

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if not self.dtype.is_floating_point and val.is_floating_point():
            val = val.round()
        val = val.to(self.dtype)
        return torch.maximum(torch.minimum(val, self.high), self.low)

    def _repr_fields(self) -> list[str]:
        return [f"low={_summarise(self.low)}", f"high={_summarise(self.high)}"]


class _Box:
    """The ``space`` of a :class:`Bounded` spec: its ``low`` and ``high``."""

    def __init__(self, low: torch.Tensor, high: torch.Tensor) -> None:
        self.low = low
        self.high = high

    def __repr__(self) -> str:
        return f"Box(low={_summarise(self.low)}, high={_summarise(self.high)})"


class _Discrete:
    """The ``space`` of a categorical spec: its number of categories ``n``."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"DiscreteBox(n={self.n})"


class _Categories:
    """What ``Categorical`` and ``OneHot`` share: ``n`` categories and an optional mask
    of the allowed ones, from which ``rand`` draws."""

    n: int
    mask: torch.Tensor | None
    device: torch.device

    @property
    def space(self) -> Any:
        """An object with an ``n`` attribute (torchrl-style ``spec.space.n``)."""
        return _Discrete(self.n)

    @property
    def domain(self) -> str:
        """Always ``"discrete"``."""
        return "discrete"

    def _draw_indices(self, batch_shape: torch.Size, generator: torch.Generator | None) -> torch.Tensor:
        """Uniform category indices of shape ``batch_shape``, among the allowed ones if masked."""
        if self.mask is None:
            return self._randint(self.n, batch_shape, generator)  # type: ignore[attr-defined]
        weights = self.mask.expand(batch_shape + torch.Size((self.n,))).reshape(-1, self.n).float()
        if generator is not None and generator.device != self.device:
            drawn = torch.multinomial(weights.to(generator.device), 1, generator=generator).to(self.device)
        else:
            drawn = torch.multinomial(weights, 1, generator=generator)
        return drawn.reshape(batch_shape)

    def _repr_fields(self) -> list[str]:
        out = [f"n={self.n}"]
        if self.mask is not None:
            out.append("masked=True")
        return out


class Categorical(_Categories, TensorSpec):
    """Integer category indices in ``[0, n)``.

    Args:
        n: the number of categories.
        shape: the shape of the index tensor (default ``()``).
        device: the device (default CPU).
        dtype: the dtype (default ``torch.int64``); ``torch.bool`` is allowed with ``n=2``
            (done flags).
        mask: an optional boolean tensor of shape ``shape + (n,)`` marking the
            categories allowed; ``rand`` only draws allowed ones and ``is_in`` rejects
            the others.

    Examples:
        >>> import torch
        >>> from cadence.data import Categorical
        >>> done = Categorical(n=2, shape=(1,), dtype=torch.bool)
        >>> done.zero()
        tensor([False])
        >>> spec = Categorical(4, shape=(3,))
        >>> spec.is_in(spec.rand()), spec.to_one_hot_spec().shape
        (True, torch.Size([3, 4]))
    """

    _param_names = ("mask",)
    _eq_attrs = ("n",)

    n: int
    mask: torch.Tensor | None

    def __init__(
        self,
        n: int,
        shape: ShapeLike | None = None,
        device: DEVICE_TYPING | None = None,
        dtype: torch.dtype = torch.int64,
        mask: torch.Tensor | None = None,
    ) -> None:
        super().__init__(shape, device, dtype)
        n = int(n)
        if n < 1:
            raise ValueError(f"{type(self).__name__}: expected n >= 1, got {n}")
        if dtype == torch.bool and n > 2:
            raise ValueError(f"{type(self).__name__}: a bool dtype holds at most 2 categories, got n={n}")
        if dtype.is_floating_point or dtype.is_complex:
            raise ValueError(f"{type(self).__name__}: expected an integer or bool dtype, got {dtype}")
        self.n = n
        self.mask = None
        if mask is not None:
            self.update_mask(mask)

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Set (or clear, with None) the mask of allowed categories, of shape ``shape + (n,)``.

        Examples:
            >>> import torch
            >>> from cadence.data import Categorical
            >>> spec = Categorical(3)
            >>> spec.update_mask(torch.tensor([False, True, False]))
            >>> spec.rand().item()
            1
        """
        if mask is None:
            self.mask = None
            return
        mask = torch.as_tensor(mask, device=self.device).bool()
        want = self._concrete_shape + torch.Size((self.n,))
        try:
            self.mask = mask.expand(want)
        except RuntimeError:
            raise ValueError(
                f"{self._short_name()}.update_mask: expected a mask of shape {tuple(want)}, got {tuple(mask.shape)}"
            ) from None

    def _short_name(self) -> str:
        return f"{type(self).__name__}(n={self.n}, ...)"

    def rand(self, shape: ShapeLike | None = None, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """A uniform random category index (among the allowed ones if masked)."""
        return self._draw_indices(self._full_shape(shape), generator).to(self.dtype)

    def _check_values(self, val: torch.Tensor) -> Reason | None:
        if self.dtype != torch.bool and bool(((val < 0) | (val >= self.n)).any()):
            return lambda: f"expected values in [0, {self.n}), got {_range_text(val)}"
        if self.mask is not None:
            idx = val.long().unsqueeze(-1)
            m = self.mask.expand(val.shape + torch.Size((self.n,)))
            if not bool(m.gather(-1, idx).all()):
                return lambda: "expected values allowed by the mask, got masked-out categories"
        return None

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if val.is_floating_point():
            val = val.round()
        return val.clamp(0, self.n - 1).to(self.dtype)

    def to_one_hot(self, val: torch.Tensor) -> torch.Tensor:
        """One-hot encode index values of this spec (a new trailing dim of size ``n``)."""
        return torch.nn.functional.one_hot(val.long(), self.n).to(torch.bool)

    def to_one_hot_spec(self) -> OneHot:
        """The matching :class:`OneHot` spec (shape ``shape + (n,)``)."""
        return OneHot(self.n, shape=self.shape + torch.Size((self.n,)), device=self.device, mask=self.mask)



class Binary(Categorical):
    """A vector of 0/1 values (each element independent), e.g. done flags.

    A :class:`Categorical` with two categories whose last dim is the vector length.

    Args:
        n: the vector length; must equal ``shape[-1]`` when both are given.
        shape: the shape (default ``(n,)``).
        device: the device (default CPU).
        dtype: the dtype (default ``torch.int8``; ``torch.bool`` for done flags).

    Examples:
        >>> import torch
        >>> from cadence.data import Binary
        >>> done = Binary(1, shape=(1,), dtype=torch.bool)
        >>> done.zero(), done.is_in(torch.tensor([True]))
        (tensor([False]), True)
    """

    _eq_attrs = ()

    def __init__(
        self,
        n: int | None = None,
        shape: ShapeLike | None = None,
        device: DEVICE_TYPING | None = None,
        dtype: torch.dtype = torch.int8,
    ) -> None:
        if shape is None:
            if n is None:
                raise ValueError("Binary: give n or shape")
            shape = (int(n),)
        size = _to_size(shape)
        if n is not None and (len(size) == 0 or (size[-1] != int(n) and size[-1] != -1)):
            raise ValueError(f"Binary: expected shape[-1] == n == {n}, got shape {tuple(size)}")
        super().__init__(2, shape=size, device=device, dtype=dtype)

    @property
    def size(self) -> int:
        """The vector length (``shape[-1]``)."""
        return self.shape[-1] if self.ndim else 1

    def _short_name(self) -> str:
        return f"Binary(shape={tuple(self.shape)}, dtype={self.dtype})"

    def rand(self, shape: ShapeLike | None = None, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Independent fair 0/1 draws."""
        return self._randint(2, self._full_shape(shape), generator).to(self.dtype)

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if val.dtype == torch.bool:
            return val.to(self.dtype)
        return (val > 0.5).to(self.dtype)

    def _repr_fields(self) -> list[str]:
        return []


class OneHot(_Categories, TensorSpec):
    """One-hot vectors over ``n`` categories; the last dim has size ``n``.

    Args:
        n: the number of categories.
        shape: the shape (default ``(n,)``); ``shape[-1]`` must equal ``n``.
        device: the device (default CPU).
        dtype: the dtype (default ``torch.bool``).
        mask: an optional boolean tensor of shape ``shape`` marking allowed categories.

    ``encode`` accepts one-hot values or category indices (of shape ``shape[:-1]``).

    Examples:
        >>> import torch
        >>> from cadence.data import OneHot
        >>> spec = OneHot(3)
        >>> spec.encode(2)
        tensor([False, False,  True])
        >>> spec.is_in(spec.rand()), spec.to_categorical(spec.encode(1)).item()
        (True, 1)
    """

    _param_names = ("mask",)
    _eq_attrs = ("n",)
    _event_dims = 1

    n: int
    mask: torch.Tensor | None

    def __init__(
        self,
        n: int,
        shape: ShapeLike | None = None,
        device: DEVICE_TYPING | None = None,
        dtype: torch.dtype = torch.bool,
        mask: torch.Tensor | None = None,
    ) -> None:
        n = int(n)
        if shape is None:
            shape = (n,)
        size = _to_size(shape)
        if len(size) == 0 or size[-1] != n:
            raise ValueError(f"OneHot: expected shape[-1] == n == {n}, got shape {tuple(size)}")
        super().__init__(size, device, dtype)
        self.n = n
        self.mask = None
        if mask is not None:
            self.update_mask(mask)

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Set (or clear, with None) the boolean mask of allowed categories (shape ``shape``)."""
        if mask is None:
            self.mask = None
            return
        mask = torch.as_tensor(mask, device=self.device).bool()
        try:
            self.mask = mask.expand(self._concrete_shape)
        except RuntimeError:
            raise ValueError(
                f"OneHot.update_mask: expected a mask of shape {tuple(self.shape)}, got {tuple(mask.shape)}"
            ) from None

    def _short_name(self) -> str:
        return f"OneHot(n={self.n}, shape={tuple(self.shape)}, dtype={self.dtype})"

    def rand(self, shape: ShapeLike | None = None, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """A random one-hot vector (among the allowed categories if masked)."""
        indices = self._draw_indices(self._full_shape(shape)[:-1], generator)
        return torch.nn.functional.one_hot(indices, self.n).to(self.dtype)

    def _check_values(self, val: torch.Tensor) -> Reason | None:
        v = val.to(torch.int64) if val.dtype != torch.bool else val.long()
        if bool(((v != 0) & (v != 1)).any()) or bool((v.sum(-1) != 1).any()):
            return lambda: f"expected one-hot vectors over {self.n} categories (one 1 per vector), got {_range_text(v)} / sums that are not 1"
        if self.mask is not None and not bool(self.mask.expand(val.shape)[v.bool()].all()):
            return lambda: "expected categories allowed by the mask, got masked-out categories"
        return None

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(val.float().argmax(-1), self.n).to(self.dtype)

    def encode(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:
        """One-hot values pass through; category indices are one-hot encoded.

        Examples:
            >>> from cadence.data import OneHot
            >>> OneHot(2, shape=(3, 2)).encode([0, 1, 1]).shape
            torch.Size([3, 2])
        """
        device = None if ignore_device else self.device
        t = val if isinstance(val, torch.Tensor) else torch.as_tensor(np.asarray(val))
        if device is not None:
            t = t.to(device)
        if _shape_matches(t.shape, self.shape) and not (t.ndim == self.ndim - 1):
            return t.to(self.dtype)
        if _shape_matches(t.shape, self.shape[:-1]):
            if bool(((t < 0) | (t >= self.n)).any()):
                raise ValueError(f"{self._short_name()}.encode: expected indices in [0, {self.n}), got {_range_text(t)}")
            return torch.nn.functional.one_hot(t.long(), self.n).to(self.dtype)
        raise ValueError(
            f"{self._short_name()}.encode: expected one-hot values of shape {tuple(self.shape)} "
            f"or indices of shape {tuple(self.shape[:-1])}, got shape {tuple(t.shape)}"
        )

    def to_categorical(self, val: torch.Tensor) -> torch.Tensor:
        """The category index of each one-hot vector (``argmax`` over the last dim)."""
        return val.to(torch.float32 if val.dtype == torch.bool else val.dtype).argmax(-1)

    def to_categorical_spec(self) -> Categorical:
        """The matching :class:`Categorical` spec (shape ``shape[:-1]``)."""
        return Categorical(self.n, shape=self.shape[:-1], device=self.device, mask=self.mask)



class MultiCategorical(TensorSpec):
    """Integer indices where element ``i`` lies in ``[0, nvec[i])``.

    Args:
        nvec: the number of categories of each element: a sequence or tensor whose
            shape broadcasts to ``shape``.
        shape: the shape (default ``nvec``'s shape).
        device: the device (default CPU).
        dtype: the dtype (default ``torch.int64``).

    Examples:
        >>> from cadence.data import MultiCategorical
        >>> spec = MultiCategorical([2, 3, 4])
        >>> spec.shape, spec.is_in(spec.rand((5,)))
        (torch.Size([3]), True)
    """

    _param_names = ("nvec",)

    nvec: torch.Tensor

    def __init__(
        self,
        nvec: Sequence[int] | torch.Tensor,
        shape: ShapeLike | None = None,
        device: DEVICE_TYPING | None = None,
        dtype: torch.dtype = torch.int64,
    ) -> None:
        nvec_t = torch.as_tensor(nvec, dtype=torch.int64)
        if shape is None:
            shape = nvec_t.shape
        super().__init__(shape, device, dtype)
        if bool((nvec_t < 1).any()):
            raise ValueError(f"MultiCategorical: expected every nvec entry >= 1, got {nvec_t.tolist()}")
        try:
            self.nvec = nvec_t.to(self.device).expand(self._concrete_shape)
        except RuntimeError:
            raise ValueError(
                f"MultiCategorical: nvec of shape {tuple(nvec_t.shape)} does not broadcast to shape {tuple(self.shape)}"
            ) from None

    @property
    def domain(self) -> str:
        """Always ``"discrete"``."""
        return "discrete"

    def rand(self, shape: ShapeLike | None = None, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Independent uniform draws per element."""
        full = self._full_shape(shape)
        u = self._uniform(full, generator, torch.float64)
        n = self.nvec.to(torch.float64)
        return torch.minimum((u * n).floor(), n - 1).to(self.dtype)

    def _check_values(self, val: torch.Tensor) -> Reason | None:
        if bool(((val < 0) | (val >= self.nvec)).any()):
            return lambda: f"expected values in [0, nvec) with nvec={_summarise(self.nvec)}, got {_range_text(val)}"
        return None

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if val.is_floating_point():
            val = val.round()
        val = val.to(torch.int64)
        return torch.maximum(torch.minimum(val, self.nvec - 1), torch.zeros_like(val)).to(self.dtype)

    def _short_name(self) -> str:
        return f"MultiCategorical(nvec={_summarise(self.nvec)}, shape={tuple(self.shape)})"

    def _repr_fields(self) -> list[str]:
        return [f"nvec={_summarise(self.nvec)}"]


class MultiOneHot(TensorSpec):
    """Concatenated one-hot vectors, one per group of sizes ``nvec``, on the last dim.

    Args:
        nvec: the number of categories of each group.
        shape: the shape (default ``(sum(nvec),)``); ``shape[-1]`` must be ``sum(nvec)``.
        device: the device (default CPU).
        dtype: the dtype (default ``torch.bool``).

    ``encode`` accepts one-hot values or one index per group (last dim ``len(nvec)``).

    Examples:
        >>> from cadence.data import MultiOneHot
        >>> spec = MultiOneHot([2, 3])
        >>> spec.encode([1, 0]).long().tolist()
        [0, 1, 1, 0, 0]
        >>> spec.is_in(spec.rand())
        True
    """

    _eq_attrs = ("nvec",)
    _event_dims = 1

    nvec: tuple[int, ...]

    def __init__(
        self,
        nvec: Sequence[int],
        shape: ShapeLike | None = None,
        device: DEVICE_TYPING | None = None,
        dtype: torch.dtype = torch.bool,
    ) -> None:
        nv = tuple(int(n) for n in (nvec.tolist() if isinstance(nvec, torch.Tensor) else nvec))
        if not nv or min(nv) < 1:
            raise ValueError(f"MultiOneHot: expected a non-empty nvec of entries >= 1, got {nv}")
        total = sum(nv)
        if shape is None:
            shape = (total,)
        size = _to_size(shape)
        if len(size) == 0 or size[-1] != total:
            raise ValueError(f"MultiOneHot: expected shape[-1] == sum(nvec) == {total}, got shape {tuple(size)}")
        super().__init__(size, device, dtype)
        self.nvec = nv

    @property
    def domain(self) -> str:
        """Always ``"discrete"``."""
        return "discrete"

    def _short_name(self) -> str:
        return f"MultiOneHot(nvec={list(self.nvec)}, shape={tuple(self.shape)})"

    def rand(self, shape: ShapeLike | None = None, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """One random one-hot vector per group."""
        full = self._full_shape(shape)
        parts = [
            torch.nn.functional.one_hot(self._randint(n, full[:-1], generator), n) for n in self.nvec
        ]
        return torch.cat(parts, -1).to(self.dtype)

    def _check_values(self, val: torch.Tensor) -> Reason | None:
        v = val.long()
        if bool(((v != 0) & (v != 1)).any()):
            return lambda: f"expected 0/1 values, got {_range_text(v)}"
        for i, part in enumerate(v.split(list(self.nvec), -1)):
            if bool((part.sum(-1) != 1).any()):
                return lambda: f"expected one 1 in group {i} (size {self.nvec[i]}) of every vector"
        return None

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        parts = [
            torch.nn.functional.one_hot(p.float().argmax(-1), n) for p, n in zip(val.split(list(self.nvec), -1), self.nvec)
        ]
        return torch.cat(parts, -1).to(self.dtype)

    def encode(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:
        """One-hot values pass through; one index per group is one-hot encoded."""
        t = val if isinstance(val, torch.Tensor) else torch.as_tensor(np.asarray(val))
        if not ignore_device:
            t = t.to(self.device)
        if _shape_matches(t.shape, self.shape):
            return t.to(self.dtype)
        if _shape_matches(t.shape, self.shape[:-1] + torch.Size((len(self.nvec),))):
            parts = []
            for i, n in enumerate(self.nvec):
                idx = t[..., i].long()
                if bool(((idx < 0) | (idx >= n)).any()):
                    raise ValueError(f"{self._short_name()}.encode: expected group {i} indices in [0, {n}), got {_range_text(idx)}")
                parts.append(torch.nn.functional.one_hot(idx, n))
            return torch.cat(parts, -1).to(self.dtype)
        raise ValueError(
            f"{self._short_name()}.encode: expected one-hot values of shape {tuple(self.shape)} or "
            f"indices of shape {tuple(self.shape[:-1]) + (len(self.nvec),)}, got shape {tuple(t.shape)}"
        )

    def to_categorical(self, val: torch.Tensor) -> torch.Tensor:
        """The index within each group (last dim ``len(nvec)``)."""
        return torch.stack([p.float().argmax(-1) for p in val.split(list(self.nvec), -1)], -1)

    def to_categorical_spec(self) -> MultiCategorical:
        """The matching :class:`MultiCategorical` spec."""
        shape = self.shape[:-1] + torch.Size((len(self.nvec),))
        return MultiCategorical(torch.tensor(self.nvec), shape=shape, device=self.device)

    def _repr_fields(self) -> list[str]:
        return [f"nvec={list(self.nvec)}"]


class NonTensor(TensorSpec):
    """Non-tensor data (strings, objects) carried in a TensorDict as ``NonTensorData``.

    Args:
        shape: the batch shape (default ``()``).
        device: the device (default CPU).
        dtype: unused; kept for API symmetry.
        example_data: what ``rand``/``zero``/``one`` put in the ``NonTensorData``.

    ``is_in`` accepts any value.

    Examples:
        >>> from cadence.data import NonTensor
        >>> spec = NonTensor(example_data="hello")
        >>> spec.zero().data
        'hello'
    """

    _eq_attrs = ("example_data",)

    def __init__(
        self,
        shape: ShapeLike | None = (),
        device: DEVICE_TYPING | None = None,
        dtype: torch.dtype | None = None,
        example_data: Any = None,
    ) -> None:
        super().__init__(shape, device, dtype)
        self.example_data = example_data

    def _make(self, shape: ShapeLike | None) -> NonTensorData:
        return NonTensorData(data=self.example_data, batch_size=self._full_shape(shape), device=self.device)

    def rand(self, shape: ShapeLike | None = None, *, generator: torch.Generator | None = None) -> NonTensorData:
        """A ``NonTensorData`` holding ``example_data``."""
        return self._make(shape)

    def zero(self, shape: ShapeLike | None = None) -> NonTensorData:
        """A ``NonTensorData`` holding ``example_data``."""
        return self._make(shape)

    def one(self, shape: ShapeLike | None = None) -> NonTensorData:
        """A ``NonTensorData`` holding ``example_data``."""
        return self._make(shape)

    def _check(self, val: Any) -> Reason | None:
        return None

    def project(self, val: Any) -> Any:
        """Non-tensor values are returned unchanged."""
        return val

    def encode(self, val: Any, *, ignore_device: bool = False) -> NonTensorData:
        """Wrap ``val`` in a ``NonTensorData`` of the spec's shape."""
        if isinstance(val, NonTensorData):
            return val
        return NonTensorData(data=val, batch_size=_concrete(self.shape), device=None if ignore_device else self.device)

    def _repr_fields(self) -> list[str]:
        return [f"example_data={self.example_data!r}"] if self.example_data is not None else []
