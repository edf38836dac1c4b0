"""Objectives: the loss modules, their value estimators and target-parameter updaters.

Examples:
    >>> from cadence.objectives import LossModule, SoftUpdate, ValueEstimators
    >>> ValueEstimators.TD0.name
    'TD0'
"""

from cadence.objectives.common import LossModule
from cadence.objectives.ddpg import DDPGLoss
from cadence.objectives.dqn import DQNLoss
from cadence.objectives.optimizers import group_optimizers
from cadence.objectives.ppo import ClipPPOLoss, KLPENPPOLoss, PPOLoss
from cadence.objectives.sac import SACLoss
from cadence.objectives.td3 import TD3Loss
from cadence.objectives.utils import (
    HardUpdate,
    SoftUpdate,
    TargetNetUpdater,
    ValueEstimators,
    default_value_kwargs,
    distance_loss,
    hold_out_net,
    hold_out_params,
)

__all__ = [
    "ClipPPOLoss",
    "DDPGLoss",
    "DQNLoss",
    "HardUpdate",
    "KLPENPPOLoss",
    "LossModule",
    "PPOLoss",
    "SACLoss",
    "TD3Loss",
    "SoftUpdate",
    "TargetNetUpdater",
    "ValueEstimators",
    "default_value_kwargs",
    "distance_loss",
    "group_optimizers",
    "hold_out_net",
    "hold_out_params",
]
