"""DI-engine's image wrappers: grayscale-and-resize, scaling to ``[0, 1]``, frame stacking
and channel-first transposition.

Each one updates ``observation_space`` to what it returns. The DeepMind Atari chain ends
with ``WarpFrame`` (a ``(84, 84)`` frame, no channel dim, as in DI-engine 0.5.3) and
``FrameStack`` (stacked on a new first axis), which is already channel-first:
``(4, 84, 84)``. ``ObsTransposeWrapper`` is for RGB (``H, W, C``) observations.

Examples:
    >>> import gymnasium as gym, ale_py
    >>> from cadence.interop.ding.wrappers import FrameStack, ScaledFloatFrame, WarpFrame
    >>> gym.register_envs(ale_py)
    >>> env = FrameStack(ScaledFloatFrame(WarpFrame(gym.make("ALE/Pong-v5"))), n_frames=4)
    >>> env.observation_space
    Box(0.0, 1.0, (4, 84, 84), float32)
    >>> env.reset(seed=0)[0].shape
    (4, 84, 84)
"""

from __future__ import annotations

from collections import deque
from types import ModuleType
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

__all__ = ["FrameStack", "ObsTransposeWrapper", "ScaledFloatFrame", "WarpFrame"]


def _import_cv2() -> ModuleType:
    """OpenCV, imported on first use so that the rest of the package works without it."""
    try:
        import cv2
    except ImportError as error:
        raise ImportError(
            "WarpFrame needs OpenCV (opencv-python-headless): pip install 'cadence[atari]'"
        ) from error
    return cv2


def _box_or_raise(space: gym.Space[Any], who: str) -> gym.spaces.Box:
    """``space`` if it is a ``Box``, else an error naming it."""
    if not isinstance(space, gym.spaces.Box):
        raise TypeError(f"{who} needs a Box observation space; got {space}")
    return space


class WarpFrame(gym.ObservationWrapper[Any, Any, Any]):
    """Convert RGB frames to grayscale (``cv2.cvtColor``, ``COLOR_RGB2GRAY``) and resize them
    to ``(size, size)`` (``cv2.resize``, ``INTER_AREA``), as in the Nature DQN paper.

    The result has no channel dim: the observation space becomes
    ``Box(min(low), max(high), (size, size), dtype)`` (``Box(0, 255, (84, 84), uint8)`` for
    Atari), as in DI-engine 0.5.3. A grayscale frame (``(H, W)`` or ``(H, W, 1)``) is only
    resized. Unlike DI-engine, channel-first frames (which DI-engine guesses from
    ``shape[0] < 10``, resizing each channel while still declaring ``(size, size)``) are
    refused instead of being given a space that does not match them.

    Args:
        env: an env whose observations are ``uint8`` or ``float32`` images of shape
            ``(H, W, 3)`` (RGB), ``(H, W, 1)`` or ``(H, W)``.
        size: the side of the square output.

    Raises:
        ImportError: OpenCV is missing (``pip install 'cadence[atari]'``).
        TypeError: the observation space is not a ``Box``.
        ValueError: the observation space is not an image as above (its shape and dtype
            are named), or ``size < 1``.

    Examples:
        >>> import gymnasium as gym, ale_py
        >>> gym.register_envs(ale_py)
        >>> env = WarpFrame(gym.make("ALE/Pong-v5"), size=84)
        >>> env.observation_space
        Box(0, 255, (84, 84), uint8)
        >>> env.reset(seed=0)[0].shape
        (84, 84)
    """

    def __init__(self, env: gym.Env[Any, Any], size: int = 84) -> None:
        super().__init__(env)
        self._cv2 = _import_cv2()
        space = _box_or_raise(env.observation_space, "WarpFrame")
        shape = space.shape
        is_image = len(shape) == 2 or (len(shape) == 3 and shape[2] in (1, 3))
        if not is_image or space.dtype not in (np.uint8, np.float32):
            raise ValueError(
                "WarpFrame needs uint8 or float32 images of shape (H, W, 3) (RGB), (H, W, 1) or (H, W); "
                f"got shape {shape} and dtype {space.dtype}"
            )
        if int(size) < 1:
            raise ValueError(f"WarpFrame: size must be at least 1, got {size}")
        self.size = int(size)
        self._rgb = len(shape) == 3 and shape[2] == 3
        # a weighted mean of in-bounds pixels stays within the smallest and largest bound
        self.observation_space = gym.spaces.Box(
            low=np.min(space.low), high=np.max(space.high), shape=(self.size, self.size), dtype=space.dtype
        )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        """The frame in grayscale, resized to ``(size, size)``.

        Args:
            observation: the frame.

        Returns:
            The warped frame.
        """
        cv2 = self._cv2
        frame = cv2.cvtColor(observation, cv2.COLOR_RGB2GRAY) if self._rgb else observation
        return cv2.resize(frame, (self.size, self.size), interpolation=cv2.INTER_AREA)


class ScaledFloatFrame(gym.ObservationWrapper[Any, Any, Any]):
    """Scale observations to ``[0, 1]`` as float32: ``(obs - low) / (high - low)``, with
    ``low``/``high`` the smallest/largest bound of the space (``obs / 255`` for ``uint8``
    frames).

    The observation space becomes ``Box(0, 1, shape, float32)``.

    Args:
        env: an env with a ``Box`` observation space of finite bounds, ``high > low``.

    Raises:
        TypeError: the observation space is not a ``Box``.
        ValueError: its bounds are infinite or equal (they are named).

    Examples:
        >>> import gymnasium as gym, ale_py
        >>> gym.register_envs(ale_py)
        >>> env = ScaledFloatFrame(gym.make("ALE/Pong-v5"))
        >>> env.observation_space
        Box(0.0, 1.0, (210, 160, 3), float32)
        >>> float(env.reset(seed=0)[0].max()) <= 1.0
        True
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        space = _box_or_raise(env.observation_space, "ScaledFloatFrame")
        low, high = float(np.min(space.low)), float(np.max(space.high))
        if not (np.isfinite(low) and np.isfinite(high) and high > low):
            raise ValueError(f"ScaledFloatFrame needs finite bounds with high > low; got low={low}, high={high}")
        self.bias = np.float32(low)
        self.scale = np.float32(high - low)
        self.observation_space = gym.spaces.Box(low=0.0, high=1.0, shape=space.shape, dtype=np.float32)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        """The observation scaled to ``[0, 1]``.

        Args:
            observation: the raw observation.

        Returns:
            The float32 scaled observation.
        """
        return (np.asarray(observation, dtype=np.float32) - self.bias) / self.scale


class FrameStack(gym.Wrapper[Any, Any, Any, Any]):
    """Stack the last ``n_frames`` observations along a new first axis (DI-engine's layout:
    ``(n_frames, *obs_shape)``).

    ``reset`` fills the stack with copies of the first observation. Each returned stack is
    a fresh array: consecutive observations share no memory (with each other or with the
    inner env's arrays). The observation space becomes a ``Box`` of shape
    ``(n_frames, *shape)`` whose bounds are the inner bounds repeated (DI-engine keeps only
    their min and max, which is the same for Atari frames).

    Args:
        env: an env with a ``Box`` observation space.
        n_frames: how many observations to stack (at least 1).

    Raises:
        TypeError: the observation space is not a ``Box``.
        ValueError: ``n_frames < 1``.

    Examples:
        >>> import gymnasium as gym
        >>> env = FrameStack(gym.make("CartPole-v1"), n_frames=3)
        >>> env.observation_space.shape
        (3, 4)
        >>> obs, info = env.reset(seed=0)
        >>> bool((obs[0] == obs[2]).all())
        True
    """

    def __init__(self, env: gym.Env[Any, Any], n_frames: int = 4) -> None:
        super().__init__(env)
        space = _box_or_raise(env.observation_space, "FrameStack")
        if int(n_frames) < 1:
            raise ValueError(f"FrameStack: n_frames must be at least 1, got {n_frames}")
        self.n_frames = int(n_frames)
        self.frames: deque[np.ndarray] = deque(maxlen=self.n_frames)
        stacked = (self.n_frames, *space.shape)
        self.observation_space = gym.spaces.Box(
            low=np.broadcast_to(space.low, stacked).copy(),
            high=np.broadcast_to(space.high, stacked).copy(),
            dtype=space.dtype,
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset the inner env and fill the stack with its first observation.

        Args:
            seed: seeds the inner env.
            options: passed to the inner reset.

        Returns:
            The stacked observation and the inner info.
        """
        obs, info = self.env.reset(seed=seed, options=options)
        # np.array copies: an env that reuses its output buffer cannot alter stored frames
        frame = np.array(obs)
        self.frames.clear()
        self.frames.extend(frame for _ in range(self.n_frames))
        return self._stacked(), info

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the inner env and push its observation onto the stack.

        Args:
            action: the action to take.

        Returns:
            The stacked observation and the inner step's other results.
        """
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.frames.append(np.array(obs))
        return self._stacked(), reward, terminated, truncated, info

    def _stacked(self) -> np.ndarray:
        # np.stack allocates a new array each call: no aliasing between returned stacks
        return np.stack(self.frames, axis=0)


class ObsTransposeWrapper(gym.ObservationWrapper[Any, Any, Any]):
    """Put the channel dim first: ``(H, W, C) -> (C, H, W)``.

    As in DI-engine, a ``Tuple`` of ``(H, W, C)`` spaces (one per frame or agent) becomes
    one ``Box`` of shape ``(n, C, H, W)``; beyond DI-engine, a stacked ``(N, H, W, C)``
    ``Box`` becomes ``(N, C, H, W)`` too (DI-engine's rank-3 transpose would fail on it).
    Returned arrays are contiguous copies. The bounds are transposed with the data.

    Args:
        env: an env with a ``Box`` observation space of rank 3 or 4, or a ``Tuple`` of
            identical rank-3 ``Box`` spaces.

    Raises:
        ValueError: another observation space (its shape is named).

    Examples:
        >>> import gymnasium as gym, ale_py
        >>> gym.register_envs(ale_py)
        >>> env = ObsTransposeWrapper(gym.make("ALE/Pong-v5"))
        >>> env.observation_space
        Box(0, 255, (3, 210, 160), uint8)
        >>> env.reset(seed=0)[0].shape
        (3, 210, 160)
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        space = env.observation_space
        self._is_tuple = isinstance(space, gym.spaces.Tuple)
        if self._is_tuple:
            parts = list(space.spaces)  # type: ignore[attr-defined]
            if not parts or any(not isinstance(p, gym.spaces.Box) or p != parts[0] for p in parts):
                raise ValueError(f"ObsTransposeWrapper needs a Tuple of identical Box spaces; got {space}")
            if len(parts[0].shape) != 3:
                raise ValueError(f"ObsTransposeWrapper needs (H, W, C) frames in the Tuple; got shape {parts[0].shape}")
            low, high, dtype = np.stack([p.low for p in parts]), np.stack([p.high for p in parts]), parts[0].dtype
        elif isinstance(space, gym.spaces.Box) and len(space.shape) in (3, 4):
            low, high, dtype = space.low, space.high, space.dtype
        else:
            raise ValueError(
                "ObsTransposeWrapper needs a Box of shape (H, W, C) or (N, H, W, C), or a Tuple of (H, W, C) Boxes; "
                f"got {space} of shape {getattr(space, 'shape', None)}"
            )
        # the last axis (channels) moves to just after any leading (frame) axis
        self._axes: tuple[int, ...] = (2, 0, 1) if low.ndim == 3 else (0, 3, 1, 2)
        self.observation_space = gym.spaces.Box(
            low=np.ascontiguousarray(low.transpose(self._axes)),
            high=np.ascontiguousarray(high.transpose(self._axes)),
            dtype=dtype,
        )

    def observation(self, observation: Any) -> np.ndarray:
        """The observation with its channel dim first.

        Args:
            observation: an ``(H, W, C)`` or ``(N, H, W, C)`` array, or a tuple of ``(H, W, C)`` arrays.

        Returns:
            The contiguous transposed array.
        """
        array = np.stack(observation) if self._is_tuple else np.asarray(observation)
        return np.ascontiguousarray(array.transpose(self._axes))
