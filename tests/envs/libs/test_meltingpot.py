"""MeltingpotEnv / MeltingpotWrapper: Melting Pot substrates as multi-agent Cadence envs.

One small substrate (two players, 40 x 40 views) is used throughout. What the substrate
emits is read through its own observables (``substrate.observables()``: every action it
receives and every timestep it returns), so that the tests compare the wrapper's data with
the backend's without replaying an episode (Melting Pot does not replay from a seed).
"""

from __future__ import annotations

import pytest
import torch

mp = pytest.importorskip(
    "meltingpot", reason='Melting Pot is not installed (pip install "cadence[meltingpot]"); its wrappers are untested'
)

from meltingpot import substrate as mp_substrate  # noqa: E402
from meltingpot.utils.substrates import builder as mp_builder  # noqa: E402

from cadence.data import Bounded, Categorical, OneHot  # noqa: E402
from cadence.envs import MarlGroupMapType, ParallelEnv, SerialEnv, check_env_specs  # noqa: E402
from cadence.envs.libs.meltingpot import MeltingpotEnv, MeltingpotWrapper, lab2d_seed  # noqa: E402

NAME = "running_with_scissors_in_the_matrix__one_shot"
OWN_KEYS = ["COLLECTIVE_REWARD", "INTERACTION_INVENTORIES", "INVENTORY", "READY_TO_SHOOT", "RGB"]
INTERACT = 7  # the substrate's interaction beam: one interaction ends its episode


def _never_interact(env):
    """Masks the interaction beam out of the random actions, so that only max_steps ends an episode."""
    for key in env.action_keys:
        env.full_action_spec[key].update_mask(torch.arange(8) != INTERACT)
    return env


def _built_substrate():
    return mp_substrate.build(NAME, roles=mp_substrate.get_config(NAME).default_player_roles)


class _Recorder:
    """Everything a substrate receives and returns, from its observables."""

    def __init__(self, substrate) -> None:
        self.actions: list[list[int]] = []
        self.timesteps: list = []
        observables = substrate.observables()
        observables.action.subscribe(lambda action: self.actions.append([int(a) for a in action]))
        observables.timestep.subscribe(self.timesteps.append)


@pytest.fixture(scope="module")
def env() -> MeltingpotEnv:
    """A shared env for the tests that only read specs or roll out."""
    built = MeltingpotEnv(NAME, seed=0)
    yield built
    built.close()


# ------------------------------------------------------------------ layout
def test_layout_and_specs(env: MeltingpotEnv) -> None:
    assert env.agent_names == ["player_0", "player_1"]
    assert env.agent_names_to_indices_map == {"player_0": 0, "player_1": 1}
    assert env.group_map == {"agents": ["player_0", "player_1"]}
    assert env.action_keys == [("agents", "action")] and env.reward_keys == [("agents", "reward")]
    assert env.done_keys == ["done", "terminated"]  # a Melting Pot episode terminates; no truncation
    action = env.full_action_spec["agents", "action"]
    assert isinstance(action, Categorical) and action.n == 8 and action.shape == (2,)
    own = env.observation_spec["agents", "observation"]
    assert sorted(own.keys()) == OWN_KEYS
    assert own["RGB"].shape == (2, 40, 40, 3) and own["RGB"].dtype == torch.uint8 and isinstance(own["RGB"], Bounded)
    assert own["INVENTORY"].shape == (2, 3) and own["INVENTORY"].dtype == torch.float64
    assert own["INTERACTION_INVENTORIES"].shape == (2, 2, 3)
    assert own["READY_TO_SHOOT"].shape == (2, 1)  # a scalar per player gets a trailing dim
    world = env.observation_spec["WORLD.RGB"]
    assert world.shape == (120, 184, 3) and world.dtype == torch.uint8
    reward = env.full_reward_spec["agents", "reward"]
    assert reward.shape == (2, 1) and reward.dtype == torch.float64
    check_env_specs(env)


def test_rollout_data_are_what_the_substrate_emits() -> None:
    built = _built_substrate()
    recorder = _Recorder(built)
    env = _never_interact(MeltingpotWrapper(built))
    data = env.rollout(6)
    assert data.batch_size == (6,)
    # the actions reach the substrate in the players' order, one int each
    assert recorder.actions == data["agents", "action"].tolist()
    reset, *steps = recorder.timesteps
    for t, timestep in enumerate(steps):
        for player in range(2):
            for key in OWN_KEYS:
                expected = torch.as_tensor(timestep.observation[player][key]).reshape(
                    data["next", "agents", "observation", key][t, player].shape
                )
                assert torch.equal(data["next", "agents", "observation", key][t, player], expected), (t, player, key)
            assert data["next", "agents", "reward"][t, player].item() == float(timestep.reward[player])
        assert torch.equal(data["next", "WORLD.RGB"][t], torch.as_tensor(timestep.observation[0]["WORLD.RGB"]))
    assert torch.equal(data["WORLD.RGB"][0], torch.as_tensor(reset.observation[0]["WORLD.RGB"]))
    assert torch.equal(data["agents", "observation", "RGB"][0, 1], torch.as_tensor(reset.observation[1]["RGB"]))
    # the root data of step t+1 are the "next" data of step t
    assert torch.equal(data["WORLD.RGB"][1:], data["next", "WORLD.RGB"][:-1])


def test_builds_the_substrate_as_meltingpot_does() -> None:
    ours = MeltingpotEnv(NAME)
    theirs = MeltingpotWrapper(_built_substrate())
    assert ours.output_spec == theirs.output_spec
    assert ours.input_spec == theirs.input_spec
    assert ours.substrate_name == NAME and ours.roles == ("default", "default") and ours.substrate_seed is None


def test_render_is_the_world_frame(env: MeltingpotEnv) -> None:
    data = env.reset()
    assert torch.equal(env.render(), data["WORLD.RGB"])
    stepped = env.rand_step(data)
    assert torch.equal(env.render(), stepped["next", "WORLD.RGB"])


# ------------------------------------------------------------------ options
def test_max_steps_terminates_episodes() -> None:
    env = _never_interact(MeltingpotEnv(NAME, seed=1, max_steps=4))
    data = env.rollout(10)
    assert data.batch_size == (4,)
    assert data["next", "done"].squeeze(-1).tolist() == [False, False, False, True]
    assert torch.equal(data["next", "terminated"], data["next", "done"])
    assert "truncated" not in data["next"].keys()
    assert env.num_cycles == 4
    longer = env.rollout(10, break_when_any_done=False)  # resets after each ended episode
    assert longer["next", "done"].squeeze(-1).nonzero().flatten().tolist() == [3, 7]
    assert env.num_cycles == 2


def test_one_hot_actions_reach_the_substrate_as_indices() -> None:
    env = MeltingpotEnv(NAME, seed=2, categorical_actions=False)
    action = env.full_action_spec["agents", "action"]
    assert isinstance(action, OneHot) and action.shape == (2, 8)
    recorder = _Recorder(env._env)
    data = env.rollout(5, break_when_any_done=False)
    assert data["agents", "action"].shape == (5, 2, 8)
    assert recorder.actions == data["agents", "action"].long().argmax(-1).tolist()
    check_env_specs(env)


def test_group_maps() -> None:
    single = _never_interact(MeltingpotEnv(NAME, group_map=MarlGroupMapType.ONE_GROUP_PER_AGENT))
    assert single.action_keys == [("player_0", "action"), ("player_1", "action")]
    data = single.rollout(3)
    assert data["next", "player_1", "observation", "RGB"].shape == (3, 1, 40, 40, 3)
    assert data["next", "player_0", "reward"].shape == (3, 1, 1)
    check_env_specs(single)

    # groups listed against the substrate's order: each player's data stay its own
    swapped = MeltingpotEnv(NAME, group_map={"first": ["player_1"], "second": ["player_0"]})
    recorder = _Recorder(swapped._env)
    td = swapped.reset()
    td["first", "action"] = torch.tensor([3])
    td["second", "action"] = torch.tensor([5])
    out = swapped.step(td)
    assert recorder.actions == [[5, 3]]
    timestep = recorder.timesteps[-1]
    assert torch.equal(out["next", "first", "observation", "RGB"][0], torch.as_tensor(timestep.observation[1]["RGB"]))
    assert torch.equal(out["next", "second", "observation", "RGB"][0], torch.as_tensor(timestep.observation[0]["RGB"]))

    with pytest.raises(ValueError, match="player_1"):
        MeltingpotWrapper(_built_substrate(), group_map={"agents": ["player_0"]})


def test_built_from_a_config_with_roles() -> None:
    config = mp_substrate.get_config(NAME)
    env = _never_interact(MeltingpotEnv(config, roles=["default", "default"], max_steps=2))
    assert env.substrate_name is None and len(env.agent_names) == 2
    assert env.rollout(5).batch_size == (2,)


# ------------------------------------------------------------------ seeding
def test_set_seed_builds_from_the_derived_lab2d_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    env = MeltingpotEnv(NAME)
    used: list[int | None] = []
    original = mp_builder.builder

    def recording_builder(*args, **kwargs):
        used.append(kwargs.get("env_seed"))
        return original(*args, **kwargs)

    monkeypatch.setattr(mp_builder, "builder", recording_builder)
    env.set_seed(11)
    assert used == []  # the rebuild waits for the next reset
    env.reset()
    assert used == [lab2d_seed(11)] and env.substrate_seed == lab2d_seed(11)
    env.reset()  # later resets keep the substrate (it moves to its next seed itself)
    assert used == [lab2d_seed(11)]
    assert lab2d_seed(11) != lab2d_seed(12)


def test_set_seed_reproduces_random_actions() -> None:
    first, second = _never_interact(MeltingpotEnv(NAME)), _never_interact(MeltingpotEnv(NAME))
    assert first.set_seed(3) == second.set_seed(3)
    a, b = first.rollout(8), second.rollout(8)
    assert torch.equal(a["agents", "action"], b["agents", "action"])


def test_a_substrate_built_elsewhere_cannot_be_seeded() -> None:
    env = MeltingpotWrapper(_built_substrate())
    env.set_seed(None)  # nothing to seed: fine
    with pytest.raises(RuntimeError, match="cannot be reseeded"):
        env.set_seed(0)


# ------------------------------------------------------------------ batched
def test_serial_and_parallel_envs() -> None:
    def make() -> MeltingpotEnv:
        return _never_interact(MeltingpotEnv(NAME, max_steps=5))

    serial = SerialEnv(2, make)
    serial.set_seed(4)
    data = serial.rollout(6)
    assert data.batch_size == (2, 5)
    assert data["next", "agents", "observation", "RGB"].shape == (2, 5, 2, 40, 40, 3)
    assert data["next", "WORLD.RGB"].shape == (2, 5, 120, 184, 3)
    check_env_specs(serial)
    serial.close()

    parallel = ParallelEnv(2, make)
    try:
        parallel.set_seed(4)
        data = parallel.rollout(6)
        assert data.batch_size == (2, 5)
        assert data["next", "agents", "reward"].shape == (2, 5, 2, 1)
        assert data["next", "done"][:, -1].all() and not data["next", "done"][:, :-1].any()
    finally:
        parallel.close()


# ------------------------------------------------------------------ errors
def test_errors_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="unknown Melting Pot substrate 'no_such_substrate'.*commons_harvest__open"):
        MeltingpotEnv("no_such_substrate")
    with pytest.raises(ValueError, match=r"roles \['pilot'\]"):
        MeltingpotEnv(NAME, roles=["pilot", "default"])
    with pytest.raises(ValueError, match="non-empty sequence of role names"):
        MeltingpotEnv(NAME, roles="default")
    with pytest.raises(ValueError, match="0 <= seed < 2"):
        MeltingpotEnv(NAME, seed=-1)
    with pytest.raises(TypeError, match="substrate name"):
        MeltingpotEnv(42)
    with pytest.raises(TypeError, match="Melting Pot substrate"):
        MeltingpotWrapper(object())
    with pytest.raises(ValueError, match="max_steps"):
        MeltingpotEnv(NAME, max_steps=0)


def test_available_envs_and_close() -> None:
    assert NAME in MeltingpotEnv.available_envs and "commons_harvest__open" in MeltingpotWrapper.available_envs
    assert MeltingpotWrapper.lib is mp
    env = MeltingpotEnv(NAME)
    env.close()
    assert env.is_closed
