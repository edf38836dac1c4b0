"""Modules: networks, tensordict policies and value functions, action
distributions and exploration wrappers.

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
from cadence.modules.models import MLP, ConvNet, DdpgMlpActor, DdpgMlpQNet, SquashDims

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
]
