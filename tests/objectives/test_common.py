"""LossModule: functional networks, target parameters, keys, value estimator."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential

from cadence.objectives import LossModule, ValueEstimators


class _Loss(LossModule):
    @dataclasses.dataclass
    class _AcceptedKeys:
        value: str = "state_value"
        reward: str = "reward"

    default_value_estimator = ValueEstimators.TD0

    def __init__(self, actor, critic, *, target: bool = True) -> None:
        super().__init__()
        self.convert_to_functional(actor, "actor_network", create_target_params=False)
        self.convert_to_functional(critic, "value_network", create_target_params=target,
                                   compare_against=list(actor.parameters()))
        self.built_with = []

    def make_value_estimator(self, value_type=None, **hyperparams):
        self.built_with.append((value_type, hyperparams))
        self._value_estimator = object()
        return self

    def forward(self, tensordict):
        self._require(tensordict, "observation", self.tensor_keys.reward)
        return TensorDict({}, [])


def _nets(shared: bool = False):
    trunk = torch.nn.Linear(3, 4)
    actor = TensorDictModule(torch.nn.Sequential(trunk, torch.nn.Linear(4, 1)), ["observation"], ["action"])
    head = torch.nn.Sequential(trunk, torch.nn.Linear(4, 1)) if shared else torch.nn.Linear(3, 1)
    critic = TensorDictModule(head, ["observation"], ["state_value"])
    return actor, critic


def test_parameters_are_the_trainable_ones_each_once() -> None:
    actor, critic = _nets(shared=True)
    loss = _Loss(actor, critic)
    expected = {id(p) for p in actor.parameters()} | {id(p) for p in critic.parameters()}
    got = [id(p) for p in loss.parameters()]
    assert len(got) == len(set(got)) == len(expected) == 6 and set(got) == expected
    # target parameters are buffers: no gradient, not in parameters()
    assert all(not t.requires_grad for t in loss.target_value_network_params.values(True, True))


def test_target_params_are_copies_or_detached_views() -> None:
    actor, critic = _nets()
    loss = _Loss(actor, critic)
    target = loss.target_value_network_params["module", "weight"]
    assert torch.equal(target, critic.module.weight) and target.data_ptr() != critic.module.weight.data_ptr()
    # no target copy for the actor: a detached view of the trainable parameters
    view = loss.target_actor_network_params["module", "0", "weight"]
    assert view.data_ptr() == actor.module[0].weight.data_ptr() and not view.requires_grad
    with pytest.raises(AttributeError):
        loss.target_policy_params  # noqa: B018 - no such network


def test_running_a_network_with_target_params_gives_it_no_gradient() -> None:
    actor, critic = _nets()
    loss = _Loss(actor, critic)
    data = TensorDict({"observation": torch.randn(5, 3)}, [5])
    with loss.target_value_network_params.to_module(loss.value_network):
        target_value = loss.value_network(data.copy())["state_value"]
    with loss.value_network_params.to_module(loss.value_network):
        value = loss.value_network(data.copy())["state_value"]
    (value - target_value).pow(2).sum().backward()
    assert critic.module.weight.grad is not None
    assert all(t.grad is None for t in loss.target_value_network_params.values(True, True))


def test_the_value_estimator_is_built_on_first_use() -> None:
    loss = _Loss(*_nets())
    assert loss.built_with == []
    estimator = loss.value_estimator
    assert loss.value_estimator is estimator and loss.built_with == [(ValueEstimators.TD0, {})]


def test_set_keys_renames_roles_and_rejects_unknown_ones() -> None:
    loss = _Loss(*_nets())
    loss.set_keys(reward="r")
    assert loss.tensor_keys.reward == "r"
    with pytest.raises(ValueError, match="unknown roles \\['rewards'\\]"):
        loss.set_keys(rewards="r")


def test_missing_input_names_the_key_and_the_keys_found() -> None:
    loss = _Loss(*_nets())
    with pytest.raises(KeyError, match=r"needs \['reward'\].*holds \['observation'\]"):
        loss(TensorDict({"observation": torch.zeros(2, 3)}, [2]))


def test_an_ensemble_of_parameters_runs_under_vmap() -> None:
    critic = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["state_value"])
    loss = LossModule()
    loss.convert_to_functional(critic, "qvalue_network", expand_dim=2, create_target_params=True)
    params = loss.qvalue_network_params
    assert params["module", "weight"].shape == (2, 1, 3)
    assert not torch.equal(params["module", "weight"][0], params["module", "weight"][1])  # fresh copies

    def run(p, data):
        with p.to_module(loss.qvalue_network):
            return loss.qvalue_network(data)["state_value"]

    data = TensorDict({"observation": torch.randn(4, 3)}, [4])
    values = torch.vmap(run, (0, None))(params, data)
    assert values.shape == (2, 4, 1)
    assert len(list(loss.parameters())) == 2  # the stacked weight and bias


def test_a_sequential_actor_critic_takes_both_parameter_sets() -> None:
    actor, critic = _nets()
    critic = TensorDictModule(torch.nn.Linear(4, 1), ["observation", "action"], ["state_action_value"])
    critic.module = torch.nn.Linear(4, 1)
    loss = LossModule()
    loss.convert_to_functional(actor, "actor_network", create_target_params=True)
    loss.convert_to_functional(critic, "value_network", create_target_params=True)
    assert isinstance(TensorDictSequential(actor, critic), TensorDictSequential)
    assert "LossModule(networks=[actor_network, value_network])" == repr(loss)
