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
from tensordict import TensorDict

from cadence.envs.array_simulator import ArraySimulator, StepArrays
from cadence.envs.step_values import StepValues, any_done, entry_key, keep_preset

if TYPE_CHECKING:  # pragma: no cover - type hints only
    from cadence.envs.common import EnvBase
    from cadence.envs.transforms.base import Transform

__all__ = ["SimulatorValuesStep"]


class SimulatorValuesStep:
    """``env._step_as_values`` through the env's array simulator: the simulator's results
    are written into arrays of :attr:`CHUNK` steps and the step's entries are views of their
    rows (no reader, no tensor built per entry); a ``TransformedEnv`` then runs its
    transforms' steps on them. The values loop takes its steps through this where
    the env offers it (``EnvBase._values_stepper``); the results are ``_step_as_values``'s,
    entry for entry (the tests compare them). Resets are the env's, or the simulators' own
    where they are the env's (:meth:`reset_done`, :attr:`resets`); the env whose simulator
    this is hears of each step (``_stepped_on_arrays``: a ``SerialEnv`` keeps where its
    sub-envs stand).

    A simulator off its declared observation space is named as on the other array paths:
    a failed write is translated, and the first step of each chunk checks what numpy would
    broadcast silently (a scalar into a row).

    Args:
        outer: the env whose step this is (its action checks and done completion).
        simulator: the array simulator of ``outer`` or of its base env.
        transform_step: the transforms' step on the step's input and results (``outer`` a
            ``TransformedEnv``: its ``_transform_values``), or ``None``.
        over_time: the transforms themselves, where they transform a stretch of steps at
            once (``Transform.steps_over_time``): :meth:`stretch` serves ``outer`` then.

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
        transform_step: Callable[[StepValues, StepValues], StepValues] | None = None,
        over_time: Transform | None = None,
    ) -> None:
        self.outer = outer
        self.simulator = simulator
        self.transform_step = transform_step
        self.over_time = over_time
        #: Whether :meth:`stretch` serves ``outer``: no transforms, or transforms over time.
        self.takes_stretches = transform_step is None or over_time is not None
        #: Whether :meth:`reset_done` serves ``outer``: the simulators' own reset is its reset
        #: (transforms reset through the env: they have their own reset to run).
        self.resets = transform_step is None
        self._last_obs: Any = None
        self._batch_size, self._device = outer.batch_size, outer.device
        self._complete = outer._step_values_complete
        self._stepped = simulator.env._stepped_on_arrays  # an env that keeps a record of where it stands
        # with these entries present, done completion and the reward check have nothing to do
        self._required = frozenset(entry_key(key) for key in (*outer.reward_keys, *outer.done_keys))
        self._rows = 0  # steps left in the current chunk's arrays
        self._t = 0
        #: Whether any component of the last step (:meth:`__call__`) is done.
        self.any_done = False
        no_flag = torch.zeros((*self._batch_size, 1), dtype=torch.bool)
        self._no_flags = (no_flag, no_flag, no_flag)

    def _allocate(self) -> None:
        env = self.simulator.env
        self._arrays = arrays = StepArrays.allocate(env, self.simulator.observation_keys, self.CHUNK)
        # each row's views, made once per chunk (one unbind each, cheaper than indexing every step)
        self._obs = {key: torch.from_numpy(array).unbind(0) for key, array in arrays.next_obs.items()}
        self._reward = torch.from_numpy(arrays.reward).unsqueeze(-1).unbind(0)
        self._rows, self._t = self.CHUNK, 0

    def _flags(self, t: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Row ``t``'s (terminated, truncated, done) flags, of a step where one is set."""
        terminated, truncated = self._arrays.terminated[t, ...], self._arrays.truncated[t, ...]
        return (torch.from_numpy(terminated).unsqueeze(-1), torch.from_numpy(truncated).unsqueeze(-1),
                torch.from_numpy(np.asarray(terminated | truncated)).unsqueeze(-1))

    def __call__(self, values: StepValues, checked: bool = False) -> StepValues:
        if not checked:
            self.outer._check_step_input(values)
        if self._t == self._rows:
            self._allocate()
        t = self._t
        self._t = t + 1
        simulator = self.simulator
        self._last_obs, ended = simulator.write_step(simulator.to_backend(values.entries["action"]), t, self._arrays,
                                                     t == 0)
        entries: dict[Any, torch.Tensor] = {key: view[t] for key, view in self._obs.items()}
        entries["reward"] = self._reward[t]
        # most steps end nothing: their flags are one tensor of False, shared (a view per flag
        # and step would cost more than the rest of the step's bookkeeping)
        entries["terminated"], entries["truncated"], entries["done"] = self._flags(t) if ended else self._no_flags
        self._stepped(entries)
        out = StepValues(entries, self._batch_size, self._device)
        keep_preset(out, values)
        if self.transform_step is not None:
            out = self.transform_step(values, out)
        if not self._complete and not self._required <= out.entries.keys():
            self.outer._complete_done(out)
            self.outer._check_rewards(out)
        # a transform may end the episode (a step limit): then the flag says, not the simulators
        self.any_done = ended if self.transform_step is None else any_done(out.entries["done"])
        return out

    def start_stretches(self, actions: torch.Tensor) -> None:
        """Readies :meth:`stretch` for a run of ``len(actions)`` steps with ``actions`` (time
        first): the actions in the simulator's format, and arrays for the whole run (each
        stretch writes its rows, and its entries are views of them)."""
        simulator = self.simulator
        self._run_actions = simulator.to_backend(actions)
        self._run_arrays = arrays = StepArrays.allocate(simulator.env, simulator.observation_keys, len(actions))
        self._run_done = np.zeros_like(arrays.terminated)
        dim = len(self._batch_size)

        def entry(array: np.ndarray, trailing_one: bool = False) -> torch.Tensor:
            tensor = torch.from_numpy(array)
            if trailing_one:
                tensor = tensor.unsqueeze(-1)
            return tensor.movedim(0, dim) if dim else tensor  # time leads in the arrays

        self._run_next = {key: entry(array) for key, array in arrays.next_obs.items()}
        self._run_next.update(reward=entry(arrays.reward, True), terminated=entry(arrays.terminated, True),
                              truncated=entry(arrays.truncated, True), done=entry(self._run_done, True))
        # the steps' inputs where the simulators reset themselves: where they stood, flags cleared
        cleared = entry(np.zeros_like(arrays.terminated), True)
        self._run_inputs = {key: entry(array) for key, array in arrays.root_obs.items()}
        self._run_inputs.update(done=cleared, terminated=cleared, truncated=cleared)

    def stretch(
        self, root: dict[Any, torch.Tensor], start: int, resets: bool
    ) -> tuple[dict[Any, torch.Tensor] | None, dict[Any, torch.Tensor], dict[Any, torch.Tensor], int]:
        """Steps with the run's actions from row ``start`` (see :meth:`start_stretches`) from
        the input entries ``root``: until the first step where any component is done, or,
        with ``resets`` (only where :attr:`resets`), resetting the done simulators on the way,
        or until the actions run out; or up to where a transform ends the episode (a step
        limit). The transforms (if any) transform the stretch at once. Only where
        :attr:`takes_stretches`.

        Returns:
            The steps' inputs where the simulators reset on the way (else ``None``: the
            caller builds them from ``root`` and the results), the steps' results (each
            entry stacked on a time dim after the batch dims), the last step's results, and
            the number of steps.
        """
        arrays, dim = self._run_arrays, len(self._batch_size)
        end = len(arrays.reward)
        root_td = None
        if self.over_time is not None:
            root_td = TensorDict(root, batch_size=self._batch_size, device=self._device)
            limit = self.over_time._steps_before_done(root_td)
            if limit is not None:
                end = min(end, start + max(1, limit))
        resets = resets and self.resets
        if resets:
            for key, rows in arrays.root_obs.items():
                rows[start] = root[key].numpy()
        self._last_obs, steps, _ = self.simulator.write_stretch(self._run_actions[start:end], start, arrays,
                                                                check=True, resets=resets)
        stop = start + steps
        np.logical_or(arrays.terminated[start:stop], arrays.truncated[start:stop], out=self._run_done[start:stop])
        entries = {key: value.narrow(dim, start, steps) for key, value in self._run_next.items()}
        last = {key: value.select(dim, steps - 1) for key, value in entries.items()}
        self._stepped(last)
        inputs = None
        if resets:
            inputs = {key: value.narrow(dim, start, steps) for key, value in self._run_inputs.items()}
        if self.over_time is not None:
            next_steps = TensorDict(entries, batch_size=[*self._batch_size, steps], device=self._device)
            next_steps = self.over_time._step_over_time(root_td, next_steps)
            self.outer._complete_done(next_steps)
            entries = dict(next_steps.items(True, True))
            last = {key: value.select(dim, steps - 1) for key, value in entries.items()}
        return inputs, entries, last, steps

    def reset_done(self, root: dict[Any, torch.Tensor]) -> dict[Any, torch.Tensor]:
        """The next input ``root`` (after a step with a done component) with the done
        simulators reset by the simulators themselves, as ``env._reset_done`` resets them:
        their observations and cleared flags. Only where :attr:`resets`."""
        simulator = self.simulator
        done = root["done"].numpy()
        done = done.reshape(done.shape[:-1])  # the batch's shape
        obs = self._last_obs
        try:
            obs = simulator.reset_done(done, obs)
            targets = {key: np.empty((1, *array.shape), dtype=array.dtype) for key, array in (
                (key, root[key].numpy()) for key in simulator.observation_keys)}
            simulator.write_observation(targets, (0,), obs)
        except (ValueError, TypeError) as err:
            simulator.explain_error(obs, "reset()", err)
        self._last_obs = obs
        entries = dict(root)
        entries.update((key, torch.from_numpy(target[0])) for key, target in targets.items())
        entries.update((name, torch.zeros_like(root["done"])) for name in ("done", "terminated", "truncated"))
        self._stepped(entries)
        return entries
