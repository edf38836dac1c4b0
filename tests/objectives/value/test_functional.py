"""The functional estimates against the per-step Python reference, on random data holding
several trajectories with random terminated/truncated steps."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cadence.objectives.value import functional as F
from tests.objectives.value import _reference as ref

TOL = {"atol": 1e-5, "rtol": 1e-5}


def random_batch(seed: int, batch: tuple[int, ...], steps: int, done_rate: float, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    shape = (*batch, steps, 1)

    def normal():
        return torch.randn(shape, generator=generator, dtype=dtype)

    done = torch.rand(shape, generator=generator) < done_rate
    # about half the ends are terminations, the others truncations
    terminated = done & (torch.rand(shape, generator=generator) < 0.5)
    return normal(), normal(), normal(), done, terminated


cases = st.tuples(
    st.integers(0, 2**31 - 1),
    st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple),
    st.integers(1, 40),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.sampled_from([0.0, 0.05, 0.3, 1.0]),
)


@settings(max_examples=150, deadline=None)
@given(cases)
def test_td_lambda_matches_reference(case):
    seed, batch, steps, gamma, lmbda, done_rate = case
    _, next_value, reward, done, terminated = random_batch(seed, batch, steps, done_rate)
    expected = ref.lambda_return(gamma, lmbda, next_value, reward, done, terminated).float()
    for estimate in (F.td_lambda_return_estimate, F.vec_td_lambda_return_estimate):
        got = estimate(gamma, lmbda, next_value, reward, done, terminated)
        torch.testing.assert_close(got, expected, **TOL)


@settings(max_examples=150, deadline=None)
@given(cases)
def test_td1_and_td0_match_reference(case):
    seed, batch, steps, gamma, _, done_rate = case
    value, next_value, reward, done, terminated = random_batch(seed, batch, steps, done_rate)
    expected = ref.lambda_return(gamma, 1.0, next_value, reward, done, terminated).float()
    for estimate in (F.td1_return_estimate, F.vec_td1_return_estimate):
        torch.testing.assert_close(estimate(gamma, next_value, reward, done, terminated), expected, **TOL)
    for estimate in (F.td1_advantage_estimate, F.vec_td1_advantage_estimate):
        got = estimate(gamma, value, next_value, reward, done, terminated)
        torch.testing.assert_close(got, expected - value, **TOL)
    td0 = ref.td0_return(gamma, next_value, reward, terminated).float()
    torch.testing.assert_close(F.td0_return_estimate(gamma, next_value, reward, terminated), td0, **TOL)
    got = F.td0_advantage_estimate(gamma, value, next_value, reward, done, terminated)
    torch.testing.assert_close(got, td0 - value, **TOL)


@settings(max_examples=150, deadline=None)
@given(cases)
def test_gae_matches_reference(case):
    seed, batch, steps, gamma, lmbda, done_rate = case
    value, next_value, reward, done, terminated = random_batch(seed, batch, steps, done_rate)
    advantage, target = ref.gae(gamma, lmbda, value, next_value, reward, done, terminated)
    for estimate in (F.generalized_advantage_estimate, F.vec_generalized_advantage_estimate):
        got_advantage, got_target = estimate(gamma, lmbda, value, next_value, reward, done, terminated)
        torch.testing.assert_close(got_advantage, advantage.float(), **TOL)
        torch.testing.assert_close(got_target, target.float(), **TOL)


@settings(max_examples=60, deadline=None)
@given(cases)
def test_lambda_advantages_and_per_step_gamma(case):
    seed, batch, steps, _, lmbda, done_rate = case
    value, next_value, reward, done, terminated = random_batch(seed, batch, steps, done_rate)
    # one discount per step (rolling gamma: gamma_t discounts step t + 1)
    gamma = torch.rand(reward.shape, generator=torch.Generator().manual_seed(seed + 1))
    expected = ref.lambda_return(gamma, lmbda, next_value, reward, done, terminated).float()
    for estimate in (F.td_lambda_advantage_estimate, F.vec_td_lambda_advantage_estimate):
        got = estimate(gamma, lmbda, value, next_value, reward, done, terminated)
        torch.testing.assert_close(got, expected - value, **TOL)
    advantage, _ = ref.gae(gamma, lmbda, value, next_value, reward, done, terminated)
    got, _ = F.vec_generalized_advantage_estimate(gamma, lmbda, value, next_value, reward, done, terminated)
    torch.testing.assert_close(got, advantage.float(), **TOL)


def test_long_sequences_match_the_loop():
    value, next_value, reward, done, terminated = random_batch(0, (16,), 1000, 0.01)
    loop = F.td_lambda_return_estimate(0.99, 0.95, next_value, reward, done, terminated)
    vec = F.vec_td_lambda_return_estimate(0.99, 0.95, next_value, reward, done, terminated)
    torch.testing.assert_close(vec, loop, atol=1e-5, rtol=1e-5)
    exact = ref.lambda_return(0.99, 0.95, next_value.double(), reward.double(), done, terminated)
    torch.testing.assert_close(vec.double(), exact, atol=1e-5, rtol=1e-5)
    loop_gae = F.generalized_advantage_estimate(0.99, 0.95, value, next_value, reward, done, terminated)
    vec_gae = F.vec_generalized_advantage_estimate(0.99, 0.95, value, next_value, reward, done, terminated)
    torch.testing.assert_close(vec_gae, loop_gae, atol=1e-5, rtol=1e-5)
    # without any done step (one long trajectory) the discounting runs over all 1000 steps
    never = torch.zeros_like(done)
    loop = F.td1_return_estimate(0.999, next_value, reward, never)
    torch.testing.assert_close(F.vec_td1_return_estimate(0.999, next_value, reward, never), loop, atol=1e-4, rtol=1e-5)


def test_trajectories_do_not_leak_and_truncation_bootstraps():
    # two trajectories of 2 steps: the first truncated, the second terminated
    reward = torch.tensor([1.0, 1.0, 1.0, 1.0]).view(1, 4, 1)
    next_value = torch.tensor([5.0, 10.0, 5.0, 10.0]).view(1, 4, 1)
    done = torch.tensor([False, True, False, True]).view(1, 4, 1)
    terminated = torch.tensor([False, False, False, True]).view(1, 4, 1)
    got = F.vec_td1_return_estimate(0.5, next_value, reward, done, terminated).flatten().tolist()
    assert got == [1 + 0.5 * (1 + 0.5 * 10), 1 + 0.5 * 10, 1.5, 1.0]


def test_time_dim_and_features():
    value, next_value, reward, done, terminated = random_batch(3, (4,), 12, 0.2)
    expected = F.vec_td_lambda_return_estimate(0.9, 0.8, next_value, reward, done, terminated)
    moved = [t.transpose(0, 1) for t in (next_value, reward, done, terminated)]  # [T, B, 1]
    for estimate in (F.td_lambda_return_estimate, F.vec_td_lambda_return_estimate):
        got = estimate(0.9, 0.8, *moved, time_dim=0)
        torch.testing.assert_close(got.transpose(0, 1), expected)
    # several value features share the flags ([B, T, 1] broadcast against [B, T, 3])
    wide = torch.cat([next_value, 2 * next_value, -next_value], -1)
    got = F.vec_td_lambda_return_estimate(0.9, 0.8, wide, reward, done, terminated)
    torch.testing.assert_close(got[..., :1], expected)


def test_bad_input_is_named():
    reward = torch.zeros(2, 5, 1)
    with pytest.raises(ValueError, match="next_state_value"):
        F.vec_td_lambda_return_estimate(0.9, 0.9, torch.zeros(2, 4, 1), reward, torch.zeros(2, 5, 1).bool())
    with pytest.raises(ValueError, match="time_dim"):
        F.td1_return_estimate(0.9, reward, reward, reward.bool(), time_dim=3)
    with pytest.raises(TypeError, match="done"):
        F.generalized_advantage_estimate(0.9, 0.9, reward, reward, reward, None)
    with pytest.raises(ValueError, match="gamma"):
        F.vec_td1_return_estimate(torch.rand(3), reward, reward, reward.bool())


@pytest.mark.parametrize("function", ["td1_return_estimate", "vec_td1_return_estimate", "vec_td_lambda_return_estimate"])
def test_rolling_gamma_false_discounts_each_steps_future_with_its_own_gamma(function):
    generator = torch.Generator().manual_seed(3)
    reward, next_value = torch.randn(2, 7, 1, generator=generator), torch.randn(2, 7, 1, generator=generator)
    done = torch.zeros(2, 7, 1, dtype=torch.bool)
    done[0, 3] = True
    gamma = torch.tensor([0.5, 0.9, 0.7])[torch.randint(0, 3, (2, 7, 1), generator=generator)]
    lmbda = () if "td1" in function else (0.8,)
    got = getattr(F, function)(gamma, *lmbda, next_value, reward, done, rolling_gamma=False)
    for b in range(2):
        for t in range(7):
            # the estimate at t is the one computed with gamma_t for every step, read at t
            constant = getattr(F, function)(float(gamma[b, t]), *lmbda, next_value, reward, done)
            assert torch.allclose(got[b, t], constant[b, t], atol=1e-6), (b, t)
    rolled = getattr(F, function)(gamma, *lmbda, next_value, reward, done)
    assert not torch.allclose(got, rolled)  # the default (rolling) reading differs



@pytest.mark.parametrize("steps", [1, 2, 7, 64, 300])
def test_vectorized_gradients_match_the_loops(steps):
    value, next_value, reward, done, terminated = random_batch(3, (2, 3), steps, 0.05, dtype=torch.float64)
    gamma = torch.rand(reward.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(4))

    def gradients(estimate):
        inputs = [tensor.clone().requires_grad_() for tensor in (value, next_value, reward, gamma)]
        v, nv, r, g = inputs
        advantage, target = estimate(g, 0.9, v, nv, r, done, terminated)
        weights = torch.linspace(-1, 1, advantage.numel(), dtype=torch.float64).view(advantage.shape)
        ((advantage * weights).sum() + target.square().sum()).backward()
        return [tensor.grad for tensor in inputs]

    for loop_grad, vec_grad in zip(
        gradients(F.generalized_advantage_estimate), gradients(F.vec_generalized_advantage_estimate)
    ):
        torch.testing.assert_close(vec_grad, loop_grad)

    def lambda_gradients(estimate):
        inputs = [tensor.clone().requires_grad_() for tensor in (next_value, reward)]
        estimate(0.97, 0.9, *inputs, done, terminated).pow(2).sum().backward()
        return [tensor.grad for tensor in inputs]

    for loop_grad, vec_grad in zip(
        lambda_gradients(F.td_lambda_return_estimate), lambda_gradients(F.vec_td_lambda_return_estimate)
    ):
        torch.testing.assert_close(vec_grad, loop_grad)


def test_vectorized_estimates_leave_their_inputs_alone():
    value, next_value, reward, done, terminated = random_batch(5, (4,), 50, 0.1)
    gamma = torch.full(reward.shape, 0.99)
    inputs = (value, next_value, reward, done, terminated, gamma)
    before = [tensor.clone() for tensor in inputs]
    F.vec_generalized_advantage_estimate(gamma, 0.95, value, next_value, reward, done, terminated)
    F.vec_td_lambda_return_estimate(gamma, 0.95, next_value, reward, done, terminated)
    F.vec_td1_advantage_estimate(0.99, value, next_value, reward, done, terminated)
    for original, tensor in zip(before, inputs):
        assert torch.equal(original, tensor)
