"""ResNet-18/34/50: torchvision's layout and names, seeded initialisation, forward
shapes, evaluation-mode independence of samples, state dicts that round-trip."""

from __future__ import annotations

import pytest
import torch

from cadence.modules.resnet import BasicBlock, Bottleneck, ResNet, resnet18, resnet34, resnet50


def test_layouts_match_torchvision_names_shapes_and_sizes() -> None:
    # torchvision's numbers: parameter counts and state-dict sizes of the stock models
    for build, params, entries in ((resnet18, 11689512, 122), (resnet34, 21797672, 218), (resnet50, 25557032, 320)):
        net = build(device="meta")
        assert sum(p.numel() for p in net.parameters()) == params
        assert len(net.state_dict()) == entries
    r18 = resnet18(device="meta").state_dict()
    assert r18["conv1.weight"].shape == (64, 3, 7, 7) and "conv1.bias" not in r18
    assert r18["layer2.0.downsample.0.weight"].shape == (128, 64, 1, 1)
    assert r18["layer2.0.downsample.1.running_var"].shape == (128,)
    assert "layer1.0.downsample.0.weight" not in r18 and "layer1.0.conv3.weight" not in r18
    assert r18["layer4.1.bn2.num_batches_tracked"].dtype == torch.long
    assert r18["fc.weight"].shape == (1000, 512)
    r50 = resnet50(device="meta").state_dict()
    assert r50["layer1.0.downsample.0.weight"].shape == (256, 64, 1, 1)
    # v1.5: the stride sits on the 3x3 convolution of the first block of a stage
    net = resnet50(device="meta")
    assert net.layer2[0].conv2.stride == (2, 2) and net.layer2[0].conv1.stride == (1, 1)
    assert r50["layer4.2.conv3.weight"].shape == (2048, 512, 1, 1)
    assert r50["fc.weight"].shape == (1000, 2048)
    assert not any(key.startswith("fc.") for key in resnet50(None, device="meta").state_dict())
    assert resnet34(device="meta").layer3[5].conv2.weight.shape == (256, 256, 3, 3)


def test_initialisation_is_seeded_and_leaves_the_global_generator_alone() -> None:
    state = torch.get_rng_state()
    first, again = resnet18(num_classes=10), resnet18(num_classes=10)
    assert torch.equal(torch.get_rng_state(), state)
    for (name, a), b in zip(first.state_dict().items(), again.state_dict().values()):
        assert torch.equal(a, b), name
    other = resnet18(num_classes=10, generator=torch.Generator().manual_seed(3))
    assert not torch.equal(first.conv1.weight, other.conv1.weight)
    assert not torch.equal(first.fc.weight, other.fc.weight)
    assert torch.equal(first.bn1.weight, torch.ones(64)) and torch.equal(first.bn1.running_var, torch.ones(64))
    # He-normal (fan-out) convolutions: std sqrt(2 / (out_channels * k * k))
    std = float(first.layer3[0].conv1.weight.detach().std())
    assert std == pytest.approx((2 / (256 * 9)) ** 0.5, rel=0.05)
    bound = 1 / 512**0.5
    assert float(first.fc.weight.detach().abs().max()) <= bound and float(first.fc.bias.detach().abs().max()) <= bound


def test_forward_shapes_and_samples_independent_in_eval_mode() -> None:
    net = resnet18(num_classes=None).eval()
    images = torch.rand(3, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        batch = net(images)
        alone = net(images[1:2])
    assert batch.shape == (3, 512) and net.feature_dim == 512
    torch.testing.assert_close(batch[1:2], alone)
    assert resnet18(num_classes=7).eval()(images).shape == (3, 7)
    bottleneck = ResNet(Bottleneck, [1, 1, 1, 1], num_classes=None).eval()
    assert bottleneck(images[:1, :, :32, :32]).shape == (1, 2048) and bottleneck.feature_dim == 2048
    small = ResNet(BasicBlock, [1, 1, 1, 1], num_classes=None).eval()
    assert small(torch.zeros(1, 3, 32, 32)).shape == (1, 512)


def test_state_dict_round_trips_through_a_file(tmp_path) -> None:
    source = resnet18(num_classes=None, generator=torch.Generator().manual_seed(5)).eval()
    path = tmp_path / "resnet18.pt"
    torch.save(source.state_dict(), path)
    target = resnet18(num_classes=None).eval()
    target.load_state_dict(torch.load(path, weights_only=True, map_location="cpu"))
    images = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(target(images), source(images))


def test_meta_device_builds_the_layout_only() -> None:
    net = resnet50(device="meta")
    assert all(p.is_meta for p in net.parameters()) and all(b.is_meta for b in net.buffers())


def test_bad_arguments_and_inputs_are_named() -> None:
    with pytest.raises(ValueError, match="four positive block counts"):
        ResNet(BasicBlock, [2, 2, 2])
    with pytest.raises(ValueError, match="num_classes"):
        resnet18(num_classes=0)
    with pytest.raises(ValueError, match=r"\[B, 3, H, W\], got shape \(3, 64, 64\)"):
        resnet18(device="meta")(torch.zeros(3, 64, 64))
