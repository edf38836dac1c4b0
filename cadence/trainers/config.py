"""The typed configuration of ``cadence train``: one dataclass, set from defaults, a TOML or
YAML file, then the command line (each later source wins).

Every field is a command-line option: ``total_frames`` is ``--total-frames``, a boolean
``video`` is ``--video``/``--no-video``, a list of ints such as ``hidden_sizes`` is
``--hidden-sizes 256,256``. A config file holds the same names (``total_frames = 20000``).
Unknown names and unknown algorithms fail with one line listing the valid choices.

Examples:
    >>> config = TrainConfig(algorithm="td3", total_frames=5000)
    >>> config.total_frames, config.env
    (5000, 'Pendulum-v1')
    >>> config_from_mapping({"total_frame": 10}, "a.toml")
    Traceback (most recent call last):
    ...
    cadence.trainers.config.ConfigError: a.toml: unknown config field 'total_frame'; valid fields: actor_lr, algorithm, ...
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import tomllib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cadence._utils import quoted

__all__ = [
    "ALGORITHMS",
    "MAX_CONFIG_FILE_BYTES",
    "MAX_COUNT",
    "ConfigError",
    "TrainConfig",
    "add_config_arguments",
    "build_config",
    "check_path",
    "config_from_mapping",
    "config_options",
    "load_config_file",
    "overrides_from_args",
]

ALGORITHMS = ("ddpg", "td3", "sac")

# a run name becomes one folder under runs_dir: one path component of safe characters,
# never "." or ".." (it cannot start with a dot), never a separator
RUN_NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
# seeds feed numpy's legacy seeding (< 2**32) and derived seeds (seed + frames) stay far
# inside every env's range
MAX_SEED = 2**32 - 1
#: the largest frame count, size or interval a config takes: far beyond any run, far inside int64
MAX_COUNT = 10**12
# bounds of the fields whose cost grows with their value alone (the memory and disk a run
# will take are checked from the env's specs, by cadence.trainers.resources)
_MAXIMUMS = {"num_envs": 1024, "threads": 1024, "eval_episodes": 10**6, "updates_per_frame": 1000}
_MAX_HIDDEN_LAYERS = 64
#: the largest config file read (a config is a few hundred bytes)
MAX_CONFIG_FILE_BYTES = 1 << 20
# what the file system takes: a path of at most 4096 bytes, of names of at most 255
_MAX_PATH_BYTES, _MAX_NAME_BYTES = 4096, 255


class ConfigError(ValueError):
    """A configuration value, field or file that cannot be used (its message is one line)."""


def check_path(path: str | Path, what: str) -> Path:
    """``path`` as a ``Path``, or a one-line ``ConfigError`` naming ``what`` if the file
    system could not take it (too long, a name too long, a NUL byte): checked before it is
    used, so that the OS's error (which echoes the whole path) never reaches the user.

    Examples:
        >>> check_path("runs/demo", "RUN_DIR")
        PosixPath('runs/demo')
        >>> check_path("a" * 300, "--runs-dir")
        Traceback (most recent call last):
        ...
        cadence.trainers.config.ConfigError: --runs-dir: a name in the path is longer than 255 bytes: 'aaaaaaaaaaaaa...
    """
    text = os.fspath(path)
    encoded = text.encode("utf-8", "surrogateescape")
    if b"\0" in encoded:
        raise ConfigError(f"{what}: a path cannot hold a NUL byte, got {quoted(text)}")
    if len(encoded) > _MAX_PATH_BYTES:
        raise ConfigError(f"{what}: a path is at most {_MAX_PATH_BYTES} bytes, got {quoted(text)}")
    if any(len(part.encode("utf-8", "surrogateescape")) > _MAX_NAME_BYTES for part in Path(text).parts):
        raise ConfigError(f"{what}: a name in the path is longer than {_MAX_NAME_BYTES} bytes: {quoted(text, 30)}")
    return Path(text)


def _field(default: Any, help_text: str, **kwargs: Any) -> Any:
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata={"help": help_text}, **kwargs)
    return dataclasses.field(default=default, metadata={"help": help_text}, **kwargs)


@dataclasses.dataclass
class TrainConfig:
    """Everything a training run reads. The defaults train DDPG on Pendulum-v1 to a return
    better than -200 within 15k frames on 2 CPU cores (a minute or two).

    Examples:
        >>> TrainConfig().algorithm, TrainConfig().hidden_sizes
        ('ddpg', [256, 256])
        >>> TrainConfig(algorithm="ppo").validate()
        Traceback (most recent call last):
        ...
        cadence.trainers.config.ConfigError: unknown algorithm 'ppo'; valid algorithms: ddpg, td3, sac
    """

    algorithm: str = _field("ddpg", "ddpg, td3 or sac")
    env: str = _field("Pendulum-v1", "a gymnasium id (Pendulum-v1) or a dm_control domain/task (cheetah/run)")
    name: str = _field("", "the run's folder under runs_dir (default: <algorithm>-<env>-seed<seed>)")
    runs_dir: str = _field("runs", "where run folders go")
    seed: int = _field(0, "seed of everything: networks, exploration, envs, replay sampling")
    total_frames: int = _field(15_000, "environment steps to train for")
    frames_per_batch: int = _field(50, "environment steps collected between rounds of updates")
    init_random_frames: int = _field(1_000, "steps with uniformly random actions before the policy acts")
    num_envs: int = _field(1, "environments stepped together in the collecting process")
    max_episode_steps: int = _field(0, "truncate episodes after this many steps (0: the env's own limit)")
    buffer_size: int = _field(100_000, "replay buffer capacity (frames, memory-mapped under the run folder)")
    batch_size: int = _field(256, "transitions per update")
    updates_per_frame: float = _field(1.0, "gradient updates per collected frame (the UTD ratio)")
    hidden_sizes: list[int] = _field([256, 256], "hidden layer sizes of every network")
    actor_lr: float = _field(1e-3, "actor learning rate (Adam)")
    critic_lr: float = _field(1e-3, "critic learning rate (Adam)")
    alpha_lr: float = _field(3e-4, "SAC: entropy temperature learning rate")
    gamma: float = _field(0.98, "discount")
    tau: float = _field(0.005, "soft target update rate")
    exploration_noise: float = _field(0.1, "DDPG/TD3: Gaussian action noise, as a fraction of the action range's half-width")
    policy_delay: int = _field(2, "TD3: critic updates per actor update")
    target_policy_noise: float = _field(0.2, "TD3: target policy smoothing noise")
    target_noise_clip: float = _field(0.5, "TD3: clip of the smoothing noise")
    eval_interval: int = _field(1_000, "frames between deterministic evaluations")
    eval_episodes: int = _field(5, "episodes per evaluation (their mean return is the evaluation return)")
    checkpoint_interval: int = _field(5_000, "frames between checkpoints (also written at the end)")
    threads: int = _field(
        1, "torch threads while training (0: torch's default); small networks gain little from more, "
        "and lose much when other processes share the cores"
    )
    tensorboard: bool = _field(True, "also log to TensorBoard (CSV is always written)")
    video: bool = _field(True, "record a video of the final policy")
    plot: bool = _field(True, "plot training and evaluation return against frames (PNG)")
    progress: bool = _field(True, "show a progress bar")

    def run_name(self) -> str:
        """The run's folder name: ``name`` or ``<algorithm>-<env>-seed<seed>``.

        Examples:
            >>> TrainConfig(env="cheetah/run", seed=3).run_name()
            'ddpg-cheetah-run-seed3'
        """
        if self.name:
            return self.name
        env = re.sub(r"[^A-Za-z0-9_.-]", "-", self.env)  # "cheetah/run", "my_module:Id-v0"
        return f"{self.algorithm}-{env}-seed{self.seed}"

    def validate(self) -> TrainConfig:
        """Checks every value; returns ``self``.

        Raises:
            ConfigError: naming the field, the value and what is allowed.

        Examples:
            >>> TrainConfig(total_frames=0).validate()
            Traceback (most recent call last):
            ...
            cadence.trainers.config.ConfigError: total_frames must be >= 1, got 0
        """
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"unknown algorithm {quoted(self.algorithm)}; valid algorithms: {', '.join(ALGORITHMS)}")
        if self.name and not RUN_NAME_PATTERN.fullmatch(self.name):
            raise ConfigError(
                f"name must be one folder name of letters, digits, '_', '.' and '-' (not starting with '.'; "
                f"at most 128 characters), got {quoted(self.name)}"
            )
        check_path(self.runs_dir, "runs_dir")
        if not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"seed must be in [0, {MAX_SEED}], got {self.seed}")
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{field.name} must be a finite number, got {value}")
        minimums = {
            "total_frames": 1, "frames_per_batch": 1, "init_random_frames": 0, "num_envs": 1,
            "max_episode_steps": 0, "buffer_size": 1, "batch_size": 1, "policy_delay": 1,
            "eval_interval": 1, "eval_episodes": 1, "checkpoint_interval": 1, "threads": 0,
        }
        for name, minimum in minimums.items():
            value = getattr(self, name)
            if value < minimum:
                raise ConfigError(f"{name} must be >= {minimum}, got {value}")
            if value > _MAXIMUMS.get(name, MAX_COUNT):
                raise ConfigError(f"{name} must be <= {_MAXIMUMS.get(name, MAX_COUNT)}, got {quoted(value)}")
        if self.updates_per_frame > _MAXIMUMS["updates_per_frame"]:
            raise ConfigError(f"updates_per_frame must be <= {_MAXIMUMS['updates_per_frame']}, got {self.updates_per_frame}")
        for name in ("actor_lr", "critic_lr", "alpha_lr", "updates_per_frame"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("exploration_noise", "target_policy_noise", "target_noise_clip"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("gamma", "tau"):
            if not 0 < getattr(self, name) <= 1:
                raise ConfigError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        if not self.hidden_sizes or len(self.hidden_sizes) > _MAX_HIDDEN_LAYERS or any(
            not 1 <= size <= MAX_COUNT for size in self.hidden_sizes
        ):
            raise ConfigError(
                f"hidden_sizes must be 1 to {_MAX_HIDDEN_LAYERS} layer sizes in [1, {MAX_COUNT}], "
                f"got {quoted(self.hidden_sizes)}"
            )
        if self.frames_per_batch % self.num_envs:
            raise ConfigError(
                f"frames_per_batch ({self.frames_per_batch}) must be a multiple of num_envs ({self.num_envs})"
            )
        return self

    def to_toml(self) -> str:
        """The fields as a TOML file (what a run folder's ``config.toml`` holds), readable
        by :func:`load_config_file`.

        Examples:
            >>> print(TrainConfig().to_toml().splitlines()[0])
            algorithm = "ddpg"
        """
        lines = []
        for name, value in self.to_dict().items():
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, str):
                text = json.dumps(value)  # a JSON string is a TOML basic string
            else:
                text = repr(value)  # ints, floats (1e-05 is valid TOML) and lists of ints
            lines.append(f"{name} = {text}")
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain values (what ``config.toml`` of a run holds).

        Examples:
            >>> TrainConfig().to_dict()["total_frames"]
            15000
        """
        return dataclasses.asdict(self)


def _fields() -> dict[str, dataclasses.Field]:
    return {field.name: field for field in dataclasses.fields(TrainConfig)}


def _field_type(field: dataclasses.Field) -> Any:
    hints = typing.get_type_hints(TrainConfig)
    return hints[field.name]


def _convert(name: str, kind: Any, value: Any, origin: str) -> Any:
    """``value`` (from a file or the command line) as the field's type. Only values of
    the field's kind are taken (a string for a string field, never a list made into
    one): converting anything else could expand a file's YAML aliases without end."""
    original = value
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            if not isinstance(value, str):
                raise TypeError(value)
            text = value.strip().lower()
            if text in ("true", "1", "yes", "on"):
                return True
            if text in ("false", "0", "no", "off"):
                return False
            raise ValueError(value)
        if typing.get_origin(kind) is list:
            if isinstance(value, str):
                value = [part for part in value.replace(" ", ",").split(",") if part]
            if not isinstance(value, (list, tuple)):
                raise TypeError(value)
            return [_whole_number(part) for part in value]
        if kind is int:
            return _whole_number(value)
        if kind is float:
            if not isinstance(value, (int, float, str)) or isinstance(value, bool):
                raise TypeError(value)
            return float(value)
        if not isinstance(value, str):
            raise TypeError(value)
        return value
    except (TypeError, ValueError, OverflowError):
        type_name = "a list of ints (such as 256,256)" if typing.get_origin(kind) is list else kind.__name__
        raise ConfigError(f"{origin}: {name} expects {type_name}, got {quoted(original)}") from None


def _whole_number(value: Any) -> int:
    """An int from an int, a whole float (``1e5``) or a string of digits."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(value)
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(value)
    if isinstance(value, str) and len(value) > 40:  # int() of a long digit string is quadratic
        raise ValueError(value)
    return int(value)


def config_from_mapping(values: Mapping[str, Any], origin: str, base: TrainConfig | None = None) -> TrainConfig:
    """A config from ``base`` (the defaults if ``None``) with ``values`` set, each converted
    to its field's type.

    Args:
        values: field names (``-`` or ``_``) and values.
        origin: where the values came from, for error messages (a file name).
        base: the config to start from.

    Raises:
        ConfigError: for an unknown field (listing the valid ones) or a value of the wrong type.

    Examples:
        >>> config_from_mapping({"total-frames": "2000", "hidden_sizes": "64,64"}, "cli").hidden_sizes
        [64, 64]
    """
    fields = _fields()
    config = dataclasses.replace(base) if base is not None else TrainConfig()
    for raw_name, value in values.items():
        name = raw_name.replace("-", "_") if isinstance(raw_name, str) else raw_name
        if name not in fields:
            raise ConfigError(
                f"{origin}: unknown config field {quoted(raw_name)}; valid fields: {', '.join(sorted(fields))}"
            )
        setattr(config, name, _convert(name, _field_type(fields[name]), value, origin))
    return config


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The fields a TOML (``.toml``) or YAML (``.yaml``/``.yml``) file sets.

    Raises:
        ConfigError: if the file is missing, of another kind, malformed, or not a table
            of fields.

    Examples:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.toml"
        >>> _ = path.write_text('algorithm = "td3"\\ntotal_frames = 3000\\n')
        >>> load_config_file(path)
        {'algorithm': 'td3', 'total_frames': 3000}
    """
    path = check_path(path, "config file")
    if not path.exists():
        raise ConfigError(f"config file {quoted(str(path))} does not exist")
    if not path.is_file():
        raise ConfigError(f"config file {quoted(str(path))} is not a plain file")
    if path.stat().st_size > MAX_CONFIG_FILE_BYTES:
        raise ConfigError(
            f"{path}: {path.stat().st_size} bytes; a config file is at most {MAX_CONFIG_FILE_BYTES} bytes"
        )
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            values = tomllib.loads(path.read_text())
        elif suffix in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError:
                raise ConfigError(f"{path}: YAML configs need pyyaml (pip install 'cadence[train]')") from None
            values = yaml.safe_load(path.read_text()) or {}
        else:
            raise ConfigError(f"{path}: unknown config file kind {quoted(suffix)}; valid kinds: .toml, .yaml, .yml")
    except ConfigError:
        raise
    except Exception as err:  # the parsers' own errors: one line, with the file
        raise ConfigError(f"{path}: cannot parse: {quoted(str(err).splitlines()[0])}") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: expected a table of config fields, got {type(values).__name__}")
    return values


def config_options() -> dict[str, str]:
    """The command-line option of each config field (``algorithm`` is a positional of
    ``cadence train``, not an option).

    Examples:
        >>> config_options()["total_frames"]
        '--total-frames'
    """
    return {name: "--" + name.replace("_", "-") for name in _fields() if name != "algorithm"}


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds one ``--option`` per config field (except ``algorithm``, a positional of
    ``cadence train``). Options left out parse as ``None`` (not set).

    Examples:
        >>> import argparse
        >>> parser = argparse.ArgumentParser()
        >>> add_config_arguments(parser)
        >>> args = parser.parse_args(["--total-frames", "100", "--no-video"])
        >>> overrides_from_args(args)
        {'total_frames': '100', 'video': False}
    """
    group = parser.add_argument_group("config fields (also settable in the --config file)")
    fields = _fields()
    for name, option in config_options().items():
        field = fields[name]
        kind = _field_type(field)
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()  # type: ignore[misc]
        help_text = f"{field.metadata['help']} (default: {default})"
        if kind is bool:
            group.add_argument(option, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        else:
            group.add_argument(option, dest=name, default=None, metavar=name.upper(), help=help_text)


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields given on the command line (those not ``None``), unconverted.

    Examples:
        >>> import argparse
        >>> overrides_from_args(argparse.Namespace(seed="3", env=None, command="train"))
        {'seed': '3'}
    """
    fields = _fields()
    return {name: value for name, value in vars(args).items() if name in fields and value is not None}


def build_config(algorithm: str, config_file: str | None, overrides: Mapping[str, Any]) -> TrainConfig:
    """Defaults, then ``config_file``, then ``overrides`` (the command line); validated.

    The algorithm given on the command line wins over one in the file.

    Examples:
        >>> build_config("sac", None, {"seed": "2"}).run_name()
        'sac-Pendulum-v1-seed2'
    """
    config = TrainConfig()
    if config_file:
        config = config_from_mapping(load_config_file(config_file), str(config_file), config)
    config = config_from_mapping(overrides, "command line", config)
    config.algorithm = algorithm
    return config.validate()

