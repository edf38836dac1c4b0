"""BurnInTransform: burnt-in states against a step-by-step computation, keys, errors."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from cadence.envs.transforms import Compose, TransformedEnv
from cadence.envs.transforms.burn_in import BurnInTransform
from tests.fakes import CountingEnv


class SequenceRNN(torch.nn.Module):
    """A small recurrent net in sequence mode: ``h_{t+1} = tanh(W x_t + U h_t)`` over a whole
    ``[*B, T]`` sequence, from the state stored at ``t = 0``; returns the features and the
    next states of every step."""

    def __init__(self, features: int = 3, hidden: int = 4) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(hidden, features, generator=generator) * 0.5)
        self.u = torch.nn.Parameter(torch.randn(hidden, hidden, generator=generator) * 0.5)

    def cell(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ self.w.T + h @ self.u.T)

    def forward(self, x: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = hidden[..., 0, :]
        states = []
        for t in range(x.shape[-2]):
            h = self.cell(x[..., t, :], h)
            states.append(h)
        states = torch.stack(states, -2)
        return states * 2.0, states


def _rnn_module(net: SequenceRNN, obs_key: str = "observation") -> TensorDictModule:
    return TensorDictModule(net, [obs_key, "hidden"], ["features", ("next", "hidden")])


def _sequences(batch: tuple[int, ...] = (2,), steps: int = 6, features: int = 3, hidden: int = 4) -> TensorDict:
    generator = torch.Generator().manual_seed(1)
    shape = (*batch, steps)
    return TensorDict(
        {
            "observation": torch.randn(*shape, features, generator=generator),
            "hidden": torch.randn(*shape, hidden, generator=generator),  # stale stored states
            "t": torch.arange(steps).expand(*shape),
            "next": {
                "hidden": torch.randn(*shape, hidden, generator=generator),
                "t": torch.arange(1, steps + 1).expand(*shape),
            },
        },
        list(shape),
    )


def _step_by_step(net: SequenceRNN, data: TensorDict, burn_in: int) -> torch.Tensor:
    """The recurrent state after the first ``burn_in`` steps, one cell call at a time."""
    with torch.no_grad():
        h = data["hidden"][..., 0, :]
        for t in range(burn_in):
            h = net.cell(data["observation"][..., t, :], h)
    return h


@pytest.mark.parametrize("batch", [(2,), (2, 3)])
def test_burnt_in_state_matches_a_step_by_step_computation(batch):
    net = SequenceRNN()
    data = _sequences(batch)
    before = data.clone()
    out = BurnInTransform([_rnn_module(net)], burn_in=2)(data)
    assert out.batch_size == (*batch, 4)
    expected = _step_by_step(net, data, 2)
    assert torch.allclose(out["hidden"][..., 0, :], expected, atol=1e-6)
    # the other steps keep their stored states; every other entry is the last 4 steps
    assert torch.equal(out["hidden"][..., 1:, :], data["hidden"][..., 3:, :])
    for key in ["observation", "t", ("next", "t"), ("next", "hidden")]:
        assert torch.equal(out[key], data[..., 2:][key])
    assert sorted(map(str, out.keys(True, True))) == sorted(map(str, data.keys(True, True)))
    assert (data == before).all()  # the input is left as it was
    assert not out["hidden"].requires_grad  # burnt in without gradients


def test_burnt_in_state_continues_the_full_sequence():
    net = SequenceRNN()
    data = _sequences(steps=8)
    out = BurnInTransform(_rnn_module(net), burn_in=5)(data)
    with torch.no_grad():
        _, states = net(data["observation"], data["hidden"])
    assert torch.allclose(out["hidden"][..., 0, :], states[..., 4, :], atol=1e-6)
    # running the module on the returned sequence continues where the burn-in stopped
    with torch.no_grad():
        _, rest = net(out["observation"], out["hidden"])
    assert torch.allclose(rest, states[..., 5:, :], atol=1e-6)


def test_modules_run_in_order_and_default_out_keys():
    net = SequenceRNN(features=2)
    encoder = TensorDictModule(lambda x: x[..., :2] + 1.0, ["observation"], ["embedding"])
    burn = BurnInTransform([encoder, _rnn_module(net, obs_key="embedding")], burn_in=3)
    assert burn.out_keys == ["hidden"] and burn.burn_in == 3
    data = _sequences()
    out = burn(data)
    with torch.no_grad():
        h = data["hidden"][..., 0, :]
        for t in range(3):
            h = net.cell(data["observation"][..., t, :2] + 1.0, h)
    assert torch.allclose(out["hidden"][..., 0, :], h, atol=1e-6)
    assert "embedding" not in out.keys() and "features" not in out.keys()  # only the out keys change
    assert list(burn.parameters()) == []  # the modules stay the user's
    assert burn.modules_to_burn_in[0] is encoder


def test_explicit_and_nested_out_keys():
    class Count(torch.nn.Module):
        def forward(self, x):
            steps = torch.arange(1, x.shape[-2] + 1, dtype=x.dtype).unsqueeze(-1)
            return x.cumsum(-2), steps.expand_as(x)

    module = TensorDictModule(Count(), ["x"], [("next", "agent", "memory"), ("next", "clock")])
    data = TensorDict({"x": torch.ones(3, 5, 1), "clock": torch.full((3, 5, 1), -1.0)}, [3, 5])
    default = BurnInTransform([module], burn_in=2)
    assert default.out_keys == [("agent", "memory"), "clock"]
    out = default(data)
    # ("agent", "memory") is not in the data: it is made, the burnt-in state first, zeros after
    assert out["agent", "memory"][..., 0].tolist() == [[2.0, 0.0, 0.0]] * 3
    assert out["clock"][..., 0].tolist() == [[2.0, -1.0, -1.0]] * 3
    only_clock = BurnInTransform([module], burn_in=4, out_keys=["clock"])(data)
    assert only_clock["clock"][..., 0].tolist() == [[4.0]] * 3 and "agent" not in only_clock.keys()


def test_errors_name_the_problem():
    net = SequenceRNN()
    burn = BurnInTransform([_rnn_module(net)], burn_in=3)
    with pytest.raises(RuntimeError, match="longer than burn_in"):
        burn(_sequences(steps=3))
    with pytest.raises(RuntimeError, match="no batch dim"):
        burn(TensorDict({"observation": torch.zeros(3)}, []))
    with pytest.raises(KeyError, match="'hidden'"):
        burn(_sequences().exclude("hidden"))
    with pytest.raises(ValueError, match="positive integer"):
        BurnInTransform([_rnn_module(net)], burn_in=0)
    with pytest.raises(ValueError, match="pass out_keys"):
        BurnInTransform([TensorDictModule(lambda x: x, ["x"], ["y"])], burn_in=1)
    with pytest.raises(TypeError, match="TensorDictModule"):
        BurnInTransform([torch.nn.Linear(2, 2)], burn_in=1)
    with pytest.raises(KeyError, match="did not write"):
        BurnInTransform([_rnn_module(net)], burn_in=2, out_keys=["cell"])(_sequences())


def test_not_an_env_transform():
    net = SequenceRNN()
    with pytest.raises(RuntimeError, match="data transform"):
        TransformedEnv(CountingEnv(), BurnInTransform([_rnn_module(net)], burn_in=1))
    env = TransformedEnv(CountingEnv())
    with pytest.raises(RuntimeError, match="data transform"):
        env.append_transform(BurnInTransform([_rnn_module(net)], burn_in=1))
    assert len(env.transform) == 0
    # in a Compose of data transforms it is fine, and inv leaves data alone
    chain = Compose(BurnInTransform([_rnn_module(net)], burn_in=2))
    data = _sequences()
    assert chain(data).batch_size == (2, 4)
    assert chain.inv(data) is data and data.batch_size == (2, 6)
