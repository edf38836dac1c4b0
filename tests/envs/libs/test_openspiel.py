"""OpenSpielEnv / OpenSpielWrapper: OpenSpiel's games as multi-agent envs."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from tensordict import TensorDict

pyspiel = pytest.importorskip("pyspiel", reason="needs the open_spiel extra: pip install 'cadence[open_spiel]'")

from cadence.data import Categorical, Composite, NonTensor, OneHot, Unbounded  # noqa: E402
from cadence.envs.batched import SerialEnv  # noqa: E402
from cadence.envs.libs.openspiel import OpenSpielEnv, OpenSpielWrapper  # noqa: E402
from cadence.envs.marl_grouping import MarlGroupMapType  # noqa: E402
from cadence.envs.parallel import ParallelEnv  # noqa: E402
from cadence.envs.transforms import ActionMask, TransformedEnv  # noqa: E402
from cadence.envs.utils import check_env_specs, step_mdp  # noqa: E402

TURN_BASED_CHANCE = "kuhn_poker"
SIMULTANEOUS = "matrix_rps"  # rock, paper, scissors: one simultaneous move
SIMULTANEOUS_CHANCE = "goofspiel"  # a chance node (the prize card) before each simultaneous bid


def masked_random_policy(env, seed: int = 0):
    """Draws, for every agent of every group, an action its ``action_mask`` allows, written
    as the env's action spec says (one-hot or index); works for batched envs too."""
    generator = torch.Generator().manual_seed(seed)
    groups = list(env.group_map) if hasattr(env, "group_map") and isinstance(env.group_map, dict) else ["agents"]

    def policy(data):
        for group in groups:
            mask = data.get((group, "action_mask"))
            flat = mask.reshape(-1, mask.shape[-1]).float()
            index = torch.multinomial(flat, 1, generator=generator).reshape(mask.shape[:-1])
            if isinstance(env.full_action_spec[group, "action"], OneHot):
                data.set((group, "action"), torch.nn.functional.one_hot(index, mask.shape[-1]))
            else:
                data.set((group, "action"), index)
        return data

    return policy


def one_hot(index: int, n: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(index), n)


def play(env, data, actions_by_player: list[int]):
    """Steps a turn-based game: each action goes to the current player's row (the other
    rows hold action 0, which the env ignores); returns every step's data."""
    steps = []
    for action in actions_by_player:
        rows = torch.zeros(2, env.num_actions, dtype=torch.int64)
        rows[int(data["current_player"])] = one_hot(action, env.num_actions)
        data.set(("agents", "action"), rows)
        stepped = env.step(data)
        steps.append(stepped.clone())
        data = next_input(env, stepped)
    return steps, data


def next_input(env, stepped):
    """``step_mdp`` told the env's nested keys (the group's reward stays behind)."""
    return step_mdp(stepped, reward_keys=env.reward_keys, done_keys=env.done_keys, action_keys=env.action_keys)


def only_chance_moves(game, serialized: str) -> bool:
    """Whether a serialized state's history holds chance outcomes only (a game just begun)."""
    state = game.new_initial_state()
    for action in game.deserialize_state(serialized).history():
        if not state.is_chance_node():
            return False
        state.apply_action(action)
    return True


def assert_same(a, b) -> None:
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        torch.testing.assert_close(a.get(key), b.get(key), rtol=0, atol=0, msg=lambda m: f"{key}: {m}")


# ---------------------------------------------------------------- specs and keys
def test_tic_tac_toe_layout_and_nested_keys():
    env = OpenSpielEnv("tic_tac_toe")
    assert env.agent_names == ["player_0", "player_1"] and env.group_map == {"agents": ["player_0", "player_1"]}
    assert env.action_key == ("agents", "action") and env.reward_key == ("agents", "reward")
    assert env.done_keys == ["done", "terminated"] and env.reward_keys == [("agents", "reward")]
    # the leaf accessors return the group's leaf; the full specs keep the nesting
    assert isinstance(env.action_spec, OneHot) and env.action_spec.shape == (2, 9)
    assert env.action_spec.dtype == torch.int64
    assert isinstance(env.reward_spec, Unbounded) and env.reward_spec.shape == (2, 1)
    assert env.reward_spec == env.output_spec["full_reward_spec"][env.reward_key]
    assert env.action_spec == env.full_action_spec[env.action_key]
    assert isinstance(env.output_spec["full_reward_spec"]["agents"], Composite)
    assert env.output_spec["full_reward_spec"]["agents"].shape == (2,)
    observations = env.observation_spec
    assert observations["agents"].shape == (2,) and observations["agents", "observation"].shape == (2, 3, 3, 3)
    assert "information_state" not in observations["agents"].keys()  # tic-tac-toe provides none
    assert isinstance(observations["agents", "action_mask"], Categorical)
    assert observations["agents", "action_mask"].shape == (2, 9)
    assert observations["current_player"].dtype == torch.int32 and "state" not in observations.keys()
    assert env.full_done_spec["done"].shape == (1,)
    check_env_specs(env, seed=0)


def test_categorical_actions_return_state_and_information_state():
    env = OpenSpielEnv(TURN_BASED_CHANCE, categorical_actions=True, return_state=True)
    assert isinstance(env.action_spec, Categorical) and env.action_spec.shape == (2,) and env.action_spec.n == 2
    assert env.observation_spec["agents", "information_state"].shape == (2, 11)
    assert env.observation_spec["agents", "observation"].shape == (2, 7)
    assert isinstance(env.observation_spec["state"], NonTensor)
    data = env.reset()
    assert isinstance(data["state"], str) and env.game.deserialize_state(data["state"]).serialize() == data["state"]
    check_env_specs(env, seed=0)


@pytest.mark.parametrize(
    "group_map",
    [MarlGroupMapType.ONE_GROUP_PER_AGENT, None, {"o": ["player_1"], "x": ["player_0"]}],
    ids=["one-group-per-agent", "none", "custom"],
)
def test_group_maps(group_map):
    env = OpenSpielEnv("tic_tac_toe", group_map=group_map)
    groups = ["o", "x"] if isinstance(group_map, dict) else ["player_0", "player_1"]
    assert sorted(env.group_map) == groups
    assert sorted(env.reward_keys) == [(group, "reward") for group in groups]
    for group in groups:
        assert env.full_action_spec[group, "action"].shape == (1, 9)
        assert env.observation_spec[group, "observation"].shape == (1, 3, 3, 3)
    check_env_specs(env, seed=0)
    data = env.rollout(20, masked_random_policy(env))
    assert bool(data["next", "done"][-1])
    first_mover = "x" if isinstance(group_map, dict) else "player_0"
    assert data[first_mover, "action_mask"][0].all()  # the empty board: every cell is legal for the first player


def test_a_group_map_must_place_every_player_once():
    with pytest.raises(ValueError, match="agent 'player_1' is in no group"):
        OpenSpielEnv("tic_tac_toe", group_map={"agents": ["player_0"]})


# ---------------------------------------------------------------- playing
@pytest.mark.parametrize("categorical", [False, True])
@pytest.mark.parametrize("name", ["tic_tac_toe", TURN_BASED_CHANCE, "leduc_poker", SIMULTANEOUS, SIMULTANEOUS_CHANCE])
def test_masked_random_play_to_the_end_of_games(name, categorical):
    env = OpenSpielEnv(name, categorical_actions=categorical, return_state=True)
    check_env_specs(env, seed=1)
    env.set_seed(1)
    data = env.rollout(400, masked_random_policy(env), break_when_any_done=False)
    done = data["next", "done"].squeeze(-1)
    assert done.sum() >= 2  # several games, each followed by a new one
    rewards = data["next", "agents", "reward"].squeeze(-1)
    ends = done.nonzero().squeeze(-1).tolist()
    start = 0
    for end in ends:  # each game's rewards add up to its players' returns
        final = env.game.deserialize_state(data["next", "state"][end])
        np.testing.assert_allclose(rewards[start : end + 1].sum(0).numpy(), final.returns(), atol=1e-5)
        start = end + 1
    for t in [end + 1 for end in ends if end + 1 < len(done)]:  # after a game, a new one (only chance moves yet)
        assert only_chance_moves(env.game, data["state"][t])
    player = data["current_player"]  # a player (or all, simultaneously) is to act at every input; never chance
    assert ((player >= 0) | (player == pyspiel.PlayerId.SIMULTANEOUS)).all()
    assert (data["next", "current_player"][done] == pyspiel.PlayerId.TERMINAL).all()


def test_only_the_current_players_action_is_used():
    env = OpenSpielEnv("tic_tac_toe")
    data = env.reset()
    rows = torch.stack([one_hot(4, 9), one_hot(7, 9)])  # player_1's action (cell 7) is not its turn: ignored
    data = next_input(env, env.step(data.set(("agents", "action"), rows)))
    board = data["agents", "observation"][0]  # player_0's view: planes empty, o, x
    assert board[2].flatten().nonzero().flatten().tolist() == [4] and not board[1].any()
    assert int(data["current_player"]) == 1
    assert data["agents", "action_mask"][1].sum() == 8 and not data["agents", "action_mask"][1, 4]
    assert data["agents", "action_mask"][0].tolist() == [True] + [False] * 8  # not its turn: action 0 alone


def test_an_illegal_action_is_named():
    env = OpenSpielEnv("tic_tac_toe", categorical_actions=True)
    data = next_input(env, env.step(env.reset().set(("agents", "action"), torch.tensor([4, 0]))))
    with pytest.raises(ValueError, match=r"player_1 \(row 1 of \('agents', 'action'\)\) chose action 4, which is "
                                         r"not legal.*legal actions: \[0, 1, 2, 3, 5, 6, 7, 8\]"):
        env.step(data.set(("agents", "action"), torch.tensor([0, 4])))
    one_hot_env = OpenSpielEnv("tic_tac_toe")
    data = one_hot_env.reset().set(("agents", "action"), torch.zeros(2, 9, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"player_0 \(row 0 of \('agents', 'action'\)\) wrote a row that is not one-hot"):
        one_hot_env.step(data)


def test_a_game_that_scores_as_it_goes_rewards_each_step():
    env = OpenSpielEnv("2048")  # one player; merging tiles scores at once
    env.set_seed(0)
    data = env.rollout(200, masked_random_policy(env))
    rewards = data["next", "agents", "reward"].flatten()
    assert rewards.shape == (len(data),) and (rewards > 0).sum() > 1 and (rewards == 0).any()
    state = pyspiel.load_game("2048").deserialize_state(env._env.serialize())
    assert float(rewards.sum()) == pytest.approx(state.returns()[0])


def test_simultaneous_moves_use_every_players_action():
    env = OpenSpielEnv(SIMULTANEOUS, categorical_actions=True)
    data = env.reset()
    assert int(data["current_player"]) == pyspiel.PlayerId.SIMULTANEOUS and data["agents", "action_mask"].all()
    out = env.step(data.set(("agents", "action"), torch.tensor([0, 1])))  # rock against paper
    assert out["next", "agents", "reward"].flatten().tolist() == [-1.0, 1.0] and bool(out["next", "done"])
    out = env.step(env.reset().set(("agents", "action"), torch.tensor([2, 1])))  # scissors against paper
    assert out["next", "agents", "reward"].flatten().tolist() == [1.0, -1.0]


# ---------------------------------------------------------------- chance, seeding
def test_chance_nodes_are_drawn_with_the_seeded_generator():
    env = OpenSpielEnv(TURN_BASED_CHANCE, return_state=True)

    def deal(seed):
        env.set_seed(seed)
        return env.reset()["state"]  # kuhn's state: the two cards dealt

    deals = [deal(seed) for seed in range(12)]
    assert deals == [deal(seed) for seed in range(12)] and len(set(deals)) > 1
    for state in deals:
        assert len(env.game.deserialize_state(state).history()) == 2  # the deal is done: a player is to act


def test_a_chance_sampler_of_your_own():
    env = OpenSpielEnv(TURN_BASED_CHANCE, return_state=True, chance_sampler=lambda outcomes, p: outcomes[-1])
    assert env.reset()["state"] == "2\n1\n"  # the last card each time: the king, then the queen
    bad = OpenSpielEnv(TURN_BASED_CHANCE, chance_sampler=lambda outcomes, p: 7)
    with pytest.raises(ValueError, match=r"chance sampler returned 7, which is not one of .* \[0, 1, 2\]"):
        bad.reset()


@pytest.mark.parametrize("name", [TURN_BASED_CHANCE, SIMULTANEOUS_CHANCE])
def test_seeding_reproduces_the_rollout(name):
    def run(seed):
        env = OpenSpielEnv(name, return_state=True)
        env.set_seed(seed)
        return env.rollout(60, break_when_any_done=False)  # random legal actions, from the env's rng

    first, second = run(3), run(3)
    assert_same(first, second)
    assert list(first["state"]) == list(second["state"])
    assert list(run(4)["state"]) != list(first["state"])


# ---------------------------------------------------------------- state restore
@pytest.mark.parametrize("name", ["tic_tac_toe", TURN_BASED_CHANCE])
def test_reset_from_a_saved_state_continues_identically(name):
    env = OpenSpielEnv(name, return_state=True)
    env.set_seed(0)
    moves = {"tic_tac_toe": [4, 0, 8, 2, 6, 1], TURN_BASED_CHANCE: [0, 1, 1]}[name]
    _, data = play(env, env.reset(), moves[:2])
    saved = data.clone()
    continued, _ = play(env, data, moves[2:])
    restored = env.reset(saved.exclude(("agents", "action")))
    assert_same(restored.exclude(("agents", "action")), saved.exclude(("agents", "action")))
    assert restored["state"] == saved["state"]
    again, _ = play(env, restored, moves[2:])
    for first, second in zip(continued, again):
        assert_same(first, second)
        assert first["next", "state"] == second["next", "state"]
    assert bool(again[-1]["next", "done"])


def test_a_finished_game_can_be_restored():
    env = OpenSpielEnv("tic_tac_toe", return_state=True)
    steps, _ = play(env, env.reset(), [0, 3, 1, 4, 2])  # a row for player_0
    final = steps[-1]["next"]
    assert bool(final["done"]) and final["agents", "reward"].flatten().tolist() == [1.0, -1.0]
    restored = env.reset(TensorDict({"state": final["state"]}, []))
    assert bool(restored["done"]) and int(restored["current_player"]) == pyspiel.PlayerId.TERMINAL


def test_a_reset_of_done_games_starts_a_new_one():
    env = OpenSpielEnv("tic_tac_toe", return_state=True)
    steps, data = play(env, env.reset(), [0, 3, 1, 4, 2])
    assert bool(data["done"])
    data["_reset"] = data["done"].clone()  # as rollouts and batched envs send: the state entry is the old game's
    fresh = env.reset(data)
    assert fresh["state"] == env.game.new_initial_state().serialize() and int(fresh["current_player"]) == 0 and not bool(fresh["done"])


def test_a_bad_saved_state_is_named():
    env = OpenSpielEnv("tic_tac_toe", return_state=True)
    with pytest.raises(ValueError, match=r"reset: the 'state' entry 'not a state' is not a state of tic_tac_toe"):
        env.reset(TensorDict({"state": "not a state"}, []))
    with pytest.raises(TypeError, match=r"the 'state' entry must hold a serialized state .* got Tensor"):
        env.reset(TensorDict({"state": torch.tensor(3)}, []))


# ---------------------------------------------------------------- batches
def make_kuhn():
    return OpenSpielEnv(TURN_BASED_CHANCE, return_state=True)


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv])
def test_serial_and_parallel_batches_play_whole_games(batched):
    env = batched(2, make_kuhn)
    try:
        assert env.batch_size == (2,) and env.action_key == ("agents", "action")
        assert env.full_action_spec["agents", "action"].shape == (2, 2, 2)
        env.set_seed(0)
        data = env.rollout(30, masked_random_policy(env), break_when_any_done=False)
        assert data["next", "agents", "reward"].shape == (2, 30, 2, 1)
        assert (data["next", "done"].sum(1) >= 3).all()  # kuhn games last 2 or 3 moves
        assert len(data["next", "state"][0]) == 30
        reference = SerialEnv(2, make_kuhn)
        reference.set_seed(0)
        assert_same(reference.rollout(30, masked_random_policy(reference), break_when_any_done=False), data)
        reference.close()
    finally:
        env.close()


def test_action_mask_transform_lets_a_batch_draw_legal_moves():
    env = TransformedEnv(
        ParallelEnv(2, lambda: OpenSpielEnv("tic_tac_toe")),
        ActionMask(action_key=("agents", "action"), mask_key=("agents", "action_mask")),
    )
    try:
        env.set_seed(0)
        data = env.rollout(40, break_when_any_done=False)  # the spec's random actions, masked as the games stand
        assert data["next", "done"].sum() >= 4
    finally:
        env.close()


# ---------------------------------------------------------------- construction
def test_the_wrapper_takes_a_state_or_a_game():
    game = pyspiel.load_game("tic_tac_toe")
    for env in (OpenSpielWrapper(game.new_initial_state()), OpenSpielWrapper(game)):
        assert env.game.get_type().short_name == "tic_tac_toe" and env.num_actions == 9
        assert int(env.reset()["current_player"]) == 0
    assert OpenSpielWrapper.lib is pyspiel and "kuhn_poker" in OpenSpielEnv.available_envs


def test_parameters_by_name_or_mapping():
    assert OpenSpielEnv("kuhn_poker(players=3)").agent_names == ["player_0", "player_1", "player_2"]
    env = OpenSpielEnv("kuhn_poker", parameters={"players": 3})
    assert env.full_action_spec["agents", "action"].shape == (3, 2)
    check_env_specs(env, seed=0)


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: OpenSpielEnv("no_such_game"), ValueError, r"game_string 'no_such_game' names no OpenSpiel game"),
        (lambda: OpenSpielEnv("tic_tac_toe", batch_size=[2]), ValueError, r"batch_size must be empty .*got \[2\]"),
        (lambda: OpenSpielEnv("tic_tac_toe", batch_size="ab"), ValueError, r"batch_size must be empty .*got 'ab'"),
        (lambda: OpenSpielWrapper("tic_tac_toe"), TypeError, r"must be a pyspiel.State or pyspiel.Game, got str"),
        (lambda: OpenSpielEnv("mfg_crowd_modelling"), ValueError, r"'mfg_crowd_modelling' is a mean-field game"),
        (lambda: OpenSpielEnv(123), TypeError, r"game_string must be a game's name .*got int 123"),
        (lambda: OpenSpielEnv("kuhn_poker", parameters=[("players", 3)]), TypeError, r"parameters must be a mapping"),
        (lambda: OpenSpielEnv("kuhn_poker", parameters={"seats": 3}), ValueError,
         r"'kuhn_poker' has no parameter 'seats' \(in parameters\); its parameters are \['players'\]"),
        (lambda: OpenSpielEnv("kuhn_poker", parameters={"players": -1}), ValueError,
         r"OpenSpiel cannot load 'kuhn_poker' with parameters \{'players': -1\}: .*num_players"),
        (lambda: OpenSpielEnv("kuhn_poker", parameters={"players": [3]}), ValueError,
         r"OpenSpiel cannot load 'kuhn_poker' with parameters \{'players': \[3\]\}"),
    ],
    ids=["unknown game", "batch size", "batch size str", "not a game", "mean field", "name not str",
         "parameters not a mapping", "unknown parameter", "bad parameter value", "parameter of no type"],
)
def test_construction_errors_are_named(build, error, match):
    with pytest.raises(error, match=match):
        build()


@pytest.mark.parametrize(
    "build",
    [
        lambda big: OpenSpielEnv(big),
        lambda big: OpenSpielEnv(f"kuhn_poker(players={big})"),
        lambda big: OpenSpielEnv("kuhn_poker", parameters={big: 3}),
        lambda big: OpenSpielEnv("kuhn_poker", parameters={"players": big}),
        lambda big: OpenSpielWrapper(big),
        lambda big: OpenSpielEnv("tic_tac_toe", return_state=True).reset(TensorDict({"state": big}, [])),
    ],
    ids=["name", "name with parameters", "parameter name", "parameter value", "wrapper", "saved state"],
)
def test_errors_quote_a_huge_input_briefly(build):
    big = "9" * 10_000
    with pytest.raises((TypeError, ValueError)) as info:
        build(big)
    message = str(info.value)
    assert message.count("9") < 600 and "characters)" in message, message[:1000]


def test_check_env_specs_after_a_reset_of_an_env_whose_mask_follows_the_game():
    env = OpenSpielEnv("tic_tac_toe")
    env.reset()  # the action spec now holds the masks of the empty board; each step's actions follow their own
    check_env_specs(env, seed=0)


def test_importing_the_module_does_not_import_pyspiel():
    code = "import sys, cadence.envs.libs.openspiel; assert 'pyspiel' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
