"""Env-shape transforms: auto-reset, empty specs, device casts (values, specs, resets)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from cadence.data import Composite, Unbounded
from cadence.envs import EnvBase, SerialEnv, check_env_specs
from cadence.envs.transforms import TransformedEnv
from cadence.envs.transforms.env_shape import AutoResetEnv, AutoResetTransform, DeviceCastTransform, RemoveEmptySpecs
from cadence.envs.transforms.reward import RewardSum
from tests.fakes import CountingEnv


def _all_spec_checks(make_transform, make_env=lambda: CountingEnv(max_count=100)):
    check_env_specs(TransformedEnv(make_env(), make_transform()))
    check_env_specs(TransformedEnv(SerialEnv(2, make_env), make_transform()))
    check_env_specs(SerialEnv(2, lambda: TransformedEnv(make_env(), make_transform())))


# ---------------------------------------------------------------------- auto-reset
class AutoCountingEnv(EnvBase):
    """Counts to ``max_count`` then resets itself inside ``_step`` (the seed's
    auto-resetting env): the done step returns the new episode's first observations.
    Component ``i`` of a batch counts to ``max_count + i``. Emits a float ``"count"``, an
    integer ``"steps"`` (steps since the env was built) and a boolean ``"even"``."""

    def __init__(self, max_count: int = 4, batch_size=(), **kwargs):
        super().__init__(batch_size=batch_size, **kwargs)
        b = tuple(batch_size)
        self.max_count = max_count
        self.observation_spec = Composite(
            count=Unbounded(shape=(*b, 1)),
            steps=Unbounded(shape=(*b, 1), dtype=torch.int64),
            even=Unbounded(shape=(*b, 1), dtype=torch.bool),
            shape=b,
        )
        self.action_spec = Unbounded(shape=(*b, 1))
        self.limit = self.max_count + torch.arange(b[0] if b else 1).reshape(*b, 1)
        self.count = torch.zeros(*b, 1)
        self.steps = torch.zeros(*b, 1, dtype=torch.int64)
        self.base_resets = 0

    def _obs(self):
        return TensorDict(
            {"count": self.count.clone(), "steps": self.steps.clone(), "even": self.count % 2 == 0}, self.batch_size
        )

    def _reset(self, tensordict):
        if tensordict is not None and "_reset" in tensordict.keys():
            return tensordict.copy()  # as the seed's env: the stash is already in the input
        self.base_resets += 1
        self.count = torch.zeros_like(self.count)
        return self._obs()

    def _step(self, tensordict):
        self.count = self.count + 1
        self.steps = self.steps + 1
        done = self.count >= self.limit
        self.count = torch.where(done, 0.0, self.count)
        out = self._obs()
        out["reward"] = torch.ones(*self.batch_size, 1)
        out["done"] = done
        return out


def _rollout(env, steps=10):
    env.set_seed(0)
    return env.rollout(steps, break_when_any_done=False)


def test_auto_reset_env_values_match_the_seed_semantics():
    base = AutoCountingEnv(max_count=4)
    env = AutoResetEnv(base)
    data = _rollout(env)
    nan = float("nan")
    torch.testing.assert_close(
        data["next", "count"].squeeze(-1), torch.tensor([1.0, 2, 3, nan, 1, 2, 3, nan, 1, 2]), equal_nan=True
    )
    assert data["count"].squeeze(-1).tolist() == [0.0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    assert data["next", "done"].squeeze(-1).nonzero().squeeze(-1).tolist() == [3, 7]
    assert not bool(data["done"].any())  # the episodes start undone
    assert data["next", "steps"].squeeze(-1).tolist() == [1, 2, 3, -1, 5, 6, 7, -1, 9, 10]  # fill_int
    assert data["next", "even"].squeeze(-1).tolist()[3] is False  # fill_bool
    assert data["steps"].squeeze(-1).tolist()[4] == 4  # the stash: the env's own first observation
    assert base.base_resets == 1  # only the rollout's first reset reached the base env
    # a full reset resets the base env and drops the stash
    env.reset()
    assert base.base_resets == 2 and env.auto_reset_transform._stash is None


def test_auto_reset_transform_consistent_with_env_base_auto_reset():
    native = _rollout(AutoCountingEnv(max_count=3, auto_reset=True, auto_reset_replace=True), 9)
    transformed = _rollout(AutoResetEnv(AutoCountingEnv(max_count=3), AutoResetTransform(fill_int=0)), 9)
    assert set(native.keys(True, True)) == set(transformed.keys(True, True))
    for key in native.keys(True, True):
        torch.testing.assert_close(native[key], transformed[key], equal_nan=True, msg=str(key))
    # without replacement, the done steps hold the new episode's first observations, as in EnvBase
    native = _rollout(AutoCountingEnv(max_count=3, auto_reset=True, auto_reset_replace=False), 9)
    transformed = _rollout(AutoResetEnv(AutoCountingEnv(max_count=3), AutoResetTransform(replace=False)), 9)
    for key in native.keys(True, True):
        assert torch.equal(native[key], transformed[key]), key
    assert transformed["next", "count"].squeeze(-1).tolist()[2] == 0.0


def test_auto_reset_batched_partial_and_with_more_transforms():
    env = AutoResetEnv(AutoCountingEnv(max_count=2, batch_size=(2,)), AutoResetTransform(fill_float=-5.0))
    data = _rollout(env, 6)
    # component 0 is done every 2 steps, component 1 every 3
    assert data["next", "count"][0].squeeze(-1).tolist() == [1.0, -5.0, 1.0, -5.0, 1.0, -5.0]
    assert data["next", "count"][1].squeeze(-1).tolist() == [1.0, 2.0, -5.0, 1.0, 2.0, -5.0]
    assert data["count"][1].squeeze(-1).tolist() == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
    assert env.base_env.base_resets == 1
    # later transforms see the reset as a reset (RewardSum restarts its sum)
    env = AutoResetEnv(AutoCountingEnv(max_count=3), AutoResetTransform())
    env.append_transform(RewardSum())
    data = _rollout(env, 7)
    assert data["next", "episode_reward"].squeeze(-1).tolist() == [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0]
    with pytest.raises(ValueError, match="must stay the first"):
        env.insert_transform(0, RewardSum(out_keys=["other"]))
    with pytest.raises(ValueError, match="first transform must be an AutoResetTransform"):
        AutoResetEnv(AutoCountingEnv(), RewardSum())


def test_auto_reset_specs():
    make_env = lambda: AutoCountingEnv(max_count=2)
    check_env_specs(AutoResetEnv(make_env()))
    check_env_specs(AutoResetEnv(SerialEnv(2, make_env)))
    check_env_specs(SerialEnv(2, lambda: AutoResetEnv(make_env())))
    check_env_specs(AutoResetEnv(AutoCountingEnv(max_count=2, batch_size=(3,))))
    with pytest.raises(ValueError, match="fill_float"):
        AutoResetTransform(fill_float="zero")


# ---------------------------------------------------------------------- RemoveEmptySpecs
class EmptyEntriesEnv(CountingEnv):
    """A CountingEnv whose observations also hold empty sub-tensordicts (one nested beside a leaf)."""

    def __init__(self, batch_size=()):
        super().__init__(max_count=100, batch_size=batch_size)
        b = tuple(batch_size)
        self.observation_spec = Composite(
            count=Unbounded(shape=(*b, 1)),
            empty=Composite(shape=b),
            group=Composite(inner=Composite(deeper=Composite(shape=b), shape=b), val=Unbounded(shape=(*b, 1)), shape=b),
            shape=b,
        )
        self.full_state_spec = Composite(hidden=Composite(shape=b), shape=b)

    def _extra(self, out):
        b = self.batch_size
        out["empty"] = TensorDict({}, b)
        out["group"] = TensorDict({"inner": TensorDict({"deeper": TensorDict({}, b)}, b), "val": self.count.clone()}, b)
        return out

    def _reset(self, tensordict):
        return self._extra(super()._reset(tensordict))

    def _step(self, tensordict):
        return self._extra(super()._step(tensordict))


def test_remove_empty_specs():
    env = TransformedEnv(EmptyEntriesEnv(), RemoveEmptySpecs())
    assert list(env.observation_spec.keys(True)) == ["count", "group", ("group", "val")]
    assert list(env.full_state_spec.keys()) == []
    assert "empty" in env.base_env.observation_spec.keys()  # the base env's specs are kept
    data = env.rollout(3)
    assert "empty" not in data.keys() and "empty" not in data["next"].keys()
    assert list(data["next", "group"].keys()) == ["val"]
    assert data["next", "group", "val"].squeeze(-1).tolist() == [1.0, 2.0, 3.0]
    assert "empty" not in env.reset().keys()
    _all_spec_checks(RemoveEmptySpecs, EmptyEntriesEnv)
    # nothing to remove: a no-op
    check_env_specs(TransformedEnv(CountingEnv(), RemoveEmptySpecs()))


# ---------------------------------------------------------------------- DeviceCastTransform
def test_device_cast_cpu():
    env = TransformedEnv(CountingEnv(max_count=100), DeviceCastTransform("cpu"))
    assert env.transform[0].orig_device is None or env.transform[0].orig_device == torch.device("cpu")
    assert env.observation_spec["count"].device == torch.device("cpu")
    data = env.rollout(3)
    assert data["next", "count"].device == torch.device("cpu")
    assert data["next", "count"].squeeze(-1).tolist() == [1.0, 2.0, 3.0]
    assert env.reset()["count"].device == torch.device("cpu")
    _all_spec_checks(lambda: DeviceCastTransform("cpu"))
    keyed = lambda: DeviceCastTransform("cpu", "cpu", in_keys=["count"], in_keys_inv=["action"])
    env = TransformedEnv(CountingEnv(max_count=100), keyed())
    assert env.rollout(2)["next", "count"].device == torch.device("cpu")
    _all_spec_checks(keyed)
    renamed = TransformedEnv(
        CountingEnv(max_count=100),
        DeviceCastTransform("cpu", "cpu", in_keys=["count"], out_keys=["count_dev"], in_keys_inv=["action"],
                            out_keys_inv=["action_dev"]),
    )
    assert env.base_env.observation_spec["count"].device == torch.device("cpu")
    assert "count_dev" in renamed.observation_spec.keys() and renamed.action_key == "action_dev"
    check_env_specs(renamed)
    assert renamed.rollout(2)["next", "count_dev"].squeeze(-1).tolist() == [1.0, 2.0]
    # a bare call on device-less data
    bare = TensorDict({"x": torch.zeros(1)}, [])
    assert DeviceCastTransform("cpu", in_keys=["x"])(bare)["x"].device == torch.device("cpu")
