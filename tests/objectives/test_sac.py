"""SACLoss: the formula (both versions), entropy tuning, gradient isolation, bad input, learning on Pendulum."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict.nn import TensorDictModule

from cadence.data import Bounded
from cadence.modules import MLP, NormalParamExtractor, ProbabilisticActor, TanhNormal, ValueOperator
from cadence.objectives import SACLoss, SoftUpdate, ValueEstimators
from tests.objectives._helpers import (
    Critic,
    grads_are_empty,
    grads_are_set,
    huber,
    missing_key_message,
    train_off_policy_pendulum,
    transitions,
)


class _GaussianHead(torch.nn.Module):
    """``loc = Linear(observation)``, ``scale = exp(log_std)``: easy to write out by hand."""

    def __init__(self, observation_size: int, action_size: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(observation_size, action_size)
        self.log_std = torch.nn.Parameter(torch.full((action_size,), -0.5))

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loc = self.linear(observation)
        return loc, self.log_std.exp().expand_as(loc)


def _actor(action_size: int = 1, spec: Bounded | None = None) -> ProbabilisticActor:
    head = TensorDictModule(_GaussianHead(3, action_size), ["observation"], ["loc", "scale"])
    return ProbabilisticActor(head, in_keys=["loc", "scale"], distribution_class=TanhNormal, spec=spec)


def _critic(action_size: int = 1) -> ValueOperator:
    return ValueOperator(Critic(3, action_size), in_keys=["observation", "action"])


def _perturb(params) -> None:
    g = torch.Generator().manual_seed(5)
    for value in params.values(True, True):
        value.add_(torch.randn(value.shape, generator=g) * 0.3)


def _tanh_normal(loc: torch.Tensor, scale: torch.Tensor, eps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = loc + scale * eps
    log_prob = torch.distributions.Normal(loc, scale).log_prob(x) - torch.log1p(-torch.tanh(x) ** 2)
    return torch.tanh(x), log_prob.sum(-1)


def test_the_losses_equal_a_plain_torch_sac() -> None:
    torch.manual_seed(0)
    loss = SACLoss(_actor(), _critic(), alpha_init=0.7, gamma=0.9)
    _perturb(loss.target_qvalue_network_params)
    data = transitions(10, 3, torch.rand(10, 1) * 2 - 1)
    loss.generator.manual_seed(11)  # the actions are drawn from the loss's generator
    out = loss(data.clone())

    draws = torch.Generator().manual_seed(11)
    eps_next, eps_actor = torch.randn(10, 1, generator=draws), torch.randn(10, 1, generator=draws)
    w, b = loss.actor_network_params["module", "0", "module", "linear", "weight"], \
        loss.actor_network_params["module", "0", "module", "linear", "bias"]
    scale = loss.actor_network_params["module", "0", "module", "log_std"].exp()
    wq, bq = loss.qvalue_network_params["module", "net", "weight"], loss.qvalue_network_params["module", "net", "bias"]
    twq = loss.target_qvalue_network_params["module", "net", "weight"]
    tbq = loss.target_qvalue_network_params["module", "net", "bias"]

    def q(weights, biases, obs, act):
        return torch.stack([(torch.cat([obs, act], -1) @ weights[i].T + biases[i]).squeeze(-1) for i in range(2)])

    obs, next_obs = data["observation"], data["next", "observation"]
    reward, terminated = data["next", "reward"].squeeze(-1), data["next", "terminated"].squeeze(-1).float()
    next_action, next_log_prob = _tanh_normal(next_obs @ w.T + b, scale, eps_next)
    next_value = q(twq, tbq, next_obs, next_action).min(0).values - 0.7 * next_log_prob
    target = reward + 0.9 * (1 - terminated) * next_value
    loss_qvalue = huber(q(wq, bq, obs, data["action"]) - target).sum(0).mean()
    action, log_prob = _tanh_normal(obs @ w.T + b, scale, eps_actor)
    loss_actor = (0.7 * log_prob - q(wq, bq, obs, action).min(0).values).mean()
    loss_alpha = (-math.log(0.7) * (log_prob + (-1.0))).mean()

    torch.testing.assert_close(out["loss_qvalue"], loss_qvalue)
    torch.testing.assert_close(out["loss_actor"], loss_actor)
    torch.testing.assert_close(out["loss_alpha"], loss_alpha)
    torch.testing.assert_close(out["entropy"], -log_prob.mean())
    torch.testing.assert_close(out["alpha"], torch.tensor(0.7))


def test_the_first_version_equals_a_plain_torch_sac() -> None:
    torch.manual_seed(0)
    value_net = ValueOperator(torch.nn.Linear(3, 1))
    loss = SACLoss(_actor(), _critic(), value_net, alpha_init=0.5, gamma=0.8, loss_function="l2")
    _perturb(loss.target_value_network_params)
    data = transitions(10, 3, torch.rand(10, 1) * 2 - 1)
    loss.generator.manual_seed(3)
    out = loss(data.clone())
    assert "loss_value" in out.keys()

    draws = torch.Generator().manual_seed(3)
    _eps_actor, eps_value = torch.randn(10, 1, generator=draws), torch.randn(10, 1, generator=draws)
    w, b = loss.actor_network_params["module", "0", "module", "linear", "weight"], \
        loss.actor_network_params["module", "0", "module", "linear", "bias"]
    scale = loss.actor_network_params["module", "0", "module", "log_std"].exp()
    wq, bq = loss.qvalue_network_params["module", "net", "weight"], loss.qvalue_network_params["module", "net", "bias"]
    wv, bv = loss.value_network_params["module", "weight"], loss.value_network_params["module", "bias"]
    twv, tbv = loss.target_value_network_params["module", "weight"], loss.target_value_network_params["module", "bias"]
    obs, next_obs = data["observation"], data["next", "observation"]
    reward, terminated = data["next", "reward"].squeeze(-1), data["next", "terminated"].squeeze(-1).float()

    target = reward + 0.8 * (1 - terminated) * (next_obs @ twv.T + tbv).squeeze(-1)
    pred = torch.stack([(torch.cat([obs, data["action"]], -1) @ wq[i].T + bq[i]).squeeze(-1) for i in range(2)])
    torch.testing.assert_close(out["loss_qvalue"], (pred - target).pow(2).sum(0).mean())
    action, log_prob = _tanh_normal(obs @ w.T + b, scale, eps_value)
    q_min = torch.stack([(torch.cat([obs, action], -1) @ wq[i].T + bq[i]).squeeze(-1) for i in range(2)]).min(0).values
    value_target = q_min - 0.5 * log_prob
    torch.testing.assert_close(out["loss_value"], ((obs @ wv.T + bv).squeeze(-1) - value_target).pow(2).mean())


def test_gradients_go_only_where_they_should() -> None:
    loss = SACLoss(_actor(), _critic())
    out = loss(transitions(8, 3, torch.rand(8, 1)))
    out["loss_actor"].backward(retain_graph=True)
    assert grads_are_set(loss.actor_network_params) and grads_are_empty(loss.qvalue_network_params)
    assert loss.log_alpha.grad is None
    loss.zero_grad()
    out["loss_qvalue"].backward(retain_graph=True)
    assert grads_are_set(loss.qvalue_network_params) and grads_are_empty(loss.actor_network_params)
    loss.zero_grad()
    out["loss_alpha"].backward()
    assert loss.log_alpha.grad is not None and grads_are_empty(loss.actor_network_params)
    assert all(p.grad is None for p in loss.target_qvalue_network_params.values(True, True))


def test_alpha_is_tuned_towards_the_target_entropy_within_its_bounds() -> None:
    torch.manual_seed(0)
    loss = SACLoss(_actor(), _critic(), alpha_init=1.0, target_entropy=10.0, max_alpha=1.5)
    optimizer = torch.optim.SGD([loss.log_alpha], lr=0.5)
    for _ in range(5):
        # the policy's entropy is far under the target: alpha grows, up to its ceiling
        optimizer.zero_grad()
        loss(transitions(8, 3, torch.rand(8, 1)))["loss_alpha"].backward()
        optimizer.step()
    assert loss.alpha.item() == pytest.approx(1.5)


def test_fixed_alpha_and_target_entropy_auto() -> None:
    loss = SACLoss(_actor(), _critic(), fixed_alpha=True, alpha_init=0.2)
    out = loss(transitions(4, 3, torch.rand(4, 1)))
    assert out["loss_alpha"].item() == 0.0 and "log_alpha" not in dict(loss.named_parameters())
    assert out["alpha"].item() == pytest.approx(0.2)
    # "auto": minus the action size, from the actor's spec, the given spec, or the first action
    assert SACLoss(_actor(2, Bounded(-1.0, 1.0, shape=(2,))), _critic(2)).target_entropy == -2.0
    assert SACLoss(_actor(2), _critic(2), action_spec=Bounded(-1.0, 1.0, shape=(5, 2))).target_entropy == -2.0
    lazy = SACLoss(_actor(2), _critic(2))
    assert lazy.target_entropy is None
    lazy(transitions(4, 3, torch.rand(4, 2)))
    assert lazy.target_entropy == -2.0


def test_value_estimators_and_keys() -> None:
    loss = SACLoss(_actor(), _critic(), gamma=0.5)
    assert loss.value_estimator.gamma.item() == 0.5
    loss.make_value_estimator(ValueEstimators.TD1)
    with pytest.raises(ValueError, match="GAE"):
        loss.make_value_estimator(ValueEstimators.GAE)
    loss.set_keys(reward="r")
    data = transitions(4, 3, torch.rand(4, 1))
    data["next", "r"] = data["next"].pop("reward")
    assert torch.isfinite(loss(data)["loss_qvalue"]) and data["td_error"].shape == (4, 1)


def test_bad_input() -> None:
    loss = SACLoss(_actor(), _critic())
    message = missing_key_message(loss, transitions(4, 3, torch.rand(4, 1)).exclude("action"))
    assert "needs ['action']" in message and "'observation'" in message
    with pytest.raises(ValueError, match="action"):
        SACLoss(_actor(2), _critic(1))
    with pytest.raises(TypeError, match="probabilistic actor"):
        SACLoss(TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"]), _critic())


@pytest.mark.slow
def test_sac_learns_pendulum() -> None:
    torch.manual_seed(0)
    network = MLP(in_features=3, out_features=2, num_cells=[64, 64], activation_class=torch.nn.ReLU)
    actor = ProbabilisticActor(
        TensorDictModule(torch.nn.Sequential(network, NormalParamExtractor()), ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"], distribution_class=TanhNormal, spec=Bounded(-2.0, 2.0, shape=(1,)),
    )
    loss = SACLoss(actor, ValueOperator(Critic(3, 1, hidden=64), in_keys=["observation", "action"]))
    loss.make_value_estimator(gamma=0.95)
    updater = SoftUpdate(loss, tau=0.02)
    before, after = train_off_policy_pendulum(loss, actor, actor, updater=updater.step)
    assert after > before + 150, (before, after)
