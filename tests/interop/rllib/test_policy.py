"""RLlib's Policy: default views, the contract, actions, learning, weights, and view pruning."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from cadence.interop.rllib.models import FullyConnectedNetwork, ModelV2
from cadence.interop.rllib.policy import LEARNER_STATS_KEY, Policy, RandomPolicy
from cadence.interop.rllib.sample_batch import SampleBatch
from cadence.interop.rllib.view_requirement import ViewRequirement

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(2)
SB = SampleBatch


class ObsPolicy(Policy):
    """Acts on obs only; by default no loss (subclasses add one)."""

    def compute_actions_from_input_dict(self, input_dict: SampleBatch, explore: Any = None, **kwargs: Any) -> Any:
        obs = input_dict[SB.OBS]
        return (obs[:, 0] > 0).astype(np.int64), [], {}


class ObsActionsRewardsLoss(ObsPolicy):
    def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
        total = train_batch[SB.OBS].sum() + train_batch[SB.ACTIONS].sum() + train_batch[SB.REWARDS].sum()
        return total.float().requires_grad_()


def _views_with(policy: Policy, flag: str) -> set[str]:
    return {key for key, view in policy.view_requirements.items() if getattr(view, flag)}


# --- default view requirements ------------------------------------------------------------


def test_default_view_requirements_names_shifts_flags_spaces() -> None:
    views = ObsPolicy(OBS, ACT, {}).view_requirements
    assert list(views) == [
        "obs", "new_obs", "actions", "prev_actions", "rewards", "prev_rewards",
        "terminateds", "truncateds", "infos", "eps_id", "unroll_id", "agent_index", "t",
    ]  # fmt: skip
    layout = {key: (view.data_col, view.shift) for key, view in views.items()}
    assert layout["new_obs"] == ("obs", 1) and layout["prev_actions"] == ("actions", -1)
    assert layout["prev_rewards"] == ("rewards", -1) and layout["obs"] == (None, 0)
    assert all(layout[key] == (None, 0) for key in ["actions", "rewards", "terminateds", "infos", "eps_id", "t"])
    assert {key for key, view in views.items() if not view.used_for_compute_actions} == {"new_obs", "actions", "infos"}
    assert all(view.used_for_training for view in views.values())
    assert views["obs"].space is OBS and views["new_obs"].space is OBS
    assert views["actions"].space is ACT and views["prev_actions"].space is ACT
    scalar = gym.spaces.Box(-np.inf, np.inf, (), np.float32)
    for key in ["rewards", "prev_rewards", "terminateds", "truncateds", "infos", "eps_id", "unroll_id", "agent_index", "t"]:
        assert views[key].space == scalar and not views[key].space_given, key


def test_a_subclass_may_add_to_or_change_the_views() -> None:
    class Custom(ObsPolicy):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.view_requirements["prev_obs"] = ViewRequirement("obs", shift="-2:-1", space=OBS)
            self.view_requirements[SB.OBS].shift = "-1:0"

        def compute_actions_from_input_dict(self, input_dict: SampleBatch, **kwargs: Any) -> Any:
            assert input_dict["prev_obs"].shape == (len(input_dict), 2, 3)
            assert input_dict["obs"].shape == (len(input_dict), 2, 3)
            return np.zeros(len(input_dict), np.int64), [], {}

    policy = Custom(OBS, ACT, {})
    policy._initialize_loss_from_dummy_batch()
    assert {"prev_obs", "obs"} <= _views_with(policy, "used_for_compute_actions")


def test_bad_constructor_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="observation_space must be a gymnasium.spaces.Space, got tuple"):
        ObsPolicy((3,), ACT, {})
    with pytest.raises(TypeError, match="config must be a dict, got list"):
        ObsPolicy(OBS, ACT, [])


# --- models' views ---------------------------------------------------------------------------


class LSTMStyleModel(ModelV2):
    """The seed's example: prev actions and prev rewards added to the model's views."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int, model_config: dict, name: str) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        if model_config["lstm_use_prev_action"]:
            self.view_requirements[SB.PREV_ACTIONS] = ViewRequirement(SB.ACTIONS, space=self.action_space, shift=-1)
        if model_config["lstm_use_prev_reward"]:
            self.view_requirements[SB.PREV_REWARDS] = ViewRequirement(SB.REWARDS, shift=-1)
        self.linear = torch.nn.Linear(3 + 2, num_outputs)

    def forward(self, input_dict: SampleBatch, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
        extra = [input_dict[SB.PREV_ACTIONS].float().unsqueeze(-1), input_dict[SB.PREV_REWARDS].float().unsqueeze(-1)]
        return self.linear(torch.cat([input_dict[SB.OBS], *extra], -1)), state


class ModelPolicy(Policy):
    """A policy whose actions come from its model; the model exists before or after super().__init__."""

    model_before = True

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        make = lambda: LSTMStyleModel(observation_space, action_space, 2, config["model"], "m")  # noqa: E731
        if self.model_before:
            self.model = make()
        super().__init__(observation_space, action_space, config)
        if not self.model_before:
            self.model = make()

    def compute_actions_from_input_dict(self, input_dict: SampleBatch, **kwargs: Any) -> Any:
        with torch.no_grad():
            logits, state = self.model(input_dict)
        return logits.argmax(-1).numpy(), state, {SB.ACTION_DIST_INPUTS: logits.numpy()}

    def loss(self, model: ModelV2, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
        logits, _ = model(train_batch)
        return torch.nn.functional.cross_entropy(logits, train_batch[SB.ACTIONS])

    def optimizer(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.model.parameters(), lr=0.1)


LSTM_CONFIG = {"model": {"lstm_use_prev_action": True, "lstm_use_prev_reward": True}}


@pytest.mark.parametrize("model_before", [True, False])
def test_model_views_are_merged_and_drive_inference(model_before: bool) -> None:
    policy_cls = type("P", (ModelPolicy,), {"model_before": model_before})
    policy = policy_cls(OBS, ACT, LSTM_CONFIG)
    policy._initialize_loss_from_dummy_batch()
    views = policy.view_requirements
    assert views[SB.PREV_ACTIONS] == ViewRequirement(SB.ACTIONS, space=ACT, shift=-1)
    assert views[SB.PREV_REWARDS].data_col == SB.REWARDS and views[SB.PREV_REWARDS].shift == -1
    # the model reads obs and both prev views at inference and in the loss
    assert _views_with(policy, "used_for_compute_actions") == {"obs", "prev_actions", "prev_rewards"}
    assert {"obs", "prev_actions", "prev_rewards", "actions"} <= _views_with(policy, "used_for_training")
    # pruning flips flags on the policy's copies: the model's declaration stays as written
    assert policy.model.view_requirements[SB.PREV_ACTIONS] is not views[SB.PREV_ACTIONS]
    assert all(view.used_for_training for view in policy.model.view_requirements.values())


def test_model_views_override_the_defaults() -> None:
    class FrameStack(LSTMStyleModel):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.view_requirements[SB.OBS] = ViewRequirement(shift="-3:0", space=OBS)

    policy = RandomPolicy(OBS, ACT, {})
    policy.model = FrameStack(OBS, ACT, 2, LSTM_CONFIG["model"], "fs")
    policy._initialize_loss_from_dummy_batch()
    assert policy.view_requirements[SB.OBS].shift == "-3:0"


# --- the contract ------------------------------------------------------------------------------


def test_a_policy_missing_compute_actions_is_refused_at_definition() -> None:
    with pytest.raises(TypeError, match=r"NoActions must define compute_actions_from_input_dict\(\).*abstract=True"):

        class NoActions(Policy):
            def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> Any:
                return None

    class Base(Policy, abstract=True):
        def postprocess_trajectory(self, sample_batch: SampleBatch, other_agent_batches: Any = None, episode: Any = None) -> SampleBatch:
            return sample_batch

    class Concrete(Base):
        def compute_actions_from_input_dict(self, input_dict: SampleBatch, **kwargs: Any) -> Any:
            return np.zeros(len(input_dict), np.int64), [], {}

    assert Concrete(OBS, ACT, {}).compute_single_action(np.zeros(3, np.float32))[0] == 0


def test_postprocess_trajectory_is_identity_and_loss_is_optional() -> None:
    policy = ObsPolicy(OBS, ACT, {})
    batch = SB(obs=np.zeros((2, 3)))
    assert policy.postprocess_trajectory(batch) is batch
    with pytest.raises(NotImplementedError, match="ObsPolicy has no loss"):
        policy.loss(None, None, batch)


# --- compute_single_action ---------------------------------------------------------------------


class Echo(Policy):
    """Returns what it saw, to check the input dict compute_single_action builds."""

    def compute_actions_from_input_dict(self, input_dict: SampleBatch, explore: Any = None, timestep: Any = None, episodes: Any = None, **kwargs: Any) -> Any:
        self.seen = {"explore": explore, "timestep": timestep, "episodes": episodes, "keys": set(input_dict.keys())}
        obs = input_dict[SB.OBS]
        extra = {SB.VF_PREDS: obs.sum(-1), "prev": input_dict[SB.PREV_ACTIONS], "prev_r": input_dict[SB.PREV_REWARDS]}
        return np.tanh(obs) * 3, [], extra


def test_compute_single_action() -> None:
    box = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    policy = Echo(OBS, box, {})
    obs = np.array([0.1, 0.2, 0.9], np.float32)
    action, state, extra = policy.compute_single_action(obs, prev_action=np.ones(3, np.float32), prev_reward=2.5, explore=False, timestep=7)
    assert action.shape == (3,) and np.allclose(action, np.tanh(obs) * 3) and state == []
    assert float(extra[SB.VF_PREDS]) == pytest.approx(1.2)
    assert extra["prev"].tolist() == [1, 1, 1] and float(extra["prev_r"]) == 2.5
    assert policy.seen["explore"] is False and policy.seen["timestep"] == 7 and policy.seen["episodes"] is None
    # inference views not given are zeros, as at an episode start
    _, _, extra = policy.compute_single_action(obs, episode="ep")
    assert extra["prev"].tolist() == [0, 0, 0] and float(extra["prev_r"]) == 0.0 and policy.seen["episodes"] == ["ep"]
    clipped, _, _ = policy.compute_single_action(obs, clip_actions=True)
    assert clipped.max() <= 1.0
    from_dict, _, _ = policy.compute_single_action(input_dict={SB.OBS: obs, SB.PREV_ACTIONS: np.zeros(3), SB.PREV_REWARDS: 0.0})
    assert np.allclose(from_dict, action)
    with pytest.raises(ValueError, match="expected an observation"):
        policy.compute_single_action()


def test_compute_single_action_of_a_recurrent_policy_starts_from_the_initial_state() -> None:
    class Counter(Policy):
        def compute_actions_from_input_dict(self, input_dict: SampleBatch, **kwargs: Any) -> Any:
            state = input_dict["state_in_0"]
            return np.zeros(len(state), np.int64), [state + 1], {}

        def get_initial_state(self) -> list[np.ndarray]:
            return [np.zeros(2, np.float32)]

    policy = Counter(OBS, ACT, {})
    assert policy.is_recurrent() and policy.num_state_tensors() == 1
    _, state, _ = policy.compute_single_action(np.zeros(3, np.float32))
    _, state, _ = policy.compute_single_action(np.zeros(3, np.float32), state)
    assert state[0].tolist() == [2.0, 2.0]


# --- learn_on_batch --------------------------------------------------------------------------------


class FitPolicy(Policy):
    """An FCN policy learning to imitate the batch's actions."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        super().__init__(observation_space, action_space, config)
        self.model = FullyConnectedNetwork(observation_space, action_space, 2, {"fcnet_hiddens": [16]}, "fc")

    def compute_actions_from_input_dict(self, input_dict: SampleBatch, **kwargs: Any) -> Any:
        with torch.no_grad():
            logits, _ = self.model(input_dict)
            values = self.model.value_function()
        return logits.argmax(-1).numpy(), [], {SB.VF_PREDS: values.numpy()}

    def loss(self, model: ModelV2, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
        logits, _ = model(train_batch)
        return torch.nn.functional.cross_entropy(logits, train_batch[SB.ACTIONS])

    def optimizer(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.model.parameters(), lr=0.05)

    def stats_fn(self, train_batch: SampleBatch) -> dict[str, Any]:
        return {"mean_reward": train_batch[SB.REWARDS].mean()}


def _imitation_batch(rows: int = 64, seed: int = 0) -> SampleBatch:
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (rows, 3)).astype(np.float32)
    return SB(obs=obs, actions=(obs[:, 1] > 0).astype(np.int64), rewards=np.ones(rows, np.float32))


def test_learn_on_batch_takes_gradient_steps_on_the_loss() -> None:
    policy, batch = FitPolicy(OBS, ACT, {}), _imitation_batch()
    first = policy.learn_on_batch(batch)
    for _ in range(60):
        last = policy.learn_on_batch(batch)
    stats = last[LEARNER_STATS_KEY]
    assert stats["total_loss"] < 0.5 * first[LEARNER_STATS_KEY]["total_loss"]
    assert stats["mean_reward"] == 1.0 and last["num_agent_steps_trained"] == 64 and last["num_grad_updates_lifetime"] == 61
    assert isinstance(batch[SB.OBS], np.ndarray)  # the caller's batch is untouched
    assert "grad_gnorm" in FitPolicy(OBS, ACT, {"grad_clip": 0.5}).learn_on_batch(batch)[LEARNER_STATS_KEY]
    assert policy.learn_on_batch(dict(batch))["num_agent_steps_trained"] == 64


def test_learn_on_batch_names_what_is_missing() -> None:
    with pytest.raises(NotImplementedError, match=r"does not define loss\(model, dist_class, train_batch\) and optimizer\(\)"):
        ObsPolicy(OBS, ACT, {}).learn_on_batch(_imitation_batch())

    class LossOnly(ObsActionsRewardsLoss):
        pass

    with pytest.raises(NotImplementedError, match=r"LossOnly does not define optimizer\(\); define them or override"):
        LossOnly(OBS, ACT, {}).learn_on_batch(_imitation_batch())


def test_learn_on_batch_with_one_term_per_optimizer() -> None:
    class TwoHeads(Policy):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.a, self.b = torch.nn.Parameter(torch.zeros(())), torch.nn.Parameter(torch.zeros(()))
            self.terms = 2

        def compute_actions_from_input_dict(self, input_dict: SampleBatch, **kwargs: Any) -> Any:
            return np.zeros(len(input_dict), np.int64), [], {}

        def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> list[torch.Tensor]:
            r = train_batch[SB.REWARDS].mean()
            return [(self.a - r) ** 2, (self.b + self.a - 2 * r) ** 2][: self.terms]

        def optimizer(self) -> list[torch.optim.Optimizer]:
            return [torch.optim.SGD([self.a], lr=0.25), torch.optim.SGD([self.b], lr=0.25)]

    policy = TwoHeads(OBS, ACT, {})
    policy.learn_on_batch(SB(rewards=np.ones(2, np.float32)))
    # a only sees term 0's gradient (-2), b only term 1's (-4): each optimizer on its own term
    assert policy.a.item() == pytest.approx(0.5) and policy.b.item() == pytest.approx(1.0)
    policy.terms = 1
    with pytest.raises(ValueError, match=r"returned 1 term\(s\) but optimizer\(\) gave 2 optimizer\(s\)"):
        policy.learn_on_batch(SB(rewards=np.ones(2, np.float32)))


# --- weights -----------------------------------------------------------------------------------------


def test_get_and_set_weights() -> None:
    source, target = FitPolicy(OBS, ACT, {}), FitPolicy(OBS, ACT, {})
    source.learn_on_batch(_imitation_batch())
    weights = source.get_weights()
    assert all(isinstance(value, np.ndarray) for value in weights.values())
    target.set_weights(weights)
    obs = _imitation_batch(8, seed=1)[SB.OBS]
    assert np.array_equal(source.compute_single_action(obs[0])[2][SB.VF_PREDS], target.compute_single_action(obs[0])[2][SB.VF_PREDS])
    weights["_logits.bias"][:] = 5.0  # a copy: the model does not change with it
    assert not np.any(source.get_weights()["_logits.bias"] == 5.0)
    with pytest.raises(ValueError, match=r"'_logits.bias' has shape \(3,\), expected \(2,\)"):
        target.set_weights({**weights, "_logits.bias": np.zeros(3)})
    with pytest.raises(ValueError, match=r"missing \['_logits.bias'\], unexpected \['extra'\]"):
        target.set_weights({**{k: v for k, v in weights.items() if k != "_logits.bias"}, "extra": np.zeros(1)})
    assert ObsPolicy(OBS, ACT, {}).get_weights() == {}
    ObsPolicy(OBS, ACT, {}).set_weights({})


# --- pruning -------------------------------------------------------------------------------------------


def test_a_loss_reading_obs_actions_rewards_prunes_the_rest() -> None:
    policy = ObsActionsRewardsLoss(OBS, ACT, {})
    policy._initialize_loss_from_dummy_batch()
    views = policy.view_requirements
    for key in ["new_obs", "prev_actions", "prev_rewards", "infos"]:
        assert key not in views or not views[key].used_for_training, key
    assert not {"new_obs", "prev_actions", "prev_rewards", "infos"} & set(views)  # nobody reads them: not collected
    for key in ["rewards", "terminateds", "truncateds", "obs", "actions"]:
        assert views[key].used_for_training, key  # the dones are never dropped (the seed)
    assert {"eps_id", "unroll_id", "agent_index", "t"} <= set(views)  # the sampler's bookkeeping
    assert _views_with(policy, "used_for_compute_actions") == {"obs"}
    assert policy.loss_initialized


def test_what_postprocessing_reads_stays_collected() -> None:
    class NextObsPost(ObsActionsRewardsLoss):
        def postprocess_trajectory(self, sample_batch: SampleBatch, other_agent_batches: Any = None, episode: Any = None) -> SampleBatch:
            _ = sample_batch[SB.NEXT_OBS]
            return sample_batch  # the same object the loss pass then gets a fresh copy of

    policy = NextObsPost(OBS, ACT, {})
    policy._initialize_loss_from_dummy_batch()
    assert SB.NEXT_OBS in policy.view_requirements
    assert not policy.view_requirements[SB.NEXT_OBS].used_for_training  # read in postprocessing only
    assert not policy.view_requirements[SB.NEXT_OBS].used_for_compute_actions


def test_reads_through_copies_slices_and_items_count_and_added_columns_get_views() -> None:
    class Gae(ObsActionsRewardsLoss):
        def postprocess_trajectory(self, sample_batch: SampleBatch, other_agent_batches: Any = None, episode: Any = None) -> SampleBatch:
            batch = sample_batch.copy()
            last = batch[len(batch) - 1 :]
            batch["advantages"] = batch[SB.PREV_REWARDS] + last[SB.NEXT_OBS][0, 0]
            batch["debug"] = np.zeros(len(batch), np.int32)
            return batch

        def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
            return (super().loss(model, dist_class, train_batch) + train_batch["advantages"].sum()).requires_grad_()

    policy = Gae(OBS, ACT, {})
    policy._initialize_loss_from_dummy_batch()
    views = policy.view_requirements
    assert not views[SB.PREV_REWARDS].used_for_training and not views[SB.NEXT_OBS].used_for_training
    assert views["advantages"].used_for_training and not views["advantages"].used_for_compute_actions
    assert not views["debug"].used_for_training and views["debug"].space.dtype == np.int32
    assert SB.PREV_ACTIONS not in views

    class ItemsPost(ObsActionsRewardsLoss):
        def postprocess_trajectory(self, sample_batch: SampleBatch, other_agent_batches: Any = None, episode: Any = None) -> SampleBatch:
            return SampleBatch({key: value for key, value in sample_batch.items()})

    policy = ItemsPost(OBS, ACT, {})
    policy._initialize_loss_from_dummy_batch()
    assert {"new_obs", "prev_actions", "infos"} <= set(policy.view_requirements)  # it read (copied) them all


def test_a_column_deleted_in_postprocessing_stays_collected() -> None:
    class DelNextObs(ObsActionsRewardsLoss):
        def postprocess_trajectory(self, sample_batch: SampleBatch, other_agent_batches: Any = None, episode: Any = None) -> SampleBatch:
            del sample_batch[SB.NEXT_OBS]  # the old PPO habit: it must not fail on real batches
            return sample_batch

    policy = DelNextObs(OBS, ACT, {})
    policy._initialize_loss_from_dummy_batch()
    assert not policy.view_requirements[SB.NEXT_OBS].used_for_training


def test_a_loss_reading_an_extra_fetch_keeps_it_for_training() -> None:
    class VfLoss(FitPolicy):
        def compute_actions_from_input_dict(self, input_dict: SampleBatch, **kwargs: Any) -> Any:
            actions, state, extra = super().compute_actions_from_input_dict(input_dict)
            return actions, state, {**extra, SB.ACTION_LOGP: np.zeros(len(actions), np.float32)}

        def loss(self, model: ModelV2, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
            return super().loss(model, dist_class, train_batch) + train_batch[SB.VF_PREDS].mean()

    policy = VfLoss(OBS, ACT, {})
    policy._initialize_loss_from_dummy_batch()
    vf = policy.view_requirements[SB.VF_PREDS]
    assert vf.used_for_training and not vf.used_for_compute_actions
    assert vf.space == gym.spaces.Box(-np.inf, np.inf, (), np.float32)
    assert SB.ACTION_LOGP not in policy.view_requirements  # fetched, never read: not collected
    assert policy.view_requirements[SB.OBS].used_for_training  # read by the model inside the loss


def test_without_a_loss_nothing_is_pruned_for_training() -> None:
    policy = ObsPolicy(OBS, ACT, {})
    before = list(policy.view_requirements)
    policy._initialize_loss_from_dummy_batch()
    assert list(policy.view_requirements) == before
    assert all(view.used_for_training for view in policy.view_requirements.values())
    assert _views_with(policy, "used_for_compute_actions") == {"obs"}  # inference flags follow the reads


def test_a_column_only_inference_reads_stays_collected_and_sources_are_kept() -> None:
    class PrevActionsAtInference(ObsActionsRewardsLoss):
        def compute_actions_from_input_dict(self, input_dict: SampleBatch, **kwargs: Any) -> Any:
            return input_dict[SB.PREV_ACTIONS].copy(), [], {}

        def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
            return torch.as_tensor(train_batch[SB.REWARDS]).sum().requires_grad_()

    policy = PrevActionsAtInference(OBS, ACT, {})
    policy._initialize_loss_from_dummy_batch()
    views = policy.view_requirements
    assert views[SB.PREV_ACTIONS].used_for_compute_actions and not views[SB.PREV_ACTIONS].used_for_training
    # actions are read by nobody but are prev_actions' data: still collected, shown to nobody
    assert not views[SB.ACTIONS].used_for_training and not views[SB.ACTIONS].used_for_compute_actions
    assert SB.OBS not in views


def test_a_positive_shift_at_inference_is_an_error_naming_the_view() -> None:
    class PeekModel(LSTMStyleModel):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.view_requirements["next_rewards"] = ViewRequirement(SB.REWARDS, shift=1)

    class PeekPolicy(ObsPolicy):
        def __init__(self, *args: Any) -> None:
            self.model = PeekModel(OBS, ACT, 2, LSTM_CONFIG["model"], "peek")
            super().__init__(*args)

    with pytest.raises(ValueError, match=r"view 'next_rewards' \(data_col 'rewards'\) is used for compute_actions but has shift=1"):
        PeekPolicy(OBS, ACT, {})
    policy = ObsActionsRewardsLoss(OBS, ACT, {})
    policy.view_requirements["next_obs_window"] = ViewRequirement(SB.OBS, shift="0:1", space=OBS)
    with pytest.raises(ValueError, match=r"view 'next_obs_window' .* shift='0:1'"):
        policy._initialize_loss_from_dummy_batch()
    # the same view kept out of inference is fine, and the loss decides its fate
    policy.view_requirements["next_obs_window"].used_for_compute_actions = False
    policy._initialize_loss_from_dummy_batch()
    assert "next_obs_window" not in policy.view_requirements


def test_recurrent_policy_gets_state_views_and_sequences_in_the_loss() -> None:
    seen: dict[str, Any] = {}

    class Rnn(ObsPolicy):
        def compute_actions_from_input_dict(self, input_dict: SampleBatch, **kwargs: Any) -> Any:
            state = input_dict["state_in_0"]
            return np.zeros(len(state), np.int64), [state + 1], {}

        def get_initial_state(self) -> list[np.ndarray]:
            return [np.zeros(5, np.float32)]

        def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
            seen["state"] = tuple(train_batch["state_in_0"].shape)
            seen["seq_lens"] = train_batch[SB.SEQ_LENS].tolist()
            return train_batch[SB.REWARDS].sum().requires_grad_()

    policy = Rnn(OBS, ACT, {"model": {"max_seq_len": 7}})
    policy._initialize_loss_from_dummy_batch()
    views = policy.view_requirements
    assert seen == {"state": (4, 5), "seq_lens": [2, 2, 2, 2]}
    state_in = views["state_in_0"]
    assert (state_in.data_col, state_in.shift, state_in.batch_repeat_value) == ("state_out_0", -1, 7)
    assert state_in.used_for_training and state_in.used_for_compute_actions
    # state_out_0 is read by nobody but is state_in_0's data: kept, hidden from both
    assert not views["state_out_0"].used_for_training and not views["state_out_0"].used_for_compute_actions


def test_stage_errors_name_the_stage_and_the_column() -> None:
    class ReadsInfos(ObsPolicy):
        def compute_actions_from_input_dict(self, input_dict: SampleBatch, **kwargs: Any) -> Any:
            return input_dict[SB.INFOS], [], {}

    with pytest.raises(KeyError, match=r"compute_actions_from_input_dict \(inference views: .*no column 'infos'"):
        ReadsInfos(OBS, ACT, {})._initialize_loss_from_dummy_batch()

    class ReadsAdvantages(ObsPolicy):
        def loss(self, model: Any, dist_class: Any, train_batch: SampleBatch) -> Any:
            return train_batch["advantages"]

    with pytest.raises(KeyError, match=r"loss \(postprocessed columns: .*no column 'advantages'"):
        ReadsAdvantages(OBS, ACT, {})._initialize_loss_from_dummy_batch()

    class WrongRows(ObsPolicy):
        def compute_actions_from_input_dict(self, input_dict: SampleBatch, **kwargs: Any) -> Any:
            return np.zeros(1, np.int64), [], {"vf": [1.0]}

    with pytest.raises(ValueError, match=r"returned actions of shape \(1,\); expected 8 rows"):
        WrongRows(OBS, ACT, {})._initialize_loss_from_dummy_batch()

    class ListFetch(ObsPolicy):
        def compute_actions_from_input_dict(self, input_dict: SampleBatch, **kwargs: Any) -> Any:
            return np.zeros(len(input_dict), np.int64), [], {"vf": [1.0] * len(input_dict)}

    with pytest.raises(TypeError, match="extra fetch 'vf' is a list"):
        ListFetch(OBS, ACT, {})._initialize_loss_from_dummy_batch()

    class NotABatch(ObsPolicy):
        def postprocess_trajectory(self, sample_batch: SampleBatch, other_agent_batches: Any = None, episode: Any = None) -> Any:
            return dict(sample_batch)

    with pytest.raises(TypeError, match="must return a SampleBatch, got dict"):
        NotABatch(OBS, ACT, {})._initialize_loss_from_dummy_batch()


def test_dummy_batch_follows_the_spaces_and_the_global_timestep_is_restored() -> None:
    obs_space = gym.spaces.Dict(pos=gym.spaces.Box(-1, 1, (2,), np.float32), cell=gym.spaces.Discrete(3, start=1))
    seen: dict[str, Any] = {}

    class Look(Policy):
        def compute_actions_from_input_dict(self, input_dict: SampleBatch, timestep: Any = None, **kwargs: Any) -> Any:
            seen.update(obs=input_dict[SB.OBS], timestep=timestep)
            self.global_timestep = 999  # a policy bumping it during the dummy pass
            return np.zeros(len(input_dict), np.int64), [], {}

    policy = Look(obs_space, gym.spaces.MultiDiscrete([2, 3]), {})
    policy.on_global_var_update({"timestep": 42})
    batch = policy._get_dummy_batch_from_view_requirements(3)
    assert batch[SB.OBS]["pos"].shape == (3, 2) and batch[SB.OBS]["cell"].tolist() == [1, 1, 1]
    assert batch[SB.ACTIONS].shape == (3, 2) and batch[SB.INFOS] == [{}, {}, {}]
    assert batch[SB.EPS_ID].dtype == np.int64 and batch[SB.TRUNCATEDS].dtype == np.bool_ and batch[SB.T].tolist() == [0, 1, 2]
    policy._initialize_loss_from_dummy_batch()
    assert seen["timestep"] == 42 and policy.global_timestep == 42 and set(seen["obs"]) == {"pos", "cell"}


def test_random_policy_acts_in_the_space_from_its_own_generator() -> None:
    state = np.random.get_state()
    a = RandomPolicy(OBS, gym.spaces.Box(-2, 2, (2,), np.float32), {"seed": 3})
    b = RandomPolicy(OBS, gym.spaces.Box(-2, 2, (2,), np.float32), {"seed": 3})
    batch = SB(obs=np.zeros((6, 3), np.float32))
    actions = a.compute_actions_from_input_dict(batch)[0]
    assert actions.shape == (6, 2) and np.abs(actions).max() <= 2
    assert np.array_equal(actions, b.compute_actions_from_input_dict(batch)[0])
    assert np.array_equal(np.random.get_state()[1], state[1])
    dict_policy = RandomPolicy(OBS, gym.spaces.Dict(a=ACT, b=gym.spaces.Box(0, 1, (2,))), {})
    sampled = dict_policy.compute_actions_from_input_dict(batch)[0]
    assert sampled["a"].shape == (6,) and sampled["b"].shape == (6, 2)
    a._initialize_loss_from_dummy_batch()  # no loss: no view removed
    assert len(a.view_requirements) == 13
