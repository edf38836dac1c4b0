"""DI-engine's env preprocessing wrappers (the seed's "Environment preprocessing wrapper"),
as ``gymnasium.Wrapper`` subclasses on gymnasium's 5-tuple API.

Each wrapper updates ``observation_space``/``action_space`` (and, for reward wrappers,
``reward_range``) when it changes what the env returns or takes:

- :mod:`.atari`: ``NoopResetEnv``, ``MaxAndSkipEnv``, ``EpisodicLifeEnv``, ``FireResetEnv``,
  ``RamWrapper``;
- :mod:`.frames`: ``WarpFrame``, ``ScaledFloatFrame``, ``FrameStack``, ``ObsTransposeWrapper``
  (``WarpFrame`` needs ``pip install 'cadence[atari]'``);
- :mod:`.normalization`: ``ClipRewardEnv``, ``ObsNormEnv``, ``RewardNormEnv``, ``RunningMeanStd``;
- :mod:`.hybrid`: ``GymHybridDictActionWrapper``.

DI-engine 0.5.3's class names (``NoopResetWrapper``, ``WarpFrameWrapper``, ...) are aliases.
``wrap_deepmind`` builds DI-engine's DeepMind Atari chain.

Examples:
    >>> import gymnasium as gym, ale_py
    >>> from cadence.interop.ding.wrappers import wrap_deepmind
    >>> gym.register_envs(ale_py)
    >>> env = wrap_deepmind(gym.make("ALE/Breakout-v5", frameskip=1, repeat_action_probability=0.0))
    >>> env.observation_space
    Box(0.0, 1.0, (4, 84, 84), float32)
    >>> env.reset(seed=0)[0].shape
    (4, 84, 84)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from cadence.interop.ding.wrappers.atari import (
    EpisodicLifeEnv,
    FireResetEnv,
    MaxAndSkipEnv,
    NoopResetEnv,
    RamWrapper,
)
from cadence.interop.ding.wrappers.frames import FrameStack, ObsTransposeWrapper, ScaledFloatFrame, WarpFrame
from cadence.interop.ding.wrappers.hybrid import GymHybridDictActionWrapper
from cadence.interop.ding.wrappers.normalization import ClipRewardEnv, ObsNormEnv, RewardNormEnv, RunningMeanStd

# DI-engine 0.5.3's names for the same wrappers
NoopResetWrapper = NoopResetEnv
MaxAndSkipWrapper = MaxAndSkipEnv
WarpFrameWrapper = WarpFrame
ScaledFloatFrameWrapper = ScaledFloatFrame
ClipRewardWrapper = ClipRewardEnv
FrameStackWrapper = FrameStack
ObsNormWrapper = ObsNormEnv
RewardNormWrapper = RewardNormEnv
EpisodicLifeWrapper = EpisodicLifeEnv
FireResetWrapper = FireResetEnv

__all__ = [
    "ClipRewardEnv",
    "ClipRewardWrapper",
    "EpisodicLifeEnv",
    "EpisodicLifeWrapper",
    "FireResetEnv",
    "FireResetWrapper",
    "FrameStack",
    "FrameStackWrapper",
    "GymHybridDictActionWrapper",
    "MaxAndSkipEnv",
    "MaxAndSkipWrapper",
    "NoopResetEnv",
    "NoopResetWrapper",
    "ObsNormEnv",
    "ObsNormWrapper",
    "ObsTransposeWrapper",
    "RamWrapper",
    "RewardNormEnv",
    "RewardNormWrapper",
    "RunningMeanStd",
    "ScaledFloatFrame",
    "ScaledFloatFrameWrapper",
    "WarpFrame",
    "WarpFrameWrapper",
    "wrap_deepmind",
]


def wrap_deepmind(
    env: gym.Env[Any, Any],
    episode_life: bool = True,
    clip_rewards: bool = True,
    frame_stack: int = 4,
    scale: bool = True,
    warp_frame: bool = True,
    noop_max: int = 30,
    skip: int = 4,
) -> gym.Env[Any, Any]:
    """Wrap an ALE game (without frame skipping) in DI-engine's DeepMind chain.

    In order: ``NoopResetEnv``, ``MaxAndSkipEnv``, ``EpisodicLifeEnv``, ``FireResetEnv``
    (only if the game has a ``'FIRE'`` action), ``WarpFrame``, ``ScaledFloatFrame``,
    ``ClipRewardEnv``, ``FrameStack``, each optional as in DI-engine's ``wrap_deepmind``.
    With everything on, observations are ``(frame_stack, 84, 84)`` float32 in ``[0, 1]``,
    already channel-first. Unlike DI-engine's, it takes a made env rather than an id, so the
    caller chooses ``frameskip=1`` and sticky actions.

    Args:
        env: an ALE env with ``frameskip=1``.
        episode_life: wrap ``EpisodicLifeEnv``.
        clip_rewards: wrap ``ClipRewardEnv``.
        frame_stack: frames to stack (0: no ``FrameStack``).
        scale: wrap ``ScaledFloatFrame``.
        warp_frame: wrap ``WarpFrame``.
        noop_max: ``NoopResetEnv``'s ``noop_max``.
        skip: ``MaxAndSkipEnv``'s ``skip``.

    Returns:
        The wrapped env.

    Examples:
        >>> import gymnasium as gym, ale_py
        >>> gym.register_envs(ale_py)
        >>> env = wrap_deepmind(gym.make("ALE/Pong-v5", frameskip=1), scale=False, frame_stack=2)
        >>> env.observation_space
        Box(0, 255, (2, 84, 84), uint8)
    """
    env = MaxAndSkipEnv(NoopResetEnv(env, noop_max=noop_max), skip=skip)
    if episode_life:
        env = EpisodicLifeEnv(env)
    if "FIRE" in env.unwrapped.get_action_meanings():  # type: ignore[attr-defined]
        env = FireResetEnv(env)
    if warp_frame:
        env = WarpFrame(env)
    if scale:
        env = ScaledFloatFrame(env)
    if clip_rewards:
        env = ClipRewardEnv(env)
    if frame_stack:
        env = FrameStack(env, frame_stack)
    return env
