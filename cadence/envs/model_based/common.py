"""``ModelBasedEnvBase``: a learned world model stepped as an env.

The env is stateless: where it stands travels in the data. ``reset`` takes the states to
start from (real observations, latent states) in its input and ``step`` runs the world
model (a ``TensorDictModule``) on the step's input (those states and the action) to write
the next observations, the reward and, if the model predicts them, the done flags. So
the same env imagines rollouts from any batch of states, e.g. from a batch of real
states sampled from a replay buffer, and gradients flow through the rollout to the
world model and the policy.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule
    >>> from cadence.data import Bounded, Composite, Unbounded
    >>> from cadence.envs.model_based import ModelBasedEnvBase
    >>> class Drift(torch.nn.Module):  # x' = x + a, reward = -|x'|
    ...     def forward(self, x, a):
    ...         return x + a, -(x + a).abs()
    >>> world_model = TensorDictModule(Drift(), in_keys=["x", "action"], out_keys=["x", "reward"])
    >>> env = ModelBasedEnvBase(world_model, batch_size=[2])
    >>> env.observation_spec = Composite(x=Unbounded(shape=(2, 1)), shape=(2,))
    >>> env.state_spec = env.observation_spec.clone()
    >>> env.action_spec = Bounded(-1.0, 1.0, shape=(2, 1))
    >>> start = env.reset(TensorDict(x=torch.tensor([[0.0], [5.0]]), batch_size=[2]))
    >>> data = env.rollout(3, lambda td: td.set("action", -torch.ones(2, 1)), auto_reset=False, tensordict=start)
    >>> data["next", "x"].squeeze(-1).tolist()
    [[-1.0, -2.0, -3.0], [4.0, 3.0, 2.0]]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from cadence._utils import quoted
from cadence.data import Composite, NonTensor, Stacked, TensorSpec
from cadence.envs.common import EnvBase

__all__ = ["ModelBasedEnvBase"]

NestedKey = str | tuple[str, ...]
DeviceLike = torch.device | str | int

#: How errors name where a value checked against its spec came from.
_STEP = "the world model's output"
_RESET = "reset's input"

#: The spawn key of the seeds the world model's generators get from ``set_seed``: a
#: stream of its own, apart from the seeds ``next_seed`` hands to the next env.
_MODEL_SEED_STREAM = 0x4D42


class ModelBasedEnvBase(EnvBase):
    """A world model stepped as an env: the base of model-based RL's imagined rollouts.

    ``step`` runs ``world_model`` on a shallow copy of its input (the current states
    and the action) and keeps, of what comes back, the observations, rewards and done
    flags of the specs; other entries the model writes (a distribution's parameters,
    say) stay out of the env's data. An observation the model does not write keeps its
    input value (a constant such as a goal passes through); done flags it does not
    write are ``False`` (a model without a done head never ends an episode). Each entry
    kept must have its spec's dtype and shape (the input's batch, then the spec's dims
    after ``batch_size``): a world model writing, say, ``float64`` observations into a
    ``float32`` spec raises a ``TypeError`` naming the key and both dtypes (a wrong shape,
    a ``ValueError``).

    ``reset`` starts from the states its input holds (the observation and state entries
    of the specs) and draws those it lacks from their specs with :attr:`rng`; a partial
    reset (a ``"_reset"`` mask) draws fresh states for the components it resets.
    The states given must have their specs' dtypes and shapes, and the env must have
    specs to reset to (an observation or state spec).
    ``rollout(n, policy, auto_reset=False, tensordict=states)`` also takes the start
    states alone, without done flags.

    The env is not batch-locked: the input's batch may carry leading dims before
    ``batch_size``, so that one env imagines from a whole batch of states.

    Specs are set as for any env, or copied from the real env the model learns with
    :meth:`set_specs_from_env`. As the env is stateless, the observations the world
    model reads belong in the state spec too (``set_specs_from_env`` puts them there),
    so that batched envs and transforms hand them back to ``step``.

    Args:
        world_model: the model, a ``TensorDictModule`` (a
            :class:`~cadence.modules.model_based.WorldModelWrapper`, say) reading the
            states and the action and writing the next observations and the reward.
            It is moved to ``device`` when one is given.
        params: optional weights to run the model with instead of its own (and its
            buffers), as given by ``TensorDict.from_module(world_model)``: the model
            runs under ``params.to_module(world_model)``.
        device: where the env's data and the model live.
        batch_size: the batch of states the env steps.
        run_type_checks: check inputs and outputs against the specs at every step (the
            dtypes and shapes of what the world model writes are always checked).
        allow_done_after_reset: do not raise if a reset state is done.

    Raises:
        TypeError: ``world_model`` is not a module, ``params`` not a TensorDict or
            ``batch_size`` not a list or tuple; later, a world model output or a reset
            state of another dtype than its spec's.
        ValueError: a ``batch_size`` that is not a shape; later, a world model output or a
            reset state of another shape than its spec's, or a reset of an env without
            observation or state specs.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.model_based import ModelBasedEnvBase
        >>> from cadence.modules import MLP
        >>> model = TensorDictModule(MLP(4, 4, depth=1, num_cells=8), in_keys=["observation", "action"],
        ...                          out_keys=["next_observation_and_reward"])
        >>> class Split(torch.nn.Module):  # one network predicts the observation and the reward
        ...     def forward(self, out):
        ...         return out[..., :3], out[..., 3:]
        >>> from tensordict.nn import TensorDictSequential
        >>> world_model = TensorDictSequential(model, TensorDictModule(
        ...     Split(), in_keys=["next_observation_and_reward"], out_keys=["observation", "reward"]))
        >>> env = ModelBasedEnvBase(world_model, batch_size=[5])
        >>> env.set_specs_from_env(GymEnv("Pendulum-v1"))
        >>> _ = env.set_seed(0)
        >>> data = env.rollout(4)
        >>> data["next", "observation"].shape, data["next", "reward"].shape
        (torch.Size([5, 4, 3]), torch.Size([5, 4, 1]))
    """

    #: ``False``, as the env is stateless, so inputs may carry any leading batch dims before ``batch_size``.
    batch_locked: bool = False

    def __init__(
        self,
        world_model: nn.Module,
        params: TensorDictBase | None = None,
        device: DeviceLike | None = None,
        batch_size: torch.Size | tuple[int, ...] | list[int] | None = None,
        run_type_checks: bool = False,
        allow_done_after_reset: bool = False,
    ) -> None:
        if not isinstance(world_model, nn.Module):
            raise TypeError(
                f"{type(self).__name__}: world_model must be a torch.nn.Module (a TensorDictModule), "
                f"got {type(world_model).__name__}"
            )
        if params is not None and not isinstance(params, TensorDictBase):
            raise TypeError(
                f"{type(self).__name__}: params must be a TensorDict (TensorDict.from_module(world_model)), "
                f"got {type(params).__name__}"
            )
        if batch_size is not None and not (
            isinstance(batch_size, (list, tuple))
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in batch_size)
        ):
            raise (ValueError if isinstance(batch_size, (list, tuple)) else TypeError)(
                f"{type(self).__name__}: batch_size must be a shape (a list or tuple of ints >= 0), got "
                f"{quoted(batch_size)}"
            )
        super().__init__(
            device=device,
            batch_size=batch_size,
            run_type_checks=run_type_checks,
            allow_done_after_reset=allow_done_after_reset,
        )
        self.world_model = world_model if self.device is None else world_model.to(self.device)
        self.world_model_params = params if params is None or self.device is None else params.to(self.device)
        # start states are drawn where the specs live, so the generator lives there too
        self.rng = torch.Generator(device=self._rng_device)

    @property
    def _rng_device(self) -> torch.device:
        return self.device if self.device is not None else torch.device("cpu")

    # ------------------------------------------------------------------ specs
    def set_specs_from_env(self, env: EnvBase) -> None:
        """Takes the specs of ``env`` (the real env the model learns), for this env's
        batch size and device.

        ``env``'s batch dims are dropped and this env's ``batch_size`` put in their
        place; the observations join the state spec, since this stateless env reads them
        back from its input.

        Args:
            env: the env whose observation, action, state, reward and done specs to copy.

        Examples:
            >>> from tensordict.nn import TensorDictModule
            >>> from cadence.envs import GymEnv
            >>> from cadence.envs.model_based import ModelBasedEnvBase
            >>> from cadence.modules import MLP
            >>> model = TensorDictModule(MLP(4, 3), in_keys=["observation", "action"], out_keys=["observation"])
            >>> env = ModelBasedEnvBase(model, batch_size=[8])
            >>> env.set_specs_from_env(GymEnv("Pendulum-v1"))
            >>> env.observation_spec["observation"].shape, env.action_spec.shape
            (torch.Size([8, 3]), torch.Size([8, 1]))
            >>> list(env.state_spec.keys())
            ['observation']
        """
        if not isinstance(env, EnvBase):
            raise TypeError(f"set_specs_from_env: expected an env (EnvBase), got {type(env).__name__}")
        specs = {name: self._respec(env, getattr(env, name)) for name in (
            "full_observation_spec", "full_state_spec", "full_action_spec", "full_reward_spec", "full_done_spec")}
        state = specs["full_state_spec"]
        for key, leaf in specs["full_observation_spec"].items(include_nested=True, leaves_only=True):
            if key not in state.keys(include_nested=True, leaves_only=True):
                state[key] = leaf.clone()
        for name, spec in specs.items():
            setattr(self, name, spec)

    def _respec(self, env: EnvBase, spec: Composite) -> Composite:
        """``spec`` of ``env`` with ``env``'s batch dims replaced by this env's."""
        single = spec[(0,) * env.batch_dims] if env.batch_dims else spec.clone()
        return single.expand(*self.batch_size) if self.batch_dims else single

    def _observation_keys(self) -> list[NestedKey]:
        return self._cached("model_observation_keys", lambda: list(self.full_observation_spec.keys(True, True)))

    def _model_state_keys(self) -> list[NestedKey]:
        """The entries that say where the env stands: the observations and the states."""

        def compute() -> list[NestedKey]:
            keys = list(self.full_observation_spec.keys(True, True))
            return keys + [k for k in self.full_state_spec.keys(True, True) if k not in keys]

        return self._cached("model_state_keys", compute)

    # ------------------------------------------------------------------ step
    def _run_world_model(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The world model on ``tensordict`` (with :attr:`world_model_params` if set)."""
        if self.world_model_params is None:
            return self.world_model(tensordict)
        with self.world_model_params.to_module(self.world_model):
            return self.world_model(tensordict)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        # the model writes into a copy: the caller's input keeps the current states; the
        # input's done flags and rewards (of the last step) are no predictions of this one
        data = tensordict.clone(recurse=False).exclude(*self.done_keys, *self.reward_keys, inplace=True)
        predicted = self._run_world_model(data)
        out = TensorDict({}, batch_size=tensordict.batch_size, device=self.device)
        specs = self._output_leaf_specs()
        for key in self._observation_keys():
            value = predicted.get(key, None)
            if value is None:
                raise KeyError(
                    f"{type(self).__name__}: the world model wrote no {key!r} (spec "
                    f"{self.full_observation_spec[key]}) and the step's input held none; it wrote "
                    f"{sorted(map(str, predicted.keys(True, True)))}."
                )
            out.set(key, self._checked(key, value, specs[key], out.batch_size, _STEP))
        for key in self.reward_keys:
            value = predicted.get(key, None)
            if value is None:
                raise KeyError(
                    f"{type(self).__name__}: the world model wrote no reward at {key!r} "
                    f"(spec {self.full_reward_spec[key]}); it wrote {sorted(map(str, predicted.keys(True, True)))}."
                )
            out.set(key, self._checked(key, value, specs[key], out.batch_size, _STEP))
        for key in self.done_keys:
            value = predicted.get(key, None)
            if value is not None:
                out.set(key, self._checked(key, value, specs[key], out.batch_size, _STEP))
        if not any(out.get(key, None) is not None for key in self.done_keys):
            out.update(self._not_done(out.batch_size))  # a model without a done head never ends
        return out

    def _checked(self, key: NestedKey, value: Any, spec: TensorSpec, batch_size: torch.Size, where: str) -> Any:
        """``value``, if it has the dtype of ``spec`` and its shape (``batch_size``, then the
        spec's dims after the env's batch dims); else an error naming ``key``, what the spec
        expects and what came."""
        if not isinstance(value, torch.Tensor) or isinstance(spec, (Stacked, NonTensor)) or spec.dtype is None:
            return value  # ragged and non-tensor entries: their own specs' business
        expected = (*batch_size, *spec.shape[self.batch_dims :])
        if value.ndim != len(expected) or any(e not in (-1, g) for e, g in zip(expected, value.shape)):
            raise ValueError(
                f"{type(self).__name__}: {where} {key!r} must have shape {expected} (the batch "
                f"{tuple(batch_size)}, then the spec's {tuple(spec.shape[self.batch_dims :])}), got "
                f"{tuple(value.shape)}."
            )
        if value.dtype != spec.dtype:
            raise TypeError(
                f"{type(self).__name__}: {where} {key!r} must have dtype {spec.dtype} (its spec's), got {value.dtype}."
            )
        return value

    def _not_done(self, batch_size: torch.Size) -> TensorDictBase:
        """False done flags for a batch: the spec's flags with the batch's leading dims."""
        extra = batch_size[: len(batch_size) - self.batch_dims]
        return self.full_done_spec.zero(extra)

    def rollout(self, max_steps: int, policy: Any = None, callback: Any = None, *, auto_reset: bool = True,
                tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        """Runs up to ``max_steps`` imagined steps, as ``EnvBase.rollout`` does.

        With ``auto_reset=False``, ``tensordict`` may hold the start states alone (a batch
        of real states, say): the done flags it lacks are added, ``False``, to a copy.

        Args:
            max_steps: the number of steps.
            policy: writes the action(s); random actions if ``None``.
            callback: called as ``callback(env, data)`` after each step.
            auto_reset: reset first (from ``tensordict``'s states if given).
            tensordict: the first reset's input, or the first step's with ``auto_reset=False``.
            **kwargs: the other arguments of ``EnvBase.rollout``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from tensordict.nn import TensorDictModule
            >>> from cadence.envs import GymEnv
            >>> from cadence.envs.model_based import ModelBasedEnvBase
            >>> from cadence.modules import MLP
            >>> model = TensorDictModule(MLP(4, 4), in_keys=["observation", "action"], out_keys=["observation_reward"])
            >>> split = TensorDictModule(lambda x: (x[..., :3], x[..., 3:]), in_keys=["observation_reward"],
            ...                          out_keys=["observation", "reward"])
            >>> from tensordict.nn import TensorDictSequential
            >>> env = ModelBasedEnvBase(TensorDictSequential(model, split))
            >>> env.set_specs_from_env(GymEnv("Pendulum-v1"))
            >>> states = TensorDict(observation=torch.zeros(7, 3), batch_size=[7])
            >>> env.rollout(4, auto_reset=False, tensordict=states).batch_size
            torch.Size([7, 4])
        """
        if not auto_reset and tensordict is not None:
            missing = [key for key in self.done_keys if tensordict.get(key, None) is None]
            if missing:
                tensordict = tensordict.clone(recurse=False)
                flags = self._not_done(tensordict.batch_size)
                for key in missing:
                    tensordict.set(key, flags.get(key))
        return super().rollout(max_steps, policy, callback, auto_reset=auto_reset, tensordict=tensordict, **kwargs)

    # ------------------------------------------------------------------ reset
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        batch_size = self.batch_size if tensordict is None else tensordict.batch_size
        leading = len(batch_size) - self.batch_dims
        if leading < 0 or tuple(batch_size[leading:]) != tuple(self.batch_size):
            raise ValueError(
                f"{type(self).__name__}.reset: the input's batch size {tuple(batch_size)} does not end with "
                f"the env's batch size {tuple(self.batch_size)}."
            )
        keys = self._model_state_keys()
        if not keys:
            raise ValueError(
                f"{type(self).__name__}.reset: the env has no observation or state spec, so there is no state to "
                "start from; set observation_spec and state_spec (the states the world model reads, with their "
                "shapes), or call set_specs_from_env(real_env), first."
            )
        given = tensordict
        if tensordict is not None and any(key in tensordict.keys(True) for key in self.reset_keys):
            given = None  # a partial reset starts the reset components afresh; reset() keeps the others
        specs = self._state_leaf_specs()
        values = {key: given.get(key, None) if given is not None else None for key in keys}
        for key, value in values.items():  # all checked before anything is drawn
            if value is not None:
                self._checked(key, value, specs[key], batch_size, _RESET)
        out = TensorDict({}, batch_size=batch_size, device=self.device)
        drawn = None
        for key, value in values.items():
            if value is None:
                if drawn is None:
                    drawn = self._draw_start_states(batch_size)
                value = drawn.get(key)
            elif self.device is not None and value.device != self.device:
                value = value.to(self.device)
            out.set(key, value)
        return out

    def _output_leaf_specs(self) -> dict[NestedKey, TensorSpec]:
        """The spec of each observation, reward and done flag (what the step keeps)."""

        def compute() -> dict[NestedKey, TensorSpec]:
            leaves: dict[NestedKey, TensorSpec] = {}
            for spec in (self.full_done_spec, self.full_reward_spec, self.full_observation_spec):
                leaves.update(spec.items(include_nested=True, leaves_only=True))
            return leaves

        return self._cached("model_output_specs", compute)

    def _state_leaf_specs(self) -> dict[NestedKey, TensorSpec]:
        """The spec of each entry of :meth:`_model_state_keys` (an observation's, else a state's)."""

        def compute() -> dict[NestedKey, TensorSpec]:
            observations, states = self.full_observation_spec, self.full_state_spec
            observation_keys = set(observations.keys(True, True))
            return {
                key: observations[key] if key in observation_keys else states[key] for key in self._model_state_keys()
            }

        return self._cached("model_state_specs", compute)

    def _draw_start_states(self, batch_size: torch.Size) -> TensorDictBase:
        """Start states for a batch: each observation and state drawn from its spec with
        :attr:`rng`. Override to start from another distribution."""
        extra = batch_size[: len(batch_size) - self.batch_dims]
        specs = self.full_observation_spec.clone()
        for key, leaf in self.full_state_spec.items(include_nested=True, leaves_only=True):
            if key not in specs.keys(include_nested=True, leaves_only=True):
                specs[key] = leaf
        return specs.rand(extra, generator=self.rng)

    # ------------------------------------------------------------------ seeding, devices
    def _seeded_modules(self) -> Iterator[nn.Module]:
        """The modules whose generators ``set_seed`` seeds (subclasses add theirs)."""
        yield self.world_model

    def _set_seed(self, seed: int | None) -> None:
        """Seeds every ``generator`` attribute (a ``torch.Generator``) of the world
        model's submodules, e.g. an RSSM prior's, each with a seed of its own derived from
        ``seed`` (the env's own :attr:`rng` is seeded by ``set_seed``)."""
        if seed is None:
            return
        generators: list[torch.Generator] = []
        for module in self._seeded_modules():
            for sub in module.modules():
                generator = getattr(sub, "generator", None)
                if isinstance(generator, torch.Generator) and not any(generator is g for g in generators):
                    generators.append(generator)
        if not generators:
            return
        sequence = np.random.SeedSequence(seed, spawn_key=(_MODEL_SEED_STREAM,))
        for generator, derived in zip(generators, sequence.generate_state(len(generators), dtype=np.uint64)):
            generator.manual_seed(int(derived))

    def to(self, *args: Any, **kwargs: Any) -> ModelBasedEnvBase:
        """Moves the env, its world model, its ``params`` and its generator.

        The generator on the new device is seeded from the old one, so a seeded env
        stays reproducible.

        Examples:
            >>> from tensordict.nn import TensorDictModule
            >>> from cadence.envs.model_based import ModelBasedEnvBase
            >>> from cadence.modules import MLP
            >>> model = TensorDictModule(MLP(2, 1), in_keys=["x", "action"], out_keys=["x"])
            >>> ModelBasedEnvBase(model).to("cpu").device
            device(type='cpu')
        """
        super().to(*args, **kwargs)
        if self.world_model_params is not None and self.device is not None:
            self.world_model_params = self.world_model_params.to(self.device)
        if self.rng.device != self._rng_device:
            seed = int(torch.randint(0, 2**62, (), generator=self.rng))
            self.rng = torch.Generator(device=self._rng_device)
            self.rng.manual_seed(seed)
        return self
