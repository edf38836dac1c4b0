"""The public names and the older (TorchRL tutorial) aliases (``specs/__init__.py``)."""

from __future__ import annotations

import pytest
import torch

import cadence.data as data
from cadence.data import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    NonTensor,
    OneHot,
    TensorSpec,
    Unbounded,
)


# ----------------------------------------------------------------- public names
ALL_NAMES = [
    "TensorSpec",
    "Composite",
    "Bounded",
    "Unbounded",
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
]


@pytest.mark.parametrize("name", ALL_NAMES)
def test_public_names_exported(name: str) -> None:
    assert hasattr(data, name)
    assert name in data.__all__


def test_old_aliases_are_the_new_classes() -> None:
    assert data.CompositeSpec is Composite
    assert data.BoundedTensorSpec is Bounded
    assert data.DiscreteTensorSpec is Categorical
    assert data.OneHotDiscreteTensorSpec is OneHot
    assert data.BinaryDiscreteTensorSpec is Binary
    assert data.MultiDiscreteTensorSpec is MultiCategorical
    assert data.MultiOneHotDiscreteTensorSpec is MultiOneHot
    assert data.NonTensorSpec is NonTensor
    cont = data.UnboundedContinuousTensorSpec(shape=(2,))
    disc = data.UnboundedDiscreteTensorSpec(shape=(2,))
    assert type(cont) is Unbounded and cont.dtype == torch.float32
    assert type(disc) is Unbounded and disc.dtype == torch.int64
    assert cont == Unbounded(shape=(2,))
    assert isinstance(cont, TensorSpec)


def test_composite_old_alias_tutorial_usage() -> None:
    action_spec = Bounded(-1.0, 1.0, shape=(6,))
    spec = data.CompositeSpec(action=action_spec)
    assert spec["action"] is action_spec
    assert spec.clone() == spec
    assert data.CompositeSpec(action=action_spec) == Composite(action=action_spec)
