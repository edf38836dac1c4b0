"""``GymLikeEnv``: an env driving a simulator with the gymnasium calling convention
(``reset() -> (obs, info)``, ``step(a) -> (obs, reward, terminated, truncated, info)``),
and the info-dict readers that copy numeric ``info`` entries into its output.

Examples:
    >>> from cadence.envs.gym_like import default_info_dict_reader
    >>> reader = default_info_dict_reader(["x_position"])
    >>> reader.keys
    ['x_position']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Composite, NonTensor, TensorSpec, Unbounded
from cadence.envs.array_simulator import STEP_MACHINERY
from cadence.envs.common import EnvBase
from cadence.envs.gym_like_simulator import GymLikeSimulator
from cadence.envs.step_values import StepValues
from cadence.envs.utils import SpecMismatchError

__all__ = ["GymLikeEnv", "default_info_dict_reader"]


class default_info_dict_reader:  # noqa: N801 - the reference library's name
    """Reads numeric entries of a gym ``info`` dict into the step's output.

    Args:
        keys: the info entries to read.
        spec: their specs (a Composite or a mapping key -> spec, shapes without the
            batch size); ``Unbounded`` float32 scalars if not given.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> reader = default_info_dict_reader(["x"])
        >>> reader.info_spec(torch.Size([]))["x"].shape
        torch.Size([])
        >>> out = reader({"x": 1.5}, TensorDict({}, []))
        >>> out["x"]
        tensor(1.5000)
    """

    def __init__(self, keys: Sequence[str], spec: Composite | Mapping[str, TensorSpec] | None = None) -> None:
        self.keys = list(keys)
        self._spec = spec
        self._specs_by_batch: dict[torch.Size, Composite] = {}

    def info_spec(self, batch_size: torch.Size) -> Composite:
        """The specs of the entries read, for an env of batch size ``batch_size``."""
        children: dict[str, TensorSpec] = {}
        for key in self.keys:
            if self._spec is not None and key in self._spec:
                leaf = self._spec[key]
                children[key] = leaf.expand(*batch_size, *leaf.shape) if batch_size else leaf
            else:
                children[key] = Unbounded(shape=batch_size, dtype=torch.float32)
        return Composite(children, shape=batch_size)

    def __call__(self, info: Mapping[str, Any], tensordict: TensorDictBase) -> TensorDictBase:
        """Writes the entries of ``info`` into ``tensordict`` (zeros where absent)."""
        spec = self._specs_by_batch.get(tensordict.batch_size)
        if spec is None:
            spec = self._specs_by_batch[tensordict.batch_size] = self.info_spec(tensordict.batch_size)
        for key in self.keys:
            leaf = spec[key]
            if key in info:
                value = torch.as_tensor(np.asarray(info[key]), dtype=leaf.dtype).reshape(leaf.shape)
            else:
                value = leaf.zero()
            tensordict.set(key, value)
        return tensordict


def tensor_to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """``tensor.detach().cpu().numpy()``, without the two no-op calls for a CPU tensor
    outside autograd (the common action on the step path).

    Examples:
        >>> tensor_to_numpy(torch.ones(2, requires_grad=True)).tolist()
        [1.0, 1.0]
    """
    if tensor.requires_grad or not tensor.is_cpu:  # is_cpu: no device object built per call
        return tensor.detach().cpu().numpy()
    return tensor.numpy()


_ONE = torch.Size([1])
_FLAGS = {False: torch.zeros(1, dtype=torch.bool), True: torch.ones(1, dtype=torch.bool)}


class GymLikeEnv(EnvBase):
    """An env whose simulator (``self._env``) follows gymnasium's calling convention.

    Subclasses build ``self._env`` and the specs; this class implements ``_reset``
    and ``_step`` through small overridable readers: ``read_obs``, ``read_reward``,
    ``read_done``, ``read_action`` and ``read_info``.

    Examples:
        >>> import gymnasium
        >>> from cadence.envs.libs.gym import GymWrapper
        >>> env = GymWrapper(gymnasium.make("CartPole-v1"))
        >>> isinstance(env, GymLikeEnv)
        True
    """

    _env: Any

    #: The stock readers' simulator stepped into arrays (see ``EnvBase.kernel``).
    array_kernel = GymLikeSimulator

    #: Whether :meth:`_step_values` (``_step``'s entries, without the TensorDict) stands in
    #: for the class's ``_step``; withdrawn from a subclass whose body defines ``_step``,
    #: ``_build_output`` or ``step()``'s bookkeeping (as ``EnvBase.kernel`` withdraws kernels).
    has_values_step: ClassVar[bool] = True

    #: Whether the readers write the reward and all three done flags (the stock ones do);
    #: withdrawn from a subclass whose body defines ``read_done`` or ``read_reward``.
    readers_write_every_flag: ClassVar[bool] = True

    #: Whether ``_output_transform`` is the stock one (which gymnasium's five outputs pass
    #: through unchanged); withdrawn from a subclass whose body defines its own.
    stock_output_transform: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        defined = cls.__dict__.keys()
        if "_output_transform" in defined:
            cls.stock_output_transform = False
        if "has_values_step" not in defined and not (STEP_MACHINERY | {"_step", "_build_output"}).isdisjoint(defined):
            cls.has_values_step = False
        if "readers_write_every_flag" not in defined and not {"read_done", "read_reward"}.isdisjoint(defined):
            cls.readers_write_every_flag = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.info_dict_reader: list[default_info_dict_reader] = []
        self._pending_seed: int | None = None

    # ------------------------------------------------------------------ readers
    def read_obs(self, observations: Any) -> dict[str, Any]:
        """Maps the simulator's observation to output entries, typed like the observation
        spec (an array becomes ``"observation"``, a dict its own keys, a tuple ``"0"``, ``"1"``...)."""
        if isinstance(observations, tuple):  # a Tuple space: entries "0", "1", ...
            observations = {str(i): item for i, item in enumerate(observations)}
        if isinstance(observations, Mapping):
            return {key: self._read_entry(value, (key,)) for key, value in observations.items()}
        return {"observation": self._read_entry(observations, ("observation",))}

    def _read_entry(self, value: Any, key: tuple[str, ...]) -> Any:
        if isinstance(value, tuple):
            value = {str(i): item for i, item in enumerate(value)}
        if isinstance(value, Mapping):
            return {k: self._read_entry(v, key + (k,)) for k, v in value.items()}
        dtype, shape, numpy_layout = self._entry_layout(key)
        if dtype is None:  # a NonTensor spec: text, graphs... kept as they come
            return value
        array = np.asarray(value)
        if self.run_type_checks:
            self._check_entry(array, key, dtype, shape)
        elif (array.dtype, array.shape) == numpy_layout and array.flags.writeable and self.device is None:
            return torch.from_numpy(array)  # what as_tensor gives here (the same memory), for less
        try:
            return torch.as_tensor(array, dtype=dtype, device=self.device).reshape(shape)
        except (RuntimeError, TypeError, ValueError) as err:  # free unless it fails
            raise self._entry_mismatch(array, key, dtype, shape) from err

    def _entry_mismatch(
        self, array: np.ndarray, key: tuple[str, ...], dtype: torch.dtype, shape: torch.Size
    ) -> SpecMismatchError:
        name = key[0] if len(key) == 1 else key
        return SpecMismatchError(
            f"{type(self).__name__}: the simulator gave an observation of shape {array.shape} and dtype "
            f"{array.dtype} at key {name!r}, but its spec (from the declared observation space) has shape "
            f"{tuple(shape)} and dtype {dtype}: the backend does not keep to its declared space."
        )

    def _check_entry(self, array: np.ndarray, key: tuple[str, ...], dtype: torch.dtype, shape: torch.Size) -> None:
        """``run_type_checks``: the observation has the spec's number of elements (the
        generic path reshapes, as a scalar for a ``(1,)`` spec needs) and a dtype that
        casts to the spec's within its kind (float64 to float32, not float to uint8)."""
        target = torch.empty(0, dtype=dtype).numpy().dtype
        fits = array.size == shape.numel() and (array.dtype == target or np.can_cast(array.dtype, target, "same_kind"))
        if not fits:
            raise self._entry_mismatch(array, key, dtype, shape)

    def _entry_layout(self, key: tuple[str, ...]) -> tuple[torch.dtype | None, torch.Size, tuple[Any, ...] | None]:
        """The dtype (``None`` for non-tensor data) and shape of an observation entry, and
        the ``(numpy dtype, shape)`` of an array that needs no conversion, read once from its spec."""
        layouts = self._cached("observation_layouts", dict)
        layout = layouts.get(key)
        if layout is None:
            spec = self.full_observation_spec[key]
            if isinstance(spec, NonTensor):
                layout = layouts[key] = (None, spec.shape, None)
            else:
                numpy_dtype = torch.empty(0, dtype=spec.dtype).numpy().dtype
                layout = layouts[key] = (spec.dtype, spec.shape, (numpy_dtype, tuple(spec.shape)))
        return layout

    def read_reward(self, reward: Any) -> torch.Tensor:
        """The reward as a tensor shaped like the reward spec."""
        dtype, shape = self._cached("reward_layout", lambda: (self.reward_spec.dtype, self.reward_spec.shape))
        if shape == _ONE and isinstance(reward, (float, int, np.floating, np.integer)):
            return torch.tensor([reward], dtype=dtype)  # one number: the cheapest constructor
        return torch.as_tensor(reward, dtype=dtype).reshape(shape)

    def read_done(self, terminated: Any, truncated: Any) -> dict[str, torch.Tensor]:
        """The done signals as tensors shaped like the done spec."""
        if not self.batch_size:  # plain Python bools: one small tensor each, cloned (cheaper than built)
            terminated, truncated = bool(terminated), bool(truncated)
            return {
                "terminated": _FLAGS[terminated].clone(),
                "truncated": _FLAGS[truncated].clone(),
                "done": _FLAGS[terminated or truncated].clone(),
            }
        shape = (*self.batch_size, 1)
        terminated_t = torch.as_tensor(terminated, dtype=torch.bool).reshape(shape)
        truncated_t = torch.as_tensor(truncated, dtype=torch.bool).reshape(shape)
        return {"terminated": terminated_t, "truncated": truncated_t, "done": terminated_t | truncated_t}

    def read_action(self, action: torch.Tensor) -> Any:
        """The action in the simulator's format (a numpy array by default)."""
        return tensor_to_numpy(action)

    def read_info(self, info: Mapping[str, Any], tensordict: TensorDictBase) -> TensorDictBase:
        """Runs the registered info-dict readers."""
        for reader in self.info_dict_reader:
            tensordict = reader(info, tensordict)
        return tensordict

    def set_info_dict_reader(self, info_dict_reader: default_info_dict_reader) -> GymLikeEnv:
        """Registers a reader of the ``info`` dict; its entries join the observation spec.

        Examples:
            >>> import gymnasium
            >>> from cadence.envs.libs.gym import GymWrapper
            >>> env = GymWrapper(gymnasium.make("CartPole-v1"))
            >>> env = env.set_info_dict_reader(default_info_dict_reader(["steps"]))
            >>> "steps" in env.observation_spec.keys()
            True
        """
        self.info_dict_reader.append(info_dict_reader)
        spec = self.full_observation_spec.clone()
        spec.update(info_dict_reader.info_spec(self.batch_size))
        self.full_observation_spec = spec
        return self

    # ------------------------------------------------------------------ the loop
    def _output_transform(self, step_outputs: tuple[Any, ...]) -> tuple[Any, Any, Any, Any, Mapping[str, Any]]:
        """Normalises a step's outputs to (obs, reward, terminated, truncated, info)."""
        if len(step_outputs) == 4:  # the old gym convention: (obs, reward, done, info)
            obs, reward, done, info = step_outputs
            return obs, reward, done, False, info
        return step_outputs  # type: ignore[return-value]

    def _reset_output_transform(self, reset_outputs: Any) -> tuple[Any, Mapping[str, Any]]:
        """Normalises a reset's outputs to (obs, info)."""
        if isinstance(reset_outputs, tuple) and len(reset_outputs) == 2 and isinstance(reset_outputs[1], Mapping):
            return reset_outputs
        return reset_outputs, {}

    def _reset_backend(self, **kwargs: Any) -> tuple[Any, Mapping[str, Any]]:
        """Resets the simulator, passing the seed given to ``set_seed`` on its first reset."""
        if self._pending_seed is not None:
            kwargs["seed"], self._pending_seed = self._pending_seed, None
        return self._reset_output_transform(self._env.reset(**kwargs))

    def _set_seed(self, seed: int | None) -> None:
        self._pending_seed = seed

    def __getattr__(self, name: str) -> Any:
        """Public attributes this wrapper lacks are the backend env's (``env.physics``, ...)."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            env = self.__dict__.get("_env")
            if env is None or name.startswith("_"):
                raise
            return self._backend_attribute(env, name)

    def _backend_attribute(self, env: Any, name: str) -> Any:
        return getattr(env, name)

    def _observation_entries(self, obs: Any) -> dict[str, Any]:
        """The output entries of an observation (``read_obs``; subclasses add to them)."""
        return self.read_obs(obs)

    def _build_output(
        self, obs: Any, info: Mapping[str, Any], extra: dict[str, torch.Tensor] | None = None
    ) -> TensorDictBase:
        entries = self._observation_entries(obs)
        if extra:
            entries.update(extra)
        out = TensorDict(entries, batch_size=self.batch_size, device=self.device)
        if self.info_dict_reader:
            out = self.read_info(info, out)
        return out

    def _simulate(self, action: Any) -> tuple[Any, Any, Any, Any, Mapping[str, Any]]:
        """Steps the simulator once: (obs, reward, terminated, truncated, info)."""
        return self._output_transform(self._env.step(action))

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        obs, info = self._reset_backend(**kwargs)
        return self._output_of("reset()", obs, info)

    def _output_of(
        self, where: str, obs: Any, info: Mapping[str, Any], extra: dict[str, torch.Tensor] | None = None
    ) -> TensorDictBase:
        """``_build_output``, an observation off its space named with the call that gave it."""
        try:
            return self._build_output(obs, info, extra)
        except SpecMismatchError as err:
            raise SpecMismatchError(f"{where}: {err}") from err

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = self.read_action(tensordict.get(self.action_key))
        obs, reward, terminated, truncated, info = self._simulate(action)
        results = self.read_done(terminated, truncated)
        results["reward"] = self.read_reward(reward)
        return self._output_of("step()", obs, info, results)

    def _values_step_applies(self) -> bool:
        # the stock step and output builder, no info readers, flat observation keys, on the CPU
        return self._cached("values_step_applies", lambda: (
            type(self).has_values_step
            and not self.info_dict_reader
            and self.device in (None, torch.device("cpu"))
            and all(type(key) is str for key in self.full_observation_spec.keys(True, True))
        ))

    @property
    def _step_values_complete(self) -> bool:  # type: ignore[override]
        # the stock readers write the reward and the three flags; the root done spec is theirs
        return self._cached("step_values_complete", lambda: (
            type(self).readers_write_every_flag
            and list(self._done_prefixes) == [()] and self.reward_keys == ["reward"]
        ))

    def _step_values(self, tensordict: TensorDictBase) -> StepValues:
        # _step's entries, in its order, without the TensorDict
        action = self.read_action(tensordict.get(self.action_key))
        obs, reward, terminated, truncated, _ = self._simulate(action)
        results = self.read_done(terminated, truncated)
        results["reward"] = self.read_reward(reward)
        entries = self._observation_entries(obs)
        entries.update(results)
        return StepValues(entries, self.batch_size, self.device)

    def close(self) -> None:
        """Closes the simulator."""
        if not self.is_closed:
            self._env.close()
        super().close()
