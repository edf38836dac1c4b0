"""PPOLoss, ClipPPOLoss, KLPENPPOLoss: the formulas, GAE when the advantage is absent, shared
trunks, bad input, CartPole."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential

from cadence.envs import ExplorationType, GymEnv, set_exploration_type
from cadence.modules import MLP, ActorValueOperator, OneHotCategorical, ProbabilisticActor, ValueOperator
from cadence.objectives import ClipPPOLoss, KLPENPPOLoss, PPOLoss, ValueEstimators
from tests.objectives._helpers import cartpole_lengths, grads_are_empty, grads_are_set, huber, missing_key_message


def _actor() -> ProbabilisticActor:
    return ProbabilisticActor(TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["logits"]),
                              in_keys=["logits"], distribution_class=OneHotCategorical, return_log_prob=True)


def _batch(actor: ProbabilisticActor, with_advantage: bool = True, seed: int = 0) -> TensorDict:
    """A [2, 6] batch collected by ``actor`` (under no_grad), with episode ends."""
    g = torch.Generator().manual_seed(seed)
    done = torch.zeros(2, 6, 1, dtype=torch.bool)
    done[0, 2] = done[1, 5] = True
    data = TensorDict({"observation": torch.randn(2, 6, 3, generator=g),
                       "next": {"observation": torch.randn(2, 6, 3, generator=g),
                                "reward": torch.randn(2, 6, 1, generator=g), "done": done, "terminated": done.clone()}},
                      [2, 6])
    torch.manual_seed(seed)
    with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
        actor(data)
    if with_advantage:
        data["advantage"] = torch.randn(2, 6, 1, generator=g)
        data["value_target"] = torch.randn(2, 6, 1, generator=g)
    return data


def _step_away(actor: ProbabilisticActor) -> None:
    with torch.no_grad():
        for p in actor.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(4)) * 0.5)


def _log_probs(actor: ProbabilisticActor, data: TensorDict) -> tuple[torch.Tensor, torch.Tensor]:
    linear = actor.module[0].module
    log_softmax = torch.log_softmax(data["observation"] @ linear.weight.T + linear.bias, -1)
    return (log_softmax * data["action"]).sum(-1), -(log_softmax.exp() * log_softmax).sum(-1)


def test_clip_ppo_equals_a_plain_torch_computation() -> None:
    torch.manual_seed(0)
    actor, critic = _actor(), ValueOperator(torch.nn.Linear(3, 1))
    data = _batch(actor)
    _step_away(actor)
    loss = ClipPPOLoss(actor, critic, clip_epsilon=0.1, entropy_coeff=0.05, critic_coeff=0.5)
    out = loss(data)

    log_prob, entropy = _log_probs(actor, data)
    log_weight = log_prob - data["action_log_prob"]
    ratio, advantage = log_weight.exp(), data["advantage"].squeeze(-1)
    objective = -torch.minimum(ratio * advantage, ratio.clamp(0.9, 1.1) * advantage)
    value = (data["observation"] @ critic.module.weight.T + critic.module.bias)
    torch.testing.assert_close(out["loss_objective"], objective.mean())
    torch.testing.assert_close(out["loss_entropy"], -0.05 * entropy.mean())
    torch.testing.assert_close(out["entropy"], entropy.mean())
    torch.testing.assert_close(out["loss_critic"], 0.5 * huber(data["value_target"] - value).mean())
    torch.testing.assert_close(out["clip_fraction"], ((ratio - 1).abs() > 0.1).float().mean())
    torch.testing.assert_close(out["kl_approx"], -log_weight.mean())
    w = ratio.flatten()
    torch.testing.assert_close(out["ESS"], w.sum() ** 2 / (w ** 2).sum() / w.numel())
    assert 0.0 < out["clip_fraction"].item() < 1.0


def test_the_plain_ppo_objective_is_the_importance_weighted_advantage() -> None:
    torch.manual_seed(0)
    actor = _actor()
    data = _batch(actor)
    _step_away(actor)
    out = PPOLoss(actor, ValueOperator(torch.nn.Linear(3, 1)), normalize_advantage=True)(data)
    log_prob, _ = _log_probs(actor, data)
    advantage = data["advantage"].squeeze(-1)
    advantage = (advantage - advantage.mean()) / advantage.std()
    torch.testing.assert_close(out["loss_objective"], -((log_prob - data["action_log_prob"]).exp() * advantage).mean())


def test_klpen_ppo_penalises_the_kl_and_adapts_beta() -> None:
    torch.manual_seed(0)
    actor = _actor()
    data = _batch(actor)
    old_logits = data["logits"]
    _step_away(actor)
    loss = KLPENPPOLoss(actor, ValueOperator(torch.nn.Linear(3, 1)), beta=2.0, dtarg=1e-4)
    out = loss(data)
    log_prob, _ = _log_probs(actor, data)
    linear = actor.module[0].module
    new_log_softmax = torch.log_softmax(data["observation"] @ linear.weight.T + linear.bias, -1)
    old_log_softmax = torch.log_softmax(old_logits, -1)
    kl = (old_log_softmax.exp() * (old_log_softmax - new_log_softmax)).sum(-1)
    expected = -(log_prob - data["action_log_prob"]).exp() * data["advantage"].squeeze(-1) + 2.0 * kl
    torch.testing.assert_close(out["loss_objective"], expected.mean())
    torch.testing.assert_close(out["kl"], kl.mean())
    assert loss.beta.item() == 4.0  # the KL ran over 1.5 * dtarg


def test_gae_computes_the_missing_advantage_into_a_copy() -> None:
    torch.manual_seed(0)
    actor, critic = _actor(), ValueOperator(torch.nn.Linear(3, 1))
    data = _batch(actor, with_advantage=False)
    loss = ClipPPOLoss(actor, critic, gamma=0.9)
    loss.make_value_estimator(ValueEstimators.GAE, gamma=0.9, lmbda=0.8)
    out = loss(data)
    assert "advantage" not in data.keys()  # the input is left as it was

    with torch.no_grad():
        value = critic(data.copy())["state_value"]
        next_value = critic(data["next"].copy())["state_value"]
    reward, done = data["next", "reward"], data["next", "done"].float()
    advantage = torch.zeros_like(reward)
    running = torch.zeros(2, 1)
    for t in reversed(range(6)):
        delta = reward[:, t] + 0.9 * (1 - done[:, t]) * next_value[:, t] - value[:, t]
        running = delta + 0.9 * 0.8 * (1 - done[:, t]) * running
        advantage[:, t] = running
    written = data.clone().update({"advantage": advantage, "value_target": advantage + value})
    expected = ClipPPOLoss(actor, critic)(written)
    for key in ("loss_objective", "loss_critic"):
        torch.testing.assert_close(out[key], expected[key])


def test_the_actor_loss_leaves_the_critic_alone_and_separate_losses_spare_the_trunk() -> None:
    trunk = TensorDictModule(torch.nn.Linear(3, 5), ["observation"], ["hidden"])
    head = ProbabilisticActor(TensorDictModule(torch.nn.Linear(5, 4), ["hidden"], ["logits"]), in_keys=["logits"],
                              distribution_class=OneHotCategorical, return_log_prob=True)
    avo = ActorValueOperator(trunk, head, ValueOperator(torch.nn.Linear(5, 1), in_keys=["hidden"]))
    actor, critic = avo.get_policy_operator(), avo.get_value_operator()
    data = _batch(actor)
    for separate in (False, True):
        loss = ClipPPOLoss(actor, critic, separate_losses=separate)
        assert len(list(loss.parameters())) == 6  # trunk, actor head and critic head, once each
        out = loss(data)
        loss.zero_grad()
        out["loss_objective"].backward()
        assert grads_are_empty(TensorDict.from_module(critic.module[1]))
        loss.zero_grad()
        out["loss_critic"].backward()
        assert grads_are_set(TensorDict.from_module(critic.module[1]))
        assert grads_are_empty(TensorDict.from_module(trunk)) == separate


def test_clip_value_reports_and_bounds_the_critic_step() -> None:
    actor, critic = _actor(), ValueOperator(torch.nn.Linear(3, 1))
    data = _batch(actor)
    data["state_value"] = torch.zeros(2, 6, 1)
    with torch.no_grad():
        critic.module.bias.fill_(5.0)  # far from the data's values
    out = ClipPPOLoss(actor, critic, clip_value=0.1)(data)
    assert out["value_clip_fraction"].item() == 1.0


def test_options_and_bad_input() -> None:
    actor = _actor()
    data = _batch(actor)
    assert ClipPPOLoss(actor, ValueOperator(torch.nn.Linear(3, 1)), reduction="none")(data)["loss_objective"].shape == (2, 6)
    no_critic = ClipPPOLoss(actor, None, critic_coeff=None, entropy_bonus=False)
    assert sorted(no_critic(data).keys()) == ["ESS", "clip_fraction", "kl_approx", "loss_objective"]
    message = missing_key_message(no_critic, data.exclude("action_log_prob"))
    assert "needs ['action_log_prob']" in message and "'action'" in message
    message = missing_key_message(ClipPPOLoss(actor, ValueOperator(torch.nn.Linear(3, 1))),
                                  data.exclude("advantage", ("next", "observation")))
    assert "('next', 'observation')" in message
    with pytest.raises(ValueError, match="requires grad"):
        no_critic(data.set("action_log_prob", data["action_log_prob"].clone().requires_grad_()))
    with pytest.raises(ValueError, match="critic_coeff"):
        ClipPPOLoss(actor, None)
    loss = ClipPPOLoss(actor, ValueOperator(torch.nn.Linear(3, 1)), advantage_key="adv")
    assert loss.tensor_keys.advantage == "adv" and loss.value_estimator.tensor_keys.advantage == "adv"


@pytest.mark.slow
def test_clip_ppo_learns_cartpole() -> None:
    torch.manual_seed(0)
    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    actor = ProbabilisticActor(
        TensorDictModule(MLP(in_features=4, out_features=2, num_cells=[64, 64]), ["observation"], ["logits"]),
        in_keys=["logits"], distribution_class=OneHotCategorical, return_log_prob=True,
    )
    critic = ValueOperator(MLP(in_features=4, out_features=1, num_cells=[64, 64]))
    loss = ClipPPOLoss(actor, critic, entropy_coeff=0.0, normalize_advantage=True)
    loss.make_value_estimator(ValueEstimators.GAE, gamma=0.99, lmbda=0.95)
    optimizer = torch.optim.Adam(loss.parameters(), lr=3e-3)
    # the env takes boolean one-hot actions
    policy = TensorDictSequential(actor, TensorDictModule(lambda action: action.bool(), ["action"], ["action"]))
    before = cartpole_lengths(env, policy)
    for _ in range(15):
        with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
            data = env.rollout(1000, policy, break_when_any_done=False)
            data["action"] = data["action"].float()
            loss.value_estimator(data)
        for _ in range(4):
            for batch in data[torch.randperm(1000)].split(250):
                out = loss(batch)
                optimizer.zero_grad()
                (out["loss_objective"] + out["loss_critic"]).backward()
                optimizer.step()
    after = cartpole_lengths(env, policy)
    assert after > max(3 * before, 100), (before, after)


def test_the_reference_s_former_argument_names_are_refused_naming_the_new_ones() -> None:
    with pytest.raises(TypeError, match="unexpected argument 'critic_coef'; the argument is called 'critic_coeff'"):
        ClipPPOLoss(_actor(), ValueOperator(torch.nn.Linear(4, 1)), critic_coef=0.5)
