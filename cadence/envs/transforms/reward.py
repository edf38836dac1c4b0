"""Reward transforms: ``RewardScaling`` and ``RewardSum``.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.envs.transforms import RewardScaling
    >>> RewardScaling(loc=1.0, scale=2.0)(TensorDict({"reward": torch.ones(1)}, []))["reward"].tolist()
    [3.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from tensordict import TensorDictBase

from cadence.data import Composite, Unbounded
from cadence.envs.transforms.base import NestedKey, Transform

__all__ = ["RewardScaling", "RewardSum"]


def _running_sum(values: torch.Tensor, dim: int) -> torch.Tensor:
    """Cumulative sums along ``dim``, added one after the other in ``values``' dtype, as
    step-by-step sums are (``torch.cumsum`` accumulates in double, which rounds otherwise)."""
    if values.device.type == "cpu" and values.dtype != torch.bfloat16 and not values.requires_grad:
        return torch.from_numpy(np.add.accumulate(values.numpy(), axis=dim))
    sums = list(values.unbind(dim))
    for t in range(1, len(sums)):
        sums[t] = sums[t - 1] + sums[t]
    return torch.stack(sums, dim)


class RewardScaling(Transform):
    """The affine map ``reward * scale + loc``.

    Args:
        loc: the offset.
        scale: the factor.
        in_keys: the rewards to scale (``["reward"]``).
        out_keys: where the results go (``in_keys``).
        standard_normal: compute ``(reward - loc) / scale`` instead.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = RewardScaling(loc=1.0, scale=2.0, standard_normal=True)
        >>> t(TensorDict({"reward": torch.full((1,), 5.0)}, []))["reward"].tolist()
        [2.0]
    """

    def __init__(
        self,
        loc: float | torch.Tensor,
        scale: float | torch.Tensor,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        standard_normal: bool = False,
    ) -> None:
        super().__init__(in_keys if in_keys is not None else ["reward"], out_keys)
        self.register_buffer("loc", torch.as_tensor(loc, dtype=torch.float32))
        self.register_buffer("scale", torch.as_tensor(scale, dtype=torch.float32).clamp_min(1e-6) if standard_normal
                             else torch.as_tensor(scale, dtype=torch.float32))
        self.standard_normal = standard_normal

    steps_over_time = True  # an affine map of each reward
    steps_on_values = True  # the base _call: get and set

    def _apply_transform(self, reward: torch.Tensor) -> torch.Tensor:
        if self.standard_normal:
            return (reward - self.loc) / self.scale
        return reward * self.scale + self.loc

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        return self._output_leaf_specs(reward_spec, lambda leaf: Unbounded(shape=leaf.shape, dtype=leaf.dtype,
                                                                             device=leaf.device))


class RewardSum(Transform):
    """Sums the rewards of each episode into ``"episode_reward"`` (zeroed at reset,
    kept where a partial reset spares the component).

    Args:
        in_keys: the rewards (``["reward"]``).
        out_keys: the sums (``["episode_reward"]``, or ``<prefix>..."episode_reward"``).

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import RewardSum, TransformedEnv
        >>> env = TransformedEnv(GymEnv("CartPole-v1"), RewardSum())
        >>> data = env.rollout(5)
        >>> data["next", "episode_reward"].squeeze(-1).tolist()
        [1.0, 2.0, 3.0, 4.0, 5.0]
    """

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        in_keys = in_keys if in_keys is not None else ["reward"]
        if out_keys is None:
            out_keys = [
                "episode_reward" if isinstance(k, str) else (*k[:-1], "episode_reward") for k in
                ([in_keys] if isinstance(in_keys, (str, tuple)) else in_keys)
            ]
        super().__init__(in_keys, out_keys)

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            previous = None if tensordict is None else tensordict.get(out_key, None)
            reward_shape = self._reward_shape(tensordict_reset, in_key)
            zeros = torch.zeros(reward_shape, device=tensordict_reset.device)
            # a partial reset: the outer env keeps the spared components from `previous`
            tensordict_reset.set(out_key, zeros if previous is None else torch.zeros_like(previous))
        return tensordict_reset

    def _reward_shape(self, data: TensorDictBase, key: NestedKey) -> torch.Size:
        spec = self._reward_specs.get(key)
        extra = data.batch_size[: data.batch_dims - self._env_batch_dims]
        return torch.Size([*extra, *spec.shape]) if spec is not None else torch.Size([*data.batch_size, 1])

    steps_over_time = True
    steps_on_values = True  # get and set

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            reward = next_tensordict.get(in_key)
            previous = tensordict.get(out_key, None)
            next_tensordict.set(out_key, reward if previous is None else previous + reward)
        return next_tensordict

    def _step_over_time(self, tensordict: TensorDictBase, next_steps: TensorDictBase) -> TensorDictBase:
        time_dim = next_steps.batch_dims - 1
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            rewards = next_steps.get(in_key)
            previous = tensordict.get(out_key, None)
            if previous is None:
                previous = torch.zeros(rewards.shape[:time_dim] + rewards.shape[time_dim + 1 :], dtype=rewards.dtype)
            sums = torch.cat([previous.unsqueeze(time_dim).to(rewards), rewards], time_dim)
            next_steps.set(out_key, _running_sum(sums, time_dim).narrow(time_dim, 1, rewards.shape[time_dim]))
        return next_steps

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        reward_spec = output_spec["full_reward_spec"]
        self._reward_specs = {key: reward_spec[key] for key in self.in_keys if key in reward_spec.keys(True, True)}
        self._env_batch_dims = len(output_spec.shape)
        return super().transform_output_spec(output_spec)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            leaf = self._reward_specs[in_key]
            observation_spec[out_key] = Unbounded(shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)
        return observation_spec

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        # the running sums are read back at each step: an input of the env
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            leaf = self._reward_specs[in_key]
            state_spec[out_key] = Unbounded(shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)
        return state_spec
