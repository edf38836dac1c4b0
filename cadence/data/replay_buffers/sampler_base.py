"""The ``Sampler`` interface: which items of a storage a replay buffer's next batch holds.

A sampler sees the storage it samples from (its length, capacity and layout, and the
entries it needs to read, such as trajectory ids) and answers flat element indices.
Samplers are told of every write (``add``/``extend``, with the indices written), so
that those that keep per-item state (priorities, a permutation) stay in step with the
storage. Each sampler draws from its own ``torch.Generator``: the same seed and the
same writes give the same samples.

Index convention: a storage counts ``max_size`` elements along its first ``ndim``
dims; an element's flat index is its position in that ``ndim``-dim block, row-major
(``row * elements_per_row + column`` for ``ndim=2``). Samplers answer flat indices
(an ``int64`` tensor of shape ``[batch_size]``) and the storage reads them.

Examples:
    >>> import torch
    >>> class FirstItems(Sampler):
    ...     def sample(self, storage, batch_size):
    ...         return torch.arange(batch_size) % len(storage), {}
    >>> FirstItems().sample([10, 20, 30], 4)[0].tolist()
    [0, 1, 2, 0]
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["Sampler"]


class Sampler:
    """Chooses the items of each sample; keeps whatever state that needs.

    Subclasses implement ``sample``; those with per-item state also override the write
    notifications (``add``, ``extend``), ``update_priority``, ``empty`` and the state
    methods.

    Args:
        generator: the random generator to draw from (a fresh one, with torch's
            default seed, if ``None``).

    Examples:
        >>> import torch
        >>> class Everything(Sampler):
        ...     def sample(self, storage, batch_size):
        ...         return torch.arange(len(storage)), {}
        >>> Everything().sample(list("abc"), 0)[0].tolist()
        [0, 1, 2]
    """

    def __init__(self, generator: torch.Generator | None = None) -> None:
        self.generator = generator if generator is not None else torch.Generator()

    def sample(self, storage: Any, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        """The flat indices of the next sample, and extra information (importance
        weights under ``"_weight"``, say) that the buffer adds to it."""
        raise TypeError(f"{type(self).__name__} must implement sample(storage, batch_size).")

    def add(self, index: int | torch.Tensor) -> None:
        """Told after one item is written at ``index``."""

    def extend(self, index: torch.Tensor) -> None:
        """Told after items are written at ``index`` (flat indices)."""

    def update_priority(self, index: int | torch.Tensor, priority: float | torch.Tensor) -> None:
        """Sets the priorities of the items at ``index``; only prioritized samplers have them."""
        raise TypeError(
            f"{type(self).__name__} keeps no priorities; use a PrioritizedSampler to update them."
        )

    def mark_update(self, index: int | torch.Tensor) -> None:
        """Told that the items at ``index`` are about to be overwritten."""

    def empty(self) -> None:
        """Forgets all per-item state (the buffer was emptied)."""

    @property
    def ran_out(self) -> bool:
        """Whether an epoch-based sampler has no item left to give (never, by default)."""
        return False

    def set_seed(self, seed: int) -> None:
        """Reseeds this sampler's generator."""
        self.generator.manual_seed(seed)

    def state_dict(self) -> dict[str, Any]:
        """The sampler's state: its generator's, and any per-item state."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores what ``state_dict`` returned."""
        self.generator.set_state(state_dict["generator"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
