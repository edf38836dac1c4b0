"""Tests of cadence.modules.model_based: the world-model wrapper, the RSSM prior,
posterior and rollout, the pixel encoder and decoder, and Dreamer's actor."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from cadence.data import Bounded
from cadence.modules import (
    MLP,
    DreamerActor,
    ObsDecoder,
    ObsEncoder,
    RSSMPosterior,
    RSSMPrior,
    RSSMRollout,
    WorldModelWrapper,
)

STATE, BELIEF, EMBED, ACTION = 4, 6, 5, 2


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Runs on one thread: on a busy 2-core machine two threads that wait on each other
    can be many times slower than one (the results are the same)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _init_(module: nn.Module, seed: int) -> nn.Module:
    """Re-draws every parameter from a seeded generator (never the global one)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in module.parameters():
            fan_in = math.prod(param.shape[1:]) if param.ndim > 1 else param.numel()
            param.uniform_(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in), generator=generator)
    return module


def _prior(seed: int = 0) -> RSSMPrior:
    return _init_(RSSMPrior(None, hidden_dim=8, rnn_hidden_dim=BELIEF, state_dim=STATE, action_dim=ACTION), seed)


def _posterior(seed: int = 1) -> RSSMPosterior:
    return _init_(RSSMPosterior(hidden_dim=8, state_dim=STATE, rnn_hidden_dim=BELIEF, obs_embed_dim=EMBED), seed)


def _rollout_module(prior: RSSMPrior, posterior: RSSMPosterior) -> RSSMRollout:
    return RSSMRollout(
        TensorDictModule(prior, in_keys=["state", "belief", "action"],
                         out_keys=[("next", "prior_mean"), ("next", "prior_std"), "_", ("next", "belief")]),
        TensorDictModule(posterior, in_keys=[("next", "belief"), ("next", "encoded_latents")],
                         out_keys=[("next", "posterior_mean"), ("next", "posterior_std"), ("next", "state")]),
    )


def _sequence(batch: tuple[int, ...], steps: int, seed: int = 0) -> TensorDict:
    generator = torch.Generator().manual_seed(seed)
    shape = (*batch, steps)
    return TensorDict({
        "state": torch.randn(*shape, STATE, generator=generator),
        "belief": torch.randn(*shape, BELIEF, generator=generator),
        "action": torch.randn(*shape, ACTION, generator=generator),
        ("next", "encoded_latents"): torch.randn(*shape, EMBED, generator=generator),
    }, batch_size=shape)


# ---------------------------------------------------------------------------- WorldModelWrapper
def test_world_model_wrapper_runs_the_transition_then_the_reward_on_the_new_state() -> None:
    transition = TensorDictModule(_init_(MLP(3, 2, depth=0), 0), in_keys=["x", "action"], out_keys=["x"])
    reward = TensorDictModule(_init_(MLP(2, 1, depth=0), 1), in_keys=["x"], out_keys=["reward"])
    model = WorldModelWrapper(transition, reward)
    assert model.get_transition_model_operator() is transition and model.get_reward_operator() is reward
    data = TensorDict(x=torch.ones(5, 2), action=torch.ones(5, 1), batch_size=[5])
    out = model(data.clone())
    new_x = transition.module(torch.ones(5, 2), torch.ones(5, 1))
    assert torch.allclose(out["x"], new_x)
    assert torch.allclose(out["reward"], reward.module(new_x))
    assert model.in_keys == ["x", "action"] and set(model.out_keys) == {"x", "reward"}


# ---------------------------------------------------------------------------- RSSMPrior
def test_prior_shapes_and_bounds_over_any_batch_dims() -> None:
    prior = _prior()
    for batch in [(), (3,), (2, 3)]:
        mean, std, state, belief = prior(torch.zeros(*batch, STATE), torch.zeros(*batch, BELIEF),
                                         torch.zeros(*batch, ACTION))
        assert mean.shape == std.shape == state.shape == (*batch, STATE)
        assert belief.shape == (*batch, BELIEF)
        assert (std >= 0.1).all()


def test_prior_matches_the_gru_equations() -> None:
    prior = _prior()
    state, belief, action = torch.ones(3, STATE), torch.full((3, BELIEF), 0.5), torch.ones(3, ACTION)
    projected = prior.action_state_projector(torch.cat([state, action], -1))
    expected_belief = prior.rnn(projected, belief)
    mean, std, drawn, next_belief = prior(state, belief, action, noise=torch.zeros(3, STATE))
    assert torch.allclose(next_belief, expected_belief)
    assert torch.equal(drawn, mean)  # zero noise: the mean
    _, _, drawn, _ = prior(state, belief, action, noise=torch.ones(3, STATE))
    assert torch.allclose(drawn, mean + std)


def test_prior_draws_from_its_own_generator() -> None:
    prior = _prior()
    inputs = (torch.zeros(4, STATE), torch.zeros(4, BELIEF), torch.zeros(4, ACTION))
    prior.generator.manual_seed(0)
    first = prior(*inputs)[2]
    second = prior(*inputs)[2]
    assert not torch.equal(first, second)  # fresh noise at each call
    prior.generator.manual_seed(0)
    global_state = torch.get_rng_state()
    assert torch.equal(prior(*inputs)[2], first)
    assert torch.equal(torch.get_rng_state(), global_state)  # the global generator is left alone


def test_prior_input_size_from_the_action_spec_or_lazy() -> None:
    prior = RSSMPrior(Bounded(-1.0, 1.0, shape=(3,)), hidden_dim=8, rnn_hidden_dim=BELIEF, state_dim=STATE)
    assert prior.action_state_projector[0].in_features == STATE + 3
    lazy = RSSMPrior(None, hidden_dim=8, rnn_hidden_dim=BELIEF, state_dim=STATE)
    lazy(torch.zeros(2, STATE), torch.zeros(2, BELIEF), torch.zeros(2, 7))
    assert lazy.action_state_projector[0].in_features == STATE + 7


def test_prior_names_wrong_sizes() -> None:
    with pytest.raises(ValueError, match="belief must end with a dim of size 6, got shape \\(2, 5\\)"):
        _prior()(torch.zeros(2, STATE), torch.zeros(2, 5), torch.zeros(2, ACTION))
    with pytest.raises(ValueError, match="at least one dim"):
        RSSMPrior(Bounded(-1.0, 1.0, shape=()))


# ---------------------------------------------------------------------------- RSSMPosterior
def test_posterior_shapes_noise_and_generator() -> None:
    posterior = _posterior()
    belief, embedding = torch.ones(2, 3, BELIEF), torch.ones(2, 3, EMBED)
    mean, std, state = posterior(belief, embedding, noise=torch.zeros(2, 3, STATE))
    assert mean.shape == std.shape == state.shape == (2, 3, STATE)
    assert torch.equal(state, mean) and (std >= 0.1).all()
    posterior.generator.manual_seed(3)
    first = posterior(belief, embedding)[2]
    posterior.generator.manual_seed(3)
    assert torch.equal(posterior(belief, embedding)[2], first)
    lazy = RSSMPosterior(hidden_dim=8, state_dim=STATE)
    assert lazy(belief, embedding)[2].shape == (2, 3, STATE)


# ---------------------------------------------------------------------------- RSSMRollout
def test_rollout_chains_each_posterior_into_the_next_prior() -> None:
    prior, posterior = _prior(), _posterior()
    data = _sequence((2,), 5)
    prior.generator.manual_seed(0)
    posterior.generator.manual_seed(1)
    out = _rollout_module(prior, posterior)(data)
    assert out.batch_size == (2, 5)
    # the first step starts from the input's latents, the others from the last posterior
    assert torch.equal(out["state"][:, 0], data["state"][:, 0])
    assert torch.equal(out["belief"][:, 0], data["belief"][:, 0])
    assert torch.equal(out["state"][:, 1:], out["next", "state"][:, :-1])
    assert torch.equal(out["belief"][:, 1:], out["next", "belief"][:, :-1])
    # the same as stepping the two networks by hand, with the same noise
    prior.generator.manual_seed(0)
    posterior.generator.manual_seed(1)
    state, belief = data["state"][:, 0], data["belief"][:, 0]
    for t in range(5):
        prior_mean, _, _, belief = prior(state, belief, data["action"][:, t])
        _, _, state = posterior(belief, data["next", "encoded_latents"][:, t])
        assert torch.allclose(out["next", "prior_mean"][:, t], prior_mean)
        assert torch.allclose(out["next", "state"][:, t], state)


def test_rollout_keys_any_batch_and_input_untouched() -> None:
    module = _rollout_module(_prior(), _posterior())
    assert set(module.in_keys) == {"state", "belief", "action", ("next", "encoded_latents")}
    assert ("next", "posterior_std") in module.out_keys
    data = _sequence((), 4)
    before = data.clone()
    out = module(data)
    assert out.batch_size == (4,) and out["next", "state"].shape == (4, STATE)
    assert (data == before).all() and ("next", "state") not in data.keys(True)
    assert module(_sequence((2, 3), 4)).batch_size == (2, 3, 4)


def test_rollout_gradients_reach_both_networks() -> None:
    prior, posterior = _prior(), _posterior()
    out = _rollout_module(prior, posterior)(_sequence((3,), 4))
    (out["next", "state"].sum() + out["next", "prior_mean"].sum()).backward()
    assert prior.rnn.weight_hh.grad is not None and prior.rnn.weight_hh.grad.abs().sum() > 0
    assert posterior.obs_rnn_to_post_projector[0].weight.grad.abs().sum() > 0


def test_rollout_needs_a_time_dim() -> None:
    with pytest.raises(ValueError, match="needs a time dim"):
        _rollout_module(_prior(), _posterior())(_sequence((), 1)[0])


# ---------------------------------------------------------------------------- pixels
def test_encoder_flattens_64_pixel_images_to_1024_features() -> None:
    encoder = ObsEncoder(in_channels=3)
    assert encoder(torch.zeros(2, 3, 64, 64)).shape == (2, 1024)
    assert encoder(torch.zeros(3, 64, 64)).shape == (1024,)
    assert encoder(torch.zeros(2, 5, 3, 64, 64)).shape == (2, 5, 1024)
    assert ObsEncoder(channels=4, num_layers=2)(torch.zeros(1, 1, 16, 16)).shape == (1, 8 * 2 * 2)
    with pytest.raises(ValueError, match="num_layers must be at least 1"):
        ObsEncoder(num_layers=0)
    with pytest.raises(ValueError, match="expected images"):
        encoder(torch.zeros(64, 64))


def test_decoder_builds_64_pixel_images() -> None:
    decoder = ObsDecoder(channels=4, latent_dim=STATE + BELIEF)
    assert decoder(torch.zeros(2, 5, STATE), torch.zeros(2, 5, BELIEF)).shape == (2, 5, 3, 64, 64)
    assert decoder(torch.zeros(STATE), torch.zeros(BELIEF)).shape == (3, 64, 64)
    gray = ObsDecoder(channels=4, out_channels=1)
    assert gray(torch.zeros(2, STATE), torch.zeros(2, BELIEF)).shape == (2, 1, 64, 64)
    two = ObsDecoder(channels=4, num_layers=2, kernel_sizes=[4, 4], latent_dim=STATE + BELIEF)
    assert two(torch.zeros(2, STATE), torch.zeros(2, BELIEF)).shape == (2, 3, 10, 10)
    one = ObsDecoder(channels=4, num_layers=1, kernel_sizes=3, latent_dim=STATE + BELIEF)
    assert one(torch.zeros(2, STATE), torch.zeros(2, BELIEF)).shape == (2, 3, 3, 3)
    with pytest.raises(ValueError, match="one size per layer"):
        ObsDecoder(num_layers=3, kernel_sizes=[5, 5])


def test_gradients_reach_every_layer_of_the_encoder_and_decoder() -> None:
    encoder = _init_(ObsEncoder(channels=2, in_channels=1), 0)
    decoder = _init_(ObsDecoder(channels=2, latent_dim=64 + BELIEF, out_channels=1), 1)
    image = torch.zeros(2, 1, 64, 64)
    image[:, :, 16:48, 16:48] = 1.0
    (decoder(encoder(image), torch.ones(2, BELIEF)) - image).pow(2).mean().backward()
    for name, param in [*encoder.named_parameters(), *decoder.named_parameters()]:
        assert param.grad is not None and param.grad.abs().sum() > 0, name


# ---------------------------------------------------------------------------- DreamerActor
def test_dreamer_actor_location_and_scale() -> None:
    actor = DreamerActor(out_features=ACTION, depth=2, num_cells=8)
    loc, scale = actor(torch.zeros(3, STATE), torch.zeros(3, BELIEF))
    assert loc.shape == scale.shape == (3, ACTION)
    assert (scale > 0).all()
    # a zero output gives the biased scale
    with torch.no_grad():
        for param in actor.backbone[-1].parameters():
            param.zero_()
    _, scale = actor(torch.zeros(3, STATE), torch.zeros(3, BELIEF))
    assert torch.allclose(scale, torch.full((3, ACTION), 5.0), atol=1e-3)
