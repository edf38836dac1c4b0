"""OpenSpiel games: ``OpenSpielWrapper`` around a game or state, ``OpenSpielEnv`` by name.

A game of OpenSpiel (DeepMind's library of games: tic-tac-toe, poker, backgammon, chess...)
is a multi-agent env whose agents are its players, ``"player_0"``, ``"player_1"``...
grouped as a group map says (:mod:`cadence.envs.marl_grouping`; by default one group,
``"agents"``). Each group's data is stacked on an agent dim after the batch dims:

- observations ``(group, "observation")`` and/or ``(group, "information_state")`` (the
  game's float tensors, as the game provides them), and ``(group, "action_mask")``
  (bool, ``[n_agents, n_actions]``: the legal actions of each agent now);
- actions ``(group, "action")``: one-hot (``OneHot``, int64, ``[n_agents, n_actions]``)
  or, with ``categorical_actions=True``, indices (``Categorical``, ``[n_agents]``); the
  action spec carries the same mask, so ``env.rand_action()`` draws legal actions;
- rewards ``(group, "reward")`` (float32, ``[n_agents, 1]``): what each player's return
  changed by in the step, chance moves included, so that a game's rewards add up to its
  returns (a game that scores only at its end rewards only there; the reference library
  writes the running return instead, the same for such games);
- at the root, ``"done"``/``"terminated"`` (the game is over) and ``"current_player"``
  (int32: the player to act, ``-2`` at a simultaneous-move node, ``-4`` once over).

Turn-based games use the current player's action only; the others' are ignored (their
mask allows action 0 alone, which ``rand`` draws). At a simultaneous-move node every
player acts. An action that is not legal raises a ``ValueError`` naming the agent, the
key and the legal actions.

Chance nodes (cards dealt, dice rolled) are resolved by the env itself, before it hands
the game back to the players: outcomes are drawn with the env's own seeded
``numpy.random.Generator`` (``set_seed``), so a seeded env replays the same deals, or by
a ``chance_sampler`` of your own. (Games whose chance is "sampled stochastic" draw inside
OpenSpiel, from the seed in their game parameters, and show no chance nodes.)

With ``return_state=True`` the output also holds ``"state"``, the game's serialized
state (a string); ``reset`` with a ``"state"`` entry in its input restores that state
rather than starting a new game (also a finished one: this env allows done after
reset). A reset of done envs (an input holding ``"_reset"``, as rollouts and batched envs
send after a game ends) starts a new game.

pyspiel (``pip install open_spiel``) is an optional dependency, imported when an env is
built; the examples below start with a line that skips them where it is not installed.

Examples:
    >>> import pytest; pyspiel = pytest.importorskip("pyspiel")  # skips without open_spiel
    >>> from cadence.envs.libs.openspiel import OpenSpielEnv
    >>> env = OpenSpielEnv("tic_tac_toe")
    >>> env.action_key, env.reward_key, env.done_keys
    (('agents', 'action'), ('agents', 'reward'), ['done', 'terminated'])
    >>> next_seed = env.set_seed(0)
    >>> data = env.rollout(20)  # random legal moves, to the end of the game
    >>> bool(data["next", "done"][-1]), data["next", "agents", "reward"].shape[1:]
    (True, torch.Size([2, 1]))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from cadence._utils import MAX_QUOTED, ClassProperty, quoted
from cadence.data import Categorical, Composite, NonTensor, OneHot, TensorSpec, Unbounded
from cadence.envs.common import EnvBase
from cadence.envs.marl_grouping import MarlGroupMapType, check_marl_grouping

__all__ = ["ChanceSampler", "OpenSpielEnv", "OpenSpielWrapper"]

_INSTALL_HINT = 'pip install "cadence[open_spiel]"'

#: ``chance_sampler(outcomes, probabilities) -> outcome``: picks one of a chance node's outcomes
ChanceSampler = Callable[[list[int], list[float]], int]


def _import_pyspiel(caller: str = "OpenSpielEnv") -> Any:
    """Imports pyspiel, or raises an ImportError that says how to install it."""
    try:
        import pyspiel
    except ImportError as err:
        raise ImportError(f"{caller} needs the open_spiel library, which is not installed: {_INSTALL_HINT}.") from err
    return pyspiel


def _game_names() -> list[str]:
    """The short names of OpenSpiel's registered games ([] without open_spiel)."""
    try:
        pyspiel = _import_pyspiel()
    except ImportError:
        return []
    return [game.short_name for game in pyspiel.registered_games()]


def _first_line(err: BaseException) -> str:
    """The first line of an OpenSpiel error, cut to :data:`~cadence._utils.MAX_QUOTED`
    characters: OpenSpiel's messages go on with every game's name, and quote what they got."""
    lines = str(err).splitlines()
    line = lines[0] if lines else ""
    return line if len(line) <= MAX_QUOTED else f"{line[:MAX_QUOTED]}... ({len(line)} characters)"


class OpenSpielWrapper(EnvBase):
    """Wraps an OpenSpiel game (or one of its states) as a multi-agent Cadence env (see the module).

    Args:
        env: a ``pyspiel.State`` (as the reference takes) or a ``pyspiel.Game``; only its
            game matters: ``reset`` starts a new game of it.
        group_map: how the players are grouped: a :class:`MarlGroupMapType` or
            ``{"group": ["player_0", ...]}`` (``None``: a group per player). Defaults to one
            group, ``"agents"``.
        categorical_actions: actions as indices (``Categorical``) rather than one-hot
            vectors (``OneHot``, the default, as in the reference).
        return_state: add ``"state"``, the serialized game state, to every output; a
            reset input holding one restores it.
        chance_sampler: ``(outcomes, probabilities) -> outcome``, to resolve chance nodes;
            by default an outcome is drawn with the env's seeded generator.
        device: where the data lives.
        batch_size: must be empty (batch games with ``SerialEnv``/``ParallelEnv``).
        run_type_checks: as in ``EnvBase``.

    Raises:
        ImportError: open_spiel is not installed (the message says how to install it).
        TypeError: ``env`` is neither a pyspiel state nor a game.
        ValueError: a non-empty ``batch_size``, a mean-field game, a game with neither
            observation nor information-state tensors, or a group map that does not place
            every player in exactly one group.

    Examples:
        >>> import pytest; pyspiel = pytest.importorskip("pyspiel")  # skips without open_spiel
        >>> game = pyspiel.load_game("kuhn_poker")
        >>> env = OpenSpielWrapper(game.new_initial_state(), group_map=MarlGroupMapType.ONE_GROUP_PER_AGENT)
        >>> env.group_map
        {'player_0': ['player_0'], 'player_1': ['player_1']}
        >>> sorted(env.observation_spec["player_0"].keys())
        ['action_mask', 'information_state', 'observation']
        >>> env.observation_spec["player_0", "observation"].shape
        torch.Size([1, 7])
    """

    #: the short names of OpenSpiel's registered games (empty without open_spiel)
    available_envs = ClassProperty(lambda cls: _game_names())
    #: the pyspiel module (imported on first access)
    lib = ClassProperty(lambda cls: _import_pyspiel(cls.__name__))

    def __init__(
        self,
        env: Any,
        *,
        group_map: MarlGroupMapType | Mapping[str, Sequence[str]] | None = MarlGroupMapType.ALL_IN_ONE_GROUP,
        categorical_actions: bool = False,
        return_state: bool = False,
        chance_sampler: ChanceSampler | None = None,
        device: torch.device | str | None = None,
        batch_size: torch.Size | tuple[int, ...] | list[int] | None = None,
        run_type_checks: bool = False,
    ) -> None:
        pyspiel = _import_pyspiel(type(self).__name__)
        name = type(self).__name__
        if isinstance(env, pyspiel.Game):
            env = env.new_initial_state()
        if not isinstance(env, pyspiel.State):
            raise TypeError(
                f"{name}: env must be a pyspiel.State or pyspiel.Game, got {type(env).__name__}: {quoted(env)}"
            )
        if batch_size is not None and not (isinstance(batch_size, (list, tuple)) and len(batch_size) == 0):
            raise ValueError(
                f"{name}: batch_size must be empty (None, () or []), got {quoted(batch_size)}; batch several games "
                "with SerialEnv or ParallelEnv."
            )
        # a reset may restore any state, a finished game's too
        super().__init__(device=device, run_type_checks=run_type_checks, allow_done_after_reset=True)
        self._pyspiel = pyspiel
        self._game = env.get_game()
        game_type = self._game.get_type()
        if game_type.dynamics == pyspiel.GameType.Dynamics.MEAN_FIELD:
            raise ValueError(f"{name}: {game_type.short_name!r} is a mean-field game, which this env does not play.")
        self.has_observation = bool(game_type.provides_observation_tensor)
        self.has_information_state = bool(game_type.provides_information_state_tensor)
        if not (self.has_observation or self.has_information_state):
            raise ValueError(
                f"{name}: {game_type.short_name!r} provides neither an observation tensor nor an information-state "
                "tensor, so its players would observe nothing."
            )
        self.categorical_actions = categorical_actions
        self.return_state = return_state
        self.chance_sampler: ChanceSampler = chance_sampler if chance_sampler is not None else self._draw_chance
        self._chance_rng = np.random.default_rng()
        self.num_actions = int(self._game.num_distinct_actions())
        self.agent_names = [f"player_{index}" for index in range(self._game.num_players())]
        self.agent_names_to_indices_map = {agent: index for index, agent in enumerate(self.agent_names)}
        self.group_map = self._resolve_group_map(group_map)
        slots = {agent: (group, row) for group, agents in self.group_map.items() for row, agent in enumerate(agents)}
        self._slots = [slots[agent] for agent in self.agent_names]  # each player's group and row in it
        self._env = env
        self._returns = np.zeros(len(self.agent_names))
        self._legal: list[list[int]] = [[] for _ in self.agent_names]
        self._build_specs()

    # ------------------------------------------------------------------ setup
    def _resolve_group_map(
        self, group_map: MarlGroupMapType | Mapping[str, Sequence[str]] | None
    ) -> dict[str, list[str]]:
        if group_map is None:
            return MarlGroupMapType.ONE_GROUP_PER_AGENT.get_group_map(self.agent_names)
        if isinstance(group_map, MarlGroupMapType):
            return group_map.get_group_map(self.agent_names)
        check_marl_grouping(group_map, self.agent_names)
        return {group: list(agents) for group, agents in group_map.items()}

    def _build_specs(self) -> None:
        device, n_actions = self.device, self.num_actions
        observations: dict[str, TensorSpec] = {}
        actions: dict[str, TensorSpec] = {}
        rewards: dict[str, TensorSpec] = {}
        for group, agents in self.group_map.items():
            n = len(agents)
            entries: dict[str, TensorSpec] = {}
            if self.has_observation:
                shape = (n, *self._game.observation_tensor_shape())
                entries["observation"] = Unbounded(shape=shape, dtype=torch.float32, device=device)
            if self.has_information_state:
                shape = (n, *self._game.information_state_tensor_shape())
                entries["information_state"] = Unbounded(shape=shape, dtype=torch.float32, device=device)
            entries["action_mask"] = Categorical(2, shape=(n, n_actions), dtype=torch.bool, device=device)
            observations[group] = Composite(entries, shape=(n,), device=device)
            if self.categorical_actions:
                action: TensorSpec = Categorical(n_actions, shape=(n,), dtype=torch.int64, device=device)
            else:
                action = OneHot(n_actions, shape=(n, n_actions), dtype=torch.int64, device=device)
            actions[group] = Composite(action=action, shape=(n,), device=device)
            rewards[group] = Composite(
                reward=Unbounded(shape=(n, 1), dtype=torch.float32, device=device), shape=(n,), device=device
            )
        if self.return_state:
            observations["state"] = NonTensor(shape=(), device=device)
        observations["current_player"] = Unbounded(shape=(), dtype=torch.int32, device=device)
        self.full_observation_spec = Composite(observations, shape=(), device=device)
        self.full_action_spec = Composite(actions, shape=(), device=device)
        self.full_reward_spec = Composite(rewards, shape=(), device=device)
        flag = Categorical(2, shape=(1,), dtype=torch.bool, device=device)
        self.full_done_spec = Composite(done=flag, terminated=flag.clone(), shape=(), device=device)

    # ------------------------------------------------------------------ the game
    @property
    def game(self) -> Any:
        """The ``pyspiel.Game`` being played.

        Examples:
            >>> import pytest; pyspiel = pytest.importorskip("pyspiel")  # skips without open_spiel
            >>> OpenSpielEnv("kuhn_poker").game.num_players()
            2
        """
        return self._game

    def current_player(self) -> int:
        """The player to act now (``-2``: all, at a simultaneous-move node; ``-4``: the game is over).

        Examples:
            >>> import pytest; pyspiel = pytest.importorskip("pyspiel")  # skips without open_spiel
            >>> env = OpenSpielEnv("tic_tac_toe")
            >>> data = env.reset()
            >>> env.current_player(), int(data["current_player"])
            (0, 0)
        """
        return int(self._env.current_player())

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            self._chance_rng = np.random.default_rng(seed)

    def _draw_chance(self, outcomes: list[int], probabilities: list[float]) -> int:
        """The default chance sampler: an outcome drawn with the env's generator."""
        weights = np.asarray(probabilities, dtype=np.float64)
        return outcomes[int(self._chance_rng.choice(len(outcomes), p=weights / weights.sum()))]

    def _resolve_chance_nodes(self) -> None:
        """Plays the chance nodes until a player is to act or the game is over."""
        state = self._env
        while state.is_chance_node():
            outcomes = state.chance_outcomes()
            if not outcomes:
                raise RuntimeError(
                    f"{type(self).__name__}: {self._game} is at a chance node with no explicit outcomes to draw from."
                )
            actions, probabilities = (list(column) for column in zip(*outcomes))
            outcome = self.chance_sampler(actions, probabilities)
            if outcome not in actions:
                raise ValueError(
                    f"{type(self).__name__}: the chance sampler returned {quoted(outcome)}, which is not one of the "
                    f"chance node's outcomes {quoted(actions)}."
                )
            state.apply_action(int(outcome))

    def _update_legal_actions(self) -> np.ndarray:
        """Reads who may do what now; returns the masks of every player, ``[n_players, n_actions]``,
        and writes each group's into its action spec. A player who does not act may only
        take action 0 (which is ignored)."""
        state = self._env
        legal: list[list[int]] = [[] for _ in self.agent_names]
        if state.is_simultaneous_node():
            legal = [list(state.legal_actions(player)) for player in range(len(legal))]
        elif not state.is_terminal():
            player = state.current_player()
            legal[player] = list(state.legal_actions(player))
        self._legal = legal
        masks = np.zeros((len(legal), self.num_actions), dtype=np.bool_)
        for player, actions in enumerate(legal):
            masks[player, actions if actions else 0] = True
        for group, agents in self.group_map.items():
            rows = [self.agent_names_to_indices_map[agent] for agent in agents]
            self.full_action_spec[group, "action"].update_mask(torch.from_numpy(masks[rows]))
        return masks

    def _chosen_actions(self, tensordict: TensorDictBase, group: str) -> list[int]:
        """The action indices a group's agents chose, in the group's order (``-1`` for a
        one-hot row that is not one-hot)."""
        action = tensordict.get((group, "action"))
        if self.categorical_actions:
            return action.reshape(-1).tolist()
        one_hot = (action != 0).sum(-1) == 1
        return torch.where(one_hot, action.argmax(-1), -1).reshape(-1).tolist()

    def _checked(self, player: int, action: int) -> int:
        """``action``, if ``player`` may take it now; else a ``ValueError`` naming the agent and key."""
        legal = self._legal[player]
        if action not in legal:
            group, row = self._slots[player]
            chose = f"chose action {action}, which is not legal" if action >= 0 else "wrote a row that is not one-hot"
            raise ValueError(
                f"{type(self).__name__}: {self.agent_names[player]} (row {row} of {(group, 'action')!r}) {chose} in "
                f"this state of {self._game}; legal actions: {legal}."
            )
        return action

    # ------------------------------------------------------------------ reset, step
    def _output(self, with_reward: bool) -> TensorDictBase:
        state, device = self._env, self.device
        masks = self._update_legal_actions()
        returns = np.asarray(state.returns(), dtype=np.float64)
        rewards = returns - self._returns
        self._returns = returns
        done = torch.tensor([state.is_terminal()], device=device)
        out: dict[str, Any] = {
            "done": done,
            "terminated": done.clone(),
            "current_player": torch.tensor(state.current_player(), dtype=torch.int32, device=device),
        }
        for group, agents in self.group_map.items():
            players = [self.agent_names_to_indices_map[agent] for agent in agents]
            entries: dict[str, torch.Tensor] = {}
            if self.has_observation:
                spec_shape = self.full_observation_spec[group, "observation"].shape
                values = [state.observation_tensor(player) for player in players]
                entries["observation"] = torch.tensor(values, dtype=torch.float32, device=device).reshape(spec_shape)
            if self.has_information_state:
                spec_shape = self.full_observation_spec[group, "information_state"].shape
                values = [state.information_state_tensor(player) for player in players]
                entries["information_state"] = torch.tensor(values, dtype=torch.float32, device=device).reshape(
                    spec_shape
                )
            entries["action_mask"] = torch.from_numpy(masks[players]).to(device)
            if with_reward:
                entries["reward"] = torch.tensor(rewards[players], dtype=torch.float32, device=device).unsqueeze(-1)
            out[group] = TensorDict(entries, batch_size=[len(players)], device=device)
        if self.return_state:
            out["state"] = state.serialize()
        return TensorDict(out, batch_size=[], device=device)

    def _restored(self, value: Any) -> Any:
        """The game state a reset input's ``"state"`` entry holds (a serialized state)."""
        text = getattr(value, "data", value)  # a NonTensorData entry holds the string
        if not isinstance(text, str):
            raise TypeError(
                f"{type(self).__name__}.reset: the 'state' entry must hold a serialized state of {self._game} (a "
                f"str, as the env's 'state' output), got {type(text).__name__}: {quoted(text)}"
            )
        try:
            return self._game.deserialize_state(text)
        except (self._pyspiel.SpielError, ValueError, IndexError, RuntimeError) as err:  # pybind's C++ errors
            raise ValueError(
                f"{type(self).__name__}.reset: the 'state' entry {quoted(text)} is not a state of {self._game}: "
                f"{_first_line(err)}"
            ) from err

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        saved = None
        if tensordict is not None and "_reset" not in tensordict.keys():  # not a reset of done games
            saved = tensordict.get("state", None)
        self._env = self._restored(saved) if saved is not None else self._game.new_initial_state()
        self._resolve_chance_nodes()
        return self._output(with_reward=False)  # the returns so far become the baseline of the next reward

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        state = self._env
        if state.is_simultaneous_node():
            joint = [0] * len(self.agent_names)
            for group, agents in self.group_map.items():
                for agent, action in zip(agents, self._chosen_actions(tensordict, group)):
                    player = self.agent_names_to_indices_map[agent]
                    joint[player] = self._checked(player, action) if self._legal[player] else 0
            state.apply_actions(joint)
        elif not state.is_terminal():  # a finished game stays as it is
            player = state.current_player()
            group, row = self._slots[player]
            state.apply_action(self._checked(player, self._chosen_actions(tensordict, group)[row]))
        self._resolve_chance_nodes()
        return self._output(with_reward=True)

    #: The game steps through ``step()`` on TensorDicts (its per-agent data, whose agents take turns).
    generic_values_step = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(game={self._game}, batch_size={self.batch_size}, device={self.device})"


class OpenSpielEnv(OpenSpielWrapper):
    """An OpenSpiel game built from its name (see :class:`OpenSpielWrapper` and the module).

    Args:
        game_string: the game's name, with parameters if any: ``"tic_tac_toe"``,
            ``"kuhn_poker(players=3)"`` (see ``OpenSpielEnv.available_envs``).
        parameters: the game's parameters as a mapping (``{"players": 3}``), rather than in
            the name.
        **kwargs: the wrapper's options (``group_map``, ``categorical_actions``,
            ``return_state``, ``chance_sampler``, ``device``...).

    Raises:
        ImportError: open_spiel is not installed (the message says how to install it).
        TypeError: ``game_string`` is not a str, or ``parameters`` not a mapping.
        ValueError: no OpenSpiel game has the name (checked before OpenSpiel sees it),
            OpenSpiel cannot load the game (an unknown or ill-typed parameter), or as
            :class:`OpenSpielWrapper`. Messages quote at most a few hundred characters of
            the name and parameters.

    Examples:
        >>> import pytest; pyspiel = pytest.importorskip("pyspiel")  # skips without open_spiel
        >>> env = OpenSpielEnv("kuhn_poker", parameters={"players": 3}, categorical_actions=True)
        >>> env.agent_names, env.action_spec.shape
        (['player_0', 'player_1', 'player_2'], torch.Size([3]))
        >>> "tic_tac_toe" in OpenSpielEnv.available_envs
        True
        >>> OpenSpielEnv("tic_tac_toe(board_size=-1)")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: OpenSpielEnv: OpenSpiel cannot load 'tic_tac_toe(board_size=-1)' with parameters {}: ...
    """

    def __init__(self, game_string: str, *, parameters: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        name = type(self).__name__
        if not isinstance(game_string, str):
            raise TypeError(
                f"{name}: game_string must be a game's name (a str such as 'tic_tac_toe'), got "
                f"{type(game_string).__name__} {quoted(game_string)}"
            )
        if parameters is not None and not isinstance(parameters, Mapping):
            raise TypeError(
                f"{name}: parameters must be a mapping of the game's parameters ({{'players': 3}}), got "
                f"{type(parameters).__name__} {quoted(parameters)}"
            )
        pyspiel = _import_pyspiel(name)
        # refused here: OpenSpiel would print the name (and every game's) to stderr first
        short_name = game_string.split("(", 1)[0]
        game_type = next((game for game in pyspiel.registered_games() if game.short_name == short_name), None)
        if game_type is None:
            raise ValueError(
                f"{name}: game_string {quoted(game_string)} names no OpenSpiel game (OpenSpielEnv.available_envs "
                "lists the games)."
            )
        known = game_type.parameter_specification
        unknown = [key for key in parameters or {} if key not in known]
        if unknown:
            raise ValueError(
                f"{name}: {short_name!r} has no parameter {quoted(unknown[0])} (in parameters); its parameters are "
                f"{sorted(known)}."
            )
        try:
            game = pyspiel.load_game(game_string, dict(parameters)) if parameters else pyspiel.load_game(game_string)
        except (pyspiel.SpielError, TypeError, IndexError, RuntimeError) as err:
            # OpenSpiel's C++ errors as pybind raises them; TypeError: a parameter value of no type OpenSpiel takes
            raise ValueError(
                f"{name}: OpenSpiel cannot load {quoted(game_string)} with parameters "
                f"{quoted(dict(parameters or {}))}: {_first_line(err)} (OpenSpielEnv.available_envs lists the games)."
            ) from err
        self.game_string = game_string
        super().__init__(game, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={self.game_string}, batch_size={self.batch_size}, device={self.device})"
