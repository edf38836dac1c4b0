"""Replay buffers: storages, samplers, writers and the buffers that compose them.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.data.replay_buffers import LazyMemmapStorage, RandomSampler, TensorDictReplayBuffer
    >>> buffer = TensorDictReplayBuffer(storage=LazyMemmapStorage(1000), sampler=RandomSampler(), batch_size=8)
    >>> _ = buffer.extend(TensorDict({"obs": torch.randn(100, 3)}, [100]))
    >>> buffer.sample().batch_size
    torch.Size([8])
"""

from cadence.data.replay_buffers.buffers import (
    PrioritizedReplayBuffer,
    ReplayBuffer,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)
from cadence.data.replay_buffers.checkpoint import CheckpointError
from cadence.data.replay_buffers.ray_buffer import RayReplayBuffer
from cadence.data.replay_buffers.sampler_base import Sampler
from cadence.data.replay_buffers.samplers import PrioritizedSampler, RandomSampler, SamplerWithoutReplacement
from cadence.data.replay_buffers.slice_samplers import (
    PrioritizedSliceSampler,
    SliceSampler,
    SliceSamplerWithoutReplacement,
)
from cadence.data.replay_buffers.storages import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    Storage,
    TensorStorage,
)
from cadence.data.replay_buffers.writers import (
    RoundRobinWriter,
    TensorDictMaxValueWriter,
    TensorDictRoundRobinWriter,
    Writer,
)

__all__ = [
    "CheckpointError",
    "LazyMemmapStorage",
    "LazyTensorStorage",
    "ListStorage",
    "PrioritizedReplayBuffer",
    "PrioritizedSampler",
    "PrioritizedSliceSampler",
    "RandomSampler",
    "RayReplayBuffer",
    "ReplayBuffer",
    "RoundRobinWriter",
    "Sampler",
    "SamplerWithoutReplacement",
    "SliceSampler",
    "SliceSamplerWithoutReplacement",
    "Storage",
    "TensorDictMaxValueWriter",
    "TensorDictPrioritizedReplayBuffer",
    "TensorDictReplayBuffer",
    "TensorDictRoundRobinWriter",
    "TensorStorage",
    "Writer",
]
