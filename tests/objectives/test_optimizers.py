"""Tests for cadence/objectives/optimizers.py: several optimizers grouped into one."""

from __future__ import annotations

import pytest
import torch

from cadence.objectives import group_optimizers


def test_one_step_of_the_group_is_a_step_of_each_optimizer() -> None:
    torch.manual_seed(0)
    actor, critic = torch.nn.Linear(3, 2), torch.nn.Linear(3, 1)
    twins = [torch.nn.Linear(3, 2), torch.nn.Linear(3, 1)]
    for twin, net in zip(twins, (actor, critic)):
        twin.load_state_dict(net.state_dict())
    grouped = group_optimizers(torch.optim.Adam(actor.parameters(), lr=1e-2, weight_decay=1e-4),
                               None, torch.optim.Adam(critic.parameters(), lr=1e-3))
    apart = [torch.optim.Adam(twins[0].parameters(), lr=1e-2, weight_decay=1e-4),
             torch.optim.Adam(twins[1].parameters(), lr=1e-3)]
    x = torch.randn(8, 3)
    for _ in range(3):
        grouped.zero_grad()
        (actor(x).sum() + critic(x).sum()).backward()
        grouped.step()
        for optimizer in apart:
            optimizer.zero_grad()
        (twins[0](x).sum() + twins[1](x).sum()).backward()
        for optimizer in apart:
            optimizer.step()
    for net, twin in zip((actor, critic), twins):
        for ours, theirs in zip(net.parameters(), twin.parameters()):
            torch.testing.assert_close(ours, theirs)


def test_group_optimizers_refuses_mixed_classes_and_nothing() -> None:
    net = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="every optimizer must be of one class, got SGD and Adam"):
        group_optimizers(torch.optim.SGD([net.weight], lr=0.1), torch.optim.Adam([net.bias]))
    with pytest.raises(ValueError, match="expected at least one optimizer"):
        group_optimizers(None)
