"""The transform framework: ``Transform``, ``Compose`` and ``TransformedEnv``.

A transform reads ``in_keys`` and writes ``out_keys`` on the data an env emits (its
``_step`` and ``_reset`` hooks), reads ``out_keys_inv`` and writes ``in_keys_inv`` on the
data an env receives (``inv``, before the action reaches the base env), and says how it
changes the specs (``transform_*_spec``), so that a ``TransformedEnv``'s specs describe
exactly what it emits and accepts. Called on a bare tensordict (``transform(data)``) it
transforms that data, as a replay buffer or a module would use it.

A transform belongs to at most one container (a ``Compose`` or a ``TransformedEnv``):
reusing it elsewhere raises; ``clone()`` gives a parent-less copy that shares its buffers.

Examples:
    >>> from cadence.envs import GymEnv
    >>> from cadence.envs.transforms import Compose, DoubleToFloat, RewardScaling, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(RewardScaling(loc=0.0, scale=0.1)))
    >>> env.rollout(3)["next", "reward"].shape
    torch.Size([3, 1])
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from cadence.data import Composite
from cadence.envs.common import EnvBase
from cadence.envs.seeding import validate_seed
from cadence.envs.array_simulator import arrays_fit
from cadence.envs.simulator_values_step import SimulatorValuesStep
from cadence.envs.step_values import StepValues

__all__ = ["Compose", "Transform", "TransformedEnv", "key_list"]

NestedKey = str | tuple[str, ...]


def key_list(keys: NestedKey | Sequence[NestedKey] | None) -> list[NestedKey]:
    """One key or several as a list: ``"a"`` -> ``["a"]``, ``None`` -> ``[]``.

    Examples:
        >>> key_list("reward"), key_list(None), key_list([("agents", "reward")])
        (['reward'], [], [('agents', 'reward')])
    """
    if keys is None:
        return []
    if isinstance(keys, (str, tuple)):
        return [keys]
    return list(keys)


class Transform(torch.nn.Module):
    """The base of every transform.

    Subclasses usually override ``_apply_transform`` (one tensor in, one out) and the
    spec hooks; those that need more override ``_call`` (the data of a step or a
    reset), ``_step``/``_reset`` (which also see the step's input) or ``_inv_call``.

    Args:
        in_keys: the entries read from the env's output.
        out_keys: where the results go (``in_keys`` if not given).
        in_keys_inv: the base env's names of the input entries written by ``inv``.
        out_keys_inv: the outside names of the input entries ``inv`` reads
            (``in_keys_inv`` if not given).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Double(Transform):
        ...     def _apply_transform(self, value):
        ...         return value * 2
        >>> Double(in_keys=["x"])(TensorDict({"x": torch.ones(2)}, []))["x"].tolist()
        [2.0, 2.0]
    """

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        in_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
        out_keys_inv: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__()
        self.in_keys = key_list(in_keys)
        self.out_keys = key_list(out_keys) if out_keys is not None else list(self.in_keys)
        self.in_keys_inv = key_list(in_keys_inv)
        self.out_keys_inv = key_list(out_keys_inv) if out_keys_inv is not None else list(self.in_keys_inv)
        for name, (ins, outs) in {"keys": (self.in_keys, self.out_keys), "inverse keys": (self.in_keys_inv, self.out_keys_inv)}.items():
            if len(ins) != len(outs):
                raise ValueError(
                    f"{type(self).__name__}: in and out {name} must pair up, got {len(ins)} in and {len(outs)} out."
                )
        # the container is kept out of the module tree: it owns us, not the reverse
        self.__dict__["_container"] = None

    # ------------------------------------------------------------------ data
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Transforms a bare tensordict (the observation path, as on an env's output)."""
        return self._call(tensordict)

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Transforms the data of one step or reset: each present ``in_key`` → ``out_key``."""
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = tensordict.get(in_key, None)
            if value is not None:
                try:  # (inline: this runs for every entry of every step)
                    out = self._apply_transform(value)
                except (RuntimeError, TypeError) as err:
                    raise self._transform_error(err, value, in_key) from err
                tensordict.set(out_key, out)
        return tensordict

    def _checked(self, function: Any, value: torch.Tensor, key: NestedKey) -> torch.Tensor:
        try:
            return function(value)
        except (RuntimeError, TypeError) as err:
            raise self._transform_error(err, value, key) from err

    def _transform_error(self, err: Exception, value: torch.Tensor, key: NestedKey) -> Exception:
        """``err`` of transforming ``value`` at ``key``, as an error of the same type that names them."""
        return type(err)(
            f"{type(self).__name__} could not transform {key!r} (shape {tuple(value.shape)}, "
            f"dtype {value.dtype}): {err}"
        )

    def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        raise TypeError(f"{type(self).__name__} reads {self.in_keys} but defines no _apply_transform().")

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Transforms a step's results; ``tensordict`` is the step's input."""
        return self._call(next_tensordict)

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        """Transforms a reset's output; ``tensordict`` is the reset's input."""
        return self._call(tensordict_reset)

    #: Whether ``_step`` also runs on a step's plain tensors: on
    #: :class:`~cadence.envs.step_values.StepValues` (a dict of the step's entries with the
    #: few TensorDict methods a step uses), so that no TensorDict is built per step. A
    #: transform that says so reads its ``tensordict`` with ``get`` only and its
    #: ``next_tensordict`` through ``get``/``set``/``del``/``in``/``select``/``exclude``/
    #: ``keys``/``items``/``batch_dims``/``batch_size``/``device``, returns what it was given,
    #: and its ``inv`` changes nothing but its ``in_keys_inv``. A ``TransformedEnv`` whose
    #: transforms all say so (and have no ``in_keys_inv``) steps on plain tensors. Off unless
    #: a transform says so; the tests run each one that does on both paths.
    steps_on_values: bool = False

    #: Whether ``_step_over_time`` gives what ``_step`` gives step by step, so that the
    #: loop may step the base env over a stretch of steps and transform them after, at once
    #: (``ValuesLoop.stretch``). Off unless a transform says so.
    steps_over_time: bool = False

    def _step_over_time(self, tensordict: TensorDictBase, next_steps: TensorDictBase) -> TensorDictBase:
        """``_step`` for consecutive steps at once.

        Args:
            tensordict: the input of the first step (batch ``[*B]``).
            next_steps: the steps' outputs (batch ``[*B, T]``), with no reset among them
                but, perhaps, a done last step.

        Returns:
            ``next_steps``, transformed. The default suits transforms whose ``_step``
            maps each output on its own, whatever its batch dims.
        """
        return self._step(tensordict, next_steps)

    def _steps_before_done(self, tensordict: TensorDictBase) -> int | None:
        """How many steps from the input ``tensordict`` this transform lets pass before
        it ends an episode itself (a step limit); ``None`` if it never does."""
        return None

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Maps an input from the outside names and formats to the base env's."""
        return self._inv_call(tensordict)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            value = tensordict.get(out_key, None)
            if value is not None:
                tensordict.set(in_key, self._checked(self._inv_apply_transform, value, out_key))
        return tensordict

    def _inv_apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        return value

    # ------------------------------------------------------------------ specs
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        """Changes the output spec (observation, reward and done specs) in place."""
        self._check_in_keys(output_spec)
        for name, hook in (
            ("full_observation_spec", self.transform_observation_spec),
            ("full_reward_spec", self.transform_reward_spec),
            ("full_done_spec", self.transform_done_spec),
        ):
            output_spec[name] = hook(output_spec[name])
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        """Changes the input spec (action and state specs) in place."""
        input_spec["full_action_spec"] = self.transform_action_spec(input_spec["full_action_spec"])
        input_spec["full_state_spec"] = self.transform_state_spec(input_spec["full_state_spec"])
        return input_spec

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        """The observation spec after this transform (unchanged by default)."""
        return observation_spec

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        """The reward spec after this transform (unchanged by default)."""
        return reward_spec

    def transform_done_spec(self, done_spec: Composite) -> Composite:
        """The done spec after this transform (unchanged by default)."""
        return done_spec

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        """The action spec seen from outside (unchanged by default)."""
        return action_spec

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        """The state spec seen from outside (unchanged by default)."""
        return state_spec

    def transform_env_batch_size(self, batch_size: torch.Size) -> torch.Size:
        """The batch size of the env seen through this transform (unchanged by default).

        A transform that changes it (``BatchSizeTransform``) also reshapes the specs it
        is given, the data on the way out and, in ``inv``/``_reset_env_preprocess``, the
        data on the way in.
        """
        return batch_size

    def transform_env_device(self, device: torch.device | None) -> torch.device | None:
        """The device of the env seen through this transform (unchanged by default)."""
        return device

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        """Maps a reset's input to what the env below expects (unchanged by default)."""
        return tensordict

    def _check_in_keys(self, output_spec: Composite) -> None:
        """An env transform reads entries the env emits: say which are missing."""
        available = set()
        for name in ("full_observation_spec", "full_reward_spec", "full_done_spec"):
            available |= {k if isinstance(k, str) else tuple(k) for k in output_spec[name].keys(True, True)}
        for key in self.in_keys:
            if key not in available:
                raise KeyError(
                    f"{type(self).__name__} reads {key!r}, which the env does not emit; it emits "
                    f"{sorted(map(str, available))}."
                )

    def _output_leaf_specs(self, spec: Composite, transform: Any) -> Composite:
        """Writes ``transform(spec[in_key])`` at each ``out_key`` of ``spec`` that holds an ``in_key``."""
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key in spec.keys(True, True):
                spec[out_key] = transform(spec[in_key])
        return spec

    def _input_leaf_specs(self, spec: Composite, transform: Any) -> Composite:
        """Writes ``transform(spec[in_key_inv])`` under its outside name ``out_key_inv``, for
        each inverse key ``spec`` (an action or state spec) holds."""
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            if in_key in spec.keys(True, True):
                leaf = spec[in_key]
                if in_key != out_key:
                    del spec[in_key]
                spec[out_key] = transform(leaf)
        return spec

    # ------------------------------------------------------------------ ownership
    @property
    def container(self) -> Compose | TransformedEnv | None:
        """The ``Compose`` or ``TransformedEnv`` this transform belongs to."""
        return self.__dict__["_container"]

    def set_container(self, container: Compose | TransformedEnv) -> None:
        """Gives this transform to ``container``; a transform has one container at most."""
        if self.container is not None and self.container is not container:
            raise ValueError(
                f"{type(self).__name__} already belongs to a {type(self.container).__name__}; use "
                f"transform.clone() to use it elsewhere."
            )
        self.__dict__["_container"] = container

    def reset_parent(self) -> None:
        """Releases this transform from its container."""
        self.__dict__["_container"] = None

    @property
    def parent(self) -> TransformedEnv | None:
        """The base env wrapped in the transforms that come before this one (clones of
        them), or ``None`` outside an env."""
        container = self.container
        preceding: list[Transform] = []
        child: Transform = self
        while container is not None and not isinstance(container, TransformedEnv):
            assert isinstance(container, Compose)
            index = next(i for i, t in enumerate(container.transforms) if t is child)
            preceding = [t.clone() for t in container.transforms[:index]] + preceding
            child, container = container, container.container
        if container is None:
            return None
        view = TransformedEnv(container.base_env, Compose(*preceding), _as_view=True)
        view.rng = container.rng  # the view draws from its env's generator, seeded with it
        return view

    def clone(self) -> Transform:
        """A parent-less copy that shares this transform's buffers and parameters (so
        in-place updates of one show in the other)."""
        clone = copy.copy(self)
        clone.__dict__ = dict(self.__dict__)
        clone._buffers = dict(self._buffers)
        clone._parameters = dict(self._parameters)
        clone._modules = {name: m.clone() if isinstance(m, Transform) else m for name, m in self._modules.items()}
        clone.__dict__["_container"] = None
        for module in clone._modules.values():
            if isinstance(module, Transform):
                module.__dict__["_container"] = None
        return clone

    def __repr__(self) -> str:
        keys = f"in_keys={self.in_keys}, out_keys={self.out_keys}"
        if self.in_keys_inv:
            keys += f", in_keys_inv={self.in_keys_inv}, out_keys_inv={self.out_keys_inv}"
        return f"{type(self).__name__}({keys})"


class Compose(Transform):
    """Transforms applied in order (inverses in reverse order).

    Indexing gives a member (which keeps its container); slicing gives a new,
    parent-less ``Compose`` of clones (sharing their buffers).

    Examples:
        >>> from cadence.envs.transforms import Compose, RewardScaling
        >>> chain = Compose(RewardScaling(0.0, 2.0), RewardScaling(1.0, 1.0))
        >>> len(chain), chain[-2:][0] is chain[0]
        (2, False)
    """

    def __init__(self, *transforms: Transform) -> None:
        super().__init__()
        for transform in transforms:
            transform.set_container(self)
        self.transforms = torch.nn.ModuleList(transforms)

    def __getitem__(self, index: int | slice) -> Transform:
        if isinstance(index, slice):
            return Compose(*[t.clone() for t in self.transforms[index]])
        return self.transforms[index]

    def __len__(self) -> int:
        return len(self.transforms)

    def __getattr__(self, name: str) -> Any:
        # `env.transform.dump()` with a VideoRecorder in the chain: the last member that
        # has the attribute answers
        try:
            return super().__getattr__(name)
        except AttributeError:
            members = self.__dict__.get("_modules", {}).get("transforms")
            if name.startswith("_") or members is None:
                raise
            for transform in reversed(list(members)):
                if hasattr(transform, name):
                    return getattr(transform, name)
            raise

    def __iter__(self) -> Iterator[Transform]:  # type: ignore[override]
        return iter(self.transforms)

    def append(self, transform: Transform) -> None:
        """Adds ``transform`` at the end."""
        transform.set_container(self)
        self.transforms.append(transform)

    def insert(self, index: int, transform: Transform) -> None:
        """Adds ``transform`` at ``index``."""
        transform.set_container(self)
        self.transforms.insert(index, transform)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        for transform in self.transforms:
            tensordict = transform(tensordict)
        return tensordict

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for transform in self.transforms:
            tensordict = transform._call(tensordict)
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for transform in self.transforms:
            next_tensordict = transform._step(tensordict, next_tensordict)
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        for transform in self.transforms:
            tensordict_reset = transform._reset(tensordict, tensordict_reset)
        return tensordict_reset

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        for transform in reversed(self.transforms):
            tensordict = transform.inv(tensordict)
        return tensordict

    @property
    def steps_over_time(self) -> bool:  # type: ignore[override]
        return all(transform.steps_over_time for transform in self.transforms)

    @property
    def steps_on_values(self) -> bool:  # type: ignore[override]
        return all(transform.steps_on_values for transform in self.transforms)

    def _step_over_time(self, tensordict: TensorDictBase, next_steps: TensorDictBase) -> TensorDictBase:
        for transform in self.transforms:
            next_steps = transform._step_over_time(tensordict, next_steps)
        return next_steps

    def _steps_before_done(self, tensordict: TensorDictBase) -> int | None:
        limits = [transform._steps_before_done(tensordict) for transform in self.transforms]
        return min((limit for limit in limits if limit is not None), default=None)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        for transform in self.transforms:
            output_spec = transform.transform_output_spec(output_spec)
        return output_spec

    def transform_env_batch_size(self, batch_size: torch.Size) -> torch.Size:
        for transform in self.transforms:
            batch_size = transform.transform_env_batch_size(batch_size)
        return batch_size

    def transform_env_device(self, device: torch.device | None) -> torch.device | None:
        for transform in self.transforms:
            device = transform.transform_env_device(device)
        return device

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        for transform in reversed(self.transforms):
            tensordict = transform._reset_env_preprocess(tensordict)
        return tensordict

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        # specs go outwards from the base env, as outputs do; only the data of inv() flows inwards
        for transform in self.transforms:
            input_spec = transform.transform_input_spec(input_spec)
        return input_spec

    def clone(self) -> Compose:
        return Compose(*[t.clone() for t in self.transforms])

    def __repr__(self) -> str:
        inner = ",\n    ".join(repr(t) for t in self.transforms)
        return f"Compose(\n    {inner})" if inner else "Compose()"


class TransformedEnv(EnvBase):
    """An env seen through a transform: outputs transformed on the way out, inputs
    mapped back on the way in, specs that say so.

    Args:
        base_env: the env to wrap (it is not modified; its specs neither).
        transform: a transform, or a ``Compose`` of them; none to start empty.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import DoubleToFloat, TransformedEnv
        >>> env = TransformedEnv(GymEnv("CartPole-v1"))
        >>> env.append_transform(DoubleToFloat())
        TransformedEnv(env=GymEnv(env=CartPole-v1, batch_size=torch.Size([]), device=None), transform=Compose(
            DoubleToFloat(in_keys=[], out_keys=[])))
    """

    #: None: a transformed env's paths step its base env's kernel and run the transforms on
    #: the step's values (or over time), never the transformed env as one.
    array_kernel = None

    def __init__(self, base_env: EnvBase, transform: Transform | None = None, *, _as_view: bool = False) -> None:
        super().__init__(device=base_env.device, batch_size=base_env.batch_size)
        self.base_env = base_env
        if transform is None:
            transform = Compose()
        elif type(transform) is not Compose:
            # a Compose subclass (R3MTransform, ...) is one member, as in the reference: what is
            # appended later goes after it, not into its own chain
            if transform.container is not None:
                raise ValueError(
                    f"{type(transform).__name__} already belongs to a {type(transform.container).__name__}; "
                    f"pass transform.clone() to use it in another env."
                )
            transform = Compose(transform)
        if not _as_view:
            transform.set_container(self)
        else:  # a parent view: its transforms are clones that nobody else holds
            transform.__dict__["_container"] = self
        self.transform = transform
        self._refresh_specs()

    @property
    def batch_locked(self) -> bool:  # type: ignore[override]
        return self._modules["base_env"].batch_locked  # read at every step: past Module.__getattr__

    def _refresh_specs(self) -> None:
        """Reads the base env's batch size, device and specs and passes them through the transforms."""
        batch_size = self.transform.transform_env_batch_size(self.base_env.batch_size)
        device = self.transform.transform_env_device(self.base_env.device)
        if batch_size != self._batch_size or device != self._device:
            # the outer containers take the new shape and device; the leaves are set below
            self._batch_size, self._device = torch.Size(batch_size), device
            self._input_spec = Composite(
                full_action_spec=Composite(shape=batch_size, device=device),
                full_state_spec=Composite(shape=batch_size, device=device),
                shape=batch_size,
                device=device,
            ).lock_()
            self._output_spec = Composite(
                full_observation_spec=Composite(shape=batch_size, device=device),
                full_reward_spec=Composite(shape=batch_size, device=device),
                full_done_spec=Composite(shape=batch_size, device=device),
                shape=batch_size,
                device=device,
            ).lock_()
            self._cache.clear()
        output_spec = self.transform.transform_output_spec(self.base_env.output_spec.clone().unlock_())
        input_spec = self.transform.transform_input_spec(self.base_env.input_spec.clone().unlock_())
        self.full_observation_spec = output_spec["full_observation_spec"]
        self.full_reward_spec = output_spec["full_reward_spec"]
        self.full_done_spec = output_spec["full_done_spec"]
        self.full_action_spec = input_spec["full_action_spec"]
        self.full_state_spec = input_spec["full_state_spec"]

    def append_transform(self, transform: Transform) -> TransformedEnv:
        """Adds ``transform`` last and updates the specs; returns the env."""
        self.transform.append(transform)
        try:
            self._refresh_specs()
        except Exception:
            del self.transform.transforms[-1]
            transform.reset_parent()
            raise
        return self

    def insert_transform(self, index: int, transform: Transform) -> TransformedEnv:
        """Adds ``transform`` at ``index`` and updates the specs; returns the env."""
        self.transform.insert(index, transform)
        try:
            self._refresh_specs()
        except Exception:
            del self.transform.transforms[index]
            transform.reset_parent()
            raise
        return self

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._values_step_applies() and tensordict.get("next", None) is None:
            # the transforms on the step's tensors, one TensorDict built at the end
            return self._step_values(tensordict).to_tensordict(self._group_dims())
        data = self.transform.inv(tensordict.copy())
        next_tensordict = self.base_env.step(data).get("next")
        return self.transform._step(data, next_tensordict)

    #: Set to False to keep every step on the generic path (TensorDicts throughout),
    #: e.g. to compare the two.
    use_values_path: bool = True

    def _values_step_applies(self) -> bool:
        """Whether a step may run on plain tensors: every transform ``steps_on_values`` with
        no inverse keys, and the base env steps on values (a stock gymnasium env, say)."""
        base = self._modules["base_env"]  # this runs at every step: past Module.__getattr__
        if not self.use_values_path or base.run_type_checks or base.auto_reset:
            return False
        return bool(self._cached("values_step_applies", lambda: (
            self.transform.steps_on_values
            and not any(t.in_keys_inv for t in self.transform.transforms)
        ))) and base._values_step_applies()

    def _step_values(self, tensordict: TensorDictBase | StepValues) -> StepValues:
        # step() checked the action against this env's spec; where the base's is the same
        # (no transform changed it) the base need not check it again
        modules = self._modules  # this runs at every step: past Module.__getattr__
        transform, base = modules["transform"], modules["base_env"]
        same_action = self._cached("same_action_spec", lambda: self.full_action_spec == base.full_action_spec)
        return self._transform_values(tensordict, base._step_as_values(tensordict, checked=same_action))

    def _transform_values(self, tensordict: TensorDictBase | StepValues, values: StepValues) -> StepValues:
        """The transforms' ``_step`` on the step's values (``steps_on_values``)."""
        values = self._modules["transform"]._step(tensordict, values)
        if not isinstance(values, StepValues):  # a transform that opted in but built a TensorDict
            raise TypeError(
                f"{self.transform!r} returned a {type(values).__name__} from _step on StepValues; a transform "
                "with steps_on_values=True must keep working on what it is given"
            )
        return values

    @property
    def kernel(self) -> str:
        """The base env's kernel, then the transforms (on the step's values, or on TensorDicts).

        Examples:
            >>> from cadence.envs import GymEnv, StepCounter
            >>> TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(5)).kernel
            "gymnasium env, stepped into arrays; then StepCounter on the step's values"
        """
        names = ", ".join(type(t).__name__ for t in self.transform.transforms) or "no transform"
        where = "the step's values" if self._values_step_applies() else "TensorDicts"
        return f"{self.base_env.kernel}; then {names} on {where}"

    def _values_stepper(self) -> Callable[..., StepValues]:
        # the base env's array simulator, then the transforms' _step on the values (no readers, no
        # layers between them), where no transform changes the action
        base = self._modules["base_env"]
        simulator = base._array_simulator() if self._values_step_applies() else None
        if (simulator is None or not arrays_fit(base)
                or self.full_action_spec != base.full_action_spec):
            return self._step_as_values
        transform = self._modules["transform"]
        return SimulatorValuesStep(self, simulator, self._transform_values,
                                   transform if transform.steps_over_time else None)

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        data = None
        if tensordict is not None:
            # the base env gets its reset masks and its own state only: the rest of the input
            # is transformed data (other shapes, other names), which the outer reset masks
            keep = [*self.base_env.reset_keys, *self.base_env.full_state_spec.keys(True, True)]
            data = tensordict.select(*keep, strict=False)
        data = self.transform._reset_env_preprocess(data)
        out = self.base_env.reset(data, **kwargs)
        return self.transform._reset(tensordict, out)

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seeds the base env (and this env's generator); returns the next seed.

        Raises:
            TypeError, ValueError: a seed that is not None or an int with
                ``0 <= seed < 2**63``; nothing is seeded then.

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> from cadence.envs.transforms import RewardScaling, TransformedEnv
            >>> env = TransformedEnv(PendulumEnv(), RewardScaling(loc=0.0, scale=1.0))
            >>> env.set_seed(0) == PendulumEnv().set_seed(0)
            True
        """
        seed = validate_seed(seed, f"{type(self).__name__}.set_seed")  # before this env's generator is seeded
        if seed is not None:
            self.rng.manual_seed(seed)
        return self.base_env.set_seed(seed, static_seed=static_seed)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            base = self.__dict__.get("_modules", {}).get("base_env")
            if base is None or name.startswith("_"):
                raise
            return getattr(base, name)

    def close(self) -> None:
        """Closes the base env."""
        self.base_env.close()
        super().close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={self.base_env!r}, transform={self.transform!r})"


EnvBase._transformed_env_class = TransformedEnv  # EnvBase.append_transform wraps in it
