"""DI-engine's reward and observation scaling: reward clipping to its sign, and running
normalisation of observations and rewards.

``RunningMeanStd`` keeps a running mean and variance (float64, merged batch by batch
with Chan et al.'s parallel update). ``ObsNormEnv`` and ``RewardNormEnv`` follow
DI-engine's schedule: they pass values through unchanged for the first 30 steps after a
reset, then divide by the running std; and, as in DI-engine, ``reset`` starts their
statistics afresh (save and restore them with ``state_dict``/``load_state_dict``).

Examples:
    >>> import gymnasium as gym
    >>> from cadence.interop.ding.wrappers import ClipRewardEnv, ObsNormEnv
    >>> env = ClipRewardEnv(ObsNormEnv(gym.make("CartPole-v1")))
    >>> env.observation_space
    Box(-inf, inf, (4,), float32)
    >>> env.reward_range
    (-1.0, 1.0)
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

__all__ = ["ClipRewardEnv", "ObsNormEnv", "RewardNormEnv", "RunningMeanStd"]

StepResult = tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]

# DI-engine's constants: values pass unchanged until more than this many steps were seen
_WARMUP_STEPS = 30
_OBS_CLIP = (-3.0, 3.0)


class ClipRewardEnv(gym.RewardWrapper[Any, Any]):
    """Replace each reward by its sign, as a float in ``{-1.0, 0.0, 1.0}``.

    ``reward_range`` (DI-engine's reward bounds; gymnasium 1.x dropped the attribute) is
    ``(-1.0, 1.0)``. Spaces are unchanged.

    Args:
        env: the env to wrap.

    Examples:
        >>> import gymnasium as gym
        >>> env = ClipRewardEnv(gym.make("CartPole-v1"))
        >>> _ = env.reset(seed=0)
        >>> env.step(0)[1], env.reward(-7.5), env.reward(0.0)
        (1.0, -1.0, 0.0)
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.reward_range = (-1.0, 1.0)

    def reward(self, reward: SupportsFloat) -> float:
        """The sign of ``reward``.

        Args:
            reward: the raw reward.

        Returns:
            ``-1.0``, ``0.0`` or ``1.0``.
        """
        return float(np.sign(float(reward)))


class RunningMeanStd:
    """A running mean and variance over batches of samples of a fixed shape.

    As in DI-engine, it starts as if it had seen ``epsilon`` samples of mean 0 and
    variance 1, and ``std`` is ``sqrt(var) + epsilon``. Accumulators are float64.

    Args:
        shape: the shape of one sample.
        epsilon: the prior count, also added to the std.

    Examples:
        >>> import numpy as np
        >>> rms = RunningMeanStd(shape=(2,), epsilon=1e-8)
        >>> rms.update(np.array([[1.0, 10.0], [3.0, 30.0]]))
        >>> rms.update(np.array([[5.0, 50.0]]))
        >>> np.round(rms.mean, 3), np.round(rms.var, 3)
        (array([ 3., 30.]), array([  2.667, 266.667]))
    """

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4) -> None:
        self._shape = tuple(int(d) for d in shape)
        self._epsilon = float(epsilon)
        self.reset()

    def reset(self) -> None:
        """Forget every sample (back to the prior)."""
        self._mean = np.zeros(self._shape, np.float64)
        self._var = np.ones(self._shape, np.float64)
        self._count = self._epsilon

    def update(self, batch: np.ndarray) -> None:
        """Merge a batch of samples (samples along the first axis).

        Args:
            batch: an array of shape ``(batch_size, *shape)``.

        Raises:
            ValueError: the batch's sample shape is not ``shape`` (both are named).
        """
        x = np.asarray(batch, dtype=np.float64)
        if x.shape[1:] != self._shape or x.shape[0] == 0:
            raise ValueError(
                f"RunningMeanStd.update needs a non-empty batch of samples of shape {self._shape}; got shape {x.shape}"
            )
        batch_count = x.shape[0]
        batch_mean = x.mean(axis=0)
        batch_var = x.var(axis=0)
        total = self._count + batch_count
        delta = batch_mean - self._mean
        # Chan et al.: merge the two sums of squared deviations, with the between-group term
        m2 = self._var * self._count + batch_var * batch_count + delta**2 * (self._count * batch_count / total)
        self._mean = self._mean + delta * (batch_count / total)
        self._var = m2 / total
        self._count = total

    @property
    def mean(self) -> np.ndarray:
        """The running mean."""
        return self._mean

    @property
    def var(self) -> np.ndarray:
        """The running variance."""
        return self._var

    @property
    def count(self) -> float:
        """The number of samples seen (plus the prior ``epsilon``)."""
        return self._count

    @property
    def std(self) -> np.ndarray:
        """``sqrt(var) + epsilon``."""
        return np.sqrt(self._var) + self._epsilon

    def state_dict(self) -> dict[str, Any]:
        """A copy of the statistics (``mean``, ``var``, ``count``)."""
        return {"mean": self._mean.copy(), "var": self._var.copy(), "count": self._count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore statistics from :meth:`state_dict`.

        Args:
            state: what :meth:`state_dict` returned.

        Raises:
            ValueError: the saved statistics have another shape (both are named).
        """
        mean, var = np.array(state["mean"], np.float64), np.array(state["var"], np.float64)
        if mean.shape != self._shape or var.shape != self._shape:
            raise ValueError(f"RunningMeanStd of shape {self._shape} cannot load statistics of shape {mean.shape}")
        self._mean, self._var, self._count = mean, var, float(state["count"])


class ObsNormEnv(gym.ObservationWrapper[Any, Any, Any]):
    """Normalise observations with their running mean and std, clipped to ``[-3, 3]``.

    Every step's observation updates the statistics first; for the first 30 steps after a
    reset the observation is returned unchanged (cast to float32), then as
    ``clip((obs - mean) / std, -3, 3)``. ``reset`` starts the statistics afresh and returns
    the first observation unchanged, as DI-engine does. The observation space becomes an
    unbounded float32 ``Box`` of the same shape.

    Unlike DI-engine, each observation updates the statistics as one sample: DI-engine
    passes it to its ``RunningMeanStd.update`` as a batch, so that the elements of one
    observation are averaged together and every feature gets the same mean and std.

    Args:
        env: an env with a ``Box`` observation space.

    Attributes:
        rms: the running statistics.
        data_count: steps since the last reset.
        clip_range: the bounds of normalised observations.

    Raises:
        TypeError: the observation space is not a ``Box``.

    Examples:
        >>> import gymnasium as gym
        >>> env = ObsNormEnv(gym.make("CartPole-v1"))
        >>> _ = env.reset(seed=0)
        >>> for i in range(31):
        ...     obs = env.step(i % 2)[0]
        >>> obs.dtype, env.data_count, bool(abs(obs).max() <= 3.0)
        (dtype('float32'), 31, True)
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box):
            raise TypeError(f"ObsNormEnv needs a Box observation space; got {space}")
        self.data_count = 0
        self.clip_range = _OBS_CLIP
        self.rms = RunningMeanStd(shape=space.shape)
        self.observation_space = gym.spaces.Box(low=-np.inf, high=np.inf, shape=space.shape, dtype=np.float32)

    def step(self, action: Any) -> StepResult:
        """Step the inner env, update the statistics, and normalise the observation.

        Args:
            action: the action to take.

        Returns:
            The normalised observation and the inner step's other results.
        """
        self.data_count += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.rms.update(np.asarray(obs)[None])
        return self.observation(obs), reward, terminated, truncated, info

    def observation(self, observation: Any) -> np.ndarray:
        """The observation, normalised once more than 30 steps were seen.

        Args:
            observation: the raw observation.

        Returns:
            The float32 observation.
        """
        if self.data_count <= _WARMUP_STEPS:
            return np.asarray(observation, dtype=np.float32)
        normalised = (np.asarray(observation, dtype=np.float64) - self.rms.mean) / self.rms.std
        return np.clip(normalised, *self.clip_range).astype(np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset the statistics and the inner env.

        Args:
            seed: seeds the inner env.
            options: passed to the inner reset.

        Returns:
            The first observation (unchanged, as float32) and the inner info.
        """
        self.data_count = 0
        self.rms.reset()
        obs, info = self.env.reset(seed=seed, options=options)
        return self.observation(obs), info

    def state_dict(self) -> dict[str, Any]:
        """The statistics and the step count, to save."""
        return {"data_count": self.data_count, "rms": self.rms.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned.

        Args:
            state: the saved state.
        """
        self.rms.load_state_dict(state["rms"])
        self.data_count = int(state["data_count"])


class RewardNormEnv(gym.RewardWrapper[Any, Any]):
    """Divide rewards by the running std of the discounted return.

    Each step updates ``cum_reward = cum_reward * reward_discount + reward`` and feeds it to
    the running statistics; for the first 30 steps after a reset the reward is returned
    unchanged, then as ``reward / std`` (not centred). ``reset`` zeroes the return and starts
    the statistics afresh, as DI-engine does. ``reward_range`` is ``(-inf, inf)``; spaces
    are unchanged.

    Args:
        env: the env to wrap.
        reward_discount: the discount of the return whose std scales the rewards.

    Attributes:
        rms: the running statistics of the discounted return (shape ``(1,)``).
        cum_reward: the discounted return so far (shape ``(1,)``, float64).
        data_count: steps since the last reset.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> env = RewardNormEnv(gym.make("Pendulum-v1"), reward_discount=0.99)
        >>> _ = env.reset(seed=0)
        >>> rewards = [env.step(np.zeros(1, np.float32))[1] for _ in range(40)]
        >>> env.data_count, env.cum_reward.shape, type(rewards[-1]).__name__
        (40, (1,), 'float')
    """

    def __init__(self, env: gym.Env[Any, Any], reward_discount: float) -> None:
        super().__init__(env)
        self.reward_discount = float(reward_discount)
        self.cum_reward = np.zeros((1,), np.float64)
        self.data_count = 0
        self.rms = RunningMeanStd(shape=(1,))
        self.reward_range = (-float("inf"), float("inf"))

    def step(self, action: Any) -> StepResult:
        """Step the inner env, update the discounted return's statistics, and scale the reward.

        Args:
            action: the action to take.

        Returns:
            The inner step's results with the scaled reward.
        """
        self.data_count += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.cum_reward = self.cum_reward * self.reward_discount + float(reward)
        self.rms.update(self.cum_reward[None])
        return obs, self.reward(reward), terminated, truncated, info

    def reward(self, reward: SupportsFloat) -> float:
        """The reward, divided by the return's std once more than 30 steps were seen.

        Args:
            reward: the raw reward.

        Returns:
            The scaled reward.
        """
        if self.data_count <= _WARMUP_STEPS:
            return float(reward)
        return float(reward) / float(self.rms.std[0])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Zero the return, reset the statistics and the inner env.

        Args:
            seed: seeds the inner env.
            options: passed to the inner reset.

        Returns:
            The inner reset's observation and info.
        """
        self.cum_reward = np.zeros((1,), np.float64)
        self.data_count = 0
        self.rms.reset()
        return self.env.reset(seed=seed, options=options)

    def state_dict(self) -> dict[str, Any]:
        """The statistics, the return so far and the step count, to save."""
        return {"data_count": self.data_count, "cum_reward": self.cum_reward.copy(), "rms": self.rms.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned.

        Args:
            state: the saved state.
        """
        self.rms.load_state_dict(state["rms"])
        self.cum_reward = np.array(state["cum_reward"], np.float64).reshape(1)
        self.data_count = int(state["data_count"])
