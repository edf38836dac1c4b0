"""DDPGLoss: the formula, gradient isolation, the seed tutorial's own DDPG loss, Pendulum."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule

from cadence.modules import MLP, Actor, ActorCriticWrapper, ValueOperator
from cadence.objectives import DDPGLoss, LossModule, SoftUpdate, ValueEstimators
from cadence.objectives.utils import default_value_kwargs, distance_loss
from cadence.objectives.value import TD0Estimator, TD1Estimator, TDLambdaEstimator
from tests.objectives._helpers import (
    Critic,
    GaussianNoise,
    grads_are_empty,
    grads_are_set,
    missing_key_message,
    train_off_policy_pendulum,
    transitions,
)


def _nets() -> tuple[TensorDictModule, TensorDictModule]:
    actor = Actor(torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Tanh()))
    return actor, ValueOperator(Critic(3, 1), in_keys=["observation", "action"])


def _written_out(actor_w, actor_b, q_w, q_b, target_actor, target_q, data, gamma):
    obs, next_obs = data["observation"], data["next", "observation"]
    reward, terminated = data["next", "reward"].squeeze(-1), data["next", "terminated"].squeeze(-1).float()
    next_action = torch.tanh(next_obs @ target_actor[0].T + target_actor[1])
    next_value = (torch.cat([next_obs, next_action], -1) @ target_q[0].T + target_q[1]).squeeze(-1)
    target = reward + gamma * (1 - terminated) * next_value
    predicted = (torch.cat([obs, data["action"]], -1) @ q_w.T + q_b).squeeze(-1)
    actor_value = (torch.cat([obs, torch.tanh(obs @ actor_w.T + actor_b)], -1) @ q_w.T + q_b).squeeze(-1)
    return predicted, target, actor_value


def test_the_losses_equal_a_plain_torch_ddpg() -> None:
    torch.manual_seed(0)
    actor, critic = _nets()
    loss = DDPGLoss(actor, critic, gamma=0.9)
    g = torch.Generator().manual_seed(2)
    for params in (loss.target_actor_network_params, loss.target_value_network_params):
        for value in params.values(True, True):
            value.add_(torch.randn(value.shape, generator=g) * 0.3)
    data = transitions(10, 3, torch.rand(10, 1) * 2 - 1)
    out = loss(data)
    ta, tq = loss.target_actor_network_params, loss.target_value_network_params
    predicted, target, actor_value = _written_out(
        actor.module[0].weight, actor.module[0].bias, critic.module.net.weight, critic.module.net.bias,
        (ta["module", "0", "weight"], ta["module", "0", "bias"]), (tq["module", "net", "weight"], tq["module", "net", "bias"]),
        data, 0.9,
    )
    torch.testing.assert_close(out["loss_value"], (predicted - target).pow(2).mean())
    torch.testing.assert_close(out["loss_actor"], -actor_value.mean())
    torch.testing.assert_close(out["target_value"], target.mean())
    torch.testing.assert_close(out["pred_value_max"], predicted.max())
    torch.testing.assert_close(data["td_error"], (predicted - target).pow(2).unsqueeze(-1))


def test_the_actor_loss_leaves_the_critic_alone_and_targets_get_no_gradient() -> None:
    actor, critic = _nets()
    loss = DDPGLoss(actor, critic)
    out = loss(transitions(8, 3, torch.rand(8, 1)))
    out["loss_actor"].backward(retain_graph=True)
    assert grads_are_set(loss.actor_network_params) and grads_are_empty(loss.value_network_params)
    loss.zero_grad()
    out["loss_value"].backward()
    assert grads_are_set(loss.value_network_params) and grads_are_empty(loss.actor_network_params)
    for params in (loss.target_actor_network_params, loss.target_value_network_params):
        assert all(p.grad is None for p in params.values(True, True))


def test_bad_input() -> None:
    loss = DDPGLoss(*_nets())
    message = missing_key_message(loss, transitions(4, 3, torch.rand(4, 1)).exclude(("next", "done")))
    assert "needs [('next', 'done')]" in message and "('next', 'reward')" in message
    with pytest.raises(ValueError, match="action"):
        DDPGLoss(Actor(torch.nn.Linear(3, 2)), ValueOperator(Critic(3, 1), in_keys=["observation", "action"]))
    with pytest.raises(ValueError, match="GAE"):
        loss.make_value_estimator(ValueEstimators.GAE)


# ---------------------------------------------------------------------------- the seed's own DDPG loss
# The tutorial's functions, as written there, with the import prefix changed to cadence.


def _init(
    self,
    actor_network: TensorDictModule,
    value_network: TensorDictModule,
) -> None:
    super(type(self), self).__init__()

    self.convert_to_functional(
        actor_network,
        "actor_network",
        create_target_params=True,
    )
    self.convert_to_functional(
        value_network,
        "value_network",
        create_target_params=True,
        compare_against=list(actor_network.parameters()),
    )

    self.actor_in_keys = actor_network.in_keys

    # Since the value we'll be using is based on the actor and value network,
    # we put them together in a single actor-critic container.
    actor_critic = ActorCriticWrapper(actor_network, value_network)
    self.actor_critic = actor_critic
    self.loss_function = "l2"


default_value_estimator = ValueEstimators.TD0


def make_value_estimator(self, value_type: ValueEstimators, **hyperparams):
    hp = dict(default_value_kwargs(value_type))
    if hasattr(self, "gamma"):
        hp["gamma"] = self.gamma
    hp.update(hyperparams)
    value_key = "state_action_value"
    if value_type == ValueEstimators.TD1:
        self._value_estimator = TD1Estimator(value_network=self.actor_critic, **hp)
    elif value_type == ValueEstimators.TD0:
        self._value_estimator = TD0Estimator(value_network=self.actor_critic, **hp)
    elif value_type == ValueEstimators.GAE:
        raise NotImplementedError(
            f"Value type {value_type} it not implemented for loss {type(self)}."
        )
    elif value_type == ValueEstimators.TDLambda:
        self._value_estimator = TDLambdaEstimator(value_network=self.actor_critic, **hp)
    else:
        raise NotImplementedError(f"Unknown value type {value_type}")
    self._value_estimator.set_keys(value=value_key)


def _loss_actor(
    self,
    tensordict,
) -> torch.Tensor:
    td_copy = tensordict.select(*self.actor_in_keys)
    # Get an action from the actor network: since we made it functional, we need to pass the params
    with self.actor_network_params.to_module(self.actor_network):
        td_copy = self.actor_network(td_copy)
    # get the value associated with that action
    with self.value_network_params.detach().to_module(self.value_network):
        td_copy = self.value_network(td_copy)
    return -td_copy.get("state_action_value")


def _loss_value(
    self,
    tensordict,
):
    td_copy = tensordict.clone()

    # V(s, a)
    with self.value_network_params.to_module(self.value_network):
        self.value_network(td_copy)
    pred_val = td_copy.get("state_action_value").squeeze(-1)

    # we manually reconstruct the parameters of the actor-critic, where the first
    # set of parameters belongs to the actor and the second to the value function.
    target_params = TensorDict(
        {
            "module": {
                "0": self.target_actor_network_params,
                "1": self.target_value_network_params,
            }
        },
        batch_size=self.target_actor_network_params.batch_size,
        device=self.target_actor_network_params.device,
    )
    with target_params.to_module(self.actor_critic):
        target_value = self.value_estimator.value_estimate(tensordict).squeeze(-1)

    # Computes the value loss: L2, L1 or smooth L1 depending on `self.loss_function`
    loss_value = distance_loss(pred_val, target_value, loss_function=self.loss_function)
    td_error = (pred_val - target_value).pow(2)

    return loss_value, td_error, pred_val, target_value


def _forward(self, input_tensordict: TensorDictBase) -> TensorDict:
    loss_value, td_error, pred_val, target_value = self.loss_value(
        input_tensordict,
    )
    td_error = td_error.detach()
    td_error = td_error.unsqueeze(input_tensordict.ndimension())
    if input_tensordict.device is not None:
        td_error = td_error.to(input_tensordict.device)
    input_tensordict.set(
        "td_error",
        td_error,
        inplace=True,
    )
    loss_actor = self.loss_actor(input_tensordict)
    return TensorDict(
        source={
            "loss_actor": loss_actor.mean(),
            "loss_value": loss_value.mean(),
            "pred_value": pred_val.mean().detach(),
            "target_value": target_value.mean().detach(),
            "pred_value_max": pred_val.max().detach(),
            "target_value_max": target_value.max().detach(),
        },
        batch_size=[],
    )


class TutorialDDPGLoss(LossModule):
    default_value_estimator = default_value_estimator
    make_value_estimator = make_value_estimator

    __init__ = _init
    forward = _forward
    loss_value = _loss_value
    loss_actor = _loss_actor


def _crops() -> TensorDict:
    """The tutorial's [batch, 25] trajectory crops (two of them here), with episode ends."""
    g = torch.Generator().manual_seed(0)
    done = torch.zeros(2, 25, 1, dtype=torch.bool)
    done[0, 10] = done[1, 24] = True
    return TensorDict({"observation": torch.randn(2, 25, 3, generator=g), "action": torch.rand(2, 25, 1, generator=g),
                       "next": {"observation": torch.randn(2, 25, 3, generator=g),
                                "reward": torch.randn(2, 25, 1, generator=g), "done": done,
                                "terminated": done.clone()}}, [2, 25])


@pytest.mark.parametrize("value_type", [ValueEstimators.TD0, ValueEstimators.TD1, ValueEstimators.TDLambda])
def test_the_tutorial_loss_runs_and_agrees_with_ddpg_loss(value_type: ValueEstimators) -> None:
    torch.manual_seed(0)
    actor, critic = _nets()
    tutorial = TutorialDDPGLoss(actor, critic)
    ours = DDPGLoss(actor, critic)
    hyperparams = {"gamma": 0.99, "lmbda": 0.9} if value_type is ValueEstimators.TDLambda else {"gamma": 0.99}
    tutorial.make_value_estimator(value_type, **hyperparams)
    ours.make_value_estimator(value_type, **hyperparams)
    first, second = _crops(), _crops()
    expected, got = tutorial(first), ours(second)
    assert sorted(got.keys()) == sorted(expected.keys())
    for key in expected.keys():
        torch.testing.assert_close(got[key], expected[key])
    torch.testing.assert_close(first["td_error"], second["td_error"])

    # the tutorial's optimisers and target updater
    updater = SoftUpdate(tutorial, eps=1 - 0.001)
    optimizer_actor = torch.optim.Adam(tutorial.actor_network_params.values(True, True), lr=1e-4)
    optimizer_value = torch.optim.Adam(tutorial.value_network_params.values(True, True), lr=1e-3, weight_decay=1e-2)
    expected["loss_actor"].backward()
    optimizer_actor.step()
    optimizer_actor.zero_grad()
    expected["loss_value"].backward()
    optimizer_value.step()
    optimizer_value.zero_grad()
    updater.step()
    assert not torch.equal(tutorial.target_value_network_params["module", "net", "weight"],
                           tutorial.value_network_params["module", "net", "weight"])
    with pytest.raises(NotImplementedError):
        tutorial.make_value_estimator(ValueEstimators.GAE)


@pytest.mark.slow
def test_ddpg_learns_pendulum() -> None:
    torch.manual_seed(0)
    network = MLP(in_features=3, out_features=1, num_cells=[64, 64], activation_class=torch.nn.ReLU)
    actor = Actor(torch.nn.Sequential(network, torch.nn.Tanh(), _Scale(2.0)))
    loss = DDPGLoss(actor, ValueOperator(Critic(3, 1, hidden=64), in_keys=["observation", "action"]))
    loss.make_value_estimator(gamma=0.95)
    updater = SoftUpdate(loss, tau=0.02)
    explore = Actor(torch.nn.Sequential(actor.module, GaussianNoise(0.3, -2.0, 2.0)))
    before, after = train_off_policy_pendulum(loss, actor, explore, updater=updater.step)
    assert after > before + 150, (before, after)


class _Scale(torch.nn.Module):
    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.factor * x
