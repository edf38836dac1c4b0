"""Normalising transforms: ``ObservationTransform`` (their base), ``ObservationNorm``,
``VecNorm`` and ``ClipTransform``.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.envs.transforms.observation import ObservationNorm
    >>> norm = ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"], standard_normal=True)
    >>> norm(TensorDict({"observation": torch.full((2,), 5.0)}, []))["observation"].tolist()
    [2.0, 2.0]
"""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Bounded, Composite, TensorSpec, Unbounded
from cadence.envs.transforms.base import NestedKey, Transform

__all__ = ["ClipTransform", "ObservationNorm", "ObservationTransform", "VecNorm"]


def _unbounded_like(leaf: TensorSpec) -> Unbounded:
    return Unbounded(shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)


class ObservationTransform(Transform):
    """The base of the transforms that act on observations.

    Without ``in_keys`` it reads every floating-point observation of the env it is
    appended to (decided from the env's observation spec), or ``"observation"`` when
    called on bare data.

    Args:
        in_keys: the observations to transform.
        out_keys: where the results go (``in_keys`` by default).
        in_keys_inv: the base env's inputs written by ``inv``.
        out_keys_inv: their outside names (``in_keys_inv`` by default).

    Examples:
        >>> import torch
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> class Halve(ObservationTransform):
        ...     def _apply_transform(self, value):
        ...         return value / 2
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), Halve())
        >>> env.transform[0].in_keys
        ['observation']
    """

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        in_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        out_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        self._find_keys = in_keys is None
        if in_keys is None and out_keys is not None:
            raise ValueError(f"{type(self).__name__}: out_keys={out_keys!r} given without in_keys.")
        super().__init__(["observation"] if in_keys is None else in_keys, out_keys, in_keys_inv, out_keys_inv)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        if self._find_keys:
            found = [
                key for key, leaf in output_spec["full_observation_spec"].items(True, True)
                if leaf.dtype.is_floating_point
            ]
            self.in_keys, self.out_keys = list(found), list(found)
        return super().transform_output_spec(output_spec)


class ObservationNorm(ObservationTransform):
    """The affine map ``obs * scale + loc``, or ``(obs - loc) / scale`` with
    ``standard_normal=True``.

    ``loc`` and ``scale`` are buffers (so they travel with ``state_dict()``, ``to()`` and
    an ``EnvCreator``'s shared memory). Left out, they stay uninitialised (``None``)
    until :meth:`init_stats` computes them from rollouts of the env the transform is
    appended to, or until ``load_state_dict`` brings them: loading into an uninitialised
    transform creates the buffers with the loaded shapes, so calling ``init_stats``
    before ``load_state_dict`` (as some scripts do to "instantiate" them) is allowed but
    not needed. An uninitialised transform passes data through unchanged.

    The specs of the transformed entries become ``Unbounded`` (same shape and dtype):
    the statistics may change after the transform is appended. Results keep the
    dtype of the input.

    Args:
        loc: the offset (a number or a tensor broadcasting with the observations).
        scale: the factor (same).
        in_keys: the observations (``["observation"]``).
        out_keys: where the results go (``in_keys``).
        in_keys_inv: base env inputs to map back with the inverse map (e.g. a
            normalised action: ``inv`` computes ``x * scale + loc`` when
            ``standard_normal``, ``(x - loc) / scale`` otherwise).
        out_keys_inv: their outside names (``in_keys_inv``).
        standard_normal: compute ``(obs - loc) / scale``.
        eps: the smallest scale used when ``standard_normal`` (avoids dividing by 0).

    Examples:
        >>> import torch
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), ObservationNorm(in_keys=["observation"], standard_normal=True))
        >>> env.transform[0].loc is None
        True
        >>> env.transform[0].init_stats(num_iter=50, reduce_dim=0, cat_dim=0)
        >>> env.transform[0].loc.shape, env.transform[0].scale.shape
        (torch.Size([3]), torch.Size([3]))
        >>> other = TransformedEnv(GymEnv("Pendulum-v1"), ObservationNorm(in_keys=["observation"], standard_normal=True))
        >>> _ = other.transform[0].load_state_dict(env.transform[0].state_dict())
        >>> torch.equal(other.transform[0].scale, env.transform[0].scale)
        True
    """

    loc: torch.Tensor | None
    scale: torch.Tensor | None

    def __init__(
        self,
        loc: float | torch.Tensor | None = None,
        scale: float | torch.Tensor | None = None,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        in_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        out_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        standard_normal: bool = False,
        eps: float = 1e-6,
    ) -> None:
        super().__init__(["observation"] if in_keys is None else in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.standard_normal = standard_normal
        self.eps = eps
        if (loc is None) != (scale is None):
            raise ValueError(
                f"ObservationNorm: give both loc and scale or neither (to compute them with init_stats()), "
                f"got loc={loc!r}, scale={scale!r}."
            )
        self.register_buffer("loc", None if loc is None else torch.as_tensor(loc, dtype=torch.get_default_dtype()))
        self.register_buffer("scale", None if scale is None else torch.as_tensor(scale, dtype=torch.get_default_dtype()))

    @property
    def initialized(self) -> bool:
        """Whether ``loc`` and ``scale`` are set."""
        return self.loc is not None and self.scale is not None

    steps_over_time = True  # an affine map over the trailing (observation) dims
    steps_on_values = True  # the base _call: get and set

    def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        buffers = self._buffers  # read once: each module attribute lookup costs on the step path
        loc, scale = buffers["loc"], buffers["scale"]
        if loc is None or scale is None:
            return value
        if loc.device != value.device:
            loc, scale = loc.to(value.device), scale.to(value.device)
        if self.standard_normal:
            out = (value - loc) / scale.clamp_min(self.eps)
        else:
            out = value * scale + loc
        return out if out.dtype == value.dtype else out.to(value.dtype)

    def _inv_apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        if not self.initialized:
            return value
        assert self.loc is not None and self.scale is not None
        loc, scale = self.loc.to(value.device), self.scale.to(value.device)
        if self.standard_normal:
            out = value * scale.clamp_min(self.eps) + loc
        else:
            out = (value - loc) / scale
        return out.to(value.dtype)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._output_leaf_specs(observation_spec, _unbounded_like)

    def _inverse_specs(self, spec: Composite) -> Composite:
        return self._input_leaf_specs(spec, _unbounded_like)

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        return self._inverse_specs(action_spec)

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        return self._inverse_specs(state_spec)

    def init_stats(
        self,
        num_iter: int,
        reduce_dim: int | Sequence[int] = 0,
        cat_dim: int | None = None,
        key: NestedKey | None = None,
        keep_dims: Sequence[int] | None = None,
    ) -> None:
        """Sets ``loc`` and ``scale`` to the mean and standard deviation of the
        observations of random rollouts of the env this transform is appended to (the
        base env seen through the transforms before this one).

        Rollouts of ``num_iter`` steps are run (several if one ends early) until
        ``num_iter`` steps are gathered; their ``key`` entries (the reset observation
        included) are concatenated along ``cat_dim`` and reduced over ``reduce_dim``.

        Args:
            num_iter: the number of steps to gather.
            reduce_dim: the dim(s) of the rollout data to average over: ``0`` (time) for a
                single env, ``[0, 1]`` for a batched env (batch, time).
            cat_dim: the dim along which successive rollouts are concatenated; the
                ``reduce_dim`` when it is one int; required when it is a list.
            key: the entry to compute the statistics of; the only in_key by default.
            keep_dims: reduced dims to keep (as size-1 dims) in ``loc``/``scale``.

        Raises:
            RuntimeError: outside an env, or if the statistics are already set.
            ValueError: for several in_keys without ``key``, or a list ``reduce_dim``
                without ``cat_dim``.
        """
        if self.initialized:
            raise RuntimeError("ObservationNorm.init_stats: loc and scale are already set.")
        parent = self.parent
        if parent is None:
            raise RuntimeError("ObservationNorm.init_stats needs the transform to be appended to an env; it has none.")
        if key is None:
            if len(self.in_keys) != 1:
                raise ValueError(
                    f"ObservationNorm.init_stats: the transform reads {self.in_keys}; pass key= to say which "
                    f"entry to compute the statistics of."
                )
            key = self.in_keys[0]
        reduce_dims = [reduce_dim] if isinstance(reduce_dim, int) else list(reduce_dim)
        if cat_dim is None:
            if not isinstance(reduce_dim, int):
                raise ValueError(
                    f"ObservationNorm.init_stats: cat_dim is required when reduce_dim is a list, got {reduce_dim!r}."
                )
            cat_dim = reduce_dim
        chunks: list[torch.Tensor] = []
        gathered = 0
        while gathered < num_iter:
            data = parent.rollout(max_steps=num_iter)
            chunks.append(data.get(key))
            gathered += data.shape[-1]
        values = torch.cat(chunks, cat_dim)
        ndim = values.ndim
        reduce_dims = sorted(d % ndim for d in reduce_dims)
        kept = set() if keep_dims is None else {d % ndim for d in keep_dims}
        loc = values.mean(reduce_dims, keepdim=True)
        scale = values.std(reduce_dims, keepdim=True)
        squeezed = [d for d in reduce_dims if d not in kept]
        loc, scale = loc.squeeze(squeezed), scale.squeeze(squeezed)
        if not self.standard_normal:  # x * scale + loc must standardise: the inverse map
            loc, scale = -loc / scale.clamp_min(self.eps), 1 / scale.clamp_min(self.eps)
        self.register_buffer("loc", loc.detach().clone())
        self.register_buffer("scale", scale.detach().clone())

    def _load_from_state_dict(
        self,
        state_dict: dict[str, Any],
        prefix: str,
        local_metadata: dict[str, Any],
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        # uninitialised buffers take the loaded shapes
        for name in ("loc", "scale"):
            loaded = state_dict.get(prefix + name)
            if loaded is not None and self._buffers.get(name) is None:
                self.register_buffer(name, torch.empty_like(loaded))
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def __repr__(self) -> str:
        stats = "uninitialised" if not self.initialized else f"loc={self.loc}, scale={self.scale}"
        return (
            f"ObservationNorm({stats}, in_keys={self.in_keys}, out_keys={self.out_keys}, "
            f"standard_normal={self.standard_normal})"
        )


def _buffer_name(kind: str, key: NestedKey) -> str:
    parts = (key,) if isinstance(key, str) else tuple(key)
    return f"{kind}__" + "__".join(parts)


# Guards the in-place updates of statistics held in shared memory. Made at import, it is
# inherited by forked workers (ParallelEnv's default), so all the copies of a VecNorm that
# an EnvCreator builds update their shared statistics one at a time.
_SHARED_STATS_LOCK = multiprocessing.Lock()


class VecNorm(Transform):
    """Normalises entries with running estimates of their mean and variance.

    Each new value ``x`` (at steps and resets) updates, per entry, the decayed sums
    ``sum = decay * sum + Σx``, ``ssq = decay * ssq + Σx²`` and
    ``count = decay * count + n`` (sums over the batch), then is written as
    ``(x - mean) / sqrt(max(var, eps))`` with ``mean = sum / count`` and
    ``var = ssq / count - mean²``.

    The statistics are registered buffers (``sum__<key>``, ``ssq__<key>``,
    ``count__<key>``, nested keys joined with ``__``), created when the transform is
    appended to an env (their shape is the entry's spec shape) and updated in place.
    So an ``EnvCreator`` puts them in shared memory and every env it builds (the
    workers of a ``ParallelEnv`` included) updates the same statistics; ``clone()``
    shares them too. ``shared_td`` passes them in explicitly.

    Args:
        in_keys: the entries to normalise (``["observation", "reward"]``).
        out_keys: where the results go (``in_keys``).
        shared_td: a tensordict holding the statistics to use (the entries
            ``<key>_sum``, ``<key>_ssq`` and ``<key>_count`` of each in_key, for keys of
            the form ``"name"``); they are used as they are, not copied.
        decay: the decay of the running sums.
        eps: the smallest variance used.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), VecNorm(in_keys=["observation"]))
        >>> data = env.rollout(5)
        >>> env.transform[0].count__observation.item() > 5
        True
    """

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        shared_td: TensorDictBase | None = None,
        decay: float = 0.9999,
        eps: float = 1e-4,
    ) -> None:
        super().__init__(["observation", "reward"] if in_keys is None else in_keys, out_keys)
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"VecNorm: decay must lie in (0, 1], got {decay}.")
        self.decay = decay
        self.eps = eps
        if shared_td is not None:
            for key in self.in_keys:
                name = key if isinstance(key, str) else "_".join(key)
                for kind in ("sum", "ssq", "count"):
                    value = shared_td.get(f"{name}_{kind}", None)
                    if value is None:
                        raise KeyError(f"VecNorm: shared_td lacks {name + '_' + kind!r} for in_key {key!r}.")
                    self.register_buffer(_buffer_name(kind, key), value)

    def _stats(self, key: NestedKey) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        buffers = [self._buffers.get(_buffer_name(kind, key)) for kind in ("sum", "ssq", "count")]
        if any(b is None for b in buffers):
            return None
        return buffers[0], buffers[1], buffers[2]  # type: ignore[return-value]

    def _init_stats(self, key: NestedKey, event_shape: torch.Size, device: torch.device | None) -> None:
        stats = self._stats(key)
        if stats is not None and stats[0].shape == event_shape:
            return
        self.register_buffer(_buffer_name("sum", key), torch.zeros(event_shape, device=device))
        self.register_buffer(_buffer_name("ssq", key), torch.zeros(event_shape, device=device))
        self.register_buffer(_buffer_name("count", key), torch.zeros((), device=device))

    def _normalise(self, key: NestedKey, value: torch.Tensor) -> torch.Tensor:
        stats = self._stats(key)
        if stats is None:  # bare data: the statistics take the shape of the first value
            self._init_stats(key, value.shape[-1:] if value.ndim else torch.Size([]), value.device)
            stats = self._stats(key)
            assert stats is not None
        total, squares, count = stats
        event_dims = total.ndim
        if tuple(value.shape[value.ndim - event_dims:]) != tuple(total.shape):
            raise RuntimeError(
                f"VecNorm: {key!r} has shape {tuple(value.shape)}, expected trailing dims {tuple(total.shape)}."
            )
        batch_dims = list(range(value.ndim - event_dims))
        x = value.to(total.dtype)
        n = float(x.shape[: value.ndim - event_dims].numel())
        # statistics in shared memory are updated by several processes: one at a time
        lock = _SHARED_STATS_LOCK if total.is_shared() else contextlib.nullcontext()
        with torch.no_grad(), lock:
            total.mul_(self.decay).add_(x.sum(batch_dims) if batch_dims else x)
            squares.mul_(self.decay).add_((x * x).sum(batch_dims) if batch_dims else x * x)
            count.mul_(self.decay).add_(n)
            mean = total / count
            var = (squares / count - mean * mean).clamp_min(self.eps)
        return ((x - mean) / var.sqrt()).to(value.dtype)

    steps_on_values = True  # get and set (its statistics move on as on the generic path)

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = tensordict.get(in_key, None)
            if value is not None:
                tensordict.set(out_key, self._checked(lambda v, k=in_key: self._normalise(k, v), value, in_key))
        return tensordict

    def _loc_scale(self) -> tuple[TensorDict, TensorDict]:
        locs, scales = TensorDict(), TensorDict()
        for key in self.in_keys:
            stats = self._stats(key)
            if stats is None:
                continue
            total, squares, count = (stat.detach() for stat in stats)
            mean = total / count
            locs.set(key, mean)
            scales.set(key, (squares / count - mean * mean).clamp_min(self.eps).sqrt())
        return locs, scales

    @property
    def loc(self) -> TensorDict:
        """The current means, by in_key; with :attr:`scale`, the affine map
        ``(x - loc) / scale`` this transform applies now (an ``ObservationNorm(loc,
        scale, standard_normal=True)`` freezes it).

        Examples:
            >>> from cadence.envs import GymEnv
            >>> from cadence.envs.transforms import TransformedEnv
            >>> env = TransformedEnv(GymEnv("Pendulum-v1"), VecNorm(in_keys=["observation"]))
            >>> _ = env.rollout(10)
            >>> norm = env.transform[0]
            >>> norm.loc["observation"].shape, bool((norm.scale["observation"] > 0).all())
            (torch.Size([3]), True)
        """
        return self._loc_scale()[0]

    @property
    def scale(self) -> TensorDict:
        """The current standard deviations (at least ``sqrt(eps)``), by in_key; see :attr:`loc`."""
        return self._loc_scale()[1]

    @property
    def standard_normal(self) -> bool:
        """``True``: the map is ``(x - loc) / scale`` (as ``ObservationNorm``'s ``standard_normal``)."""
        return True

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        batch_dims = len(output_spec.shape)
        self._check_in_keys(output_spec)
        for name in ("full_observation_spec", "full_reward_spec"):
            spec = output_spec[name]
            for key in self.in_keys:
                if key in spec.keys(True, True):
                    leaf = spec[key]
                    self._init_stats(key, leaf.shape[batch_dims:], leaf.device)
            output_spec[name] = self._output_leaf_specs(spec, _unbounded_like)
        return output_spec

    def __repr__(self) -> str:
        return f"VecNorm(in_keys={self.in_keys}, out_keys={self.out_keys}, decay={self.decay}, eps={self.eps})"


class ClipTransform(Transform):
    """Clamps entries to ``[low, high]``: outputs (observations, rewards) on the way out,
    inputs (``in_keys_inv``: actions, states) on the way in.

    The specs of the clipped outputs become ``Bounded(low, high)``; those of the clipped
    inputs become the intersection of ``[low, high]`` with the base env's bounds. A
    missing bound is the dtype's extreme value.

    Args:
        in_keys: the outputs to clip.
        out_keys: where the results go (``in_keys``).
        in_keys_inv: the base env's inputs the clipped values go to.
        out_keys_inv: their outside names (``in_keys_inv``).
        low: the lower bound (``None``: none).
        high: the upper bound (``None``: none).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> clip = ClipTransform(in_keys=["observation"], low=-1.0, high=1.0)
        >>> clip(TensorDict({"observation": torch.tensor([-3.0, 0.5, 2.0])}, []))["observation"].tolist()
        [-1.0, 0.5, 1.0]
    """

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        in_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        out_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        low: float | None = None,
        high: float | None = None,
    ) -> None:
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        if low is None and high is None:
            raise ValueError("ClipTransform: give low, high or both; got neither.")
        if low is not None and high is not None and low > high:
            raise ValueError(f"ClipTransform: expected low <= high, got low={low}, high={high}.")
        self.low = low
        self.high = high

    steps_over_time = True  # elementwise, on the way out and in
    steps_on_values = True  # the base _call: get and set

    def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        return value.clamp(self.low, self.high)

    def _inv_apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        return value.clamp(self.low, self.high)

    def _bounds(self, dtype: torch.dtype) -> tuple[float, float]:
        info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
        return (info.min if self.low is None else self.low, info.max if self.high is None else self.high)

    def _bounded(self, leaf: TensorSpec) -> Bounded:
        low, high = self._bounds(leaf.dtype)
        low_t = torch.full(leaf.shape, low, dtype=leaf.dtype, device=leaf.device)
        high_t = torch.full(leaf.shape, high, dtype=leaf.dtype, device=leaf.device)
        if isinstance(leaf, Bounded):  # an input: what gets through is both clipped and in the env's bounds
            low_t, high_t = torch.maximum(low_t, leaf.low), torch.minimum(high_t, leaf.high)
            high_t = torch.maximum(low_t, high_t)
        return Bounded(low_t, high_t, shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)

    def _output_bounded(self, leaf: TensorSpec) -> Bounded:
        low, high = self._bounds(leaf.dtype)
        return Bounded(low, high, shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._output_leaf_specs(observation_spec, self._output_bounded)

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        return self._output_leaf_specs(reward_spec, self._output_bounded)

    def _inverse_specs(self, spec: Composite) -> Composite:
        return self._input_leaf_specs(spec, self._bounded)

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        return self._inverse_specs(action_spec)

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        return self._inverse_specs(state_spec)

    def __repr__(self) -> str:
        return f"ClipTransform(in_keys={self.in_keys}, in_keys_inv={self.in_keys_inv}, low={self.low}, high={self.high})"
