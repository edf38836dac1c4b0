"""``VecGymEnvTransform``: Cadence's reset contract on gymnasium vector envs that reset
their finished sub-envs themselves.

Gymnasium (>= 1.0) vector envs reset finished sub-envs in one of two ways. With
``AutoresetMode.SAME_STEP`` the step where a sub-env finishes already returns the first
observation of its next episode, and the true last observation sits in
``info["final_obs"]`` (``info["final_observation"]`` in gymnasium 0.26-0.29). With
``AutoresetMode.NEXT_STEP`` (gymnasium's default) the step returns the true last
observation and the following ``step`` call resets the sub-env, ignoring its action.

Cadence's contract is that a step's ``"next"`` holds the true last observation of a
finished sub-env, and that the reset which follows (``"_reset"`` set on the done
sub-envs, as ``rollout`` and ``step_and_maybe_reset`` do) yields its first new one.
``VecGymEnvTransform`` gives that contract on both modes: see the class.

Examples:
    >>> import gymnasium
    >>> from cadence.envs.libs.gym import GymWrapper
    >>> from cadence.envs.transforms import TransformedEnv
    >>> vec = gymnasium.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync",
    ...                          vector_kwargs={"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP})
    >>> env = TransformedEnv(GymWrapper(vec), VecGymEnvTransform())
    >>> env.rollout(50, break_when_any_done=False)["next", "observation"].shape
    torch.Size([2, 50, 4])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from cadence.data import Composite
from cadence.envs.gym_like import GymLikeEnv
from cadence.envs.transforms.base import Compose, Transform, TransformedEnv

__all__ = ["FinalObservationReader", "VecGymEnvTransform"]

NestedKey = str | tuple[str, ...]


def _autoreset_mode(env: GymLikeEnv) -> str:
    """The autoreset mode of the vector env under ``env``: ``"NextStep"``, ``"SameStep"``
    or ``"Disabled"`` (gymnasium's ``AutoresetMode`` values)."""
    metadata = getattr(env._env, "metadata", None) or {}
    mode = metadata.get("autoreset_mode", getattr(env._env, "autoreset_mode", "NextStep"))
    return str(getattr(mode, "value", mode))


def _single_obs_entries(obs: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """The entries of one sub-env's observation, named as ``GymLikeEnv.read_obs`` names
    them (an array is ``"observation"``, a dict its keys, a tuple ``"0"``, ``"1"``...)."""
    if isinstance(obs, tuple):
        obs = {str(i): item for i, item in enumerate(obs)}
    if isinstance(obs, Mapping):
        entries: dict[tuple[str, ...], Any] = {}
        for key, value in obs.items():
            entries.update(_single_obs_entries(value, prefix + (str(key),)))
        return entries
    return {prefix or ("observation",): obs}


def _lead_mask(mask: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """A ``[N, 1]`` sub-env mask broadcast over a value of shape ``[N, ...]``."""
    flat = mask.reshape(shape[0])
    return flat.reshape(shape[0], *([1] * (len(shape) - 1))).expand(shape)


class FinalObservationReader:
    """An info-dict reader writing, under ``final_name``, the observation that ended each
    sub-env's step: ``info["final_obs"]`` for the sub-envs that finished (a
    ``SAME_STEP`` vector env), the step's observation for the others.

    :class:`VecGymEnvTransform` registers it on the env it wraps (with
    ``set_info_dict_reader``, so the env's observation spec holds the entry) and removes
    the entry from the data it hands on.

    Args:
        observation_spec: the env's observation spec (shapes with the batch size).
        final_name: where the final observations go.

    Examples:
        >>> import numpy as np, torch
        >>> from tensordict import TensorDict
        >>> from cadence.data import Composite, Unbounded
        >>> reader = FinalObservationReader(Composite(observation=Unbounded(shape=(2, 1)), shape=(2,)))
        >>> data = TensorDict({"observation": torch.zeros(2, 1)}, [2])
        >>> info = {"final_obs": np.array([None, np.ones(1)], dtype=object), "_final_obs": np.array([False, True])}
        >>> reader(info, data)["final", "observation"].squeeze(-1).tolist()
        [0.0, 1.0]
    """

    #: ``GymWrapper`` does not warn about same-step resets when this reader is registered.
    reads_final_observation = True

    def __init__(self, observation_spec: Composite, final_name: str = "final") -> None:
        self.final_name = final_name
        self.keys = [final_name]
        self._spec = observation_spec.clone()
        self._obs_keys = [key if isinstance(key, str) else tuple(key) for key in self._spec.keys(True, True)]

    def info_spec(self, batch_size: torch.Size) -> Composite:
        """The spec of the entry written: a copy of the observation spec."""
        return Composite({self.final_name: self._spec.clone()}, shape=batch_size)

    def __call__(self, info: Mapping[str, Any], tensordict: TensorDictBase) -> TensorDictBase:
        """Writes ``tensordict[final_name]`` from ``info`` and the observations already read."""
        final = tensordict.select(*self._obs_keys, strict=False).clone()
        observations = info.get("final_obs", info.get("final_observation"))
        mask = info.get("_final_obs", info.get("_final_observation"))
        if observations is not None and mask is not None:
            for index in np.flatnonzero(np.asarray(mask)):
                for key, value in _single_obs_entries(observations[index]).items():
                    target = final.get(key, None)
                    if target is None:
                        raise KeyError(
                            f"FinalObservationReader: the final observation holds {key!r}, which the "
                            f"observation spec lacks; it has {self._obs_keys}."
                        )
                    target[index] = torch.as_tensor(np.asarray(value), dtype=target.dtype).reshape(target.shape[1:])
        tensordict.set(self.final_name, final)
        return tensordict

    def __repr__(self) -> str:
        return f"FinalObservationReader(final_name={self.final_name!r})"


class VecGymEnvTransform(Transform):
    """Cadence's reset contract on a ``GymWrapper`` around an auto-resetting gymnasium
    vector env.

    ``AutoresetMode.SAME_STEP``: the transform registers a
    :class:`FinalObservationReader` on the wrapper (unless its observation spec already
    holds ``final_name``), and on each step writes the final observations of the
    finished sub-envs into ``"next"`` in place of the reset observations the simulator
    returned, keeping those aside. A reset whose ``"_reset"`` mask selects sub-envs
    kept aside hands their kept observations back without resetting the simulator
    again (they were reset inside the step); sub-envs that the mask selects and that
    did not just finish are reset by the simulator. A full reset (no ``"_reset"``)
    resets all and drops what was kept. ``rollout(break_when_any_done=False)`` then
    gives the data of ``GymEnv(name, num_envs=N)`` with the same seeds.

    ``AutoresetMode.NEXT_STEP`` (and ``DISABLED``): the step already returns the true
    final observations, and a ``"_reset"`` reset goes to the simulator as
    ``options["reset_mask"]``, which resets the done sub-envs and cancels their pending
    autoreset: the transform leaves the data as it is. Stepping a done sub-env without
    resetting it gives gymnasium's reset step (the action is ignored, the reward is 0
    and the observation the first of a new episode).

    Gymnasium 0.26-0.29 vector envs (``info["final_observation"]``, same-step resets)
    behave as ``SAME_STEP``. The transform must be the first of its env's transforms.

    Args:
        final_name: the observation entry that holds the final observations.

    Examples:
        >>> import gymnasium
        >>> from cadence.envs.libs.gym import GymWrapper
        >>> from cadence.envs.transforms import TransformedEnv
        >>> vec = gymnasium.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync",
        ...                          vector_kwargs={"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP})
        >>> env = TransformedEnv(GymWrapper(vec), VecGymEnvTransform())
        >>> _ = env.set_seed(0)
        >>> data = env.rollout(40, break_when_any_done=False)
        >>> bool(data["next", "done"].any()), "final" in data["next"].keys()
        (True, False)
    """

    def __init__(self, final_name: str = "final") -> None:
        super().__init__()
        if not isinstance(final_name, str) or not final_name:
            raise ValueError(f"VecGymEnvTransform: final_name must be a non-empty string, got {final_name!r}.")
        self.final_name = final_name
        self._same_step = False
        # the observations of the last step (first ones of the new episodes for the
        # sub-envs that finished), and which sub-envs' first observations they hold
        self._stash: dict[NestedKey, torch.Tensor] | None = None
        self._stash_mask: torch.Tensor | None = None
        self._served: torch.Tensor | None = None

    # ------------------------------------------------------------------ the env below
    def _wrapped_env(self) -> GymLikeEnv:
        child: Transform = self
        container = self.container
        while isinstance(container, Compose):
            if container.transforms[0] is not child:
                raise ValueError(
                    "VecGymEnvTransform must be the first transform of its env: it reads the gymnasium "
                    "wrapper's own outputs."
                )
            child, container = container, container.container
        if not isinstance(container, TransformedEnv):
            raise RuntimeError("VecGymEnvTransform works inside a TransformedEnv only.")
        env = container.base_env
        if not isinstance(env, GymLikeEnv) or not getattr(env, "is_vector", bool(env.batch_size)):
            raise TypeError(
                f"VecGymEnvTransform handles GymWrapper envs around gymnasium vector envs; got "
                f"{type(env).__name__} with batch size {tuple(env.batch_size)}."
            )
        return env

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        env = self._wrapped_env()
        mode = _autoreset_mode(env)
        self._same_step = mode == "SameStep"
        if self._same_step and self.final_name not in env.full_observation_spec.keys():
            env.set_info_dict_reader(FinalObservationReader(env.full_observation_spec, self.final_name))
        observation_spec = output_spec["full_observation_spec"]
        if self.final_name in observation_spec.keys():
            del observation_spec[self.final_name]
        return output_spec

    # ------------------------------------------------------------------ data
    def _pop_final(self, data: TensorDictBase) -> TensorDictBase | None:
        final = data.get(self.final_name, None)
        if final is not None:
            del data[self.final_name]
        return final

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        final = self._pop_final(next_tensordict)
        self._stash = self._stash_mask = None
        if final is None or not self._same_step:
            return next_tensordict
        done = next_tensordict.get("done")
        if not done.any():
            return next_tensordict
        stash = {}
        for key in final.keys(True, True):
            current = next_tensordict.get(key)
            stash[key] = current
            next_tensordict.set(key, torch.where(_lead_mask(done, current.shape), final.get(key), current))
        self._stash, self._stash_mask = stash, done.clone()
        return next_tensordict

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        self._served = None
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None:  # a full reset: the simulator resets every sub-env
            self._stash = self._stash_mask = None
            return tensordict
        if self._stash is None or self._stash_mask is None:
            return tensordict
        if mask.shape != self._stash_mask.shape:
            raise ValueError(
                f"VecGymEnvTransform: the '_reset' mask has shape {tuple(mask.shape)}, expected "
                f"{tuple(self._stash_mask.shape)} (the env's done shape)."
            )
        served = mask & self._stash_mask
        if not served.any():
            return tensordict
        self._served = served
        tensordict = tensordict.copy()
        # the simulator resets only the sub-envs asked for that did not just reset themselves;
        # an all-false mask leaves it alone
        tensordict.set("_reset", mask & ~served)
        return tensordict

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        self._pop_final(tensordict_reset)
        served, self._served = self._served, None
        if served is None or self._stash is None or self._stash_mask is None:
            return tensordict_reset
        for key, kept in self._stash.items():
            current = tensordict_reset.get(key, None)
            value = kept if current is None else torch.where(_lead_mask(served, kept.shape), kept, current)
            tensordict_reset.set(key, value)
        self._stash_mask = self._stash_mask & ~served
        if not self._stash_mask.any():
            self._stash = self._stash_mask = None
        return tensordict_reset

    def __repr__(self) -> str:
        return f"VecGymEnvTransform(final_name={self.final_name!r})"
