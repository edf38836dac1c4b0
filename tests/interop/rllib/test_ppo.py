"""PPOTorchPolicy: extra fetches, GAE postprocessing, the loss, pruning, the seed's example, learning."""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from cadence.interop.rllib import RolloutWorker, SampleBatch, ViewRequirement, concat_samples
from cadence.interop.rllib.algorithms import ppo

SB = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
SMALL = {"seed": 0, "model": {"fcnet_hiddens": [16, 16]}}


def _policy(action_space: gym.Space = gym.spaces.Discrete(2), **config: Any) -> ppo.PPOTorchPolicy:
    return ppo.PPOTorchPolicy(OBS_SPACE, action_space, {**SMALL, **config})


def _obs(rows: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (rows, 3)).astype(np.float32)


def _values(policy: ppo.PPOTorchPolicy, obs: np.ndarray) -> np.ndarray:
    return policy.compute_actions_from_input_dict({SB.OBS: obs}, explore=False)[2][SB.VF_PREDS]


def _hand_gae(rewards: np.ndarray, values: np.ndarray, last_value: float, gamma: float, lmbda: float) -> tuple[np.ndarray, np.ndarray]:
    """RLlib's compute_advantages, written out: deltas against [values, last_value], discounted by gamma*lambda."""
    extended = np.append(values, last_value)
    deltas = rewards + gamma * extended[1:] - extended[:-1]
    advantages = np.zeros_like(deltas)
    running = 0.0
    for t in reversed(range(len(deltas))):
        running = deltas[t] + gamma * lmbda * running
        advantages[t] = running
    return advantages, advantages + values


def _trajectory(policy: ppo.PPOTorchPolicy, rows: int, terminated: bool, truncated: bool) -> SampleBatch:
    obs = _obs(rows + 1, seed=3)
    actions, _, extra = policy.compute_actions_from_input_dict({SB.OBS: obs[:-1]}, explore=True)
    flags = np.zeros(rows, bool)
    return SampleBatch({
        SB.OBS: obs[:-1], SB.NEXT_OBS: obs[1:], SB.ACTIONS: actions,
        SB.REWARDS: np.linspace(0.5, 1.5, rows).astype(np.float32),
        SB.TERMINATEDS: np.concatenate([flags[:-1], [terminated]]),
        SB.TRUNCATEDS: np.concatenate([flags[:-1], [truncated]]),
        SB.EPS_ID: np.full(rows, 7, np.int64), **extra,
    })


class TestActions:
    def test_extra_fetches_discrete(self) -> None:
        policy = _policy()
        actions, state, extra = policy.compute_actions_from_input_dict({SB.OBS: _obs(5)})
        assert actions.shape == (5,) and actions.dtype == np.int64 and state == []
        assert sorted(extra) == [SB.ACTION_DIST_INPUTS, SB.ACTION_LOGP, SB.VF_PREDS]
        assert extra[SB.ACTION_DIST_INPUTS].shape == (5, 2) and extra[SB.VF_PREDS].shape == (5,)
        logp = torch.log_softmax(torch.as_tensor(extra[SB.ACTION_DIST_INPUTS]), -1)[torch.arange(5), torch.as_tensor(actions)]
        np.testing.assert_allclose(extra[SB.ACTION_LOGP], logp.numpy(), rtol=1e-6)

    def test_extra_fetches_box_and_mode(self) -> None:
        policy = _policy(gym.spaces.Box(-2.0, 2.0, (2,), np.float32))
        actions, _, extra = policy.compute_actions_from_input_dict({SB.OBS: _obs(4)}, explore=False)
        assert actions.shape == (4, 2) and extra[SB.ACTION_DIST_INPUTS].shape == (4, 4)
        # explore=False: the Gaussian's mean, the first half of the distribution inputs.
        np.testing.assert_allclose(actions, extra[SB.ACTION_DIST_INPUTS][:, :2])

    def test_sampling_is_seeded(self) -> None:
        first = _policy(seed=5).compute_actions_from_input_dict({SB.OBS: _obs(50)})[0]
        again = _policy(seed=5).compute_actions_from_input_dict({SB.OBS: _obs(50)})[0]
        np.testing.assert_array_equal(first, again)

    def test_bad_config_names_the_key(self) -> None:
        with pytest.raises(ValueError, match=r"config\['gamma'\]: expected a number in \[0, 1\], got 1.5"):
            _policy(gamma=1.5)
        with pytest.raises(ValueError, match=r"config\['num_sgd_iter'\]: expected an int >= 1, got 0"):
            _policy(num_sgd_iter=0)
        with pytest.raises(TypeError, match="action_space: expected Discrete or a 1-D Box"):
            ppo.PPOTorchPolicy(OBS_SPACE, gym.spaces.MultiBinary(3), SMALL)


class TestPostprocessing:
    def test_gae_terminated_bootstraps_from_zero(self) -> None:
        policy = _policy(gamma=0.9, **{"lambda": 0.8})
        batch = _trajectory(policy, 5, terminated=True, truncated=False)
        expected_adv, expected_targets = _hand_gae(batch[SB.REWARDS], batch[SB.VF_PREDS], 0.0, 0.9, 0.8)
        post = policy.postprocess_trajectory(batch)
        np.testing.assert_allclose(post[ppo.Postprocessing.ADVANTAGES], expected_adv, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(post[ppo.Postprocessing.VALUE_TARGETS], expected_targets, rtol=1e-5, atol=1e-6)

    @pytest.mark.parametrize("truncated", [True, False], ids=["truncated", "cut"])
    def test_gae_truncated_or_cut_bootstraps_from_last_new_obs(self, truncated: bool) -> None:
        policy = _policy(gamma=0.9, **{"lambda": 0.8})
        batch = _trajectory(policy, 5, terminated=False, truncated=truncated)
        last_value = float(_values(policy, batch[SB.NEXT_OBS][-1:])[0])
        assert abs(last_value) > 0  # the bootstrap must show in the numbers
        expected_adv, expected_targets = _hand_gae(batch[SB.REWARDS], batch[SB.VF_PREDS], last_value, 0.9, 0.8)
        post = policy.postprocess_trajectory(batch)
        np.testing.assert_allclose(post[ppo.Postprocessing.ADVANTAGES], expected_adv, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(post[ppo.Postprocessing.VALUE_TARGETS], expected_targets, rtol=1e-5, atol=1e-6)

    def test_without_gae_targets_are_discounted_returns(self) -> None:
        policy = _policy(gamma=0.5, use_gae=False)
        batch = _trajectory(policy, 3, terminated=True, truncated=False)
        rewards = batch[SB.REWARDS]
        returns = np.array([rewards[0] + 0.5 * rewards[1] + 0.25 * rewards[2], rewards[1] + 0.5 * rewards[2], rewards[2]])
        post = policy.postprocess_trajectory(batch)
        np.testing.assert_allclose(post[ppo.Postprocessing.VALUE_TARGETS], returns, rtol=1e-5)
        np.testing.assert_allclose(post[ppo.Postprocessing.ADVANTAGES], returns - batch[SB.VF_PREDS], rtol=1e-5, atol=1e-6)


class TestLossAndPruning:
    def test_loss_decreases_on_a_fixed_batch(self) -> None:
        policy = _policy(lr=1e-2, num_sgd_iter=1, sgd_minibatch_size=64, kl_coeff=0.0)
        batch = policy.postprocess_trajectory(_trajectory(policy, 64, terminated=True, truncated=False))
        first = policy.learn_on_batch(batch)["learner_stats"]
        for _ in range(30):
            last = policy.learn_on_batch(batch)["learner_stats"]
        assert last["total_loss"] < first["total_loss"] - 0.05
        assert last["vf_loss"] < first["vf_loss"]
        assert set(first) >= {"total_loss", "policy_loss", "vf_loss", "vf_explained_var", "kl", "entropy", "cur_kl_coeff", "cur_lr"}

    def test_learn_on_batch_counts_minibatches_and_adapts_kl(self) -> None:
        policy = _policy(lr=5e-2, num_sgd_iter=3, sgd_minibatch_size=16, kl_coeff=0.2, kl_target=1e-6)
        batch = policy.postprocess_trajectory(_trajectory(policy, 64, terminated=True, truncated=False))
        result = policy.learn_on_batch(batch)
        assert result["num_grad_updates_lifetime"] == 12 and result["num_agent_steps_trained"] == 64
        # A large step against a tiny target: RLlib's update_kl raises the coefficient by half.
        assert policy.kl_coeff == pytest.approx(0.3)

    def test_learn_on_batch_names_a_missing_column(self) -> None:
        policy = _policy()
        batch = _trajectory(policy, 4, terminated=True, truncated=False)
        with pytest.raises(KeyError, match="no column 'advantages'"):
            policy.learn_on_batch(batch)
        empty = policy.postprocess_trajectory(batch)[0:0]
        with pytest.raises(ValueError, match="at least one row, got 0 rows"):
            policy.learn_on_batch(empty)

    def test_learn_on_batch_skips_object_columns(self) -> None:
        policy = _policy(num_sgd_iter=1)
        batch = policy.postprocess_trajectory(_trajectory(policy, 8, terminated=True, truncated=False))
        batch[SB.INFOS] = [{} for _ in range(8)]
        assert np.isfinite(policy.learn_on_batch(batch)["learner_stats"]["total_loss"])

    def test_pruning_keeps_exactly_what_the_loss_reads(self) -> None:
        policy = _policy()
        views = policy.view_requirements
        # Collected: what inference, postprocessing and the loss read, plus the columns never pruned.
        assert sorted(views) == sorted([
            SB.OBS, SB.NEXT_OBS, SB.ACTIONS, SB.REWARDS, SB.TERMINATEDS, SB.TRUNCATEDS, SB.EPS_ID, SB.UNROLL_ID,
            SB.AGENT_INDEX, SB.T, SB.VF_PREDS, SB.ACTION_DIST_INPUTS, SB.ACTION_LOGP, "advantages", "value_targets",
        ])
        trained = {key for key, view in views.items() if view.used_for_training}
        loss_reads = {SB.OBS, SB.ACTIONS, SB.ACTION_DIST_INPUTS, SB.ACTION_LOGP, "advantages", "value_targets"}
        always = {SB.REWARDS, SB.TERMINATEDS, SB.TRUNCATEDS, SB.EPS_ID, SB.UNROLL_ID, SB.AGENT_INDEX, SB.T}
        assert trained == loss_reads | always
        # Only postprocessing reads these: collected, not trained on.
        assert not views[SB.VF_PREDS].used_for_training and not views[SB.NEXT_OBS].used_for_training
        assert [key for key, view in views.items() if view.used_for_compute_actions] == [SB.OBS]
        # postprocessing writes these; the sampler skips their views until it has (RLlib's rule)
        assert views["advantages"].used_for_training and views["value_targets"].used_for_training

    def test_box_actions_learn_through_a_worker(self) -> None:
        worker = RolloutWorker(
            env_creator=lambda _: gym.make("Pendulum-v1"), policy_spec=ppo.PPOTorchPolicy,
            policy_config={**SMALL, "rollout_fragment_length": 32, "num_sgd_iter": 2, "sgd_minibatch_size": 16},
        )
        batch = worker.sample()
        assert batch[SB.ACTIONS].shape == (32, 1) and ppo.Postprocessing.VALUE_TARGETS in batch
        stats = worker.learn_on_batch(batch)["default_policy"]["learner_stats"]
        assert np.isfinite(stats["total_loss"])


class TestSeedExample:
    def test_next_actions_with_real_ppo(self) -> None:
        # The seed's "Setting ViewRequirements manually after Policy construction", as written.
        action_space = gym.spaces.Discrete(2)
        rollout_worker = RolloutWorker(
            env_creator=lambda _: gym.make("CartPole-v0"),
            policy_config=ppo.DEFAULT_CONFIG,
            policy_spec=ppo.PPOTorchPolicy,
        )
        policy = rollout_worker.policy_map["default_policy"]
        policy.view_requirements["next_actions"] = ViewRequirement(SampleBatch.ACTIONS, shift=1, space=action_space)
        batch = rollout_worker.sample()
        assert "next_actions" in batch.data
        assert batch.count == ppo.DEFAULT_CONFIG["rollout_fragment_length"]
        assert {ppo.Postprocessing.ADVANTAGES, ppo.Postprocessing.VALUE_TARGETS} <= set(batch.keys())
        for episode in batch.split_by_episode():
            np.testing.assert_array_equal(episode["next_actions"][:-1], episode[SB.ACTIONS][1:])


# Tuned on CartPole-v1 (seeds 0-3 solve within 32k-58k env steps, a few seconds each).
LEARNING_CONFIG: dict[str, Any] = {
    **ppo.DEFAULT_CONFIG,
    "seed": 0, "lr": 3e-4, "gamma": 0.99, "lambda": 0.95, "num_sgd_iter": 10, "sgd_minibatch_size": 128,
    "vf_loss_coeff": 0.5, "train_batch_size": 2000, "rollout_fragment_length": 250, "num_envs_per_worker": 8,
    "model": {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh", "vf_share_layers": False},
}


@pytest.mark.slow
def test_ppo_solves_cartpole_within_100k_steps() -> None:
    torch.set_num_threads(1)
    config = LEARNING_CONFIG
    worker = RolloutWorker(env_creator=lambda _: gym.make("CartPole-v1"), policy_spec=ppo.PPOTorchPolicy, policy_config=config)
    policy = worker.get_policy()
    steps, running, completed = 0, {}, []
    start = time.perf_counter()
    while steps < 100_000:
        batches, rows = [], 0
        while rows < config["train_batch_size"]:
            batches.append(worker.sample())
            rows += batches[-1].count
        batch = concat_samples(batches)
        steps += batch.count
        # Episodes span batches (truncate_episodes): sum rewards per eps_id until the episode ends.
        ends = np.asarray(batch[SB.TERMINATEDS]) | np.asarray(batch[SB.TRUNCATEDS])
        for eps_id, reward, end in zip(batch[SB.EPS_ID].tolist(), batch[SB.REWARDS].tolist(), ends.tolist()):
            running[eps_id] = running.get(eps_id, 0.0) + reward
            if end:
                completed.append(running.pop(eps_id))
        recent = completed[-10:]
        if len(recent) == 10 and np.mean(recent) >= 450:
            break
        policy.learn_on_batch(batch)
    wall = time.perf_counter() - start
    assert len(recent) == 10 and np.mean(recent) >= 450, (
        f"mean return of the last 10 episodes {np.mean(recent):.1f} < 450 after {steps} env steps ({wall:.0f}s)"
    )
    print(f"CartPole-v1 solved: mean of last 10 episodes {np.mean(recent):.1f} at {steps} env steps, {wall:.1f}s")
