"""Tests of cadence.modules.actors: the tensordict policies and value functions."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
    set_interaction_type,
)
from torch import nn

from cadence.data import Bounded, Categorical, Composite, CompositeSpec, OneHot
from cadence.envs import GymEnv, InitTracker, PendulumEnv, TransformedEnv
from cadence.modules import (
    MLP,
    Actor,
    ActorCriticWrapper,
    ActorValueOperator,
    DdpgMlpActor,
    DdpgMlpQNet,
    NormalParamExtractor,
    ProbabilisticActor,
    QValueActor,
    QValueModule,
    TanhDelta,
    TanhModule,
    TanhNormal,
    ValueOperator,
)


def _obs(batch: int = 4, dim: int = 3) -> TensorDict:
    return TensorDict(observation=torch.randn(batch, dim), batch_size=[batch])


# ----------------------------------------------------------------------------- Actor / ValueOperator
def test_actor_default_keys_and_spec() -> None:
    actor = Actor(nn.Linear(3, 2), spec=Bounded(-1.0, 1.0, shape=(2,)))
    assert actor.in_keys == ["observation"] and actor.out_keys == ["action"]
    assert isinstance(actor.spec, Composite) and actor.spec["action"].shape == (2,)
    assert actor(_obs())["action"].shape == (4, 2)


def test_actor_safe_projects_into_spec() -> None:
    net = nn.Linear(3, 1)
    with torch.no_grad():
        net.bias.fill_(5.0)
        net.weight.zero_()
    unsafe = Actor(net, spec=Bounded(-1.0, 1.0, shape=(1,)))
    safe = Actor(net, spec=Bounded(-1.0, 1.0, shape=(1,)), safe=True)
    assert unsafe(_obs())["action"].max() == 5.0
    assert safe(_obs())["action"].max() == 1.0
    with pytest.raises(ValueError, match="exactly one out key"):
        Actor(net, out_keys=["a", "b"], spec=Bounded(-1.0, 1.0, shape=(1,)))


def test_value_operator_out_keys() -> None:
    q = ValueOperator(MLP(out_features=1, num_cells=[8]), in_keys=["observation", "action"])
    v = ValueOperator(MLP(out_features=1, num_cells=[8]))
    custom = ValueOperator(MLP(out_features=1, num_cells=[8]), in_keys=["observation"], out_keys=["my_value"])
    assert q.out_keys == ["state_action_value"]
    assert v.in_keys == ["observation"] and v.out_keys == ["state_value"]
    assert custom.out_keys == ["my_value"]
    data = _obs().set("action", torch.zeros(4, 1))
    assert q(data)["state_action_value"].shape == (4, 1)


# ----------------------------------------------------------------------------- ProbabilisticActor
def _tutorial_actor(action_spec: Bounded, obs_key: str = "observation") -> tuple[ProbabilisticActor, ValueOperator]:
    """``make_ddpg_actor`` of the seed's DDPG tutorial, with cadence imports."""
    actor_net = DdpgMlpActor(action_dim=action_spec.shape[-1])
    actor = TensorDictModule(actor_net, in_keys=[obs_key], out_keys=["param"])
    actor = ProbabilisticActor(actor, distribution_class=TanhDelta, in_keys=["param"],
                               spec=CompositeSpec(action=action_spec)).to("cpu")
    qnet = ValueOperator(in_keys=[obs_key, "action"], module=DdpgMlpQNet()).to("cpu")
    return actor, qnet


def test_probabilistic_actor_with_tanh_delta_and_tutorial_spec() -> None:
    env = TransformedEnv(GymEnv("Pendulum-v1"), InitTracker())
    actor, qnet = _tutorial_actor(env.action_spec)
    out = qnet(actor(env.reset()))  # materialises the lazy layers, as the tutorial does
    assert out["action"].shape == (1,) and out["state_action_value"].shape == (1,)
    assert isinstance(actor.spec, Composite) and actor.spec["action"] == env.action_spec
    # the spec's bounds (Pendulum: [-2, 2]) reach the TanhDelta
    big = TensorDict(param=torch.full((3, 1), 50.0), observation=torch.zeros(3, 3), batch_size=[3])
    assert actor.module[-1](big)["action"].tolist() == [[2.0]] * 3
    dist = actor.get_dist(TensorDict(observation=torch.randn(5, 3), batch_size=[5]))
    assert isinstance(dist, TanhDelta) and float(dist.high.max()) == 2.0
    cloned = actor.spec.clone()
    assert cloned == actor.spec and cloned is not actor.spec


def test_probabilistic_actor_tanh_normal_log_prob_and_interaction() -> None:
    net = TensorDictModule(nn.Sequential(nn.Linear(3, 4), NormalParamExtractor()),
                           in_keys=["observation"], out_keys=["loc", "scale"])
    actor = ProbabilisticActor(net, in_keys=["loc", "scale"], distribution_class=TanhNormal,
                               spec=Bounded(-3.0, 3.0, shape=(2,)), return_log_prob=True)
    data = _obs(64)
    with set_interaction_type(InteractionType.RANDOM):
        out = actor(data.clone())
    log_prob_keys = [k for k in out.keys() if "log_prob" in k]
    assert len(log_prob_keys) == 1
    dist = actor.get_dist(data.clone())
    torch.testing.assert_close(out[log_prob_keys[0]], dist.log_prob(out["action"]))
    assert bool((out["action"].abs() < 3.0).all()) and out["action"].std() > 0
    with set_interaction_type(InteractionType.DETERMINISTIC):
        det = actor(data.clone())
    torch.testing.assert_close(det["action"], dist.deterministic_sample)
    # the default interaction type (nothing set) is DETERMINISTIC
    torch.testing.assert_close(actor(data.clone())["action"], dist.deterministic_sample)


def test_probabilistic_actor_needs_tensordict_module_and_keeps_explicit_bounds() -> None:
    with pytest.raises(TypeError, match="tensordict module"):
        ProbabilisticActor(nn.Linear(3, 1), in_keys=["param"])  # type: ignore[arg-type]
    net = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["param"])
    actor = ProbabilisticActor(net, in_keys=["param"], distribution_class=TanhDelta,
                               distribution_kwargs={"low": 0.0, "high": 0.5}, spec=Bounded(-2.0, 2.0, shape=(1,)))
    data = TensorDict(observation=torch.zeros(1, 3), batch_size=[1])
    with torch.no_grad():
        net.module.bias.fill_(100.0)
    assert actor(data)["action"].item() == 0.5


def test_probabilistic_actor_safe_projection() -> None:
    net = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["loc"])
    with torch.no_grad():
        net.module.bias.fill_(10.0)
        net.module.weight.zero_()
    actor = ProbabilisticActor(net, in_keys=["loc"], distribution_class=torch.distributions.Normal,
                               distribution_kwargs={"scale": torch.tensor(0.1)}, spec=Bounded(-1.0, 1.0, shape=(1,)),
                               safe=True)
    assert actor(_obs())["action"].max() == 1.0


def test_probabilistic_actor_generator_reproduces_samples() -> None:
    def make(seed: int) -> ProbabilisticActor:
        torch.manual_seed(1)
        net = TensorDictModule(nn.Sequential(nn.Linear(3, 2), NormalParamExtractor()),
                               in_keys=["observation"], out_keys=["loc", "scale"])
        return ProbabilisticActor(net, in_keys=["loc", "scale"], distribution_class=TanhNormal,
                                  generator=torch.Generator().manual_seed(seed))

    data = _obs(8)
    with set_interaction_type(InteractionType.RANDOM):
        a = make(3)(data.clone())["action"]
        b = make(3)(data.clone())["action"]
        c = make(4)(data.clone())["action"]
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a, c)


# ----------------------------------------------------------------------------- containers
def test_actor_critic_wrapper_parameter_layout_and_getters() -> None:
    actor, qnet = _tutorial_actor(Bounded(-1.0, 1.0, shape=(2,)))
    ac = ActorCriticWrapper(actor, qnet)
    out = ac(_obs(5))
    assert {"action", "state_action_value"} <= set(out.keys())
    assert ac.get_policy_operator() is actor and ac.get_value_operator() is qnet
    params = TensorDict.from_module(ac)
    actor_params = TensorDict.from_module(actor)
    value_params = TensorDict.from_module(qnet)
    assert (params["module", "0"] == actor_params).all()
    assert (params["module", "1"] == value_params).all()
    # the tutorial swaps in target params this way
    zeros = TensorDict({"module": {"0": actor_params.detach().clone().zero_(), "1": value_params.detach().clone()}}, [])
    with zeros.to_module(ac):
        zero_out = ac(_obs(5))
    assert zero_out["action"].abs().max() == 0


def test_actor_value_operator_shares_the_trunk() -> None:
    trunk = TensorDictModule(nn.Linear(3, 8), in_keys=["observation"], out_keys=["hidden"])
    head = TensorDictModule(nn.Sequential(nn.Linear(8, 2), NormalParamExtractor()), in_keys=["hidden"],
                            out_keys=["loc", "scale"])
    policy = ProbabilisticActor(head, in_keys=["loc", "scale"], distribution_class=TanhNormal)
    value = ValueOperator(nn.Linear(8, 1), in_keys=["hidden"])
    avo = ActorValueOperator(trunk, policy, value)
    out = avo(_obs())
    assert {"hidden", "action", "state_value"} <= set(out.keys())
    policy_op = avo.get_policy_operator()
    assert isinstance(policy_op, ProbabilisticTensorDictSequential)
    assert "state_value" not in policy_op(_obs()).keys()
    assert "action" not in avo.get_value_operator()(_obs()).keys()
    assert avo.get_policy_head() is policy and avo.get_value_head() is value
    assert isinstance(policy_op.get_dist(_obs()), TanhNormal)
    # one trunk: its parameters appear once
    assert len(list(avo.parameters())) == 2 + 2 + 2


# ----------------------------------------------------------------------------- QValueActor
def test_qvalue_actor_one_hot_and_categorical() -> None:
    net = nn.Linear(3, 4)
    data = _obs(6)
    one_hot = QValueActor(net, spec=OneHot(4))
    out = one_hot(data.clone())
    values = out["action_value"]
    assert torch.equal(out["action"].long().argmax(-1), values.argmax(-1))
    assert out["action"].dtype == torch.bool and out["action"].sum(-1).eq(1).all()
    torch.testing.assert_close(out["chosen_action_value"], values.max(-1, keepdim=True).values)
    cat = QValueActor(net, spec=Categorical(4))
    assert torch.equal(cat(data.clone())["action"], values.argmax(-1))
    cat_keep = QValueActor(net, spec=Categorical(4, shape=(1,)))
    assert cat_keep(data.clone())["action"].shape == (6, 1)
    by_name = QValueActor(net, action_space="one_hot")
    assert by_name(data.clone())["action"].shape == (6, 4)
    with pytest.raises(ValueError, match="cannot tell the action space"):
        QValueActor(net)
    with pytest.raises(TypeError, match="pass a spec as spec="):  # as TorchRL: a name, not a spec
        QValueModule(action_space=Categorical(4))


def test_dqn_hello_world_policies_and_gym_specs_agree() -> None:
    # the reference's first DQN steps: a one-hot Q-value policy rolled out in CartPole as it comes
    env = GymEnv("CartPole-v1")
    net = TensorDictModule(MLP(out_features=2, num_cells=[16]), ["observation"], ["action_value"])
    by_name = TensorDictSequential(net, QValueModule(action_space="one_hot"))
    by_spec = QValueActor(MLP(out_features=2, num_cells=[16]), spec=Composite(action=env.action_spec),
                          in_keys=["observation"])
    for policy in (by_name, by_spec):
        data = env.rollout(5, policy)
        assert data["action"].dtype == env.action_spec.dtype == torch.int64
        assert data["action"].sum(-1).eq(1).all()


def test_qvalue_module_takes_the_first_of_tied_best_actions() -> None:
    # as torch.argmax: the first index among equal best values, its value the chosen one
    module = QValueModule(action_space="one_hot")
    action, chosen = module.greedy(torch.tensor([[2.0, 5.0, 5.0], [7.0, 7.0, 1.0]]))
    assert action.tolist() == [[0, 1, 0], [1, 0, 0]]
    assert chosen.tolist() == [[5.0], [7.0]]


def test_qvalue_actor_respects_action_mask() -> None:
    net = nn.Linear(3, 4)
    mask = torch.tensor([[True, False, False, True]]).expand(32, 4)
    data = _obs(32).set("action_mask", mask)
    actor = QValueActor(net, spec=Categorical(4), action_mask_key="action_mask")
    out = actor(data)
    assert set(out["action"].unique().tolist()) <= {0, 3}
    masked_values = out["action_value"].masked_fill(~mask, -float("inf"))
    torch.testing.assert_close(out["chosen_action_value"].squeeze(-1), masked_values.max(-1).values)
    with pytest.raises(KeyError, match="no action mask at 'action_mask'"):
        actor(_obs(2))


# ----------------------------------------------------------------------------- TanhModule
def test_tanh_module_bounds_from_spec_and_arguments() -> None:
    data = TensorDict(raw=torch.tensor([[-100.0, 0.0, 100.0]]), batch_size=[1])
    spec = Bounded(torch.tensor([0.0, 0.0, 0.0]), torch.tensor([1.0, 2.0, 4.0]))
    out = TanhModule(in_keys=["raw"], out_keys=["action"], spec=spec)(data.clone())
    torch.testing.assert_close(out["action"], torch.tensor([[0.0, 1.0, 4.0]]))
    explicit = TanhModule(in_keys=["raw"], low=-3.0, high=3.0)(data.clone())
    torch.testing.assert_close(explicit["raw"], torch.tensor([[-3.0, 0.0, 3.0]]))
    clamped = TanhModule(in_keys=["raw"], clamp=True)(data.clone())
    assert bool((clamped["raw"].abs() < 1).all())
    with pytest.raises(ValueError, match="low < high"):
        TanhModule(in_keys=["raw"], low=1.0, high=0.0)
    with pytest.raises(KeyError, match="nothing at 'missing'"):
        TanhModule(in_keys=["missing"])(data.clone())


def test_tanh_module_after_a_network_makes_a_bounded_actor() -> None:
    net = TensorDictModule(MLP(out_features=1, num_cells=[8]), in_keys=["observation"], out_keys=["raw"])
    squash = TanhModule(in_keys=["raw"], out_keys=["action"], spec=Bounded(-2.0, 2.0, shape=(1,)))
    from tensordict.nn import TensorDictSequential

    policy = TensorDictSequential(net, squash)
    env = GymEnv("Pendulum-v1")
    rollout = env.rollout(10, policy)
    assert rollout["action"].shape == (10, 1) and bool((rollout["action"].abs() <= 2).all())


def test_pendulum_env_rollout_with_probabilistic_actor() -> None:
    env = PendulumEnv(batch_size=[4])

    class Features(nn.Module):
        def forward(self, th: torch.Tensor, thdot: torch.Tensor) -> torch.Tensor:
            return torch.stack([th.cos(), th.sin(), thdot], -1)

    features = TensorDictModule(Features(), in_keys=["th", "thdot"], out_keys=["observation"])
    params = TensorDictModule(nn.Sequential(MLP(out_features=2, num_cells=[16]), NormalParamExtractor()),
                              in_keys=["observation"], out_keys=["loc", "scale"])
    from tensordict.nn import TensorDictSequential

    actor = ProbabilisticActor(TensorDictSequential(features, params), in_keys=["loc", "scale"],
                               distribution_class=TanhNormal, spec=env.action_spec)
    with set_interaction_type(InteractionType.RANDOM):
        rollout = env.rollout(20, actor)
    assert rollout.batch_size == (4, 20)
    assert bool((rollout["action"].abs() <= 2.0).all()) and rollout["action"].std() > 0
