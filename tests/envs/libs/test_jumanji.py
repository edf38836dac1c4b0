"""JumanjiEnv / JumanjiWrapper: Jumanji's JAX envs as batched, stateless Cadence envs."""

from __future__ import annotations

import sys
from typing import NamedTuple

import pytest
import torch

jumanji = pytest.importorskip(
    "jumanji", reason='jumanji is not installed (pip install "cadence[jumanji]"); the Jumanji wrappers are untested'
)
import jax  # noqa: E402 - jumanji brings it
import jax.numpy as jnp  # noqa: E402
import jumanji.wrappers  # noqa: E402
from jumanji import specs  # noqa: E402
from jumanji.types import restart, termination, transition, truncation  # noqa: E402
from tensordict import TensorDict  # noqa: E402

from cadence.data import Bounded, Categorical, MultiCategorical, MultiOneHot, OneHot, Unbounded  # noqa: E402
from cadence.envs import ParallelEnv, SerialEnv  # noqa: E402
from cadence.envs.libs.jumanji import JumanjiEnv, JumanjiWrapper  # noqa: E402
from cadence.envs.transforms import ActionMask, TransformedEnv  # noqa: E402
from cadence.envs.utils import check_env_specs  # noqa: E402
from cadence.envs.worker_errors import WorkerException  # noqa: E402
from tests.envs.libs.jax_testing import BackendCompilations, assert_same  # noqa: E402


# ---------------------------------------------------------------- a small env of our own
class Inner(NamedTuple):
    flags: jax.Array  # bool (3,)
    level: jax.Array  # int32, one of 5


class CorridorObservation(NamedTuple):
    position: jax.Array  # float32 (2,)
    inner: Inner
    action_mask: jax.Array  # bool (3,)


class CorridorState(NamedTuple):
    position: jax.Array  # int32
    step_count: jax.Array  # int32
    key: jax.Array  # uint32 (2,)


class Corridor(jumanji.env.Environment):
    """Walk along a corridor: action ``(move, jump)`` with move in {left, stay, right} and a
    jump flag that doubles the move. Reaching ``|position| >= 3`` terminates (reward 1);
    ``time_limit`` steps truncate. Nested observations and a MultiDiscrete action."""

    def __init__(self, time_limit: int = 4) -> None:
        self.time_limit = time_limit
        super().__init__()

    @property
    def observation_spec(self):
        inner = specs.Spec(
            Inner, "InnerSpec", flags=specs.Array((3,), jnp.bool_, "flags"), level=specs.DiscreteArray(5, name="level")
        )
        return specs.Spec(
            CorridorObservation,
            "ObservationSpec",
            position=specs.BoundedArray((2,), jnp.float32, -5.0, 5.0, "position"),
            inner=inner,
            action_mask=specs.BoundedArray((3,), jnp.bool_, False, True, "action_mask"),
        )

    @property
    def action_spec(self):
        return specs.MultiDiscreteArray(jnp.array([3, 2], dtype=jnp.int32), name="action")

    def _observation(self, state: CorridorState) -> CorridorObservation:
        position = state.position.astype(jnp.float32)
        flags = jnp.stack([state.position > 0, state.position < 0, state.position == 0])
        mask = jnp.array([True, True, True]).at[0].set(state.position > -2)
        level = jnp.clip(state.step_count, 0, 4)
        return CorridorObservation(jnp.stack([position, -position]), Inner(flags, level), mask)

    def reset(self, key):
        key, subkey = jax.random.split(key)
        position = jax.random.randint(subkey, (), -2, 3, dtype=jnp.int32)
        state = CorridorState(position, jnp.int32(0), key)
        return state, restart(self._observation(state))

    def step(self, state, action):
        move = (action[0] - 1) * (1 + action[1])
        state = CorridorState(state.position + move, state.step_count + 1, state.key)
        observation = self._observation(state)
        arrived = jnp.abs(state.position) >= 3
        timeout = state.step_count >= self.time_limit
        ended = jax.lax.cond(arrived, lambda: termination(jnp.float32(1), observation),
                             lambda: truncation(jnp.float32(0), observation))
        going = transition(jnp.float32(0), observation)
        timestep = jax.tree_util.tree_map(lambda e, g: jnp.where(arrived | timeout, e, g), ended, going)
        return state, timestep


class BareCorridor(Corridor):
    """The corridor, observed as a bare array (the position)."""

    @property
    def observation_spec(self):
        return specs.BoundedArray((2,), jnp.float32, -5.0, 5.0, "observation")

    def _observation(self, state):
        return super()._observation(state).position


class ShadowingCorridor(Corridor):
    """The corridor, with an observation named like an entry the wrapper writes."""

    @property
    def observation_spec(self):
        return specs.Spec(dict, "ObservationSpec", reward=specs.Array((), jnp.float32, "reward"))

    def _observation(self, state):
        return {"reward": state.position.astype(jnp.float32)}


@pytest.fixture(scope="module")
def corridor() -> JumanjiWrapper:
    env = JumanjiWrapper(Corridor(), batch_size=[3])
    env.set_seed(0)
    return env


@pytest.fixture(scope="module")
def snake() -> JumanjiEnv:
    return JumanjiEnv("Snake-v1", batch_size=[2])


# ---------------------------------------------------------------- construction
def test_missing_jumanji_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "jumanji", None)  # import jumanji now raises ImportError
    with pytest.raises(ImportError, match=r'pip install "cadence\[jumanji\]"'):
        JumanjiEnv("Snake-v1")


def test_bad_names_and_envs_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown Jumanji env 'Snek-v1'.*Snake-v1"):
        JumanjiEnv("Snek-v1")
    with pytest.raises(TypeError, match="jumanji.env.Environment"):
        JumanjiWrapper(object())
    with pytest.raises(ValueError, match="resets itself"):
        JumanjiWrapper(jumanji.wrappers.AutoResetWrapper(Corridor()))
    with pytest.raises(ValueError, match="vmapped already"):
        JumanjiWrapper(jumanji.wrappers.VmapWrapper(Corridor()))
    assert "TSP-v1" in JumanjiEnv.available_envs and JumanjiEnv.lib is jumanji


# ---------------------------------------------------------------- specs
def test_snake_specs(snake) -> None:
    obs = snake.observation_spec
    assert sorted(obs.keys()) == ["action_mask", "grid", "state", "step_count"]
    assert isinstance(obs["grid"], Bounded) and obs["grid"].shape == (2, 12, 12, 5)
    assert obs["grid"].dtype == torch.float32
    assert isinstance(obs["step_count"], Categorical) and obs["step_count"].n == 4000
    assert obs["step_count"].shape == (2,) and obs["step_count"].dtype == torch.int32
    mask = obs["action_mask"]
    assert isinstance(mask, Categorical) and mask.dtype == torch.bool and mask.shape == (2, 4)
    assert isinstance(snake.action_spec, Categorical) and snake.action_spec.n == 4
    assert snake.action_spec.shape == (2,) and snake.action_spec.dtype == torch.int32
    assert snake.reward_spec.shape == (2, 1) and snake.reward_spec.dtype == torch.float32
    assert sorted(snake.full_done_spec.keys()) == ["done", "terminated", "truncated"]
    state = snake.state_spec["state"]
    assert state["head_position", "row"].shape == (2,) and state["body"].dtype == torch.bool
    assert state["key"].dtype == torch.int32 and state["key"].shape == (2, 2)  # uint32 key data, bit for bit
    assert snake.batch_locked
    check_env_specs(snake, seed=0)


def test_nested_observation_and_multi_discrete_action(corridor) -> None:
    obs = corridor.observation_spec
    assert isinstance(obs["position"], Bounded) and obs["position"].shape == (3, 2)
    assert torch.equal(obs["position"].high, torch.full((3, 2), 5.0))
    assert isinstance(obs["inner", "level"], Categorical) and obs["inner", "level"].n == 5
    assert isinstance(obs["inner", "flags"], Categorical) and obs["inner", "flags"].dtype == torch.bool
    assert isinstance(corridor.action_spec, MultiCategorical) and corridor.action_spec.shape == (3, 2)
    assert corridor.action_spec.nvec[0].tolist() == [3, 2] and corridor.action_spec.dtype == torch.int32
    assert sorted(corridor.state_spec["state"].keys()) == ["key", "position", "step_count"]
    check_env_specs(corridor, seed=0)


def test_a_bare_array_observation_is_called_observation() -> None:
    env = JumanjiWrapper(BareCorridor(), batch_size=[2])
    assert sorted(env.observation_spec.keys()) == ["observation", "state"]
    assert isinstance(env.observation_spec["observation"], Bounded)
    check_env_specs(env, seed=0)


def test_an_observation_named_like_a_wrapper_entry_is_refused() -> None:
    with pytest.raises(ValueError, match="observation entry \\('reward',\\) is named like an entry"):
        JumanjiWrapper(ShadowingCorridor())


def test_one_hot_action_encoding() -> None:
    env = JumanjiWrapper(Corridor(), batch_size=[2], categorical_action_encoding=False)
    assert isinstance(env.action_spec, MultiOneHot) and env.action_spec.shape == (2, 5)
    td = env.reset()
    right_and_jump = torch.tensor([[False, False, True, False, True]] * 2)
    out = env.step(td.set("action", right_and_jump))
    assert torch.equal(out["next", "state", "position"], td["state", "position"] + 2)
    check_env_specs(env, seed=0)


def test_one_hot_discrete_action() -> None:
    env = JumanjiEnv("Game2048-v1", batch_size=[2], categorical_action_encoding=False)
    assert isinstance(env.action_spec, OneHot) and env.action_spec.shape == (2, 4)
    assert isinstance(env.observation_spec["board"], Unbounded)
    env.set_seed(0)
    assert env.rollout(3)["next", "board"].shape == (2, 3, 4, 4)


# ---------------------------------------------------------------- stepping
def test_step_is_a_function_of_the_input(corridor) -> None:
    td = corridor.reset()
    td["action"] = torch.tensor([[2, 0], [0, 1], [1, 0]], dtype=torch.int32)
    first = corridor.step(td.clone())["next"]
    corridor.reset()  # whatever the env did since, the same input gives the same step
    second = corridor.step(td.clone())["next"]
    assert_same(first, second)
    assert torch.equal(first["state", "position"], td["state", "position"] + torch.tensor([1, -2, 0]))
    assert torch.equal(first["state", "step_count"], torch.ones(3, dtype=torch.int32))


def test_time_limit_truncates_and_arrival_terminates() -> None:
    env = JumanjiWrapper(Corridor(time_limit=4), batch_size=[1])
    env.set_seed(0)
    stay = TensorDict({"action": torch.tensor([[1, 0]], dtype=torch.int32)}, [1])
    data = env.rollout(10, lambda td: td.update(stay))
    assert data.batch_size == (1, 4)
    assert data["next", "truncated"][0, :, 0].tolist() == [False, False, False, True]
    assert not data["next", "terminated"].any() and data["next", "done"][0, -1, 0]
    right = TensorDict({"action": torch.tensor([[2, 1]], dtype=torch.int32)}, [1])
    data = env.rollout(10, lambda td: td.update(right))
    assert data["next", "terminated"][0, -1, 0] and not data["next", "truncated"].any()
    assert data["next", "reward"][0, -1, 0] == 1.0 and data.batch_size[1] <= 3


def test_partial_reset_keeps_the_other_envs(corridor) -> None:
    td = corridor.reset()
    td["action"] = torch.tensor([[1, 0]] * 3, dtype=torch.int32)
    after = corridor._step_mdp(corridor.step(td))
    after["_reset"] = torch.tensor([[True], [False], [False]])
    out = corridor.reset(after)
    assert out["state", "step_count"].tolist() == [0, 1, 1]
    assert torch.equal(out["state", "position"][1:], after["state", "position"][1:])


def test_step_without_state_names_it(corridor) -> None:
    td = corridor.reset().exclude("state")
    td["action"] = torch.ones(3, 2, dtype=torch.int32)
    with pytest.raises(KeyError, match="needs the 'state' entry"):
        corridor.step(td)


def test_rollouts_and_batches_of_any_size_when_not_batch_locked() -> None:
    env = JumanjiWrapper(jumanji.make("Game2048-v1"))
    assert not env.batch_locked and env.batch_size == torch.Size([])
    check_env_specs(env, seed=0)  # one env
    first = env.reset(TensorDict(batch_size=[4]))
    assert first["board"].shape == (4, 4, 4) and first["state", "key"].shape == (4, 2)
    data = env.rollout(5, tensordict=first, auto_reset=False, break_when_all_done=True)
    assert data.batch_size[0] == 4 and data["next", "reward"].shape[-1] == 1
    counts = env.trace_counts  # one env, then a batch of 4
    assert counts == {"reset": 2, "step": 2}
    env.rollout(3, tensordict=env.reset(TensorDict(batch_size=[4])), auto_reset=False)
    assert env.trace_counts == counts  # the same batch size: nothing compiled again
    env.reset(TensorDict(batch_size=[2]))
    assert env.trace_counts == {"reset": 3, "step": 2}


# ---------------------------------------------------------------- seeding, compilation
def test_same_seed_same_data(snake) -> None:
    def run(seed):
        snake.set_seed(seed)  # the JAX key of the resets, and the generator of the random actions
        return snake.rollout(6, break_when_any_done=False)

    first, again, other = run(3), run(3), run(4)
    assert_same(first, again)
    assert not torch.equal(first["grid"], other["grid"])


def test_seed_bigger_than_32_bits_gives_its_own_episodes(corridor) -> None:
    corridor.set_seed(2**40)
    big = corridor.reset()["state", "key"]
    corridor.set_seed(0)
    assert not torch.equal(big, corridor.reset()["state", "key"])


def test_the_key_can_be_set_directly(corridor) -> None:
    corridor.set_seed(3)
    seeded = corridor.reset()
    corridor.key = jax.random.key(3)  # a typed key: kept as its raw data
    assert corridor.key.dtype == jnp.uint32
    assert_same(seeded, corridor.reset())
    assert repr(corridor) == "JumanjiWrapper(env=Corridor, batch_size=torch.Size([3]), device=None)"
    assert corridor.time_limit == 4  # the wrapped env's attributes


def test_compiled_once_per_wrapper(snake) -> None:
    snake.set_seed(0)
    snake.rollout(4)
    counts = snake.trace_counts
    assert counts == {"reset": 1, "step": 1}
    with BackendCompilations() as compilations:
        snake.rollout(4, break_when_any_done=False)
        snake.set_seed(1)
        snake.rollout(4)
    assert compilations.count == 0 and snake.trace_counts == counts


def test_outputs_share_memory_with_the_inputs_jax_reads(snake) -> None:
    from cadence.envs.libs.jax_utils import torch_to_jax

    td = snake.reset()
    body = td["state", "body_state"]
    assert torch_to_jax(body).unsafe_buffer_pointer() == body.data_ptr()  # no copy into JAX


# ---------------------------------------------------------------- masks, transforms, batches
def test_action_mask_transform_keeps_random_actions_legal() -> None:
    base = JumanjiEnv("TSP-v1", batch_size=[2])
    # TSP's spec says DiscreteArray(20) for "position", which starts at -1: widened to hold it
    position = base.observation_spec["position"]
    assert isinstance(position, Bounded) and position.low.unique().tolist() == [-1]
    assert position.high.unique().tolist() == [19]
    env = TransformedEnv(base, ActionMask())
    env.set_seed(0)
    data = env.rollout(20)  # TSP ends an episode at an illegal move (a city visited twice)
    assert data.batch_size[1] == 20
    assert data["action_mask"].gather(-1, data["action"].long().unsqueeze(-1)).all()
    assert not data["next", "done"][:, :-1].any()


def test_serial_env_checks_and_reproduces() -> None:
    env = SerialEnv(2, lambda: JumanjiEnv("TSP-v1"))
    check_env_specs(env, seed=0)
    env.set_seed(5)
    first = env.rollout(5, break_when_any_done=False)
    env.set_seed(5)
    assert_same(first, env.rollout(5, break_when_any_done=False))
    assert not torch.equal(first["coordinates"][0], first["coordinates"][1])  # each sub-env its own seed
    env.close()


def test_forked_workers_refuse_jax_rather_than_hang(snake) -> None:
    # this process runs JAX (the fixture built an env): a forked copy of its threads would hang
    env = ParallelEnv(2, lambda: JumanjiEnv("TSP-v1"), start_method="fork", timeout=120)
    try:
        with pytest.raises(WorkerException, match='start_method="spawn"'):
            env.reset()
    finally:
        env.close()


@pytest.mark.slow
def test_parallel_env_with_spawned_workers() -> None:
    # JAX runs threads: a process that imported it must not fork, so the workers spawn
    env = ParallelEnv(2, lambda: JumanjiEnv("TSP-v1"), start_method="spawn", timeout=300)
    try:
        check_env_specs(env, seed=0)
        env.set_seed(5)
        first = env.rollout(4, break_when_any_done=False)
        env.set_seed(5)
        assert_same(first, env.rollout(4, break_when_any_done=False))
    finally:
        env.close()


# ---------------------------------------------------------------- pixels
def test_from_pixels_renders_each_env() -> None:
    env = JumanjiEnv("Game2048-v1", batch_size=[2], from_pixels=True, pixels_only=True)
    spec = env.observation_spec["pixels"]
    assert spec.dtype == torch.uint8 and spec.shape[:1] == (2,) and spec.shape[-1] == 3
    assert sorted(env.observation_spec.keys()) == ["pixels", "state"]
    env.set_seed(0)
    data = env.rollout(2)
    pixels = data["next", "pixels"]
    assert pixels.shape == (2, 2, *spec.shape[1:])
    assert pixels.float().std() > 0  # a drawn board, not a blank frame
    env.close()
