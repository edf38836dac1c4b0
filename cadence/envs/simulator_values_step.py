"""The values loop's step through an env's array simulator (:class:`SimulatorValuesStep`).

The values loop (the manual loop, random rollouts on values, the collector's values runner)
takes a stock backend's steps through its array simulator
(:mod:`cadence.envs.array_simulator`): the step's entries are views of arrays of a chunk of
steps, with no reader and no tensor built per entry.

Examples:
    >>> from cadence.envs import GymEnv
    >>> type(GymEnv("Pendulum-v1")._values_stepper()).__name__
    'SimulatorValuesStep'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from cadence.envs.array_simulator import ArraySimulator, StepArrays
from cadence.envs.step_values import StepValues, entry_key

if TYPE_CHECKING:  # pragma: no cover - type hints only
    from cadence.envs.common import EnvBase

__all__ = ["SimulatorValuesStep"]


class SimulatorValuesStep:
    """``env._step_as_values`` through the env's array simulator: the simulator's results
    are written into arrays of :attr:`CHUNK` steps and the step's entries are views of their
    rows (no reader, no tensor built per entry); a ``TransformedEnv`` then runs its
    transforms' entries steps on them. The values loop takes its steps through this where
    the env offers it (``EnvBase._values_stepper``); the results are ``_step_as_values``'s,
    entry for entry (the tests compare them). Resets stay the env's (``env.reset``), so
    the simulator is stepped here and never reset; the env whose simulator this is hears of
    each step (``_stepped_on_arrays``: a ``SerialEnv`` keeps where its sub-envs stand).

    A simulator off its declared observation space is named as on the other array paths:
    a failed write is translated, and the first step of each chunk checks what numpy would
    broadcast silently (a scalar into a row).

    Args:
        outer: the env whose step this is (its action checks and done completion).
        simulator: the array simulator of ``outer`` or of its base env.
        transform_step: the transforms' entries step (``outer`` a ``TransformedEnv``), or
            ``None``.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.step_values import StepValues
        >>> env = GymEnv("Pendulum-v1")
        >>> step = SimulatorValuesStep(env, env._array_simulator())
        >>> _ = env.reset()
        >>> out = step(StepValues({"action": torch.zeros(1)}, env.batch_size), checked=True)
        >>> sorted(out.keys())
        ['done', 'observation', 'reward', 'terminated', 'truncated']
    """

    #: Steps per block of arrays: a block is filled, then the next one is allocated.
    CHUNK = 64

    def __init__(
        self,
        outer: EnvBase,
        simulator: ArraySimulator,
        transform_step: Callable[[Any, dict[Any, torch.Tensor]], dict[Any, torch.Tensor]] | None = None,
    ) -> None:
        self.outer = outer
        self.simulator = simulator
        self.transform_step = transform_step
        self._batch_size, self._device = outer.batch_size, outer.device
        self._complete = outer._step_values_complete
        self._stepped = simulator.env._stepped_on_arrays  # an env that keeps a record of where it stands
        # with these entries present, done completion and the reward check have nothing to do
        self._required = frozenset(entry_key(key) for key in (*outer.reward_keys, *outer.done_keys))
        self._rows = 0  # steps left in the current chunk's arrays
        self._t = 0

    def _allocate(self) -> None:
        env = self.simulator.env
        self._arrays = arrays = StepArrays.allocate(env, self.simulator.observation_keys, self.CHUNK)
        # each row's views, made once per chunk (one unbind each, cheaper than indexing every step)
        self._obs = {key: torch.from_numpy(array).unbind(0) for key, array in arrays.next_obs.items()}
        self._reward = torch.from_numpy(arrays.reward).unsqueeze(-1).unbind(0)
        self._terminated = torch.from_numpy(arrays.terminated).unsqueeze(-1).unbind(0)
        self._truncated = torch.from_numpy(arrays.truncated).unsqueeze(-1).unbind(0)
        self._done_array = np.zeros_like(arrays.terminated)
        self._done = torch.from_numpy(self._done_array).unsqueeze(-1).unbind(0)
        self._rows, self._t = self.CHUNK, 0

    def __call__(self, values: StepValues, checked: bool = False) -> StepValues:
        outer, simulator = self.outer, self.simulator
        if not checked:
            outer._check_step_input(values)
        if self._t == self._rows:
            self._allocate()
        t, arrays = self._t, self._arrays
        _, any_done = simulator.write_step(simulator.to_backend(values.entries["action"]), t, arrays, check=t == 0)
        if any_done:  # the chunk's "done" rows start false
            np.logical_or(arrays.terminated[t:t + 1], arrays.truncated[t:t + 1], out=self._done_array[t:t + 1])
        self._t = t + 1
        entries: dict[Any, torch.Tensor] = {key: view[t] for key, view in self._obs.items()}
        entries.update(reward=self._reward[t], terminated=self._terminated[t], truncated=self._truncated[t],
                       done=self._done[t])
        self._stepped(entries)
        if self.transform_step is not None:
            entries = self.transform_step(values, entries)
        out = StepValues(entries, self._batch_size, self._device)
        if not self._complete and not self._required <= entries.keys():
            outer._complete_done(out)
            outer._check_rewards(out)
        return out
