"""The VC-1 ViT: timm/MAE parameter names, the ViT-B/L layouts, a forward pass checked
against an independent computation, seeded initialisation, sine-cosine position
embeddings and state dicts that round-trip."""

from __future__ import annotations

import math

import pytest
import torch

from cadence.modules.vit import VisionTransformer, sincos_position_embedding, vit_base_patch16, vit_large_patch16


def _small(**kwargs) -> VisionTransformer:
    return VisionTransformer(img_size=32, patch_size=16, embed_dim=16, depth=2, num_heads=4, **kwargs).eval()


def test_parameter_names_are_the_vc1_checkpoints() -> None:
    per_block = [
        "norm1.weight", "norm1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
        "norm2.weight", "norm2.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias",
    ]
    expected = {"cls_token", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias", "norm.weight", "norm.bias"}
    expected |= {f"blocks.{i}.{name}" for i in range(2) for name in per_block}
    assert set(_small().state_dict()) == expected


def test_base_and_large_layouts() -> None:
    base = vit_base_patch16(device="meta").state_dict()
    assert base["pos_embed"].shape == (1, 197, 768) and base["cls_token"].shape == (1, 1, 768)
    assert base["patch_embed.proj.weight"].shape == (768, 3, 16, 16)
    assert base["blocks.11.attn.qkv.weight"].shape == (2304, 768) and "blocks.12.norm1.weight" not in base
    assert base["blocks.0.mlp.fc1.weight"].shape == (3072, 768)
    large = vit_large_patch16(device="meta").state_dict()
    assert large["blocks.23.mlp.fc2.weight"].shape == (1024, 4096) and "blocks.24.norm1.weight" not in large
    assert vit_large_patch16(device="meta").blocks[0].attn.num_heads == 16


def _reference_forward(vit: VisionTransformer, images: torch.Tensor) -> torch.Tensor:
    """The ViT's forward pass written out step by step (explicit softmax attention)."""
    state = vit.state_dict()
    patch = vit.patch_embed.patch_size
    grid = images.shape[-1] // patch
    # patches in row-major order, each flattened channel-first like the convolution's kernel
    patches = images.unfold(2, patch, patch).unfold(3, patch, patch)  # B, C, gh, gw, p, p
    patches = patches.permute(0, 2, 3, 1, 4, 5).reshape(images.shape[0], grid * grid, -1)
    weight = state["patch_embed.proj.weight"].reshape(vit.embed_dim, -1)
    x = patches @ weight.T + state["patch_embed.proj.bias"]
    x = x + state["pos_embed"][:, 1:]
    cls = (state["cls_token"] + state["pos_embed"][:, :1]).expand(images.shape[0], -1, -1)
    x = torch.cat([cls, x], dim=1)
    heads = vit.blocks[0].attn.num_heads
    dim = vit.embed_dim
    head_dim = dim // heads

    def norm(x: torch.Tensor, name: str) -> torch.Tensor:
        mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-6) * state[f"{name}.weight"] + state[f"{name}.bias"]

    for i in range(len(vit.blocks)):
        prefix = f"blocks.{i}"
        h = norm(x, f"{prefix}.norm1")
        qkv = h @ state[f"{prefix}.attn.qkv.weight"].T + state[f"{prefix}.attn.qkv.bias"]
        q, k, v = qkv.split(dim, dim=-1)  # queries, keys, values in that order, heads contiguous
        outs = []
        for head in range(heads):
            part = slice(head * head_dim, (head + 1) * head_dim)
            scores = q[..., part] @ k[..., part].transpose(-1, -2) / math.sqrt(head_dim)
            outs.append(scores.softmax(-1) @ v[..., part])
        attended = torch.cat(outs, dim=-1) @ state[f"{prefix}.attn.proj.weight"].T + state[f"{prefix}.attn.proj.bias"]
        x = x + attended
        h = norm(x, f"{prefix}.norm2")
        h = torch.nn.functional.gelu(h @ state[f"{prefix}.mlp.fc1.weight"].T + state[f"{prefix}.mlp.fc1.bias"])
        x = x + h @ state[f"{prefix}.mlp.fc2.weight"].T + state[f"{prefix}.mlp.fc2.bias"]
    return norm(x, "norm")[:, 0]


def test_forward_is_the_vc1_computation() -> None:
    vit = _small(generator=torch.Generator().manual_seed(2))
    with torch.no_grad():  # give the biases and norms values, so that every term counts
        for name, value in vit.named_parameters():
            if name.endswith("bias") or "norm" in name:
                value.copy_(torch.randn(value.shape, generator=torch.Generator().manual_seed(len(name))))
    images = torch.rand(3, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = vit(images)
        torch.testing.assert_close(out, _reference_forward(vit, images), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(out[1:2], vit(images[1:2]), rtol=1e-5, atol=1e-5)
    assert out.shape == (3, 16)


def test_initialisation_is_seeded_mae_style_and_leaves_the_global_generator_alone() -> None:
    state = torch.get_rng_state()
    first, again = _small(), _small()
    assert torch.equal(torch.get_rng_state(), state)
    for (name, a), b in zip(first.state_dict().items(), again.state_dict().values()):
        assert torch.equal(a, b), name
    other = _small(generator=torch.Generator().manual_seed(1))
    assert not torch.equal(first.cls_token, other.cls_token)
    assert torch.equal(first.pos_embed, other.pos_embed)  # fixed, not drawn
    torch.testing.assert_close(first.pos_embed[0], sincos_position_embedding(16, 2))
    qkv = first.blocks[0].attn.qkv
    assert float(qkv.weight.detach().abs().max()) <= math.sqrt(6 / (16 + 48)) and torch.equal(qkv.bias, torch.zeros(48))


def test_sincos_position_embedding_layout() -> None:
    embedding = sincos_position_embedding(8, 3)
    assert embedding.shape == (10, 8) and torch.equal(embedding[0], torch.zeros(8))
    patches = embedding[1:].reshape(3, 3, 8)  # row, column, features
    # the first half encodes the column, the second the row; position 0 gives sin 0, cos 1
    assert torch.equal(patches[0, 1, :4], patches[2, 1, :4]) and torch.equal(patches[1, 0, 4:], patches[1, 2, 4:])
    assert patches[0, 0].tolist() == [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    assert sincos_position_embedding(8, 2, cls_token=False).shape == (4, 8)
    with pytest.raises(ValueError, match="multiple of 4"):
        sincos_position_embedding(6, 2)


def test_state_dict_round_trips_through_a_file(tmp_path) -> None:
    source = _small(generator=torch.Generator().manual_seed(7))
    path = tmp_path / "vit.pth"
    torch.save(source.state_dict(), path)
    target = _small()
    target.load_state_dict(torch.load(path, weights_only=True, map_location="cpu"))
    images = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(target(images), source(images))


def test_bad_sizes_are_named() -> None:
    with pytest.raises(ValueError, match="patch_size 16 must divide img_size 40"):
        VisionTransformer(img_size=40, device="meta")
    with pytest.raises(ValueError, match="num_heads 5 must divide"):
        VisionTransformer(img_size=32, embed_dim=16, num_heads=5, device="meta")
    with pytest.raises(ValueError, match=r"\[B, C, 32, 32\], got shape \(1, 3, 64, 64\)"):
        _small()(torch.zeros(1, 3, 64, 64))
