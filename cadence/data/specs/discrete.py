"""Discrete leaf specs: ``Categorical``, ``Binary``, ``OneHot``, ``MultiCategorical`` and
``MultiOneHot``.

All but ``Binary`` can carry a mask of the allowed values (``update_mask``), as an env
with an action mask needs: ``rand`` draws only allowed values, ``is_in`` rejects the
others, and ``rand`` raises when the mask leaves no value to draw.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .base import DEVICE_TYPING, Reason, ShapeLike, TensorSpec, _check_count, _check_dtype, _shape_matches, _summarise, _to_size
from .leaves import _range_text

__all__ = ["Categorical", "Binary", "OneHot", "MultiCategorical", "MultiOneHot"]


def _check_some_allowed(mask: torch.Tensor, owner: str, entries: str = "batch entries") -> None:
    """Raise if, somewhere, the mask's last dim (the categories) is all False: ``rand``
    would have nothing to draw there (``torch.multinomial`` would fail with "invalid
    multinomial distribution", which names neither the spec nor the entry).

    Args:
        mask: the categories' mask, categories on the last dim.
        owner: the spec, for the message.
        entries: what the leading indices of the mask are, for the message.
    """
    _raise_if_none_allowed(mask.any(-1), owner, entries)


def _raise_if_none_allowed(allowed: torch.Tensor, owner: str, entries: str) -> None:
    """Raise, listing the entries where ``allowed`` (one flag per drawn value) is False."""
    if bool(allowed.all()):
        return
    if allowed.ndim == 0:
        raise ValueError(f"{owner}.rand: the mask allows no category, so no value (no action) can be drawn")
    empty = [tuple(index) for index in (~allowed).nonzero().tolist()]
    shown = ", ".join(map(str, empty[:8])) + (f" and {len(empty) - 8} more" if len(empty) > 8 else "")
    raise ValueError(
        f"{owner}.rand: the mask allows no category at {entries} {shown} (of shape {tuple(allowed.shape)}), "
        "so no value (no action) can be drawn there"
    )


def _multinomial(spec: TensorSpec, weights: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One index per row of ``weights`` (``[rows, n]``), drawn on the generator's device."""
    if generator is not None and generator.device != spec.device:
        return torch.multinomial(weights.to(generator.device), 1, generator=generator).to(spec.device)
    return torch.multinomial(weights, 1, generator=generator)


def _integer_counts(values: Any, owner: str) -> torch.Tensor:
    """``nvec`` as an int64 tensor of entries >= 1, or a clear error (an empty ``nvec``,
    a fraction that a cast would truncate, a count below one)."""
    raw = torch.as_tensor(values)
    if raw.numel() == 0:
        raise ValueError(f"{owner}: nvec must hold at least one number of categories, got an empty nvec")
    if raw.dtype == torch.bool or raw.is_complex():
        raise TypeError(f"{owner}: nvec must hold ints >= 1, got dtype {raw.dtype}")
    if raw.is_floating_point() and not bool((raw == raw.round()).all()):
        raise ValueError(f"{owner}: nvec must hold ints >= 1, got {raw.tolist()}")
    if bool((raw < 1).any()):
        raise ValueError(f"{owner}: expected every nvec entry >= 1 (a group needs a category), got {raw.tolist()}")
    return raw.to(torch.int64)


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
        _check_some_allowed(self.mask, self._short_name())  # type: ignore[attr-defined]
        weights = self.mask.expand(batch_shape + torch.Size((self.n,))).reshape(-1, self.n).float()
        return _multinomial(self, weights, generator).reshape(batch_shape)  # type: ignore[arg-type]

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

    Raises:
        ValueError: ``n`` is not an int >= 1; ``rand`` with a mask that allows no
            category somewhere (the message lists those entries).
        TypeError: ``dtype`` is not a ``torch.dtype``.

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
        dtype = torch.int64 if dtype is None else dtype
        super().__init__(shape, device, dtype)
        n = _check_count(n, type(self).__name__, "n")
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
        _check_dtype(dtype, "Binary")
        dtype = torch.int8 if dtype is None else dtype
        if n is not None:
            n = _check_count(n, "Binary", "n")
        if shape is None:
            if n is None:
                raise ValueError("Binary: give n or shape")
            shape = (n,)
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

    Raises:
        ValueError: ``n`` is not an int >= 1 (``OneHot(0)``), or ``shape[-1] != n``;
            ``rand`` with a mask that allows no category somewhere (the message lists
            those entries).
        TypeError: ``dtype`` is not a ``torch.dtype``.

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
        _check_dtype(dtype, "OneHot")
        n = _check_count(n, "OneHot", "n")
        if shape is None:
            shape = (n,)
        size = _to_size(shape)
        if len(size) == 0 or size[-1] != n:
            raise ValueError(f"OneHot: expected shape[-1] == n == {n}, got shape {tuple(size)}")
        super().__init__(size, device, torch.bool if dtype is None else dtype)
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
        mask: an optional boolean mask of the allowed values (see ``update_mask``).

    Raises:
        ValueError: an empty ``nvec`` or an entry below one; ``rand`` with a mask that
            allows no value for some element (the message lists them).
        TypeError: ``dtype`` is not a ``torch.dtype``.

    Examples:
        >>> from cadence.data import MultiCategorical
        >>> spec = MultiCategorical([2, 3, 4])
        >>> spec.shape, spec.is_in(spec.rand((5,)))
        (torch.Size([3]), True)
    """

    # the mask is kept per element, as ``shape + (max(nvec),)`` (False past an element's
    # nvec), so that indexing, expanding and stacking treat it as any per-element parameter
    _param_names = ("nvec", "mask")

    nvec: torch.Tensor
    mask: torch.Tensor | None

    def __init__(
        self,
        nvec: Sequence[int] | torch.Tensor,
        shape: ShapeLike | None = None,
        device: DEVICE_TYPING | None = None,
        dtype: torch.dtype = torch.int64,
        mask: torch.Tensor | None = None,
    ) -> None:
        _check_dtype(dtype, "MultiCategorical")
        nvec_t = _integer_counts(nvec, "MultiCategorical")
        if shape is None:
            shape = nvec_t.shape
        super().__init__(shape, device, torch.int64 if dtype is None else dtype)
        try:
            self.nvec = nvec_t.to(self.device).expand(self._concrete_shape)
        except RuntimeError:
            raise ValueError(
                f"MultiCategorical: nvec of shape {tuple(nvec_t.shape)} does not broadcast to shape {tuple(self.shape)}"
            ) from None
        self.mask = None
        if mask is not None:
            self.update_mask(mask)

    def _groups(self) -> list[int]:
        """The numbers of categories along the last dim, the same at every leading index
        (what the concatenated mask layout needs)."""
        if self.ndim == 0:
            return [int(self.nvec)]
        first = self.nvec[(0,) * (self.ndim - 1)]
        if not bool((self.nvec == first).all()):
            raise ValueError(
                f"{self._short_name()}.update_mask: a mask needs the same nvec at every leading index, "
                f"got nvec={self.nvec.tolist()}"
            )
        return first.tolist()

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Set (or clear, with None) the mask of allowed values.

        The mask is laid out as the matching one-hot spec: shape ``shape[:-1] +
        (sum(nvec),)``, the categories of each element of the last dim one after the
        other (the reference library's layout). ``rand`` then draws only allowed values
        and ``is_in`` rejects the others. A mask that allows nothing somewhere is
        accepted here (an env may emit one at the end of a game); ``rand`` raises on it.

        Examples:
            >>> import torch
            >>> from cadence.data import MultiCategorical
            >>> spec = MultiCategorical([2, 3])
            >>> spec.update_mask(torch.tensor([False, True, True, False, False]))
            >>> spec.rand().tolist()
            [1, 0]
        """
        if mask is None:
            self.mask = None
            return
        groups = self._groups()
        lead = self._concrete_shape[:-1]
        want = lead + torch.Size((sum(groups),))
        mask = torch.as_tensor(mask, device=self.device).bool()
        try:
            mask = mask.expand(want)
        except RuntimeError:
            raise ValueError(
                f"{self._short_name()}.update_mask: expected a mask of shape {tuple(want)} (shape[:-1] + "
                f"(sum(nvec),)), got {tuple(mask.shape)}"
            ) from None
        width = max(groups)
        parts = [
            torch.nn.functional.pad(part, (0, width - n), value=False) for part, n in zip(mask.split(groups, -1), groups)
        ]
        self.mask = torch.stack(parts, -2).reshape(self._concrete_shape + torch.Size((width,)))

    @property
    def domain(self) -> str:
        """Always ``"discrete"``."""
        return "discrete"

    def rand(self, shape: ShapeLike | None = None, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Independent uniform draws per element (among the allowed values if masked)."""
        full = self._full_shape(shape)
        if self.mask is not None:
            _check_some_allowed(self.mask, self._short_name(), "elements")
            width = self.mask.shape[-1]
            weights = self.mask.expand(full + torch.Size((width,))).reshape(-1, width).float()
            return _multinomial(self, weights, generator).reshape(full).to(self.dtype)
        u = self._uniform(full, generator, torch.float64)
        n = self.nvec.to(torch.float64)
        return torch.minimum((u * n).floor(), n - 1).to(self.dtype)

    def _check_values(self, val: torch.Tensor) -> Reason | None:
        if bool(((val < 0) | (val >= self.nvec)).any()):
            return lambda: f"expected values in [0, nvec) with nvec={_summarise(self.nvec)}, got {_range_text(val)}"
        if self.mask is not None:
            allowed = self.mask.expand(val.shape + self.mask.shape[-1:]).gather(-1, val.long().unsqueeze(-1))
            if not bool(allowed.all()):
                return lambda: "expected values allowed by the mask, got masked-out values"
        return None

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if val.is_floating_point():
            val = val.round()
        val = val.to(torch.int64)
        return torch.maximum(torch.minimum(val, self.nvec - 1), torch.zeros_like(val)).to(self.dtype)

    def _short_name(self) -> str:
        return f"MultiCategorical(nvec={_summarise(self.nvec)}, shape={tuple(self.shape)})"

    def _repr_fields(self) -> list[str]:
        return [f"nvec={_summarise(self.nvec)}"] + (["masked=True"] if self.mask is not None else [])


class MultiOneHot(TensorSpec):
    """Concatenated one-hot vectors, one per group of sizes ``nvec``, on the last dim.

    Args:
        nvec: the number of categories of each group.
        shape: the shape (default ``(sum(nvec),)``); ``shape[-1]`` must be ``sum(nvec)``.
        device: the device (default CPU).
        dtype: the dtype (default ``torch.bool``).
        mask: an optional boolean tensor of shape ``shape`` marking the allowed
            categories of every group (see ``update_mask``).

    ``encode`` accepts one-hot values or one index per group (last dim ``len(nvec)``).

    Raises:
        ValueError: an empty ``nvec``, an entry below one, or ``shape[-1] != sum(nvec)``;
            ``rand`` with a mask that allows no category in some group (the message
            lists them).
        TypeError: ``dtype`` is not a ``torch.dtype``.

    Examples:
        >>> from cadence.data import MultiOneHot
        >>> spec = MultiOneHot([2, 3])
        >>> spec.encode([1, 0]).long().tolist()
        [0, 1, 1, 0, 0]
        >>> spec.is_in(spec.rand())
        True
    """

    _param_names = ("mask",)
    _eq_attrs = ("nvec",)
    _event_dims = 1

    nvec: tuple[int, ...]
    mask: torch.Tensor | None

    def __init__(
        self,
        nvec: Sequence[int],
        shape: ShapeLike | None = None,
        device: DEVICE_TYPING | None = None,
        dtype: torch.dtype = torch.bool,
        mask: torch.Tensor | None = None,
    ) -> None:
        _check_dtype(dtype, "MultiOneHot")
        nv = tuple(_integer_counts(nvec, "MultiOneHot").reshape(-1).tolist())
        total = sum(nv)
        if shape is None:
            shape = (total,)
        size = _to_size(shape)
        if len(size) == 0 or size[-1] != total:
            raise ValueError(f"MultiOneHot: expected shape[-1] == sum(nvec) == {total}, got shape {tuple(size)}")
        super().__init__(size, device, torch.bool if dtype is None else dtype)
        self.nvec = nv
        self.mask = None
        if mask is not None:
            self.update_mask(mask)

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Set (or clear, with None) the boolean mask of allowed categories, of shape
        ``shape`` (each group's categories where its one-hot vector lies).

        A mask that allows nothing in some group is accepted here; ``rand`` raises on it.

        Examples:
            >>> import torch
            >>> from cadence.data import MultiOneHot
            >>> spec = MultiOneHot([2, 2])
            >>> spec.update_mask(torch.tensor([True, False, False, True]))
            >>> spec.rand().long().tolist()
            [1, 0, 0, 1]
        """
        if mask is None:
            self.mask = None
            return
        mask = torch.as_tensor(mask, device=self.device).bool()
        try:
            self.mask = mask.expand(self._concrete_shape)
        except RuntimeError:
            raise ValueError(
                f"{self._short_name()}.update_mask: expected a mask of shape {tuple(self.shape)}, got {tuple(mask.shape)}"
            ) from None

    @property
    def domain(self) -> str:
        """Always ``"discrete"``."""
        return "discrete"

    def _short_name(self) -> str:
        return f"MultiOneHot(nvec={list(self.nvec)}, shape={tuple(self.shape)})"

    def rand(self, shape: ShapeLike | None = None, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """One random one-hot vector per group."""
        full = self._full_shape(shape)
        if self.mask is None:
            parts = [torch.nn.functional.one_hot(self._randint(n, full[:-1], generator), n) for n in self.nvec]
            return torch.cat(parts, -1).to(self.dtype)
        groups = self.mask.split(list(self.nvec), -1)
        _raise_if_none_allowed(
            torch.stack([group.any(-1) for group in groups], -1), self._short_name(), "entries (index..., group)"
        )
        parts = []
        for group, n in zip(groups, self.nvec):
            weights = group.expand(full[:-1] + torch.Size((n,))).reshape(-1, n).float()
            parts.append(torch.nn.functional.one_hot(_multinomial(self, weights, generator).reshape(full[:-1]), n))
        return torch.cat(parts, -1).to(self.dtype)

    def _check_values(self, val: torch.Tensor) -> Reason | None:
        v = val.long()
        if bool(((v != 0) & (v != 1)).any()):
            return lambda: f"expected 0/1 values, got {_range_text(v)}"
        for i, part in enumerate(v.split(list(self.nvec), -1)):
            if bool((part.sum(-1) != 1).any()):
                return lambda: f"expected one 1 in group {i} (size {self.nvec[i]}) of every vector"
        if self.mask is not None and not bool(self.mask.expand(val.shape)[v.bool()].all()):
            return lambda: "expected categories allowed by the mask, got masked-out categories"
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
        return MultiCategorical(torch.tensor(self.nvec), shape=shape, device=self.device, mask=self.mask)

    def _repr_fields(self) -> list[str]:
        return [f"nvec={list(self.nvec)}"] + (["masked=True"] if self.mask is not None else [])
