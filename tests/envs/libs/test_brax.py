"""BraxEnv / BraxWrapper: Brax's JAX physics as batched, stateless, differentiable Cadence envs."""

from __future__ import annotations

import sys

import pytest
import torch

brax = pytest.importorskip(
    "brax", reason='brax is not installed (pip install "cadence[brax]"); the Brax wrappers are untested'
)
import brax.envs  # noqa: E402
import jax  # noqa: E402 - brax brings it
import jax.numpy as jnp  # noqa: E402
from brax.envs.base import State  # noqa: E402

from cadence.data import Bounded, Categorical, Unbounded  # noqa: E402
from cadence.envs import ParallelEnv, SerialEnv  # noqa: E402
from cadence.envs.libs.brax import BraxEnv, BraxWrapper  # noqa: E402
from cadence.envs.utils import check_env_specs  # noqa: E402
from tests.envs.libs.jax_testing import BackendCompilations, assert_same  # noqa: E402


# ---------------------------------------------------------------- a differentiable env of our own
DT = 0.1


class PointMass(brax.envs.Env):
    """A point in the plane pushed by the action: ``vel += DT * action``, ``pos += DT * vel``,
    reward ``-|pos|^2 - 0.01 |action|^2``. Small, smooth and quick to compile; its gradients
    are checked against the same dynamics written in torch."""

    def reset(self, rng):
        position = jax.random.uniform(rng, (2,), minval=-1.0, maxval=1.0)
        obs = jnp.concatenate([position, jnp.zeros(2)])
        return State(None, obs, jnp.float32(0), jnp.float32(0), {}, {"steps": jnp.int32(0)})

    def step(self, state, action):
        velocity = state.obs[2:] + DT * action
        position = state.obs[:2] + DT * velocity
        reward = -jnp.sum(position**2) - 0.01 * jnp.sum(action**2)
        done = jnp.any(jnp.abs(position) > 5).astype(jnp.float32)
        info = {"steps": state.info["steps"] + 1}
        return state.replace(obs=jnp.concatenate([position, velocity]), reward=reward, done=done, info=info)

    @property
    def observation_size(self) -> int:
        return 4

    @property
    def action_size(self) -> int:
        return 2

    @property
    def backend(self) -> str:
        return "none"


def torch_point_mass(observation: torch.Tensor, policy, steps: int) -> torch.Tensor:
    """The rewards of ``steps`` PointMass steps from ``observation``, in torch (autograd)."""
    position, velocity, rewards = observation[..., :2], observation[..., 2:], []
    for _ in range(steps):
        action = policy(torch.cat([position, velocity], -1))
        velocity = velocity + DT * action
        position = position + DT * velocity
        rewards.append(-(position**2).sum(-1) - 0.01 * (action**2).sum(-1))
    return torch.stack(rewards, -1)


@pytest.fixture(scope="module")
def point_mass() -> BraxWrapper:
    return BraxWrapper(PointMass(), batch_size=[3], requires_grad=True)


@pytest.fixture(scope="module")
def reacher() -> BraxEnv:
    return BraxEnv("reacher", backend="spring", batch_size=[2])


# ---------------------------------------------------------------- construction
def test_missing_brax_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "brax", None)  # import brax now raises ImportError
    with pytest.raises(ImportError, match=r'pip install "cadence\[brax\]"'):
        BraxEnv("fast")


def test_bad_names_and_envs_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown Brax env 'rocket'.*reacher"):
        BraxEnv("rocket")
    with pytest.raises(TypeError, match="brax.envs.Env"):
        BraxWrapper(object())
    with pytest.raises(ValueError, match="auto_reset=False"):
        BraxWrapper(brax.envs.create("fast"))
    with pytest.raises(ValueError, match="vmapped already"):
        BraxWrapper(brax.envs.create("fast", batch_size=2, auto_reset=False))
    assert "ant" in BraxEnv.available_envs and BraxEnv.lib is brax


# ---------------------------------------------------------------- specs and data
def test_fast_specs_and_data() -> None:
    env = BraxEnv("fast", batch_size=[3])
    obs = env.observation_spec
    assert isinstance(obs["observation"], Unbounded) and obs["observation"].shape == (3, 2)
    action = env.action_spec
    assert isinstance(action, Bounded) and action.shape == (3, 1) and action.dtype == torch.float32
    assert torch.equal(action.low, -torch.ones(3, 1)) and torch.equal(action.high, torch.ones(3, 1))
    assert env.reward_spec.shape == (3, 1) and env.reward_spec.dtype == torch.float32
    for key in ("done", "terminated", "truncated"):
        assert isinstance(env.full_done_spec[key], Categorical) and env.full_done_spec[key].shape == (3, 1)
    state = env.state_spec["state"]
    assert state["pipeline_state", "x", "pos"].shape == (3, 3) and state["reward"].shape == (3,)
    check_env_specs(env, seed=0)
    push = env.reset().set("action", torch.ones(3, 1))
    out = env.step(push)["next"]
    assert torch.allclose(out["observation"][:, 1], torch.full((3,), 0.02))  # the velocity after one push
    assert torch.equal(out["observation"], out["state", "obs"])


def test_dict_observations_are_nested_under_observation() -> None:
    env = BraxEnv("fast", env_kwargs={"obs_mode": "dict_state", "asymmetric_obs": True})
    assert env.observation_spec["observation", "state"].shape == (2,)
    assert env.observation_spec["observation", "privileged_state"].shape == (4,)
    check_env_specs(env, seed=0)


def test_episode_wrapper_time_limits_are_truncations() -> None:
    env = BraxWrapper(brax.envs.create("fast", episode_length=3, auto_reset=False), batch_size=[2])
    data = env.rollout(10)
    assert data.batch_size == (2, 3)
    assert data["next", "truncated"][:, :, 0].tolist() == [[False, False, True]] * 2
    assert data["next", "done"][:, -1].all() and not data["next", "terminated"].any()
    check_env_specs(env, seed=0)


def test_reacher_checks_and_steps_are_functions_of_the_input(reacher) -> None:
    check_env_specs(reacher, seed=0)
    td = reacher.reset().set("action", torch.full((2, 2), 0.3))
    first = reacher.step(td.clone())["next"]
    reacher.rollout(3)  # whatever the env did since, the same input gives the same step
    assert_same(first, reacher.step(td.clone())["next"])
    assert first["observation"].shape == (2, 11)


def test_step_without_state_names_it(reacher) -> None:
    td = reacher.reset().exclude("state").set("action", torch.zeros(2, 2))
    with pytest.raises(KeyError, match="needs the 'state' entry"):
        reacher.step(td)


# ---------------------------------------------------------------- seeding, compilation
def test_same_seed_same_data(reacher) -> None:
    def run(seed):
        reacher.set_seed(seed)
        return reacher.rollout(4)

    first, again, other = run(3), run(3), run(4)
    assert_same(first, again)
    assert not torch.equal(first["observation"], other["observation"])


def test_compiled_once_per_wrapper(reacher) -> None:
    reacher.rollout(3)
    counts = reacher.trace_counts
    assert counts == {"reset": 1, "step": 1, "grad_forward": 0, "grad_backward": 0}
    with BackendCompilations() as compilations:
        reacher.set_seed(1)
        reacher.rollout(3)
        reacher.rollout(3)
    assert compilations.count == 0 and reacher.trace_counts == counts


# ---------------------------------------------------------------- gradients
def test_gradients_through_a_rollout_match_the_same_dynamics_in_torch(point_mass) -> None:
    weight = torch.tensor([[0.3, -0.2, 0.1, 0.5], [-0.4, 0.2, 0.3, -0.1]], requires_grad=True)

    def policy(observation):
        return torch.tanh(observation @ weight.T)

    point_mass.set_seed(0)
    data = point_mass.rollout(4, lambda td: td.set("action", policy(td["observation"])))
    data["next", "reward"].sum().backward()
    env_grad, weight.grad = weight.grad.clone(), None
    assert env_grad.abs().sum() > 0

    rewards = torch_point_mass(data["observation"][:, 0].detach(), policy, steps=4)
    torch.testing.assert_close(data["next", "reward"][..., 0].detach(), rewards.detach(), rtol=1e-5, atol=1e-6)
    rewards.sum().backward()
    torch.testing.assert_close(env_grad, weight.grad, rtol=1e-4, atol=1e-6)


def test_action_gradient_matches_finite_differences(point_mass) -> None:
    point_mass.set_seed(1)
    start = point_mass.reset()
    action = torch.tensor([[0.5, -0.3], [0.1, 0.9], [-0.7, 0.2]], requires_grad=True)
    reward = point_mass.step(start.clone().set("action", action))["next", "reward"]
    (grad,) = torch.autograd.grad(reward.sum(), action)
    step = 1e-2
    for i in range(2):
        shift = torch.zeros(3, 2)
        shift[:, i] = step
        with torch.no_grad():
            up = point_mass.step(start.clone().set("action", action + shift))["next", "reward"]
            down = point_mass.step(start.clone().set("action", action - shift))["next", "reward"]
        torch.testing.assert_close(grad[:, i], ((up - down) / (2 * step))[:, 0], rtol=1e-3, atol=1e-4)


def test_no_grad_steps_take_the_plain_step(point_mass) -> None:
    before = point_mass.trace_counts
    with torch.no_grad():
        data = point_mass.rollout(2, lambda td: td.set("action", torch.zeros(3, 2, requires_grad=True)))
    assert not data["next", "reward"].requires_grad
    after = point_mass.trace_counts
    assert after["grad_forward"] == before["grad_forward"] and after["step"] == 1


def test_grad_functions_compile_once(point_mass) -> None:
    weight = torch.zeros(2, 4, requires_grad=True)
    for _ in range(2):
        data = point_mass.rollout(3, lambda td: td.set("action", td["observation"] @ weight.T))
        data["next", "reward"].sum().backward()
    counts = point_mass.trace_counts
    assert counts["grad_forward"] == 1 and counts["grad_backward"] == 1


@pytest.mark.slow
def test_reacher_control_cost_gradient() -> None:
    # compiling the step's VJP for reacher takes about a minute on a busy two-core machine
    env = BraxEnv("reacher", backend="spring", batch_size=[1], requires_grad=True)
    env.set_seed(0)
    start = env.reset()
    action = torch.tensor([[0.5, -0.5]], requires_grad=True)
    reward = env.step(start.clone().set("action", action))["next", "reward"]
    (grad,) = torch.autograd.grad(reward.sum(), action)
    # reward = -|fingertip - target| - |action|^2: the control cost dominates after one step
    assert (grad.sign() == -action.sign()).all()
    step = 1e-2
    with torch.no_grad():
        for i in range(2):
            shift = torch.zeros(1, 2)
            shift[0, i] = step
            up = env.step(start.clone().set("action", action + shift))["next", "reward"]
            down = env.step(start.clone().set("action", action - shift))["next", "reward"]
            assert abs(float(grad[0, i]) - float((up - down) / (2 * step))) < 2e-2


# ---------------------------------------------------------------- batches of envs
def test_serial_env_checks_and_reproduces() -> None:
    env = SerialEnv(2, lambda: BraxWrapper(PointMass()))
    check_env_specs(env, seed=0)
    env.set_seed(5)
    first = env.rollout(3)
    env.set_seed(5)
    assert_same(first, env.rollout(3))
    assert not torch.equal(first["observation"][0], first["observation"][1])  # each sub-env its own seed
    env.close()


def test_parallel_env_with_spawned_workers() -> None:
    # JAX runs threads: a process that imported it must not fork, so the workers spawn (about 5 s here)
    env = ParallelEnv(2, lambda: BraxEnv("fast", batch_size=[2]), start_method="spawn", timeout=300)
    try:
        check_env_specs(env, seed=0)
        data = env.rollout(3)
        assert data["next", "observation"].shape == (2, 2, 3, 2)
    finally:
        env.close()
