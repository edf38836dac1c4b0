"""Tests of ChessEnv's action space, the SAN vocabulary."""

from __future__ import annotations

import random

import pytest

from cadence.envs.custom.chess_moves import MAX_LEGAL_MOVES, SAN_MOVES, san_index


def test_sorted_and_unique() -> None:
    assert list(SAN_MOVES) == sorted(set(SAN_MOVES))
    assert len(SAN_MOVES) == 29274
    assert MAX_LEGAL_MOVES == 218


def test_index_round_trip() -> None:
    for index in (0, 1, 1000, len(SAN_MOVES) - 1):
        assert san_index(SAN_MOVES[index]) == index


def test_unknown_move_names_it() -> None:
    with pytest.raises(KeyError, match="'Kaxb2'"):
        san_index("Kaxb2")


@pytest.mark.parametrize(
    "move",
    ["e4", "a2", "h7", "exd5", "a8=Q", "bxa1=N#", "Nf3", "Nbd7", "R1a3", "Qa4d4+", "Kxe2", "O-O", "O-O-O#", "Bxh7+"],
)
def test_holds_the_kinds_of_moves(move: str) -> None:
    assert move in SAN_MOVES


@pytest.mark.parametrize("move", ["e1", "e8", "exd8", "Kge2", "Bah1", "e4=Q", "Nb1b3", "axc3"])
def test_leaves_out_what_no_legal_move_is_named(move: str) -> None:
    assert move not in SAN_MOVES


@pytest.mark.parametrize(
    "fen",
    [
        "7k/8/8/8/Q3Q3/8/8/Q3K3 w - - 0 1",  # three queens: file, rank and square disambiguations
        "4k3/1P6/8/8/8/8/8/R3K2R w KQ - 0 1",  # promotions and castling
        "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1",  # en passant
        "1r2k3/2P5/8/8/8/8/N3N3/R3K1N1 w Q - 0 1",  # capture-promotions, knight disambiguations
    ],
)
def test_covers_the_legal_moves_of_special_positions(fen: str) -> None:
    chess = pytest.importorskip("chess", reason="needs the chess extra: pip install 'cadence[chess]'")
    board = chess.Board(fen)
    assert all(board.san(move) in san_index.table for move in board.legal_moves)


def test_covers_the_legal_moves_of_random_games() -> None:
    chess = pytest.importorskip("chess", reason="needs the chess extra: pip install 'cadence[chess]'")
    rng = random.Random(0)
    for _ in range(3):
        board = chess.Board()
        while not board.is_game_over():
            moves = list(board.legal_moves)
            assert all(board.san(move) in san_index.table for move in moves)
            board.push(rng.choice(moves))
