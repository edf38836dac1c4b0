"""Chess for two players, on python-chess (the optional ``chess`` extra).

The action is a move in Standard Algebraic Notation, as an index into the vocabulary
:data:`~cadence.envs.custom.chess_moves.SAN_MOVES` (every SAN string that can name a
legal move: 29274 of them). Each step plays one move for the side to move; the reward
goes to the player who moved: ``1`` for a checkmate, ``0.5`` when the move ends the game
in a draw, ``0`` otherwise.

python-chess is imported when the first ``ChessEnv`` is built; without it the env
raises an ``ImportError`` that says how to install it.

Examples:
    >>> import pytest; chess = pytest.importorskip("chess")  # skips without python-chess
    >>> from cadence.envs.custom.chess import ChessEnv
    >>> env = ChessEnv(include_san=True)
    >>> env.set_seed(0) is not None
    True
    >>> game = env.rollout(1000)  # random legal moves, to the end of the game
    >>> bool(game["next", "done"][-1]), game["next", "reward"][-1].item() in (0.5, 1.0)
    (True, True)
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Binary, Bounded, Categorical, Composite, NonTensor, Unbounded
from cadence.envs.common import EnvBase
from cadence.envs.custom.chess_moves import MAX_LEGAL_MOVES, SAN_MOVES, san_index
from cadence.envs.custom.chess_render import BOARD_PIXELS, render_board

__all__ = ["ChessEnv"]

_INSTALL_HINT = "pip install 'cadence[chess]' (or pip install chess)"
#: The ``"san"`` of a position no move led to (a reset).
START_SAN: str = "<start>"
#: The length of ``"legal_moves"``: the most legal moves of any position, and one more,
#: so that the list always ends with the padding value ``len(SAN_MOVES)``.
LEGAL_MOVES_LENGTH: int = MAX_LEGAL_MOVES + 1

DeviceLike = torch.device | str | int


def _import_chess() -> Any:
    """python-chess (with its PGN reader), or an ``ImportError`` saying how to install it."""
    try:
        import chess
        import chess.pgn  # noqa: F401 - loads the PGN submodule
    except ImportError as err:
        raise ImportError(f"ChessEnv needs the python-chess library, which is not installed: {_INSTALL_HINT}.") from err
    return chess


def _left_alone(data: TensorDictBase) -> bool:
    """Whether a partial reset (a ``"_reset"`` entry) leaves this game out."""
    selected = data.get("_reset", None)
    return selected is not None and not bool(selected.any())


class ChessEnv(EnvBase):
    """Chess: each step plays one move, in SAN, for the side to move.

    Observations:

    - ``"turn"``: ``bool``, shape ``()``: the side to move, ``True`` for white.
    - ``"action_mask"`` (``mask_actions``): ``bool`` of shape ``(29274,)``, the legal moves.
    - ``"legal_moves"`` (``include_legal_moves``): ``int64`` of shape ``(219,)``: the legal
      moves' action indices, in python-chess's order, padded with ``29274``.
    - ``"fen"``, ``"pgn"``, ``"san"`` (``include_fen``, ``include_pgn``, ``include_san``):
      strings (``NonTensor``): the position's FEN, the game's PGN, and the SAN of the move
      that led here (``"<start>"`` after a reset to a position with no move history). In
      a rollout, ``data["next", "san"]`` names ``data["action"]``.
    - ``"pixels"`` (``pixels``/``from_pixels``): ``uint8`` of shape ``(3, 256, 256)``, the
      board drawn as :func:`~cadence.envs.custom.chess_render.render_board` draws it.

    The action is an ``int64`` index into :attr:`san_moves`, of shape ``()``. The reward
    (``float32``, shape ``(1,)``) goes to the player who moved: ``1`` for a checkmate,
    ``0.5`` for a move that ends the game otherwise (stalemate, insufficient material,
    the fifty-move rule, a fivefold repetition...), else ``0``. ``"done"`` and
    ``"terminated"`` are set together when the game ends.

    A move that is not legal in the position, or a move after the game ended, raises a
    ``ValueError`` naming the move and the position (its FEN) and listing the legal
    moves. ``rand_action`` draws among the legal moves (read from ``"action_mask"`` when
    the input has it, else from the position), with the env's generator :attr:`rng`, so a
    random rollout plays legal games to their end. A policy that samples the action spec
    needs the mask there: wrap the env as ``TransformedEnv(env, ActionMask())`` (the
    reference appends this transform by itself; here the env stays an env).

    **Stateful** (the default): the env keeps the game (a python-chess ``Board``);
    ``step`` reads only the action, for one game (batch size ``()``).
    **Stateless** (``stateful=False``, which needs ``include_fen`` or ``include_pgn``):
    the game travels in the data as its PGN (which keeps the move history, so repetitions
    count) or else its FEN, which are the env's ``state_spec``; ``step(td)`` depends only
    on ``td``, and one env plays any batch of games
    (``env.reset(TensorDict(batch_size=[n]))``). ``reset(td, set_state=True)`` starts
    from the position in ``td`` (its PGN, else its FEN) rather than the initial one.

    Next to the reference: the vocabulary holds the same 29274 moves, sorted (so the
    indices differ); an action must name its move exactly as SAN writes it (``"e4"`` does
    not play the move named ``"e4+"``); the picture is drawn here, at 256 x 256, not
    rasterised from SVG; the mask transform is the user's to add; there is no
    ``include_hash``.

    Args:
        stateful: keep the game in the env (see above).
        include_san: add ``"san"``.
        include_fen: add ``"fen"``.
        include_pgn: add ``"pgn"``.
        include_legal_moves: add ``"legal_moves"``.
        mask_actions: add ``"action_mask"``.
        pixels: add ``"pixels"``, the board drawn.
        from_pixels: the same as ``pixels`` (the name other envs use).
        device: where the tensors live.

    Raises:
        ImportError: python-chess is not installed.
        ValueError: ``stateful=False`` without ``include_fen`` or ``include_pgn``, or
            ``pixels`` and ``from_pixels`` set differently.

    Examples:
        >>> import pytest; chess = pytest.importorskip("chess")  # skips without python-chess
        >>> import torch
        >>> from cadence.envs.custom.chess import ChessEnv
        >>> env = ChessEnv(include_fen=True, include_san=True)
        >>> td = env.reset()
        >>> td["fen"], td["turn"].item()
        ('rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1', True)
        >>> td["action"] = torch.tensor(env.san_moves.index("e4"))
        >>> out = env.step(td)["next"]
        >>> out["san"], out["fen"], out["turn"].item()
        ('e4', 'rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1', False)
        >>> bad = out.copy().set("action", torch.tensor(env.san_moves.index("e4")))
        >>> env.step(bad)
        Traceback (most recent call last):
        ...
        ValueError: ChessEnv: illegal move 'e4' (action 28830) in the position rnbqkbnr/.../RNBQKBNR b KQkq - 0 1; ...

        Stateless, the game is in the data: one env plays a batch of games.

        >>> from tensordict import TensorDict
        >>> env = ChessEnv(stateful=False, include_fen=True)
        >>> games = env.rollout(3, tensordict=env.reset(TensorDict(batch_size=[2])), auto_reset=False)
        >>> games.batch_size, games["next", "fen"][1][2].split()[-1]
        (torch.Size([2, 3]), '2')
    """

    #: The action space: ``san_moves[action]`` is the move an action plays.
    san_moves: tuple[str, ...] = SAN_MOVES

    def __init__(
        self,
        *,
        stateful: bool = True,
        include_san: bool = False,
        include_fen: bool = False,
        include_pgn: bool = False,
        include_legal_moves: bool = False,
        mask_actions: bool = True,
        pixels: bool = False,
        from_pixels: bool | None = None,
        device: DeviceLike | None = None,
    ) -> None:
        self._chess = _import_chess()
        if from_pixels is not None and pixels and not from_pixels:
            raise ValueError("ChessEnv: pixels=True and from_pixels=False disagree; pass one of them.")
        if not stateful and not (include_fen or include_pgn):
            raise ValueError(
                "ChessEnv(stateful=False) keeps the game in the data, as its FEN or its PGN: pass "
                "include_fen=True or include_pgn=True (got neither)."
            )
        super().__init__(device=device)
        self.stateful = bool(stateful)
        # a stateful env plays its own game; a stateless one any batch of games in the data
        self.batch_locked = self.stateful
        self.include_san = bool(include_san)
        self.include_fen = bool(include_fen)
        self.include_pgn = bool(include_pgn)
        self.include_legal_moves = bool(include_legal_moves)
        self.mask_actions = bool(mask_actions)
        self.pixels = bool(pixels or from_pixels)
        self.board = self._chess.Board()
        self._make_specs()

    def _make_specs(self) -> None:
        device = self.device
        n_moves = len(SAN_MOVES)
        observations: dict[str, Any] = {"turn": Categorical(2, shape=(), dtype=torch.bool, device=device)}
        if self.mask_actions:
            observations["action_mask"] = Binary(n=n_moves, shape=(n_moves,), dtype=torch.bool, device=device)
        if self.include_legal_moves:
            observations["legal_moves"] = Bounded(
                0, n_moves, shape=(LEGAL_MOVES_LENGTH,), dtype=torch.int64, device=device
            )
        if self.include_san:
            observations["san"] = NonTensor(shape=(), example_data=START_SAN)
        if self.include_fen:
            observations["fen"] = NonTensor(shape=(), example_data=self._chess.STARTING_FEN)
        if self.include_pgn:
            observations["pgn"] = NonTensor(shape=(), example_data=self._pgn(self._chess.Board()))
        if self.pixels:
            observations["pixels"] = Unbounded(shape=(3, BOARD_PIXELS, BOARD_PIXELS), dtype=torch.uint8, device=device)
        self.observation_spec = Composite(observations, device=device)
        if not self.stateful:  # the game, as step() reads it back
            self.state_spec = Composite(
                {key: observations[key].clone() for key in ("fen", "pgn") if key in observations}, device=device
            )
        self.action_spec = Categorical(n_moves, shape=(), dtype=torch.int64, device=device)
        self.reward_spec = Unbounded(shape=(1,), dtype=torch.float32, device=device)

    # ------------------------------------------------------------------ positions
    def _pgn(self, board: Any) -> str:
        return str(self._chess.pgn.Game.from_board(board))

    def _board_from_pgn(self, pgn: str) -> Any:
        game = self._chess.pgn.read_game(io.StringIO(pgn))
        if game is None or game.errors:
            why = "no game" if game is None else "; ".join(map(str, game.errors))
            raise ValueError(f"ChessEnv: the 'pgn' entry does not hold a readable game ({why}): {pgn!r}")
        return game.end().board()

    def _board_from_fen(self, fen: str) -> Any:
        try:
            return self._chess.Board(fen)
        except ValueError as err:
            raise ValueError(f"ChessEnv: the 'fen' entry does not hold a position ({err}): {fen!r}") from err

    def _board_in(self, data: TensorDictBase, what: str) -> Any:
        """The game that one (unbatched) input carries: its PGN, else its FEN."""
        for key, read in (("pgn", self._board_from_pgn), ("fen", self._board_from_fen)):
            if getattr(self, f"include_{key}") and key in data.keys():
                return read(data.get_non_tensor(key))
        wanted = " or ".join(repr(key) for key in ("pgn", "fen") if getattr(self, f"include_{key}"))
        raise KeyError(
            f"ChessEnv is stateless: {what} needs the game in its input, as {wanted} (as reset() writes it); "
            f"the input holds {sorted(map(str, data.keys(True, True)))}."
        )

    @staticmethod
    def _is_over(board: Any) -> bool:
        return bool(board.is_game_over() or board.is_fifty_moves())

    def _legal_sans(self, board: Any) -> dict[str, Any]:
        """The legal moves, by their SAN (which names them in the action space)."""
        return {board.san(move): move for move in board.legal_moves}

    def _observe(self, board: Any, san: str) -> dict[str, Any]:
        """The observations of one position, reached by the move ``san``."""
        device = self.device
        out: dict[str, Any] = {"turn": torch.tensor(bool(board.turn), device=device)}
        if self.mask_actions or self.include_legal_moves:
            indices = torch.tensor(
                [san_index(san_of) for san_of in self._legal_sans(board)] if not self._is_over(board) else [],
                dtype=torch.int64,
                device=device,
            )
            if self.mask_actions:
                mask = torch.zeros(len(SAN_MOVES), dtype=torch.bool, device=device)
                out["action_mask"] = mask.index_fill_(0, indices, True)
            if self.include_legal_moves:
                padded = torch.full((LEGAL_MOVES_LENGTH,), len(SAN_MOVES), dtype=torch.int64, device=device)
                padded[: indices.numel()] = indices
                out["legal_moves"] = padded
        if self.include_san:
            out["san"] = san
        if self.include_fen:
            out["fen"] = board.fen()
        if self.include_pgn:
            out["pgn"] = self._pgn(board)
        if self.pixels:
            out["pixels"] = render_board(board.board_fen()).to(device)
        return out

    def _for_each_game(
        self,
        data: TensorDictBase | None,
        batch: torch.Size,
        play: Callable[..., TensorDictBase],
    ) -> TensorDictBase:
        """``play(one_game_input_or_None) -> TensorDict`` over the games of a batch, stacked."""
        if not batch:
            return play(data)
        flat = None if data is None else data.reshape(-1)
        games = [play(None if flat is None else flat[i]) for i in range(batch.numel())]
        return torch.stack(games, 0).reshape(batch)

    # ------------------------------------------------------------------ reset
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        set_state = bool(kwargs.pop("set_state", False))
        if kwargs:
            raise TypeError(f"ChessEnv.reset() got unexpected keyword arguments {sorted(kwargs)} (it takes set_state).")
        batch = tensordict.batch_size if tensordict is not None else torch.Size([])
        if self.stateful and batch:
            raise ValueError(
                f"ChessEnv(stateful=True) plays one game: reset() got a batch of {tuple(batch)}; use "
                f"stateful=False (with include_fen or include_pgn) for batches of games."
            )

        def start(data: TensorDictBase | None) -> TensorDictBase:
            board = self._chess.Board()
            kept = data is not None and not self.stateful and _left_alone(data)
            if kept:  # a partial reset leaves this game where it stands (its strings included)
                board = self._board_in(data, "reset()")
                if self.include_san and "san" in data.keys():
                    return self._position(board, data.get_non_tensor("san"), done=self._is_over(board))
            elif set_state:
                if data is None:
                    raise ValueError("ChessEnv.reset(set_state=True) needs an input holding the position to start at.")
                board = self._board_in(data, "reset(set_state=True)")
                if self._is_over(board):
                    raise ValueError(f"ChessEnv.reset(set_state=True): the game is over in the position {board.fen()}.")
            if self.stateful:
                self.board = board
            san = START_SAN
            if board.move_stack:
                last = board.pop()
                san = board.san(last)
                board.push(last)
            return self._position(board, san, done=kept and self._is_over(board))

        return self._for_each_game(tensordict, batch, start)

    def _position(self, board: Any, san: str, done: bool) -> TensorDictBase:
        """A reset's output for one game: its observations and done flags."""
        out = self._observe(board, san)
        flag = torch.tensor([done], device=self.device)
        out.update(done=flag, terminated=flag.clone())
        return TensorDict(out, batch_size=[], device=self.device)

    # ------------------------------------------------------------------ step
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._for_each_game(tensordict, tensordict.batch_size, self._play)

    def _play(self, data: TensorDictBase) -> TensorDictBase:
        board = self.board if self.stateful else self._board_in(data, "step()")
        action = int(data.get("action"))
        if not 0 <= action < len(SAN_MOVES):
            raise ValueError(f"ChessEnv: action {action} is not a move: the actions are 0 to {len(SAN_MOVES) - 1}.")
        san = SAN_MOVES[action]
        if self._is_over(board):
            outcome = board.outcome(claim_draw=True)
            why = "over" if outcome is None else f"over ({outcome.termination.name.lower()}, {outcome.result()})"
            raise ValueError(
                f"ChessEnv: illegal move {san!r} (action {action}) in the position {board.fen()}: the game is {why}; "
                f"reset the env."
            )
        legal = self._legal_sans(board)
        move = legal.get(san)
        if move is None:
            raise ValueError(
                f"ChessEnv: illegal move {san!r} (action {action}) in the position {board.fen()}; the legal moves "
                f"are {sorted(legal)}."
            )
        board.push(move)
        done = self._is_over(board)
        reward = 1.0 if board.is_checkmate() else (0.5 if done else 0.0)
        out = self._observe(board, san)
        flag = torch.tensor([done], device=self.device)
        out.update(reward=torch.tensor([reward], dtype=torch.float32, device=self.device), done=flag,
                   terminated=flag.clone())
        return TensorDict(out, batch_size=[], device=self.device)

    # ------------------------------------------------------------------ legal moves
    def _mask_of(self, data: TensorDictBase | None) -> torch.Tensor:
        """The legal moves of one game as a mask over the actions: the input's
        ``"action_mask"``, else computed from the game."""
        mask = None if data is None else data.get("action_mask", None)
        if mask is not None:
            return mask.to(torch.bool)
        board = self.board if self.stateful or data is None else self._board_in(data, "rand_action()")
        mask = torch.zeros(len(SAN_MOVES), dtype=torch.bool, device=self.device)
        if self._is_over(board):
            return mask
        indices = torch.tensor([san_index(san) for san in self._legal_sans(board)], dtype=torch.int64)
        return mask.index_fill_(0, indices.to(mask.device), True)

    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Writes a random legal move into ``tensordict``, drawn with :attr:`rng`.

        The legal moves are the input's ``"action_mask"`` if it has one, else those of the
        game (the env's own, stateful; the input's PGN or FEN, stateless).

        Args:
            tensordict: the input of the next step; a fresh one (stateful env) if ``None``.

        Returns:
            ``tensordict``, with ``"action"`` set.

        Raises:
            ValueError: a game with no legal move (it is over).

        Examples:
            >>> import pytest; chess = pytest.importorskip("chess")  # skips without python-chess
            >>> from cadence.envs.custom.chess import ChessEnv
            >>> env = ChessEnv()
            >>> td = env.rand_action(env.reset())
            >>> env.san_moves[td["action"].item()] in env.get_legal_moves()
            True
        """
        if tensordict is None:
            tensordict = TensorDict({}, batch_size=self.batch_size, device=self.device)
        batch = tensordict.batch_size
        flat = tensordict.reshape(-1) if batch else None
        masks = [self._mask_of(flat[i]) for i in range(batch.numel())] if flat is not None else [
            self._mask_of(tensordict)
        ]
        mask = torch.stack(masks, 0)
        empty = ~mask.any(-1)
        if bool(empty.any()):
            raise ValueError(
                f"ChessEnv.rand_action: no legal move in game {int(empty.nonzero()[0])} of the input: the game is "
                f"over; reset it first."
            )
        drawn = torch.multinomial(mask.to(torch.float32).to(self.rng.device), 1, generator=self.rng).reshape(batch)
        return tensordict.set("action", drawn.to(mask.device))

    def get_legal_moves(self, tensordict: TensorDictBase | None = None, uci: bool = False) -> list[str]:
        """The legal moves of the game, in SAN (``san_moves.index(move)`` is the action
        that plays one) or in UCI.

        Args:
            tensordict: for a stateless env, the (unbatched) input holding the game;
                ignored by a stateful env, which reads its own.
            uci: give the moves in UCI (``"e2e4"``) rather than SAN.

        Raises:
            ValueError: a stateless env given no ``tensordict``.

        Examples:
            >>> import pytest; chess = pytest.importorskip("chess")  # skips without python-chess
            >>> from cadence.envs.custom.chess import ChessEnv
            >>> env = ChessEnv()
            >>> _ = env.reset()
            >>> len(env.get_legal_moves()), env.get_legal_moves(uci=True)[:2]
            (20, ['g1h3', 'g1f3'])
        """
        if self.stateful:
            board = self.board
        elif tensordict is None:
            raise ValueError("ChessEnv(stateful=False).get_legal_moves needs the input holding the game.")
        else:
            board = self._board_in(tensordict, "get_legal_moves()")
        if uci:
            return [move.uci() for move in board.legal_moves]
        return list(self._legal_sans(board))
