"""Pictures of chess positions, drawn in torch: ``ChessEnv``'s ``"pixels"``.

A position (the piece placement of a FEN) becomes an RGB image of shape
``(3, 256, 256)``, ``uint8``, channels first: eight squares of 32 x 32 pixels a side,
rank 8 at the top and the a-file on the left (white's view). Squares are light
``(240, 217, 181)`` or dark ``(181, 136, 99)``, ``a1`` dark. Each piece is a small glyph
of its own shape (pawn, knight, bishop, rook, queen, king) built from discs, boxes and
polygons; white pieces are filled white with a black outline, black pieces filled black
with a white outline. Nothing is downloaded or rasterised by another library, and the
same position always gives the same image.

Examples:
    >>> from cadence.envs.custom.chess_render import render_board
    >>> image = render_board("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1")
    >>> image.shape, image.dtype
    (torch.Size([3, 256, 256]), torch.uint8)
    >>> image[:, 100, 100].tolist()  # the middle of d5 (empty, light)
    [240, 217, 181]
"""

from __future__ import annotations

import torch

__all__ = ["render_board", "SQUARE_PIXELS", "BOARD_PIXELS", "LIGHT_SQUARE", "DARK_SQUARE"]

#: The side of a square, in pixels.
SQUARE_PIXELS: int = 32
#: The side of the board image, in pixels.
BOARD_PIXELS: int = 8 * SQUARE_PIXELS
LIGHT_SQUARE: tuple[int, int, int] = (240, 217, 181)
DARK_SQUARE: tuple[int, int, int] = (181, 136, 99)
_WHITE_FILL, _WHITE_EDGE = (250, 250, 250), (16, 16, 16)
_BLACK_FILL, _BLACK_EDGE = (24, 24, 24), (236, 236, 236)

# pixel centres of a square, x to the right and y down, in a 32-pixel frame
_Y, _X = torch.meshgrid(torch.arange(32.0) + 0.5, torch.arange(32.0) + 0.5, indexing="ij")


def _disc(cx: float, cy: float, radius: float) -> torch.Tensor:
    return (_X - cx) ** 2 + (_Y - cy) ** 2 <= radius**2


def _ellipse(cx: float, cy: float, rx: float, ry: float) -> torch.Tensor:
    return ((_X - cx) / rx) ** 2 + ((_Y - cy) / ry) ** 2 <= 1.0


def _box(x0: float, y0: float, x1: float, y1: float) -> torch.Tensor:
    return (_X >= x0) & (_X <= x1) & (_Y >= y0) & (_Y <= y1)


def _polygon(*points: tuple[float, float]) -> torch.Tensor:
    """A convex polygon given clockwise on screen (y down): inside every edge's right side."""
    inside = torch.ones_like(_X, dtype=torch.bool)
    for (x0, y0), (x1, y1) in zip(points, points[1:] + points[:1]):
        inside &= (x1 - x0) * (_Y - y0) - (y1 - y0) * (_X - x0) >= 0
    return inside


def _base() -> torch.Tensor:
    """The foot all pieces stand on."""
    return _box(7, 25, 25, 28)


def _pawn() -> torch.Tensor:
    return _base() | _disc(16, 11, 4.5) | _polygon((12, 15), (20, 15), (23, 25), (9, 25))


def _rook() -> torch.Tensor:
    body = _box(10, 11, 22, 25) | _box(8, 6, 24, 11)
    notches = _box(11.5, 5, 13.5, 8.5) | _box(18.5, 5, 20.5, 8.5)
    return _base() | (body & ~notches)


def _knight() -> torch.Tensor:
    neck = _polygon((12, 8), (20, 11), (22, 25), (10, 25))
    muzzle = _polygon((12, 8), (25, 15), (22, 19), (12, 14))
    ear = _polygon((12, 3), (16, 8), (11, 9))
    eye = _disc(16.5, 11.5, 1.2)
    return _base() | ((neck | muzzle | ear) & ~eye)


def _bishop() -> torch.Tensor:
    mitre = _ellipse(16, 14, 5.5, 7.5)
    slit = ((_X - 16) + (_Y - 13)).abs() <= 0.9
    slit &= _X >= 16
    return _base() | _disc(16, 5, 2.2) | (mitre & ~slit) | _polygon((12, 20), (20, 20), (22, 25), (10, 25))


def _crowned_body() -> torch.Tensor:
    return _base() | _polygon((10, 12), (22, 12), (24, 25), (8, 25))


def _queen() -> torch.Tensor:
    points = _disc(7, 8, 2.2) | _disc(11.5, 5.5, 2.2) | _disc(16, 4.5, 2.2) | _disc(20.5, 5.5, 2.2) | _disc(25, 8, 2.2)
    spikes = _polygon((7, 8), (16, 13), (8, 13)) | _polygon((25, 8), (24, 13), (16, 13))
    spikes |= _polygon((11.5, 5.5), (16, 12), (10, 13)) | _polygon((20.5, 5.5), (22, 13), (16, 12))
    spikes |= _polygon((16, 4.5), (19, 13), (13, 13))
    return _crowned_body() | points | spikes


def _king() -> torch.Tensor:
    cross = _box(14.5, 1.5, 17.5, 11) | _box(11.5, 4, 20.5, 7)
    return _crowned_body() | cross | _box(9, 10, 23, 13)


def _outline(mask: torch.Tensor) -> torch.Tensor:
    """The pixels next to ``mask`` (8-neighbourhood), outside it."""
    grown = torch.nn.functional.max_pool2d(mask[None, None].float(), 3, stride=1, padding=1)[0, 0] > 0
    return grown & ~mask


def _glyphs() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Each piece letter of a FEN (``PNBRQK`` white, ``pnbrqk`` black) with its fill and
    edge masks."""
    shapes = {"p": _pawn(), "n": _knight(), "b": _bishop(), "r": _rook(), "q": _queen(), "k": _king()}
    glyphs = {}
    for letter, mask in shapes.items():
        glyphs[letter] = glyphs[letter.upper()] = (mask, _outline(mask))
    return glyphs


_GLYPHS = _glyphs()


def _empty_board() -> torch.Tensor:
    files = torch.arange(8).reshape(1, 8)
    ranks = 7 - torch.arange(8).reshape(8, 1)  # row 0 of the image is rank 8
    light = ((files + ranks) % 2 == 1).repeat_interleave(SQUARE_PIXELS, 0).repeat_interleave(SQUARE_PIXELS, 1)
    colours = torch.tensor([DARK_SQUARE, LIGHT_SQUARE], dtype=torch.uint8)
    return colours[light.long()].permute(2, 0, 1).contiguous()


_EMPTY_BOARD = _empty_board()


def _placement_rows(fen: str) -> list[str]:
    """The eight rows of a FEN's piece placement (rank 8 first), each spelled out to
    eight characters (``.`` for an empty square); a ``ValueError`` naming the FEN if it
    is not one."""
    placement = fen.split(" ", 1)[0]
    rows = placement.split("/")
    spelled = []
    for row in rows:
        squares = "".join("." * int(c) if c.isdigit() else c for c in row)
        if len(squares) != 8 or any(c not in ".pnbrqkPNBRQK" for c in squares):
            spelled = []
            break
        spelled.append(squares)
    if len(rows) != 8 or len(spelled) != 8:
        raise ValueError(f"render_board: {fen!r} is not a FEN (expected eight ranks of pieces and digits).")
    return spelled


def render_board(fen: str) -> torch.Tensor:
    """Draws a chess position.

    Args:
        fen: a FEN, or only its piece placement (``"8/8/8/4k3/8/8/8/4K3"``).

    Returns:
        An RGB ``uint8`` tensor of shape ``(3, 256, 256)`` (see the module): rank 8 at the
        top, the a-file on the left.

    Raises:
        ValueError: ``fen`` is not a FEN.

    Examples:
        >>> from cadence.envs.custom.chess_render import render_board
        >>> lone_kings = render_board("8/8/8/4k3/8/8/8/4K3")
        >>> bool((lone_kings == render_board("8/8/8/4k3/8/8/8/4K3 w - - 0 1")).all())
        True
        >>> bool((lone_kings[:, 224:256, 128:160] == render_board("8/8/8/8/8/8/8/8")[:, 224:256, 128:160]).all())
        False
    """
    image = _EMPTY_BOARD.clone()
    for row, squares in enumerate(_placement_rows(fen)):
        for file, letter in enumerate(squares):
            if letter == ".":
                continue
            fill_mask, edge_mask = _GLYPHS[letter]
            fill, edge = (_WHITE_FILL, _WHITE_EDGE) if letter.isupper() else (_BLACK_FILL, _BLACK_EDGE)
            y, x = row * SQUARE_PIXELS, file * SQUARE_PIXELS
            cell = image[:, y : y + SQUARE_PIXELS, x : x + SQUARE_PIXELS]
            for channel in range(3):
                cell[channel][fill_mask] = fill[channel]
                cell[channel][edge_mask] = edge[channel]
    return image
