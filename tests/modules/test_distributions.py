"""Tests of cadence.modules.distributions, checked against hand computations."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
from tensordict import TensorDict
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    TensorDictModule,
    TensorDictSequential,
    set_interaction_type,
)

from cadence.modules import Delta, MaskedCategorical, OneHotCategorical, TanhDelta, TanhNormal


def _normal_logpdf(x: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    return -((x - mu) ** 2) / (2 * sigma**2) - torch.log(sigma) - 0.5 * math.log(2 * math.pi)


# ----------------------------------------------------------------------------- Delta / TanhDelta
def test_delta_samples_are_the_point_and_keep_gradients() -> None:
    param = torch.tensor([[0.3, -0.2]], requires_grad=True)
    dist = Delta(param)
    assert dist.batch_shape == (1,) and dist.event_shape == (2,)
    sample = dist.rsample((4,))
    assert sample.shape == (4, 1, 2)
    sample.sum().backward()
    assert param.grad.tolist() == [[4.0, 4.0]]
    assert not dist.sample().requires_grad


def test_delta_log_prob_zero_on_the_point_minus_inf_elsewhere() -> None:
    dist = Delta(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    lp = dist.log_prob(torch.tensor([[1.0, 2.0], [3.0, 4.5]]))
    assert lp.tolist() == [0.0, -math.inf]
    for attr in ("mode", "mean", "deterministic_sample"):
        assert torch.equal(getattr(dist, attr), dist.param)
    with pytest.raises(ValueError, match="must equal param's shape"):
        Delta(torch.zeros(2, 3), batch_shape=(3,), event_shape=(2,))


def test_tanh_delta_squashes_into_bounds() -> None:
    param = torch.tensor([-100.0, -0.5, 0.0, 0.5, 100.0])
    dist = TanhDelta(param, low=-2.0, high=4.0, event_dims=1)
    expected = 1.0 + 3.0 * torch.tanh(param)
    torch.testing.assert_close(dist.mode, expected)
    torch.testing.assert_close(dist.rsample(), expected)
    assert dist.log_prob(expected).item() == 0.0
    assert dist.support.check(expected).all()
    with pytest.raises(ValueError, match="low < high"):
        TanhDelta(param, low=1.0, high=1.0)


def test_tanh_delta_tensor_bounds_and_event_dims() -> None:
    param = torch.zeros(3, 2)
    dist = TanhDelta(param, low=torch.tensor([0.0, -4.0]), high=torch.tensor([2.0, 0.0]), event_dims=1)
    assert dist.batch_shape == (3,)
    assert dist.mode[0].tolist() == [1.0, -2.0]
    assert TanhDelta(param, event_dims=2).batch_shape == ()


# ----------------------------------------------------------------------------- TanhNormal
def test_tanh_normal_log_prob_matches_hand_computed_jacobian() -> None:
    torch.manual_seed(0)
    loc, scale = torch.randn(4, 3), torch.rand(4, 3) + 0.2
    low, high = -2.0, 3.0
    dist = TanhNormal(loc, scale, low=low, high=high)
    x = torch.randn(4, 3).clamp(-3, 3)  # pre-tanh values
    value = low + (high - low) * (torch.tanh(x) + 1) / 2
    # p_Y(y) = p_X(x) / |dy/dx| with dy/dx = (high - low) / 2 * (1 - tanh(x)^2)
    expected = (_normal_logpdf(x, loc, scale) - torch.log((high - low) / 2 * (1 - torch.tanh(x) ** 2))).sum(-1)
    torch.testing.assert_close(dist.log_prob(value), expected, rtol=1e-4, atol=1e-4)


def test_tanh_normal_density_integrates_to_one() -> None:
    dist = TanhNormal(torch.tensor([0.4]), torch.tensor([0.7]), low=-1.0, high=2.0)
    grid = torch.linspace(-1.0, 2.0, 200001)[1:-1].unsqueeze(-1)
    density = dist.log_prob(grid).exp()
    integral = torch.trapezoid(density, grid.squeeze(-1))
    assert abs(float(integral) - 1.0) < 1e-3


def test_tanh_normal_rsample_is_differentiable_and_in_bounds() -> None:
    loc = torch.zeros(1000, 2, requires_grad=True)
    scale = torch.full((1000, 2), 3.0, requires_grad=True)
    dist = TanhNormal(loc, scale, low=-1.0, high=1.0)
    sample = dist.rsample()
    assert bool((sample.abs() < 1).all())  # safe_tanh keeps samples strictly inside
    assert bool(torch.isfinite(dist.log_prob(sample)).all())
    sample.sum().backward()
    assert loc.grad is not None and scale.grad is not None
    assert not dist.sample().requires_grad


def test_tanh_normal_event_dims_and_scale_forms() -> None:
    loc = torch.zeros(2, 3, 4)
    assert TanhNormal(loc, torch.ones_like(loc)).batch_shape == (2, 3)
    dist = TanhNormal(loc, 0.5, event_dims=2)
    assert dist.batch_shape == (2,) and dist.event_shape == (3, 4)
    assert dist.log_prob(torch.zeros(2, 3, 4)).shape == (2,)
    assert TanhNormal(loc, torch.ones_like).scale.shape == loc.shape
    assert TanhNormal(loc, 1.0, event_dims=0).log_prob(torch.zeros(2, 3, 4)).shape == (2, 3, 4)
    with pytest.raises(ValueError, match="scale > 0"):
        TanhNormal(loc, 0.0)


def test_tanh_normal_tanh_loc_and_deterministic_sample() -> None:
    loc = torch.tensor([[10.0, -0.3]])
    dist = TanhNormal(loc, torch.ones(1, 2), upscale=5.0, tanh_loc=True, low=0.0, high=2.0)
    scaled = 5.0 * torch.tanh(loc / 5.0)
    torch.testing.assert_close(dist.loc, scaled)
    torch.testing.assert_close(dist.deterministic_sample, 1.0 + torch.tanh(scaled))
    with pytest.raises(NotImplementedError, match="closed-form mean"):
        _ = dist.mean


def test_tanh_normal_mode_is_the_density_maximum() -> None:
    loc = torch.tensor([-1.5, -0.2, 0.0, 0.3, 1.0, 2.0])
    scale = torch.tensor([0.2, 1.5, 0.3, 0.9, 2.0, 0.5])
    dist = TanhNormal(loc, scale, event_dims=0)
    mode = dist.mode
    grid = torch.linspace(-1, 1, 400001)[1:-1].unsqueeze(-1)
    best = grid[dist.log_prob(grid).argmax(0), 0]
    torch.testing.assert_close(mode, best, atol=2e-4, rtol=0)
    # with a small scale the mode is close to the squashed location
    narrow = TanhNormal(torch.tensor([0.7]), torch.tensor([0.05]))
    assert abs(float(narrow.mode - torch.tanh(torch.tensor(0.7)))) < 0.01


def test_tanh_normal_mode_has_gradients() -> None:
    loc = torch.tensor([0.5], requires_grad=True)
    TanhNormal(loc, torch.tensor([0.3])).mode.sum().backward()
    assert loc.grad is not None and float(loc.grad) > 0


# ----------------------------------------------------------------------------- OneHotCategorical
def test_one_hot_categorical_mode_and_straight_through() -> None:
    logits = torch.tensor([[0.0, 2.0, 1.0]], requires_grad=True)
    dist = OneHotCategorical(logits=logits)
    assert dist.mode.tolist() == [[0.0, 1.0, 0.0]]
    torch.testing.assert_close(dist.deterministic_sample, dist.mode)
    sample = dist.rsample((5,))
    assert sample.shape == (5, 1, 3)
    assert torch.equal(sample.detach().sum(-1), torch.ones(5, 1))
    (sample * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert logits.grad is not None and float(logits.grad.abs().sum()) > 0
    lp = dist.log_prob(sample.detach())
    torch.testing.assert_close(lp, (torch.log_softmax(logits, -1) * sample.detach()).sum(-1))
    with pytest.raises(ValueError, match="exactly one of logits and probs"):
        OneHotCategorical()


def test_one_hot_categorical_sample_frequencies() -> None:
    torch.manual_seed(0)
    probs = torch.tensor([0.2, 0.5, 0.3])
    samples = OneHotCategorical(probs=probs).sample((20000,))  # int64 one-hots
    torch.testing.assert_close(samples.float().mean(0), probs, atol=0.02, rtol=0)


# ----------------------------------------------------------------------------- MaskedCategorical
def test_masked_categorical_never_samples_masked_actions() -> None:
    torch.manual_seed(0)
    logits = torch.randn(64, 5) * 3
    mask = torch.rand(64, 5) > 0.5
    mask[:, 0] = True  # at least one allowed per row
    dist = MaskedCategorical(logits=logits, mask=mask)
    samples = dist.sample((200,))
    assert bool(mask.gather(-1, samples.T).all())
    assert bool(mask.gather(-1, dist.mode.unsqueeze(-1)).all())
    masked_rows = ~mask[:, 1]
    assert bool(masked_rows.any())
    lp = dist.log_prob(torch.ones(64, dtype=torch.long))
    assert bool(torch.isinf(lp[masked_rows]).all()) and bool(torch.isfinite(lp[~masked_rows]).all())


def test_masked_categorical_renormalises_over_allowed_actions() -> None:
    logits = torch.tensor([1.0, 2.0, 3.0, 4.0])
    mask = torch.tensor([True, False, True, False])
    dist = MaskedCategorical(logits=logits, mask=mask)
    allowed = torch.log_softmax(torch.tensor([1.0, 3.0]), -1)
    torch.testing.assert_close(dist.log_prob(torch.tensor([0, 2])), allowed)
    assert dist.log_prob(torch.tensor(3)).item() == -math.inf
    assert dist.mode.item() == 2  # the best allowed, not the best overall (3)
    torch.testing.assert_close(dist.probs, torch.tensor([math.exp(allowed[0]), 0.0, math.exp(allowed[1]), 0.0]))


def test_masked_categorical_from_indices_and_probs() -> None:
    probs = torch.full((2, 4), 0.25)
    indices = torch.tensor([[1, 3], [2, -1]])
    dist = MaskedCategorical(probs=probs, indices=indices, padding_value=-1)
    assert dist.mask.tolist() == [[False, True, False, True], [False, False, True, False]]
    assert dist.sample((50,))[:, 1].unique().tolist() == [2]
    with pytest.raises(ValueError, match="exactly one of mask and indices"):
        MaskedCategorical(logits=torch.zeros(3))
    with pytest.raises(ValueError, match="broadcasts to the logits"):
        MaskedCategorical(logits=torch.zeros(3), mask=torch.ones(4, dtype=torch.bool))


def test_masked_categorical_finite_neg_inf() -> None:
    dist = MaskedCategorical(logits=torch.zeros(3), mask=torch.tensor([True, True, False]), neg_inf=-1e9)
    assert dist.log_prob(torch.tensor(2)).item() == -1e9
    assert torch.isfinite(dist.entropy())


def test_seed_action_mask_example_runs() -> None:
    """The torchrl envs API page's "Categorical policy with action mask", with cadence imports."""
    in_feats, out_feats = 4, 3
    module = TensorDictModule(nn.Linear(in_feats, out_feats), in_keys=["observation"], out_keys=["logits"])
    dist = ProbabilisticTensorDictModule(
        in_keys={"logits": "logits", "mask": "action_mask"},
        out_keys=["action"],
        distribution_class=MaskedCategorical,
    )
    actor = TensorDictSequential(module, dist)
    mask = torch.tensor([[False, True, True]]).expand(500, 3)
    data = TensorDict(observation=torch.randn(500, in_feats), action_mask=mask, batch_size=[500])
    with set_interaction_type(InteractionType.RANDOM):
        actions = actor(data.clone())["action"]
    assert actions.shape == (500,)
    assert set(actions.unique().tolist()) == {1, 2}
    with set_interaction_type(InteractionType.DETERMINISTIC):
        greedy = actor(data.clone())
    logits = greedy["logits"].masked_fill(~mask, -math.inf)
    assert torch.equal(greedy["action"], logits.argmax(-1))


@pytest.mark.parametrize(
    ("interaction", "attribute"),
    [
        (InteractionType.DETERMINISTIC, "deterministic_sample"),
        (InteractionType.MODE, "mode"),
        (InteractionType.MEAN, "mean"),
    ],
)
def test_interaction_types_pick_the_documented_value(interaction: InteractionType, attribute: str) -> None:
    module = ProbabilisticTensorDictModule(
        in_keys=["loc", "scale"], out_keys=["action"], distribution_class=TanhNormal,
        distribution_kwargs={"low": -2.0, "high": 2.0},
    )
    data = TensorDict(loc=torch.tensor([[0.8, -1.5]]), scale=torch.tensor([[1.2, 0.3]]), batch_size=[1])
    dist = TanhNormal(data["loc"], data["scale"], low=-2.0, high=2.0)
    with set_interaction_type(interaction):
        action = module(data.clone())["action"]
    if attribute == "mean":  # no closed form: the module averages samples
        torch.manual_seed(0)
        estimate = dist.rsample((20000,)).mean(0)
        torch.testing.assert_close(action, estimate, atol=0.05, rtol=0)
    else:
        torch.testing.assert_close(action, getattr(dist, attribute))


def test_random_interaction_draws_samples() -> None:
    module = ProbabilisticTensorDictModule(in_keys=["param"], out_keys=["action"], distribution_class=TanhDelta)
    data = TensorDict(param=torch.zeros(3, 1), batch_size=[3])
    with set_interaction_type(InteractionType.RANDOM):
        assert module(data.clone())["action"].abs().max() == 0  # a point mass samples its point
    normal = ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"], distribution_class=TanhNormal)
    data = TensorDict(loc=torch.zeros(100, 1), scale=torch.ones(100, 1), batch_size=[100])
    with set_interaction_type(InteractionType.RANDOM):
        assert normal(data.clone())["action"].std() > 0.3
    with set_interaction_type(InteractionType.DETERMINISTIC):
        assert normal(data.clone())["action"].abs().max() == 0
