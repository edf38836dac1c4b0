"""Action transforms: masks, projections, discretisation (values, specs, resets)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Bounded, Categorical, Composite, MultiCategorical, MultiOneHot, OneHot, Unbounded
from cadence.envs import EnvBase, GymEnv, SerialEnv, check_env_specs
from cadence.envs.transforms import TransformedEnv
from cadence.envs.transforms.actions import ActionDiscretizer, ActionMask, DiscreteActionProjection
from tests.fakes import CountingEnv


class MaskedEnv(EnvBase):
    """A discrete-action env whose allowed actions change at every step.

    ``mode="grow"``: after ``c`` steps, actions ``0..c`` are allowed (all from ``n - 1``
    steps on), so every earlier action stays allowed. ``mode="shift"``: actions
    ``c % n`` and ``(c + 1) % n`` are allowed. Counts the actions it got that its last
    mask did not allow in ``violations``.
    """

    def __init__(self, n: int = 4, mode: str = "grow", max_count: int = 100, batch_size=(), one_hot: bool = False):
        super().__init__(batch_size=batch_size)
        self.n, self.mode, self.max_count, self.one_hot = n, mode, max_count, one_hot
        b = tuple(batch_size)
        self.observation_spec = Composite(
            action_mask=Categorical(2, shape=(*b, n), dtype=torch.bool), count=Unbounded(shape=(*b, 1)), shape=b
        )
        self.action_spec = OneHot(n, shape=(*b, n)) if one_hot else Categorical(n, shape=b)
        self.count = torch.zeros(*b, 1)
        self.violations = 0

    def _mask(self) -> torch.Tensor:
        c = self.count.long()
        arange = torch.arange(self.n).expand(*self.batch_size, self.n)
        if self.mode == "grow":
            return arange <= c
        return (arange == c % self.n) | (arange == (c + 1) % self.n)

    def _out(self) -> TensorDict:
        return TensorDict({"action_mask": self._mask(), "count": self.count.clone()}, self.batch_size)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        reset = None if tensordict is None else tensordict.get("_reset", None)
        self.count = torch.zeros_like(self.count) if reset is None else torch.where(reset, 0.0, self.count)
        return self._out()

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict["action"]
        index = action.long().argmax(-1) if self.one_hot else action
        allowed = self._mask().gather(-1, index.unsqueeze(-1))
        self.violations += int((~allowed).sum())
        self.count = self.count + 1
        out = self._out()
        out["reward"] = torch.zeros(*self.batch_size, 1)
        out["done"] = self.count >= self.max_count
        return out


def _all_spec_checks(make_transform, make_env):
    check_env_specs(TransformedEnv(make_env(), make_transform()))
    check_env_specs(TransformedEnv(SerialEnv(2, make_env), make_transform()))
    check_env_specs(SerialEnv(2, lambda: TransformedEnv(make_env(), make_transform())))


# ---------------------------------------------------------------------- ActionMask
def test_action_mask_seed_example_draws_only_allowed_actions():
    your_base_env = MaskedEnv(mode="shift", max_count=7)
    env = TransformedEnv(
        your_base_env,
        ActionMask(action_key="action", mask_key="action_mask"),
    )
    env.set_seed(0)
    data = env.rollout(60, break_when_any_done=False)
    allowed = data["action_mask"].gather(-1, data["action"].unsqueeze(-1))
    assert bool(allowed.all()) and your_base_env.violations == 0
    assert data["action"].unique().numel() == 4  # the mask moves: every action is drawn at some point
    # the spec holds the last mask the env emitted
    assert torch.equal(env.action_spec.mask, data["next", "action_mask"][-1])
    # without the transform, random actions ignore the mask
    bare = MaskedEnv(mode="shift", max_count=7)
    bare.set_seed(0)
    bare.rollout(60, break_when_any_done=False)
    assert bare.violations > 0


def test_action_mask_reset_and_partial_reset():
    env = TransformedEnv(MaskedEnv(mode="grow", batch_size=(2,)), ActionMask())
    data = env.reset()
    assert env.action_spec.mask.tolist() == [[True, False, False, False]] * 2
    for _ in range(2):
        data = env.step(env.rand_action(data))
        data = env._step_mdp(data)
    assert env.action_spec.mask.tolist() == [[True, True, True, False]] * 2
    data["_reset"] = torch.tensor([[True], [False]])
    env.reset(data)
    assert env.action_spec.mask.tolist() == [[True, False, False, False], [True, True, True, False]]
    env.reset()
    assert env.action_spec.mask.tolist() == [[True, False, False, False]] * 2
    # the batched rollout draws allowed actions only, across the auto-resets of done components
    env = TransformedEnv(MaskedEnv(mode="shift", batch_size=(3,), max_count=5), ActionMask())
    data = env.rollout(20, break_when_any_done=False)
    assert bool(data["action_mask"].gather(-1, data["action"].unsqueeze(-1)).all())
    assert env.base_env.violations == 0


def test_action_mask_one_hot_and_specs():
    env = TransformedEnv(MaskedEnv(mode="shift", one_hot=True, max_count=6), ActionMask())
    data = env.rollout(30, break_when_any_done=False)
    assert bool((data["action"] & ~data["action_mask"]).any()) is False and env.base_env.violations == 0
    _all_spec_checks(ActionMask, lambda: MaskedEnv(mode="grow", max_count=3))
    _all_spec_checks(ActionMask, lambda: MaskedEnv(mode="grow", one_hot=True, max_count=100))


def test_action_mask_errors():
    continuous = MaskedEnv()
    continuous.action_spec = Bounded(-1.0, 1.0, shape=(1,))
    with pytest.raises(TypeError, match="ActionMask: the action 'action' must have a Categorical or OneHot spec"):
        TransformedEnv(continuous, ActionMask())
    with pytest.raises(KeyError, match="ActionMask reads the mask 'nope'"):
        TransformedEnv(MaskedEnv(), ActionMask(mask_key="nope"))
    with pytest.raises(TypeError, match="must be boolean"):
        TransformedEnv(MaskedEnv(), ActionMask(mask_key="count"))
    with pytest.raises(KeyError, match="no action 'move'"):
        TransformedEnv(MaskedEnv(), ActionMask(action_key="move"))
    with pytest.raises(RuntimeError, match="outside an env"):
        ActionMask()(TensorDict({"action_mask": torch.ones(4, dtype=torch.bool)}, []))


# ---------------------------------------------------------------------- DiscreteActionProjection
class EchoEnv(EnvBase):
    """Emits the index of the action it received (an observation ``"got"``)."""

    def __init__(self, action_spec, batch_size=()):
        super().__init__(batch_size=batch_size)
        self.observation_spec = Composite(got=Unbounded(shape=(*batch_size, 1), dtype=torch.int64), shape=batch_size)
        self.action_spec = action_spec
        self.one_hot = isinstance(action_spec, OneHot)

    def _reset(self, tensordict):
        return TensorDict({"got": torch.zeros(*self.batch_size, 1, dtype=torch.int64)}, self.batch_size)

    def _step(self, tensordict):
        action = tensordict["action"]
        index = action.long().argmax(-1) if self.one_hot else action.long()
        return TensorDict(
            {"got": index.unsqueeze(-1), "reward": torch.zeros(*self.batch_size, 1),
             "done": torch.zeros(*self.batch_size, 1, dtype=torch.bool)},
            self.batch_size,
        )


def _echo(one_hot=True, batch_size=()):
    spec = OneHot(3, shape=(*batch_size, 3)) if one_hot else Categorical(3, shape=batch_size)
    return EchoEnv(spec, batch_size)


def test_discrete_action_projection_values_and_specs():
    env = TransformedEnv(_echo(), DiscreteActionProjection(3, 7))
    assert isinstance(env.action_spec, OneHot) and env.action_spec.shape == (7,)
    assert env.base_env.action_spec.shape == (3,)  # the base env's spec is untouched
    data = env.reset()
    for index in range(3):  # actions in range are kept
        out = env.step(data.clone().set("action", torch.nn.functional.one_hot(torch.tensor(index), 7).bool()))
        assert out["next", "got"].item() == index and out["action"].shape == (7,)
    # the actions beyond num_actions_effective are random ones, repeatable with the env's seed
    def beyond(seed):
        env.set_seed(seed)
        got = [env.step(data.clone().set("action", torch.nn.functional.one_hot(torch.tensor(5), 7).bool()))["next", "got"].item()
               for _ in range(40)]
        return got
    first = beyond(1)
    assert set(first) == {0, 1, 2} and first == beyond(1)
    # forward pads the env's one-hot actions to max_actions (replay-buffer data)
    padded = env.transform[0](TensorDict({"action": torch.tensor([False, True, False])}, []))
    assert padded["action"].long().tolist() == [0, 1, 0, 0, 0, 0, 0]
    no_fwd = DiscreteActionProjection(3, 7, include_forward=False)
    assert no_fwd(TensorDict({"action": torch.tensor([False, True, False])}, []))["action"].long().tolist() == [0, 1, 0]
    _all_spec_checks(lambda: DiscreteActionProjection(3, 7), _echo)


def test_discrete_action_projection_categorical_and_batched():
    env = TransformedEnv(_echo(one_hot=False, batch_size=(4,)), DiscreteActionProjection(3, 5))
    assert isinstance(env.action_spec, Categorical) and env.action_spec.n == 5 and env.action_spec.shape == (4,)
    out = env.step(env.reset().set("action", torch.tensor([0, 2, 4, 3])))
    got = out["next", "got"].squeeze(-1)
    assert got[:2].tolist() == [0, 2] and bool((got[2:] < 3).all())
    _all_spec_checks(lambda: DiscreteActionProjection(3, 5), lambda: _echo(one_hot=False))


def test_discrete_action_projection_errors():
    with pytest.raises(ValueError, match="num_actions_effective <= max_actions"):
        DiscreteActionProjection(5, 3)
    with pytest.raises(ValueError, match="has 3 categories, but num_actions_effective=2"):
        TransformedEnv(_echo(), DiscreteActionProjection(2, 4))
    with pytest.raises(TypeError, match="OneHot or Categorical"):
        TransformedEnv(CountingEnv(), DiscreteActionProjection(2, 4))
    env = TransformedEnv(_echo(one_hot=False), DiscreteActionProjection(3, 5))
    with pytest.raises(ValueError, match=r"must lie in \[0, 5\)"):
        env.step(env.reset().set("action", torch.tensor(9)))


# ---------------------------------------------------------------------- ActionDiscretizer
class BoxEnv(EnvBase):
    """A 2-d continuous action in [-1, 1] x [0, 4], emitted back as the observation ``"x"``."""

    def __init__(self, batch_size=()):
        super().__init__(batch_size=batch_size)
        b = tuple(batch_size)
        self.observation_spec = Composite(x=Unbounded(shape=(*b, 2)), shape=b)
        self.action_spec = Bounded(torch.tensor([-1.0, 0.0]).expand(*b, 2), torch.tensor([1.0, 4.0]).expand(*b, 2))

    def _reset(self, tensordict):
        return TensorDict({"x": torch.zeros(*self.batch_size, 2)}, self.batch_size)

    def _step(self, tensordict):
        return TensorDict(
            {"x": tensordict["action"].clone(), "reward": torch.zeros(*self.batch_size, 1),
             "done": torch.zeros(*self.batch_size, 1, dtype=torch.bool)},
            self.batch_size,
        )


def _act(env, action):
    action = torch.as_tensor(action).to(env.full_action_spec[env.action_key].dtype)
    return env.step(env.reset().set(env.action_key, action))["next", "x"].tolist()


@pytest.mark.parametrize(
    "sampling,expected",
    [(None, [[-0.75, 0.5], [0.75, 3.5]]), ("median", [[-0.75, 0.5], [0.75, 3.5]]),
     ("low", [[-1.0, 0.0], [0.5, 3.0]]), ("high", [[-0.5, 1.0], [1.0, 4.0]])],
)
def test_action_discretizer_bin_values(sampling, expected):
    env = TransformedEnv(BoxEnv(), ActionDiscretizer(4, sampling=sampling))
    assert isinstance(env.action_spec, Categorical) and env.action_spec.n == 4 and env.action_spec.shape == (2,)
    assert _act(env, [0, 0]) == pytest.approx(expected[0]) and _act(env, [3, 3]) == pytest.approx(expected[1])


def test_action_discretizer_random_sampling_stays_in_bin():
    env = TransformedEnv(BoxEnv(), ActionDiscretizer(4, sampling="random"))
    env.set_seed(0)
    values = torch.tensor([_act(env, [1, 2]) for _ in range(30)])
    assert bool(((values[:, 0] >= -0.5) & (values[:, 0] <= 0.0)).all())
    assert bool(((values[:, 1] >= 2.0) & (values[:, 1] <= 3.0)).all())
    assert values[:, 0].unique().numel() > 1
    env.set_seed(0)
    assert torch.equal(torch.tensor([_act(env, [1, 2]) for _ in range(30)]), values)


def test_action_discretizer_spec_kinds_and_keys():
    multi = TransformedEnv(BoxEnv(), ActionDiscretizer([2, 4]))
    assert isinstance(multi.action_spec, MultiCategorical) and multi.action_spec.nvec.tolist() == [2, 4]
    assert _act(multi, [1, 1]) == pytest.approx([0.5, 1.5])
    one_hot = TransformedEnv(BoxEnv(), ActionDiscretizer(4, categorical=False))
    assert isinstance(one_hot.action_spec, OneHot) and one_hot.action_spec.shape == (2, 4)
    assert _act(one_hot, [[0, 0, 1, 0], [0, 1, 0, 0]]) == pytest.approx([0.25, 1.5])
    multi_hot = TransformedEnv(BoxEnv(), ActionDiscretizer([2, 4], categorical=False))
    assert isinstance(multi_hot.action_spec, MultiOneHot) and multi_hot.action_spec.shape == (6,)
    assert _act(multi_hot, [1, 0, 0, 0, 0, 1]) == pytest.approx([-0.5, 3.5])
    renamed = TransformedEnv(BoxEnv(), ActionDiscretizer(4, out_action_key="bin"))
    assert renamed.action_keys == ["bin"]
    data = renamed.rollout(2)
    assert "bin" in data.keys() and "action" not in data.keys() and data["bin"].dtype == torch.int64
    for make in (
        lambda: ActionDiscretizer(4),
        lambda: ActionDiscretizer([2, 4]),
        lambda: ActionDiscretizer(3, categorical=False),
        lambda: ActionDiscretizer([2, 3], categorical=False),
        lambda: ActionDiscretizer(4, out_action_key="bin", sampling="random"),
    ):
        _all_spec_checks(make, BoxEnv)
    batched = TransformedEnv(BoxEnv(batch_size=(3,)), ActionDiscretizer(4, sampling="low"))
    assert batched.action_spec.shape == (3, 2)
    got = torch.tensor(_act(batched, [[0, 0], [1, 1], [3, 3]]))
    torch.testing.assert_close(got, torch.tensor([[-1.0, 0.0], [-0.5, 1.0], [0.5, 3.0]]))
    pendulum = TransformedEnv(GymEnv("Pendulum-v1"), ActionDiscretizer(5))
    check_env_specs(pendulum)
    assert pendulum.rollout(3)["action"].dtype == torch.int64


def test_action_discretizer_errors():
    with pytest.raises(ValueError, match="sampling must be one of"):
        ActionDiscretizer(4, sampling="mode")
    with pytest.raises(ValueError, match="positive int"):
        ActionDiscretizer(0)
    with pytest.raises(TypeError, match="floating Bounded spec"):
        TransformedEnv(_echo(), ActionDiscretizer(4))
    with pytest.raises(ValueError, match="3 numbers of intervals"):
        TransformedEnv(BoxEnv(), ActionDiscretizer([2, 3, 4]))
    env = TransformedEnv(BoxEnv(), ActionDiscretizer(4))
    with pytest.raises(ValueError, match=r"bin indices in \[0, num_intervals\)"):
        _act(env, [0, 4])
