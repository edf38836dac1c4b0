"""Tests of the chess board pictures (no python-chess needed)."""

from __future__ import annotations

import pytest
import torch

from cadence.envs.custom.chess_render import BOARD_PIXELS, DARK_SQUARE, LIGHT_SQUARE, SQUARE_PIXELS, render_board

START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
EMPTY = "8/8/8/8/8/8/8/8"


def _square(image: torch.Tensor, name: str) -> torch.Tensor:
    """The pixels of a square (``"e4"``) of an image."""
    file, rank = "abcdefgh".index(name[0]), int(name[1])
    y, x = (8 - rank) * SQUARE_PIXELS, file * SQUARE_PIXELS
    return image[:, y : y + SQUARE_PIXELS, x : x + SQUARE_PIXELS]


def test_size_and_dtype() -> None:
    image = render_board(START)
    assert image.shape == (3, BOARD_PIXELS, BOARD_PIXELS) == (3, 256, 256)
    assert image.dtype == torch.uint8


def test_square_colours() -> None:
    image = render_board(EMPTY)
    assert (_square(image, "a1") == torch.tensor(DARK_SQUARE, dtype=torch.uint8).reshape(3, 1, 1)).all()
    assert (_square(image, "h1") == torch.tensor(LIGHT_SQUARE, dtype=torch.uint8).reshape(3, 1, 1)).all()
    assert (_square(image, "a8") == torch.tensor(LIGHT_SQUARE, dtype=torch.uint8).reshape(3, 1, 1)).all()


def test_deterministic() -> None:
    assert torch.equal(render_board(START), render_board(START))
    assert torch.equal(render_board(START), render_board(START.split()[0]))


def test_each_piece_has_its_own_glyph() -> None:
    # the twelve pieces, each on a dark square of its own
    image = render_board("8/8/8/8/P1N1B1R1/1Q1K4/p1n1b1r1/1q1k4")
    squares = ["a4", "c4", "e4", "g4", "b3", "d3", "a2", "c2", "e2", "g2", "b1", "d1"]
    glyphs = [_square(image, name) for name in squares]
    assert all(not torch.equal(g, _square(render_board(EMPTY), name)) for g, name in zip(glyphs, squares))
    for i in range(len(glyphs)):
        for j in range(i + 1, len(glyphs)):
            assert not torch.equal(glyphs[i], glyphs[j]), (squares[i], squares[j])


def test_pieces_land_where_the_fen_says() -> None:
    after_e4 = render_board("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1")
    before = render_board(START)
    changed = (after_e4 != before).any(0)
    rows, cols = changed.nonzero().unbind(-1)
    squares = {("abcdefgh"[c // SQUARE_PIXELS], 8 - r // SQUARE_PIXELS) for r, c in zip(rows.tolist(), cols.tolist())}
    assert squares == {("e", 2), ("e", 4)}


@pytest.mark.parametrize("bad", ["", "8/8/8", "9/8/8/8/8/8/8/8", "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNX"])
def test_rejects_what_is_no_fen(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a FEN"):
        render_board(bad)
