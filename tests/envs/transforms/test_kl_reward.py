"""KLRewardTransform: KL values against a hand computation, specs, resets, data mode, errors."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential
from tensordict.nn import TensorDictModule
from torch.distributions import Independent, Normal

from cadence.envs import SerialEnv, check_env_specs
from cadence.envs.custom import PendulumEnv
from cadence.envs.transforms import TransformedEnv
from cadence.envs.transforms.kl_reward import KLRewardTransform
from tests.fakes import CountingEnv


class GaussianHead(torch.nn.Module):
    """``loc = obs @ w + b``, ``scale = exp(log_std)``: a policy whose log-probs are easy to write by hand."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([[0.3], [-0.2]]))
        self.b = torch.nn.Parameter(torch.tensor([0.1]))
        self.log_std = torch.nn.Parameter(torch.tensor([-0.5]))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loc = obs @ self.w + self.b
        return loc, self.log_std.exp().expand_as(loc)


def _features() -> TensorDictModule:
    return TensorDictModule(lambda th, thdot: torch.stack([th, thdot], -1), ["th", "thdot"], ["obs"])


def _actor(head: torch.nn.Module) -> ProbabilisticTensorDictSequential:
    return ProbabilisticTensorDictSequential(
        _features(),
        TensorDictModule(head, ["obs"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(["loc", "scale"], ["action"], distribution_class=Normal, return_log_prob=True),
    )


def independent_normal(loc: torch.Tensor, scale: torch.Tensor) -> Independent:
    return Independent(Normal(loc, scale), 1)


def _extractor_actor() -> ProbabilisticTensorDictSequential:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2), NormalParamExtractor())
    return ProbabilisticTensorDictSequential(
        _features(),
        TensorDictModule(net, ["obs"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(
            ["loc", "scale"], ["action"], distribution_class=independent_normal, return_log_prob=True
        ),
    )


def _log_normal(a: torch.Tensor, loc: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    return -((a - loc) ** 2) / (2 * std**2) - torch.log(std) - 0.5 * math.log(2 * math.pi)


def _hand_kl(data: TensorDict, before: dict[str, torch.Tensor], head: GaussianHead) -> torch.Tensor:
    """``log pi_current(a) - log pi_0(a)`` per step, from the formulas (batch shape)."""
    obs = torch.stack([data["th"], data["thdot"]], -1)
    a = data["action"].squeeze(-1)
    with torch.no_grad():
        current = _log_normal(a, (obs @ head.w + head.b).squeeze(-1), head.log_std.exp())
        reference = _log_normal(a, (obs @ before["w"] + before["b"]).squeeze(-1), before["log_std"].exp())
    return current - reference


def _move(head: GaussianHead) -> dict[str, torch.Tensor]:
    before = {name: p.detach().clone() for name, p in head.named_parameters()}
    with torch.no_grad():
        head.w.add_(torch.tensor([[0.4], [0.1]]))
        head.b.add_(-0.3)
        head.log_std.add_(0.2)
    return before


def test_kl_is_zero_until_the_policy_moves_then_matches_the_formula():
    head = GaussianHead()
    actor = _actor(head)
    env = TransformedEnv(PendulumEnv(seed=0), KLRewardTransform(actor, coef=0.3, out_keys=["penalised"]))
    torch.manual_seed(1)
    data = env.rollout(6, actor)
    assert "action_log_prob" in data.keys()
    assert torch.equal(data["next", "kl"], torch.zeros(6, 1))
    assert torch.equal(data["next", "penalised"], data["next", "reward"])
    before = _move(head)
    torch.manual_seed(2)
    data = env.rollout(6, actor)
    kl = _hand_kl(data, before, head)
    assert bool((kl.abs() > 1e-3).all())
    assert torch.allclose(data["next", "kl"].squeeze(-1), kl, atol=1e-5)
    assert torch.allclose(data["next", "penalised"], data["next", "reward"] - 0.3 * data["next", "kl"], atol=1e-6)
    # the log-prob the policy wrote is the current policy's
    obs = torch.stack([data["th"], data["thdot"]], -1)
    current = _log_normal(data["action"].squeeze(-1), (obs @ head.w + head.b).squeeze(-1), head.log_std.exp())
    assert torch.allclose(data["action_log_prob"].squeeze(-1), current.detach(), atol=1e-5)


def test_default_keys_penalise_the_reward_in_place():
    head = GaussianHead()
    actor = _actor(head)
    transform = KLRewardTransform(actor, coef=2.0)
    assert transform.in_keys == ["reward"] and transform.out_keys == ["reward"]
    assert transform.action_key == "action" and transform.log_prob_key == "action_log_prob"
    env = TransformedEnv(PendulumEnv(seed=0), transform)
    before = _move(head)
    torch.manual_seed(3)
    data = env.rollout(5, actor)
    torch.manual_seed(3)
    plain = PendulumEnv(seed=0).rollout(5, actor)
    assert torch.equal(plain["action"], data["action"])
    expected = plain["next", "reward"].squeeze(-1) - 2.0 * _hand_kl(plain, before, head)
    assert torch.allclose(data["next", "reward"].squeeze(-1), expected, atol=1e-5)
    assert env.full_reward_spec["reward"].shape == (1,)
    assert sorted(env.full_reward_spec.keys()) == ["reward"]


def test_without_a_policy_log_prob_the_live_actor_is_asked():
    head = GaussianHead()
    actor = _actor(head)
    env = TransformedEnv(PendulumEnv(seed=0), KLRewardTransform(actor))
    data = env.rollout(4)  # random actions: no "action_log_prob"
    assert "action_log_prob" not in data.keys()
    assert torch.equal(data["next", "kl"], torch.zeros(4, 1))
    before = _move(head)
    data = env.rollout(4)
    assert torch.allclose(data["next", "kl"].squeeze(-1), _hand_kl(data, before, head), atol=1e-5)


def test_specs_on_single_and_batched_envs():
    actor = _extractor_actor()
    env = TransformedEnv(PendulumEnv(seed=0), KLRewardTransform(actor))
    check_env_specs(env)
    assert env.full_observation_spec["kl"].shape == (1,) and env.full_reward_spec["reward"].shape == (1,)
    batched = TransformedEnv(SerialEnv(2, lambda: PendulumEnv(seed=0)), KLRewardTransform(actor))
    check_env_specs(batched)
    assert batched.full_observation_spec["kl"].shape == (2, 1)
    check_env_specs(SerialEnv(2, lambda: TransformedEnv(PendulumEnv(seed=0), KLRewardTransform(actor))))
    data = batched.rollout(3, actor)
    assert data["next", "kl"].shape == (2, 3, 1) and torch.equal(data["next", "kl"], torch.zeros(2, 3, 1))
    check_env_specs(TransformedEnv(PendulumEnv(seed=0), KLRewardTransform(actor, out_keys=["penalised"])))


def test_reset_writes_zeros_and_partial_resets_keep_the_others():
    head = GaussianHead()
    actor = _actor(head)
    env = TransformedEnv(SerialEnv(2, lambda: PendulumEnv(seed=0)), KLRewardTransform(actor))
    data = env.reset()
    assert torch.equal(data["kl"], torch.zeros(2, 1))
    _move(head)
    torch.manual_seed(0)
    data = env._step_mdp(env.step(actor(data)))
    kl = data["kl"].clone()
    assert bool((kl != 0).all())
    data["_reset"] = torch.tensor([[True], [False]])
    out = env.reset(data)
    assert out["kl"][0].item() == 0.0 and out["kl"][1].item() == kl[1].item()


def test_data_mode_on_collected_sequences():
    head = GaussianHead()
    actor = _actor(head)
    transform = KLRewardTransform(actor, coef=0.5)
    before = _move(head)
    torch.manual_seed(4)
    data = SerialEnv(2, lambda: PendulumEnv(seed=0)).rollout(5, actor)  # batch [2, 5]
    reward = data["next", "reward"].clone()
    out = transform(data)
    kl = _hand_kl(out, before, head)
    assert out["next", "kl"].shape == (2, 5, 1)
    assert torch.allclose(out["next", "kl"].squeeze(-1), kl, atol=1e-5)
    assert torch.allclose(out["next", "reward"].squeeze(-1), reward.squeeze(-1) - 0.5 * kl, atol=1e-5)
    # rewards at the root (flat data) are found there
    flat = TensorDict({"th": data["th"], "thdot": data["thdot"], "action": data["action"], "reward": reward},
                      [2, 5])
    assert torch.allclose(transform(flat)["kl"], out["next", "kl"], atol=1e-6)


def test_frozen_copy_buffers_by_default_parameters_with_requires_grad():
    head = GaussianHead()
    actor = _actor(head)
    frozen = KLRewardTransform(actor)
    assert list(frozen.parameters()) == [] and len(list(frozen.buffers())) == 3
    assert frozen.actor is actor
    cast = KLRewardTransform(actor).to(torch.float64)  # the frozen copy follows the transform
    assert cast.frozen_params["module", "1", "module", "log_std"].dtype == torch.float64
    differentiable = KLRewardTransform(actor, requires_grad=True)
    params = list(differentiable.parameters())
    assert len(params) == 3 and all(p.requires_grad for p in params)
    assert all(p is not q for p in params for q in head.parameters())
    _move(head)
    torch.manual_seed(5)
    data = actor(TensorDict({"th": torch.rand(4), "thdot": torch.rand(4)}, [4]))
    data["next"] = TensorDict({"reward": torch.zeros(4, 1)}, [4])
    out = differentiable(data.clone())
    out["next", "reward"].sum().backward()
    assert all(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in params)
    assert not frozen(data.clone())["next", "reward"].requires_grad


def test_errors_name_the_problem():
    actor = _actor(GaussianHead())
    with pytest.raises(TypeError, match="ProbabilisticTensorDictModule"):
        KLRewardTransform(torch.nn.Linear(2, 1))
    transform = KLRewardTransform(actor)
    with pytest.raises(KeyError, match="'action'"):
        transform(TensorDict({"th": torch.zeros(2), "thdot": torch.zeros(2), "reward": torch.zeros(2, 1)}, [2]))
    with pytest.raises(KeyError, match="thdot"):
        transform(TensorDict({"th": torch.zeros(2), "action": torch.zeros(2, 1), "reward": torch.zeros(2, 1)}, [2]))
    with pytest.raises(KeyError, match="none of the rewards"):
        transform(TensorDict({"th": torch.zeros(2), "thdot": torch.zeros(2), "action": torch.zeros(2, 1)}, [2]))
    with pytest.raises(ValueError, match="kl_key 'th'"):
        TransformedEnv(PendulumEnv(), KLRewardTransform(actor, kl_key="th"))
    with pytest.raises(KeyError, match="bonus"):
        TransformedEnv(PendulumEnv(), KLRewardTransform(actor, in_keys=["bonus"]))
    with pytest.raises(KeyError, match="thdot"):  # an env that does not emit what the actor reads
        TransformedEnv(CountingEnv(), KLRewardTransform(actor)).rollout(2)
