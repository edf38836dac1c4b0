"""Tests of cadence.modules.models: MLP, ConvNet and the DDPG networks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from cadence.modules import MLP, ConvNet, DdpgMlpActor, DdpgMlpQNet


def _linears(net: nn.Module) -> list[nn.Linear]:
    return [m for m in net.modules() if isinstance(m, nn.Linear)]


def test_mlp_lazy_input_materialises_on_first_call() -> None:
    net = MLP(out_features=2, num_cells=[16, 8])
    assert isinstance(net[0], nn.LazyLinear)
    assert net(torch.zeros(5, 7)).shape == (5, 2)
    assert net[0].weight.shape == (16, 7)


def test_mlp_int_num_cells_uses_depth() -> None:
    net = MLP(in_features=4, out_features=3, depth=2, num_cells=10)
    assert [(l.in_features, l.out_features) for l in _linears(net)] == [(4, 10), (10, 10), (10, 3)]


def test_mlp_default_depth_and_width() -> None:
    net = MLP(in_features=4, out_features=3)
    assert [l.out_features for l in _linears(net)] == [32, 32, 32, 3]


def test_mlp_depth_zero_is_single_linear() -> None:
    net = MLP(in_features=4, out_features=3, depth=0)
    assert len(net) == 1 and isinstance(net[0], nn.Linear)


def test_mlp_depth_and_num_cells_must_agree() -> None:
    with pytest.raises(ValueError, match="depth=3 but num_cells has 2"):
        MLP(in_features=4, out_features=3, depth=3, num_cells=[4, 4])


def test_mlp_requires_out_features() -> None:
    with pytest.raises(ValueError, match="out_features"):
        MLP(in_features=4)


def test_mlp_activation_last_layer_and_norm_and_dropout() -> None:
    net = MLP(
        in_features=3, out_features=2, num_cells=[4], activation_class=nn.ReLU, norm_class=nn.LayerNorm,
        dropout=0.5, activate_last_layer=True,
    )
    kinds = [type(m).__name__ for m in net]
    assert kinds == ["Linear", "LayerNorm", "ReLU", "Dropout", "Linear", "LayerNorm", "ReLU", "Dropout"]
    net.eval()
    assert bool((net(torch.randn(6, 3)) >= 0).all())


def test_mlp_per_layer_activation_kwargs() -> None:
    net = MLP(in_features=3, out_features=2, num_cells=[4, 4], activation_class=nn.LeakyReLU,
              activation_kwargs=[{"negative_slope": 0.1}, {"negative_slope": 0.2}])
    slopes = [m.negative_slope for m in net if isinstance(m, nn.LeakyReLU)]
    assert slopes == [0.1, 0.2]
    with pytest.raises(ValueError, match="list of 2 dicts"):
        MLP(in_features=3, out_features=2, num_cells=[4, 4], activation_kwargs=[{}])


def test_mlp_bias_options() -> None:
    no_bias = MLP(in_features=3, out_features=2, num_cells=[4], bias_last_layer=False)
    assert _linears(no_bias)[-1].bias is None
    single = MLP(in_features=3, out_features=5, num_cells=[4], single_bias_last_layer=True)
    assert _linears(single)[-1].bias is None
    shared = [p for n, p in single.named_parameters() if n.endswith("bias") and p.numel() == 1]
    assert len(shared) == 1
    x = torch.randn(2, 3)
    before = single(x)
    with torch.no_grad():
        shared[0].add_(1.0)
    torch.testing.assert_close(single(x), before + 1.0)


def test_mlp_concatenates_inputs_and_reshapes_output() -> None:
    net = MLP(out_features=(2, 3), num_cells=[8])
    out = net(torch.zeros(4, 3), torch.zeros(4, 1))
    assert out.shape == (4, 2, 3)
    assert net[0].weight.shape[1] == 4
    # leading dims broadcast
    assert net(torch.zeros(5, 4, 3), torch.zeros(4, 1)).shape == (5, 4, 2, 3)


def test_mlp_device_and_layer_class() -> None:
    net = MLP(in_features=3, out_features=2, num_cells=[4], device="cpu", layer_class=nn.Linear)
    assert all(p.device.type == "cpu" for p in net.parameters())
    with pytest.raises(ValueError, match="in_features=None"):
        MLP(out_features=2, layer_class=lambda i, o, **k: nn.Linear(i, o, **k))


def test_convnet_shapes_lazy_channels_and_batch_dims() -> None:
    net = ConvNet(num_cells=[8, 16], kernel_sizes=[3, 3], strides=[1, 2], paddings=[1, 1])
    assert isinstance(net[0], nn.LazyConv2d)
    assert net(torch.zeros(4, 3, 8, 8)).shape == (4, 16 * 4 * 4)
    assert net[0].weight.shape[1] == 3
    assert net(torch.zeros(2, 5, 3, 8, 8)).shape == (2, 5, 256)
    assert net(torch.zeros(3, 8, 8)).shape == (256,)


def test_convnet_aggregator_and_squeeze() -> None:
    net = ConvNet(in_features=1, num_cells=4, depth=2, aggregator_class=nn.AdaptiveAvgPool2d,
                  aggregator_kwargs={"output_size": 1}, squeeze_output=True)
    assert net(torch.zeros(6, 1, 10, 10)).shape == (6, 4)
    with pytest.raises(ValueError, match="strides has 3 entries"):
        ConvNet(num_cells=[4, 4], strides=[1, 1, 1])
    with pytest.raises(ValueError, match=r"\[\*batch, C, H, W\]"):
        net(torch.zeros(10, 10))


def test_ddpg_actor_architecture_and_init() -> None:
    actor = DdpgMlpActor(action_dim=3)
    out = actor(torch.randn(10, 5))
    assert out.shape == (10, 3)
    layers = _linears(actor)
    assert [l.out_features for l in layers] == [400, 300, 3]
    assert layers[-1].in_features == 300
    assert float(layers[-1].weight.detach().abs().max()) <= 3e-3 and float(layers[-1].bias.detach().abs().max()) <= 3e-3
    assert float(out.detach().abs().max()) < 0.5  # small initial actions


def test_ddpg_actor_kwargs_override() -> None:
    actor = DdpgMlpActor(action_dim=2, mlp_net_kwargs={"num_cells": [32, 16], "activation_class": nn.ReLU})
    actor(torch.randn(1, 4))
    assert [l.out_features for l in _linears(actor)] == [32, 16, 2]


def test_ddpg_qnet_action_enters_second_layer() -> None:
    qnet = DdpgMlpQNet()
    obs, action = torch.randn(7, 5), torch.randn(7, 2)
    value = qnet(obs, action)
    assert value.shape == (7, 1)
    assert qnet.mlp1[0].weight.shape == (400, 5)  # the first layer sees the observation only
    assert qnet.mlp2[0].weight.shape == (300, 402)  # the action joins the 400 features
    last = _linears(qnet.mlp2)[-1]
    assert last.out_features == 1 and float(last.weight.detach().abs().max()) <= 3e-3
    # the wiring: value == head(cat(elu(W1 obs + b1), action))
    hidden = torch.nn.functional.elu(qnet.mlp1[0](obs))
    expected = qnet.mlp2(torch.cat([hidden, action], -1))
    torch.testing.assert_close(value, expected)
    # the observation layer gets no gradient from the action alone; the action changes the value
    assert not torch.allclose(qnet(obs, action + 1.0), value)


def test_ddpg_qnet_lazy_depth_zero_head_initialised_small() -> None:
    qnet = DdpgMlpQNet(mlp_net_kwargs_net2={"depth": 0, "num_cells": []})
    qnet(torch.randn(3, 4), torch.randn(3, 1))
    head = qnet.mlp2[0]
    assert float(head.weight.detach().abs().max()) <= 3e-3
    weight = head.weight.detach().clone()
    qnet(torch.randn(3, 4), torch.randn(3, 1))
    torch.testing.assert_close(head.weight.detach(), weight)  # initialised once only
