"""RLlib's SampleBatch / MultiAgentBatch on Cadence: columns, rows, sequences, TensorDict sharing."""

from __future__ import annotations

import copy
import pickle
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tensordict import NonTensorStack, TensorDict

from cadence.interop.rllib.sample_batch import (
    DEFAULT_POLICY_ID,
    MultiAgentBatch,
    SampleBatch,
    concat_samples,
    concat_samples_into_ma_batch,
)


def _batch(n: int = 5, **extra: object) -> SampleBatch:
    return SampleBatch(
        {
            SampleBatch.OBS: np.arange(n * 2, dtype=np.float32).reshape(n, 2),
            SampleBatch.ACTIONS: np.arange(n),
            SampleBatch.REWARDS: np.arange(n, dtype=np.float32) * 10,
            SampleBatch.INFOS: [{"i": i} for i in range(n)],
            **extra,
        }
    )


# ----- constants and basics ------------------------------------------------------------------


def test_column_constants_have_rllibs_strings() -> None:
    expected = {
        "OBS": "obs", "CUR_OBS": "obs", "NEXT_OBS": "new_obs", "ACTIONS": "actions", "REWARDS": "rewards",
        "PREV_ACTIONS": "prev_actions", "PREV_REWARDS": "prev_rewards", "TERMINATEDS": "terminateds",
        "TRUNCATEDS": "truncateds", "DONES": "dones", "INFOS": "infos", "SEQ_LENS": "seq_lens", "T": "t",
        "EPS_ID": "eps_id", "ENV_ID": "env_id", "AGENT_INDEX": "agent_index", "UNROLL_ID": "unroll_id",
        "ACTION_DIST_INPUTS": "action_dist_inputs", "ACTION_PROB": "action_prob",
        "ACTION_LOGP": "action_logp", "ACTION_DIST": "action_dist", "VF_PREDS": "vf_preds",
        "VALUES_BOOTSTRAPPED": "values_bootstrapped",
    }
    for name, value in expected.items():
        assert getattr(SampleBatch, name) == value, name
    assert DEFAULT_POLICY_ID == "default_policy"


def test_count_len_data_keys_and_steps() -> None:
    batch = _batch(4)
    assert batch.count == len(batch) == batch.env_steps() == batch.agent_steps() == 4
    assert batch.data is batch
    assert list(batch.keys()) == ["obs", "actions", "rewards", "infos"]
    assert dict(batch.items())["actions"] is batch["actions"]
    assert isinstance(batch, dict)
    assert SampleBatch().count == 0
    assert repr(batch) == "SampleBatch(4: ['obs', 'actions', 'rewards', 'infos'])"


def test_lists_become_arrays_but_infos_stays_a_list() -> None:
    batch = SampleBatch(actions=[1, 2, 3], infos=[{}, {}, {}], seq_lens=None)
    assert isinstance(batch["actions"], np.ndarray) and batch["actions"].tolist() == [1, 2, 3]
    assert isinstance(batch["infos"], list)
    assert "seq_lens" not in batch


def test_columns_of_different_lengths_name_both() -> None:
    with pytest.raises(ValueError, match=r"column 'rewards' has 2 rows but column 'obs' has 3"):
        SampleBatch(obs=np.zeros(3), rewards=np.zeros(2))
    with pytest.raises(ValueError, match=r"'obs/b' has 2 rows but 'obs/a' has 3"):
        SampleBatch(obs={"a": np.zeros(3), "b": np.zeros(2)})
    with pytest.raises(TypeError, match=r"column 'x'.*float"):
        SampleBatch(x=1.5)
    with pytest.raises(TypeError, match="column names must be str"):
        SampleBatch({3: np.zeros(2)})


def test_setting_a_column_checks_rows_and_rolls_back() -> None:
    batch = _batch(3)
    with pytest.raises(ValueError, match=r"column 'advantages' has 4 rows but column 'obs' has 3"):
        batch["advantages"] = np.zeros(4)
    assert "advantages" not in batch and batch.count == 3
    batch["advantages"] = np.ones(3)
    assert batch.added_keys == {"advantages"}
    empty = SampleBatch()
    empty["obs"] = np.zeros((6, 2))
    assert empty.count == 6


def test_missing_column_error_names_it() -> None:
    with pytest.raises(KeyError, match=r"no column 'vf_preds'.*'obs'"):
        _batch()["vf_preds"]
    assert _batch().get("vf_preds", 7) == 7


def test_access_tracking_and_deletion() -> None:
    batch = _batch(3)
    _ = batch["obs"]
    _ = batch.get("rewards")
    del batch["actions"]
    assert batch.accessed_keys == {"obs", "rewards"}
    assert batch.deleted_keys == {"actions"} and "actions" not in batch
    assert batch.pop("nope", None) is None
    with pytest.raises(KeyError, match="'nope'"):
        batch.pop("nope")


def test_dones_derived_from_terminateds_or_truncateds() -> None:
    batch = SampleBatch(terminateds=np.array([False, True, False]), truncateds=np.array([False, False, True]))
    assert batch["dones"].tolist() == [False, True, True]
    assert "dones" not in batch
    assert {"terminateds", "truncateds"} <= batch.accessed_keys
    # a ray 1.x batch with a stored dones column is read as is
    old = SampleBatch(dones=np.array([True, False]))
    assert old[SampleBatch.DONES].tolist() == [True, False]
    with pytest.raises(KeyError, match="no column 'dones' and no 'terminateds'"):
        SampleBatch(obs=np.zeros(2))["dones"]


def test_is_training_is_a_flag_not_a_column() -> None:
    batch = SampleBatch({"obs": np.zeros(2), "is_training": True})
    assert batch.is_training is True and "is_training" not in batch and batch["is_training"] is True
    batch["is_training"] = False
    assert batch.is_training is False and "is_training" not in batch
    assert SampleBatch(obs=np.zeros(1), _is_training=True)[0:1].is_training is True


# ----- slicing, rows, copies -----------------------------------------------------------------


def test_slices_are_views_of_the_rows() -> None:
    batch = _batch(5, nested={"a": np.arange(5), "b": {"c": np.arange(10).reshape(5, 2)}})
    part = batch[1:4]
    assert isinstance(part, SampleBatch) and part.count == 3
    assert part["actions"].tolist() == [1, 2, 3]
    assert part["infos"] == [{"i": 1}, {"i": 2}, {"i": 3}]
    assert part["nested"]["b"]["c"].tolist() == [[2, 3], [4, 5], [6, 7]]
    part["obs"][0, 0] = -1.0
    assert batch["obs"][1, 0] == -1.0
    assert np.shares_memory(part["nested"]["a"], batch["nested"]["a"])
    assert batch[-2:]["actions"].tolist() == [3, 4]
    assert batch[3:100].count == 2
    assert batch.slice(1, 3)["actions"].tolist() == [1, 2]
    with pytest.raises(ValueError, match="step of 1"):
        batch[::2]


def test_rows_and_columns() -> None:
    batch = SampleBatch(a=np.array([1, 2]), obs={"x": np.array([[0, 1], [2, 3]])}, infos=[{"k": 0}, {"k": 1}])
    rows = list(batch.rows())
    assert len(rows) == 2
    assert rows[1]["a"] == 2 and rows[1]["obs"]["x"].tolist() == [2, 3] and rows[1]["infos"] == {"k": 1}
    a, infos = batch.columns(["a", "infos"])
    assert a is batch["a"] and infos is batch["infos"]
    with pytest.raises(KeyError, match="'zzz'"):
        batch.columns(["zzz"])


def test_copy_deep_and_shallow() -> None:
    batch = _batch(3, nested={"a": np.zeros(3)})
    batch.set_training(True)
    deep = batch.copy()
    assert not np.shares_memory(deep["obs"], batch["obs"])
    assert not np.shares_memory(deep["nested"]["a"], batch["nested"]["a"])
    deep["infos"][0]["i"] = 99
    assert batch["infos"][0]["i"] == 0
    shallow = batch.copy(shallow=True)
    assert shallow is not batch and np.shares_memory(shallow["obs"], batch["obs"])
    assert deep.is_training and shallow.is_training


def test_shuffle_uses_the_given_generator_and_keeps_rows_together() -> None:
    first = _batch(20).shuffle(np.random.default_rng(3))
    second = _batch(20).shuffle(np.random.default_rng(3))
    assert first["actions"].tolist() == second["actions"].tolist()
    assert first["actions"].tolist() != list(range(20))
    assert np.array_equal(first["rewards"], first["actions"] * 10)
    assert [info["i"] for info in first["infos"]] == first["actions"].tolist()
    assert np.array_equal(first["obs"][:, 0], first["actions"] * 2)
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        _batch().shuffle(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seq_lens"):
        SampleBatch(a=np.arange(3), seq_lens=[3]).shuffle(np.random.default_rng(0))


def test_split_by_episode_by_eps_id_keeps_order() -> None:
    batch = _batch(6, eps_id=np.array([5, 5, 2, 2, 2, 5]))
    parts = batch.split_by_episode()
    assert [p["actions"].tolist() for p in parts] == [[0, 1], [2, 3, 4], [5]]
    assert [p["eps_id"][0] for p in parts] == [5, 2, 5]
    assert np.shares_memory(parts[1]["obs"], batch["obs"])
    assert SampleBatch().split_by_episode() == []


def test_split_by_episode_by_dones() -> None:
    batch = SampleBatch(
        a=np.arange(5), terminateds=np.array([0, 0, 1, 0, 0], bool), truncateds=np.array([0, 0, 0, 1, 0], bool)
    )
    assert [p["a"].tolist() for p in batch.split_by_episode()] == [[0, 1, 2], [3], [4]]
    with_ids = SampleBatch(a=np.arange(2), eps_id=np.array([1, 1]), terminateds=np.array([True, False]))
    assert len(with_ids.split_by_episode(key="dones")) == 2
    with pytest.raises(KeyError, match="neither 'eps_id'"):
        SampleBatch(a=np.arange(2)).split_by_episode()
    with pytest.raises(KeyError, match="'eps_id'"):
        SampleBatch(a=np.arange(2)).split_by_episode(key="eps_id")
    with pytest.raises(ValueError, match="expected None, 'eps_id' or 'dones'"):
        batch.split_by_episode(key="t")


# ----- sequences -------------------------------------------------------------------------------


def test_seq_lens_count_and_per_sequence_state() -> None:
    batch = SampleBatch(a=np.arange(5), state_in_0=np.zeros((2, 4)), seq_lens=[3, 2])
    assert batch.count == 5 and batch.max_seq_len == 3
    assert batch["seq_lens"].dtype == np.int32
    assert repr(batch) == "SampleBatch(5 (seqs=2): ['a', 'state_in_0'])"
    with pytest.raises(ValueError, match=r"'state_in_0' has 3 rows but 'seq_lens' has 2 sequences"):
        SampleBatch(a=np.arange(5), state_in_0=np.zeros(3), seq_lens=[3, 2])
    with pytest.raises(ValueError, match=r"column 'a' has 4 rows but 'seq_lens' needs 5"):
        SampleBatch(a=np.arange(4), seq_lens=[3, 2])
    # lengths that sum to the rows but are no lengths
    with pytest.raises(ValueError, match=r"'seq_lens' must hold lengths >= 0, got -2 at index 1"):
        SampleBatch(a=np.arange(4), seq_lens=[6, -2])
    with pytest.raises(ValueError, match=r"'seq_lens' must be a 1-D array of integer sequence lengths, got shape "
                                         r"\(2,\) and dtype float64"):
        SampleBatch(a=np.arange(4), seq_lens=[2.5, 1.5])
    batch = SampleBatch(a=np.arange(4), seq_lens=[2, 2])
    with pytest.raises(ValueError, match=r"got -1 at index 0"):
        batch["seq_lens"] = torch.tensor([-1, 5])
    assert batch["seq_lens"].tolist() == [2, 2]  # left as it was


def test_update_sets_seq_lens_and_state_together() -> None:
    batch = SampleBatch(a=np.arange(3), state_in_0=np.zeros(3))
    with pytest.raises(ValueError, match="state_in_0"):
        batch["seq_lens"] = np.array([2, 1])
    assert "seq_lens" not in batch
    batch.update({"seq_lens": [2, 1], "state_in_0": np.ones(2)})
    assert batch.count == 3 and batch["state_in_0"].tolist() == [1.0, 1.0]


def test_slicing_with_seq_lens_keeps_whole_sequences() -> None:
    batch = SampleBatch(a=np.arange(6), state_in_0=np.array([10, 20, 30]), seq_lens=[2, 3, 1])
    part = batch[2:5]  # rounds down to sequence starts: rows 2..4 = sequence 1
    assert part["a"].tolist() == [2, 3, 4] and part["seq_lens"].tolist() == [3]
    assert part["state_in_0"].tolist() == [20]
    assert batch[3:6]["a"].tolist() == [2, 3, 4, 5]  # start 3 lies in sequence 1
    cut = batch.slice(1, 5)
    assert cut["a"].tolist() == [1, 2, 3, 4]
    assert cut["seq_lens"].tolist() == [1, 3] and cut["state_in_0"].tolist() == [10, 20]
    explicit = batch.slice(0, 4, state_start=0, state_end=2)
    assert explicit["seq_lens"].tolist() == [2, 2] and explicit["state_in_0"].tolist() == [10, 20]


def test_zero_padded_batches() -> None:
    padded = SampleBatch(
        a=np.array([1, 2, 0, 3, 0, 0]), infos=[{}, {}, {}], seq_lens=[2, 1], _zero_padded=True, _max_seq_len=3
    )
    assert padded.count == 3
    second = padded[2:3]
    assert second["a"].tolist() == [3, 0, 0] and second["seq_lens"].tolist() == [1] and len(second["infos"]) == 1
    with pytest.raises(ValueError, match="needs 6"):
        SampleBatch(a=np.arange(5), seq_lens=[2, 1], _zero_padded=True, _max_seq_len=3)
    with pytest.raises(ValueError, match="zero-padded"):
        list(padded.rows())


# ----- concatenation ----------------------------------------------------------------------------


def test_concat_and_concat_samples() -> None:
    b1, b2 = _batch(2, nested={"x": np.zeros(2)}), _batch(3, nested={"x": np.ones(3)})
    out = b1.concat(b2)
    assert out.count == 5
    assert out["actions"].tolist() == [0, 1, 0, 1, 2]
    assert out["nested"]["x"].tolist() == [0, 0, 1, 1, 1]
    assert [i["i"] for i in out["infos"]] == [0, 1, 0, 1, 2]
    assert not np.shares_memory(out["obs"], b1["obs"])
    assert concat_samples([SampleBatch(), b1, SampleBatch()])["actions"].tolist() == [0, 1]
    assert concat_samples([]).count == 0


def test_concat_errors_name_columns() -> None:
    with pytest.raises(ValueError, match=r"batch 1 lacks columns \['infos'\] and has extra columns \['x'\]"):
        concat_samples([_batch(2), SampleBatch(obs=np.zeros((1, 2)), actions=[1], rewards=[1.0], x=[0])])
    with pytest.raises(TypeError, match="item 1 is a dict"):
        concat_samples([_batch(1), {"obs": np.zeros(1)}])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="column 'obs'"):
        concat_samples([SampleBatch(obs=np.zeros((1, 2))), SampleBatch(obs=np.zeros((1, 3)))])


def test_concat_with_seq_lens_and_grad_updates() -> None:
    s1 = SampleBatch(a=np.arange(3), state_in_0=np.zeros(2), seq_lens=[2, 1], _num_grad_updates=1.0)
    s2 = SampleBatch(a=np.arange(4), state_in_0=np.zeros(1), seq_lens=[4], _num_grad_updates=4.0)
    out = concat_samples([s1, s2])
    assert out["seq_lens"].tolist() == [2, 1, 4] and out.count == 7 and out.max_seq_len == 4
    assert out.num_grad_updates == pytest.approx((1.0 * 3 + 4.0 * 4) / 7)
    with pytest.raises(ValueError, match="zero_padded"):
        concat_samples([s1, SampleBatch(a=np.zeros(3), seq_lens=[3], _zero_padded=True, _max_seq_len=3)])


# ----- TensorDict -------------------------------------------------------------------------------


def test_to_tensordict_shares_memory_both_ways() -> None:
    batch = _batch(4, nested={"pos": np.zeros((4, 3)), "deep": {"v": np.arange(4)}}, terminateds=np.zeros(4, bool))
    td = batch.to_tensordict()
    assert isinstance(td, TensorDict) and td.batch_size == torch.Size([4])
    assert td["nested", "deep", "v"].tolist() == [0, 1, 2, 3]
    td["obs"][0, 1] = 42.0
    assert batch["obs"][0, 1] == 42.0
    batch["nested"]["pos"][2] = 7.0
    assert td["nested", "pos"][2].tolist() == [7.0, 7.0, 7.0]
    td["terminateds"][3] = True
    assert batch["terminateds"][3]
    for key in ("obs", "actions", "rewards", "terminateds"):
        assert np.shares_memory(td[key].numpy(), batch[key]), key
    assert np.shares_memory(td["nested", "pos"].numpy(), batch["nested"]["pos"])
    assert isinstance(td.get("infos"), NonTensorStack)
    assert td.get("infos").tolist()[1] is batch["infos"][1]
    assert td[1:3].get("infos").tolist() == [{"i": 1}, {"i": 2}]


def test_to_tensordict_non_tensor_rule_and_seq_lens() -> None:
    batch = SampleBatch(obs=np.zeros(2), names=np.array(["a", "b"]), infos=[{}, {}])
    assert set(batch.to_tensordict(keep_non_tensor=False).keys()) == {"obs"}
    assert batch.to_tensordict().get("names").tolist() == ["a", "b"]
    with pytest.raises(ValueError, match="seq_lens"):
        SampleBatch(a=np.arange(3), seq_lens=[3]).to_tensordict()
    # the documented exception to sharing: torch has no negative strides, so those are copied
    reversed_batch = SampleBatch(a=np.arange(4)[::-1])
    assert reversed_batch.to_tensordict()["a"].tolist() == [3, 2, 1, 0]


def test_from_tensordict_shares_memory() -> None:
    obs = torch.zeros(3, 2, requires_grad=True)
    td = TensorDict(
        {"obs": obs, "actions": torch.arange(3), "sub": TensorDict({"x": torch.ones(3)}, batch_size=[3])},
        batch_size=[3],
    )
    td.set("infos", NonTensorStack.from_list([{"a": 1}, {}, {}]))
    batch = SampleBatch.from_tensordict(td, is_training=True)
    assert batch.count == 3 and batch.is_training
    assert isinstance(batch["obs"], np.ndarray) and isinstance(batch["sub"]["x"], np.ndarray)
    assert batch["infos"] == [{"a": 1}, {}, {}]
    batch["actions"][1] = 50
    assert td["actions"][1] == 50
    td["sub", "x"][0] = -3.0
    assert batch["sub"]["x"][0] == -3.0
    assert np.shares_memory(batch["obs"], td["obs"].detach().numpy())


def test_round_trip_and_bad_tensordicts() -> None:
    batch = _batch(3)
    back = SampleBatch.from_tensordict(batch.to_tensordict())
    assert list(back.keys()) == list(batch.keys())
    assert np.shares_memory(back["obs"], batch["obs"]) and back["infos"] == batch["infos"]
    with pytest.raises(ValueError, match=r"one batch dimension.*\[2, 3\]"):
        SampleBatch.from_tensordict(TensorDict({"a": torch.zeros(2, 3)}, batch_size=[2, 3]))
    with pytest.raises(TypeError, match="'w'.*bfloat16"):
        SampleBatch.from_tensordict(TensorDict({"w": torch.zeros(2, dtype=torch.bfloat16)}, batch_size=[2]))


# ----- the rest of RLlib's surface ----------------------------------------------------------------


def test_pickle_round_trip_keeps_flags() -> None:
    batch = SampleBatch(a=np.arange(3), state_in_0=np.zeros(1), seq_lens=[3], _is_training=True)
    back = pickle.loads(pickle.dumps(batch))
    assert isinstance(back, SampleBatch) and back.count == 3 and back.is_training and back.max_seq_len == 3
    assert back["a"].tolist() == [0, 1, 2]
    assert not np.shares_memory(copy.deepcopy(batch)["a"], batch["a"])
    assert np.shares_memory(copy.copy(batch)["a"], batch["a"])


def test_get_interceptor_converts_reads() -> None:
    batch = _batch(2)
    batch.set_get_interceptor(torch.as_tensor)
    assert isinstance(batch["actions"], torch.Tensor)
    assert batch["actions"] is batch["actions"]  # cached
    batch["actions"] = np.array([7, 8])
    assert batch["actions"].tolist() == [7, 8]


def test_get_single_step_input_dict() -> None:
    batch = SampleBatch(
        obs=np.array([[0.0], [1.0]]), new_obs=np.array([[1.0], [2.0]]), actions=np.array([4, 5]),
        rewards=np.array([0.5, 1.5]), state_out_0=np.array([[9.0], [8.0]]),
    )
    view = SimpleNamespace  # duck-typed like ViewRequirement
    views = {
        "obs": view(data_col=None, shift=0, used_for_compute_actions=True),
        "prev_actions": view(data_col="actions", shift=-1, used_for_compute_actions=True),
        "prev_rewards": view(data_col=None, shift=-1, used_for_compute_actions=True),
        "state_in_0": view(data_col="state_out_0", shift=-1, used_for_compute_actions=True),
        "rewards": view(data_col=None, shift=0, used_for_compute_actions=False),
    }
    last = batch.get_single_step_input_dict(views)
    assert set(last.keys()) == {"obs", "prev_actions", "prev_rewards", "state_in_0", "seq_lens"}
    assert last["obs"].tolist() == [[2.0]] and last["prev_actions"].tolist() == [5]
    assert last["prev_rewards"].tolist() == [1.5] and last["state_in_0"].tolist() == [[8.0]]
    assert last.count == 1
    first = batch.get_single_step_input_dict({"obs": views["obs"]}, index=0)
    assert first["obs"].tolist() == [[0.0]]


def test_size_bytes() -> None:
    assert SampleBatch(a=np.zeros(4, np.float64), b={"c": np.zeros(4, np.int32)}).size_bytes() == 48


# ----- MultiAgentBatch ----------------------------------------------------------------------------


def test_multi_agent_batch_counts() -> None:
    ma = MultiAgentBatch({"p0": _batch(3), "p1": _batch(4)}, env_steps=4)
    assert ma.count == len(ma) == ma.env_steps() == 4
    assert ma.agent_steps() == 7
    assert ma["p1"].count == 4 and ma.policy_batches["p0"].count == 3
    assert ma.as_multi_agent() is ma
    assert repr(ma).startswith("MultiAgentBatch({'p0': SampleBatch(3: [") and repr(ma).endswith("env_steps=4)")
    with pytest.raises(KeyError, match="'p9'"):
        ma["p9"]
    with pytest.raises(TypeError, match=r"policy_batches\['p'\]: expected a SampleBatch, got dict"):
        MultiAgentBatch({"p": {"obs": np.zeros(2)}}, 2)  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="env_steps"):
        MultiAgentBatch({}, -1)


def test_wrap_as_needed_and_as_multi_agent() -> None:
    batch = _batch(2)
    assert MultiAgentBatch.wrap_as_needed({DEFAULT_POLICY_ID: batch}, 2) is batch
    wrapped = MultiAgentBatch.wrap_as_needed({"p": batch}, 2)
    assert isinstance(wrapped, MultiAgentBatch)
    ma = batch.as_multi_agent()
    assert ma.policy_batches == {DEFAULT_POLICY_ID: batch} and ma.env_steps() == 2


def test_multi_agent_copy_is_deep() -> None:
    ma = MultiAgentBatch({"p": _batch(2)}, 2)
    clone = ma.copy()
    clone["p"]["obs"][0, 0] = 100.0
    assert ma["p"]["obs"][0, 0] == 0.0 and clone.count == 2


def test_concat_multi_agent_batches() -> None:
    m1 = MultiAgentBatch({"p0": _batch(2), "p1": _batch(1)}, 2)
    m2 = MultiAgentBatch({"p0": _batch(3)}, 3)
    out = concat_samples([m1, m2])
    assert isinstance(out, MultiAgentBatch)
    assert out.env_steps() == 5 and out["p0"].count == 5 and out["p1"].count == 1 and out.agent_steps() == 6
    mixed = concat_samples_into_ma_batch([_batch(2), SampleBatch(), MultiAgentBatch({DEFAULT_POLICY_ID: _batch(1)}, 1)])
    assert mixed.env_steps() == 3 and mixed[DEFAULT_POLICY_ID]["actions"].tolist() == [0, 1, 0]
    with pytest.raises(TypeError, match="item 0 is a int"):
        concat_samples_into_ma_batch([3])  # type: ignore[list-item]


def test_single_step_input_dict_checks_a_view_like_shift_as_a_view_does() -> None:
    batch = SampleBatch(obs=np.array([0, 1]), new_obs=np.array([1, 2]), actions=np.array([5, 6]))
    window = SimpleNamespace(data_col="actions", shift="-3:-1", used_for_compute_actions=True)
    assert batch.get_single_step_input_dict({"last": window})["last"].tolist() == [[0, 5, 6]]
    window.shift = "-3000000000:0"  # would allocate 3e9 rows per step
    with pytest.raises(ValueError, match=r"reaches -3000000000 steps; a view reaches at most MAX_SHIFT=10000"):
        batch.get_single_step_input_dict({"last": window})


def test_single_step_input_dict_with_windows():
    from cadence.interop.rllib.view_requirement import ViewRequirement

    batch = SampleBatch(
        obs=np.arange(3, dtype=np.float32)[:, None], new_obs=np.arange(1, 4, dtype=np.float32)[:, None],
        actions=np.array([5, 6, 7]),
    )
    views = {
        "obs": ViewRequirement(shift=0),
        "frames": ViewRequirement("obs", shift="-2:0"),
        "last_actions": ViewRequirement("actions", shift=[-2, -1]),
        "unused": ViewRequirement("actions", used_for_compute_actions=False),
    }
    step = batch.get_single_step_input_dict(views)
    assert step["obs"].tolist() == [[3.0]]
    assert step["frames"].tolist() == [[[1.0], [2.0], [3.0]]]
    assert step["last_actions"].tolist() == [[6, 7]] and "unused" not in step
    at_one = batch.get_single_step_input_dict(views, index=1)
    assert at_one["frames"].tolist() == [[[0.0], [0.0], [1.0]]] and at_one["last_actions"].tolist() == [[0, 5]]


def test_tuples_are_structure_and_lists_are_data() -> None:
    # RLlib's rule: a tuple holds one column per part (a Tuple space), a list is one column.
    batch = SampleBatch({"actions": (np.arange(3), np.ones((3, 2))), "t": [0, 1, 2]})
    assert batch.count == 3 and isinstance(batch["t"], np.ndarray)
    assert batch[1:][SampleBatch.ACTIONS][0].tolist() == [1, 2]
    td = batch.to_tensordict()
    assert td["actions", "1"].shape == (3, 2)
    assert sorted(SampleBatch.from_tensordict(td)["actions"]) == ["0", "1"]  # back as a dict
    with pytest.raises(ValueError, match=r"column 'actions/1' has 2 rows but 'actions/0' has 3"):
        SampleBatch({"actions": (np.arange(3), np.ones((2, 2)))})
    with pytest.raises(ValueError, match=r"column 'actions' is a tuple of 2 parts in one batch and 1 parts"):
        concat_samples([batch, SampleBatch({"actions": (np.arange(1),), "t": [3]})])
