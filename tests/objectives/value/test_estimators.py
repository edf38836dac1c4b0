"""The estimator modules: values from a network (or the data), written entries, keys,
parameters, gradients, and the DDPG tutorial's use (an actor-critic, target parameters)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential

from cadence.objectives.value import GAE, TD0Estimator, TD1Estimator, TDLambdaEstimator
from tests.objectives.value import _reference as ref

TOL = {"atol": 1e-5, "rtol": 1e-5}


def value_net(seed: int = 0) -> TensorDictModule:
    torch.manual_seed(seed)
    return TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["state_value"])


def trajectories(seed: int, batch: tuple[int, ...], steps: int, done_rate: float = 0.2) -> TensorDict:
    """Data holding several trajectories one after the other along time, random ends."""
    generator = torch.Generator().manual_seed(seed)
    shape = (*batch, steps)
    done = torch.rand((*shape, 1), generator=generator) < done_rate
    return TensorDict(
        {
            "observation": torch.randn((*shape, 3), generator=generator),
            "action": torch.randn((*shape, 2), generator=generator),
            "next": {
                "observation": torch.randn((*shape, 3), generator=generator),
                "reward": torch.randn((*shape, 1), generator=generator),
                "done": done,
                "terminated": done & (torch.rand((*shape, 1), generator=generator) < 0.5),
            },
        },
        list(shape),
    )


def expected(kind: str, data: TensorDict, net: TensorDictModule, gamma: float, lmbda: float):
    with torch.no_grad():
        value = net.module(data["observation"])
        next_value = net.module(data["next", "observation"])
    flags = data["next", "reward"], data["next", "done"], data["next", "terminated"]
    reward, done, terminated = flags
    if kind == "gae":
        advantage, target = ref.gae(gamma, lmbda, value, next_value, reward, done, terminated)
        return advantage.float(), target.float()
    if kind == "td0":
        target = ref.td0_return(gamma, next_value, reward, terminated)
    else:
        target = ref.lambda_return(gamma, 1.0 if kind == "td1" else lmbda, next_value, reward, done, terminated)
    return (target - value.double()).float(), target.float()


def make(kind: str, net, gamma: float, lmbda: float, **kwargs):
    if kind == "td0":
        return TD0Estimator(gamma=gamma, value_network=net, **kwargs)
    if kind == "td1":
        return TD1Estimator(gamma=gamma, value_network=net, **kwargs)
    if kind == "tdlambda":
        return TDLambdaEstimator(gamma=gamma, lmbda=lmbda, value_network=net, **kwargs)
    return GAE(gamma=gamma, lmbda=lmbda, value_network=net, **kwargs)


KINDS = ["td0", "td1", "tdlambda", "gae"]


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(KINDS),
    st.integers(0, 10_000),
    st.lists(st.integers(1, 3), max_size=2).map(tuple),
    st.integers(1, 30),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.booleans(),
)
def test_estimators_match_reference(kind, seed, batch, steps, gamma, lmbda, vectorized):
    net = value_net(seed)
    data = trajectories(seed, batch, steps)
    kwargs = {} if kind == "td0" else {"vectorized": vectorized}
    estimator = make(kind, net, gamma, lmbda, **kwargs)
    advantage, target = expected(kind, data, net, gamma, lmbda)
    out = estimator(data.clone())
    torch.testing.assert_close(out["advantage"], advantage, **TOL)
    torch.testing.assert_close(out["value_target"], target, **TOL)
    torch.testing.assert_close(estimator.value_estimate(data.clone()), target, **TOL)


@pytest.mark.parametrize("kind", KINDS)
def test_tutorial_crops_of_25_steps(kind):
    # the tutorial's replay buffer yields [batch, 25] crops of longer trajectories
    data = trajectories(7, (64,), 25, done_rate=0.05)
    net = value_net()
    out = make(kind, net, 0.99, 0.9)(data)
    assert out["advantage"].shape == out["value_target"].shape == (64, 25, 1)
    assert out["state_value"].shape == out["next", "state_value"].shape == (64, 25, 1)
    torch.testing.assert_close(out["value_target"], expected(kind, data, net, 0.99, 0.9)[1], **TOL)


@pytest.mark.parametrize("kind", KINDS)
def test_gradients_only_when_differentiable(kind):
    net = value_net()
    data = trajectories(1, (4,), 6)
    out = make(kind, net, 0.9, 0.9)(data.clone())
    assert not out["value_target"].requires_grad and not out["advantage"].requires_grad
    out = make(kind, net, 0.9, 0.9, differentiable=True)(data.clone())
    out["advantage"].sum().backward()
    assert net.module.weight.grad is not None and net.module.weight.grad.abs().sum() > 0


def test_values_already_in_the_data():
    data = trajectories(2, (3,), 8)
    net = value_net()
    with torch.no_grad():
        data["state_value"] = net.module(data["observation"])
        data["next", "state_value"] = net.module(data["next", "observation"])
    for kind in KINDS:
        out = make(kind, None, 0.95, 0.7)(data.clone())
        torch.testing.assert_close(out["value_target"], expected(kind, data, net, 0.95, 0.7)[1], **TOL)


def test_params_and_target_params():
    net = value_net()
    data = trajectories(3, (2,), 5)
    params = TensorDict.from_module(net).detach().clone()
    target = params.clone().zero_()
    estimator = TD0Estimator(gamma=0.9, value_network=net)
    out = estimator(data.clone(), params=params, target_params=target)
    # a zero network gives V(s') = 0: the target is the reward
    torch.testing.assert_close(out["value_target"], data["next", "reward"])
    torch.testing.assert_close(out["next", "state_value"], torch.zeros(2, 5, 1))
    # target_params given to value_estimate replace the network's own for the next states
    torch.testing.assert_close(estimator.value_estimate(data.clone(), target_params=target), data["next", "reward"])


def test_shifted_gives_the_same_numbers():
    net = value_net()
    data = trajectories(4, (3,), 9)
    plain = TDLambdaEstimator(gamma=0.9, lmbda=0.8, value_network=net)(data.clone())
    shifted = TDLambdaEstimator(gamma=0.9, lmbda=0.8, value_network=net, shifted=True)(data.clone())
    torch.testing.assert_close(shifted["advantage"], plain["advantage"])
    with pytest.raises(ValueError, match="target_params"):
        TDLambdaEstimator(gamma=0.9, lmbda=0.8, value_network=net, shifted=True)(
            data.clone(), target_params=TensorDict.from_module(net)
        )


def test_actor_critic_with_state_action_value_as_in_the_tutorial():
    torch.manual_seed(0)
    actor = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action"])
    qnet = TensorDictModule(_QNet(), ["observation", "action"], ["state_action_value"])
    actor_critic = TensorDictSequential(actor, qnet)
    estimator = TDLambdaEstimator(gamma=0.99, lmbda=0.9, value_network=actor_critic, differentiable=True)
    estimator.set_keys(value="state_action_value")
    data = trajectories(5, (4,), 25)
    stored_action = data["action"].clone()
    # the tutorial swaps target parameters into the actor-critic around value_estimate
    target_params = TensorDict.from_module(actor_critic).detach().clone()
    with target_params.to_module(actor_critic):
        target = estimator.value_estimate(data)
    with torch.no_grad():
        next_value = actor_critic(data["next"].copy())["state_action_value"]
    reward, done, terminated = data["next", "reward"], data["next", "done"], data["next", "terminated"]
    torch.testing.assert_close(target, ref.lambda_return(0.99, 0.9, next_value, reward, done, terminated).float(), **TOL)
    # the trainable parameters get no gradient from a target computed with the target ones
    if target.requires_grad:
        target.sum().backward()
    assert all(p.grad is None for p in actor_critic.parameters())
    assert torch.equal(data["action"], stored_action)  # the data's actions are left alone
    assert "action" not in data["next"].keys()


class _QNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(5, 1)

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.cat([observation, action], -1))


def test_keys_and_bad_input():
    estimator = GAE(gamma=0.9, lmbda=0.9, value_network=None, advantage_key="adv", value_target_key=("t", "v"))
    assert estimator.out_keys == ["adv", ("t", "v")]
    data = trajectories(6, (2,), 4)
    with pytest.raises(KeyError, match="state_value"):
        estimator(data)
    with pytest.raises(ValueError, match="unknown roles"):
        estimator.set_keys(values="x")
    with pytest.raises(KeyError, match="reward"):
        TD0Estimator(gamma=0.9, value_network=value_net())(data.exclude(("next", "reward")))
    with pytest.raises(ValueError, match="time dim"):
        TD0Estimator(gamma=0.9, value_network=value_net())(data[0, 0])
    estimator.set_keys(reward="r")
    assert ("next", "r") in estimator.in_keys


def test_average_gae_and_rewards():
    data = trajectories(8, (16,), 10)
    out = GAE(gamma=0.9, lmbda=0.9, value_network=value_net(), average_gae=True)(data.clone())
    assert abs(out["advantage"].mean().item()) < 1e-5 and abs(out["advantage"].std().item() - 1) < 1e-4
    scaled = data.clone()
    scaled["next", "reward"] = scaled["next", "reward"] * 10 + 3
    a = TD0Estimator(gamma=0.9, value_network=value_net(), average_rewards=True)(data.clone())
    b = TD0Estimator(gamma=0.9, value_network=value_net(), average_rewards=True)(scaled)
    torch.testing.assert_close(a["value_target"], b["value_target"], **TOL)
