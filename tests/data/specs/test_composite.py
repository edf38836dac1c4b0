"""Composite: nested keys, locking, is_in, encode, shape ops, stacking (``specs/composite.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from cadence.data import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    OneHot,
    Unbounded,
)


# -------------------------------------------------------------------- Composite
def make_composite() -> Composite:
    return Composite(
        observation=Unbounded(shape=(4, 3)),
        action=Bounded(-1, 1, shape=(4, 2)),
        done=Categorical(2, shape=(4, 1), dtype=torch.bool),
        agents=Composite(
            action=OneHot(5, shape=(4, 2, 5)),
            reward=Unbounded(shape=(4, 2, 1)),
            shape=(4, 2),
        ),
        shape=(4,),
    )


def test_composite_rand_zero_one_tensordicts() -> None:
    spec = make_composite()
    for td in (spec.rand(), spec.zero(), spec.one()):
        assert isinstance(td, TensorDict)
        assert td.batch_size == (4,)
        assert td["agents"].batch_size == (4, 2)
        assert td["agents", "action"].shape == (4, 2, 5)
        assert td["done"].dtype == torch.bool
    td = spec.zero((7,))
    assert td.batch_size == (7, 4) and td["agents"].batch_size == (7, 4, 2)
    assert td["observation"].shape == (7, 4, 3)
    assert spec.is_in(spec.rand())
    assert spec.is_in(spec.rand((3,)))
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert (spec.rand(generator=g1) == spec.rand(generator=g2)).all()


def test_composite_shape_and_basic_props() -> None:
    spec = make_composite()
    assert spec.shape == (4,) and spec.ndim == 1 and spec.ndimension() == 1
    assert spec.device is None
    assert len(spec) == 4
    assert list(spec) == ["observation", "action", "done", "agents"]
    assert "observation" in spec and ("agents", "reward") in spec and ("agents",) in spec
    assert ("agents", "nope") not in spec and ("observation", "x") not in spec and 3 not in spec
    assert isinstance(spec["agents"], Composite)
    assert spec["agents", "action"].n == 5
    assert spec.get("missing", None) is None
    with pytest.raises(KeyError, match="missing"):
        spec["missing"]
    with pytest.raises(KeyError, match="missing"):
        spec.get(("agents", "missing"))
    with pytest.raises(KeyError):
        spec["observation", "x"]


def test_composite_keys_options() -> None:
    spec = make_composite()
    assert list(spec.keys()) == ["observation", "action", "done", "agents"]
    nested = spec.keys(include_nested=True)
    assert ("agents", "action") in nested and "agents" in nested
    leaves = spec.keys(include_nested=True, leaves_only=True)
    assert "agents" not in leaves
    assert set(leaves) == {"observation", "action", "done", ("agents", "action"), ("agents", "reward")}
    assert ("observation",) in leaves
    assert list(spec.keys(leaves_only=True)) == ["observation", "action", "done"]
    assert len(spec.items(True, True)) == 5 and len(spec.values(True, True)) == 5
    assert "keys(" in repr(spec.keys())


def test_composite_rejects_child_with_wrong_leading_shape() -> None:
    with pytest.raises(ValueError, match=r"'obs'.*\(3,\).*\(4,\)"):
        Composite(obs=Unbounded(shape=(3,)), shape=(4,))
    spec = Composite(shape=(4,))
    with pytest.raises(ValueError, match=r"'x'.*\(5, 2\).*\(4,\)"):
        spec["x"] = Unbounded(shape=(5, 2))
    with pytest.raises(TypeError, match="TensorSpec"):
        spec["x"] = 3
    with pytest.raises(ValueError, match="dynamic"):
        Composite(shape=(-1,))


def test_composite_setitem_nested_and_dict_values() -> None:
    spec = Composite(shape=(2,))
    spec["a", "b", "c"] = Unbounded(shape=(2, 3))
    assert isinstance(spec["a"], Composite) and spec["a"].shape == (2,)
    assert spec["a", "b", "c"].shape == (2, 3)
    spec["d"] = {"e": Unbounded(shape=(2, 1))}
    assert isinstance(spec["d"], Composite)
    with pytest.raises(KeyError, match="not a Composite"):
        spec["a", "b", "c", "x"] = Unbounded(shape=(2,))
    with pytest.raises(KeyError):
        spec[("a", 1)] = Unbounded(shape=(2,))  # type: ignore[index]
    assert spec.set("f", Unbounded(shape=(2,))) is spec


def test_composite_locking() -> None:
    spec = make_composite().lock_()
    assert spec.is_locked and spec["agents"].is_locked
    with pytest.raises(RuntimeError, match="locked.*'new'"):
        spec["new"] = Unbounded(shape=(4,))
    with pytest.raises(RuntimeError, match="locked"):
        del spec["observation"]
    with pytest.raises(RuntimeError, match="locked"):
        spec["agents", "x"] = Unbounded(shape=(4, 2))
    with pytest.raises(RuntimeError, match="locked"):
        spec.pop("action")
    with pytest.raises(RuntimeError, match="locked"):
        spec.update({"x": Unbounded(shape=(4,))})
    with pytest.raises(RuntimeError, match="locked"):
        spec.shape = (4,)
    assert not spec.clone().is_locked
    spec.unlock_()
    spec["new"] = Unbounded(shape=(4,))
    assert "new" in spec


def test_composite_delete_pop_empty() -> None:
    spec = make_composite()
    del spec["agents", "reward"]
    assert ("agents", "reward") not in spec
    with pytest.raises(KeyError):
        del spec["nope"]
    popped = spec.pop("action")
    assert isinstance(popped, Bounded) and "action" not in spec
    assert spec.pop("action", None) is None
    with pytest.raises(KeyError):
        spec.pop("action")
    e = spec.empty()
    assert e.is_empty() and len(e) == 0 and e.shape == (4,)
    assert not spec.is_empty()
    assert Composite(a=Composite()).is_empty()
    assert e.zero().batch_size == (4,)
    assert repr(e) == "Composite(shape=torch.Size([4]), device=None)"


def test_composite_select_exclude_update() -> None:
    spec = make_composite()
    sel = spec.select("observation", ("agents", "reward"))
    assert set(sel.keys(True, True)) == {"observation", ("agents", "reward")}
    with pytest.raises(KeyError, match="nope"):
        spec.select("nope")
    assert spec.select("nope", strict=False).is_empty()
    exc = spec.exclude("observation", ("agents", "action"), "absent")
    assert set(exc.keys(True, True)) == {"action", "done", ("agents", "reward")}
    assert "observation" in spec
    other = Composite(extra=Unbounded(shape=(4,)), agents=Composite(new=Unbounded(shape=(4, 2)), shape=(4, 2)), shape=(4,))
    assert spec.update(other) is spec
    assert "extra" in spec and ("agents", "new") in spec and ("agents", "action") in spec
    spec.update({"more": Unbounded(shape=(4, 1))})
    assert "more" in spec


def test_composite_is_in_checks_every_key() -> None:
    spec = make_composite()
    td = spec.rand()
    assert spec.is_in(td)
    td2 = td.clone()
    del td2["agents", "reward"]
    assert not spec.is_in(td2)
    with pytest.raises(ValueError, match=r"missing key \('agents', 'reward'\)"):
        spec.assert_is_in(td2)
    td3 = td.clone()
    td3["action"] = torch.full((4, 2), 5.0)
    assert not spec.is_in(td3)
    with pytest.raises(ValueError, match=r"key 'action'.*expected values in \[-1.0, 1.0\]"):
        spec.assert_is_in(td3)
    assert not spec.is_in(torch.zeros(3))
    with pytest.raises(ValueError, match="TensorDict or a dict"):
        spec.assert_is_in(torch.zeros(3))
    assert Composite(x=Unbounded(shape=(2,))).is_in({"x": torch.zeros(2)})
    td4 = td.clone()
    td4["extra"] = torch.zeros(4)
    assert spec.is_in(td4)


def test_composite_eq() -> None:
    assert make_composite() == make_composite()
    a, b = make_composite(), make_composite()
    b["agents", "reward"] = Unbounded(shape=(4, 2, 2))
    assert a != b
    c = make_composite()
    del c["done"]
    assert a != c
    assert Composite(shape=(2,)) != Composite(shape=(3,))
    assert Composite(x=Unbounded()) != Unbounded()


def test_composite_encode() -> None:
    spec = Composite(obs=Unbounded(shape=(2,)), nested=Composite(r=Unbounded(shape=(1,))), a=OneHot(3))
    td = spec.encode({"obs": np.array([1.0, 2.0]), "nested": {"r": 0.5}, "a": 2})
    assert isinstance(td, TensorDict)
    assert td["obs"].dtype == torch.float32 and td["nested", "r"].tolist() == [0.5]
    assert td["a"].tolist() == [False, False, True]
    assert spec.encode({"obs": [0.0, 0.0]}).keys() == {"obs"}
    with pytest.raises(KeyError, match="'bad'"):
        spec.encode({"bad": 1})
    with pytest.raises(ValueError, match="shape"):
        spec.encode({"obs": np.zeros(5)})


def test_composite_project_and_type_check() -> None:
    spec = Composite(a=Bounded(0, 1, shape=(2,)), b=Categorical(3))
    td = TensorDict({"a": torch.tensor([2.0, -1.0]), "b": torch.tensor(7)}, batch_size=())
    out = spec.project(td)
    assert out["a"].tolist() == [1.0, 0.0] and out["b"].item() == 2
    spec.type_check(out)
    spec.type_check(out["a"], "a")
    with pytest.raises(ValueError, match="'b'"):
        spec.type_check(TensorDict({"b": torch.tensor(1.0)}, batch_size=()))


def test_composite_expand_squeeze_unsqueeze_index() -> None:
    spec = make_composite()
    e = spec.expand(3, 4)
    assert e.shape == (3, 4) and e["agents"].shape == (3, 4, 2)
    assert e["agents", "action"].shape == (3, 4, 2, 5)
    assert e.is_in(spec.rand((3,)))
    assert spec.expand((3, 4)) == e
    with pytest.raises(ValueError, match="expand"):
        spec.expand(5)
    u = spec.unsqueeze(0)
    assert u.shape == (1, 4) and u["observation"].shape == (1, 4, 3)
    assert u.squeeze() == spec and u.squeeze(0) == spec
    assert spec.squeeze(0) == spec
    assert spec.unsqueeze(-1).shape == (4, 1)
    first = spec[0]
    assert first.shape == () and first["agents"].shape == (2,)
    assert first["observation"].shape == (3,)
    assert spec[1:3].shape == (2,)
    assert spec[..., 0].shape == ()
    with pytest.raises(IndexError):
        spec[0, 0]
    parts = spec.unbind(0)
    assert len(parts) == 4 and parts[2] == spec[2]


def test_composite_clone_to_device() -> None:
    spec = make_composite()
    c = spec.clone()
    assert c == spec
    c["agents", "reward"] = Unbounded(shape=(4, 2, 3))
    assert spec["agents", "reward"].shape == (4, 2, 1)
    moved = spec.to("cpu")
    assert moved.device == torch.device("cpu") and moved["agents", "action"].device == torch.device("cpu")
    assert moved.zero().device == torch.device("cpu")
    d = Composite(x=Unbounded(shape=(2,)), device="cpu")
    assert d.device == torch.device("cpu") and d["x"].device == torch.device("cpu")
    assert spec.to(torch.float64)["observation"].dtype == torch.float64


def test_composite_shape_setter() -> None:
    spec = Composite(x=Unbounded(shape=(4, 3)))
    spec.shape = (4,)
    assert spec.shape == (4,)
    with pytest.raises(ValueError, match=r"'x'.*\(4, 3\)"):
        spec.shape = (5,)


def test_composite_repr() -> None:
    r = repr(make_composite())
    assert r.startswith("Composite(\n") and "agents: Composite(" in r and "observation: Unbounded" in r


def test_seed_dynamic_env_specs() -> None:
    observation_spec = Composite(observation=Unbounded(shape=(3, -1, 2)))
    action_spec = Bounded(low=-1, high=1, shape=(2,))
    full_done_spec = Composite(
        done=Binary(1, shape=(1,), dtype=torch.bool),
        terminated=Binary(1, shape=(1,), dtype=torch.bool),
        truncated=Binary(1, shape=(1,), dtype=torch.bool),
    )
    reward_spec = Unbounded((1,), dtype=torch.float)
    assert observation_spec["observation"].dtype == torch.float32
    done = full_done_spec.zero()
    assert done["done"].tolist() == [False] and done.batch_size == ()
    assert action_spec.is_in(action_spec.rand())
    assert reward_spec.zero().shape == (1,)


def test_composite_is_in_nested_dicts_and_leaf_paths() -> None:
    spec = Composite(agents=Composite(action=Unbounded(shape=(2,))))
    assert spec.is_in({"agents": {"action": torch.zeros(2)}})
    assert not spec.is_in({"agents": {}})
    assert not spec.is_in({"agents": torch.zeros(2)})
    td = TensorDict({"agents": torch.zeros(2)}, batch_size=())
    assert not spec.is_in(td)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_device() -> None:
    spec = make_composite().to("cuda")
    assert spec["agents", "action"].device.type == "cuda"
    td = spec.rand(generator=torch.Generator().manual_seed(0))
    assert td.device.type == "cuda" and spec.is_in(td)
    assert Bounded(0, 1, shape=(2,), device="cuda").rand().device.type == "cuda"
    assert Bounded(0, 1, shape=(2,), device="cuda").to("cpu").low.device.type == "cpu"


# ---------------------------------------------------------------------- dynamic
def test_dynamic_in_composite_seed_example() -> None:
    spec = Composite(observation=Unbounded(shape=(3, -1, 2)))
    td = spec.zero()
    assert td["observation"].shape == (3, 1, 2)
    assert spec.is_in(TensorDict({"observation": torch.zeros(3, 4, 2)}, batch_size=()))
    assert spec.is_dynamic
    assert not Composite(o=Unbounded(shape=(2,))).is_dynamic


# --------------------------------------------------------------------- stacking
def test_stack_multi_agent_seed_example() -> None:
    n_agents = 3
    action_specs = [Bounded(-1.0, float(i + 1), shape=(2,)) for i in range(n_agents)]
    reward_specs = [Unbounded(shape=(1,)) for _ in range(n_agents)]
    action_spec = Composite({"agents": Composite({"action": torch.stack(action_specs)}, shape=(n_agents,))})
    reward_spec = Composite({"agents": Composite({"reward": torch.stack(reward_specs)}, shape=(n_agents,))})
    assert action_spec["agents", "action"].shape == (3, 2)
    assert reward_spec["agents", "reward"] == torch.stack(reward_specs)
    td = action_spec.rand()
    assert td["agents"].batch_size == (3,)
    assert action_spec.is_in(td)
    done = Categorical(n=2, shape=torch.Size((1,)), dtype=torch.bool)
    assert done.zero().shape == (1,)


def test_stack_composites() -> None:
    c1 = Composite(obs=Bounded(0, 1, shape=(2,)), nested=Composite(r=Unbounded(shape=(1,))))
    c2 = Composite(obs=Bounded(0, 2, shape=(2,)), nested=Composite(r=Unbounded(shape=(1,))))
    s = torch.stack([c1, c2], dim=0)
    assert isinstance(s, Composite) and s.shape == (2,)
    assert s["obs"].shape == (2, 2) and s["nested"].shape == (2,)
    assert s["nested", "r"].shape == (2, 1)
    assert s["obs"].high[:, 0].tolist() == [1.0, 2.0]
    assert s[0] == c1
    b = Composite(x=Unbounded(shape=(4, 2)), shape=(4,))
    assert torch.stack([b, b], dim=1).shape == (4, 2)
    assert torch.stack([b, b], dim=1)["x"].shape == (4, 2, 2)
    with pytest.raises(ValueError, match=r"missing \['nested'\]"):
        torch.stack([c1, Composite(obs=Bounded(0, 1, shape=(2,)))])
    with pytest.raises(ValueError, match="key 'obs'"):
        torch.stack([c1, Composite(obs=Unbounded(shape=(2,)), nested=Composite(r=Unbounded(shape=(1,))))])
