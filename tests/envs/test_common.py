"""EnvBase: specs, done completion, partial resets, the seed's examples."""

from __future__ import annotations

import importlib.util
import pickle
from collections.abc import Callable
from typing import Optional

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from cadence.data import Binary, Bounded, Categorical, Composite, Unbounded
from cadence.envs import EnvBase, EnvMetaData, GymEnv, PendulumEnv
from cadence.envs.utils import SpecMismatchError
from tests.fakes import CountingEnv, MultiLevelZerosEnv


# ---------------------------------------------------------------- specs and keys
def test_default_specs_are_completed():
    env = CountingEnv()
    assert env.done_keys == ["done", "terminated"]
    assert env.reward_key == "reward"
    assert env.reward_spec.shape == torch.Size([1])
    assert isinstance(env.done_spec, Composite)
    assert env.done_spec["terminated"].dtype == torch.bool
    assert set(env.input_spec.keys()) == {"full_action_spec", "full_state_spec"}
    assert set(env.output_spec.keys()) == {"full_observation_spec", "full_reward_spec", "full_done_spec"}


def test_input_and_output_specs_are_locked():
    env = CountingEnv()
    with pytest.raises(Exception):
        env.output_spec["full_reward_spec"] = Composite()
    with pytest.raises(Exception):
        env.input_spec["full_action_spec"] = Composite()


def test_spec_shapes_must_start_with_the_batch_size():
    env = CountingEnv(batch_size=(3,))
    with pytest.raises(ValueError, match=r"count.*\(1,\).*batch size \(3,\)"):
        env.observation_spec = Composite(count=Unbounded(shape=(1,)))


def test_lone_truncated_spec_gets_done_and_terminated():
    env = CountingEnv()
    env.full_done_spec = Composite(truncated=Categorical(2, shape=(1,), dtype=torch.bool))
    assert set(env.done_keys) == {"done", "terminated", "truncated"}


def test_multi_agent_specs_as_in_the_seed():
    # The seed's "Example of multi-agent spec creation", run as written.
    class MultiAgentEnv(EnvBase):
        def __init__(self, n_agents: int = 3):
            super().__init__()
            self.n_agents = n_agents

        def _reset(self, tensordict):
            return TensorDict({("agents", "observation"): torch.zeros(self.n_agents, 4)}, [])

        def _step(self, tensordict):
            action = tensordict["agents", "action"]
            return TensorDict(
                {
                    ("agents", "observation"): torch.ones(self.n_agents, 4),
                    ("agents", "reward"): action.sum(-1, keepdim=True),
                    "done": torch.zeros(1, dtype=torch.bool),
                },
                [],
            )

    env = MultiAgentEnv()
    agent_i_action_spec = Bounded(-1.0, 1.0, shape=(2,))
    agent_i_reward_spec = Unbounded(shape=(1,))
    agent_i_observation_spec = Unbounded(shape=(4,))
    action_specs = []
    observation_specs = []
    reward_specs = []
    info_specs = []  # noqa: F841 - as in the seed
    for i in range(env.n_agents):
        action_specs.append(agent_i_action_spec)
        reward_specs.append(agent_i_reward_spec)
        observation_specs.append(agent_i_observation_spec)
    env.action_spec = Composite({"agents": Composite({"action": torch.stack(action_specs)}, shape=(env.n_agents,))})
    env.reward_spec = Composite({"agents": Composite({"reward": torch.stack(reward_specs)}, shape=(env.n_agents,))})
    env.observation_spec = Composite(
        {"agents": Composite({"observation": torch.stack(observation_specs)}, shape=(env.n_agents,))}
    )
    env.done_spec = Categorical(n=2, shape=torch.Size((1,)), dtype=torch.bool)

    assert env.action_key == ("agents", "action")
    assert env.reward_key == ("agents", "reward")
    assert env.reward_spec == torch.stack(reward_specs)
    assert env.reward_spec == env.output_spec["full_reward_spec"][env.reward_key]
    assert env.action_spec.shape == torch.Size([3, 2])
    assert env.output_spec["full_reward_spec"]["agents"].shape == torch.Size([3])
    data = env.rand_step()
    assert data["agents", "action"].shape == torch.Size([3, 2])
    assert data["next", "agents", "reward"].shape == torch.Size([3, 1])
    assert data["next", "terminated"].shape == torch.Size([1])
    rollout = env.rollout(4)
    assert rollout["next", "agents", "observation"].shape == torch.Size([4, 3, 4])


# ---------------------------------------------------------------- step
def test_step_writes_under_next_and_completes_done():
    env = CountingEnv(max_count=2)
    data = env.step(env.rand_action(env.reset()))
    assert "next" in data.keys()
    assert not data["next", "done"].any()
    data = env.step(env.rand_action(env._step_mdp(data)))
    assert data["next", "done"].all() and data["next", "terminated"].all()


def test_step_without_action_names_the_key():
    env = CountingEnv()
    with pytest.raises(KeyError, match="'action'.*Bounded"):
        env.step(env.reset())


def test_step_with_wrong_shape_names_key_spec_and_shape():
    env = CountingEnv()
    data = env.reset()
    data["action"] = torch.zeros(3)
    with pytest.raises(ValueError, match=r"'action'.*expected shape \(1,\).*got \(3,\)"):
        env.step(data)


def test_step_with_wrong_dtype_names_key_and_dtypes():
    env = CountingEnv()
    data = env.reset()
    data["action"] = torch.zeros(1, dtype=torch.int64)  # a discrete value into a float spec
    with pytest.raises(TypeError, match=r"'action'.*torch.float32.*torch.int64"):
        env.step(data)


def test_actions_of_another_dtype_of_their_kind_are_cast_to_the_spec():
    env = CountingEnv()
    data = env.reset()
    data["action"] = torch.zeros(1, dtype=torch.float64)
    assert env.step(data)["action"].dtype == torch.float32
    cartpole = GymEnv("CartPole-v1")  # an int64 one-hot spec
    data = cartpole.reset()
    data["action"] = torch.tensor([True, False])  # a bool one-hot policy
    assert cartpole.step(data)["action"].tolist() == [1, 0]
    data["action"] = torch.tensor([1.0, 0.0])  # a float could hold fractions: refused
    with pytest.raises(TypeError, match=r"'action': expected dtype torch.int64 .* got torch.float32"):
        cartpole.step(data)


def test_value_checks_only_with_run_type_checks():
    env = CountingEnv()
    data = env.reset()
    data["action"] = torch.full((1,), 5.0)
    env.step(data)  # ranges are not checked by default
    env.run_type_checks = True
    data = env.reset()
    data["action"] = torch.full((1,), 5.0)
    with pytest.raises(ValueError, match="'action'.*outside"):
        env.step(data)


def test_batch_locked_env_rejects_other_batch_sizes():
    env = CountingEnv(batch_size=(2,))
    with pytest.raises(ValueError, match=r"batch size \(3,\)"):
        env.step(TensorDict({"action": torch.zeros(3, 1)}, [3]))


def test_truncated_only_output_is_done_not_terminated():
    class TruncatingEnv(CountingEnv):
        def _step(self, tensordict):
            out = super()._step(tensordict)
            done = out.pop("done")
            out["truncated"] = done
            return out

    env = TruncatingEnv(max_count=1)
    env.full_done_spec = Composite(
        done=Categorical(2, shape=(1,), dtype=torch.bool), truncated=Categorical(2, shape=(1,), dtype=torch.bool)
    )
    data = env.rand_step()
    assert data["next", "done"].all() and data["next", "truncated"].all()
    assert not data["next", "terminated"].any()


# ---------------------------------------------------------------- reset and "_reset"
def test_seed_reset_examples():
    env = MultiLevelZerosEnv()
    # single reset at the root
    data = TensorDict({"val": [1, 1], "_reset": [False, True]}, [])
    env.reset(data)
    assert data.get("val").tolist() == [1, 0]
    assert "_reset" not in data.keys()
    # nested resets
    data = TensorDict({
        ("agent0", "val"): [1, 1], ("agent0", "_reset"): [False, True],
        ("agent1", "val"): [2, 2], ("agent1", "_reset"): [True, False],
    }, [])
    env.reset(data)
    assert data.get(("agent0", "val")).tolist() == [1, 0]
    assert data.get(("agent1", "val")).tolist() == [0, 2]
    # nested resets are overridden by a "_reset" at the root
    data = TensorDict({
        "_reset": [True, True],
        ("agent0", "val"): [1, 1], ("agent0", "_reset"): [False, True],
        ("agent1", "val"): [2, 2], ("agent1", "_reset"): [True, False],
    }, [])
    env.reset(data)
    assert data.get(("agent0", "val")).tolist() == [0, 0]
    assert data.get(("agent1", "val")).tolist() == [0, 0]
    assert "_reset" not in data.keys(include_nested=True, leaves_only=True)


def test_reset_passes_the_reset_masks_to_the_subclass():
    env = MultiLevelZerosEnv()
    env.reset(TensorDict({"val": [1, 1], "_reset": [False, True]}, []))
    assert env.reset_inputs[-1]["_reset"].tolist() == [False, True]


def test_reset_fills_missing_done_flags_and_rejects_done_after_reset():
    env = CountingEnv()
    out = env.reset()
    assert set(out.keys()) == {"count", "done", "terminated"}

    class DoneAtReset(CountingEnv):
        def _reset(self, tensordict):
            out = super()._reset(tensordict)
            out["done"] = torch.ones(1, dtype=torch.bool)
            return out

    with pytest.raises(RuntimeError, match="done.*right after a reset"):
        DoneAtReset().reset()
    DoneAtReset().__class__  # constructing is fine
    env = DoneAtReset()
    env.allow_done_after_reset = True
    assert env.reset()["done"].all()


def test_partial_reset_of_a_batched_env():
    env = CountingEnv(batch_size=(3,), max_count=100)
    data = env.reset()
    for _ in range(2):
        data = env._step_mdp(env.step(env.rand_action(data)))
    data["_reset"] = torch.tensor([[True], [False], [True]])
    out = env.reset(data)
    assert out["count"].squeeze(-1).tolist() == [0.0, 2.0, 0.0]


# ---------------------------------------------------------------- step_and_maybe_reset
def test_step_and_maybe_reset_loop_as_in_the_seed():
    env = CountingEnv(max_count=3, with_action=False)  # an env that needs no action
    N = 7
    data_ = env.reset()
    result = []
    for i in range(N):
        data, data_ = env.step_and_maybe_reset(data_)
        result.append(data)
    result = torch.stack(result)
    assert result["next", "count"].squeeze(-1).tolist() == [1, 2, 3, 1, 2, 3, 1]
    assert result["count"].squeeze(-1).tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert result["next", "done"].squeeze(-1).tolist() == [False, False, True] * 2 + [False]
    assert not result["done"].any()


def test_step_and_maybe_reset_resets_only_the_done_components():
    env = CountingEnv(batch_size=(2,), max_count=2)
    data_ = env.reset()
    data_["count"] = torch.tensor([[0.0], [1.0]])
    env.count = data_["count"].clone()
    data, data_ = env.step_and_maybe_reset(env.rand_action(data_))
    assert data["next", "done"].squeeze(-1).tolist() == [False, True]
    assert data_["count"].squeeze(-1).tolist() == [1.0, 0.0]
    assert not data_["done"].any()


def test_dynamic_spec_env_as_in_the_seed():
    class EnvWithDynamicSpec(EnvBase):
        def __init__(self, max_count=5):
            super().__init__(batch_size=())
            self.observation_spec = Composite(
                observation=Unbounded(shape=(3, -1, 2)),
            )
            self.action_spec = Bounded(low=-1, high=1, shape=(2,))
            self.full_done_spec = Composite(
                done=Binary(1, shape=(1,), dtype=torch.bool),
                terminated=Binary(1, shape=(1,), dtype=torch.bool),
                truncated=Binary(1, shape=(1,), dtype=torch.bool),
            )
            self.reward_spec = Unbounded((1,), dtype=torch.float)
            self.count = 0
            self.max_count = max_count

        def _reset(self, tensordict=None):
            self.count = 0
            data = TensorDict(
                {
                    "observation": torch.full(
                        (3, self.count + 1, 2),
                        self.count,
                        dtype=self.observation_spec["observation"].dtype,
                    )
                }
            )
            data.update(self.done_spec.zero())
            return data

        def _step(
            self,
            tensordict: TensorDictBase,
        ) -> TensorDictBase:
            self.count += 1
            done = self.count >= self.max_count
            observation = TensorDict(
                {
                    "observation": torch.full(
                        (3, self.count + 1, 2),
                        self.count,
                        dtype=self.observation_spec["observation"].dtype,
                    )
                }
            )
            done = self.full_done_spec.zero() | done
            reward = self.full_reward_spec.zero()
            return observation.update(done).update(reward)

        def _set_seed(self, seed: Optional[int]):
            self.manual_seed = seed
            return seed

    env = EnvWithDynamicSpec()
    data = env.rollout(5, return_contiguous=False)
    assert isinstance(data, LazyStackedTensorDict)
    assert data.batch_size == torch.Size([5])
    assert isinstance(data["next"], LazyStackedTensorDict)
    assert set(data.keys()) == {"action", "done", "next", "observation", "terminated", "truncated"}
    assert set(data["next"].keys()) == {"done", "observation", "reward", "terminated", "truncated"}
    assert data["action"].shape == torch.Size([5, 2])
    assert data[4]["next", "observation"].shape == torch.Size([3, 6, 2])
    assert data["next", "done"].squeeze(-1).tolist() == [False] * 4 + [True]
    # a contiguous rollout is not possible: the env's dynamic dims make it lazy anyway
    assert isinstance(env.rollout(5), LazyStackedTensorDict)
    from cadence.envs import check_env_specs

    check_env_specs(env, return_contiguous=False)


# ---------------------------------------------------------------- seeding, metadata, misc
def test_set_seed_returns_the_next_seed_deterministically():
    env = CountingEnv()
    first = env.set_seed(0)
    assert first == CountingEnv().set_seed(0)
    assert env.set_seed(first) != first
    assert env.set_seed(5, static_seed=True) == 5


def test_seeded_random_actions_repeat():
    env = CountingEnv(max_count=100)
    env.set_seed(1)
    a = env.rollout(5)["action"]
    env.set_seed(1)
    b = env.rollout(5)["action"]
    env.set_seed(2)
    c = env.rollout(5)["action"]
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_fake_tensordict_matches_a_step():
    env = CountingEnv(batch_size=(2,))
    fake = env.fake_tensordict()
    step = env.rand_step()
    assert set(fake.keys(True, True)) == set(step.keys(True, True))
    for key in fake.keys(True, True):
        assert fake[key].shape == step[key].shape and fake[key].dtype == step[key].dtype


def test_env_metadata_pickles_and_expands():
    meta = EnvMetaData.metadata_from_env(CountingEnv())
    meta = pickle.loads(pickle.dumps(meta))
    assert meta.batch_size == torch.Size([])
    expanded = meta.expand(4)
    assert expanded.batch_size == torch.Size([4])
    assert expanded.tensordict["next", "count"].shape == torch.Size([4, 1])


def test_subclass_without_step_fails_at_construction():
    class Incomplete(EnvBase):
        def _reset(self, tensordict):
            return TensorDict({}, [])

    with pytest.raises(TypeError, match="_step"):
        Incomplete()


def test_to_moves_specs_and_device():
    env = CountingEnv().to("cpu")
    assert env.device == torch.device("cpu")
    assert env.observation_spec["count"].device == torch.device("cpu")


def test_reset_with_nothing_selected_leaves_the_simulator_alone():
    env = MultiLevelZerosEnv()
    calls = len(env.reset_inputs)
    data = TensorDict({"val": [1, 1], "_reset": [False, False]}, [])
    out = env.reset(data)
    assert len(env.reset_inputs) == calls
    assert out["val"].tolist() == [1, 1] and "_reset" not in data.keys()


def test_append_transform_wraps_the_env_in_a_transformed_env():
    from cadence.envs.transforms import RewardScaling, TransformedEnv

    base = CountingEnv(max_count=100)
    env = base.append_transform(RewardScaling(loc=0.0, scale=2.0))
    assert isinstance(env, TransformedEnv) and env.base_env is base
    assert env.rollout(2)["next", "reward"].squeeze(-1).tolist() == [2.0, 2.0]
    # a TransformedEnv appends in place and returns itself
    assert env.append_transform(RewardScaling(loc=1.0, scale=1.0)) is env
    assert len(env.transform) == 2
    assert base.rollout(1)["next", "reward"].item() == 1.0  # the base env is unchanged


# ---------------------------------------------------------------- bad values (issue #14)
BAD_SEEDS = [-1, 2**70, 2**63, 1.5, "3", True]


def _seedable_envs() -> dict[str, Callable[[], object]]:
    from cadence.envs import GymEnv, ParallelEnv, SerialEnv, TransformedEnv
    from cadence.envs.transforms import RewardScaling

    makers: dict[str, Callable[[], object]] = {
        "CountingEnv": lambda: CountingEnv(max_count=100),
        "PendulumEnv": PendulumEnv,
        "GymEnv": lambda: GymEnv("CartPole-v1"),
        "TransformedEnv": lambda: TransformedEnv(GymEnv("Pendulum-v1"), RewardScaling(loc=0.0, scale=2.0)),
        "SerialEnv": lambda: SerialEnv(2, lambda: GymEnv("CartPole-v1")),
        "ParallelEnv": lambda: ParallelEnv(2, lambda: GymEnv("CartPole-v1")),
    }
    if importlib.util.find_spec("dm_control") is not None:
        from cadence.envs import DMControlEnv

        makers["DMControlEnv"] = lambda: DMControlEnv("cartpole", "balance")
    if importlib.util.find_spec("envpool") is not None:
        from cadence.envs import MultiThreadedEnv

        makers["MultiThreadedEnv"] = lambda: MultiThreadedEnv(2, "CartPole-v1")
    return makers


@pytest.mark.parametrize("name", list(_seedable_envs()))
def test_set_seed_rejects_bad_seeds_before_any_state_changes(name):
    make = _seedable_envs()[name]
    env, reference = make(), make()
    try:
        env.set_seed(7)
        reference.set_seed(7)
        for bad in BAD_SEEDS:
            with pytest.raises((TypeError, ValueError), match=r"set_seed: the seed must be .*0 <= seed < 2\*\*63"):
                env.set_seed(bad)
        # nothing was seeded: the env goes on exactly as one that never saw the bad seeds
        got = env.rollout(6, break_when_any_done=False)
        want = reference.rollout(6, break_when_any_done=False)
        for key in want.keys(True, True):
            assert torch.equal(got[key], want[key]), key
    finally:
        env.close()
        reference.close()


def test_a_bad_seed_does_not_start_a_lazy_batched_env():
    from cadence.envs import GymEnv, ParallelEnv

    env = ParallelEnv(2, lambda: GymEnv("CartPole-v1"))
    with pytest.raises(ValueError, match=r"ParallelEnv.set_seed: .*got -1"):
        env.set_seed(-1)
    assert not env.is_started
    env.close()


def test_nan_action_passes_the_hot_path_but_not_run_type_checks():
    env = CountingEnv()
    data = env.reset().set("action", torch.full((1,), float("nan")))
    env.step(data)  # off by default: step() checks only the action's shape and dtype
    env.run_type_checks = True
    data = env.reset().set("action", torch.full((1,), float("nan")))
    with pytest.raises(SpecMismatchError, match=r"step\(\) input 'action' lies outside its spec Bounded.*NaN in 1 of 1"):
        env.step(data)
    assert issubclass(SpecMismatchError, ValueError)
    data["action"] = torch.zeros(1)
    env.step(data)  # the env is usable afterwards


class _StatelessEnv(EnvBase):
    """Reads a state entry ``"position"`` (Bounded in [0, 1]) from its input."""

    batch_locked = False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_spec = Composite(position=Bounded(0.0, 1.0, shape=(1,)))
        self.state_spec = Composite(position=Bounded(0.0, 1.0, shape=(1,)))
        self.action_spec = Bounded(-0.1, 0.1, shape=(1,))

    def _reset(self, tensordict):
        return TensorDict({"position": torch.full((1,), 0.5)}, [])

    def _step(self, tensordict):
        position = (tensordict["position"] + tensordict["action"]).clamp(0.0, 1.0)
        return TensorDict({"position": position, "reward": torch.zeros(1), "done": torch.zeros(1, dtype=torch.bool)}, [])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (torch.full((1,), float("nan")), r"'position' lies outside its spec Bounded.*NaN"),
        (torch.full((1,), 2.0), r"'position' lies outside its spec Bounded.*got values in \[2.0, 2.0\]"),
        (torch.full((1,), 1, dtype=torch.float64), r"'position': its spec Bounded.*has dtype torch.float32, but the value has dtype torch.float64"),
        (torch.full((3,), 0.5), r"'position': its spec Bounded.*has shape \(1,\), but the value has shape \(3,\)"),
    ],
)
def test_run_type_checks_catch_any_input_the_env_reads(value, message):
    env = _StatelessEnv(run_type_checks=True)
    data = env.rand_action(env.reset()).set("position", value)
    with pytest.raises(SpecMismatchError, match=message):
        env.step(data)
    _StatelessEnv().step(data)  # unchecked by default


def test_run_type_checks_catch_reset_outputs_naming_the_key():
    class BadReset(_StatelessEnv):
        def _reset(self, tensordict):
            return TensorDict({"position": torch.full((1,), float("nan"))}, [])

    BadReset().reset()
    with pytest.raises(SpecMismatchError, match=r"BadReset._reset\(\) output 'position' lies outside its spec"):
        BadReset(run_type_checks=True).reset()


def test_rand_action_with_an_all_false_action_mask_says_no_action_is_allowed():
    from cadence.envs.transforms import ActionMask, TransformedEnv

    class GameOver(EnvBase):  # after two moves, no move is allowed
        def __init__(self):
            super().__init__()
            self.observation_spec = Composite(action_mask=Categorical(2, shape=(3,), dtype=torch.bool))
            self.action_spec = Categorical(3, shape=())
            self.moves = 0

        def _out(self):
            return TensorDict({"action_mask": torch.full((3,), self.moves < 2)}, [])

        def _reset(self, tensordict):
            self.moves = 0
            return self._out()

        def _step(self, tensordict):
            self.moves += 1
            return self._out().update({"reward": torch.zeros(1), "done": torch.zeros(1, dtype=torch.bool)})

    env = TransformedEnv(GameOver(), ActionMask())
    with pytest.raises(ValueError, match=r"Categorical\(n=3, \.\.\.\)\.rand: the mask allows no category, so no value \(no action\)"):
        env.rollout(5)


def test_specs_holds_the_input_and_output_specs_locked():
    env = PendulumEnv()
    specs = env.specs
    assert specs["input_spec", "full_action_spec", "action"] == env.action_spec
    assert specs["output_spec", "full_observation_spec"] == env.full_observation_spec
    with pytest.raises(RuntimeError):
        specs["output_spec", "full_observation_spec", "extra"] = env.action_spec


# ---------------------------------------------------------------- the kernel: declared per class, visible
def test_the_kernel_is_named_and_chosen_by_what_the_class_body_defines():
    class Renamed(GymEnv):  # no step method of its own: gymnasium's kernel stays
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)

    class OwnSimulate(GymEnv):  # gymnasium's kernel stands in for _simulate: the gym-like one calls it
        def _simulate(self, action):
            return super()._simulate(action)

    class OwnStep(GymEnv):  # both stand in for _step: the generic step through it
        def _step(self, tensordict):
            return super()._step(tensordict)

    class Declared(OwnStep):  # a class that declares a kernel in its body keeps it
        array_kernel = GymEnv.array_kernel

    class OwnBookkeeping(PendulumEnv):  # step()'s bookkeeping of its own: every step goes through it
        def step(self, tensordict):
            return super().step(tensordict)

    assert GymEnv("Pendulum-v1").kernel == Renamed("Pendulum-v1").kernel == "gymnasium env, stepped into arrays"
    assert OwnSimulate("Pendulum-v1").kernel == "gym-like: OwnSimulate's simulator, stepped into arrays"
    assert OwnStep("Pendulum-v1").kernel == "generic: OwnStep._step"
    assert OwnStep.array_kernel is None and Declared.array_kernel is GymEnv.array_kernel
    assert OwnBookkeeping().kernel == "generic: OwnBookkeeping.step, PendulumEnv._step"
    assert PendulumEnv().kernel == "values: PendulumEnv._step"
    assert CountingEnv().kernel == "values: CountingEnv._step"


def test_settings_that_need_the_generic_step_are_read_when_asked():
    env = GymEnv("Pendulum-v1")
    env.run_type_checks = True
    assert env._array_simulator() is None and env.kernel == "generic: GymLikeEnv._step"
    env.run_type_checks = False
    assert env.kernel == "gymnasium env, stepped into arrays"


def test_the_generic_step_on_values_is_declared_and_withdrawn_with_the_bookkeeping():
    class Declared(CountingEnv):
        generic_values_step = True

    class OwnRandomActions(Declared):  # the loop on values draws from the spec: its own draws keep the generic loop
        def rand_action(self, tensordict=None):
            return super().rand_action(tensordict)

    class OwnStep(Declared):  # a _step of its own is what the generic step on values calls
        def _step(self, tensordict):
            return super()._step(tensordict)

    assert Declared()._values_step_applies() and OwnStep()._values_step_applies()
    assert not OwnRandomActions.generic_values_step
    env = Declared()
    env.run_type_checks = True
    assert not env._values_step_applies()
    data = Declared().rollout(5, break_when_any_done=False)
    assert data["next", "count"].squeeze(-1).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
