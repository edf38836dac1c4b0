"""RLlib's sample collection (the seed ``rllib-sample-collection.txt``), in Cadence.

So far: the pieces a policy written for RLlib touches: :class:`SampleBatch` (RLlib's
columns, sharing memory with a TensorDict both ways), :class:`MultiAgentBatch`,
:class:`ViewRequirement` (trajectory views: shifts, ranges, padding),
:func:`chop_into_sequences` (recurrent sequences, RLlib's semantics), :class:`Policy` (RLlib's
default views, and their pruning by a dummy batch through inference, postprocessing and
the loss) and :class:`ModelV2` (a torch module with its own ``view_requirements``);
sampling: :class:`RolloutWorker`, :class:`SyncSampler` / :class:`AsyncSampler`, :class:`SampleCollector` /
:class:`SimpleListCollector` (one list per collected column, observations stored once)
and :class:`DefaultCallbacks` (gymnasium envs, Cadence envs, and :class:`MultiAgentEnv`
with several policies, checked by :class:`MultiAgentEnvChecker`); :class:`WorkerSet` and
:func:`synchronous_parallel_sample` (remote workers as Ray actors, restarted when they fail); and
:mod:`cadence.interop.rllib.algorithms.ppo` (``DEFAULT_CONFIG``, ``PPOTorchPolicy``). Native
Cadence batches get the same views: :func:`add_views` (a collector's TensorDicts,
:class:`TrajectoryViews` as its ``postproc``) and :func:`add_slice_views` (replay-buffer slices).

Examples:
    >>> import numpy as np
    >>> from cadence.interop.rllib import SampleBatch, ViewRequirement
    >>> batch = SampleBatch({SampleBatch.OBS: np.zeros((3, 2), np.float32), SampleBatch.REWARDS: np.ones(3)})
    >>> batch.count, batch.to_tensordict().batch_size
    (3, torch.Size([3]))
    >>> ViewRequirement(SampleBatch.REWARDS, shift=-1).shift_arr.tolist()
    [-1]
"""

from cadence.interop.rllib.callbacks import DefaultCallbacks, override
from cadence.interop.rllib.collectors import Episode, SampleCollector, SimpleListCollector
from cadence.interop.rllib.models import FullyConnectedNetwork, ModelV2
from cadence.interop.rllib.multi_agent_batch import MultiAgentBatch
from cadence.interop.rllib.multi_agent_env import MultiAgentEnv, MultiAgentEnvChecker
from cadence.interop.rllib.policy import Policy, RandomPolicy
from cadence.interop.rllib.rnn_sequencing import chop_into_sequences
from cadence.interop.rllib.sample_batch import SampleBatch, concat_samples
from cadence.interop.rllib.rollout_worker import RolloutWorker
from cadence.interop.rllib.sampler import AsyncSampler, SyncSampler
from cadence.interop.rllib.view_requirement import ViewRequirement
from cadence.interop.rllib.views import SliceViews, TrajectoryViews, ViewCarry, add_slice_views, add_views
from cadence.interop.rllib.worker_set import WorkerSet, synchronous_parallel_sample

__all__ = [
    "AsyncSampler",
    "DefaultCallbacks",
    "Episode",
    "FullyConnectedNetwork",
    "ModelV2",
    "MultiAgentBatch",
    "MultiAgentEnv",
    "MultiAgentEnvChecker",
    "Policy",
    "RandomPolicy",
    "RolloutWorker",
    "SampleBatch",
    "SampleCollector",
    "SimpleListCollector",
    "SliceViews",
    "SyncSampler",
    "TrajectoryViews",
    "ViewCarry",
    "ViewRequirement",
    "WorkerSet",
    "add_slice_views",
    "add_views",
    "chop_into_sequences",
    "concat_samples",
    "override",
    "synchronous_parallel_sample",
]
