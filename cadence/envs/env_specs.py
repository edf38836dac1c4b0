"""The specs and keys of an env: ``EnvSpecs``, the part of ``EnvBase`` that stores the
input and output specs, completes the done signals and derives the keys from them.

Leaf setters (``env.action_spec = Bounded(...)``) wrap the leaf in the matching
``full_*_spec`` Composite; leaf getters return the leaf when there is one. What the
step loop needs from the specs (keys, done levels, the layout of a step) is computed
once and cached until a spec is set again.

Every spec also reads as one env's spec, its batch dims dropped: ``action_spec_unbatched``,
``full_observation_spec_unbatched``, ... (``input_spec_unbatched`` and
``output_spec_unbatched`` too); setting one expands it over the batch.

Examples:
    >>> from cadence.envs.custom import PendulumEnv
    >>> env = PendulumEnv()
    >>> env.reward_spec == env.output_spec["full_reward_spec"][env.reward_key]
    True
    >>> from cadence.envs import GymEnv, SerialEnv
    >>> batch = SerialEnv(3, lambda: GymEnv("Pendulum-v1"))
    >>> batch.action_spec.shape, batch.action_spec_unbatched.shape
    (torch.Size([3, 1]), torch.Size([1]))
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from cadence.data import Categorical, Composite, TensorSpec

NestedKey = str | tuple[str, ...]

DONE_NAMES = ("done", "terminated", "truncated")

__all__ = ["EnvSpecs", "as_tuple_key", "unwrap_key"]


def as_tuple_key(key: NestedKey) -> tuple[str, ...]:
    """A key as a tuple: ``"a"`` -> ``("a",)``.

    Examples:
        >>> as_tuple_key("done"), as_tuple_key(("agents", "done"))
        (('done',), ('agents', 'done'))
    """
    return (key,) if isinstance(key, str) else tuple(key)


def unwrap_key(key: tuple[str, ...]) -> NestedKey:
    """A one-element tuple key as a string: ``("a",)`` -> ``"a"``.

    Examples:
        >>> unwrap_key(("_reset",)), unwrap_key(("agents", "_reset"))
        ('_reset', ('agents', '_reset'))
    """
    return key[0] if len(key) == 1 else key


class EnvSpecs:
    """Spec storage and key bookkeeping, mixed into ``EnvBase``.

    It expects ``_input_spec``/``_output_spec`` (locked Composites), ``_cache`` (a
    dict), ``_device`` and ``batch_size``/``batch_dims`` on the instance; ``EnvBase``
    sets them up.

    Examples:
        >>> from cadence.envs import EnvBase
        >>> issubclass(EnvBase, EnvSpecs)
        True
    """

    _input_spec: Composite
    _output_spec: Composite
    _cache: dict[str, Any]
    _device: torch.device | None
    batch_size: torch.Size
    batch_dims: int

    def _fit_to_batch(self, spec: Composite, name: str) -> Composite:
        if not isinstance(spec, Composite):
            raise TypeError(f"{name} must be a Composite, got {type(spec).__name__}.")
        for key, leaf in spec.items(include_nested=True, leaves_only=True):
            if tuple(leaf.shape[: self.batch_dims]) != tuple(self.batch_size):
                raise ValueError(
                    f"{name}[{key!r}] has shape {tuple(leaf.shape)}, which does not start with the env's "
                    f"batch size {tuple(self.batch_size)}: spec shapes include the batch size."
                )
        if spec.shape != self.batch_size:
            spec = Composite(dict(spec.items()), shape=self.batch_size, device=spec.device)
        return spec

    def _set_spec(self, parent: Composite, name: str, spec: Composite) -> None:
        spec = self._fit_to_batch(spec, name)
        if self._device is not None and spec.device != self._device:
            spec = spec.to(self._device)
        parent.unlock_()
        parent[name] = spec
        parent.lock_()
        self._cache.clear()

    def _leaf_as_composite(self, spec: TensorSpec, key: NestedKey) -> Composite:
        if isinstance(spec, Composite):
            return spec
        composite = Composite(shape=self.batch_size, device=spec.device)
        composite[key] = spec
        return composite

    @staticmethod
    def _single_leaf_or_all(spec: Composite) -> TensorSpec:
        leaves = list(spec.keys(include_nested=True, leaves_only=True))
        return spec[leaves[0]] if len(leaves) == 1 else spec

    @property
    def input_spec(self) -> Composite:
        """The locked Composite of ``"full_action_spec"`` and ``"full_state_spec"``."""
        return self._input_spec

    @property
    def output_spec(self) -> Composite:
        """The locked Composite of the observation, reward and done specs."""
        return self._output_spec

    @property
    def specs(self) -> Composite:
        """The input and output specs together: ``env.specs["input_spec",
        "full_action_spec", "action"]`` is the action's spec (a locked copy).

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> env = PendulumEnv()
            >>> env.specs["input_spec", "full_action_spec", "action"] == env.action_spec
            True
        """
        specs = Composite(input_spec=self._input_spec.clone(), output_spec=self._output_spec.clone(),
                          shape=self.batch_size)
        return specs.lock_()

    @property
    def full_action_spec(self) -> Composite:
        """All actions, as a Composite."""
        return self._input_spec["full_action_spec"]

    @full_action_spec.setter
    def full_action_spec(self, spec: Composite) -> None:
        self._set_spec(self._input_spec, "full_action_spec", spec)

    @property
    def action_spec(self) -> TensorSpec:
        """The action spec: the leaf if there is one action, else the Composite."""
        return self._single_leaf_or_all(self.full_action_spec)

    @action_spec.setter
    def action_spec(self, spec: TensorSpec) -> None:
        key = self.action_keys[0] if self.action_keys else "action"
        self.full_action_spec = self._leaf_as_composite(spec, key)

    @property
    def full_state_spec(self) -> Composite:
        """Inputs other than actions (empty for most stateful envs)."""
        return self._input_spec["full_state_spec"]

    @full_state_spec.setter
    def full_state_spec(self, spec: Composite) -> None:
        self._set_spec(self._input_spec, "full_state_spec", spec)

    state_spec = full_state_spec

    @property
    def full_observation_spec(self) -> Composite:
        """All observations, as a Composite."""
        return self._output_spec["full_observation_spec"]

    @full_observation_spec.setter
    def full_observation_spec(self, spec: Composite) -> None:
        self._set_spec(self._output_spec, "full_observation_spec", spec)

    observation_spec = full_observation_spec

    @property
    def full_reward_spec(self) -> Composite:
        """All rewards, as a Composite."""
        return self._output_spec["full_reward_spec"]

    @full_reward_spec.setter
    def full_reward_spec(self, spec: Composite) -> None:
        self._set_spec(self._output_spec, "full_reward_spec", spec)

    @property
    def reward_spec(self) -> TensorSpec:
        """The reward spec: the leaf if there is one reward, else the Composite."""
        return self._single_leaf_or_all(self.full_reward_spec)

    @reward_spec.setter
    def reward_spec(self, spec: TensorSpec) -> None:
        key = self.reward_keys[0] if self.reward_keys else "reward"
        self.full_reward_spec = self._leaf_as_composite(spec, key)

    @property
    def full_done_spec(self) -> Composite:
        """All done signals (done, terminated and maybe truncated at each level)."""
        return self._output_spec["full_done_spec"]

    @full_done_spec.setter
    def full_done_spec(self, spec: Composite) -> None:
        self._set_spec(self._output_spec, "full_done_spec", self._complete_done_spec(spec))

    @property
    def done_spec(self) -> TensorSpec:
        """The done spec: the leaf if there is one done signal, else the Composite."""
        return self._single_leaf_or_all(self.full_done_spec)

    @done_spec.setter
    def done_spec(self, spec: TensorSpec) -> None:
        self.full_done_spec = self._leaf_as_composite(spec, "done")

    # ------------------------------------------------------------------ one env's specs
    def _unbatched(self, spec: TensorSpec) -> TensorSpec:
        """``spec`` of one env of the batch: the leading ``batch_size`` dims dropped."""
        batch_dims = len(self.batch_size)
        return spec[(0,) * batch_dims] if batch_dims else spec

    def _batched(self, spec: TensorSpec) -> TensorSpec:
        """``spec`` of one env, repeated over ``batch_size``."""
        return spec.expand(*self.batch_size, *spec.shape)

    def _complete_done_spec(self, spec: Composite) -> Composite:
        """Flanks every done signal with its dual: done = terminated | truncated."""
        spec = spec.clone()
        leaves = [as_tuple_key(k) for k in spec.keys(include_nested=True, leaves_only=True)]
        if not leaves:
            flag = Categorical(2, shape=(*self.batch_size, 1), dtype=torch.bool, device=spec.device)
            spec["done"] = flag
            spec["terminated"] = flag.clone()
            return spec
        prefixes = dict.fromkeys(key[:-1] for key in leaves if key[-1] in DONE_NAMES)
        for prefix in prefixes:
            present = {name: prefix + (name,) in spec for name in DONE_NAMES}
            model = next(spec[prefix + (name,)] for name in DONE_NAMES if present[name])
            for name in ("done", "terminated"):
                if not present[name]:
                    spec[prefix + (name,)] = model.clone()
        return spec

    # ------------------------------------------------------------------ keys
    def _cached(self, name: str, compute: Callable[[], Any]) -> Any:
        value = self._cache.get(name)
        if value is None:
            value = self._cache[name] = compute()
        return value

    @property
    def action_keys(self) -> list[NestedKey]:
        """The keys of all actions."""
        return self._cached("action_keys", lambda: list(self.full_action_spec.keys(True, True)))

    @property
    def action_key(self) -> NestedKey:
        """The key of the (first) action."""
        return self._first_key(self.action_keys, "action")

    @property
    def reward_keys(self) -> list[NestedKey]:
        """The keys of all rewards."""
        return self._cached("reward_keys", lambda: list(self.full_reward_spec.keys(True, True)))

    @property
    def reward_key(self) -> NestedKey:
        """The key of the (first) reward."""
        return self._first_key(self.reward_keys, "reward")

    @property
    def done_keys(self) -> list[NestedKey]:
        """The keys of all done signals (done, terminated, truncated at each level)."""
        return self._cached("done_keys", lambda: list(self.full_done_spec.keys(True, True)))

    @property
    def done_key(self) -> NestedKey:
        """The key of the shallowest ``"done"`` entry."""
        done = [k for k in self.done_keys if as_tuple_key(k)[-1] == "done"]
        return min(done, key=lambda k: len(as_tuple_key(k)))

    @property
    def reset_keys(self) -> list[NestedKey]:
        """The ``"_reset"`` key of each done level."""
        return [unwrap_key(prefix + ("_reset",)) for prefix in self._done_prefixes]

    @property
    def _done_prefixes(self) -> list[tuple[str, ...]]:
        """The levels holding done signals, shallowest first."""

        def compute() -> list[tuple[str, ...]]:
            prefixes = dict.fromkeys(as_tuple_key(k)[:-1] for k in self.done_keys if as_tuple_key(k)[-1] == "done")
            return sorted(prefixes, key=len)

        return self._cached("done_prefixes", compute)

    @staticmethod
    def _first_key(keys: list[NestedKey], kind: str) -> NestedKey:
        if not keys:
            raise KeyError(f"The env has no {kind} spec, hence no {kind} key.")
        return keys[0]

    def _step_spec(self) -> Composite:
        """The spec of one step's data: inputs and outputs at the root, results under ``"next"``."""

        def compute() -> Composite:
            root = self.full_observation_spec.clone()
            for part in (self.full_state_spec, self.full_action_spec, self.full_done_spec):
                root.update(part.clone())
            nxt = self.full_observation_spec.clone()
            for part in (self.full_reward_spec, self.full_done_spec):
                nxt.update(part.clone())
            root["next"] = nxt
            return root

        return self._cached("step_spec", compute)

    def _has_dynamic_specs(self) -> bool:
        def compute() -> bool:
            spec = self._step_spec()
            return any(-1 in leaf.shape for _, leaf in spec.items(include_nested=True, leaves_only=True))

        return self._cached("dynamic", compute)


def _unbatched_spec(name: str) -> property:
    """The property ``<name>_unbatched``: ``name`` as if the env had no batch dims
    (reading drops them, setting expands a one-env spec over ``batch_size``)."""

    def read(env: EnvSpecs) -> TensorSpec:
        return env._unbatched(getattr(env, name))

    def write(env: EnvSpecs, spec: TensorSpec) -> None:
        setattr(env, name, env._batched(spec))

    return property(read, write, doc=f"``{name}`` of one env of the batch (its batch dims dropped).")


# the reference's per-env views of the specs, e.g. ``env.action_spec_unbatched``
for _name in (
    "action_spec", "full_action_spec", "state_spec", "full_state_spec", "observation_spec",
    "full_observation_spec", "reward_spec", "full_reward_spec", "done_spec", "full_done_spec",
):
    setattr(EnvSpecs, f"{_name}_unbatched", _unbatched_spec(_name))
for _name in ("input_spec", "output_spec"):
    setattr(EnvSpecs, f"{_name}_unbatched", property(lambda env, name=_name: env._unbatched(getattr(env, name)),
                                                     doc=f"``{_name}`` of one env of the batch (read only)."))
del _name
