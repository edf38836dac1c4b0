"""Jumanji (JAX puzzles, routing and packing problems): ``JumanjiWrapper``, ``JumanjiEnv``.

A Jumanji env is a pair of pure functions, ``reset(key) -> (state, timestep)`` and
``step(state, action) -> (state, timestep)``. The wrapper vmaps them over the batch and
compiles each with ``jax.jit`` once per wrapper (once per batch size for an env that is
not batch-locked, see ``batch_locked``); ``trace_counts`` says how often that happened.

**Data layout.** The observation's leaves sit at the root of the tensordict under their
Jumanji names (``"grid"``, ``"action_mask"``, ``"step_count"`` for Snake; nested
observations give nested entries; a bare array observation is ``"observation"``). The
env's whole state travels in the tensordict as ``"state"``, a nested TensorDict of the
JAX state's leaves (``("state", "head_position", "row")``...), so the env object holds no
simulation state: ``step(td)`` is a function of ``td``. Unsigned JAX leaves (the state's
PRNG ``key``, uint32) are shown as the signed dtype of the same width, bit for bit.
``"reward"`` has shape ``[*batch, 1]`` for a scalar reward; ``"done"``, ``"terminated"``
and ``"truncated"`` ``[*batch, 1]``: a last step with discount 0 is a termination, one
with a non-zero discount (a time limit) a truncation.

**Specs** come from Jumanji's: ``DiscreteArray`` -> ``Categorical`` (``OneHot`` for the
action with ``categorical_action_encoding=False``), ``MultiDiscreteArray`` ->
``MultiCategorical`` (``MultiOneHot``), ``BoundedArray`` -> ``Bounded``, ``Array`` ->
``Unbounded``, boolean arrays (action masks) -> ``Categorical(2, dtype=torch.bool)`` (what
``ActionMask`` expects), nested ``Spec`` -> nested ``Composite``. The state's spec is
``Unbounded`` per leaf.

**Tensors without copies.** Outputs reach torch through DLPack and share JAX's buffers;
inputs (the state, the action) reach JAX the same way, with a copy only where JAX
cannot use torch's memory as it is (see ``cadence.envs.libs.jax_utils``). A state leaf
that a step leaves unchanged may come back as the very buffer of the input's: clone an
entry before writing into it in place.

**Seeds.** Resets draw their keys from a JAX PRNG key (``env.key``) that ``set_seed(seed)``
sets to ``jax.random.PRNGKey(seed)`` (a larger seed's high bits folded in); an env that
was never seeded starts from the key of seed 0, so it too gives the same episodes each
run.

**Pixels.** ``from_pixels=True`` adds ``"pixels"``: the frame that Jumanji's viewer
draws with matplotlib for each env of the batch (uint8 ``[*batch, H, W, 3]``), rendered
after each reset and step. This is slow (a matplotlib figure per env and step) and meant
for recording small batches.

**Batches of processes.** JAX runs threads of its own, so a process that imported it must
not be forked: put Jumanji envs in ``ParallelEnv(..., start_method="spawn")`` (a
wrapper built in a process forked from one where JAX runs raises ``RuntimeError`` at
once rather than hang). ``batch_size`` (one process, vmapped) is usually the faster way to
many envs.

**Envs that fetch data.** ``Sokoban-v0`` downloads its levels when it is built; the
others build from the package alone.

The examples below start with a line that skips them where jumanji is not installed.

Examples:
    >>> import pytest; jumanji = pytest.importorskip("jumanji")  # skips without jumanji
    >>> from cadence.envs.libs.jumanji import JumanjiEnv
    >>> env = JumanjiEnv("Snake-v1", batch_size=[3])
    >>> next_seed = env.set_seed(0)
    >>> data = env.rollout(5, break_when_any_done=False)
    >>> data["next", "grid"].shape, data["next", "state", "head_position", "row"].shape
    (torch.Size([3, 5, 12, 12, 5]), torch.Size([3, 5]))
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from cadence._utils import ClassProperty
from cadence.data import (
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    TensorSpec,
    Unbounded,
)
from cadence.envs.libs.jax_env import JaxEnvBase
from cadence.envs.libs.jax_utils import (
    PytreeLayout,
    import_jax,
    jax_to_torch,
    tensordict_dtype,
    torch_dtype,
    torch_to_jax,
)

__all__ = ["JumanjiEnv", "JumanjiWrapper"]

_INSTALL_HINT = 'pip install "cadence[jumanji]"'

#: entries the wrapper writes at the root itself: an observation may not be called so
_RESERVED_KEYS = ("state", "reward", "done", "terminated", "truncated", "action", "pixels", "_reset")


def _import_jumanji(caller: str, device: torch.device | None = None) -> Any:
    """Imports jumanji (JAX first, see ``import_jax``), or raises an ImportError saying
    how to install it."""
    import_jax(caller, _INSTALL_HINT, device)
    try:
        import jumanji
    except ImportError as err:
        raise ImportError(f"{caller} needs the jumanji library, which is not installed: {_INSTALL_HINT}.") from err
    return jumanji


def _registered_envs() -> list[str]:
    """Jumanji's registered env names, sorted ([] without jumanji)."""
    try:
        jumanji = _import_jumanji("JumanjiEnv")
    except ImportError:
        return []
    return sorted(jumanji.registered_environments())


def _spec_from_jumanji(
    spec: Any,
    batch_size: torch.Size,
    device: torch.device | None,
    categorical: bool = True,
    dtype: torch.dtype | None = None,
) -> TensorSpec:
    """One Jumanji array spec (``Array`` and its subclasses) as a Cadence spec of the batch.

    Args:
        spec: the Jumanji spec.
        batch_size: the leading dims of the Cadence spec.
        device: its device.
        categorical: ``DiscreteArray``/``MultiDiscreteArray`` as indices (``Categorical``,
            ``MultiCategorical``) rather than one-hot (``OneHot``, ``MultiOneHot``).
        dtype: the dtype of the data (default: the spec's, unsigned ones as signed).
    """
    from jumanji import specs

    shape = (*batch_size, *spec.shape)
    if dtype is None:
        dtype = tensordict_dtype(torch_dtype(spec.dtype))
    if isinstance(spec, specs.DiscreteArray):
        if categorical:
            return Categorical(int(spec.num_values), shape=shape, dtype=dtype, device=device)
        return OneHot(int(spec.num_values), shape=(*shape, int(spec.num_values)), device=device)
    if isinstance(spec, specs.MultiDiscreteArray):
        nvec = torch.as_tensor(np.array(spec.num_values), dtype=torch.int64)
        if categorical:
            return MultiCategorical(nvec, shape=shape, dtype=dtype, device=device)
        if nvec.ndim != 1:
            raise ValueError(
                f"A one-hot encoding needs a one-dimensional MultiDiscreteArray; {spec.name or 'this spec'!r} has "
                f"num_values of shape {tuple(nvec.shape)}: pass categorical_action_encoding=True."
            )
        return MultiOneHot(nvec.tolist(), shape=(*batch_size, int(nvec.sum())), device=device)
    if dtype == torch.bool:
        return Categorical(2, shape=shape, dtype=torch.bool, device=device)
    if isinstance(spec, specs.BoundedArray):
        low = torch.as_tensor(np.array(spec.minimum)).to(dtype).expand(shape)
        high = torch.as_tensor(np.array(spec.maximum)).to(dtype).expand(shape)
        return Bounded(low.clone(), high.clone(), shape=shape, dtype=dtype, device=device)
    return Unbounded(shape=shape, dtype=dtype, device=device)


def _widened(spec: TensorSpec, value: torch.Tensor, batch_dims: int) -> TensorSpec:
    """A ``Bounded`` spec holding both ``spec``'s domain and ``value`` (the same bounds for
    every env of the batch); a spec with no bounds to widen becomes ``Unbounded``."""
    if isinstance(spec, Categorical) and spec.dtype != torch.bool:
        low, high = torch.zeros(spec.shape, dtype=spec.dtype), torch.full(spec.shape, spec.n - 1, dtype=spec.dtype)
    elif isinstance(spec, MultiCategorical):
        low, high = torch.zeros(spec.shape, dtype=spec.dtype), (spec.nvec - 1).to(spec.dtype)
    elif isinstance(spec, Bounded):
        low, high = spec.low, spec.high
    else:
        return Unbounded(shape=spec.shape, dtype=spec.dtype, device=spec.device)
    value = value.to(low.device, spec.dtype)
    batch = tuple(range(batch_dims))
    value_low = value.amin(dim=batch, keepdim=True) if batch else value
    value_high = value.amax(dim=batch, keepdim=True) if batch else value
    low = torch.minimum(low, value_low.expand_as(low))
    high = torch.maximum(high, value_high.expand_as(high))
    return Bounded(low, high, shape=spec.shape, dtype=spec.dtype, device=spec.device)


def _jumanji_spec_at(spec: Any, key: tuple[str, ...]) -> Any:
    """The Jumanji array spec at ``key`` in a (nested) observation spec, or None."""
    from jumanji import specs

    if key == ("observation",) and isinstance(spec, specs.Array):
        return spec
    for name in key:
        if isinstance(spec, specs.Array):
            return None
        spec = getattr(spec, name, None)
        if not isinstance(spec, specs.Spec):
            return None
    return spec if isinstance(spec, specs.Array) else None


class JumanjiWrapper(JaxEnvBase):
    """Wraps a built Jumanji environment (``jumanji.make(...)``) as a batched Cadence env.

    See the module's docstring for the data layout, the specs, seeding and pixels.

    Args:
        env: a ``jumanji.env.Environment``.
        categorical_action_encoding: discrete actions as indices (``Categorical``,
            ``MultiCategorical``); ``False``: one-hot (``OneHot``, ``MultiOneHot``).
        batch_size: the number of envs simulated together (vmapped), as a shape.
        batch_locked: whether inputs must have exactly ``batch_size``. By default an env
            built without ``batch_size`` is not batch-locked: ``reset`` makes as many envs
            as its input's batch size says (``env.reset(TensorDict(batch_size=[32]))``), and
            the jitted functions compile once for each batch size used. An env built with
            ``batch_size`` is batch-locked.
        from_pixels: add the frames that Jumanji's viewer draws, as ``"pixels"``.
        pixels_only: with ``from_pixels``, drop the other observations (the state stays).
        jit: compile reset and step with ``jax.jit`` (``False``: run them op by op, for
            debugging; much slower).
        device: where the data lives (``None``: the CPU, JAX's device).
        allow_done_after_reset, run_type_checks: as in ``EnvBase``.

    Raises:
        ImportError: jumanji (or JAX) is not installed.
        TypeError: ``env`` is not a Jumanji environment.
        ValueError: an observation named like an entry the wrapper writes (``"state"``...).

    Examples:
        >>> import pytest; jumanji = pytest.importorskip("jumanji")  # skips without jumanji
        >>> from tensordict import TensorDict
        >>> env = JumanjiWrapper(jumanji.make("Game2048-v1"))
        >>> env.batch_locked, env.action_spec
        (False, Categorical(shape=torch.Size([]), n=4, device=cpu, dtype=torch.int32))
        >>> next_seed = env.set_seed(0)
        >>> data = env.rollout(3, tensordict=env.reset(TensorDict(batch_size=[8])), auto_reset=False)
        >>> data["next", "board"].shape, data["next", "reward"].shape
        (torch.Size([8, 3, 4, 4]), torch.Size([8, 3, 1]))
    """

    #: the names ``JumanjiEnv`` accepts (empty without jumanji)
    available_envs = ClassProperty(lambda cls: _registered_envs())
    #: the jumanji module (imported on first access)
    lib = ClassProperty(lambda cls: _import_jumanji(cls.__name__))

    def __init__(
        self,
        env: Any,
        *,
        categorical_action_encoding: bool = True,
        batch_size: torch.Size | Sequence[int] | None = None,
        batch_locked: bool | None = None,
        from_pixels: bool = False,
        pixels_only: bool = False,
        jit: bool = True,
        device: torch.device | str | None = None,
        allow_done_after_reset: bool = False,
        run_type_checks: bool = False,
    ) -> None:
        _import_jumanji(type(self).__name__, None if device is None else torch.device(device))
        self._check_env(env)
        super().__init__(
            env,
            traced=("reset", "step"),
            device=device,
            batch_size=batch_size,
            allow_done_after_reset=allow_done_after_reset,
            run_type_checks=run_type_checks,
        )
        self.batch_locked = batch_size is not None if batch_locked is None else batch_locked
        self.categorical_action_encoding = categorical_action_encoding
        self.from_pixels = from_pixels
        self.pixels_only = pixels_only and from_pixels
        self._build_layouts()
        self._build_specs()
        self.jit = jit
        self._probe_reset()

    def _check_env(self, env: Any) -> None:
        import jumanji.wrappers  # binds jumanji, imported already

        if not isinstance(env, jumanji.env.Environment):
            raise TypeError(
                f"{type(self).__name__} wraps a jumanji.env.Environment (jumanji.make(...)); got {type(env).__name__}."
            )
        layer = env
        while isinstance(layer, jumanji.wrappers.Wrapper):
            if isinstance(layer, (jumanji.wrappers.AutoResetWrapper, jumanji.wrappers.VmapAutoResetWrapper)):
                raise ValueError(
                    f"{type(self).__name__}: the env resets itself ({type(layer).__name__}); Cadence resets done "
                    "envs through '_reset': wrap the env without it."
                )
            if isinstance(layer, jumanji.wrappers.VmapWrapper):
                raise ValueError(
                    f"{type(self).__name__}: the env is vmapped already (VmapWrapper); wrap it unbatched and pass "
                    f"batch_size to {type(self).__name__}."
                )
            layer = layer._env  # jumanji's wrappers keep the env they wrap there

    # ------------------------------------------------------------------ layouts, specs
    def _build_layouts(self) -> None:
        """The state's and the observation's layouts, read from the shapes of one reset
        (``jax.eval_shape``: traced, not computed)."""
        import jax

        state, timestep = jax.eval_shape(self._env.reset, jax.random.PRNGKey(0))
        self._state_layout = PytreeLayout(state)
        self._obs_layout = PytreeLayout(timestep.observation, bare_leaf_key="observation")
        self._reward_shape = tuple(timestep.reward.shape)
        self._reward_dtype = tensordict_dtype(torch_dtype(timestep.reward.dtype))
        for key in self._obs_layout.keys:
            if key[0] in _RESERVED_KEYS:
                raise ValueError(
                    f"{type(self).__name__}: the observation entry {key!r} is named like an entry the wrapper "
                    f"writes itself ({', '.join(_RESERVED_KEYS)})."
                )

    def _build_specs(self) -> None:
        env, batch, device = self._env, self.batch_size, self.device
        action = env.action_spec
        self._action_dtype = torch_dtype(action.dtype)  # what JAX takes
        self._action_shape = tuple(action.shape)
        self.action_spec = _spec_from_jumanji(action, batch, device, categorical=self.categorical_action_encoding)
        observation = Composite(shape=batch, device=device)
        if not self.pixels_only:
            for key, shape, dtype in zip(self._obs_layout.keys, self._obs_layout.shapes, self._obs_layout.dtypes):
                source = _jumanji_spec_at(env.observation_spec, key)
                if source is not None and tuple(source.shape) == shape:
                    observation[key] = _spec_from_jumanji(source, batch, device, dtype=dtype)
                else:  # the spec does not describe this leaf: its layout does
                    observation[key] = Unbounded(shape=(*batch, *shape), dtype=dtype, device=device)
        state = self._state_layout.spec(batch, device)
        observation["state"] = state
        self.observation_spec = observation
        self.state_spec = Composite(state=state.clone(), shape=batch, device=device)
        reward_shape = self._reward_shape or (1,)
        self.reward_spec = Unbounded(shape=(*batch, *reward_shape), dtype=self._reward_dtype, device=device)
        flag = Categorical(2, shape=(*batch, 1), dtype=torch.bool, device=device)
        self.full_done_spec = Composite(
            done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=batch, device=device
        )

    def _probe_reset(self) -> None:
        """Runs a first reset (compiling it; ``env.key`` is kept) to complete the specs.

        Some Jumanji specs do not cover the first observation (``TSP-v1``'s ``position`` is
        a ``DiscreteArray(num_cities)`` but starts at -1, "no city yet"): such a spec is
        widened to a ``Bounded`` spec that holds the values seen. With ``from_pixels``, the
        first frame gives ``"pixels"`` its shape.
        """
        key = self._key
        reset = self._reset(None)
        self._key = key
        spec = self.observation_spec.clone()
        for obs_key in self._obs_layout.keys if not self.pixels_only else ():
            leaf, value = spec[obs_key], reset.get(obs_key)
            if not leaf.is_in(value):
                spec[obs_key] = _widened(leaf, value, self.batch_dims)
        if self.from_pixels:
            frame = reset.get("pixels")
            shape = frame.shape[reset.batch_dims :]
            spec["pixels"] = Bounded(0, 255, shape=(*self.batch_size, *shape), dtype=torch.uint8, device=self.device)
        self.observation_spec = spec

    # ------------------------------------------------------------------ the jitted functions
    @property
    def jit(self) -> bool:
        """Whether reset and step run compiled (``jax.jit``); setting it rebuilds them."""
        return self._jit

    @jit.setter
    def jit(self, value: bool) -> None:
        import jax

        self._jit = bool(value)
        self._reset_fn = jax.jit(self._batched_reset, static_argnums=1) if value else self._batched_reset
        self._step_fn = jax.jit(self._batched_step) if value else self._batched_step

    @property
    def trace_counts(self) -> dict[str, int]:
        """How many times reset and step were traced, i.e. compiled with ``jit``: once each
        for a batch-locked env, once per batch size used otherwise (every call without
        ``jit``).

        Examples:
            >>> import pytest; jumanji = pytest.importorskip("jumanji")  # skips without jumanji
            >>> env = JumanjiEnv("TSP-v1", batch_size=[2])
            >>> _ = env.rollout(3); _ = env.rollout(3)
            >>> env.trace_counts
            {'reset': 1, 'step': 1}
        """
        return super().trace_counts

    def _batched_reset(self, key: Any, num_envs: int) -> tuple[Any, list[Any], list[Any]]:
        """``num_envs`` resets from ``key``: the next key, the states' and observations' leaves."""
        import jax

        self._count_trace("reset")
        key, subkey = jax.random.split(key)
        state, timestep = jax.vmap(self._env.reset)(jax.random.split(subkey, num_envs))
        return key, self._state_layout.flatten(state), self._obs_layout.flatten(timestep.observation)

    def _batched_step(self, state_leaves: list[Any], action: Any) -> tuple[Any, ...]:
        """One step of each env: the states' and observations' leaves, rewards and the
        terminated and truncated flags."""
        import jax
        import jax.numpy as jnp

        self._count_trace("step")
        state = self._state_layout.unflatten(state_leaves)
        state, timestep = jax.vmap(self._env.step)(state, action)
        last = timestep.step_type == self.lib.types.StepType.LAST
        discount_zero = jnp.all((timestep.discount == 0).reshape(last.shape[0], -1), axis=-1)
        return (
            self._state_layout.flatten(state),
            self._obs_layout.flatten(timestep.observation),
            timestep.reward,
            last & discount_zero,
            last & ~discount_zero,
        )

    # ------------------------------------------------------------------ reset, step
    def _data_batch_size(self, tensordict: TensorDictBase | None) -> torch.Size:
        if self.batch_locked or tensordict is None:
            return self.batch_size
        return tensordict.batch_size

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        import jax

        batch_size = self._data_batch_size(tensordict)
        outputs = self._reset_fn(self._key, batch_size.numel())
        jax.block_until_ready(outputs)
        self._key, state_leaves, obs_leaves = outputs
        return self._observations(batch_size, state_leaves, obs_leaves)

    def _observations(self, batch_size: torch.Size, state_leaves: list[Any], obs_leaves: list[Any]) -> TensorDictBase:
        device = self.device
        if self.pixels_only:
            out = TensorDict({}, batch_size=batch_size, device=device)
        else:
            out = self._obs_layout.to_tensordict(obs_leaves, batch_size, device)
        state = self._state_layout.to_tensordict(state_leaves, batch_size, device)
        out.set("state", state)
        if self.from_pixels:
            out.set("pixels", self._render_batch(state))
        return out

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        import jax

        batch_size = self._data_batch_size(tensordict)
        num_envs = batch_size.numel()
        state = tensordict.get("state", None)
        if state is None:
            raise KeyError(
                f"{type(self).__name__} is stateless: step() needs the 'state' entry that reset() and step() write "
                f"(spec {self.state_spec['state']}); the input holds {sorted(map(str, tensordict.keys()))}."
            )
        state_leaves = self._state_layout.from_tensordict(state, num_envs, self._jax_device)
        outputs = self._step_fn(state_leaves, self._jax_action(tensordict.get("action"), num_envs))
        jax.block_until_ready(outputs)
        state_leaves, obs_leaves, reward, terminated, truncated = outputs
        out = self._observations(batch_size, state_leaves, obs_leaves)
        reward_shape = self.reward_spec.shape[self.batch_dims :]
        out.set("reward", self._to_torch(reward).reshape((*batch_size, *reward_shape)))
        out.set("terminated", self._to_torch(terminated).reshape(*batch_size, 1))
        out.set("truncated", self._to_torch(truncated).reshape(*batch_size, 1))
        return out

    def _to_torch(self, array: Any) -> torch.Tensor:
        return jax_to_torch(array, self.device)

    def _jax_action(self, action: torch.Tensor, num_envs: int) -> Any:
        """The action as Jumanji takes it: indices (from one-hot if need be) in its dtype."""
        if isinstance(self.action_spec, (OneHot, MultiOneHot)):
            action = self.action_spec.to_categorical(action)
        return torch_to_jax(action.reshape(num_envs, *self._action_shape), self._action_dtype, self._jax_device)

    # ------------------------------------------------------------------ pixels
    def _render_batch(self, state: TensorDictBase) -> torch.Tensor:
        """The frame of each env's state, ``[*batch, H, W, 3]`` uint8."""
        flat = state.reshape(-1)
        frames = [
            self._render_state(self._state_layout.unflatten(self._state_layout.from_tensordict(flat[i], None)))
            for i in range(flat.batch_size[0])
        ]
        pixels = torch.stack(frames) if frames else torch.zeros(0, 1, 1, 3, dtype=torch.uint8)
        pixels = pixels.reshape((*state.batch_size, *pixels.shape[1:]))
        return pixels if self.device is None else pixels.to(self.device)

    def _render_state(self, state: Any) -> torch.Tensor:
        """One env's frame: what ``env.render`` returns, else the figure it drew on."""
        import matplotlib.pyplot as plt

        with warnings.catch_warnings():  # the viewers "show" their figure: Agg says it cannot
            warnings.simplefilter("ignore", UserWarning)
            frame = self._env.render(state)
            if frame is None:
                figure = plt.gcf()
                figure.canvas.draw()
                frame = figure.canvas.buffer_rgba()
        return torch.from_numpy(np.ascontiguousarray(np.asarray(frame)[..., :3], dtype=np.uint8))

    # ------------------------------------------------------------------ the rest
    def close(self) -> None:
        """Closes the Jumanji env (its viewer's figures) and this env."""
        self._env.close()
        super().close()


class JumanjiEnv(JumanjiWrapper):
    """A Jumanji env built from its registered name (``jumanji.make``).

    Args:
        env_name: the name, one of :attr:`available_envs` (``"Snake-v1"``, ``"TSP-v1"``...).
        env_kwargs: keyword arguments of ``jumanji.make`` (of the env's constructor).
        **kwargs: the wrapper's options (``batch_size``, ``categorical_action_encoding``,
            ``from_pixels``, ``device``...; see ``JumanjiWrapper``).

    Raises:
        ImportError: jumanji is not installed (the message says how to install it).
        ValueError: an unknown name (the message lists the valid ones).

    Examples:
        >>> import pytest; jumanji = pytest.importorskip("jumanji")  # skips without jumanji
        >>> env = JumanjiEnv("Snake-v1", batch_size=[2], categorical_action_encoding=False)
        >>> env.action_spec.shape, sorted(env.observation_spec.keys())
        (torch.Size([2, 4]), ['action_mask', 'grid', 'state', 'step_count'])
        >>> "Snake-v1" in JumanjiEnv.available_envs
        True
    """

    def __init__(self, env_name: str, *, env_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        device = kwargs.get("device")
        jumanji = _import_jumanji(type(self).__name__, None if device is None else torch.device(device))
        names = sorted(jumanji.registered_environments())
        if env_name not in names:
            raise ValueError(
                f"{type(self).__name__}: unknown Jumanji env {env_name!r}; valid names: {', '.join(names)}."
            )
        self.env_name = env_name
        super().__init__(jumanji.make(env_name, **dict(env_kwargs or {})), **kwargs)
