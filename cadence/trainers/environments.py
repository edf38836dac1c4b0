"""The environments of ``cadence train``: a gymnasium id or a dm_control ``domain/task``,
with the transforms every run uses.

Each env observes one float32 vector ``"observation"`` (dm_control's named observations
are concatenated into it), acts through ``"action"``, and keeps the episode return in
``"episode_reward"`` (``RewardSum``); ``max_episode_steps > 0`` truncates episodes with a
``StepCounter``.

Examples:
    >>> from cadence.trainers.config import TrainConfig
    >>> env = make_env(TrainConfig(), seed=0)
    >>> sorted(env.observation_spec.keys())
    ['episode_reward', 'observation']
    >>> make_env(TrainConfig(env="Pendullum-v1"), seed=0)
    Traceback (most recent call last):
    ...
    cadence.trainers.config.ConfigError: unknown env 'Pendullum-v1'; did you mean Pendulum-v1, ...
"""

from __future__ import annotations

import difflib

from cadence.envs import (
    CatTensors,
    Compose,
    DoubleToFloat,
    GymEnv,
    RewardSum,
    SerialEnv,
    StepCounter,
    TransformedEnv,
)
from cadence.envs.common import EnvBase
from cadence.trainers.config import ConfigError, TrainConfig

__all__ = ["gymnasium_ids", "make_env"]


def gymnasium_ids() -> list[str]:
    """The ids registered with gymnasium, sorted.

    Examples:
        >>> "Pendulum-v1" in gymnasium_ids()
        True
    """
    import gymnasium

    return sorted(gymnasium.envs.registry.keys())


def _is_dm_control(name: str) -> bool:
    """``domain/task`` that gymnasium does not know (it namespaces some ids with ``/``)."""
    return name.count("/") == 1 and name not in gymnasium_ids()


def _check_env_name(name: str) -> None:
    if _is_dm_control(name):
        domain, task = name.split("/")
        try:
            from dm_control import suite
        except ImportError:
            raise ConfigError(
                f"env {name!r} is a dm_control domain/task, and dm_control is not installed "
                "(pip install 'cadence[dm_control]')"
            ) from None
        valid = [f"{d}/{t}" for d, t in suite.BENCHMARKING]
        if (domain, task) not in suite.BENCHMARKING and (domain, task) not in getattr(suite, "ALL_TASKS", ()):
            raise ConfigError(f"unknown dm_control task {name!r}; valid tasks: {', '.join(valid)}")
        return
    ids = gymnasium_ids()
    if name not in ids:
        close = difflib.get_close_matches(name, ids, n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise ConfigError(f"unknown env {name!r}; {hint}valid gymnasium ids: {', '.join(ids)}")


def _base_env(name: str, seed: int) -> EnvBase:
    if _is_dm_control(name):
        from cadence.envs.libs.dm_control import DMControlEnv

        domain, task = name.split("/")
        env: EnvBase = DMControlEnv(domain, task)
        keys = [key for key in env.observation_spec.keys() if key != "pixels"]
        env = TransformedEnv(env, Compose(DoubleToFloat(), CatTensors(in_keys=keys, out_key="observation")))
    else:
        env = GymEnv(name)
        env = TransformedEnv(env, DoubleToFloat())
    env.set_seed(seed)
    return env


def make_env(config: TrainConfig, seed: int, num_envs: int = 1, render: bool = False) -> EnvBase:
    """The env named by ``config.env``, seeded with ``seed``.

    Args:
        config: the run's config (``env``, ``max_episode_steps``).
        seed: the env's seed.
        num_envs: how many copies to step together (``SerialEnv``) when above 1.
        render: build gymnasium envs with ``render_mode="rgb_array"`` (for videos).

    Raises:
        ConfigError: for an unknown env (naming the close matches and the valid ids).

    Examples:
        >>> from cadence.trainers.config import TrainConfig
        >>> make_env(TrainConfig(max_episode_steps=50), seed=1, num_envs=2).batch_size
        torch.Size([2])
    """
    _check_env_name(config.env)
    if render and not _is_dm_control(config.env):
        def build() -> EnvBase:
            env = TransformedEnv(GymEnv(config.env, render_mode="rgb_array"), DoubleToFloat())
            env.set_seed(seed)
            return env
    else:
        def build() -> EnvBase:
            return _base_env(config.env, seed)
    base = build() if num_envs == 1 else SerialEnv(num_envs, build)
    if num_envs > 1:
        base.set_seed(seed)
    transforms = [RewardSum()]
    if config.max_episode_steps > 0:
        transforms.insert(0, StepCounter(config.max_episode_steps))
    return TransformedEnv(base, Compose(*transforms))
