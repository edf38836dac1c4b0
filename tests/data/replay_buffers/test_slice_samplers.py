"""Slice samplers: slices stay inside trajectories, whatever marks their ends and however
the ring buffer has wrapped; lengths, strictness, seeding, errors, epochs, priorities."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from cadence.data.replay_buffers.slice_samplers import (
    PrioritizedSliceSampler,
    SliceSampler,
    SliceSamplerWithoutReplacement,
)
from cadence.data.replay_buffers.storages import LazyTensorStorage
from cadence.data.replay_buffers.writers import RoundRobinWriter


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


class Ring:
    """A storage, its round-robin writer, and the sampler told of every write (as a buffer does)."""

    def __init__(self, sampler, max_size: int, ndim: int = 1) -> None:
        self.storage = LazyTensorStorage(max_size, ndim=ndim)
        self.writer = RoundRobinWriter()
        self.writer.register_storage(self.storage)
        self.sampler = sampler

    def extend(self, data: TensorDict) -> torch.Tensor:
        index = self.writer.extend(data)
        self.sampler.extend(index)
        return index

    def sample(self, batch_size: int):
        return self.sampler.sample(self.storage, batch_size)


def episodes(lengths: list[int], first_id: int = 0, start_step: int = 0) -> TensorDict:
    """Transitions of consecutive episodes: ids, done at each episode's last step, a global step counter."""
    ids = torch.cat([torch.full((n,), first_id + k) for k, n in enumerate(lengths)])
    done = torch.zeros(ids.numel(), 1, dtype=torch.bool)
    done[torch.cumsum(torch.tensor(lengths), 0) - 1] = True
    step = torch.arange(start_step, start_step + ids.numel())
    return TensorDict(
        {"episode": ids, "step": step, "obs": torch.randn(ids.numel(), 3), "next": {"done": done}},
        [ids.numel()],
    )


def only_done(data: TensorDict) -> TensorDict:
    """The same transitions without the episode ids (ends come from the done flags)."""
    return data.exclude("episode")


def check_slices(storage, index: torch.Tensor, num_slices: int) -> None:
    """Each slice: one episode, consecutive steps (so, consecutive writes: it never jumps the cursor)."""
    slices = index.reshape(num_slices, -1)
    ids = storage.get_entry("episode")[slices]
    steps = storage.get_entry("step")[slices]
    assert (ids == ids[:, :1]).all(), ids
    assert (steps.diff(dim=1) == 1).all(), steps


def seeded(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------------------
# where trajectories end
# ---------------------------------------------------------------------------------------


def test_slices_stay_in_one_trajectory_by_traj_key():
    ring = Ring(SliceSampler(num_slices=8, traj_key="episode", generator=seeded()), 1000)
    ring.extend(episodes([7, 3, 12, 5, 9, 30, 4, 6]))
    for _ in range(50):
        index, _ = ring.sample(32)  # slices of 4
        assert index.shape == (32,) and index.dtype == torch.int64
        check_slices(ring.storage, index, 8)


def test_slices_stay_in_one_trajectory_by_end_key():
    # ids do not tell the episodes apart: only the done flags do
    data = episodes([6, 2, 9, 11, 5])
    data["episode"] = torch.zeros(data.shape[0], dtype=torch.long)
    ring = Ring(SliceSampler(slice_len=5, end_key=("next", "done"), generator=seeded()), 100)
    ring.extend(data)
    done = ring.storage.get_entry(("next", "done")).squeeze(-1)
    for _ in range(50):
        index, _ = ring.sample(20)
        slices = index.reshape(4, 5)
        assert not done[slices[:, :-1]].any()  # a done may only close a slice
        assert (slices.diff(dim=1) == 1).all()


def test_default_keys_are_episode_then_done():
    with_ids = Ring(SliceSampler(slice_len=4, generator=seeded()), 100)
    data = episodes([5, 5, 5])
    data["next", "done"] = torch.zeros(15, 1, dtype=torch.bool)  # ids alone mark the ends
    with_ids.extend(data)
    for _ in range(20):
        check_slices(with_ids.storage, with_ids.sample(8)[0], 2)
    done_only = Ring(SliceSampler(slice_len=4, generator=seeded()), 100)
    done_only.extend(only_done(episodes([5, 5, 5])))
    steps = done_only.storage.get_entry("step")
    for _ in range(20):
        starts = steps[done_only.sample(8)[0].reshape(2, 4)[:, 0]]
        assert ((starts % 5) <= 1).all()  # slices of 4 in episodes of 5 start at step 0 or 1


def test_rows_of_a_two_dim_storage_are_trajectories():
    ring = Ring(SliceSampler(slice_len=6, generator=seeded()), 80, ndim=2)
    ring.extend(TensorDict({"obs": torch.randn(4, 10, 2)}, [4, 10]))  # no id, no done entry
    assert ring.storage.shape == (8, 10)
    for _ in range(50):
        slices = ring.sample(24)[0].reshape(4, 6)
        rows = slices // 10
        assert (rows == rows[:, :1]).all() and (rows < 4).all()
        assert (slices.diff(dim=1) == 1).all()


def test_two_dim_storage_also_splits_rows_at_done():
    done = torch.zeros(3, 10, 1, dtype=torch.bool)
    done[:, 3] = True  # each row: an episode of 4 steps, then one of 6
    ring = Ring(SliceSampler(slice_len=5, end_key=("next", "done"), generator=seeded()), 30, ndim=2)
    ring.extend(TensorDict({"next": {"done": done}}, [3, 10]))
    for _ in range(30):
        slices = ring.sample(15)[0].reshape(3, 5)
        columns = slices % 10
        assert (columns[:, 0] >= 4).all() and (columns[:, -1] <= 9).all()  # only the 6-step episodes fit
        assert (slices // 10 == slices[:, :1] // 10).all()


def test_missing_keys_on_a_one_dim_storage_raise_naming_them():
    ring = Ring(SliceSampler(slice_len=2, traj_key="traj"), 10)
    ring.extend(TensorDict({"obs": torch.zeros(4)}, [4]))
    with pytest.raises(KeyError, match="traj"):
        ring.sample(4)


# ---------------------------------------------------------------------------------------
# lengths and strictness
# ---------------------------------------------------------------------------------------


def test_num_slices_and_slice_len_give_the_batch_shape():
    ring = Ring(SliceSampler(num_slices=4, generator=seeded()), 200)
    ring.extend(episodes([50, 50]))
    assert ring.sample(40)[0].reshape(4, 10).shape == (4, 10)
    ring = Ring(SliceSampler(slice_len=10, generator=seeded()), 200)
    ring.extend(episodes([50, 50]))
    index, info = ring.sample(30)
    assert index.shape == (30,)
    truncated = info[("next", "truncated")]
    assert truncated.shape == (30, 1)
    assert truncated.reshape(3, 10)[:, -1].all() and not truncated.reshape(3, 10)[:, :-1].any()


def test_strict_length_skips_short_trajectories():
    ring = Ring(SliceSampler(slice_len=5, generator=seeded()), 100)
    ring.extend(episodes([2, 8, 3, 6]))
    ids = ring.storage.get_entry("episode")
    seen = set()
    for _ in range(100):
        index, _ = ring.sample(10)
        assert index.numel() == 10
        seen |= set(ids[index].tolist())
    assert seen == {1, 3}


def test_non_strict_length_gives_shorter_slices_marked_truncated():
    ring = Ring(SliceSampler(slice_len=5, strict_length=False, generator=seeded()), 100)
    ring.extend(episodes([2, 8, 3, 6]))
    ids = ring.storage.get_entry("episode")
    sizes = set()
    seen = set()
    for _ in range(100):
        index, info = ring.sample(20)
        truncated = info[("next", "truncated")].squeeze(-1)
        assert truncated.shape == index.shape and truncated[-1]
        # the truncated flags cut the batch into its slices
        bounds = torch.nonzero(truncated).squeeze(-1)
        lengths = torch.diff(bounds, prepend=torch.tensor([-1]))
        assert lengths.numel() == 4 and lengths.sum() == index.numel()
        for piece in torch.split(index, lengths.tolist()):
            assert (ids[piece] == ids[piece[0]]).all() and (piece.diff() == 1).all()
        sizes.add(index.numel())
        seen |= set(ids[index].tolist())
    assert seen == {0, 1, 2, 3}
    assert min(sizes) < 20  # short episodes shrink the batch


def test_done_info_marks_slice_ends_and_keeps_stored_flags():
    data = episodes([10])
    data["next", "terminated"] = data["next", "done"].clone()
    ring = Ring(SliceSampler(slice_len=10, generator=seeded()), 10)
    ring.extend(data)
    index, info = ring.sample(10)
    assert index.tolist() == list(range(10))
    assert info[("next", "done")].squeeze(-1).tolist() == [False] * 9 + [True]
    assert info[("next", "terminated")].squeeze(-1).tolist() == [False] * 9 + [True]
    assert SliceSampler(slice_len=10, truncated_key=None).sample(ring.storage, 10)[1] == {}


def test_span_lets_slices_hang_over_trajectory_edges():
    ring = Ring(SliceSampler(slice_len=4, span=True, generator=seeded()), 100)
    ring.extend(episodes([6, 6, 6]))
    ids = ring.storage.get_entry("episode")
    sizes = set()
    for _ in range(100):
        index, info = ring.sample(12)
        ends = torch.nonzero(info[("next", "truncated")].squeeze(-1)).squeeze(-1)
        lengths = torch.diff(ends, prepend=torch.tensor([-1]))
        for piece in torch.split(index, lengths.tolist()):
            assert 1 <= piece.numel() <= 4 and (ids[piece] == ids[piece[0]]).all()
        sizes.update(lengths.tolist())
    assert sizes == {1, 2, 3, 4}


# ---------------------------------------------------------------------------------------
# the ring buffer: cached boundaries stay right across overwrites
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("traj_key", ["episode", None])
def test_boundaries_stay_right_while_the_ring_wraps(traj_key):
    torch.manual_seed(0)
    sampler = SliceSampler(num_slices=4, traj_key=traj_key, end_key=("next", "done"), generator=seeded())
    ring = Ring(sampler, 97)
    episode, step = 0, 0
    for round_ in range(40):
        lengths = torch.randint(3, 25, (3,)).tolist()
        data = episodes(lengths, first_id=episode, start_step=step)
        if round_ % 3 == 0:  # an unfinished episode, continued by the next write
            data["next", "done"][-1] = False
            episode -= 1
        ring.extend(data if traj_key else only_done(data))
        episode += len(lengths)
        step += data.shape[0]
        for _ in range(5):
            index, _ = ring.sample(12)
            slices = index.reshape(4, 3)
            steps = ring.storage.get_entry("step")[slices]
            assert (steps.diff(dim=1) == 1).all()  # never across the cursor
            if traj_key:
                ids = ring.storage.get_entry("episode")[slices]
                assert (ids == ids[:, :1]).all()
            else:
                done = ring.storage.get_entry(("next", "done")).squeeze(-1)
                assert not done[slices[:, :-1]].any()


def test_overwritten_ends_are_forgotten():
    ring = Ring(SliceSampler(slice_len=8, end_key=("next", "done"), generator=seeded()), 20)
    ring.extend(only_done(episodes([5, 5, 5, 5])))
    with pytest.raises(RuntimeError, match="slice_len=8"):
        ring.sample(8)
    # positions 0-9 now hold one episode: the old end at 4 is gone (the one at 9 is its end)
    ring.extend(only_done(episodes([10], start_step=20)))
    for _ in range(20):
        index, _ = ring.sample(16)
        assert (index < 10).all()


def test_a_trajectory_may_wrap_around_the_end_of_a_full_ring():
    ring = Ring(SliceSampler(slice_len=12, generator=seeded()), 20)
    ring.extend(episodes([10, 10], first_id=0))
    # episode 1 goes on: 5 more steps land at positions 0-4; 19 -> 0 is no end any more
    more = episodes([5], first_id=1, start_step=20)
    more["next", "done"][-1] = False
    ring.extend(more)
    starts = set()
    for _ in range(50):
        index, _ = ring.sample(12)
        check_slices(ring.storage, index, 1)
        assert (ring.storage.get_entry("episode")[index] == 1).all()
        starts.add(int(index[0]))
    assert starts == {10, 11, 12, 13}


def test_a_two_dim_ring_wraps_by_rows():
    ring = Ring(SliceSampler(slice_len=5, generator=seeded()), 30, ndim=2)
    for k in range(5):
        ring.extend(TensorDict({"obs": torch.full((2, 10), float(k))}, [2, 10]))
        obs = ring.storage.get_entry("obs")
        for _ in range(10):
            slices = ring.sample(15)[0].reshape(3, 5)
            assert (slices // 10 == slices[:, :1] // 10).all()
            assert (obs[slices] == obs[slices[:, :1]]).all()


def test_storage_filled_without_notifications_is_read_whole():
    storage = LazyTensorStorage(50)
    storage.set(torch.arange(15), episodes([5, 5, 5]))
    sampler = SliceSampler(slice_len=5, generator=seeded())
    for _ in range(10):
        check_slices(storage, sampler.sample(storage, 10)[0], 2)


def test_empty_forgets_the_boundaries():
    ring = Ring(SliceSampler(slice_len=5, generator=seeded()), 50)
    ring.extend(episodes([10, 10]))
    ring.sample(10)
    ring.storage.empty()
    ring.writer.empty()
    ring.sampler.empty()
    ring.extend(episodes([6]))
    for _ in range(10):
        assert (ring.sample(5)[0] < 6).all()


# ---------------------------------------------------------------------------------------
# seeding, state, errors
# ---------------------------------------------------------------------------------------


def test_same_seed_same_writes_same_samples():
    def run(seed: int) -> list[list[int]]:
        ring = Ring(SliceSampler(num_slices=3, generator=seeded(seed)), 60)
        out = []
        for k in range(6):
            ring.extend(episodes([7, 9, 11], first_id=3 * k, start_step=27 * k))
            out.append(ring.sample(12)[0].tolist())
        return out

    assert run(3) == run(3)
    assert run(3) != run(4)
    sampler = SliceSampler(num_slices=3)
    sampler.set_seed(3)
    ring = Ring(sampler, 60)
    ring.extend(episodes([7, 9, 11]))
    assert ring.sample(12)[0].tolist() == run(3)[0]


def test_state_dict_restores_the_sampling_sequence():
    ring = Ring(SliceSampler(slice_len=4, generator=seeded(5)), 50)
    ring.extend(episodes([12, 20, 30]))  # wraps: 62 steps in 50
    ring.sample(8)
    state = ring.sampler.state_dict()
    expected = [ring.sample(8)[0].tolist() for _ in range(3)]
    restored = SliceSampler(slice_len=4)
    restored.load_state_dict(state)
    assert [restored.sample(ring.storage, 8)[0].tolist() for _ in range(3)] == expected


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({}, "exactly one of num_slices and slice_len"),
        ({"num_slices": 2, "slice_len": 3}, "exactly one of num_slices and slice_len"),
        ({"num_slices": 0}, "num_slices must be a positive int"),
        ({"slice_len": 2.5}, "slice_len must be a positive int"),
        ({"slice_len": 2, "span": -1}, "span"),
    ],
)
def test_constructor_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SliceSampler(**kwargs)


def test_batch_size_must_divide_evenly():
    ring = Ring(SliceSampler(num_slices=3), 50)
    ring.extend(episodes([20]))
    with pytest.raises(ValueError, match=r"batch_size=10 .*num_slices=3"):
        ring.sample(10)
    ring.sampler = SliceSampler(slice_len=4)
    with pytest.raises(ValueError, match=r"batch_size=10 .*slice_len=4"):
        ring.sample(10)


def test_no_trajectory_long_enough():
    ring = Ring(SliceSampler(slice_len=6), 50)
    ring.extend(episodes([3, 5, 4]))
    with pytest.raises(RuntimeError, match=r"slice_len=6 .*longest holds 5.*strict_length=False"):
        ring.sample(12)


def test_empty_storage():
    with pytest.raises(RuntimeError, match="empty storage"):
        SliceSampler(slice_len=2).sample(LazyTensorStorage(10), 4)


# ---------------------------------------------------------------------------------------
# SliceSamplerWithoutReplacement
# ---------------------------------------------------------------------------------------


def test_without_replacement_visits_each_trajectory_once_per_epoch():
    sampler = SliceSamplerWithoutReplacement(num_slices=3, generator=seeded())
    ring = Ring(sampler, 200)
    ring.extend(episodes([6, 9, 5, 7, 8, 10, 6]))  # seven episodes of at least 5 steps
    ids = ring.storage.get_entry("episode")
    for _epoch in range(3):
        seen, batches = [], 0
        while True:
            index, _ = ring.sample(15)
            slices = index.reshape(-1, 5)
            check_slices(ring.storage, index, slices.shape[0])
            seen += ids[slices[:, 0]].tolist()
            batches += 1
            if sampler.ran_out:
                break
        assert sorted(seen) == list(range(7)) and batches == 3  # 3 + 3 + 1


def test_without_replacement_drop_last_and_order():
    sampler = SliceSamplerWithoutReplacement(num_slices=3, drop_last=True, shuffle=False, generator=seeded())
    ring = Ring(sampler, 200)
    ring.extend(episodes([5] * 7))
    ids = ring.storage.get_entry("episode")
    first = ids[ring.sample(15)[0].reshape(3, 5)[:, 0]].tolist()
    assert not sampler.ran_out
    second = ids[ring.sample(15)[0].reshape(3, 5)[:, 0]].tolist()
    assert (first, second) == ([0, 1, 2], [3, 4, 5]) and sampler.ran_out
    assert ids[ring.sample(15)[0].reshape(3, 5)[:, 0]].tolist() == [0, 1, 2]  # a new epoch


def test_without_replacement_starts_over_after_a_write():
    sampler = SliceSamplerWithoutReplacement(num_slices=2, shuffle=False, generator=seeded())
    ring = Ring(sampler, 200)
    ring.extend(episodes([5] * 4))
    ids = ring.storage.get_entry("episode")
    assert ids[ring.sample(10)[0][::5]].tolist() == [0, 1]
    ring.extend(episodes([5], first_id=4, start_step=20))
    ids = ring.storage.get_entry("episode")
    assert ids[ring.sample(10)[0][::5]].tolist() == [0, 1]


def test_without_replacement_not_enough_trajectories_with_drop_last():
    ring = Ring(SliceSamplerWithoutReplacement(num_slices=3, drop_last=True), 50)
    ring.extend(episodes([5, 5]))
    with pytest.raises(RuntimeError, match="num_slices=3"):
        ring.sample(6)


def test_without_replacement_state_dict():
    sampler = SliceSamplerWithoutReplacement(num_slices=2, generator=seeded(2))
    ring = Ring(sampler, 200)
    ring.extend(episodes([5, 6, 7, 8, 9, 10]))
    ring.sample(8)
    state = sampler.state_dict()
    expected = [ring.sample(8)[0].tolist() for _ in range(4)]
    restored = SliceSamplerWithoutReplacement(num_slices=2)
    restored.load_state_dict(state)
    assert [restored.sample(ring.storage, 8)[0].tolist() for _ in range(4)] == expected


# ---------------------------------------------------------------------------------------
# PrioritizedSliceSampler
# ---------------------------------------------------------------------------------------


def prioritized_ring(alpha: float = 1.0, beta: float = 0.5, **kwargs) -> Ring:
    kwargs.setdefault("slice_len", 5)
    sampler = PrioritizedSliceSampler(40, alpha=alpha, beta=beta, eps=0.0, generator=seeded(), **kwargs)
    ring = Ring(sampler, 40)
    ring.extend(episodes([20, 20]))
    return ring


def test_prioritized_starts_follow_priorities_among_possible_starts():
    ring = prioritized_ring(alpha=0.5)
    priority = torch.ones(40)
    priority[3] = 16.0  # sqrt: 4 times the mass of another start
    priority[[17, 18, 19, 37, 38, 39]] = 1000.0  # no slice of 5 may start there
    ring.sampler.update_priority(torch.arange(40), priority)
    starts = torch.cat([ring.sample(200)[0].reshape(40, 5)[:, 0] for _ in range(50)])  # 2000 slices
    assert not torch.isin(starts, torch.tensor([17, 18, 19, 37, 38, 39])).any()
    # possible starts: 0-15 and 20-35, 32 of them; position 3 has mass 4, the others 1 each
    expected = 4 / (4 + 31)
    share = (starts == 3).float().mean().item()
    assert abs(share - expected) < 4 * (expected * (1 - expected) / starts.numel()) ** 0.5
    counts = torch.bincount(starts, minlength=40).float()
    others = counts[torch.tensor([k for k in list(range(16)) + list(range(20, 36)) if k != 3])]
    assert others.min() > 0


def test_prioritized_weights_follow_the_formula_and_cover_each_slice():
    ring = prioritized_ring(alpha=1.0, beta=0.5)
    priority = torch.full((40,), 2.0)
    priority[7] = 8.0
    priority[30] = 0.5  # the lowest priority: weight 1
    ring.sampler.update_priority(torch.arange(40), priority)
    for _ in range(20):
        index, info = ring.sample(20)
        weight = info["_weight"].reshape(4, 5)
        assert weight.dtype == torch.float32
        assert (weight == weight[:, :1]).all()  # a slice carries its start's weight
        expected = (priority[index.reshape(4, 5)[:, 0]] / 0.5) ** -0.5
        assert torch.allclose(weight[:, 0], expected)


def test_prioritized_slices_stay_in_trajectories_and_respect_strictness():
    ring = prioritized_ring()
    for _ in range(30):
        check_slices(ring.storage, ring.sample(20)[0], 4)
    loose = prioritized_ring(strict_length=False)
    loose.sampler.update_priority(torch.arange(40), torch.ones(40).index_fill(0, torch.tensor([19]), 1e6))
    index, info = loose.sample(10)
    assert index.tolist() == [19, 19]  # the prioritized last step starts (and ends) both slices
    assert info[("next", "truncated")].squeeze(-1).tolist() == [True, True]


def test_prioritized_mass_on_impossible_starts_falls_back_to_listing_them():
    ring = prioritized_ring()
    priority = torch.full((40,), 1e-14)
    priority[[16, 17, 18, 19]] = 1e9  # nearly all the mass where no slice of 5 fits
    priority[2] = 1e-6  # nearly all the mass of the possible starts
    ring.sampler.update_priority(torch.arange(40), priority)
    index, info = ring.sample(50)
    assert (index.reshape(10, 5)[:, 0] == 2).all()
    assert torch.allclose(info["_weight"], torch.tensor((1e-6 / 1e-14) ** -0.5, dtype=torch.float32))


def test_prioritized_state_dict_and_seeding():
    ring = prioritized_ring()
    ring.sampler.update_priority(torch.arange(40), torch.rand(40, generator=seeded(9)) + 0.1)
    state = ring.sampler.state_dict()
    expected = [ring.sample(10)[0].tolist() for _ in range(3)]
    restored = PrioritizedSliceSampler(40, alpha=1.0, beta=0.5, eps=0.0, slice_len=5)
    restored.load_state_dict(state)
    assert [restored.sample(ring.storage, 10)[0].tolist() for _ in range(3)] == expected
    assert torch.equal(restored.priorities(), ring.sampler.priorities())


def test_prioritized_new_elements_get_the_max_priority_and_errors_name_the_index():
    ring = prioritized_ring()
    ring.sampler.update_priority(torch.tensor([0]), torch.tensor([5.0]))
    ring.extend(episodes([10], first_id=2, start_step=40))  # overwrites 0-9
    assert ring.sampler.priorities()[:10].tolist() == [5.0] * 10
    with pytest.raises(ValueError, match="index 4"):
        ring.sampler.update_priority(torch.tensor([4]), torch.tensor([float("nan")]))
    ring.sampler.beta = 0.25
    assert ring.sampler.beta == 0.25


# ---------------------------------------------------------------------------------------
# copies and threads
# ---------------------------------------------------------------------------------------


def test_a_sampler_copies_and_pickles():
    import copy
    import pickle

    ring = Ring(SliceSampler(slice_len=4, generator=seeded(1)), 50)
    ring.extend(episodes([10, 10]))
    ring.sample(8)
    clone = copy.deepcopy(ring.sampler)
    again = pickle.loads(pickle.dumps(ring.sampler))
    expected = ring.sample(8)[0].tolist()
    assert clone.sample(ring.storage, 8)[0].tolist() == expected
    assert again.sample(ring.storage, 8)[0].tolist() == expected


def test_sampling_in_a_thread_while_extending_loses_no_write():
    import threading

    ring = Ring(SliceSampler(slice_len=3, generator=seeded()), 500)
    ring.extend(episodes([10] * 5))
    stop = threading.Event()
    errors = []

    def sample_forever() -> None:
        try:
            while not stop.is_set():
                ring.sampler.sample(ring.storage, 6)
        except Exception as err:  # reported below
            errors.append(err)

    worker = threading.Thread(target=sample_forever)
    worker.start()
    try:
        for k in range(1, 40):
            ring.extend(episodes([7, 5], first_id=2 * k + 50, start_step=50 + 12 * k))
    finally:
        stop.set()
        worker.join()
    assert not errors
    for _ in range(30):
        check_slices(ring.storage, ring.sample(30)[0], 10)


def test_batch_size_of_other_int_types_and_bad_types():
    import numpy as np

    ring = Ring(SliceSampler(slice_len=4, generator=seeded()), 50)
    ring.extend(episodes([10, 10]))
    assert ring.sample(np.int64(8))[0].shape == (8,)
    for bad in (8.0, True, 0, -4):
        with pytest.raises(ValueError, match=rf"batch_size={bad!r} must be a positive multiple of slice_len=4"):
            ring.sample(bad)


def test_given_ends_or_trajectories_replace_the_stored_entries():
    storage = LazyTensorStorage(12)
    storage.set(torch.arange(12), TensorDict({"obs": torch.arange(12.0)}, [12]))
    ends = torch.zeros(12, dtype=torch.bool)
    ends[[3, 11]] = True  # 0-3 and 4-11
    trajectories = torch.tensor([0] * 4 + [1] * 8)
    for sampler in (SliceSampler(slice_len=6, ends=ends), SliceSampler(slice_len=6, trajectories=trajectories)):
        sampler.extend(torch.arange(12))
        for _ in range(10):
            assert (sampler.sample(storage, 6)[0] >= 4).all()
    with pytest.raises(ValueError, match="not both"):
        SliceSampler(slice_len=6, ends=ends, trajectories=trajectories)
    short = SliceSampler(slice_len=2, ends=ends[:5])
    with pytest.raises(ValueError, match="ends tensor has 5 elements, the storage holds 12"):
        short.sample(storage, 2)


def test_a_storage_without_entries_is_refused():
    from cadence.data.replay_buffers.storages import ListStorage

    storage = ListStorage(10)
    storage.set(torch.arange(3), [1, 2, 3])
    with pytest.raises(TypeError, match="keeps entries by key"):
        SliceSampler(slice_len=2).sample(storage, 2)


# ---------------------------------------------------------------------------------------
# in a replay buffer
# ---------------------------------------------------------------------------------------


def test_in_a_tensordict_replay_buffer_with_prefetch(tmp_path):
    from cadence.data.replay_buffers.buffers import TensorDictReplayBuffer
    from cadence.data.replay_buffers.storages import LazyMemmapStorage

    buffer = TensorDictReplayBuffer(
        storage=LazyMemmapStorage(1000, scratch_dir=tmp_path, ndim=2),
        sampler=SliceSampler(num_slices=4, generator=seeded()),
        batch_size=40,
        prefetch=2,
    )
    done = torch.zeros(4, 200, 1, dtype=torch.bool)
    done[:, 99] = True
    buffer.extend(TensorDict({"obs": torch.randn(4, 200, 3), "next": {"done": done}}, [4, 200]))
    for _ in range(5):
        sample = buffer.sample()
        index = sample["index"].reshape(4, 10)
        assert ((index // 100) == (index[:, :1] // 100)).all()  # inside one half-row episode
        assert sample["next", "truncated"].reshape(4, 10)[:, -1].all()
        buffer.extend(TensorDict({"obs": torch.randn(1, 200, 3), "next": {"done": done[:1]}}, [1, 200]))
