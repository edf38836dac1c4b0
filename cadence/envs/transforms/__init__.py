"""Transforms: the framework (``Transform``, ``Compose``, ``TransformedEnv``) and the
catalogue, one module per family.

Examples:
    >>> from cadence.envs import GymEnv
    >>> from cadence.envs.transforms import RewardSum, TransformedEnv
    >>> TransformedEnv(GymEnv("CartPole-v1"), RewardSum()).observation_spec["episode_reward"].shape
    torch.Size([1])
"""

from cadence.envs.transforms.actions import ActionDiscretizer, ActionMask, DiscreteActionProjection
from cadence.envs.transforms.base import Compose, Transform, TransformedEnv
from cadence.envs.transforms.batch_size import BatchSizeTransform
from cadence.envs.transforms.burn_in import BurnInTransform
from cadence.envs.transforms.cat_frames import CatFrames
from cadence.envs.transforms.dtype import DoubleToFloat, DTypeCastTransform
from cadence.envs.transforms.env_shape import AutoResetEnv, AutoResetTransform, DeviceCastTransform, RemoveEmptySpecs
from cadence.envs.transforms.episode import (
    EndOfLifeTransform,
    FiniteTensorDictCheck,
    FrameSkipTransform,
    InitTracker,
    NoopResetEnv,
    StepCounter,
    TimeMaxPool,
    TrajCounter,
)
from cadence.envs.transforms.kl_reward import KLRewardTransform
from cadence.envs.transforms.image import CenterCrop, Crop, GrayScale, Resize, ToTensorImage
from cadence.envs.transforms.keys import (
    CatTensors,
    ExcludeTransform,
    FlattenObservation,
    PermuteTransform,
    PinMemoryTransform,
    RenameTransform,
    SelectTransform,
    SqueezeTransform,
    TensorDictPrimer,
    UnsqueezeTransform,
    gSDENoise,
)
from cadence.envs.transforms.observation import ClipTransform, ObservationNorm, ObservationTransform, VecNorm
from cadence.envs.transforms.r3m import R3MTransform
from cadence.envs.transforms.reward import RewardScaling, RewardSum
from cadence.envs.transforms.reward_extra import (
    BinarizeReward,
    Reward2GoTransform,
    RewardClipping,
    SignTransform,
    TargetReturn,
)
from cadence.envs.transforms.trajectory import RandomCropTensorDict
from cadence.envs.transforms.vc1 import VC1Transform
from cadence.envs.transforms.vec_gym import VecGymEnvTransform
from cadence.envs.transforms.vip import VIPRewardTransform, VIPTransform

__all__ = [
    "ActionDiscretizer",
    "ActionMask",
    "AutoResetEnv",
    "AutoResetTransform",
    "BatchSizeTransform",
    "BinarizeReward",
    "BurnInTransform",
    "CatFrames",
    "CatTensors",
    "CenterCrop",
    "ClipTransform",
    "Compose",
    "Crop",
    "DeviceCastTransform",
    "DiscreteActionProjection",
    "DoubleToFloat",
    "DTypeCastTransform",
    "EndOfLifeTransform",
    "ExcludeTransform",
    "FiniteTensorDictCheck",
    "FlattenObservation",
    "FrameSkipTransform",
    "GrayScale",
    "gSDENoise",
    "InitTracker",
    "KLRewardTransform",
    "NoopResetEnv",
    "ObservationNorm",
    "ObservationTransform",
    "PermuteTransform",
    "PinMemoryTransform",
    "R3MTransform",
    "RandomCropTensorDict",
    "RemoveEmptySpecs",
    "RenameTransform",
    "Resize",
    "Reward2GoTransform",
    "RewardClipping",
    "RewardScaling",
    "RewardSum",
    "SelectTransform",
    "SignTransform",
    "SqueezeTransform",
    "StepCounter",
    "TargetReturn",
    "TensorDictPrimer",
    "TimeMaxPool",
    "ToTensorImage",
    "TrajCounter",
    "Transform",
    "TransformedEnv",
    "UnsqueezeTransform",
    "VC1Transform",
    "VecGymEnvTransform",
    "VecNorm",
    "VIPRewardTransform",
    "VIPTransform",
]
