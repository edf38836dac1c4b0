"""DQNLoss: the formula (DQN and double DQN), action spaces, gradient isolation, bad input, CartPole."""

from __future__ import annotations

import pytest
import torch
from tensordict.nn import TensorDictModule, TensorDictSequential

from cadence.data import Categorical, OneHot
from cadence.data.replay_buffers import LazyTensorStorage, RandomSampler, TensorDictReplayBuffer
from cadence.envs import ExplorationType, GymEnv, set_exploration_type
from cadence.modules import MLP, QValueActor, QValueModule
from cadence.objectives import DQNLoss, HardUpdate, ValueEstimators
from tests.objectives._helpers import cartpole_lengths, grads_are_empty, missing_key_message, transitions


def _one_hot_batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return transitions(10, 3, torch.nn.functional.one_hot(torch.randint(3, (10,), generator=g), 3), seed=seed)


def _written_out(loss: DQNLoss, data, double: bool) -> torch.Tensor:
    w, b = loss.value_network_params["module", "0", "module", "weight"], loss.value_network_params["module", "0", "module", "bias"]
    tw = loss.target_value_network_params["module", "0", "module", "weight"]
    tb = loss.target_value_network_params["module", "0", "module", "bias"]
    obs, next_obs = data["observation"], data["next", "observation"]
    reward, terminated = data["next", "reward"].squeeze(-1), data["next", "terminated"].squeeze(-1).float()
    predicted = ((obs @ w.T + b) * data["action"]).sum(-1)
    next_target = next_obs @ tw.T + tb
    if double:
        next_value = next_target.gather(-1, (next_obs @ w.T + b).argmax(-1, keepdim=True)).squeeze(-1)
    else:
        next_value = next_target.max(-1).values
    target = reward + 0.9 * (1 - terminated) * next_value
    return (predicted - target).pow(2)


@pytest.mark.parametrize("double", [False, True])
def test_the_loss_equals_a_plain_torch_dqn(double: bool) -> None:
    torch.manual_seed(0)
    loss = DQNLoss(QValueActor(torch.nn.Linear(3, 3), spec=OneHot(3)), double_dqn=double, gamma=0.9)
    g = torch.Generator().manual_seed(1)
    for value in loss.target_value_network_params.values(True, True):
        value.add_(torch.randn(value.shape, generator=g))
    data = _one_hot_batch()
    out = loss(data)
    expected = _written_out(loss, data, double)
    torch.testing.assert_close(out["loss"], expected.mean())
    torch.testing.assert_close(data["td_error"], expected.unsqueeze(-1))


def test_double_dqn_differs_from_dqn_when_the_networks_disagree() -> None:
    torch.manual_seed(0)
    plain = DQNLoss(QValueActor(torch.nn.Linear(3, 3), spec=OneHot(3)))
    double = DQNLoss(QValueActor(torch.nn.Linear(3, 3), spec=OneHot(3)), double_dqn=True)
    double.load_state_dict(plain.state_dict())
    for loss in (plain, double):
        with torch.no_grad():
            loss.target_value_network_params["module", "0", "module", "weight"].mul_(-1.0)
    assert plain(_one_hot_batch())["loss"].item() != pytest.approx(double(_one_hot_batch())["loss"].item())


@pytest.mark.parametrize("shape", [(10,), (10, 1)])
def test_categorical_actions_give_the_same_loss_as_one_hot(shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    one_hot = DQNLoss(QValueActor(torch.nn.Linear(3, 3), spec=OneHot(3)))
    categorical = DQNLoss(QValueActor(torch.nn.Linear(3, 3), spec=Categorical(3)))
    categorical.load_state_dict(one_hot.state_dict())
    data = _one_hot_batch()
    indices = data["action"].argmax(-1).reshape(shape)
    torch.testing.assert_close(categorical(data.clone().set("action", indices))["loss"], one_hot(data)["loss"])


def test_a_plain_module_is_wrapped_and_the_action_space_defaults_to_one_hot() -> None:
    loss = DQNLoss(torch.nn.Linear(3, 3), action_space="one_hot")
    assert isinstance(loss.value_network, QValueActor) and torch.isfinite(loss(_one_hot_batch())["loss"])
    with pytest.warns(UserWarning, match="action_space was not given .* using 'one_hot'"):  # the reference's default
        assert DQNLoss(TensorDictModule(torch.nn.Linear(3, 3), ["observation"], ["action_value"])).action_space == "one_hot"
    sequence = TensorDictSequential(TensorDictModule(torch.nn.Linear(3, 3), ["observation"], ["action_value"]),
                                    QValueModule(action_space="categorical"))
    assert DQNLoss(sequence).action_space == "categorical"  # read from the Q-value module inside
    with pytest.raises(ValueError, match="'one_hot' or 'categorical'"):
        DQNLoss(torch.nn.Linear(3, 3), action_space="binary")


def test_targets_get_no_gradient_and_follow_hard_updates() -> None:
    loss = DQNLoss(QValueActor(torch.nn.Linear(3, 3), spec=OneHot(3)))
    loss(_one_hot_batch())["loss"].backward()
    assert not grads_are_empty(loss.value_network_params)
    assert all(p.grad is None for p in loss.target_value_network_params.values(True, True))
    updater = HardUpdate(loss, value_network_update_interval=2)
    with torch.no_grad():
        loss.value_network_params["module", "0", "module", "bias"].fill_(3.0)
    updater.step()
    assert not (loss.target_value_network_params["module", "0", "module", "bias"] == 3.0).all()
    updater.step()
    assert (loss.target_value_network_params["module", "0", "module", "bias"] == 3.0).all()


def test_value_estimators_reductions_and_keys() -> None:
    loss = DQNLoss(QValueActor(torch.nn.Linear(3, 3), spec=OneHot(3)), reduction="none")
    assert loss(_one_hot_batch())["loss"].shape == (10,)
    loss.make_value_estimator(ValueEstimators.TDLambda, gamma=0.9, lmbda=0.5)
    with pytest.raises(ValueError, match="GAE"):
        loss.make_value_estimator(ValueEstimators.GAE)
    loss.set_keys(action="act")
    data = _one_hot_batch()
    data["act"] = data.pop("action")
    assert loss(data)["loss"].shape == (10,)


def test_bad_input() -> None:
    loss = DQNLoss(QValueActor(torch.nn.Linear(3, 3), spec=OneHot(3)))
    message = missing_key_message(loss, _one_hot_batch().exclude(("next", "observation")))
    assert "needs [('next', 'observation')]" in message and "'action'" in message
    with pytest.raises(ValueError, match="one-hot actions of shape"):
        loss(_one_hot_batch().set("action", torch.zeros(10, 4)))
    with pytest.raises(ValueError, match="3 action values.*4 actions"):
        DQNLoss(QValueActor(torch.nn.Linear(3, 3), spec=OneHot(3)), action_space=OneHot(4))


class _EpsilonGreedy(torch.nn.Module):
    """Replaces the one-hot action by a random one with probability ``eps``."""

    def __init__(self) -> None:
        super().__init__()
        self.eps = 1.0

    def forward(self, action: torch.Tensor) -> torch.Tensor:
        random = torch.nn.functional.one_hot(torch.randint(action.shape[-1], action.shape[:-1]), action.shape[-1])
        pick = torch.rand(action.shape[:-1] + (1,)) < self.eps
        return torch.where(pick, random.to(action.dtype), action)


@pytest.mark.slow
def test_dqn_learns_cartpole() -> None:
    torch.manual_seed(0)
    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    actor = QValueActor(MLP(in_features=4, out_features=2, num_cells=[64, 64], activation_class=torch.nn.ReLU),
                        spec=env.action_spec)
    greedy = _EpsilonGreedy()
    explore = TensorDictSequential(actor, TensorDictModule(greedy, ["action"], ["action"]))
    loss = DQNLoss(actor, double_dqn=True, loss_function="smooth_l1")
    loss.make_value_estimator(gamma=0.99)
    updater = HardUpdate(loss, value_network_update_interval=100)
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-3)
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(20_000), sampler=RandomSampler(), batch_size=128)
    before = cartpole_lengths(env, actor)
    iterations = 40
    for iteration in range(iterations):
        greedy.eps = max(0.05, 1.0 - iteration / (0.5 * iterations))
        with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
            data = env.rollout(250, explore, break_when_any_done=False)
        buffer.extend(data.select("observation", "action", ("next", "observation"), ("next", "reward"),
                                  ("next", "done"), ("next", "terminated")))
        for _ in range(60):
            optimizer.zero_grad()
            loss(buffer.sample())["loss"].backward()
            optimizer.step()
            updater.step()
    after = cartpole_lengths(env, actor)
    assert after > max(3 * before, 100), (before, after)
