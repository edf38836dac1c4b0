"""PettingZoo: ``PettingZooWrapper`` around a built env (parallel or AEC), ``PettingZooEnv`` by name.

Agents are gathered in groups (``group_map``): each group is a nested TensorDict whose
batch dim is the group's agents, holding their ``"observation"``, ``"action"``,
``"reward"`` and ``"done"``/``"terminated"``/``"truncated"`` (shape ``(n_agents, 1)``),
and, where the env has them, ``"action_mask"`` (also written into the action spec, so
that random actions respect it), ``"info"`` entries and, with ``use_mask=True``, a
``"mask"`` of the agents that act at this step. The root holds the env-wide
``"done"``/``"terminated"``/``"truncated"``: any agent's (parallel envs) or all agents'
(AEC envs) unless ``done_on_any`` says otherwise, and, with ``return_state=True``, the
global ``"state"``.

Default groups: in a parallel env, agents named ``"<name>_<int>"`` share the group
``"<name>"`` (others get a group of their own); in an AEC (turn-based) env, each agent
is its own group. An AEC env steps only the acting agent (``agent_selection``): the
actions of the others are ignored, and ``use_mask=True`` (required there) marks who acts.
Agents of one group whose spaces differ in shape are stacked lazily (heterogeneous
groups: see :class:`~cadence.data.StackedComposite`).

The examples below start with a line that skips them where PettingZoo is not installed.

Examples:
    >>> import pytest; mpe2 = pytest.importorskip("mpe2")  # skips without the pettingzoo extra
    >>> from cadence.envs.libs.pettingzoo import PettingZooEnv
    >>> env = PettingZooEnv("simple_spread_v3", parallel=True, N=3)
    >>> env.group_map
    {'agent': ['agent_0', 'agent_1', 'agent_2']}
    >>> data = env.rollout(5)
    >>> data["next", "agent", "observation"].shape, data["next", "agent", "reward"].shape
    (torch.Size([5, 3, 18]), torch.Size([5, 3, 1]))
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from cadence._utils import quoted
from cadence.data import Categorical, Composite, MultiOneHot, OneHot, TensorSpec, Unbounded
from cadence.data.specs import holds_ragged
from cadence.envs.common import EnvBase
from cadence.envs.libs.gym import _action_converter, space_to_spec
from cadence.envs.marl_grouping import MarlGroupMapType, check_marl_grouping
from cadence.envs.step_values import StepValues, flat_entries
from cadence.envs.utils import read_entry

__all__ = ["PettingZooEnv", "PettingZooWrapper"]

_INSTALL_HINT = 'pip install "cadence[pettingzoo]"'

#: the packages whose submodules are PettingZoo envs (``<package>.<task>``, e.g. ``mpe2.simple_spread_v3``)
ENV_PACKAGES: tuple[str, ...] = (
    "mpe2",
    "pettingzoo.classic",
    "pettingzoo.butterfly",
    "pettingzoo.sisl",
    "pettingzoo.atari",
    "pettingzoo.mpe",
)
_TASK_NAME = re.compile(r"^[a-z][a-z0-9_]*_v[0-9]+$")
_DONE_FLAGS = ("done", "terminated", "truncated")


def _import_pettingzoo() -> Any:
    try:
        return importlib.import_module("pettingzoo")
    except ImportError as err:
        raise ImportError(f"PettingZooWrapper needs PettingZoo: {_INSTALL_HINT}") from err


def default_group_map(agent_names: list[str], parallel: bool) -> dict[str, list[str]]:
    """The groups an env gets without ``group_map``: by name prefix (parallel) or one per agent (AEC).

    Args:
        agent_names: the env's ``possible_agents``.
        parallel: whether the env is a ``pettingzoo.ParallelEnv``.

    Examples:
        >>> default_group_map(["agent_0", "agent_1", "adversary_0", "referee"], parallel=True)
        {'agent': ['agent_0', 'agent_1'], 'adversary': ['adversary_0'], 'referee': ['referee']}
        >>> default_group_map(["player_1", "player_2"], parallel=False)
        {'player_1': ['player_1'], 'player_2': ['player_2']}
    """
    if not parallel:
        return MarlGroupMapType.ONE_GROUP_PER_AGENT.get_group_map(agent_names)
    groups: dict[str, list[str]] = {}
    for name in agent_names:
        prefix, _, number = name.rpartition("_")
        group = prefix if prefix and number.isdigit() else name
        groups.setdefault(group, []).append(name)
    return groups


def _numpy_dtype(value: Any) -> torch.dtype | None:
    """The torch dtype for an info value, or None when it is not a number or an array of them."""
    array = np.asarray(value)
    if array.dtype == np.bool_:
        return torch.bool
    if np.issubdtype(array.dtype, np.integer):
        return torch.int64
    if np.issubdtype(array.dtype, np.floating):
        return torch.float32
    return None


class _Group:
    """What the wrapper knows about one group: its agents, specs and how to convert its data."""

    def __init__(self, name: str, agents: list[str], env: Any, categorical_actions: bool, device: Any) -> None:
        self.name, self.agents = name, agents
        self.index = {agent: i for i, agent in enumerate(agents)}
        self.action_spaces = [env.action_space(agent) for agent in agents]
        per_agent_actions = [space_to_spec(space, categorical_action_encoding=categorical_actions, device=device)
                             for space in self.action_spaces]
        self.to_backend: list[Callable[[torch.Tensor], Any]] = [
            _action_converter(space, spec) for space, spec in zip(self.action_spaces, per_agent_actions)
        ]
        self.action = torch.stack(per_agent_actions, 0)
        # agents that share one action space convert the group's actions in one call
        first = self.action_spaces[0]
        self.to_backend_all = (
            _action_converter(first, per_agent_actions[0]) if all(a == first for a in self.action_spaces) else None
        )
        observations = [space_to_spec(env.observation_space(agent), device=device) for agent in agents]
        # the mask of legal actions travels in the observation of classic games: it moves to the group
        self.mask_in_observation = all(isinstance(o, Composite) and "action_mask" in o.keys() for o in observations)
        if self.mask_in_observation:
            observations = [o.exclude("action_mask") for o in observations]
        self.observation = torch.stack(observations, 0)
        self.ragged = holds_ragged(self.action) or holds_ragged(self.observation)
        self.mask_in_info = False
        self.info: Composite | None = None
        self.batch_size = torch.Size((len(agents),))
        self.action_mask: TensorSpec | None = None  # set with the specs

    @property
    def n(self) -> int:
        return len(self.agents)

    def action_mask_spec(self) -> TensorSpec | None:
        if not (self.mask_in_observation or self.mask_in_info) or self.ragged:
            return None
        width = self.action.shape[-1] if isinstance(self.action, (OneHot, MultiOneHot)) else None
        if width is None:
            width = int(self.action_spaces[0].n)
        return Categorical(2, shape=(self.n, width), dtype=torch.bool, device=self.action.device)


class PettingZooWrapper(EnvBase):
    """Wraps a built PettingZoo env, parallel (``pettingzoo.ParallelEnv``) or turn-based (``AECEnv``).

    The wrapper resets its env once when it is built, to read the entries of the agents'
    ``infos``. Seeds (``set_seed``, ``seed=``) are handed to the env's next ``reset``
    (PettingZoo seeds at reset), so ``seed=s`` starts where ``env.reset(seed=s)`` does.

    Args:
        env: the PettingZoo env.
        return_state: add the env's global ``state()`` as ``"state"``.
        group_map: how agents are grouped: a :class:`~cadence.envs.MarlGroupMapType` or a
            mapping from group name to agent names; by default as described in the module.
        use_mask: add each group's ``"mask"`` of acting (alive) agents; required for AEC envs
            and for parallel envs whose agents can leave before the episode ends.
        categorical_actions: discrete actions as indices (``Categorical``) rather than one-hot.
        seed: the seed of the first reset.
        done_on_any: whether the root done flags are any agent's (default for parallel envs)
            or all agents' (default for AEC envs).
        device: where the data live.

    Examples:
        >>> import pytest; tictactoe = pytest.importorskip("pettingzoo.classic.tictactoe_v3")
        >>> from cadence.envs.libs.pettingzoo import PettingZooWrapper
        >>> env = PettingZooWrapper(tictactoe.env(), use_mask=True, seed=0)
        >>> env.group_map
        {'player_1': ['player_1'], 'player_2': ['player_2']}
        >>> data = env.reset()
        >>> data["player_1", "mask"].tolist(), data["player_1", "action_mask"].shape
        ([True], torch.Size([1, 9]))
    """

    #: Each step writes every group's reward and flags and the root flags.
    _step_values_complete = True
    draws_from_rng = False  # the backend seeds and draws its own randomness

    def __init__(
        self,
        env: Any,
        *,
        return_state: bool = False,
        group_map: MarlGroupMapType | Mapping[str, list[str]] | None = None,
        use_mask: bool = False,
        categorical_actions: bool = True,
        seed: int | None = None,
        done_on_any: bool | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        pettingzoo = _import_pettingzoo()
        if not isinstance(env, (pettingzoo.utils.env.ParallelEnv, pettingzoo.utils.env.AECEnv)):
            raise TypeError(
                f"PettingZooWrapper wraps a pettingzoo ParallelEnv or AECEnv, got {type(env).__name__}"
            )
        super().__init__(device=device, allow_done_after_reset=True)
        self._env = env
        self.parallel = isinstance(env, pettingzoo.utils.env.ParallelEnv)
        if not self.parallel and not use_mask:
            raise ValueError(
                "PettingZooWrapper: an AEC (turn-based) env needs use_mask=True, so that the data say which "
                "agent acted at each step"
            )
        self.return_state = return_state
        self.use_mask = use_mask
        self.categorical_actions = categorical_actions
        self.done_on_any = self.parallel if done_on_any is None else bool(done_on_any)
        self.possible_agents: list[str] = list(env.possible_agents)
        if group_map is None:
            group_map = default_group_map(self.possible_agents, self.parallel)
        elif isinstance(group_map, MarlGroupMapType):
            group_map = group_map.get_group_map(self.possible_agents)
        else:
            group_map = {str(group): list(agents) for group, agents in group_map.items()}
        check_marl_grouping(group_map, self.possible_agents)
        self.group_map: dict[str, list[str]] = group_map
        self._pending_seed: int | None = seed
        self._groups = [
            _Group(name, agents, env, categorical_actions, self.device) for name, agents in group_map.items()
        ]
        #: Whether a group's agents differ in shape: its entries are then stacked lazily, on TensorDicts.
        self._any_ragged = any(group.ragged for group in self._groups)
        _, infos = self._reset_backend()
        self._make_specs(infos)
        self._pending_seed = seed  # that reset only read the infos: the first reset of the user's gets the seed

    # ------------------------------------------------------------------ specs
    def _make_specs(self, infos: Mapping[str, Any]) -> None:
        device = self.device
        flag = Categorical(2, shape=(1,), dtype=torch.bool, device=device)
        actions, observations, rewards = Composite(), Composite(), Composite()
        dones = Composite({name: flag.clone() for name in _DONE_FLAGS})
        for group in self._groups:
            n = group.n
            actions[group.name] = Composite(action=group.action, shape=(n,))
            observation = Composite(observation=group.observation, shape=(n,))
            group.info = self._info_spec(group, infos)
            if group.info is not None:
                observation["info"] = group.info
            group.action_mask = group.action_mask_spec()
            if group.action_mask is not None:
                observation["action_mask"] = group.action_mask
            if self.use_mask:
                observation["mask"] = Categorical(2, shape=(n,), dtype=torch.bool, device=device)
            observations[group.name] = observation
            rewards[group.name] = Composite(reward=Unbounded(shape=(n, 1), device=device), shape=(n,))
            group_flag = Categorical(2, shape=(n, 1), dtype=torch.bool, device=device)
            dones[group.name] = Composite({name: group_flag.clone() for name in _DONE_FLAGS}, shape=(n,))
        if self.return_state:
            observations["state"] = self._state_spec()
        self.observation_spec = observations
        self.action_spec = actions
        self.reward_spec = rewards
        self.done_spec = dones

    def _info_spec(self, group: _Group, infos: Mapping[str, Any]) -> Composite | None:
        """The numeric info entries that every agent of the group reports (the action mask aside)."""
        per_agent = [infos.get(agent, {}) or {} for agent in group.agents]
        group.mask_in_info = not group.mask_in_observation and all("action_mask" in info for info in per_agent)
        shared = set(per_agent[0]).intersection(*per_agent[1:]) - {"action_mask"}
        entries: dict[str, TensorSpec] = {}
        for key in sorted(shared):
            dtype = _numpy_dtype(per_agent[0][key])
            shapes = {np.shape(info[key]) for info in per_agent}
            if dtype is None or len(shapes) != 1 or group.ragged:
                continue  # strings, objects and shapes that vary between agents stay in the backend
            entries[key] = Unbounded(shape=(group.n, *shapes.pop()), dtype=dtype, device=self.device)
        return Composite(entries, shape=(group.n,)) if entries else None

    def _state_spec(self) -> TensorSpec:
        space = getattr(self._env, "state_space", None)
        if space is not None:
            return space_to_spec(space, device=self.device)
        example = torch.as_tensor(np.asarray(self._env.state()))
        return Unbounded(shape=example.shape, dtype=example.dtype, device=self.device)

    # ---------------------------------------------------------------- backend
    def _set_seed(self, seed: int | None) -> None:
        self._pending_seed = seed

    def _reset_backend(self) -> tuple[dict[str, Any], dict[str, Any]]:
        seed, self._pending_seed = self._pending_seed, None
        if self.parallel:
            observations, infos = self._env.reset(seed=seed)
            return dict(observations), dict(infos)
        self._env.reset(seed=seed)
        return {agent: self._env.observe(agent) for agent in self.possible_agents}, dict(self._env.infos)

    @property
    def agents(self) -> list[str]:
        """The agents that are still in the episode (the backend's ``agents``)."""
        return list(self._env.agents)

    def _acting(self) -> set[str] | list[str]:
        return self._env.agents if self.parallel else [self._env.agent_selection]

    def close(self) -> None:
        """Closes the backend env."""
        self._env.close()

    # ------------------------------------------------------------------ reset
    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        if tensordict is not None:
            reset = tensordict.get("_reset", None)
            if reset is not None and not reset.all():
                raise ValueError(
                    "PettingZooWrapper resets the whole env: a '_reset' entry must be all True (or absent), "
                    f"got {int((~reset.bool()).sum())} False of {reset.numel()}"
                )
        entries = self._reset_entries()
        for group in self._groups:
            entries[group.name] = self._group_data(group, entries[group.name])
        return _tensordict(entries, _NO_DIMS, self.device)

    def _reset_entries(self) -> dict[str, Any]:
        """A reset of the whole env: the groups' entries (a dict each: see
        :meth:`_group_entries`) and the state."""
        observations, infos = self._reset_backend()
        acting = self._acting()
        entries: dict[str, Any] = {}
        for group in self._groups:
            flags = np.zeros((len(_DONE_FLAGS), group.n, 1), dtype=bool)
            entries[group.name] = self._group_entries(group, observations, infos, acting, None, flags)
        if self.return_state:
            entries["state"] = self._state()
        return entries

    def _reset_done_values(self, next_root: dict[Any, torch.Tensor]) -> dict[Any, torch.Tensor]:
        # an episode's end resets the whole env: its entries under tuple keys, no TensorDict built
        if self._any_ragged or not bool(next_root["done"].all()):
            return super()._reset_done_values(next_root)  # nothing to reset, or some agents only
        entries = dict(next_root)
        entries.update(flat_entries(self._reset_entries()))
        for name in _DONE_FLAGS:
            entries[name] = torch.zeros(1, dtype=torch.bool, device=self.device)
        return entries

    # ------------------------------------------------------------------- step
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        entries = self._step_entries(tensordict)
        for group in self._groups:
            entries[group.name] = self._group_data(group, entries[group.name])
        return _tensordict(entries, _NO_DIMS, self.device)

    def _step_values(self, tensordict: TensorDictBase | StepValues) -> StepValues:
        # _step's entries under tuple keys, with no TensorDict built for the step or its groups
        if self._any_ragged:  # agents of different shapes: lazily stacked
            return super()._step_values(tensordict)
        return StepValues(flat_entries(self._step_entries(tensordict)), self.batch_size, self.device)

    def _step_entries(self, tensordict: TensorDictBase | StepValues) -> dict[str, Any]:
        """One step: the groups' entries (a dict each: see :meth:`_group_entries`), the root
        flags and the state."""
        if self.parallel:
            observations, rewards, terminations, truncations, infos = self._env.step(self._action_dict(tensordict))
        else:
            observations, rewards, terminations, truncations, infos = self._step_aec(tensordict)
        acting = self._acting()
        entries: dict[str, Any] = {}
        root: np.ndarray | None = None  # the root's done, terminated, truncated
        for group in self._groups:
            reward, flags = self._flags(group, observations, rewards, terminations, truncations)
            entries[group.name] = self._group_entries(group, observations, infos, acting, reward, flags)
            # any (or all) of each group's agents, then of the groups
            group_root = flags.any(axis=(1, 2)) if self.done_on_any else flags.all(axis=(1, 2))
            root = group_root if root is None else (root | group_root if self.done_on_any else root & group_root)
        assert root is not None  # a wrapper has at least one group
        for index, name in enumerate(_DONE_FLAGS):
            entries[name] = _from_numpy(root[index : index + 1], self.device)
        if self.return_state:
            entries["state"] = self._state()
        return entries

    def _actions_of(self, group: _Group, tensordict: TensorDictBase) -> list[torch.Tensor]:
        key = (group.name, "action")
        values = read_entry(tensordict, key, group.action)
        return list(values) if isinstance(values, list) else list(values.unbind(0))

    def _action_dict(self, tensordict: TensorDictBase) -> dict[str, Any]:
        live = self._env.agents
        actions: dict[str, Any] = {}
        for group in self._groups:
            if group.to_backend_all is not None and not group.ragged:
                values = group.to_backend_all(tensordict.get((group.name, "action")))
                for agent, i in group.index.items():
                    if agent in live:
                        actions[agent] = values[i]
                continue
            for i, (agent, action) in enumerate(zip(group.agents, self._actions_of(group, tensordict))):
                if agent in live:
                    actions[agent] = group.to_backend[i](action)
        return actions

    def _step_aec(self, tensordict: TensorDictBase) -> tuple[Any, ...]:
        env = self._env
        agent = env.agent_selection
        if env.terminations.get(agent, False) or env.truncations.get(agent, False):
            env.step(None)  # a finished agent's turn takes no action in the AEC API
        else:
            for group in self._groups:
                if agent in group.index:
                    i = group.index[agent]
                    env.step(group.to_backend[i](self._actions_of(group, tensordict)[i]))
                    break
        observations = {name: env.observe(name) for name in self.possible_agents}
        return observations, dict(env.rewards), dict(env.terminations), dict(env.truncations), dict(env.infos)

    # ------------------------------------------------------------------- data
    def _state(self) -> torch.Tensor:
        return self.observation_spec["state"].encode(np.asarray(self._env.state()))

    def _group_entries(
        self,
        group: _Group,
        observations: Mapping[str, Any],
        infos: Mapping[str, Any],
        acting: set[str] | list[str],
        reward: np.ndarray | None,
        flags: np.ndarray,
    ) -> dict[str, Any]:
        """One group's entries, each stacked along the agent dim: its ``reward`` (none after
        a reset) and its done flags (``flags``: done, terminated, truncated, each ``(n, 1)``),
        its observations...; where its agents differ in shape, ``"observation"`` holds one
        TensorDict per agent (see :meth:`_group_data`)."""
        device = self.device
        masks = None
        if group.action_mask is not None:
            masks = [self._agent_action_mask(group, agent, observations, infos, acting) for agent in group.agents]
        if group.mask_in_observation:
            observations = {a: {k: v for k, v in o.items() if k != "action_mask"} for a, o in observations.items()}
        entries: dict[str, Any] = {} if reward is None else {"reward": _from_numpy(reward, device)}
        for index, name in enumerate(_DONE_FLAGS):
            entries[name] = _from_numpy(flags[index], device)
        if group.info is not None:
            entries["info"] = self._encode_info(group, infos)
        if masks is not None:
            action_mask = _from_numpy(np.stack(masks), device)
            entries["action_mask"] = action_mask
            if isinstance(group.action, (Categorical, OneHot)):
                self.full_action_spec[group.name, "action"].update_mask(action_mask.clone())
        if self.use_mask:
            entries["mask"] = _from_numpy(np.array([agent in acting for agent in group.agents]), device)
        if not group.ragged:
            entries["observation"] = self._encode_group(group, observations)
        else:
            entries["observation"] = [
                _tensordict({"observation": self._encode_agent(group, i, observations)}, _NO_DIMS, device)
                for i in range(group.n)
            ]
        return entries

    def _group_data(self, group: _Group, entries: dict[str, Any]) -> TensorDictBase:
        """A group's entries (:meth:`_group_entries`) as a TensorDict: stacked densely, or
        lazily when its agents differ in shape."""
        if not group.ragged:
            return _tensordict(entries, group.batch_size, self.device)
        data = LazyStackedTensorDict.lazy_stack(entries.pop("observation"), 0)
        for key, value in entries.items():
            data.set(key, value)
        return data

    def _agent_action_mask(
        self,
        group: _Group,
        agent: str,
        observations: Mapping[str, Any],
        infos: Mapping[str, Any],
        acting: set[str] | list[str],
    ) -> np.ndarray:
        source = observations.get(agent) if group.mask_in_observation else infos.get(agent)
        if agent not in acting or source is None or "action_mask" not in source:
            # agents that do not act now may "do" anything: their actions are not used
            return np.ones(group.action_mask.shape[-1], dtype=bool)  # type: ignore[union-attr]
        return np.asarray(source["action_mask"], dtype=bool)

    def _flags(
        self,
        group: _Group,
        observations: Mapping[str, Any],
        rewards: Mapping[str, Any],
        terminations: Mapping[str, Any],
        truncations: Mapping[str, Any],
    ) -> tuple[np.ndarray, np.ndarray]:
        """The group's reward, ``(n, 1)``, and its done, terminated and truncated flags in one
        array, ``(3, n, 1)``."""
        n, agents = group.n, group.agents
        flags = np.empty((len(_DONE_FLAGS), n, 1), dtype=bool)
        terminated: Any
        truncated: Any
        if all(agent in rewards for agent in agents):  # the common case: everyone still in
            reward = np.array([rewards[a] for a in agents], dtype=np.float32)
            terminated = [terminations.get(a, False) for a in agents]
            truncated = [truncations.get(a, False) for a in agents]
        else:
            reward, terminated, truncated = np.zeros(n, np.float32), np.zeros(n, bool), np.zeros(n, bool)
            for i, agent in enumerate(agents):
                if agent in rewards or agent in observations:
                    reward[i] = rewards.get(agent, 0.0)
                    terminated[i] = terminations.get(agent, False)
                    truncated[i] = truncations.get(agent, False)
                elif self.use_mask:  # an agent that left the episode: finished
                    terminated[i] = terminations.get(agent, True)
                    truncated[i] = truncations.get(agent, not terminated[i])
                else:
                    raise ValueError(
                        f"PettingZooWrapper: agent {agent!r} left the episode before its end; build the wrapper "
                        "with use_mask=True for envs whose agents can leave"
                    )
        flags[1, :, 0], flags[2, :, 0] = terminated, truncated
        np.logical_or(flags[1], flags[2], out=flags[0])
        return reward.reshape(n, 1), flags

    def _encode_group(self, group: _Group, observations: Mapping[str, Any]) -> Any:
        """The group's observations stacked along the agent dim (zeros for agents that left)."""
        return _stack_values(group.observation, [observations.get(agent) for agent in group.agents], self.device)

    def _encode_agent(self, group: _Group, i: int, observations: Mapping[str, Any]) -> Any:
        spec = group.observation[i]
        value = observations.get(group.agents[i])
        return spec.zero() if value is None else _encode_value(spec, value)

    def _encode_info(self, group: _Group, infos: Mapping[str, Any]) -> TensorDict:
        assert group.info is not None
        entries = {}
        for key, spec in group.info.items():
            values = [np.asarray((infos.get(agent) or {}).get(key, 0)) for agent in group.agents]
            entries[key] = torch.as_tensor(np.stack(values), dtype=spec.dtype, device=self.device)
        return TensorDict(entries, batch_size=(group.n,), device=self.device)


_NO_DIMS = torch.Size(())
_tensordict = getattr(TensorDict, "_new_unsafe", TensorDict)  # the entries are built right: skip the checks


def _from_numpy(array: np.ndarray, device: Any) -> torch.Tensor:
    tensor = torch.from_numpy(array)
    return tensor if device is None else tensor.to(device)


def _encode_value(spec: TensorSpec, value: Any) -> Any:
    """One agent's observation as its spec's tensor(s)."""
    if isinstance(spec, Composite):
        return TensorDict({k: _encode_value(spec[k], value[k]) for k in spec.keys()}, batch_size=spec.shape)
    return spec.encode(np.asarray(value))


def _stack_values(spec: TensorSpec, values: list[Any], device: Any) -> Any:
    """Agents' values stacked on a new leading dim as ``spec`` (the stacked spec) says."""
    if isinstance(spec, Composite):
        return _tensordict(
            {k: _stack_values(spec[k], [None if v is None else v[k] for v in values], device) for k in spec.keys()},
            spec.shape,
            device,
        )
    if any(v is None for v in values):  # an agent that left
        template = next((np.asarray(v) for v in values if v is not None), None)
        if template is None:
            return spec.zero()
        values = [np.zeros_like(template) if v is None else v for v in values]
    tensor = torch.from_numpy(np.array(values))  # np.stack's checks cost four times the copy
    if tensor.dtype != spec.dtype:
        tensor = tensor.to(spec.dtype)
    if tensor.shape != spec.shape:
        tensor = tensor.reshape(spec.shape)
    return tensor if device is None else tensor.to(device)


def _find_task(task: str) -> Any:
    """The module of PettingZoo env ``task`` (e.g. ``"simple_spread_v3"``), looked up in :data:`ENV_PACKAGES`."""
    if not isinstance(task, str):
        raise TypeError(
            f"PettingZooEnv: task must be a PettingZoo env name (a str like 'simple_spread_v3'), got "
            f"{type(task).__name__} {quoted(task)}"
        )
    if not _TASK_NAME.fullmatch(task):
        raise ValueError(
            f"PettingZooEnv: task {quoted(task)} is not a PettingZoo env name (expected a name like "
            "'simple_spread_v3' or 'tictactoe_v3')"
        )
    for package in ENV_PACKAGES:
        try:
            found = importlib.util.find_spec(f"{package}.{task}")
        except ImportError:  # the package itself is not installed
            continue
        if found is not None:
            try:
                return importlib.import_module(f"{package}.{task}")
            except ImportError as err:
                raise ImportError(
                    f"PettingZooEnv({quoted(task)}) needs a package that is not installed: {err}"
                ) from err
    raise ValueError(
        f"PettingZooEnv: no env {quoted(task)} in {', '.join(ENV_PACKAGES)} (MPE envs come from the mpe2 "
        f"package: {_INSTALL_HINT})"
    )


class PettingZooEnv(PettingZooWrapper):
    """Builds a PettingZoo env by name and wraps it (see :class:`PettingZooWrapper`).

    The name is looked up among the envs of :data:`ENV_PACKAGES` (``mpe2``,
    ``pettingzoo.classic``, ``pettingzoo.butterfly``, ...); it must look like
    ``"<name>_v<version>"``, and nothing else is imported.

    Args:
        task: the env's name, e.g. ``"simple_spread_v3"``, ``"tictactoe_v3"``, ``"pistonball_v6"``.
        parallel: build the parallel API (``parallel_env``) rather than the AEC one (``env``).
        return_state: see :class:`PettingZooWrapper`.
        group_map: see :class:`PettingZooWrapper`.
        use_mask: see :class:`PettingZooWrapper`.
        categorical_actions: see :class:`PettingZooWrapper`.
        seed: see :class:`PettingZooWrapper`.
        done_on_any: see :class:`PettingZooWrapper`.
        device: see :class:`PettingZooWrapper`.
        **kwargs: passed to the env's constructor (``N=3``, ``n_pistons=4``, ``max_cycles=25``...).

    Raises:
        TypeError: ``task`` is not a str, or the env's constructor refused ``kwargs``'
            types (an unknown argument, say).
        ValueError: ``task`` is not a name of the form ``"<name>_v<version>"`` (checked
            before anything is imported), no package of :data:`ENV_PACKAGES` has it, or
            the env's constructor refused ``kwargs``' values (``N=-1``, say). The
            messages quote at most a few hundred characters of the name.

    Examples:
        >>> import pytest; mpe2 = pytest.importorskip("mpe2")  # skips without the pettingzoo extra
        >>> from cadence.envs import MarlGroupMapType
        >>> env = PettingZooEnv("simple_spread_v3", parallel=True, N=2, group_map=MarlGroupMapType.ONE_GROUP_PER_AGENT)
        >>> sorted(env.group_map), env.action_keys
        (['agent_0', 'agent_1'], [('agent_0', 'action'), ('agent_1', 'action')])
        >>> PettingZooEnv("../simple_spread_v3", parallel=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: PettingZooEnv: task '../simple_spread_v3' is not a PettingZoo env name (expected a name like ...)
    """

    def __init__(
        self,
        task: str,
        parallel: bool,
        *,
        return_state: bool = False,
        group_map: MarlGroupMapType | Mapping[str, list[str]] | None = None,
        use_mask: bool = False,
        categorical_actions: bool = True,
        seed: int | None = None,
        done_on_any: bool | None = None,
        device: torch.device | str | None = None,
        **kwargs: Any,
    ) -> None:
        _import_pettingzoo()
        module = _find_task(task)
        try:
            env = module.parallel_env(**kwargs) if parallel else module.env(**kwargs)
        except (TypeError, ValueError, AssertionError) as err:
            # the env's own checks (an assert, a numpy error) say little of which argument is wrong
            raise (TypeError if isinstance(err, TypeError) else ValueError)(
                f"PettingZooEnv({quoted(task)}): the env refused its arguments {quoted(kwargs)}: "
                f"{type(err).__name__}: {quoted(str(err))}"
            ) from err
        super().__init__(
            env,
            return_state=return_state,
            group_map=group_map,
            use_mask=use_mask,
            categorical_actions=categorical_actions,
            seed=seed,
            done_on_any=done_on_any,
            device=device,
        )
        self.task = task
