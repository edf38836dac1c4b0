"""(Internal to the collectors.) The array runner: an env's simulators stepped straight
into preallocated arrays, through the array protocol (:mod:`cadence.envs.array_simulator`).

It serves any env with an array simulator (``env._array_simulator()``: gymnasium, gym-like
backends such as dm_control, serial batches of them), alone or under a lone
``StepCounter`` (what ``max_frames_per_traj`` appends), on the CPU. The policy, compiled
to tensors, runs on a dict of the step's entries: the env's root entries (each
observation entry and the done flags, False after a step that did not end the episode
and after a reset) plus what the policy wrote at the previous step (its root entries but
the action, as ``step_mdp`` carries them); a policy that does not compile is called on
one small tensordict per step instead. Under the ``StepCounter`` the runner counts the
steps itself, as the transform would: ``"step_count"`` at the root (0 after a reset) and
under ``"next"``, truncation (and done) at ``max_steps``.

Its batches are the generic runner's, entry for entry (the tests compare them).

Examples:
    >>> from cadence.envs import GymEnv, RewardSum, SerialEnv, StepCounter, TransformedEnv
    >>> array_runner_applies(SerialEnv(2, lambda: GymEnv("Pendulum-v1")))
    True
    >>> array_runner_applies(TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(10)))
    True
    >>> array_runner_applies(TransformedEnv(GymEnv("Pendulum-v1"), RewardSum()))
    False
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.collectors._runners import TrajectoryIds
from cadence.envs.array_simulator import (
    ArraySimulator,
    StepArrays,
    carried_entries,
    env_entry_names,
    root_flag_names,
    with_env_data,
)
from cadence.envs.common import EnvBase
from cadence.envs.utils import action_in_spec_dtype
from cadence.modules.tensor_view import TensorStep

__all__ = ["ArrayRunner", "array_runner_applies"]

_CPU = (None, torch.device("cpu"))


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


def _simulator(env: EnvBase) -> tuple[ArraySimulator | None, EnvBase, Any]:
    """``(array simulator or None, base env, StepCounter or None)``."""
    if env.device not in _CPU or env.run_type_checks:
        return None, env, None
    base, counter = _step_counter(env)
    if base.device not in _CPU or base.run_type_checks or base.action_keys != ["action"]:
        return None, base, counter
    return base._array_simulator(), base, counter


def array_runner_applies(env: EnvBase) -> bool:
    """Whether ``env`` (or the base env under its lone ``StepCounter``) has an array
    simulator the runner can step (see the module)."""
    return _simulator(env)[0] is not None


class ArrayRunner:
    """Steps an env's array simulator for the collector (see the module).

    Args:
        env: an env for which :func:`array_runner_applies`.
        ids: its trajectory ids.
    """

    def __init__(self, env: EnvBase, ids: TrajectoryIds) -> None:
        simulator, base, counter = _simulator(env)
        assert simulator is not None, "ArrayRunner needs an env for which array_runner_applies()"
        self.simulator = simulator
        self.outer = env
        self.env = base
        self.ids = ids
        self.keys = simulator.observation_keys
        self.counting = counter is not None
        self.max_count = None if counter is None else counter.max_steps
        self.counts = np.zeros(tuple(base.batch_size), dtype=np.int64)
        self.batch_size = base.batch_size
        self.nb = base.batch_dims
        self.action_spec = env.full_action_spec["action"]
        self.obs: dict[str, np.ndarray] | None = None  # the observation the env stands at
        self.carried: dict[str, torch.Tensor] = {}
        self._env_keys = env_entry_names(self.keys)
        self._flags = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
        self._flag_names = root_flag_names(env)  # the root done flags the env declares (a counter adds "truncated")
        self._base_truncates = "truncated" in base.full_done_spec.keys()
        self._checked = False
        self._cast_actions = False

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Resets every simulator now; the next batch starts new trajectories."""
        arrays = StepArrays.allocate(self.env, self.keys, 0)
        self.simulator.write_reset(arrays)
        self.obs = {key: array[0].copy() for key, array in arrays.root_obs.items()}
        self.carried = {}
        self.counts = np.zeros_like(self.counts)
        self.ids.restart()

    def state(self) -> TensorDictBase | None:
        """Where the env stands, as the generic runner's next input would hold it."""
        if self.obs is None:
            return None
        entries: dict[str, Any] = {key: value.clone() for key, value in self.carried.items()}
        entries.update({key: torch.from_numpy(obs.copy()) for key, obs in self.obs.items()})
        for name in self._flag_names:
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
        self.simulator.stand_at(shuttle)  # a stateless env's state is in the shuttle
        self.obs = {key: shuttle.get(key).numpy().copy() for key in self.keys}
        self.carried = {
            key: value.clone()
            for key, value in shuttle.items()
            if key not in self._env_keys and key not in ("action", "collector", "next", "step_count")
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
        called on one small tensordict per step, or with random actions if both are ``None``."""
        if self.obs is None:
            self.reset()
        assert self.obs is not None
        arrays = StepArrays.allocate(self.env, self.keys, steps)
        time_first = (steps, *self.batch_size)
        traj_ids = torch.empty(time_first, dtype=torch.long)
        counting, max_count = self.counting, self.max_count
        root_count = np.empty(time_first, dtype=np.int64) if counting else None
        root_count_t = None if root_count is None else torch.from_numpy(root_count).unsqueeze(-1)
        roots = {key: torch.from_numpy(array) for key, array in arrays.root_obs.items()}
        for key, array in arrays.root_obs.items():
            array[0] = self.obs[key]
        recorded: dict[str, list[torch.Tensor]] = {}
        recorded_steps: list[TensorDictBase] = []
        carried = self.carried
        flags = self._flags
        rand, rng = self.action_spec.rand, self.outer.rng  # as the outer env's rand_action draws
        simulator = self.simulator
        step_into, to_backend = simulator.step_into, simulator.to_backend
        env_keys = self._env_keys
        limit = None
        for t in range(steps):
            traj_ids[t] = self.ids.current
            if counting:
                root_count[t] = self.counts  # type: ignore[index]
                if max_count is not None:
                    limit = self.counts + 1 >= max_count
            views = {key: root[t] for key, root in roots.items()}
            if tensordict_policy is not None:
                entries = {**carried, **views, **dict.fromkeys(self._flag_names, flags)}
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
                carried = carried_entries(data, self.keys)
                carried.pop("step_count", None)
            elif policy is None:
                action = rand(None, generator=rng)
                recorded.setdefault("action", []).append(action)
            else:
                values = {**carried, **views, **dict.fromkeys(self._flag_names, flags)}
                count_view = None
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
                    if value is flags or value is count_view or value is views.get(key):
                        continue
                    recorded.setdefault(key, []).append(value)
                    if key not in env_keys and key != "action":
                        carried[key] = value
            done = step_into(to_backend(action), t, arrays, limit)
            if counting:
                self.counts += 1  # in place: a 0-d array stays an array
            if done is not None:
                self.ids.renew(torch.from_numpy(done))
                if counting:
                    self.counts[done] = 0
        self.carried = carried
        self.obs = {key: array[steps].copy() for key, array in arrays.root_obs.items()}
        policy_data = self.env._stack_steps(recorded_steps, contiguous=True) if recorded_steps else None
        return self._assemble(steps, arrays, traj_ids, recorded, root_count, policy_data)

    def _assemble(
        self,
        steps: int,
        arrays: StepArrays,
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

        names = self._flag_names
        entries: dict[Any, Any] = {key: arrange(array[:steps]) for key, array in arrays.root_obs.items()}
        entries.update({name: torch.zeros((*batch_size, 1), dtype=torch.bool) for name in names})
        for key, values in recorded.items():
            entries[key] = torch.stack(values, nb)
        flags = arrays.flags()
        following: dict[Any, Any] = {key: arrange(array) for key, array in arrays.next_obs.items()}
        following["reward"] = arrange(arrays.reward, True)
        following.update({name: arrange(flags[name], True) for name in names})
        entries["next"] = following
        if root_count is not None:
            entries["step_count"] = arrange(root_count, True)
            following["step_count"] = arrange(root_count + 1, True)
        entries["collector"] = {"traj_ids": arrange(traj_ids)}
        if policy_data is None:
            out = TensorDict(entries, batch_size=batch_size)
        else:  # what the policy wrote, with the env's data over it (as the generic loop has it)
            env_next = TensorDict(entries.pop("next"), batch_size=batch_size)
            out = with_env_data(policy_data, entries, env_next)
        out.names = [None] * nb + ["time"]
        moved_on = getattr(self.env, "_moved_on", None)
        if moved_on is not None:  # a SerialEnv keeps track of where its sub-envs stand: its own entries
            counted = () if root_count is None else ("step_count", ("next", "step_count"))
            counted += () if self._base_truncates else ("truncated", ("next", "truncated"))
            moved_on(out.exclude(*counted) if counted else out)
        return out
