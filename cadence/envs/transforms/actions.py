"""Transforms of the action space: masks, projections and discretisation.

``ActionMask`` keeps an env's action spec in step with the mask of allowed actions the
env emits, ``DiscreteActionProjection`` lets a policy with ``max_actions`` choices drive
an env with fewer, and ``ActionDiscretizer`` shows a continuous ``Bounded`` action space
as a discrete one.

Examples:
    >>> import torch
    >>> from cadence.data import Bounded, Composite, Unbounded
    >>> from cadence.envs import EnvBase
    >>> from cadence.envs.transforms import TransformedEnv
    >>> from tensordict import TensorDict
    >>> class Line(EnvBase):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.observation_spec = Composite(x=Unbounded(shape=(1,)))
    ...         self.action_spec = Bounded(-1.0, 1.0, shape=(1,))
    ...     def _reset(self, td):
    ...         return TensorDict({"x": torch.zeros(1)}, [])
    ...     def _step(self, td):
    ...         return TensorDict({"x": td["action"].clone(), "reward": torch.zeros(1),
    ...                            "done": torch.zeros(1, dtype=torch.bool)}, [])
    >>> env = TransformedEnv(Line(), ActionDiscretizer(5))
    >>> type(env.action_spec).__name__, env.action_spec.n
    ('Categorical', 5)
    >>> env.step(env.reset().set("action", torch.tensor([4])))["next", "x"].round(decimals=3).tolist()
    [0.800000011920929]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase

from cadence.data import Binary, Bounded, Categorical, Composite, MultiCategorical, MultiOneHot, OneHot, TensorSpec
from cadence.envs.transforms.base import Compose, NestedKey, Transform, TransformedEnv

__all__ = ["ActionDiscretizer", "ActionMask", "DiscreteActionProjection"]


def _owning_env(transform: Transform) -> TransformedEnv | None:
    """The ``TransformedEnv`` that holds ``transform`` (through its ``Compose``), if any."""
    container = transform.container
    while isinstance(container, Compose):
        container = container.container
    return container if isinstance(container, TransformedEnv) else None


def _env_generator(transform: Transform) -> torch.Generator | None:
    """The generator of the owning env (seeded by ``env.set_seed``), or ``None``."""
    env = _owning_env(transform)
    return None if env is None else env.rng


def _action_leaf(transform: Transform, action_spec: Composite, key: NestedKey) -> TensorSpec:
    if key not in action_spec.keys(True, True):
        raise KeyError(
            f"{type(transform).__name__}: the env has no action {key!r}; its actions are "
            f"{sorted(map(str, action_spec.keys(True, True)))}."
        )
    return action_spec[key]


class ActionMask(Transform):
    """Keeps the mask of the action spec equal to the mask of allowed actions that the env
    emits, so that ``env.rand_action`` (and any policy sampling from the spec) only draws
    allowed actions.

    After each reset and each step, the observation at ``mask_key`` (a boolean tensor of
    the action spec's shape for ``OneHot`` actions, or of its shape plus the number of
    categories for ``Categorical`` ones) is written into the env's action spec with
    ``update_mask``. The data itself is unchanged.

    The action spec updated is the one the ``TransformedEnv`` holding this transform
    shows at ``action_key``: put ``ActionMask`` on the outermost env (on a batched env
    rather than on its sub-envs), after any transform that renames the action.

    Args:
        action_key: the action whose spec is masked (a ``Categorical`` or ``OneHot``).
        mask_key: the boolean observation holding the mask.

    Raises:
        TypeError: at construction of the env, for an action spec that has no mask
            (anything but ``Categorical`` or ``OneHot``) or a mask that is not boolean.
        KeyError: when the env emits no ``mask_key``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data import Categorical, Composite
        >>> from cadence.envs import EnvBase
        >>> from cadence.envs.transforms import TransformedEnv
        >>> class OnlyOne(EnvBase):  # one allowed action, a different one each step
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.observation_spec = Composite(action_mask=Categorical(2, shape=(4,), dtype=torch.bool))
        ...         self.action_spec = Categorical(4, shape=())
        ...         self.t = 0
        ...     def _mask(self):
        ...         return torch.arange(4) == self.t % 4
        ...     def _reset(self, td):
        ...         self.t = 0
        ...         return TensorDict({"action_mask": self._mask()}, [])
        ...     def _step(self, td):
        ...         self.t += 1
        ...         return TensorDict({"action_mask": self._mask(), "reward": torch.zeros(1),
        ...                            "done": torch.zeros(1, dtype=torch.bool)}, [])
        >>> env = TransformedEnv(OnlyOne(), ActionMask(action_key="action", mask_key="action_mask"))
        >>> env.rollout(6)["action"].tolist()
        [0, 1, 2, 3, 0, 1]
    """

    def __init__(self, action_key: NestedKey = "action", mask_key: NestedKey = "action_mask") -> None:
        super().__init__()
        self.action_key = action_key
        self.mask_key = mask_key

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        mask = tensordict.get(self.mask_key, None)
        if mask is None:
            raise KeyError(
                f"ActionMask: the data holds no mask at {self.mask_key!r}; it holds "
                f"{sorted(map(str, tensordict.keys(True, True)))}."
            )
        env = _owning_env(self)
        if env is None:
            raise RuntimeError(
                "ActionMask updates the action spec of the env it belongs to; outside an env "
                "(a bare call on data) there is no spec to update."
            )
        spec = _action_leaf(self, env.full_action_spec, self.action_key)
        try:
            spec.update_mask(mask.to(torch.bool))
        except (ValueError, RuntimeError) as err:
            raise ValueError(
                f"ActionMask: the mask at {self.mask_key!r} (shape {tuple(mask.shape)}) does not fit the "
                f"action spec {spec} at {self.action_key!r}: {err}"
            ) from err
        return tensordict

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        if self.mask_key not in observation_spec.keys(True, True):
            raise KeyError(
                f"ActionMask reads the mask {self.mask_key!r}, which the env does not emit; its observations "
                f"are {sorted(map(str, observation_spec.keys(True, True)))}."
            )
        if observation_spec[self.mask_key].dtype != torch.bool:
            raise TypeError(
                f"ActionMask: the mask {self.mask_key!r} must be boolean, got dtype "
                f"{observation_spec[self.mask_key].dtype}."
            )
        return observation_spec

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        spec = _action_leaf(self, action_spec, self.action_key)
        if isinstance(spec, Binary) or not isinstance(spec, (Categorical, OneHot)):
            raise TypeError(
                f"ActionMask: the action {self.action_key!r} must have a Categorical or OneHot spec (those take a "
                f"mask), got {type(spec).__name__}."
            )
        return action_spec

    def __repr__(self) -> str:
        return f"ActionMask(action_key={self.action_key!r}, mask_key={self.mask_key!r})"


class DiscreteActionProjection(Transform):
    """Lets a policy choose among ``max_actions`` discrete actions in an env that has
    ``num_actions_effective <= max_actions`` of them.

    The env's action spec (``OneHot`` of ``num_actions_effective``, or ``Categorical``)
    is shown outside with ``max_actions`` categories. On the way in, an action below
    ``num_actions_effective`` is kept; one at or above it is replaced by an action drawn
    uniformly in ``[0, num_actions_effective)`` with the env's generator (so
    ``env.set_seed`` makes it repeat). This is the documented torchrl behaviour: the
    surplus actions act as random ones rather than as copies of the last action, as
    clipping would make them.

    With ``include_forward``, a bare call on data (a replay buffer's, say) maps the
    env's actions to the outside format: one-hot vectors are padded with zeros to
    ``max_actions``; categorical indices are unchanged.

    Args:
        num_actions_effective: the number of actions of the env.
        max_actions: the number of actions shown outside.
        action_key: the action.
        include_forward: also map actions found in data seen on the output path.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> projection = DiscreteActionProjection(2, 4)
        >>> data = TensorDict({"action": torch.tensor([0, 1, 0, 0])}, [])
        >>> projection.inv(data)["action"].tolist()
        [0, 1]
        >>> projection(TensorDict({"action": torch.tensor([1, 0])}, []))["action"].tolist()
        [1, 0, 0, 0]
    """

    def __init__(
        self,
        num_actions_effective: int,
        max_actions: int,
        action_key: NestedKey = "action",
        include_forward: bool = True,
    ) -> None:
        if not 1 <= num_actions_effective <= max_actions:
            raise ValueError(
                f"DiscreteActionProjection: expected 1 <= num_actions_effective <= max_actions, got "
                f"num_actions_effective={num_actions_effective}, max_actions={max_actions}."
            )
        super().__init__(
            in_keys=[action_key] if include_forward else None,
            in_keys_inv=[action_key],
        )
        self.num_actions_effective = num_actions_effective
        self.max_actions = max_actions
        self.action_key = action_key
        self.include_forward = include_forward
        self._one_hot = True

    def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        if value.shape[-1:] != (self.num_actions_effective,):
            return value  # categorical indices, or already in the outside format
        pad = torch.zeros(
            *value.shape[:-1], self.max_actions - self.num_actions_effective, dtype=value.dtype, device=value.device
        )
        return torch.cat([value, pad], -1)

    def _inv_apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        one_hot = self._one_hot and value.ndim > 0 and value.shape[-1] == self.max_actions
        index = value.long().argmax(-1) if one_hot else value.long()
        if bool((index < 0).any()) or bool((index >= self.max_actions).any()):
            raise ValueError(
                f"DiscreteActionProjection: actions at {self.action_key!r} must lie in [0, {self.max_actions}), got "
                f"values in [{int(index.min())}, {int(index.max())}]."
            )
        beyond = index >= self.num_actions_effective
        if bool(beyond.any()):
            draws = torch.randint(
                self.num_actions_effective, index.shape, generator=_env_generator(self), device="cpu"
            ).to(index.device)
            index = torch.where(beyond, draws, index)
        if one_hot:
            return torch.nn.functional.one_hot(index, self.num_actions_effective).to(value.dtype)
        return index.to(value.dtype)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        return output_spec  # the action is not among the env's outputs

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        spec = _action_leaf(self, action_spec, self.action_key)
        if isinstance(spec, OneHot):
            n, shape, self._one_hot = spec.n, spec.shape[:-1], True
        elif isinstance(spec, Categorical) and not isinstance(spec, Binary):
            n, shape, self._one_hot = spec.n, spec.shape, False
        else:
            raise TypeError(
                f"DiscreteActionProjection: the action {self.action_key!r} must have a OneHot or Categorical "
                f"spec, got {type(spec).__name__}."
            )
        if n != self.num_actions_effective:
            raise ValueError(
                f"DiscreteActionProjection: the env's action {self.action_key!r} has {n} categories, but "
                f"num_actions_effective={self.num_actions_effective}."
            )
        if self._one_hot:
            outside: TensorSpec = OneHot(
                self.max_actions, shape=(*shape, self.max_actions), device=spec.device, dtype=spec.dtype
            )
        else:
            outside = Categorical(self.max_actions, shape=shape, device=spec.device, dtype=spec.dtype)
        action_spec[self.action_key] = outside
        return action_spec

    def __repr__(self) -> str:
        return (
            f"DiscreteActionProjection(num_actions_effective={self.num_actions_effective}, "
            f"max_actions={self.max_actions}, action_key={self.action_key!r})"
        )


_SAMPLINGS = ("median", "low", "high", "random")


class ActionDiscretizer(Transform):
    """Shows a continuous ``Bounded`` action space as a discrete one.

    Each action dimension ``i`` with bounds ``[low_i, high_i]`` is cut into
    ``num_intervals`` (or ``num_intervals[i]``) bins of equal width. Outside, the action
    is the bin index per dimension: a ``Categorical`` spec of that shape when every
    dimension has the same number of bins, a ``MultiCategorical`` otherwise; with
    ``categorical=False``, a one-hot vector per dimension (a ``OneHot`` spec with a
    trailing dim of ``num_intervals``, or a ``MultiOneHot`` of the concatenated vectors
    when the numbers of bins differ). On the way in, bin ``k`` of ``n`` becomes:

    - ``"median"`` (the default, ``sampling=None``): its centre, ``low + (k + 0.5) * w``;
    - ``"low"``: its lower edge, ``low + k * w``;
    - ``"high"``: its upper edge, ``low + (k + 1) * w``;
    - ``"random"``: a uniform value in the bin, drawn with the env's generator,

    where ``w = (high - low) / n``. The bounds must be finite.

    Args:
        num_intervals: the number of bins, one for all dimensions or one per dimension.
        action_key: the env's continuous action.
        out_action_key: the name of the discrete action outside (``action_key`` if not given).
        sampling: which value of a bin the env receives (see above).
        categorical: indices (``True``) or one-hot vectors (``False``) outside.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), ActionDiscretizer(4, sampling="low"))
        >>> env.action_spec.n, env.action_spec.shape
        (4, torch.Size([1]))
        >>> env.transform[0].inv(TensorDict({"action": torch.tensor([3])}, []))["action"].tolist()
        [1.0]
    """

    def __init__(
        self,
        num_intervals: int | Sequence[int] | torch.Tensor,
        action_key: NestedKey = "action",
        out_action_key: NestedKey | None = None,
        sampling: str | None = None,
        categorical: bool = True,
    ) -> None:
        out_action_key = action_key if out_action_key is None else out_action_key
        super().__init__(in_keys_inv=[action_key], out_keys_inv=[out_action_key])
        intervals = torch.as_tensor(num_intervals, dtype=torch.int64)
        if intervals.ndim > 1 or bool((intervals < 1).any()):
            raise ValueError(
                f"ActionDiscretizer: num_intervals must be a positive int or a 1-d sequence of them, got {num_intervals!r}."
            )
        sampling = "median" if sampling is None else str(getattr(sampling, "value", sampling)).lower()
        if sampling not in _SAMPLINGS:
            raise ValueError(f"ActionDiscretizer: sampling must be one of {_SAMPLINGS} or None, got {sampling!r}.")
        self.num_intervals = intervals
        self.action_key = action_key
        self.out_action_key = out_action_key
        self.sampling = sampling
        self.categorical = categorical
        self._low: torch.Tensor | None = None
        self._high: torch.Tensor | None = None
        self._nvec: torch.Tensor | None = None

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        spec = _action_leaf(self, action_spec, self.action_key)
        if not isinstance(spec, Bounded) or not spec.dtype.is_floating_point:
            raise TypeError(
                f"ActionDiscretizer: the action {self.action_key!r} must have a floating Bounded spec, got {spec}."
            )
        if not bool(torch.isfinite(spec.low).all() and torch.isfinite(spec.high).all()):
            raise ValueError(f"ActionDiscretizer: the bounds of {self.action_key!r} must be finite, got {spec}.")
        if spec.ndim == 0:
            raise ValueError(f"ActionDiscretizer: the action {self.action_key!r} needs at least one dim, got {spec}.")
        dims = spec.shape[-1]
        try:
            nvec = self.num_intervals.expand(spec.shape)
        except RuntimeError:
            raise ValueError(
                f"ActionDiscretizer: {self.num_intervals.numel()} numbers of intervals for the action "
                f"{self.action_key!r} of shape {tuple(spec.shape)} ({dims} dims)."
            ) from None
        self._low, self._high, self._nvec = spec.low.clone(), spec.high.clone(), nvec.to(spec.device)
        uniform = self._uniform()
        n = int(nvec.reshape(-1)[0])
        if self.categorical:
            outside: TensorSpec = (
                Categorical(n, shape=spec.shape, device=spec.device)
                if uniform
                else MultiCategorical(nvec, shape=spec.shape, device=spec.device)
            )
        elif uniform:
            outside = OneHot(n, shape=(*spec.shape, n), device=spec.device)
        else:
            batch = action_spec.shape
            if spec.ndim - len(batch) != 1:
                raise ValueError("ActionDiscretizer: per-dimension intervals with categorical=False need a 1-d action.")
            sizes = self.num_intervals.tolist()
            outside = MultiOneHot(sizes, shape=(*batch, sum(sizes)), device=spec.device)
        if self.out_action_key != self.action_key:
            del action_spec[self.action_key]
        action_spec[self.out_action_key] = outside
        return action_spec

    def _uniform(self) -> bool:
        return bool((self.num_intervals == self.num_intervals.reshape(-1)[0]).all())

    def _indices(self, value: torch.Tensor) -> torch.Tensor:
        if self.categorical:
            return value.long()
        if self._uniform():
            return value.long().argmax(-1)
        sizes = self.num_intervals.tolist()
        return torch.stack([part.long().argmax(-1) for part in value.split(sizes, -1)], -1)

    def _inv_apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        if self._low is None or self._high is None or self._nvec is None:
            raise RuntimeError("ActionDiscretizer maps actions once it is in an env (it needs the action's bounds).")
        index = self._indices(value)
        nvec = self._nvec
        if bool((index < 0).any()) or bool((index >= nvec).any()):
            raise ValueError(
                f"ActionDiscretizer: the action {self.out_action_key!r} must hold bin indices in [0, num_intervals), "
                f"got values in [{int(index.min())}, {int(index.max())}]."
            )
        low, high = self._low, self._high
        width = (high - low) / nvec
        if self.sampling == "median":
            offset = index + 0.5
        elif self.sampling == "low":
            offset = index.to(low.dtype)
        elif self.sampling == "high":
            offset = index + 1.0
        else:
            u = torch.rand(index.shape, generator=_env_generator(self), dtype=low.dtype, device="cpu")
            offset = index + u.to(index.device)
        return torch.minimum(torch.maximum(low + offset.to(low.dtype) * width, low), high)

    def __repr__(self) -> str:
        return (
            f"ActionDiscretizer(num_intervals={self.num_intervals.tolist()}, action_key={self.action_key!r}, "
            f"out_action_key={self.out_action_key!r}, sampling={self.sampling!r}, categorical={self.categorical})"
        )
