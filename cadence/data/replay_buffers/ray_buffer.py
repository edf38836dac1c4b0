"""``RayReplayBuffer``: one replay buffer living in a Ray actor, shared by its users.

Collectors extend it, a learner samples it and sends priorities back, each through a
handle to the same actor: the ``RayReplayBuffer`` object itself travels to Ray tasks and
actors (it holds the actor handle and a few plain facts). Every call is forwarded to the
buffer in the actor and waits for its answer; the actor runs one call at a time, in the
order they arrive.

Data cross the actor boundary as CPU tensors and tensordicts (Ray copies them over); the
buffer's storage in the actor may put them on its own device. Checkpoints are the hosted
buffer's own ``dumps``/``loads``: the actor writes and reads them (paths are paths on the
actor's node), in the format of ``ReplayBuffer.dumps``, which holds no code.

Ray is imported when a ``RayReplayBuffer`` is built, not when this module is imported:
``pip install "cadence[ray]"`` brings it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from cadence.data.replay_buffers.buffers import ReplayBuffer, TensorDictReplayBuffer

__all__ = ["DEFAULT_REMOTE_CONFIG", "RayReplayBuffer"]

# What the buffer's actor asks Ray for unless ``remote_config`` says otherwise: one CPU,
# as the reference's default; no memory reservation, which would leave the actor waiting
# forever on a node with less free memory than the reservation.
DEFAULT_REMOTE_CONFIG: dict[str, Any] = {"num_cpus": 1, "num_gpus": 0}

_INSTALL_HINT = 'pip install "cadence[ray]"'
_CLOSE_TIMEOUT_S = 30.0  # how long close() waits to see the killed actor gone


def _import_ray() -> Any:
    """The ``ray`` module, or an ``ImportError`` saying how to install it."""
    try:
        import ray
    except ImportError as error:
        raise ImportError(f"RayReplayBuffer needs ray, which is not installed: {_INSTALL_HINT}") from error
    return ray


def _to_cpu(value: Any) -> Any:
    """Tensors and tensordicts as CPU copies (they travel to the actor); anything else as is."""
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, TensorDictBase):
        return value.to("cpu")  # shallow when already there; a tensordict without a device may hold leaves anywhere
    return value


class _ReplayBufferHost:
    """What the Ray actor runs: one buffer, built in the actor by ``build``, and the calls
    the driver forwards to it.

    (The buffer is built by a method rather than by the constructor because a method's
    exception reaches the caller as itself, while a failed actor constructor only says
    that the actor died.)
    """

    def __init__(self) -> None:
        self._buffer: ReplayBuffer | None = None

    def build(self, replay_buffer_cls: type[ReplayBuffer], kwargs: dict[str, Any]) -> dict[str, Any]:
        self._buffer = replay_buffer_cls(**kwargs)
        return {"priority_key": getattr(self._buffer, "priority_key", None)}

    @property
    def buffer(self) -> ReplayBuffer:
        if self._buffer is None:
            raise RuntimeError("the replay buffer actor was not built: call build() first.")
        return self._buffer

    def ping(self) -> bool:
        return True

    def length(self) -> int:
        return len(self.buffer)

    def write_count(self) -> int:
        return self.buffer.write_count

    def batch_size(self) -> int | None:
        return self.buffer.batch_size

    def dim_extend(self) -> int:
        return self.buffer.dim_extend

    def set_dim_extend(self, value: int) -> None:
        self.buffer.dim_extend = value

    def extend(self, data: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The indices written, and the ``"index"`` entry a tensordict buffer wrote into
        (the actor's copy of) the data, for the caller's data."""
        index = self.buffer.extend(data)
        return index, self._written_index(data)

    def add(self, data: Any) -> tuple[int | torch.Tensor, torch.Tensor | None]:
        index = self.buffer.add(data)
        return index, self._written_index(data)

    def _written_index(self, data: Any) -> torch.Tensor | None:
        if isinstance(self.buffer, TensorDictReplayBuffer) and isinstance(data, TensorDictBase):
            return data.get("index", None)
        return None

    def sample(self, batch_size: int | None, return_info: bool) -> Any:
        return self.buffer.sample(batch_size, return_info=return_info)

    def sample_and_ran_out(self) -> tuple[Any, bool]:
        """One step of iteration: a sample, and whether the sampler has no more."""
        data = self.buffer.sample()
        return data, self.buffer.sampler.ran_out

    def update_priority(self, index: int | torch.Tensor, priority: float | torch.Tensor) -> None:
        self.buffer.update_priority(index, priority)

    def update_tensordict_priority(self, data: TensorDictBase) -> None:
        self.buffer.update_tensordict_priority(data)  # type: ignore[attr-defined]

    def getitem(self, index: int | slice | torch.Tensor) -> Any:
        return self.buffer[index]

    def empty(self) -> None:
        self.buffer.empty()

    def set_seed(self, seed: int) -> None:
        self.buffer.set_seed(seed)

    def append_transform(self, transform: Callable[[Any], Any]) -> None:
        self.buffer.append_transform(transform)

    def insert_transform(self, index: int, transform: Callable[[Any], Any]) -> None:
        self.buffer.insert_transform(index, transform)

    def state_dict(self) -> dict[str, Any]:
        return self.buffer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.buffer.load_state_dict(state_dict)

    def dumps(self, path: str) -> None:
        self.buffer.dumps(path)

    def loads(self, path: str, verify: bool) -> None:
        self.buffer.loads(path, verify=verify)


class RayReplayBuffer:
    """A replay buffer living in a Ray actor: extended from collectors, sampled by a
    learner, its priorities updated from anywhere, through handles to one actor.

    The hosted buffer is built in the actor as ``replay_buffer_cls(**kwargs)``, so the
    arguments are those of that class. Its components travel to the actor as copies:
    pass the storage, sampler and writer as instances (copied into the actor before any
    use) or, better, as constructors (``LazyTensorStorage`` with ``functools.partial``,
    say), and keep no reference to them expecting to see the buffer's state.

    Every method waits for the actor's answer. An exception raised in the actor (an empty
    buffer sampled, a checkpoint that does not fit) is raised again here as itself, its
    remote traceback attached as its cause.

    Args:
        replay_buffer_cls: the buffer class hosted (``ReplayBuffer``;
            ``TensorDictReplayBuffer`` or ``TensorDictPrioritizedReplayBuffer`` for
            samples that carry their ``"index"`` and priorities sent back as tensordicts).
        ray_init_config: the keyword arguments of ``ray.init()``, called if Ray is not
            initialised yet (ignored if it is; Ray is never shut down by this class).
        remote_config: the options of the actor (``ray.remote(**remote_config)``):
            ``num_cpus``, ``num_gpus``, ``memory``, ``resources``... (``DEFAULT_REMOTE_CONFIG``,
            one CPU, if ``None``). An actor asking for more than the cluster has waits
            for it to be there (Ray warns about it).
        **kwargs: the hosted buffer's arguments (``storage``, ``sampler``, ``writer``,
            ``batch_size``, ``transform``, ``alpha``/``beta`` for the prioritized ones...).

    Raises:
        ImportError: Ray is not installed.
        TypeError: ``replay_buffer_cls`` is not a ``ReplayBuffer`` class.
        Exception: what the hosted buffer's constructor raised (the actor is killed).

    Examples:
        >>> import pytest; ray = pytest.importorskip("ray")  # skips without ray
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data.replay_buffers import LazyTensorStorage, TensorDictReplayBuffer
        >>> started_here = not ray.is_initialized()
        >>> if started_here:
        ...     _ = ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
        >>> buffer = RayReplayBuffer(
        ...     replay_buffer_cls=TensorDictReplayBuffer,
        ...     storage=LazyTensorStorage(100),
        ...     batch_size=4,
        ...     remote_config={"num_cpus": 0.5},
        ... )
        >>> # a collector's task would call this with the buffer it was handed: the same actor
        >>> buffer.extend(TensorDict({"obs": torch.arange(5.0)}, [5])).tolist()
        [0, 1, 2, 3, 4]
        >>> sample = buffer.sample()
        >>> len(buffer), sample["obs"].shape, bool((sample["obs"] == sample["index"]).all())
        (5, torch.Size([4]), True)
        >>> buffer.close()
        >>> if started_here:
        ...     ray.shutdown()
    """

    def __init__(
        self,
        *,
        replay_buffer_cls: type[ReplayBuffer] = ReplayBuffer,
        ray_init_config: dict[str, Any] | None = None,
        remote_config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not (isinstance(replay_buffer_cls, type) and issubclass(replay_buffer_cls, ReplayBuffer)):
            raise TypeError(
                f"RayReplayBuffer: replay_buffer_cls must be a ReplayBuffer class (ReplayBuffer, "
                f"TensorDictReplayBuffer, ...), got {replay_buffer_cls!r}."
            )
        ray = _import_ray()
        if not ray.is_initialized():
            ray.init(**(ray_init_config or {}))
        self._replay_buffer_cls = replay_buffer_cls
        config = dict(DEFAULT_REMOTE_CONFIG if remote_config is None else remote_config)
        self._actor: Any = ray.remote(**config)(_ReplayBufferHost).remote()
        try:
            description = self._call("build", replay_buffer_cls, kwargs)
        except BaseException:
            self.close()
            raise
        self._priority_key: NestedKey | None = description["priority_key"]

    # ------------------------------------------------------------------ the actor
    @property
    def actor(self) -> Any:
        """The Ray actor handle of the hosted buffer.

        Raises:
            RuntimeError: the buffer was closed.
        """
        if self._actor is None:
            raise RuntimeError("this RayReplayBuffer was closed: its actor is gone; build a new one.")
        return self._actor

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called (the actor is gone)."""
        return self._actor is None

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Runs ``method`` in the actor and returns its result; an exception raised there
        is raised here as itself."""
        ray = _import_ray()
        reference = getattr(self.actor, method).remote(*args, **kwargs)
        try:
            return ray.get(reference)
        except ray.exceptions.RayTaskError as error:
            cause = getattr(error, "cause", None)
            if isinstance(cause, Exception):
                raise cause from error  # the remote traceback stays readable as the cause
            raise

    def close(self) -> None:
        """Kills the actor (and the buffer's data with it); a second call does nothing.

        Returns once the actor is seen dead, so that its resources are free again.

        Raises:
            RuntimeError: the actor still answered ``30`` s after it was killed.
        """
        actor = self._actor
        if actor is None:
            return
        self._actor = None
        ray = _import_ray()
        if not ray.is_initialized():  # Ray was shut down: its actors went with it
            return
        ray.kill(actor)
        deadline = time.monotonic() + _CLOSE_TIMEOUT_S
        while time.monotonic() < deadline:  # ray.kill returns before the actor is gone
            try:
                ray.get(actor.ping.remote(), timeout=max(deadline - time.monotonic(), 0.01))
            except ray.exceptions.RayActorError:
                return
            except ray.exceptions.GetTimeoutError:
                break
            time.sleep(0.01)
        raise RuntimeError(
            f"RayReplayBuffer.close(): the actor {actor} still answered {_CLOSE_TIMEOUT_S} s after ray.kill."
        )

    def shutdown(self) -> None:
        """The same as ``close()``."""
        self.close()

    def __enter__(self) -> RayReplayBuffer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ facts
    @property
    def replay_buffer_cls(self) -> type[ReplayBuffer]:
        """The class of the hosted buffer."""
        return self._replay_buffer_cls

    @property
    def priority_key(self) -> NestedKey | None:
        """Where ``update_tensordict_priority`` reads priorities (``None`` for a buffer of
        another kind than ``TensorDictReplayBuffer``)."""
        return self._priority_key

    @property
    def batch_size(self) -> int | None:
        """The default sample size of the hosted buffer."""
        return self._call("batch_size")

    @property
    def write_count(self) -> int:
        """How many items were written (overwritten ones included)."""
        return self._call("write_count")

    @property
    def dim_extend(self) -> int:
        """The dim of ``extend``'s data that holds the items."""
        return self._call("dim_extend")

    @dim_extend.setter
    def dim_extend(self, value: int) -> None:
        self._call("set_dim_extend", value)

    def __len__(self) -> int:
        return self._call("length")

    def __repr__(self) -> str:  # local facts only: a repr that waits on (or fails with) the actor helps no one
        state = "closed" if self._actor is None else f"actor={self._actor._actor_id.hex()}"
        return f"RayReplayBuffer(replay_buffer_cls={self._replay_buffer_cls.__name__}, {state})"

    # ------------------------------------------------------------------ writes
    def extend(self, data: Any) -> torch.Tensor:
        """Writes the items of ``data`` (along ``dim_extend``); returns their indices.

        A tensordict buffer writes ``"index"`` into ``data``, as the local buffer does.
        """
        index, written = self._call("extend", _to_cpu(data))
        if written is not None:
            data.set("index", written)
        return index

    def add(self, data: Any) -> int | torch.Tensor:
        """Writes one item; returns its index."""
        index, written = self._call("add", _to_cpu(data))
        if written is not None:
            data.set("index", written)
        return index

    def update_priority(self, index: int | torch.Tensor, priority: float | torch.Tensor) -> None:
        """Sets the priorities of the items at ``index`` (prioritized samplers)."""
        if isinstance(priority, torch.Tensor):
            priority = priority.detach()
        self._call("update_priority", _to_cpu(index), _to_cpu(priority))

    def update_tensordict_priority(self, data: TensorDictBase) -> None:
        """Sends ``data[priority_key]`` back as the priorities of the items ``data["index"]``
        names (buffers of the ``TensorDictReplayBuffer`` kind only).

        Only those two entries travel to the actor.

        Raises:
            TypeError: the hosted buffer is no ``TensorDictReplayBuffer``.
            KeyError: ``data`` lacks ``"index"`` or the priority entry.
        """
        if not issubclass(self._replay_buffer_cls, TensorDictReplayBuffer):
            raise TypeError(
                f"update_tensordict_priority needs a TensorDictReplayBuffer kind of buffer; this RayReplayBuffer hosts "
                f"a {self._replay_buffer_cls.__name__}: use update_priority(index, priority)."
            )
        keys = set(data.keys(True, True))
        if "index" in keys and self._priority_key in keys:
            data = data.select("index", self._priority_key)
        # else the whole data goes, so that the buffer's KeyError lists what it holds
        self._call("update_tensordict_priority", _to_cpu(data.detach()))

    def empty(self) -> None:
        """Removes every item (and the sampler's and writer's state)."""
        self._call("empty")

    # ------------------------------------------------------------------ samples
    def sample(self, batch_size: int | None = None, return_info: bool = False) -> Any:
        """A batch of items, transformed in the actor.

        Args:
            batch_size: how many items (the buffer's ``batch_size`` if ``None``).
            return_info: also return the sampler's information (``"index"``, weights).

        Raises:
            ValueError: the buffer is empty, or no batch size is known.
        """
        return self._call("sample", batch_size, return_info)

    def __iter__(self) -> Iterator[Any]:
        """Samples of ``batch_size`` until the sampler runs out (forever for samplers with replacement)."""
        while True:
            data, ran_out = self._call("sample_and_ran_out")
            yield data
            if ran_out:
                return

    def __getitem__(self, index: int | slice | torch.Tensor) -> Any:
        return self._call("getitem", _to_cpu(index))

    def set_seed(self, seed: int) -> None:
        """Seeds the hosted buffer's sampler and drawing transforms."""
        self._call("set_seed", seed)

    def append_transform(self, transform: Callable[[Any], Any]) -> RayReplayBuffer:
        """Applies (a copy of) ``transform`` to samples in the actor, after the transforms there."""
        self._call("append_transform", transform)
        return self

    def insert_transform(self, index: int, transform: Callable[[Any], Any]) -> RayReplayBuffer:
        """Applies (a copy of) ``transform`` to samples in the actor, at position ``index``."""
        self._call("insert_transform", index, transform)
        return self

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The hosted buffer's storage, sampler, writer and transform state."""
        return self._call("state_dict")

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores what ``state_dict`` returned."""
        self._call("load_state_dict", state_dict)

    def dumps(self, path: str | Path) -> None:
        """Has the hosted buffer save itself into the directory ``path`` (on the actor's
        node) with ``ReplayBuffer.dumps``: a crash-safe checkpoint that holds no code."""
        self._call("dumps", str(path))

    def loads(self, path: str | Path, *, verify: bool = True) -> None:
        """Has the hosted buffer restore the checkpoint in ``path`` (on the actor's node)
        with ``ReplayBuffer.loads``; if it raises, the buffer is as it was.

        Raises:
            FileNotFoundError: ``path`` holds no complete checkpoint.
            CheckpointError: a file is damaged or the checkpoint does not fit the buffer.
        """
        self._call("loads", str(path), verify)
