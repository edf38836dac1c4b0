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

import contextlib
import difflib
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from cadence._utils import quoted
from cadence.envs import CatTensors, Compose, DoubleToFloat, GymEnv, SerialEnv, StepCounter, TransformedEnv
from cadence.envs.common import EnvBase
from cadence.trainers.config import ConfigError, TrainConfig

__all__ = [
    "MAX_ENV_NAME_LENGTH",
    "check_env_name",
    "episode_step_limit",
    "gymnasium_ids",
    "import_env_module",
    "is_dm_control",
    "make_env",
]

# an evaluation episode of an env that sets no time limit stops after this many steps
DEFAULT_STEP_LIMIT = 1000
#: the longest env name taken (gymnasium's ids and dm_control's tasks are far shorter)
MAX_ENV_NAME_LENGTH = 256
# the module of "module:Id": dotted Python names, never a relative import or a path
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


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


def check_env_name(name: str, run_folder: Path | None = None) -> None:
    """Raises a one-line ``ConfigError`` unless ``name`` is a gymnasium id (``"module:Id"``
    imports ``module`` first, as ``gymnasium.make`` does: see :func:`import_env_module`) or
    an installed dm_control task.

    Args:
        name: the env's name.
        run_folder: the run folder whose config names it, if any: its env module must not
            be found inside that folder.

    Examples:
        >>> check_env_name("Pendulum-v1")
        >>> check_env_name("Pendulum")
        Traceback (most recent call last):
        ...
        cadence.trainers.config.ConfigError: unknown env 'Pendulum'; did you mean Pendulum-v1, ...? valid gymnasium ids: ...
    """
    if len(name) > MAX_ENV_NAME_LENGTH:
        raise ConfigError(f"env names are at most {MAX_ENV_NAME_LENGTH} characters, got {quoted(name)}")
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
        module, _, name = name.partition(":")
        import_env_module(module, run_folder)
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


def import_env_module(module: str, run_folder: Path | None = None) -> None:
    """Imports the module of a ``module:Id`` env name, which registers the env.

    The module is looked for where ``python -m cadence`` would find it: in the current
    folder first, then among the installed packages (the ``cadence`` console script does
    not search the current folder by itself; it does for this import only). A run folder
    is data: when its config names the module (``run_folder``), a module found inside that
    folder, or a package with any part there (a namespace package such as
    ``checkpoints.evil``), is refused without running anything.

    Args:
        module: a dotted module name (``my_envs``, ``my_package.envs``).
        run_folder: the run folder whose config names the module, if any.

    Raises:
        ConfigError: ``module`` is no module name (a path, a relative import), cannot be
            found or imported, or lies inside ``run_folder``.

    Examples:
        >>> import_env_module("gymnasium.envs.classic_control")
        >>> import_env_module("../evil")
        Traceback (most recent call last):
        ...
        cadence.trainers.config.ConfigError: env module '../evil' is not a module name: expected dotted Python names (my_envs, my_package.envs) before the ':' of module:Id
    """
    if not _MODULE_NAME.fullmatch(module):
        raise ConfigError(
            f"env module {quoted(module)} is not a module name: expected dotted Python names "
            "(my_envs, my_package.envs) before the ':' of module:Id"
        )
    top = module.split(".")[0]
    with _current_folder_searched():
        places = _module_places(top)
        if places is None:
            raise ConfigError(
                f"env module {module!r} cannot be imported: no module named {top!r} in the current folder "
                f"({os.getcwd()}) or the installed packages"
            )
        if run_folder is not None:
            folder = Path(run_folder).resolve()
            inside = [place for place in places if Path(place).resolve().is_relative_to(folder)]
            if inside:
                raise ConfigError(
                    f"{Path(run_folder) / 'config.toml'} names the env module {top!r}, which lies inside the run "
                    f"folder ({inside[0]}); a run folder is data and its code is not imported: run from another folder"
                )
        try:
            importlib.import_module(module)
        except Exception as err:  # the user's module failed: one line, naming it
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise ConfigError(f"env module {module!r} cannot be imported: {type(err).__name__}: {first}") from None


def _module_places(top: str) -> list[str] | None:
    """The files and folders the top-level module ``top`` is (or would be) loaded from,
    found without running it; ``None`` if there is no such module."""
    loaded = sys.modules.get(top)
    if loaded is not None:
        file = getattr(loaded, "__file__", None)
        return ([file] if file else []) + list(getattr(loaded, "__path__", []))
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    places = [spec.origin] if spec.has_location and spec.origin else []
    return places + list(spec.submodule_search_locations or [])  # every folder of a (namespace) package


@contextlib.contextmanager
def _current_folder_searched() -> Iterator[None]:
    """The current folder on Python's path for the duration, unless it is there already."""
    here = os.getcwd()
    if "" in sys.path or here in sys.path:
        yield
        return
    sys.path.insert(0, here)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(here)


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
