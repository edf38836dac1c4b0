"""Recurrent state in sample collection: sequence lengths, initial-state fill, shifted infos.

RLlib's rules, as :class:`~cadence.interop.rllib.collectors.SimpleListCollector` applies them:

* a view with ``batch_repeat_value=R > 1`` (the ``state_in_*`` views) holds one row per
  ``R`` steps of a fragment: the value at the first step of each sequence;
* each fragment (one episode, one agent, between two cuts) is cut into sequences of ``R``
  steps, the last one shorter: :func:`sequence_lengths`; a sequence never crosses an
  episode or a fragment end, so the fragment's batch gets ``seq_lens`` summing to its rows;
* before an episode's first step, a view on ``state_out_i`` reads the policy's initial
  state ``policy.get_initial_state()[i]`` (RLlib fills its state buffers with it), not zeros:
  :func:`initial_states` and :func:`state_prefix`. A window such as ``shift="-3:-1"`` at
  the first step of an episode therefore holds the initial state three times;
* a shifted view on ``infos`` reads ``{}`` outside the collected steps: :func:`infos_view`.

Examples:
    >>> sequence_lengths(10, 4).tolist()
    [4, 4, 2]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from cadence.interop.rllib.view_requirement import ViewRequirement

__all__ = ["sequence_lengths", "repeat_value", "initial_states", "state_prefix", "infos_view"]


def sequence_lengths(num_steps: int, max_seq_len: int) -> np.ndarray:
    """The ``seq_lens`` of one fragment of ``num_steps`` steps: ``max_seq_len`` each, the last shorter.

    Args:
        num_steps: The fragment's steps (>= 0).
        max_seq_len: The sequence length ``R`` (the views' ``batch_repeat_value``, >= 1).

    Returns:
        An int32 array of ``ceil(num_steps / max_seq_len)`` lengths summing to ``num_steps``.

    Raises:
        ValueError: ``num_steps < 0`` or ``max_seq_len < 1`` (names which, and the value).

    Examples:
        >>> sequence_lengths(8, 4).tolist(), sequence_lengths(3, 4).tolist(), sequence_lengths(0, 4).tolist()
        ([4, 4], [3], [])
    """
    if num_steps < 0:
        raise ValueError(f"sequence_lengths: num_steps must be >= 0, got {num_steps}")
    if max_seq_len < 1:
        raise ValueError(f"sequence_lengths: max_seq_len must be >= 1, got {max_seq_len}")
    full, rest = divmod(int(num_steps), int(max_seq_len))
    return np.array([max_seq_len] * full + ([rest] if rest else []), dtype=np.int32)


def repeat_value(views: Mapping[str, ViewRequirement]) -> int:
    """The sequence length of a policy's views: the one ``batch_repeat_value`` above 1, or 1.

    Args:
        views: The policy's view requirements.

    Returns:
        ``R`` if some views have ``batch_repeat_value=R > 1``, else 1.

    Raises:
        ValueError: a view with ``batch_repeat_value > 1`` is not named ``state_in_*`` (only
            those columns hold one row per sequence), or two views have different values
            above 1; the message names the views.

    Examples:
        >>> repeat_value({"obs": ViewRequirement(), "state_in_0": ViewRequirement("state_out_0", shift=-1, batch_repeat_value=4)})
        4
        >>> repeat_value({"h": ViewRequirement("state_out_0", shift=-1, batch_repeat_value=4)})
        Traceback (most recent call last):
        ...
        ValueError: view 'h': batch_repeat_value=4 needs a 'state_in_*' name (the columns with one row per sequence); expected batch_repeat_value=1 for other views
    """
    found: dict[str, int] = {}
    for view_col, view in views.items():
        if view.batch_repeat_value == 1:
            continue
        if not view_col.startswith("state_in_"):
            raise ValueError(
                f"view {view_col!r}: batch_repeat_value={view.batch_repeat_value} needs a 'state_in_*' name "
                "(the columns with one row per sequence); expected batch_repeat_value=1 for other views"
            )
        found[view_col] = int(view.batch_repeat_value)
    if len(set(found.values())) > 1:
        raise ValueError(f"views {found}: the batch_repeat_value of all state_in_* views must be equal (one max_seq_len)")
    return next(iter(found.values()), 1)


def initial_states(policy: Any) -> dict[str, np.ndarray]:
    """``{"state_out_i": initial state i}`` from ``policy.get_initial_state()`` (``{}`` without one).

    Args:
        policy: A policy (anything without ``get_initial_state`` has no state).

    Returns:
        One numpy array per state tensor, keyed by the column that holds its outputs.

    Examples:
        >>> class Stateful:
        ...     def get_initial_state(self):
        ...         return [torch.ones(2)]
        >>> initial_states(Stateful())
        {'state_out_0': array([1., 1.], dtype=float32)}
    """
    getter = getattr(policy, "get_initial_state", None)
    states = list(getter()) if callable(getter) else []
    out: dict[str, np.ndarray] = {}
    for i, state in enumerate(states):
        if isinstance(state, torch.Tensor):
            state = state.detach().cpu().numpy()
        out[f"state_out_{i}"] = np.asarray(state)
    return out


def state_prefix(initial: np.ndarray, depth: int, dtype: Any = None) -> np.ndarray:
    """``depth`` copies of an initial state, time first: what precedes an episode's first state_out.

    Args:
        initial: The initial state (one step's value).
        depth: How many steps before the episode start a view may read.
        dtype: The output dtype (default: the state's).

    Returns:
        Shape ``[depth, *initial.shape]``.

    Examples:
        >>> state_prefix(np.array([1.0, 2.0]), 2).tolist()
        [[1.0, 2.0], [1.0, 2.0]]
    """
    value = np.asarray(initial, dtype=dtype)
    return np.broadcast_to(value, (max(0, int(depth)),) + value.shape).copy()


def infos_view(view_col: str, view: ViewRequirement, infos: list[Any], start: int, num_steps: int) -> list[Any]:
    """A (possibly shifted) view on ``infos`` for steps ``start .. start + num_steps - 1`` of ``infos``.

    Steps outside ``infos`` (before what is kept of the episode, or past the collected
    steps) read ``{}``. A list or range shift gives one list of dicts per row.

    Args:
        view_col: The view's name (for errors).
        view: The view (``batch_repeat_value`` must be 1).
        infos: The collected infos of the episode, one per step.
        start: The first step of the fragment in ``infos``.
        num_steps: The fragment's steps.

    Returns:
        One entry per step: a dict, or a list of dicts for a multi-shift view.

    Raises:
        ValueError: ``batch_repeat_value != 1`` (names the view).

    Examples:
        >>> infos = [{"a": 0}, {"a": 1}, {"a": 2}]
        >>> infos_view("prev_infos", ViewRequirement("infos", shift=-1), infos, 0, 3)
        [{}, {'a': 0}, {'a': 1}]
        >>> infos_view("next", ViewRequirement("infos", shift="0:1"), infos, 2, 1)
        [[{'a': 2}, {}]]
    """
    if view.batch_repeat_value != 1:
        raise ValueError(
            f"view {view_col!r} on 'infos': batch_repeat_value must be 1, got {view.batch_repeat_value}"
        )
    shifts = [int(s) for s in view.shift_arr]
    rows: list[Any] = []
    for step in range(start, start + num_steps):
        values = [infos[step + s] if 0 <= step + s < len(infos) else {} for s in shifts]
        rows.append(values if view.multiple_shifts else values[0])
    return rows
