"""TD3Loss: the formula, gradient isolation, options, bad input, learning on Pendulum."""

from __future__ import annotations

import pytest
import torch
from tensordict.nn import TensorDictModule

from cadence.data import Bounded
from cadence.modules import MLP, Actor, ValueOperator
from cadence.objectives import SoftUpdate, TD3Loss, ValueEstimators
from tests.objectives._helpers import (
    Critic,
    GaussianNoise,
    grads_are_empty,
    grads_are_set,
    huber,
    missing_key_message,
    train_off_policy_pendulum,
    transitions,
)


def _nets(action_size: int = 1) -> tuple[TensorDictModule, TensorDictModule]:
    actor = Actor(torch.nn.Sequential(torch.nn.Linear(3, action_size), torch.nn.Tanh()))
    critic = ValueOperator(Critic(3, action_size), in_keys=["observation", "action"])
    return actor, critic


def _perturb_targets(loss: TD3Loss) -> None:
    g = torch.Generator().manual_seed(7)
    for params in (loss.target_actor_network_params, loss.target_qvalue_network_params):
        for value in params.values(True, True):
            value.add_(torch.randn(value.shape, generator=g) * 0.3)


def test_the_losses_equal_a_plain_torch_td3() -> None:
    torch.manual_seed(0)
    actor, critic = _nets()
    loss = TD3Loss(actor, critic, bounds=(-1.0, 1.0), gamma=0.9, policy_noise=0.4, noise_clip=0.3,
                   generator=torch.Generator().manual_seed(3))
    _perturb_targets(loss)
    data = transitions(10, 3, torch.rand(10, 1) * 2 - 1)
    out = loss(data.clone())

    wa, ba = loss.actor_network_params["module", "0", "weight"], loss.actor_network_params["module", "0", "bias"]
    twa = loss.target_actor_network_params["module", "0", "weight"]
    tba = loss.target_actor_network_params["module", "0", "bias"]
    wq, bq = loss.qvalue_network_params["module", "net", "weight"], loss.qvalue_network_params["module", "net", "bias"]
    twq = loss.target_qvalue_network_params["module", "net", "weight"]
    tbq = loss.target_qvalue_network_params["module", "net", "bias"]
    obs, act = data["observation"], data["action"]
    next_obs, reward = data["next", "observation"], data["next", "reward"].squeeze(-1)
    terminated = data["next", "terminated"].squeeze(-1).float()

    noise = (torch.randn(10, 1, generator=torch.Generator().manual_seed(3)) * 0.4).clamp(-0.3, 0.3)
    next_action = (torch.tanh(next_obs @ twa.T + tba) + noise).clamp(-1.0, 1.0)
    next_q = torch.stack([(torch.cat([next_obs, next_action], -1) @ twq[i].T + tbq[i]).squeeze(-1) for i in range(2)])
    next_value = next_q.min(0).values
    target = reward + 0.9 * (1 - terminated) * next_value
    pred = torch.stack([(torch.cat([obs, act], -1) @ wq[i].T + bq[i]).squeeze(-1) for i in range(2)])
    loss_qvalue = huber(pred - target).sum(0).mean()
    actor_action = torch.tanh(obs @ wa.T + ba)
    actor_q = (torch.cat([obs, actor_action], -1) @ wq[0].T + bq[0]).squeeze(-1)

    torch.testing.assert_close(out["loss_qvalue"], loss_qvalue)
    torch.testing.assert_close(out["loss_actor"], -actor_q.mean())
    torch.testing.assert_close(out["target_value"], target.mean())
    torch.testing.assert_close(out["next_state_value"], next_value.mean())
    torch.testing.assert_close(out["pred_value"], pred.mean())
    torch.testing.assert_close(out["state_action_value_actor"], actor_q.mean())


def test_the_td_error_is_written_into_the_input() -> None:
    loss = TD3Loss(*_nets(), bounds=(-1.0, 1.0), generator=torch.Generator().manual_seed(0))
    data = transitions(6, 3, torch.zeros(6, 1))
    loss(data)
    assert data["td_error"].shape == (6, 1) and not data["td_error"].requires_grad and (data["td_error"] >= 0).all()
    loss.set_keys(priority="priority")
    loss(data)
    assert "priority" in data.keys()


def test_the_actor_loss_trains_the_actor_only_and_targets_get_no_gradient() -> None:
    loss = TD3Loss(*_nets(), bounds=(-1.0, 1.0))
    out = loss(transitions(8, 3, torch.rand(8, 1)))
    out["loss_actor"].backward(retain_graph=True)
    assert grads_are_set(loss.actor_network_params) and grads_are_empty(loss.qvalue_network_params)
    loss.zero_grad()
    out["loss_qvalue"].backward()
    assert grads_are_set(loss.qvalue_network_params) and grads_are_empty(loss.actor_network_params)
    for params in (loss.target_actor_network_params, loss.target_qvalue_network_params):
        assert all(p.grad is None and not p.requires_grad for p in params.values(True, True))


def test_twin_critics_are_distinct_and_targets_follow_soft_updates() -> None:
    loss = TD3Loss(*_nets(), bounds=(-1.0, 1.0), num_qvalue_nets=3)
    weight = loss.qvalue_network_params["module", "net", "weight"]
    assert weight.shape == (3, 1, 4) and not torch.equal(weight[0], weight[1])
    assert len(list(loss.parameters())) == 4  # the actor's weight and bias, the stacked critics'
    with torch.no_grad():
        weight.add_(1.0)
    before = loss.target_qvalue_network_params["module", "net", "weight"].clone()
    SoftUpdate(loss, tau=0.5).step()
    torch.testing.assert_close(loss.target_qvalue_network_params["module", "net", "weight"], before + 0.5)


def test_target_actions_stay_in_the_bounds() -> None:
    actor = Actor(torch.nn.Linear(3, 1))
    with torch.no_grad():
        actor.module.bias.fill_(10.0)  # the target policy asks far out of the bounds
    loss = TD3Loss(actor, ValueOperator(Critic(3, 1), in_keys=["observation", "action"]),
                   action_spec=Bounded(-2.0, 2.0, shape=(4, 1)), policy_noise=1.0, noise_clip=0.5)
    seen = []
    loss.qvalue_network.register_forward_pre_hook(lambda module, args: seen.append(args[0]["action"].detach()))
    loss(transitions(5, 3, torch.zeros(5, 1)))
    # the first critic call values the target actions: clipped into the bounds (the actor's
    # own actions, valued for the actor loss, are what the actor gives)
    assert torch.equal(seen[0], torch.full((5, 1), 2.0))


def test_the_actor_spec_gives_the_bounds_and_a_missing_one_fails() -> None:
    actor = Actor(torch.nn.Linear(3, 1), spec=Bounded(-0.5, 0.5, shape=(1,)))
    loss = TD3Loss(actor, ValueOperator(Critic(3, 1), in_keys=["observation", "action"]))
    assert loss.action_high.tolist() == [0.5]
    with pytest.raises(ValueError, match="action_spec=Bounded"):
        TD3Loss(*_nets())
    with pytest.raises(ValueError, match="not both"):
        TD3Loss(*_nets(), bounds=(-1, 1), action_spec=Bounded(-1.0, 1.0, shape=(1,)))


def test_value_estimators() -> None:
    loss = TD3Loss(*_nets(), bounds=(-1.0, 1.0), gamma=0.5)
    assert loss.value_estimator.gamma.item() == 0.5
    loss.make_value_estimator(ValueEstimators.TDLambda, lmbda=0.9)
    assert type(loss.value_estimator).__name__ == "TDLambdaEstimator"
    assert torch.isfinite(loss(transitions(6, 3, torch.zeros(6, 1)))["loss_qvalue"])
    with pytest.raises(ValueError, match="GAE"):
        loss.make_value_estimator(ValueEstimators.GAE)


def test_set_keys_renames_the_entries_read() -> None:
    loss = TD3Loss(*_nets(), bounds=(-1.0, 1.0))
    loss.set_keys(reward="r", terminated="end")
    data = transitions(4, 3, torch.zeros(4, 1))
    data["next", "r"] = data["next"].pop("reward")
    data["next", "end"] = data["next"].pop("terminated")
    assert torch.isfinite(loss(data)["loss_qvalue"])


def test_reductions() -> None:
    data = transitions(6, 3, torch.zeros(6, 1))
    none = TD3Loss(*_nets(), bounds=(-1.0, 1.0), reduction="none")(data.clone())
    assert none["loss_actor"].shape == (6,) and none["loss_qvalue"].shape == (6,)
    with pytest.raises(ValueError, match="reduction"):
        TD3Loss(*_nets(), bounds=(-1.0, 1.0), reduction="max")


def test_missing_keys_are_named() -> None:
    loss = TD3Loss(*_nets(), bounds=(-1.0, 1.0))
    data = transitions(4, 3, torch.zeros(4, 1)).exclude(("next", "reward"))
    message = missing_key_message(loss, data)
    assert "needs [('next', 'reward')]" in message and "('next', 'done')" in message


def test_mismatched_action_sizes_fail_at_construction() -> None:
    actor = Actor(torch.nn.Linear(3, 2))
    critic = ValueOperator(Critic(3, 1), in_keys=["observation", "action"])
    with pytest.raises(ValueError, match="action"):
        TD3Loss(actor, critic, bounds=(-1.0, 1.0))


@pytest.mark.slow
def test_td3_learns_pendulum() -> None:
    torch.manual_seed(0)
    network = MLP(in_features=3, out_features=1, num_cells=[64, 64], activation_class=torch.nn.ReLU)
    actor = Actor(torch.nn.Sequential(network, torch.nn.Tanh(), _Scale(2.0)))
    critic = ValueOperator(Critic(3, 1, hidden=64), in_keys=["observation", "action"])
    loss = TD3Loss(actor, critic, bounds=(-2.0, 2.0), policy_noise=0.2, noise_clip=0.5)
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


def test_value_loss_and_actor_loss_are_the_forward_s_losses_reduced_with_metadata() -> None:
    # the reference's td3 script trains with these two, one optimizer each
    data = transitions(8, 3, torch.rand(8, 1))
    generator = torch.Generator().manual_seed(0)
    loss = TD3Loss(*_nets(), bounds=(-1.0, 1.0), generator=generator)
    forward = loss(data.clone())
    generator.manual_seed(0)  # the same target-policy noise again
    critic_loss, critic_metadata = loss.value_loss(data.clone())
    actor_loss, actor_metadata = loss.actor_loss(data.clone())
    torch.testing.assert_close(critic_loss, forward["loss_qvalue"])
    torch.testing.assert_close(actor_loss, forward["loss_actor"])
    assert critic_metadata["td_error"].shape == (8,) and actor_metadata["state_action_value_actor"].shape == (8,)
    critic_loss.backward()
    assert grads_are_set(loss.qvalue_network_params) and grads_are_empty(loss.actor_network_params)
    loss.zero_grad()
    actor_loss.backward()
    assert grads_are_set(loss.actor_network_params) and grads_are_empty(loss.qvalue_network_params)
