"""``EnvBase``: the environment template, and ``EnvMetaData``.

A subclass sets its specs in ``__init__`` and implements ``_reset``, ``_step`` and
(if it has randomness of its own) ``_set_seed``. The public ``reset``, ``step``,
``step_and_maybe_reset``, ``set_seed`` and ``rollout`` do the bookkeeping the
reference documentation describes: done/terminated/truncated completion, partial
resets through ``"_reset"`` keys, input checks, and a rollout whose last batch
dimension is named ``"time"``.

What must be filled in after a step (which done keys, which reset keys, which
action checks) is decided once from the specs and cached until a spec changes.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.data import Bounded, Composite, Unbounded
    >>> from cadence.envs import EnvBase
    >>> class CountingEnv(EnvBase):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.observation_spec = Composite(count=Unbounded(shape=(1,)))
    ...         self.action_spec = Bounded(-1.0, 1.0, shape=(1,))
    ...         self.count = 0
    ...     def _reset(self, tensordict):
    ...         self.count = 0
    ...         return TensorDict({"count": torch.zeros(1)}, [])
    ...     def _step(self, tensordict):
    ...         self.count += 1
    ...         return TensorDict({"count": torch.full((1,), float(self.count)),
    ...             "reward": torch.ones(1), "done": torch.tensor([self.count >= 3])}, [])
    >>> data = CountingEnv().rollout(10)
    >>> data.batch_size, data.names, data["next", "count"].squeeze(-1).tolist()
    (torch.Size([3]), ['time'], [1.0, 2.0, 3.0])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Composite, NonTensor, Stacked, TensorSpec, Unbounded
from cadence.envs.env_specs import EnvSpecs, as_tuple_key, unwrap_key
from cadence.envs.metadata import EnvMetaData
from cadence.envs.rollouts import EnvRollouts
from cadence.envs.seeding import SEED_RANGE, next_seed, validate_seed
from cadence.envs.array_simulator import STEP_MACHINERY, ArraySimulator, defining_class
from cadence.envs.step_values import GroupDims, StepValues, input_entries, keep_preset
from cadence.envs.utils import action_in_spec_dtype, check_in_spec, read_entry, step_mdp

if TYPE_CHECKING:  # pragma: no cover - type hints only (this module builds on it)
    from cadence.envs.values_loop import ValuesLoop

NestedKey = str | tuple[str, ...]

__all__ = ["EnvBase", "EnvMetaData", "SEED_RANGE", "next_seed", "validate_seed"]


def _expand_mask(mask: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Broadcasts a ``"_reset"``/done mask (shaped like a done entry) over a value."""
    while mask.ndim and tuple(shape[: mask.ndim]) != tuple(mask.shape):
        if mask.shape[-1] != 1:
            raise ValueError(
                f"A reset mask of shape {tuple(mask.shape)} cannot be matched with an entry of "
                f"shape {tuple(shape)}: the mask must lead the entry's shape."
            )
        mask = mask.squeeze(-1)
    return mask.reshape((*mask.shape, *([1] * (len(shape) - mask.ndim)))).expand(shape)


def _shape_matches(expected: torch.Size, got: torch.Size) -> bool:
    return len(expected) == len(got) and all(e in (-1, g) for e, g in zip(expected, got))


def _check_ragged_action(key: NestedKey, spec: Stacked, values: list[torch.Tensor], leading: int) -> None:
    """The shape and dtype checks of step() for an action whose elements differ in shape."""
    if len(values) != len(spec.specs):
        raise ValueError(f"Action {key!r}: expected {len(spec.specs)} stacked values (spec {spec}), got {len(values)}.")
    for i, (element, value) in enumerate(zip(spec.specs, values)):
        if value.ndim != leading + element.ndim or not _shape_matches(element.shape, value.shape[leading:]):
            raise ValueError(
                f"Action {key!r}, element {i}: expected shape {tuple(element.shape)}, got {tuple(value.shape)}."
            )
        if value.dtype != element.dtype:
            raise TypeError(f"Action {key!r}, element {i}: expected dtype {element.dtype}, got {value.dtype}.")


class EnvBase(EnvSpecs, EnvRollouts, torch.nn.Module):
    """The environment template: specs, reset/step bookkeeping, seeding, rollouts.

    Subclasses implement ``_reset(tensordict) -> TensorDictBase`` (observations and
    optionally done flags), ``_step(tensordict) -> TensorDictBase`` (next
    observations, reward and done and/or terminated/truncated, at the root of the
    returned tensordict) and optionally ``_set_seed(seed)``. Specs are set as
    attributes in ``__init__`` and their shapes include ``batch_size``.

    Args:
        device: where the env's inputs and outputs live.
        batch_size: the number of envs batched together (a shape).
        run_type_checks: check the values of every step's inputs (actions, and the
            state entries the env reads) and of every reset's and step's outputs
            against their specs: NaN, out-of-bounds, masked-out, wrong dtype or shape
            raise a ``SpecMismatchError`` (a ``ValueError``) naming the key, the spec
            and the value. Off by default, so that ``step`` and ``rollout`` stay on
            their hot path (which checks only the shape and dtype of the actions, and
            which the backends' rollout shortcuts skip entirely); ``check_env_specs``
            turns it on for its rollout. With it on, ``rollout`` takes the generic,
            step-by-step path.
        allow_done_after_reset: do not raise if an env is done right after a reset.
        auto_reset: the env resets itself when done, inside ``_step``.
        auto_reset_replace: with ``auto_reset``, write NaN (floats) or zero in the
            ``"next"`` observations of the done steps, which hold the first
            observation of the new episode rather than the last of the old one.

    Examples:
        >>> from cadence.envs.custom import PendulumEnv
        >>> env = PendulumEnv(batch_size=[4])
        >>> env.action_key, env.reward_key, env.done_keys
        ('action', 'reward', ['done', 'terminated'])
        >>> env.rollout(5)["next", "reward"].shape
        torch.Size([4, 5, 1])
    """

    #: Whether inputs must have exactly the env's batch size (stateless envs may
    #: accept any leading batch).
    batch_locked: bool = True

    #: The kernel that steps this env's simulators into arrays (see :attr:`kernel`): a
    #: backend names its own (gymnasium's, dm_control's...); an env written in torch has
    #: none and steps on values through its ``_step``.
    array_kernel: ClassVar[type[ArraySimulator] | None] = None

    #: Whether the loop on values may take this class's steps through :meth:`_step_values`
    #: (by default ``_step`` on a TensorDict of the input's entries, and its output's entries:
    #: no ``"next"`` TensorDict and no ``step_mdp`` per step): the generic kernel of an env
    #: written in torch (the seed's Pendulum, a user's ``_step``). Withdrawn from a subclass
    #: whose body defines ``step()``'s bookkeeping or ``rand_action`` (the loop draws random
    #: actions from the spec); a backend whose ``_step`` reads more than its input says False.
    generic_values_step: ClassVar[bool] = True

    #: Whether the env's own ``_reset``/``_step`` may draw from :attr:`rng` (an env written in
    #: torch does: the seed's Pendulum draws its initial states there). Where they do not (a
    #: backend with a generator of its own), a random rollout on the loop draws all its
    #: actions from ``rng`` at its start, the same values as drawn step by step.
    draws_from_rng: ClassVar[bool] = True

    #: Whether the class keeps ``step()``'s bookkeeping as EnvBase has it
    #: (:data:`~cadence.envs.array_simulator.STEP_MACHINERY`); a class that defines its own
    #: takes every step through it.
    stock_step_machinery: ClassVar[bool] = True

    def __init__(
        self,
        *,
        device: torch.device | str | None = None,
        batch_size: torch.Size | tuple[int, ...] | list[int] | None = None,
        run_type_checks: bool = False,
        allow_done_after_reset: bool = False,
        auto_reset: bool = False,
        auto_reset_replace: bool = True,
    ) -> None:
        super().__init__()
        for method in ("_reset", "_step"):
            if not callable(getattr(self, method, None)):
                raise TypeError(f"{type(self).__name__} must implement {method}() to be an env.")
        self._device = torch.device(device) if device is not None else None
        self._batch_size = torch.Size(batch_size if batch_size is not None else ())
        self.run_type_checks = run_type_checks
        self.allow_done_after_reset = allow_done_after_reset
        self.auto_reset = auto_reset
        self.auto_reset_replace = auto_reset_replace
        #: The env's own random generator (seeded by ``set_seed``): random actions and any
        #: randomness of a simulator written in torch draw from it, never from torch's global one.
        self.rng = torch.Generator()
        self.is_closed = False
        self._cache: dict[str, Any] = {}
        self._auto_reset_stash: dict[NestedKey, torch.Tensor] | None = None
        shape = self._batch_size
        self._input_spec = Composite(
            full_action_spec=Composite(shape=shape, device=self._device),
            full_state_spec=Composite(shape=shape, device=self._device),
            shape=shape,
            device=self._device,
        )
        self._output_spec = Composite(
            full_observation_spec=Composite(shape=shape, device=self._device),
            full_reward_spec=Composite(
                reward=Unbounded(shape=(*shape, 1), device=self._device), shape=shape, device=self._device
            ),
            full_done_spec=self._complete_done_spec(Composite(shape=shape, device=self._device)),
            shape=shape,
            device=self._device,
        )
        self._input_spec.lock_()
        self._output_spec.lock_()

    # ------------------------------------------------------------------ basics
    @property
    def batch_size(self) -> torch.Size:
        """The number of envs batched together, as a shape."""
        return self._batch_size

    @property
    def batch_dims(self) -> int:
        """The number of batch dimensions."""
        return len(self._batch_size)

    @property
    def device(self) -> torch.device | None:
        """Where the env's data lives."""
        return self._device

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_size={self.batch_size}, device={self.device})"

    # ------------------------------------------------------------------ seeding
    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seeds the env (its ``rng`` and its simulator) and returns the next seed.

        The next seed is derived deterministically from ``seed``, so a batch of envs
        can be seeded one after the other without overlap, reproducibly.

        Args:
            seed: the seed, an int with ``0 <= seed < 2**63`` (``SEED_RANGE``); ``None``
                leaves the env's generator as it is.
            static_seed: return ``seed`` itself rather than the next one.

        Returns:
            The seed for the next env.

        Raises:
            TypeError, ValueError: a seed that is not such an int; nothing is seeded
                then, and the env goes on as before.

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> env = PendulumEnv()
            >>> env.set_seed(0) == PendulumEnv().set_seed(0)
            True
        """
        seed = validate_seed(seed, f"{type(self).__name__}.set_seed")
        if seed is not None:
            self.rng.manual_seed(seed)
        self._set_seed(seed)
        if seed is None or static_seed:
            return seed
        return next_seed(seed)

    def _set_seed(self, seed: int | None) -> None:
        """Seeds the simulator. Envs whose only randomness is ``self.rng`` keep this."""

    # ------------------------------------------------------------------ step
    def _action_checks(self) -> list[tuple[NestedKey, torch.Size, torch.dtype, TensorSpec]]:
        def compute() -> list[tuple[NestedKey, torch.Size, torch.dtype, TensorSpec]]:
            checks = []
            for key in self.action_keys:
                spec = self.full_action_spec[key]
                checks.append((key, spec.shape[self.batch_dims :], spec.dtype, spec))
            return checks

        return self._cached("action_checks", compute)

    def _check_step_input(self, tensordict: TensorDictBase) -> None:
        if self.batch_locked and tensordict.batch_size != self.batch_size:
            raise ValueError(
                f"step() got a tensordict of batch size {tuple(tensordict.batch_size)}, but "
                f"{type(self).__name__} has batch size {tuple(self.batch_size)}."
            )
        leading = tensordict.batch_dims - self.batch_dims
        for key, trailing, dtype, spec in self._action_checks():
            value = read_entry(tensordict, key, spec, leading=leading)
            if value is None:
                raise KeyError(
                    f"step() needs the action {key!r} (spec {spec}) in its input; the input holds "
                    f"{sorted(map(str, tensordict.keys(True, True)))}."
                )
            if isinstance(spec, Stacked):  # agents acting in different shapes: one check each
                _check_ragged_action(key, spec, value, leading)
                continue
            if not _shape_matches(trailing, value.shape[leading + self.batch_dims :]) or value.ndim != len(
                trailing
            ) + leading + self.batch_dims:
                raise ValueError(
                    f"Action {key!r}: expected shape {tuple(spec.shape)} (spec {spec}), got {tuple(value.shape)}."
                )
            if value.dtype != dtype:
                tensordict.set(key, action_in_spec_dtype(value, spec, key))
        if self.run_type_checks:
            self._check_inputs(tensordict)

    def _check_inputs(self, tensordict: TensorDictBase) -> None:
        """``run_type_checks``: every action and state entry present in the input lies in
        its spec (a NaN action in a ``Bounded`` spec, say, is caught here, by key)."""
        inputs = self.input_spec
        leading = tensordict.batch_dims - self.batch_dims
        for part in ("full_action_spec", "full_state_spec"):
            specs = inputs[part]
            for key in specs.keys(True, True):
                value = read_entry(tensordict, key, specs[key], leading=leading)
                if value is not None:
                    check_in_spec(specs[key], value, f"step() input {key!r}")

    def _complete_done(self, data: TensorDictBase | StepValues) -> None:
        """Fills the done signals the env did not write: done = terminated | truncated,
        and a lone done is a termination."""
        for prefix in self._done_prefixes:
            done = data.get(prefix + ("done",), None)
            terminated = data.get(prefix + ("terminated",), None)
            truncated = data.get(prefix + ("truncated",), None)
            if done is None and terminated is None and truncated is None:
                raise KeyError(
                    f"{type(self).__name__} wrote no done signal at {unwrap_key(prefix + ('done',))!r} "
                    f"(expected 'done', 'terminated' or 'truncated' there); it wrote "
                    f"{sorted(map(str, data.keys(True, True)))}."
                )
            if done is None:
                done = terminated if truncated is None else (truncated if terminated is None else terminated | truncated)
                data.set(prefix + ("done",), done)
            if terminated is None:
                terminated = done if truncated is None else done & ~truncated
                data.set(prefix + ("terminated",), terminated)
            if truncated is None and prefix + ("truncated",) in self.full_done_spec:
                data.set(prefix + ("truncated",), torch.zeros_like(done))

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Takes one step with the action(s) in ``tensordict``.

        The actions' presence, shapes and dtypes are always checked; their values (NaN,
        bounds, masks), the state entries read and the outputs only with
        ``run_type_checks`` (off by default: this is the hot path).

        Args:
            tensordict: the input, holding the action(s) (and state for stateless envs).

        Returns:
            ``tensordict``, with the step's results written under ``"next"``.

        Raises:
            KeyError, ValueError, TypeError: a missing action, or one of the wrong shape
                or dtype, naming the key and the spec.
            SpecMismatchError: with ``run_type_checks``, an input or output outside its
                spec, naming the key, the spec and the value.

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> env = PendulumEnv()
            >>> data = env.step(env.rand_action(env.reset()))
            >>> sorted(data["next"].keys())
            ['done', 'params', 'reward', 'terminated', 'th', 'thdot']
        """
        loop = self._manual_values_loop()
        if loop is not None and loop.step_tensordict(tensordict) is not None:
            return tensordict  # the step on plain tensors, where the env and the input allow it
        self._check_step_input(tensordict)
        next_td = self._step(tensordict)
        self._complete_done(next_td)
        self._check_rewards(next_td)
        if self.run_type_checks:
            self._check_values(next_td, f"{type(self).__name__}._step()")
        if self.auto_reset:
            self._stash_auto_reset(next_td)
        preset = tensordict.get("next", None)
        if preset is not None:  # what the policy wrote for the next step (a recurrent state, say) stays
            next_td.update(preset.exclude(*next_td.keys(True, True)))
        tensordict.set("next", next_td)
        return tensordict

    def _check_rewards(self, next_td: TensorDictBase | StepValues) -> None:
        for key in self.reward_keys:
            if next_td.get(key, None) is None:
                raise KeyError(
                    f"{type(self).__name__}._step() wrote no reward at {key!r} (spec {self.full_reward_spec[key]})."
                )

    def _array_simulator(self) -> ArraySimulator | None:
        """This env's simulators on the array protocol (see :mod:`cadence.envs.array_simulator`),
        which rollouts, serial batches, parallel workers and collectors step into preallocated
        arrays: the class's :attr:`array_kernel` over this env, ``None`` where it has none or
        the env's settings need the generic step."""
        kernel = type(self).array_kernel
        return None if kernel is None else kernel.for_env(self)

    @property
    def kernel(self) -> str:
        """What takes this env's steps, in words: a backend's kernel stepping its simulators
        into arrays, the step on plain tensors, or the generic step through the class's ``_step``.

        The rule is declared, once per class: a backend class names its kernel in its body
        (``array_kernel = GymSimulator``); a subclass inherits it unless its own body defines
        a method the kernel stands in for (``array_kernel.REPLACES``: ``step()``'s
        bookkeeping, and the backend's readers), in which case the subclass takes those
        steps itself (the kernel's ``FALLBACK``, else the generic step). Settings that need
        the generic step (``run_type_checks``, a device, ``auto_reset``) are read when a
        path asks.

        Examples:
            >>> from cadence.envs import GymEnv, PendulumEnv
            >>> GymEnv("Pendulum-v1").kernel, PendulumEnv().kernel
            ('gymnasium env, stepped into arrays', 'values: PendulumEnv._step')
            >>> class Logged(GymEnv):
            ...     def _step(self, tensordict):
            ...         return super()._step(tensordict)
            >>> Logged("Pendulum-v1").kernel
            'generic: Logged._step'
        """
        cls = type(self)
        if not cls.stock_step_machinery:
            own = [f"{defining_class(cls, name)}.{name}" for name in sorted(STEP_MACHINERY)
                   if defining_class(cls, name) != "EnvBase"]
            return f"generic: {', '.join(own)}, {defining_class(cls, '_step')}._step"
        simulator = self._array_simulator()
        if simulator is not None:
            return simulator.describe()
        if self._values_step_applies() and not (self.run_type_checks or self.auto_reset):
            owner = defining_class(type(self), "_step_values")
            if owner == "EnvBase":  # which runs the class's _step on the entries
                return f"values: {defining_class(type(self), '_step')}._step"
            return f"values: {owner}._step_values"
        return f"generic: {defining_class(type(self), '_step')}._step"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # the rule of `kernel`: applied once, from what the class's own body defines
        defined = cls.__dict__.keys()
        if not STEP_MACHINERY.isdisjoint(defined):
            cls.stock_step_machinery = False
        if "generic_values_step" not in defined and cls.generic_values_step and (
                not cls.stock_step_machinery or "rand_action" in defined):
            cls.generic_values_step = False
        if "array_kernel" not in defined:
            kernel = cls.array_kernel
            while kernel is not None and not kernel.REPLACES.isdisjoint(defined):
                kernel = kernel.FALLBACK
            if kernel is not cls.array_kernel:  # set only when withdrawn: a mixin's declaration stays visible
                cls.array_kernel = kernel

    # ------------------------------------------------------------------ the step on plain tensors
    def _values_step_applies(self) -> bool:
        """Whether :meth:`_step_values` may serve this env's steps: for a class that keeps
        :attr:`generic_values_step`, on the CPU, without type checks or auto-reset, with
        static specs of tensors; a backend with a step on values of its own says so for it.

        ``TransformedEnv`` then runs its transforms on the step's tensors
        (:class:`~cadence.envs.step_values.StepValues`) and builds one TensorDict at the end.
        """
        if not type(self).generic_values_step:
            return False
        return (self.device in (None, torch.device("cpu")) and not self.run_type_checks
                and not self.auto_reset and not self._has_dynamic_specs()
                and not self._cached("holds_non_tensors", lambda: any(  # text...: not stacked as tensors
                    isinstance(leaf, NonTensor)
                    for spec in (self.full_observation_spec, self.full_state_spec, self.full_done_spec,
                                 self.full_reward_spec)
                    for leaf in spec.values(True, True))))

    def _group_dims(self) -> GroupDims:
        """The nested entries whose specs have dims of their own after the batch's (a group
        of agents' agent dim), outer ones first, with those dims: what a TensorDict built
        from a step's entries needs to give its groups their batch size
        (:func:`~cadence.envs.step_values.shape_groups`)."""
        def compute() -> list[tuple[tuple[str, ...], torch.Size]]:
            found: dict[tuple[str, ...], torch.Size] = {}
            for spec in (self.full_observation_spec, self.full_done_spec, self.full_reward_spec,
                         self.full_action_spec, self.full_state_spec):
                for key, leaf in spec.items(True, False):
                    if isinstance(leaf, Composite) and len(leaf.shape) > self.batch_dims:
                        found[key if isinstance(key, tuple) else (key,)] = leaf.shape[self.batch_dims:]
            return sorted(found.items(), key=lambda item: len(item[0]))

        return self._cached("group_dims", compute)

    def _step_values(self, tensordict: TensorDictBase | StepValues) -> StepValues:
        """What ``_step`` returns, as :class:`~cadence.envs.step_values.StepValues` (only
        called where :meth:`_values_step_applies`): by default, ``_step`` on a TensorDict of
        the input's entries, and its output's entries."""
        data = tensordict.to_tensordict(self._group_dims()) if isinstance(tensordict, StepValues) else tensordict
        out = self._step(data)
        return StepValues(dict(out.items(True, True)), self.batch_size, self.device)

    def _step_as_values(self, tensordict: TensorDictBase | StepValues, checked: bool = False) -> StepValues:
        """``step()``'s checks and done completion around :meth:`_step_values`, for an
        outer env that keeps working on the values (no ``"next"`` written, no auto-reset,
        no ``run_type_checks``: the caller makes sure of these). ``checked``: the caller
        checked the action against this env's action spec already."""
        if not checked:
            self._check_step_input(tensordict)
        values = self._step_values(tensordict)
        if not self._step_values_complete:
            self._complete_done(values)
            self._check_rewards(values)
        keep_preset(values, tensordict)
        return values

    def _values_stepper(self) -> Callable[..., StepValues]:
        """What takes the values loop's steps: :meth:`_step_as_values`, or, where the env
        steps on values and has an array simulator, the same step through it
        (:class:`~cadence.envs.simulator_values_step.SimulatorValuesStep`: no readers)."""
        from cadence.envs.array_simulator import arrays_fit  # they build on this module
        from cadence.envs.simulator_values_step import SimulatorValuesStep

        simulator = self._array_simulator() if self._values_step_applies() else None
        if simulator is None or not arrays_fit(self):
            return self._step_as_values
        return SimulatorValuesStep(self, simulator)

    def _stepped_on_arrays(self, entries: dict[Any, torch.Tensor]) -> None:
        """The env was stepped through its array simulator, outside ``step()``, with these
        results (the step's entries, rewards included; the caller goes on to change the dict,
        so copy what you keep). An env that keeps a record of where it stands updates it
        here; the default keeps none."""

    #: Whether :meth:`_step_values` always writes the reward and every done flag (the
    #: stock gym-like readers do), so that :meth:`_step_as_values` need not look for them.
    _step_values_complete: bool = False

    def _check_values(self, data: TensorDictBase, where: str) -> None:
        """``run_type_checks``: every output entry present lies in its spec."""
        spec = self._step_spec()["next"]
        for key in spec.keys(True, True):
            value = read_entry(data, key, spec[key], leading=data.batch_dims - self.batch_dims)
            if value is not None:
                check_in_spec(spec[key], value, f"{where} output {key!r}")

    def _stash_auto_reset(self, next_td: TensorDictBase) -> None:
        """Keeps the first observations of the new episodes and, if asked, masks them
        in the ``"next"`` data, where they would pass for the last of the old ones."""
        self._auto_reset_stash = None
        done = next_td.get(self.done_key)
        if not done.any():
            return
        keys = list(self.full_observation_spec.keys(True, True))
        self._auto_reset_stash = {key: next_td.get(key) for key in keys if key in next_td.keys(True, True)}
        if not self.auto_reset_replace:
            return
        for key, value in self._auto_reset_stash.items():
            fill = torch.nan if value.is_floating_point() else 0
            next_td.set(key, torch.where(_expand_mask(done, value.shape), torch.full_like(value, fill), value))

    # ------------------------------------------------------------------ reset
    def _effective_reset_masks(self, tensordict: TensorDictBase) -> dict[tuple[str, ...], torch.Tensor]:
        """The ``"_reset"`` masks in force: one at a level overrides those below it."""
        masks: dict[tuple[str, ...], torch.Tensor] = {}
        for prefix in self._done_prefixes:
            mask = tensordict.get(prefix + ("_reset",), None)
            if mask is None or any(prefix[: len(p)] == p for p in masks):
                continue
            masks[prefix] = mask
        return masks

    def reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        """Resets the env, or the parts of it that ``"_reset"`` entries select.

        Without ``"_reset"`` entries the whole env is reset. With them, only the
        components where ``"_reset"`` is true are: the output is masked with them,
        the values of ``tensordict`` are kept elsewhere, ``tensordict`` is updated in
        place and its ``"_reset"`` entries are removed. A ``"_reset"`` at one level
        overrides those below it.

        Args:
            tensordict: optional input (``"_reset"`` masks, state for stateless envs).
            **kwargs: passed to ``_reset``.

        Returns:
            The first step's data: observations and done flags.

        Examples:
            >>> import torch
            >>> from cadence.envs.custom import PendulumEnv
            >>> env = PendulumEnv(batch_size=[2])
            >>> data = env.reset()
            >>> data["th"] = torch.tensor([1.0, 1.0])
            >>> data["_reset"] = torch.tensor([[False], [True]])
            >>> out = env.reset(data)
            >>> bool(out["th"][0] == 1.0), "_reset" in data.keys()
            (True, False)
        """
        masks = self._effective_reset_masks(tensordict) if tensordict is not None else {}
        if masks and not any(bool(mask.any()) for mask in masks.values()):
            # nothing to reset: the simulator is left alone, the input is the output
            self._drop_reset_keys(tensordict)
            return tensordict.copy()
        out = self._reset(tensordict, **kwargs)
        if self.run_type_checks:
            self._check_values(out, f"{type(self).__name__}._reset()")
        for key in self.done_keys:
            if out.get(key, None) is None:
                spec = self.full_done_spec[key]
                shape = out.batch_size + spec.shape[self.batch_dims :]
                out.set(key, torch.zeros(shape, dtype=spec.dtype, device=spec.device))
        if self.auto_reset:
            for key in self.done_keys:
                out.set(key, torch.zeros_like(out.get(key)))
        if masks:
            out = out.exclude(*self.reset_keys)
            if not all(bool(mask.all()) for mask in masks.values()):  # all reset: nothing of the input kept
                self._mask_partial_reset(out, tensordict, masks)
            tensordict.update(out)
            self._drop_reset_keys(tensordict)
        elif not self.allow_done_after_reset:
            for key in self.done_keys:
                if out.get(key).any():
                    raise RuntimeError(
                        f"{type(self).__name__} is done ({key!r}) right after a reset; pass "
                        f"allow_done_after_reset=True if that is expected."
                    )
        return out

    def _drop_reset_keys(self, tensordict: TensorDictBase) -> None:
        for key in self.reset_keys:
            if key in tensordict.keys(include_nested=True):
                del tensordict[key]

    @staticmethod
    def _mask_partial_reset(
        out: TensorDictBase, previous: TensorDictBase, masks: dict[tuple[str, ...], torch.Tensor]
    ) -> None:
        ordered = sorted(masks.items(), key=lambda item: len(item[0]))
        for key in list(out.keys(include_nested=True, leaves_only=True)):
            key_t = as_tuple_key(key)
            mask = next((m for prefix, m in ordered if key_t[: len(prefix)] == prefix), None)
            old = previous.get(key, None)
            if mask is None or old is None:
                continue
            new = out.get(key)
            out.set(key, torch.where(_expand_mask(mask, new.shape), new, old))

    def _reset_done(self, next_root: TensorDictBase) -> tuple[TensorDictBase, bool]:
        """Resets the done components of a next step's input; says if any was done."""
        if self._auto_reset_stash is not None:
            next_root.update(self._auto_reset_stash)
            self._auto_reset_stash = None
        any_done = False
        for prefix in self._done_prefixes:
            done = next_root.get(prefix + ("done",))
            if done.any():
                next_root.set(prefix + ("_reset",), done)
                any_done = True
        if any_done:
            self.reset(next_root)
        return next_root, any_done

    def _reset_done_values(self, next_root: dict[Any, torch.Tensor]) -> dict[Any, torch.Tensor]:
        """:meth:`_reset_done` for the loop on values: the next input's entries (nested ones
        under tuple keys) with the done components reset. By default through
        :meth:`_reset_done` on a TensorDict of them; a backend with a step on values of its
        own may reset on values too."""
        reset, _ = self._reset_done(TensorDict(next_root, batch_size=self.batch_size))
        return input_entries(reset)

    def step_and_maybe_reset(self, tensordict: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase]:
        """Steps, then builds the next input, resetting the components that are done.

        Returns:
            The step's data (results under ``"next"``) and the input of the next step.

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> env = PendulumEnv(batch_size=[3])
            >>> data_ = env.reset()
            >>> for _ in range(4):
            ...     data, data_ = env.step_and_maybe_reset(env.rand_action(data_))
            >>> data["next", "th"].shape, data_["th"].shape
            (torch.Size([3]), torch.Size([3]))
        """
        loop = self._manual_values_loop()
        if loop is not None:
            stepped = loop.step_and_maybe_reset(tensordict)
            if stepped is not None:
                return stepped
        tensordict = self.step(tensordict)
        next_root = self._step_mdp(tensordict)
        next_root, _ = self._reset_done(next_root)
        return tensordict, next_root

    def _manual_values_loop(self) -> ValuesLoop | None:
        """The loop that takes the manual loop's steps on plain tensors (the same results,
        one TensorDict built per output), where the env steps on values and keeps to
        ``values_loop_applies``; ``None`` otherwise."""
        if self.run_type_checks or self.auto_reset or not self._values_step_applies():
            return None

        def build() -> ValuesLoop | bool:
            from cadence.envs.values_loop import ValuesLoop, values_loop_applies  # it builds on this module

            stock = type(self).stock_step_machinery  # a subclass's own step() is kept
            return ValuesLoop(self) if stock and values_loop_applies(self) else False

        return self._cached("manual_values_loop", build) or None

    def _step_mdp(self, tensordict: TensorDictBase) -> TensorDictBase:
        return step_mdp(
            tensordict, reward_keys=self.reward_keys, done_keys=self.done_keys, action_keys=self.action_keys
        )

    # ------------------------------------------------------------------ random actions
    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Writes random actions (drawn with ``self.rng``) into ``tensordict``.

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> PendulumEnv().rand_action()["action"].shape
            torch.Size([1])
        """
        if tensordict is None:
            tensordict = TensorDict({}, batch_size=self.batch_size, device=self.device)
        extra = tensordict.batch_size[: tensordict.batch_dims - self.batch_dims] or None
        keys = self.action_keys
        if len(keys) == 1:  # the common case: one leaf, no intermediate tensordict to make
            key = keys[0]
            leaf = self.full_action_spec[key]
            # agents acting in different shapes go through their Composite, and so does a group
            # the input lacks (the Composite gives it its batch dims, the agents')
            if not isinstance(leaf, Stacked) and (type(key) is str or tensordict.get(key[:-1], None) is not None):
                return tensordict.set(key, leaf.rand(extra, generator=self.rng))
        tensordict.update(self.full_action_spec.rand(extra, generator=self.rng))
        return tensordict

    def rand_step(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Takes a step with random actions (resetting first if no input is given).

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> "next" in PendulumEnv().rand_step().keys()
            True
        """
        if tensordict is None:
            tensordict = self.reset()
        return self.step(self.rand_action(tensordict))

    def fake_tensordict(self) -> TensorDictBase:
        """A zeroed step, laid out from the specs (inputs at the root, results under ``"next"``).

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> sorted(PendulumEnv().fake_tensordict()["next"].keys())
            ['done', 'params', 'reward', 'terminated', 'th', 'thdot']
        """
        return self._step_spec().zero()

    # ------------------------------------------------------------------ devices, closing
    def to(self, *args: Any, **kwargs: Any) -> EnvBase:
        """Moves the env (its specs and device) like ``torch.nn.Module.to``.

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> PendulumEnv().to("cpu").device
            device(type='cpu')
        """
        device, _, _, _ = torch._C._nn._parse_to(*args, **kwargs)
        if device is not None:
            self._device = device
            self._input_spec = self._input_spec.to(device)
            self._output_spec = self._output_spec.to(device)
            self._cache.clear()
        return super().to(*args, **kwargs)

    def append_transform(self, transform: Any) -> Any:
        """Wraps this env in a ``TransformedEnv`` with ``transform`` and returns it.

        The env itself is not changed (a ``TransformedEnv`` appends in place instead).

        Args:
            transform: a ``Transform`` (or a ``Compose`` of them).

        Returns:
            ``TransformedEnv(self, transform)``.

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> from cadence.envs.transforms import RewardScaling
            >>> env = PendulumEnv().append_transform(RewardScaling(loc=0.0, scale=2.0))
            >>> type(env).__name__, type(env.base_env).__name__
            ('TransformedEnv', 'PendulumEnv')
        """
        wrapper = EnvBase._transformed_env_class
        if wrapper is None:
            raise RuntimeError("append_transform() needs cadence.envs.transforms imported (import cadence.envs does it)")
        return wrapper(self, transform)

    #: What ``append_transform`` wraps an env in: ``TransformedEnv``, which
    #: ``cadence.envs.transforms.base`` sets here when it is imported (the transforms build on
    #: this module, so this module does not import them).
    _transformed_env_class: type[EnvBase] | None = None

    def close(self) -> None:
        """Releases the env's resources; the env cannot be used afterwards."""
        self.is_closed = True
