"""CatFrames: values on known frames, specs, full and partial resets, trajectories
(replay-style batches), the inverse path, the rollout shortcut and errors."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Bounded, Composite
from cadence.envs import GymEnv, ParallelEnv, SerialEnv, check_env_specs
from cadence.envs.transforms import Compose, RewardSum, StepCounter, TransformedEnv
from cadence.envs.transforms.cat_frames import CatFrames
from cadence.envs.values_loop import ValuesLoop
from tests.fakes import CountingEnv, MultiLevelZerosEnv, assert_same_rollout


class PixelEnv(CountingEnv):
    """A CountingEnv that also shows its count as a uint8 image ``[1, 2, 2]`` at ``"pixels"``
    (bounds [1, 255]: a padding of 0 lies outside them)."""

    def __init__(self, max_count: int = 5, batch_size: tuple[int, ...] = ()) -> None:
        super().__init__(max_count=max_count, batch_size=batch_size)
        self.observation_spec = Composite(
            count=self.observation_spec["count"],
            pixels=Bounded(1, 255, shape=(*batch_size, 1, 2, 2), dtype=torch.uint8),
            shape=batch_size,
        )

    def _image(self) -> torch.Tensor:
        return (self.count + 1).to(torch.uint8).reshape(*self.batch_size, 1, 1, 1).expand(*self.batch_size, 1, 2, 2)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        out = super()._reset(tensordict)
        out.set("pixels", self._image().clone())
        return out

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        out = super()._step(tensordict)
        out.set("pixels", self._image().clone())
        return out


def _expected_stacks(frames: list[float], starts: list[bool], n: int, padding: str, value: float) -> list[list[float]]:
    """Reference stacks of 1-d frames, built one step at a time."""
    stacks, stack = [], []
    for frame, start in zip(frames, starts):
        if start:
            stack = [frame if padding == "same" else value] * (n - 1) + [frame]
        else:
            stack = stack[1:] + [frame]
        stacks.append(list(stack))
    return stacks


def _check_all_specs(make_transform, make_env=lambda: CountingEnv(max_count=4)) -> None:
    check_env_specs(TransformedEnv(make_env(), make_transform()))
    check_env_specs(TransformedEnv(SerialEnv(2, make_env), make_transform()))
    check_env_specs(SerialEnv(2, lambda: TransformedEnv(make_env(), make_transform())))


def _step_by_step(env, max_steps, **kwargs):
    """The generic loop: a callback keeps any rollout off its shortcut."""
    return env.rollout(max_steps, callback=lambda env, data: None, **kwargs)


# ---------------------------------------------------------------- env values
@pytest.mark.parametrize("padding,value", [("same", 0.0), ("constant", -1.0)])
def test_stacks_over_episodes(padding: str, value: float) -> None:
    env = TransformedEnv(CountingEnv(max_count=3), CatFrames(3, -1, in_keys=["count"], padding=padding,
                                                             padding_value=value))
    data = _step_by_step(env, 7, break_when_any_done=False)
    # the count goes 0 (reset), 1, 2, 3 (done), then restarts
    roots = [0, 1, 2, 0, 1, 2, 0]
    root_starts = [True, False, False, True, False, False, True]
    assert data["count"].tolist() == _expected_stacks(roots, root_starts, 3, padding, value)
    nexts = [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]  # the reset frames with the steps' frames between them
    starts = [True, False, False, False] * 2 + [True, False]
    expected_next = _expected_stacks(nexts, starts, 3, padding, value)
    assert data["next", "count"].tolist() == [s for s, f in zip(expected_next, starts) if not f]
    assert data["count"].shape == (7, 3) and data["count"].dtype == torch.float32


def test_out_keys_keep_the_frames_and_images_stack_on_channels() -> None:
    env = TransformedEnv(CountingEnv(max_count=10), CatFrames(2, -1, in_keys=["count"], out_keys=["stack"]))
    data = env.rollout(2)
    assert data["next", "count"].squeeze(-1).tolist() == [1.0, 2.0]
    assert data["next", "stack"].tolist() == [[0.0, 1.0], [1.0, 2.0]]
    assert "stack" in env.full_state_spec.keys() and "count" not in env.full_state_spec.keys()
    pixels = TransformedEnv(PixelEnv(max_count=10), CatFrames(4, -3))  # in_keys default to "pixels"
    assert pixels.full_observation_spec["pixels"].shape == (4, 2, 2)
    data = pixels.rollout(2)
    assert data["next", "pixels"].shape == (2, 4, 2, 2) and data["next", "pixels"].dtype == torch.uint8
    assert data["next", "pixels"][1, :, 0, 0].tolist() == [1, 1, 2, 3]


def test_specs_single_batched_and_inside_workers() -> None:
    _check_all_specs(lambda: CatFrames(3, -1, in_keys=["count"]))
    _check_all_specs(lambda: CatFrames(2, -2, padding="constant"), lambda: PixelEnv(max_count=4))
    make = lambda: TransformedEnv(PixelEnv(max_count=3), CatFrames(3, -3, padding="constant"))  # noqa: E731
    with ParallelEnv(2, make) as env:
        check_env_specs(env)
        data = env.rollout(4, break_when_any_done=False)
    assert data["next", "pixels"][0, :, :, 0, 0].tolist() == [[0, 1, 2], [1, 2, 3], [2, 3, 4], [0, 1, 2]]
    assert data["pixels"][0, :, :, 0, 0].tolist() == [[0, 0, 1], [0, 1, 2], [1, 2, 3], [0, 0, 1]]


def test_constant_padding_widens_bounded_specs() -> None:
    spec = TransformedEnv(PixelEnv(), CatFrames(3, -3, padding="constant")).full_observation_spec["pixels"]
    assert spec.low[:, 0, 0].tolist() == [0, 0, 1] and spec.high[:, 0, 0].tolist() == [255, 255, 255]
    spec = TransformedEnv(PixelEnv(), CatFrames(3, -3)).full_observation_spec["pixels"]
    assert spec.low[:, 0, 0].tolist() == [1, 1, 1]


def test_full_and_partial_resets_of_a_batch() -> None:
    for base in (SerialEnv(3, lambda: CountingEnv(max_count=100)), CountingEnv(max_count=100, batch_size=(3,))):
        env = TransformedEnv(base, CatFrames(3, -1, in_keys=["count"]))
        data = env.reset()
        for _ in range(2):
            data = env._step_mdp(env.step(env.rand_action(data)))
        assert data["count"].tolist() == [[0.0, 1.0, 2.0]] * 3
        data["_reset"] = torch.tensor([[True], [False], [True]])
        out = env.reset(data)
        assert out["count"].tolist() == [[0.0, 0.0, 0.0], [0.0, 1.0, 2.0], [0.0, 0.0, 0.0]]
        out = env.step(env.rand_action(out))["next"]
        assert out["count"].tolist() == [[0.0, 0.0, 1.0], [1.0, 2.0, 3.0], [0.0, 0.0, 1.0]]
        assert env.reset()["count"].tolist() == [[0.0, 0.0, 0.0]] * 3


def test_batched_rollouts_restart_each_component_on_its_own() -> None:
    base = SerialEnv(2, [lambda: CountingEnv(max_count=2), lambda: CountingEnv(max_count=3)])
    env = TransformedEnv(base, CatFrames(2, -1, in_keys=["count"], padding="constant", padding_value=9))
    data = env.rollout(5, break_when_any_done=False)
    assert data["count"][0].tolist() == [[9, 0], [0, 1], [9, 0], [0, 1], [9, 0]]
    assert data["count"][1].tolist() == [[9, 0], [0, 1], [1, 2], [9, 0], [0, 1]]


def test_clones_share_no_stacks() -> None:
    transform = CatFrames(2, -1, in_keys=["count"])
    first = TransformedEnv(CountingEnv(max_count=100), transform)
    second = TransformedEnv(CountingEnv(max_count=100), transform.clone())
    first.rollout(3)
    assert second.rollout(1)["next", "count"].tolist() == [[0.0, 1.0]]
    # a step from an input without a stack starts one
    out = first.step(TensorDict({"action": torch.zeros(1)}, []))["next"]
    assert out["count"].tolist() == [float(out["count"][1])] * 2


# ---------------------------------------------------------------- trajectories
def _replay_batch() -> TensorDict:
    """Two rows of 6 steps of 1-d frames; row 0 holds two episodes (the second starts at
    t = 3, after a done step), row 1 starts mid-episode."""
    obs = torch.tensor([[10, 11, 12, 20, 21, 22], [30, 31, 32, 33, 34, 35]], dtype=torch.float32)
    nxt = torch.tensor([[11, 12, 13, 21, 22, 23], [31, 32, 33, 34, 35, 36]], dtype=torch.float32)
    done = torch.zeros(2, 6, 1, dtype=torch.bool)
    done[0, 2] = True
    return TensorDict({"obs": obs.unsqueeze(-1), ("next", "obs"): nxt.unsqueeze(-1), ("next", "done"): done}, [2, 6])


@pytest.mark.parametrize("padding,value", [("same", 0.0), ("constant", -1.0)])
def test_replay_batch_with_two_episodes_in_a_row(padding: str, value: float) -> None:
    data = CatFrames(3, -1, in_keys=["obs"], padding=padding, padding_value=value)(_replay_batch())
    p = value if padding == "constant" else None
    first, second = (10, 20)
    pad1, pad2, pad3 = (p, p, p) if p is not None else (first, second, 30)
    assert data["obs"][0].tolist() == [
        [pad1, pad1, 10], [pad1, 10, 11], [10, 11, 12], [pad2, pad2, 20], [pad2, 20, 21], [20, 21, 22]
    ]
    assert data["next", "obs"][0].tolist() == [
        [pad1, 10, 11], [10, 11, 12], [11, 12, 13], [pad2, 20, 21], [20, 21, 22], [21, 22, 23]
    ]
    assert data["obs"][1, :2].tolist() == [[pad3, pad3, 30], [pad3, 30, 31]]
    assert data["next", "obs"][1, -1].tolist() == [34, 35, 36]


@pytest.mark.parametrize("padding", ["same", "constant"])
def test_trajectories_give_the_env_stacks(padding: str) -> None:
    # stacking a raw rollout afterwards gives what the transformed env emits
    make = lambda t=None: TransformedEnv(  # noqa: E731
        SerialEnv(2, [lambda: PixelEnv(max_count=3), lambda: PixelEnv(max_count=4)]), t
    )
    raw = make().rollout(9, break_when_any_done=False)
    stacked = make(CatFrames(3, -3, padding=padding, padding_value=7)).rollout(9, break_when_any_done=False)
    out = CatFrames(3, -3, padding=padding, padding_value=7)(raw.clone())
    assert torch.equal(out["pixels"], stacked["pixels"])
    assert torch.equal(out["next", "pixels"], stacked["next", "pixels"])


def test_is_init_starts_an_episode() -> None:
    data = _replay_batch()
    data["is_init"] = torch.zeros(2, 6, 1, dtype=torch.bool)
    data["is_init"][1, 4] = True
    out = CatFrames(2, -1, in_keys=["obs"])(data)
    assert out["obs"][1].tolist() == [[30, 30], [30, 31], [31, 32], [32, 33], [34, 34], [34, 35]]
    assert out["next", "obs"][1, 4].tolist() == [34, 35]


def test_custom_done_key_and_root_only_data() -> None:
    data = _replay_batch()
    data["next", "end"] = data["next"].pop("done")
    data["next", "done"] = torch.zeros(2, 6, 1, dtype=torch.bool)
    out = CatFrames(2, -1, in_keys=["obs"], done_key="end")(data.clone())
    assert out["obs"][0, 3].tolist() == [20, 20]
    assert CatFrames(2, -1, in_keys=["obs"])(data.clone())["obs"][0, 3].tolist() == [12, 20]
    root_only = TensorDict({"obs": torch.arange(3.0).reshape(1, 3, 1)}, [1, 3])
    assert CatFrames(2, -1, in_keys=["obs"])(root_only)["obs"][0].tolist() == [[0, 0], [0, 1], [1, 2]]


def test_as_inverse_stacks_on_the_inverse_path() -> None:
    transform = CatFrames(2, -1, in_keys=["obs"], as_inverse=True)
    data = _replay_batch()
    assert transform(data.clone())["obs"].shape == (2, 6, 1)
    assert transform.inv(data.clone())["obs"][0, :2].tolist() == [[10, 10], [10, 11]]
    assert CatFrames(2, -1, in_keys=["obs"]).inv(data.clone())["obs"].shape == (2, 6, 1)
    with pytest.raises(ValueError, match="as_inverse"):
        TransformedEnv(CountingEnv(), CatFrames(2, -1, in_keys=["count"], as_inverse=True))


# ---------------------------------------------------------------- rollout shortcut
SHORTCUT_CASES = {
    "counting-same": (lambda: CountingEnv(max_count=4, batch_size=(2,)), lambda: CatFrames(3, -1, in_keys=["count"])),
    "pixels-constant": (
        lambda: PixelEnv(max_count=5),
        lambda: Compose(StepCounter(3), CatFrames(4, -3, padding="constant", padding_value=9), RewardSum()),
    ),
    "gym-out-key": (
        lambda: GymEnv("Pendulum-v1"),
        lambda: CatFrames(2, -1, in_keys=["observation"], out_keys=["stack"], padding="constant"),
    ),
}


@pytest.mark.parametrize("case", SHORTCUT_CASES)
def test_rollout_shortcut_gives_the_step_by_step_data(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    make_base, make_transform = SHORTCUT_CASES[case]
    fast_env, slow_env = (TransformedEnv(make_base(), make_transform()) for _ in range(2))
    # a kernel that steps into arrays takes stretches; envs written in torch step one by one
    takes_stretches = ValuesLoop(fast_env).takes_stretches
    assert takes_stretches == (case == "gym-out-key")
    stretches = []
    over_time = CatFrames._step_over_time

    def counted(self, tensordict, next_steps):
        stretches.append(next_steps.batch_size)
        return over_time(self, tensordict, next_steps)

    monkeypatch.setattr(CatFrames, "_step_over_time", counted)
    fast_env.set_seed(5)
    slow_env.set_seed(5)
    fast = fast_env.rollout(11, break_when_any_done=False)
    assert bool(stretches) == takes_stretches
    assert_same_rollout(fast, _step_by_step(slow_env, 11, break_when_any_done=False))
    # from a given input (the stack of the last step), both go on alike
    start = fast[..., -1].get("next").exclude("reward")
    assert_same_rollout(
        fast_env.rollout(6, auto_reset=False, tensordict=start.clone(), break_when_any_done=False),
        _step_by_step(slow_env, 6, auto_reset=False, tensordict=start.clone(), break_when_any_done=False),
    )
    assert_same_rollout(fast_env.rollout(5), _step_by_step(slow_env, 5))


def test_shortcut_without_a_previous_stack_matches_step() -> None:
    transform = CatFrames(3, -1, in_keys=["count"], padding="constant", padding_value=5)
    frames = TensorDict({"count": torch.tensor([[1.0], [2.0]])}, [2])
    over_time = transform._step_over_time(TensorDict({}, []), frames.clone())
    step = transform._step(TensorDict({}, []), TensorDict({"count": torch.tensor([1.0])}, []))
    assert over_time["count"][0].tolist() == step["count"].tolist() == [5.0, 5.0, 1.0]
    assert over_time["count"][1].tolist() == [5.0, 1.0, 2.0]


# ---------------------------------------------------------------- errors
def test_errors() -> None:
    with pytest.raises(ValueError, match="negative"):
        CatFrames(2, 0)
    with pytest.raises(ValueError, match="negative"):
        CatFrames(2, 1)
    with pytest.raises(ValueError, match="N must be"):
        CatFrames(0, -1)
    with pytest.raises(ValueError, match="padding"):
        CatFrames(2, -1, padding="reflect")
    with pytest.raises(ValueError, match="dim=-2 is not a dim of the frames at 'count'"):
        TransformedEnv(CountingEnv(), CatFrames(2, -2, in_keys=["count"]))
    with pytest.raises(KeyError, match="CatFrames reads 'pixels'"):
        TransformedEnv(CountingEnv(), CatFrames(2, -1))
    with pytest.raises(KeyError, match="stacks observations; 'reward'"):
        TransformedEnv(CountingEnv(), CatFrames(2, -1, in_keys=["reward"]))
    with pytest.raises(ValueError, match="reset_key"):
        TransformedEnv(MultiLevelZerosEnv(), CatFrames(2, -1, in_keys=["val"]))
    env = TransformedEnv(MultiLevelZerosEnv(), CatFrames(2, -1, in_keys=["val"], out_keys=["s"], reset_key="_reset"))
    assert env.reset()["s"].shape == (4,)
    data = _replay_batch()
    del data["obs"]
    with pytest.raises(KeyError, match="root frames"):
        CatFrames(2, -1, in_keys=["obs"])(data)
    with pytest.raises(ValueError, match="no batch dims"):
        CatFrames(2, -1, in_keys=["obs"])(TensorDict({"obs": torch.zeros(3)}, []))
    with pytest.raises(ValueError, match="previous stack at 'count' has shape"):
        CatFrames(3, -1, in_keys=["count"])._step(
            TensorDict({"count": torch.zeros(2)}, []), TensorDict({"count": torch.zeros(1)}, [])
        )


def test_specs_of_a_multi_level_env_with_a_reset_key() -> None:
    # the env adds 1 to the values of its input: the stacks go elsewhere
    transform = CatFrames(2, -1, in_keys=[("agent0", "val")], out_keys=[("agent0", "stack")], reset_key="_reset")
    env = TransformedEnv(MultiLevelZerosEnv(), transform)
    assert env.full_state_spec["agent0", "stack"].shape == (4,)
    assert isinstance(env.full_observation_spec, Composite)
    check_env_specs(env)


def test_repr_and_defaults() -> None:
    transform = CatFrames(2, -1)
    assert transform.in_keys == transform.out_keys == ["pixels"] and transform.done_key == "done"
    assert repr(transform).startswith("CatFrames(N=2, dim=-1, in_keys=['pixels']")
