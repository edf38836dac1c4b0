"""``WeightsBoard``: the small Ray actor from which a (re)started collector actor reads the
latest weights.

It lives apart from :mod:`cadence.collectors.distributed.ray_collector`, in a module that
imports neither torch nor tensordict: Ray imports an actor's module in the actor's own
process, and the board's process should start in a fraction of a second, not compete for
the CPUs with the collector actors starting beside it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WeightsBoard"]


class WeightsBoard:
    """A small Ray actor holding the latest weights' reference and version, which a
    (re)started :class:`~cadence.collectors.distributed.ray_collector.CollectorActor` reads first.

    Examples:
        >>> board = WeightsBoard()
        >>> board.latest()
        ([None], 0)
        >>> board.publish(["ref"], 3)
        >>> board.latest()
        (['ref'], 3)
    """

    def __init__(self) -> None:
        self._holder: list[Any] = [None]  # the reference travels in a list, so Ray does not resolve it
        self._version = 0

    def publish(self, holder: list[Any], version: int) -> None:
        """Records the latest weights (``[object_ref]``) and their version."""
        self._holder, self._version = holder, version

    def latest(self) -> tuple[list[Any], int]:
        """The latest weights (``[object_ref]``) and their version (0: none yet)."""
        return self._holder, self._version
