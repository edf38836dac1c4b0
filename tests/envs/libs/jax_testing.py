"""What the JAX wrappers' tests (Jumanji, Brax) share."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase


def assert_same(a: TensorDictBase, b: TensorDictBase) -> None:
    """The two tensordicts hold the same entries with the same values, exactly."""
    assert a.batch_size == b.batch_size
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        torch.testing.assert_close(a.get(key), b.get(key), rtol=0, atol=0, msg=lambda m: f"{key}: {m}")


class BackendCompilations:
    """Counts XLA compilations (any function, eager operations too) while active."""

    def __init__(self) -> None:
        self.count = 0

    def _listener(self, event: str, duration: float, **kwargs: Any) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            self.count += 1

    def __enter__(self) -> BackendCompilations:
        import jax  # only the JAX tests use this, after skipping without JAX

        jax.monitoring.register_event_duration_secs_listener(self._listener)
        return self

    def __exit__(self, *args: Any) -> None:
        import jax

        jax.monitoring.unregister_event_duration_listener(self._listener)
