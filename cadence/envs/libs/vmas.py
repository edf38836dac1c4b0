"""VMAS, the vectorized multi-agent simulator in torch: ``VmasWrapper`` around a built env, ``VmasEnv`` by name.

A VMAS env simulates ``num_envs`` copies of a scenario at once, in torch, on any device:
the wrapper's ``batch_size`` is ``(num_envs,)`` and its data never leave torch. Agents
are gathered in groups (``group_map``), each a nested TensorDict of batch size
``(num_envs, n_agents)`` holding the agents' ``"observation"``, ``"action"``,
``"reward"`` (shape ``(..., 1)``) and the scenario's per-agent ``"info"`` entries; the
``"done"`` and ``"terminated"`` flags are shared by all agents, at the root (VMAS ends
episodes for every agent at once; ``max_steps`` ends them as a termination, as VMAS
does). By default agents named ``"<name>_<int>"`` are grouped by ``"<name>"`` (a lone
group ``"agent"`` is called ``"agents"``); if any name breaks that pattern, all agents
share the group ``"agents"``. Agents of one group that differ in shape are stacked
lazily (see :class:`~cadence.data.StackedComposite`).

Seeding: VMAS draws its random numbers from torch's global generator; ``set_seed``
seeds it through ``env.seed`` (VMAS' own API), so a seed reproduces a run in this
process.

Examples:
    >>> import pytest; vmas = pytest.importorskip("vmas")  # skips without the vmas extra
    >>> from cadence.envs.libs.vmas import VmasEnv
    >>> env = VmasEnv("balance", num_envs=3, n_agents=5, seed=0)
    >>> data = env.rand_step()
    >>> data["agents", "action"].shape, data["next", "agents", "observation"].shape
    (torch.Size([3, 5, 2]), torch.Size([3, 5, 16]))
    >>> data["next", "agents", "info", "pos_rew"].shape, data["next", "done"].shape
    (torch.Size([3, 5, 1]), torch.Size([3, 1]))
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from cadence._utils import quoted
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
from cadence.data.dtypes import cast
from cadence.data.specs import holds_ragged
from cadence.envs.common import EnvBase
from cadence.envs.marl_grouping import MarlGroupMapType, check_marl_grouping
from cadence.envs.step_values import StepValues, flat_entries
from cadence.envs.utils import read_entry

__all__ = ["VmasEnv", "VmasWrapper"]

_INSTALL_HINT = 'pip install "cadence[vmas]"'


def _import_vmas() -> Any:
    try:
        return importlib.import_module("vmas")
    except ImportError as err:
        raise ImportError(f"VmasEnv needs VMAS: {_INSTALL_HINT}") from err


def default_group_map(agent_names: list[str]) -> dict[str, list[str]]:
    """VMAS' default groups: by ``"<name>_<int>"`` prefix, else one group ``"agents"``.

    Args:
        agent_names: the scenario's agent names, in order.

    Examples:
        >>> default_group_map(["agent_0", "agent_1"])
        {'agents': ['agent_0', 'agent_1']}
        >>> default_group_map(["adversary_0", "agent_0", "agent_1"])
        {'adversary': ['adversary_0'], 'agent': ['agent_0', 'agent_1']}
        >>> default_group_map(["alice", "bob_0"])
        {'agents': ['alice', 'bob_0']}
    """
    groups: dict[str, list[str]] = {}
    for name in agent_names:
        prefix, _, number = name.rpartition("_")
        if not (prefix and number.isdigit()):
            return MarlGroupMapType.ALL_IN_ONE_GROUP.get_group_map(agent_names)
        groups.setdefault(prefix, []).append(name)
    if list(groups) == ["agent"]:  # the reference's name for a lone group of "agent_<i>"s
        groups = {"agents": groups["agent"]}
    return groups


def _space_to_spec(space: Any, batch: torch.Size, categorical: bool, device: torch.device | None) -> TensorSpec:
    """A VMAS space (``gym`` or ``gymnasium``: VMAS uses whichever is installed) as a spec."""
    kind = type(space).__name__
    if kind == "Box":
        dtype = torch.from_numpy(np.zeros(0, dtype=space.dtype)).dtype
        shape = batch + (tuple(space.shape) or (1,))
        low = torch.as_tensor(np.asarray(space.low), dtype=dtype).reshape(-1)
        high = torch.as_tensor(np.asarray(space.high), dtype=dtype).reshape(-1)
        if not (low.isfinite().any() or high.isfinite().any()):
            return Unbounded(shape=shape, dtype=dtype, device=device)
        return Bounded(low.expand(shape).clone(), high.expand(shape).clone(), shape=shape, dtype=dtype, device=device)
    if kind == "Discrete":
        n = int(space.n)
        if categorical:
            return Categorical(n, shape=batch, device=device)
        return OneHot(n, shape=batch + (n,), device=device)
    if kind == "MultiDiscrete":
        nvec = torch.as_tensor(np.asarray(space.nvec), dtype=torch.long)
        if categorical:
            return MultiCategorical(nvec, shape=batch + tuple(nvec.shape), device=device)
        return MultiOneHot(nvec, shape=batch + (int(nvec.sum()),), device=device)
    if kind == "Dict":
        return Composite(
            {key: _space_to_spec(sub, batch, categorical, device) for key, sub in space.spaces.items()},
            shape=batch,
            device=device,
        )
    raise TypeError(f"VmasWrapper: no spec for a VMAS space of type {kind} ({space})")


class VmasWrapper(EnvBase):
    """Wraps a built VMAS env (``vmas.make_env(..., wrapper=None)``).

    Args:
        env: the VMAS ``Environment``.
        categorical_actions: discrete actions as indices rather than one-hot (for envs
            built with ``continuous_actions=False``).
        group_map: how agents are grouped: a :class:`~cadence.envs.MarlGroupMapType` or a
            mapping from group name to agent names; by default as described in the module.
        device: must be the env's device when given.

    Examples:
        >>> import pytest; vmas = pytest.importorskip("vmas")  # skips without the vmas extra
        >>> from cadence.envs.libs.vmas import VmasWrapper
        >>> env = VmasWrapper(vmas.make_env("navigation", num_envs=2, n_agents=2, seed=0, device="cpu"))
        >>> env.group_map, env.batch_size
        ({'agents': ['agent_0', 'agent_1']}, torch.Size([2]))
    """

    draws_from_rng = False  # VMAS draws from torch's global generator, which its seed sets

    def __init__(
        self,
        env: Any,
        *,
        categorical_actions: bool = True,
        group_map: MarlGroupMapType | Mapping[str, list[str]] | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        vmas = _import_vmas()
        if not isinstance(env, vmas.simulator.environment.Environment):
            raise TypeError(f"VmasWrapper wraps a vmas Environment (vmas.make_env(..., wrapper=None)), got {type(env).__name__}")
        env_device = torch.device(env.device)
        if device is not None and _as_device(device, "VmasWrapper") != env_device:
            raise ValueError(f"VmasWrapper: device={quoted(device)} but the VMAS env runs on {env_device}")
        super().__init__(device=env_device, batch_size=(env.num_envs,), allow_done_after_reset=True)
        self._env = env
        self.categorical_actions = categorical_actions
        self.continuous_actions = bool(env.continuous_actions)
        self.agent_names: list[str] = [agent.name for agent in env.agents]
        self._agent_index = {name: i for i, name in enumerate(self.agent_names)}
        if group_map is None:
            group_map = default_group_map(self.agent_names)
        elif isinstance(group_map, MarlGroupMapType):
            group_map = group_map.get_group_map(self.agent_names)
        else:
            group_map = {str(group): list(agents) for group, agents in group_map.items()}
        check_marl_grouping(group_map, self.agent_names)
        self.group_map: dict[str, list[str]] = group_map
        self._group_indices = {group: [self._agent_index[a] for a in agents] for group, agents in group_map.items()}
        self._make_specs()

    @property
    def n_agents(self) -> int:
        """How many agents the scenario has."""
        return len(self.agent_names)

    @property
    def scenario(self) -> Any:
        """The VMAS scenario object."""
        return self._env.scenario

    # ------------------------------------------------------------------ specs
    def _make_specs(self) -> None:
        env, batch, device = self._env, self.batch_size, self.device
        actions, observations, rewards = Composite(shape=batch), Composite(shape=batch), Composite(shape=batch)
        self._ragged: dict[str, bool] = {}
        self._info_keys: dict[str, list[str]] = {}
        for group, indices in self._group_indices.items():
            action = torch.stack(
                [_space_to_spec(env.action_space[i], batch, self.categorical_actions, device) for i in indices], 1
            )
            observation = torch.stack([_space_to_spec(env.observation_space[i], batch, True, device) for i in indices], 1)
            group_shape = batch + (len(indices),)
            actions[group] = Composite(action=action, shape=group_shape)
            group_observation = Composite(observation=observation, shape=group_shape)
            info = self._info_spec(indices, group_shape)
            self._info_keys[group] = list(info.keys()) if info is not None else []
            if info is not None:
                group_observation["info"] = info
            observations[group] = group_observation
            rewards[group] = Composite(reward=Unbounded(shape=group_shape + (1,), device=device), shape=group_shape)
            self._ragged[group] = holds_ragged(action) or holds_ragged(group_observation)
        flag = Categorical(2, shape=batch + (1,), dtype=torch.bool, device=device)
        self.observation_spec = observations
        self.action_spec = actions
        self.reward_spec = rewards
        self.done_spec = Composite(done=flag, terminated=flag.clone(), shape=batch)
        self._any_ragged = any(self._ragged.values())

    def _info_spec(self, indices: list[int], group_shape: torch.Size) -> Composite | None:
        """The scenario's ``info(agent)`` entries that every agent of the group reports, as float32."""
        infos = [self.scenario.info(self._env.agents[i]) for i in indices]
        shared = set(infos[0]).intersection(*infos[1:]) if infos else set()
        entries = {}
        for key in sorted(shared):
            trailing = {tuple(self._unsqueezed(info[key]).shape[1:]) for info in infos}
            if len(trailing) == 1:
                entries[key] = Unbounded(shape=group_shape + trailing.pop(), device=self.device)
        return Composite(entries, shape=group_shape) if entries else None

    def _unsqueezed(self, value: torch.Tensor) -> torch.Tensor:
        """A per-env value with at least one dim after the env dim (``(num_envs,)`` -> ``(num_envs, 1)``)."""
        return value.unsqueeze(-1) if value.ndim == 1 else value

    def rand_step(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Takes a step with random actions; without an input, from where the simulator stands.

        A VMAS env is reset when it is built and always stands somewhere, so (as in the
        reference, and the seed's multi-agent example) ``rand_step()`` steps it without a
        reset first: the result holds the actions and the ``"next"`` data only.

        Examples:
            >>> import pytest; vmas = pytest.importorskip("vmas")  # skips without the vmas extra
            >>> env = VmasEnv("balance", num_envs=2, n_agents=3, seed=0)
            >>> sorted(env.rand_step().keys())
            ['agents', 'next']
        """
        if tensordict is not None:
            return super().rand_step(tensordict)
        return self.step(self.rand_action())

    # ---------------------------------------------------------------- backend
    def _set_seed(self, seed: int | None) -> None:
        self._env.seed(seed)

    def close(self) -> None:
        """Nothing to release: VMAS holds only tensors."""

    # ------------------------------------------------------------------ reset
    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        reset = None if tensordict is None else tensordict.get("_reset", None)
        if reset is None or reset.all():
            self._env.reset(return_observations=False)
        else:
            for index in reset.reshape(-1).nonzero().reshape(-1).tolist():
                self._env.reset_at(index, return_observations=False)
        observations, dones, infos = self._env.get_from_scenario(
            get_observations=True, get_infos=True, get_rewards=False, get_dones=True
        )
        return self._output(self._entries(observations, None, dones, infos))

    # ------------------------------------------------------------------- step
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._output(self._step_entries(tensordict))

    def _step_values(self, tensordict: TensorDictBase | StepValues) -> StepValues:
        # _step's entries under tuple keys, with no TensorDict built for the step or its groups
        if self._any_ragged:  # agents of different shapes: lazily stacked
            return super()._step_values(tensordict)
        return StepValues(flat_entries(self._step_entries(tensordict)), self.batch_size, self.device)

    def _step_entries(self, tensordict: TensorDictBase | StepValues) -> dict[str, Any]:
        """One step of every agent: its entries (see :meth:`_entries`)."""
        actions: list[torch.Tensor | None] = [None] * self.n_agents
        for group, indices in self._group_indices.items():
            spec = self.full_action_spec[group, "action"]
            values = read_entry(tensordict, (group, "action"), spec)
            per_agent = values if isinstance(values, list) else values.unbind(1)
            for i, value in zip(indices, per_agent):
                actions[i] = self._to_backend(value)
        observations, rewards, dones, infos = self._env.step(actions)
        return self._entries(observations, rewards, dones, infos)

    def _to_backend(self, action: torch.Tensor) -> torch.Tensor:
        if self.continuous_actions or self.categorical_actions:
            return action
        if action.dtype == torch.bool:
            action = action.view(torch.uint8)  # argmax takes no bools; the same bytes
        return action.argmax(-1)  # one-hot -> index, as VMAS takes discrete actions

    # ------------------------------------------------------------------- data
    def _output(self, entries: dict[str, Any]) -> TensorDictBase:
        """A step's or a reset's entries (:meth:`_entries`) as a TensorDict."""
        for group, indices in self._group_indices.items():
            data = entries[group]
            if isinstance(data, dict):
                entries[group] = _new_tensordict(data, self.batch_size + (len(indices),), self.device)
        return _new_tensordict(entries, self.batch_size, self.device)

    def _entries(
        self,
        observations: list[Any],
        rewards: list[torch.Tensor] | None,
        dones: torch.Tensor,
        infos: list[dict[str, torch.Tensor]],
    ) -> dict[str, Any]:
        """A step's entries (a reset's: no rewards): the root flags, and each group's entries
        stacked on the agent dim, in a dict (a lazy stack of TensorDicts where its agents
        differ in shape)."""
        done = dones.reshape(*self.batch_size, 1)
        entries: dict[str, Any] = {"done": done, "terminated": done.clone()}
        for group, indices in self._group_indices.items():
            group_shape = self.batch_size + (len(indices),)
            if self._ragged[group]:
                entries[group] = self._ragged_group(group, indices, observations, rewards, infos)
                continue
            data: dict[str, Any] = {"observation": _stack_agents([observations[i] for i in indices], group_shape)}
            if rewards is not None:
                data["reward"] = torch.stack([rewards[i] for i in indices], 1).unsqueeze(-1)
            if self._info_keys[group]:
                data["info"] = _new_tensordict(
                    {
                        key: cast(torch.stack([self._unsqueezed(infos[i][key]) for i in indices], 1), torch.float32)
                        for key in self._info_keys[group]
                    },
                    group_shape,
                    self.device,
                )
            entries[group] = data
        return entries

    def _ragged_group(
        self,
        group: str,
        indices: list[int],
        observations: list[Any],
        rewards: list[torch.Tensor] | None,
        infos: list[dict[str, torch.Tensor]],
    ) -> TensorDictBase:
        parts = []
        for i in indices:
            data: dict[str, Any] = {"observation": _as_data(observations[i], self.batch_size)}
            if rewards is not None:
                data["reward"] = rewards[i].unsqueeze(-1)
            if self._info_keys[group]:
                data["info"] = TensorDict(
                    {key: self._unsqueezed(infos[i][key]).to(torch.float32) for key in self._info_keys[group]},
                    batch_size=self.batch_size,
                )
            parts.append(TensorDict(data, batch_size=self.batch_size, device=self.device))
        return LazyStackedTensorDict.lazy_stack(parts, len(self.batch_size))


_new_tensordict = getattr(TensorDict, "_new_unsafe", TensorDict)  # entries built to their specs: skip the checks


def _as_data(value: Any, batch: torch.Size) -> Any:
    """One agent's observation: a tensor, or a TensorDict for a dict observation."""
    if isinstance(value, Mapping):
        return TensorDict({k: _as_data(v, batch) for k, v in value.items()}, batch_size=batch)
    return value.unsqueeze(-1) if value.ndim == 1 else value


def _stack_agents(values: list[Any], group_shape: torch.Size) -> Any:
    """The agents' observations stacked on the agent dim (after the env dim)."""
    if isinstance(values[0], Mapping):
        return _new_tensordict(
            {key: _stack_agents([v[key] for v in values], group_shape) for key in values[0]}, group_shape, None
        )
    return torch.stack([v.unsqueeze(-1) if v.ndim == 1 else v for v in values], 1)


def _as_device(device: torch.device | str, caller: str) -> torch.device:
    """``torch.device(device)``, or a ``ValueError`` naming ``device`` (torch's own error
    quotes the whole string)."""
    try:
        return torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(
            f"{caller}: device must be a torch device ('cpu', 'cuda:0'...), got {quoted(device)}"
        ) from None


def _check_count(name: str, value: Any, meaning: str) -> None:
    """Raises naming ``name`` unless ``value`` is an int >= 1 (a bool is no count)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"VmasEnv: {name} must be an int >= 1 ({meaning}), got {type(value).__name__} {quoted(value)}")
    if value < 1:
        raise ValueError(f"VmasEnv: {name} must be an int >= 1 ({meaning}), got {value}")


class VmasEnv(VmasWrapper):
    """Builds a VMAS scenario by name and wraps it (see :class:`VmasWrapper`).

    Args:
        scenario: the scenario's name (``"balance"``, ``"navigation"``, ``"transport"``...) or a
            VMAS ``BaseScenario`` instance.
        num_envs: how many copies VMAS simulates at once (the env's batch size).
        continuous_actions: continuous (``True``) or discrete actions.
        max_steps: end every episode after this many steps (a termination); ``None`` for the
            scenario's own horizon.
        categorical_actions: discrete actions as indices rather than one-hot.
        seed: the seed VMAS starts from.
        group_map: see :class:`VmasWrapper`.
        device: where VMAS simulates (default CPU).
        scenario_kwargs: the scenario's arguments (``n_agents=5``...), merged with ``**kwargs``.
        **kwargs: more scenario arguments.

    Raises:
        TypeError: a ``num_envs`` or ``max_steps`` that is not an int, or a ``scenario``
            that is neither a name nor a VMAS scenario.
        ValueError: ``num_envs`` or ``max_steps`` below 1, or a name VMAS does not know
            (checked before VMAS builds anything).

    Examples:
        >>> import pytest; vmas = pytest.importorskip("vmas")  # skips without the vmas extra
        >>> env = VmasEnv("balance", num_envs=4, n_agents=3, max_steps=5, seed=0)
        >>> data = env.rollout(10)
        >>> data.batch_size, bool(data["next", "done"][:, -1].all())
        (torch.Size([4, 5]), True)
        >>> VmasEnv("balance", num_envs=0)
        Traceback (most recent call last):
        ...
        ValueError: VmasEnv: num_envs must be an int >= 1 (how many copies VMAS simulates at once), got 0
    """

    def __init__(
        self,
        scenario: str | Any,
        *,
        num_envs: int,
        continuous_actions: bool = True,
        max_steps: int | None = None,
        categorical_actions: bool = True,
        seed: int | None = None,
        group_map: MarlGroupMapType | Mapping[str, list[str]] | None = None,
        device: torch.device | str | None = None,
        scenario_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        _check_count("num_envs", num_envs, "how many copies VMAS simulates at once")
        if max_steps is not None:
            _check_count("max_steps", max_steps, "the steps after which every episode ends, or None")
        vmas = _import_vmas()
        known = [*vmas.scenarios, *vmas.mpe_scenarios, *vmas.debug_scenarios]
        if isinstance(scenario, str):
            if scenario not in known:  # only VMAS' own names: never a path or a module of the user's
                raise ValueError(f"VmasEnv: no VMAS scenario {quoted(scenario)}; VMAS has {sorted(known)}")
        elif not isinstance(scenario, vmas.simulator.scenario.BaseScenario):
            raise TypeError(
                f"VmasEnv: scenario must be a VMAS scenario's name or a vmas BaseScenario instance, got "
                f"{type(scenario).__name__} {quoted(scenario)}"
            )
        env = vmas.make_env(
            scenario=scenario,
            num_envs=num_envs,
            device=torch.device("cpu") if device is None else _as_device(device, "VmasEnv"),
            continuous_actions=continuous_actions,
            max_steps=max_steps,
            seed=seed,
            wrapper=None,
            **{**dict(scenario_kwargs or {}), **kwargs},
        )
        super().__init__(env, categorical_actions=categorical_actions, group_map=group_map)
        self.scenario_name = scenario if isinstance(scenario, str) else type(scenario).__name__
