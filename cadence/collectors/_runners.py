"""(Internal to the collectors.) What steps an env for a batch: trajectory ids, the
generic runner (any env, a tensordict per step) and the gymnasium runner (the
simulators stepped straight into preallocated arrays, the policy called on tensors where
it compiles, else on one small tensordict per step).

Both runners keep where the env stands between batches (its next input, the "shuttle")
and return batches ``[*env.batch_size, T]`` whose last dim is named ``"time"``, holding
``("collector", "traj_ids")``. For the same env, seed and policy both give the batches
that ``env.rollout(..., break_when_any_done=False)`` gives, entry for entry.

Examples:
    >>> import torch
    >>> ids = TrajectoryIds(torch.Size([3]), stride=2, offset=1)
    >>> ids.restart()
    >>> ids.current.tolist()
    [1, 3, 5]
    >>> ids.renew(torch.tensor([False, True, False]))
    >>> ids.current.tolist()
    [1, 7, 5]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.modules.tensor_view import TensorStep
from cadence.envs.libs.gym_rollout import _carried_entries, check_observation, explain_observation_error
from cadence.envs.common import EnvBase
from cadence.envs.utils import action_in_spec_dtype

__all__ = ["EnvRunner", "GymRunner", "TrajectoryIds", "gym_runner_applies"]

TRAJ_KEY = ("collector", "traj_ids")
_ENV_ROOT_KEYS = ("observation", "done", "terminated", "truncated")


class TrajectoryIds:
    """Trajectory ids of a batch of envs, unique across batches and across workers.

    The ``k``-th trajectory started by this runner gets the id ``k * stride + offset``,
    so ``n`` workers with ``stride=n`` and offsets ``0..n-1`` never share an id.

    Args:
        batch_size: the env's batch size.
        stride: the number of id spaces interleaved (the number of workers).
        offset: this runner's id space (its worker index).
    """

    def __init__(self, batch_size: torch.Size, stride: int = 1, offset: int = 0) -> None:
        self.batch_size = torch.Size(batch_size)
        self.stride = stride
        self.offset = offset
        self.count = 0
        self.current = torch.full(self.batch_size, -1, dtype=torch.long)

    def _take(self, n: int) -> torch.Tensor:
        local = torch.arange(self.count, self.count + n)
        self.count += n
        return local * self.stride + self.offset

    def restart(self) -> None:
        """New ids for every env (after a full reset)."""
        self.current = self._take(self.batch_size.numel()).reshape(self.batch_size)

    def renew(self, done: torch.Tensor) -> None:
        """New ids for the envs where ``done`` (shaped like the batch) is set."""
        n = int(done.sum())
        if n:
            current = self.current.clone()
            current[done] = self._take(n)
            self.current = current

    def state_dict(self) -> dict[str, Any]:
        """The counter and the current ids."""
        return {"count": self.count, "current": self.current.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned."""
        self.count = int(state["count"])
        self.current = state["current"].clone()


def _done_keys(env: EnvBase) -> list[tuple[str, ...]]:
    """The ``("next", ..., "done")`` keys whose shape leads with the env's batch."""
    keys = []
    for key in env.done_keys:
        key_t = (key,) if isinstance(key, str) else tuple(key)
        if key_t[-1] == "done" and env.full_done_spec[key].shape[: env.batch_dims] == env.batch_size:
            keys.append(("next", *key_t))
    return keys


class EnvRunner:
    """Steps any env with ``step_and_maybe_reset``, one tensordict per step.

    Args:
        env: the env.
        ids: its trajectory ids.
    """

    def __init__(self, env: EnvBase, ids: TrajectoryIds) -> None:
        self.env = env
        self.ids = ids
        self.shuttle: TensorDictBase | None = None
        self._done_keys = _done_keys(env)
        if not self._done_keys:
            raise ValueError(
                f"The collector needs a 'done' entry shaped like the env's batch {tuple(env.batch_size)}; "
                f"{type(env).__name__} has done keys {env.done_keys}."
            )

    def reset(self) -> None:
        """Resets the env now; the next batch starts new trajectories."""
        self.shuttle = self.env.reset()
        self.ids.restart()

    def _done(self, data: TensorDictBase) -> torch.Tensor:
        nb = self.env.batch_dims
        done = None
        for key in self._done_keys:
            value = data.get(key).reshape(*data.batch_size[:nb], -1).any(-1)
            done = value if done is None else done | value
        assert done is not None
        return done

    def collect(self, steps: int, act: Callable[[TensorDictBase], TensorDictBase | None]) -> TensorDictBase:
        """Runs ``steps`` steps with ``act`` (a policy, or the env's ``rand_action``)."""
        if self.shuttle is None:
            self.reset()
        env = self.env
        recorded: list[TensorDictBase] = []
        ids: list[torch.Tensor] = []
        for _ in range(steps):
            shuttle = self.shuttle
            assert shuttle is not None
            returned = act(shuttle)
            shuttle = shuttle if returned is None else returned
            # the ids are kept aside: an entry of the step would travel on with step_mdp,
            # and the next step's write would land in the same nested tensordict
            ids.append(self.ids.current)
            data, self.shuttle = env.step_and_maybe_reset(shuttle)
            recorded.append(data)
            done = self._done(data)
            if done.any():
                self.ids.renew(done)
        batch = env._stack_steps(recorded, contiguous=not env._has_dynamic_specs())
        batch.set(TRAJ_KEY, torch.stack(ids, env.batch_dims))
        batch.names = [None] * env.batch_dims + ["time"]
        return batch

    def state(self) -> TensorDictBase | None:
        """Where the env stands: its next input."""
        return None if self.shuttle is None else self.shuttle.clone()

    def load_state(self, shuttle: TensorDictBase | None) -> None:
        """Continues from ``shuttle`` (what :meth:`state` returned)."""
        self.shuttle = None if shuttle is None else shuttle.clone()


def _step_counter(env: EnvBase) -> tuple[EnvBase, Any]:
    """``(base env, its StepCounter)`` for a ``TransformedEnv`` whose only transform is
    a ``StepCounter`` with the stock keys (what ``max_frames_per_traj`` appends);
    ``(env, None)`` otherwise."""
    from cadence.envs.transforms import StepCounter, TransformedEnv

    if type(env) is not TransformedEnv or len(env.transform) != 1:
        return env, None
    counter = env.transform[0]
    if (
        type(counter) is not StepCounter
        or counter.step_count_key != "step_count"
        or counter.truncated_key != "truncated"
        or not counter.update_done
    ):
        return env, None
    return env.base_env, counter


def gym_runner_applies(env: EnvBase) -> bool:
    """Whether ``env`` is a stock gymnasium wrapper, or a ``SerialEnv`` of them (alone or
    under a lone ``StepCounter``), whose simulators the gymnasium runner can step directly.

    Examples:
        >>> from cadence.envs import GymEnv, RewardSum, SerialEnv, TransformedEnv, StepCounter
        >>> gym_runner_applies(SerialEnv(2, lambda: GymEnv("Pendulum-v1")))
        True
        >>> gym_runner_applies(TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(10)))
        True
        >>> gym_runner_applies(TransformedEnv(GymEnv("Pendulum-v1"), RewardSum()))
        False
    """
    from cadence.envs.batched import SerialEnv
    from cadence.envs.libs.gym import GymWrapper

    if env.device not in (None, torch.device("cpu")) or env.run_type_checks:
        return False
    env, _ = _step_counter(env)
    if env.device not in (None, torch.device("cpu")) or env.run_type_checks:
        return False
    if isinstance(env, GymWrapper):
        return env._fast_path_applies()
    if type(env) is SerialEnv:
        return env._simulator_group() is not None
    return False


class GymRunner:
    """Steps gymnasium simulators straight into arrays laid out ``[*batch, T, ...]``.

    The policy, compiled by ``compile_policy``, runs on a dict of tensors: the env's root
    entries (observation and the done flags, False after a step that did not end the
    episode and after a reset) plus what the policy wrote at the previous step (its root
    entries but the action, as ``step_mdp`` carries them). Under a lone ``StepCounter``
    the runner counts the steps itself, as the transform would: ``"step_count"`` at the
    root (0 after a reset) and under ``"next"``, truncation (and done) at ``max_steps``.

    Args:
        env: a stock gymnasium wrapper or a ``SerialEnv`` of them, possibly under a lone
            ``StepCounter``.
        ids: its trajectory ids.
    """

    def __init__(self, env: EnvBase, ids: TrajectoryIds) -> None:
        from cadence.envs.batched import SerialEnv

        self.outer = env
        env, counter = _step_counter(env)
        self.counting = counter is not None
        self.max_count = None if counter is None else counter.max_steps
        self.counts = np.zeros(tuple(env.batch_size), dtype=np.int64)
        self.env = env
        self.ids = ids
        self.batch_size = env.batch_size
        self.nb = env.batch_dims
        spec = env.full_observation_spec["observation"]
        self.obs_shape = tuple(spec.shape[self.nb :])
        self.obs_dtype = torch.empty(0, dtype=spec.dtype).numpy().dtype
        self.action_spec = self.outer.full_action_spec["action"]
        if isinstance(env, SerialEnv):
            self.group = env._simulator_group()
            self.wrappers = self.group.wrappers
            self.to_backend = self.group.to_backend
            self.mode = "serial" if not any(w.is_vector for w in self.wrappers) else "group"
        else:
            from cadence.envs.libs.gym_rollout import SimulatorGroup

            self.group = SimulatorGroup([env], serial=False)  # type: ignore[list-item]
            self.wrappers = [env]
            self.to_backend = env._to_backend  # type: ignore[attr-defined]
            self.mode = "group" if env.is_vector else "single"  # type: ignore[attr-defined]
        self.obs: np.ndarray | None = None  # the observation the env stands at
        self.carried: dict[str, torch.Tensor] = {}
        self._flags = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
        self._checked = False
        self._cast_actions = False

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Resets every simulator now; the next batch starts new trajectories."""
        obs = np.asarray(self.group.reset_all() if self.mode != "single" else self.wrappers[0]._reset_backend()[0])
        check_observation(self.env, obs, "reset()")  # as the rollout shortcut does, rather than reshape's error
        self.obs = np.array(obs, dtype=self.obs_dtype, copy=True).reshape(*self.batch_size, *self.obs_shape)
        self.carried = {}
        self.counts = np.zeros_like(self.counts)
        self.ids.restart()

    def state(self) -> TensorDictBase | None:
        """Where the env stands, as the generic runner's next input would hold it."""
        if self.obs is None:
            return None
        entries: dict[str, Any] = {key: value.clone() for key, value in self.carried.items()}
        entries["observation"] = torch.from_numpy(self.obs.copy())
        for name in _ENV_ROOT_KEYS[1:]:
            entries[name] = self._flags.clone()
        if self.counting:
            entries["step_count"] = torch.from_numpy(self.counts.copy()).unsqueeze(-1)
        return TensorDict(entries, batch_size=self.batch_size)

    def load_state(self, shuttle: TensorDictBase | None) -> None:
        """Continues from ``shuttle`` (the simulators are assumed to stand there)."""
        if shuttle is None:
            self.obs = None
            self.carried = {}
            return
        self.obs = shuttle.get("observation").numpy().copy()
        self.carried = {
            key: value.clone()
            for key, value in shuttle.items()
            if key not in _ENV_ROOT_KEYS and key not in ("action", "collector", "next", "step_count")
        }
        if self.counting:
            self.counts = shuttle.get("step_count").reshape(self.counts.shape).numpy().copy()

    # ------------------------------------------------------------------ stepping
    def _check_action(self, action: torch.Tensor) -> torch.Tensor:
        """The first action of the policy, checked (and cast, as the env would cast it);
        the later ones are cast the same way when ``_cast_actions`` says so."""
        spec = self.action_spec
        if action.shape != spec.shape:
            raise ValueError(
                f"Action 'action': expected shape {tuple(spec.shape)} and dtype {spec.dtype} (spec {spec}), got "
                f"shape {tuple(action.shape)} and dtype {action.dtype} from the policy."
            )
        self._cast_actions = action.dtype != spec.dtype
        self._checked = True
        return action_in_spec_dtype(action, spec)

    def collect(
        self,
        steps: int,
        policy: TensorStep | None,
        tensordict_policy: Callable[[TensorDictBase], TensorDictBase | None] | None = None,
    ) -> TensorDictBase:
        """Runs ``steps`` steps with the compiled ``policy``, or with ``tensordict_policy``
        called on one small tensordict per step (as ``env.rollout``'s gymnasium shortcut
        calls a policy), or with random actions if both are ``None``."""
        if self.obs is None:
            self.reset()
        batch = tuple(self.batch_size)
        time_first = (steps, *batch)
        root_obs = np.empty((*time_first, *self.obs_shape), dtype=self.obs_dtype)
        next_obs = np.empty_like(root_obs)
        reward = np.empty(time_first, dtype=np.float32)
        terminated = np.empty(time_first, dtype=bool)
        truncated = np.empty(time_first, dtype=bool)
        traj_ids = torch.empty(time_first, dtype=torch.long)
        counting, max_count = self.counting, self.max_count
        root_count = np.empty(time_first, dtype=np.int64) if counting else None
        root_count_t = None if root_count is None else torch.from_numpy(root_count).unsqueeze(-1)
        root_obs_t = torch.from_numpy(root_obs)
        recorded: dict[str, list[torch.Tensor]] = {}
        recorded_steps: list[TensorDictBase] = []
        carried = self.carried
        flags = self._flags
        rand, rng = self.action_spec.rand, self.outer.rng  # as the outer env's rand_action draws
        to_backend = self.to_backend
        root_obs[0] = self.obs
        limit = None
        for t in range(steps):
            traj_ids[t] = self.ids.current
            if counting:
                root_count[t] = self.counts  # type: ignore[index]
                if max_count is not None:
                    limit = self.counts + 1 >= max_count
            if tensordict_policy is not None:
                entries = {**carried, "observation": root_obs_t[t], "done": flags, "terminated": flags}
                entries["truncated"] = flags
                if counting:
                    entries["step_count"] = root_count_t[t]  # type: ignore[index]
                data = TensorDict(entries, batch_size=self.batch_size)
                returned = tensordict_policy(data)
                data = data if returned is None else returned
                action = data.get("action", None)
                if action is None:
                    raise KeyError(f"The policy wrote no 'action'; it wrote {sorted(map(str, data.keys(True, True)))}.")
                if not self._checked or self._cast_actions:
                    action = self._check_action(action)
                    data.set("action", action)
                recorded_steps.append(data)
                carried = _carried_entries(data)
                carried.pop("step_count", None)
            elif policy is None:
                action = rand(None, generator=rng)
                recorded.setdefault("action", []).append(action)
            else:
                obs_view = root_obs_t[t]
                values = {**carried, "observation": obs_view, "done": flags, "terminated": flags, "truncated": flags}
                if counting:
                    values["step_count"] = count_view = root_count_t[t]  # type: ignore[index]
                policy(values)
                action = values.get("action")
                if action is None:
                    raise KeyError(f"The policy wrote no 'action'; the step holds {sorted(values)}.")
                if not self._checked or self._cast_actions:
                    values["action"] = action = self._check_action(action)
                carried = {}
                for key, value in values.items():
                    if value is flags or value is obs_view or (counting and value is count_view):
                        continue
                    recorded.setdefault(key, []).append(value)
                    if key not in _ENV_ROOT_KEYS and key != "action":
                        carried[key] = value
            following = root_obs[t + 1] if t + 1 < steps else self.obs
            done = self._step(to_backend(action), t, next_obs, reward, terminated, truncated, following, limit)
            if counting:
                self.counts += 1  # in place: a 0-d array stays an array
            if done is not None:
                self.ids.renew(torch.from_numpy(done))
                if counting:
                    self.counts[done] = 0
        self.carried = carried
        policy_data = self.env._stack_steps(recorded_steps, contiguous=True) if recorded_steps else None
        arrays = (root_obs, next_obs, reward, terminated, truncated)
        return self._assemble(steps, *arrays, traj_ids, recorded, root_count, policy_data)

    def _step(
        self,
        action: Any,
        t: int,
        next_obs: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        following: np.ndarray,
        limit: np.ndarray | None,
    ) -> np.ndarray | None:
        """Steps every simulator at time ``t``; writes where the env stands next into
        ``following`` (reset observations where done); returns the done mask, if any.
        ``limit`` marks the envs that a step counter truncates at this step.

        A simulator off its declared observation space is named at no cost per step: a
        failed write is translated (the ``try`` costs nothing when nothing fails), and
        the first step of each batch (``t == 0``) checks what numpy would broadcast
        silently (a scalar into a row)."""
        obs: Any = None
        where = "step()"
        if self.mode == "serial":
            any_done = False
            next_t, reward_t, term_t, trunc_t = next_obs[t], reward[t], terminated[t], truncated[t]
            wrapper = self.wrappers[0]
            try:
                for i, wrapper in enumerate(self.wrappers):
                    obs, r, te, tr, _ = wrapper._env.step(action[i])
                    if t == 0:
                        check_observation(wrapper, obs, where)
                    if limit is not None and limit[i]:
                        tr = True
                    next_t[i] = obs
                    reward_t[i] = r
                    term_t[i] = te
                    trunc_t[i] = tr
                    if te or tr:
                        any_done = True
                        where = "reset()"
                        obs = wrapper._reset_backend()[0]
                    following[i] = obs
                    where = "step()"
            except (ValueError, TypeError) as err:
                explain_observation_error(wrapper, obs, where, err)
            return np.logical_or(term_t, trunc_t) if any_done else None
        if self.mode == "single":
            wrapper = self.wrappers[0]
            try:
                obs, r, te, tr, _ = wrapper._env.step(action)
                if t == 0:
                    check_observation(wrapper, obs, where)
                if limit is not None and limit:
                    tr = True
                next_obs[t] = obs
                reward[t] = r
                terminated[t] = te
                truncated[t] = tr
                if te or tr:
                    where = "reset()"
                    obs = wrapper._reset_backend()[0]
                following[...] = obs
            except (ValueError, TypeError) as err:
                explain_observation_error(wrapper, obs, where, err)
            return np.asarray(True) if (te or tr) else None
        try:
            obs, r, te, tr = self.group.step(action)
            if t == 0:
                check_observation(self.env, obs, where)
            next_obs[t] = obs
            reward[t] = np.asarray(r).reshape(reward[t].shape)
            terminated[t] = np.asarray(te).reshape(terminated[t].shape)
            truncated[t] = np.asarray(tr).reshape(truncated[t].shape)
            if limit is not None:
                truncated[t] |= limit
            done = terminated[t] | truncated[t]
            if done.any():
                where = "reset()"
                obs = self.group.reset_done(done, obs)
                following[...] = obs
                return done
            following[...] = obs
        except (ValueError, TypeError) as err:
            explain_observation_error(self.env, obs, where, err)
        return None

    def _assemble(
        self,
        steps: int,
        root_obs: np.ndarray,
        next_obs: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        traj_ids: torch.Tensor,
        recorded: dict[str, list[torch.Tensor]],
        root_count: np.ndarray | None,
        policy_data: TensorDictBase | None = None,
    ) -> TensorDictBase:
        nb = self.nb
        batch_size = torch.Size([*self.batch_size, steps])

        def arrange(array: np.ndarray | torch.Tensor, trailing_one: bool = False) -> torch.Tensor:
            tensor = torch.from_numpy(array) if isinstance(array, np.ndarray) else array
            if trailing_one:
                tensor = tensor.unsqueeze(-1)
            return tensor.movedim(0, nb).contiguous() if nb else tensor

        flags = torch.zeros((*batch_size, 1), dtype=torch.bool)
        done = np.logical_or(terminated, truncated)
        entries: dict[str, Any] = {
            "observation": arrange(root_obs),
            "done": flags,
            "terminated": flags.clone(),
            "truncated": flags.clone(),
        }
        for key, values in recorded.items():
            entries[key] = torch.stack(values, nb)
        entries["next"] = {
            "observation": arrange(next_obs),
            "reward": arrange(reward, True),
            "done": arrange(done, True),
            "terminated": arrange(terminated, True),
            "truncated": arrange(truncated, True),
        }
        if root_count is not None:
            entries["step_count"] = arrange(root_count, True)
            entries["next"]["step_count"] = arrange(root_count + 1, True)
        entries["collector"] = {"traj_ids": arrange(traj_ids)}
        if policy_data is None:
            out = TensorDict(entries, batch_size=batch_size)
        else:  # what the policy wrote, with the env's data over it (as the generic loop has it)
            out = policy_data
            env_next = TensorDict(entries.pop("next"), batch_size=batch_size)
            out.update(entries)
            written_next = out.get("next", None)
            if written_next is None:
                out.set("next", env_next)
            else:
                written_next.update(env_next)
        out.names = [None] * nb + ["time"]
        moved_on = getattr(self.env, "_moved_on", None)
        if moved_on is not None:  # a SerialEnv keeps track of where its sub-envs stand
            moved_on(out.exclude("step_count", ("next", "step_count")) if root_count is not None else out)
        return out
