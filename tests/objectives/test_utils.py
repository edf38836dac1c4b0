"""Target updaters, distances, held-out parameters."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from cadence.objectives import (
    HardUpdate,
    LossModule,
    SoftUpdate,
    ValueEstimators,
    default_value_kwargs,
    distance_loss,
    hold_out_net,
    hold_out_params,
)


def _loss() -> LossModule:
    loss = LossModule()
    loss.convert_to_functional(TensorDictModule(torch.nn.Linear(3, 2), ["x"], ["y"]), "net", create_target_params=True)
    return loss


def _set(params, value: float) -> None:
    with torch.no_grad():
        for leaf in params.values(True, True):
            leaf.fill_(value)


@pytest.mark.parametrize("kwargs, tau", [({"tau": 0.05}, 0.05), ({"eps": 0.99}, 0.01)])
def test_soft_update_moves_targets_by_exactly_tau(kwargs, tau: float) -> None:
    loss = _loss()
    _set(loss.target_net_params, 1.0)
    _set(loss.net_params, 3.0)
    updater = SoftUpdate(loss, **kwargs)
    updater.step()
    for leaf in loss.target_net_params.values(True, True):
        assert torch.allclose(leaf, torch.full_like(leaf, 1.0 + tau * 2.0))
    updater.step()
    expected = 1.0 + (1 - (1 - tau) ** 2) * 2.0
    assert all(torch.allclose(leaf, torch.full_like(leaf, expected)) for leaf in loss.target_net_params.values(True, True))


def test_soft_update_needs_one_of_eps_and_tau_and_a_target() -> None:
    with pytest.raises(ValueError, match="one of eps and tau"):
        SoftUpdate(_loss())
    with pytest.raises(ValueError, match="one of eps and tau"):
        SoftUpdate(_loss(), eps=0.9, tau=0.1)
    bare = LossModule()
    bare.convert_to_functional(TensorDictModule(torch.nn.Linear(1, 1), ["x"], ["y"]), "net")
    with pytest.raises(ValueError, match="no target parameters"):
        SoftUpdate(bare, tau=0.1)


def test_hard_update_copies_every_n_steps_and_init_copies_at_once() -> None:
    loss = _loss()
    updater = HardUpdate(loss, value_network_update_interval=3)
    _set(loss.net_params, 2.0)
    for step in range(1, 7):
        updater.step()
        copied = all(torch.equal(t, s) for t, s in zip(loss.target_net_params.values(True, True),
                                                        loss.net_params.values(True, True)))
        assert copied == (step in (3, 6)), step
        if step == 3:
            _set(loss.net_params, 5.0)  # the next copy happens at step 6
    assert loss.target_net_params["module", "bias"].tolist() == [5.0, 5.0]
    _set(loss.net_params, 7.0)
    updater.init_()
    assert loss.target_net_params["module", "bias"].tolist() == [7.0, 7.0] and updater.initialized


def test_distances() -> None:
    a, b = torch.tensor([0.0, 0.5, 3.0]), torch.zeros(3)
    assert distance_loss(a, b, "l2").tolist() == [0.0, 0.25, 9.0]
    assert distance_loss(a, b, "l1").tolist() == [0.0, 0.5, 3.0]
    assert distance_loss(a, b, "smooth_l1").tolist() == [0.0, 0.125, 2.5]
    with pytest.raises(ValueError, match="differ in shape"):
        distance_loss(a, torch.zeros(1))
    with pytest.raises(ValueError, match="'l3'"):
        distance_loss(a, b, "l3")


def test_default_value_kwargs() -> None:
    assert default_value_kwargs(ValueEstimators.GAE) == {"gamma": 0.99, "lmbda": 0.95, "differentiable": True}
    assert default_value_kwargs(ValueEstimators.TD1)["gamma"] == 0.99


def test_held_out_networks_and_params_take_no_gradient() -> None:
    net = torch.nn.Linear(2, 1)
    x = torch.ones(2, requires_grad=True)
    with hold_out_net(net):
        net(x).sum().backward()
    assert net.weight.grad is None and x.grad is not None and net.weight.requires_grad
    params = TensorDict.from_module(net)
    assert not hold_out_params(params)["weight"].requires_grad
