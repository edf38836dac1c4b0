"""Casting transforms: ``DTypeCastTransform`` and ``DoubleToFloat``.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.envs.transforms import DoubleToFloat
    >>> DoubleToFloat(in_keys=["x"])(TensorDict({"x": torch.zeros(2, dtype=torch.float64)}, []))["x"].dtype
    torch.float32
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase

from cadence.data import Composite
from cadence.data.dtypes import cast
from cadence.envs.transforms.base import NestedKey, Transform

__all__ = ["DTypeCastTransform", "DoubleToFloat"]


class DTypeCastTransform(Transform):
    """Casts entries from ``dtype_in`` to ``dtype_out`` on the way out, and inputs back from
    ``dtype_out`` to ``dtype_in`` on the way in (``in_keys_inv``, e.g. an action).

    Args:
        dtype_in: the dtype the base env uses.
        dtype_out: the dtype seen outside.
        in_keys: the outputs to cast; every observation and reward of ``dtype_in`` if
            not given (decided from the env's specs when the transform is appended).
        out_keys: where the casts go (``in_keys`` by default).
        in_keys_inv: the base env's inputs to cast back (e.g. ``["action"]``).
        out_keys_inv: their outside names (``in_keys_inv`` by default).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> cast = DTypeCastTransform(torch.float64, torch.float32, in_keys=["obs"], in_keys_inv=["action"])
        >>> cast(TensorDict({"obs": torch.zeros(1, dtype=torch.float64)}, []))["obs"].dtype
        torch.float32
        >>> cast.inv(TensorDict({"action": torch.zeros(1)}, []))["action"].dtype
        torch.float64
    """

    def __init__(
        self,
        dtype_in: torch.dtype,
        dtype_out: torch.dtype,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        in_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        out_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        self._find_keys = in_keys is None
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.dtype_in = dtype_in
        self.dtype_out = dtype_out

    steps_over_time = True  # a cast of each entry

    steps_on_values = True  # get and set (items(True, True) without keys)

    def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        return cast(value, self.dtype_out)

    def _inv_apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        return cast(value, self.dtype_in)

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._find_keys and not self.in_keys:  # used on bare data: cast whatever has dtype_in
            for key, value in list(tensordict.items(include_nested=True, leaves_only=True)):
                if isinstance(value, torch.Tensor) and value.dtype == self.dtype_in:
                    tensordict.set(key, cast(value, self.dtype_out))
            return tensordict
        return super()._call(tensordict)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        if self._find_keys:
            found: list[NestedKey] = []
            for name in ("full_observation_spec", "full_reward_spec"):
                found += [k for k, leaf in output_spec[name].items(True, True) if leaf.dtype == self.dtype_in]
            self.in_keys, self.out_keys = list(found), list(found)
        return super().transform_output_spec(output_spec)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._output_leaf_specs(observation_spec, lambda leaf: leaf.to(self.dtype_out))

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        return self._output_leaf_specs(reward_spec, lambda leaf: leaf.to(self.dtype_out))

    def _inverse_leaf_specs(self, spec: Composite) -> Composite:
        return self._input_leaf_specs(spec, lambda leaf: leaf.to(self.dtype_out))

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        return self._inverse_leaf_specs(action_spec)

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        return self._inverse_leaf_specs(state_spec)


class DoubleToFloat(DTypeCastTransform):
    """``DTypeCastTransform(torch.float64, torch.float32, ...)``: a double-precision
    simulator (dm_control, say) seen in single precision, its actions cast back.

    Examples:
        >>> import torch
        >>> DoubleToFloat(in_keys_inv=["action"]).dtype_out
        torch.float32
    """

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        in_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        out_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(torch.float64, torch.float32, in_keys, out_keys, in_keys_inv, out_keys_inv)
