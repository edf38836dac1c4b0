"""Episode transforms: ``StepCounter``, ``InitTracker``, ``TrajCounter``,
``FrameSkipTransform``, ``TimeMaxPool``, ``FiniteTensorDictCheck``, ``NoopResetEnv`` and
``EndOfLifeTransform``.

They count and mark the steps of each episode. Values that must be read back at the
next step (a step count, a trajectory id) are declared in the state spec as well as in
the observation spec, so that batched envs carry them from one step to the next.
Partial resets (``"_reset"`` masks) are honoured: only the selected components start
over, the others keep their values.

These transforms work on the root done signal (``"done"``) of the env.

Examples:
    >>> from cadence.envs import GymEnv
    >>> from cadence.envs.transforms import TransformedEnv
    >>> from cadence.envs.transforms.episode import StepCounter
    >>> env = TransformedEnv(GymEnv("CartPole-v1"), StepCounter(max_steps=2))
    >>> env.rollout(5)["next", "step_count"].squeeze(-1).tolist()
    [1, 2]
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from multiprocessing.context import get_spawning_popen
from typing import Any

import torch
from tensordict import TensorDictBase

from cadence.data import Categorical, Composite, TensorSpec, Unbounded
from cadence.envs.env_specs import as_tuple_key
from cadence.envs.step_values import any_done
from cadence.envs.transforms.base import NestedKey, Transform

__all__ = [
    "EndOfLifeTransform",
    "FiniteTensorDictCheck",
    "FrameSkipTransform",
    "InitTracker",
    "NoopResetEnv",
    "StepCounter",
    "TimeMaxPool",
    "TrajCounter",
]


def _root_done_spec(transform: Transform, output_spec: Composite) -> TensorSpec:
    """The spec of the env's root ``"done"`` entry, which sets the shape of the counters."""
    done_spec = output_spec["full_done_spec"]
    if "done" not in done_spec.keys():
        raise KeyError(
            f"{type(transform).__name__} needs a root 'done' entry in the env's done spec; the done spec holds "
            f"{sorted(map(str, done_spec.keys(True, True)))}."
        )
    return done_spec["done"]


def _reset_mask(tensordict: TensorDictBase | None, done: torch.Tensor) -> torch.Tensor:
    """The components a reset starts over: the root ``"_reset"`` mask, or all of them."""
    mask = None if tensordict is None else tensordict.get("_reset", None)
    if mask is None:
        return torch.ones_like(done, dtype=torch.bool)
    return mask.to(torch.bool).reshape(done.shape)


def _int_spec(like: TensorSpec) -> Unbounded:
    return Unbounded(shape=like.shape, dtype=torch.int64, device=like.device)


class StepCounter(Transform):
    """Counts the steps since the last reset, and truncates episodes at ``max_steps``.

    The count (an ``int64`` shaped like the root ``"done"``) is written at
    ``step_count_key`` after every step (``0`` after a reset) and is part of the
    observation and state specs. When the count reaches ``max_steps`` the step is
    marked truncated (``truncated_key``, added to the done spec if the env has none)
    and, with ``update_done``, done. A missing count in a step's input counts as 0.

    Args:
        max_steps: the episode length after which to truncate; ``None`` only counts.
        truncated_key: the done entry that marks truncation.
        step_count_key: where the count goes.
        update_done: also set ``"done"`` when truncating.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(max_steps=3))
        >>> data = env.rollout(10)
        >>> data["next", "step_count"].squeeze(-1).tolist(), data["next", "truncated"].squeeze(-1).tolist()
        ([1, 2, 3], [False, False, True])
        >>> data["step_count"].squeeze(-1).tolist()
        [0, 1, 2]
    """

    def __init__(
        self,
        max_steps: int | None = None,
        truncated_key: NestedKey = "truncated",
        step_count_key: NestedKey = "step_count",
        update_done: bool = True,
    ) -> None:
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"StepCounter: max_steps must be None or >= 1, got {max_steps}.")
        super().__init__()
        self.max_steps = max_steps
        self.truncated_key = truncated_key
        self.step_count_key = step_count_key
        self.update_done = update_done

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        done = tensordict_reset.get("done")
        # a partial reset: the outer env keeps the spared components' counts from the input
        tensordict_reset.set(self.step_count_key, torch.zeros_like(done, dtype=torch.int64))
        if tensordict_reset.get(self.truncated_key, None) is None:
            tensordict_reset.set(self.truncated_key, torch.zeros_like(done, dtype=torch.bool))
        return tensordict_reset

    steps_over_time = True
    steps_on_values = True  # get and set

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        done = next_tensordict.get("done")
        previous = tensordict.get(self.step_count_key, None)
        if previous is None:
            previous = torch.zeros_like(done, dtype=torch.int64)
        return self._write_counts(next_tensordict, previous + 1, done)

    def _step_over_time(self, tensordict: TensorDictBase, next_steps: TensorDictBase) -> TensorDictBase:
        time_dim = next_steps.batch_dims - 1
        done = next_steps.get("done")
        previous = tensordict.get(self.step_count_key, None)
        if previous is None:
            previous = torch.zeros(done.shape[:time_dim] + done.shape[time_dim + 1 :], dtype=torch.int64)
        steps = torch.arange(1, done.shape[time_dim] + 1, device=done.device)
        steps = steps.reshape(-1, *[1] * (done.ndim - time_dim - 1))
        return self._write_counts(next_steps, previous.unsqueeze(time_dim) + steps)

    def _steps_before_done(self, tensordict: TensorDictBase) -> int | None:
        if self.max_steps is None:
            return None
        previous = tensordict.get(self.step_count_key, None)
        return self.max_steps if previous is None else max(1, int((self.max_steps - previous).min()))

    def _write_counts(
        self, next_tensordict: TensorDictBase, count: torch.Tensor, done: torch.Tensor | None = None
    ) -> TensorDictBase:
        if done is None:
            done = next_tensordict.get("done")
        next_tensordict.set(self.step_count_key, count)
        truncated = next_tensordict.get(self.truncated_key, None)
        if truncated is None:
            truncated = torch.zeros_like(done, dtype=torch.bool)
        max_steps = self.max_steps
        # most steps reach no limit and end no episode: one read of a number (one env) spares
        # the tensor ops whose results would equal their inputs
        if max_steps is not None and (count.item() >= max_steps if count.numel() == 1
                                      else any_done(count >= max_steps)):
            truncated = truncated | (count >= max_steps)
            if self.update_done:
                next_tensordict.set("done", done | truncated)
        elif self.update_done and any_done(truncated):
            next_tensordict.set("done", done | truncated)
        next_tensordict.set(self.truncated_key, truncated)
        return next_tensordict

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._done_leaf = _root_done_spec(self, output_spec)
        return super().transform_output_spec(output_spec)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        observation_spec[self.step_count_key] = _int_spec(self._done_leaf)
        return observation_spec

    def transform_done_spec(self, done_spec: Composite) -> Composite:
        if as_tuple_key(self.truncated_key) not in {as_tuple_key(k) for k in done_spec.keys(True, True)}:
            done_spec[self.truncated_key] = Categorical(
                2, shape=self._done_leaf.shape, dtype=torch.bool, device=self._done_leaf.device
            )
        return done_spec

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        # the count is read back at the next step: an input of the env
        state_spec[self.step_count_key] = _int_spec(self._done_leaf)
        return state_spec

    def __repr__(self) -> str:
        return (
            f"StepCounter(max_steps={self.max_steps}, truncated_key={self.truncated_key!r}, "
            f"step_count_key={self.step_count_key!r}, update_done={self.update_done})"
        )


class InitTracker(Transform):
    """Marks the first step of each trajectory: ``init_key`` is ``True`` in a reset's
    output (for the components the reset selects) and ``False`` after every step.

    Args:
        init_key: where the flag goes (a ``bool`` shaped like the root ``"done"``).

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("CartPole-v1"), InitTracker())
        >>> data = env.rollout(3)
        >>> data["is_init"].squeeze(-1).tolist(), data["next", "is_init"].squeeze(-1).tolist()
        ([True, False, False], [False, False, False])
    """

    def __init__(self, init_key: NestedKey = "is_init") -> None:
        super().__init__()
        self.init_key = init_key

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        done = tensordict_reset.get("done")
        tensordict_reset.set(self.init_key, _reset_mask(tensordict, done).clone())
        return tensordict_reset

    steps_over_time = True  # after a step the flag is False, whatever the batch dims
    steps_on_values = True  # get and set

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        done = next_tensordict.get("done")
        next_tensordict.set(self.init_key, torch.zeros_like(done, dtype=torch.bool))
        return next_tensordict

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._done_leaf = _root_done_spec(self, output_spec)
        return super().transform_output_spec(output_spec)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        leaf = self._done_leaf
        observation_spec[self.init_key] = Categorical(2, shape=leaf.shape, dtype=torch.bool, device=leaf.device)
        return observation_spec

    def __repr__(self) -> str:
        return f"InitTracker(init_key={self.init_key!r})"


class TrajCounter(Transform):
    """Gives each trajectory a global id: every reset of a component takes the next value
    of a counter, and the steps of the trajectory carry it at ``out_key``.

    The counter is a shared-memory buffer guarded by a process lock: ``clone()`` copies
    of the transform share both, and so do the worker processes that get the transform
    when they start (by fork, or pickled to a spawned process), so ids stay unique across
    them. A transform pickled in any other way (saved, say) gets a fresh lock.

    Args:
        out_key: where the id goes (an ``int64`` shaped like the root ``"done"``).

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("CartPole-v1"), TrajCounter())
        >>> env.reset()["traj_count"].tolist(), env.reset()["traj_count"].tolist()
        ([0], [1])
    """

    def __init__(self, out_key: NestedKey = "traj_count") -> None:
        super().__init__()
        self.out_key = out_key
        self.register_buffer("traj_count", torch.zeros((), dtype=torch.int64).share_memory_())
        self.__dict__["_lock"] = multiprocessing.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if get_spawning_popen() is None:  # a lock only travels to a process being started
            state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if state.get("_lock") is None:
            state["_lock"] = multiprocessing.Lock()
        self.__dict__.update(state)

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        done = tensordict_reset.get("done")
        mask = _reset_mask(tensordict, done)
        flat = mask.reshape(-1)
        with self._lock:
            ids = self.traj_count + torch.cumsum(flat.to(torch.int64), 0) - 1
            self.traj_count.add_(int(flat.sum()))
        previous = None if tensordict is None else tensordict.get(self.out_key, None)
        kept = previous.reshape(-1) if previous is not None else torch.zeros_like(ids)
        tensordict_reset.set(self.out_key, torch.where(flat, ids, kept).reshape(done.shape))
        return tensordict_reset

    steps_on_values = True  # get and set

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        value = tensordict.get(self.out_key, None)
        if value is None:
            raise KeyError(
                f"TrajCounter: the step's input holds no {self.out_key!r} (the trajectory id written at reset); "
                f"step from the data that reset() returned."
            )
        next_tensordict.set(self.out_key, value.clone())
        return next_tensordict

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._done_leaf = _root_done_spec(self, output_spec)
        return super().transform_output_spec(output_spec)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        observation_spec[self.out_key] = _int_spec(self._done_leaf)
        return observation_spec

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        # the id is read back at each step
        state_spec[self.out_key] = _int_spec(self._done_leaf)
        return state_spec

    def __repr__(self) -> str:
        return f"TrajCounter(out_key={self.out_key!r}, count={int(self.traj_count)})"


class FrameSkipTransform(Transform):
    """Repeats each action ``frame_skip`` times, summing the rewards, and stops early
    when the env is done (in a batched env: as soon as any component is done).

    The repeats call the base env and the transforms placed before this one, so put
    ``FrameSkipTransform`` first in the chain: transforms before it that read their
    own values back (a step counter, a running sum) would see the same input at every
    repeat. Between repeats the base env's state entries (its state spec) are carried
    from one repeat's output to the next one's input, so stateless envs work too.

    Args:
        frame_skip: the number of base steps per step (>= 1).

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("CartPole-v1"), FrameSkipTransform(frame_skip=3))
        >>> env.rollout(2)["next", "reward"].squeeze(-1).tolist()
        [3.0, 3.0]
    """

    def __init__(self, frame_skip: int = 1) -> None:
        if frame_skip < 1:
            raise ValueError(f"FrameSkipTransform: frame_skip must be >= 1, got {frame_skip}.")
        super().__init__()
        self.frame_skip = frame_skip

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self.frame_skip == 1:
            return next_tensordict
        parent = self.parent
        if parent is None:
            raise RuntimeError("FrameSkipTransform: stepping needs an env; this transform belongs to none.")
        base = parent.base_env
        reward_keys = parent.reward_keys
        done_keys = [k for k in parent.done_keys if as_tuple_key(k)[-1] == "done"]
        state_keys = list(base.full_state_spec.keys(True, True))
        rewards = {key: next_tensordict.get(key) for key in reward_keys}
        for _ in range(self.frame_skip - 1):
            if any(bool(next_tensordict.get(key).any()) for key in done_keys):
                break
            current = tensordict.exclude("next")
            for key in state_keys:
                value = next_tensordict.get(key, None)
                if value is not None:
                    current.set(key, value)
            raw = base.step(current).get("next")
            next_tensordict = parent.transform._step(current, raw)
            for key in reward_keys:
                rewards[key] = rewards[key] + next_tensordict.get(key)
        for key, value in rewards.items():
            next_tensordict.set(key, value)
        return next_tensordict

    def __repr__(self) -> str:
        return f"FrameSkipTransform(frame_skip={self.frame_skip})"


class TimeMaxPool(Transform):
    """Replaces observations by their element-wise maximum over the last ``T`` steps.

    The history is kept in the transform (one per ``in_key``, of shape ``(T, *value)``),
    emptied at reset for the components the reset selects; a reset's own observation
    starts the new history. Used on bare data (``transform(data)``), each call pushes
    one observation.

    Args:
        in_keys: the observations (``["observation"]``).
        out_keys: where the maxima go (``in_keys``).
        T: the number of steps to pool over (>= 1).
        reset_key: the partial-reset mask to honour (``"_reset"``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> pool = TimeMaxPool(in_keys=["x"], T=2)
        >>> [pool(TensorDict({"x": torch.tensor([v])}, []))["x"].item() for v in (3.0, 1.0, 2.0, 0.0)]
        [3.0, 3.0, 2.0, 2.0]
    """

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        T: int = 1,
        reset_key: NestedKey | None = None,
    ) -> None:
        if T < 1:
            raise ValueError(f"TimeMaxPool: T must be >= 1, got {T}.")
        super().__init__(in_keys if in_keys is not None else ["observation"], out_keys)
        self.T = T
        self.reset_key = reset_key if reset_key is not None else "_reset"
        self.__dict__["_history"] = {}

    @staticmethod
    def _lowest(like: torch.Tensor) -> torch.Tensor:
        low = -torch.inf if like.is_floating_point() else torch.iinfo(like.dtype).min
        return torch.full((1, *like.shape), low, dtype=like.dtype, device=like.device)

    def _push(self, key: NestedKey, value: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        """Adds ``value`` to the history of ``key`` (where ``keep`` is not set) and
        returns the maximum over it."""
        history = self._history.get(key)
        if history is None or history.shape[1:] != value.shape or history.dtype != value.dtype:
            history = self._lowest(value).expand(self.T, *value.shape).clone()
        pushed = torch.cat([value.unsqueeze(0), history[:-1]], 0)
        if keep is not None:
            pushed = torch.where(keep, history, pushed)
        self._history[key] = pushed
        return pushed.max(0).values

    steps_on_values = True  # get and set

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = tensordict.get(in_key, None)
            if value is not None:
                tensordict.set(out_key, self._push(in_key, value))
        return tensordict

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get(self.reset_key, None)
        batch = tensordict_reset.batch_size
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = tensordict_reset.get(in_key, None)
            if value is None:
                continue
            history = self._history.get(in_key)
            if mask is None or history is None or history.shape[1:] != value.shape:
                self._history.pop(in_key, None)
                tensordict_reset.set(out_key, self._push(in_key, value))
                continue
            selected = mask.to(torch.bool).reshape(batch)
            selected = selected.reshape(*batch, *([1] * (value.ndim - len(batch)))).expand_as(value)
            cleared = torch.where(selected.unsqueeze(0), self._lowest(value), history)
            self._history[in_key] = cleared
            # spared components keep their history; the env keeps their outputs
            tensordict_reset.set(out_key, self._push(in_key, value, keep=~selected.unsqueeze(0)))
        return tensordict_reset

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._output_leaf_specs(observation_spec, lambda leaf: leaf.clone())

    def __repr__(self) -> str:
        return f"TimeMaxPool(in_keys={self.in_keys}, out_keys={self.out_keys}, T={self.T})"


class FiniteTensorDictCheck(Transform):
    """Checks that every tensor an env emits (or a tensordict it is called on holds) is
    finite, and raises a ``ValueError`` naming the first entry that is not.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> FiniteTensorDictCheck()(TensorDict({"x": torch.tensor([float("nan")])}, []))
        Traceback (most recent call last):
        ...
        ValueError: FiniteTensorDictCheck: entry 'x' holds non-finite values (nan or inf): tensor([nan])
    """

    def __init__(self) -> None:
        super().__init__()

    steps_on_values = True  # items(True, True)

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for key, value in tensordict.items(include_nested=True, leaves_only=True):
            if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()):
                if not bool(torch.isfinite(value).all()):
                    raise ValueError(
                        f"FiniteTensorDictCheck: entry {key!r} holds non-finite values (nan or inf): {value}"
                    )
        return tensordict

    def __repr__(self) -> str:
        return "FiniteTensorDictCheck()"


class NoopResetEnv(Transform):
    """After each reset, takes a number of random steps (drawn from the action spec) so
    that episodes start from varied states, as for Atari's no-op starts.

    The number of steps is ``noops``, or, with ``random``, drawn uniformly in
    ``[0, noops]``. The draws (their number and the actions) use the base env's
    generator ``env.rng``, seeded by ``env.set_seed``. The steps go through the
    transforms placed before this one. If the env is done during the steps it is reset
    and the steps start again (up to 10 times, then it raises). Only whole resets are
    supported: a partial reset of a batched env (a ``"_reset"`` mask that spares some
    components) raises; batch the env outside the transform instead
    (``SerialEnv(n, lambda: TransformedEnv(base, NoopResetEnv()))``).

    Args:
        noops: the (maximum) number of random steps.
        random: draw the number of steps in ``[0, noops]``; else take exactly ``noops``.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), NoopResetEnv(noops=3, random=False))
        >>> _ = env.set_seed(0)
        >>> env.reset()["observation"].shape
        torch.Size([3])
    """

    max_tries = 10

    def __init__(self, noops: int = 30, random: bool = True) -> None:
        if noops < 0:
            raise ValueError(f"NoopResetEnv: noops must be >= 0, got {noops}.")
        super().__init__()
        self.noops = noops
        self.random = random

    steps_on_values = True  # it acts at resets only

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is not None and not bool(mask.all()):
            raise RuntimeError(
                "NoopResetEnv: partial resets (a '_reset' mask that spares some components) are not supported; "
                "put the transform inside each sub-env of a batched env instead."
            )
        parent = self.parent
        if parent is None:
            raise RuntimeError("NoopResetEnv: resetting needs an env; this transform belongs to none.")
        parent.rng = parent.base_env.rng  # the view's actions come from the base env's generator
        count = self.noops
        if self.random:
            count = int(torch.randint(0, self.noops + 1, (1,), generator=parent.rng))
        keys = list(tensordict_reset.keys(True, True))
        data = tensordict_reset
        for _ in range(self.max_tries):
            done = False
            for _ in range(count):
                step = parent.step(parent.rand_action(data.clone()))
                if bool(step.get(("next", "done")).any()):
                    done = True
                    break
                data = parent._step_mdp(step)
            if not done:
                return tensordict_reset.update(data.select(*keys))
            data = parent.reset()
        raise RuntimeError(
            f"NoopResetEnv: the env was done during the {count} random steps after each of "
            f"{self.max_tries} resets; lower noops."
        )

    def __repr__(self) -> str:
        return f"NoopResetEnv(noops={self.noops}, random={self.random})"


class EndOfLifeTransform(Transform):
    """Marks the steps where a life is lost, for envs that report lives (Atari games do).

    Any env that emits a lives count at ``lives_key`` (an observation, or an info entry
    turned into one) can use it: after each step ``eol_key`` is ``True`` where the count
    went down or the episode is done. The episode itself goes on (the env is not
    reset): a loss can treat ``eol_key`` as its done signal. The previous count is read
    from the step's input, so ``lives_key`` is added to the state spec. Reading lives
    straight from an ALE simulator (``env.unwrapped.ale.lives()``) is not supported:
    the env must emit the entry.

    Args:
        eol_key: where the end-of-life flag goes (a ``bool`` shaped like ``"done"``).
        lives_key: the lives count the env emits.
        done_key: the done flag that also ends a life.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data import Composite, Unbounded
        >>> from cadence.envs import EnvBase
        >>> from cadence.envs.transforms import TransformedEnv
        >>> class Lives(EnvBase):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.observation_spec = Composite(lives=Unbounded(shape=(1,), dtype=torch.int64))
        ...         self.action_spec = Unbounded(shape=(1,))
        ...     def _reset(self, td):
        ...         self.t = 0
        ...         return TensorDict({"lives": torch.tensor([2])}, [])
        ...     def _step(self, td):
        ...         self.t += 1
        ...         lives = torch.tensor([2 - self.t // 2])
        ...         return TensorDict({"lives": lives, "reward": torch.ones(1), "done": lives == 0}, [])
        >>> data = TransformedEnv(Lives(), EndOfLifeTransform()).rollout(10)
        >>> data["next", "end-of-life"].squeeze(-1).tolist()
        [False, True, False, True]
    """

    def __init__(self, eol_key: NestedKey = "end-of-life", lives_key: NestedKey = "lives",
                 done_key: NestedKey = "done") -> None:
        super().__init__(in_keys=[lives_key])
        self.eol_key = eol_key
        self.lives_key = lives_key
        self.done_key = done_key

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return tensordict

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        done = tensordict_reset.get(self.done_key)
        tensordict_reset.set(self.eol_key, torch.zeros_like(done, dtype=torch.bool))
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        done = next_tensordict.get(self.done_key)
        lives = next_tensordict.get(self.lives_key)
        previous = tensordict.get(self.lives_key, None)
        lost = torch.zeros_like(done, dtype=torch.bool)
        if previous is not None:
            lost = (lives < previous).reshape(done.shape)
        next_tensordict.set(self.eol_key, lost | done.to(torch.bool))
        return next_tensordict

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._check_in_keys(output_spec)
        observation_spec = output_spec["full_observation_spec"]
        if self.lives_key not in observation_spec.keys(True, True):
            raise KeyError(f"EndOfLifeTransform: the lives count {self.lives_key!r} must be an observation.")
        self._lives_leaf = observation_spec[self.lives_key]
        done_leaf = output_spec["full_done_spec"][self.done_key]
        if self._lives_leaf.shape.numel() != done_leaf.shape.numel():
            raise ValueError(
                f"EndOfLifeTransform: the lives count {self.lives_key!r} (shape {tuple(self._lives_leaf.shape)}) "
                f"must hold one value per done flag (shape {tuple(done_leaf.shape)})."
            )
        observation_spec[self.eol_key] = Categorical(
            2, shape=done_leaf.shape, dtype=torch.bool, device=done_leaf.device
        )
        return output_spec

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        # the previous lives count is read back at each step
        state_spec[self.lives_key] = self._lives_leaf.clone()
        return state_spec

    def __repr__(self) -> str:
        return f"EndOfLifeTransform(eol_key={self.eol_key!r}, lives_key={self.lives_key!r})"
