"""Gymnasium (and gym) environments: ``GymWrapper`` around a built env, ``GymEnv`` by id.

Specs are read from the env's spaces once; a vector env (``num_envs=N``) is stepped
as one batch of size N with partial resets. ``rollout`` takes a shortcut that steps the
simulator and writes straight into preallocated arrays (``gym_simulator.py``).

Examples:
    >>> from cadence.envs.libs.gym import GymEnv
    >>> env = GymEnv("CartPole-v1")
    >>> next_seed = env.set_seed(0)
    >>> env.rollout(500, break_when_any_done=False)["next", "observation"].shape
    torch.Size([500, 4])
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase
from packaging.version import Version

from cadence.data import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    NonTensor,
    OneHot,
    TensorSpec,
    Unbounded,
)
from cadence.envs.gym_like import GymLikeEnv, tensor_to_numpy
from cadence.envs.libs.gym_backend import gym_backend, set_gym_backend
from cadence.envs.libs.gym_simulator import GymSimulator

__all__ = ["GymEnv", "GymWrapper", "gym_backend", "set_gym_backend", "space_to_spec", "spec_to_space"]

_WRAPPER_KWARGS = (
    "categorical_action_encoding",
    "from_pixels",
    "pixels_only",
    "frame_skip",
    "device",
    "allow_done_after_reset",
    "auto_reset",
    "auto_reset_replace",
    "run_type_checks",
)


def _torch_dtype(np_dtype: Any) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype=np_dtype)).dtype


def space_to_spec(
    space: Any,
    batch_size: torch.Size = torch.Size(),
    categorical_action_encoding: bool = True,
    device: torch.device | None = None,
) -> TensorSpec:
    """Translates a gymnasium space into a spec whose shape starts with ``batch_size``.

    Box → ``Bounded`` (``Unbounded`` if no bound is finite); Discrete → ``Categorical``
    (``OneHot`` if ``categorical_action_encoding`` is false); MultiDiscrete →
    ``MultiCategorical`` (or ``MultiOneHot``); MultiBinary → ``Binary``; Dict and Tuple →
    ``Composite`` (a Tuple's entries are named ``"0"``, ``"1"``...); any other space →
    ``NonTensor``.

    Examples:
        >>> import gymnasium
        >>> space_to_spec(gymnasium.spaces.Discrete(3), categorical_action_encoding=False).shape
        torch.Size([3])
        >>> space_to_spec(gymnasium.spaces.Box(-1, 1, (2,)), torch.Size([4])).shape
        torch.Size([4, 2])
    """
    spaces = gym_backend("spaces")
    batch_size = torch.Size(batch_size)
    if isinstance(space, spaces.Box):
        dtype = _torch_dtype(space.dtype)
        shape = (*batch_size, *space.shape)
        low = torch.as_tensor(space.low, dtype=dtype).expand(shape)
        high = torch.as_tensor(space.high, dtype=dtype).expand(shape)
        if dtype.is_floating_point and not (low.isfinite().any() or high.isfinite().any()):
            return Unbounded(shape=shape, dtype=dtype, device=device)
        return Bounded(low.clone(), high.clone(), shape=shape, dtype=dtype, device=device)
    if isinstance(space, spaces.Discrete):
        n, start = int(space.n), int(space.start)
        if not categorical_action_encoding:  # one-hot in the space's dtype (int64), as policies write it
            return OneHot(n, shape=(*batch_size, n), device=device, dtype=_torch_dtype(space.dtype))
        if start:
            return Bounded(start, start + n - 1, shape=batch_size, dtype=torch.long, device=device)
        return Categorical(n, shape=batch_size, device=device)
    if isinstance(space, spaces.MultiDiscrete):
        nvec = torch.as_tensor(space.nvec, dtype=torch.long)
        if categorical_action_encoding or nvec.ndim > 1:
            return MultiCategorical(nvec, shape=(*batch_size, *nvec.shape), device=device)
        return MultiOneHot(nvec, shape=(*batch_size, int(nvec.sum())), device=device, dtype=_torch_dtype(space.dtype))
    if isinstance(space, spaces.MultiBinary):
        shape = (*batch_size, *np.atleast_1d(space.n).tolist())
        return Binary(shape[-1], shape=shape, dtype=torch.int8, device=device)
    if isinstance(space, spaces.Dict):
        return Composite(
            {key: space_to_spec(sub, batch_size, categorical_action_encoding, device) for key, sub in space.items()},
            shape=batch_size,
            device=device,
        )
    if isinstance(space, spaces.Tuple):
        return Composite(
            {
                str(i): space_to_spec(sub, batch_size, categorical_action_encoding, device)
                for i, sub in enumerate(space.spaces)
            },
            shape=batch_size,
            device=device,
        )
    return NonTensor(shape=batch_size, device=device)


def spec_to_space(spec: TensorSpec) -> Any:
    """A gymnasium space holding what a Cadence spec holds (the inverse of :func:`space_to_spec`),
    in the dtypes other RL libraries' spaces use.

    ``Categorical`` and ``OneHot`` give ``Discrete`` (DI-engine's actions are indices),
    ``MultiCategorical``/``MultiOneHot`` ``MultiDiscrete``, ``Binary`` ``MultiBinary``,
    ``Bounded``/``Unbounded`` ``Box`` (float64 as float32, integers as int64, uint8 kept),
    ``Composite`` a ``Dict``.

    Args:
        spec: an unbatched spec.

    Returns:
        The space.

    Raises:
        TypeError: for a spec with no space (``NonTensor``), naming it.

    Examples:
        >>> from cadence.data import Bounded, Categorical
        >>> spec_to_space(Categorical(3))
        Discrete(3)
        >>> spec_to_space(Bounded(-1.0, 1.0, shape=(2,)))
        Box(-1.0, 1.0, (2,), float32)
    """
    spaces = gym_backend("spaces")
    if isinstance(spec, Composite):
        return spaces.Dict({key: spec_to_space(sub) for key, sub in spec.items()})
    if isinstance(spec, (Categorical, OneHot)):
        return spaces.Discrete(int(spec.space.n))
    if isinstance(spec, (MultiCategorical, MultiOneHot)):
        nvec = spec.nvec if isinstance(spec, MultiCategorical) else torch.as_tensor(spec.space.nvec)
        return spaces.MultiDiscrete(np.asarray(nvec, dtype=np.int64))
    if isinstance(spec, Binary):
        return spaces.MultiBinary(list(spec.shape))
    if isinstance(spec, (Bounded, Unbounded)):
        dtype = _contract_np_dtype(spec.dtype)
        shape = tuple(spec.shape)
        if isinstance(spec, Bounded):
            low = spec.low.detach().cpu().numpy().astype(dtype)
            high = spec.high.detach().cpu().numpy().astype(dtype)
        else:
            info = np.finfo(dtype) if np.issubdtype(dtype, np.floating) else np.iinfo(dtype)
            low, high = (-np.inf, np.inf) if np.issubdtype(dtype, np.floating) else (info.min, info.max)
        return spaces.Box(low, high, shape, dtype)
    raise TypeError(f"spec_to_space: {type(spec).__name__} has no gymnasium space ({spec})")


def _contract_np_dtype(dtype: torch.dtype) -> np.dtype:
    np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    if np_dtype == np.uint8:
        return np_dtype
    if np.issubdtype(np_dtype, np.floating):
        return np.dtype(np.float32)
    return np.dtype(np.int64)


def _hot_index(one_hot: torch.Tensor) -> np.ndarray:
    """The index of the hot entry along the last dim (one-hots come as bool or integers);
    numpy's argmax, a third of torch's on a step's few entries (and it takes bools)."""
    return np.asarray(one_hot.cpu().numpy().argmax(-1))


def _action_converter(space: Any, spec: TensorSpec) -> Callable[[torch.Tensor], Any]:
    """How to hand an action tensor (with any leading dims) to the simulator."""
    spaces = gym_backend("spaces")
    if isinstance(spec, OneHot):
        start = int(getattr(space, "start", 0))
        if start:
            return lambda action: _hot_index(action) + start
        return _hot_index
    if isinstance(spec, MultiOneHot):
        sizes = [int(n) for n in np.asarray(space.nvec).reshape(-1)]

        def to_indices(action: torch.Tensor) -> Any:
            return np.stack([_hot_index(part) for part in action.split(sizes, -1)], -1)

        return to_indices
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Discrete)):
        np_dtype = space.dtype
        return lambda action: tensor_to_numpy(action).astype(np_dtype, copy=False)
    return tensor_to_numpy


class GymWrapper(GymLikeEnv):
    """Wraps a built gymnasium env (or vector env) as a Cadence env.

    Args:
        env: a ``gymnasium.Env``, or a ``gymnasium.vector.VectorEnv``. Cadence resets
            the done sub-envs of a vector env itself (``"_reset"`` masks): envs built
            with ``AutoresetMode.DISABLED`` (as ``GymEnv(name, num_envs=N)`` builds
            them) or ``NEXT_STEP`` (gymnasium's default) work as they are;
            ``SAME_STEP`` ones need ``VecGymEnvTransform`` appended.
        categorical_action_encoding: Discrete actions as indices (``Categorical``)
            rather than one-hot vectors (``OneHot``, the default, as in the reference).
        from_pixels: add the rendered frame as ``"pixels"`` (the env must render
            ``"rgb_array"``).
        pixels_only: with ``from_pixels``, drop the other observations.
        frame_skip: repeat each action this many times, summing rewards.
        device: where the data lives.
        allow_done_after_reset, auto_reset, auto_reset_replace, run_type_checks: as
            in ``EnvBase``.

    Examples:
        >>> import gymnasium
        >>> env = GymWrapper(gymnasium.make("Pendulum-v1"))
        >>> env.action_spec.shape, env.observation_spec["observation"].shape
        (torch.Size([1]), torch.Size([3]))
    """

    #: Gymnasium's env or vector env stepped into arrays (see ``EnvBase.kernel``).
    array_kernel = GymSimulator

    def __init__(
        self,
        env: Any,
        *,
        categorical_action_encoding: bool = False,
        from_pixels: bool = False,
        pixels_only: bool = True,
        frame_skip: int = 1,
        device: torch.device | str | None = None,
        allow_done_after_reset: bool = False,
        auto_reset: bool = False,
        auto_reset_replace: bool = True,
        run_type_checks: bool = False,
    ) -> None:
        vector = gym_backend("vector")
        self_batch = torch.Size([env.num_envs]) if isinstance(env, vector.VectorEnv) else torch.Size()
        super().__init__(
            device=device,
            batch_size=self_batch,
            allow_done_after_reset=allow_done_after_reset,
            auto_reset=auto_reset,
            auto_reset_replace=auto_reset_replace,
            run_type_checks=run_type_checks,
        )
        if frame_skip < 1:
            raise ValueError(f"frame_skip must be >= 1, got {frame_skip}.")
        self._env = env
        self.is_vector = bool(self_batch)
        self.autoreset_mode = self._vector_autoreset_mode(env) if self.is_vector else "Disabled"
        # gymnasium's own SyncVectorEnv: Cadence steps and resets its sub-envs itself, through
        # their public API, and keeps where each one stands (see _owns_sub_envs)
        self._sub_envs = _stock_sync_vector_envs(env) if self.is_vector and self.autoreset_mode == "Disabled" else None
        self._sub_env_obs: list[Any] = [None] * len(self._sub_envs or ())
        self._same_step_checked = False
        self.from_pixels = from_pixels
        self.pixels_only = pixels_only and from_pixels
        self.frame_skip = frame_skip
        self.categorical_action_encoding = categorical_action_encoding
        self._build_specs()

    @staticmethod
    def _vector_autoreset_mode(env: Any) -> str:
        """The vector env's autoreset mode, by name. Cadence resets done sub-envs itself,
        through ``"_reset"``: ``"Disabled"`` (what ``GymEnv(name, num_envs=N)`` builds)
        and ``"NextStep"`` (whose pending reset a masked reset cancels) give its data as
        they are; ``"SameStep"`` hides the last observation of an episode in the info,
        which ``VecGymEnvTransform`` brings back."""
        mode = env.metadata.get("autoreset_mode")
        return str(getattr(mode, "value", mode if mode is not None else "NextStep"))

    def _check_same_step_reader(self, terminated: Any, truncated: Any) -> None:
        """Warns, at the first done of a same-step vector env, if nothing reads the final
        observations out of the info (``VecGymEnvTransform`` registers such a reader)."""
        if not (np.any(terminated) or np.any(truncated)):
            return
        self._same_step_checked = True
        if not any(getattr(reader, "reads_final_observation", False) for reader in self.info_dict_reader):
            warnings.warn(
                "GymWrapper: this vector env auto-resets in the same step (AutoresetMode.SAME_STEP): its 'next' "
                "observation after a done is the reset one. Append VecGymEnvTransform() to get the final "
                "observation there and the reset one at the next step.",
                stacklevel=4,
            )

    # ------------------------------------------------------------------ specs
    @property
    def _single_observation_space(self) -> Any:
        return self._env.single_observation_space if self.is_vector else self._env.observation_space

    @property
    def _single_action_space(self) -> Any:
        return self._env.single_action_space if self.is_vector else self._env.action_space

    def _build_specs(self) -> None:
        batch = self.batch_size
        obs_spec = space_to_spec(self._single_observation_space, batch, True, self.device)
        if not isinstance(obs_spec, Composite):
            obs_spec = Composite(observation=obs_spec, shape=batch, device=self.device)
        if self.from_pixels:
            self._env.reset()  # rendering needs a first reset; this probe reads the frame's shape
            pixels = self._render()
            pixels_spec = Bounded(0, 255, shape=pixels.shape, dtype=torch.uint8, device=self.device)
            obs_spec = Composite(shape=batch, device=self.device) if self.pixels_only else obs_spec
            obs_spec["pixels"] = pixels_spec
        self.full_observation_spec = obs_spec
        action_spec = space_to_spec(self._single_action_space, batch, self.categorical_action_encoding, self.device)
        self.action_spec = action_spec
        self._to_backend = _action_converter(self._single_action_space, action_spec)
        self.reward_spec = Unbounded(shape=(*batch, 1), device=self.device)
        flag = Categorical(2, shape=(*batch, 1), dtype=torch.bool, device=self.device)
        self.full_done_spec = Composite(
            done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=batch, device=self.device
        )

    def _render(self) -> torch.Tensor:
        if self.is_vector:
            raise ValueError(
                "from_pixels=True is supported for single gymnasium envs; batch them with "
                "SerialEnv/ParallelEnv rather than num_envs."
            )
        if getattr(self._env, "render_mode", None) != "rgb_array":
            raise ValueError(
                f"from_pixels=True needs an env built with render_mode='rgb_array', got "
                f"render_mode={getattr(self._env, 'render_mode', None)!r}."
            )
        return torch.from_numpy(np.ascontiguousarray(self._env.render()))

    # ------------------------------------------------------------------ readers
    def read_action(self, action: torch.Tensor) -> Any:
        """The action in the simulator's format (indices for one-hot actions)."""
        return self._to_backend(action)

    def _observation_entries(self, obs: Any) -> dict[str, Any]:
        entries = {} if self.pixels_only else self.read_obs(obs)
        if self.from_pixels:
            entries["pixels"] = self._render()
        return entries

    def _owns_sub_envs(self) -> bool:
        """Whether Cadence steps and resets the sub-envs of gymnasium's own ``SyncVectorEnv``
        itself, one by one (as the vector env does, without merging their infos, which no
        info reader asks for then): none of the vector env's own state is read or written
        (it changes between gymnasium releases). The wrapper keeps where each sub-env stands,
        which a masked reset hands back for the rows it does not reset."""
        return self._sub_envs is not None and not self.info_dict_reader

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is not None and self.is_vector:
            reset_mask = mask.reshape(self.batch_size).cpu().numpy()
            if self._owns_sub_envs():
                return self._output_of("reset()", self._reset_sub_envs(reset_mask, **kwargs), {})
            kwargs.setdefault("options", {})["reset_mask"] = reset_mask
        obs, info = self._reset_backend(**kwargs)
        return self._output_of("reset()", obs, info)

    def _reset_backend(self, **kwargs: Any) -> tuple[Any, Mapping[str, Any]]:
        obs, info = super()._reset_backend(**kwargs)
        if self._sub_envs is not None:  # every row stands where the vector env's reset left it
            self._sub_env_obs = list(np.array(obs))
        return obs, info

    def _reset_sub_envs(self, reset_mask: np.ndarray, seed: Any = None, options: Any = None) -> np.ndarray:
        """The sub-envs at ``reset_mask`` reset (seeds and options as the vector env's masked
        ``reset`` hands them on), the others where they stand: the batch of observations."""
        if self._pending_seed is not None:  # the seed given to set_seed goes to the first reset
            seed, self._pending_seed = self._pending_seed, None
        count = len(self._sub_env_obs)
        seeds = [seed + i for i in range(count)] if isinstance(seed, int) else seed if seed is not None else [None] * count
        for i in np.flatnonzero(reset_mask):
            self._sub_env_obs[i], _ = self._sub_envs[i].reset(  # type: ignore[index]
                seed=seeds[i], options={} if options is None else options)
        return np.stack(self._sub_env_obs)

    def _step_sub_envs(self, action: Any) -> tuple[Any, Any, Any, Any, Any]:
        """One step of each sub-env (see :meth:`_owns_sub_envs`), as gymnasium's five."""
        sub_envs, current = self._sub_envs or [], self._sub_env_obs
        reward = np.zeros(len(sub_envs))
        terminated, truncated = np.zeros(len(sub_envs), dtype=bool), np.zeros(len(sub_envs), dtype=bool)
        for i, sub_env in enumerate(sub_envs):
            current[i], reward[i], terminated[i], truncated[i], _ = sub_env.step(action[i])
        return np.stack(current), reward, terminated, truncated, {}

    def _simulate(self, action: Any) -> tuple[Any, Any, Any, Any, Any]:
        """Steps the simulator ``frame_skip`` times with ``action``, summing rewards."""
        if self._owns_sub_envs():
            outputs = self._step_sub_envs(action)
        else:
            outputs = self._env.step(action)
            if self._sub_envs is not None:  # an info reader reads the vector env's step: kept in step
                self._sub_env_obs = list(np.array(outputs[0]))
        if (len(outputs) == 5 and self.frame_skip == 1 and self.autoreset_mode == "Disabled"
                and type(self).stock_output_transform):
            return outputs  # gymnasium's own five: nothing to normalise or repeat (the step path)
        obs, reward, terminated, truncated, info = self._output_transform(outputs)
        if self.autoreset_mode == "SameStep" and not self._same_step_checked:
            self._check_same_step_reader(terminated, truncated)
        for _ in range(self.frame_skip - 1):
            if np.any(terminated) or np.any(truncated):
                break
            outputs = self._step_sub_envs(action) if self._owns_sub_envs() else self._env.step(action)
            obs, more, terminated, truncated, info = self._output_transform(outputs)
            reward = np.asarray(reward) + np.asarray(more)
        return obs, reward, terminated, truncated, info

    def _backend_attribute(self, env: Any, name: str) -> Any:
        if hasattr(env, "get_wrapper_attr") and not self.is_vector:
            return env.get_wrapper_attr(name)
        return getattr(env, name)

    def __repr__(self) -> str:
        name = getattr(getattr(self._env, "spec", None), "id", type(self._env).__name__)
        return f"{type(self).__name__}(env={name}, batch_size={self.batch_size}, device={self.device})"


def _stock_sync_vector_envs(vector: Any) -> list[Any] | None:
    """The sub-envs of gymnasium's own ``SyncVectorEnv`` (not a subclass, nor a vector
    wrapper: their step may do more) of array observations and actions, which Cadence
    steps one by one; ``None`` for any other vector env."""
    try:
        sync_vector_env, spaces = gym_backend("vector.SyncVectorEnv"), gym_backend("spaces")
    except (ModuleNotFoundError, AttributeError):
        return None
    if type(vector) is not sync_vector_env:
        return None
    space = vector.single_observation_space
    if not isinstance(getattr(space, "shape", None), tuple) or getattr(space, "dtype", None) is None:
        return None
    if not isinstance(vector.single_action_space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete,
                                                    spaces.MultiBinary)):
        return None
    return list(vector.envs)


def _gym_checker_breaks_on_numpy2(gym_version: str) -> bool:
    """Whether this release of ``gym`` ships the env checker that numpy 2 broke (gym < 1)."""
    return Version(np.__version__).major >= 2 and Version(gym_version) < Version("1")


class GymEnv(GymWrapper):
    """A gymnasium env built from its id.

    Keyword arguments that are not the wrapper's own (see ``GymWrapper``) go to
    ``gymnasium.make`` (``render_mode``, ``g=9.81``...). ``num_envs=N`` builds a
    synchronous vector env of N copies, stepped as one batch of size ``[N]``.

    Args:
        env_name: the registered id, e.g. ``"CartPole-v1"``.
        num_envs: batch N copies in one vector env (``None``/``0``: a single env).
        **kwargs: wrapper options and ``make`` keyword arguments.

    Raises:
        ValueError: the id is not registered.
        ImportError: the env needs a package that is missing (the message says which).

    Examples:
        >>> env = GymEnv("CartPole-v1", num_envs=4)
        >>> env.batch_size, env.action_spec.shape
        (torch.Size([4]), torch.Size([4, 2]))
        >>> env.rollout(10, break_when_any_done=False).batch_size
        torch.Size([4, 10])
    """

    def __init__(self, env_name: str, *, num_envs: int | None = None, **kwargs: Any) -> None:
        wrapper_kwargs = {key: kwargs.pop(key) for key in _WRAPPER_KWARGS if key in kwargs}
        if wrapper_kwargs.get("from_pixels"):
            kwargs.setdefault("render_mode", "rgb_array")
        self.env_name = env_name
        super().__init__(self._make(env_name, num_envs, kwargs), **wrapper_kwargs)

    @staticmethod
    def _make(env_name: str, num_envs: int | None, make_kwargs: dict[str, Any]) -> Any:
        gym = gym_backend()
        error = gym_backend("error")
        try:
            if num_envs:
                vector = gym_backend("vector")
                return gym.make_vec(
                    env_name,
                    num_envs=num_envs,
                    vectorization_mode="sync",
                    vector_kwargs={"autoreset_mode": vector.AutoresetMode.DISABLED},
                    **make_kwargs,
                )
            if gym.__name__ == "gym" and _gym_checker_breaks_on_numpy2(gym.__version__):
                # gym 0.26's passive env checker reads np.bool8, which numpy 2 removed: its first
                # step would raise inside gym. The checker only warns, so it is left out.
                make_kwargs = {"disable_env_checker": True, **make_kwargs}
            return gym.make(env_name, **make_kwargs)
        except error.DependencyNotInstalled as exc:
            raise ImportError(f"GymEnv({env_name!r}) needs a package that is not installed: {exc}") from exc
        except (error.NameNotFound, error.VersionNotFound, error.UnregisteredEnv) as exc:
            raise ValueError(
                f"GymEnv: no environment {env_name!r} is registered with {gym.__name__} "
                f"({exc}). Check the id, or install the package that registers it "
                f"(e.g. pip install 'gymnasium[mujoco]' for MuJoCo envs, 'gymnasium[box2d]', 'ale-py' for Atari)."
            ) from exc
