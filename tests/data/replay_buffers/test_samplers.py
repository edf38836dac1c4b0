"""RandomSampler, SamplerWithoutReplacement and PrioritizedSampler through their public API."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cadence.data.replay_buffers.samplers import (
    PrioritizedSampler,
    RandomSampler,
    SamplerWithoutReplacement,
)


class _Storage:
    """A stand-in storage: what samplers may use of one (length, capacity, layout, get)."""

    def __init__(self, length: int, max_size: int | None = None) -> None:
        self.length = length
        self.max_size = max_size if max_size is not None else max(length, 1)
        self.ndim = 1

    def __len__(self) -> int:
        return self.length

    @property
    def shape(self) -> torch.Size | None:
        return torch.Size([self.max_size]) if self.length else None

    def get(self, index: torch.Tensor) -> torch.Tensor:
        return index.clone()

    __getitem__ = get


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# -- RandomSampler ---------------------------------------------------------------------------


def test_random_sampler_is_uniform_over_the_written_items() -> None:
    sampler = RandomSampler(generator=_generator())
    index, info = sampler.sample(_Storage(10, max_size=100), 50_000)
    assert info == {}
    assert index.dtype == torch.int64 and index.shape == (50_000,)
    assert index.min() >= 0 and index.max() < 10
    np.testing.assert_allclose(np.bincount(index.numpy(), minlength=10) / 50_000, 0.1, atol=0.01)


def test_random_sampler_same_seed_same_samples() -> None:
    a = RandomSampler(generator=_generator(3))
    b = RandomSampler(generator=_generator(3))
    assert torch.equal(a.sample(_Storage(100), 64)[0], b.sample(_Storage(100), 64)[0])
    state = a.state_dict()
    first = a.sample(_Storage(100), 64)[0]
    a.load_state_dict(state)
    assert torch.equal(a.sample(_Storage(100), 64)[0], first)
    a.set_seed(5)
    b.set_seed(5)
    assert torch.equal(a.sample(_Storage(100), 8)[0], b.sample(_Storage(100), 8)[0])


def test_random_sampler_errors() -> None:
    with pytest.raises(ValueError, match="empty"):
        RandomSampler().sample(_Storage(0), 4)
    with pytest.raises(ValueError, match="batch_size"):
        RandomSampler().sample(_Storage(3), -1)


# -- SamplerWithoutReplacement ---------------------------------------------------------------


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("batch_size", [1, 5, 7, 20])
def test_without_replacement_covers_every_item_once_per_epoch(shuffle: bool, batch_size: int) -> None:
    length = 20
    sampler = SamplerWithoutReplacement(shuffle=shuffle, generator=_generator())
    drawn = torch.cat([sampler.sample(_Storage(length), batch_size)[0] for _ in range(3 * length)])
    # However batches fall, consecutive stretches of `length` draws are whole epochs.
    epochs = drawn[: len(drawn) // length * length].reshape(-1, length)
    for epoch in epochs:
        assert sorted(epoch.tolist()) == list(range(length))
    if not shuffle:
        assert epochs[0].tolist() == list(range(length))
    else:
        assert epochs[0].tolist() != epochs[1].tolist()


def test_without_replacement_ran_out_marks_the_end_of_each_epoch() -> None:
    sampler = SamplerWithoutReplacement(generator=_generator())
    storage = _Storage(10)
    flags = []
    for _ in range(5):
        sampler.sample(storage, 5)
        flags.append(sampler.ran_out)
    assert flags == [False, True, False, True, False]
    # A batch running past the epoch's end is completed from a fresh epoch.
    sampler = SamplerWithoutReplacement(shuffle=False)
    batches = [sampler.sample(storage, 4)[0].tolist() for _ in range(3)]
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    assert sampler.ran_out
    assert sampler.sample(storage, 4)[0].tolist() == [2, 3, 4, 5]
    assert not sampler.ran_out


def test_without_replacement_drop_last() -> None:
    storage = _Storage(10)
    sampler = SamplerWithoutReplacement(drop_last=True, generator=_generator())
    for _ in range(4):
        first = sampler.sample(storage, 4)[0]
        assert not sampler.ran_out
        second = sampler.sample(storage, 4)[0]
        # Two full batches, then the two left over are dropped: the epoch is spent.
        assert sampler.ran_out
        assert torch.cat([first, second]).unique().numel() == 8
    ordered = SamplerWithoutReplacement(drop_last=True, shuffle=False)
    assert [ordered.sample(storage, 4)[0].tolist() for _ in range(3)] == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
        [0, 1, 2, 3],
    ]
    with pytest.raises(ValueError, match="batch_size=11 is larger than the 10 items"):
        SamplerWithoutReplacement(drop_last=True).sample(storage, 11)


def test_without_replacement_batch_larger_than_storage_spans_epochs() -> None:
    sampler = SamplerWithoutReplacement(generator=_generator())
    index = sampler.sample(_Storage(4), 10)[0]
    assert sorted(index[:4].tolist()) == sorted(index[4:8].tolist()) == [0, 1, 2, 3]
    assert sampler.ran_out


def test_without_replacement_items_written_mid_epoch_join_the_next_epoch() -> None:
    sampler = SamplerWithoutReplacement(generator=_generator())
    storage = _Storage(6)
    first = sampler.sample(storage, 3)[0]
    storage.length = 10  # four items written during the epoch
    second = sampler.sample(storage, 3)[0]
    assert sorted(torch.cat([first, second]).tolist()) == list(range(6))
    assert sampler.ran_out
    third = torch.cat([sampler.sample(storage, 5)[0] for _ in range(2)])
    assert sorted(third.tolist()) == list(range(10))


def test_without_replacement_state_dict_round_trip_continues_identically() -> None:
    storage = _Storage(13)
    a = SamplerWithoutReplacement(generator=_generator(7))
    a.sample(storage, 5)
    state = a.state_dict()
    expected = [a.sample(storage, 5)[0] for _ in range(6)]
    b = SamplerWithoutReplacement(generator=_generator(99))
    b.load_state_dict(state)
    for want in expected:
        assert torch.equal(b.sample(storage, 5)[0], want)


def test_without_replacement_same_seed_same_samples_and_empty() -> None:
    storage = _Storage(30)
    a = SamplerWithoutReplacement(generator=_generator(1))
    b = SamplerWithoutReplacement(generator=_generator(1))
    for _ in range(10):
        assert torch.equal(a.sample(storage, 7)[0], b.sample(storage, 7)[0])
    a.empty()
    assert not a.ran_out
    with pytest.raises(ValueError, match="empty"):
        a.sample(_Storage(0), 2)


# -- PrioritizedSampler ----------------------------------------------------------------------


def _prioritized(n: int, priorities: torch.Tensor, **kwargs) -> PrioritizedSampler:
    kwargs.setdefault("alpha", 0.7)
    kwargs.setdefault("beta", 0.5)
    sampler = PrioritizedSampler(kwargs.pop("max_capacity", n), generator=_generator(), **kwargs)
    sampler.extend(torch.arange(n))
    sampler.update_priority(torch.arange(n), priorities)
    return sampler


def test_prioritized_frequencies_match_priorities_to_the_alpha() -> None:
    n, alpha, draws = 20, 0.7, 200_000
    priorities = torch.rand(n, generator=_generator(3)) * 10
    sampler = _prioritized(n, priorities, alpha=alpha, max_capacity=64)
    index = torch.cat([sampler.sample(_Storage(n, max_size=64), 1000)[0] for _ in range(draws // 1000)])
    assert index.max() < n  # unwritten slots are never drawn
    observed = np.bincount(index.numpy(), minlength=n)
    powered = (priorities.double().numpy() + 1e-8) ** alpha
    expected = draws * powered / powered.sum()
    chi_square = ((observed - expected) ** 2 / expected).sum()
    # 19 degrees of freedom: the 0.999 quantile is 43.8.
    assert chi_square < 43.8
    # Per bin: within 5 standard deviations of the binomial count.
    std = np.sqrt(expected * (1 - expected / draws))
    assert (np.abs(observed - expected) < 5 * std).all()


def test_prioritized_importance_weights_match_the_formula() -> None:
    n, alpha, beta, eps = 50, 0.6, 0.4, 1e-6
    priorities = torch.rand(n, generator=_generator(4)) * 3
    sampler = _prioritized(n, priorities, alpha=alpha, beta=beta, eps=eps, dtype=torch.float64)
    storage = _Storage(n)
    index, info = sampler.sample(storage, 512)
    p = (priorities.double() + eps) ** alpha
    probability = p / p.sum()
    all_weights = (n * probability) ** -beta
    expected = (n * probability[index]) ** -beta / all_weights.max()
    assert info["_weight"].dtype == torch.float64
    torch.testing.assert_close(info["_weight"], expected, rtol=1e-12, atol=0)
    # beta is an attribute one can anneal.
    sampler.beta = 1.0
    index, info = sampler.sample(storage, 512)
    expected = (n * probability[index]) ** -1.0 / ((n * probability) ** -1.0).max()
    torch.testing.assert_close(info["_weight"], expected, rtol=1e-12, atol=0)
    # The default dtype is float32.
    index, info = _prioritized(n, priorities).sample(storage, 4)
    assert info["_weight"].dtype == torch.float32 and (info["_weight"] <= 1).all()


def test_prioritized_same_seed_same_samples() -> None:
    priorities = torch.rand(100, generator=_generator(5))
    a, b = _prioritized(100, priorities), _prioritized(100, priorities)
    for _ in range(5):
        ia, wa = a.sample(_Storage(100), 32)
        ib, wb = b.sample(_Storage(100), 32)
        assert torch.equal(ia, ib) and torch.equal(wa["_weight"], wb["_weight"])
        a.update_priority(ia, torch.rand(32, generator=_generator(6)))
        b.update_priority(ib, torch.rand(32, generator=_generator(6)))


@pytest.mark.parametrize("within_buffer", [False, True])
def test_prioritized_state_dict_round_trip_continues_identically(within_buffer: bool) -> None:
    storage = _Storage(40)
    kwargs = {"max_priority_within_buffer": within_buffer}
    a = _prioritized(40, torch.rand(40, generator=_generator(8)) * 4, **kwargs)
    a.sample(storage, 16)
    state = a.state_dict()

    def run(sampler: PrioritizedSampler) -> list[torch.Tensor]:
        out = []
        for step in range(5):
            index, info = sampler.sample(storage, 16)
            out += [index, info["_weight"]]
            sampler.update_priority(index, torch.rand(16, generator=_generator(step)) * 3)
            sampler.extend(torch.tensor([step]))  # an overwrite: default priority
        return out

    expected = run(a)
    b = PrioritizedSampler(40, alpha=0.7, beta=0.5, generator=_generator(123), **kwargs)
    b.load_state_dict(state)
    for got, want in zip(run(b), expected):
        assert torch.equal(got, want)
    with pytest.raises(ValueError, match="max_capacity=41"):
        PrioritizedSampler(41, alpha=0.7, beta=0.5).load_state_dict(state)


def test_prioritized_new_items_get_the_max_priority() -> None:
    sampler = PrioritizedSampler(10, alpha=0.5, beta=1.0, eps=0.0)
    sampler.extend(torch.arange(3))
    assert sampler.priorities()[:3].tolist() == [1.0, 1.0, 1.0]  # nothing seen yet: 1
    sampler.update_priority(torch.arange(3), torch.tensor([0.25, 16.0, 4.0]))
    sampler.update_priority(1, 0.04)  # the max seen stays 16
    sampler.extend(torch.tensor([3, 4]))
    assert sampler.priorities()[:5].tolist() == [0.5, 0.2, 2.0, 4.0, 4.0]
    sampler.add(5)
    assert sampler.priorities()[5].item() == 4.0


def test_prioritized_max_priority_within_buffer_follows_the_held_items() -> None:
    sampler = PrioritizedSampler(10, alpha=1.0, beta=1.0, eps=0.0, max_priority_within_buffer=True)
    sampler.extend(torch.arange(3))
    sampler.update_priority(torch.arange(3), torch.tensor([0.5, 9.0, 2.0]))
    sampler.extend(torch.tensor([3]))
    assert sampler.priorities()[3].item() == 9.0
    sampler.update_priority(torch.tensor([1, 3]), torch.tensor([0.1, 0.2]))  # the 9s are gone
    sampler.extend(torch.tensor([4]))
    assert sampler.priorities()[4].item() == 2.0
    sampler.empty()
    sampler.add(0)
    assert sampler.priorities()[0].item() == 1.0


def test_prioritized_priority_shapes_and_reductions() -> None:
    sampler = PrioritizedSampler(6, alpha=1.0, beta=1.0, eps=0.0)
    sampler.extend(torch.arange(6))
    sampler.update_priority(torch.tensor([0, 1]), torch.tensor([[2.0], [3.0]]))  # trailing 1 dim
    sampler.update_priority(2, torch.tensor(5.0))  # a scalar for one index
    sampler.update_priority(torch.tensor([3, 4]), 0.5)  # one number for all
    assert sampler.priorities().tolist() == [2.0, 3.0, 5.0, 0.5, 0.5, 1.0]
    per_element = torch.tensor([[1.0, 4.0, 2.0, 3.0], [6.0, 0.0, 0.0, 0.0]])
    expected = {"max": [4.0, 6.0], "min": [1.0, 0.0], "mean": [2.5, 1.5], "median": [2.5, 0.0]}
    for reduction, want in expected.items():
        sampler = PrioritizedSampler(6, alpha=1.0, beta=1.0, eps=0.0, reduction=reduction)
        sampler.extend(torch.arange(6))
        # A priority per element of each stored trajectory: [B, T] for B indices.
        sampler.update_priority(torch.tensor([0, 5]), per_element)
        assert sampler.priorities()[[0, 5]].tolist() == want, reduction
        # An index expanded over each item's elements, as a [B, T] batch carries it.
        sampler.update_priority(torch.tensor([[1, 1, 1, 1], [2, 2, 2, 2]]), per_element)
        assert sampler.priorities()[[1, 2]].tolist() == want, reduction


def test_prioritized_priority_errors_name_the_index() -> None:
    sampler = PrioritizedSampler(8, alpha=0.7, beta=0.5)
    sampler.extend(torch.arange(5))
    with pytest.raises(ValueError, match="priority for index 3 is -0.5"):
        sampler.update_priority(torch.tensor([1, 2, 3]), torch.tensor([1.0, 2.0, -0.5]))
    with pytest.raises(ValueError, match="priority for index 2 is nan"):
        sampler.update_priority(torch.tensor([1, 2]), torch.tensor([[1.0, 1.0], [1.0, float("nan")]]))
    with pytest.raises(ValueError, match="index 6 has not been written"):
        sampler.update_priority(torch.tensor([1, 6]), torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="index 8 is out of range"):
        sampler.update_priority(torch.tensor([8]), torch.tensor([1.0]))
    with pytest.raises(ValueError, match=r"got shape \(3,\) for index of shape \(2,\)"):
        sampler.update_priority(torch.tensor([1, 2]), torch.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="integers"):
        sampler.update_priority(torch.tensor([1.0]), torch.tensor([1.0]))
    # The failed calls changed nothing.
    assert sampler.priorities()[:5].tolist() == [1.0] * 5


def test_prioritized_sampling_errors_and_empty() -> None:
    sampler = PrioritizedSampler(8, alpha=0.7, beta=0.5)
    with pytest.raises(ValueError, match="empty"):
        sampler.sample(_Storage(0), 4)
    with pytest.raises(ValueError, match="no item has a positive priority"):
        sampler.sample(_Storage(3), 4)  # the sampler was never told of the writes
    sampler.extend(torch.arange(4))
    sampler.sample(_Storage(4), 4)
    sampler.empty()
    assert sampler.priorities().sum().item() == 0.0
    with pytest.raises(ValueError, match="no item has a positive priority"):
        sampler.sample(_Storage(4), 4)


def test_prioritized_alpha_zero_is_uniform_with_unit_weights() -> None:
    sampler = _prioritized(10, torch.arange(10.0), alpha=0.0)
    index, info = sampler.sample(_Storage(10), 20_000)
    np.testing.assert_allclose(np.bincount(index.numpy(), minlength=10) / 20_000, 0.1, atol=0.01)
    assert torch.equal(info["_weight"], torch.ones(20_000))


def test_prioritized_mark_update_resets_a_stale_priority() -> None:
    sampler = _prioritized(4, torch.tensor([0.0, 3.0, 1.0, 1.0]), alpha=1.0, eps=0.0)
    assert sampler.priorities()[0].item() == 0.0
    sampler.mark_update(torch.tensor([0]))
    assert sampler.priorities()[0].item() == 3.0


def test_prioritized_constructor_checks() -> None:
    with pytest.raises(ValueError, match="max_capacity"):
        PrioritizedSampler(0, alpha=0.5, beta=0.5)
    with pytest.raises(ValueError, match="alpha"):
        PrioritizedSampler(4, alpha=-1.0, beta=0.5)
    with pytest.raises(ValueError, match="reduction"):
        PrioritizedSampler(4, alpha=0.5, beta=0.5, reduction="sum")
    with pytest.raises(ValueError, match="dtype"):
        PrioritizedSampler(4, alpha=0.5, beta=0.5, dtype=torch.int64)
