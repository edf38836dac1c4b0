"""chop_into_sequences: RLlib's sequence chopping for recurrent models."""

from __future__ import annotations

import numpy as np
import pytest

from cadence.interop.rllib.rnn_sequencing import chop_into_sequences


def rllib_example(**overrides: object) -> tuple[list, list, np.ndarray]:
    kwargs: dict = dict(
        episode_ids=[1, 1, 5, 5, 5, 5],
        unroll_ids=[4, 4, 4, 4, 4, 4],
        agent_indices=[0, 0, 0, 0, 0, 0],
        feature_columns=[[4, 4, 8, 8, 8, 8], [1, 1, 0, 1, 1, 0]],
        state_columns=[[4, 5, 4, 5, 5, 5]],
        max_seq_len=3,
    )
    kwargs.update(overrides)
    return chop_into_sequences(**kwargs)


def reference_seq_lens(ids: list[tuple], max_seq_len: int) -> list[int]:
    """The documented rule, one step at a time: cut where any id changes or at max_seq_len."""
    lens: list[int] = []
    current = 0
    for i, key in enumerate(ids):
        if (i and key != ids[i - 1]) or current >= max_seq_len:
            lens.append(current)
            current = 0
        current += 1
    if current:
        lens.append(current)
    return lens


def test_rllib_docstring_example() -> None:
    f_pad, s_init, seq_lens = rllib_example()
    assert [f.tolist() for f in f_pad] == [[4, 4, 0, 8, 8, 8, 8, 0, 0], [1, 1, 0, 0, 1, 1, 0, 0, 0]]
    assert [s.tolist() for s in s_init] == [[4, 4, 5]]
    assert seq_lens.tolist() == [2, 3, 1]
    assert seq_lens.dtype == np.int32
    assert all(isinstance(f, np.ndarray) for f in f_pad)


def test_static_max_and_extra_padding() -> None:
    f_pad, _, seq_lens = rllib_example(max_seq_len=4, dynamic_max=False)
    assert seq_lens.tolist() == [2, 4]
    assert f_pad[0].tolist() == [4, 4, 0, 0, 8, 8, 8, 8]
    f_pad, _, _ = rllib_example(_extra_padding=2)
    assert len(f_pad[0]) == 3 * (3 + 2)
    assert f_pad[0].tolist() == [4, 4, 0, 0, 0, 8, 8, 8, 0, 0, 8, 0, 0, 0, 0]
    # Like RLlib, the extra padding only applies with dynamic_max.
    f_pad, _, _ = rllib_example(dynamic_max=False, _extra_padding=2)
    assert len(f_pad[0]) == 9


def test_dynamic_max_shrinks_to_longest_sequence() -> None:
    f_pad, _, seq_lens = chop_into_sequences(
        feature_columns=[np.arange(3)], state_columns=[], max_seq_len=20, episode_ids=[0, 0, 1]
    )
    assert seq_lens.tolist() == [2, 1]
    assert f_pad[0].tolist() == [0, 1, 2, 0]


def test_cuts_at_unroll_and_agent_changes() -> None:
    _, s_init, seq_lens = chop_into_sequences(
        feature_columns=[np.arange(6)],
        state_columns=[np.arange(6) * 10],
        max_seq_len=5,
        episode_ids=[1, 1, 1, 1, 1, 1],
        unroll_ids=[0, 0, 1, 1, 1, 1],
        agent_indices=[0, 0, 0, 0, 1, 1],
    )
    assert seq_lens.tolist() == [2, 2, 2]
    assert s_init[0].tolist() == [0, 20, 40]


def test_ids_are_compared_separately_not_summed() -> None:
    # RLlib adds episode id and agent index into one key: (1, 1) and (2, 0) collide there.
    _, _, seq_lens = chop_into_sequences(
        feature_columns=[np.arange(4)],
        state_columns=[],
        max_seq_len=10,
        episode_ids=[1, 1, 2, 2],
        unroll_ids=[0, 0, 0, 0],
        agent_indices=[1, 1, 0, 0],
    )
    assert seq_lens.tolist() == [2, 2]


def test_large_episode_ids() -> None:
    # RLlib draws episode ids up to 2e18.
    big = 1_900_000_000_000_000_000
    _, _, seq_lens = chop_into_sequences(
        feature_columns=[np.arange(3)], state_columns=[], max_seq_len=4,
        episode_ids=[big, big, big + 1], unroll_ids=[7, 7, 7], agent_indices=[0, 0, 0],
    )
    assert seq_lens.tolist() == [2, 1]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("max_seq_len", [1, 3, 7])
def test_random_batches_match_the_rule(seed: int, max_seq_len: int) -> None:
    rng = np.random.default_rng(seed)
    n = 60
    eps = np.repeat(rng.integers(0, 4, size=12), 5)
    unroll = np.repeat(rng.integers(0, 2, size=6), 10)
    agents = rng.integers(0, 2, size=n) * (rng.random(n) < 0.1)
    features = rng.normal(size=(n, 2)).astype(np.float32)
    states = rng.normal(size=(n, 3))
    f_pad, s_init, seq_lens = chop_into_sequences(
        feature_columns=[features], state_columns=[states], max_seq_len=max_seq_len,
        episode_ids=eps, unroll_ids=unroll, agent_indices=agents, dynamic_max=False,
    )
    expected = reference_seq_lens(list(zip(eps, unroll, agents)), max_seq_len)
    assert seq_lens.tolist() == expected
    padded = f_pad[0].reshape(len(expected), max_seq_len, 2)
    assert padded.dtype == np.float32
    start = 0
    for k, length in enumerate(expected):
        np.testing.assert_array_equal(padded[k, :length], features[start : start + length])
        assert (padded[k, length:] == 0).all()
        np.testing.assert_array_equal(s_init[0][k], states[start])
        start += length


def test_given_seq_lens_are_used() -> None:
    f_pad, s_init, seq_lens = chop_into_sequences(
        feature_columns=[[1, 2, 3, 4]], state_columns=[[9, 8, 7, 6]], max_seq_len=3,
        seq_lens=[1, 3],
    )
    assert seq_lens.tolist() == [1, 3]
    assert f_pad[0].tolist() == [1, 0, 0, 2, 3, 4]
    assert s_init[0].tolist() == [9, 8]
    # Empty seq_lens: computed from the ids, as in RLlib.
    _, _, seq_lens = rllib_example(seq_lens=[])
    assert seq_lens.tolist() == [2, 3, 1]


def test_states_already_reduced_to_init() -> None:
    _, s_init, _ = chop_into_sequences(
        feature_columns=[[1, 2, 3, 4]], state_columns=[[9, 7]], max_seq_len=3,
        seq_lens=[1, 3], states_already_reduced_to_init=True,
    )
    assert s_init[0].tolist() == [9, 7]
    with pytest.raises(ValueError, match=r"state_columns\[0\].*2 rows \(one row per sequence\)"):
        chop_into_sequences(
            feature_columns=[[1, 2, 3, 4]], state_columns=[[9, 8, 7, 6]], max_seq_len=3,
            seq_lens=[1, 3], states_already_reduced_to_init=True,
        )


def test_object_and_string_columns_are_padded_with_none() -> None:
    infos = np.array([{"a": 1}, {"a": 2}, {"a": 3}], dtype=object)
    names = np.array(["x", "y", "z"])
    f_pad, _, _ = chop_into_sequences(
        feature_columns=[infos, names], state_columns=[], max_seq_len=2, episode_ids=[0, 0, 1],
    )
    assert f_pad[0].tolist() == [{"a": 1}, {"a": 2}, {"a": 3}, None]
    assert f_pad[1].tolist() == ["x", "y", "z", None]


def test_nested_columns() -> None:
    column = {"b": np.arange(3), "a": (np.arange(3) * 10, np.ones((3, 2)))}
    f_pad, _, _ = chop_into_sequences(
        feature_columns=[column, np.arange(3)], state_columns=[], max_seq_len=2,
        episode_ids=[0, 0, 1], handle_nested_data=True,
    )
    leaves, plain = f_pad
    assert len(leaves) == 3  # "a" (two leaves) before "b", as dm-tree sorts keys
    assert leaves[0].tolist() == [0, 10, 20, 0]
    assert leaves[1].shape == (4, 2) and leaves[1][3].tolist() == [0.0, 0.0]
    assert leaves[2].tolist() == [0, 1, 2, 0]
    assert len(plain) == 1 and plain[0].tolist() == [0, 1, 2, 0]
    with pytest.raises(ValueError, match=r"feature_columns\[0\] is a nested structure"):
        chop_into_sequences(
            feature_columns=[column], state_columns=[], max_seq_len=2, episode_ids=[0, 0, 1]
        )


def test_shuffle_moves_sequences_together_and_uses_only_the_given_rng() -> None:
    n = 40
    eps = np.repeat(np.arange(8), 5)
    features = np.arange(n) + 1
    global_state = np.random.get_state()[1].copy()
    results = [
        chop_into_sequences(
            feature_columns=[features], state_columns=[features * 100], max_seq_len=3,
            episode_ids=eps, shuffle=True, rng=np.random.default_rng(3),
        )
        for _ in range(2)
    ]
    np.testing.assert_array_equal(np.random.get_state()[1], global_state)
    (f_a, s_a, l_a), (f_b, s_b, l_b) = results
    np.testing.assert_array_equal(f_a[0], f_b[0])  # same seed, same order
    np.testing.assert_array_equal(l_a, l_b)
    _, _, unshuffled = chop_into_sequences(
        feature_columns=[features], state_columns=[], max_seq_len=3, episode_ids=eps
    )
    assert sorted(l_a.tolist()) == sorted(unshuffled.tolist())
    assert l_a.tolist() != unshuffled.tolist()
    rows = f_a[0].reshape(len(l_a), 3)
    for row, length, state in zip(rows, l_a, s_a[0]):
        assert row[0] * 100 == state  # features and state moved together
        assert (row[:length] > 0).all() and (row[length:] == 0).all()
        np.testing.assert_array_equal(np.diff(row[:length]), 1)


def test_shuffle_of_nested_columns() -> None:
    f_pad, _, seq_lens = chop_into_sequences(
        feature_columns=[{"x": np.arange(1, 5)}], state_columns=[], max_seq_len=2,
        episode_ids=[0, 0, 1, 1], shuffle=True, rng=np.random.default_rng(1),
        handle_nested_data=True,
    )
    assert sorted(f_pad[0][0].reshape(2, 2).tolist()) == [[1, 2], [3, 4]]


def test_shuffle_needs_a_generator() -> None:
    with pytest.raises(ValueError, match=r"shuffle=True needs rng=numpy.random.Generator"):
        rllib_example(shuffle=True)
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator, got RandomState"):
        rllib_example(shuffle=True, rng=np.random.RandomState(0))


def test_empty_batch() -> None:
    f_pad, s_init, seq_lens = chop_into_sequences(
        feature_columns=[np.zeros((0, 2))], state_columns=[np.zeros((0, 3))], max_seq_len=4,
        episode_ids=[],
    )
    assert seq_lens.shape == (0,)
    assert f_pad[0].shape == (0, 2) and s_init[0].shape == (0, 3)


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(ValueError, match=r"feature_columns\[1\] has 5 rows; expected 6"):
        rllib_example(feature_columns=[[4, 4, 8, 8, 8, 8], [1, 1, 0, 1, 1]])
    with pytest.raises(ValueError, match=r"state_columns\[0\] has shape \(2,\); expected 6 rows"):
        rllib_example(state_columns=[[1, 2]])
    with pytest.raises(ValueError, match=r"unroll_ids must be 1-D with 6 entries"):
        rllib_example(unroll_ids=[4, 4])
    with pytest.raises(ValueError, match="episode_ids is required"):
        rllib_example(episode_ids=None)
    with pytest.raises(ValueError, match=r"max_seq_len must be an int in \[1, 100000\] \(MAX_SEQ_LEN\), got 0"):
        rllib_example(max_seq_len=0)
    with pytest.raises(TypeError, match="max_seq_len must be an int"):
        rllib_example(max_seq_len=2.0)
    with pytest.raises(ValueError, match=r"_extra_padding must be an int in \[0, 100000\] \(MAX_SEQ_LEN\), got -1"):
        rllib_example(_extra_padding=-1)
    with pytest.raises(ValueError, match=r"sequence of 4 steps, longer than max_seq_len=3"):
        rllib_example(seq_lens=[2, 4], dynamic_max=False)
    with pytest.raises(ValueError, match=r"seq_lens must all be >= 1, got 0"):
        rllib_example(seq_lens=[6, 0])
    with pytest.raises(ValueError, match=r"seq_lens must be a 1-D array of ints"):
        rllib_example(seq_lens=[2.5, 3.5])


def test_ids_default_to_one_unroll_and_one_agent() -> None:
    _, _, seq_lens = chop_into_sequences(
        feature_columns=[np.arange(6)], state_columns=[], max_seq_len=3,
        episode_ids=[1, 1, 5, 5, 5, 5],
    )
    assert seq_lens.tolist() == [2, 3, 1]


@pytest.mark.parametrize("arguments,message", [
    ({"_extra_padding": 10**12}, r"_extra_padding must be an int in \[0, 100000\] \(MAX_SEQ_LEN\), got 1000000000000"),
    ({"max_seq_len": 10**12}, r"max_seq_len must be an int in \[1, 100000\] \(MAX_SEQ_LEN\), got 1000000000000"),
    ({"seq_lens": [3, 2**31]}, r"seq_lens must all be <= MAX_SEQ_LEN=100000, got 2147483648 at position 1"),
    ({"seq_lens": [1] * 2000, "_extra_padding": 99_999}, r"2000 sequences padded to 100000 steps make 200000000 rows "
                                                         r"per column, more than MAX_PADDED_ROWS=100000000"),
])
def test_sizes_that_would_allocate_without_bound_are_refused_first(arguments: dict, message: str) -> None:
    rows = sum(arguments.get("seq_lens", [5]))
    call = {"feature_columns": [np.zeros(rows)], "state_columns": [], "max_seq_len": 3,
            "episode_ids": np.zeros(rows, dtype=np.int64), **arguments}
    with pytest.raises(ValueError, match=message):
        chop_into_sequences(**call)
