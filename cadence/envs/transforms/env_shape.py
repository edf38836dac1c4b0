"""Transforms of an env's data layout: auto-resetting envs, empty specs, devices.

``AutoResetTransform`` (with ``AutoResetEnv``) handles envs that reset themselves when
done, ``RemoveEmptySpecs`` drops empty sub-specs and the empty sub-tensordicts that
match them, and ``DeviceCastTransform`` moves data between devices.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.envs.transforms.env_shape import RemoveEmptySpecs
    >>> data = TensorDict({"a": torch.zeros(1), "empty": TensorDict({}, [])}, [])
    >>> sorted(RemoveEmptySpecs()(data).keys())
    ['a']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Composite
from cadence.envs.common import EnvBase
from cadence.envs.transforms.base import Compose, NestedKey, Transform, TransformedEnv

__all__ = ["AutoResetEnv", "AutoResetTransform", "DeviceCastTransform", "RemoveEmptySpecs"]

_SPEC_PARTS = ("full_observation_spec", "full_reward_spec", "full_done_spec")
_INPUT_PARTS = ("full_action_spec", "full_state_spec")


# ---------------------------------------------------------------------- RemoveEmptySpecs
def _drop_empty_specs(spec: Composite) -> Composite:
    for key in list(spec.keys()):
        sub = spec[key]
        if isinstance(sub, Composite):
            if sub.is_empty():
                del spec[key]
            else:
                _drop_empty_specs(sub)
    return spec


def _has_leaves(data: TensorDictBase) -> bool:
    return next(iter(data.keys(include_nested=True, leaves_only=True)), None) is not None


def _drop_empty_data(data: TensorDictBase) -> TensorDictBase:
    for key in list(data.keys()):
        value = data.get(key)
        if isinstance(value, TensorDictBase):
            if not _has_leaves(value):
                del data[key]
            else:
                _drop_empty_data(value)
    return data


class RemoveEmptySpecs(Transform):
    """Removes empty ``Composite`` specs (those without any leaf, nested empty ones
    included) from an env's specs, and the matching empty sub-tensordicts from its data.

    Inputs are not changed on the way in: an empty entry carries no data, and a base
    env reads none from it.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({"a": {"b": {}, "c": torch.zeros(1)}, "d": {}}, [])
        >>> list(RemoveEmptySpecs()(data).keys(True, True))
        [('a', 'c')]
    """

    def __init__(self) -> None:
        super().__init__()

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return _drop_empty_data(tensordict)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        for name in _SPEC_PARTS:
            output_spec[name] = _drop_empty_specs(output_spec[name])
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        for name in _INPUT_PARTS:
            input_spec[name] = _drop_empty_specs(input_spec[name])
        return input_spec

    def __repr__(self) -> str:
        return "RemoveEmptySpecs()"


# ---------------------------------------------------------------------- auto-reset
def _parse_float(fill: float | str) -> float:
    try:
        return float(fill)
    except (TypeError, ValueError):
        raise ValueError(f"AutoResetTransform: fill_float must be a number or 'nan', got {fill!r}.") from None


class AutoResetTransform(Transform):
    """The auto-reset semantics for envs that reset themselves inside their step.

    Such an env returns, on the step where it is done, the first observations of its
    next episode rather than the last ones of the episode that ended. This transform
    keeps those observations and hands them over as the output of the reset that
    follows (``rollout`` and ``step_and_maybe_reset`` reset the done components), and,
    with ``replace``, writes placeholders in the done step's ``"next"`` observations,
    where they would pass for the end of the old episode.

    It must be the first transform of an :class:`AutoResetEnv`, which skips the base
    env's reset when the stash can answer it (a reset of the done components that
    follows a done step); a full reset (``env.reset()``) resets the base env and drops
    the stash.

    It does what ``EnvBase(auto_reset=True)`` does inside an env (the same
    observations, done flags and resets, see the tests), with configurable fills:
    ``EnvBase`` writes NaN in floating entries and ``0``/``False`` in the others,
    this transform writes ``fill_float``, ``fill_int`` and ``fill_bool``. Fills are
    not checked against the specs: an integer observation bounded away from
    ``fill_int`` then holds values outside its spec on done steps.

    The done components are read from the env's first ``"done"`` entry.

    Args:
        replace: write placeholders in the done steps' observations (``None``: yes).
        fill_float: the placeholder of floating entries (a number, or ``"nan"``).
        fill_int: the placeholder of integer entries.
        fill_bool: the placeholder of boolean entries.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data import Composite, Unbounded
        >>> from cadence.envs import EnvBase
        >>> class Loop(EnvBase):  # counts to 3, then starts again by itself
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.observation_spec = Composite(count=Unbounded(shape=(1,)))
        ...         self.count = torch.zeros(1)
        ...     def _reset(self, td):
        ...         self.count = torch.zeros(1)
        ...         return TensorDict({"count": self.count.clone()}, [])
        ...     def _step(self, td):
        ...         self.count = self.count + 1
        ...         done = self.count >= 3
        ...         if done.any():
        ...             self.count = torch.zeros(1)
        ...         return TensorDict({"count": self.count.clone(), "reward": torch.zeros(1), "done": done}, [])
        >>> env = AutoResetEnv(Loop(), AutoResetTransform())
        >>> data = env.rollout(7, break_when_any_done=False)
        >>> data["next", "count"].squeeze(-1).tolist()
        [1.0, 2.0, nan, 1.0, 2.0, nan, 1.0]
        >>> data["count"].squeeze(-1).tolist()
        [0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 0.0]
    """

    def __init__(
        self,
        *,
        replace: bool | None = None,
        fill_float: float | str = "nan",
        fill_int: int = -1,
        fill_bool: bool = False,
    ) -> None:
        super().__init__()
        self.replace = True if replace is None else bool(replace)
        self.fill_float = _parse_float(fill_float)
        self.fill_int = int(fill_int)
        self.fill_bool = bool(fill_bool)
        self._observation_keys: list[NestedKey] = []
        self._done_key: NestedKey = "done"
        self._stash: TensorDictBase | None = None

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._observation_keys = list(output_spec["full_observation_spec"].keys(True, True))
        done_keys = list(output_spec["full_done_spec"].keys(True, True))
        named_done = [k for k in done_keys if (k if isinstance(k, str) else k[-1]) == "done"]
        if not named_done:
            raise KeyError(f"AutoResetTransform needs a 'done' entry in the done spec; the env has {done_keys}.")
        self._done_key = named_done[0]
        return output_spec

    def _fill(self, value: torch.Tensor) -> Any:
        if value.is_floating_point():
            return self.fill_float
        if value.dtype == torch.bool:
            return self.fill_bool
        return self.fill_int

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        self._stash = None
        done = next_tensordict.get(self._done_key, None)
        if done is None:
            raise KeyError(f"AutoResetTransform: the step's output holds no {self._done_key!r}.")
        if not bool(done.any()):
            return next_tensordict
        present = [k for k in self._observation_keys if k in next_tensordict.keys(True, True)]
        self._stash = next_tensordict.select(*present).clone()
        if self.replace:
            dims = next_tensordict.batch_dims
            component = done.reshape(*next_tensordict.batch_size, -1).any(-1)
            for key in present:
                value = next_tensordict.get(key)
                mask = component.reshape(*component.shape, *([1] * (value.ndim - dims))).expand_as(value)
                filled = torch.where(mask, torch.full_like(value, self._fill(value)), value)
                next_tensordict.set(key, filled)
        return next_tensordict

    def pending(self, tensordict: TensorDictBase | None) -> bool:
        """Whether a reset with input ``tensordict`` is answered from the stash: a stash
        is held (the last step was done somewhere) and the input asks for a partial reset."""
        if self._stash is None or tensordict is None:
            return False
        return any(
            (k if isinstance(k, str) else k[-1]) == "_reset" for k in tensordict.keys(include_nested=True, leaves_only=True)
        )

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        if self.pending(tensordict):
            assert self._stash is not None
            tensordict_reset.update(self._stash)
        self._stash = None
        return tensordict_reset

    def __repr__(self) -> str:
        return (
            f"AutoResetTransform(replace={self.replace}, fill_float={self.fill_float}, "
            f"fill_int={self.fill_int}, fill_bool={self.fill_bool})"
        )


class AutoResetEnv(TransformedEnv):
    """A ``TransformedEnv`` for a base env that resets itself when done.

    Its first transform is an :class:`AutoResetTransform` (one is made if no transform
    is given). The resets that follow a done step (those with ``"_reset"`` entries, as
    ``rollout`` and ``step_and_maybe_reset`` make them) are answered from the
    transform's stash without calling the base env's reset: the base env has reset
    itself already. Other resets reset the base env.

    Args:
        base_env: the auto-resetting env.
        transform: an ``AutoResetTransform``, or a ``Compose`` starting with one.

    Examples:
        >>> from cadence.envs.custom import PendulumEnv
        >>> env = AutoResetEnv(PendulumEnv())
        >>> env.transform
        Compose(
            AutoResetTransform(replace=True, fill_float=nan, fill_int=-1, fill_bool=False))
    """

    def __init__(self, base_env: EnvBase, transform: Transform | None = None, **kwargs: Any) -> None:
        if transform is None:
            transform = AutoResetTransform()
        first = transform[0] if isinstance(transform, Compose) and len(transform) else transform
        if not isinstance(first, AutoResetTransform):
            raise ValueError(
                f"AutoResetEnv: the first transform must be an AutoResetTransform, got {type(first).__name__}."
            )
        super().__init__(base_env, transform, **kwargs)

    @property
    def auto_reset_transform(self) -> AutoResetTransform:
        """The ``AutoResetTransform`` that holds the stash."""
        first = self.transform[0]
        assert isinstance(first, AutoResetTransform)
        return first

    def insert_transform(self, index: int, transform: Transform) -> TransformedEnv:
        """Adds ``transform`` at ``index``; the ``AutoResetTransform`` stays first."""
        if index == 0 or index <= -len(self.transform) - 1 or index == -len(self.transform):
            raise ValueError("AutoResetEnv: the AutoResetTransform must stay the first transform.")
        return super().insert_transform(index, transform)

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        if not self.auto_reset_transform.pending(tensordict):
            return super()._reset(tensordict, **kwargs)
        assert tensordict is not None
        # the base env reset itself in its step: its first observations come from the
        # stash, and no component is done at the start of an episode
        out = TensorDict({}, batch_size=tensordict.batch_size, device=self.device)
        for key in self.base_env.done_keys:
            spec = self.base_env.full_done_spec[key]
            shape = tensordict.batch_size + spec.shape[self.base_env.batch_dims :]
            out.set(key, torch.zeros(shape, dtype=spec.dtype, device=spec.device))
        return self.transform._reset(tensordict, out)


# ---------------------------------------------------------------------- devices
def _cast(data: TensorDictBase, keys: list[NestedKey], out_keys: list[NestedKey], device: torch.device) -> TensorDictBase:
    if not keys:
        return data.to(device)
    if data.device is not None and data.device != device:
        data.clear_device_()
    for key, out_key in zip(keys, out_keys):
        value = data.get(key, None)
        if value is not None:
            data.set(out_key, value.to(device))
    return data


class DeviceCastTransform(Transform):
    """Moves an env's outputs to ``device`` and its inputs back to ``orig_device``.

    Without keys, whole tensordicts and specs are moved; with ``in_keys`` (and
    ``in_keys_inv``), only those entries (written at ``out_keys``; read from
    ``out_keys_inv`` on the way in).

    ``orig_device`` defaults to the device of the base env's specs. The env's own
    ``device`` attribute stays the base env's (``TransformedEnv`` takes it from the
    base env); on a machine with one device, ``"cpu"`` is the only target, and the
    transform then only gives data without a device (``device=None``) the CPU device.

    Args:
        device: where outputs go.
        orig_device: where inputs go back (the base env's device if not given).
        in_keys: the outputs to move (all if not given).
        out_keys: where to write them (``in_keys`` if not given).
        in_keys_inv: the base env's names of the inputs to move back (all if neither
            these nor ``out_keys_inv`` are given).
        out_keys_inv: their outside names.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> DeviceCastTransform("cpu")(TensorDict({"x": torch.zeros(1)}, [])).device
        device(type='cpu')
    """

    def __init__(
        self,
        device: torch.device | str,
        orig_device: torch.device | str | None = None,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        in_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        out_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.device = torch.device(device)
        self.orig_device = torch.device(orig_device) if orig_device is not None else None

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return _cast(tensordict, self.in_keys, self.out_keys, self.device)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.orig_device is None:
            return tensordict
        return _cast(tensordict, self.out_keys_inv, self.in_keys_inv, self.orig_device)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._check_in_keys(output_spec)
        if self.orig_device is None:
            self.orig_device = output_spec.device
        if not self.in_keys:
            return output_spec.to(self.device)
        for name in _SPEC_PARTS:
            self._output_leaf_specs(output_spec[name], lambda spec: spec.to(self.device))
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        if not self.in_keys_inv:
            return input_spec.to(self.device)
        for name in _INPUT_PARTS:
            spec = input_spec[name]
            for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
                if in_key in spec.keys(True, True):
                    leaf = spec[in_key]
                    if in_key != out_key:
                        del spec[in_key]
                    spec[out_key] = leaf.to(self.device)
        return input_spec

    def __repr__(self) -> str:
        return f"DeviceCastTransform(device={self.device}, orig_device={self.orig_device}, in_keys={self.in_keys})"
