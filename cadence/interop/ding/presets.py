"""The named wrapper chains of ``DingEnvWrapper``'s ``cfg["env_wrapper"]``.

DI-engine's names, with the chains its users expect:

* ``"default"`` and ``"mujoco_default"``: no wrapper (``DingEnvWrapper`` itself sums
  ``eval_episode_return``);
* ``"atari_default"``: :func:`~cadence.interop.ding.wrappers.wrap_deepmind`:
  ``NoopResetEnv(30)``, ``MaxAndSkipEnv(4)``, ``EpisodicLifeEnv`` and ``ClipRewardEnv``
  (training envs only), ``FireResetEnv`` (games with FIRE), ``WarpFrame(84)``,
  ``ScaledFloatFrame``, ``FrameStack(4)``; made from a game without frame skipping
  (``PongNoFrameskip-v4``, or ``env_kwargs={"frameskip": 1}``);
* ``"gym_hybrid_default"``: ``GymHybridDictActionWrapper``.

Two choices differ from DI-engine 0.5.3, on purpose: FIRE is pressed for every game whose
action 1 is FIRE (DI-engine decides by the name: Pong, Qbert, SpaceInvaders, Montezuma, so
Breakout waits forever), and evaluator envs (``is_train=False``) keep whole games, not one
life per episode (DI-engine loses an evaluation episode at the first life lost).

Examples:
    >>> [type(wrap).__name__ for wrap in preset_wrappers("default", {})]
    []
    >>> [w.keywords for w in preset_wrappers("atari_default", {"is_train": False})]
    [{'episode_life': False, 'clip_rewards': False}]
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym

__all__ = ["PRESETS", "preset_wrappers"]

#: The names ``DingEnvWrapper``'s ``cfg["env_wrapper"]`` takes.
PRESETS = ("default", "mujoco_default", "atari_default", "gym_hybrid_default")

Wrap = Callable[[gym.Env], gym.Env]


def preset_wrappers(name: str, cfg: Mapping[str, Any]) -> list[Wrap]:
    """The wrappers a preset applies, innermost first.

    Args:
        name: one of :data:`PRESETS`.
        cfg: the env config; ``is_train`` (default ``True``) picks the training chain.

    Returns:
        Callables ``env -> wrapped env``.

    Raises:
        ValueError: for an unknown name, listing the known ones.

    Examples:
        >>> [w.__name__ for w in preset_wrappers("gym_hybrid_default", {})]
        ['GymHybridDictActionWrapper']
        >>> preset_wrappers("retro", {})
        Traceback (most recent call last):
        ...
        ValueError: cfg['env_wrapper'] = 'retro' is not a preset; the presets: default, mujoco_default, atari_default, gym_hybrid_default (or give a list of callables)
    """
    if name in ("default", "mujoco_default"):
        return []
    if name == "gym_hybrid_default":
        from cadence.interop.ding.wrappers import GymHybridDictActionWrapper

        return [GymHybridDictActionWrapper]
    if name == "atari_default":
        from cadence.interop.ding.wrappers import wrap_deepmind

        training = bool(cfg.get("is_train", True))
        return [functools.partial(wrap_deepmind, episode_life=training, clip_rewards=training)]
    raise ValueError(
        f"cfg['env_wrapper'] = {name!r} is not a preset; the presets: {', '.join(PRESETS)} (or give a list of callables)"
    )
