"""RLlib's torch models: ModelV2 (views, the call path, tracking) and FullyConnectedNetwork."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from cadence.interop.rllib.models import (
    FullyConnectedNetwork,
    ModelV2,
    TorchModelV2,
    convert_to_torch_tensor,
    flatten_obs,
)
from cadence.interop.rllib.sample_batch import SampleBatch
from cadence.interop.rllib.view_requirement import ViewRequirement

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(2)


class LSTMStyleModel(ModelV2):
    """The seed's auto-LSTM wrapper views: prev actions and prev rewards, if configured."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int, model_config: dict, name: str) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        if model_config["lstm_use_prev_action"]:
            self.view_requirements[SampleBatch.PREV_ACTIONS] = ViewRequirement(
                SampleBatch.ACTIONS, space=self.action_space, shift=-1
            )
        if model_config["lstm_use_prev_reward"]:
            self.view_requirements[SampleBatch.PREV_REWARDS] = ViewRequirement(SampleBatch.REWARDS, shift=-1)
        self.linear = nn.Linear(3 + 2, num_outputs)

    def forward(self, input_dict: SampleBatch, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
        prev_a = input_dict[SampleBatch.PREV_ACTIONS].float().unsqueeze(-1)
        prev_r = input_dict[SampleBatch.PREV_REWARDS].float().unsqueeze(-1)
        return self.linear(torch.cat([input_dict["obs"], prev_a, prev_r], -1)), state


def _lstm_style() -> LSTMStyleModel:
    config = {"lstm_use_prev_action": True, "lstm_use_prev_reward": True}
    return LSTMStyleModel(OBS, ACT, 2, config, "lstm_style")


def test_default_view_requirements_are_the_seeds() -> None:
    class Plain(ModelV2):
        def forward(self, input_dict: SampleBatch, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
            return input_dict["obs"], state

    model = Plain(OBS, ACT, 3, {}, "plain")
    assert model.view_requirements == {"obs": ViewRequirement(shift=0, space=OBS)}
    assert (model.num_outputs, model.model_config, model.name) == (3, {}, "plain")
    assert model.obs_space is OBS and model.action_space is ACT
    assert model.get_initial_state() == [] and not model.is_time_major()
    assert TorchModelV2 is ModelV2 and isinstance(model, nn.Module)


def test_lstm_style_model_adds_prev_action_and_reward_views() -> None:
    model = _lstm_style()
    assert list(model.view_requirements) == ["obs", "prev_actions", "prev_rewards"]
    prev_a = model.view_requirements["prev_actions"]
    assert (prev_a.data_col, prev_a.shift, prev_a.space) == ("actions", -1, ACT)
    prev_r = model.view_requirements["prev_rewards"]
    assert (prev_r.data_col, prev_r.shift, prev_r.space_given) == ("rewards", -1, False)
    none = LSTMStyleModel(OBS, ACT, 2, {"lstm_use_prev_action": False, "lstm_use_prev_reward": False}, "x")
    assert list(none.view_requirements) == ["obs"]


def test_subclass_without_forward_is_refused_unless_abstract() -> None:
    with pytest.raises(TypeError, match=r"NoForward must define forward\(input_dict, state, seq_lens\)"):

        class NoForward(ModelV2):
            pass

    class Base(ModelV2, abstract=True):
        pass

    with pytest.raises(NotImplementedError, match="Base.forward"):
        Base(OBS, ACT, 2, {}, "b")({"obs": np.zeros((1, 3))})
    with pytest.raises(NotImplementedError, match="has no value function"):
        Base(OBS, ACT, 2, {}, "b").value_function()


def test_call_converts_columns_and_records_reads_on_the_callers_batch() -> None:
    model = _lstm_style()
    batch = SampleBatch(
        obs=np.zeros((4, 3)),  # float64: converted to float32 as RLlib does
        prev_actions=np.array([0, 1, 1, 0]),
        prev_rewards=np.ones(4),
        new_obs=np.zeros((4, 3)),
        infos=[{}] * 4,
    )
    out, state = model(batch)
    assert out.shape == (4, 2) and out.dtype == torch.float32 and state == []
    assert batch.accessed_keys == {"obs", "prev_actions", "prev_rewards"}
    # the caller's columns stay numpy and are not replaced
    assert isinstance(batch["obs"], np.ndarray) and set(batch) == {"obs", "prev_actions", "prev_rewards", "new_obs", "infos"}
    assert model.last_output() is out


def test_call_accepts_a_plain_dict_and_keeps_forward_writes_private() -> None:
    class Writer(ModelV2):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.seen: dict[str, Any] = {}

        def forward(self, input_dict: SampleBatch, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
            input_dict["scratch"] = np.zeros(len(input_dict["obs"]))
            self.seen = {"training": input_dict.is_training, "type": type(input_dict["obs"])}
            return input_dict["obs"][:, :2], state

    model = Writer(OBS, ACT, 2, {}, "w")
    columns = {"obs": np.zeros((2, 3), np.float32)}
    model(columns)
    assert "scratch" not in columns and model.seen["type"] is torch.Tensor and model.seen["training"] is False
    batch = SampleBatch(obs=np.zeros((2, 3), np.float32), _is_training=True)
    model(batch)
    assert "scratch" not in batch and batch.added_keys == set() and model.seen["training"] is True


def test_obs_flat_is_derived_from_obs_one_hot_for_discrete_parts() -> None:
    seen: dict[str, torch.Tensor] = {}

    class Flat(ModelV2):
        def forward(self, input_dict: SampleBatch, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
            seen["flat"] = input_dict["obs_flat"]
            return seen["flat"], state

    space = gym.spaces.Dict(pos=gym.spaces.Box(-1, 1, (2,)), cell=gym.spaces.Discrete(3))
    batch = SampleBatch(obs={"pos": np.ones((2, 2), np.float32), "cell": np.array([2, 0])})
    Flat(space, ACT, None, {}, "f")(batch)
    # the same layout as gymnasium's own flatten of one observation (the space's key order)
    expected = [gym.spaces.flatten(space, {"pos": np.ones(2, np.float32), "cell": cell}).tolist() for cell in (2, 0)]
    assert seen["flat"].tolist() == expected and sorted(expected[0]) == [0, 0, 1, 1, 1]
    assert batch.accessed_keys == {"obs"}
    assert flatten_obs(gym.spaces.MultiDiscrete([2, 3]), np.array([[1, 2]])).tolist() == [[0, 1, 0, 0, 1]]
    assert flatten_obs(gym.spaces.Tuple([ACT]), (np.array([1]),)).tolist() == [[0, 1]]
    with pytest.raises(TypeError, match="the observation space is a Tuple of 1 but the obs is a ndarray"):
        flatten_obs(gym.spaces.Tuple([ACT]), np.zeros((1, 1)))
    with pytest.raises(TypeError, match="cannot flatten observations of space Text"):
        flatten_obs(gym.spaces.Text(4), np.array(["abc"]))


def test_state_and_seq_lens_are_read_from_the_input_dict() -> None:
    class Recurrent(ModelV2):
        def forward(self, input_dict: SampleBatch, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
            self.got = (len(state), None if seq_lens is None else seq_lens.tolist())
            return input_dict["obs"][:, :2], [s + 1 for s in state]

        def get_initial_state(self) -> list[np.ndarray]:
            return [np.zeros(4, np.float32)]

    model = Recurrent(OBS, ACT, 2, {}, "r")
    batch = SampleBatch(obs=np.zeros((3, 3), np.float32), state_in_0=np.zeros((2, 4), np.float32), seq_lens=[2, 1])
    _, state_out = model(batch)
    assert model.got == (1, [2, 1]) and state_out[0].shape == (2, 4)
    assert "state_in_0" in batch.accessed_keys


def test_forward_output_is_checked() -> None:
    class Bad(ModelV2):
        def forward(self, input_dict: SampleBatch, state: list, seq_lens: Any) -> Any:
            return self.model_config["out"]

    obs = {"obs": np.zeros((2, 3), np.float32)}
    with pytest.raises(ValueError, match=r"must return a tuple \(outputs, state_list\), got Tensor"):
        Bad(OBS, ACT, 2, {"out": torch.zeros(2, 2)}, "b")(obs)
    with pytest.raises(ValueError, match="returned a state of type dict"):
        Bad(OBS, ACT, 2, {"out": (torch.zeros(2, 2), {})}, "b")(obs)
    with pytest.raises(ValueError, match=r"outputs of shape \(2, 5\); expected a last dimension of num_outputs=2"):
        Bad(OBS, ACT, 2, {"out": (torch.zeros(2, 5), [])}, "b")(obs)


def test_convert_to_torch_tensor() -> None:
    array = np.arange(3, dtype=np.int32)
    tensor = convert_to_torch_tensor(array)
    tensor[0] = 7  # shares memory: no copy for the common case
    assert array[0] == 7
    assert convert_to_torch_tensor(np.array([True])).dtype == torch.bool
    readonly = np.zeros(2)
    readonly.setflags(write=False)
    assert convert_to_torch_tensor(readonly).dtype == torch.float32
    strings = np.array(["a"])
    assert convert_to_torch_tensor(strings) is strings and convert_to_torch_tensor(3) == 3


def _fcn(config: dict, seed: int = 0, num_outputs: int | None = 2, obs: gym.Space = OBS) -> FullyConnectedNetwork:
    return FullyConnectedNetwork(obs, ACT, num_outputs, config, "fc", generator=torch.Generator().manual_seed(seed))


def test_fcnet_config_keys() -> None:
    model = _fcn({"fcnet_hiddens": [8, 5], "fcnet_activation": "relu"})
    linears = [m for m in model._hidden_layers if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(3, 8), (8, 5)]
    assert any(isinstance(m, nn.ReLU) for m in model._hidden_layers)
    assert model._value_branch_separate is not None  # vf_share_layers defaults to False
    shared = _fcn({"fcnet_hiddens": [8, 5], "vf_share_layers": True})
    assert shared._value_branch_separate is None
    assert sum(p.numel() for p in shared.parameters()) < sum(p.numel() for p in model.parameters())
    assert any(isinstance(m, nn.Tanh) for m in shared._hidden_layers)  # tanh by default
    default = _fcn({})
    assert [m.out_features for m in default._hidden_layers if isinstance(m, nn.Linear)] == [256, 256]
    no_head = _fcn({"fcnet_hiddens": [6]}, num_outputs=None)
    assert no_head.num_outputs == 6 and no_head({"obs": np.zeros((1, 3))})[0].shape == (1, 6)


def test_fcnet_free_log_std_and_errors() -> None:
    model = _fcn({"fcnet_hiddens": [4], "free_log_std": True}, num_outputs=4)
    out, _ = model({"obs": np.zeros((3, 3), np.float32)})
    assert out.shape == (3, 4) and torch.equal(out[:, 2:], torch.zeros(3, 2))
    assert "_log_std" in dict(model.named_parameters())
    with pytest.raises(ValueError, match="free_log_std needs an even num_outputs"):
        _fcn({"free_log_std": True}, num_outputs=3)
    with pytest.raises(ValueError, match=r"fcnet_activation'\]='gelu' is not supported"):
        _fcn({"fcnet_activation": "gelu"})
    with pytest.raises(ValueError, match="num_outputs=None needs at least one fcnet_hiddens layer"):
        _fcn({"fcnet_hiddens": []}, num_outputs=None)
    with pytest.raises(ValueError, match="value_function.. called before any forward pass"):
        _fcn({}).value_function()


def test_fcnet_init_uses_the_given_generator_only() -> None:
    state = torch.get_rng_state()
    a, b, c = _fcn({"fcnet_hiddens": [8]}, seed=1), _fcn({"fcnet_hiddens": [8]}, seed=1), _fcn({"fcnet_hiddens": [8]}, seed=2)
    assert torch.equal(torch.get_rng_state(), state)  # the global RNG was not touched
    for (name, pa), pb, pc in zip(a.named_parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb), name
        if name.endswith("weight"):
            assert not torch.equal(pa, pc), name
    # RLlib's normc init: each output row has the layer's norm (0.01 for the logits)
    assert torch.allclose(a._logits.weight.norm(dim=1), torch.full((2,), 0.01))
    assert torch.allclose(FullyConnectedNetwork(OBS, ACT, 2, {"seed": 1, "fcnet_hiddens": [8]}, "s")._logits.weight, a._logits.weight)


def test_fcnet_value_function_and_gradients() -> None:
    model = _fcn({"fcnet_hiddens": [16]}, obs=gym.spaces.Discrete(4))
    logits, _ = model(SampleBatch(obs=np.array([0, 1, 2, 3])))
    value = model.value_function()
    assert logits.shape == (4, 2) and value.shape == (4,)
    (logits.sum() + value.sum()).backward()
    assert all(p.grad is not None for p in model.parameters())
