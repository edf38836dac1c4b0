"""ViewRequirement (RLlib's trajectory views) and the numpy core that builds a view."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from cadence.interop.rllib.view_requirement import (
    ViewRequirement,
    check_inference_view,
    episode_view,
    inference_view_requirements,
    num_view_steps,
    parse_shift,
)

# --- shift parsing -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shift", "offsets", "multiple"),
    [
        (0, [0], False),
        (-1, [-1], False),
        (1, [1], False),
        (np.int32(-2), [-2], False),
        ([-2, -1], [-2, -1], True),
        ((-1, 0), [-1, 0], True),
        ([0, -3], [0, -3], True),  # kept in the given order
        (np.array([-1, 0]), [-1, 0], True),
        ("-3:-1", [-3, -2, -1], True),
        ("0:2", [0, 1, 2], True),
        ("-3:0", [-3, -2, -1, 0], True),
        ("-50:-1", list(range(-50, 0)), True),
        ("1:1", [1], True),
        ("0:5:2", [0, 2, 4], True),
    ],
)
def test_shift_offsets(shift: object, offsets: list[int], multiple: bool) -> None:
    view = ViewRequirement(shift=shift)  # type: ignore[arg-type]
    assert view.shift_arr.tolist() == offsets
    assert view.shift_arr.dtype == np.int64
    assert view.multiple_shifts is multiple


def test_issue_ranges_include_both_ends() -> None:
    three = ViewRequirement(shift="-3:-1")
    assert len(three.shift_arr) == 3
    assert (three.shift_from, three.shift_to, three.shift_step) == (-3, -1, 1)
    zero_two = ViewRequirement(shift="0:2")
    assert zero_two.shift_arr.tolist() == [0, 1, 2]
    # RLlib tests `if shift_from:`, so "0:2" (shift_from 0) fails there; not here.
    assert zero_two.shift_from == 0 and zero_two.shift_to == 2


def test_range_parts_are_none_for_int_and_list() -> None:
    for shift in (-1, [-2, -1]):
        view = ViewRequirement(shift=shift)
        assert (view.shift_from, view.shift_to, view.shift_step) == (None, None, None)
    assert parse_shift("-2:2:2")[1:] == (-2, 2, 2)


def test_shift_arr_is_read_only_and_follows_reassignment() -> None:
    view = ViewRequirement(shift=-1)
    with pytest.raises(ValueError):
        view.shift_arr[0] = 5
    view.shift = "-1:1"
    assert view.shift_arr.tolist() == [-1, 0, 1]
    assert view.shift_from == -1 and view.multiple_shifts
    view.shift = 2
    assert view.shift_arr.tolist() == [2] and view.shift_from is None


@pytest.mark.parametrize("shift", ["a:b", "1", "", "-3:", "1:2:3:4", "x", "1.5:2"])
def test_unparsable_shift_string_names_it(shift: str) -> None:
    with pytest.raises(ValueError, match=r"shift=.*does not parse") as info:
        ViewRequirement(shift=shift)
    assert repr(shift) in str(info.value)


def test_empty_range_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"shift='-1:-3' is an empty range"):
        ViewRequirement(shift="-1:-3")


def test_range_step_below_one_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"shift='0:4:0'.*step"):
        ViewRequirement(shift="0:4:0")
    with pytest.raises(ValueError, match="step"):
        ViewRequirement(shift="4:0:-1")


@pytest.mark.parametrize(
    ("shift", "bad"), [([-1, 0.5], "0.5"), ([-1, "0"], "'0'"), ([True], "True")]
)
def test_non_int_in_shift_list_names_position_and_value(shift: list, bad: str) -> None:
    with pytest.raises(TypeError, match=r"shift\[\d\]=" + bad):
        ViewRequirement(shift=shift)


@pytest.mark.parametrize("shift", [1.0, None, True, {"a": 1}])
def test_shift_of_wrong_type(shift: object) -> None:
    with pytest.raises(TypeError, match="shift="):
        ViewRequirement(shift=shift)  # type: ignore[arg-type]


def test_empty_shift_list() -> None:
    with pytest.raises(ValueError, match=r"shift=\[\] is empty"):
        ViewRequirement(shift=[])


# --- other arguments -----------------------------------------------------------------


def test_default_space_is_rllibs_scalar_box() -> None:
    view = ViewRequirement()
    assert isinstance(view.space, gym.spaces.Box)
    assert view.space.shape == ()
    assert view.space.dtype == np.float32
    assert np.isneginf(view.space.low) and np.isposinf(view.space.high)
    assert not view.space_given
    assert ViewRequirement(space=gym.spaces.Discrete(2)).space_given


def test_constructor_defaults_and_positional_order() -> None:
    space = gym.spaces.Discrete(3)
    view = ViewRequirement("actions", space, -1, None, 1, False, True)
    assert view.data_col == "actions" and view.space == space and view.shift == -1
    assert view.index is None and view.batch_repeat_value == 1
    assert view.used_for_compute_actions is False and view.used_for_training is True
    default = ViewRequirement()
    assert default.data_col is None and default.shift == 0
    assert default.used_for_compute_actions and default.used_for_training


@pytest.mark.parametrize("space", [(4,), "Box", np.zeros(3), 3])
def test_space_must_be_a_gymnasium_space(space: object) -> None:
    with pytest.raises(TypeError, match="space must be a gymnasium.spaces.Space") as info:
        ViewRequirement(space=space)  # type: ignore[arg-type]
    assert repr(space) in str(info.value)


@pytest.mark.parametrize("value", [-1, -5, 0])
def test_batch_repeat_value_below_one(value: int) -> None:
    with pytest.raises(ValueError, match=f"batch_repeat_value must be an int >= 1, got {value}"):
        ViewRequirement(batch_repeat_value=value)


@pytest.mark.parametrize("value", [1.5, "2", None, True])
def test_batch_repeat_value_of_wrong_type(value: object) -> None:
    with pytest.raises(TypeError, match="batch_repeat_value"):
        ViewRequirement(batch_repeat_value=value)  # type: ignore[arg-type]


def test_data_col_and_index_types() -> None:
    with pytest.raises(TypeError, match="data_col must be a str or None, got 3"):
        ViewRequirement(data_col=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="index must be an int or None, got 'x'"):
        ViewRequirement(index="x")  # type: ignore[arg-type]
    assert ViewRequirement(index=np.int64(-1)).index == -1


def test_used_for_training_is_mutable() -> None:
    # Pruning switches it off after construction.
    view = ViewRequirement("obs")
    view.used_for_training = False
    assert not view.used_for_training


def test_repr_lists_constructor_arguments() -> None:
    text = repr(ViewRequirement("actions", gym.spaces.Discrete(2), shift=[-2, -1]))
    assert text == (
        "ViewRequirement(data_col='actions', space=Discrete(2), shift=[-2, -1], index=None, "
        "batch_repeat_value=1, used_for_compute_actions=True, used_for_training=True)"
    )


def test_equality() -> None:
    box = gym.spaces.Box(-1.0, 1.0, shape=(2,))
    assert ViewRequirement("obs", box, "-1:0") == ViewRequirement("obs", box, [-1, 0])
    assert ViewRequirement("obs", box, -1) == ViewRequirement("obs", box, np.int64(-1))
    assert ViewRequirement(shift=-1) != ViewRequirement(shift=[-1])  # different layout
    assert ViewRequirement(shift=[-2, -1]) != ViewRequirement(shift=[-1, -2])
    assert ViewRequirement("obs") != ViewRequirement("actions")
    assert ViewRequirement(space=box) != ViewRequirement()
    assert ViewRequirement(used_for_training=False) != ViewRequirement()
    assert ViewRequirement(batch_repeat_value=2) != ViewRequirement()
    assert ViewRequirement() != "ViewRequirement()"
    with pytest.raises(TypeError):
        hash(ViewRequirement())


# --- episode_view --------------------------------------------------------------------


def reference_view(
    view: ViewRequirement, data: np.ndarray, steps: np.ndarray, before: np.ndarray
) -> np.ndarray:
    """The documented meaning, one step and one offset at a time."""
    rows = []
    for t in steps:
        row = []
        for s in view.shift_arr:
            p = int(t + s)
            if 0 <= p < len(data):
                row.append(data[p])
            elif -len(before) <= p < 0:
                row.append(before[p + len(before)])
            else:
                row.append(np.zeros(data.shape[1:], data.dtype))
        rows.append(np.stack(row))
    empty = np.zeros((0, len(view.shift_arr)) + data.shape[1:], data.dtype)
    out = np.stack(rows) if rows else empty
    return out if view.multiple_shifts else out[:, 0]


@pytest.mark.parametrize(
    "shift", [0, -1, 1, -4, 3, [-2, -1], [1, -1, 0], "-3:0", "0:2", "-6:-2", "-2:2:2"]
)
@pytest.mark.parametrize("length", [0, 1, 5])
@pytest.mark.parametrize("repeat", [1, 2])
@pytest.mark.parametrize("n_before", [0, 2])
def test_episode_view_matches_reference(
    shift: object, length: int, repeat: int, n_before: int
) -> None:
    rng = np.random.default_rng(7)
    data = rng.normal(size=(length, 3)).astype(np.float32)
    before = rng.normal(size=(n_before, 3)).astype(np.float32)
    view = ViewRequirement("obs", shift=shift, batch_repeat_value=repeat)  # type: ignore[arg-type]
    got = episode_view(view, data, before=before if n_before else None)
    expected = reference_view(view, data, np.arange(0, length, repeat), before)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)


def test_int_shift_gives_t_by_feature_shape() -> None:
    obs = np.arange(12.0).reshape(6, 2)
    prev = episode_view(ViewRequirement("obs", shift=-1), obs)
    assert prev.shape == (6, 2)
    np.testing.assert_array_equal(prev[0], [0.0, 0.0])
    np.testing.assert_array_equal(prev[1:], obs[:-1])


def test_window_minus_three_to_zero_gives_one_entry_of_four_per_step() -> None:
    obs = np.arange(1.0, 6.0)[:, None] * np.ones((1, 2))  # 5 steps, value t+1
    frames = episode_view(ViewRequirement("obs", shift="-3:0"), obs)
    assert frames.shape == (5, 4, 2)
    # Zeros before the episode start.
    np.testing.assert_array_equal(frames[0, :, 0], [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(frames[2, :, 0], [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(frames[4, :, 0], [2.0, 3.0, 4.0, 5.0])


def test_zeros_past_the_end() -> None:
    rewards = np.array([1.0, 2.0, 3.0])
    ahead = episode_view(ViewRequirement("rewards", shift="0:2"), rewards)
    np.testing.assert_array_equal(ahead, [[1.0, 2.0, 3.0], [2.0, 3.0, 0.0], [3.0, 0.0, 0.0]])
    np.testing.assert_array_equal(
        episode_view(ViewRequirement("rewards", shift=1), rewards), [2.0, 3.0, 0.0]
    )


def test_prev_actions_and_rewards_like_rllib_lstm_views() -> None:
    actions = np.array([1, 0, 1, 1], dtype=np.int64)
    prev_actions = ViewRequirement("actions", space=gym.spaces.Discrete(2), shift=-1)
    np.testing.assert_array_equal(episode_view(prev_actions, actions), [0, 1, 0, 1])
    rewards = np.array([1.0, 1.0, 1.0, 1.0], dtype=np.float32)
    prev_rewards = episode_view(ViewRequirement("rewards", shift=-1), rewards)
    np.testing.assert_array_equal(prev_rewards, [0.0, 1.0, 1.0, 1.0])
    assert prev_rewards.dtype == np.float32


def test_new_obs_reads_the_real_last_next_observation() -> None:
    # T steps, T + 1 observations in one store: obs and new_obs are two views of it.
    observations = np.arange(5.0)  # o_0 .. o_4, T = 4
    obs = episode_view(ViewRequirement("obs"), observations, num_steps=4)
    new_obs = episode_view(ViewRequirement("obs", shift=1), observations, num_steps=4)
    np.testing.assert_array_equal(obs, [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(new_obs, [1.0, 2.0, 3.0, 4.0])


def test_space_zeros_fill_and_dtype_of_the_data() -> None:
    space = gym.spaces.Box(1.0, 2.0, shape=(3,), dtype=np.float32)
    data = np.ones((2, 3), dtype=np.float64)
    view = episode_view(ViewRequirement("obs", space=space, shift=-1), data)
    # Zeros from the space (even where zero lies outside its bounds), in the data's dtype.
    np.testing.assert_array_equal(view, [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    assert view.dtype == np.float64


def test_space_that_does_not_fit_the_data_names_the_view() -> None:
    view = ViewRequirement("obs", space=gym.spaces.Box(-1.0, 1.0, shape=(4,)), shift=-1)
    with pytest.raises(ValueError, match=r"view 'prev_obs'.*shape \(4,\).*shape \(3,\)"):
        episode_view(view, np.zeros((5, 3)), view_col="prev_obs")
    with pytest.raises(ValueError, match=r"view 'obs'"):
        episode_view(view, np.zeros((5, 3)))


def test_default_space_pads_like_the_data() -> None:
    obs = np.ones((3, 2, 2), dtype=np.uint8)
    view = episode_view(ViewRequirement("obs", shift=-1), obs)
    assert view.shape == (3, 2, 2) and view.dtype == np.uint8
    assert (view[0] == 0).all() and (view[1:] == 1).all()


def test_nested_space_pads_like_the_data() -> None:
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(2)})
    view = episode_view(ViewRequirement("x", space=space, shift=-1), np.array([3, 4]))
    np.testing.assert_array_equal(view, [0, 3])


def test_before_fills_the_start_of_a_continued_fragment() -> None:
    data = np.array([10.0, 11.0, 12.0])
    view = ViewRequirement("obs", shift="-3:0")
    got = episode_view(view, data, before=np.array([8.0, 9.0]))
    np.testing.assert_array_equal(got[0], [0.0, 8.0, 9.0, 10.0])
    np.testing.assert_array_equal(got[1], [8.0, 9.0, 10.0, 11.0])
    with pytest.raises(ValueError, match=r"before must have shape"):
        episode_view(view, data, before=np.zeros((2, 2)))


def test_batch_repeat_value_as_in_rllibs_docstring() -> None:
    # RLlib: buffer state_out_0 = [-1, 0, 1, ..., 10], batch_repeat_value 5, shift -1
    # -> state_in_0 = [-1, 4, 9]. Here the initial state -1 comes in as `before`.
    state_out = np.arange(0, 11)
    view = ViewRequirement("state_out_0", shift=-1, batch_repeat_value=5)
    got = episode_view(view, state_out, before=np.array([-1]))
    np.testing.assert_array_equal(got, [-1, 4, 9])
    assert len(got) == num_view_steps(view, 11) == 3


def test_explicit_timesteps_for_an_inference_dict() -> None:
    data = np.arange(6.0)
    view = ViewRequirement("obs", shift="-2:0")
    np.testing.assert_array_equal(episode_view(view, data, timesteps=[5]), [[3.0, 4.0, 5.0]])
    np.testing.assert_array_equal(episode_view(view, data, timesteps=[0]), [[0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="timesteps must be a 1-D array of ints"):
        episode_view(view, data, timesteps=[[1]])


def test_bad_column_and_num_steps() -> None:
    view = ViewRequirement("obs")
    with pytest.raises(ValueError, match=r"view 'obs'.*time axis"):
        episode_view(view, np.float32(1.0))
    with pytest.raises(ValueError, match=r"num_steps must be an int >= 0, got -1"):
        episode_view(view, np.zeros(3), num_steps=-1)


def test_episode_view_does_not_touch_its_input() -> None:
    data = np.arange(4.0)
    data.setflags(write=False)
    episode_view(ViewRequirement("obs", shift="-2:1"), data, before=np.array([7.0]))
    np.testing.assert_array_equal(data, np.arange(4.0))


# --- inference ------------------------------------------------------------------------


def test_inference_views() -> None:
    views = {
        "obs": ViewRequirement(),
        "new_obs": ViewRequirement("obs", shift=1, used_for_compute_actions=False),
        "prev_actions": ViewRequirement("actions", shift=-1),
        "frames": ViewRequirement("obs", shift="-3:0"),
        "actions": ViewRequirement(used_for_compute_actions=False),
    }
    assert list(inference_view_requirements(views)) == ["obs", "prev_actions", "frames"]
    assert check_inference_view("obs", views["obs"]) is True
    assert check_inference_view("new_obs", views["new_obs"]) is False


@pytest.mark.parametrize("shift", [1, [-1, 1], "-1:1", "0:2"])
def test_positive_shift_at_inference_names_the_column(shift: object) -> None:
    views = {
        "obs": ViewRequirement(),
        "next_actions": ViewRequirement("actions", shift=shift),  # type: ignore[arg-type]
    }
    with pytest.raises(ValueError, match=r"view 'next_actions' \(data_col 'actions'\).*future"):
        inference_view_requirements(views)


def test_inference_requires_view_requirements() -> None:
    with pytest.raises(TypeError, match=r"view 'obs': expected a ViewRequirement, got dict"):
        inference_view_requirements({"obs": {"shift": 0}})  # type: ignore[dict-item]


def test_one_int_shift_by_slices_equals_the_general_gather() -> None:
    # An int shift takes the slicing shortcut; shift=[s] (one offset, as a list) the gather.
    rng = np.random.default_rng(0)
    for _ in range(300):
        shift = int(rng.integers(-6, 7))
        length = int(rng.integers(0, 8))
        num_steps = int(rng.integers(0, 9))
        column = rng.normal(size=(length, 2)).astype(np.float32)
        before = None if rng.random() < 0.3 else rng.normal(size=(int(rng.integers(0, 5)), 2)).astype(np.float32)
        fast = episode_view(ViewRequirement("x", shift=shift), column, num_steps=num_steps, before=before)
        general = episode_view(ViewRequirement("x", shift=[shift]), column, num_steps=num_steps, before=before)[:, 0]
        np.testing.assert_array_equal(fast, general, err_msg=f"shift {shift}, {length} rows, {num_steps} steps")


@pytest.mark.parametrize("shift", ["-3000000000:0", "0:3000000000", -3_000_000_000, [0, -10_001], "-10001:-10000",
                                   np.array([0, 2**40])])
def test_a_shift_beyond_max_shift_is_refused_before_anything_is_allocated(shift) -> None:
    with pytest.raises(ValueError, match=r"reaches -?\d+ steps; a view reaches at most MAX_SHIFT=10000 steps"):
        ViewRequirement("obs", shift=shift)


def test_the_farthest_allowed_shift_and_a_list_of_every_offset() -> None:
    assert ViewRequirement("obs", shift="-10000:-9999").shift_arr.tolist() == [-10000, -9999]
    with pytest.raises(ValueError, match=r"lists 20002 offsets; at most 20001"):
        ViewRequirement("obs", shift=[0] * 20_002)
    with pytest.raises(ValueError, match=r"does not parse") as info:
        ViewRequirement("obs", shift="x" * 100_000)
    assert len(str(info.value)) < 600
