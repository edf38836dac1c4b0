"""StepValues, and a TransformedEnv's step on plain tensors against the generic step.

The values path (the simulator's outputs and every transform on a dict of tensors, one
TensorDict built at the end) must give what the generic path (TensorDicts throughout)
gives, entry for entry: the step's data, the next input, across resets and partial
resets, for every transform that says ``steps_on_values``.
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium
import numpy as np
import pytest
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule

from cadence.collectors import SyncDataCollector
from cadence.data import Unbounded
from cadence.envs import (
    BinarizeReward,
    CatFrames,
    CatTensors,
    CenterCrop,
    Crop,
    ClipTransform,
    Compose,
    DoubleToFloat,
    DTypeCastTransform,
    ExcludeTransform,
    FiniteTensorDictCheck,
    FlattenObservation,
    GrayScale,
    GymEnv,
    GymWrapper,
    InitTracker,
    NoopResetEnv,
    ObservationNorm,
    PermuteTransform,
    RenameTransform,
    Resize,
    RewardClipping,
    RewardScaling,
    RewardSum,
    SelectTransform,
    SignTransform,
    SqueezeTransform,
    StepCounter,
    TargetReturn,
    TensorDictPrimer,
    TimeMaxPool,
    ToTensorImage,
    TrajCounter,
    Transform,
    TransformedEnv,
    UnsqueezeTransform,
    VecNorm,
)
from cadence.envs.step_values import StepValues
from tests.fakes import assert_same_rollout

# ----- StepValues ------------------------------------------------------------------------------


def test_keys_are_stored_as_tensordict_reads_them() -> None:
    values = StepValues({}, torch.Size([2]))
    values.set(("reward",), torch.ones(2, 1)).set(("agent", "obs"), torch.zeros(2, 3))
    assert list(values.keys()) == ["reward", ("agent", "obs")]
    assert values.get("reward").shape == (2, 1) and ("agent", "obs") in values and "agent" not in values
    assert values.get("missing", None) is None
    with pytest.raises(KeyError, match="key 'missing' not found in the step's entries"):
        values.get("missing")


def test_exclude_drops_keys_and_what_lies_under_them() -> None:
    values = StepValues({"a": torch.ones(1), ("b", "c"): torch.ones(1), ("b", "d"): torch.ones(1)}, torch.Size([]))
    assert list(values.exclude("b").keys()) == ["a"]
    assert list(values.exclude(("b", "c"), "a").keys()) == [("b", "d")]
    assert list(values.keys()) == ["a", ("b", "c"), ("b", "d")]  # the original is untouched


def test_to_tensordict_nests_and_keeps_the_tensors() -> None:
    obs = torch.zeros(2, 3)
    td = StepValues({"obs": obs, ("agent", "reward"): torch.ones(2, 1)}, torch.Size([2])).to_tensordict()
    assert td.batch_size == (2,) and td["agent"].batch_size == (2,)
    assert td.get("obs") is obs


def test_items_are_the_leaves_with_full_keys_only() -> None:
    values = StepValues({("a", "b"): torch.ones(1)}, torch.Size([]))
    assert [key for key, _ in values.items(include_nested=True, leaves_only=True)] == [("a", "b")]
    with pytest.raises(TypeError, match=r"items\(True, True\)"):
        values.items(include_nested=False)


# ----- the values path against the generic path ------------------------------------------------

TRANSFORMS: dict[str, Callable[[], Transform]] = {
    "double_to_float": DoubleToFloat,
    "dtype_cast": lambda: DTypeCastTransform(torch.float32, torch.float64, in_keys=["observation", "reward"]),
    "observation_norm": lambda: ObservationNorm(loc=torch.tensor([0.1, 0.2, 0.3]), scale=torch.tensor([2.0, 3.0, 4.0])),
    "observation_norm_standard": lambda: ObservationNorm(
        loc=torch.tensor([0.1, 0.2, 0.3]), scale=torch.tensor([2.0, 3.0, 4.0]), standard_normal=True),
    "clip": lambda: ClipTransform(in_keys=["observation"], low=-0.5, high=0.5),
    "reward_scaling": lambda: RewardScaling(loc=1.0, scale=0.5),
    "reward_clipping": lambda: RewardClipping(-1.0, 1.0),
    "binarize": BinarizeReward,
    "sign": lambda: SignTransform(in_keys=["reward"]),
    "step_counter": lambda: StepCounter(7),
    "step_counter_no_done": lambda: StepCounter(5, update_done=False),
    "init_tracker": InitTracker,
    "reward_sum": RewardSum,
    "cat_keep": lambda: CatTensors(in_keys=["observation"], out_key="observation_vector", del_keys=False),
    "cat_two": lambda: Compose(
        ObservationNorm(loc=torch.ones(3), scale=torch.ones(3), in_keys=["observation"], out_keys=["normed"]),
        CatTensors(in_keys=["observation", "normed"], out_key="vector", del_keys=False)),
    "cat_delete_one": lambda: CatTensors(in_keys=["observation"], out_key="vector", del_keys=True),
    "cat_delete": lambda: Compose(StepCounter(9), CatTensors(
        in_keys=["observation", "step_count"], out_key="observation_vector", del_keys=True, unsqueeze_if_oor=True)),
    "unsqueeze_squeeze": lambda: Compose(UnsqueezeTransform(-1, in_keys=["observation"], out_keys=["column"]),
                                         SqueezeTransform(-1, in_keys=["column"], out_keys=["flat"])),
    "permute_flatten": lambda: Compose(
        UnsqueezeTransform(-1, in_keys=["observation"], out_keys=["column"]),
        PermuteTransform([-1, -2], in_keys=["column"], out_keys=["row"]),
        FlattenObservation(-2, -1, in_keys=["row"], out_keys=["flat"])),
    "exclude": lambda: Compose(CatTensors(in_keys=["observation"], out_key="vector", del_keys=False),
                               ExcludeTransform("observation")),
    "rename": lambda: RenameTransform(["observation"], ["state"]),
    "rename_copy": lambda: RenameTransform(["observation"], ["state"], create_copy=True),
    "select": lambda: Compose(CatTensors(in_keys=["observation"], out_key="vector", del_keys=False),
                              SelectTransform("vector")),
    "primer": lambda: TensorDictPrimer(primers={"hidden": Unbounded(shape=(4,))}, default_value=0.5),
    "cat_frames": lambda: CatFrames(N=3, dim=-1, in_keys=["observation"], out_keys=["stacked"]),
    "vec_norm": lambda: VecNorm(in_keys=["observation"], decay=0.9),
    "time_max_pool": lambda: TimeMaxPool(in_keys=["observation"], out_keys=["pooled"], T=3),
    "traj_counter": TrajCounter,
    "finite_check": FiniteTensorDictCheck,
    "target_return": lambda: TargetReturn(target_return=10.0),
    "noop_reset": lambda: Compose(NoopResetEnv(noops=3, random=False), StepCounter(8)),
    "tutorial_chain": lambda: Compose(
        DoubleToFloat(), ObservationNorm(loc=torch.zeros(3), scale=torch.ones(3)), StepCounter(6), RewardSum(),
        CatTensors(in_keys=["observation"], out_key="observation_vector", del_keys=False)),
}


def _env(make_transform: Callable[[], Transform], on_values: bool, num_envs: int | None = None) -> TransformedEnv:
    base = GymEnv("Pendulum-v1") if num_envs is None else GymEnv("Pendulum-v1", num_envs=num_envs)
    env = TransformedEnv(base, make_transform())
    env.use_values_path = on_values
    env.set_seed(0)
    return env


def _assert_same(fast: TensorDictBase, slow: TensorDictBase, where: str) -> None:
    assert set(fast.keys(True, True)) == set(slow.keys(True, True)), where
    for key in slow.keys(True, True):
        assert fast[key].dtype == slow[key].dtype, (where, key)
        assert torch.equal(fast[key], slow[key]), (where, key)


def _manual_loop(env: TransformedEnv, steps: int) -> list[tuple[TensorDictBase, TensorDictBase]]:
    out = []
    td = env.reset()
    for _ in range(steps):
        data, td = env.step_and_maybe_reset(env.rand_action(td))
        out.append((data.clone(), td.clone()))
    return out


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_each_transform_on_values_gives_the_generic_steps(name: str) -> None:
    fast, slow = _env(TRANSFORMS[name], True), _env(TRANSFORMS[name], False)
    assert fast.transform.steps_on_values and fast._values_step_applies()
    assert not slow._values_step_applies()
    for step, ((data, next_td), (data_ref, next_ref)) in enumerate(zip(_manual_loop(fast, 25), _manual_loop(slow, 25))):
        _assert_same(data, data_ref, f"{name}: data at step {step}")
        _assert_same(next_td, next_ref, f"{name}: next input at step {step}")


def test_batched_env_with_partial_resets_gives_the_generic_steps() -> None:
    # three envs, truncated at different steps: the StepCounter's limit hits them apart
    def chain() -> Transform:
        return TRANSFORMS["tutorial_chain"]()

    fast, slow = _env(chain, True, num_envs=3), _env(chain, False, num_envs=3)
    assert fast._values_step_applies() and fast.batch_size == (3,)
    for env in (fast, slow):
        td = env.reset()
        for _ in range(4):
            _, td = env.step_and_maybe_reset(env.rand_action(td))
        env.shuttle = td
    # a partial reset of env 1 only, then steps across everyone's truncation
    for env in (fast, slow):
        mask = torch.tensor([[False], [True], [False]])
        env.shuttle = env.reset(env.shuttle.clone().set("_reset", mask))
    for step in range(12):
        results = []
        for env in (fast, slow):
            data, env.shuttle = env.step_and_maybe_reset(env.rand_action(env.shuttle))
            results.append((data.clone(), env.shuttle.clone()))
        (data, next_td), (data_ref, next_ref) = results
        _assert_same(data, data_ref, f"data at step {step}")
        _assert_same(next_td, next_ref, f"next input at step {step}")


def test_rollout_with_a_policy_and_the_collector_give_the_generic_batches() -> None:
    torch.manual_seed(0)
    policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation_vector"], ["action"])
    fast, slow = _env(TRANSFORMS["tutorial_chain"], True), _env(TRANSFORMS["tutorial_chain"], False)
    assert_same_rollout(fast.rollout(20, policy, break_when_any_done=False), slow.rollout(20, policy, break_when_any_done=False))
    batches = []
    for env in (_env(TRANSFORMS["tutorial_chain"], True), _env(TRANSFORMS["tutorial_chain"], False)):
        collector = SyncDataCollector(env, policy, frames_per_batch=16, total_frames=32)
        batches.append([batch.clone() for batch in collector])
        collector.shutdown()
    for fast_batch, slow_batch in zip(*batches):
        assert_same_rollout(fast_batch, slow_batch)


def test_a_transform_that_does_not_say_so_keeps_the_generic_path() -> None:
    class Halve(Transform):
        def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
            return next_tensordict.set("reward", next_tensordict.get("reward") / 2)

    env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(StepCounter(5), Halve()))
    assert not env._values_step_applies()
    data = env.rollout(3)
    assert data["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3]


def test_inverse_keys_run_type_checks_and_a_preset_next_keep_the_generic_path() -> None:
    env = TransformedEnv(GymEnv("Pendulum-v1"), DTypeCastTransform(torch.float64, torch.float32, in_keys_inv=["action"]))
    assert not env._values_step_applies()  # inv changes the action on its way in
    env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(5))
    env.base_env.run_type_checks = True
    assert not env._values_step_applies()
    env.base_env.run_type_checks = False
    assert env._values_step_applies()
    # what a policy wrote under "next" (a recurrent state, say) stays, as on the generic path
    td = env.rand_action(env.reset())
    td.set("next", TensorDict({"hidden": torch.ones(2)}, []))
    out = env.step(td)
    assert out["next", "hidden"].tolist() == [1.0, 1.0] and out["next", "step_count"].tolist() == [1]


def test_a_transform_that_opts_in_but_builds_a_tensordict_is_named() -> None:
    class Rebuilds(Transform):
        steps_on_values = True

        def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
            return TensorDict(dict(next_tensordict.items()), [])

    env = TransformedEnv(GymEnv("Pendulum-v1"), Rebuilds())
    with pytest.raises(TypeError, match="returned a TensorDict from _step on StepValues"):
        env.rollout(2)


def test_a_serial_batch_under_the_chain_steps_on_values_as_on_tensordicts() -> None:
    from cadence.envs import SerialEnv

    def make(on_values: bool) -> TransformedEnv:
        env = TransformedEnv(SerialEnv(3, lambda: GymEnv("CartPole-v1")), Compose(
            StepCounter(30), RewardSum(), CatTensors(in_keys=["observation"], out_key="vector", del_keys=False)))
        env.use_values_path = on_values
        env.set_seed(0)
        return env

    fast, slow = make(True), make(False)
    assert fast._values_step_applies() and fast.base_env._values_step_applies()
    for step, ((data, next_td), (data_ref, next_ref)) in enumerate(zip(_manual_loop(fast, 40), _manual_loop(slow, 40))):
        _assert_same(data, data_ref, f"data at step {step}")
        _assert_same(next_td, next_ref, f"next input at step {step}")
    # CartPole's random episodes end apart: partial resets of the batch happened
    assert any(bool(d["next", "done"].any()) and not bool(d["next", "done"].all()) for d, _ in _manual_loop(make(True), 40))


def test_a_per_key_transform_failing_on_values_names_the_key() -> None:
    class Fails(Transform):
        steps_on_values = True

        def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("no")

    env = TransformedEnv(GymEnv("Pendulum-v1"), Fails(in_keys=["observation"]))
    assert env._values_step_applies()
    with pytest.raises(RuntimeError, match="Fails could not transform 'observation'"):
        env.step(env.rand_action(env.reset()))


def test_a_transform_appended_after_steps_joins_the_step_on_values() -> None:
    env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(5))
    env.set_seed(0)
    env.step_and_maybe_reset(env.rand_action(env.reset()))
    env.append_transform(RewardScaling(loc=0.0, scale=0.0))
    data, _ = env.step_and_maybe_reset(env.rand_action(env.reset()))
    assert data["next", "reward"].tolist() == [0.0] and data["next", "step_count"].tolist() == [1]



class PixelsEnv(gymnasium.Env):
    """Frames (8x8 RGB, uint8) that brighten with the action; truncated after 12 steps."""

    observation_space = gymnasium.spaces.Dict(
        pixels=gymnasium.spaces.Box(0, 255, (8, 8, 3), dtype=np.uint8),
        state=gymnasium.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32),
    )
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.level, self.t = float(self.np_random.integers(0, 100)), 0
        return self._obs(), {}

    def _obs(self) -> dict[str, np.ndarray]:
        frame = (np.arange(192).reshape(8, 8, 3) + self.level) % 256
        return {"pixels": frame.astype(np.uint8), "state": np.full(2, self.level / 255, dtype=np.float32)}

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        self.level, self.t = self.level + 10 * float(action[0]) + 5, self.t + 1
        return self._obs(), float(action[0]), False, self.t >= 12, {}


IMAGE_TRANSFORMS: dict[str, Callable[[], Transform]] = {
    "to_tensor_image": ToTensorImage,
    "image_chain": lambda: Compose(ToTensorImage(), Resize(4, 4), GrayScale()),
    "center_crop": lambda: Compose(ToTensorImage(), CenterCrop(4)),
    "crop": lambda: Compose(ToTensorImage(), Crop(4, 3, top=1, left=2)),
}


@pytest.mark.parametrize("name", sorted(IMAGE_TRANSFORMS))
def test_image_transforms_on_values_give_the_generic_steps(name: str) -> None:
    def make(on_values: bool) -> TransformedEnv:
        env = TransformedEnv(GymWrapper(PixelsEnv()), IMAGE_TRANSFORMS[name]())
        env.use_values_path = on_values
        env.set_seed(0)
        return env

    fast, slow = make(True), make(False)
    assert fast._values_step_applies() and not slow._values_step_applies()
    for step, ((data, next_td), (data_ref, next_ref)) in enumerate(zip(_manual_loop(fast, 25), _manual_loop(slow, 25))):
        _assert_same(data, data_ref, f"{name}: data at step {step}")
        _assert_same(next_td, next_ref, f"{name}: next input at step {step}")


def test_step_values_select_and_delete() -> None:
    values = StepValues({"a": torch.ones(1), ("b", "c"): torch.ones(1), ("b", "d"): torch.ones(1)}, torch.Size([]))
    assert list(values.select("a", ("b", "c")).keys()) == ["a", ("b", "c")]
    with pytest.raises(KeyError, match="'z'"):
        values.select("z")
    del values[("b", "d")]
    assert list(values.keys()) == ["a", ("b", "c")]
