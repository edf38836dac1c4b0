"""Modules: networks, tensordict policies and value functions, action
distributions, exploration wrappers and world models.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.modules import MLP, Actor
    >>> actor = Actor(MLP(out_features=1, num_cells=[8]))
    >>> actor(TensorDict(observation=torch.zeros(3)))["action"].shape
    torch.Size([1])
"""

from cadence.modules.actors import (
    Actor,
    ActorCriticWrapper,
    ActorValueOperator,
    NormalParamExtractor,
    ProbabilisticActor,
    QValueActor,
    QValueModule,
    TanhModule,
    ValueOperator,
)
from cadence.modules.distributions import Delta, MaskedCategorical, OneHotCategorical, TanhDelta, TanhNormal
from cadence.modules.exploration import AdditiveGaussianModule, EGreedyModule, OrnsteinUhlenbeckProcessModule
from cadence.modules.model_based import (
    DreamerActor,
    ObsDecoder,
    ObsEncoder,
    RSSMPosterior,
    RSSMPrior,
    RSSMRollout,
    WorldModelWrapper,
)
from cadence.modules.models import MLP, ConvNet, DdpgMlpActor, DdpgMlpQNet, SquashDims
from cadence.modules.resnet import ResNet, resnet18, resnet34, resnet50
from cadence.modules.vit import VisionTransformer, vit_base_patch16, vit_large_patch16

__all__ = [
    "MLP",
    "ConvNet",
    "SquashDims",
    "DdpgMlpActor",
    "DdpgMlpQNet",
    "Actor",
    "ValueOperator",
    "ProbabilisticActor",
    "ActorCriticWrapper",
    "ActorValueOperator",
    "QValueModule",
    "QValueActor",
    "TanhModule",
    "NormalParamExtractor",
    "Delta",
    "TanhDelta",
    "TanhNormal",
    "OneHotCategorical",
    "MaskedCategorical",
    "OrnsteinUhlenbeckProcessModule",
    "AdditiveGaussianModule",
    "EGreedyModule",
    "WorldModelWrapper",
    "RSSMPrior",
    "RSSMPosterior",
    "RSSMRollout",
    "ObsEncoder",
    "ObsDecoder",
    "DreamerActor",
    "ResNet",
    "resnet18",
    "resnet34",
    "resnet50",
    "VisionTransformer",
    "vit_base_patch16",
    "vit_large_patch16",
]
