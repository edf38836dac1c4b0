"""More reward transforms: ``RewardClipping``, ``BinarizeReward``, ``SignTransform``,
``Reward2GoTransform`` and ``TargetReturn``.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.envs.transforms.reward_extra import RewardClipping
    >>> RewardClipping(-1.0, 1.0)(TensorDict({"reward": torch.tensor([3.0])}, []))["reward"].tolist()
    [1.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase

from cadence.data import Binary, Bounded, Composite, TensorSpec, Unbounded
from cadence.envs.transforms.base import NestedKey, Transform, key_list

__all__ = ["BinarizeReward", "Reward2GoTransform", "RewardClipping", "SignTransform", "TargetReturn"]


def _reward_keys(in_keys: NestedKey | Sequence[NestedKey] | None) -> list[NestedKey]:
    return key_list(in_keys) if in_keys is not None else ["reward"]


class RewardClipping(Transform):
    """Clips rewards to ``[clamp_min, clamp_max]``.

    Args:
        clamp_min: the lower bound (none if ``None``).
        clamp_max: the upper bound (none if ``None``).
        in_keys: the rewards to clip (``["reward"]``).
        out_keys: where the results go (``in_keys``).

    With both bounds the reward spec becomes a ``Bounded`` spec between them.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("CartPole-v1"), RewardClipping(clamp_max=0.5))
        >>> env.rollout(2)["next", "reward"].squeeze(-1).tolist()
        [0.5, 0.5]
    """

    def __init__(
        self,
        clamp_min: float | None = None,
        clamp_max: float | None = None,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        if clamp_min is not None and clamp_max is not None and clamp_min > clamp_max:
            raise ValueError(f"RewardClipping: clamp_min ({clamp_min}) must not exceed clamp_max ({clamp_max}).")
        super().__init__(_reward_keys(in_keys), out_keys)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    steps_over_time = True  # each reward clipped on its own
    steps_on_values = True  # the base _call: get and set

    def _apply_transform(self, reward: torch.Tensor) -> torch.Tensor:
        return reward.clamp(self.clamp_min, self.clamp_max)

    def _clipped_spec(self, leaf: TensorSpec) -> TensorSpec:
        if self.clamp_min is not None and self.clamp_max is not None:
            return Bounded(self.clamp_min, self.clamp_max, shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)
        return Unbounded(shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        return self._output_leaf_specs(reward_spec, self._clipped_spec)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._output_leaf_specs(observation_spec, self._clipped_spec)

    def __repr__(self) -> str:
        return f"RewardClipping(clamp_min={self.clamp_min}, clamp_max={self.clamp_max}, in_keys={self.in_keys})"


class BinarizeReward(Transform):
    """Maps a reward to 0 where it is null and to 1 where it is non-null (negative
    rewards included), as an ``int8`` with a ``Binary`` spec.

    Args:
        in_keys: the rewards (``["reward"]``).
        out_keys: where the results go (``in_keys``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({"reward": torch.tensor([[0.0], [2.5], [-1.0]])}, [3])
        >>> BinarizeReward()(data)["reward"].squeeze(-1).tolist()
        [0, 1, 1]
    """

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(_reward_keys(in_keys), out_keys)

    steps_over_time = True  # each reward on its own
    steps_on_values = True  # the base _call: get and set

    def _apply_transform(self, reward: torch.Tensor) -> torch.Tensor:
        return (reward != 0).to(torch.int8)

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        def binary(leaf: TensorSpec) -> TensorSpec:
            if not leaf.shape or leaf.shape[-1] != 1:
                raise ValueError(
                    f"BinarizeReward: expected rewards with a trailing dim of 1, got a spec of shape "
                    f"{tuple(leaf.shape)}."
                )
            return Binary(n=1, shape=leaf.shape, dtype=torch.int8, device=leaf.device)

        return self._output_leaf_specs(reward_spec, binary)


class SignTransform(Transform):
    """Replaces values by their sign (-1, 0 or 1, same dtype): on the env's outputs
    (``in_keys``) and, on the way in, on inputs (``out_keys_inv`` → ``in_keys_inv``).

    The specs of the signed entries become ``Bounded(-1, 1)``, for inputs as seen from
    outside too.

    Args:
        in_keys: the outputs to sign (observations or rewards).
        out_keys: where the results go (``in_keys``).
        in_keys_inv: the base env's inputs to write signed (an action, say).
        out_keys_inv: their outside names (``in_keys_inv``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = SignTransform(in_keys=["obs"])
        >>> t(TensorDict({"obs": torch.tensor([-3.0, 0.0, 0.5])}, []))["obs"].tolist()
        [-1.0, 0.0, 1.0]
    """

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        in_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        out_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)

    steps_over_time = True  # elementwise
    steps_on_values = True  # the base _call: get and set

    def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        return value.sign()

    def _inv_apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        return value.sign()

    @staticmethod
    def _signed(leaf: TensorSpec) -> TensorSpec:
        return Bounded(-1, 1, shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._output_leaf_specs(observation_spec, self._signed)

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        return self._output_leaf_specs(reward_spec, self._signed)

    def _inverse_specs(self, spec: Composite) -> Composite:
        return self._input_leaf_specs(spec, self._signed)

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        return self._inverse_specs(action_spec)

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        return self._inverse_specs(state_spec)


class Reward2GoTransform(Transform):
    """Writes the discounted reward-to-go of collected trajectories:
    ``G[t] = r[t] + gamma * G[t + 1]``, restarting after every done step.

    It works on a trajectory tensordict whose last batch dim is time (a rollout, or
    a batch of them): calling it (``forward``) or its inverse (``inv``, the write path
    of a replay buffer) computes the same thing. The returns of the last steps of a
    trajectory that is not done count only the rewards seen. It cannot sit in an env
    (the future rewards are unknown at each step): appending it to a
    ``TransformedEnv`` raises.

    Args:
        gamma: the discount factor.
        in_keys: the rewards (``[("next", "reward")]``).
        out_keys: where the returns go (``[("next", "reward_to_go")]``).
        done_key: the done flags that end trajectories (``("next", "done")``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({"next": {"reward": torch.ones(4, 1),
        ...     "done": torch.tensor([[False], [True], [False], [False]])}}, [4])
        >>> Reward2GoTransform(gamma=0.5)(data)["next", "reward_to_go"].squeeze(-1).tolist()
        [1.5, 1.0, 1.5, 1.0]
    """

    def __init__(
        self,
        gamma: float = 1.0,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        done_key: NestedKey = ("next", "done"),
    ) -> None:
        in_keys = key_list(in_keys) if in_keys is not None else [("next", "reward")]
        if out_keys is None:
            out_keys = [("next", "reward_to_go")] * len(in_keys) if len(in_keys) == 1 else None
            if out_keys is None:
                raise ValueError("Reward2GoTransform: give out_keys when reading more than one reward.")
        super().__init__(in_keys, out_keys)
        self.gamma = float(gamma)
        self.done_key = done_key

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._reward_to_go(tensordict)

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._reward_to_go(tensordict)

    def _reward_to_go(self, tensordict: TensorDictBase) -> TensorDictBase:
        if tensordict.batch_dims < 1:
            raise ValueError(
                "Reward2GoTransform needs trajectories: a tensordict whose last batch dim is time, got batch "
                f"size {tuple(tensordict.batch_size)}."
            )
        done = tensordict.get(self.done_key, None)
        if done is None:
            raise KeyError(f"Reward2GoTransform: the data holds no done flags at {self.done_key!r}.")
        time_dim = tensordict.batch_dims - 1
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            reward = tensordict.get(in_key, None)
            if reward is None:
                raise KeyError(f"Reward2GoTransform: the data holds no reward at {in_key!r}.")
            ends = done.reshape(*done.shape, *([1] * (reward.ndim - done.ndim))).expand_as(reward)
            returns = torch.empty_like(reward, dtype=torch.promote_types(reward.dtype, torch.float32))
            running = torch.zeros_like(reward.select(time_dim, 0), dtype=returns.dtype)
            for t in range(reward.shape[time_dim] - 1, -1, -1):
                running = torch.where(ends.select(time_dim, t), torch.zeros_like(running), running)
                running = reward.select(time_dim, t) + self.gamma * running
                returns.select(time_dim, t).copy_(running)
            tensordict.set(out_key, returns)
        return tensordict

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        raise TypeError(
            "Reward2GoTransform works on collected trajectories (call it, or use it on a replay buffer's "
            "writes), not inside an env: a step cannot know the rewards that follow it."
        )

    def __repr__(self) -> str:
        return f"Reward2GoTransform(gamma={self.gamma}, in_keys={self.in_keys}, out_keys={self.out_keys})"


class TargetReturn(Transform):
    """Gives the agent a return to achieve (as in Decision Transformers): set to
    ``target_return`` at reset, then lowered by each reward (``mode="reduce"``) or
    kept as it is (``mode="constant"``).

    The target is an observation shaped like the reward and a state entry too (each
    step reads the previous target back). Partial resets restart only the selected
    components.

    Args:
        target_return: the return to achieve.
        mode: ``"reduce"`` or ``"constant"``.
        in_keys: the rewards (``["reward"]``).
        out_keys: where the targets go (``["target_return"]``).
        reset_key: the ``"_reset"`` entry to honour (the env's root one by default;
            partial resets are applied by the env whichever it is).

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("CartPole-v1"), TargetReturn(10.0))
        >>> data = env.rollout(3)
        >>> data["target_return"].squeeze(-1).tolist(), data["next", "target_return"].squeeze(-1).tolist()
        ([10.0, 9.0, 8.0], [9.0, 8.0, 7.0])
    """

    MODES = ("reduce", "constant")

    def __init__(
        self,
        target_return: float,
        mode: str = "reduce",
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        reset_key: NestedKey | None = None,
    ) -> None:
        if mode not in self.MODES:
            raise ValueError(f"TargetReturn: mode must be one of {self.MODES}, got {mode!r}.")
        in_keys = _reward_keys(in_keys)
        if out_keys is None:
            out_keys = [k[:-1] + ("target_return",) if isinstance(k, tuple) else "target_return" for k in in_keys]
        super().__init__(in_keys, out_keys)
        self.target_return = float(target_return)
        self.mode = mode
        self.reset_key = reset_key

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            spec = self._reward_specs[in_key]
            extra = tensordict_reset.batch_size[: tensordict_reset.batch_dims - self._env_batch_dims]
            tensordict_reset.set(
                out_key,
                torch.full((*extra, *spec.shape), self.target_return, dtype=spec.dtype, device=spec.device),
            )
        return tensordict_reset

    steps_on_values = True  # get and set

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            previous = tensordict.get(out_key, None)
            if previous is None:
                raise KeyError(
                    f"TargetReturn: the step's input holds no {out_key!r} (the target written at reset); "
                    f"step from the data that reset() returned."
                )
            if self.mode == "reduce":
                next_tensordict.set(out_key, previous - next_tensordict.get(in_key))
            else:
                next_tensordict.set(out_key, previous.clone())
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise TypeError("TargetReturn tracks a target along an env's steps: use it in a TransformedEnv.")

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        reward_spec = output_spec["full_reward_spec"]
        self._check_in_keys(output_spec)
        self._reward_specs = {key: reward_spec[key] for key in self.in_keys}
        self._env_batch_dims = len(output_spec.shape)
        return super().transform_output_spec(output_spec)

    def _target_specs(self, spec: Composite) -> Composite:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            leaf = self._reward_specs[in_key]
            spec[out_key] = Unbounded(shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)
        return spec

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._target_specs(observation_spec)

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        # the previous target is read back at each step
        return self._target_specs(state_spec)

    def __repr__(self) -> str:
        return f"TargetReturn(target_return={self.target_return}, mode={self.mode!r}, out_keys={self.out_keys})"
