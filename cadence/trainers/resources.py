"""What a run of ``cadence train`` will hold in memory and on disk, checked before its
folder is made.

A config may ask for more than any machine has (``hidden_sizes = [1e11]``,
``buffer_size = 2**40``): building it would fail somewhere deep inside torch after the
run folder and its key exist, or fill the disk. :func:`check_footprint` estimates what the
run will allocate from the config and the env's specs, and refuses one that cannot fit,
naming the field that asks for most and what it would cost.

The estimate counts what grows with the config:

* the networks (actor and critics, their targets), each trained parameter four times
  over (weights, gradient, Adam's two moments);
* one update: the sampled batch, and the activations its forward passes keep for the
  backward one;
* the collector's batch;
* on disk, the replay buffer (memory-mapped at its full capacity) and its copy in each
  kept checkpoint.

Examples:
    >>> from cadence.envs import GymEnv
    >>> from cadence.trainers.config import TrainConfig
    >>> footprint = run_footprint(TrainConfig(), GymEnv("Pendulum-v1"))
    >>> footprint.frame_bytes, footprint.parameters
    (38, 268804)
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

from cadence._utils import quoted
from cadence.envs.common import EnvBase
from cadence.trainers.checkpoint_files import KEPT_CHECKPOINTS
from cadence.trainers.config import ConfigError, TrainConfig

__all__ = ["RunFootprint", "check_footprint", "memory_limit", "run_footprint"]

# the replay buffer's working files, and a copy in each kept checkpoint
_BUFFER_COPIES = 1 + KEPT_CHECKPOINTS
# networks per algorithm: (actors trained, actor targets, critics trained, critic targets,
# actor outputs per action dim)
_NETWORKS = {"ddpg": (1, 1, 1, 1, 1), "td3": (1, 1, 2, 2, 1), "sac": (1, 0, 2, 2, 2)}
# a trained parameter is held as its weight, its gradient and Adam's two moments
_COPIES_PER_TRAINED_PARAMETER = 4
# float32 activations kept per hidden unit and sample for the backward pass (pre- and post-activation)
_ACTIVATION_BYTES = 2 * 4
# the config fields that size each part of the memory
_SIZED_BY = {"networks": ("hidden_sizes",), "update": ("batch_size", "hidden_sizes"), "collector": ("frames_per_batch",)}


@dataclasses.dataclass(frozen=True)
class RunFootprint:
    """What a run will hold.

    Attributes:
        frame_bytes: the bytes of one stored transition (from the env's specs).
        parameters: the parameters of every network, targets included.
        memory: bytes of memory of each part: ``"networks"`` (with their gradients and
            optimiser), ``"update"`` (one batch through the networks), ``"collector"``
            (its batch).
        disk: bytes of disk the replay buffer and its checkpoint copies take at its
            full capacity.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.trainers.config import TrainConfig
        >>> footprint = run_footprint(TrainConfig(buffer_size=1000), GymEnv("Pendulum-v1"))
        >>> footprint.disk
        114000
    """

    frame_bytes: int
    parameters: int
    memory: dict[str, int]
    disk: int

    @property
    def memory_total(self) -> int:
        """All the memory the estimate counts, in bytes."""
        return sum(self.memory.values())


def _mlp_parameters(sizes: list[int]) -> int:
    return sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))


def run_footprint(config: TrainConfig, env: EnvBase) -> RunFootprint:
    """Estimates what a run of ``config`` on ``env`` will hold (see the module's docstring).

    Args:
        config: a validated config.
        env: one copy of the run's env (its specs size the networks and the frames).

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.trainers.config import TrainConfig
        >>> run_footprint(TrainConfig(hidden_sizes=[10**11]), GymEnv("Pendulum-v1")).memory["networks"] > 10**12
        True
    """
    frame = env.fake_tensordict()
    per_env = max(1, frame.batch_size.numel())
    frame_bytes = sum(leaf.numel() * leaf.element_size() for leaf in frame.values(True, True)) // per_env
    observation = env.observation_spec["observation"].shape[-1] if "observation" in env.observation_spec.keys() else 1
    action = env.full_action_spec["action"].shape[-1] if "action" in env.full_action_spec.keys() else 1
    hidden = [int(size) for size in config.hidden_sizes]
    actors, actor_targets, critics, critic_targets, outputs = _NETWORKS.get(config.algorithm, _NETWORKS["td3"])
    actor = _mlp_parameters([observation, *hidden, outputs * action])
    critic = _mlp_parameters([observation + action, *hidden, 1])
    trained = actors * actor + critics * critic
    parameters = trained + actor_targets * actor + critic_targets * critic
    # an update runs the actor, the critics and their targets forward on the batch
    forward_networks = actors + actor_targets + critics + critic_targets
    update = config.batch_size * (frame_bytes + forward_networks * sum(hidden) * _ACTIVATION_BYTES)
    return RunFootprint(
        frame_bytes=frame_bytes,
        parameters=parameters,
        memory={
            "networks": 4 * (trained * _COPIES_PER_TRAINED_PARAMETER + parameters - trained),
            "update": update,
            "collector": 2 * config.frames_per_batch * frame_bytes,  # the batch and its copy in the buffer
        },
        disk=_BUFFER_COPIES * config.buffer_size * frame_bytes,
    )


def memory_limit() -> int:
    """The machine's physical memory in bytes (what a run may at most hold).

    Examples:
        >>> memory_limit() > 0
        True
    """
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _free_disk(folder: Path) -> int:
    existing = folder.resolve()
    while not existing.exists():  # the runs folder may not exist yet: its nearest ancestor's disk
        existing = existing.parent
    return shutil.disk_usage(existing).free


def _size(count: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if count < 1000:
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1e} EB"


def check_footprint(config: TrainConfig, env: EnvBase, runs_dir: Path | None) -> RunFootprint:
    """Raises a one-line ``ConfigError`` if a run of ``config`` on ``env`` needs more
    memory than the machine has, or more disk than is free under ``runs_dir``.

    Args:
        config: a validated config.
        env: one copy of the run's env.
        runs_dir: where the run folder goes; ``None`` to check only the memory of the
            networks (what ``cadence eval`` builds: no updates, no replay buffer).

    Returns:
        The estimate.

    Examples:
        >>> import tempfile
        >>> from cadence.envs import GymEnv
        >>> from cadence.trainers.config import TrainConfig
        >>> check_footprint(TrainConfig(buffer_size=10**12), GymEnv("Pendulum-v1"), Path(tempfile.mkdtemp()))
        Traceback (most recent call last):
        ...
        cadence.trainers.config.ConfigError: buffer_size=1000000000000 needs 114.0 TB of disk (the replay buffer ...
    """
    footprint = run_footprint(config, env)
    memory = footprint.memory if runs_dir is not None else {"networks": footprint.memory["networks"]}
    limit = memory_limit()
    if sum(memory.values()) > limit:
        part = max(memory, key=memory.__getitem__)
        fields = _SIZED_BY[part]
        values = ", ".join(f"{field}={quoted(getattr(config, field))}" for field in fields)
        raise ConfigError(
            f"{values} needs about {_size(memory[part])} of memory for the {part} "
            f"({_size(sum(memory.values()))} in all), and this machine has {_size(limit)}: "
            f"lower {' or '.join(fields)}"
        )
    if runs_dir is None:
        return footprint
    free = _free_disk(runs_dir)
    if footprint.disk > free:
        raise ConfigError(
            f"buffer_size={config.buffer_size} needs {_size(footprint.disk)} of disk (the replay buffer at "
            f"{footprint.frame_bytes} bytes a frame, and its copy in each kept checkpoint), and {_size(free)} are "
            f"free under {runs_dir}: lower buffer_size"
        )
    return footprint
