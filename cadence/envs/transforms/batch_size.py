"""``BatchSizeTransform``: an env seen with another batch size.

Two uses: giving a batch size to an env that is not batch-locked (a stateless env
such as ``PendulumEnv`` simulates any batch it is handed), and reshaping the batch
of a batched env (``SerialEnv``, ``GymEnv(num_envs=N)``) with a ``reshape_fn`` such
as ``lambda td: td.reshape(-1)``, ``td.unsqueeze(0)`` or ``td.squeeze(0)``.

Examples:
    >>> from cadence.envs.custom import PendulumEnv
    >>> from cadence.envs.transforms import TransformedEnv
    >>> env = TransformedEnv(PendulumEnv(), BatchSizeTransform(batch_size=[4]))
    >>> env.batch_size, env.rollout(3)["next", "th"].shape
    (torch.Size([4]), torch.Size([4, 3]))
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Composite, TensorSpec
from cadence.envs.transforms.base import Compose, Transform, TransformedEnv

__all__ = ["BatchSizeTransform"]

ReshapeFn = Callable[[TensorDictBase], TensorDictBase]
ResetFn = Callable[..., TensorDictBase]


def _stack_grid(elements: list[Any], shape: torch.Size) -> Any:
    """Stacks ``elements`` (specs of one batch element each, in row-major order) into ``shape``."""
    if not shape:
        return elements[0]
    step = math.prod(shape[1:])
    return torch.stack([_stack_grid(elements[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])], 0)


def reshape_spec_batch(spec: TensorSpec | Composite, old: torch.Size, new: torch.Size) -> Any:
    """The spec with its leading batch dims ``old`` laid out as ``new`` (row-major order,
    as ``Tensor.reshape``); the dims after the batch dims are kept.

    Examples:
        >>> import torch
        >>> from cadence.data import Bounded, Composite
        >>> spec = Composite(x=Bounded(torch.arange(6.0).reshape(2, 3), 10.0, shape=(2, 3)), shape=(2, 3))
        >>> out = reshape_spec_batch(spec, torch.Size([2, 3]), torch.Size([6]))
        >>> out.shape, out["x"].low.tolist()
        (torch.Size([6]), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    """
    old, new = torch.Size(old), torch.Size(new)
    if old == new:
        return spec
    if math.prod(old) != math.prod(new):
        raise ValueError(f"BatchSizeTransform: cannot lay out a batch of shape {tuple(old)} as {tuple(new)}.")
    if [s for s in old if s != 1] == [s for s in new if s != 1]:
        # only size-1 dims come and go: squeeze them all, then put the new ones in
        for dim in reversed(range(len(old))):
            if old[dim] == 1:
                spec = spec.squeeze(dim)
        for dim, size in enumerate(new):
            if size == 1:
                spec = spec.unsqueeze(dim)
        return spec
    if not old:
        elements = [spec]
    else:
        elements = [spec[index] for index in itertools.product(*(range(size) for size in old))]
    return _stack_grid(elements, new)


def _expandable(old: torch.Size, new: torch.Size) -> bool:
    if len(new) < len(old):
        return False
    return all(o in (1, n) for o, n in zip(old, new[len(new) - len(old) :]))


class BatchSizeTransform(Transform):
    """Changes the batch size of an env.

    With ``batch_size``, the env below must not be batch-locked (a stateless env that
    simulates whatever batch it is given, like ``PendulumEnv``) and its batch size
    must expand to ``batch_size``: resets without an input reset it with an empty
    tensordict of the new batch size (a reset input of another batch size is
    expanded), steps hand it the outer data unchanged, and the specs are expanded.

    With ``reshape_fn``, the batch of a batched env is laid out anew: ``reshape_fn``
    maps the env's data (outputs of steps and resets) to the outer batch size, and the
    inputs (actions, states, ``"_reset"`` masks) are reshaped back to the env's batch
    size. ``reshape_fn`` must keep the order of the batch elements (``reshape``,
    ``flatten``, ``unflatten``, ``squeeze``, ``unsqueeze``); this is checked when the
    transform joins an env. Partial resets work through the reshape.

    Transforms that follow this one in a ``Compose`` see the outer batch size (in
    their steps' input too), those before it the env's. Put it first: those before it
    would receive the outer reset input in their ``_reset``.

    Args:
        batch_size: the new batch size (exclusive with ``reshape_fn``).
        reshape_fn: a function mapping a tensordict of the env's batch size to the new
            one (exclusive with ``batch_size``).
        reset_func: builds the output of a reset, called as
            ``reset_func(tensordict, tensordict_reset)`` with the reset's input (or
            ``None``) and the env's reset output brought to the new batch size; it
            returns a tensordict of the new batch size.
        env_kwarg: also pass ``env=`` (the ``TransformedEnv`` holding this transform,
            whose specs have the new batch size) to ``reset_func``.

    Examples:
        >>> import torch
        >>> from cadence.envs import SerialEnv
        >>> from cadence.envs.custom import PendulumEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> def reset_func(tensordict, tensordict_reset):  # all pendulums start upright
        ...     tensordict_reset["th"] = torch.zeros_like(tensordict_reset["th"])
        ...     return tensordict_reset
        >>> env = TransformedEnv(PendulumEnv(), BatchSizeTransform(batch_size=[3], reset_func=reset_func))
        >>> env.reset()["th"].tolist()
        [0.0, 0.0, 0.0]
        >>> env = TransformedEnv(SerialEnv(2, PendulumEnv), BatchSizeTransform(reshape_fn=lambda td: td.unsqueeze(0)))
        >>> env.batch_size, env.rollout(4)["next", "reward"].shape
        (torch.Size([1, 2]), torch.Size([1, 2, 4, 1]))
    """

    def __init__(
        self,
        *,
        batch_size: torch.Size | Sequence[int] | None = None,
        reshape_fn: ReshapeFn | None = None,
        reset_func: ResetFn | None = None,
        env_kwarg: bool = False,
    ) -> None:
        super().__init__()
        if (batch_size is None) == (reshape_fn is None):
            raise ValueError(
                "BatchSizeTransform needs exactly one of batch_size and reshape_fn, got "
                f"batch_size={batch_size!r} and reshape_fn={reshape_fn!r}."
            )
        if reshape_fn is not None and not callable(reshape_fn):
            raise TypeError(f"BatchSizeTransform: reshape_fn must be callable, got {type(reshape_fn).__name__}.")
        if reset_func is not None and not callable(reset_func):
            raise TypeError(f"BatchSizeTransform: reset_func must be callable, got {type(reset_func).__name__}.")
        if env_kwarg and reset_func is None:
            raise ValueError(
                "BatchSizeTransform: env_kwarg=True passes the env to reset_func, but no reset_func was given."
            )
        self.batch_size = None if batch_size is None else torch.Size(batch_size)
        self.reshape_fn = reshape_fn
        self.reset_func = reset_func
        self.env_kwarg = env_kwarg
        # the batch sizes below and above this transform, known once it joins an env
        self._inner: torch.Size | None = None
        self._outer: torch.Size | None = None

    # ------------------------------------------------------------------ helpers
    def _owner_env(self) -> TransformedEnv | None:
        container = self.container
        while isinstance(container, Compose):
            container = container.container
        return container if isinstance(container, TransformedEnv) else None

    def _sizes(self) -> tuple[torch.Size, torch.Size]:
        if self._inner is None or self._outer is None:
            raise RuntimeError("BatchSizeTransform is not part of an env yet: its batch sizes are unknown.")
        return self._inner, self._outer

    def _to_outer(self, data: TensorDictBase, what: str) -> TensorDictBase:
        inner, outer = self._sizes()
        if data.batch_size == outer:
            return data
        if self.reshape_fn is not None:
            out = self.reshape_fn(data)
        elif _expandable(data.batch_size, outer):
            out = data.expand(outer).clone()
        else:
            out = data
        if not isinstance(out, TensorDictBase) or out.batch_size != outer:
            got = tuple(out.batch_size) if isinstance(out, TensorDictBase) else type(out).__name__
            raise ValueError(
                f"BatchSizeTransform: the {what} has batch size {tuple(data.batch_size)} and should come out "
                f"with batch size {tuple(outer)}, got {got}."
            )
        return out

    def _to_inner(self, data: TensorDictBase, what: str) -> TensorDictBase:
        inner, outer = self._sizes()
        if self.reshape_fn is None or data.batch_size == inner:
            return data
        if data.batch_size != outer:
            raise ValueError(
                f"BatchSizeTransform: the {what} has batch size {tuple(data.batch_size)}; expected the env's "
                f"batch size {tuple(outer)}."
            )
        return data.reshape(inner)

    # ------------------------------------------------------------------ shapes and specs
    def transform_env_batch_size(self, batch_size: torch.Size) -> torch.Size:
        inner = torch.Size(batch_size)
        if self.batch_size is not None:
            outer = self.batch_size
            if not _expandable(inner, outer):
                raise ValueError(
                    f"BatchSizeTransform: the env's batch size {tuple(inner)} does not expand to "
                    f"batch_size={tuple(outer)}."
                )
            env = self._owner_env()
            if outer != inner and env is not None and env.base_env.batch_locked:
                raise ValueError(
                    f"BatchSizeTransform(batch_size={tuple(outer)}) gives a batch size to envs that are not "
                    f"batch-locked (stateless ones); {type(env.base_env).__name__} is batch-locked with batch "
                    f"size {tuple(inner)}. Use reshape_fn to lay out the batch of a batched env."
                )
        else:
            assert self.reshape_fn is not None
            numel = math.prod(inner)
            probe = TensorDict({"index": torch.arange(numel).reshape(inner)}, inner)
            out = self.reshape_fn(probe)
            if not isinstance(out, TensorDictBase):
                raise TypeError(
                    f"BatchSizeTransform: reshape_fn must return a tensordict, got {type(out).__name__}."
                )
            outer = out.batch_size
            index = out.get("index", None)
            if math.prod(outer) != numel or index is None or not torch.equal(index.reshape(-1), torch.arange(numel)):
                raise ValueError(
                    f"BatchSizeTransform: reshape_fn must lay out the batch anew keeping its elements and their "
                    f"order (reshape, flatten, unflatten, squeeze, unsqueeze); it maps batch size {tuple(inner)} "
                    f"to {tuple(outer)}" + ("." if math.prod(outer) != numel else " and reorders the elements.")
                )
        self._inner, self._outer = inner, torch.Size(outer)
        return self._outer

    def _reshape_spec(self, spec: Composite) -> Composite:
        inner, outer = self._sizes()
        if inner == outer:
            return spec
        if self.batch_size is not None:
            return spec.expand(outer)
        return reshape_spec_batch(spec, inner, outer)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        return self._reshape_spec(output_spec)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        return self._reshape_spec(input_spec)

    # ------------------------------------------------------------------ data
    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        # a bare tensordict (a replay buffer's, say) of the env's batch size
        return self._to_outer(tensordict, "input")

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._to_inner(tensordict, "step input")

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        next_tensordict = self._to_outer(next_tensordict, "step output")
        inner, outer = self._sizes()
        if tensordict.batch_size == inner != outer:
            # the transforms that follow read the step's input in the outer layout (a
            # running sum, a counter): lay the input out anew, in place, for them
            moved = self._to_outer(tensordict.exclude("next"), "step input")
            for key in list(tensordict.keys()):
                del tensordict[key]
            tensordict.batch_size = outer
            tensordict.update(moved)
        return next_tensordict

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        inner, outer = self._sizes()
        if self.batch_size is not None:
            env = self._owner_env()
            device = None if env is None else env.base_env.device
            if tensordict is None:
                return TensorDict({}, outer, device=device) if outer != inner else None
            if tensordict.batch_size != outer and _expandable(tensordict.batch_size, outer):
                return tensordict.expand(outer).clone()
            return tensordict
        if tensordict is None:
            return None
        return self._to_inner(tensordict, "reset input")

    def _reset_input_inv(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        """The reset input as the transforms before this one see it (the env's batch size)."""
        if tensordict is None or self.reshape_fn is None:
            return tensordict
        return self._to_inner(tensordict, "reset input")

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        out = self._to_outer(tensordict_reset, "reset output")
        if self.reset_func is not None:
            kwargs = {"env": self._owner_env()} if self.env_kwarg else {}
            result = self.reset_func(tensordict, out, **kwargs)
            _, outer = self._sizes()
            if not isinstance(result, TensorDictBase) or result.batch_size != outer:
                got = tuple(result.batch_size) if isinstance(result, TensorDictBase) else type(result).__name__
                raise ValueError(
                    f"BatchSizeTransform: reset_func must return a tensordict of batch size {tuple(outer)}, got {got}."
                )
            out = result
        return out

    def __repr__(self) -> str:
        how = f"batch_size={tuple(self.batch_size)}" if self.batch_size is not None else f"reshape_fn={self.reshape_fn}"
        return f"BatchSizeTransform({how})"
