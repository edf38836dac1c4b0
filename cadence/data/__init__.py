"""Data: specs and replay buffers."""

from .specs import (
    Binary,
    BinaryDiscreteTensorSpec,
    Bounded,
    BoundedTensorSpec,
    Categorical,
    Composite,
    CompositeSpec,
    DiscreteTensorSpec,
    MultiCategorical,
    MultiDiscreteTensorSpec,
    MultiOneHot,
    MultiOneHotDiscreteTensorSpec,
    NestedKey,
    NonTensor,
    NonTensorSpec,
    OneHot,
    OneHotDiscreteTensorSpec,
    TensorSpec,
    Unbounded,
    UnboundedContinuous,
    UnboundedContinuousTensorSpec,
    UnboundedDiscrete,
    UnboundedDiscreteTensorSpec,
    stack_specs,
)

from .replay_buffers import *  # noqa: E402,F403 - buffers, storages, samplers, writers
from .replay_buffers import __all__ as _replay_buffers_all

__all__ = [
    "TensorSpec",
    "Composite",
    "Bounded",
    "Unbounded",
    "UnboundedContinuous",
    "UnboundedDiscrete",
    "Categorical",
    "OneHot",
    "Binary",
    "MultiCategorical",
    "MultiOneHot",
    "NonTensor",
    "CompositeSpec",
    "BoundedTensorSpec",
    "UnboundedContinuousTensorSpec",
    "UnboundedDiscreteTensorSpec",
    "DiscreteTensorSpec",
    "OneHotDiscreteTensorSpec",
    "BinaryDiscreteTensorSpec",
    "MultiDiscreteTensorSpec",
    "MultiOneHotDiscreteTensorSpec",
    "NonTensorSpec",
    "NestedKey",
    "stack_specs",
]
__all__ += _replay_buffers_all
