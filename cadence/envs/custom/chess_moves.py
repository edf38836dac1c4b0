"""The action space of ``ChessEnv``: every string that can name a legal chess move in SAN.

Standard Algebraic Notation names a move by its piece, its target square and only as
much of its origin as tells it apart from the same piece type's other moves to that
square; a capture adds ``x``, a promotion ``=Q`` (``R``, ``B``, ``N``), a check ``+`` and a
mate ``#``. The vocabulary here is built from the geometry of the pieces alone (no chess
library needed): for each piece and target square, the origins from which that piece
could move there on an empty board give the possible disambiguations. It is a superset
of the SAN of every legal move in every position (the tests check python-chess's SAN of
played games against it), sorted so that a move's index never depends on how the list
was built.

Examples:
    >>> from cadence.envs.custom.chess_moves import SAN_MOVES, san_index
    >>> len(SAN_MOVES)
    29274
    >>> SAN_MOVES[san_index("e4")]
    'e4'
    >>> all(move in san_index.table for move in ("Nf3", "exd5", "O-O-O#", "Qh4xe1+", "a8=Q"))
    True
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["SAN_MOVES", "san_index", "MAX_LEGAL_MOVES"]

FILES: str = "abcdefgh"
RANKS: str = "12345678"
PROMOTIONS: str = "QRBN"
SUFFIXES: tuple[str, ...] = ("", "+", "#")

#: The most legal moves any chess position has (a known bound, reached by a composed position).
MAX_LEGAL_MOVES: int = 218

_KNIGHT_STEPS = ((1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2))
_ROOK_DIRECTIONS = ((1, 0), (-1, 0), (0, 1), (0, -1))
_BISHOP_DIRECTIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1))
_KING_STEPS = _ROOK_DIRECTIONS + _BISHOP_DIRECTIONS


def _square(file: int, rank: int) -> str:
    return FILES[file] + RANKS[rank]


def _on_board(file: int, rank: int) -> bool:
    return 0 <= file < 8 and 0 <= rank < 8


def _origins(piece: str, file: int, rank: int) -> list[tuple[int, int, int]]:
    """The squares from which ``piece`` (N, B, R, Q, K) reaches ``(file, rank)`` on an
    empty board, as ``(file, rank, ray)``: origins on one ray of a sliding piece block
    each other (only the nearest moves), a leaper's origins each have a ray of their own."""
    if piece in "NK":
        steps = _KNIGHT_STEPS if piece == "N" else _KING_STEPS
        squares = [(file + df, rank + dr) for df, dr in steps]
        return [(f, r, ray) for ray, (f, r) in enumerate(squares) if _on_board(f, r)]
    directions = {"B": _BISHOP_DIRECTIONS, "R": _ROOK_DIRECTIONS, "Q": _KING_STEPS}[piece]
    found = []
    for ray, (df, dr) in enumerate(directions):
        f, r = file + df, rank + dr
        while _on_board(f, r):
            found.append((f, r, ray))
            f, r = f + df, r + dr
    return found


def _disambiguations(origins: list[tuple[int, int, int]]) -> set[str]:
    """The origin prefixes SAN may need when pieces of one type on some of ``origins``
    (at most one per ray) could move to one target. Python-chess, as SAN asks, writes the
    origin's file where no other candidate shares it; else its rank, where another
    candidate shares the file; else the whole square, where others share the file and
    the rank."""
    prefixes = {""}
    for file, rank, ray in origins:
        others = [(f, r, o) for f, r, o in origins if o != ray]
        if any(f != file for f, _, _ in others):
            prefixes.add(FILES[file])
        file_rays = {o for f, _, o in others if f == file}
        if file_rays:
            prefixes.add(RANKS[rank])
            rank_rays = {o for f, r, o in others if r == rank and f != file}
            if any(a != b for a in file_rays for b in rank_rays):  # two more pieces, on rays of their own
                prefixes.add(_square(file, rank))
    return prefixes


def _piece_moves() -> Iterator[str]:
    """Moves of the pieces, with every disambiguation their origins allow (a king is
    never disambiguated: there is one of each colour)."""
    for piece in "NBRQK":
        for file in range(8):
            for rank in range(8):
                target = _square(file, rank)
                origins = _origins(piece, file, rank)
                prefixes = {""} if piece == "K" else _disambiguations(origins)
                for prefix in prefixes:
                    for capture in ("", "x"):
                        yield f"{piece}{prefix}{capture}{target}"


def _pawn_moves() -> Iterator[str]:
    """Pushes and captures; a pawn reaches the last rank of either colour only promoting."""
    for file in range(8):
        sources = [FILES[f] for f in (file - 1, file + 1) if 0 <= f < 8]
        for rank in range(1, 7):  # ranks 2 to 7: white lands on 3-7, black on 2-6 (and en passant on 3 or 6)
            target = _square(file, rank)
            yield target
            for source in sources:
                yield f"{source}x{target}"
        for rank in (0, 7):
            target = _square(file, rank)
            for promotion in PROMOTIONS:
                yield f"{target}={promotion}"
                for source in sources:
                    yield f"{source}x{target}={promotion}"


def _all_moves() -> list[str]:
    bases = {*_piece_moves(), *_pawn_moves(), "O-O", "O-O-O"}
    return sorted(base + suffix for base in bases for suffix in SUFFIXES)


#: Every SAN string that can name a legal move, in sorted order; ``ChessEnv``'s action ``i`` is ``SAN_MOVES[i]``.
SAN_MOVES: tuple[str, ...] = tuple(_all_moves())


class _SanIndex:
    """Maps a SAN string to its index in :data:`SAN_MOVES` (``san_index("e4")``)."""

    def __init__(self, moves: tuple[str, ...]) -> None:
        self.table: dict[str, int] = {move: index for index, move in enumerate(moves)}

    def __call__(self, san: str) -> int:
        index = self.table.get(san)
        if index is None:
            raise KeyError(f"{san!r} is not a move in SAN (ChessEnv's action space names {len(self.table)} moves).")
        return index


#: The index of a SAN string in :data:`SAN_MOVES`; a ``KeyError`` naming it if it is none.
san_index: _SanIndex = _SanIndex(SAN_MOVES)
