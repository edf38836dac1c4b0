"""Tests of cadence.modules.exploration: OU noise, additive Gaussian noise, epsilon-greedy."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

from cadence.data import Bounded, Categorical, Composite, CompositeSpec, OneHot, Unbounded
from cadence.envs import GymEnv, InitTracker, StepCounter, TransformedEnv
from cadence.envs.utils import ExplorationType, set_exploration_type
from cadence.modules import (
    AdditiveGaussianModule,
    DdpgMlpActor,
    EGreedyModule,
    OrnsteinUhlenbeckProcessModule,
    ProbabilisticActor,
    QValueActor,
    TanhDelta,
)

NOT_EXPLORING = [ExplorationType.DETERMINISTIC, ExplorationType.MODE, ExplorationType.MEAN]


def _data(n: int, dim: int = 1, is_init: bool | None = None) -> TensorDict:
    data = TensorDict(action=torch.zeros(n, dim), batch_size=[n])
    if is_init is not None:
        data.set("is_init", torch.full((n, 1), is_init))
    return data


def _ou(n_dim: int = 1, **kwargs: object) -> OrnsteinUhlenbeckProcessModule:
    kwargs.setdefault("generator", torch.Generator().manual_seed(0))
    return OrnsteinUhlenbeckProcessModule(Unbounded(shape=(n_dim,)), **kwargs)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- Ornstein-Uhlenbeck
def test_ou_noise_statistics_match_the_process() -> None:
    theta, sigma, dt, n_envs, n_steps = 0.15, 0.3, 0.01, 20000, 30
    ou = _ou(theta=theta, sigma=sigma, dt=dt)
    data = _data(n_envs, is_init=True)
    noises = []
    for _ in range(n_steps):
        data.set("action", torch.zeros(n_envs, 1))
        data = ou(data)
        data.set("is_init", torch.zeros(n_envs, 1, dtype=torch.bool))
        noises.append(data["_ou_prev_noise"].squeeze(-1))
        torch.testing.assert_close(data["action"], data["_ou_prev_noise"])  # eps starts at 1
    noise = torch.stack(noises)
    a = 1 - theta * dt
    expected_var = sigma**2 * dt * sum(a ** (2 * k) for k in range(n_steps))
    assert abs(float(noise[-1].var()) / expected_var - 1) < 0.05
    assert abs(float(noise[-1].mean())) < 4 * math.sqrt(expected_var / n_envs)
    # increments are independent N(0, sigma^2 dt): the process is autocorrelated, its innovations are not
    innovations = noise[1:] - a * noise[:-1]
    assert abs(float(innovations.std()) / (sigma * math.sqrt(dt)) - 1) < 0.02
    correlation = torch.corrcoef(torch.stack([noise[-1], noise[-2]]))[0, 1]
    assert correlation > 0.9
    assert data["_ou_steps"].unique().tolist() == [n_steps]


def test_ou_restarts_where_is_init() -> None:
    ou = _ou(x0=0.5, sigma=1e-6)
    data = _data(4, is_init=True)
    for _ in range(5):
        data = ou(data.set("action", torch.zeros(4, 1)))
        data.set("is_init", torch.zeros(4, 1, dtype=torch.bool))
    drifted = data["_ou_prev_noise"].clone()
    data.set("is_init", torch.tensor([[True], [False], [True], [False]]))
    data = ou(data.set("action", torch.zeros(4, 1)))
    assert data["_ou_steps"].squeeze(-1).tolist() == [1, 6, 1, 6]
    step_from_x0 = 0.5 + 0.15 * (0.0 - 0.5) * 0.01
    torch.testing.assert_close(data["_ou_prev_noise"][[0, 2]], torch.full((2, 1), step_from_x0), atol=1e-5, rtol=0)
    continued = drifted[[1, 3]] + 0.15 * (0.0 - drifted[[1, 3]]) * 0.01
    torch.testing.assert_close(data["_ou_prev_noise"][[1, 3]], continued, atol=1e-5, rtol=0)


def test_ou_eps_annealing_and_sigma_annealing() -> None:
    ou = _ou(eps_init=1.0, eps_end=0.2, annealing_num_steps=100, sigma=0.4, sigma_min=0.1, n_steps_annealing=30)
    ou.step(25)
    assert ou.eps.item() == pytest.approx(0.8)
    ou.step(1000)
    assert ou.eps.item() == pytest.approx(0.2)
    steps = torch.tensor([[0], [15], [30], [100]])
    torch.testing.assert_close(ou.current_sigma(steps), torch.tensor([[0.4], [0.25], [0.1], [0.1]]))
    # the action moves by eps * noise
    data = ou(_data(3, is_init=True))
    torch.testing.assert_close(data["action"], 0.2 * data["_ou_prev_noise"])


def test_ou_leaves_action_alone_unless_random() -> None:
    ou = _ou()
    for kind in NOT_EXPLORING:
        with set_exploration_type(kind):
            out = ou(_data(3, is_init=True))
        assert out["action"].abs().max() == 0 and "_ou_prev_noise" not in out.keys()
    with set_exploration_type(ExplorationType.RANDOM):
        assert ou(_data(3, is_init=True))["action"].abs().min() > 0
    assert ou(_data(3, is_init=True))["action"].abs().min() > 0  # RANDOM is the default


def test_ou_generator_reproduces_noise_and_safe_projection() -> None:
    a = _ou(generator=torch.Generator().manual_seed(7))(_data(5, is_init=True))["action"]
    b = _ou(generator=torch.Generator().manual_seed(7))(_data(5, is_init=True))["action"]
    c = _ou(generator=torch.Generator().manual_seed(8))(_data(5, is_init=True))["action"]
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a, c)
    bounded = OrnsteinUhlenbeckProcessModule(Bounded(-0.01, 0.01, shape=(1,)), sigma=10.0)
    assert bounded(_data(100, is_init=True))["action"].abs().max() <= 0.01
    unsafe = OrnsteinUhlenbeckProcessModule(Bounded(-0.01, 0.01, shape=(1,)), sigma=10.0, safe=False)
    assert unsafe(_data(100, is_init=True))["action"].abs().max() > 0.01
    with pytest.raises(KeyError, match="no action at 'action'"):
        bounded(TensorDict(observation=torch.zeros(3)))


def test_ou_without_is_init_starts_fresh_then_continues() -> None:
    ou = _ou()
    data = ou(_data(2))
    assert data["_ou_steps"].squeeze(-1).tolist() == [1, 1]
    data = ou(data.set("action", torch.zeros(2, 1)))
    assert data["_ou_steps"].squeeze(-1).tolist() == [2, 2]


def test_ou_multi_dim_actions_and_custom_key() -> None:
    ou = OrnsteinUhlenbeckProcessModule(Composite(action=Unbounded(shape=(2, 3))), key="ou_noise")
    data = TensorDict(action=torch.zeros(4, 2, 3), is_init=torch.ones(4, 1, dtype=torch.bool), batch_size=[4])
    out = ou(data)
    assert out["ou_noise"].shape == (4, 2, 3) and out["ou_noise_steps"].shape == (4, 1)


def test_tutorial_exploration_policy_on_gym_pendulum() -> None:
    """The seed tutorial's ``actor_model_explore``: actor + OU noise, stepped by frames."""
    env = TransformedEnv(GymEnv("Pendulum-v1"), InitTracker())
    env.append_transform(StepCounter(8))
    net = TensorDictModule(DdpgMlpActor(action_dim=1), in_keys=["observation"], out_keys=["param"])
    actor = ProbabilisticActor(net, distribution_class=TanhDelta, in_keys=["param"],
                               spec=CompositeSpec(action=env.action_spec))
    actor(env.reset())
    annealing_frames = 1_000
    actor_model_explore = TensorDictSequential(
        actor,
        OrnsteinUhlenbeckProcessModule(spec=actor.spec.clone(), annealing_num_steps=annealing_frames).to("cpu"),
    )
    actor_model_explore.share_memory()
    with set_exploration_type(ExplorationType.RANDOM):
        rollout = env.rollout(20, actor_model_explore, break_when_any_done=False)
    # the noise restarts with each trajectory (StepCounter truncates every 8 steps)
    assert rollout["_ou_steps"].squeeze(-1).tolist() == [1, 2, 3, 4, 5, 6, 7, 8] * 2 + [1, 2, 3, 4]
    assert bool((rollout["action"].abs() <= 2.0).all())
    clean = actor(rollout.exclude("action"))["action"]
    assert not torch.allclose(rollout["action"], clean)
    actor_model_explore[1].step(rollout.numel())
    assert actor_model_explore[1].eps.item() == pytest.approx(1.0 - 0.9 * 20 / annealing_frames)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        evaluation = env.rollout(5, actor_model_explore)
    torch.testing.assert_close(evaluation["action"], actor(evaluation.exclude("action"))["action"])


# ----------------------------------------------------------------------------- additive Gaussian
def test_additive_gaussian_statistics_and_annealing() -> None:
    module = AdditiveGaussianModule(Unbounded(shape=(1,)), sigma_init=0.5, sigma_end=0.1, annealing_num_steps=10,
                                    mean=0.2, std=2.0, generator=torch.Generator().manual_seed(0))
    noise = module(_data(50000))["action"]
    assert float(noise.mean()) == pytest.approx(0.5 * 0.2, abs=0.02)
    assert float(noise.std()) == pytest.approx(0.5 * 2.0, rel=0.02)
    module.step(5)
    assert module.sigma.item() == pytest.approx(0.3)
    module.step(100)
    assert module.sigma.item() == pytest.approx(0.1)
    for kind in NOT_EXPLORING:
        with set_exploration_type(kind):
            assert module(_data(3))["action"].abs().max() == 0


def test_additive_gaussian_projects_into_spec() -> None:
    module = AdditiveGaussianModule(Bounded(-0.1, 0.1, shape=(2,)), sigma_init=5.0)
    out = module(_data(1000, dim=2))["action"]
    assert out.abs().max() == pytest.approx(0.1)


# ----------------------------------------------------------------------------- epsilon-greedy
def test_egreedy_replaces_with_probability_eps() -> None:
    spec = Categorical(10)
    module = EGreedyModule(spec, eps_init=0.3, eps_end=0.3, generator=torch.Generator().manual_seed(0))
    actions = torch.full((20000,), 9)
    out = module(TensorDict(action=actions.clone(), batch_size=[20000]))["action"]
    changed = (out != 9).float().mean()
    # a random action is 9 one time in ten, so the action changes with probability 0.3 * 0.9
    assert float(changed) == pytest.approx(0.27, abs=0.015)
    for kind in NOT_EXPLORING:
        with set_exploration_type(kind):
            assert torch.equal(module(TensorDict(action=actions.clone(), batch_size=[20000]))["action"], actions)


def test_egreedy_schedule() -> None:
    module = EGreedyModule(OneHot(3), eps_init=1.0, eps_end=0.05, annealing_num_steps=100)
    schedule = []
    for _ in range(4):
        schedule.append(round(module.eps.item(), 4))
        module.step(40)
    assert schedule == [1.0, 0.62, 0.24, 0.05]
    with pytest.raises(ValueError, match=r"eps_init and eps_end in \[0, 1\]"):
        EGreedyModule(OneHot(3), eps_init=1.5)


def test_egreedy_masks_for_one_hot_and_categorical() -> None:
    mask = torch.tensor([[True, False, True], [False, True, False]]).repeat(500, 1)
    one_hot = EGreedyModule(OneHot(3), eps_init=1.0, action_mask_key="action_mask")
    data = TensorDict(action=torch.zeros(1000, 3, dtype=torch.bool), action_mask=mask, batch_size=[1000])
    out = one_hot(data)["action"]
    assert out.dtype == torch.bool and bool(out.sum(-1).eq(1).all())
    assert bool(mask[out].all())
    categorical = EGreedyModule(Categorical(3, shape=(1,)), eps_init=1.0, action_mask_key="action_mask")
    data = TensorDict(action=torch.zeros(1000, 1, dtype=torch.long), action_mask=mask, batch_size=[1000])
    chosen = categorical(data)["action"]
    assert bool(mask.gather(-1, chosen).all())
    assert set(chosen[::2].flatten().tolist()) == {0, 2}
    with pytest.raises(ValueError, match="OneHot or Categorical"):
        EGreedyModule(Bounded(-1.0, 1.0, shape=(1,)), action_mask_key="m")(
            TensorDict(action=torch.zeros(2, 1), m=torch.ones(2, 1, dtype=torch.bool), batch_size=[2])
        )


def test_qvalue_actor_with_egreedy_on_cartpole() -> None:
    env = GymEnv("CartPole-v1")
    actor = QValueActor(nn.Linear(4, 2), spec=env.action_spec)
    policy = TensorDictSequential(actor, EGreedyModule(env.action_spec, eps_init=0.5, annealing_num_steps=10))
    rollout = env.rollout(30, policy, break_when_any_done=False)
    assert rollout["action"].shape == (30, 2) and bool(rollout["action"].sum(-1).eq(1).all())
    greedy = rollout["action_value"].argmax(-1)
    taken = rollout["action"].long().argmax(-1)
    assert bool((taken != greedy).any())  # some actions were random
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        evaluation = env.rollout(10, policy)
    assert torch.equal(evaluation["action"].long().argmax(-1), evaluation["action_value"].argmax(-1))
