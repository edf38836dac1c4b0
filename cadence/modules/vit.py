"""The Vision Transformer of VC-1 (ViT-B/16 and ViT-L/16), written in plain torch.

The parameter names are those of the timm ``VisionTransformer`` that VC-1 (and the MAE
pre-training it comes from) builds on: ``cls_token``, ``pos_embed``,
``patch_embed.proj``, ``blocks.{i}.norm1``, ``blocks.{i}.attn.qkv``,
``blocks.{i}.attn.proj``, ``blocks.{i}.norm2``, ``blocks.{i}.mlp.fc1``,
``blocks.{i}.mlp.fc2`` and the final ``norm`` (no classifier head), so that the encoder
weights of a VC-1 checkpoint (its ``"model"`` entry without the MAE decoder's
``decoder*`` and ``mask_token`` entries) load with ``load_state_dict``.

The forward pass is VC-1's: the patches get their position embeddings, the class token
(with its own) is put in front, the blocks run (pre-norm attention and MLP, GELU,
layer norms with ``eps=1e-6``), the last norm is applied and the class token is the
embedding.

Random initialisation follows MAE (Xavier-uniform linear layers and patch projection,
fixed 2-D sine-cosine position embeddings, a normal class token) and draws from an
explicit ``torch.Generator`` (a fresh one seeded with 0 when none is given).

Examples:
    >>> import torch
    >>> from cadence.modules.vit import VisionTransformer
    >>> vit = VisionTransformer(img_size=32, patch_size=16, embed_dim=16, depth=2, num_heads=4).eval()
    >>> vit(torch.zeros(3, 3, 32, 32)).shape
    torch.Size([3, 16])
    >>> sorted(vit.state_dict())[:4]
    ['blocks.0.attn.proj.bias', 'blocks.0.attn.proj.weight', 'blocks.0.attn.qkv.bias', 'blocks.0.attn.qkv.weight']
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from cadence.modules.resnet import DeviceLike, default_generator

__all__ = [
    "Attention",
    "Block",
    "Mlp",
    "PatchEmbed",
    "VisionTransformer",
    "sincos_position_embedding",
    "vit_base_patch16",
    "vit_large_patch16",
]

#: The layer norms' epsilon in the ViTs that VC-1 uses.
_NORM_EPS = 1e-6


class PatchEmbed(nn.Module):
    """Cuts images into non-overlapping ``patch_size`` squares and projects each to
    ``embed_dim`` (one strided convolution, ``proj``).

    Args:
        img_size: the height and width of the images (square).
        patch_size: the side of a patch; it must divide ``img_size``.
        in_chans: the image channels.
        embed_dim: the size of a patch's embedding.

    Examples:
        >>> import torch
        >>> with torch.device("meta"):
        ...     embed = PatchEmbed(32, 16, 3, 8)
        >>> embed.num_patches, embed.grid_size
        (4, (2, 2))
    """

    def __init__(self, img_size: int, patch_size: int, in_chans: int, embed_dim: int) -> None:
        super().__init__()
        if img_size % patch_size:
            raise ValueError(f"PatchEmbed: patch_size {patch_size} must divide img_size {img_size}.")
        self.img_size = img_size
        self.patch_size = patch_size
        self.grid_size = (img_size // patch_size, img_size // patch_size)
        self.num_patches = self.grid_size[0] * self.grid_size[1]
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, C, H, W]`` images to ``[B, num_patches, embed_dim]`` tokens (row-major)."""
        if x.ndim != 4 or tuple(x.shape[-2:]) != (self.img_size, self.img_size):
            raise ValueError(
                f"PatchEmbed expects images of shape [B, C, {self.img_size}, {self.img_size}], "
                f"got shape {tuple(x.shape)}."
            )
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    """Multi-head self-attention with one ``qkv`` projection (queries, keys and values
    stacked in that order, heads contiguous in each) and an output projection ``proj``.

    Args:
        dim: the token size.
        num_heads: the number of heads; it must divide ``dim``.
        qkv_bias: give ``qkv`` a bias.

    Examples:
        >>> import torch
        >>> with torch.device("meta"):
        ...     attention = Attention(16, 4)
        >>> attention.qkv.weight.shape, attention.head_dim
        (torch.Size([48, 16]), 4)
    """

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True) -> None:
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"Attention: num_heads {num_heads} must divide the token size {dim}.")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        qkv = self.qkv(x).reshape(batch, tokens, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        query, key, value = qkv.unbind(0)
        out = F.scaled_dot_product_attention(query, key, value)  # scale: head_dim ** -0.5
        return self.proj(out.transpose(1, 2).reshape(batch, tokens, dim))


class Mlp(nn.Module):
    """The transformer block's feed-forward part: ``fc1``, GELU, ``fc2``.

    Args:
        dim: the token size.
        hidden_dim: the width of the hidden layer.

    Examples:
        >>> import torch
        >>> with torch.device("meta"):
        ...     mlp = Mlp(16, 64)
        >>> mlp.fc1.weight.shape, mlp.fc2.weight.shape
        (torch.Size([64, 16]), torch.Size([16, 64]))
    """

    def __init__(self, dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """A pre-norm transformer block: ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``.

    Args:
        dim: the token size.
        num_heads: the attention heads.
        mlp_ratio: the MLP's hidden width over ``dim``.
        qkv_bias: give the attention's ``qkv`` a bias.

    Examples:
        >>> import torch
        >>> with torch.device("meta"):
        ...     block = Block(16, 4)
        >>> block(torch.zeros(2, 5, 16, device="meta")).shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0, qkv_bias: bool = True) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=_NORM_EPS)
        self.attn = Attention(dim, num_heads, qkv_bias)
        self.norm2 = nn.LayerNorm(dim, eps=_NORM_EPS)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def sincos_position_embedding(embed_dim: int, grid_size: int, cls_token: bool = True) -> torch.Tensor:
    """The fixed 2-D sine-cosine position embeddings of MAE: ``[grid_size**2 (+1), embed_dim]``.

    Half of each embedding encodes the patch's row, half its column, each with sines
    and cosines of ``embed_dim // 4`` frequencies (``1 / 10000 ** (k / (embed_dim // 4))``);
    the class token's row is zeros.

    Args:
        embed_dim: the token size (a multiple of 4).
        grid_size: patches per side.
        cls_token: put a row of zeros for the class token first.

    Examples:
        >>> sincos_position_embedding(8, 2).shape
        torch.Size([5, 8])
    """
    if embed_dim % 4:
        raise ValueError(f"sincos_position_embedding: embed_dim must be a multiple of 4, got {embed_dim}.")
    quarter = embed_dim // 4
    omega = 1.0 / 10000 ** (torch.arange(quarter, dtype=torch.float64) / quarter)
    rows, cols = torch.meshgrid(
        torch.arange(grid_size, dtype=torch.float64), torch.arange(grid_size, dtype=torch.float64), indexing="ij"
    )

    def encode(positions: torch.Tensor) -> torch.Tensor:
        angles = positions.reshape(-1, 1) * omega
        return torch.cat([angles.sin(), angles.cos()], dim=1)

    # MAE's grid is built width-first, so the first half encodes the column
    embedding = torch.cat([encode(cols), encode(rows)], dim=1)
    if cls_token:
        embedding = torch.cat([torch.zeros(1, embed_dim, dtype=torch.float64), embedding], dim=0)
    return embedding.to(torch.get_default_dtype())


class VisionTransformer(nn.Module):
    """A ViT encoder as VC-1 uses it: patch embedding, class token, position embedding,
    pre-norm blocks and a final norm; the normed class token is the output.

    Args:
        img_size: the height and width of the input images (square); VC-1 uses 224.
        patch_size: the side of a patch.
        in_chans: the image channels.
        embed_dim: the token size (the output size).
        depth: the number of blocks.
        num_heads: the attention heads of each block.
        mlp_ratio: the MLPs' hidden width over ``embed_dim``.
        qkv_bias: give the attention's ``qkv`` a bias.
        generator: the random source of the initial weights (seed 0 if not given).
        device: where the weights live (``"meta"``: layout only).

    Examples:
        >>> import torch
        >>> vit = VisionTransformer(img_size=32, patch_size=16, embed_dim=16, depth=1, num_heads=2)
        >>> vit.pos_embed.shape, vit.eval()(torch.zeros(1, 3, 32, 32)).shape
        (torch.Size([1, 5, 16]), torch.Size([1, 16]))
    """

    def __init__(
        self,
        img_size: int = 224,
        patch_size: int = 16,
        in_chans: int = 3,
        embed_dim: int = 768,
        depth: int = 12,
        num_heads: int = 12,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        *,
        generator: torch.Generator | None = None,
        device: DeviceLike = None,
    ) -> None:
        super().__init__()
        #: the size of the output embedding
        self.embed_dim = embed_dim
        with torch.device("meta"):  # the layout first; the weights are filled in below
            self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
            self.cls_token = nn.Parameter(torch.empty(1, 1, embed_dim))
            self.pos_embed = nn.Parameter(torch.empty(1, self.patch_embed.num_patches + 1, embed_dim))
            self.blocks = nn.Sequential(*[Block(embed_dim, num_heads, mlp_ratio, qkv_bias) for _ in range(depth)])
            self.norm = nn.LayerNorm(embed_dim, eps=_NORM_EPS)
        target = torch.device("cpu") if device is None else torch.device(device)
        if target.type != "meta":
            self.to_empty(device=target)
            self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Draws fresh weights as MAE does: Xavier-uniform linear layers (zero biases)
        and patch projection (as a matrix), unit layer norms, a class token drawn from
        ``N(0, 0.02)`` and the fixed sine-cosine position embeddings.

        Args:
            generator: the random source (a fresh one seeded with 0 if not given).

        Examples:
            >>> import torch
            >>> vit = VisionTransformer(img_size=32, embed_dim=16, depth=1, num_heads=2)
            >>> before = vit.cls_token.clone()
            >>> vit.reset_parameters(torch.Generator().manual_seed(1))
            >>> torch.equal(before, vit.cls_token)
            False
        """
        generator = default_generator(generator)
        with torch.no_grad():
            grid = self.patch_embed.grid_size[0]
            self.pos_embed.copy_(sincos_position_embedding(self.embed_dim, grid).unsqueeze(0))
            nn.init.normal_(self.cls_token, std=0.02, generator=generator)
            proj = self.patch_embed.proj
            nn.init.xavier_uniform_(proj.weight.view(proj.weight.shape[0], -1), generator=generator)
            nn.init.zeros_(proj.bias)
            for module in self.modules():
                if isinstance(module, nn.Linear):
                    nn.init.xavier_uniform_(module.weight, generator=generator)
                    if module.bias is not None:
                        nn.init.zeros_(module.bias)
                elif isinstance(module, nn.LayerNorm):
                    nn.init.ones_(module.weight)
                    nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Maps images ``[B, in_chans, img_size, img_size]`` to embeddings ``[B, embed_dim]``."""
        tokens = self.patch_embed(x) + self.pos_embed[:, 1:, :]
        cls_token = (self.cls_token + self.pos_embed[:, :1, :]).expand(tokens.shape[0], -1, -1)
        tokens = self.blocks(torch.cat([cls_token, tokens], dim=1))
        return self.norm(tokens)[:, 0]


def vit_base_patch16(
    img_size: int = 224, *, generator: torch.Generator | None = None, device: DeviceLike = None
) -> VisionTransformer:
    """ViT-B/16 (VC-1 base): 768-wide tokens, 12 blocks of 12 heads.

    Args:
        img_size: the input images' side (224 for VC-1's weights).
        generator: the random source of the initial weights (seed 0 if not given).
        device: where the weights live (``"meta"``: layout only).

    Examples:
        >>> sum(p.numel() for p in vit_base_patch16(device="meta").parameters())
        85798656
    """
    return VisionTransformer(
        img_size, 16, 3, 768, 12, 12, 4.0, True, generator=generator, device=device
    )


def vit_large_patch16(
    img_size: int = 224, *, generator: torch.Generator | None = None, device: DeviceLike = None
) -> VisionTransformer:
    """ViT-L/16 (VC-1 large): 1024-wide tokens, 24 blocks of 16 heads.

    Args:
        img_size: the input images' side (224 for VC-1's weights).
        generator: the random source of the initial weights (seed 0 if not given).
        device: where the weights live (``"meta"``: layout only).

    Examples:
        >>> sum(p.numel() for p in vit_large_patch16(device="meta").parameters())
        303301632
    """
    return VisionTransformer(
        img_size, 16, 3, 1024, 24, 16, 4.0, True, generator=generator, device=device
    )
