"""Optimizers of a loss: several grouped into one.

Examples:
    >>> import torch
    >>> actor, critic = torch.nn.Linear(2, 1), torch.nn.Linear(3, 1)
    >>> optimizer = group_optimizers(torch.optim.Adam(actor.parameters(), lr=1e-3),
    ...                              torch.optim.Adam(critic.parameters(), lr=1e-2))
    >>> [group["lr"] for group in optimizer.param_groups]
    [0.001, 0.01]
"""

from __future__ import annotations

import torch

__all__ = ["group_optimizers"]


def group_optimizers(*optimizers: torch.optim.Optimizer | None) -> torch.optim.Optimizer:
    """One optimizer holding the parameter groups of several, each group with its own
    settings (learning rate, weight decay, ...): one ``zero_grad()`` and one ``step()``
    update every network. ``None`` entries are skipped.

    The new optimizer starts with no state (Adam's moments, say): group optimizers before
    their first step.

    Args:
        *optimizers: optimizers of one class.

    Returns:
        A new optimizer of that class over all their parameter groups.

    Raises:
        ValueError: if no optimizer is given, or they are of different classes.

    Examples:
        >>> import torch
        >>> net = torch.nn.Linear(2, 2)
        >>> group_optimizers(torch.optim.SGD([net.weight], lr=0.1), torch.optim.Adam([net.bias]))
        Traceback (most recent call last):
        ...
        ValueError: group_optimizers: every optimizer must be of one class, got SGD and Adam
    """
    given = [optimizer for optimizer in optimizers if optimizer is not None]
    if not given:
        raise ValueError("group_optimizers: expected at least one optimizer, got none")
    kind = type(given[0])
    for optimizer in given[1:]:
        if type(optimizer) is not kind:
            raise ValueError(
                f"group_optimizers: every optimizer must be of one class, got {kind.__name__} "
                f"and {type(optimizer).__name__}"
            )
    return kind([group for optimizer in given for group in optimizer.param_groups])
