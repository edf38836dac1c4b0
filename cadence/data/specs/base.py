"""The spec base class and the shape helpers every spec shares.

A spec describes the tensors a key may hold: their shape, dtype, device and domain.
Leaf specs keep their per-element parameters (bounds, masks, category counts) as
tensors whose leading dims are the spec's shape, so that indexing, expanding,
squeezing and stacking a spec is the same operation on every parameter.

Dynamic dims: a ``-1`` in a shape marks a dim whose size may change from one step to
the next. :meth:`TensorSpec.is_in` accepts any size there, and :meth:`TensorSpec.rand`,
:meth:`TensorSpec.zero` and :meth:`TensorSpec.one` produce size ``1`` there.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import torch

__all__ = ["TensorSpec", "DEVICE_TYPING", "ShapeLike"]

DEVICE_TYPING = torch.device | str | int
ShapeLike = int | Sequence[int] | torch.Size
# Why a value is not in a spec, as a function that writes the message: is_in() runs on hot
# paths (exploration projects every action) and only errors need the text.
Reason = Callable[[], str]


def _to_size(shape: ShapeLike | None, *, what: str = "shape") -> torch.Size:
    """Normalise ``shape`` (None, an int or a sequence of ints) to a ``torch.Size``.

    ``-1`` is accepted and marks a dynamic dim; anything below is rejected.
    """
    if shape is None:
        return torch.Size(())
    if isinstance(shape, torch.Size):
        out = shape
    elif isinstance(shape, (int, np.integer)):
        out = torch.Size((int(shape),))
    else:
        try:
            out = torch.Size(int(s) for s in shape)
        except (TypeError, ValueError):
            raise TypeError(f"{what} must be an int or a sequence of ints, got {shape!r}") from None
    for s in out:
        if s < -1:
            raise ValueError(f"{what} {tuple(out)} has a negative size {s}; only -1 (dynamic) is allowed")
    return out


def _shape_args(shape: tuple[Any, ...]) -> torch.Size:
    """Read ``*shape`` arguments given either as ``f(2, 3)`` or ``f((2, 3))``."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        return _to_size(shape[0])
    return _to_size(shape)


def _concrete(shape: torch.Size) -> torch.Size:
    """``shape`` with every dynamic dim (``-1``) replaced by ``1``."""
    if -1 not in shape:
        return shape
    return torch.Size(1 if s == -1 else s for s in shape)


def _check_dtype(dtype: Any, owner: str, *, allow_none: bool = True) -> None:
    """Reject a ``dtype`` argument that is not a ``torch.dtype`` (a string such as
    ``"float32"``, a numpy dtype...): left alone, it fails later, far from its cause."""
    if isinstance(dtype, torch.dtype) or (dtype is None and allow_none):
        return
    hint = ""
    if isinstance(dtype, str) and isinstance(getattr(torch, dtype.removeprefix("torch."), None), torch.dtype):
        hint = f" (pass torch.{dtype.removeprefix('torch.')})"
    raise TypeError(
        f"{owner}: the dtype argument must be a torch.dtype such as torch.float32, got "
        f"{type(dtype).__name__} {dtype!r}{hint}"
    )


def _check_count(value: Any, owner: str, what: str) -> int:
    """``value`` as an int >= 1 (a number of categories, a vector length), or a clear error."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer, float, np.floating)):
        raise TypeError(f"{owner}: {what} must be an int >= 1, got {type(value).__name__} {value!r}")
    if isinstance(value, (float, np.floating)) and not float(value).is_integer():  # int() would truncate
        raise ValueError(f"{owner}: {what} must be an int >= 1, got {value!r}")
    if value < 1:
        raise ValueError(f"{owner}: expected {what} >= 1 (a spec needs at least one category), got {int(value)}")
    return int(value)


def _to_device(device: DEVICE_TYPING | None) -> torch.device | None:
    if device is None:
        return None
    if isinstance(device, int):
        return torch.device("cuda", device)
    return torch.device(device)


def _shape_matches(value_shape: torch.Size, spec_shape: torch.Size) -> bool:
    """True if ``value_shape`` ends with ``spec_shape`` (``-1`` in the spec matches any size)."""
    n = len(spec_shape)
    if len(value_shape) < n:
        return False
    tail = value_shape[len(value_shape) - n :]
    return all(s == -1 or s == v for s, v in zip(spec_shape, tail))


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"Tensor(shape={tuple(value.shape)}, dtype={value.dtype}, device={value.device})"
    return f"{type(value).__name__}"


def _summarise(t: torch.Tensor) -> str:
    """A short text for a parameter tensor: its value when constant, else its shape."""
    if t.numel() == 0:
        return f"Tensor(shape={tuple(t.shape)})"
    flat = t.reshape(-1)
    first = flat[0]
    if bool((flat == first).all()):
        return repr(first.item())
    if t.numel() <= 8:
        return repr(flat.tolist())
    return f"Tensor(shape={tuple(t.shape)}, dtype={t.dtype})"


def _normalise_index(idx: Any, ndim: int, what: str) -> tuple[Any, ...]:
    """Turn an index into a tuple without Ellipsis, checking it uses at most ``ndim`` dims."""
    if not isinstance(idx, tuple):
        idx = (idx,)

    def consumed(item: Any) -> int:
        if item is None:
            return 0
        if isinstance(item, torch.Tensor) and item.dtype == torch.bool:
            return item.ndim
        if isinstance(item, np.ndarray) and item.dtype == np.bool_:
            return item.ndim
        return 1

    n_ell = sum(1 for i in idx if i is Ellipsis)
    if n_ell > 1:
        raise IndexError(f"{what}: an index can only have a single ellipsis, got {idx!r}")
    used = sum(consumed(i) for i in idx if i is not Ellipsis)
    if used > ndim:
        raise IndexError(f"{what}: index {idx!r} uses {used} dims but only {ndim} can be indexed")
    if n_ell:
        pos = next(k for k, i in enumerate(idx) if i is Ellipsis)
        idx = idx[:pos] + (slice(None),) * (ndim - used) + idx[pos + 1 :]
    return idx


def _indexed_shape(shape: torch.Size, idx: tuple[Any, ...]) -> tuple[torch.Size, int]:
    """Shape of a tensor of (concrete) ``shape`` indexed by ``idx``, and the dims ``idx`` uses."""
    used = 0
    for item in idx:
        if item is None:
            continue
        if isinstance(item, (torch.Tensor, np.ndarray)) and item.dtype in (torch.bool, np.bool_):
            used += item.ndim
        else:
            used += 1
    lead = _concrete(shape[:used])
    dummy = torch.zeros((), dtype=torch.uint8).expand(lead)
    return torch.Size(dummy[idx].shape) + shape[used:], used


def _norm_dim(dim: int, ndim: int, what: str) -> int:
    """Normalise ``dim`` in ``[-ndim, ndim)``."""
    if not -ndim <= dim < ndim:
        raise IndexError(f"{what}: dim {dim} is out of range for {ndim} dims")
    return dim % ndim if ndim else 0


class TensorSpec:
    """Base class of every spec: the shape, dtype, device and domain of a tensor.

    Subclasses describe a domain (:class:`~cadence.data.Bounded`,
    :class:`~cadence.data.Categorical`, ...). A spec's shape includes the batch dims
    of whatever holds it: an env with ``batch_size=[4]`` has action specs of shape
    ``[4, action_dim]``.

    ``torch.stack(list_of_specs, dim)`` works on specs (see :mod:`cadence.data.specs`).

    Args:
        shape: the shape of the tensors; ``-1`` marks a dynamic dim.
        device: where the tensors live (default CPU).
        dtype: the tensors' dtype.

    Examples:
        >>> import torch
        >>> from cadence.data import TensorSpec, Unbounded
        >>> spec = Unbounded(shape=(2, 3))
        >>> isinstance(spec, TensorSpec), spec.ndim, spec.zero().shape
        (True, 2, torch.Size([2, 3]))
    """

    #: names of the attributes that hold per-element parameter tensors; each has
    #: the spec's concrete shape as its leading dims (and maybe trailing extra dims)
    _param_names: ClassVar[tuple[str, ...]] = ()
    #: number of trailing dims that belong to the domain itself (the one-hot dim),
    #: which batch operations (index, expand, squeeze, unsqueeze, stack) must not touch
    _event_dims: ClassVar[int] = 0
    #: parameter tensors that hold values of the spec's dtype (cast by ``to(dtype)``)
    _value_param_names: ClassVar[tuple[str, ...]] = ()
    #: names of plain attributes that take part in ==
    _eq_attrs: ClassVar[tuple[str, ...]] = ()
    #: True for classes whose ``_stack`` handles elements of different shapes itself (Composite)
    _stacks_ragged_itself: ClassVar[bool] = False

    shape: torch.Size
    dtype: torch.dtype | None
    device: torch.device | None

    def __init__(
        self,
        shape: ShapeLike | None,
        device: DEVICE_TYPING | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        _check_dtype(dtype, type(self).__name__)
        self.shape = _to_size(shape)
        self.device = _to_device(device) if device is not None else torch.device("cpu")
        self.dtype = dtype

    # ------------------------------------------------------------------ shape
    @property
    def ndim(self) -> int:
        """The number of dims of the spec's shape."""
        return len(self.shape)

    def ndimension(self) -> int:
        """Same as :attr:`ndim`."""
        return len(self.shape)

    @property
    def is_dynamic(self) -> bool:
        """True if the shape has a dynamic (``-1``) dim."""
        return -1 in self.shape

    @property
    def _concrete_shape(self) -> torch.Size:
        return _concrete(self.shape)

    def _full_shape(self, shape: ShapeLike | None) -> torch.Size:
        if shape is None:
            return self._concrete_shape
        return _to_size(shape) + self._concrete_shape

    # ------------------------------------------------------------- generation
    def rand(self, shape: ShapeLike | None = None, *, generator: torch.Generator | None = None) -> Any:
        """A random value in the spec.

        Args:
            shape: extra leading batch dims to prepend.
            generator: an optional ``torch.Generator`` to draw from.

        Returns:
            A tensor of shape ``shape + spec.shape`` (dynamic dims have size 1).
        """
        raise NotImplementedError(f"{type(self).__name__}.rand")

    def zero(self, shape: ShapeLike | None = None) -> Any:
        """A zero-filled value of the spec's shape, dtype and device.

        Note that zero may lie outside the domain (e.g. for :class:`OneHot`).

        Args:
            shape: extra leading batch dims to prepend.

        Examples:
            >>> from cadence.data import Bounded
            >>> Bounded(-1, 1, shape=(2,)).zero((3,)).shape
            torch.Size([3, 2])
        """
        full = self.shape
        if -1 in full:
            full = _concrete(full)
        if shape is not None:
            full = _to_size(shape) + full
        return torch.zeros(full, dtype=self.dtype, device=self.device)

    def zeros(self, shape: ShapeLike | None = None) -> Any:
        """Alias of :meth:`zero`."""
        return self.zero(shape)

    def one(self, shape: ShapeLike | None = None) -> Any:
        """A one-filled value of the spec's shape, dtype and device.

        Args:
            shape: extra leading batch dims to prepend.
        """
        return torch.ones(self._full_shape(shape), dtype=self.dtype, device=self.device)

    def ones(self, shape: ShapeLike | None = None) -> Any:
        """Alias of :meth:`one`."""
        return self.one(shape)

    def _uniform(self, shape: torch.Size, generator: torch.Generator | None, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Uniform [0, 1) samples on the spec's device, honouring the generator's device."""
        dtype = dtype or (self.dtype if self.dtype is not None and self.dtype.is_floating_point else torch.float32)
        if generator is not None and generator.device != self.device:
            return torch.rand(shape, generator=generator, device=generator.device, dtype=dtype).to(self.device)
        return torch.rand(shape, generator=generator, device=self.device, dtype=dtype)

    def _randint(self, high: int, shape: torch.Size, generator: torch.Generator | None) -> torch.Tensor:
        if generator is not None and generator.device != self.device:
            return torch.randint(high, shape, generator=generator, device=generator.device).to(self.device)
        return torch.randint(high, shape, generator=generator, device=self.device)

    def _randn(self, shape: torch.Size, generator: torch.Generator | None, dtype: torch.dtype) -> torch.Tensor:
        if generator is not None and generator.device != self.device:
            return torch.randn(shape, generator=generator, device=generator.device, dtype=dtype).to(self.device)
        return torch.randn(shape, generator=generator, device=self.device, dtype=dtype)

    # -------------------------------------------------------------- checking
    def _check(self, val: Any) -> Reason | None:
        """Why ``val`` is not in the spec, or None if it is."""
        if not isinstance(val, torch.Tensor):
            return lambda: f"expected a torch.Tensor, got {type(val).__name__}"
        if val.dtype != self.dtype:
            return lambda: f"expected dtype {self.dtype}, got {val.dtype}"
        if not _shape_matches(val.shape, self.shape):
            return lambda: f"expected shape {tuple(self.shape)} (possibly with leading batch dims), got {tuple(val.shape)}"
        return self._check_values(val)

    def _check_values(self, val: torch.Tensor) -> Reason | None:
        return None

    def is_in(self, val: Any) -> bool:
        """True if ``val`` is in the spec: dtype, shape and domain all match.

        ``val`` may carry extra leading batch dims; ``-1`` dims accept any size.

        Examples:
            >>> import torch
            >>> from cadence.data import Bounded
            >>> spec = Bounded(low=0.0, high=1.0, shape=(2,))
            >>> spec.is_in(torch.tensor([0.5, 0.2])), spec.is_in(torch.tensor([2.0, 0.0]))
            (True, False)
        """
        return self._check(val) is None

    def assert_is_in(self, value: Any) -> None:
        """Raise ``ValueError`` (naming expected and actual) if ``value`` is not in the spec.

        Examples:
            >>> import torch
            >>> from cadence.data import Categorical
            >>> Categorical(3).assert_is_in(torch.tensor(5))
            Traceback (most recent call last):
            ...
            ValueError: Categorical(n=3, ...): expected values in [0, 3), got values in [5, 5]
        """
        reason = self._check(value)
        if reason is not None:
            raise ValueError(f"{self._short_name()}: {reason()}")

    def _short_name(self) -> str:
        return f"{type(self).__name__}(shape={tuple(self.shape)}, dtype={self.dtype})"

    def type_check(self, value: torch.Tensor, key: Any = None) -> None:
        """Raise ``ValueError`` if ``value``'s dtype is not the spec's.

        Args:
            value: the tensor to check.
            key: an optional key to name in the error.
        """
        if value.dtype != self.dtype:
            where = f" for key {key!r}" if key is not None else ""
            raise ValueError(f"{self._short_name()}{where}: expected dtype {self.dtype}, got {value.dtype}")

    def project(self, val: torch.Tensor) -> torch.Tensor:
        """Map ``val`` to the nearest value in the spec (clamp, round, cast).

        Examples:
            >>> import torch
            >>> from cadence.data import Bounded
            >>> Bounded(-1.0, 1.0, shape=(2,)).project(torch.tensor([3.0, -0.5]))
            tensor([ 1.0000, -0.5000])
        """
        val = torch.as_tensor(val, device=self.device)
        if not _shape_matches(val.shape, self.shape):
            raise ValueError(
                f"{self._short_name()}.project: expected shape {tuple(self.shape)} "
                f"(possibly with leading batch dims), got {tuple(val.shape)}"
            )
        return self._project(val)

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        return val.to(self.dtype)

    def encode(self, val: Any, *, ignore_device: bool = False) -> Any:
        """Build a tensor of the spec from a numpy array, a Python value or a tensor.

        A value with as many elements as the spec but another shape (e.g. a scalar
        reward for a ``(1,)`` spec) is reshaped; anything else raises ``ValueError``.

        Args:
            val: the value to encode.
            ignore_device: leave the result on the device it came on.

        Examples:
            >>> import numpy as np
            >>> from cadence.data import Unbounded
            >>> Unbounded(shape=(1,)).encode(np.float64(0.5))
            tensor([0.5000])
        """
        device = None if ignore_device else self.device
        if isinstance(val, torch.Tensor):
            t = val.to(device=device if device is not None else val.device, dtype=self.dtype)
        else:
            if isinstance(val, np.ndarray) and not val.flags.writeable:
                val = val.copy()
            t = torch.as_tensor(val, dtype=self.dtype, device=device)
        return self._fit_shape(t)

    def _fit_shape(self, t: torch.Tensor) -> torch.Tensor:
        if _shape_matches(t.shape, self.shape):
            return t
        if not self.is_dynamic and t.numel() == self._concrete_shape.numel():
            return t.reshape(self.shape)
        raise ValueError(
            f"{self._short_name()}.encode: expected shape {tuple(self.shape)} "
            f"(possibly with leading batch dims), got {tuple(t.shape)}"
        )

    def to_numpy(self, val: torch.Tensor, safe: bool = False) -> np.ndarray:
        """Convert a value of the spec to a numpy array.

        Args:
            val: the tensor.
            safe: check the value with :meth:`assert_is_in` first.
        """
        if safe:
            self.assert_is_in(val)
        return val.detach().cpu().numpy()

    # ------------------------------------------------------------ structural
    def _params(self) -> dict[str, torch.Tensor | None]:
        return {name: getattr(self, name) for name in self._param_names}

    def _replace(self, shape: torch.Size, params: dict[str, torch.Tensor | None], **attrs: Any) -> TensorSpec:
        """A shallow copy with a new shape, new parameter tensors and new attributes."""
        new = copy.copy(self)
        new.shape = shape
        for name, value in params.items():
            setattr(new, name, value)
        for name, value in attrs.items():
            setattr(new, name, value)
        return new

    def _map_params(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> dict[str, torch.Tensor | None]:
        return {k: (fn(v) if v is not None else None) for k, v in self._params().items()}

    def _batch_ndim(self) -> int:
        return self.ndim - self._event_dims

    def expand(self, *shape: Any) -> TensorSpec:
        """The spec expanded to a larger shape (torch semantics: size-1 dims and new leading dims).

        ``-1`` in the new shape keeps the existing size.

        Examples:
            >>> from cadence.data import Bounded
            >>> Bounded(-1, 1, shape=(2,)).expand(4, 2).shape
            torch.Size([4, 2])
        """
        new = _shape_args(shape)
        old = self.shape
        if len(new) < len(old):
            raise ValueError(f"{self._short_name()}.expand: the new shape {tuple(new)} has fewer dims than {tuple(old)}")
        lead = len(new) - len(old)
        out = list(new[:lead])
        if -1 in out:
            raise ValueError(f"{self._short_name()}.expand: new leading dims {tuple(new)} cannot be -1")
        for i, (o, n) in enumerate(zip(old, new[lead:])):
            if n == -1 or n == o:
                out.append(o)
            elif o == 1 and i < self._batch_ndim():
                out.append(n)
            else:
                raise ValueError(f"{self._short_name()}.expand: cannot expand shape {tuple(old)} to {tuple(new)}")
        out_size = torch.Size(out)
        conc = _concrete(out_size)
        params = self._map_params(lambda t: t.expand(conc + t.shape[self.ndim :]))
        return self._replace(out_size, params)

    def squeeze(self, dim: int | None = None) -> TensorSpec:
        """The spec without its size-1 dims (or without ``dim`` if it has size 1).

        Examples:
            >>> from cadence.data import Unbounded
            >>> Unbounded(shape=(1, 3, 1)).squeeze().shape
            torch.Size([3])
        """
        bdim = self._batch_ndim()
        if dim is None:
            dims = [i for i in range(bdim) if self.shape[i] == 1]
        else:
            d = _norm_dim(dim, self.ndim, f"{self._short_name()}.squeeze")
            if d >= bdim:
                raise ValueError(f"{self._short_name()}.squeeze: dim {dim} belongs to the domain and cannot be squeezed")
            dims = [d] if self.shape[d] == 1 else []
        if not dims:
            return self
        shape = torch.Size(s for i, s in enumerate(self.shape) if i not in dims)

        def sq(t: torch.Tensor) -> torch.Tensor:
            for d in reversed(dims):
                t = t.squeeze(d)
            return t

        return self._replace(shape, self._map_params(sq))

    def unsqueeze(self, dim: int) -> TensorSpec:
        """The spec with a new size-1 dim at ``dim``.

        Examples:
            >>> from cadence.data import Unbounded
            >>> Unbounded(shape=(3,)).unsqueeze(0).shape
            torch.Size([1, 3])
        """
        d = _norm_dim(dim, self.ndim + 1, f"{self._short_name()}.unsqueeze")
        if d > self._batch_ndim():
            raise ValueError(f"{self._short_name()}.unsqueeze: dim {dim} would split the domain dims")
        shape = self.shape[:d] + torch.Size((1,)) + self.shape[d:]
        return self._replace(shape, self._map_params(lambda t: t.unsqueeze(d)))

    def __getitem__(self, idx: Any) -> TensorSpec:
        """Index the spec along its leading (batch) dims.

        Examples:
            >>> from cadence.data import Bounded
            >>> Bounded(-1, 1, shape=(4, 2))[1:3].shape
            torch.Size([2, 2])
        """
        what = f"{self._short_name()}[...]"
        idx = _normalise_index(idx, self._batch_ndim(), what)
        shape, used = _indexed_shape(self.shape, idx)
        if -1 in self.shape[:used]:
            raise IndexError(f"{what}: cannot index a dynamic (-1) dim")
        return self._replace(shape, self._map_params(lambda t: t[idx]))

    def unbind(self, dim: int = 0) -> tuple[TensorSpec, ...]:
        """Split the spec along a batch dim.

        Examples:
            >>> from cadence.data import Unbounded
            >>> [s.shape for s in Unbounded(shape=(2, 3)).unbind(0)]
            [torch.Size([3]), torch.Size([3])]
        """
        d = _norm_dim(dim, self.ndim, f"{self._short_name()}.unbind")
        if self.shape[d] == -1:
            raise ValueError(f"{self._short_name()}.unbind: cannot unbind a dynamic (-1) dim")
        return tuple(self[(slice(None),) * d + (i,)] for i in range(self.shape[d]))

    def clone(self) -> TensorSpec:
        """A deep copy of the spec.

        Examples:
            >>> from cadence.data import Bounded
            >>> spec = Bounded(-1, 1, shape=(2,))
            >>> spec.clone() == spec
            True
        """
        return self._replace(self.shape, self._map_params(lambda t: t.clone()))

    def to(self, dest: DEVICE_TYPING | torch.dtype) -> TensorSpec:
        """The spec on another device (or, given a dtype, with another dtype).

        Examples:
            >>> from cadence.data import Unbounded
            >>> Unbounded(shape=(2,)).to("cpu").device
            device(type='cpu')
        """
        if isinstance(dest, torch.dtype):
            params = {name: getattr(self, name).to(dest) for name in self._value_param_names}
            return self._replace(self.shape, params, dtype=dest)
        device = _to_device(dest)
        if device == self.device:
            return self
        return self._replace(self.shape, self._map_params(lambda t: t.to(device)), device=device)

    def cpu(self) -> TensorSpec:
        """The spec on CPU."""
        return self.to("cpu")

    def cuda(self, device: int | None = None) -> TensorSpec:
        """The spec on a CUDA device."""
        return self.to(torch.device("cuda") if device is None else torch.device("cuda", device))

    # ------------------------------------------------------------ comparison
    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return False
        assert isinstance(other, TensorSpec)
        if self.shape != other.shape or self.dtype != other.dtype or self.device != other.device:
            return False
        for name in self._eq_attrs:
            a, b = getattr(self, name), getattr(other, name)
            if a is b:
                continue
            if isinstance(a, (np.ndarray, torch.Tensor)) or isinstance(b, (np.ndarray, torch.Tensor)):
                if type(a) is not type(b) or a.shape != b.shape or not bool((a == b).all()):
                    return False
                continue
            try:
                if not bool(a == b):
                    return False
            except (RuntimeError, ValueError, TypeError):
                return False
        for name in self._param_names:
            a, b = getattr(self, name), getattr(other, name)
            if (a is None) != (b is None):
                return False
            if a is not None and (a.shape != b.shape or not torch.equal(a, b)):
                return False
        return True

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def _repr_fields(self) -> list[str]:
        return []

    def __repr__(self) -> str:
        fields = [f"shape={self.shape}"] + self._repr_fields()
        fields += [f"device={self.device}", f"dtype={self.dtype}"]
        return f"{type(self).__name__}({', '.join(fields)})"

    # --------------------------------------------------------------- stacking
    @classmethod
    def __torch_function__(
        cls,
        func: Callable[..., Any],
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if func is torch.stack:
            kwargs = dict(kwargs or {})
            specs = args[0] if args else kwargs.pop("tensors")
            dim = args[1] if len(args) > 1 else kwargs.pop("dim", 0)
            if kwargs.get("out") is not None:
                raise TypeError("torch.stack on specs does not support out=")
            return stack_specs(list(specs), dim)
        return NotImplemented

    @classmethod
    def _stack(cls, specs: list[TensorSpec], dim: int) -> TensorSpec:
        """Stack specs of this class (already checked to share class, dtype, device, shape)."""
        first = specs[0]
        d = _norm_dim(dim, first.ndim + 1, f"torch.stack({cls.__name__})")
        if d > first._batch_ndim():
            raise ValueError(f"torch.stack({cls.__name__}): dim {dim} would split the domain dims")
        shape = first.shape[:d] + torch.Size((len(specs),)) + first.shape[d:]
        for name in first._eq_attrs:
            values = {repr(getattr(s, name)) for s in specs}
            if len(values) > 1:
                raise ValueError(
                    f"torch.stack({cls.__name__}): specs differ in {name!r} ({sorted(values)}); "
                    "only specs whose per-element parameters differ can be stacked"
                )
        if all(s == first for s in specs[1:]):
            return first.unsqueeze(d).expand(shape)
        params: dict[str, torch.Tensor | None] = {}
        for name in first._param_names:
            values = [getattr(s, name) for s in specs]
            if all(v is None for v in values):
                params[name] = None
            elif any(v is None for v in values):
                raise ValueError(f"torch.stack({cls.__name__}): some specs have a {name!r} and others do not")
            else:
                params[name] = torch.stack(values, d)
        return first._replace(shape, params)


def stack_specs(specs: Sequence[TensorSpec], dim: int = 0) -> TensorSpec:
    """Stack specs along a new dim; ``torch.stack(specs, dim)`` calls this.

    Identical specs give an expanded spec; specs that differ only in their per-element
    parameters (e.g. :class:`Bounded` bounds) give one spec with stacked parameters;
    :class:`Composite` specs stack child by child. Specs of one class whose shapes differ
    (heterogeneous agents) give a :class:`~cadence.data.specs.stacked.Stacked` spec that
    keeps them one by one, with ``-1`` where their sizes differ. Specs of different
    classes, dtypes, devices or numbers of dims raise ``ValueError``.

    Args:
        specs: the specs to stack (at least one).
        dim: where the new dim goes.

    Examples:
        >>> import torch
        >>> from cadence.data import Bounded
        >>> s = torch.stack([Bounded(0, 1, shape=(2,)), Bounded(0, 2, shape=(2,))], dim=0)
        >>> s.shape, s.high[:, 0].tolist()
        (torch.Size([2, 2]), [1.0, 2.0])
    """
    specs = list(specs)
    if not specs:
        raise ValueError("torch.stack: expected a non-empty list of specs")
    first = specs[0]
    for i, s in enumerate(specs):
        if not isinstance(s, TensorSpec):
            raise TypeError(f"torch.stack: element {i} is a {type(s).__name__}, not a spec")
        if type(s) is not type(first):
            raise ValueError(
                f"torch.stack: cannot stack specs of different classes: "
                f"element 0 is {type(first).__name__}, element {i} is {type(s).__name__}"
            )
        if s.shape != first.shape and (s.ndim != first.ndim or _ragged_stack is None):
            raise ValueError(
                f"torch.stack: cannot stack specs with different numbers of dims: element 0 has shape "
                f"{tuple(first.shape)}, element {i} has shape {tuple(s.shape)}"
            )
        if s.dtype != first.dtype:
            raise ValueError(
                f"torch.stack: cannot stack specs of different dtypes: element 0 has {first.dtype}, "
                f"element {i} has {s.dtype}"
            )
        if s.device != first.device:
            raise ValueError(
                f"torch.stack: cannot stack specs on different devices: element 0 is on {first.device}, "
                f"element {i} is on {s.device}"
            )
    if _ragged_stack is not None and any(s.shape != first.shape for s in specs) and not first._stacks_ragged_itself:
        return _ragged_stack(specs, dim)
    return type(first)._stack(specs, dim)


#: builds the stack of same-class specs whose shapes differ (``Stacked``); registered by
#: ``cadence.data.specs.stacked`` when it is imported, so that this module needs no import of it
_ragged_stack: Callable[[list[TensorSpec], int], TensorSpec] | None = None


def _register_ragged_stack(build: Callable[[list[TensorSpec], int], TensorSpec]) -> None:
    global _ragged_stack
    _ragged_stack = build
