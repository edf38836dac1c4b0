"""Transforms of batches of trajectories: ``RandomCropTensorDict``.

These act on stored data (what a replay buffer samples, what a module receives), not
on an env's steps.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.envs.transforms.trajectory import RandomCropTensorDict
    >>> data = TensorDict({"t": torch.arange(10).expand(4, 10)}, [4, 10])
    >>> crop = RandomCropTensorDict(3, generator=torch.Generator().manual_seed(0))
    >>> out = crop(data)
    >>> out.batch_size, bool((out["t"].diff(dim=-1) == 1).all())
    (torch.Size([4, 3]), True)
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from cadence.data import Composite
from cadence.envs.transforms.base import NestedKey, Transform

__all__ = ["RandomCropTensorDict"]


class RandomCropTensorDict(Transform):
    """Crops a random sub-sequence of ``sub_seq_len`` consecutive elements from each
    trajectory of a batch.

    The input's batch dim ``sample_dim`` is the time dim; every other batch index is a
    trajectory of its own and gets its own start, drawn uniformly among the starts that
    keep the window within the trajectory (within its valid part, with ``mask_key``).
    The output has ``sub_seq_len`` elements along ``sample_dim``.

    Draws come from ``generator`` only (never from torch's global generator): pass a
    seeded one for repeatable crops; without one, a generator seeded from the operating
    system's entropy is made.

    This transform is for replay buffers and modules (called as ``transform(data)``);
    it cannot be appended to an env. ``inv`` leaves data unchanged (what is written to a
    buffer is kept whole).

    Args:
        sub_seq_len: the length of the cropped sub-sequences.
        sample_dim: the batch dim along which to crop (time); a negative dim works for
            data with any number of leading batch dims.
        mask_key: an entry holding, for each trajectory, a boolean mask of its valid
            elements along ``sample_dim`` (``True`` first, then ``False``; this is not
            checked); crops are then taken from the valid elements only. The mask has
            the batch shape, possibly with trailing dims of size 1.
        generator: the ``torch.Generator`` to draw the starts with.

    Raises:
        RuntimeError: when called on data whose trajectories (or valid parts) are
            shorter than ``sub_seq_len``, or on data with too few batch dims.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
        >>> data = TensorDict({"t": torch.arange(6).expand(2, 6), "mask": mask}, [2, 6])
        >>> crop = RandomCropTensorDict(3, mask_key="mask", generator=torch.Generator().manual_seed(0))
        >>> crop(data)["t"][1].tolist()  # the second trajectory holds 3 valid elements: it is kept whole
        [0, 1, 2]
    """

    def __init__(
        self,
        sub_seq_len: int,
        sample_dim: int = -1,
        mask_key: NestedKey | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if isinstance(sub_seq_len, bool) or int(sub_seq_len) != sub_seq_len or sub_seq_len <= 0:
            raise ValueError(f"RandomCropTensorDict: sub_seq_len must be a positive integer, got {sub_seq_len!r}.")
        self.sub_seq_len = int(sub_seq_len)
        self.sample_dim = int(sample_dim)
        self.mask_key = mask_key
        if generator is None:
            generator = torch.Generator()
            generator.seed()  # from the OS's entropy; torch's global generator is left alone
        elif not isinstance(generator, torch.Generator):
            raise TypeError(
                f"RandomCropTensorDict: generator must be a torch.Generator, got {type(generator).__name__}."
            )
        self.generator = generator

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Returns the cropped trajectories (a new tensordict; the input is not modified)."""
        return self._crop(tensordict)

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._crop(tensordict)

    def _time_dim(self, tensordict: TensorDictBase) -> int:
        ndim = tensordict.batch_dims
        if not -ndim <= self.sample_dim < ndim:
            raise RuntimeError(
                f"RandomCropTensorDict: sample_dim={self.sample_dim} is not a batch dim of data with batch size "
                f"{tuple(tensordict.batch_size)}."
            )
        return self.sample_dim % ndim

    def _lengths(self, tensordict: TensorDictBase, dim: int) -> torch.Tensor:
        """The number of valid elements of each trajectory (the batch shape without ``dim``)."""
        batch = tensordict.batch_size
        if self.mask_key is None:
            rest = batch[:dim] + batch[dim + 1 :]
            return torch.full(rest, batch[dim], dtype=torch.long, device=tensordict.device)
        mask = tensordict.get(self.mask_key, None)
        if mask is None:
            raise KeyError(
                f"RandomCropTensorDict: the data lacks the mask entry {self.mask_key!r}; it holds "
                f"{sorted(map(str, tensordict.keys(True, True)))}."
            )
        while mask.ndim > len(batch) and mask.shape[-1] == 1:
            mask = mask.squeeze(-1)
        if mask.shape != batch or mask.dtype != torch.bool:
            raise RuntimeError(
                f"RandomCropTensorDict: expected the mask {self.mask_key!r} to be a bool tensor of the batch "
                f"shape {tuple(batch)} (maybe with trailing dims of size 1), got {mask.dtype} of shape "
                f"{tuple(tensordict.get(self.mask_key).shape)}."
            )
        return mask.sum(dim)

    def _crop(self, tensordict: TensorDictBase) -> TensorDictBase:
        dim = self._time_dim(tensordict)
        lengths = self._lengths(tensordict, dim)
        if lengths.numel() and bool((lengths < self.sub_seq_len).any()):
            where = "valid elements (mask " + repr(self.mask_key) + ")" if self.mask_key is not None else "elements"
            raise RuntimeError(
                f"RandomCropTensorDict: cannot crop sub-sequences of length {self.sub_seq_len} along dim {dim} from "
                f"trajectories with as few as {int(lengths.min())} {where} (batch size {tuple(tensordict.batch_size)})."
            )
        # one uniform start per trajectory in [0, length - sub_seq_len]
        u = torch.rand(lengths.shape, generator=self.generator, dtype=torch.float64, device=self.generator.device)
        spans = (lengths - self.sub_seq_len + 1).to(u.device)
        starts = torch.minimum((u * spans).floor().long(), spans - 1).to(lengths.device)
        steps = torch.arange(self.sub_seq_len, device=lengths.device)
        index = starts.unsqueeze(dim) + steps.reshape([-1] + [1] * (lengths.ndim - dim))
        return tensordict.gather(dim, index)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError("RandomCropTensorDict transforms stored trajectories; it cannot be used in an env.")

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        raise RuntimeError("RandomCropTensorDict transforms stored trajectories; it cannot be used in an env.")

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        raise RuntimeError(
            "RandomCropTensorDict transforms stored trajectories (call it on the data a replay buffer samples, "
            "or use it in a module); it cannot be appended to an env."
        )

    def __repr__(self) -> str:
        return (
            f"RandomCropTensorDict(sub_seq_len={self.sub_seq_len}, sample_dim={self.sample_dim}, "
            f"mask_key={self.mask_key!r})"
        )
