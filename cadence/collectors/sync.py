"""The single-process collector: ``SyncDataCollector`` (alias ``Collector``), and
``DataCollectorBase``, what every collector shares.

A collector runs a policy in an env and yields batches of ``frames_per_batch`` frames,
shaped ``[*env.batch_size, T]`` with ``T = ceil(frames_per_batch / env.batch_size.numel())``
and the last dim named ``"time"``; each batch holds ``("collector", "traj_ids")``, an id
per trajectory that never repeats. Envs are reset when done, and the next batch goes on
from where the last one stopped.

Envs that step on plain tensors (:func:`~cadence.envs.values_loop.values_loop_applies`:
gymnasium, dm_control and other backends with a kernel, serial and parallel batches of
them, torch-written envs, under transforms that step on values) run the one step loop
(:class:`~cadence.envs.values_loop.ValuesLoop`, through ``ValuesRunner``): a policy made of
``TensorDictModule``s of plain modules and exploration modules is called on tensors (no
tensordict per step), any other policy on one small tensordict of the step's entries;
random batches draw their actions at the start and step in stretches. Other envs, and
policies wrapped by ``compile_policy``/``cudagraph_policy``, run the loop on tensordicts
(``env.step_and_maybe_reset``). All give the batches
``env.rollout(..., break_when_any_done=False)`` gives.

Examples:
    >>> import torch
    >>> from tensordict.nn import TensorDictModule
    >>> from cadence.collectors import SyncDataCollector
    >>> from cadence.envs import GymEnv, SerialEnv
    >>> env = SerialEnv(2, lambda: GymEnv("Pendulum-v1"))
    >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    >>> collector = SyncDataCollector(env, policy, frames_per_batch=20, total_frames=60)
    >>> [batch.batch_size for batch in collector]
    [torch.Size([2, 10]), torch.Size([2, 10]), torch.Size([2, 10])]
    >>> collector.shutdown()
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.modules.tensor_view import policy_step
from cadence.collectors._compiled_policy import with_options
from cadence.collectors._runners import EnvRunner, TrajectoryIds
from cadence.collectors._values_runner import ValuesRunner
from cadence.envs.values_loop import values_loop_applies
from cadence.collectors.utils import split_trajectories
from cadence.envs.common import EnvBase
from cadence.envs.seeding import validate_seed
from cadence.envs.utils import ExplorationType, set_exploration_type

__all__ = ["Collector", "DataCollectorBase", "SyncDataCollector"]

DeviceLike = torch.device | str | int | None
Policy = Callable[[TensorDictBase], TensorDictBase | None]


def _check_frames(frames_per_batch: Any, total_frames: Any, init_random_frames: Any) -> tuple[int, int, int]:
    if isinstance(frames_per_batch, bool) or not isinstance(frames_per_batch, int) or frames_per_batch < 1:
        raise ValueError(f"frames_per_batch must be a positive int, got {frames_per_batch!r}.")
    total = -1 if total_frames is None else total_frames
    if isinstance(total, bool) or not isinstance(total, (int, float)) or (total < 1 and total != -1):
        raise ValueError(f"total_frames must be a positive number of frames or -1 (never stop), got {total_frames!r}.")
    init = 0 if init_random_frames is None else init_random_frames
    if isinstance(init, bool) or not isinstance(init, int) or init < 0:
        raise ValueError(f"init_random_frames must be an int >= 0 or None, got {init_random_frames!r}.")
    return frames_per_batch, int(total) if total != math.inf else -1, init


class DataCollectorBase:
    """What every collector shares: iteration up to ``total_frames``, ``next()``,
    ``len()``, context management and shutdown on garbage collection.

    Subclasses implement ``iterator()`` (yields the batches, counting frames in
    ``self._frames``), ``shutdown()``, ``set_seed()``, ``update_policy_weights_()``,
    ``state_dict()`` and ``load_state_dict()``.

    Examples:
        >>> from cadence.collectors import DataCollectorBase, SyncDataCollector
        >>> from cadence.envs import GymEnv
        >>> with SyncDataCollector(GymEnv("Pendulum-v1"), frames_per_batch=4, total_frames=8) as collector:
        ...     print(isinstance(collector, DataCollectorBase), len(collector), collector.next().numel())
        True 2 4
    """

    frames_per_batch: int
    total_frames: int
    _frames: int = 0
    _iterator: Iterator[TensorDictBase] | None = None

    def __iter__(self) -> Iterator[TensorDictBase]:
        return self.iterator()

    def iterator(self) -> Iterator[TensorDictBase]:
        """Yields the batches until ``total_frames`` frames are collected (forever if -1)."""
        raise TypeError(f"{type(self).__name__} must define iterator()")

    def next(self) -> TensorDictBase:
        """The next batch (from an iterator the collector keeps).

        Raises:
            StopIteration: once ``total_frames`` frames were collected.
        """
        if self._iterator is None:
            self._iterator = self.iterator()
        return next(self._iterator)

    def _done_collecting(self) -> bool:
        return 0 < self.total_frames <= self._frames

    def __len__(self) -> int:
        if self.total_frames < 0:
            raise TypeError(f"{type(self).__name__} with total_frames=-1 never stops, so it has no length.")
        return math.ceil(self.total_frames / self.frames_per_batch)

    def shutdown(self) -> None:
        """Releases the collector's envs and processes."""
        raise TypeError(f"{type(self).__name__} must define shutdown()")

    def __enter__(self) -> DataCollectorBase:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


class SyncDataCollector(DataCollectorBase):
    """Collects batches in this process, one policy step and one env step at a time.

    Args:
        create_env_fn: an env, an ``EnvCreator``, or a callable building the env.
        policy: a callable writing the action into a tensordict (a ``TensorDictModule``,
            say); ``None`` takes random actions from the env's action spec.
        frames_per_batch: the frames in each batch (rounded up to a multiple of the
            env's batch numel: a batch is ``[*env.batch_size, T]``).
        total_frames: stop after this many frames (-1 or ``None``: never).
        device: the default for ``storing_device``, ``env_device`` and ``policy_device``.
        storing_device: where the batches are returned.
        env_device: where the env runs (the env is moved there).
        policy_device: where the policy runs (a copy of the policy is moved there if its
            parameters are elsewhere; ``update_policy_weights_()`` refreshes the copy).
        create_env_kwargs: keyword arguments for ``create_env_fn``.
        max_frames_per_traj: truncate trajectories after this many steps (appends a
            ``StepCounter`` to the env).
        init_random_frames: take random actions until this many frames are collected.
        reset_at_each_iter: reset the env before each batch.
        postproc: a function applied to each batch before it is yielded.
        split_trajs: yield ``split_trajectories(batch)``: ``[n_traj, max_len]`` padded,
            with ``("collector", "mask")``.
        exploration_type: the exploration type in force while the policy runs.
        return_same_td: yield the same tensordict every time, updated in place (copy it
            to keep it past the next batch).
        fast_path: allow the step loop on plain tensors (see the module's docstring); ``False``:
            every step on tensordicts, through ``env.step_and_maybe_reset``.
        traj_id_stride: for multi-process collectors: the number of workers.
        traj_id_offset: for multi-process collectors: this worker's index.
        compile_policy: ``True`` or ``torch.compile``'s keyword arguments (with
            ``"warmup"``: eager calls first): the policy is compiled; where
            ``torch.compile`` cannot run, a warning says so and it runs eagerly.
        cudagraph_policy: ``True`` or ``CudaGraphModule``'s keyword arguments: the
            policy is captured in a CUDA graph; without CUDA, a warning says so and the
            policy runs as it is.

    Raises:
        TypeError: if ``create_env_fn`` does not give an env, or ``policy`` is not callable.
        ValueError: for frame counts that are not positive ints.

    Examples:
        >>> from cadence.collectors import SyncDataCollector
        >>> from cadence.envs import GymEnv
        >>> collector = SyncDataCollector(lambda: GymEnv("CartPole-v1"), frames_per_batch=50, total_frames=100)
        >>> for batch in collector:
        ...     print(batch.batch_size, batch.names, batch["collector", "traj_ids"].dtype)
        torch.Size([50]) ['time'] torch.int64
        torch.Size([50]) ['time'] torch.int64
        >>> collector.shutdown()
    """

    def __init__(
        self,
        create_env_fn: EnvBase | Callable[..., EnvBase],
        policy: Policy | None = None,
        *,
        frames_per_batch: int,
        total_frames: int | None = -1,
        device: DeviceLike = None,
        storing_device: DeviceLike = None,
        env_device: DeviceLike = None,
        policy_device: DeviceLike = None,
        create_env_kwargs: dict[str, Any] | None = None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = 0,
        reset_at_each_iter: bool = False,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        split_trajs: bool | None = False,
        exploration_type: ExplorationType = ExplorationType.RANDOM,
        return_same_td: bool = False,
        fast_path: bool = True,
        traj_id_stride: int = 1,
        traj_id_offset: int = 0,
        compile_policy: bool | dict[str, Any] = False,
        cudagraph_policy: bool | dict[str, Any] = False,
    ) -> None:
        frames_per_batch, total_frames, init_random_frames = _check_frames(
            frames_per_batch, total_frames, init_random_frames
        )
        if policy is not None and not callable(policy):
            raise TypeError(f"policy must be a callable on tensordicts or None, got {type(policy).__name__}.")
        self._closed = False
        self.env = self._make_env(create_env_fn, create_env_kwargs)
        self.storing_device = _device(storing_device if storing_device is not None else device)
        self.env_device = _device(env_device if env_device is not None else device)
        self.policy_device = _device(policy_device if policy_device is not None else device)
        if self.env_device is not None and self.env.device != self.env_device:
            self.env = self.env.to(self.env_device)
        if max_frames_per_traj is not None and max_frames_per_traj > 0:
            from cadence.envs.transforms import StepCounter

            self.env = self.env.append_transform(StepCounter(max_frames_per_traj))
        self.max_frames_per_traj = max_frames_per_traj
        numel = max(self.env.batch_size.numel(), 1)
        self.steps_per_batch = math.ceil(frames_per_batch / numel)
        if frames_per_batch % numel:
            warnings.warn(
                f"frames_per_batch={frames_per_batch} is not a multiple of the env's {numel} sub-envs; each batch "
                f"holds {self.steps_per_batch * numel} frames ({self.steps_per_batch} steps).",
                stacklevel=2,
            )
        self.requested_frames_per_batch = frames_per_batch
        self.frames_per_batch = self.steps_per_batch * numel
        self.total_frames = total_frames
        self.init_random_frames = init_random_frames
        self.reset_at_each_iter = reset_at_each_iter
        self.postproc = postproc
        self.split_trajs = bool(split_trajs)
        self.exploration_type = exploration_type
        self.return_same_td = return_same_td
        self._policy_source = policy
        self.policy = self._policy_on_device(policy)
        # what acts: the policy, or its torch.compile / CUDA-graph wrapper (self.policy stays the module)
        self._acting = None if self.policy is None else with_options(self.policy, compile_policy, cudagraph_policy)
        self._frames = 0
        self._iter = 0
        self._out: TensorDictBase | None = None
        self._template: dict[Any, tuple[torch.Size, torch.dtype]] = {}
        ids = TrajectoryIds(self.env.batch_size, traj_id_stride, traj_id_offset)
        wrapped = self._acting is not self.policy  # a compiled policy runs as the user compiled it
        # the policy as a step on the entries' dict: compiled to tensors, or called on one
        # TensorDict of the step's entries
        self._policy_step = None if self.policy is None or wrapped else policy_step(self.policy, self.env.batch_size)
        cpu = all(d in (None, torch.device("cpu")) for d in (self.storing_device, self.policy_device))
        self._runner: EnvRunner | ValuesRunner
        if fast_path and cpu and values_loop_applies(self.env) and (self.policy is None or self._policy_step is not None):
            self._runner = ValuesRunner(self.env, ids)
        else:
            self._runner = EnvRunner(self.env, ids)

    # ------------------------------------------------------------------ construction
    @staticmethod
    def _make_env(create_env_fn: Any, create_env_kwargs: dict[str, Any] | None) -> EnvBase:
        if isinstance(create_env_fn, EnvBase):
            if create_env_kwargs:
                raise TypeError("create_env_kwargs needs create_env_fn to be a callable, got an env instance.")
            return create_env_fn
        if not callable(create_env_fn):
            raise TypeError(
                f"create_env_fn must be an env, an EnvCreator or a callable returning an env, got "
                f"{type(create_env_fn).__name__}."
            )
        env = create_env_fn(**(create_env_kwargs or {}))
        if not isinstance(env, EnvBase):
            raise TypeError(f"create_env_fn must return an EnvBase, got {type(env).__name__}.")
        return env

    def _policy_on_device(self, policy: Policy | None) -> Policy | None:
        """The policy itself, or a copy on ``policy_device`` when its parameters are elsewhere."""
        if policy is None or self.policy_device is None or not isinstance(policy, torch.nn.Module):
            return policy
        devices = {p.device for p in list(policy.parameters()) + list(policy.buffers())}
        if devices <= {self.policy_device}:
            return policy
        return copy.deepcopy(policy).to(self.policy_device)

    @property
    def uses_fast_path(self) -> bool:
        """Whether the batches run the step loop on plain tensors (see the module's docstring).

        Examples:
            >>> from cadence.collectors import SyncDataCollector
            >>> from cadence.envs import GymEnv, PendulumEnv
            >>> SyncDataCollector(GymEnv("Pendulum-v1"), frames_per_batch=4).uses_fast_path
            True
            >>> SyncDataCollector(PendulumEnv(), frames_per_batch=4).uses_fast_path  # written in torch
            True
            >>> SyncDataCollector(GymEnv("Pendulum-v1"), frames_per_batch=4, fast_path=False).uses_fast_path
            False
        """
        return isinstance(self._runner, ValuesRunner)

    # ------------------------------------------------------------------ collection
    def _act(self, tensordict: TensorDictBase) -> TensorDictBase | None:
        policy = self._acting
        assert policy is not None
        if self.policy_device is None or tensordict.device == self.policy_device:
            return policy(tensordict)
        out = policy(tensordict.to(self.policy_device))
        return (tensordict if out is None else out).to(tensordict.device)

    def _probe_policy_keys(self) -> None:
        """Learns what the policy writes (by calling it once on a zeroed step), so that
        the batches of random actions hold the same entries (zeros) as later ones."""
        if self.policy is None:
            return
        probe = self.env.fake_tensordict().exclude("next")
        try:
            out = self._act(probe)
        except Exception:  # the layout is learnt from the first policy batch instead
            return
        out = probe if out is None else out
        nb = self.env.batch_dims
        for key, value in out.items(include_nested=True, leaves_only=True):
            if (key if isinstance(key, str) else key[0]) != "next":
                self._template.setdefault(key, (value.shape[nb:], value.dtype))

    def _complete_keys(self, batch: TensorDictBase) -> TensorDictBase:
        """Adds the entries seen in earlier batches (or in the policy's output) that this
        batch lacks, as zeros; records this batch's entries."""
        lead = batch.batch_size
        for key, (trailing, dtype) in self._template.items():
            if batch.get(key, None) is None:
                batch.set(key, torch.zeros((*lead, *trailing), dtype=dtype, device=batch.device))
        nb = len(lead)
        for key, value in batch.items(include_nested=True, leaves_only=True):
            if key not in self._template:
                self._template[key] = (value.shape[nb:], value.dtype)
        return batch

    def _collect(self, random: bool | None = None) -> TensorDictBase:
        """One batch; random actions if ``random`` (by default: no policy, or fewer
        frames than ``init_random_frames`` so far)."""
        runner = self._runner
        if self.reset_at_each_iter:
            runner.reset()
        if random is None:
            random = self._frames < self.init_random_frames
        random = random or self.policy is None
        with set_exploration_type(self.exploration_type), torch.no_grad():
            if random and self._iter == 0 and self.policy is not None:
                self._probe_policy_keys()
            if isinstance(runner, ValuesRunner):
                batch = runner.collect(self.steps_per_batch, None if random else self._policy_step)
            else:
                act = self.env.rand_action if random else self._act
                batch = runner.collect(self.steps_per_batch, act)
        batch = self._complete_keys(batch)
        if self.storing_device is not None and batch.device != self.storing_device:
            batch = batch.to(self.storing_device)
        return batch

    def iterator(self) -> Iterator[TensorDictBase]:
        """Yields the batches until ``total_frames`` frames are collected.

        Examples:
            >>> from cadence.collectors import SyncDataCollector
            >>> from cadence.envs import GymEnv
            >>> collector = SyncDataCollector(GymEnv("CartPole-v1"), frames_per_batch=8, total_frames=16)
            >>> sum(batch.numel() for batch in collector.iterator())
            16
        """
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} was shut down; build a new one.")
        while not self._done_collecting():
            batch = self._collect()
            self._frames += batch.numel()
            self._iter += 1
            if self.return_same_td:
                if self._out is None or set(self._out.keys(True, True)) != set(batch.keys(True, True)):
                    self._out = batch
                else:
                    self._out.update_(batch)
                    batch = self._out
            if self.split_trajs:
                batch = split_trajectories(batch, prefix="collector")
            if self.postproc is not None:
                batch = self.postproc(batch)
            yield batch

    # ------------------------------------------------------------------ control
    def reset(self) -> None:
        """Resets the env now: the next batch starts new trajectories.

        Examples:
            >>> from cadence.collectors import SyncDataCollector
            >>> from cadence.envs import GymEnv
            >>> collector = SyncDataCollector(GymEnv("Pendulum-v1"), frames_per_batch=4)
            >>> collector.reset()
            >>> collector.next()["collector", "traj_ids"].tolist()
            [0, 0, 0, 0]
        """
        self._runner.reset()

    def set_seed(self, seed: int, static_seed: bool = False) -> int | None:
        """Seeds the env; the next batch starts from a fresh reset. Returns the next seed.

        Raises:
            TypeError, ValueError: a seed that is not None or an int with
                ``0 <= seed < 2**63``; the collector then goes on as before.

        Examples:
            >>> from cadence.collectors import SyncDataCollector
            >>> from cadence.envs import GymEnv
            >>> make = lambda: SyncDataCollector(GymEnv("Pendulum-v1"), frames_per_batch=5)
            >>> a, b = make(), make()
            >>> a.set_seed(0) == b.set_seed(0)
            True
            >>> (a.next()["next", "observation"] == b.next()["next", "observation"]).all().item()
            True
        """
        seed = validate_seed(seed, f"{type(self).__name__}.set_seed")  # before the env or the runner changes
        out = self.env.set_seed(seed, static_seed=static_seed)
        self._runner.load_state(None)
        return out

    def update_policy_weights_(self, policy_or_weights: Any = None) -> None:
        """Brings the collecting policy up to date.

        With no argument, a policy copy on ``policy_device`` takes the weights of the
        policy given at construction (the collector's policy *is* that policy
        otherwise, so there is nothing to do). A module or a ``TensorDict``/state dict
        of weights is loaded into the collecting policy.

        Examples:
            >>> import torch
            >>> from tensordict.nn import TensorDictModule
            >>> from cadence.collectors import SyncDataCollector
            >>> from cadence.envs import GymEnv
            >>> policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
            >>> collector = SyncDataCollector(GymEnv("Pendulum-v1"), policy, frames_per_batch=5)
            >>> trained = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
            >>> collector.update_policy_weights_(trained)
            >>> torch.equal(policy.module.weight, trained.module.weight)
            True
        """
        target = self.policy
        if not isinstance(target, torch.nn.Module):
            return
        source = self._policy_source if policy_or_weights is None else policy_or_weights
        if source is target:
            return
        _load_weights(target, source)

    def state_dict(self) -> dict[str, Any]:
        """What resuming needs: frame and batch counts, trajectory ids, where the env
        stands, and the policy's and env's states.

        Examples:
            >>> from cadence.collectors import SyncDataCollector
            >>> from cadence.envs import GymEnv
            >>> collector = SyncDataCollector(GymEnv("Pendulum-v1"), frames_per_batch=5)
            >>> _ = collector.next()
            >>> collector.state_dict()["frames"]
            5
        """
        policy = self.policy
        return {
            "frames": self._frames,
            "iter": self._iter,
            "traj_ids": self._runner.ids.state_dict(),
            "shuttle": self._runner.state(),
            "policy_state_dict": policy.state_dict() if isinstance(policy, torch.nn.Module) else None,
            "env_state_dict": self.env.state_dict(),
        }

    def load_state_dict(self, state_dict: dict[str, Any], *, continue_episodes: bool = False) -> None:
        """Restores what :meth:`state_dict` returned: the frame and batch counts, the
        trajectory-id counter, the policy's weights and the env's own state.

        Args:
            state_dict: a collector's :meth:`state_dict`.
            continue_episodes: go on with the episodes in progress (the same trajectory
                ids and step counts) from where the env stood when the state was taken;
                the caller vouches that the env stands there still (the same env, or
                one whose simulators were restored, as ``cadence train`` does). By
                default, as the reference's collectors do, the next batch starts new
                episodes from a reset (a collector built afresh on a new env).

        Examples:
            >>> from cadence.collectors import SyncDataCollector
            >>> from cadence.envs import GymEnv
            >>> env = GymEnv("Pendulum-v1")
            >>> first = SyncDataCollector(env, frames_per_batch=5)
            >>> last_obs = first.next()["next", "observation"][-1]
            >>> second = SyncDataCollector(env, frames_per_batch=5)
            >>> second.load_state_dict(first.state_dict(), continue_episodes=True)
            >>> bool((second.next()["observation"][0] == last_obs).all())
            True
            >>> fresh = SyncDataCollector(GymEnv("Pendulum-v1"), frames_per_batch=5)
            >>> fresh.load_state_dict(first.state_dict())  # a new env: new episodes
            >>> fresh.next()["collector", "traj_ids"][0].item() > first.state_dict()["traj_ids"]["current"].item()
            True
        """
        missing = {"frames", "iter", "traj_ids", "shuttle"} - set(state_dict)
        if missing:
            raise KeyError(f"load_state_dict: the state lacks {sorted(missing)}; expected a collector's state_dict().")
        self._frames = int(state_dict["frames"])
        self._iter = int(state_dict["iter"])
        self._runner.ids.load_state_dict(state_dict["traj_ids"])
        self._runner.load_state(state_dict["shuttle"] if continue_episodes else None)
        if state_dict.get("policy_state_dict") is not None and isinstance(self.policy, torch.nn.Module):
            self.policy.load_state_dict(state_dict["policy_state_dict"])
        if state_dict.get("env_state_dict"):
            self.env.load_state_dict(state_dict["env_state_dict"])

    def shutdown(self) -> None:
        """Closes the env; the collector cannot be used afterwards.

        Examples:
            >>> from cadence.collectors import SyncDataCollector
            >>> from cadence.envs import GymEnv
            >>> collector = SyncDataCollector(GymEnv("Pendulum-v1"), frames_per_batch=5)
            >>> collector.shutdown()
            >>> collector.env.is_closed
            True
        """
        if not self._closed:
            self._closed = True
            if not self.env.is_closed:
                self.env.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env={self.env!r}, frames_per_batch={self.frames_per_batch}, "
            f"total_frames={self.total_frames}, fast_path={self.uses_fast_path})"
        )


def _device(device: DeviceLike) -> torch.device | None:
    return None if device is None else torch.device(device)


def _load_weights(target: torch.nn.Module, source: Any) -> None:
    """Loads ``source`` (a module, a TensorDict of parameters or a state dict) into ``target``."""
    with torch.no_grad():
        if isinstance(source, torch.nn.Module):
            TensorDict.from_module(target).update_(TensorDict.from_module(source))
            return
        if isinstance(source, TensorDictBase):
            TensorDict.from_module(target).update_(source)
            return
        if isinstance(source, dict):
            target.load_state_dict(source)
            return
    raise TypeError(
        f"update_policy_weights_ takes a module, a TensorDict of weights or a state dict, got {type(source).__name__}."
    )


Collector = SyncDataCollector
