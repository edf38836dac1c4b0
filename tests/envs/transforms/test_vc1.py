"""VC1Transform: the pipeline (resize, crop, normalisation, ViT) on a pixel env with the
small untrained model, specs, kept frames, ParallelEnv workers, model names, VC-1's
checkpoint layout (an MAE checkpoint with its decoder), and one forward pass of the
real ViT-B/16 architecture."""

from __future__ import annotations

import argparse

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict

from cadence.envs import ParallelEnv, check_env_specs
from cadence.envs.transforms import TransformedEnv
from cadence.envs.transforms.vc1 import VC1_MODELS, VC1Transform
from cadence.modules.vit import VisionTransformer
from tests.fakes import RandomPixelsEnv


def _frames(n: int = 2, size: int = 16) -> torch.Tensor:
    return torch.randint(0, 256, (n, size, size, 3), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)


def _expected(frames: torch.Tensor, network: torch.nn.Module) -> torch.Tensor:
    """VC-1's preprocessing written out: [0, 1] floats, bicubic 256 x 256, central 224, ImageNet statistics."""
    images = frames.permute(0, 3, 1, 2).float() / 255
    images = F.interpolate(images, size=(256, 256), mode="bicubic", align_corners=False)[..., 16:240, 16:240]
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    with torch.no_grad():
        return network.eval()((images - mean) / std)


def test_default_model_pipeline_values_and_kept_frames() -> None:
    vc1 = VC1Transform(["pixels"], None, "default")
    assert [type(t).__name__ for t in vc1] == ["ToTensorImage", "Resize", "CenterCrop", "ObservationNorm", "EncoderNet"]
    assert vc1[1].interpolation == "bicubic"
    frames = _frames()
    out = vc1(TensorDict(pixels=frames, batch_size=[2]))
    assert set(out.keys()) == {"VC1_vec"}
    torch.testing.assert_close(out["VC1_vec"], _expected(frames, VC1Transform.make_noload_model()), rtol=1e-4,
                               atol=1e-4)
    kept = VC1Transform(["pixels"], ["embedding"], "default", del_keys=False)(TensorDict(pixels=frames, batch_size=[2]))
    assert set(kept.keys()) == {"embedding", "pixels"} and torch.equal(kept["pixels"], frames)
    two = VC1Transform(["a", "b"], None, "default")(TensorDict(a=frames, b=frames, batch_size=[2]))
    assert set(two.keys()) == {"VC1_vec_0", "VC1_vec_1"}
    noload = VC1Transform.make_noload_model()
    assert isinstance(noload, VisionTransformer) and noload.embed_dim == 16 and len(noload.blocks) == 4


def test_env_specs_and_parallel_workers() -> None:
    env = TransformedEnv(RandomPixelsEnv(size=16, max_steps=5), VC1Transform(["pixels"], None, "default"))
    assert set(env.observation_spec.keys()) == {"VC1_vec"} and env.observation_spec["VC1_vec"].shape == (16,)
    check_env_specs(env, seed=0)
    kept = TransformedEnv(RandomPixelsEnv(size=16), VC1Transform(["pixels"], ["vec"], "default", del_keys=False))
    assert set(kept.observation_spec.keys()) == {"pixels", "vec"}
    check_env_specs(kept)
    make = lambda: TransformedEnv(RandomPixelsEnv(size=16, max_steps=5), VC1Transform(["pixels"], None, "default"))  # noqa: E731
    env.set_seed(1)
    expected = env.rollout(3)
    with ParallelEnv(2, make) as parallel:
        check_env_specs(parallel)
        parallel.set_seed(1)
        data = parallel.rollout(3)
    assert data["next", "VC1_vec"].shape == (2, 3, 16)
    torch.testing.assert_close(data["next", "VC1_vec"][0], expected["next", "VC1_vec"], rtol=1e-4, atol=1e-4)


def test_model_names_and_weights_files(tmp_path) -> None:
    assert VC1_MODELS["base"] is VC1_MODELS["vc1_base"] is VC1_MODELS["vc1_vitb"]
    assert VC1_MODELS["large"] is VC1_MODELS["vc1_large"] is VC1_MODELS["vc1_vitl"]
    assert (VC1_MODELS["base"].out_dim, VC1_MODELS["large"].out_dim, VC1_MODELS["default"].out_dim) == (768, 1024, 16)
    with pytest.raises(ValueError, match="model_name must be one of"):
        VC1Transform(["pixels"], None, "huge")
    with pytest.raises(FileNotFoundError) as info:
        VC1Transform(["pixels"], None, "vc1_base", model_dir=tmp_path)
    message = str(info.value)
    assert str(tmp_path / "vc1_vitb.pth") in message and "https://dl.fbaipublicfiles.com/eai-vc/vc1_vitb.pth" in message
    with pytest.raises(FileNotFoundError, match="'vc1_vitl.pth' at"):
        VC1Transform(["pixels"], None, "large", model_dir=tmp_path)
    with pytest.raises(ValueError, match="fetches nothing at run time.*vc1_vitl.pth"):
        VC1Transform(["pixels"], None, "large", download=True, model_dir=tmp_path)
    with pytest.raises(ValueError, match="no published weights"):
        VC1Transform(["pixels"], None, "default", download=True)


def _mae_checkpoint(encoder: torch.nn.Module) -> dict:
    """The layout of VC-1's files: an MAE checkpoint, the decoder and mask token beside the encoder."""
    state = dict(encoder.state_dict())
    state["mask_token"] = torch.zeros(1, 1, 8)
    state["decoder_embed.weight"] = torch.zeros(8, 16)
    state["decoder_blocks.0.attn.qkv.weight"] = torch.zeros(24, 8)
    state["decoder_pred.bias"] = torch.zeros(768)
    return {"model": state, "epoch": 182}


def test_vc1_checkpoint_layout_loads_and_state_dict_round_trips(tmp_path) -> None:
    source = VC1Transform.make_noload_model(torch.Generator().manual_seed(3))
    torch.save(_mae_checkpoint(source), tmp_path / "mae.pth")
    vc1 = VC1Transform(["pixels"], None, "default", weights_path=tmp_path / "mae.pth")
    frames = _frames()
    out = vc1(TensorDict(pixels=frames, batch_size=[2]))["VC1_vec"]
    torch.testing.assert_close(out, _expected(frames, source), rtol=1e-4, atol=1e-4)
    assert "transforms.4.model.blocks.3.mlp.fc2.weight" in vc1.state_dict()
    torch.save(vc1.state_dict(), tmp_path / "transform.pt")
    again = VC1Transform(["pixels"], None, "default")
    again.load_state_dict(torch.load(tmp_path / "transform.pt", weights_only=True, map_location="cpu"))
    assert torch.equal(again(TensorDict(pixels=frames, batch_size=[2]))["VC1_vec"], out)
    # what an MAE training script saves beside the weights cannot be read with weights_only
    torch.save({**_mae_checkpoint(source), "args": argparse.Namespace(lr=1.0)}, tmp_path / "with_args.pth")
    with pytest.raises(ValueError, match="argparse.Namespace.*extract its weights once"):
        VC1Transform(["pixels"], None, "default", weights_path=tmp_path / "with_args.pth")
    with pytest.raises(ValueError, match="do not fit the vc1_base encoder"):
        VC1Transform(["pixels"], None, "vc1_base", weights_path=tmp_path / "mae.pth")


def test_base_architecture_embeds_a_frame_and_loads_from_the_model_folder(tmp_path) -> None:
    vc1 = VC1Transform(["pixels"], None, "vc1_base", pretrained=False)
    network = vc1[-1].encoder
    assert network.pos_embed.shape == (1, 197, 768) and len(network.blocks) == 12
    frame = _frames(1)
    out = vc1(TensorDict(pixels=frame, batch_size=[1]))["VC1_vec"]
    assert out.shape == (1, 768) and torch.isfinite(out).all()
    # the published file's name is looked up in the model folder and read (an empty one here: refused)
    torch.save({"model": {}, "epoch": 1}, tmp_path / "vc1_vitb.pth")
    empty = r"vc1_vitb.pth'.*the state dict is empty \(top-level entries: \['epoch', 'model'\]\)"
    with pytest.raises(ValueError, match=empty):
        VC1Transform(["pixels"], None, "base", model_dir=tmp_path)
