"""Recurrent policies through the sampling path: state_in/state_out, seq_lens, attention windows.

Documented choice (RLlib's): before an episode's first step, views on ``state_out_*`` read the
policy's initial state (not zeros), at inference and in training batches alike.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from cadence.interop.rllib import (
    MultiAgentBatch,
    Policy,
    RolloutWorker,
    SampleBatch,
    SyncSampler,
    ViewRequirement,
    chop_into_sequences,
)
from cadence.interop.rllib.batch_concat import concat_samples
from cadence.interop.rllib.collectors import Episode, SimpleListCollector
from cadence.interop.rllib.recurrent import infos_view, repeat_value, sequence_lengths
from tests.interop.rllib._sampling_helpers import CounterEnv, ready
from tests.interop.rllib.test_multi_agent import TogetherEnv

SB = SampleBatch
MAX_SEQ_LEN = 4
INITIAL = 0.5  # a distinctive initial state: "zeros before the start" would be visible


class GRUPolicy(Policy):
    """A GRU cell over the observation; records the states it is given at inference."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict[str, Any]) -> None:
        config = {**config, "model": {**config.get("model", {}), "max_seq_len": MAX_SEQ_LEN}}
        super().__init__(observation_space, action_space, config)
        gen = torch.Generator().manual_seed(0)
        self.cell = torch.nn.GRUCell(1, 2)
        with torch.no_grad():
            for param in self.cell.parameters():
                param.copy_(torch.rand(param.shape, generator=gen) - 0.5)
        self.seen: list[tuple[list[float], list[list[float]], list[int]]] = []  # (t, state_in, seq_lens)
        self.returned: list[np.ndarray] = []
        self.losses: list[float] = []

    def get_initial_state(self) -> list[Any]:
        return [np.full(2, INITIAL, np.float32)]

    def compute_actions_from_input_dict(self, input_dict: SampleBatch, explore: Any = None, **kwargs: Any) -> Any:
        obs = torch.as_tensor(np.asarray(input_dict[SB.OBS]), dtype=torch.float32)
        state = torch.as_tensor(np.asarray(input_dict["state_in_0"]), dtype=torch.float32)
        seq_lens = np.asarray(input_dict[SB.SEQ_LENS])
        with torch.no_grad():
            out = self.cell(obs, state)
        self.seen.append((np.asarray(input_dict[SB.OBS])[:, 0].tolist(), state.tolist(), seq_lens.tolist()))
        self.returned.append(out.numpy())
        return np.zeros(len(obs), np.int64), [out.numpy()], {}

    def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
        state = torch.as_tensor(train_batch["state_in_0"], dtype=torch.float32)
        seq_lens = torch.as_tensor(train_batch[SB.SEQ_LENS])
        obs = torch.as_tensor(train_batch[SB.OBS], dtype=torch.float32)
        np.asarray(train_batch["state_out_0"])  # read: the tests compare state_in with it
        assert len(state) == len(seq_lens) and int(seq_lens.sum()) == len(obs)
        # Unroll the cell over each sequence from its state_in.
        total, row = torch.zeros(()), 0
        for h, length in zip(state, seq_lens.tolist()):
            h = h[None]
            for _ in range(length):
                h = self.cell(obs[row:row + 1], h)
                row += 1
            total = total + h.pow(2).sum()
        return total / len(seq_lens)

    def optimizer(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.cell.parameters(), lr=0.01)


def _policy(**config: Any) -> GRUPolicy:
    env = CounterEnv()
    return _fresh(ready(GRUPolicy(env.observation_space, env.action_space, config)))


def _fresh(policy: GRUPolicy) -> GRUPolicy:
    """Forgets what the view-pruning dummy pass recorded."""
    policy.seen.clear()
    policy.returned.clear()
    policy.memories = []
    return policy


def _sampler(policy: GRUPolicy, length: int, fragment: int) -> SyncSampler:
    return SyncSampler(envs=[CounterEnv(length)], policy_map={"default_policy": policy},
                       rollout_fragment_length=fragment, seed=0)


def test_state_views_are_declared_with_the_sequence_length() -> None:
    policy = _policy()
    view = policy.view_requirements["state_in_0"]
    assert view.data_col == "state_out_0" and view.shift == -1 and view.batch_repeat_value == MAX_SEQ_LEN
    assert policy.is_recurrent() and repeat_value(policy.view_requirements) == MAX_SEQ_LEN


def test_inference_gets_the_last_state_out_and_the_initial_state_at_episode_starts() -> None:
    policy = _policy()
    sampler = _sampler(policy, length=7, fragment=5)  # fragment cuts at t=5 mid-episode
    for _ in range(4):
        sampler.get_data()
    previous: np.ndarray | None = None
    for (obs, state, seq_lens), returned in zip(policy.seen, policy.returned):
        assert seq_lens == [1]
        if obs[0] == 0.0:  # the reset observation: an episode's first step
            assert state == [[INITIAL, INITIAL]]
        else:  # the state returned the step before, also right after a fragment cut
            np.testing.assert_allclose(state, previous, rtol=0, atol=0)
        previous = returned
    assert sum(obs[0] == 0.0 for obs, _, _ in policy.seen) >= 3


def test_training_batches_have_one_state_per_sequence_and_seq_lens() -> None:
    policy = _policy()
    sampler = _sampler(policy, length=7, fragment=10)  # episodes of 7: fragments 7+3, 4+6, ...
    batches = [sampler.get_data() for _ in range(3)]
    outs = {(int(b[SB.EPS_ID][i]), int(b[SB.T][i])): b["state_out_0"][i] for b in batches for i in range(b.count)}
    for batch in batches:
        assert batch.count == 10
        assert int(batch[SB.SEQ_LENS].sum()) == batch.count
        assert len(batch["state_in_0"]) == len(batch[SB.SEQ_LENS])
        assert (batch[SB.SEQ_LENS] <= MAX_SEQ_LEN).all()
        # ceil(T / 4) state rows per episode fragment.
        fragments = dict.fromkeys(zip(batch[SB.EPS_ID].tolist(), batch[SB.UNROLL_ID].tolist()))
        rows = [int(((batch[SB.EPS_ID] == e) & (batch[SB.UNROLL_ID] == u)).sum()) for e, u in fragments]
        assert len(batch["state_in_0"]) == sum(math.ceil(n / MAX_SEQ_LEN) for n in rows)
        bounds = np.concatenate([[0], np.cumsum(batch[SB.SEQ_LENS])])
        for seq, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
            assert len(set(batch[SB.EPS_ID][lo:hi].tolist())) == 1  # never crosses episodes
            assert len(set(batch[SB.UNROLL_ID][lo:hi].tolist())) == 1  # nor fragment cuts
            eps_id, t0 = int(batch[SB.EPS_ID][lo]), int(batch[SB.T][lo])
            if t0 == 0:  # an episode start: the initial state
                assert batch["state_in_0"][seq].tolist() == [INITIAL, INITIAL]
            elif (eps_id, t0 - 1) in outs:  # the state_out of the step before, even across a cut
                np.testing.assert_array_equal(batch["state_in_0"][seq], outs[(eps_id, t0 - 1)])
        # chop_into_sequences on the batch agrees with the collector's seq_lens and states.
        _, initial, seq_lens = chop_into_sequences(
            feature_columns=[batch[SB.OBS]], state_columns=[batch["state_in_0"]], max_seq_len=MAX_SEQ_LEN,
            episode_ids=batch[SB.EPS_ID], unroll_ids=batch[SB.UNROLL_ID], agent_indices=batch[SB.AGENT_INDEX],
            states_already_reduced_to_init=True,
        )
        assert seq_lens.tolist() == batch[SB.SEQ_LENS].tolist()
        np.testing.assert_array_equal(initial[0], batch["state_in_0"])
    # The fragment cut mid-episode: the second batch continues the first one's last episode at t=3.
    first, second = batches[0], batches[1]
    assert int(second[SB.EPS_ID][0]) == int(first[SB.EPS_ID][-1]) and int(second[SB.T][0]) == int(first[SB.T][-1]) + 1
    np.testing.assert_array_equal(second["state_in_0"][0], first["state_out_0"][-1])


def test_concat_and_learn_on_batch_keep_sequences_consistent() -> None:
    policy = _policy()
    sampler = _sampler(policy, length=6, fragment=5)
    batch = concat_samples([sampler.get_data() for _ in range(3)])
    assert batch.count == 15 and int(batch[SB.SEQ_LENS].sum()) == 15
    assert len(batch["state_in_0"]) == len(batch[SB.SEQ_LENS])
    weight = policy.cell.weight_hh.detach().clone()
    stats = policy.learn_on_batch(batch)
    assert np.isfinite(stats["learner_stats"]["total_loss"])
    assert not torch.equal(weight, policy.cell.weight_hh)


def test_multi_agent_batches_keep_one_state_per_sequence_per_agent() -> None:
    worker = RolloutWorker(
        env_creator=lambda ctx: TogetherEnv(length=5), policy_spec=GRUPolicy,
        policy_config={"rollout_fragment_length": 6, "seed": 0,
                       "multiagent": {"policies": {"shared"}, "policy_mapping_fn": lambda aid, ep, worker, **kw: "shared"}},
    )
    batches = [worker.sample() for _ in range(2)]
    for batch in batches:
        assert isinstance(batch, MultiAgentBatch) and batch.env_steps() == 6
        shared = batch["shared"]
        assert shared.count == 12 and int(shared[SB.SEQ_LENS].sum()) == 12
        assert len(shared["state_in_0"]) == len(shared[SB.SEQ_LENS])
        bounds = np.concatenate([[0], np.cumsum(shared[SB.SEQ_LENS])])
        for lo, hi in zip(bounds[:-1], bounds[1:]):  # one agent, one episode, one fragment per sequence
            for col in (SB.EPS_ID, SB.AGENT_INDEX, SB.UNROLL_ID):
                assert len(set(shared[col][lo:hi].tolist())) == 1
    joined = concat_samples(batches)
    assert joined["shared"].count == 24 and len(joined["shared"]["state_in_0"]) == len(joined["shared"][SB.SEQ_LENS])
    stats = worker.policy_map["shared"].learn_on_batch(joined["shared"])
    assert np.isfinite(stats["learner_stats"]["total_loss"])


class AttentionPolicy(GRUPolicy):
    """Adds the seed's attention-style memory view: the last 3 states before each sequence."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict[str, Any]) -> None:
        super().__init__(observation_space, action_space, config)
        space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.view_requirements["state_in_1"] = ViewRequirement(
            "state_out_0", shift="-3:-1", batch_repeat_value=MAX_SEQ_LEN, space=space)

    def compute_actions_from_input_dict(self, input_dict: SampleBatch, explore: Any = None, **kwargs: Any) -> Any:
        memory = np.asarray(input_dict["state_in_1"])
        assert memory.shape[1:] == (3, 2)
        self.memories = getattr(self, "memories", []) + [memory]
        return super().compute_actions_from_input_dict(input_dict, explore, **kwargs)

    def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
        memory = torch.as_tensor(train_batch["state_in_1"], dtype=torch.float32)
        return super().loss(model, dist_class, train_batch) + 0.0 * memory.sum()


def test_attention_window_holds_the_last_three_states_before_each_sequence() -> None:
    env = CounterEnv()
    policy = _fresh(ready(AttentionPolicy(env.observation_space, env.action_space, {})))
    sampler = _sampler(policy, length=9, fragment=9)
    batch = sampler.get_data()
    assert batch["state_in_1"].shape == (3, 3, 2) and batch[SB.SEQ_LENS].tolist() == [4, 4, 1]
    outs = batch["state_out_0"]
    init = np.full(2, INITIAL, np.float32)
    # Sequence starts t = 0, 4, 8: states t-3 .. t-1, the initial state before the episode start.
    np.testing.assert_array_equal(batch["state_in_1"][0], np.stack([init] * 3))
    np.testing.assert_array_equal(batch["state_in_1"][1], outs[1:4])
    np.testing.assert_array_equal(batch["state_in_1"][2], outs[5:8])
    # At inference, the window at step t holds the states returned at t-3 .. t-1.
    np.testing.assert_array_equal(policy.memories[1][0], np.stack([init, init, outs[0]]))
    np.testing.assert_array_equal(policy.memories[5][0], outs[2:5])
    assert policy.learn_on_batch(batch)["learner_stats"]["total_loss"] >= 0


def test_shifted_infos_read_empty_dicts_outside_the_steps() -> None:
    policy = _policy()
    policy.view_requirements["prev_infos"] = ViewRequirement(SB.INFOS, shift=-1, used_for_compute_actions=False)
    policy.view_requirements[SB.INFOS] = ViewRequirement(used_for_compute_actions=False)
    batch = _sampler(policy, length=3, fragment=3).get_data()
    assert list(batch["prev_infos"]) == [{}, {"count": 1}, {"count": 2}]
    assert infos_view("w", ViewRequirement(SB.INFOS, shift="-1:0"), [{"a": 1}], 0, 1) == [[{}, {"a": 1}]]
    # At inference too: the step about to act has no info yet, the one before has.
    collector = SimpleListCollector({"default_policy": policy})
    collector.add_init_obs(Episode(1, 0), 0, 0, "default_policy", 0, np.zeros(1, np.float32))
    policy.view_requirements["prev_infos"].used_for_compute_actions = True
    assert list(collector.get_inference_input_dict("default_policy")["prev_infos"]) == [{}]
    collector.add_action_reward_next_obs(1, 0, 0, "default_policy", False, {
        SB.ACTIONS: np.int64(0), SB.REWARDS: 0.0, SB.TERMINATEDS: False, SB.TRUNCATEDS: False, SB.INFOS: {"n": 1},
        SB.NEXT_OBS: np.ones(1, np.float32), "state_out_0": np.zeros(2, np.float32)})
    assert list(collector.get_inference_input_dict("default_policy")["prev_infos"]) == [{"n": 1}]


def test_repeat_value_needs_a_state_in_name() -> None:
    with pytest.raises(ValueError, match="view 'memory': batch_repeat_value=4 needs a 'state_in_\\*' name"):
        repeat_value({"memory": ViewRequirement("state_out_0", shift=-1, batch_repeat_value=4)})
    with pytest.raises(ValueError, match="must be equal"):
        repeat_value({"state_in_0": ViewRequirement("state_out_0", shift=-1, batch_repeat_value=4),
                      "state_in_1": ViewRequirement("state_out_1", shift=-1, batch_repeat_value=2)})
    assert sequence_lengths(9, 4).tolist() == [4, 4, 1]


def test_collector_alone_fills_state_from_the_initial_state() -> None:
    policy = _policy()
    collector = SimpleListCollector({"default_policy": policy}, rollout_fragment_length=2)
    collector.add_init_obs(Episode(1, 0), 0, 0, "default_policy", 0, np.zeros(1, np.float32))
    first = collector.get_inference_input_dict("default_policy")
    assert first["state_in_0"].tolist() == [[INITIAL, INITIAL]] and first[SB.SEQ_LENS].tolist() == [1]
    collector.add_action_reward_next_obs(1, 0, 0, "default_policy", False, {
        SB.ACTIONS: np.int64(0), SB.REWARDS: 0.0, SB.TERMINATEDS: False, SB.TRUNCATEDS: False, SB.INFOS: {},
        SB.NEXT_OBS: np.ones(1, np.float32), "state_out_0": np.array([1.0, 2.0], np.float32)})
    assert collector.get_inference_input_dict("default_policy")["state_in_0"].tolist() == [[1.0, 2.0]]
