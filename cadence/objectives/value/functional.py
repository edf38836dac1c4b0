"""Return and advantage estimates as plain functions of tensors: TD(0), TD(1), TD(lambda), GAE.

Every function takes tensors of shape ``[*B, T, *F]`` (time along ``time_dim``, ``-2`` by
default, so ``[*B, T, 1]`` for a scalar value) that may hold several trajectories one after
the other. The flags say where a trajectory stops:

* ``done`` marks the last step of a trajectory: no return flows from the steps after it
  into it;
* ``terminated`` (a ``done`` step whose next state has no future, e.g. a crash) adds no
  bootstrap term; a step that is ``done`` but not ``terminated`` (truncated, e.g. a time
  limit) bootstraps from ``next_state_value``. ``terminated`` defaults to ``done``;
* the last step of the data is cut short like a truncation: it bootstraps unless
  ``terminated``.

``gamma`` (and ``lmbda``) may be numbers or tensors broadcastable to the data (one discount
per step: ``return_t = r_t + gamma_t * ...``). With ``rolling_gamma=False`` each gamma
discounts the whole future of its step instead (``return_t = r_t + gamma_t r_{t+1} +
gamma_t**2 r_{t+2} ...``).

The ``vec_*`` functions compute the same numbers as their loop twins without a Python loop
over time: each estimate is a linear recurrence ``G_t = x_t + c_t * G_{t+1}``, solved by
cyclic reduction in place (at strides 1, 2, 4, ... each step absorbs the one ``stride``
after it, then the values are spread back from the largest stride down), which costs a few
passes over the data, allocates nothing beyond the result and keeps the loop's float
precision (no division by cumulative products).

Examples:
    >>> import torch
    >>> reward = torch.ones(1, 4, 1)
    >>> next_value = torch.zeros(1, 4, 1)
    >>> done = torch.tensor([False, True, False, False]).view(1, 4, 1)
    >>> vec_td1_return_estimate(0.5, next_value, reward, done).flatten().tolist()
    [1.5, 1.0, 1.5, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "generalized_advantage_estimate",
    "td0_advantage_estimate",
    "td0_return_estimate",
    "td1_advantage_estimate",
    "td1_return_estimate",
    "td_lambda_advantage_estimate",
    "td_lambda_return_estimate",
    "vec_generalized_advantage_estimate",
    "vec_td1_advantage_estimate",
    "vec_td1_return_estimate",
    "vec_td_lambda_advantage_estimate",
    "vec_td_lambda_return_estimate",
]

Coefficient = float | torch.Tensor


# ---------------------------------------------------------------------------- checks
def _as_float_tensor(name: str, value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}.")
    return value.to(like.dtype) if value.dtype != like.dtype else value


def _broadcast(function: str, **tensors: torch.Tensor) -> list[torch.Tensor]:
    """Broadcasts the named tensors together; the error names them and their shapes."""
    shapes = {t.shape for t in tensors.values()}
    if len(shapes) == 1:  # the common case, without torch.broadcast_shapes' Python-level work
        return list(tensors.values())
    try:
        shape = torch.broadcast_shapes(*(t.shape for t in tensors.values()))
    except RuntimeError:
        shapes = ", ".join(f"{name} {list(t.shape)}" for name, t in tensors.items())
        raise ValueError(
            f"{function}: the tensors must have broadcastable [*B, T, *F] shapes with the same T, got {shapes}."
        ) from None
    return [t.expand(shape) for t in tensors.values()]


def _time_axis(function: str, time_dim: int, ndim: int) -> int:
    if not -ndim <= time_dim < ndim:
        raise ValueError(f"{function}: time_dim={time_dim} is out of range for {ndim}-dim tensors.")
    return time_dim % ndim


def _coefficient(function: str, name: str, value: Coefficient, like: torch.Tensor) -> torch.Tensor:
    """``gamma``/``lmbda`` as a tensor of ``like``'s dtype and device, broadcastable to it."""
    tensor = torch.as_tensor(value, dtype=like.dtype, device=like.device)
    if tensor.ndim == 0:  # a number fits any data
        return tensor
    try:
        fits = torch.broadcast_shapes(tensor.shape, like.shape) == like.shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"{function}: {name} must be a number or a tensor broadcastable to the data's shape "
            f"{list(like.shape)}, got shape {list(tensor.shape)}."
        )
    return tensor


def _varies(gamma: Coefficient) -> bool:
    """Whether ``gamma`` is a tensor whose values differ."""
    return isinstance(gamma, torch.Tensor) and gamma.numel() > 1 and not bool((gamma == gamma.flatten()[0]).all())


def _per_start_gamma(compute: Callable[[float], torch.Tensor], gamma: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``rolling_gamma=False``: the estimate at step ``t`` discounts its whole future with
    ``gamma_t``, which is the estimate computed with that gamma throughout, read at ``t``.
    One solve per distinct gamma value (few, in practice)."""
    gamma = torch.as_tensor(gamma, dtype=like.dtype, device=like.device)
    result: torch.Tensor | None = None
    for value in torch.unique(gamma).tolist():
        estimate = compute(value)
        result = estimate if result is None else torch.where(gamma == value, estimate, result)
    assert result is not None
    return result


def _flags(
    function: str, done: torch.Tensor | None, terminated: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(done, terminated) as bool tensors, each defaulting to the other."""
    if done is None and terminated is None:
        raise TypeError(f"{function}: give done (and terminated); both were None.")
    if done is None:
        done = terminated
    if terminated is None:
        terminated = done
    for name, flag in (("done", done), ("terminated", terminated)):
        if not isinstance(flag, torch.Tensor):
            raise TypeError(f"{function}: {name} must be a torch.Tensor, got {type(flag).__name__}.")
    return done.bool(), terminated.bool()  # type: ignore[union-attr]


def _time_last(axis: int, shape: torch.Size, *tensors: torch.Tensor) -> list[torch.Tensor]:
    """Views of ``tensors`` (broadcast to ``shape``) with time as the last dim (free for
    ``[*B, T, 1]`` data)."""
    return [t.expand(shape).movedim(axis, -1) for t in tensors]


def _coefficients_time_last(axis: int, shape: torch.Size, *coefficients: torch.Tensor) -> list[torch.Tensor]:
    """``_time_last`` for gamma/lmbda terms, a one-element one staying a scalar (cheaper to broadcast)."""
    return [c.reshape(()) if c.numel() == 1 else c.expand(shape).movedim(axis, -1) for c in coefficients]


def _may_overwrite(*inputs: torch.Tensor) -> bool:
    """Whether work arrays computed from ``inputs`` may be rewritten in place: no gradient
    flows through them (autograd may have saved a work array for the backward pass)."""
    return not (torch.is_grad_enabled() and any(tensor.requires_grad for tensor in inputs))


def _continues(done: torch.Tensor, terminated: torch.Tensor) -> torch.Tensor:
    """True where the return flows in from the next step (time last): the step is neither
    done nor terminated, and is not the data's last step."""
    continues = torch.logical_or(done, terminated).logical_not_()
    continues[..., -1] = False
    return continues


# ---------------------------------------------------------------------------- solvers
def _solve_loop(coefficient: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """``G_t = source_t + coefficient_t * G_{t+1}`` (``G_T = 0``) along the last dim, by a
    loop over time."""
    result = torch.empty_like(source)
    running = torch.zeros_like(source[..., 0])
    for t in range(source.shape[-1] - 1, -1, -1):
        running = torch.addcmul(source[..., t], coefficient[..., t], running)
        result[..., t] = running
    return result


def _cyclic_reduction_in_place(coefficient: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """``G_t = source_t + coefficient_t * G_{t+1}`` (``G_T = 0``) along the last dim, by cyclic
    reduction in place: ``source`` becomes ``G`` (and is returned), ``coefficient`` is used up.

    Both must be full arrays the caller owns (not views of user data, not expanded). Up-sweep:
    at stride ``s`` (1, 2, 4, ...) each step ``t`` that is a multiple of ``2s`` absorbs the
    step ``t + s``, so that ``G_t = source_t + coefficient_t * G_{t+2s}``. Down-sweep: from the
    largest stride down, the steps ``t = s, 3s, ...`` read the final ``G_{t+s}``. Two
    strided in-place operations per level and one per level back: no temporary arrays (a
    fresh megabyte costs more than the arithmetic on it), the loop's float precision."""
    length = source.shape[-1]
    stride = 1
    while stride < length:
        step = 2 * stride
        tails = source[..., stride::step]
        pairs = tails.shape[-1]
        head_coefficient = coefficient[..., 0::step][..., :pairs]
        source[..., 0::step][..., :pairs].addcmul_(head_coefficient, tails)
        head_coefficient.mul_(coefficient[..., stride::step])
        stride = step
    while stride > 1:
        half = stride // 2
        following = source[..., stride::stride]
        count = following.shape[-1]
        source[..., half::stride][..., :count].addcmul_(coefficient[..., half::stride][..., :count], following)
        stride = half
    return source


class _LinearRecurrence(torch.autograd.Function):
    """The in-place solve for inputs that need gradients. With ``g = dL/dG``, the adjoint
    ``lambda_t = g_t + c_{t-1} lambda_{t-1}`` is the same recurrence run forwards in time
    (solved on time-reversed data), and ``dL/dx_t = lambda_t``, ``dL/dc_t = lambda_t G_{t+1}``."""

    @staticmethod
    def forward(ctx: Any, coefficient: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
        result = _cyclic_reduction_in_place(coefficient.clone(), source.clone())
        ctx.save_for_backward(coefficient, result)
        return result

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        coefficient, result = ctx.saved_tensors
        # reversed time: step tau reads c_{T-2-tau}; the last reversed step (t = 0) reads none
        reversed_coefficient = torch.zeros_like(result)
        reversed_coefficient[..., :-1] = coefficient.expand(result.shape).flip(-1)[..., 1:]
        adjoint = _cyclic_reduction_in_place(reversed_coefficient, grad.flip(-1)).flip(-1)
        grad_coefficient = None
        if ctx.needs_input_grad[0]:
            grad_coefficient = torch.zeros_like(result)
            grad_coefficient[..., :-1] = adjoint[..., :-1] * result[..., 1:]
            grad_coefficient = grad_coefficient.sum_to_size(coefficient.shape)
        return grad_coefficient, adjoint


def _solve_vectorized(coefficient: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """The loop's recurrence without a loop over time, overwriting ``coefficient`` and
    ``source`` (fresh arrays the caller owns) unless gradients flow through them."""
    if torch.is_grad_enabled() and (coefficient.requires_grad or source.requires_grad):
        return _LinearRecurrence.apply(coefficient, source)
    return _cyclic_reduction_in_place(coefficient, source)


Solver = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


# ---------------------------------------------------------------------------- TD(0)
def td0_return_estimate(
    gamma: Coefficient,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    done: torch.Tensor | None = None,
) -> torch.Tensor:
    """TD(0) return: ``reward + gamma * next_state_value``, without the bootstrap at terminated steps.

    Args:
        gamma: the discount (a number or a tensor broadcastable to the data).
        next_state_value: the value of the next state, ``[*B, *F]``.
        reward: the reward, ``[*B, *F]``.
        terminated: where the next state has no future; defaults to ``done``.
        done: accepted for symmetry with the other estimates; a TD(0) return does not need it
            (truncated steps bootstrap like any other).

    Examples:
        >>> import torch
        >>> td0_return_estimate(0.5, torch.tensor([[2.0], [2.0]]), torch.ones(2, 1),
        ...                     torch.tensor([[False], [True]])).flatten().tolist()
        [2.0, 1.0]
    """
    if terminated is None and done is None:
        raise TypeError("td0_return_estimate: give terminated (or done); both were None.")
    flag = (terminated if terminated is not None else done).bool()  # type: ignore[union-attr]
    next_state_value = _as_float_tensor("next_state_value", next_state_value, reward)
    reward, next_state_value, flag = _broadcast(
        "td0_return_estimate", reward=reward, next_state_value=next_state_value, terminated=flag
    )
    gamma_t = _coefficient("td0_return_estimate", "gamma", gamma, reward)
    return reward + gamma_t * (~flag).to(reward.dtype) * next_state_value


def td0_advantage_estimate(
    gamma: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
) -> torch.Tensor:
    """TD(0) advantage: the TD(0) return minus ``state_value``.

    Args:
        gamma: the discount.
        state_value: the value of the state, ``[*B, *F]``.
        next_state_value: the value of the next state.
        reward: the reward.
        done: where a trajectory ends (a TD(0) estimate only needs it as ``terminated``'s default).
        terminated: where the next state has no future; defaults to ``done``.

    Examples:
        >>> import torch
        >>> td0_advantage_estimate(0.5, torch.ones(1), torch.full((1,), 4.0), torch.ones(1),
        ...                        torch.zeros(1, dtype=torch.bool)).tolist()
        [2.0]
    """
    _, terminated = _flags("td0_advantage_estimate", done, terminated)
    return td0_return_estimate(gamma, next_state_value, reward, terminated) - state_value


# ---------------------------------------------------------------------------- TD(lambda), TD(1)
def _lambda_return(
    function: str,
    solver: Solver,
    gamma: Coefficient,
    lmbda: Coefficient,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None,
    rolling_gamma: bool | None,
    time_dim: int,
) -> torch.Tensor:
    """``G_t = r_t + gamma_t * ((1 - lmbda) V_{t+1} + lmbda G_{t+1})`` inside a trajectory,
    ``r_t + gamma_t V_{t+1}`` at a truncated or last step, ``r_t`` at a terminated one."""
    if rolling_gamma is False and _varies(gamma):
        return _per_start_gamma(
            lambda value: _lambda_return(
                function, solver, value, lmbda, next_state_value, reward, done, terminated, None, time_dim
            ),
            gamma,  # type: ignore[arg-type]
            reward,
        )
    done, terminated = _flags(function, done, terminated)
    next_state_value = _as_float_tensor("next_state_value", next_state_value, reward)
    reward, next_state_value, done, terminated = _broadcast(
        function, reward=reward, next_state_value=next_state_value, done=done, terminated=terminated
    )
    shape = reward.shape
    axis = _time_axis(function, time_dim, reward.ndim)
    gamma_v = _coefficient(function, "gamma", gamma, reward)
    lmbda_v = _coefficient(function, "lmbda", lmbda, reward)
    # the products of the coefficients before they are broadcast (scalars stay scalars)
    reward, next_state_value, done, terminated = _time_last(axis, shape, reward, next_state_value, done, terminated)
    gamma_v, carried_weight, bootstrap_weight = _coefficients_time_last(
        axis, shape, gamma_v, gamma_v * lmbda_v, gamma_v * (1.0 - lmbda_v)
    )
    continues = _continues(done, terminated)
    zero = reward.new_zeros(())
    # V(s_{t+1})'s weight: gamma (1 - lmbda) inside a trajectory, gamma at a truncated or last
    # step, 0 at a terminated one. Without gradients one work array takes these weights,
    # then the coefficients: each fresh full-size array costs about as much as the
    # arithmetic on it.
    in_place = _may_overwrite(reward, next_state_value, gamma_v, lmbda_v)
    weight = torch.where(terminated, zero, gamma_v)
    weight = torch.where(continues, bootstrap_weight, weight, out=weight if in_place else None)
    source = torch.addcmul(reward, weight, next_state_value)
    coefficient = torch.where(continues, carried_weight, zero, out=weight if in_place else None)
    return solver(coefficient, source).movedim(-1, axis)


def td_lambda_return_estimate(
    gamma: Coefficient,
    lmbda: Coefficient,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(lambda) return, by a loop over time (see ``vec_td_lambda_return_estimate``).

    ``G_t = r_t + gamma * ((1 - lmbda) * V(s_{t+1}) + lmbda * G_{t+1})`` inside a trajectory;
    at its last step ``G_t = r_t + gamma * V(s_{t+1})`` if truncated, ``r_t`` if terminated.

    Args:
        gamma: the discount (number or tensor broadcastable to the data).
        lmbda: the trajectory discount (number or tensor).
        next_state_value: ``V(s_{t+1})``, ``[*B, T, *F]``.
        reward: ``[*B, T, *F]``.
        done: where trajectories end.
        terminated: where the next state has no future; defaults to ``done``.
        rolling_gamma: ``None``/``True``: ``gamma_t`` discounts step ``t + 1``. ``False``:
            ``gamma_t`` discounts the whole future of step ``t``.
        time_dim: the time dimension.

    Examples:
        >>> import torch
        >>> reward, value = torch.ones(1, 3, 1), torch.zeros(1, 3, 1)
        >>> done = torch.zeros(1, 3, 1, dtype=torch.bool)
        >>> td_lambda_return_estimate(1.0, 0.5, value, reward, done).flatten().tolist()
        [1.75, 1.5, 1.0]
    """
    return _lambda_return(
        "td_lambda_return_estimate", _solve_loop, gamma, lmbda, next_state_value, reward, done, terminated,
        rolling_gamma, time_dim,
    )


def vec_td_lambda_return_estimate(
    gamma: Coefficient,
    lmbda: Coefficient,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(lambda) return without a Python loop over time; same arguments and numbers as
    ``td_lambda_return_estimate``.

    Examples:
        >>> import torch
        >>> reward, value = torch.ones(1, 3, 1), torch.zeros(1, 3, 1)
        >>> done = torch.zeros(1, 3, 1, dtype=torch.bool)
        >>> vec_td_lambda_return_estimate(1.0, 0.5, value, reward, done).flatten().tolist()
        [1.75, 1.5, 1.0]
    """
    return _lambda_return(
        "vec_td_lambda_return_estimate", _solve_vectorized, gamma, lmbda, next_state_value, reward, done,
        terminated, rolling_gamma, time_dim,
    )


def td_lambda_advantage_estimate(
    gamma: Coefficient,
    lmbda: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(lambda) advantage: ``td_lambda_return_estimate(...) - state_value`` (loop over time).

    Examples:
        >>> import torch
        >>> ones, zeros = torch.ones(1, 2, 1), torch.zeros(1, 2, 1)
        >>> td_lambda_advantage_estimate(1.0, 1.0, ones, zeros, ones, zeros.bool()).flatten().tolist()
        [1.0, 0.0]
    """
    returns = td_lambda_return_estimate(
        gamma, lmbda, next_state_value, reward, done, terminated, rolling_gamma, time_dim=time_dim
    )
    return returns - state_value


def vec_td_lambda_advantage_estimate(
    gamma: Coefficient,
    lmbda: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(lambda) advantage without a Python loop over time.

    Examples:
        >>> import torch
        >>> ones, zeros = torch.ones(1, 2, 1), torch.zeros(1, 2, 1)
        >>> vec_td_lambda_advantage_estimate(1.0, 1.0, ones, zeros, ones, zeros.bool()).flatten().tolist()
        [1.0, 0.0]
    """
    returns = vec_td_lambda_return_estimate(
        gamma, lmbda, next_state_value, reward, done, terminated, rolling_gamma, time_dim=time_dim
    )
    return returns - state_value


def td1_return_estimate(
    gamma: Coefficient,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(1) (Monte-Carlo) return, by a loop over time: the discounted sum of the rewards to
    the end of the trajectory, plus ``gamma * V`` of the state after it if it was truncated
    (or cut by the end of the data).

    Examples:
        >>> import torch
        >>> td1_return_estimate(0.5, torch.full((1, 2, 1), 8.0), torch.ones(1, 2, 1),
        ...                     torch.zeros(1, 2, 1, dtype=torch.bool)).flatten().tolist()
        [3.5, 5.0]
    """
    return _lambda_return(
        "td1_return_estimate", _solve_loop, gamma, 1.0, next_state_value, reward, done, terminated, rolling_gamma,
        time_dim,
    )


def vec_td1_return_estimate(
    gamma: Coefficient,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(1) return without a Python loop over time.

    Examples:
        >>> import torch
        >>> vec_td1_return_estimate(0.5, torch.full((1, 2, 1), 8.0), torch.ones(1, 2, 1),
        ...                         torch.zeros(1, 2, 1, dtype=torch.bool)).flatten().tolist()
        [3.5, 5.0]
    """
    return _lambda_return(
        "vec_td1_return_estimate", _solve_vectorized, gamma, 1.0, next_state_value, reward, done, terminated,
        rolling_gamma, time_dim,
    )


def td1_advantage_estimate(
    gamma: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(1) advantage: ``td1_return_estimate(...) - state_value`` (loop over time).

    Examples:
        >>> import torch
        >>> ones = torch.ones(1, 2, 1)
        >>> td1_advantage_estimate(1.0, ones, 0 * ones, ones, (0 * ones).bool()).flatten().tolist()
        [1.0, 0.0]
    """
    returns = td1_return_estimate(gamma, next_state_value, reward, done, terminated, rolling_gamma, time_dim=time_dim)
    return returns - state_value


def vec_td1_advantage_estimate(
    gamma: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(1) advantage without a Python loop over time.

    Examples:
        >>> import torch
        >>> ones = torch.ones(1, 2, 1)
        >>> vec_td1_advantage_estimate(1.0, ones, 0 * ones, ones, (0 * ones).bool()).flatten().tolist()
        [1.0, 0.0]
    """
    returns = vec_td1_return_estimate(
        gamma, next_state_value, reward, done, terminated, rolling_gamma, time_dim=time_dim
    )
    return returns - state_value


# ---------------------------------------------------------------------------- GAE
def _gae(
    function: str,
    solver: Solver,
    gamma: Coefficient,
    lmbda: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None,
    time_dim: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``A_t = delta_t + gamma_t lmbda_t A_{t+1}`` inside a trajectory, ``delta_t`` at its end,
    with ``delta_t = r_t + gamma_t V(s_{t+1}) [not terminated] - V(s_t)``."""
    done, terminated = _flags(function, done, terminated)
    state_value = _as_float_tensor("state_value", state_value, reward)
    next_state_value = _as_float_tensor("next_state_value", next_state_value, reward)
    reward, state_value, next_state_value, done, terminated = _broadcast(
        function, reward=reward, state_value=state_value, next_state_value=next_state_value, done=done,
        terminated=terminated,
    )
    shape = reward.shape
    axis = _time_axis(function, time_dim, reward.ndim)
    gamma_v = _coefficient(function, "gamma", gamma, reward)
    lmbda_v = _coefficient(function, "lmbda", lmbda, reward)
    moved = _time_last(axis, shape, reward, state_value, next_state_value, done, terminated)
    reward_l, state_value_l, next_state_value_l, done_l, terminated_l = moved
    gamma_l, carried_weight = _coefficients_time_last(axis, shape, gamma_v, gamma_v * lmbda_v)
    continues = _continues(done_l, terminated_l)
    zero = reward.new_zeros(())
    # (without gradients one work array holds the bootstrap weights, then the coefficients)
    in_place = _may_overwrite(reward, state_value, next_state_value, gamma_v, lmbda_v)
    weight = torch.where(terminated_l, zero, gamma_l)
    delta = torch.sub(reward_l, state_value_l).addcmul_(weight, next_state_value_l)
    coefficient = torch.where(continues, carried_weight, zero, out=weight if in_place else None)
    advantage = solver(coefficient, delta).movedim(-1, axis)
    return advantage, advantage + state_value


def generalized_advantage_estimate(
    gamma: Coefficient,
    lmbda: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    time_dim: int = -2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimate (GAE), by a loop over time.

    ``delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)`` (no bootstrap term if terminated);
    ``A_t = delta_t + gamma * lmbda * A_{t+1}`` inside a trajectory, ``delta_t`` at its end.

    Args:
        gamma: the discount.
        lmbda: the trajectory discount.
        state_value: ``V(s_t)``, ``[*B, T, *F]``.
        next_state_value: ``V(s_{t+1})``.
        reward: the reward.
        done: where trajectories end.
        terminated: where the next state has no future; defaults to ``done``.
        time_dim: the time dimension.

    Returns:
        ``(advantage, value_target)`` with ``value_target = advantage + state_value``.

    Examples:
        >>> import torch
        >>> zeros = torch.zeros(1, 2, 1)
        >>> advantage, target = generalized_advantage_estimate(
        ...     1.0, 0.5, zeros, zeros, torch.ones(1, 2, 1), zeros.bool())
        >>> advantage.flatten().tolist(), target.flatten().tolist()
        ([1.5, 1.0], [1.5, 1.0])
    """
    return _gae(
        "generalized_advantage_estimate", _solve_loop, gamma, lmbda, state_value, next_state_value, reward, done,
        terminated, time_dim,
    )


def vec_generalized_advantage_estimate(
    gamma: Coefficient,
    lmbda: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    time_dim: int = -2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE without a Python loop over time; same arguments and numbers as
    ``generalized_advantage_estimate``.

    Examples:
        >>> import torch
        >>> zeros = torch.zeros(1, 2, 1)
        >>> advantage, target = vec_generalized_advantage_estimate(
        ...     1.0, 0.5, zeros, zeros, torch.ones(1, 2, 1), zeros.bool())
        >>> advantage.flatten().tolist()
        [1.5, 1.0]
    """
    return _gae(
        "vec_generalized_advantage_estimate", _solve_vectorized, gamma, lmbda, state_value, next_state_value,
        reward, done, terminated, time_dim,
    )
