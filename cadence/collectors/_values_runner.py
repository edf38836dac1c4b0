"""(Internal to the collectors.) The runner of envs that step on plain tensors.

A ``TransformedEnv`` whose transforms all ``steps_on_values`` over a backend that steps on
values (a stock gymnasium env; see :mod:`cadence.envs.step_values`) needs no TensorDict
inside a batch: the policy, compiled to a function on a dict of tensors, writes the
action into the step's entries, the env steps and transforms them as
:class:`~cadence.envs.step_values.StepValues`, the next input is made by moving entries
between dicts (``step_mdp``'s rule), and each entry is stacked once at the end of the
batch. Resets (rare) go through the env's generic ``_reset_done`` on a TensorDict.

The batches are the generic runner's, entry for entry (the tests compare them): the same
keys, dtypes and values, ``("collector", "traj_ids")``, the last dim named ``"time"``.

Examples:
    >>> from cadence.envs import GymEnv, RewardSum, StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(5))
    >>> env.append_transform(RewardSum())  # doctest: +ELLIPSIS
    TransformedEnv(...)
    >>> values_runner_applies(env)
    True
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.collectors._runners import TRAJ_KEY, TrajectoryIds, _done_keys
from cadence.envs.common import EnvBase
from cadence.envs.step_values import StepValues
from cadence.modules.tensor_view import TensorStep

__all__ = ["ValuesRunner", "values_runner_applies"]


def _flat_keys(env: EnvBase) -> bool:
    specs = (env.full_observation_spec, env.full_done_spec, env.full_reward_spec, env.full_action_spec,
             env.full_state_spec)
    return all(type(key) is str for spec in specs for key in spec.keys(True, True))


def values_runner_applies(env: EnvBase) -> bool:
    """Whether ``env``'s steps run on plain tensors, with flat keys, on the CPU, without
    type checks or auto-reset (what :class:`ValuesRunner` needs)."""
    return (
        env.device in (None, torch.device("cpu"))
        and not env.run_type_checks
        and not env.auto_reset
        and env._values_step_applies()
        and _flat_keys(env)
    )


def _entries(td: TensorDictBase) -> dict[str, torch.Tensor]:
    """The root entries of a flat tensordict (no sub-tensordicts but ``"next"``, dropped)."""
    return {key: value for key, value in td.items() if key != "next"}


class ValuesRunner:
    """Steps ``env`` on dicts of tensors (see the module).

    Args:
        env: an env for which :func:`values_runner_applies`.
        ids: its trajectory ids.
    """

    def __init__(self, env: EnvBase, ids: TrajectoryIds) -> None:
        self.env = env
        self.ids = ids
        self.root: dict[str, torch.Tensor] | None = None  # the next input's entries
        done_keys = _done_keys(env)
        if done_keys != [("next", "done")]:
            raise ValueError(f"ValuesRunner needs one root 'done' shaped like the batch; {type(env).__name__} has {done_keys}")
        self._action_keys = list(env.action_keys)
        self._reward_keys = set(env.reward_keys)
        # step_mdp's rule: the action and the step's entries under "next" leave the root,
        # the rewards do not come back from "next"
        self._dropped_from_root = {"next", *self._action_keys, *self._reward_keys}

    def reset(self) -> None:
        """Resets the env now; the next batch starts new trajectories."""
        self.root = _entries(self.env.reset())
        self.ids.restart()

    def state(self) -> TensorDictBase | None:
        """Where the env stands: its next input, as the generic runner keeps it."""
        if self.root is None:
            return None
        return TensorDict(self.root, batch_size=self.env.batch_size).clone()

    def load_state(self, shuttle: TensorDictBase | None) -> None:
        """Continues from ``shuttle`` (what :meth:`state` returned)."""
        self.root = None if shuttle is None else _entries(shuttle.clone())

    def collect(self, steps: int, policy: TensorStep | None) -> TensorDictBase:
        """Runs ``steps`` steps with the compiled ``policy``, or random actions (``None``)
        drawn as the env's ``rand_action`` draws them."""
        if self.root is None:
            self.reset()
        env, batch_size = self.env, self.env.batch_size
        single_action = self._action_keys[0] if len(self._action_keys) == 1 else None
        roots: list[dict[str, torch.Tensor]] = []
        nexts: list[dict[Any, torch.Tensor]] = []
        ids: list[torch.Tensor] = []
        dropped, rewards = self._dropped_from_root, self._reward_keys
        root = self.root
        assert root is not None
        for _ in range(steps):
            values = dict(root)
            if policy is None:  # as env.rand_action draws
                if single_action is not None:
                    values[single_action] = env.full_action_spec[single_action].rand(None, generator=env.rng)
                else:
                    values.update(env.full_action_spec.rand(None, generator=env.rng).items())
            else:
                policy(values)
            ids.append(self.ids.current)
            step = StepValues(values, batch_size, env.device)
            next_values = env._step_as_values(step).entries
            roots.append(values)
            nexts.append(next_values)
            root = {key: value for key, value in values.items() if key not in dropped}
            for key, value in next_values.items():
                if key not in rewards:
                    root[key] = value
            done = next_values["done"]
            if done.any():
                self.ids.renew(done.reshape(*batch_size, -1).any(-1))
                next_root, _ = env._reset_done(TensorDict(root, batch_size=batch_size))
                root = _entries(next_root)
        self.root = root
        return self._assemble(roots, nexts, ids)

    def _assemble(
        self, roots: list[dict[str, torch.Tensor]], nexts: list[dict[Any, torch.Tensor]], ids: list[torch.Tensor]
    ) -> TensorDictBase:
        env = self.env
        nb = env.batch_dims
        batch_size = torch.Size([*env.batch_size, len(roots)])

        def stacked(steps: list[dict[Any, torch.Tensor]], where: str) -> dict[Any, torch.Tensor]:
            keys = list(steps[0])
            out = {}
            for key in keys:
                try:
                    out[key] = torch.stack([step[key] for step in steps], nb)
                except (KeyError, RuntimeError) as err:
                    raise ValueError(
                        f"The steps' {where} entry {key!r} does not stack ({err!r}); the env's data does not keep "
                        "to its specs: check_env_specs(env) names the entry."
                    ) from err
            return out

        entries: dict[Any, Any] = stacked(roots, "root")
        next_entries = stacked(nexts, "next")
        nested: dict[str, Any] = {}
        for key, value in next_entries.items():
            if type(key) is str:
                nested[key] = value
            else:
                level = nested
                for part in key[:-1]:
                    level = level.setdefault(part, {})
                level[key[-1]] = value
        entries["next"] = nested
        entries[TRAJ_KEY[0]] = {TRAJ_KEY[1]: torch.stack(ids, nb)}
        out = TensorDict(entries, batch_size=batch_size)
        out.names = [None] * nb + ["time"]
        return out
