"""What a process needs to know of an env without building it: :class:`EnvMetaData`.

Batched and parallel envs read it from their first factory to lay out their specs and
shared buffers before any worker exists.

Examples:
    >>> from cadence.envs.custom import PendulumEnv
    >>> EnvMetaData.metadata_from_env(PendulumEnv()).expand(3).batch_size
    torch.Size([3])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from tensordict import TensorDictBase

from cadence.data import Composite

if TYPE_CHECKING:  # pragma: no cover - for type hints only
    from cadence.envs.common import EnvBase

__all__ = ["EnvMetaData"]


class EnvMetaData:
    """What a process needs to know of an env without building it: specs, a zeroed
    step, batch size, device and a description. It pickles.

    Args:
        tensordict: a zeroed step of the env (``env.fake_tensordict()``).
        specs: a Composite holding ``"input_spec"`` and ``"output_spec"``.
        batch_size: the env's batch size.
        env_str: a description of the env.
        device: the env's device.
        batch_locked: whether the env takes only inputs of its own batch size.

    Examples:
        >>> import pickle
        >>> from cadence.envs.custom import PendulumEnv
        >>> meta = EnvMetaData.metadata_from_env(PendulumEnv())
        >>> pickle.loads(pickle.dumps(meta)).batch_size
        torch.Size([])
    """

    def __init__(
        self,
        *,
        tensordict: TensorDictBase,
        specs: Composite,
        batch_size: torch.Size,
        env_str: str,
        device: torch.device | None,
        batch_locked: bool = True,
    ) -> None:
        self.tensordict = tensordict
        self.specs = specs
        self.batch_size = torch.Size(batch_size)
        self.env_str = env_str
        self.device = device
        self.batch_locked = batch_locked

    @classmethod
    def metadata_from_env(cls, env: EnvBase) -> EnvMetaData:
        """Reads the metadata of ``env``."""
        specs = Composite(
            input_spec=env.input_spec.clone(), output_spec=env.output_spec.clone(), shape=env.batch_size
        )
        return cls(
            tensordict=env.fake_tensordict(),
            specs=specs,
            batch_size=env.batch_size,
            env_str=repr(env),
            device=env.device,
            batch_locked=env.batch_locked,
        )

    def expand(self, *size: int) -> EnvMetaData:
        """The metadata of a batch of such envs, of batch size ``size``."""
        batch_size = torch.Size(size[0] if len(size) == 1 and not isinstance(size[0], int) else size)
        return EnvMetaData(
            tensordict=self.tensordict.expand(batch_size).clone(),
            specs=self.specs.expand(batch_size),
            batch_size=batch_size,
            env_str=self.env_str,
            device=self.device,
            batch_locked=self.batch_locked,
        )

    def to(self, device: torch.device | str) -> EnvMetaData:
        """The same metadata on ``device``."""
        return EnvMetaData(
            tensordict=self.tensordict.to(device),
            specs=self.specs.to(device),
            batch_size=self.batch_size,
            env_str=self.env_str,
            device=torch.device(device),
            batch_locked=self.batch_locked,
        )

    def __repr__(self) -> str:
        return f"EnvMetaData(env_str={self.env_str!r}, batch_size={self.batch_size}, device={self.device})"
