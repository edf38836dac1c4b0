"""R3MTransform: the whole pipeline on a pixel env (values, specs, stacking, copies,
serial and parallel batches, seeding), and its weights: the file lookup, the errors
that say where to put the file, R3M's checkpoint layout, state dicts that round-trip."""

from __future__ import annotations

import argparse
import importlib.util
import re

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict

from cadence.data import Bounded, Unbounded
from cadence.envs import GymEnv, ParallelEnv, SerialEnv, check_env_specs
from cadence.envs.transforms import Compose, TransformedEnv
from cadence.envs.transforms.pretrained import EncoderNet, default_model_dir
from cadence.envs.transforms.r3m import R3MTransform
from cadence.modules.resnet import resnet18, resnet34
from tests.fakes import RandomPixelsEnv

SIZE = 32  # the images fed to the ResNet: small, for speed


def _r3m(**kwargs) -> R3MTransform:
    kwargs.setdefault("size", SIZE)
    kwargs.setdefault("pretrained", False)
    return R3MTransform(kwargs.pop("model_name", "resnet18"), **kwargs)


def _env(**kwargs) -> TransformedEnv:
    return TransformedEnv(RandomPixelsEnv(size=16, max_steps=5), _r3m(**kwargs))


def _expected(frames: torch.Tensor, network: torch.nn.Module) -> torch.Tensor:
    """R3M's preprocessing written out: [0, 1] floats, ImageNet statistics, bilinear resize."""
    images = frames.permute(0, 3, 1, 2).float() / 255
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    images = F.interpolate((images - mean) / std, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    with torch.no_grad():
        return network.eval()(images)


def _frames(n: int = 2, size: int = 16) -> torch.Tensor:
    return torch.randint(0, 256, (n, size, size, 3), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)


def test_embeddings_are_the_resnet_of_the_preprocessed_frames() -> None:
    r3m = _r3m()
    assert [type(t).__name__ for t in r3m] == ["ToTensorImage", "ObservationNorm", "Resize", "EncoderNet"]
    frames = _frames()
    out = r3m(TensorDict(pixels=frames, batch_size=[2]))
    assert set(out.keys()) == {"r3m_vec"}
    torch.testing.assert_close(out["r3m_vec"], _expected(frames, resnet18(None)), rtol=1e-4, atol=1e-4)
    # one image or a [batch, time] block: leading dims are kept
    single = r3m(TensorDict(pixels=frames[0]))["r3m_vec"]
    torch.testing.assert_close(single, out["r3m_vec"][0], rtol=1e-4, atol=1e-4)
    assert r3m(TensorDict(pixels=_frames(6).reshape(2, 3, 16, 16, 3), batch_size=[2, 3]))["r3m_vec"].shape == (2, 3, 512)


def test_env_specs_rollout_and_model_sizes() -> None:
    env = _env()
    spec = env.observation_spec
    assert set(spec.keys()) == {"r3m_vec"}
    assert isinstance(spec["r3m_vec"], Unbounded) and spec["r3m_vec"].shape == (512,)
    check_env_specs(env, seed=0)
    data = env.rollout(4)
    assert data["next", "r3m_vec"].shape == (4, 512) and "pixels" not in data.keys(True)
    assert _r3m(model_name="resnet34").transforms[-1].out_dim == 512
    resnet50_env = TransformedEnv(RandomPixelsEnv(size=16), _r3m(model_name="resnet50"))
    assert resnet50_env.observation_spec["r3m_vec"].shape == (2048,)
    assert resnet50_env.reset()["r3m_vec"].shape == (2048,)
    assert R3MTransform("resnet18", pretrained=False).size == 244  # the reference's default


def test_stacked_images_separate_images_and_kept_frames() -> None:
    frames = _frames()
    data = TensorDict(left=frames, right=frames.flip(1), batch_size=[2])
    stacked = _r3m(in_keys=["right", "left"])(data.clone())
    assert set(stacked.keys()) == {"r3m_vec"} and stacked["r3m_vec"].shape == (2, 1024)
    network = resnet18(None)
    left, right = _expected(frames, network), _expected(frames.flip(1), network)
    # stacked in sorted key order, as the reference's CatTensors does
    torch.testing.assert_close(stacked["r3m_vec"], torch.cat([left, right], -1), rtol=1e-4, atol=1e-4)
    separate = _r3m(in_keys=["left", "right"], stack_images=False)(data.clone())
    assert set(separate.keys()) == {"r3m_vec_0", "r3m_vec_1"}
    torch.testing.assert_close(separate["r3m_vec_1"], right, rtol=1e-4, atol=1e-4)
    kept = _r3m(in_keys=["left"], out_keys=["embedding"], tensor_pixels_keys=["raw"])(data.clone())
    assert set(kept.keys()) == {"embedding", "raw", "right"} and torch.equal(kept["raw"], frames)
    env = _env(tensor_pixels_keys=["raw"])
    assert isinstance(env.observation_spec["raw"], Bounded) and env.observation_spec["raw"].dtype == torch.uint8
    check_env_specs(env)


def test_key_errors_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="model_name must be one of"):
        R3MTransform("resnet101", pretrained=False)
    with pytest.raises(ValueError, match="stack_images=True out_keys must name one entry"):
        _r3m(in_keys=["a", "b"], out_keys=["x", "y"])
    with pytest.raises(ValueError, match="one embedding per image key"):
        _r3m(in_keys=["a", "b"], out_keys=["x"], stack_images=False)
    with pytest.raises(ValueError, match="tensor_pixels_keys must name one copy per image key"):
        _r3m(in_keys=["a", "b"], tensor_pixels_keys=["raw"])
    with pytest.raises(KeyError, match="reads 'frames', which the env does not emit"):
        _env(in_keys=["frames"])


def test_serial_and_parallel_batches_agree_and_reproduce() -> None:
    make = lambda: _env()  # noqa: E731
    with SerialEnv(2, make) as serial:
        serial.set_seed(3)
        expected = serial.rollout(3)
    with ParallelEnv(2, make) as parallel:
        check_env_specs(parallel)
        parallel.set_seed(3)
        got = parallel.rollout(3)
        parallel.set_seed(3)
        again = parallel.rollout(3)
    assert got["next", "r3m_vec"].shape == (2, 3, 512)
    # frozen encoder in eval mode: each frame's embedding is the same in any batch
    torch.testing.assert_close(got["next", "r3m_vec"], expected["next", "r3m_vec"], rtol=1e-4, atol=1e-4)
    assert torch.equal(got["next", "r3m_vec"], again["next", "r3m_vec"])
    outside = TransformedEnv(ParallelEnv(2, lambda: RandomPixelsEnv(size=16, max_steps=5)), _r3m())
    try:
        check_env_specs(outside)
        outside.set_seed(3)
        torch.testing.assert_close(outside.rollout(3)["next", "r3m_vec"], expected["next", "r3m_vec"], rtol=1e-4,
                                   atol=1e-4)
    finally:
        outside.close()


@pytest.mark.skipif(importlib.util.find_spec("pygame") is None, reason="rendering needs pygame: pip install 'cadence[pixels]'")
def test_values_path_gives_what_the_generic_path_gives() -> None:
    # a gymnasium env steps on plain tensors, and the transform's members say they can
    make = lambda: TransformedEnv(GymEnv("Pendulum-v1", from_pixels=True, pixels_only=True), _r3m())  # noqa: E731
    fast, slow = make(), make()
    slow.use_values_path = False
    assert fast._values_step_applies() and not slow._values_step_applies()
    fast.set_seed(1)
    slow.set_seed(1)
    a, b = fast.rollout(3), slow.rollout(3)
    assert torch.equal(a["next", "r3m_vec"], b["next", "r3m_vec"])


def test_frozen_encoder_stays_in_eval_mode_and_fine_tuning_has_gradients() -> None:
    frozen = _r3m()
    frozen.train()
    net = frozen.transforms[-1]
    assert isinstance(net, EncoderNet) and not net.encoder.training
    frames = TensorDict(pixels=_frames(), batch_size=[2])
    assert not frozen(frames.clone())["r3m_vec"].requires_grad
    tuned = _r3m(requires_grad=True)
    tuned.train()
    assert tuned.transforms[-1].encoder.training
    tuned(frames.clone())["r3m_vec"].sum().backward()
    assert tuned.transforms[-1].encoder.conv1.weight.grad is not None


def test_clone_keeps_the_transform_and_shares_the_encoder() -> None:
    r3m = _r3m()
    copy = r3m.clone()
    assert isinstance(copy, R3MTransform) and copy.container is None and copy[0].container is copy
    assert copy[-1].encoder is r3m[-1].encoder
    assert isinstance(r3m[1:], Compose)
    env = TransformedEnv(RandomPixelsEnv(size=16), r3m)
    env.append_transform(Compose())  # a later member's parent view clones this one
    assert env.transform[1].parent is not None


# ---------------------------------------------------------------------- weights


def _r3m_checkpoint(network: torch.nn.Module) -> dict:
    """The layout of the published R3M files: the module's state dict under "r3m"."""
    state = {f"module.convnet.{key}": value for key, value in network.state_dict().items()}
    state["module.lang_enc.weight"] = torch.zeros(2)  # R3M's other parts, which the encoder ignores
    return {"r3m": state}


def test_missing_weights_file_says_where_to_put_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))  # an empty default cache
    expected = str(tmp_path / "r3m_18.pt")
    with pytest.raises(FileNotFoundError) as info:
        R3MTransform("resnet18", model_dir=tmp_path)
    message = str(info.value)
    assert expected in message and "https://pytorch.s3.amazonaws.com/models/rl/r3m/r3m_18.pt" in message
    assert "fetches nothing" in message and "pretrained=False" in message
    with pytest.raises(FileNotFoundError, match=re.escape(str(default_model_dir() / "r3m_50.pt"))):
        R3MTransform("resnet50")
    with pytest.raises(FileNotFoundError, match="weights_path='.*nothing.pt' is not a file"):
        R3MTransform("resnet18", weights_path=tmp_path / "nothing.pt")


def test_download_raises_saying_nothing_is_fetched(tmp_path) -> None:
    for download in (True, "IMAGENET1K_V1"):
        with pytest.raises(ValueError) as info:
            R3MTransform("resnet34", download=download, download_path=tmp_path)
        message = str(info.value)
        assert "fetches nothing at run time" in message and str(tmp_path / "r3m_34.pt") in message
        assert "r3m/r3m_34.pt" in message


def test_r3m_checkpoint_layout_loads_from_the_model_folder(tmp_path) -> None:
    source = resnet18(None, generator=torch.Generator().manual_seed(11))
    torch.save(_r3m_checkpoint(source), tmp_path / "r3m_18.pt")
    for kwargs in ({"model_dir": tmp_path}, {"download_path": str(tmp_path)},
                   {"weights_path": tmp_path / "r3m_18.pt"}):
        r3m = R3MTransform("resnet18", size=SIZE, **kwargs)
        assert r3m.weights_path == tmp_path / "r3m_18.pt"
        for (name, value), loaded in zip(source.state_dict().items(), r3m[-1].encoder.state_dict().values()):
            assert torch.equal(value, loaded), name
    frames = _frames()
    out = r3m(TensorDict(pixels=frames, batch_size=[2]))["r3m_vec"]
    torch.testing.assert_close(out, _expected(frames, source), rtol=1e-4, atol=1e-4)
    # a plain torchvision-style state dict, classifier included, loads too (the classifier is ignored)
    plain = resnet18(1000, generator=torch.Generator().manual_seed(11)).state_dict()
    torch.save(plain, tmp_path / "plain.pt")
    r3m = R3MTransform("resnet18", weights_path=tmp_path / "plain.pt")
    assert torch.equal(r3m[-1].encoder.layer4[1].conv2.weight, plain["layer4.1.conv2.weight"])
    with pytest.raises(ValueError, match="model_dir=.* and download_path=.* both name the weights folder"):
        R3MTransform("resnet18", model_dir=tmp_path, download_path=tmp_path / "other")


def test_weights_of_another_model_or_with_objects_are_refused(tmp_path) -> None:
    torch.save(_r3m_checkpoint(resnet18(None, device="cpu")), tmp_path / "r3m_34.pt")
    with pytest.raises(ValueError, match="do not fit the resnet34 encoder"):
        R3MTransform("resnet34", model_dir=tmp_path)
    torch.save({"r3m": {}, "args": argparse.Namespace(lr=1.0)}, tmp_path / "pickled.pt")
    refused = r"\(Unsupported global: GLOBAL argparse.Namespace\).*weights_only=True.*extract its weights once"
    with pytest.raises(ValueError, match=refused):
        R3MTransform("resnet18", weights_path=tmp_path / "pickled.pt")
    (tmp_path / "garbage.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="could not be read as a torch checkpoint"):
        R3MTransform("resnet18", weights_path=tmp_path / "garbage.pt")
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(ValueError, match=r"expected a state dict .* under \['r3m'\]; got list"):
        R3MTransform("resnet18", weights_path=tmp_path / "list.pt")


def test_transform_state_dict_round_trips(tmp_path) -> None:
    source = _r3m()
    source[-1].encoder.reset_parameters(torch.Generator().manual_seed(4))
    torch.save(source.state_dict(), tmp_path / "transform.pt")
    target = _r3m()
    target.load_state_dict(torch.load(tmp_path / "transform.pt", weights_only=True, map_location="cpu"))
    assert "transforms.3.convnet.conv1.weight" in target.state_dict()  # the reference's layout
    frames = TensorDict(pixels=_frames(), batch_size=[2])
    assert torch.equal(target(frames.clone())["r3m_vec"], source(frames.clone())["r3m_vec"])
    assert not torch.equal(_r3m()(frames.clone())["r3m_vec"], source(frames.clone())["r3m_vec"])


def test_resnet34_checkpoint_round_trip_through_the_env(tmp_path) -> None:
    source = resnet34(None, generator=torch.Generator().manual_seed(2))
    torch.save(_r3m_checkpoint(source), tmp_path / "r3m_34.pt")
    env = TransformedEnv(RandomPixelsEnv(size=16), R3MTransform("resnet34", size=SIZE, model_dir=tmp_path))
    env.set_seed(0)
    data = env.reset()
    pixels_env = RandomPixelsEnv(size=16)
    pixels_env.set_seed(0)
    frames = pixels_env.reset()["pixels"].unsqueeze(0)
    torch.testing.assert_close(data["r3m_vec"], _expected(frames, source)[0], rtol=1e-4, atol=1e-4)
