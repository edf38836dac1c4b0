"""Tests of ModelBasedEnvBase: a world model stepped as an env, through the public API.

The headline test fits a small MLP world model on 10k Pendulum-v1 transitions and checks
that rollouts of the model env from real states, with the real actions, track the real
env; a fast twin of it steps the exact Pendulum dynamics written as a world model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import pytest
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule
from torch import nn

from cadence.data import Bounded, Composite, Unbounded
from cadence.envs import GymEnv, ParallelEnv, SerialEnv
from cadence.envs.model_based import ModelBasedEnvBase
from cadence.envs.transforms import RewardScaling, TransformedEnv
from cadence.envs.utils import check_env_specs
from cadence.modules import MLP
from cadence.modules.model_based import WorldModelWrapper

HORIZON = 5


def _init_(module: nn.Module, generator: torch.Generator) -> nn.Module:
    """Re-draws every parameter from ``generator`` (uniform, scaled by its fan-in), so that
    the tests never touch torch's global generator."""
    with torch.no_grad():
        for param in module.parameters():
            fan_in = math.prod(param.shape[1:]) if param.ndim > 1 else param.numel()
            bound = 1.0 / math.sqrt(fan_in)
            param.uniform_(-bound, bound, generator=generator)
    return module


class PendulumDynamics(nn.Module):
    """Pendulum-v1's own equations on its observation (cos, sin, angular speed): the
    exact world model."""

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        th = torch.atan2(observation[..., 1], observation[..., 0])
        thdot = observation[..., 2]
        u = action[..., 0].clamp(-2.0, 2.0)
        normalized = torch.remainder(th + math.pi, 2 * math.pi) - math.pi
        costs = normalized**2 + 0.1 * thdot**2 + 0.001 * u**2
        new_thdot = (thdot + (3 * 10.0 / 2 * torch.sin(th) + 3.0 * u) * 0.05).clamp(-8.0, 8.0)
        new_th = th + new_thdot * 0.05
        next_observation = torch.stack([torch.cos(new_th), torch.sin(new_th), new_thdot], -1)
        return next_observation, -costs.unsqueeze(-1)


class ResidualModel(nn.Module):
    """(observation, action) -> (next observation, reward): an MLP on standardised inputs
    predicting the standardised change of the observation and the reward."""

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor, generator: torch.Generator) -> None:
        super().__init__()
        self.net = _init_(MLP(4, 4, num_cells=[64, 64], activation_class=nn.SiLU), generator)
        self.register_buffer("in_loc", inputs.mean(0))
        self.register_buffer("in_scale", inputs.std(0))
        self.register_buffer("out_loc", targets.mean(0))
        self.register_buffer("out_scale", targets.std(0))

    def standardised(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net((torch.cat([observation, action], -1) - self.in_loc) / self.in_scale)

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.standardised(observation, action) * self.out_scale + self.out_loc
        return observation + out[..., :3], out[..., 3:]


class ReplayActions:
    """A policy writing given actions ``[N, T, 1]``, one time step per call."""

    def __init__(self, actions: torch.Tensor) -> None:
        self.actions = actions
        self.t = 0

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        tensordict.set("action", self.actions[:, self.t])
        self.t += 1
        return tensordict


def _real_data(seed: int, steps: int) -> TensorDictBase:
    env = GymEnv("Pendulum-v1")
    env.set_seed(seed)
    return env.rollout(steps, break_when_any_done=False)


def _windows(real: TensorDictBase) -> torch.Tensor:
    """The starts of the HORIZON-step windows within one episode."""
    done = real["next", "done"].squeeze(-1)
    starts = [t for t in range(len(done) - HORIZON + 1) if not done[t : t + HORIZON - 1].any()]
    return torch.tensor(starts)


def _imagine(world_model: nn.Module, real: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor, ModelBasedEnvBase]:
    """The model env's observations after HORIZON steps from the real states, with the real
    actions, and the real ones."""
    starts = _windows(real)
    env = ModelBasedEnvBase(world_model, batch_size=[len(starts)])
    env.set_specs_from_env(GymEnv("Pendulum-v1"))
    steps = starts.unsqueeze(-1) + torch.arange(HORIZON)
    start = TensorDict(observation=real["observation"][starts], batch_size=[len(starts)])
    with torch.no_grad():
        imagined = env.rollout(HORIZON, ReplayActions(real["action"][steps]), auto_reset=False, tensordict=start)
    assert imagined.batch_size == (len(starts), HORIZON)
    return imagined["next", "observation"][:, -1], real["next", "observation"][starts + HORIZON - 1], env


def _pendulum_model_env(batch_size: list[int] | tuple[int, ...] = ()) -> ModelBasedEnvBase:
    world_model = TensorDictModule(PendulumDynamics(), in_keys=["observation", "action"],
                                   out_keys=["observation", "reward"])
    env = ModelBasedEnvBase(world_model, batch_size=batch_size)
    env.set_specs_from_env(GymEnv("Pendulum-v1"))
    return env


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Runs on one thread: on a busy 2-core machine, two threads that wait on each other
    can take 30 s where one takes 1 s (the results are the same)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# ---------------------------------------------------------------------------- tracking the real env
def test_a_world_model_fitted_on_10k_pendulum_transitions_tracks_the_real_env() -> None:
    generator = torch.Generator().manual_seed(0)
    data = _real_data(seed=0, steps=10_000)
    observation, action = data["observation"], data["action"]
    inputs = torch.cat([observation, action], -1)
    targets = torch.cat([data["next", "observation"] - observation, data["next", "reward"]], -1)
    model = ResidualModel(inputs, targets, generator)
    goal = (targets - model.out_loc) / model.out_scale
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    steps = 800
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    for _ in range(steps):
        batch = torch.randint(0, len(inputs), (512,), generator=generator)
        loss = (model.standardised(observation[batch], action[batch]) - goal[batch]).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()

    world_model = TensorDictModule(model, in_keys=["observation", "action"], out_keys=["observation", "reward"])
    held_out = _real_data(seed=1, steps=300)
    imagined, real, env = _imagine(world_model, held_out)
    error = (imagined - real).abs().mean()
    assert error < 0.1, f"mean abs error of the observation after {HORIZON} imagined steps: {error:.4f}"
    # and it is a real fit: an untrained model of the same shape is far off
    untrained = TensorDictModule(ResidualModel(inputs, targets, torch.Generator().manual_seed(1)),
                                 in_keys=["observation", "action"], out_keys=["observation", "reward"])
    assert (_imagine(untrained, held_out)[0] - real).abs().mean() > 5 * error
    # the predicted rewards of one step track the real ones too (rewards span [-16, 0])
    starts = _windows(held_out)
    one_step = env.step(TensorDict(observation=held_out["observation"][starts],
                                   action=held_out["action"][starts], batch_size=[len(starts)]))
    assert (one_step["next", "reward"] - held_out["next", "reward"][starts]).abs().mean() < 0.2


def test_the_exact_dynamics_as_a_world_model_track_the_real_env() -> None:
    imagined, real, _ = _imagine(TensorDictModule(PendulumDynamics(), in_keys=["observation", "action"],
                                                  out_keys=["observation", "reward"]), _real_data(seed=3, steps=300))
    assert (imagined - real).abs().max() < 1e-3


# ---------------------------------------------------------------------------- the EnvBase contract
def test_specs_come_from_the_real_env_with_this_env_batch_size() -> None:
    env = _pendulum_model_env(batch_size=[4])
    real = GymEnv("Pendulum-v1")
    assert env.batch_size == (4,) and env.batch_locked is False
    assert env.observation_spec["observation"] == real.observation_spec["observation"].expand(4, 3)
    assert env.action_spec == real.action_spec.expand(4, 1)
    assert env.reward_spec.shape == (4, 1)
    assert set(env.done_keys) == {"done", "terminated", "truncated"}
    # stateless: the observations are inputs of the step too
    assert list(env.state_spec.keys()) == ["observation"]


def test_specs_from_a_batched_env_drop_its_batch_dims() -> None:
    env = _pendulum_model_env(batch_size=[])
    env.set_specs_from_env(SerialEnv(3, lambda: GymEnv("Pendulum-v1")))
    assert env.observation_spec["observation"].shape == (3,)
    assert env.action_spec.shape == (1,)


def test_reset_starts_from_the_given_states() -> None:
    env = _pendulum_model_env(batch_size=[2])
    states = torch.tensor([[1.0, 0.0, 0.5], [0.0, 1.0, -0.5]])
    out = env.reset(TensorDict(observation=states, batch_size=[2]))
    assert torch.equal(out["observation"], states)
    assert out["done"].shape == (2, 1) and not out["done"].any()


def test_reset_without_states_draws_them_from_the_specs_reproducibly() -> None:
    env = _pendulum_model_env(batch_size=[64])
    env.set_seed(0)
    first = env.reset()["observation"]
    assert env.observation_spec["observation"].is_in(first)
    assert first.std(0).min() > 0.1  # drawn, not constant
    env.set_seed(0)
    assert torch.equal(env.reset()["observation"], first)
    env.set_seed(1)
    assert not torch.equal(env.reset()["observation"], first)


def test_a_partial_reset_redraws_only_the_masked_states() -> None:
    env = _pendulum_model_env(batch_size=[2])
    states = torch.tensor([[1.0, 0.0, 0.5], [0.0, 1.0, -0.5]])
    data = TensorDict(observation=states.clone(), _reset=torch.tensor([[False], [True]]), batch_size=[2])
    out = env.reset(data)
    assert torch.equal(out["observation"][0], states[0])
    assert not torch.equal(out["observation"][1], states[1])


def test_step_writes_the_model_prediction_and_leaves_the_input_states_alone() -> None:
    env = _pendulum_model_env()
    observation = torch.tensor([1.0, 0.0, 0.0])
    data = env.step(TensorDict(observation=observation.clone(), action=torch.tensor([2.0]), batch_size=[]))
    expected, reward = PendulumDynamics()(observation, torch.tensor([2.0]))
    assert torch.equal(data["observation"], observation)
    assert torch.allclose(data["next", "observation"], expected)
    assert torch.allclose(data["next", "reward"], reward)
    # no done head: the episode never ends
    assert not data["next", "done"].any() and not data["next", "terminated"].any()
    assert not data["next", "truncated"].any()


def test_the_env_steps_any_leading_batch_of_states() -> None:
    env = _pendulum_model_env()  # batch_size () and not batch-locked
    start = env.reset(TensorDict(observation=torch.zeros(6, 2, 3), batch_size=[6, 2]))
    data = env.rollout(3, auto_reset=False, tensordict=start)
    assert data.batch_size == (6, 2, 3)
    assert data["next", "done"].shape == (6, 2, 3, 1)


def test_rollout_with_a_policy_from_a_reset() -> None:
    env = _pendulum_model_env(batch_size=[3])
    env.set_seed(0)

    def brake(data: TensorDictBase) -> TensorDictBase:
        return data.set("action", (-data["observation"][..., 2:]).clamp(-2.0, 2.0))

    data = env.rollout(10, brake)
    assert data.batch_size == (3, 10) and data.names == [None, "time"]
    # the next input of each step is the last step's output
    assert torch.equal(data["observation"][:, 1:], data["next", "observation"][:, :-1])


def test_check_env_specs_passes() -> None:
    check_env_specs(_pendulum_model_env(), seed=0)
    check_env_specs(_pendulum_model_env(batch_size=[2, 3]), seed=0)


def test_seeding_reproduces_rollouts() -> None:
    env = _pendulum_model_env(batch_size=[4])
    env.set_seed(7)
    first = env.rollout(5)
    env.set_seed(7)
    assert (env.rollout(5) == first).all()


def test_rollouts_without_gradients_give_the_same_data() -> None:
    env = _pendulum_model_env(batch_size=[3])  # without gradients, rollouts may take a shortcut
    env.set_seed(2)
    with_graph = env.rollout(6, break_when_any_done=False)
    env.set_seed(2)
    with torch.no_grad():
        without = env.rollout(6, break_when_any_done=False)
    assert set(with_graph.keys(True, True)) == set(without.keys(True, True))
    assert (with_graph == without).all()


def test_serial_and_parallel_batches_step_like_one_batched_env() -> None:
    starts = TensorDict(observation=torch.tensor([[1.0, 0.0, 0.3], [0.6, 0.8, -1.0]]), batch_size=[2])
    actions = torch.tensor([[[0.5], [1.0], [-2.0]], [[0.0], [2.0], [1.5]]])
    batched = _pendulum_model_env(batch_size=[2])
    expected = batched.rollout(3, ReplayActions(actions), auto_reset=False, tensordict=batched.reset(starts.clone()))
    serial = SerialEnv(2, _pendulum_model_env)
    check_env_specs(serial, seed=0)
    got = serial.rollout(3, ReplayActions(actions), auto_reset=False, tensordict=serial.reset(starts.clone()))
    assert torch.allclose(got["next", "observation"], expected["next", "observation"])
    with ParallelEnv(2, _pendulum_model_env) as parallel:
        check_env_specs(parallel, seed=0)
        got = parallel.rollout(3, ReplayActions(actions), auto_reset=False, tensordict=parallel.reset(starts.clone()))
    assert torch.allclose(got["next", "observation"], expected["next", "observation"])


def test_a_transformed_model_env_resets_from_states() -> None:
    env = TransformedEnv(_pendulum_model_env(batch_size=[2]), RewardScaling(loc=0.0, scale=2.0))
    states = torch.tensor([[1.0, 0.0, 0.5], [0.0, 1.0, -0.5]])
    start = env.reset(TensorDict(observation=states, batch_size=[2]))
    assert torch.equal(start["observation"], states)
    data = env.step(start.set("action", torch.zeros(2, 1)))
    _, reward = PendulumDynamics()(states, torch.zeros(2, 1))
    assert torch.allclose(data["next", "reward"], 2.0 * reward)


def test_gradients_flow_through_an_imagined_rollout_to_the_policy() -> None:
    env = _pendulum_model_env(batch_size=[4])
    policy = TensorDictModule(_init_(nn.Linear(3, 1), torch.Generator().manual_seed(0)),
                              in_keys=["observation"], out_keys=["action"])
    start = env.reset(TensorDict(observation=torch.tensor([[1.0, 0.0, 0.0]]).expand(4, 3), batch_size=[4]))
    data = env.rollout(4, policy, auto_reset=False, tensordict=start)
    data["next", "reward"].sum().backward()
    assert policy.module.weight.grad is not None and policy.module.weight.grad.abs().sum() > 0


def test_world_model_wrapper_with_params_runs_other_weights() -> None:
    generator = torch.Generator().manual_seed(0)
    transition = TensorDictModule(_init_(MLP(2, 1, num_cells=[4]), generator), in_keys=["x", "action"],
                                  out_keys=["x"])
    reward = TensorDictModule(_init_(MLP(1, 1, num_cells=[4]), generator), in_keys=["x"], out_keys=["reward"])
    world_model = WorldModelWrapper(transition, reward)
    zeros = TensorDict.from_module(world_model).apply(torch.zeros_like)
    env = ModelBasedEnvBase(world_model, params=zeros)
    env.observation_spec = Composite(x=Unbounded(shape=(1,)))
    env.state_spec = env.observation_spec.clone()
    env.action_spec = Bounded(-1.0, 1.0, shape=(1,))
    data = env.step(TensorDict(x=torch.ones(1), action=torch.ones(1), batch_size=[]))
    assert torch.equal(data["next", "x"], torch.zeros(1)) and torch.equal(data["next", "reward"], torch.zeros(1))
    # the model's own weights are untouched
    assert world_model(TensorDict(x=torch.ones(1), action=torch.ones(1), batch_size=[]))["x"].abs().sum() > 0


def test_observations_the_model_does_not_write_pass_through_and_done_heads_count() -> None:
    class Counter(nn.Module):  # counts up and says it is done at 2
        def forward(self, count: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            return count + 1, torch.ones_like(count), count + 1 >= 2

    world_model = TensorDictModule(Counter(), in_keys=["count"], out_keys=["count", "reward", "terminated"])
    env = ModelBasedEnvBase(world_model)
    env.observation_spec = Composite(count=Unbounded(shape=(1,)), goal=Unbounded(shape=(1,)))
    env.state_spec = env.observation_spec.clone()
    env.action_spec = Bounded(-1.0, 1.0, shape=(1,))
    start = env.reset(TensorDict(count=torch.zeros(1), goal=torch.full((1,), 7.0), batch_size=[]))
    data = env.rollout(5, auto_reset=False, tensordict=start)
    assert data["next", "count"].squeeze(-1).tolist() == [1.0, 2.0]  # stops when done
    assert data["next", "goal"].squeeze(-1).tolist() == [7.0, 7.0]
    assert data["next", "done"].squeeze(-1).tolist() == [False, True]


def test_errors_name_what_is_missing() -> None:
    with pytest.raises(TypeError, match="world_model must be a torch.nn.Module"):
        ModelBasedEnvBase(lambda td: td)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="params must be a TensorDict"):
        ModelBasedEnvBase(nn.Identity(), params={"weight": torch.zeros(1)})  # type: ignore[arg-type]
    silent = TensorDictModule(MLP(4, 3, num_cells=[4]), in_keys=["observation", "action"], out_keys=["observation"])
    env = ModelBasedEnvBase(silent)
    env.set_specs_from_env(GymEnv("Pendulum-v1"))
    with pytest.raises(KeyError, match="wrote no reward at 'reward'"):
        env.rollout(2)
    env = _pendulum_model_env(batch_size=[3])
    with pytest.raises(ValueError, match=r"batch size \(2,\) does not end with the env's batch size \(3,\)"):
        env.reset(TensorDict(observation=torch.zeros(2, 3), batch_size=[2]))
    with pytest.raises(TypeError, match="expected an env"):
        env.set_specs_from_env(GymEnv("Pendulum-v1").observation_spec)  # type: ignore[arg-type]


def test_world_model_outputs_of_another_dtype_or_shape_are_refused() -> None:
    class Widening(PendulumDynamics):  # the right values, in float64
        def forward(self, observation: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            next_observation, reward = super().forward(observation, action)
            return next_observation.double(), reward

    start = TensorDict(observation=torch.zeros(2, 3), action=torch.zeros(2, 1), batch_size=[2])
    env = ModelBasedEnvBase(TensorDictModule(Widening(), in_keys=["observation", "action"],
                                             out_keys=["observation", "reward"]))
    env.set_specs_from_env(GymEnv("Pendulum-v1"))
    with pytest.raises(TypeError, match=r"output 'observation' must have dtype torch.float32.*got torch.float64"):
        env.step(start.clone())
    flat_reward = TensorDictModule(lambda o, a: (o, o[..., 0]), in_keys=["observation", "action"],
                                   out_keys=["observation", "reward"])
    env = ModelBasedEnvBase(flat_reward)
    env.set_specs_from_env(GymEnv("Pendulum-v1"))
    with pytest.raises(ValueError, match=r"output 'reward' must have shape \(2, 1\).*got \(2,\)"):
        env.step(start.clone())
    float_done = TensorDictModule(lambda o, a: (o, o[..., :1], o[..., :1]), in_keys=["observation", "action"],
                                  out_keys=["observation", "reward", "terminated"])
    env = ModelBasedEnvBase(float_done)
    env.set_specs_from_env(GymEnv("Pendulum-v1"))
    with pytest.raises(TypeError, match=r"output 'terminated' must have dtype torch.bool.*got torch.float32"):
        env.step(start.clone())


def test_reset_says_which_states_of_which_shape_it_needs() -> None:
    env = _pendulum_model_env(batch_size=[2])
    with pytest.raises(ValueError, match=r"reset's input 'observation' must have shape \(2, 3\).*got \(2, 4\)"):
        env.reset(TensorDict(observation=torch.zeros(2, 4), batch_size=[2]))
    with pytest.raises(TypeError, match=r"reset's input 'observation' must have dtype torch.float32.*got torch.int64"):
        env.reset(TensorDict(observation=torch.zeros(2, 3, dtype=torch.int64), batch_size=[2]))
    bare = ModelBasedEnvBase(TensorDictModule(PendulumDynamics(), in_keys=["observation", "action"],
                                              out_keys=["observation", "reward"]))
    with pytest.raises(ValueError, match=r"reset: the env has no observation or state spec.*set_specs_from_env"):
        bare.reset()


@pytest.mark.parametrize(("batch_size", "error"), [([-1], ValueError), ((2, -3), ValueError), (3, TypeError)])
def test_batch_size_must_be_a_shape(batch_size: object, error: type) -> None:
    with pytest.raises(error, match=rf"batch_size must be a shape .*got {re.escape(repr(batch_size))}"):
        ModelBasedEnvBase(nn.Identity(), batch_size=batch_size)  # type: ignore[arg-type]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_env_and_its_model_live_on_the_device() -> None:
    env = _pendulum_model_env(batch_size=[8]).to("cuda")
    env.set_seed(0)
    data = env.rollout(4)
    assert data.device.type == "cuda" and data["next", "observation"].device.type == "cuda"
    model_env = ModelBasedEnvBase(TensorDictModule(PendulumDynamics(), in_keys=["observation", "action"],
                                                   out_keys=["observation", "reward"]), device="cuda", batch_size=[8])
    model_env.set_specs_from_env(GymEnv("Pendulum-v1"))
    start = model_env.reset(TensorDict(observation=torch.zeros(8, 3), batch_size=[8]))
    assert start["observation"].device.type == "cuda"
    check_env_specs(model_env, seed=0)
