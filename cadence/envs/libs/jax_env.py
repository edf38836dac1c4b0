"""``JaxEnvBase``: what the wrappers of JAX simulators (Jumanji, Brax) share.

A JAX simulator is stateless (its state travels in the tensordict) and draws each reset
from an explicit PRNG key. This base class keeps that key (``env.key``, set by
``set_seed``), the JAX device the simulator runs on, the count of how often the
wrapper's jitted functions were traced (``trace_counts``), and reaches the wrapped env's
attributes (``env.time_limit`` reads the Jumanji env's). Subclasses build the specs and
the jitted functions, and implement ``_reset`` and ``_step``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from cadence.envs.common import EnvBase
from cadence.envs.libs.jax_utils import jax_device_for, note_jax_started, prng_key_from_seed

__all__ = ["JaxEnvBase"]


class JaxEnvBase(EnvBase):
    """The base of the JAX simulators' wrappers: PRNG key, device, compilation counts.

    Args:
        env: the wrapped JAX env (JAX imported already).
        traced: the names of the wrapper's jitted functions, for ``trace_counts``.
        device, batch_size, allow_done_after_reset, run_type_checks: as in ``EnvBase``.

    Examples:
        >>> import pytest; jumanji = pytest.importorskip("jumanji")  # skips without jumanji
        >>> from cadence.envs.libs.jumanji import JumanjiEnv
        >>> env = JumanjiEnv("TSP-v1")
        >>> isinstance(env, JaxEnvBase), env.key.tolist()  # seed 0's key until seeded
        (True, [0, 0])
        >>> next_seed = env.set_seed(7)
        >>> env.key.tolist(), env.num_cities  # the wrapped env's attributes
        ([0, 7], 20)
    """

    def __init__(
        self,
        env: Any,
        *,
        traced: Iterable[str],
        device: torch.device | str | None = None,
        batch_size: torch.Size | Sequence[int] | None = None,
        allow_done_after_reset: bool = False,
        run_type_checks: bool = False,
    ) -> None:
        super().__init__(
            device=device,
            batch_size=batch_size,
            allow_done_after_reset=allow_done_after_reset,
            run_type_checks=run_type_checks,
        )
        self._env = env
        note_jax_started()  # a process forked from this one must not use JAX
        self._jax_device = jax_device_for(self.device)
        self._traces = dict.fromkeys(traced, 0)
        self._key = self._on_jax_device(prng_key_from_seed(0))

    # ------------------------------------------------------------------ the PRNG key
    @property
    def key(self) -> Any:
        """The JAX PRNG key the next reset draws from (``set_seed(seed)`` sets it to
        ``jax.random.PRNGKey(seed)``); a typed key (``jax.random.key``) is kept as its raw data."""
        return self._key

    @key.setter
    def key(self, value: Any) -> None:
        import jax

        value = jax.numpy.asarray(value)
        if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            value = jax.random.key_data(value)
        self._key = self._on_jax_device(value)

    def _on_jax_device(self, array: Any) -> Any:
        import jax

        return jax.device_put(array, self._jax_device)

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            self._key = self._on_jax_device(prng_key_from_seed(seed))

    # ------------------------------------------------------------------ compilations
    @property
    def trace_counts(self) -> dict[str, int]:
        """How many times each jitted function of the wrapper was traced, which under
        ``jax.jit`` is how many times it was compiled: once per wrapper (and, for an env
        that is not batch-locked, per batch size); every call when ``jit`` is off."""
        return dict(self._traces)

    def _count_trace(self, name: str) -> None:
        """Called from the body of the jitted function ``name``: it runs when JAX traces it."""
        self._traces[name] += 1

    # ------------------------------------------------------------------ the wrapped env
    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_") or "_env" not in self.__dict__:
                raise
            return getattr(self.__dict__["_env"], name)

    def __repr__(self) -> str:
        name = self.__dict__.get("env_name") or type(self._env).__name__
        return f"{type(self).__name__}(env={name}, batch_size={self.batch_size}, device={self.device})"
