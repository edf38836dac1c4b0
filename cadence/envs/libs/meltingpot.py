"""Melting Pot: ``MeltingpotWrapper`` around a built substrate, ``MeltingpotEnv`` by substrate name.

A Melting Pot substrate is a multi-player grid world (DeepMind Lab2D): every player acts
at every step with one discrete action and receives its own reward and observations. The
players are named ``"player_0"``, ``"player_1"``... in the substrate's order and gathered
in groups (``group_map``, by default one group ``"agents"`` holding them all). Each group
is a nested TensorDict whose batch dim is the group's agents, holding:

- ``"action"``: a ``Categorical`` index of shape ``(n_agents,)`` (``categorical_actions=True``)
  or a ``OneHot`` vector of shape ``(n_agents, n_actions)``;
- ``"observation"``: the players' own observations, under the substrate's names
  (``"RGB"``, the player's view, uint8 ``H x W x 3`` pixels; vectors such as
  ``"INVENTORY"``, ``"READY_TO_SHOOT"``, ``"COLLECTIVE_REWARD"``, float64, a scalar taking
  shape ``(1,)``);
- ``"reward"``: float64, shape ``(n_agents, 1)``.

The global observations (``"WORLD.RGB"``, the whole map as uint8 pixels) are the same for
every player: they sit at the root, under their own names. The root also holds
``"done"`` and ``"terminated"``: a Melting Pot episode ends with a termination (its last
step has discount 0), and with ``max_steps`` the episode is also ended, as *terminated*,
after that many steps (as the reference does; there is no ``"truncated"`` entry: wrap the
env in a ``StepCounter`` transform rather than setting ``max_steps`` for a truncation).

Seeding: Melting Pot does not reproduce an episode from a seed. A substrate draws its
Lab2D seed from Python's global ``random`` module when it is built (and takes the following
seeds at the next resets); ``MeltingpotEnv.set_seed(s)`` rebuilds it, at the next reset,
from a seed derived from ``s`` (:func:`lab2d_seed`), but the engine does not replay: two
substrates built from the same seed and given the same actions can spawn the players
elsewhere and go on to other observations and rewards, from one instance (or process) to
the next (measured with dm-meltingpot 2.4.1 and dmlab2d 1.0.2; its Lua code walks hash
tables with ``pairs``, whose order is not fixed; google-deepmind/meltingpot issue #129
describes its seeds). What ``set_seed`` does reproduce is
the env's own generator (``env.rng``), hence ``rand_action`` and the actions of a random
rollout. A substrate built elsewhere cannot even be given a seed:
``MeltingpotWrapper.set_seed`` raises (see there).

The examples below start with a line that skips them where Melting Pot is not installed.

Examples:
    >>> import pytest; mp = pytest.importorskip("meltingpot")  # skips without the meltingpot extra
    >>> from cadence.envs.libs.meltingpot import MeltingpotEnv
    >>> env = MeltingpotEnv("running_with_scissors_in_the_matrix__one_shot", seed=0)
    >>> env.group_map
    {'agents': ['player_0', 'player_1']}
    >>> data = env.rollout(4, break_when_any_done=False)
    >>> data["next", "agents", "observation", "RGB"].shape, data["next", "WORLD.RGB"].shape
    (torch.Size([4, 2, 40, 40, 3]), torch.Size([4, 120, 184, 3]))
    >>> data["next", "agents", "reward"].shape, data["agents", "action"].shape
    (torch.Size([4, 2, 1]), torch.Size([4, 2]))
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from cadence._utils import ClassProperty
from cadence.data import Bounded, Categorical, Composite, OneHot, TensorSpec, Unbounded
from cadence.envs.common import EnvBase
from cadence.envs.marl_grouping import MarlGroupMapType, check_marl_grouping
from cadence.envs.seeding import validate_seed

if TYPE_CHECKING:  # pragma: no cover - type hints only (Melting Pot is optional)
    from meltingpot.utils.substrates.substrate import Substrate
    from ml_collections.config_dict import ConfigDict

__all__ = ["MeltingpotEnv", "MeltingpotWrapper"]

_INSTALL_HINT = 'pip install "cadence[meltingpot]"'

#: how the wrapper names the substrate's players, by their index
PLAYER_NAME_FORMAT = "player_{index}"
#: the prefix of the observations that show the whole world rather than one player's view
WORLD_PREFIX = "WORLD."
#: Lab2D seeds are unsigned 32-bit numbers; Melting Pot avoids 0
_LAB2D_SEED_COUNT = 2**32 - 1

_FLAG = {False: torch.zeros(1, dtype=torch.bool), True: torch.ones(1, dtype=torch.bool)}


def _import_meltingpot(caller: str) -> Any:
    """Imports ``meltingpot`` (which loads TensorFlow), or raises an ImportError saying how to install it."""
    try:
        return importlib.import_module("meltingpot")
    except ImportError as err:
        raise ImportError(f"{caller} needs the dm-meltingpot library, which is not installed: {_INSTALL_HINT}.") from err


def _substrate_names() -> list[str]:
    """The names of Melting Pot's substrates ([] without Melting Pot)."""
    if importlib.util.find_spec("meltingpot") is None:
        return []
    return sorted(_import_meltingpot("MeltingpotEnv").substrate.SUBSTRATES)


def lab2d_seed(seed: int) -> int:
    """The Lab2D seed (in ``[1, 2**32 - 1]``) that ``MeltingpotEnv.set_seed(seed)`` builds its substrate with.

    The seed is hashed rather than folded: a substrate takes the seeds that follow its own
    at the next resets, so envs seeded ``0, 1, 2...`` must not start next to each other.

    Args:
        seed: a seed of ``set_seed`` (``0 <= seed < 2**63``).

    Examples:
        >>> lab2d_seed(0) == lab2d_seed(0), lab2d_seed(0) != lab2d_seed(1)
        (True, True)
        >>> 1 <= lab2d_seed(2**63 - 1) <= 2**32 - 1
        True
    """
    state = np.random.SeedSequence(seed).generate_state(1, dtype=np.uint64)[0]
    return int(state) % _LAB2D_SEED_COUNT + 1


def _torch_dtype(np_dtype: Any) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype=np_dtype)).dtype


def array_spec_to_spec(array_spec: Any, device: torch.device | None = None) -> TensorSpec:
    """A dm_env ``Array`` spec of an observation or reward as a Cadence spec.

    Scalars get shape ``(1,)``. A ``BoundedArray`` keeps its bounds; a uint8 array (the
    RGB pixels) is ``Bounded`` by its dtype's range, 0 to 255; any other array is
    ``Unbounded``. The dtype is kept.

    Args:
        array_spec: a ``dm_env.specs.Array`` (or ``BoundedArray``).
        device: the device of the spec.

    Examples:
        >>> import pytest; dm_env = pytest.importorskip("dm_env")
        >>> import numpy as np
        >>> array_spec_to_spec(dm_env.specs.Array((), np.float64))
        Unbounded(shape=torch.Size([1]), device=cpu, dtype=torch.float64)
        >>> pixels = array_spec_to_spec(dm_env.specs.Array((4, 4, 3), np.uint8))
        >>> type(pixels).__name__, pixels.shape, int(pixels.high.max())
        ('Bounded', torch.Size([4, 4, 3]), 255)
    """
    shape = tuple(array_spec.shape) or (1,)
    dtype = _torch_dtype(array_spec.dtype)
    if hasattr(array_spec, "minimum") and hasattr(array_spec, "maximum"):
        low = torch.as_tensor(np.broadcast_to(array_spec.minimum, shape).copy(), dtype=dtype)
        high = torch.as_tensor(np.broadcast_to(array_spec.maximum, shape).copy(), dtype=dtype)
        return Bounded(low, high, shape=shape, dtype=dtype, device=device)
    if dtype == torch.uint8:
        return Bounded(0, 255, shape=shape, dtype=dtype, device=device)
    return Unbounded(shape=shape, dtype=dtype, device=device)


class _Group:
    """One group of players: who they are (indices in the substrate) and their stacked specs."""

    def __init__(
        self,
        name: str,
        agents: list[str],
        indices: list[int],
        observation_specs: Sequence[Mapping[str, Any]],
        action_specs: Sequence[Any],
        reward_specs: Sequence[Any],
        categorical_actions: bool,
        device: torch.device | None,
    ) -> None:
        self.name, self.agents, self.indices = name, agents, indices
        self.n = len(agents)
        first = indices[0]
        # agents of a group are stacked densely: they must observe, act and score alike
        for what, specs in (("observation", observation_specs), ("action", action_specs), ("reward", reward_specs)):
            for agent, index in zip(agents, indices):
                if specs[index] != specs[first]:
                    raise ValueError(
                        f"MeltingpotWrapper: group {name!r} stacks {agents[0]!r} and {agent!r}, whose {what} specs "
                        f"differ ({specs[first]} vs {specs[index]}); put them in different groups (e.g. "
                        "group_map=MarlGroupMapType.ONE_GROUP_PER_AGENT)"
                    )
        self.observation_keys = sorted(observation_specs[first])
        per_agent = Composite(
            {key: array_spec_to_spec(observation_specs[first][key], device) for key in self.observation_keys},
            device=device,
        )
        self.observation = per_agent.expand(self.n)
        self.n_actions = int(action_specs[first].num_values)
        if categorical_actions:
            self.action: TensorSpec = Categorical(self.n_actions, shape=(self.n,), device=device)
        else:
            self.action = OneHot(self.n_actions, shape=(self.n, self.n_actions), device=device)
        self.reward = array_spec_to_spec(reward_specs[first], device).expand(self.n, 1)


class MeltingpotWrapper(EnvBase):
    """Wraps a built Melting Pot substrate (``meltingpot.substrate.build(...)``) as a Cadence env.

    Args:
        env: the substrate, a ``meltingpot.utils.substrates.substrate.Substrate``.
        categorical_actions: actions as indices (``Categorical``, shape ``(n_agents,)``)
            rather than one-hot vectors (``OneHot``, shape ``(n_agents, n_actions)``).
        group_map: how the players are grouped: a :class:`~cadence.envs.MarlGroupMapType`
            or a mapping from group name to player names (``"player_0"``...); by default
            one group ``"agents"`` with every player. Players of one group must share their
            specs (they do in every Melting Pot substrate).
        max_steps: end each episode, as terminated, after this many steps (``None``: only
            when the substrate ends it).
        device: where the data live.

    Attributes:
        group_map: ``{"group name": [player names]}``.
        agent_names: the players' names, in the substrate's order.
        agent_names_to_indices_map: each player's index in the substrate.
        num_cycles: the steps taken since the last reset.

    Raises:
        TypeError: ``env`` is not a Melting Pot substrate.
        ValueError: a bad ``group_map`` (the message names the agent), a group of players
            whose specs differ, or ``max_steps`` that is not a positive int.
        RuntimeError: from ``set_seed`` with a seed: a substrate built elsewhere cannot
            be reseeded (use :class:`MeltingpotEnv`).

    Examples:
        >>> import pytest; mp = pytest.importorskip("meltingpot")  # skips without the meltingpot extra
        >>> from meltingpot import substrate
        >>> name = "running_with_scissors_in_the_matrix__one_shot"
        >>> built = substrate.build(name, roles=substrate.get_config(name).default_player_roles)
        >>> env = MeltingpotWrapper(built, max_steps=3)
        >>> env.agent_names, env.action_spec.n
        (['player_0', 'player_1'], 8)
        >>> env.action_spec.update_mask(torch.arange(8) != 7)  # no interaction beam: nothing ends the episode early
        >>> sorted(env.observation_spec["agents", "observation"].keys())
        ['COLLECTIVE_REWARD', 'INTERACTION_INVENTORIES', 'INVENTORY', 'READY_TO_SHOOT', 'RGB']
        >>> data = env.rollout(10)
        >>> data.batch_size, data["next", "terminated"][-1].item()
        (torch.Size([3]), True)
    """

    #: the names of Melting Pot's substrates (empty without Melting Pot)
    available_envs = ClassProperty(lambda cls: _substrate_names())
    #: the ``meltingpot`` package (imported on first access)
    lib = ClassProperty(lambda cls: _import_meltingpot(cls.__name__))

    def __init__(
        self,
        env: Substrate,
        *,
        categorical_actions: bool = True,
        group_map: MarlGroupMapType | Mapping[str, Sequence[str]] = MarlGroupMapType.ALL_IN_ONE_GROUP,
        max_steps: int | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        _import_meltingpot(type(self).__name__)
        from meltingpot.utils.substrates import substrate as substrate_module

        if not isinstance(env, substrate_module.Substrate):
            raise TypeError(
                f"{type(self).__name__} wraps a Melting Pot substrate (meltingpot.utils.substrates.substrate."
                f"Substrate, as meltingpot.substrate.build returns), got {type(env).__name__}"
            )
        if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"{type(self).__name__}: max_steps must be None or an int >= 1, got {max_steps!r}")
        super().__init__(device=device)
        self._env = env
        self.categorical_actions = categorical_actions
        self.max_steps = max_steps
        self.num_cycles = 0
        observation_specs = list(env.observation_spec())
        self.agent_names: list[str] = [PLAYER_NAME_FORMAT.format(index=i) for i in range(len(observation_specs))]
        self.agent_names_to_indices_map: dict[str, int] = {name: i for i, name in enumerate(self.agent_names)}
        if isinstance(group_map, MarlGroupMapType):
            group_map = group_map.get_group_map(self.agent_names)
        else:
            group_map = {str(group): list(agents) for group, agents in group_map.items()}
        check_marl_grouping(group_map, self.agent_names)
        self.group_map: dict[str, list[str]] = group_map
        self._make_specs(observation_specs, list(env.action_spec()), list(env.reward_spec()))

    # ------------------------------------------------------------------ specs
    def _make_specs(self, observation_specs: list[Mapping[str, Any]], action_specs: list[Any],
                    reward_specs: list[Any]) -> None:
        device = self.device
        # the world's observations are the same in every player's dict: player 0's are read
        self._world_keys = sorted(key for key in observation_specs[0] if key.startswith(WORLD_PREFIX))
        own = [{k: v for k, v in spec.items() if not k.startswith(WORLD_PREFIX)} for spec in observation_specs]
        index = self.agent_names_to_indices_map
        self._groups = [
            _Group(name, agents, [index[a] for a in agents], own, action_specs, reward_specs,
                   self.categorical_actions, device)
            for name, agents in self.group_map.items()
        ]
        actions, observations, rewards = Composite(device=device), Composite(device=device), Composite(device=device)
        for group in self._groups:
            shape = (group.n,)
            actions[group.name] = Composite(action=group.action, shape=shape, device=device)
            observations[group.name] = Composite(observation=group.observation, shape=shape, device=device)
            rewards[group.name] = Composite(reward=group.reward, shape=shape, device=device)
        for key in self._world_keys:
            observations[key] = array_spec_to_spec(observation_specs[0][key], device)
        flag = Categorical(2, shape=(1,), dtype=torch.bool, device=device)
        self.full_observation_spec = observations
        self.full_action_spec = actions
        self.full_reward_spec = rewards
        self.full_done_spec = Composite(done=flag, terminated=flag.clone(), device=device)

    # ------------------------------------------------------------------ seeding
    def _set_seed(self, seed: int | None) -> None:
        """A built substrate keeps the seed it was built with: reseeding needs a rebuild,
        which only :class:`MeltingpotEnv` (which builds its substrate) can do."""
        if seed is None:
            return
        raise RuntimeError(
            f"{type(self).__name__}.set_seed: a substrate built outside Cadence cannot be reseeded (Melting Pot "
            "draws its seed from Python's global random module when it is built and offers no way to change it); "
            "MeltingpotEnv(substrate_name, seed=...) builds its substrate from a seed of yours (Melting Pot's "
            "episodes still do not replay from it: see cadence.envs.libs.meltingpot)"
        )

    # ------------------------------------------------------------------ the loop
    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        if tensordict is not None:
            reset = tensordict.get("_reset", None)
            if reset is not None and not bool(reset.all()):
                raise ValueError(
                    f"{type(self).__name__} resets the whole substrate: a '_reset' entry must be all True (or "
                    f"absent), got {reset.tolist()}"
                )
        timestep = self._env.reset()
        self.num_cycles = 0
        return self._timestep_data(timestep.observation, None, done=False)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        actions = [0] * len(self.agent_names)
        for group in self._groups:
            values = tensordict.get((group.name, "action"))
            if not self.categorical_actions:
                values = values.long().argmax(-1)
            for index, value in zip(group.indices, values.tolist()):
                actions[index] = int(value)
        timestep = self._env.step(actions)
        self.num_cycles += 1
        done = timestep.last() or (self.max_steps is not None and self.num_cycles >= self.max_steps)
        return self._timestep_data(timestep.observation, timestep.reward, done=bool(done))

    def _timestep_data(self, observations: Sequence[Mapping[str, Any]], rewards: Sequence[Any] | None,
                       done: bool) -> TensorDictBase:
        """One reset's or step's data from the substrate's per-player dicts (copies: no memory shared with Lab2D)."""
        device = self.device
        flag = _FLAG[done]
        data = TensorDict({"done": flag.clone(), "terminated": flag.clone()}, batch_size=())
        for group in self._groups:
            shape = (group.n,)
            entries: dict[str, torch.Tensor] = {}
            for key in group.observation_keys:
                spec = group.observation[key]
                stacked = np.stack([np.asarray(observations[i][key]) for i in group.indices])
                entries[key] = torch.from_numpy(stacked).reshape(spec.shape).to(spec.dtype)
            group_data = TensorDict({"observation": TensorDict(entries, batch_size=shape)}, batch_size=shape)
            if rewards is not None:
                reward = np.array([np.asarray(rewards[i]).item() for i in group.indices])
                group_data["reward"] = torch.from_numpy(reward).reshape(group.reward.shape).to(group.reward.dtype)
            data[group.name] = group_data
        for key in self._world_keys:
            data[key] = torch.from_numpy(np.array(observations[0][key]))
        return data if device is None else data.to(device)

    def render(self) -> torch.Tensor:
        """The whole world as it is now: the ``"WORLD.RGB"`` frame, uint8 ``H x W x 3``.

        Raises:
            KeyError: the substrate has no ``"WORLD.RGB"`` observation.

        Examples:
            >>> import pytest; mp = pytest.importorskip("meltingpot")  # skips without the meltingpot extra
            >>> env = MeltingpotEnv("running_with_scissors_in_the_matrix__one_shot", seed=1)
            >>> data = env.reset()
            >>> frame = env.render()
            >>> frame.shape, bool((frame == data["WORLD.RGB"]).all())
            (torch.Size([120, 184, 3]), True)
        """
        world = f"{WORLD_PREFIX}RGB"
        observation = self._env.observation()[0]
        if world not in observation:
            raise KeyError(
                f"{type(self).__name__}.render: the substrate has no {world!r} observation; its observations are "
                f"{sorted(observation)}"
            )
        frame = torch.from_numpy(np.array(observation[world]))
        return frame if self.device is None else frame.to(self.device)

    def close(self) -> None:
        """Closes the substrate; the env cannot be used afterwards."""
        if not self.is_closed:
            self._env.close()
        super().close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(n_agents={len(self.agent_names)}, group_map={self.group_map}, "
            f"batch_size={self.batch_size}, device={self.device})"
        )


class MeltingpotEnv(MeltingpotWrapper):
    """A Melting Pot substrate built by name (or from its config) and wrapped (see :class:`MeltingpotWrapper`).

    The substrate is built as ``meltingpot.substrate.build`` builds it, but from a Lab2D
    seed that Cadence can choose: after ``set_seed(s)`` the next reset rebuilds it from
    :func:`lab2d_seed` ``(s)``. That fixes the substrate's seeds, not its episodes (the
    engine does not replay them: see the module), and seeds ``env.rng``, so that random
    actions reproduce.

    Args:
        substrate: a name from :attr:`available_envs` (``"commons_harvest__open"``...), or
            a substrate config (``meltingpot.substrate.get_config(name)``, possibly edited).
        roles: one role per player, from the config's ``valid_roles``; their number is the
            number of players. Default: the config's ``default_player_roles``.
        seed: seed the env right away (as ``set_seed(seed)``); without it the substrate
            draws its seed as Melting Pot does (from Python's global ``random``).
        categorical_actions, group_map, max_steps, device: see :class:`MeltingpotWrapper`.

    Attributes:
        substrate_name: the substrate's name (``None`` when built from a config).
        roles: the players' roles.
        substrate_seed: the Lab2D seed the current substrate was built from (its first
            episode's; the next episodes take the following seeds), ``None`` when Melting
            Pot drew it.

    Raises:
        ImportError: Melting Pot is not installed (the message says how to install it).
        ValueError: an unknown substrate name (the message lists them) or a role that the
            substrate does not have.
        TypeError: ``substrate`` is neither a name nor a config.

    Examples:
        >>> import pytest; mp = pytest.importorskip("meltingpot")  # skips without the meltingpot extra
        >>> from cadence.envs import MarlGroupMapType
        >>> env = MeltingpotEnv("running_with_scissors_in_the_matrix__one_shot", seed=0,
        ...                     group_map=MarlGroupMapType.ONE_GROUP_PER_AGENT, categorical_actions=False)
        >>> env.action_keys
        [('player_0', 'action'), ('player_1', 'action')]
        >>> env.full_action_spec["player_0", "action"].shape
        torch.Size([1, 8])
        >>> env.substrate_seed == lab2d_seed(0)
        True
        >>> next_seed = env.set_seed(7)
        >>> _ = env.reset()
        >>> env.substrate_seed == lab2d_seed(7)
        True
        >>> "commons_harvest__open" in MeltingpotEnv.available_envs
        True
    """

    def __init__(
        self,
        substrate: str | ConfigDict,
        *,
        roles: Sequence[str] | None = None,
        seed: int | None = None,
        categorical_actions: bool = True,
        group_map: MarlGroupMapType | Mapping[str, Sequence[str]] = MarlGroupMapType.ALL_IN_ONE_GROUP,
        max_steps: int | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        seed = validate_seed(seed, type(self).__name__)
        mp_substrate = _import_meltingpot(type(self).__name__).substrate
        from ml_collections import config_dict

        if isinstance(substrate, str):
            if substrate not in mp_substrate.SUBSTRATES:
                raise ValueError(
                    f"{type(self).__name__}: unknown Melting Pot substrate {substrate!r}; the substrates are "
                    f"{', '.join(sorted(mp_substrate.SUBSTRATES))}"
                )
            self.substrate_name: str | None = substrate
            config = mp_substrate.get_config(substrate)
        elif isinstance(substrate, config_dict.ConfigDict):
            self.substrate_name = None
            config = substrate
        else:
            raise TypeError(
                f"{type(self).__name__}: substrate must be a substrate name (str) or a config "
                f"(meltingpot.substrate.get_config(name)), got {type(substrate).__name__}"
            )
        if isinstance(roles, str) or (roles is not None and not roles):
            raise ValueError(f"{type(self).__name__}: roles must be a non-empty sequence of role names, got {roles!r}")
        roles = tuple(config.default_player_roles if roles is None else roles)
        unknown = sorted(set(roles) - set(config.valid_roles))
        if unknown:
            raise ValueError(
                f"{type(self).__name__}: roles {unknown} are not roles of this substrate; its roles are "
                f"{sorted(config.valid_roles)}"
            )
        self._config, self.roles = config, roles
        self._pending_lab2d_seed: int | None = None
        self.substrate_seed: int | None = None if seed is None else lab2d_seed(seed)
        super().__init__(
            self._build_substrate(self.substrate_seed),
            categorical_actions=categorical_actions,
            group_map=group_map,
            max_steps=max_steps,
            device=device,
        )
        if seed is not None:
            self.set_seed(seed)  # seeds self.rng too
            self._pending_lab2d_seed = None  # the substrate was just built from this seed: no rebuild

    def _build_substrate(self, env_seed: int | None) -> Substrate:
        """Builds the substrate as ``meltingpot.substrate.build_from_config`` does, from Lab2D seed ``env_seed``.

        Melting Pot's own build takes no seed (its Lab2D builder does): the same wrappers
        are stacked here around a Lab2D env built from ``env_seed``."""
        from meltingpot.utils.substrates import builder
        from meltingpot.utils.substrates import substrate as substrate_module
        from meltingpot.utils.substrates.wrappers import (
            collective_reward_wrapper,
            discrete_action_wrapper,
            multiplayer_wrapper,
            observables_wrapper,
        )

        config = self._config
        lab2d = builder.builder(config.lab2d_settings_builder(roles=self.roles, config=config), env_seed=env_seed)
        try:
            env: Any = observables_wrapper.ObservablesWrapper(lab2d)
            env = multiplayer_wrapper.Wrapper(
                env,
                individual_observation_names=frozenset(config.individual_observation_names),
                global_observation_names=frozenset(config.global_observation_names),
            )
            env = discrete_action_wrapper.Wrapper(env, action_table=tuple(dict(row) for row in config.action_set))
            env = collective_reward_wrapper.CollectiveRewardWrapper(env)
            return substrate_module.Substrate(env)
        except Exception:
            lab2d.close()
            raise

    def _set_seed(self, seed: int | None) -> None:
        """The next reset rebuilds the substrate from ``lab2d_seed(seed)``."""
        if seed is not None:
            self._pending_lab2d_seed = lab2d_seed(seed)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        if self._pending_lab2d_seed is not None:
            seed, self._pending_lab2d_seed = self._pending_lab2d_seed, None
            rebuilt = self._build_substrate(seed)
            self._env.close()
            self._env, self.substrate_seed = rebuilt, seed
        return super()._reset(tensordict)

    def __repr__(self) -> str:
        name = self.substrate_name if self.substrate_name is not None else "<config>"
        return (
            f"{type(self).__name__}(substrate={name}, roles={list(self.roles)}, group_map={self.group_map}, "
            f"substrate_seed={self.substrate_seed}, "
            f"batch_size={self.batch_size}, device={self.device})"
        )
