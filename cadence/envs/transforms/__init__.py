"""Transforms: the framework (``Transform``, ``Compose``, ``TransformedEnv``) and the
catalogue, one module per family.

Examples:
    >>> from cadence.envs import GymEnv
    >>> from cadence.envs.transforms import RewardSum, TransformedEnv
    >>> TransformedEnv(GymEnv("CartPole-v1"), RewardSum()).observation_spec["episode_reward"].shape
    torch.Size([1])
"""

from cadence.envs.transforms.base import Compose, Transform, TransformedEnv
from cadence.envs.transforms.dtype import DoubleToFloat, DTypeCastTransform
from cadence.envs.transforms.reward import RewardScaling, RewardSum

__all__ = [
    "Compose",
    "DTypeCastTransform",
    "DoubleToFloat",
    "RewardScaling",
    "RewardSum",
    "Transform",
    "TransformedEnv",
]
