"""Composite: a (nested) mapping from keys to specs, the spec of a TensorDict."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from .base import (
    DEVICE_TYPING,
    Reason,
    ShapeLike,
    TensorSpec,
    _indexed_shape,
    _norm_dim,
    _normalise_index,
    _shape_args,
    _to_device,
    _to_size,
    stack_specs,
)
from .stacked import Stacked

__all__ = ["Composite", "NestedKey", "StackedComposite", "holds_ragged"]

NestedKey = str | tuple[str, ...]

_NO_DEFAULT = object()


def _norm_key(key: Any) -> tuple[str, ...]:
    if isinstance(key, str):
        return (key,)
    if isinstance(key, tuple) and key and all(isinstance(k, str) for k in key):
        return key
    raise KeyError(f"Composite: expected a str or a non-empty tuple of str as key, got {key!r}")


def _is_key(key: Any) -> bool:
    return isinstance(key, str) or (isinstance(key, tuple) and bool(key) and all(isinstance(k, str) for k in key))


def _out_key(key: tuple[str, ...]) -> NestedKey:
    return key[0] if len(key) == 1 else key


def _lookup(val: Any, key: NestedKey) -> Any:
    """``val[key]`` for a TensorDict or a (nested) dict, or ``_NO_DEFAULT`` when absent."""
    for part in (key,) if isinstance(key, str) else key:
        if isinstance(val, TensorDictBase):
            if part not in val.keys():
                return _NO_DEFAULT
            val = val[part]
        elif isinstance(val, Mapping):
            if part not in val:
                return _NO_DEFAULT
            val = val[part]
        else:
            return _NO_DEFAULT
    return val


def _ragged_dim_among(specs: Iterable[TensorSpec], batch_ndim: int) -> int | None:
    """The first of the ``batch_ndim`` leading dims along which one of ``specs`` stacks
    elements of different shapes (directly or in a nested Composite), if any."""
    found: int | None = None
    for spec in specs:
        if isinstance(spec, Stacked):
            dim: int | None = spec.stack_dim
        elif isinstance(spec, Composite):
            dim = spec._ragged_dim()
        else:
            continue
        if dim is not None and dim < batch_ndim and (found is None or dim < found):
            found = dim
    return found


def holds_ragged(spec: TensorSpec) -> bool:
    """Whether ``spec`` stacks elements of different shapes, itself or in one of its entries
    (their values are lists or lazily stacked TensorDicts, not one tensor).

    Examples:
        >>> import torch
        >>> from cadence.data import Unbounded
        >>> ragged = torch.stack([Unbounded(shape=(3,)), Unbounded(shape=(5,))])
        >>> holds_ragged(ragged), holds_ragged(Composite(obs=ragged, shape=(2,))), holds_ragged(Unbounded(shape=(3,)))
        (True, True, False)
    """
    if isinstance(spec, Stacked):
        return True
    return isinstance(spec, Composite) and any(isinstance(leaf, Stacked) for leaf in spec.values(True, True))


class _KeysView(Sequence):
    """The keys of a :class:`Composite`; ``in`` accepts ``"a"`` and ``("a",)`` alike."""

    def __init__(self, keys: list[NestedKey]) -> None:
        self._keys = keys

    def __iter__(self) -> Iterator[NestedKey]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, i: Any) -> Any:
        return self._keys[i]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, tuple) and len(key) == 1:
            key = key[0]
        return key in self._keys

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (_KeysView, list, tuple, set)):
            return set(self._keys) == set(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"keys({self._keys!r})"


class Composite(TensorSpec):
    """A mapping from keys to specs: the spec of a TensorDict.

    The Composite's ``shape`` is its leading batch dims: every child's shape starts
    with it, and ``rand``/``zero``/``one`` return a ``TensorDict`` with that
    ``batch_size`` (nested Composites give nested TensorDicts). Keys are strings;
    nested entries are reached with tuples (``spec["agents", "action"]``), and setting
    a tuple key creates the missing intermediate Composites.

    A locked Composite (``lock_()``; envs lock their ``input_spec``/``output_spec``)
    raises ``RuntimeError`` on any set, delete, pop or update.

    Args:
        spec_dict: an optional mapping from keys to specs (dict values become Composites).
        shape: the batch shape (default ``()``).
        device: when given, every child is moved to this device.
        **kwargs: more key/spec pairs.

    Examples:
        >>> import torch
        >>> from cadence.data import Composite, Unbounded, Categorical
        >>> spec = Composite(
        ...     observation=Unbounded(shape=(4, 3)),
        ...     agents=Composite(action=Categorical(2, shape=(4, 5)), shape=(4, 5)),
        ...     shape=(4,),
        ... )
        >>> td = spec.zero()
        >>> td.batch_size, td["agents", "action"].shape
        (torch.Size([4]), torch.Size([4, 5]))
        >>> spec.is_in(spec.rand())
        True
        >>> list(spec.keys(include_nested=True, leaves_only=True))
        ['observation', ('agents', 'action')]
    """

    _specs: dict[str, TensorSpec]
    _shape: torch.Size
    _device: torch.device | None
    _locked: bool
    _stacks_ragged_itself = True

    def __init__(
        self,
        spec_dict: Mapping[str, Any] | None = None,
        shape: ShapeLike | None = None,
        device: DEVICE_TYPING | None = None,
        **kwargs: Any,
    ) -> None:
        shape = kwargs.pop("batch_size", shape)
        self._shape = _to_size(shape)
        if -1 in self._shape:
            raise ValueError(f"Composite: the batch shape cannot have dynamic (-1) dims, got {tuple(self._shape)}")
        self._device = _to_device(device)
        self._specs = {}
        self._locked = False
        self.dtype = None
        items = dict(spec_dict or {})
        items.update(kwargs)
        for k, v in items.items():
            self[k] = v

    # ------------------------------------------------------------- properties
    @property
    def shape(self) -> torch.Size:  # type: ignore[override]
        """The batch shape; setting it checks every child against the new shape."""
        return self._shape

    @shape.setter
    def shape(self, value: ShapeLike) -> None:
        new = _to_size(value)
        self._check_unlocked("set the shape")
        for key, spec in self._specs.items():
            if spec.shape[: len(new)] != new:
                raise ValueError(
                    f"Composite: cannot set the shape to {tuple(new)}: the child {key!r} has shape "
                    f"{tuple(spec.shape)}, which does not start with it"
                )
        self._shape = new

    @property
    def device(self) -> torch.device | None:  # type: ignore[override]
        """The device of the Composite (None if its children may differ)."""
        return self._device

    @device.setter
    def device(self, value: DEVICE_TYPING | None) -> None:
        self._device = _to_device(value)

    @property
    def is_locked(self) -> bool:
        """True if the Composite refuses changes."""
        return self._locked

    def lock_(self, recurse: bool = True) -> Composite:
        """Lock the Composite (and nested Composites): set/del/pop/update then raise.

        Examples:
            >>> from cadence.data import Composite, Unbounded
            >>> spec = Composite(obs=Unbounded(shape=(3,))).lock_()
            >>> spec["other"] = Unbounded(shape=(1,))
            Traceback (most recent call last):
            ...
            RuntimeError: Composite is locked: cannot set key 'other'; call unlock_() first
        """
        self._locked = True
        if recurse:
            for spec in self._specs.values():
                if isinstance(spec, Composite):
                    spec.lock_(recurse=True)
        return self

    def unlock_(self, recurse: bool = True) -> Composite:
        """Unlock the Composite (and nested Composites)."""
        self._locked = False
        if recurse:
            for spec in self._specs.values():
                if isinstance(spec, Composite):
                    spec.unlock_(recurse=True)
        return self

    def _check_unlocked(self, what: str) -> None:
        if self._locked:
            raise RuntimeError(f"Composite is locked: cannot {what}; call unlock_() first")

    # ----------------------------------------------------------------- access
    def _child(self, value: Any, key: str) -> TensorSpec:
        if isinstance(value, Mapping) and not isinstance(value, TensorSpec):
            value = Composite(value, shape=self._shape, device=self._device)
        if not isinstance(value, TensorSpec):
            raise TypeError(f"Composite: the value for key {key!r} must be a TensorSpec, got {type(value).__name__}")
        n = len(self._shape)
        if value.shape[:n] != self._shape:
            raise ValueError(
                f"Composite: the child {key!r} has shape {tuple(value.shape)}, which does not start with "
                f"the Composite's shape {tuple(self._shape)}"
            )
        if self._device is not None and value.device is not None and value.device != self._device:
            value = value.to(self._device)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        """Set a child; tuple keys create missing intermediate Composites."""
        if not _is_key(key):
            raise KeyError(f"Composite: expected a str or a non-empty tuple of str as key, got {key!r}")
        k = _norm_key(key)
        self._check_unlocked(f"set key {_out_key(k)!r}")
        if len(k) == 1:
            self._specs[k[0]] = self._child(value, k[0])
            return
        sub = self._specs.get(k[0])
        if sub is None:
            sub = Composite(shape=self._shape, device=self._device)
            self._specs[k[0]] = sub
        elif not isinstance(sub, Composite):
            raise KeyError(f"Composite: cannot set {key!r}: {k[0]!r} holds a {type(sub).__name__}, not a Composite")
        sub[k[1:]] = value

    def set(self, key: NestedKey, spec: TensorSpec) -> Composite:
        """Set a child and return the Composite."""
        self[key] = spec
        return self

    def __getitem__(self, key: Any) -> Any:
        """A child (str or tuple key) or, for any other index, the Composite indexed on its batch dims."""
        if _is_key(key):
            k = _norm_key(key)
            node: TensorSpec = self
            for i, part in enumerate(k):
                if not isinstance(node, Composite):
                    raise KeyError(f"Composite: {k[:i]!r} is a {type(node).__name__}, it has no key {part!r}")
                try:
                    node = node._specs[part]
                except KeyError:
                    raise KeyError(
                        f"Composite: key {_out_key(k)!r} not found (no {part!r} among {sorted(node._specs)})"
                    ) from None
            return node
        return self._index(key)

    def get(self, key: NestedKey, default: Any = _NO_DEFAULT) -> Any:
        """A child, or ``default`` when the key is absent."""
        try:
            return self[key]
        except KeyError:
            if default is _NO_DEFAULT:
                raise
            return default

    def __delitem__(self, key: NestedKey) -> None:
        k = _norm_key(key)
        self._check_unlocked(f"delete key {_out_key(k)!r}")
        parent = self[k[:-1]] if len(k) > 1 else self
        if not isinstance(parent, Composite) or k[-1] not in parent._specs:
            raise KeyError(f"Composite: key {_out_key(k)!r} not found")
        parent._check_unlocked(f"delete key {_out_key(k)!r}")
        del parent._specs[k[-1]]

    def pop(self, key: NestedKey, default: Any = _NO_DEFAULT) -> Any:
        """Remove and return a child (or ``default`` when absent)."""
        k = _norm_key(key)
        self._check_unlocked(f"pop key {_out_key(k)!r}")
        if k not in self:
            if default is _NO_DEFAULT:
                raise KeyError(f"Composite: key {_out_key(k)!r} not found")
            return default
        out = self[k]
        del self[k]
        return out

    def __contains__(self, key: object) -> bool:
        if not _is_key(key):
            return False
        k = _norm_key(key)
        node: TensorSpec = self
        for part in k:
            if not isinstance(node, Composite) or part not in node._specs:
                return False
            node = node._specs[part]
        return True

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def _walk(
        self, include_nested: bool, leaves_only: bool, prefix: tuple[str, ...] = ()
    ) -> Iterator[tuple[tuple[str, ...], TensorSpec]]:
        for k, v in self._specs.items():
            key = prefix + (k,)
            is_comp = isinstance(v, Composite)
            if not (leaves_only and is_comp):
                yield key, v
            if include_nested and is_comp:
                yield from v._walk(include_nested, leaves_only, key)

    def keys(self, include_nested: bool = False, leaves_only: bool = False) -> _KeysView:
        """The keys: top-level only by default; nested ones as tuples with ``include_nested``."""
        return _KeysView([_out_key(k) for k, _ in self._walk(include_nested, leaves_only)])

    def items(self, include_nested: bool = False, leaves_only: bool = False) -> list[tuple[NestedKey, TensorSpec]]:
        """(key, spec) pairs, with the same options as :meth:`keys`."""
        return [(_out_key(k), v) for k, v in self._walk(include_nested, leaves_only)]

    def values(self, include_nested: bool = False, leaves_only: bool = False) -> list[TensorSpec]:
        """The specs, with the same options as :meth:`keys`."""
        return [v for _, v in self._walk(include_nested, leaves_only)]

    # --------------------------------------------------------------- building
    def empty(self) -> Composite:
        """A Composite with the same shape and device and no children."""
        return Composite(shape=self._shape, device=self._device)

    def is_empty(self) -> bool:
        """True if the Composite holds no leaf spec (nested empty Composites count as empty)."""
        return not any(True for _ in self._walk(True, True))

    def select(self, *keys: NestedKey, strict: bool = True) -> Composite:
        """A Composite with only ``keys`` (nested keys keep their path)."""
        out = self.empty()
        for key in keys:
            if key not in self:
                if strict:
                    raise KeyError(f"Composite.select: key {key!r} not found among {list(self.keys(True))}")
                continue
            out[key] = self[key].clone()
        return out

    def exclude(self, *keys: NestedKey) -> Composite:
        """A copy without ``keys`` (missing keys are ignored)."""
        out = self.clone()
        out._locked = False
        for key in keys:
            if key in out:
                del out[key]
        return out

    def update(self, other: Composite | Mapping[str, Any]) -> Composite:
        """Set every entry of ``other`` (nested Composites are merged) and return self."""
        self._check_unlocked("update")
        for k, v in (other.items() if isinstance(other, Composite) else dict(other).items()):
            current = self._specs.get(k) if isinstance(k, str) else None
            if isinstance(current, Composite) and isinstance(v, Composite):
                current.update(v)
            else:
                self[k] = v
        return self

    # ------------------------------------------------------------- generation
    def _td(self, source: dict[str, Any], shape: ShapeLike | None) -> TensorDict:
        batch = self._shape if shape is None else _to_size(shape) + self._shape
        return TensorDict._new_unsafe(source, batch_size=batch, device=self._device)

    def _ragged_dim(self) -> int | None:
        """The first batch dim along which some entry's elements differ in shape, if any."""
        return _ragged_dim_among(self._specs.values(), len(self._shape))

    def _lazy_stack(self, dim: int, make: Any, shape: ShapeLike | None) -> LazyStackedTensorDict:
        """One TensorDict per element along the ragged ``dim``, stacked lazily."""
        lead = 0 if shape is None else len(_to_size(shape))
        return LazyStackedTensorDict.lazy_stack([make(part) for part in self.unbind(dim)], lead + dim)

    def rand(self, shape: ShapeLike | None = None, *, generator: torch.Generator | None = None) -> TensorDictBase:
        """A TensorDict of random values (``batch_size = shape + self.shape``).

        Where entries differ in shape along a batch dim (a stack of heterogeneous specs),
        the result is a ``LazyStackedTensorDict`` along that dim.
        """
        ragged = self._ragged_dim()
        if ragged is not None:
            return self._lazy_stack(ragged, lambda part: part.rand(shape, generator=generator), shape)
        return self._td({k: v.rand(shape, generator=generator) for k, v in self._specs.items()}, shape)

    def zero(self, shape: ShapeLike | None = None) -> TensorDictBase:
        """A TensorDict of zeros (``batch_size = shape + self.shape``; lazily stacked where ragged)."""
        ragged = self._ragged_dim()
        if ragged is not None:
            return self._lazy_stack(ragged, lambda part: part.zero(shape), shape)
        return self._td({k: v.zero(shape) for k, v in self._specs.items()}, shape)

    def one(self, shape: ShapeLike | None = None) -> TensorDictBase:
        """A TensorDict of ones (``batch_size = shape + self.shape``; lazily stacked where ragged)."""
        ragged = self._ragged_dim()
        if ragged is not None:
            return self._lazy_stack(ragged, lambda part: part.one(shape), shape)
        return self._td({k: v.one(shape) for k, v in self._specs.items()}, shape)

    # -------------------------------------------------------------- checking
    def _check(self, val: Any) -> Reason | None:
        return self._check_at(val, ())

    def _check_at(self, val: Any, prefix: tuple[str, ...]) -> Reason | None:
        """Why ``val`` is not in the spec (keys named from the root, after ``prefix``), or None."""
        ragged = self._ragged_dim()
        if ragged is not None and isinstance(val, TensorDictBase):
            return self._check_elements(val, ragged, prefix)
        for key, spec in self._specs.items():
            path = _out_key(prefix + (key,))
            value = _lookup(val, key)
            if value is _NO_DEFAULT:
                return lambda path=path: f"missing key {path!r}"
            if isinstance(spec, Composite) and isinstance(value, (TensorDictBase, Mapping)):
                reason = spec._check_at(value, prefix + (key,))
                if reason is not None:
                    return reason
                continue
            msg = spec._check(value)
            if msg is not None:
                return lambda path=path, msg=msg: f"key {path!r}: {msg()}"
        return None

    def _check_elements(self, val: TensorDictBase, dim: int, prefix: tuple[str, ...]) -> Reason | None:
        """Check a TensorDict element by element along the ragged batch ``dim``."""
        lead = val.batch_dims - len(self._shape)
        if lead < 0 or val.batch_size[lead + dim] != self._shape[dim]:
            return lambda: (
                f"expected batch dims ending in {tuple(self._shape)} (elements stacked along dim {dim}), "
                f"got batch size {tuple(val.batch_size)}"
            )
        for i, (spec, part) in enumerate(zip(self.unbind(dim), val.unbind(lead + dim))):
            reason = spec._check_at(part, prefix)
            if reason is not None:
                return lambda i=i, reason=reason: f"element {i} along dim {dim}: {reason()}"
        return None

    def _short_name(self) -> str:
        return f"Composite(shape={tuple(self._shape)})"

    def is_in(self, val: Any) -> bool:
        """True if every key of the spec is in ``val`` (TensorDict or dict) and in its spec."""
        if not isinstance(val, (TensorDictBase, Mapping)):
            return False
        return self._check(val) is None

    def assert_is_in(self, value: Any) -> None:
        """Raise ``ValueError`` naming the first key that is missing or out of its spec.

        Examples:
            >>> import torch
            >>> from cadence.data import Composite, Unbounded
            >>> Composite(obs=Unbounded(shape=(3,))).assert_is_in({"obs": torch.zeros(4)})
            Traceback (most recent call last):
            ...
            ValueError: Composite(shape=()): key 'obs': expected shape (3,) (possibly with leading batch dims), got (4,)
        """
        if not isinstance(value, (TensorDictBase, Mapping)):
            raise ValueError(f"{self._short_name()}: expected a TensorDict or a dict, got {type(value).__name__}")
        reason = self._check(value)
        if reason is not None:
            raise ValueError(f"{self._short_name()}: {reason()}")

    def type_check(self, value: Any, key: NestedKey | None = None) -> None:
        """Check dtypes of ``value``'s entries (or of one key)."""
        if key is not None:
            self[key].type_check(value if not isinstance(value, (TensorDictBase, Mapping)) else value[key], key)
            return
        present = value.keys(include_nested=True) if isinstance(value, TensorDictBase) else value
        for k, spec in self.items(include_nested=True, leaves_only=True):
            if k in present:
                spec.type_check(value[k], k)

    def project(self, val: Any) -> Any:
        """Project every present entry of ``val`` onto its spec, in place, and return ``val``."""
        ragged = self._ragged_dim()
        if ragged is not None and isinstance(val, LazyStackedTensorDict):
            lead = val.batch_dims - len(self._shape)
            if val.stack_dim == lead + ragged:
                for spec, part in zip(self.unbind(ragged), val.tensordicts):
                    spec.project(part)
                return val
        for key, spec in self._specs.items():
            if key in val.keys():
                val[key] = spec.project(val[key])
        return val

    def encode(self, vals: Mapping[str, Any], *, ignore_device: bool = False) -> TensorDict:
        """A TensorDict of ``vals`` encoded key by key (missing keys are left out).

        Examples:
            >>> import numpy as np
            >>> from cadence.data import Composite, Unbounded
            >>> spec = Composite(obs=Unbounded(shape=(2,)), nested=Composite(r=Unbounded(shape=(1,))))
            >>> td = spec.encode({"obs": np.zeros(2), "nested": {"r": 1.0}})
            >>> td["obs"].dtype, td["nested", "r"].shape
            (torch.float32, torch.Size([1]))
        """
        out: dict[str, Any] = {}
        for k, v in vals.items():
            if k not in self._specs:
                raise KeyError(f"Composite.encode: key {k!r} is not in the spec (keys: {sorted(self._specs)})")
            out[k] = self._specs[k].encode(v, ignore_device=ignore_device)
        return TensorDict(out, batch_size=self._shape, device=None if ignore_device else self._device)

    # ------------------------------------------------------------ structural
    def _rebuild(self, shape: torch.Size, children: dict[str, TensorSpec], device: Any = _NO_DEFAULT) -> Composite:
        cls = type(self)
        if cls in (Composite, StackedComposite):
            cls = StackedComposite if _ragged_dim_among(children.values(), len(shape)) is not None else Composite
        out = Composite.__new__(cls)
        out._shape = shape
        out._device = self._device if device is _NO_DEFAULT else device
        out._specs = children
        out._locked = False
        out.dtype = None
        return out

    def expand(self, *shape: Any) -> Composite:
        """The Composite expanded to a larger batch shape (children follow).

        Examples:
            >>> from cadence.data import Composite, Unbounded
            >>> spec = Composite(obs=Unbounded(shape=(3,))).expand(5)
            >>> spec.shape, spec["obs"].shape
            (torch.Size([5]), torch.Size([5, 3]))
        """
        new = _shape_args(shape)
        old = self._shape
        if len(new) < len(old):
            raise ValueError(f"Composite.expand: the new shape {tuple(new)} has fewer dims than {tuple(old)}")
        lead = len(new) - len(old)
        out = list(new[:lead])
        for o, n in zip(old, new[lead:]):
            if n == -1 or n == o:
                out.append(o)
            elif o == 1:
                out.append(n)
            else:
                raise ValueError(f"Composite.expand: cannot expand shape {tuple(old)} to {tuple(new)}")
        if any(s < 0 for s in out):
            raise ValueError(f"Composite.expand: new leading dims {tuple(new)} cannot be -1")
        size = torch.Size(out)
        children = {k: v.expand(size + v.shape[len(old) :]) for k, v in self._specs.items()}
        return self._rebuild(size, children)

    def squeeze(self, dim: int | None = None) -> Composite:
        """Remove size-1 batch dims (all of them, or ``dim``)."""
        if dim is None:
            out = self
            for d in reversed(range(len(self._shape))):
                if self._shape[d] == 1:
                    out = out.squeeze(d)
            return out
        d = _norm_dim(dim, len(self._shape), "Composite.squeeze")
        if self._shape[d] != 1:
            return self
        shape = self._shape[:d] + self._shape[d + 1 :]
        return self._rebuild(shape, {k: v.squeeze(d) for k, v in self._specs.items()})

    def unsqueeze(self, dim: int) -> Composite:
        """Insert a size-1 batch dim at ``dim`` (counted on the batch dims)."""
        d = _norm_dim(dim, len(self._shape) + 1, "Composite.unsqueeze")
        shape = self._shape[:d] + torch.Size((1,)) + self._shape[d:]
        return self._rebuild(shape, {k: v.unsqueeze(d) for k, v in self._specs.items()})

    def _index(self, idx: Any) -> Composite:
        idx = _normalise_index(idx, len(self._shape), "Composite[...]")
        shape, _ = _indexed_shape(self._shape, idx)
        return self._rebuild(shape, {k: v[idx] for k, v in self._specs.items()})

    def unbind(self, dim: int = 0) -> tuple[Composite, ...]:
        """Split along a batch dim."""
        d = _norm_dim(dim, len(self._shape), "Composite.unbind")
        return tuple(self._index((slice(None),) * d + (i,)) for i in range(self._shape[d]))

    def clone(self) -> Composite:
        """A deep copy (unlocked)."""
        return self._rebuild(self._shape, {k: v.clone() for k, v in self._specs.items()})

    def to(self, dest: DEVICE_TYPING | torch.dtype) -> Composite:
        """The Composite with every child on ``dest`` (a dtype casts every leaf)."""
        if isinstance(dest, torch.dtype):
            return self._rebuild(self._shape, {k: v.to(dest) for k, v in self._specs.items()})
        device = _to_device(dest)
        return self._rebuild(self._shape, {k: v.to(device) for k, v in self._specs.items()}, device=device)

    @property
    def ndim(self) -> int:
        """The number of batch dims."""
        return len(self._shape)

    def ndimension(self) -> int:
        """Same as :attr:`ndim`."""
        return len(self._shape)

    @property
    def is_dynamic(self) -> bool:
        """True if any leaf has a dynamic (-1) dim."""
        return any(v.is_dynamic for v in self.values(True, True))

    @classmethod
    def _stack(cls, specs: list[TensorSpec], dim: int) -> Composite:
        first = specs[0]
        assert isinstance(first, Composite)
        d = _norm_dim(dim, first.ndim + 1, "torch.stack(Composite)")
        keys = set(first._specs)
        for i, s in enumerate(specs[1:], 1):
            assert isinstance(s, Composite)
            if s.shape != first.shape:
                raise ValueError(
                    f"torch.stack(Composite): element {i} has batch shape {tuple(s.shape)}, "
                    f"element 0 has {tuple(first.shape)}"
                )
            other = set(s._specs)
            if other != keys:
                raise ValueError(
                    f"torch.stack(Composite): element {i} has different keys than element 0: "
                    f"missing {sorted(keys - other)}, extra {sorted(other - keys)}"
                )
        children: dict[str, TensorSpec] = {}
        for k in first._specs:
            try:
                children[k] = stack_specs([s._specs[k] for s in specs], d)  # type: ignore[attr-defined]
            except ValueError as err:
                raise ValueError(f"torch.stack(Composite): key {k!r}: {err}") from None
        shape = first.shape[:d] + torch.Size((len(specs),)) + first.shape[d:]
        return first._rebuild(shape, children)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Composite):
            return False
        return (
            self._shape == other._shape
            and self._device == other._device
            and self._specs.keys() == other._specs.keys()
            and all(v == other._specs[k] for k, v in self._specs.items())
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        lines = []
        for k, v in self._specs.items():
            sub = repr(v).replace("\n", "\n    ")
            lines.append(f"    {k}: {sub}")
        body = ",\n".join(lines)
        tail = f"shape={self._shape}, device={self._device}" + (", locked=True" if self._locked else "")
        if not lines:
            return f"Composite({tail})"
        return f"Composite(\n{body},\n    {tail})"


class StackedComposite(Composite):
    """The Composite that ``torch.stack`` makes from Composites whose entries differ in shape.

    It is a :class:`Composite` in every way (keys, nesting, locking); an entry whose
    elements differ in shape is a :class:`~cadence.data.specs.stacked.Stacked` spec with
    ``-1`` at the differing dims. ``rand``/``zero``/``one`` give a
    ``tensordict.LazyStackedTensorDict`` with one TensorDict per element, ``is_in`` and
    ``project`` go element by element, and indexing the stack dim gives an element's
    Composite back. (A plain Composite that holds such an entry behaves the same way.)

    Examples:
        >>> import torch
        >>> from cadence.data import Composite, Unbounded, Categorical
        >>> agent_0 = Composite(observation=Unbounded(shape=(3,)), action=Categorical(4, shape=()))
        >>> agent_1 = Composite(observation=Unbounded(shape=(5,)), action=Categorical(4, shape=()))
        >>> agents = torch.stack([agent_0, agent_1], dim=0)
        >>> type(agents).__name__, agents.shape, agents.stack_dim
        ('StackedComposite', torch.Size([2]), 0)
        >>> agents["observation"].shape, agents["action"].shape
        (torch.Size([2, -1]), torch.Size([2]))
        >>> data = agents.rand((4,), generator=torch.Generator().manual_seed(0))
        >>> type(data).__name__, data.batch_size, data[:, 1]["observation"].shape
        ('LazyStackedTensorDict', torch.Size([4, 2]), torch.Size([4, 5]))
        >>> agents.is_in(data), agents[1] == agent_1
        (True, True)
    """

    @property
    def stack_dim(self) -> int:
        """The batch dim along which the stacked entries differ."""
        dim = self._ragged_dim()
        assert dim is not None  # a StackedComposite is only built around a ragged entry
        return dim
