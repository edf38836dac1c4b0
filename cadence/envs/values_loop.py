"""The step loop on plain tensors: what ``rollout`` and the collectors run for envs that
step on values (see :mod:`cadence.envs.step_values`).

:class:`ValuesLoop` takes one step from a dict of the input's entries: it writes the
action (a compiled policy's, or random ones drawn as ``rand_action`` draws them), steps
the env as :class:`~cadence.envs.step_values.StepValues` (``EnvBase._step_as_values``,
or the same step through the env's array simulator where it has one:
``EnvBase._values_stepper``), and makes the next input by moving entries between dicts
(``step_mdp``'s rule: the action and the rewards stay behind). Resets go through the
simulators where their reset is the env's, else through the env's ``_reset_done_values``.
A :class:`Recording` stacks the steps' entries (in
chunks) and :meth:`ValuesLoop.assemble` lays them out as the generic loop's data.

It serves envs for which :func:`values_loop_applies`: the steps run on values (nested
entries under tuple keys), every entry a tensor of a fixed shape, on the CPU, without
type checks or auto-reset, with one root ``"done"``. Its results are the generic loop's,
entry for entry (the tests compare them).

Examples:
    >>> from cadence.envs import GymEnv, StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(3))
    >>> loop = ValuesLoop(env)
    >>> root = loop.entries(env.reset())
    >>> steps = [loop.step(root, None)]
    >>> sorted(steps[0].next_entries)
    ['done', 'observation', 'reward', 'step_count', 'terminated', 'truncated']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import NonTensor
from cadence.envs.simulator_values_step import SimulatorValuesStep
from cadence.envs.step_values import StepValues, any_done, input_entries, shape_groups
from cadence.envs.utils import action_in_spec_dtype

if TYPE_CHECKING:  # pragma: no cover - type hints only (the env core imports this module)
    from cadence.envs.common import EnvBase

__all__ = ["Recording", "ValuesLoop", "ValuesStep", "values_loop_applies"]

#: A step's entries, keyed as StepValues keys them (nested ones under tuple keys).
Entries = dict[str, torch.Tensor]
#: A policy as a step on them: it writes its entries (the action) into the dict.
TensorPolicy = Callable[[Entries], None]


def values_loop_applies(env: EnvBase) -> bool:
    """Whether :class:`ValuesLoop` can step ``env`` (see the module).

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.custom import PendulumEnv
        >>> values_loop_applies(GymEnv("Pendulum-v1")), values_loop_applies(PendulumEnv())
        (True, True)
        >>> env = PendulumEnv()
        >>> env.run_type_checks = True  # every step's values checked: the generic loop
        >>> values_loop_applies(env)
        False
    """
    if env.device not in (None, torch.device("cpu")) or env.run_type_checks or env.auto_reset:
        return False
    if env._has_dynamic_specs():  # steps of varying shapes do not stack
        return False
    if not env._values_step_applies():
        return False
    specs = (env.full_observation_spec, env.full_done_spec, env.full_reward_spec, env.full_action_spec,
             env.full_state_spec)
    if any(isinstance(leaf, NonTensor) for spec in specs for leaf in spec.values(True, True)):
        return False  # text, graphs...: kept as they come, they do not stack as tensors
    return "done" in env.full_done_spec.keys() and env.full_done_spec["done"].shape[: env.batch_dims] == env.batch_size


class ValuesStep(NamedTuple):
    """One step, or a stretch of steps: its input's entries (with the action), its results,
    the next input's entries (before any reset), the (last step's) done flag and whether
    any of its components is set. A stretch (``steps`` a number) has its entries stacked
    on a time dim after the batch dims; a single step (``steps`` is ``None``) has none."""

    entries: Entries
    next_entries: dict[Any, torch.Tensor]
    next_root: Entries
    done: torch.Tensor
    any_done: bool
    steps: int | None = None


class ValuesLoop:
    """Steps ``env`` on dicts of tensors (see the module).

    Args:
        env: an env for which :func:`values_loop_applies`.
    """

    def __init__(self, env: EnvBase) -> None:
        self.env = env
        action_keys = list(env.action_keys)
        self._single_action = action_keys[0] if len(action_keys) == 1 else None
        # an action of exactly the spec's shape and dtype passes step()'s check as it is
        single = self._single_action
        spec = env.full_action_spec[single] if single is not None else None
        self._action_layout = None if spec is None else (spec.shape, spec.dtype)
        self._action_spec = spec
        self._rewards = set(env.reward_keys)
        self._batch_size, self._device = env.batch_size, env.device  # read once: properties, every step
        self._step_values = env._values_stepper()  # _step_as_values, or the same through the array simulator
        stepper = self._step_values
        simulator_step = stepper if isinstance(stepper, SimulatorValuesStep) else None
        self._kernel = simulator_step
        #: the step through the array simulator, where it takes stretches of given actions
        self._stretches = simulator_step if simulator_step is not None and simulator_step.takes_stretches else None
        # the simulators' own reset, where it is the env's
        self._resets = simulator_step if simulator_step is not None and simulator_step.resets else None
        # step_mdp's rule: the step's results leave "next", the action and rewards stay behind
        self._dropped = {"next", *action_keys, *self._rewards}
        self._group_dims = env._group_dims()

    #: The entries of a step's input (``"next"`` left out), nested ones under tuple keys.
    entries = staticmethod(input_entries)

    def step(self, root: Entries, policy: TensorPolicy | None, action: torch.Tensor | None = None) -> ValuesStep:
        """One step from the input entries ``root`` (not changed): the policy's action, the
        given ``action`` (of the spec's shape and dtype), or random actions drawn from
        ``env.rng`` as ``rand_action`` draws them."""
        env = self.env
        values = dict(root)
        checked = False
        if action is not None:
            values[self._single_action] = action
            checked = True
        elif policy is not None:
            policy(values)
            if self._action_layout is not None:  # the common case spares step()'s full check
                action = values.get(self._single_action)
                if action is not None and action.shape == self._action_layout[0]:
                    if action.dtype != self._action_layout[1]:  # cast as step() casts (float32 for float64...)
                        values[self._single_action] = action_in_spec_dtype(action, self._action_spec,
                                                                            self._single_action)
                    checked = True
        elif self._action_spec is not None:  # drawn from the spec: its shape and dtype
            values[self._single_action] = self._action_spec.rand(None, generator=env.rng)
            checked = True
        else:
            values.update(env.full_action_spec.rand(None, generator=env.rng).items(True, True))
        next_entries = self._step_values(StepValues(values, self._batch_size, self._device), checked=checked).entries
        if "next" in values:  # what the policy wrote for the next step: the step kept it in its results
            del values["next"]
        done = next_entries["done"]
        # the kernel knows whether the step ended an episode: no reduction over the flag then
        ended = self._kernel.any_done if self._kernel is not None else any_done(done)
        return ValuesStep(values, next_entries, self._next_root(values, next_entries), done, ended)

    def _next_root(self, entries: Entries, results: dict[Any, torch.Tensor]) -> Entries:
        """The next input by ``step_mdp``'s rule: the input's entries but the action and the
        rewards, with the step's results (but the rewards) written over them."""
        next_root = dict(entries)  # a copy and a few pops: a third of a filtering comprehension's cost
        for key in self._dropped:
            next_root.pop(key, None)
        next_root.update(results)
        for key in self._rewards:
            next_root.pop(key, None)
        return next_root

    @property
    def takes_stretches(self) -> bool:
        """Whether the env's kernel takes stretches of given actions (up to each done step,
        the transforms over the stretch at once): random rollouts draw their actions at the
        start then (:meth:`draw_ahead`).

        Examples:
            >>> from cadence.envs import GymEnv, StepCounter, TimeMaxPool, TransformedEnv
            >>> ValuesLoop(TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(5))).takes_stretches
            True
            >>> env = TransformedEnv(GymEnv("Pendulum-v1"), TimeMaxPool(in_keys=["observation"], T=2))
            >>> ValuesLoop(env).takes_stretches  # a transform that needs each step
            False
        """
        return self._stretches is not None and self._action_spec is not None

    def draw_ahead(self, steps: int) -> torch.Tensor | None:
        """``steps`` random actions drawn now from ``env.rng`` (time first): where the loop
        takes stretches of given actions (:meth:`run`), or steps an env that draws nothing
        from ``env.rng`` itself (not :attr:`~cadence.envs.common.EnvBase.draws_from_rng`),
        from an action spec without a mask (a mask changes from step to step).
        ``None`` where it draws them step by step (an env whose resets may draw from
        ``env.rng`` between them, say).

        Examples:
            >>> from cadence.envs import GymEnv, PendulumEnv
            >>> ValuesLoop(GymEnv("Pendulum-v1")).draw_ahead(5).shape, ValuesLoop(PendulumEnv()).draw_ahead(5)
            (torch.Size([5, 1]), None)
        """
        spec = self._action_spec
        if spec is None:
            return None
        if not self.takes_stretches and (self.env.draws_from_rng or getattr(spec, "mask", None) is not None):
            return None
        return spec.rand(torch.Size([steps]), generator=self.env.rng)

    def stretch(self, root: Entries, actions: torch.Tensor, start: int, resets: bool) -> ValuesStep:
        """Steps with the run's ``actions`` (time first) from ``actions[start]`` on, from the
        input entries ``root``, up to the first done step (or, with ``resets``, on through
        resets where the simulators' reset is the env's) or a step limit: one call to the
        kernel for the stretch, the transforms over it at once (:meth:`run` readies the
        kernel). The inputs of the steps after the first follow ``step_mdp``'s rule: the
        results of the step before, over what the first input carried."""
        assert self._stretches is not None and self._single_action is not None
        inputs, next_entries, last, steps = self._stretches.stretch(root, start, resets)
        dim, dropped, rewards = len(self._batch_size), self._dropped, self._rewards
        entries: Entries = {}
        for key, value in root.items():
            if key in dropped:
                continue
            following = inputs.get(key) if inputs is not None else None
            if following is not None:  # where the simulators stood, resets included
                entries[key] = following
                continue
            first = value.unsqueeze(dim)
            following = next_entries.get(key) if key not in rewards else None
            if following is None:  # carried as it is
                entries[key] = first.expand(*value.shape[:dim], steps, *value.shape[dim:]).clone()
            elif steps == 1:
                entries[key] = first
            else:
                entries[key] = torch.cat([first, following.narrow(dim, 0, steps - 1)], dim)
        entries[self._single_action] = actions[start:start + steps].movedim(0, dim)
        next_root = self._next_root(root, last)
        done = next_root["done"]
        return ValuesStep(entries, next_entries, next_root, done, any_done(done), steps)

    def run(
        self,
        root: Entries,
        steps: int,
        policy: TensorPolicy | None,
        recording: Recording,
        *,
        actions: torch.Tensor | None = None,
        break_when_any_done: bool = False,
        break_when_all_done: bool = False,
        reset_after_last: bool = True,
        on_done: Callable[[torch.Tensor], None] | None = None,
    ) -> Entries | None:
        """Takes up to ``steps`` steps from the input entries ``root``, recording each.

        This is the time loop: ``rollout`` and the collectors' batches run it. Each turn
        takes a stretch of steps: one step with a policy (it reads each step's input), up to
        the next done step with given ``actions`` where the kernel takes stretches
        (:meth:`stretch`). The done components are reset between steps (and after the last
        one, with ``reset_after_last``: a collector's next batch goes on from there, where a
        rollout leaves the env as its last step left it); ``on_done`` hears of each step's
        done flags first (the collector renews its trajectory ids there).

        Args:
            root: the first step's input entries (not changed).
            steps: the most steps to take.
            policy: the policy as a step on the entries (``None``: given or random actions).
            recording: where the steps go.
            actions: without a policy, the actions to take (time first, at least ``steps``;
                :meth:`draw_ahead` draws them); ``None``: random ones, drawn step by step.
            break_when_any_done: stop after the first step where any component is done.
            break_when_all_done: stop after the first step where all components are.
            reset_after_last: reset the done components after the last step too.
            on_done: called with a step's done flag when any component is done.

        Returns:
            The next step's input entries (the done components reset as asked); ``None``
            when the loop stopped at a done step (a rollout that breaks resets nothing).

        Examples:
            >>> from cadence.envs import GymEnv
            >>> env = GymEnv("CartPole-v1")
            >>> loop = ValuesLoop(env)
            >>> recording = loop.recording()
            >>> root = loop.run(loop.entries(env.reset()), 5, None, recording)
            >>> recording.steps, sorted(root)
            (5, ['done', 'observation', 'terminated', 'truncated'])
        """
        stretches = actions is not None and policy is None and self.takes_stretches
        if stretches:
            assert actions is not None and self._stretches is not None
            self._stretches.start_stretches(actions[:steps])
        # the kernel resets the done components itself where nothing needs to hear of them
        kernel_resets = not (break_when_any_done or break_when_all_done or on_done is not None)
        t = 0
        while t < steps:
            if stretches:
                step = self.stretch(root, actions, t, resets=kernel_resets)
            else:
                step = self.step(root, policy, None if actions is None else actions[t])
            recording.add(step.entries, step.next_entries, step.steps)
            t += 1 if step.steps is None else step.steps
            done = step.done
            root = step.next_root
            if step.any_done:
                if break_when_any_done or (break_when_all_done and bool(done.all())):
                    return None
                if on_done is not None:
                    on_done(done)
                if reset_after_last or t < steps:
                    root = self.reset_done(root)
        return root

    def step_tensordict(self, tensordict: TensorDictBase) -> tuple[Entries, dict[Any, torch.Tensor]] | None:
        """``env.step(tensordict)`` on plain tensors: the step's results written into
        ``tensordict`` under ``"next"`` (one TensorDict built); returns the input's entries
        (the action as stepped) and the results. ``None`` where ``tensordict`` is not a
        plain TensorDict of tensors at the root of the env's batch size (the generic path
        serves it, and raises what it raises).

        Examples:
            >>> from cadence.envs import GymEnv
            >>> env = GymEnv("Pendulum-v1")
            >>> data = env.rand_action(env.reset())
            >>> _ = ValuesLoop(env).step_tensordict(data)
            >>> data["next", "observation"].shape
            torch.Size([3])
        """
        if type(tensordict) is not TensorDict or tensordict.batch_size != self._batch_size:
            return None
        entries: Entries = {}
        for key, value in tensordict.items():
            if not isinstance(value, torch.Tensor):  # "next", or a nested entry
                return None
            entries[key] = value
        single = self._single_action
        action = entries.get(single) if single is not None else None
        if action is None or (action.shape, action.dtype) != self._action_layout:
            self.env._check_step_input(tensordict)  # raises, or casts the action in place as step() does
            entries = dict(tensordict.items())
        next_entries = self._step_values(StepValues(entries, self._batch_size, self._device), checked=True).entries
        tensordict.set("next", TensorDict(next_entries, batch_size=self._batch_size, device=self._device))
        return entries, next_entries

    def step_and_maybe_reset(self, tensordict: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase] | None:
        """``env.step_and_maybe_reset(tensordict)`` on plain tensors: the same two fresh
        TensorDicts (``tensordict`` with ``"next"`` written in, and the next input, its done
        components reset), built once each; ``None`` where :meth:`step_tensordict` does not
        serve ``tensordict``."""
        stepped = self.step_tensordict(tensordict)
        if stepped is None:
            return None
        entries, next_entries = stepped
        next_root = self._next_root(entries, next_entries)
        names = tensordict.names if tensordict.batch_dims else None
        next_td = TensorDict(next_root, batch_size=self._batch_size, device=tensordict.device, names=names)
        if any_done(next_entries["done"]):
            next_td, _ = self.env._reset_done(next_td)
        return tensordict, next_td

    def reset_done(self, next_root: Entries) -> Entries:
        """The next input with its done components reset: by the simulators where their
        reset is the env's, else by the env's ``_reset_done_values``."""
        if self._resets is not None:
            return self._resets.reset_done(next_root)
        return self.env._reset_done_values(next_root)

    def recording(self) -> Recording:
        """An empty record of steps for :meth:`assemble`."""
        return Recording(self.env.batch_dims)

    def assemble(self, recording: Recording, extra: dict[str, Any] | None = None) -> TensorDictBase:
        """The recorded steps on a trailing ``"time"`` dim, with ``extra`` root entries (already stacked)."""
        env = self.env
        entries, next_entries, steps = recording.stacked()
        entries["next"] = next_entries
        if extra:
            entries.update(extra)
        # a group of agents keeps its own dim after the batch's and the time dim
        out = shape_groups(TensorDict(entries, batch_size=torch.Size([*env.batch_size, steps])), self._group_dims)
        out.names = [None] * env.batch_dims + ["time"]
        return out


class Recording:
    """The steps of a rollout or a batch, stacked every :attr:`CHUNK` steps.

    Keeping every step's tensors alive until the end would hand Python's garbage
    collector thousands of objects per batch to promote and then scan in full (a full
    collection measured 160 ms, about a fifth of a 1000-step batch's time); stacked in
    chunks, the steps' tensors die young. The values are the same as one stack's.

    Args:
        dim: the time dim (the env's batch dims).

    Examples:
        >>> import torch
        >>> recording = Recording(0)
        >>> for t in range(70):
        ...     recording.add({"x": torch.tensor([t])}, {"y": torch.tensor([t + 1])})
        >>> root, following, steps = recording.stacked()
        >>> root["x"].shape, following["y"][-1].item(), steps
        (torch.Size([70, 1]), 70, 70)
    """

    #: Steps recorded before they are stacked into one block.
    CHUNK = 64

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.steps = 0
        self._pending: list[tuple[dict[Any, torch.Tensor], dict[Any, torch.Tensor]]] = []
        self._chunks: list[tuple[dict[Any, torch.Tensor], dict[Any, torch.Tensor]]] = []

    def add(self, entries: dict[Any, torch.Tensor], next_entries: dict[Any, torch.Tensor],
            steps: int | None = None) -> None:
        """Records one step (its input's entries and its results), or a stretch of ``steps``
        steps (their entries stacked on the time dim already)."""
        if steps is not None:
            self._flush()
            self._chunks.append((entries, next_entries))
            self.steps += steps
            return
        self._pending.append((entries, next_entries))
        self.steps += 1
        if len(self._pending) >= self.CHUNK:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            roots, nexts = zip(*self._pending)
            self._chunks.append((self._stack(list(roots), "input"), self._stack(list(nexts), "next")))
            self._pending = []

    def stacked(self) -> tuple[dict[Any, torch.Tensor], dict[Any, torch.Tensor], int]:
        """(input entries, results, steps), each entry stacked on the time dim."""
        self._flush()
        chunks, dim = self._chunks, self.dim
        if len(chunks) == 1:
            roots, nexts = chunks[0]
            return dict(roots), dict(nexts), self.steps
        joined = []
        for part, where in ((0, "input"), (1, "next")):
            first = chunks[0][part]
            try:
                joined.append({key: torch.cat([chunk[part][key] for chunk in chunks], dim) for key in first})
            except (KeyError, RuntimeError) as err:
                raise ValueError(f"The steps' {where} entries changed during the rollout ({err!r}): "
                                 "check_env_specs(env) names the entry.") from err
        return joined[0], joined[1], self.steps

    def _stack(self, steps: list[dict[Any, torch.Tensor]], where: str) -> dict[Any, torch.Tensor]:
        first = steps[0]
        for step in steps:
            if len(step) != len(first):  # an entry that comes and goes: the generic loop cannot stack it either
                changed = sorted(map(str, set(step).symmetric_difference(first)))
                raise ValueError(f"The steps' {where} entries changed during the rollout: {changed} are not in "
                                 "every step; the env's data does not keep to its specs: check_env_specs(env) "
                                 "names the entry.")
        out = {}
        for key in steps[0]:
            try:
                out[key] = torch.stack([step[key] for step in steps], self.dim)
            except (KeyError, RuntimeError) as err:
                raise ValueError(
                    f"The steps' {where} entry {key!r} does not stack ({err!r}); the env's data does not keep to "
                    "its specs: check_env_specs(env) names the entry."
                ) from err
        return out
