"""Tests of DreamerEnv and DreamerDecoder: imagined rollouts in an RSSM's latent space,
through the public API; the last test trains a tiny RSSM on Pendulum-v1 and imagines
from its posterior states."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

from cadence.data import Bounded
from cadence.envs import GymEnv, ParallelEnv, SerialEnv
from cadence.envs.model_based.dreamer import DreamerDecoder, DreamerEnv
from cadence.envs.transforms import TransformedEnv
from cadence.envs.utils import check_env_specs
from cadence.modules import MLP, DreamerActor, ObsDecoder, RSSMPosterior, RSSMPrior, RSSMRollout, WorldModelWrapper

STATE, BELIEF, EMBED = 4, 16, 8


def _init_(module: nn.Module, generator: torch.Generator) -> nn.Module:
    """Re-draws every parameter from ``generator`` (never torch's global one)."""
    with torch.no_grad():
        for param in module.parameters():
            fan_in = math.prod(param.shape[1:]) if param.ndim > 1 else param.numel()
            param.uniform_(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in), generator=generator)
    return module


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


class Networks:
    """A tiny RSSM, its reward model and an observation decoder for Pendulum-v1."""

    def __init__(self, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        action_spec = GymEnv("Pendulum-v1").action_spec
        self.encoder = _init_(MLP(3, EMBED, num_cells=[32]), generator)
        self.prior = _init_(RSSMPrior(action_spec, hidden_dim=32, rnn_hidden_dim=BELIEF, state_dim=STATE), generator)
        self.posterior = _init_(RSSMPosterior(32, STATE, rnn_hidden_dim=BELIEF, obs_embed_dim=EMBED), generator)
        self.decoder = _init_(MLP(STATE + BELIEF, 3, num_cells=[32]), generator)
        self.reward = _init_(MLP(STATE + BELIEF, 1, num_cells=[32]), generator)

    def world_model(self) -> WorldModelWrapper:
        """The imagination's model: the prior steps the latents, the reward model reads them."""
        return WorldModelWrapper(
            TensorDictModule(self.prior, in_keys=["state", "belief", "action"],
                             out_keys=["prior_mean", "prior_std", "state", "belief"]),
            TensorDictModule(self.reward, in_keys=["state", "belief"], out_keys=["reward"]),
        )

    def obs_decoder(self) -> TensorDictModule:
        return TensorDictModule(self.decoder, in_keys=["state", "belief"], out_keys=["reco_observation"])

    def training_model(self) -> TensorDictSequential:
        """Encoder, RSSM rollout over real sequences, decoder and reward model."""
        return TensorDictSequential(
            TensorDictModule(self.encoder, in_keys=[("next", "observation")], out_keys=[("next", "encoded_latents")]),
            RSSMRollout(
                TensorDictModule(self.prior, in_keys=["state", "belief", "action"],
                                 out_keys=[("next", "prior_mean"), ("next", "prior_std"), "_", ("next", "belief")]),
                TensorDictModule(self.posterior, in_keys=[("next", "belief"), ("next", "encoded_latents")],
                                 out_keys=[("next", "posterior_mean"), ("next", "posterior_std"), ("next", "state")]),
            ),
            TensorDictModule(self.decoder, in_keys=[("next", "state"), ("next", "belief")],
                             out_keys=[("next", "reco_observation")]),
            TensorDictModule(self.reward, in_keys=[("next", "state"), ("next", "belief")],
                             out_keys=[("next", "predicted_reward")]),
        )


def _dreamer_env(batch_size: list[int] | tuple[int, ...] = (), seed: int = 0) -> DreamerEnv:
    networks = Networks(seed)
    env = DreamerEnv(networks.world_model(), prior_shape=(STATE,), belief_shape=(BELIEF,),
                     obs_decoder=networks.obs_decoder(), batch_size=batch_size)
    env.set_specs_from_env(GymEnv("Pendulum-v1"))
    return env


def _latents(batch: int, seed: int = 0) -> TensorDict:
    generator = torch.Generator().manual_seed(seed)
    return TensorDict(state=torch.randn(batch, STATE, generator=generator),
                      belief=torch.randn(batch, BELIEF, generator=generator), batch_size=[batch])


# ---------------------------------------------------------------------------- DreamerEnv
def test_the_latents_are_the_observations_and_the_rest_comes_from_the_real_env() -> None:
    env = _dreamer_env(batch_size=[3])
    assert set(env.observation_spec.keys()) == {"state", "belief"}
    assert set(env.state_spec.keys()) == {"state", "belief"}
    assert env.observation_spec["state"].shape == (3, STATE)
    assert env.observation_spec["belief"].shape == (3, BELIEF)
    assert env.action_spec == GymEnv("Pendulum-v1").action_spec.expand(3, 1)
    assert set(env.done_keys) == {"done", "terminated", "truncated"}
    assert env.prior_shape == (STATE,) and env.belief_shape == (BELIEF,)


def test_imagination_starts_from_given_latents_and_never_ends() -> None:
    env = _dreamer_env()
    start = _latents(8)
    data = env.rollout(15, auto_reset=True, tensordict=start)
    assert data.batch_size == (8, 15)
    assert torch.equal(data["state"][:, 0], start["state"]) and torch.equal(data["belief"][:, 0], start["belief"])
    assert torch.equal(data["state"][:, 1:], data["next", "state"][:, :-1])
    assert not data["next", "done"].any()
    assert data["next", "reward"].shape == (8, 15, 1)


def test_a_step_is_the_prior_then_the_reward_model() -> None:
    env = _dreamer_env()
    prior = env.world_model.get_transition_model_operator().module
    reward = env.world_model.get_reward_operator().module
    start = env.reset(_latents(2))
    action = torch.tensor([[1.0], [-1.0]])
    env.set_seed(5)
    data = env.step(start.clone().set("action", action))
    env.set_seed(5)  # the prior's noise again
    _, _, state, belief = prior(start["state"], start["belief"], action)
    assert torch.equal(data["next", "state"], state) and torch.equal(data["next", "belief"], belief)
    assert torch.equal(data["next", "reward"], reward(state, belief))


def test_seeding_reproduces_the_imagined_rollout() -> None:
    env = _dreamer_env(batch_size=[4])
    env.set_seed(0)
    first = env.rollout(6)
    env.set_seed(0)
    assert (env.rollout(6) == first).all()
    env.set_seed(1)
    assert not torch.equal(env.rollout(6)["next", "state"], first["next", "state"])
    env.set_seed(0)
    with torch.no_grad():  # without gradients, rollouts may take a shortcut: the same data
        assert (env.rollout(6) == first).all()


def test_check_env_specs_and_batched_dreamer_envs() -> None:
    check_env_specs(_dreamer_env(), seed=0)
    check_env_specs(_dreamer_env(batch_size=[2]), seed=0)
    serial = SerialEnv(2, _dreamer_env)
    check_env_specs(serial, seed=0)
    assert serial.rollout(3)["next", "belief"].shape == (2, 3, BELIEF)
    with ParallelEnv(2, _dreamer_env) as parallel:
        check_env_specs(parallel, seed=0)
        parallel.set_seed(3)
        first = parallel.rollout(3)
        parallel.set_seed(3)
        assert (parallel.rollout(3) == first).all()


def test_gradients_flow_through_imagination_to_the_actor() -> None:
    env = _dreamer_env()
    actor_net = DreamerActor(out_features=1, depth=1, num_cells=16)
    actor_net(torch.zeros(STATE), torch.zeros(BELIEF))  # sizes its lazy first layer
    _init_(actor_net, torch.Generator().manual_seed(2))

    def actor(data: TensorDictBase) -> TensorDictBase:
        loc, _ = actor_net(data["state"], data["belief"])
        return data.set("action", 2.0 * torch.tanh(loc))

    data = env.rollout(5, actor, auto_reset=True, tensordict=_latents(4))
    data["next", "reward"].sum().backward()
    grads = [p.grad for p in actor_net.parameters()]
    assert all(g is not None for g in grads) and sum(g.abs().sum() for g in grads) > 0


def test_set_specs_from_env_checks_the_latent_shapes() -> None:
    env = _dreamer_env()
    primed = DreamerEnv(Networks().world_model(), prior_shape=(STATE,), belief_shape=(BELIEF + 1,))
    primed.set_specs_from_env(GymEnv("Pendulum-v1"))
    with pytest.raises(ValueError, match=r"'belief' observation has shape \(17,\).*this DreamerEnv's is \(16,\)"):
        env.set_specs_from_env(primed)
    with pytest.raises(TypeError, match="obs_decoder must be a torch.nn.Module"):
        DreamerEnv(Networks().world_model(), (STATE,), (BELIEF,), obs_decoder=lambda td: td)  # type: ignore[arg-type]


def test_decode_obs() -> None:
    env = _dreamer_env()
    latents = _latents(5)
    decoded = env.decode_obs(latents.clone())
    assert decoded["reco_observation"].shape == (5, 3)
    networks = Networks(0)
    assert torch.allclose(decoded["reco_observation"], networks.decoder(latents["state"], latents["belief"]))
    # with compute_latents the world model steps first
    env.set_seed(0)
    stepped = env.decode_obs(latents.clone().set("action", torch.zeros(5, 1)), compute_latents=True)
    assert not torch.equal(stepped["state"], latents["state"])
    assert torch.allclose(stepped["reco_observation"], networks.decoder(stepped["state"], stepped["belief"]))
    bare = DreamerEnv(Networks().world_model(), (STATE,), (BELIEF,))
    with pytest.raises(ValueError, match="no observation decoder"):
        bare.decode_obs(latents)


# ---------------------------------------------------------------------------- DreamerDecoder
def test_the_decoder_transform_adds_decoded_observations_to_data_and_specs() -> None:
    env = TransformedEnv(_dreamer_env(batch_size=[2]), DreamerDecoder())
    assert env.observation_spec["reco_observation"].shape == (2, 3)
    check_env_specs(env, seed=0)
    data = env.rollout(4)
    assert data["reco_observation"].shape == (2, 4, 3)  # the resets' too
    assert data["next", "reco_observation"].shape == (2, 4, 3)
    decoder = Networks(0).decoder
    expected = decoder(data["next", "state"], data["next", "belief"])
    assert torch.allclose(data["next", "reco_observation"], expected)


def test_the_decoder_transform_decodes_pixels() -> None:
    networks = Networks(0)
    pixels = TensorDictModule(ObsDecoder(channels=2, latent_dim=STATE + BELIEF), in_keys=["state", "belief"],
                              out_keys=["reco_pixels"])
    env = DreamerEnv(networks.world_model(), (STATE,), (BELIEF,), obs_decoder=pixels)
    env.action_spec = Bounded(-2.0, 2.0, shape=(1,))
    env = env.append_transform(DreamerDecoder())
    assert env.observation_spec["reco_pixels"].shape == (3, 64, 64)
    assert env.rollout(2, auto_reset=True, tensordict=_latents(3))["next", "reco_pixels"].shape == (3, 2, 3, 64, 64)


def test_the_decoder_transform_takes_its_own_decoder() -> None:
    transform = DreamerDecoder(obs_decoder=Networks(0).obs_decoder())
    assert transform(_latents(5))["reco_observation"].shape == (5, 3)
    with pytest.raises(ValueError, match="no observation decoder outside an env"):
        DreamerDecoder()(_latents(5))
    bare = DreamerEnv(Networks().world_model(), (STATE,), (BELIEF,))
    bare.set_specs_from_env(GymEnv("Pendulum-v1"))
    with pytest.raises(ValueError, match="no observation decoder on DreamerEnv"):
        bare.append_transform(DreamerDecoder())
    with pytest.raises(TypeError, match="obs_decoder must be a torch.nn.Module"):
        DreamerDecoder(obs_decoder="decoder")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- a trained tiny RSSM
def test_imagination_from_a_trained_tiny_rssm_decodes_observations() -> None:
    real = GymEnv("Pendulum-v1")
    real.set_seed(0)
    sequences = real.rollout(200).reshape(10, 20)  # one episode, in 10 sequences of 20 steps
    sequences["state"] = torch.zeros(10, 20, STATE)
    sequences["belief"] = torch.zeros(10, 20, BELIEF)
    networks = Networks(0)
    networks.prior.generator.manual_seed(0)
    networks.posterior.generator.manual_seed(1)
    model = networks.training_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    reconstruction = []
    for _ in range(60):
        out = model(sequences.clone(recurse=False))
        reco = (out["next", "reco_observation"] - out["next", "observation"]).pow(2).mean()
        reward = (out["next", "predicted_reward"] - out["next", "reward"]).pow(2).mean() / 10
        kl = torch.distributions.kl_divergence(
            torch.distributions.Normal(out["next", "posterior_mean"], out["next", "posterior_std"]),
            torch.distributions.Normal(out["next", "prior_mean"], out["next", "prior_std"]),
        ).sum(-1).mean()
        loss = reco + reward + 0.1 * kl
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        reconstruction.append(reco.item())
    assert reconstruction[-1] < 0.25 * reconstruction[0]

    env = DreamerEnv(networks.world_model(), prior_shape=(STATE,), belief_shape=(BELIEF,),
                     obs_decoder=networks.obs_decoder())
    env.set_specs_from_env(real)
    env = env.append_transform(DreamerDecoder())
    env.set_seed(0)
    start = TensorDict(state=out["next", "state"][:, -1].detach(), belief=out["next", "belief"][:, -1].detach(),
                       batch_size=[10])
    with torch.no_grad():
        imagined = env.rollout(8, auto_reset=True, tensordict=start)
    assert imagined.batch_size == (10, 8)
    assert imagined["next", "reco_observation"].shape == (10, 8, 3)
    assert imagined["reco_observation"].shape == (10, 8, 3)
    assert torch.isfinite(imagined["next", "reco_observation"]).all()
    # the first decoded observation is the reconstruction of the last real one of each sequence
    last_real = sequences["next", "observation"][:, -1]
    assert (imagined["reco_observation"][:, 0] - last_real).abs().mean() < 0.5
