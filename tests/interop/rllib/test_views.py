"""Trajectory views on Cadence TensorDicts (cadence.interop.rllib.views)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from cadence.data.replay_buffers import LazyTensorStorage, SliceSampler, TensorDictReplayBuffer
from cadence.interop.rllib.view_requirement import ViewRequirement, episode_view
from cadence.interop.rllib.views import (
    SliceViews,
    TrajectoryViews,
    ViewCarry,
    add_slice_views,
    add_views,
)

VIEWS = {
    "prev_actions": ViewRequirement("actions", shift=-1),
    "prev_rewards": ViewRequirement("rewards", shift=-1),
    "frames": ViewRequirement("obs", shift="-3:0"),
    "next_two": ViewRequirement("obs", shift=[1, 2]),
    "obs_copy": ViewRequirement("obs"),
}


def _batch(lengths: list[int], *, obs_dim: int = 3, first_id: int = 0, seed: int = 0) -> TensorDict:
    """A [T] collector-like batch made of episodes of the given lengths."""
    gen = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    ids = torch.cat([torch.full((n,), first_id + i, dtype=torch.long) for i, n in enumerate(lengths)])
    return TensorDict(
        {
            "observation": torch.randn(total, obs_dim, generator=gen),
            "action": torch.randint(0, 5, (total,), generator=gen),
            "next": {
                "reward": torch.randn(total, 1, generator=gen),
                "done": torch.zeros(total, 1, dtype=torch.bool),
            },
            "collector": {"traj_ids": ids},
        },
        [total],
    )


def _expected(td: TensorDict, name: str, req: ViewRequirement, key: object) -> np.ndarray:
    ids = td["collector", "traj_ids"].numpy()
    column = td[key].numpy()
    parts = []
    for traj in dict.fromkeys(ids.tolist()):
        parts.append(episode_view(req, column[ids == traj], view_col=name))
    return np.concatenate(parts)


KEYS = {
    "prev_actions": "action",
    "prev_rewards": ("next", "reward"),
    "frames": "observation",
    "next_two": "observation",
    "obs_copy": "observation",
}


def test_matches_episode_view_per_trajectory() -> None:
    td = _batch([5, 1, 7, 3, 9])
    add_views(td, VIEWS)
    for name, req in VIEWS.items():
        np.testing.assert_array_equal(td[name].numpy(), _expected(td, name, req, KEYS[name]), err_msg=name)
    assert td["frames"].shape == (25, 4, 3)
    assert td["next_two"].shape == (25, 2, 3)
    assert td["prev_actions"].dtype == torch.int64
    assert td["prev_rewards"].shape == (25, 1)


def test_batched_rows_are_independent() -> None:
    rows = [
        _batch([4, 6, 2], first_id=0, seed=1),
        _batch([12], first_id=10, seed=2),
        _batch([3, 9], first_id=20, seed=3),
    ]
    td = torch.stack(rows, 0)
    assert td.batch_size == (3, 12)
    add_views(td, VIEWS)
    for row, single in zip(range(3), rows, strict=True):
        add_views(single, VIEWS)
        for name in VIEWS:
            torch.testing.assert_close(td[name][row], single[name], msg=name)


def test_same_traj_id_in_two_rows_is_not_merged() -> None:
    td = TensorDict(
        {
            "action": torch.arange(6.0).reshape(2, 3),
            "collector": {"traj_ids": torch.zeros(2, 3, dtype=torch.long)},
        },
        [2, 3],
    )
    add_views(td, {"prev_actions": ViewRequirement("actions", shift=-1)})
    assert td["prev_actions"].tolist() == [[0.0, 0.0, 1.0], [0.0, 3.0, 4.0]]


def test_carry_across_two_batches() -> None:
    whole = _batch([3, 10, 4], seed=5)
    first, second = whole[:8].clone(), whole[8:].clone()  # episode 1 runs across the cut
    carry = ViewCarry()
    add_views(first, VIEWS, carry=carry)
    add_views(second, VIEWS, carry=carry)
    add_views(whole, VIEWS)
    assert second["prev_actions"][0] == whole["action"][7]
    for name in ("prev_actions", "prev_rewards", "frames"):
        torch.testing.assert_close(torch.cat([first[name], second[name]]), whole[name], msg=name)
    # Positive shifts read this batch only: zeros at the cut.
    assert (first["next_two"][7] == 0).all()


def test_carry_with_short_batches_and_new_trajectory() -> None:
    whole = _batch([2, 9], seed=6)
    views = TrajectoryViews({"frames": ViewRequirement("obs", shift="-3:0")})
    parts = [views(whole[i : i + 2].clone()) for i in range(0, 11, 2)]
    expected = add_views(whole.clone(), {"frames": ViewRequirement("obs", shift="-3:0")})["frames"]
    torch.testing.assert_close(torch.cat([p["frames"] for p in parts]), expected)
    views.reset()
    again = views(whole[2:4].clone())
    assert (again["frames"][0, :3] == 0).all()  # no carry: zeros before the batch


def test_carry_rows_mismatch_raises() -> None:
    carry = ViewCarry()
    add_views(_batch([4]), VIEWS, carry=carry)
    two = torch.stack([_batch([4]), _batch([4])], 0)
    with pytest.raises(ValueError, match="carry was kept for 1 batch rows"):
        add_views(two, VIEWS, carry=carry)


def test_errors_name_the_key() -> None:
    td = _batch([4])
    with pytest.raises(KeyError, match="reads .*infos"):
        add_views(td, {"x": ViewRequirement("infos", shift=-1)})
    with pytest.raises(KeyError, match="traj_key .*ids"):
        add_views(td, VIEWS, traj_key="ids")
    with pytest.raises(ValueError, match="'state_in'.*batch_repeat_value=4"):
        add_views(td, {"state_in": ViewRequirement("obs", shift=-1, batch_repeat_value=4)})
    with pytest.raises(TypeError, match="'x'"):
        add_views(td, {"x": "obs"})  # type: ignore[dict-item]


def test_key_map_and_next_obs() -> None:
    td = _batch([4, 4])
    td["next", "observation"] = td["observation"] + 1
    views = {"new_obs": ViewRequirement(), "o": ViewRequirement("my_obs", shift=-1)}
    add_views(td, views, key_map={"my_obs": "observation"})
    torch.testing.assert_close(td["new_obs"], td["next", "observation"])
    assert (td["o"][4] == 0).all() and torch.equal(td["o"][5], td["observation"][4])


def test_end_key_splits() -> None:
    td = TensorDict(
        {
            "action": torch.arange(4.0),
            "end": torch.tensor([False, True, False, False]),
            "collector": {"traj_ids": torch.zeros(4, dtype=torch.long)},
        },
        [4],
    )
    add_views(td, {"p": ViewRequirement("actions", shift=-1)}, end_key="end")
    assert td["p"].tolist() == [0.0, 0.0, 0.0, 2.0]


def test_collector_postproc() -> None:
    from cadence.collectors import SyncDataCollector
    from cadence.envs import GymEnv, SerialEnv

    views = {
        "prev_actions": ViewRequirement("actions", shift=-1),
        "frames": ViewRequirement("obs", shift="-2:0"),
    }
    env = SerialEnv(2, lambda: GymEnv("CartPole-v1"))
    collector = SyncDataCollector(
        env, policy=None, frames_per_batch=40, total_frames=120, postproc=TrajectoryViews(views)
    )
    batches = [batch.clone() for batch in collector]
    collector.shutdown()
    assert all(b.batch_size == (2, 20) for b in batches)
    whole = torch.cat(batches, 1)
    reference = add_views(whole.exclude("prev_actions", "frames"), views)
    for name in views:
        torch.testing.assert_close(whole[name], reference[name], msg=name)
    ids = whole["collector", "traj_ids"]
    cont = ids[:, 20] == ids[:, 19]
    assert torch.equal(whole["prev_actions"][:, 20][cont], whole["action"][:, 19][cont])


def _buffer(td: TensorDict, num_slices: int, seed: int) -> TensorDictReplayBuffer:
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(1000),
        sampler=SliceSampler(
            num_slices=num_slices,
            traj_key=("collector", "traj_ids"),
            generator=torch.Generator().manual_seed(seed),
        ),
        batch_size=num_slices * 5,
    )
    buffer.extend(td)
    return buffer


def test_slice_sampler_zeros_before_slice() -> None:
    data = _batch([20, 30, 25, 15], seed=7)
    buffer = _buffer(data, 8, 0)
    sample = buffer.sample()
    add_slice_views(sample, VIEWS)
    for k, part in enumerate(sample.split(5)):
        ids = part["collector", "traj_ids"]
        part = part.clone().set("collector", TensorDict({"traj_ids": torch.full_like(ids, 1000 + k)}, [5]))
        for name, req in VIEWS.items():
            np.testing.assert_array_equal(
                sample[name][5 * k : 5 * k + 5].numpy(), _expected(part, name, req, KEYS[name]), err_msg=name
            )


def test_slice_sampler_reads_storage_before_slice() -> None:
    data = _batch([20, 30, 25, 15], seed=8)
    reference = add_views(data.clone(), VIEWS)
    buffer = _buffer(data, 8, 1)
    sample = buffer.sample()
    add_slice_views(sample, VIEWS, storage=buffer.storage)
    index = sample["index"]
    for name in ("prev_actions", "prev_rewards", "frames", "obs_copy"):
        torch.testing.assert_close(sample[name], reference[name][index], msg=name)
    # Future steps stay within the slice.
    assert (sample["next_two"].reshape(8, 5, 2, 3)[:, -1] == 0).all()


def test_slice_views_buffer_transform() -> None:
    data = _batch([20, 30, 25, 15], seed=9)
    reference = add_views(data.clone(), VIEWS)
    buffer = _buffer(data, 4, 2)
    buffer.append_transform(SliceViews(VIEWS, storage=buffer.storage))
    for _ in range(3):
        sample = buffer.sample()
        for name in ("prev_actions", "frames"):
            torch.testing.assert_close(sample[name], reference[name][sample["index"]], msg=name)


def test_slice_storage_needs_index() -> None:
    sample = _batch([5]).set(("next", "truncated"), torch.zeros(5, 1, dtype=torch.bool))
    with pytest.raises(KeyError, match="index"):
        add_slice_views(sample, VIEWS, storage=LazyTensorStorage(10))


def test_slice_adjacent_same_trajectory_apart() -> None:
    sample = TensorDict(
        {
            "action": torch.tensor([1.0, 2.0, 1.0, 2.0]),
            "collector": {"traj_ids": torch.zeros(4, dtype=torch.long)},
            "next": {"truncated": torch.tensor([[False], [True], [False], [True]])},
        },
        [4],
    )
    add_slice_views(sample, {"p": ViewRequirement("actions", shift=-1)})
    assert sample["p"].tolist() == [0.0, 1.0, 0.0, 1.0]


def test_speed_100k_steps() -> None:
    td = torch.stack([_batch([97] * 103 + [9], seed=s, first_id=1000 * s) for s in range(10)], 0)
    assert td.numel() == 100_000
    views = {k: VIEWS[k] for k in ("prev_actions", "prev_rewards", "frames")}
    add_views(td.clone(), views)
    start = time.perf_counter()
    add_views(td, views)
    print(f"add_views on {td.numel()} steps ({list(views)}): {time.perf_counter() - start:.4f}s")
