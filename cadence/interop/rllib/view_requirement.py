"""RLlib's trajectory views: :class:`ViewRequirement` and the numpy core that builds a view.

A *view requirement* says how to build one column of a batch or of an inference input dict
from the data collected in an episode: which underlying column to read (``data_col``),
at which time offsets (``shift``: an int, a list of ints or a range string ``"a:b"`` with
both ends included), how to fill steps outside the episode (``space``), and where the view
is needed (``used_for_compute_actions``, ``used_for_training``).

* :class:`ViewRequirement`: RLlib's constructor, attributes (``shift_arr``, ``shift_from``,
  ``shift_to``, ``shift_step``) and meaning, with every argument checked when it is set.
* :func:`episode_view`: the values of one view at every timestep of one episode, computed
  with one gather (no Python loop over time); steps before the episode start and past its
  end are zeros.
* :func:`check_inference_view` and :func:`inference_view_requirements`: which views an
  inference input dict holds; a view that would need future data there is an error.

Examples:
    >>> import numpy as np
    >>> from cadence.interop.rllib.view_requirement import ViewRequirement, episode_view
    >>> prev_rewards = ViewRequirement("rewards", shift=-1)
    >>> episode_view(prev_rewards, np.array([1.0, 2.0, 3.0]))
    array([0., 1., 2.])
    >>> ViewRequirement(shift="-3:-1").shift_arr.tolist()
    [-3, -2, -1]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from numpy.typing import ArrayLike

from cadence._utils import quoted

__all__ = [
    "ViewRequirement",
    "check_inference_view",
    "episode_view",
    "inference_view_requirements",
    "MAX_SHIFT",
    "num_view_steps",
    "parse_shift",
    "view_changes",
]

ShiftType = int | str | Sequence[int]

#: the farthest step a view may reach back or ahead: a collector keeps that many steps per
#: env for it, so a shift such as ``"-3000000000:0"`` would allocate without bound
MAX_SHIFT = 10_000

_SHIFT_HELP = (
    "an int, a non-empty list of ints, or a range string 'a:b' (or 'a:b:step') "
    "with both ends included, e.g. '-3:-1' for [-3, -2, -1]"
)


# Bumped by every attribute set on any ViewRequirement, so that what a collector derives
# from a set of views (which ones feed inference) is re-derived only when a view changed.
_changes = [0]


def view_changes() -> int:
    """How many attribute sets all ``ViewRequirement`` objects have seen (a cache key).

    Examples:
        >>> before = view_changes()
        >>> ViewRequirement().used_for_training = False
        >>> view_changes() > before
        True
    """
    return _changes[0]


def _default_space() -> gym.spaces.Box:
    # RLlib's default: an unbounded scalar float Box (a reward-like column), shape ().
    return gym.spaces.Box(float("-inf"), float("inf"), shape=(), dtype=np.float32)


def _as_int(value: Any) -> int | None:
    """``value`` as a Python int if it is an integer (bools excluded), else None."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    return None


def _check_reach(offset: int, shift: Any) -> None:
    if abs(offset) > MAX_SHIFT:
        raise ValueError(
            f"ViewRequirement: shift={quoted(shift)} reaches {offset} steps; a view reaches at most "
            f"MAX_SHIFT={MAX_SHIFT} steps back or ahead"
        )


def parse_shift(shift: ShiftType) -> tuple[np.ndarray, int | None, int | None, int | None]:
    """Parses a ``shift`` value into RLlib's offsets.

    Args:
        shift: An int, a non-empty list (or tuple, or 1-D integer array) of ints, or a
            range string ``"a:b"`` / ``"a:b:step"`` whose end ``b`` is included when the
            step reaches it (``"0:2"`` is ``[0, 1, 2]``).

    Returns:
        ``(shift_arr, shift_from, shift_to, shift_step)``: the offsets as a read-only
        int64 array, and the range's parts (all three ``None`` unless ``shift`` is a string).

    Raises:
        ValueError: A string that does not parse, an empty range (``a > b``), a step
            below 1, an empty list, or an offset beyond :data:`MAX_SHIFT`.
        TypeError: ``shift`` of another type, or a list holding something that is not an int.

    Examples:
        >>> arr, start, stop, step = parse_shift("-3:-1")
        >>> arr.tolist(), start, stop, step
        ([-3, -2, -1], -3, -1, 1)
        >>> parse_shift([-2, -1])[0].tolist()
        [-2, -1]
        >>> parse_shift("0:4:2")[0].tolist()
        [0, 2, 4]
        >>> parse_shift("-3000000000:0")
        Traceback (most recent call last):
        ...
        ValueError: ViewRequirement: shift='-3000000000:0' reaches -3000000000 steps; a view reaches at most MAX_SHIFT=10000 steps back or ahead
    """
    shift_from = shift_to = shift_step = None
    as_int = _as_int(shift)
    if as_int is not None:
        _check_reach(as_int, shift)
        offsets = [as_int]
    elif isinstance(shift, str):
        parts = shift.split(":")
        try:
            if len(parts) not in (2, 3):
                raise ValueError
            shift_from, shift_to = int(parts[0]), int(parts[1])
            shift_step = int(parts[2]) if len(parts) == 3 else 1
        except ValueError:
            raise ValueError(
                f"ViewRequirement: shift={quoted(shift)} does not parse; expected {_SHIFT_HELP}"
            ) from None
        if shift_step < 1:
            raise ValueError(
                f"ViewRequirement: shift={quoted(shift)} has step {shift_step}; the step of a "
                "range string must be an int >= 1"
            )
        if shift_from > shift_to:
            raise ValueError(
                f"ViewRequirement: shift={quoted(shift)} is an empty range (start {shift_from} > "
                f"end {shift_to}); expected 'a:b' with a <= b, both ends included"
            )
        _check_reach(shift_from, shift)  # before the range is made
        _check_reach(shift_to, shift)
        offsets = list(range(shift_from, shift_to + 1, shift_step))
    elif isinstance(shift, (list, tuple, np.ndarray)):
        items = np.asarray(shift).tolist() if isinstance(shift, np.ndarray) else list(shift)
        if isinstance(shift, np.ndarray) and shift.ndim != 1:
            raise TypeError(
                f"ViewRequirement: shift must be a 1-D list of ints, got an array of shape "
                f"{shift.shape}"
            )
        if not items:
            raise ValueError(f"ViewRequirement: shift={quoted(shift)} is empty; expected {_SHIFT_HELP}")
        if len(items) > 2 * MAX_SHIFT + 1:  # each offset is a column of every view row
            raise ValueError(
                f"ViewRequirement: shift={quoted(shift)} lists {len(items)} offsets; at most {2 * MAX_SHIFT + 1} "
                f"(every step within MAX_SHIFT={MAX_SHIFT})"
            )
        offsets = []
        for position, item in enumerate(items):
            item_int = _as_int(item)
            if item_int is None:
                raise TypeError(
                    f"ViewRequirement: shift[{position}]={quoted(item)} ({type(item).__name__}) is "
                    f"not an int; expected {_SHIFT_HELP}"
                )
            _check_reach(item_int, shift)
            offsets.append(item_int)
    else:
        raise TypeError(
            f"ViewRequirement: shift={quoted(shift)} ({type(shift).__name__}) is not supported; "
            f"expected {_SHIFT_HELP}"
        )
    shift_arr = np.asarray(offsets, dtype=np.int64)
    # Read-only: the offsets are derived from `shift` and must not drift from it.
    shift_arr.setflags(write=False)
    return shift_arr, shift_from, shift_to, shift_step


class ViewRequirement:
    """One view (a column of a batch or input dict) on the data collected in an episode.

    Args:
        data_col: The underlying data column to read; ``None`` means the key under which
            this requirement sits in a view-requirements dict.
        space: A gymnasium space telling the shape and dtype of the zeros used for steps
            outside the episode (``t < 0`` or past its end). Default, as in RLlib: an
            unbounded scalar float ``Box`` (shape ``()``, e.g. rewards); with the default,
            :func:`episode_view` pads with zeros shaped like the data instead.
        shift: An int (``-1``: previous step, ``1``: next step), a list of ints
            (``[-2, -1]``: two values each step) or a range string ``"a:b"`` with both ends
            included (``"-3:-1"``: 3 steps; ``"0:2"``: ``[0, 1, 2]``); ``"a:b:step"`` too.
        index: An absolute position in the trajectory; stored as RLlib does (whose
            collectors no longer read it); the functions here do not use it.
        batch_repeat_value: Build the view only every this many steps (``t = 0, R, 2R, ...``),
            e.g. ``max_seq_len`` for a recurrent ``state_in`` view read once per sequence.
            An int >= 1.
        used_for_compute_actions: Whether inference input dicts hold this view.
        used_for_training: Whether train batches hold this view.

    Attributes:
        shift_arr: The offsets as a read-only int64 array (``shift=-1`` -> ``[-1]``).
        shift_from, shift_to, shift_step: The parts of a range string; ``None`` otherwise.

    Raises:
        ValueError: A shift string that does not parse or is an empty range, a
            ``batch_repeat_value`` below 1.
        TypeError: A non-int in a shift list, a ``space`` that is not a gymnasium space,
            a non-str ``data_col``, a non-int ``index``.

    Examples:
        >>> ViewRequirement("actions", shift=-1).shift_arr.tolist()
        [-1]
        >>> frames = ViewRequirement("obs", shift="-3:0")
        >>> frames.shift_arr.tolist(), frames.shift_from, frames.shift_to
        ([-3, -2, -1, 0], -3, 0)
        >>> ViewRequirement(shift=-1) == ViewRequirement(shift=-1)
        True
        >>> ViewRequirement(shift="0:2")  # doctest: +NORMALIZE_WHITESPACE
        ViewRequirement(data_col=None, space=Box(-inf, inf, (), float32), shift='0:2',
            index=None, batch_repeat_value=1, used_for_compute_actions=True,
            used_for_training=True)
    """

    # Mutable (pruning flips `used_for_training`), so not hashable, like RLlib's dataclass.

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        _changes[0] += 1

    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        data_col: str | None = None,
        space: gym.Space | None = None,
        shift: ShiftType = 0,
        index: int | None = None,
        batch_repeat_value: int = 1,
        used_for_compute_actions: bool = True,
        used_for_training: bool = True,
    ) -> None:
        self.data_col = data_col
        self.space = space
        self.shift = shift
        self.index = index
        self.batch_repeat_value = batch_repeat_value
        self.used_for_compute_actions = bool(used_for_compute_actions)
        self.used_for_training = bool(used_for_training)

    # Properties re-check on assignment so that a later edit cannot leave a stale state.
    @property
    def data_col(self) -> str | None:
        """The underlying column (``None``: the key this requirement sits under)."""
        return self._data_col

    @data_col.setter
    def data_col(self, value: str | None) -> None:
        if value is not None and not isinstance(value, str):
            raise TypeError(
                f"ViewRequirement: data_col must be a str or None, got {value!r} "
                f"({type(value).__name__})"
            )
        self._data_col = value

    @property
    def space(self) -> gym.Space:
        """The space of one step's value (RLlib's scalar ``Box`` unless one was given)."""
        return self._space

    @space.setter
    def space(self, value: gym.Space | None) -> None:
        if value is None:
            self._space, self._space_given = _default_space(), False
            return
        if not isinstance(value, gym.Space):
            raise TypeError(
                f"ViewRequirement: space must be a gymnasium.spaces.Space or None, got "
                f"{value!r} ({type(value).__name__})"
            )
        self._space, self._space_given = value, True

    @property
    def space_given(self) -> bool:
        """Whether ``space`` was set explicitly (``False``: RLlib's default scalar ``Box``)."""
        return self._space_given

    @property
    def shift(self) -> ShiftType:
        """The shift as given (an int, a list of ints or a range string)."""
        return self._shift

    @shift.setter
    def shift(self, value: ShiftType) -> None:
        arr, self._shift_from, self._shift_to, self._shift_step = parse_shift(value)
        self._shift_arr = arr
        as_int = _as_int(value)
        if as_int is not None:
            self._shift: ShiftType = as_int
        elif isinstance(value, str):
            self._shift = value
        else:
            self._shift = arr.tolist()

    @property
    def shift_arr(self) -> np.ndarray:
        """The offsets, a read-only int64 array (``[s]`` for an int shift ``s``)."""
        return self._shift_arr

    @property
    def shift_from(self) -> int | None:
        """A range string's start (``None`` unless ``shift`` is a string)."""
        return self._shift_from

    @property
    def shift_to(self) -> int | None:
        """A range string's end, included (``None`` unless ``shift`` is a string)."""
        return self._shift_to

    @property
    def shift_step(self) -> int | None:
        """A range string's step (1 for ``"a:b"``; ``None`` unless ``shift`` is a string)."""
        return self._shift_step

    @property
    def multiple_shifts(self) -> bool:
        """Whether a view has a shift axis (a list or range shift) or not (an int shift)."""
        return not isinstance(self._shift, int)

    @property
    def index(self) -> int | None:
        """The optional absolute position (stored only)."""
        return self._index

    @index.setter
    def index(self, value: int | None) -> None:
        as_int = _as_int(value)
        if value is not None and as_int is None:
            raise TypeError(f"ViewRequirement: index must be an int or None, got {value!r}")
        self._index = as_int

    @property
    def batch_repeat_value(self) -> int:
        """Build the view every this many steps (1: every step)."""
        return self._batch_repeat_value

    @batch_repeat_value.setter
    def batch_repeat_value(self, value: int) -> None:
        as_int = _as_int(value)
        if as_int is None:
            raise TypeError(
                f"ViewRequirement: batch_repeat_value must be an int >= 1, got {value!r} "
                f"({type(value).__name__})"
            )
        if as_int < 1:
            raise ValueError(
                f"ViewRequirement: batch_repeat_value must be an int >= 1, got {as_int}"
            )
        self._batch_repeat_value = as_int

    def __repr__(self) -> str:
        return (
            f"ViewRequirement(data_col={self.data_col!r}, space={self.space!r}, "
            f"shift={self.shift!r}, index={self.index!r}, "
            f"batch_repeat_value={self.batch_repeat_value!r}, "
            f"used_for_compute_actions={self.used_for_compute_actions!r}, "
            f"used_for_training={self.used_for_training!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ViewRequirement):
            return NotImplemented
        # Equal offsets and the same output layout: "-1:0" equals [-1, 0], not shift=-1.
        return (
            self.data_col == other.data_col
            and self.space == other.space
            and self.multiple_shifts == other.multiple_shifts
            and np.array_equal(self.shift_arr, other.shift_arr)
            and self.index == other.index
            and self.batch_repeat_value == other.batch_repeat_value
            and self.used_for_compute_actions == other.used_for_compute_actions
            and self.used_for_training == other.used_for_training
        )


def _view_name(view_requirement: ViewRequirement, view_col: str | None) -> str:
    if view_col is not None:
        return repr(view_col)
    if view_requirement.data_col is not None:
        return repr(view_requirement.data_col)
    return "(unnamed view)"


def _fill_value(
    view_requirement: ViewRequirement, step_shape: tuple[int, ...], dtype: np.dtype, name: str
) -> np.ndarray:
    """The zeros used outside the episode, one step's shape, in the data's dtype."""
    space = view_requirement.space
    # RLlib's default space says nothing about the data (a scalar), and nested spaces have
    # no single shape: pad with zeros like the data then.
    if not view_requirement.space_given or space.shape is None:
        return np.zeros(step_shape, dtype=dtype)
    if tuple(space.shape) != step_shape:
        raise ValueError(
            f"view {name}: its space {space!r} has shape {tuple(space.shape)} but the data "
            f"has shape {step_shape} per step"
        )
    return np.zeros(space.shape, dtype=space.dtype).astype(dtype, copy=False)


def episode_view(
    view_requirement: ViewRequirement,
    column: ArrayLike,
    *,
    num_steps: int | None = None,
    timesteps: ArrayLike | None = None,
    before: ArrayLike | None = None,
    view_col: str | None = None,
) -> np.ndarray:
    """The values of one view at every timestep of one episode (or episode chunk).

    The output at timestep ``t`` holds ``column[t + s]`` for each offset ``s`` of the
    view's shift. Offsets before the data (``t + s < 0``) read from ``before`` when given
    (the steps preceding ``column[0]``, its last row being ``t = -1``), and are zeros
    beyond it; offsets past the data are zeros. The zeros have the ``space``'s shape
    (checked against the data) if one was given, else the data's; the output has the
    data's dtype. All timesteps are gathered at once (no Python loop over time).

    Args:
        view_requirement: The view to build.
        column: The underlying column for one episode, time first: shape ``[N, ...]``.
            ``N`` may exceed the number of steps, e.g. ``N = T + 1`` observations so that
            ``shift=1`` (``new_obs``) reads the real last next-observation.
        num_steps: How many timesteps ``T`` to build the view for (default: ``N``).
        timesteps: Explicit timesteps to build (e.g. ``[t]`` for an inference dict);
            overrides ``num_steps`` and ``batch_repeat_value``.
        before: Data preceding ``column[0]``, shape ``[M, ...]`` (e.g. the end of the
            previous fragment of a truncated episode).
        view_col: The view's name, for error messages (default: ``data_col``).

    Returns:
        Shape ``[T', ...]`` for an int shift, ``[T', len(shift_arr), ...]`` for a list or
        range shift, where ``T' = ceil(T / batch_repeat_value)`` (timesteps
        ``0, R, 2R, ...``) or ``len(timesteps)``.

    Raises:
        ValueError: A 0-d column, ``before`` with another per-step shape, a space that
            does not fit the data, a negative ``num_steps``, non-1-D ``timesteps``.

    Examples:
        >>> import numpy as np
        >>> obs = np.arange(5) + 1.0
        >>> episode_view(ViewRequirement("obs", shift="-3:0"), obs)[:2]
        array([[0., 0., 0., 1.],
               [0., 0., 1., 2.]])
        >>> episode_view(ViewRequirement("obs", shift=1), obs)
        array([2., 3., 4., 5., 0.])
        >>> episode_view(ViewRequirement("obs", shift=-1), obs, before=np.array([9.0]))
        array([9., 1., 2., 3., 4.])
        >>> state = ViewRequirement("state_out", shift=-1, batch_repeat_value=2)
        >>> episode_view(state, obs)
        array([0., 2., 4.])
    """
    name = _view_name(view_requirement, view_col)
    data = np.asarray(column)
    if data.ndim == 0:
        raise ValueError(f"view {name}: the column must have a time axis first, got a 0-d value")
    step_shape = data.shape[1:]
    fill = _fill_value(view_requirement, step_shape, data.dtype, name)

    one_shift = view_requirement.batch_repeat_value == 1 and not view_requirement.multiple_shifts
    if timesteps is not None:
        steps = np.asarray(timesteps)
        if steps.ndim != 1 or (steps.size and steps.dtype.kind not in "iu"):
            raise ValueError(
                f"view {name}: timesteps must be a 1-D array of ints, got shape "
                f"{steps.shape} of dtype {steps.dtype}"
            )
        steps = steps.astype(np.int64, copy=False)
    else:
        n = len(data) if num_steps is None else _as_int(num_steps)
        if n is None or n < 0:
            raise ValueError(f"view {name}: num_steps must be an int >= 0, got {num_steps!r}")
        if one_shift:  # the common views (obs, new_obs, prev_actions, ...): slices, not a gather
            return _one_shift_view(data, int(view_requirement.shift_arr[0]), n, fill, _prior(before, data, name))
        steps = np.arange(0, n, view_requirement.batch_repeat_value, dtype=np.int64)

    prior = _prior(before, data, name)
    # [T', K] data positions; one gather with clipped positions, then the misses get fixed.
    positions = steps[:, None] + view_requirement.shift_arr[None, :]
    length = len(data)
    if length:
        out = data.take(np.clip(positions, 0, length - 1), axis=0)
    else:
        out = np.empty(positions.shape + step_shape, dtype=data.dtype)
    outside = (positions < 0) | (positions >= length)
    if outside.any():
        out[outside] = fill
        if prior is not None:
            in_prior = (positions < 0) & (positions >= -len(prior))
            if in_prior.any():
                out[in_prior] = prior[positions[in_prior] + len(prior)]
    return out if view_requirement.multiple_shifts else out[:, 0]


def _prior(before: ArrayLike | None, data: np.ndarray, name: str) -> np.ndarray | None:
    """``before`` as an array in the data's dtype, checked to have the data's step shape."""
    if before is None:
        return None
    prior = np.asarray(before, dtype=data.dtype)
    if prior.ndim == 0 or prior.shape[1:] != data.shape[1:]:
        raise ValueError(
            f"view {name}: before must have shape [M, *{data.shape[1:]}] like the column, got {prior.shape}"
        )
    return prior


def _one_shift_view(data: np.ndarray, shift: int, num_steps: int, fill: np.ndarray, prior: np.ndarray | None) -> np.ndarray:
    """``episode_view`` for one int shift at timesteps ``0 .. num_steps - 1``, by slices."""
    out = np.empty((num_steps,) + data.shape[1:], dtype=data.dtype)
    lo = min(num_steps, max(0, -shift))  # timesteps before lo read before the data
    hi = max(lo, min(num_steps, len(data) - shift))  # timesteps from hi on read past it
    out[lo:hi] = data[lo + shift:hi + shift]
    out[hi:] = fill
    if lo:
        out[:lo] = fill
        if prior is not None and len(prior):
            first = max(0, -shift - len(prior))  # the first timestep that ``before`` reaches
            if first < lo:
                out[first:lo] = prior[first + shift + len(prior):lo + shift + len(prior)]
    return out


def check_inference_view(view_col: str, view_requirement: ViewRequirement) -> bool:
    """Whether an inference input dict holds this view; an error if it would need the future.

    At compute-actions time for step ``t`` only data up to ``t`` exists, so a view used
    for compute_actions may not have a positive shift.

    Args:
        view_col: The view's key in the view-requirements dict.
        view_requirement: The view.

    Returns:
        ``True`` if the view is used for compute_actions (and only reads the past and the
        present), ``False`` if it is not used there.

    Raises:
        ValueError: The view is used for compute_actions with a positive shift; the
            message names the column and the shift.

    Examples:
        >>> check_inference_view("prev_actions", ViewRequirement("actions", shift=-1))
        True
        >>> check_inference_view(
        ...     "new_obs", ViewRequirement("obs", shift=1, used_for_compute_actions=False))
        False
        >>> check_inference_view(  # doctest: +NORMALIZE_WHITESPACE
        ...     "next_actions", ViewRequirement("actions", shift=1))
        Traceback (most recent call last):
        ...
        ValueError: view 'next_actions' (data_col 'actions') is used for compute_actions
        but has shift=1, which reads 1 step(s) into the future; at inference only past and
        current data exist: use shifts <= 0 or set used_for_compute_actions=False
    """
    if not view_requirement.used_for_compute_actions:
        return False
    ahead = int(view_requirement.shift_arr.max())
    if ahead > 0:
        raise ValueError(
            f"view {view_col!r} (data_col {view_requirement.data_col or view_col!r}) is used "
            f"for compute_actions but has shift={view_requirement.shift!r}, which reads "
            f"{ahead} step(s) into the future; at inference only past and current data "
            "exist: use shifts <= 0 or set used_for_compute_actions=False"
        )
    return True


def inference_view_requirements(
    view_requirements: Mapping[str, ViewRequirement],
) -> dict[str, ViewRequirement]:
    """The views an inference input dict holds, each checked by :func:`check_inference_view`.

    Args:
        view_requirements: A view-requirements dict (view column -> requirement).

    Returns:
        The entries used for compute_actions, in the dict's order.

    Raises:
        ValueError: One of them has a positive shift (the message names it).
        TypeError: A value that is not a :class:`ViewRequirement`.

    Examples:
        >>> views = {
        ...     "obs": ViewRequirement(),
        ...     "new_obs": ViewRequirement("obs", shift=1, used_for_compute_actions=False),
        ...     "prev_rewards": ViewRequirement("rewards", shift=-1),
        ... }
        >>> list(inference_view_requirements(views))
        ['obs', 'prev_rewards']
    """
    chosen: dict[str, ViewRequirement] = {}
    for view_col, requirement in view_requirements.items():
        if not isinstance(requirement, ViewRequirement):
            raise TypeError(
                f"view {view_col!r}: expected a ViewRequirement, got {type(requirement).__name__}"
            )
        if check_inference_view(view_col, requirement):
            chosen[view_col] = requirement
    return chosen


def num_view_steps(view_requirement: ViewRequirement, num_steps: int) -> int:
    """How many rows :func:`episode_view` builds for ``num_steps`` steps: ``ceil(T / R)``.

    Args:
        view_requirement: The view (its ``batch_repeat_value`` ``R`` counts).
        num_steps: The number of timesteps ``T``, >= 0.

    Returns:
        The number of rows.

    Examples:
        >>> num_view_steps(ViewRequirement(batch_repeat_value=20), 50)
        3
    """
    return math.ceil(num_steps / view_requirement.batch_repeat_value)
