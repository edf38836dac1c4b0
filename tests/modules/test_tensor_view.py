"""compile_policy: what it accepts, and that its results are the modules' bit for bit."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential

from cadence.modules.tensor_view import compile_policy
from cadence.data import Bounded
from cadence.envs.utils import ExplorationType, set_exploration_type
from cadence.modules import Actor, AdditiveGaussianModule, OrnsteinUhlenbeckProcessModule, TanhModule


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))


def _run_both(make: object, steps: int = 5, batch: tuple[int, ...] = (4,), init: bool = False) -> None:
    reference, compiled_module = make(), make()  # type: ignore[operator]
    compiled = compile_policy(compiled_module, batch)
    assert compiled is not None
    gen = torch.Generator().manual_seed(3)
    td = TensorDict({}, batch_size=batch)
    values: dict[str, torch.Tensor] = {}
    for t in range(steps):
        obs = torch.randn(*batch, 3, generator=gen)
        td.set("observation", obs)
        values["observation"] = obs
        if init:
            flag = torch.full((*batch, 1), t == 2)
            td.set("is_init", flag)
            values["is_init"] = flag
        with torch.no_grad():
            td = reference(td)
            compiled(values)
        for key, value in values.items():
            assert torch.equal(td.get(key), value), (t, key)


def test_module_and_sequence_match() -> None:
    mlp = _mlp()
    _run_both(lambda: TensorDictSequential(
        TensorDictModule(mlp, ["observation"], ["hidden"]),
        TensorDictModule(torch.nn.Tanh(), ["hidden"], ["action"]),
    ))


def test_tanh_module_matches_module() -> None:
    # the DDPG/TD3 scripts' actor: an MLP then TanhModule squashing into the action bounds
    mlp = _mlp()
    _run_both(lambda: TensorDictSequential(
        TensorDictModule(mlp, ["observation"], ["param"]),
        TanhModule(in_keys=["param"], out_keys=["action"], low=-2.0, high=torch.tensor([1.0, 3.0])),
    ))


def test_ou_exploration_matches_module() -> None:
    mlp = _mlp()
    spec = Bounded(-0.5, 0.5, shape=(4, 2))

    def make() -> TensorDictSequential:
        return TensorDictSequential(
            TensorDictModule(mlp, ["observation"], ["action"]),
            OrnsteinUhlenbeckProcessModule(
                spec.clone(), annealing_num_steps=10, generator=torch.Generator().manual_seed(1)
            ),
        )

    _run_both(make)
    _run_both(make, init=True)


def test_ou_annealed_sigma_and_eps_match() -> None:
    mlp = _mlp()

    def make() -> TensorDictSequential:
        ou = OrnsteinUhlenbeckProcessModule(
            Bounded(-1.0, 1.0, shape=(2,)),
            sigma_min=0.05,
            n_steps_annealing=3,
            generator=torch.Generator().manual_seed(1),
        )
        ou.step(300)
        return TensorDictSequential(TensorDictModule(mlp, ["observation"], ["action"]), ou)

    _run_both(make, steps=6)


def test_gaussian_and_actor_match() -> None:
    mlp = _mlp()

    def make() -> TensorDictSequential:
        return TensorDictSequential(
            Actor(mlp),
            AdditiveGaussianModule(Bounded(-0.2, 0.2, shape=(2,)), generator=torch.Generator().manual_seed(2)),
        )

    _run_both(make)


def test_not_exploring_leaves_the_action() -> None:
    ou = OrnsteinUhlenbeckProcessModule(Bounded(-1.0, 1.0, shape=(1,)))
    step = compile_policy(ou, (2,))
    assert step is not None
    values = {"action": torch.zeros(2, 1)}
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        step(values)
    assert values["action"].eq(0).all() and set(values) == {"action"}


def test_what_does_not_compile() -> None:
    assert compile_policy(lambda td: td) is None
    inner = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
    assert compile_policy(TensorDictModule(inner, ["observation"], ["action"])) is None
    assert compile_policy(Actor(torch.nn.Linear(3, 1), spec=Bounded(-1.0, 1.0, shape=(1,)), safe=True)) is None
    hooked = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
    hooked.register_forward_hook(lambda *args: None)
    assert compile_policy(hooked) is None
    assert compile_policy(TensorDictModule(torch.nn.Linear(3, 1), ["observation"], [("next", "hidden")])) is None


def test_a_group_policy_compiles_on_tuple_keys_and_matches_the_module() -> None:
    # a multi-agent policy reads and writes its group's entries: the step's dict keys them by tuples
    from cadence.modules import QValueModule

    mlp = _mlp()
    policy = TensorDictSequential(
        TensorDictModule(mlp, [("agents", "observation")], [("agents", "action_value")]),
        QValueModule(action_space="categorical", action_value_key=("agents", "action_value"),
                     out_keys=[("agents", "action"), ("agents", "action_value"), ("agents", "chosen_action_value")]),
    )
    step = compile_policy(policy, (2,))
    assert step is not None
    observation = torch.randn(2, 3, 3)  # 2 envs, 3 agents
    values = {("agents", "observation"): observation}
    with torch.no_grad():
        step(values)
        reference = policy(TensorDict({"agents": TensorDict({"observation": observation}, [2, 3])}, [2]))
    for key, value in values.items():
        assert torch.equal(reference.get(key), value), key
    with pytest.raises(KeyError, match="reads .*agents.*observation.* but the step holds .*agents.*obs"):
        step({("agents", "obs"): observation})


@pytest.mark.parametrize("action_space", ["one_hot", "categorical"])
def test_a_qvalue_policy_compiles_and_matches_the_module(action_space: str) -> None:
    from cadence.modules import QValueModule

    mlp = _mlp()
    qvalue = QValueModule(action_space=action_space)
    assert compile_policy(qvalue) is not None
    _run_both(lambda: TensorDictSequential(
        TensorDictModule(mlp, ["observation"], ["action_value"]),
        QValueModule(action_space=action_space),
    ))


def test_a_compiled_qvalue_module_keeps_to_its_mask_and_names_what_is_missing() -> None:
    from cadence.modules import QValueModule

    module = QValueModule(action_space="categorical", action_mask_key="mask")
    step = compile_policy(module)
    assert step is not None
    action_values = torch.tensor([[1.0, 5.0, 2.0], [4.0, 0.0, 3.0]])
    mask = torch.tensor([[True, False, True], [False, True, True]])
    values = {"action_value": action_values, "mask": mask}
    step(values)
    reference = module(TensorDict({"action_value": action_values, "mask": mask}, [2]))
    assert values["action"].tolist() == reference["action"].tolist() == [2, 2]
    assert torch.equal(values["chosen_action_value"], reference["chosen_action_value"])
    with pytest.raises(KeyError, match="no action mask at 'mask'"):
        step({"action_value": action_values})


def test_a_sequence_with_a_member_that_does_not_compile_runs_it_on_a_tensordict() -> None:
    from tensordict.nn import TensorDictModuleBase

    class Clamp(TensorDictModuleBase):  # a user's own module: not compiled, run on a tensordict
        in_keys, out_keys = ["hidden"], ["action"]

        def forward(self, tensordict: TensorDict) -> TensorDict:
            return tensordict.set("action", tensordict.get("hidden").clamp(-0.1, 0.1))

    mlp = _mlp()
    assert compile_policy(Clamp()) is None
    _run_both(lambda: TensorDictSequential(TensorDictModule(mlp, ["observation"], ["hidden"]), Clamp()))


def test_a_member_writing_a_nested_entry_writes_it_under_a_tuple_key_and_one_under_next_is_named() -> None:
    from tensordict.nn import TensorDictModuleBase

    class Nested(TensorDictModuleBase):
        in_keys, out_keys = ["action"], ["extra"]

        def forward(self, tensordict: TensorDict) -> TensorDict:
            return tensordict.set("extra", TensorDict({"x": torch.zeros(4, 1)}, [4]))

    class UnderNext(Nested):
        def forward(self, tensordict: TensorDict) -> TensorDict:
            return tensordict.set(("next", "hidden"), torch.zeros(4, 1))

    linear = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
    step = compile_policy(TensorDictSequential(linear, Nested()), (4,))
    assert step is not None
    values = {"observation": torch.zeros(4, 3)}
    step(values)
    assert sorted(map(str, values)) == ["('extra', 'x')", "action", "observation"]
    step = compile_policy(TensorDictSequential(linear, UnderNext()), (4,))
    values = {"observation": torch.zeros(4, 3)}
    step(values)  # what it writes for the next step goes to the dict's "next" (the loop hands it on)
    assert sorted(values) == ["action", "next", "observation"] and list(values["next"]) == ["hidden"]
