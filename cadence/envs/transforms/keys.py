"""Transforms of keys and shapes: renaming, selecting, concatenating, reshaping entries,
and entries primed at reset.

``RenameTransform``, ``SelectTransform``, ``ExcludeTransform``, ``CatTensors``,
``FlattenObservation``, ``UnsqueezeTransform``, ``SqueezeTransform``,
``PermuteTransform``, ``PinMemoryTransform``,
``TensorDictPrimer`` and ``gSDENoise``.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.envs.transforms.keys import CatTensors
    >>> data = TensorDict({"a": torch.zeros(2), "b": torch.ones(1)}, [])
    >>> CatTensors(in_keys=["a", "b"], out_key="ab")(data)["ab"].tolist()
    [0.0, 0.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from tensordict import TensorDictBase

from cadence.data import Bounded, Categorical, Composite, TensorSpec, Unbounded
from cadence.data.dtypes import cast
from cadence.envs.transforms.base import NestedKey, Transform, key_list
from cadence.envs.transforms.observation import ObservationTransform

__all__ = [
    "CatTensors",
    "ExcludeTransform",
    "FlattenObservation",
    "PermuteTransform",
    "PinMemoryTransform",
    "RenameTransform",
    "SelectTransform",
    "SqueezeTransform",
    "TensorDictPrimer",
    "UnsqueezeTransform",
    "gSDENoise",
]

_DONE_NAMES = ("done", "terminated", "truncated")


def _move_leaf(spec: Composite, src: NestedKey, dst: NestedKey, keep: bool) -> None:
    if src in spec.keys(True, True):
        leaf = spec[src]
        if not keep and src != dst:
            del spec[src]
        spec[dst] = leaf.clone() if keep else leaf


class RenameTransform(Transform):
    """Renames entries: outputs from ``in_keys`` to ``out_keys``; inputs from their
    outside names ``out_keys_inv`` to the base env's ``in_keys_inv``.

    Args:
        in_keys: the base env's output names.
        out_keys: their new names.
        in_keys_inv: the base env's input names (e.g. ``["action"]``).
        out_keys_inv: the names the outside uses for them.
        create_copy: keep the original entries beside the renamed ones.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), RenameTransform(["observation"], ["state"],
        ...     in_keys_inv=["action"], out_keys_inv=["torque"]))
        >>> sorted(env.observation_spec.keys()), env.action_key
        (['state'], 'torque')
    """

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey],
        out_keys: NestedKey | Sequence[NestedKey],
        in_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        out_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        create_copy: bool = False,
    ) -> None:
        if in_keys_inv is not None and out_keys_inv is None:
            raise ValueError("RenameTransform: in_keys_inv given without out_keys_inv (the outside names).")
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.create_copy = create_copy

    steps_on_values = True  # get, set and del (with inverse keys the env keeps the generic path)

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = tensordict.get(in_key, None)
            if value is not None:
                tensordict.set(out_key, value)
                if not self.create_copy and in_key != out_key:
                    del tensordict[in_key]
        return tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            value = tensordict.get(out_key, None)
            if value is not None:
                tensordict.set(in_key, value)
                if not self.create_copy and in_key != out_key:
                    del tensordict[out_key]
        return tensordict

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._check_in_keys(output_spec)
        for name in ("full_observation_spec", "full_reward_spec", "full_done_spec"):
            spec = output_spec[name]
            for in_key, out_key in zip(self.in_keys, self.out_keys):
                _move_leaf(spec, in_key, out_key, self.create_copy)
            output_spec[name] = spec
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        for name in ("full_action_spec", "full_state_spec"):
            spec = input_spec[name]
            for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
                _move_leaf(spec, in_key, out_key, self.create_copy)
            input_spec[name] = spec
        return input_spec


class SelectTransform(Transform):
    """Keeps only the selected entries of the env's outputs (and, unless told otherwise,
    its rewards and done signals). Observations left out leave the observation spec.

    Entries that an earlier transform keeps as state (``RewardSum``'s
    ``"episode_reward"``, a ``TensorDictPrimer``'s entries) must be selected: the state
    spec is built in the inverse order, so this transform cannot take them out of it.

    Args:
        *selected_keys: the entries to keep.
        keep_rewards: also keep the reward entries.
        keep_dones: also keep the done entries.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({"a": torch.zeros(1), "b": torch.zeros(1), "reward": torch.zeros(1)}, [])
        >>> sorted(SelectTransform("a")(data).keys())
        ['a', 'reward']
    """

    def __init__(self, *selected_keys: NestedKey, keep_rewards: bool = True, keep_dones: bool = True) -> None:
        super().__init__()
        self.selected_keys = [k for k in selected_keys]
        self.keep_rewards = keep_rewards
        self.keep_dones = keep_dones
        self._reward_keys: list[NestedKey] = ["reward"]
        self._done_keys: list[NestedKey] = list(_DONE_NAMES)

    def _kept(self) -> list[NestedKey]:
        kept = list(self.selected_keys)
        if self.keep_rewards:
            kept += self._reward_keys
        if self.keep_dones:
            kept += self._done_keys
        return kept

    steps_on_values = True  # select

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return tensordict.select(*self._kept(), strict=False)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._reward_keys = list(output_spec["full_reward_spec"].keys(True, True))
        self._done_keys = list(output_spec["full_done_spec"].keys(True, True))
        kept = {k if isinstance(k, str) else tuple(k) for k in self._kept()}
        observations = output_spec["full_observation_spec"]
        self._dropped = [k for k in observations.keys(True, True) if k not in kept]
        for key in self._dropped:
            del observations[key]
        output_spec["full_observation_spec"] = observations
        if not self.keep_rewards:
            output_spec["full_reward_spec"] = output_spec["full_reward_spec"].empty()
        if not self.keep_dones:
            raise ValueError("SelectTransform: keep_dones=False would take its done signals from the env.")
        return output_spec

    def __repr__(self) -> str:
        return f"SelectTransform(selected_keys={self.selected_keys}, keep_rewards={self.keep_rewards})"


class ExcludeTransform(Transform):
    """Removes entries from the env's outputs (observations or rewards; not done
    signals, which the env needs) and from the output specs. As with
    :class:`SelectTransform`, entries that an earlier transform keeps as state must not
    be excluded.

    Args:
        *excluded_keys: the entries to remove.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> sorted(ExcludeTransform("b")(TensorDict({"a": torch.zeros(1), "b": torch.zeros(1)}, [])).keys())
        ['a']
    """

    def __init__(self, *excluded_keys: NestedKey) -> None:
        super().__init__()
        self.excluded_keys = list(excluded_keys)

    steps_on_values = True  # exclude

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return tensordict.exclude(*self.excluded_keys)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        done_keys = {k if isinstance(k, str) else tuple(k) for k in output_spec["full_done_spec"].keys(True, True)}
        for key in self.excluded_keys:
            if (key if isinstance(key, str) else tuple(key)) in done_keys:
                raise ValueError(f"ExcludeTransform cannot exclude the done entry {key!r}: the env needs it.")
        for name in ("full_observation_spec", "full_reward_spec"):
            spec = output_spec[name]
            for key in self.excluded_keys:
                if key in spec.keys(True):
                    del spec[key]
            output_spec[name] = spec
        return output_spec

    def __repr__(self) -> str:
        return f"ExcludeTransform(excluded_keys={self.excluded_keys})"


class CatTensors(ObservationTransform):
    """Concatenates entries into one along ``dim``.

    Args:
        in_keys: the entries (all the floating-point observations of the env if not
            given); sorted unless ``sort=False``.
        out_key: the concatenation's name.
        dim: the (negative: counted from the end, so batch sizes do not matter) dim to
            concatenate along.
        del_keys: remove the concatenated entries.
        unsqueeze_if_oor: give entries with too few dims (e.g. scalars for ``dim=-1``) a
            trailing dim of size one instead of raising.
        sort: sort ``in_keys`` (so that the order does not depend on how they were listed).

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), CatTensors(in_keys=["observation"]))
        >>> env.observation_spec["observation_vector"].shape
        torch.Size([3])
    """

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_key: NestedKey = "observation_vector",
        dim: int = -1,
        del_keys: bool = True,
        unsqueeze_if_oor: bool = False,
        sort: bool = True,
    ) -> None:
        if dim >= 0:
            raise ValueError(f"CatTensors: dim must be negative (counted from the end), got {dim}.")
        keys = None if in_keys is None else key_list(in_keys)
        if keys is not None and sort:
            keys = sorted(keys, key=lambda k: (k,) if isinstance(k, str) else tuple(k))
        super().__init__(keys)
        self.out_key = out_key
        self.out_keys = [out_key]
        self.dim = dim
        self.del_keys = del_keys
        self.unsqueeze_if_oor = unsqueeze_if_oor
        self.sort = sort

    def _fit(self, value: torch.Tensor, event_dims: int, key: NestedKey) -> torch.Tensor:
        if event_dims >= -self.dim:
            return value
        if not self.unsqueeze_if_oor:
            raise RuntimeError(
                f"CatTensors: {key!r} has {event_dims} non-batch dims, too few to concatenate along dim "
                f"{self.dim}; pass unsqueeze_if_oor=True to add trailing dims."
            )
        return value.reshape(*value.shape, *([1] * (-self.dim - event_dims)))

    steps_on_values = True  # get, set, batch_dims and exclude

    @property
    def steps_over_time(self) -> bool:  # type: ignore[override]
        # along a trailing (event) dim (dim < 0 always) a time dim before it changes nothing;
        # deleted entries may be state another transform reads back at the next step
        return not self.del_keys

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        found = [tensordict.get(key, None) for key in self.in_keys]
        if all(value is None for value in found):
            return tensordict
        if any(value is None for value in found):
            missing = [key for key, value in zip(self.in_keys, found) if value is None]
            raise KeyError(f"CatTensors expected {self.in_keys}, but {missing} are missing.")
        batch_dims = tensordict.batch_dims
        values = [self._fit(value, value.ndim - batch_dims, key) for key, value in zip(self.in_keys, found)]
        dtype = values[0].dtype
        for value in values[1:]:
            if value.dtype != dtype:
                dtype = torch.promote_types(dtype, value.dtype)
        try:
            out = torch.cat([cast(v, dtype) for v in values], self.dim)
        except RuntimeError as err:
            shapes = {str(k): tuple(v.shape) for k, v in zip(self.in_keys, values)}
            raise RuntimeError(f"CatTensors could not concatenate {shapes} along dim {self.dim}: {err}") from err
        if self.del_keys:
            tensordict = tensordict.exclude(*[k for k in self.in_keys if k != self.out_key])
        tensordict.set(self.out_key, out)
        return tensordict

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        if self._find_keys:
            super().transform_output_spec(output_spec)  # finds the keys
            keys = list(self.in_keys)
            if self.sort:
                keys = sorted(keys, key=lambda k: (k,) if isinstance(k, str) else tuple(k))
            self.in_keys, self.out_keys = keys, [self.out_key]
        self._check_in_keys(output_spec)
        batch_dims = len(output_spec.shape)
        observations = output_spec["full_observation_spec"]
        leaves = []
        for key in self.in_keys:
            if key not in observations.keys(True, True):
                raise KeyError(f"CatTensors reads {key!r}, which is not an observation of the env.")
            leaves.append(observations[key])
        shapes = [
            self._fit(torch.empty(leaf.shape, device="meta"), len(leaf.shape) - batch_dims, key).shape
            for key, leaf in zip(self.in_keys, leaves)
        ]
        dtype = leaves[0].dtype
        for leaf in leaves[1:]:
            dtype = torch.promote_types(dtype, leaf.dtype)
        try:
            shape = torch.cat([torch.empty(s, device="meta") for s in shapes], self.dim).shape
        except RuntimeError as err:
            raise RuntimeError(f"CatTensors cannot concatenate the specs {shapes} along dim {self.dim}.") from err
        if self.del_keys:
            for key in self.in_keys:
                del observations[key]
        observations[self.out_key] = Unbounded(shape=shape, dtype=dtype, device=leaves[0].device)
        output_spec["full_observation_spec"] = observations
        return output_spec

    def __repr__(self) -> str:
        return f"CatTensors(in_keys={self.in_keys}, out_key={self.out_key!r}, dim={self.dim})"


def _reshaped_leaf(leaf: TensorSpec, fn: Callable[[torch.Tensor], torch.Tensor], who: str) -> TensorSpec:
    """The spec of ``fn(value)`` for values in ``leaf``."""
    if isinstance(leaf, Bounded):
        return Bounded(fn(leaf.low), fn(leaf.high), dtype=leaf.dtype, device=leaf.device)
    shape = fn(torch.empty(leaf.shape, device="meta")).shape
    if type(leaf) is Unbounded:
        return Unbounded(shape=shape, dtype=leaf.dtype, device=leaf.device)
    if type(leaf) is Categorical:
        return Categorical(leaf.n, shape=shape, dtype=leaf.dtype, device=leaf.device)
    raise TypeError(f"{who} cannot reshape a {type(leaf).__name__} spec (Unbounded, Bounded, Categorical only).")


class _ShapeTransform(Transform):
    """Changes the shape of entries: ``_forward`` on the way out, ``_backward`` on the
    way in; the specs follow."""

    steps_on_values = True  # the base _call: get and set

    def _forward(self, value: torch.Tensor) -> torch.Tensor:
        raise TypeError(f"{type(self).__name__} defines no _forward()")

    def _backward(self, value: torch.Tensor) -> torch.Tensor:
        raise TypeError(f"{type(self).__name__} defines no _backward()")

    def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        return self._forward(value)

    def _inv_apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        return self._backward(value)

    def _leaf(self, leaf: TensorSpec) -> TensorSpec:
        return _reshaped_leaf(leaf, self._forward, type(self).__name__)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._output_leaf_specs(observation_spec, self._leaf)

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        return self._output_leaf_specs(reward_spec, self._leaf)

    def _inverse_specs(self, spec: Composite) -> Composite:
        return self._input_leaf_specs(spec, self._leaf)

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        return self._inverse_specs(action_spec)

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        return self._inverse_specs(state_spec)


def _check_dim(who: str, dim: int, allow_positive_dim: bool) -> None:
    if dim >= 0 and not allow_positive_dim:
        raise ValueError(
            f"{who}: dim must be negative (counted from the end, whatever the batch size), got {dim}; pass "
            f"allow_positive_dim=True to count from the first dim of the data, batch dims included."
        )


class UnsqueezeTransform(_ShapeTransform):
    """Inserts a dim of size one at ``dim`` (outputs), and removes it from the inputs
    given in ``in_keys_inv`` on their way to the base env.

    Args:
        dim: where the new dim goes (negative: counted from the end).
        in_keys: the outputs to unsqueeze.
        out_keys: where the results go (``in_keys``).
        in_keys_inv: the base env's inputs (the outside gives them unsqueezed).
        out_keys_inv: their outside names (``in_keys_inv``).
        allow_positive_dim: accept ``dim >= 0`` (counted from the first dim of the
            data, batch dims included).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> UnsqueezeTransform(-1, in_keys=["x"])(TensorDict({"x": torch.zeros(3)}, []))["x"].shape
        torch.Size([3, 1])
    """

    def __init__(
        self,
        dim: int,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        in_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        out_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        allow_positive_dim: bool = False,
    ) -> None:
        _check_dim(type(self).__name__, dim, allow_positive_dim)
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.dim = dim

    def _forward(self, value: torch.Tensor) -> torch.Tensor:
        return value.unsqueeze(self.dim)

    def _backward(self, value: torch.Tensor) -> torch.Tensor:
        return _squeeze(value, self.dim, type(self).__name__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dim={self.dim}, in_keys={self.in_keys}, in_keys_inv={self.in_keys_inv})"


def _squeeze(value: torch.Tensor, dim: int, who: str) -> torch.Tensor:
    if value.ndim == 0 or not -value.ndim <= dim < value.ndim or value.shape[dim] != 1:
        raise RuntimeError(f"{who}: expected a dim of size one at {dim}, got shape {tuple(value.shape)}.")
    return value.squeeze(dim)


class SqueezeTransform(UnsqueezeTransform):
    """Removes the dim of size one at ``dim`` (outputs), and inserts it back into the
    inputs given in ``in_keys_inv`` on their way to the base env.

    Args: as :class:`UnsqueezeTransform`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> SqueezeTransform(-1, in_keys=["x"])(TensorDict({"x": torch.zeros(3, 1)}, []))["x"].shape
        torch.Size([3])
    """

    def _forward(self, value: torch.Tensor) -> torch.Tensor:
        return _squeeze(value, self.dim, type(self).__name__)

    def _backward(self, value: torch.Tensor) -> torch.Tensor:
        return value.unsqueeze(self.dim)


class FlattenObservation(_ShapeTransform, ObservationTransform):
    """Flattens the dims ``first_dim`` to ``last_dim`` (both included) of observations.

    Args:
        first_dim: the first dim to flatten (negative: counted from the end).
        last_dim: the last one.
        in_keys: the observations (every floating-point one of the env if not given).
        out_keys: where the results go (``in_keys``).
        allow_positive_dim: accept dims ``>= 0`` (counted from the first dim of the
            data, batch dims included).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> flat = FlattenObservation(-3, -1, in_keys=["pixels"])
        >>> flat(TensorDict({"pixels": torch.zeros(5, 3, 4, 4)}, [5]))["pixels"].shape
        torch.Size([5, 48])
    """

    def __init__(
        self,
        first_dim: int,
        last_dim: int,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        allow_positive_dim: bool = False,
    ) -> None:
        for dim in (first_dim, last_dim):
            _check_dim("FlattenObservation", dim, allow_positive_dim)
        if (first_dim < 0) == (last_dim < 0) and first_dim > last_dim:
            raise ValueError(f"FlattenObservation: first_dim {first_dim} comes after last_dim {last_dim}.")
        ObservationTransform.__init__(self, in_keys, out_keys)
        self.first_dim = first_dim
        self.last_dim = last_dim

    def _forward(self, value: torch.Tensor) -> torch.Tensor:
        return value.flatten(self.first_dim, self.last_dim)

    def __repr__(self) -> str:
        return f"FlattenObservation(first_dim={self.first_dim}, last_dim={self.last_dim}, in_keys={self.in_keys})"


class PermuteTransform(_ShapeTransform):
    """Permutes the last ``len(dims)`` dims of entries: the output's dim ``i`` (counted
    from the end) is the input's dim ``dims[i]``; inputs (``in_keys_inv``) get the
    inverse permutation on their way to the base env.

    Args:
        dims: a permutation of ``-len(dims), ..., -1``.
        in_keys: the outputs to permute.
        out_keys: where the results go (``in_keys``).
        in_keys_inv: the base env's inputs.
        out_keys_inv: their outside names (``in_keys_inv``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> perm = PermuteTransform([-1, -3, -2], in_keys=["pixels"])  # HWC -> CHW
        >>> perm(TensorDict({"pixels": torch.zeros(2, 4, 5, 3)}, [2]))["pixels"].shape
        torch.Size([2, 3, 4, 5])
    """

    def __init__(
        self,
        dims: Sequence[int],
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        in_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        out_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        dims = [int(d) for d in dims]
        if sorted(dims) != list(range(-len(dims), 0)):
            raise ValueError(f"PermuteTransform: dims must be a permutation of -{len(dims)}..-1, got {dims}.")
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.dims = dims
        n = len(dims)
        order = [n + d for d in dims]
        self._inverse = [order.index(i) - n for i in range(n)]

    @staticmethod
    def _permute(value: torch.Tensor, dims: list[int]) -> torch.Tensor:
        n = len(dims)
        lead = value.ndim - n
        if lead < 0:
            raise RuntimeError(f"PermuteTransform: a value of shape {tuple(value.shape)} has fewer than {n} dims.")
        return value.permute(*range(lead), *[lead + n + d for d in dims])

    def _forward(self, value: torch.Tensor) -> torch.Tensor:
        return self._permute(value, self.dims)

    def _backward(self, value: torch.Tensor) -> torch.Tensor:
        return self._permute(value, self._inverse)

    def __repr__(self) -> str:
        return f"PermuteTransform(dims={self.dims}, in_keys={self.in_keys}, in_keys_inv={self.in_keys_inv})"


class TensorDictPrimer(Transform):
    """Adds entries at reset (a default value, or random values from their specs) and
    carries them from each step's input to its output when the step does not write
    them: a policy's recurrent state, say, which the policy updates in the data.

    The entries are observations and states of the env (so batched and parallel envs
    carry them). A partial reset (``"_reset"`` masks) re-primes only the components
    it resets: the env keeps the others' values.

    Args:
        primers: the entries: a dict or ``Composite`` of specs, shaped without the
            env's batch dims. Keyword arguments add more.
        random: draw the values at reset from the specs (``spec.rand()``) instead of
            filling them with ``default_value``.
        default_value: the fill value: a number, or a dict of numbers per key.
        reset_key: accepted for API compatibility; the env's own ``"_reset"`` masks
            decide which components are reset.
        **kwargs: more primers (``name=spec``).

    Examples:
        >>> from cadence.data import Unbounded
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), TensorDictPrimer(hidden=Unbounded(shape=(4,))))
        >>> env.reset()["hidden"].tolist()
        [0.0, 0.0, 0.0, 0.0]
    """

    def __init__(
        self,
        primers: Mapping[str, TensorSpec] | Composite | None = None,
        random: bool = False,
        default_value: float | Mapping[NestedKey, float] = 0.0,
        reset_key: NestedKey | None = None,
        **kwargs: TensorSpec,
    ) -> None:
        specs: dict[NestedKey, TensorSpec] = {}
        if isinstance(primers, Composite):
            specs.update(dict(primers.items(True, True)))
        elif primers is not None:
            specs.update(primers)
        specs.update(kwargs)
        if not specs:
            raise ValueError("TensorDictPrimer: no primers given.")
        for key, spec in specs.items():
            if not isinstance(spec, TensorSpec) or isinstance(spec, Composite):
                raise TypeError(f"TensorDictPrimer: the primer {key!r} must be a leaf spec, got {type(spec).__name__}.")
        super().__init__(in_keys=[], out_keys=[])
        self.primers = specs
        self.random = random
        self.default_value = default_value
        self.reset_key = reset_key

    def _value(self, key: NestedKey, spec: TensorSpec, batch: torch.Size, device: torch.device | None) -> torch.Tensor:
        if self.random:
            value = spec.rand(batch)
        else:
            fill = self.default_value.get(key, 0.0) if isinstance(self.default_value, Mapping) else self.default_value
            value = spec.zero(batch).fill_(fill)
        return value if device is None else value.to(device)

    def _prime(self, data: TensorDictBase, overwrite: bool) -> TensorDictBase:
        for key, spec in self.primers.items():
            if overwrite or data.get(key, None) is None:
                data.set(key, self._value(key, spec, data.batch_size, data.device))
        return data

    steps_on_values = True  # get, set, batch_size and device

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._prime(tensordict, overwrite=False)

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._prime(tensordict_reset, overwrite=True)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for key in self.primers:
            if next_tensordict.get(key, None) is None:
                previous = tensordict.get(key, None)
                if previous is None:
                    previous = self._value(key, self.primers[key], next_tensordict.batch_size, next_tensordict.device)
                next_tensordict.set(key, previous)
        return next_tensordict

    def _batched(self, spec: Composite) -> Composite:
        batch = spec.shape
        for key, leaf in self.primers.items():
            spec[key] = leaf.expand(*batch, *leaf.shape).to(spec.device) if spec.device is not None else \
                leaf.expand(*batch, *leaf.shape)
        return spec

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._batched(observation_spec)

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        return self._batched(state_spec)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(primers={list(self.primers)}, random={self.random})"


class gSDENoise(TensorDictPrimer):  # noqa: N801 - the reference's name
    """A :class:`TensorDictPrimer` for ``"_eps_gSDE"``, the noise matrix of generalised
    state-dependent exploration: standard-normal draws of shape
    ``(*shape, action_dim, state_dim)`` at each reset, or zeros of shape ``(*shape, 1)``
    (to be sized by the exploration module) when the dims are not given.

    Args:
        state_dim: the size of the features the noise multiplies.
        action_dim: the size of the action.
        shape: leading dims of the noise (besides the env's batch dims).
        **kwargs: passed to :class:`TensorDictPrimer`.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), gSDENoise(state_dim=3, action_dim=1))
        >>> env.reset()["_eps_gSDE"].shape
        torch.Size([1, 3])
    """

    def __init__(
        self,
        state_dim: int | None = None,
        action_dim: int | None = None,
        shape: Sequence[int] | None = None,
        **kwargs: object,
    ) -> None:
        self.state_dim = state_dim
        self.action_dim = action_dim
        known = state_dim is not None and action_dim is not None
        tail = (action_dim, state_dim) if known else (1,)
        spec = Unbounded(shape=(*(shape or ()), *tail))
        kwargs.setdefault("random", known)
        super().__init__(primers={"_eps_gSDE": spec}, **kwargs)  # type: ignore[arg-type]


class PinMemoryTransform(Transform):
    """Pins the env's outputs in page-locked memory (``tensordict.pin_memory()``), so that
    copies to a CUDA device are faster and may be asynchronous.

    Without CUDA (``torch.cuda.is_available()`` false) there is no pinned memory to use:
    the transform is a no-op. Data on a non-CPU device is left as it is too.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> out = PinMemoryTransform()(TensorDict({"x": torch.zeros(2)}, []))
        >>> out["x"].is_pinned() == torch.cuda.is_available()
        True
    """

    def __init__(self) -> None:
        super().__init__()

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not torch.cuda.is_available():
            return tensordict
        if tensordict.device is not None and tensordict.device.type != "cpu":
            return tensordict
        return tensordict.pin_memory()

    def __repr__(self) -> str:
        return "PinMemoryTransform()"
