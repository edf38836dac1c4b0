"""Batches of envs: ``EnvCreator``, ``BatchedEnvBase`` and ``SerialEnv``.

A batched env runs ``num_workers`` copies of an env and has batch size
``[num_workers, *sub_env.batch_size]``; its specs are the sub-env's, expanded. The
sub-envs are built lazily, on ``start()`` or first use. ``SerialEnv`` steps them one
after the other in this process; ``ParallelEnv`` (``parallel.py``) gives each its own
process. Attributes and methods the batch does not have are read from (or called on)
every sub-env and returned as a list.

Examples:
    >>> from cadence.envs import GymEnv, SerialEnv
    >>> env = SerialEnv(3, lambda: GymEnv("Pendulum-v1", g=9.81))
    >>> env.batch_size
    torch.Size([3])
    >>> env.g
    [9.81, 9.81, 9.81]
    >>> env.rollout(5)["next", "reward"].shape
    torch.Size([3, 5, 1])
    >>> env.close()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import cloudpickle
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.envs.common import EnvBase, EnvMetaData
from cadence.envs.seeding import validate_seed
from cadence.envs.array_simulator import SerialSimulators
from cadence.envs.step_values import StepValues
from cadence.envs.utils import SpecMismatchError, exclude_pruned

__all__ = ["BatchedEnvBase", "EnvCreator", "SerialEnv"]

EnvFactory = Callable[..., EnvBase]


class EnvCreator:
    """A picklable env factory that also shares state between the envs it builds.

    The env function is pickled with cloudpickle, so lambdas and closures travel to
    worker processes. The first env built (for its metadata) lends its buffers
    (``env.named_buffers()``: running statistics of transforms, say), moved to shared
    memory; every env built afterwards uses those same tensors, so in-place updates
    in one env, in this process or in a forked worker, are seen by all.

    Args:
        create_env_fn: builds the env.
        create_env_kwargs: keyword arguments for ``create_env_fn``.
        share_state: share the buffers as described above.

    Examples:
        >>> from cadence.envs import EnvCreator, GymEnv
        >>> import pickle
        >>> creator = EnvCreator(lambda: GymEnv("CartPole-v1"))
        >>> creator.meta_data.batch_size
        torch.Size([])
        >>> env = pickle.loads(pickle.dumps(creator))()
        >>> env.observation_spec["observation"].shape
        torch.Size([4])
    """

    def __init__(
        self,
        create_env_fn: EnvFactory,
        create_env_kwargs: dict[str, Any] | None = None,
        share_state: bool = True,
    ) -> None:
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = dict(create_env_kwargs or {})
        self.share_state = share_state
        self._meta_data: EnvMetaData | None = None
        self._shared_buffers: dict[str, torch.Tensor] | None = None

    def _build(self, **kwargs: Any) -> EnvBase:
        env = self.create_env_fn(**{**self.create_env_kwargs, **kwargs})
        if not isinstance(env, EnvBase):
            raise TypeError(f"EnvCreator: create_env_fn returned a {type(env).__name__}, not an EnvBase.")
        return env

    def _read_first(self) -> None:
        env = self._build()
        self._meta_data = EnvMetaData.metadata_from_env(env)
        if self.share_state:
            self._shared_buffers = {name: buf.detach().clone().share_memory_() for name, buf in env.named_buffers()}
        env.close()

    @property
    def meta_data(self) -> EnvMetaData:
        """The metadata of the env this creator builds (read once, from a first env)."""
        if self._meta_data is None:
            self._read_first()
        assert self._meta_data is not None
        return self._meta_data

    def __call__(self, **kwargs: Any) -> EnvBase:
        """Builds an env (``kwargs`` update ``create_env_kwargs``) on the shared state."""
        if self.share_state and self._shared_buffers is None:
            self._read_first()
        env = self._build(**kwargs)
        if self._shared_buffers:
            _use_shared_buffers(env, self._shared_buffers)
        return env

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["create_env_fn"] = cloudpickle.dumps(self.create_env_fn)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state["create_env_fn"] = cloudpickle.loads(state["create_env_fn"])
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"EnvCreator({self.create_env_fn!r}, create_env_kwargs={self.create_env_kwargs})"


def _use_shared_buffers(env: EnvBase, shared: dict[str, torch.Tensor]) -> None:
    """Points the env's buffers at the shared tensors (same names, shapes and dtypes)."""
    for name, tensor in shared.items():
        owner_name, _, buffer_name = name.rpartition(".")
        owner = env.get_submodule(owner_name) if owner_name else env
        current = owner._buffers.get(buffer_name)
        if current is None or current.shape != tensor.shape or current.dtype != tensor.dtype:
            raise ValueError(
                f"EnvCreator: the env built has buffer {name!r} of shape "
                f"{None if current is None else tuple(current.shape)}, but the first env had shape "
                f"{tuple(tensor.shape)}; the envs of one creator must be alike."
            )
        owner._buffers[buffer_name] = tensor


def _per_worker(value: Any, num_workers: int, what: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        if len(value) != num_workers:
            raise ValueError(f"{what}: expected one entry per worker ({num_workers}), got {len(value)}.")
        return list(value)
    return [value] * num_workers


class BatchedMethod:
    """A method of every sub-env: calling it calls them all and returns the list of results."""

    def __init__(self, env: BatchedEnvBase, name: str) -> None:
        self.env = env
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> list[Any]:
        return self.env._call_workers(self.name, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<method {self.name!r} of the {self.env.num_workers} sub-envs of {type(self.env).__name__}>"


class BatchedEnvBase(EnvBase):
    """What ``SerialEnv`` and ``ParallelEnv`` share: the factories, the metadata, the
    batch size and specs, lazy start, seeding and attribute pass-through.

    Args:
        num_workers: the number of sub-envs.
        create_env_fn: a function building a sub-env (an ``EnvCreator`` or any
            callable), or one per worker.
        create_env_kwargs: keyword arguments for it, or one dict per worker.
        device: the batch's device (the sub-envs' by default).

    Examples:
        >>> from cadence.envs import GymEnv, SerialEnv
        >>> with SerialEnv(2, GymEnv, create_env_kwargs={"env_name": "CartPole-v1"}) as env:
        ...     print(env.batch_size, env.is_started)
        torch.Size([2]) False
    """

    def __init__(
        self,
        num_workers: int,
        create_env_fn: EnvFactory | Sequence[EnvFactory],
        create_env_kwargs: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
        *,
        device: torch.device | str | None = None,
    ) -> None:
        if num_workers < 1:
            raise ValueError(f"{type(self).__name__}: num_workers must be >= 1, got {num_workers}.")
        fns = _per_worker(create_env_fn, num_workers, "create_env_fn")
        kwargs = _per_worker(create_env_kwargs or {}, num_workers, "create_env_kwargs")
        self.num_workers = num_workers
        self.create_env_fn = [fn if isinstance(fn, EnvCreator) else EnvCreator(fn, kw, share_state=False)
                              for fn, kw in zip(fns, kwargs)]
        for creator, kw in zip(self.create_env_fn, kwargs):
            if creator.create_env_kwargs != kw and kw:
                creator.create_env_kwargs = {**creator.create_env_kwargs, **kw}
        meta = self._first_metadata()
        super().__init__(device=device if device is not None else meta.device,
                         batch_size=torch.Size([num_workers, *meta.batch_size]))
        self.meta_data = meta
        self.is_started = False
        specs = meta.specs.expand(num_workers, *meta.specs.shape)
        self.full_action_spec = specs["input_spec", "full_action_spec"]
        self.full_state_spec = specs["input_spec", "full_state_spec"]
        self.full_observation_spec = specs["output_spec", "full_observation_spec"]
        self.full_reward_spec = specs["output_spec", "full_reward_spec"]
        self.full_done_spec = specs["output_spec", "full_done_spec"]

    def _first_metadata(self) -> EnvMetaData:
        """The sub-envs' metadata, read from the first factory (the others must agree)."""
        return self.create_env_fn[0].meta_data

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        """Builds the sub-envs (done on first use otherwise). A closed batch builds them
        anew at its next use, as the reference's batched envs do (their seeds are not
        carried over: seed the batch again)."""
        if self.is_closed:
            self.is_closed = False
            self.is_started = False
        if not self.is_started:
            self._start_workers()
            self.is_started = True

    def _start_workers(self) -> None:
        raise TypeError(f"{type(self).__name__} must define _start_workers()")

    def _call_workers(self, name: str, *args: Any, **kwargs: Any) -> list[Any]:
        raise TypeError(f"{type(self).__name__} must define _call_workers()")

    def _worker_attribute(self, name: str) -> list[Any] | BatchedMethod:
        """The attribute ``name`` of every sub-env, or a caller of the method ``name``."""
        raise TypeError(f"{type(self).__name__} must define _worker_attribute()")

    def __enter__(self) -> BatchedEnvBase:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_") or "is_started" not in self.__dict__:  # private, or mid-__init__
                raise
            self.start()
            return self._worker_attribute(name)

    # ------------------------------------------------------------------ seeding
    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seeds each sub-env in turn: the first with ``seed``, the next with the seed the
        first returns, and so on; returns the seed after the last.

        Examples:
            >>> from cadence.envs import GymEnv, SerialEnv
            >>> env = SerialEnv(2, lambda: GymEnv("CartPole-v1"))
            >>> env.set_seed(0) == SerialEnv(2, lambda: GymEnv("CartPole-v1")).set_seed(0)
            True
        """
        seed = validate_seed(seed, f"{type(self).__name__}.set_seed")  # before any worker is seeded
        if seed is not None:
            self.rng.manual_seed(seed)
        self.start()
        return self._seed_workers(seed, static_seed)

    def _seed_workers(self, seed: int | None, static_seed: bool) -> int | None:
        raise TypeError(f"{type(self).__name__} must define _seed_workers()")

    # ------------------------------------------------------------------ shared helpers
    def _selected(self, sub: TensorDictBase) -> bool:
        """Whether a worker's slice of a reset input asks it to reset (no mask: yes)."""
        present = [mask for mask in (sub.get(key, None) for key in self.reset_keys) if mask is not None]
        return not present or any(bool(mask.any()) for mask in present)

    def _plain_rollout(self, request: dict[str, Any]) -> bool:
        """Whether a rollout asks for nothing but steps from a fresh reset: no callback,
        no first input, no early stop when all are done, contiguous output, no checks."""
        return (
            request["callback"] is None
            and request["auto_reset"]
            and request["tensordict"] is None
            and not request["break_when_all_done"]
            and request["return_contiguous"]
            and not self.run_type_checks
        )


class SerialEnv(BatchedEnvBase):
    """``num_workers`` envs stepped one after the other in this process.

    Same API as any env: batch size ``[num_workers, *sub_env.batch_size]``, partial
    resets through a ``"_reset"`` of shape ``[num_workers, *sub_batch, 1]``. A batch of
    stock gymnasium envs rolls out on the gymnasium shortcut (their simulators are
    stepped into preallocated arrays); other envs use the generic loop.

    Args:
        num_workers: the number of sub-envs.
        create_env_fn: builds a sub-env; or one per worker.
        create_env_kwargs: its keyword arguments; or one dict per worker.
        device: the batch's device.

    Examples:
        >>> from cadence.envs import GymEnv, SerialEnv
        >>> env = SerialEnv(4, lambda: GymEnv("CartPole-v1"))
        >>> env.set_seed(0) is not None
        True
        >>> env.rollout(10, break_when_any_done=False).batch_size
        torch.Size([4, 10])
    """

    #: The sub-envs' kernels, stepped one after the other on their rows of the same arrays.
    array_kernel = SerialSimulators

    def _start_workers(self) -> None:
        self._envs: list[EnvBase] = [creator() for creator in self.create_env_fn]
        self._current: list[TensorDictBase | StepValues | None] = [None] * self.num_workers
        # after steps through the simulators: the last step's entries, batched, read only by a reset
        self._current_entries: dict[Any, torch.Tensor] | None = None

    def _call_workers(self, name: str, *args: Any, **kwargs: Any) -> list[Any]:
        self.start()
        return [getattr(env, name)(*args, **kwargs) for env in self._envs]

    def _worker_attribute(self, name: str) -> list[Any] | BatchedMethod:
        values = [getattr(env, name) for env in self._envs]
        return BatchedMethod(self, name) if all(callable(value) for value in values) else values

    def _seed_workers(self, seed: int | None, static_seed: bool) -> int | None:
        for env in self._envs:
            next_seed = env.set_seed(seed, static_seed=static_seed)
            seed = seed if static_seed else next_seed
        return seed

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        self.start()
        outputs = []
        for i, env in enumerate(self._envs):
            sub = None if tensordict is None else tensordict[i]
            if sub is not None and not self._selected(sub):
                # not reset: its current data stands (the outer mask keeps it anyway)
                if self._current_entries is not None:  # where the last step through the simulators left it
                    self._current[i] = self._row_of_entries(i)
                current = self._current[i]
                if current is None:
                    raise RuntimeError(f"SerialEnv: sub-env {i} was asked to keep its data before any reset.")
                if isinstance(current, StepValues):  # where a step on values left it
                    current = self._current[i] = current.to_tensordict(env._group_dims())
                outputs.append(current)
                continue
            try:
                out = env.reset(sub, **kwargs)
            except SpecMismatchError as err:  # which sub-env
                raise SpecMismatchError(f"{type(self).__name__} sub-env {i}: {err}") from err
            self._current[i] = out
            outputs.append(out)
        self._current_entries = None
        return torch.stack(outputs, 0)

    def _row_of_entries(self, index: int) -> TensorDictBase:
        """Sub-env ``index``'s data from the last step through the simulators (rewards left out)."""
        assert self._current_entries is not None
        rewards = set(self.reward_keys)
        row = {key: value[index] for key, value in self._current_entries.items() if key not in rewards}
        return TensorDict(row, batch_size=self._envs[index].batch_size, device=self._envs[index].device)

    def _stepped_on_arrays(self, entries: dict[Any, torch.Tensor]) -> None:
        # kept as they are now (the transforms go on to change the dict), split by sub-env
        # only if a partial reset needs it; through __dict__: nn.Module's __setattr__ costs
        # microseconds, every step
        self.__dict__["_current_entries"] = dict(entries)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.start()
        results = []
        reward_keys = self.reward_keys
        for i, env in enumerate(self._envs):
            sub = env.step(tensordict[i])
            result = sub.get("next")
            results.append(result)
            self._current[i] = exclude_pruned(result, reward_keys)  # no emptied per-agent levels
        self._current_entries = None
        return torch.stack(results, 0)

    def _values_step_applies(self) -> bool:
        # every sub-env steps on values: their entries (nested ones under tuple keys) stack key by key
        self.start()
        return self._cached("values_step_applies", lambda: all(
            env._values_step_applies() and not env.run_type_checks and not env.auto_reset for env in self._envs
        ))

    def _step_values(self, tensordict: TensorDictBase | StepValues) -> StepValues:
        # each sub-env on its row of the input's entries, then one stack per entry
        entries = list(tensordict.items())
        reward_keys = self.reward_keys
        results = []
        for i, env in enumerate(self._envs):
            row = StepValues({key: _row(value, i) for key, value in entries}, env.batch_size, env.device)
            result = env._step_as_values(row)
            results.append(result.entries)
            self._current[i] = result.exclude(*reward_keys)  # a TensorDict only if a reset needs it
        self._current_entries = None
        stacked = {key: torch.stack([result[key] for result in results], 0) for key in results[0]}
        return StepValues(stacked, self.batch_size, self.device)

    def close(self) -> None:
        """Closes every sub-env."""
        if self.__dict__.get("is_started") and not self.is_closed:
            for env in self._envs:
                env.close()
        super().close()


def _row(value: Any, index: int) -> Any:
    """Row ``index`` of an entry of a step's input on values (of each entry of the dict that a
    policy wrote under ``"next"``)."""
    return {key: entry[index] for key, entry in value.items()} if isinstance(value, dict) else value[index]
