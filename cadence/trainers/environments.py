"""The environments of ``cadence train``: a gymnasium id or a dm_control ``domain/task``.

Each env observes one vector ``"observation"`` and acts through ``"action"``. Gymnasium
envs are used as they are (``GymEnv``, or ``SerialEnv`` of them), so that the collector
steps their simulators directly; the networks cast what they read to float32
themselves. dm_control's named observations are concatenated into ``"observation"`` and
cast to float32 by transforms. ``max_episode_steps > 0`` truncates episodes with a
``StepCounter``.

Examples:
    >>> from cadence.trainers.config import TrainConfig
    >>> env = make_env(TrainConfig(), seed=0)
    >>> sorted(env.observation_spec.keys())
    ['observation']
    >>> make_env(TrainConfig(env="Pendullum-v1"), seed=0)
    Traceback (most recent call last):
    ...
    cadence.trainers.config.ConfigError: unknown env 'Pendullum-v1'; did you mean Pendulum-v1, ...
"""

from __future__ import annotations

import difflib
import os

from cadence.envs import CatTensors, Compose, DoubleToFloat, GymEnv, SerialEnv, StepCounter, TransformedEnv
from cadence.envs.common import EnvBase
from cadence.trainers.config import ConfigError, TrainConfig

__all__ = ["check_env_name", "episode_step_limit", "gymnasium_ids", "is_dm_control", "make_env"]

# an evaluation episode of an env that sets no time limit stops after this many steps
DEFAULT_STEP_LIMIT = 1000


def gymnasium_ids() -> list[str]:
    """The ids registered with gymnasium, sorted.

    Examples:
        >>> "Pendulum-v1" in gymnasium_ids()
        True
    """
    import gymnasium

    return sorted(gymnasium.envs.registry.keys())


def is_dm_control(name: str) -> bool:
    """Whether ``name`` reads as a dm_control ``domain/task`` (gymnasium namespaces some of
    its ids with ``/`` too: those stay gymnasium's).

    Examples:
        >>> is_dm_control("cheetah/run"), is_dm_control("Pendulum-v1")
        (True, False)
    """
    return ":" not in name and name.count("/") == 1 and name not in gymnasium_ids()


def check_env_name(name: str) -> None:
    """Raises a one-line ``ConfigError`` unless ``name`` is a gymnasium id (``"module:Id"``
    imports ``module`` first, as ``gymnasium.make`` does) or an installed dm_control task.

    Examples:
        >>> check_env_name("Pendulum-v1")
        >>> check_env_name("Pendulum")
        Traceback (most recent call last):
        ...
        cadence.trainers.config.ConfigError: unknown env 'Pendulum'; did you mean Pendulum-v1, ...? valid gymnasium ids: ...
    """
    if is_dm_control(name):
        from cadence.envs.libs.dm_control import DMControlEnv

        try:
            suite = DMControlEnv.lib.suite  # through the wrapper, which picks a headless renderer first
        except ImportError:
            raise ConfigError(
                f"env {name!r} is a dm_control domain/task, and dm_control is not installed "
                "(pip install 'cadence[dm_control]')"
            ) from None
        domain, task = name.split("/")
        tasks = sorted(f"{d}/{t}" for d, t in suite.ALL_TASKS)
        if (domain, task) not in suite.ALL_TASKS:
            raise ConfigError(f"unknown dm_control task {name!r}; valid tasks: {', '.join(tasks)}")
        return
    if ":" in name:  # gymnasium's "module:EnvId": importing the module registers the env
        import importlib

        module, _, name = name.partition(":")
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ConfigError(f"env module {module!r} cannot be imported: {err}") from None
    ids = gymnasium_ids()
    if name not in ids:
        close = difflib.get_close_matches(name, ids, n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        # gymnasium's own envs by name; the hundreds that other packages register (ale-py's
        # games...) by count, so that the message stays one readable line
        import gymnasium

        registry = gymnasium.envs.registry
        own = [i for i in ids if "/" not in i and str(registry[i].entry_point).startswith("gymnasium.envs.")]
        more = len(ids) - len(own)
        rest = f" and {more} more from other packages (gymnasium.pprint_registry() lists them)" if more else ""
        raise ConfigError(f"unknown env {name!r}; {hint}valid gymnasium ids: {', '.join(own)}{rest}")


def episode_step_limit(config: TrainConfig) -> int:
    """The longest episode of the config's env: ``max_episode_steps``, else the limit the
    env registers (gymnasium's ``max_episode_steps``, dm_control's 1000 steps), else
    ``DEFAULT_STEP_LIMIT``.

    Examples:
        >>> episode_step_limit(TrainConfig()), episode_step_limit(TrainConfig(max_episode_steps=50))
        (200, 50)
    """
    if config.max_episode_steps > 0:
        return config.max_episode_steps
    if is_dm_control(config.env):
        return 1000  # the suite's 20 s episodes at its default control step
    import gymnasium

    spec = gymnasium.spec(config.env.partition(":")[2] or config.env)
    return spec.max_episode_steps or DEFAULT_STEP_LIMIT


def _single_env(name: str, render: bool) -> EnvBase:
    if is_dm_control(name):
        from cadence.envs.libs.dm_control import DMControlEnv

        domain, task = name.split("/")
        env: EnvBase = DMControlEnv(domain, task, from_pixels=render, pixels_only=False)
        keys = [key for key in env.observation_spec.keys() if key != "pixels"]
        return TransformedEnv(env, Compose(CatTensors(in_keys=keys, out_key="observation"), DoubleToFloat()))
    if render:
        return GymEnv(name, from_pixels=True, pixels_only=False)
    return GymEnv(name)


def make_env(config: TrainConfig, seed: int, num_envs: int = 1, render: bool = False) -> EnvBase:
    """The env named by ``config.env``, seeded with ``seed``.

    Args:
        config: the run's config (``env``, ``max_episode_steps``).
        seed: the env's seed (its first reset uses it).
        num_envs: how many copies to step together (``SerialEnv``) when above 1.
        render: also write rendered frames under ``"pixels"`` (for videos).

    Raises:
        ConfigError: for an unknown env (naming the close matches and the valid ids).

    Examples:
        >>> from cadence.trainers.config import TrainConfig
        >>> make_env(TrainConfig(max_episode_steps=50), seed=1, num_envs=2).batch_size
        torch.Size([2])
    """
    check_env_name(config.env)
    if render and not os.environ.get("DISPLAY"):
        # gymnasium draws its classic-control frames with pygame: no window, no sound device here
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    env = _single_env(config.env, render) if num_envs == 1 else SerialEnv(
        num_envs, lambda: _single_env(config.env, render)
    )
    env.set_seed(seed)
    if config.max_episode_steps > 0:
        env = TransformedEnv(env, StepCounter(config.max_episode_steps))
    return env
