"""Checkpoints of training runs: networks, optimizers, replay buffers, collectors,
exploration, target updaters, generators, counters and configs, saved together as one
folder or one file and restored into the live objects, whole or in part.

Reading a checkpoint runs no code: states are read with ``torch.load(weights_only=True)``,
values and the manifest are JSON, replay buffers use their own data-only format.
Writing is crash-safe: a new checkpoint replaces the previous one atomically.

Examples:
    >>> import tempfile, torch
    >>> from cadence.checkpoint import Checkpoint, GlobalRNGState
    >>> net, state = torch.nn.Linear(4, 2), {"collected_frames": 0}
    >>> checkpoint = Checkpoint(format="archive", policy=net, trainer_state=state, rng=GlobalRNGState())
    >>> state["collected_frames"] = 1000
    >>> path = checkpoint.save(tempfile.mkdtemp() + "/dqn.ckpt")
    >>> state["collected_frames"] = 0
    >>> sorted(checkpoint.load(path).loaded), state
    (['policy', 'rng', 'trainer_state'], {'collected_frames': 1000})
"""

from cadence.checkpoint.checkpoint import Checkpoint, CheckpointFormat, CheckpointStrictness
from cadence.checkpoint.report import CheckpointError, CheckpointLoadResult
from cadence.checkpoint.rng import GlobalRNGState

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "CheckpointFormat",
    "CheckpointLoadResult",
    "CheckpointStrictness",
    "GlobalRNGState",
]
