"""GlobalRNGState: Python's, numpy's and torch's global generators saved as data and
restored; a state that does not fit changes nothing."""

from __future__ import annotations

import io
import random
from typing import Any

import numpy as np
import pytest
import torch

from cadence.checkpoint import GlobalRNGState


def _draws() -> tuple[list[float], list[float], list[float], float, float]:
    return (
        [random.random() for _ in range(3)],
        np.random.rand(3).tolist(),
        torch.rand(3).tolist(),
        random.gauss(0.0, 1.0),
        float(np.random.standard_normal()),
    )


def test_the_three_generators_draw_again_what_they_drew() -> None:
    rng = GlobalRNGState()
    random.gauss(0.0, 1.0)  # leaves a cached gaussian in Python's and numpy's states
    np.random.standard_normal()
    state = rng.state_dict()
    assert state["python"]["gauss_next"] is not None and state["numpy"]["has_gauss"] == 1
    first = _draws()
    rng.load_state_dict(state)
    assert _draws() == first


def test_the_state_is_data_that_weights_only_reads_without_an_allow_list() -> None:
    state = GlobalRNGState().state_dict()
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    first = _draws()
    GlobalRNGState().load_state_dict(loaded)
    assert _draws() == first


def _broken(change: str) -> Any:
    state = GlobalRNGState().state_dict()
    if change == "missing numpy":
        del state["numpy"]
    elif change == "numpy keys short":
        state["numpy"]["keys"] = state["numpy"]["keys"][:10]
    elif change == "numpy keys negative":
        state["numpy"]["keys"][0] = -1
    elif change == "numpy kind":
        state["numpy"]["kind"] = "PCG64"
    elif change == "python state as floats":
        state["python"]["state"] = state["python"]["state"].double()
    elif change == "torch state short":
        state["torch_cpu"] = state["torch_cpu"][:16]
    elif change == "unknown entry":
        state["jax"] = 1
    elif change == "not a dict":
        state = [1, 2]
    return state


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("missing numpy", r"expected the entries \['numpy', 'python', 'torch_cpu'\] \(and 'torch_cuda'\), got \['python', 'torch_cpu'\]"),
        ("numpy keys short", r"'numpy' 'keys' should be an int64 tensor of shape \[624\], got torch.int64 of shape \[10\]"),
        ("numpy keys negative", r"'numpy' 'keys' holds values outside \[0, 4294967295\]"),
        ("numpy kind", r"'numpy' 'kind' should be 'MT19937', got 'PCG64'"),
        ("python state as floats", r"'python' 'state' should be an int64 tensor of shape \[625\], got torch.float64"),
        ("torch state short", r"'torch_cpu' should be a uint8 tensor of shape \[5056\], got torch.uint8 of shape \[16\]"),
        ("unknown entry", r"got \['jax', 'numpy', 'python', 'torch_cpu'\]"),
        ("not a dict", r"got list"),
    ],
)
def test_a_state_that_does_not_fit_is_named_and_changes_nothing(change: str, expected: str) -> None:
    state = _broken(change)
    keep = GlobalRNGState().state_dict()
    first = _draws()
    GlobalRNGState().load_state_dict(keep)
    with pytest.raises(ValueError, match=expected):
        GlobalRNGState().load_state_dict(state)
    assert _draws() == first  # no generator was touched


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a process without CUDA")
def test_cuda_states_where_cuda_is_missing_are_named() -> None:
    state = GlobalRNGState().state_dict()
    assert "torch_cuda" not in state  # CUDA is not initialised: nothing to save
    state["torch_cuda"] = [torch.zeros(16, dtype=torch.uint8)]
    with pytest.raises(ValueError, match=r"holds 1 CUDA generator state\(s\), but CUDA is not available here"):
        GlobalRNGState().load_state_dict(state)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_generators_round_trip() -> None:
    torch.zeros(1, device="cuda")  # initialises CUDA
    rng = GlobalRNGState()
    state = rng.state_dict()
    assert len(state["torch_cuda"]) == torch.cuda.device_count()
    first = torch.rand(3, device="cuda").tolist()
    rng.load_state_dict(state)
    assert torch.rand(3, device="cuda").tolist() == first
