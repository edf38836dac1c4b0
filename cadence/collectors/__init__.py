"""Data collectors: run a policy in an env and deliver batches of frames.

``SyncDataCollector`` (alias ``Collector``) collects in this process;
``MultiSyncDataCollector`` and ``MultiaSyncDataCollector`` (aliases
``MultiSyncCollector``, ``MultiAsyncCollector``) run one collector per worker process
and deliver their batches together, or each as soon as it is ready; ``AsyncCollector``
(formerly ``aSyncDataCollector``) is one such worker.
``split_trajectories`` (in ``cadence.collectors.utils``) lays a batch out one
trajectory per row.

Examples:
    >>> from cadence.collectors import SyncDataCollector
    >>> from cadence.envs import GymEnv, SerialEnv
    >>> collector = SyncDataCollector(SerialEnv(4, lambda: GymEnv("Pendulum-v1")), frames_per_batch=40, total_frames=80)
    >>> [tuple(batch.batch_size) for batch in collector]
    [(4, 10), (4, 10)]
    >>> collector.shutdown()
"""

from cadence.collectors.multi import (
    AsyncCollector,
    MultiaSyncDataCollector,
    MultiAsyncCollector,
    MultiSyncCollector,
    MultiSyncDataCollector,
    aSyncDataCollector,
)
from cadence.collectors.sync import Collector, DataCollectorBase, SyncDataCollector
from cadence.collectors.utils import split_trajectories

__all__ = [
    "AsyncCollector",
    "Collector",
    "DataCollectorBase",
    "MultiAsyncCollector",
    "MultiSyncCollector",
    "MultiSyncDataCollector",
    "MultiaSyncDataCollector",
    "SyncDataCollector",
    "aSyncDataCollector",
    "split_trajectories",
]
