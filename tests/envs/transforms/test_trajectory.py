"""RandomCropTensorDict: crops of known trajectories, masks, its own generator, errors."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from cadence.envs import SerialEnv
from cadence.envs.transforms import TransformedEnv
from cadence.envs.transforms.trajectory import RandomCropTensorDict
from tests.fakes import CountingEnv


def _trajectories(batch: int = 4, steps: int = 10) -> TensorDict:
    """``batch`` trajectories of ``steps`` elements: "t" is the time, "id" the trajectory,
    ("next", "t") the next time, "obs" a feature vector that repeats t."""
    t = torch.arange(steps).expand(batch, steps)
    ids = torch.arange(batch).unsqueeze(-1).expand(batch, steps)
    return TensorDict(
        {"t": t, "id": ids, "obs": t.unsqueeze(-1).expand(batch, steps, 2).float(), "next": {"t": t + 1}},
        [batch, steps],
    )


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_crops_are_windows_of_each_trajectory():
    data = _trajectories()
    out = RandomCropTensorDict(4, generator=_generator())(data)
    assert out.batch_size == (4, 4) and data.batch_size == (4, 10)  # the input is left whole
    start = out["t"][:, :1]
    assert torch.equal(out["t"], start + torch.arange(4))  # consecutive
    assert torch.equal(out["id"], torch.arange(4).unsqueeze(-1).expand(4, 4))  # each from its own trajectory
    assert torch.equal(out["next", "t"], out["t"] + 1) and torch.equal(out["obs"][..., 1], out["t"].float())
    assert bool(((start >= 0) & (start <= 6)).all())
    # the whole length: the trajectories themselves
    assert torch.equal(RandomCropTensorDict(10, generator=_generator())(data)["t"], data["t"])


def test_starts_cover_every_valid_position():
    data = _trajectories(batch=400, steps=5)
    starts = RandomCropTensorDict(3, generator=_generator())(data)["t"][:, 0]
    assert sorted(starts.unique().tolist()) == [0, 1, 2]
    counts = torch.bincount(starts, minlength=3).float()
    assert bool((counts > 100).all())  # about 133 each


def test_own_generator_repeatable_and_global_rng_untouched():
    data = _trajectories()
    first = RandomCropTensorDict(3, generator=_generator(7))(data)["t"]
    again = RandomCropTensorDict(3, generator=_generator(7))(data)["t"]
    assert torch.equal(first, again)
    crop = RandomCropTensorDict(3, generator=_generator(7))
    draws = [crop(_trajectories(batch=64))["t"][:, 0] for _ in range(2)]
    assert not torch.equal(draws[0], draws[1])  # the generator moves on
    torch.manual_seed(0)
    state = torch.get_rng_state()
    RandomCropTensorDict(3)(data)  # a generator of its own, seeded from the OS
    RandomCropTensorDict(3, generator=_generator())(data)
    assert torch.equal(torch.get_rng_state(), state)
    with pytest.raises(TypeError, match="torch.Generator"):
        RandomCropTensorDict(3, generator=0)


def test_sample_dim():
    data = _trajectories(batch=3, steps=8).transpose(0, 1)  # time first: [8, 3]
    out = RandomCropTensorDict(5, sample_dim=0, generator=_generator())(data)
    assert out.batch_size == (5, 3)
    assert torch.equal(out["t"], out["t"][:1] + torch.arange(5).unsqueeze(-1))
    assert torch.equal(out["id"], torch.arange(3).expand(5, 3))
    same = RandomCropTensorDict(5, sample_dim=-2, generator=_generator())(data)
    assert torch.equal(same["t"], out["t"])
    # several leading dims: the time stays last
    nested = torch.stack([_trajectories(batch=2), _trajectories(batch=2)])  # [2, 2, 10]
    assert RandomCropTensorDict(2, generator=_generator())(nested).batch_size == (2, 2, 2)
    with pytest.raises(RuntimeError, match=r"sample_dim=2 is not a batch dim of data with batch size \(8, 3\)"):
        RandomCropTensorDict(2, sample_dim=2)(data)


def test_mask_key_crops_the_valid_parts():
    data = _trajectories(batch=200, steps=10)
    lengths = torch.arange(200) % 7 + 3  # 3 to 9 valid elements
    data["mask"] = (torch.arange(10) < lengths.unsqueeze(-1)).unsqueeze(-1)  # trailing dim of size 1
    out = RandomCropTensorDict(3, mask_key="mask", generator=_generator())(data)
    assert bool(out["mask"].all())
    assert bool((out["t"][:, -1] < lengths).all())
    assert bool((out["t"][lengths == 3, 0] == 0).all())  # only one window fits
    assert out["t"][lengths == 9, 0].max().item() == 6
    data["mask"][0, 0, 0] = False
    data["mask"][0, 1:, 0] = False
    with pytest.raises(RuntimeError, match=r"as few as 0 valid elements \(mask 'mask'\)"):
        RandomCropTensorDict(3, mask_key="mask")(data)
    with pytest.raises(KeyError, match=r"lacks the mask entry .*valid"):
        RandomCropTensorDict(3, mask_key="valid")(data)
    data["mask"] = data["mask"].long()
    with pytest.raises(RuntimeError, match="bool tensor of the batch shape"):
        RandomCropTensorDict(3, mask_key="mask")(data)


def test_errors_and_env_use():
    with pytest.raises(RuntimeError, match=r"length 11 along dim 1 from trajectories with as few as 10 elements"):
        RandomCropTensorDict(11)(_trajectories())
    with pytest.raises(ValueError, match="sub_seq_len must be a positive integer"):
        RandomCropTensorDict(0)
    with pytest.raises(RuntimeError, match="cannot be appended to an env"):
        TransformedEnv(CountingEnv(), RandomCropTensorDict(2))
    data = _trajectories()
    assert RandomCropTensorDict(2).inv(data) is data  # what is written to a buffer is kept whole


def test_on_rollouts_of_a_batched_env():
    rollout = SerialEnv(2, lambda: CountingEnv(max_count=100)).rollout(6)  # [2, 6]
    out = RandomCropTensorDict(3, generator=_generator(1))(rollout)
    assert out.batch_size == (2, 3)
    assert torch.equal(out["next", "count"], out["count"] + 1)
    assert torch.equal(out["count"].squeeze(-1), out["count"][:, :1, 0] + torch.arange(3.0))
