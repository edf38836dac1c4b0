"""Helpers: step_mdp, terminated_or_truncated, check_env_specs, RandomPolicy, exploration."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from cadence.data import Bounded, Composite, OneHot, Unbounded
from cadence.envs import (
    ExplorationType,
    RandomPolicy,
    check_env_specs,
    exploration_type,
    make_composite_from_td,
    set_exploration_type,
    step_mdp,
    terminated_or_truncated,
)
from cadence.envs.utils import SpecCheckError
from tests.fakes import CountingEnv


def test_step_mdp_moves_next_up_and_drops_reward_and_action():
    data = TensorDict(
        {
            "obs": torch.zeros(2),
            "action": torch.ones(1),
            "memory": torch.ones(3),
            "next": {"obs": torch.ones(2), "reward": torch.ones(1), "done": torch.zeros(1, dtype=torch.bool)},
        },
        [],
    )
    out = step_mdp(data)
    assert set(out.keys()) == {"obs", "memory", "done"}
    assert out["obs"].tolist() == [1.0, 1.0]
    assert set(step_mdp(data, keep_other=False).keys()) == {"obs", "done"}
    assert set(step_mdp(data, exclude_done=True).keys()) == {"obs", "memory"}
    assert "reward" in step_mdp(data, exclude_reward=False).keys()
    assert "action" in step_mdp(data, exclude_action=False).keys()


def test_step_mdp_nested_keys_and_target():
    data = TensorDict(
        {
            ("agents", "action"): torch.ones(3, 2),
            ("agents", "obs"): torch.zeros(3, 4),
            "next": {("agents", "obs"): torch.ones(3, 4), ("agents", "reward"): torch.ones(3, 1)},
        },
        [],
    )
    target = TensorDict({}, [])
    out = step_mdp(data, next_tensordict=target, reward_keys=[("agents", "reward")], action_keys=[("agents", "action")])
    assert out is target
    assert set(out.keys(True, True)) == {("agents", "obs")}


def test_terminated_or_truncated_writes_a_mask_per_level():
    data = TensorDict(
        {
            "done": torch.tensor([[False], [False]]),
            ("agents", "terminated"): torch.tensor([[True], [False]]),
            ("agents", "truncated"): torch.tensor([[False], [True]]),
        },
        [2],
    )
    assert terminated_or_truncated(data)
    assert data["agents", "_reset"].squeeze(-1).tolist() == [True, True]
    assert "_reset" not in data.keys()
    quiet = TensorDict({"done": torch.zeros(2, 1, dtype=torch.bool)}, [2])
    assert not terminated_or_truncated(quiet, write_full_false=True)
    assert quiet["_reset"].shape == torch.Size([2, 1])


def test_make_composite_from_td():
    td = TensorDict({"obs": torch.zeros(4, 3), "nested": {"flag": torch.zeros(4, dtype=torch.bool)}}, [4])
    spec = make_composite_from_td(td)
    assert spec.shape == torch.Size([4])
    assert isinstance(spec["obs"], Unbounded) and spec["obs"].shape == torch.Size([4, 3])
    assert spec["nested", "flag"].shape == torch.Size([4, 1])
    assert make_composite_from_td(td, unsqueeze_null_shapes=False)["nested", "flag"].shape == torch.Size([4])


def test_check_env_specs_passes_on_a_correct_env():
    check_env_specs(CountingEnv(batch_size=(3,)), seed=0)


def test_check_env_specs_names_key_and_both_shapes():
    class WrongShape(CountingEnv):
        def _step(self, tensordict):
            out = super()._step(tensordict)
            out["count"] = torch.zeros(2)
            return out

    with pytest.raises(SpecCheckError, match=r"'count'.*shape \(1,\).*shape \(2,\)"):
        check_env_specs(WrongShape())


def test_check_env_specs_names_key_and_both_dtypes():
    class WrongDtype(CountingEnv):
        def _step(self, tensordict):
            out = super()._step(tensordict)
            out["count"] = out["count"].double()
            return out

    with pytest.raises(AssertionError, match=r"'count'.*torch.float32.*torch.float64"):
        check_env_specs(WrongDtype())


def test_check_env_specs_names_missing_and_extra_keys():
    class ExtraKey(CountingEnv):
        def _step(self, tensordict):
            out = super()._step(tensordict)
            out["surprise"] = torch.zeros(1)
            return out

    with pytest.raises(SpecCheckError, match="surprise"):
        check_env_specs(ExtraKey())


def test_check_env_specs_checks_ranges():
    class OutOfRange(CountingEnv):
        def __init__(self):
            super().__init__()
            self.observation_spec = Composite(count=Bounded(0.0, 1.5, shape=(1,)))

    with pytest.raises(SpecCheckError, match="'count'.*outside"):
        check_env_specs(OutOfRange())


def test_random_policy_is_reproducible_and_handles_composites():
    spec = OneHot(3)
    first = RandomPolicy(spec, generator=torch.Generator().manual_seed(0))
    second = RandomPolicy(spec, generator=torch.Generator().manual_seed(0))
    for _ in range(5):
        assert torch.equal(first(TensorDict({}, []))["action"], second(TensorDict({}, []))["action"])
    composite = Composite(agents=Composite(action=Bounded(-1.0, 1.0, shape=(2, 2)), shape=(2,)))
    out = RandomPolicy(composite)(TensorDict({}, []))
    assert out["agents", "action"].shape == torch.Size([2, 2])


def test_random_policy_drives_a_rollout():
    env = CountingEnv(max_count=100)
    data = env.rollout(4, RandomPolicy(env.action_spec))
    assert data["action"].abs().max() <= 1.0


def test_exploration_type_is_shared_with_tensordict_modules():
    assert exploration_type() == ExplorationType.RANDOM

    @set_exploration_type(ExplorationType.MODE)
    def inside():
        return exploration_type()

    assert inside() == ExplorationType.MODE
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        from tensordict.nn import interaction_type

        assert interaction_type() == ExplorationType.DETERMINISTIC
    assert exploration_type() == ExplorationType.RANDOM


def test_tensordict_module_policy_in_a_rollout():
    env = CountingEnv(max_count=100)
    policy = TensorDictModule(lambda count: torch.tanh(count), in_keys=["count"], out_keys=["action"])
    data = env.rollout(3, policy)
    assert torch.allclose(data["action"], torch.tanh(data["count"]))


# ---------------------------------------------------------------- bad values (issue #14)
class _RecordsChecks(CountingEnv):
    """Records the env's ``run_type_checks`` at every step."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seen: list[bool] = []

    def _step(self, tensordict):
        self.seen.append(self.run_type_checks)
        return super()._step(tensordict)


def test_check_env_specs_runs_with_run_type_checks_on_and_restores_the_setting():
    env = _RecordsChecks(max_count=100)
    check_env_specs(env)
    assert env.seen[:3] == [True, True, True]  # the checked rollout
    assert env.seen[3:] == [False, False, False]  # the contiguous one, with the env's own setting
    assert env.run_type_checks is False
    env.seen.clear()
    check_env_specs(env, run_type_checks=False)
    assert env.seen == [False] * 6


def test_check_env_specs_reports_a_nan_observation_as_a_spec_check_error():
    class NanObservation(CountingEnv):
        def __init__(self):
            super().__init__(max_count=100)
            self.observation_spec = Composite(count=Bounded(0.0, 10.0, shape=(1,)))

        def _step(self, tensordict):
            out = super()._step(tensordict)
            out["count"] = torch.full((1,), float("nan"))
            return out

    env = NanObservation()
    with pytest.raises(SpecCheckError, match=r"NanObservation._step\(\) output 'count' lies outside its spec Bounded.*NaN"):
        check_env_specs(env)
    assert env.run_type_checks is False  # restored after the failure too
    env.rollout(3)  # the hot path does not look at values


def test_check_env_specs_ignores_the_auto_reset_placeholders():
    class AutoResetCounter(CountingEnv):
        """Resets itself after two steps; its observation is Bounded, so NaN is outside."""

        def __init__(self):
            super().__init__(max_count=2)
            self.auto_reset = True
            self.observation_spec = Composite(count=Bounded(0.0, 2.0, shape=(1,)))

        def _step(self, tensordict):
            out = super()._step(tensordict)
            if bool(out["done"].all()):
                self.count = torch.zeros(1)  # the first observation of the next episode
            return out

    env = AutoResetCounter()
    assert env.rollout(3, break_when_any_done=False)["next", "count"].isnan().any()  # the placeholders
    check_env_specs(env)


@pytest.mark.parametrize("options", [
    {}, {"exclude_reward": False}, {"exclude_done": True}, {"exclude_action": False},
    {"exclude_done": True, "exclude_reward": False, "exclude_action": False},
])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_step_mdp_by_dicts_equals_the_tensordict_operations(options: dict, batch: tuple) -> None:
    from cadence.envs.utils import _step_mdp

    def step() -> TensorDict:
        next_td = TensorDict({"obs": torch.rand(*batch, 2), "reward": torch.rand(*batch, 1),
                              "done": torch.zeros(*batch, 1, dtype=torch.bool),
                              "terminated": torch.zeros(*batch, 1, dtype=torch.bool),
                              "truncated": torch.ones(*batch, 1, dtype=torch.bool)}, batch)
        return TensorDict({"obs": torch.rand(*batch, 2), "action": torch.rand(*batch, 1), "hidden": torch.ones(*batch, 4),
                           "done": torch.zeros(*batch, 1, dtype=torch.bool), "next": next_td}, batch)

    data = step()
    if batch:
        data.names = ["env"]
    defaults = {"exclude_reward": True, "exclude_done": False, "exclude_action": True}
    kwargs = {**defaults, **options}
    fast = step_mdp(data, **kwargs)
    slow = _step_mdp(data, None, True, kwargs["exclude_reward"], kwargs["exclude_done"], kwargs["exclude_action"],
                     "reward", "done", "action")
    assert list(fast.keys()) == list(slow.keys()) and fast.names == slow.names and fast.batch_size == slow.batch_size
    for key in slow.keys():
        assert fast.get(key) is slow.get(key)  # the same tensors, moved, not copied


def test_step_mdp_merges_nested_entries_as_update_does() -> None:
    data = TensorDict({"agent": {"obs": torch.zeros(2), "memory": torch.ones(2)},
                       "next": {"agent": {"obs": torch.ones(2)}, "reward": torch.ones(1)}}, [])
    out = step_mdp(data)
    assert out["agent", "obs"].tolist() == [1.0, 1.0] and out["agent", "memory"].tolist() == [1.0, 1.0]
