"""Action distributions for policies: point masses, tanh-squashed Gaussians and
(masked) categoricals.

Each one has a ``deterministic_sample`` (what ``InteractionType.DETERMINISTIC``
reads), a ``mode`` and, where it has a closed form, a ``mean``; ``RANDOM`` draws
with ``rsample()`` (all of them but :class:`MaskedCategorical` are reparameterised
or straight-through). Probabilistic tensordict modules pick among these with
``tensordict.nn.set_interaction_type``.

Examples:
    >>> import torch
    >>> from cadence.modules import TanhNormal
    >>> dist = TanhNormal(torch.zeros(3), torch.ones(3), low=-2.0, high=2.0)
    >>> sample = dist.rsample((5,))
    >>> sample.shape, bool(sample.abs().max() < 2), dist.log_prob(sample).shape
    (torch.Size([5, 3]), True, torch.Size([5]))
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import distributions as D
from torch.distributions import constraints

__all__ = ["Delta", "TanhDelta", "TanhNormal", "OneHotCategorical", "MaskedCategorical"]

TensorLike = torch.Tensor | float | int
_SizeLike = torch.Size | tuple[int, ...]


def _as_tensor_like(value: TensorLike, ref: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(value, device=ref.device, dtype=ref.dtype)


def _sum_event(t: torch.Tensor, event_dims: int) -> torch.Tensor:
    return t.sum(tuple(range(-event_dims, 0))) if event_dims > 0 else t


class Delta(D.Distribution):
    """A point mass at ``param``: every sample is ``param`` (gradients flow through it).

    ``log_prob`` is 0 where a value equals ``param`` (within ``atol``/``rtol``, on
    the whole event) and ``-inf`` elsewhere.

    Args:
        param: the point.
        atol: the absolute tolerance of the equality test in ``log_prob``.
        rtol: the relative tolerance of the equality test.
        batch_shape: the batch shape; defaults to all dims of ``param`` but the event dims.
        event_shape: the event shape; defaults to the last dim of ``param``
            (or ``param.shape[len(batch_shape):]`` when ``batch_shape`` is given).

    Examples:
        >>> import torch
        >>> from cadence.modules import Delta
        >>> dist = Delta(torch.tensor([[0.5, -0.5]]))
        >>> dist.rsample((3,)).shape, dist.log_prob(torch.tensor([[0.5, -0.5]])).tolist()
        (torch.Size([3, 1, 2]), [0.0])
        >>> dist.log_prob(torch.tensor([[0.5, 0.0]])).tolist()
        [-inf]
    """

    arg_constraints: dict = {}
    has_rsample = True

    def __init__(
        self,
        param: torch.Tensor,
        atol: float = 1e-6,
        rtol: float = 1e-6,
        batch_shape: _SizeLike | None = None,
        event_shape: _SizeLike | None = None,
    ) -> None:
        if not isinstance(param, torch.Tensor):
            raise TypeError(f"{type(self).__name__}: expected param to be a tensor, got {type(param).__name__}")
        if batch_shape is None and event_shape is None:
            batch_shape, event_shape = param.shape[:-1], param.shape[-1:]
        elif event_shape is None:
            event_shape = param.shape[len(batch_shape) :]  # type: ignore[arg-type]
        elif batch_shape is None:
            batch_shape = param.shape[: param.ndim - len(event_shape)]
        if torch.Size(batch_shape) + torch.Size(event_shape) != param.shape:
            raise ValueError(
                f"{type(self).__name__}: batch_shape {tuple(batch_shape)} + event_shape {tuple(event_shape)} "
                f"must equal param's shape, got {tuple(param.shape)}"
            )
        self.param = param
        self.atol = atol
        self.rtol = rtol
        super().__init__(torch.Size(batch_shape), torch.Size(event_shape), validate_args=False)

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.real

    def rsample(self, sample_shape: _SizeLike = torch.Size()) -> torch.Tensor:
        """``param`` repeated over ``sample_shape`` (differentiable)."""
        return self.param.expand(torch.Size(sample_shape) + self.param.shape)

    def sample(self, sample_shape: _SizeLike = torch.Size()) -> torch.Tensor:
        """``param`` repeated over ``sample_shape``, outside the graph."""
        with torch.no_grad():
            return self.rsample(sample_shape).clone()

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        """0 where ``value`` equals the point (on the whole event), ``-inf`` elsewhere."""
        close = torch.isclose(value, self.param.expand_as(value), atol=self.atol, rtol=self.rtol)
        n_event = len(self.event_shape)
        if n_event:
            close = close.flatten(-n_event).all(-1)
        zero = torch.zeros((), dtype=self.param.dtype, device=self.param.device)
        return torch.where(close, zero, zero - math.inf)

    @property
    def mode(self) -> torch.Tensor:
        """The point."""
        return self.param

    @property
    def mean(self) -> torch.Tensor:
        """The point."""
        return self.param

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The point."""
        return self.param


class TanhDelta(Delta):
    """A point mass at ``param`` squashed into ``[low, high]`` by a tanh.

    The point is ``low + (high - low) * (tanh(param) + 1) / 2``: the DDPG actor's
    output distribution (``ProbabilisticActor(..., distribution_class=TanhDelta)``).

    Args:
        param: the unsquashed point.
        low: the lower bound (a number or a tensor broadcasting with ``param``).
        high: the upper bound.
        event_dims: how many trailing dims make one action.
        atol: the absolute tolerance of ``log_prob``'s equality test.
        rtol: the relative tolerance of the equality test.
        safe: clamp the point into ``[low, high]``, against round-off.

    Examples:
        >>> import torch
        >>> from cadence.modules import TanhDelta
        >>> dist = TanhDelta(torch.tensor([0.0, 100.0]), low=-2.0, high=2.0)
        >>> dist.mode.tolist()
        [0.0, 2.0]
    """

    def __init__(
        self,
        param: torch.Tensor,
        low: TensorLike = -1.0,
        high: TensorLike = 1.0,
        event_dims: int = 1,
        atol: float = 1e-6,
        rtol: float = 1e-6,
        safe: bool = True,
    ) -> None:
        low_t = _as_tensor_like(low, param)
        high_t = _as_tensor_like(high, param)
        if bool((low_t >= high_t).any()):
            raise ValueError(f"TanhDelta: expected low < high everywhere, got low={low!r}, high={high!r}")
        self.low, self.high = low_t, high_t
        self.raw_param = param
        point = (high_t + low_t) / 2 + (high_t - low_t) / 2 * torch.tanh(param)
        if safe:
            point = torch.maximum(torch.minimum(point, high_t), low_t)
        if event_dims > point.ndim:
            raise ValueError(f"TanhDelta: event_dims={event_dims} exceeds the dims of param {tuple(point.shape)}")
        split = point.ndim - event_dims
        super().__init__(point, atol=atol, rtol=rtol, batch_shape=point.shape[:split], event_shape=point.shape[split:])

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.interval(self.low, self.high)


class TanhNormal(D.Distribution):
    """A Gaussian squashed into ``[low, high]`` by a tanh (the SAC policy).

    A sample is ``low + (high - low) * (tanh(x) + 1) / 2`` with
    ``x ~ Normal(loc, scale)``; ``log_prob`` includes the log-Jacobian of the squash,
    ``-log(1 - tanh(x)^2) - log((high - low) / 2)`` per element, summed over the
    ``event_dims`` last dims.

    Args:
        loc: the Gaussian's location.
        scale: its standard deviation: a tensor, a number, or a callable that maps
            ``loc`` to the scale.
        upscale: ``a`` in ``loc = a * tanh(loc / a)``, used when ``tanh_loc`` is true.
        low: the lower bound (number or tensor).
        high: the upper bound.
        event_dims: how many trailing dims make one action (default 1).
        tanh_loc: squash the location with ``upscale * tanh(loc / upscale)`` first,
            which keeps it from running to where tanh saturates.
        safe_tanh: keep samples strictly inside ``(low, high)`` (clamping tanh at
            ``±(1 - eps)`` with a pass-through gradient) so ``log_prob`` stays finite.

    ``deterministic_sample`` is the squashed location; ``mode`` is the maximum of
    the squashed density, found numerically (it differs from the squashed location
    when the scale is large); ``mean`` has no closed form and raises
    ``NotImplementedError`` (probabilistic modules then average samples).

    Examples:
        >>> import torch
        >>> from cadence.modules import TanhNormal
        >>> dist = TanhNormal(torch.zeros(2, 3), torch.full((2, 3), 0.5), low=-2.0, high=2.0)
        >>> dist.batch_shape, dist.event_shape
        (torch.Size([2]), torch.Size([3]))
        >>> dist.deterministic_sample.tolist()[0]
        [0.0, 0.0, 0.0]
    """

    arg_constraints: dict = {}
    has_rsample = True

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor | float | Callable[[torch.Tensor], torch.Tensor],
        upscale: TensorLike = 5.0,
        low: TensorLike = -1.0,
        high: TensorLike = 1.0,
        event_dims: int | None = None,
        tanh_loc: bool = False,
        safe_tanh: bool = True,
    ) -> None:
        if not isinstance(loc, torch.Tensor):
            raise TypeError(f"TanhNormal: expected loc to be a tensor, got {type(loc).__name__}")
        if callable(scale) and not isinstance(scale, torch.Tensor):
            scale = scale(loc)
        scale_t = scale if isinstance(scale, torch.Tensor) else _as_tensor_like(scale, loc)
        if bool((scale_t <= 0).any()):
            raise ValueError("TanhNormal: expected scale > 0 everywhere, got non-positive entries")
        if tanh_loc:
            upscale_t = _as_tensor_like(upscale, loc)
            loc = upscale_t * torch.tanh(loc / upscale_t)
        self.upscale = upscale
        self.tanh_loc = tanh_loc
        self.safe_tanh = safe_tanh
        loc, scale_t = torch.broadcast_tensors(loc, scale_t)
        self.loc, self.scale = loc, scale_t
        self.low = _as_tensor_like(low, loc)
        self.high = _as_tensor_like(high, loc)
        if bool((self.low >= self.high).any()):
            raise ValueError(f"TanhNormal: expected low < high everywhere, got low={low!r}, high={high!r}")
        self._mid = (self.high + self.low) / 2
        self._half = (self.high - self.low) / 2
        self.event_dims = 1 if event_dims is None else event_dims
        if self.event_dims > loc.ndim:
            raise ValueError(f"TanhNormal: event_dims={self.event_dims} exceeds the dims of loc {tuple(loc.shape)}")
        split = loc.ndim - self.event_dims
        self.base = D.Normal(loc, scale_t, validate_args=False)
        super().__init__(loc.shape[:split], loc.shape[split:], validate_args=False)

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.interval(self.low, self.high)

    def _squash(self, x: torch.Tensor) -> torch.Tensor:
        u = torch.tanh(x)
        if self.safe_tanh:
            bound = 1.0 - torch.finfo(u.dtype).eps
            # clamp the value, keep tanh's gradient (a pass-through clamp)
            u = u + (u.clamp(-bound, bound) - u).detach()
        return self._mid + self._half * u

    #: The generator samples draw from (torch's global one if ``None``): a loss that
    #: samples actions (``SACLoss(generator=...)``) sets it so that its draws repeat.
    generator: torch.Generator | None = None

    def rsample(self, sample_shape: _SizeLike = torch.Size()) -> torch.Tensor:
        """A reparameterised sample (gradients flow to ``loc`` and ``scale``)."""
        if self.generator is None:
            return self._squash(self.base.rsample(torch.Size(sample_shape)))
        noise = torch.randn(
            torch.Size(sample_shape) + self.loc.shape, generator=self.generator, dtype=self.loc.dtype,
            device=self.loc.device,
        )
        return self._squash(self.loc + self.scale * noise)

    def sample(self, sample_shape: _SizeLike = torch.Size()) -> torch.Tensor:
        """A sample outside the graph."""
        with torch.no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        """The log-density of ``value``, tanh Jacobian included, summed over the event dims."""
        u = (value - self._mid) / self._half
        bound = 1.0 - torch.finfo(u.dtype).eps
        u = u.clamp(-bound, bound)
        x = torch.atanh(u)
        per_element = self.base.log_prob(x) - torch.log1p(-u * u) - torch.log(self._half)
        return _sum_event(per_element, self.event_dims)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The squashed location ``low + (high - low) * (tanh(loc) + 1) / 2``."""
        return self._squash(self.loc)

    @property
    def mode(self) -> torch.Tensor:
        """The point of highest density of the squashed distribution.

        In the pre-tanh variable the density to maximise is
        ``-(x - loc)^2 / (2 scale^2) + 2 log cosh x``; its maximum is the root of
        ``(x - loc) / scale^2 = 2 tanh x`` on the side of ``loc``'s sign, which lies in
        ``[|loc|, |loc| + 2 scale^2]`` (there the derivative goes from >= 0 to < 0 and
        has a single root). Bisection finds it; a last Newton step taken in the graph
        gives the gradient with respect to ``loc`` and ``scale``.
        """
        loc, var = self.loc, self.scale**2
        sign = torch.where(loc < 0, -torch.ones_like(loc), torch.ones_like(loc))
        with torch.no_grad():
            m, v = (loc * sign).double(), var.double()
            lo, hi = m.clone(), m + 2 * v
            for _ in range(60):
                mid = (lo + hi) / 2
                positive = (m - mid) / v + 2 * torch.tanh(mid) >= 0
                lo = torch.where(positive, mid, lo)
                hi = torch.where(positive, hi, mid)
            root = ((lo + hi) / 2).to(loc.dtype)
        x = root * sign
        grad = -(x - loc) / var + 2 * torch.tanh(x)
        hess = -1 / var + 2 * (1 - torch.tanh(x) ** 2)
        # the value does not move (grad is ~0 at the root); the step carries the derivatives
        x = x - grad / hess + (grad / hess).detach()
        return self._squash(x)

    @property
    def mean(self) -> torch.Tensor:
        """Not available: the squashed Gaussian's mean has no closed form."""
        raise NotImplementedError("TanhNormal has no closed-form mean; use deterministic_sample, mode or samples")


class OneHotCategorical(D.OneHotCategorical):
    """A categorical over one-hot vectors, with a straight-through ``rsample``.

    ``sample``, ``mode`` and ``deterministic_sample`` are int64 one-hot vectors (the
    dtype of a discrete action spec, as the reference's); ``rsample`` returns a float
    one-hot sample whose gradient is that of the probabilities
    (``sample + probs - probs.detach()``).

    Args:
        logits: unnormalised log-probabilities (last dim = categories).
        probs: probabilities (give one of ``logits`` and ``probs``).

    Examples:
        >>> import torch
        >>> from cadence.modules import OneHotCategorical
        >>> dist = OneHotCategorical(logits=torch.tensor([0.0, 3.0, 1.0]))
        >>> dist.mode.tolist(), dist.sample().dtype
        ([0, 1, 0], torch.int64)
        >>> dist.rsample((4,)).sum(-1).tolist()
        [1.0, 1.0, 1.0, 1.0]
    """

    has_rsample = True

    def __init__(self, logits: torch.Tensor | None = None, probs: torch.Tensor | None = None) -> None:
        if (logits is None) == (probs is None):
            raise ValueError("OneHotCategorical: give exactly one of logits and probs")
        super().__init__(probs=probs, logits=logits, validate_args=False)

    def sample(self, sample_shape: _SizeLike = torch.Size()) -> torch.Tensor:
        """An int64 one-hot sample."""
        return super().sample(torch.Size(sample_shape)).long()

    def rsample(self, sample_shape: _SizeLike = torch.Size()) -> torch.Tensor:
        """A float one-hot sample with the probabilities' (straight-through) gradient."""
        sample = super().sample(torch.Size(sample_shape))
        probs = self.probs.expand_as(sample)
        return sample + probs - probs.detach()

    @property
    def mode(self) -> torch.Tensor:
        """The int64 one-hot vector of the most likely category."""
        return torch.nn.functional.one_hot(self.logits.argmax(-1), self.logits.shape[-1])

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """Same as :attr:`mode`."""
        return self.mode


class MaskedCategorical(D.Categorical):
    """A categorical that gives masked-out categories no probability.

    The logits of masked-out categories are replaced by ``neg_inf``: they are never
    sampled, never the mode, and their ``log_prob`` is ``neg_inf``.

    Args:
        logits: unnormalised log-probabilities (last dim = categories).
        probs: probabilities (give one of ``logits`` and ``probs``).
        mask: a boolean tensor broadcasting to the logits, ``True`` where allowed.
        indices: instead of ``mask``, the allowed category indices (last dim), padded
            with ``padding_value`` where rows allow fewer categories.
        neg_inf: the log-probability given to masked-out categories.
        padding_value: the filler value in ``indices``.

    Examples:
        >>> import torch
        >>> from cadence.modules import MaskedCategorical
        >>> dist = MaskedCategorical(logits=torch.zeros(4), mask=torch.tensor([True, False, True, False]))
        >>> sorted(set(dist.sample((100,)).tolist()))
        [0, 2]
        >>> dist.log_prob(torch.tensor(1)).item()
        -inf
    """

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        probs: torch.Tensor | None = None,
        *,
        mask: torch.Tensor | None = None,
        indices: torch.Tensor | None = None,
        neg_inf: float = float("-inf"),
        padding_value: int | None = None,
    ) -> None:
        if (logits is None) == (probs is None):
            raise ValueError("MaskedCategorical: give exactly one of logits and probs")
        if logits is None:
            logits = torch.log(probs)  # type: ignore[arg-type]
        if (mask is None) == (indices is None):
            raise ValueError("MaskedCategorical: give exactly one of mask and indices")
        if indices is not None:
            mask = self._mask_from_indices(indices, logits, padding_value)
        try:
            mask = mask.to(device=logits.device, dtype=torch.bool).expand_as(logits)  # type: ignore[union-attr]
        except RuntimeError:
            raise ValueError(
                f"MaskedCategorical: expected a mask that broadcasts to the logits' shape {tuple(logits.shape)}, "
                f"got shape {tuple(mask.shape)}"  # type: ignore[union-attr]
            ) from None
        self._mask = mask
        self.neg_inf = neg_inf
        masked_logits = torch.where(mask, logits, torch.full_like(logits, neg_inf))
        super().__init__(logits=masked_logits, validate_args=False)

    @staticmethod
    def _mask_from_indices(indices: torch.Tensor, logits: torch.Tensor, padding_value: int | None) -> torch.Tensor:
        indices = indices.to(device=logits.device, dtype=torch.long)
        valid = torch.ones_like(indices, dtype=torch.bool) if padding_value is None else indices != padding_value
        safe_index = torch.where(valid, indices, torch.zeros_like(indices))
        lead = torch.broadcast_shapes(indices.shape[:-1], logits.shape[:-1])
        counts = torch.zeros(*lead, logits.shape[-1], dtype=torch.long, device=logits.device)
        # scatter_add counts the hits, so padding entries (added as 0) cannot erase a real one
        counts.scatter_add_(-1, safe_index.expand(*lead, indices.shape[-1]), valid.long().expand(*lead, indices.shape[-1]))
        return counts > 0

    @property
    def mask(self) -> torch.Tensor:
        """The boolean mask of allowed categories, shaped like the logits."""
        return self._mask

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        """The log-probability of category indices; ``neg_inf`` for masked-out ones."""
        lp = super().log_prob(value)
        index = value.long().clamp(0, self._mask.shape[-1] - 1)
        allowed = self._mask.expand(*index.shape, self._mask.shape[-1]).gather(-1, index.unsqueeze(-1)).squeeze(-1)
        return torch.where(allowed, lp, torch.full_like(lp, self.neg_inf))

    @property
    def mode(self) -> torch.Tensor:
        """The most likely allowed category."""
        return self.logits.argmax(-1)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """Same as :attr:`mode`."""
        return self.mode

