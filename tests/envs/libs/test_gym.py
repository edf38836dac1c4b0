"""GymEnv / GymWrapper: specs from spaces, single and vector envs, the fast rollout."""

from __future__ import annotations

import importlib.util

import gymnasium
import numpy as np
import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential

from cadence.data import Binary, Bounded, Categorical, Composite, MultiCategorical, MultiOneHot, NonTensor, OneHot
from cadence.envs import SerialEnv, TransformedEnv, check_env_specs
from cadence.envs.transforms import RewardSum
from cadence.envs.utils import SpecCheckError, SpecMismatchError
from cadence.envs.gym_like import default_info_dict_reader
from cadence.envs.libs.gym import GymEnv, GymWrapper, set_gym_backend, space_to_spec
from tests.fakes import GenericPathGymEnv, OffSpaceEnv, TextEnv, assert_same_rollout

spaces = gymnasium.spaces


class DictTupleEnv(gymnasium.Env):
    """A tiny gymnasium env with Dict/Tuple observations and a MultiDiscrete action."""

    observation_space = spaces.Dict(
        {
            "position": spaces.Box(-1.0, 1.0, (2,), dtype=np.float32),
            "pair": spaces.Tuple((spaces.Discrete(3), spaces.MultiBinary(2))),
        }
    )
    action_space = spaces.MultiDiscrete([2, 3])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {"t": self.t}

    def _obs(self):
        return {"position": np.full(2, 0.1 * self.t, dtype=np.float32), "pair": (self.t % 3, np.array([1, 0], dtype=np.int8))}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action)), action
        self.t += 1
        return self._obs(), float(action.sum()), self.t >= 4, False, {"t": self.t}


# ---------------------------------------------------------------- spaces
def test_space_to_spec_covers_the_gymnasium_spaces():
    assert isinstance(space_to_spec(spaces.Box(-1, 1, (3,))), Bounded)
    assert space_to_spec(spaces.Box(-np.inf, np.inf, (3,))).__class__.__name__ == "Unbounded"
    assert isinstance(space_to_spec(spaces.Discrete(4)), Categorical)
    assert isinstance(space_to_spec(spaces.Discrete(4), categorical_action_encoding=False), OneHot)
    assert isinstance(space_to_spec(spaces.MultiDiscrete([2, 3])), MultiCategorical)
    one_hot = space_to_spec(spaces.MultiDiscrete([2, 3]), categorical_action_encoding=False)
    assert isinstance(one_hot, MultiOneHot) and one_hot.shape == torch.Size([5])
    binary = space_to_spec(spaces.MultiBinary(4), torch.Size([2]))
    assert isinstance(binary, Binary) and binary.shape == torch.Size([2, 4])
    nested = space_to_spec(DictTupleEnv.observation_space)
    assert isinstance(nested, Composite)
    assert set(nested.keys(True, True)) == {"position", ("pair", "0"), ("pair", "1")}
    assert isinstance(space_to_spec(spaces.Text(5)), NonTensor)
    box = space_to_spec(spaces.Box(0, 255, (2, 2), dtype=np.uint8), torch.Size([3]))
    assert box.dtype == torch.uint8 and box.shape == torch.Size([3, 2, 2])


def test_dict_and_tuple_observations_and_multidiscrete_actions():
    env = GymWrapper(DictTupleEnv(), categorical_action_encoding=True)
    check_env_specs(env, seed=0)
    data = env.rollout(10)
    assert data.batch_size == torch.Size([4])
    assert data["next", "pair", "0"].dtype == torch.long
    assert data["next", "position"][-1].tolist() == pytest.approx([0.4, 0.4])
    one_hot = GymWrapper(DictTupleEnv())
    assert one_hot.rollout(3)["action"].shape == torch.Size([3, 5])


# ---------------------------------------------------------------- single env
def test_cartpole_specs_and_rollout():
    env = GymEnv("CartPole-v1")
    assert env.batch_size == torch.Size([])
    assert isinstance(env.action_spec, OneHot)
    assert env.observation_spec["observation"].shape == torch.Size([4])
    assert set(env.done_keys) == {"done", "terminated", "truncated"}
    check_env_specs(env, seed=0)
    data = env.rollout(1000, break_when_any_done=False)
    assert data.batch_size == torch.Size([1000]) and data.names == ["time"]
    done = data["next", "done"].squeeze(-1)
    assert done.any()
    # after a done step, the next root observation is a fresh reset (small values)
    after = data["observation"][1:][done[:-1]]
    assert after.abs().max() <= 0.05


def test_categorical_action_encoding():
    env = GymEnv("CartPole-v1", categorical_action_encoding=True)
    assert isinstance(env.action_spec, Categorical) and env.action_spec.shape == torch.Size([])
    check_env_specs(env, seed=0)


def test_make_kwargs_reach_the_env_and_attributes_are_forwarded():
    env = GymEnv("Pendulum-v1", g=9.81)
    assert env.g == 9.81
    assert env.env_name == "Pendulum-v1"


def test_seeding_repeats_the_rollout():
    a, b = GymEnv("CartPole-v1"), GymEnv("CartPole-v1")
    a.set_seed(7)
    b.set_seed(7)
    assert (a.rollout(50, break_when_any_done=False) == b.rollout(50, break_when_any_done=False)).all()
    b.set_seed(8)
    assert not torch.equal(a.rollout(5)["observation"], b.rollout(5)["observation"])


@pytest.mark.parametrize("num_envs", [None, 3])
@pytest.mark.parametrize("break_when_any_done", [True, False])
def test_fast_random_rollout_equals_the_generic_path(num_envs, break_when_any_done):
    fast_env = GymEnv("CartPole-v1", num_envs=num_envs)
    fast_env.set_seed(0)
    fast = fast_env.rollout(120, break_when_any_done=break_when_any_done)
    slow_env = GenericPathGymEnv("CartPole-v1", num_envs=num_envs)
    assert slow_env._array_simulator() is None and slow_env.kernel == "values: GymLikeEnv._step_values"
    slow_env.set_seed(0)
    actions = iter(fast["action"].unbind(fast.batch_dims - 1))

    def replay(td):
        return td.set("action", next(actions))

    assert_same_rollout(fast, slow_env.rollout(120, replay, break_when_any_done=break_when_any_done))


def test_fast_path_steps_the_sync_vector_envs_sub_envs_and_keeps_its_state():
    # the step on values steps gymnasium's SyncVectorEnv sub-env by sub-env, and so do the
    # generic path and the masked resets: the wrapper keeps where each sub-env stands
    fast_env = GymEnv("CartPole-v1", num_envs=3)
    assert fast_env._array_simulator()._sub_envs is not None
    slow_env = GenericPathGymEnv("CartPole-v1", num_envs=3)
    generator = torch.Generator().manual_seed(0)
    actions = [fast_env.full_action_spec["action"].rand(generator=generator) for _ in range(80)]
    steps = []
    for env in (fast_env, slow_env):
        env.set_seed(3)
        td, data = env.reset(), []
        for action in actions:
            out, td = env.step_and_maybe_reset(td.set("action", action))
            data.append(out)
        steps.append(torch.stack(data, 1))
    assert_same_rollout(*steps)
    done = steps[0]["next", "done"].squeeze(-1)
    assert (done.any(0) & ~done.all(0)).any()  # some resets were partial
    # a masked reset by hand: the rows not reset are where the loop left them
    mask = TensorDict({"_reset": torch.tensor([[True], [False], [False]])}, batch_size=[3])
    after = [env.reset(mask.clone())["observation"] for env in (fast_env, slow_env)]
    assert torch.equal(after[0], after[1])
    assert torch.equal(after[0][1:], td["observation"][1:])


def test_sync_vector_env_is_stepped_through_its_sub_envs_on_every_path():
    # gymnasium's SyncVectorEnv keeps private state (where each sub-env stands, pending
    # autoresets) that its step and masked reset read and that changes between releases:
    # every path steps and resets its sub-envs through their public API instead, and calls
    # the vector env's own reset only to reset them all
    env = GymEnv("CartPole-v1", num_envs=3)
    vector = env._env
    calls = []
    vector_step, vector_reset = vector.step, vector.reset
    vector.step = lambda action: calls.append("step") or vector_step(action)
    vector.reset = lambda **kwargs: calls.append(("reset", sorted(kwargs.get("options") or {}))) or vector_reset(**kwargs)
    env.set_seed(0)
    td = env.reset()
    env.rollout(60, break_when_any_done=False)
    env.rollout(60, _linear_policy(), break_when_any_done=False)
    for _ in range(40):
        _, td = env.step_and_maybe_reset(env.rand_action(td))
    generic = env._step(env.rand_action(td))  # the generic step
    mask = TensorDict({"_reset": torch.tensor([[True], [False], [True]])}, batch_size=[3])
    after = env.reset(mask)
    assert set(map(str, calls)) == {"('reset', [])"}
    # the masked reset hands back where the generic step left the row it did not reset
    assert torch.equal(after["observation"][1], generic["observation"][1])


def _linear_policy() -> TensorDictModule:
    torch.manual_seed(0)  # the test's own weights
    linear = torch.nn.Linear(4, 2)
    logits = TensorDictModule(linear, in_keys=["observation"], out_keys=["logits"])
    to_one_hot = TensorDictModule(
        lambda x: torch.nn.functional.one_hot(x.argmax(-1), 2).bool(), in_keys=["logits"], out_keys=["action"]
    )
    return TensorDictSequential(logits, to_one_hot)


@pytest.mark.parametrize("num_envs", [None, 3])
@pytest.mark.parametrize("break_when_any_done", [True, False])
def test_fast_policy_rollout_equals_the_generic_path(num_envs, break_when_any_done):
    policy = _linear_policy()
    results = []
    for cls in (GymEnv, GenericPathGymEnv):
        env = cls("CartPole-v1", num_envs=num_envs)
        env.set_seed(1)
        with torch.no_grad():
            results.append(env.rollout(150, policy, break_when_any_done=break_when_any_done))
    assert "logits" in results[0].keys()
    assert_same_rollout(*results)


def test_fast_policy_rollout_carries_what_the_policy_writes():
    def policy(td):
        # a counter kept at the root, and a memory handed to the next step under "next"
        count = td.get("count", torch.zeros(1))
        memory = td.get("memory", torch.zeros(1))
        td.set("count", count + 1)
        td.set("memory", memory)
        td.set(("next", "memory"), memory + td["observation"][:1])
        return td.set("action", torch.tensor([True, False]).expand(*td.batch_size, 2).clone())

    results = []
    for cls in (GymEnv, GenericPathGymEnv):
        env = cls("CartPole-v1")
        env.set_seed(2)
        results.append(env.rollout(40, policy, break_when_any_done=False))
    assert_same_rollout(*results)
    assert results[0]["count"].squeeze(-1).tolist() == list(range(1, 41))
    assert torch.allclose(results[0]["memory"][1:], results[0]["next", "memory"][:-1])


def test_fast_policy_rollout_checks_the_action():
    env = GymEnv("CartPole-v1")
    with pytest.raises(ValueError, match=r"'action'.*\(2,\).*\(3,\)"):
        env.rollout(3, lambda td: td.set("action", torch.zeros(3, dtype=torch.bool)))


def test_fast_rollout_set_truncated():
    data = GymEnv("CartPole-v1").rollout(5, set_truncated=True)
    assert data["next", "truncated"][-1].all() and data["next", "done"][-1].all()


def test_frame_skip_sums_rewards():
    env = GymEnv("CartPole-v1", frame_skip=3)
    env.set_seed(0)
    data = env.rollout(3)
    assert data["next", "reward"].max() <= 3 and data["next", "reward"][0].item() == 3.0


def test_info_dict_reader():
    env = GymWrapper(DictTupleEnv(), categorical_action_encoding=True)
    env.set_info_dict_reader(default_info_dict_reader(["t"]))
    data = env.rollout(4)
    assert data["next", "t"].tolist() == [1.0, 2.0, 3.0, 4.0]
    check_env_specs(env)


@pytest.mark.skipif(importlib.util.find_spec("pygame") is None, reason="rendering needs pygame: pip install 'cadence[pixels]'")
def test_from_pixels():
    env = GymEnv("Pendulum-v1", from_pixels=True, pixels_only=True)
    assert set(env.observation_spec.keys()) == {"pixels"}
    data = env.rollout(2)
    assert data["next", "pixels"].dtype == torch.uint8 and data["next", "pixels"].shape[-1] == 3
    both = GymEnv("Pendulum-v1", from_pixels=True, pixels_only=False)
    assert set(both.observation_spec.keys()) == {"pixels", "observation"}
    check_env_specs(both)


# ---------------------------------------------------------------- vector env
def test_vector_env_is_one_batch():
    env = GymEnv("CartPole-v1", num_envs=8)
    assert env.batch_size == torch.Size([8])
    assert env.action_spec.shape == torch.Size([8, 2])
    check_env_specs(env, seed=0)
    data = env.rollout(100, break_when_any_done=False)
    assert data.batch_size == torch.Size([8, 100]) and data.names == [None, "time"]


def test_vector_env_partial_reset_as_in_the_seed():
    env = GymEnv("CartPole-v1", num_envs=4)
    env.set_seed(0)
    data = env.rollout(5, break_when_any_done=False)
    last = env._step_mdp(data[:, -1])
    tensordict = TensorDict({"_reset": [[True], [False], [True], [True]]}, [4])
    tensordict.update(last.select("observation"))
    out = env.reset(tensordict)  # eliminates the "_reset" entry
    assert set(out.keys()) == {"observation", "done", "terminated", "truncated"}
    assert "_reset" not in tensordict.keys()
    assert out["done"].shape == torch.Size([4, 1])
    assert torch.equal(out["observation"][1], last["observation"][1])
    assert not torch.equal(out["observation"][0], last["observation"][0])


def test_vector_wrapper_of_a_next_step_autoreset_env_gives_the_same_data():
    # gymnasium's default mode: Cadence's masked resets cancel the pending auto-resets
    wrapped = GymWrapper(gymnasium.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync"))
    built = GymEnv("CartPole-v1", num_envs=2)
    wrapped.set_seed(4)
    built.set_seed(4)
    assert wrapped.autoreset_mode == "NextStep"
    assert_same_rollout(wrapped.rollout(80, break_when_any_done=False), built.rollout(80, break_when_any_done=False))


# ---------------------------------------------------------------- errors
def test_unknown_id_says_what_to_do():
    with pytest.raises(ValueError, match="NoSuchEnv-v0.*registered"):
        GymEnv("NoSuchEnv-v0")


@pytest.mark.skipif(importlib.util.find_spec("Box2D") is not None, reason="Box2D is installed")
def test_missing_backend_dependency_says_what_to_install():
    with pytest.raises(ImportError, match="box2d"):
        GymEnv("LunarLander-v3")


def test_step_with_a_wrong_action_shape_names_the_key():
    env = GymEnv("Pendulum-v1")
    data = env.reset()
    data["action"] = torch.zeros(2)
    with pytest.raises(ValueError, match=r"'action'.*\(1,\).*\(2,\)"):
        env.step(data)


# ---------------------------------------------------------------- the seed's auto-resetting env
def _backends() -> list:
    installed_gym = importlib.util.find_spec("gym") is not None
    return [
        "gymnasium",
        pytest.param("gym", marks=pytest.mark.skipif(not installed_gym, reason="the 'gym' package is not installed")),
    ]


@pytest.mark.parametrize("backend", _backends())
def test_auto_resetting_env_as_in_the_seed(backend):
    class AutoResettingGymEnv(GymEnv):
        def _step(self, tensordict):
            tensordict = super()._step(tensordict)
            if tensordict["done"].any():
                td_reset = super().reset()
                tensordict.update(td_reset.exclude(*self.done_keys))
            return tensordict

        def _reset(self, tensordict=None):
            if tensordict is not None and "_reset" in tensordict:
                return tensordict.copy()
            return super()._reset(tensordict)

    torch.manual_seed(0)
    with set_gym_backend(backend):
        env = AutoResettingGymEnv("CartPole-v1", auto_reset=True, auto_reset_replace=True)
        env.set_seed(0)
        r = env.rollout(30, break_when_any_done=False)
    done = r["next", "done"].squeeze(-1)
    assert done.any()
    next_obs = r["next", "observation"]
    # observation after reset are set as nan
    assert torch.isnan(next_obs[done]).all()
    assert not torch.isnan(next_obs[~done]).any()
    # the step after a done starts from the new episode's first observation
    first_of_episode = r["observation"][1:][done[:-1]]
    assert not torch.isnan(first_of_episode).any() and first_of_episode.abs().max() <= 0.05
    assert not r["done"].any()


def test_non_tensor_observations_pass_through():
    env = GymWrapper(TextEnv())
    assert isinstance(env.observation_spec["observation"], NonTensor)
    check_env_specs(env)
    data = env.rollout(5)
    assert data.batch_size == torch.Size([3])
    assert list(data["next", "observation"]) == ["step1", "step2", "step3"]
    assert list(data["observation"]) == ["start", "step1", "step2"]


class TupleEnv(gymnasium.Env):
    """A gymnasium env whose observation space is a Tuple at the top level."""

    observation_space = spaces.Tuple((spaces.Discrete(4), spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)))
    action_space = spaces.Box(-1.0, 1.0, (1,), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return (0, np.zeros(2, dtype=np.float32)), {}

    def step(self, action):
        self.t += 1
        return (self.t % 4, np.full(2, float(action[0]), dtype=np.float32)), 0.0, False, self.t >= 5, {}


def test_top_level_tuple_observations():
    env = GymWrapper(TupleEnv())
    assert set(env.observation_spec.keys()) == {"0", "1"}
    check_env_specs(env)
    data = env.rollout(10)
    assert data.batch_size == torch.Size([5])
    assert data["next", "0"].tolist() == [1, 2, 3, 0, 1]
    assert torch.equal(data["next", "1"][:, 0], data["action"][:, 0])
    assert data["next", "truncated"][-1].all() and not data["next", "terminated"].any()


# ---------------------------------------------------------------- bad values (issue #14)
def _one_hot_policy(td):
    return td.set("action", torch.tensor([True, False]).expand(*td.batch_size, 2).clone())


def _manual_loop(env, steps: int = 3) -> None:
    """The seed's manual loop (on the env's array simulator, for a stock wrapper)."""
    td = env.reset()
    for _ in range(steps):
        _, td = env.step_and_maybe_reset(_one_hot_policy(td))


ROLLOUT_PATHS = {
    "fast, random actions": lambda make: GymWrapper(make()).rollout(3),
    "fast, policy": lambda make: GymWrapper(make()).rollout(3, _one_hot_policy),
    "generic (callback)": lambda make: GymWrapper(make()).rollout(3, callback=lambda env, data: None),
    "serial, fast": lambda make: SerialEnv(2, lambda: GymWrapper(make())).rollout(3),
    "serial, policy": lambda make: SerialEnv(2, lambda: GymWrapper(make())).rollout(3, _one_hot_policy),
    "transformed, over time": lambda make: TransformedEnv(GymWrapper(make()), RewardSum()).rollout(3),
    "transformed, manual loop": lambda make: _manual_loop(TransformedEnv(GymWrapper(make()), RewardSum())),
    "check_env_specs": lambda make: check_env_specs(GymWrapper(make())),
}


@pytest.mark.parametrize("at", ["reset", "step"])
@pytest.mark.parametrize("path", list(ROLLOUT_PATHS))
def test_an_observation_off_its_declared_shape_is_named_on_every_path(path, at):
    error = SpecCheckError if path == "check_env_specs" else SpecMismatchError
    # a serial batch names the sub-env and its own shapes
    where = r"SerialEnv sub-env 0: .*" if path.startswith("serial") else ""
    message = rf"{where}observation of shape \(4,\).*'observation'.*spec.*has shape \(3,\)"
    with pytest.raises(error, match=message):
        ROLLOUT_PATHS[path](lambda: OffSpaceEnv(shape=(4,), at=at))


@pytest.mark.parametrize("path", list(ROLLOUT_PATHS))
def test_a_scalar_observation_for_a_vector_space_is_named_not_broadcast(path):
    # numpy would broadcast the scalar into the (3,) row of the fast path's arrays
    with pytest.raises((SpecMismatchError, SpecCheckError), match=r"observation of shape \((2,)?\).*has shape \((2, 3|3,)\)"):
        ROLLOUT_PATHS[path](lambda: OffSpaceEnv(shape=(), at="step"))


def test_sub_envs_with_observations_of_different_shapes_are_named():
    makers = [lambda: GymWrapper(OffSpaceEnv(shape=(3,))), lambda: GymWrapper(OffSpaceEnv(shape=(4,), at="step"))]
    env = SerialEnv(2, makers)
    with pytest.raises(SpecMismatchError, match=r"SerialEnv sub-env 1: .*step\(\) gave an observation of shape \(4,\)"):
        env.rollout(3)


def test_observations_that_only_need_a_cast_or_a_reshape_still_work():
    # float64 for a float32 space: cast, as before, on every path
    for path in ("fast, random actions", "generic (callback)", "check_env_specs", "serial, fast"):
        ROLLOUT_PATHS[path](lambda: OffSpaceEnv(shape=(3,), dtype=np.float64))
    # (1, 3) for a (3,) space: reshaped by the generic path, written as it is by the fast one
    fast = GymWrapper(OffSpaceEnv(shape=(1, 3))).rollout(3)
    assert fast["next", "observation"].shape == torch.Size([3, 3])
    check_env_specs(GymWrapper(OffSpaceEnv(shape=(1, 3))))


def test_check_env_specs_names_an_observation_dtype_of_another_kind():
    # floats for a uint8 space: the hot path casts (as torch.as_tensor would); the check says so
    make = lambda: OffSpaceEnv(shape=(3,), dtype=np.float64, box_dtype=np.uint8)  # noqa: E731
    assert GymWrapper(make()).rollout(3)["next", "observation"].dtype == torch.uint8
    with pytest.raises(SpecCheckError, match=r"shape \(3,\) and dtype float64 at key 'observation'.*dtype torch.uint8"):
        check_env_specs(GymWrapper(make()))


def test_a_policy_error_is_not_mistaken_for_an_observation_error():
    def failing_policy(td):
        raise ValueError("the policy's own failure")

    with pytest.raises(ValueError, match="the policy's own failure"):
        GymWrapper(OffSpaceEnv(shape=(3,))).rollout(3, failing_policy)


def test_an_output_transform_of_its_own_runs_on_every_path():
    class Doubled(GymEnv):  # the gymnasium kernel reads gymnasium's outputs itself: the gym-like one calls this
        def _output_transform(self, step_outputs):
            obs, reward, terminated, truncated, info = super()._output_transform(step_outputs)
            return obs, 2 * reward, terminated, truncated, info

    plain, doubled = GymEnv("Pendulum-v1"), Doubled("Pendulum-v1")
    assert doubled.kernel == "gym-like: Doubled's simulator, stepped into arrays"
    for env in (plain, doubled):
        env.set_seed(5)
    expected = 2 * plain.rollout(30, break_when_any_done=False)["next", "reward"]
    torch.testing.assert_close(doubled.rollout(30, break_when_any_done=False)["next", "reward"], expected)
    def still(td):
        return td.set("action", torch.zeros(1))

    for env in (plain, doubled):
        env.set_seed(6)
    expected = 2 * plain.rollout(30, still, break_when_any_done=False)["next", "reward"]
    torch.testing.assert_close(doubled.rollout(30, still, break_when_any_done=False)["next", "reward"], expected)
