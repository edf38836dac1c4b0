"""Continuous and free-form leaf specs: ``Unbounded``, ``Bounded`` and ``NonTensor``.

The discrete family (``Categorical``, ``Binary``, ``OneHot``, ``MultiCategorical``,
``MultiOneHot``), whose specs can carry a mask of allowed values, lives in
:mod:`cadence.data.specs.discrete`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tensordict import NonTensorData

from .base import DEVICE_TYPING, Reason, ShapeLike, TensorSpec, _check_dtype, _concrete, _summarise

__all__ = ["Unbounded", "Bounded", "NonTensor"]


def _range_text(val: torch.Tensor) -> str:
    if val.numel() == 0:
        return "no values"
    return f"values in [{val.min().item()}, {val.max().item()}]"


def _value_text(val: torch.Tensor) -> str:
    """The range of ``val``, and where it holds NaN (whose min/max would say only "nan")."""
    if not val.is_floating_point():
        return _range_text(val)
    nan = val.isnan()
    if not bool(nan.any()):
        return _range_text(val)
    where = tuple(nan.nonzero()[0].tolist())
    rest = val[~nan]
    others = f"; the other values are in [{rest.min().item()}, {rest.max().item()}]" if rest.numel() else ""
    return f"NaN in {int(nan.sum())} of {val.numel()} element(s) (first at index {where}){others}"


class Unbounded(TensorSpec):
    """A tensor with any value of its dtype.

    Args:
        shape: the shape (default ``(1,)``); ``-1`` marks a dynamic dim.
        device: the device (default CPU).
        dtype: the dtype (default ``torch.get_default_dtype()``).

    ``rand`` draws from a standard normal for floating dtypes and uniformly from
    ``[-100, 100)`` for integer dtypes.

    ``is_in`` checks the dtype and shape only: every value of the dtype is in the spec,
    NaN and infinities included (as in the reference library). An env that must not emit
    NaN declares a ``Bounded`` spec, whose ``is_in`` rejects NaN, even with infinite bounds.

    Examples:
        >>> import torch
        >>> from cadence.data import Unbounded
        >>> spec = Unbounded(shape=(3, -1, 2))
        >>> spec.zero().shape
        torch.Size([3, 1, 2])
        >>> spec.is_in(torch.zeros(3, 7, 2))
        True
        >>> spec.is_in(torch.full((3, 1, 2), float("nan")))
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
    stacks them. NaN is never in the spec, whatever the bounds (``is_in`` is false,
    ``assert_is_in`` says where the NaN are); use ``-inf``/``inf`` for a missing bound.

    Raises:
        ValueError: at construction, if a bound holds NaN or ``low > high`` anywhere
            (the message names the first such element).
        TypeError: if ``dtype`` is not a ``torch.dtype``.

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
        >>> spec.is_in(torch.tensor([0.0, float("nan")]))
        False
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
        _check_dtype(dtype, "Bounded")
        is_arr = isinstance(low, (torch.Tensor, np.ndarray)) or isinstance(high, (torch.Tensor, np.ndarray))
        low_t = torch.as_tensor(low)
        high_t = torch.as_tensor(high)
        for name, bound in (("low", low_t), ("high", high_t)):
            # checked before the cast to dtype: an integer dtype would turn NaN into a number
            if bound.is_floating_point() and bool(bound.isnan().any()):
                where = tuple(bound.isnan().nonzero()[0].tolist())
                raise ValueError(
                    f"Bounded: {name} holds NaN (first at index {where}); a bound must be a number "
                    f"(use -inf/inf for no bound), got {name}={bound.tolist() if bound.numel() <= 8 else _summarise(bound)}"
                )
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
        inverted = self.low > self.high
        if bool(inverted.any()):
            where = tuple(inverted.nonzero()[0].tolist())
            raise ValueError(
                f"Bounded: expected low <= high everywhere, but at index {where} low={self.low[where].item()} > "
                f"high={self.high[where].item()} (low={_summarise(self.low)}, high={_summarise(self.high)})"
            )

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
        # written as "not inside" rather than "below or above" so that NaN, which compares
        # false with everything, is outside; the cost is the same three element-wise ops
        if bool((~((val >= self.low) & (val <= self.high))).any()):
            return lambda: f"expected values in [{_summarise(self.low)}, {_summarise(self.high)}], got {_value_text(val)}"
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
